"""Budget policies: which support vector leaves, and how the model forgets it.

One object per policy (:mod:`.policies`) owns what the policy tracks and gives the
compiled explicit walk its code and arrays as one record; the compiled eviction and
its removal and projection kernels are :mod:`.kernels`.

After every round a budgeted model holds at most ``B`` support vectors: when an
update makes it ``B + 1``, one support vector p leaves at once, before the next
round is predicted. While the budget binds the model is kept as nu and Pi (the
explicit dual form), except for "oldest" and "random" with a second-order rule and
the Cholesky solver: removing one is deleting a row of M, which
:class:`kernelcw.engines.dual.queue.QueueForm` ("oldest") and
:class:`kernelcw.engines.dual.lazy.LazyForm` ("random", whose draws do not depend on
the model) do in blocks with BLAS-3 (their docstrings say how).

Which one (``budget_policy``):

- ``"oldest"``: the one that entered first (the Forgetron's choice).
- ``"random"``: uniform among all but the newest (the randomized budget
  perceptron's): the c-th removal of a model draws ``U = splitmix64(seed, c)``
  and takes the ``floor(U (n - 1))``-th support vector in entry order. The
  generator is counter-based, so the result does not depend on how the stream is
  cut into ``partial_fit`` calls or blocks.
- ``"smallest"``: among all but the newest, the one whose removal changes the
  model least: the smallest ``KL(N(mu, Sigma) || N(mu', Sigma'))`` for the
  removal below,

      KL_p = ( (zeta_p f_p - g_p)^2 v_p / (1 - s_p) - s_p - ln(1 - s_p) ) / 2,
      s_p = zeta_p v_p,

  with ``f_p = mu . phi(x_p)`` and ``v_p = phi_p' Sigma phi_p`` the current mean
  and variance at x_p. (From ``Sigma'^-1 = Sigma^-1 - zeta_p phi_p phi_p'``,
  ``mu - mu' = (zeta_p f_p - g_p) Sigma' phi_p`` and the matrix determinant
  lemma.) The newest is spared: it is the step just taken.
- ``"project"``: the one whose projection changes the mean least, then projected
  (below). Projecting replaces ``phi(x_p)`` by its projection on the span of the
  others, which moves mu by ``nu_p`` times the residual, of norm
  ``sqrt(gamma_p)``, ``gamma_p = 1 / [K^-1]_pp`` (the novelty of x_p against the
  others): the score is ``|nu_p| sqrt(gamma_p)``.

Ties go to the oldest. How it forgets (both keep Sigma positive definite):

- remove (oldest, random, smallest): unlearn p, in natural parameters. Every
  update adds ``zeta phi phi'`` to the precision and ``g phi`` to
  ``h = Sigma^-1 mu``, with ``g = zeta f + alpha y (1 + zeta v)`` fixed when the
  support vector enters (``doc/dual-form.md`` section 2), so that with
  ``M = -a^2 Pi^-1``: ``M - a K = diag(1/zeta)`` and ``nu = a M^-1 (g / zeta)``.
  Removing p deletes its precision and its natural-mean term:
  ``Pi' = Pi_{-p,-p} - Pi_{-p,p} Pi_{p,-p} / Pi_pp`` (p's row and column of M
  deleted) and ``nu' = -(1/a) Pi' (g / zeta)_{-p}``. A principal submatrix of the
  positive definite M is one, so Sigma' stays positive definite; the model is
  exactly as if p's update had added nothing, the later updates (which saw p)
  kept. Dropping p's term of the mean alone (``nu' = nu_{-p}``) leaves the other
  coefficients biased by p's presence: on a test stream it made every remove
  policy much worse (e.g. 0.41 against 0.24 online mistake rate for "oldest").
  First-order rules (Sigma = a I) have ``h = mu / a``, and unlearning p is
  dropping its term, ``nu' = nu_{-p}``.
- project (Csato & Opper 2002, sparse online Gaussian processes): the
  KL-optimal Gaussian on the span of the remaining support vectors,
  ``mu' = P mu`` and ``Sigma' = a (I - P) + P Sigma P`` with P the projection
  onto that span. With ``e = K_{-p}^-1 k_{-p,p}`` and ``A = [I | e]`` (e in
  column p): ``nu' = A nu = nu_{-p} + nu_p e`` and ``Pi' = A Pi A'``. Sigma' is
  positive definite: ``a (I - P)`` on the complement of the span and
  ``P Sigma P`` on it.

K is the Gram matrix of the support vectors with its diagonal multiplied by
``1 + PROJECT_JITTER``, so that near-duplicate support vectors (gamma_p ~ 0, the
first to go under "project") keep it invertible and its condition number stays
below about 1/PROJECT_JITTER. A budgeted "project" model learns with that jittered
kernel throughout (``k(x, x') + PROJECT_JITTER k(x, x)`` for the same round of the
stream: a private feature per input; every k(x, x) it reads is jittered, by the
support store, :class:`kernelcw.engines.dual.store.SupportStore`): K is then a Gram
matrix of its feature space, P an orthogonal projection there, and Sigma' positive
definite as above. (Jittering the projection alone was not: with K's small
eigenvalues below the jitter, the map stretched Sigma out of positive definiteness.)
K's inverse is kept with O(n^2) updates per round and recomputed from the Gram
matrix every ``max(KINV_REFRESH, budget)`` removals (counted, so independent of how
the stream is cut; ``kinv_refresh_due``): RBF Gram matrices of a few hundred support
vectors reach condition numbers of 1e7, where the rank-one updates drift (before each
new vector's Schur complement was bounded below, ``schur_inverse``, thousands of them
left the inverse accurate to 2 digits).
"""

from __future__ import annotations

from .kernels import (
    KINV_REFRESH,
    NO_BUDGET,
    OLDEST,
    POLICIES,
    PROJECT,
    PROJECT_JITTER,
    RANDOM,
    SMALLEST,
    PolicyState,
    Support,
    evict,
    policy_append,
    splitmix64_uniform,
)
from .policies import BudgetPolicy, Oldest, Project, Random, Smallest, Unbounded, make_policy
from .scores import kl_score

__all__ = [
    "KINV_REFRESH",
    "NO_BUDGET",
    "OLDEST",
    "POLICIES",
    "PROJECT",
    "PROJECT_JITTER",
    "RANDOM",
    "SMALLEST",
    "BudgetPolicy",
    "Oldest",
    "PolicyState",
    "Project",
    "Random",
    "Smallest",
    "Support",
    "Unbounded",
    "evict",
    "kl_score",
    "make_policy",
    "policy_append",
    "splitmix64_uniform",
]
