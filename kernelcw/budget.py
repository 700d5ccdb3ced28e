"""Budget policies: which support vector leaves, and how the model forgets it.

After every round a budgeted model holds at most ``B`` support vectors: when an
update makes it ``B + 1``, one support vector p leaves at once, before the next
round is predicted. While the budget binds the model is kept as nu and Pi (the
explicit dual form), except for "oldest" with a second-order rule and the
Cholesky solver: removing the oldest is deleting a row of M, which
``kernelcw.dual._Queue`` does in blocks with BLAS-3 (its docstring says how).

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
below about 1/PROJECT_JITTER. Its inverse is kept with O(n^2) updates per round
and recomputed from the Gram matrix every ``KINV_REFRESH`` removals (counted, so
independent of how the stream is cut): RBF Gram matrices of a few hundred support
vectors reach condition numbers of 1e7, where thousands of rank-one updates left
the inverse accurate to 2 digits and the projections diverged.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

__all__ = ["KINV_REFRESH", "POLICIES", "PROJECT_JITTER", "kl_score", "splitmix64_uniform"]

POLICIES = ("oldest", "random", "smallest", "project")
OLDEST, RANDOM, SMALLEST, PROJECT = range(4)

#: Relative jitter on the Gram matrix used by "project".
PROJECT_JITTER = 1e-6
#: "project" recomputes its inverse Gram matrix every this many removals.
KINV_REFRESH = 256


@njit(cache=True)
def splitmix64_uniform(seed, counter):
    """A uniform in [0, 1) from (seed, counter): splitmix64 of seed + counter * golden,
    the top 53 bits. Counter-based, so the c-th draw is the same however the stream
    was cut. All arithmetic in uint64 (wrapping mod 2^64)."""
    z = np.uint64(seed) + np.uint64(counter) * np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z = z ^ (z >> np.uint64(31))
    return float(z >> np.uint64(11)) * (1.0 / 9007199254740992.0)


@njit(cache=True)
def kl_score(f_p, v_p, zeta_p, g_p):
    """KL divergence of removing p (module docstring). First-order rules
    (zeta = 0) reduce to the mean's move ``g_p^2 v_p / 2`` with ``v_p = a k_pp``
    and ``g_p = nu_p / a``."""
    s = zeta_p * v_p
    if s >= 1.0:  # Sigma' is positive definite, so only rounding gets here
        s = 1.0 - 1e-16
    d = zeta_p * f_p - g_p
    return 0.5 * (d * d * v_p / (1.0 - s) - s - math.log1p(-s))


@njit(cache=True)
def choose_victim(policy, n, nu, kap, kinv, entry, seed, counter, G, zsv, gsv, vsv, a):
    """Index (0..n-1) of the support vector that leaves; ``entry`` holds the rounds
    the support vectors entered (the newest is the largest)."""
    if policy == OLDEST:
        best = 0
        for i in range(1, n):
            if entry[i] < entry[best]:
                best = i
        return best
    if policy == RANDOM:
        # the j-th support vector in entry order, the newest (the last) left out;
        # slots are not in entry order once a removal has moved the last slot
        j = int(splitmix64_uniform(seed, counter) * (n - 1))
        if j >= n - 1:
            j = n - 2
        return np.argsort(entry[:n])[j]
    newest = 0
    for i in range(1, n):
        if entry[i] > entry[newest]:
            newest = i
    best = -1
    best_score = 0.0
    for i in range(n):
        if policy == SMALLEST and i == newest:
            continue
        if policy == SMALLEST:
            f_i = 0.0
            for j in range(n):
                f_i += G[i, j] * nu[j]
            score = kl_score(f_i, vsv[i], zsv[i], gsv[i])
        else:
            score = abs(nu[i]) / math.sqrt(kinv[i, i])
        if best < 0 or score < best_score or (score == best_score and entry[i] < entry[best]):
            best = i
            best_score = score
    return best


@njit(cache=True)
def remove(n, p, nu, Pi, zsv, gsv, a, second_order):
    """Unlearn p: Pi' = Pi_{-p,-p} - Pi_{-p,p} Pi_{p,-p} / Pi_pp and
    nu' = -(1/a) Pi' (g / zeta) (first order: nu' = nu_{-p}).

    In place on the leading n x n block; the last support vector moves into slot p
    (``zsv`` and ``gsv`` too; callers move their other per-vector arrays alike).
    """
    if second_order:
        schur_delete(n, p, Pi)
    nu[p] = nu[n - 1]
    last = n - 1
    zsv[p] = zsv[last]
    gsv[p] = gsv[last]
    if second_order:
        for i in range(last):
            acc = 0.0
            for j in range(last):
                acc += Pi[i, j] * gsv[j] / zsv[j]
            nu[i] = -acc / a


@njit(cache=True)
def project(n, p, nu, Pi, kinv, second_order):
    """Project p onto the span of the others: nu' = nu_{-p} + nu_p e,
    Pi' = A Pi A', e = K_{-p}^-1 k_{-p,p} = -kinv[-p, p] / kinv[p, p]."""
    kpp = kinv[p, p]
    nup = nu[p]
    for i in range(n):
        if i != p:
            nu[i] -= nup * kinv[i, p] / kpp
    if second_order:
        # Pi' = Pi + e Pi[p,:] + Pi[:,p] e' + Pi_pp e e' on the -p block
        pipp = Pi[p, p]
        for i in range(n):
            if i == p:
                continue
            ei = -kinv[i, p] / kpp
            for j in range(n):
                if j == p:
                    continue
                ej = -kinv[j, p] / kpp
                Pi[i, j] += ei * Pi[p, j] + Pi[i, p] * ej + pipp * ei * ej
    _swap_last(n, p, nu, Pi, second_order)


@njit(cache=True)
def schur_delete(n, p, A):
    """A_{-p} - A_{-p,p} A_{p,-p} / A_pp in place, then the last row and column move
    into slot p. For A = X^-1 this is (X_{-p})^-1: Pi for M without p, and the
    inverse Gram matrix without p."""
    app = A[p, p]
    for i in range(n):
        if i == p:
            continue
        ci = A[i, p] / app
        for j in range(n):
            if j != p:
                A[i, j] -= ci * A[p, j]
    swap_last_matrix(n, p, A)


@njit(cache=True)
def kinv_append(n, kinv, kvec, kappa, work):
    """Inverse Gram with a new last vector (kernel column kvec over the n others,
    k(x, x) = kappa, jitter already added): block inverse, O(n^2)."""
    for i in range(n):
        acc = 0.0
        for j in range(n):
            acc += kinv[i, j] * kvec[j]
        work[i] = acc
    s = kappa
    for i in range(n):
        s -= kvec[i] * work[i]
    if not s > 0.0:
        s = 1e-300  # K + jitter is positive definite: only rounding gets here
    for i in range(n):
        for j in range(n):
            kinv[i, j] += work[i] * work[j] / s
        kinv[i, n] = -work[i] / s
        kinv[n, i] = -work[i] / s
    kinv[n, n] = 1.0 / s


@njit(cache=True)
def _swap_last(n, p, nu, Pi, second_order):
    last = n - 1
    nu[p] = nu[last]
    if second_order:
        swap_last_matrix(n, p, Pi)


@njit(cache=True)
def swap_last_matrix(n, p, A):
    last = n - 1
    if p != last:
        for j in range(n):
            A[p, j] = A[last, j]
        for i in range(n):
            A[i, p] = A[i, last]
        A[p, p] = A[last, last]


@njit(cache=True)
def kinv_refresh(n, G, kinv):
    """kinv = (G with the jittered diagonal)^-1, from scratch (O(n^3))."""
    Gj = G[:n, :n].copy()
    for i in range(n):
        Gj[i, i] *= 1.0 + PROJECT_JITTER
    kinv[:n, :n] = np.linalg.inv(Gj)


@njit(cache=True)
def kl_append(n, G, vsv, kv, kap_new, c, beta, v_raw, a, second, work):
    """Keep the variances at the support vectors through an update that appends a
    support vector as slot n (the caller keeps G).

    ``c = Pi k`` before the update and ``v_raw = a kappa + k' c`` (unfloored). For
    an existing p, ``k_p' Pi_new k_p = k_p' Pi k_p - beta ((K c)_p + a K_np)^2``.
    """
    if second:
        for i in range(n):
            acc = 0.0
            for j in range(n):
                acc += G[i, j] * c[j]
            work[i] = acc
        for i in range(n):
            w = work[i] + a * kv[i]
            vsv[i] -= beta * w * w
    vsv[n] = v_raw - beta * v_raw * v_raw if second else a * kap_new


@njit(cache=True)
def kl_remove(n, p, G, zsv, vsv, Pi, a, second, work):
    """Keep the same through the removal of p (before ``remove`` changes Pi):
    Sigma' = Sigma + zeta_p Sigma phi_p phi_p' Sigma / (1 - zeta_p v_p), so
    v_r += zeta_p (x_r' Sigma phi_p)^2 / (1 - zeta_p v_p), with
    x_r' Sigma phi_p = a K_rp + (K Pi K)_rp; then slot p takes the last one (the
    caller moves G)."""
    zp = zsv[p]
    if second and zp > 0.0:
        den = 1.0 - zp * vsv[p]
        for i in range(n):  # h = Pi K[:, p]
            acc = 0.0
            for j in range(n):
                acc += Pi[i, j] * G[j, p]
            work[i] = acc
        for r in range(n):
            acc = a * G[r, p]
            for j in range(n):
                acc += G[r, j] * work[j]
            vsv[r] += zp * acc * acc / den
    vsv[p] = vsv[n - 1]
