"""Slow, obviously-correct NumPy reference for BUDGETED dual learners.

Built on :mod:`reference_dual` (explicit nu and Pi over the support list S, one round at a
time; its kernels and its rule steps are reused unchanged) and written independently of
``kernelcw/`` from ``doc/dual-form.md`` section 4 and the budget semantics below.

Each round is exactly the unbudgeted dual round. Then, if the support list has more than
``budget`` vectors, ONE leaves at once (before the next round) by ``policy``:

- ``"oldest"``: the one that entered first.
- ``"random"``: uniform among all but the newest. With n = budget + 1 (the size after the
  update) and c the number of removals this binary model made before,
  U = :func:`splitmix64_uniform` (seed, c), j = min(floor(U (n - 1)), n - 2) and the victim
  is the j-th of the support list in entry order (the newest, last, is left out).
- ``"smallest"``: among all but the newest, the one whose removal changes the model least
  in KL divergence, KL(N(mu, Sigma) || N(mu', Sigma')) (:func:`kl_scores`). Ties: oldest.
- ``"project"``: the smallest |nu_p| sqrt(gamma_p), gamma_p = 1 / [Kj^-1]_pp, Kj the Gram
  matrix of S with its diagonal multiplied by (1 + ``PROJECT_JITTER``). Ties: oldest.
  A budgeted "project" learner learns with that jittered kernel throughout,
  ``kj(x_s, x_t) = k(x_s, x_t) + PROJECT_JITTER k(x_t, x_t) [s == t]`` (s, t stream
  positions: every input has a private feature of variance jitter times k(x, x)):
  every k(x, x) it sees, in a round and in ``variance``, is multiplied by
  (1 + ``PROJECT_JITTER``), and its Gram matrix ``gram`` is Kj. The projections are
  then exact in that kernel's feature space, where Kj is a Gram matrix, and Sigma
  stays positive definite (with the plain kernel they were not: a jitter larger
  than K's small eigenvalues made the projection stretch, not shrink).

How it leaves (:func:`remove`, :func:`project`):

- remove (oldest, random, smallest): nu' = nu_{-p};
  Pi' = Pi_{-p,-p} - Pi_{-p,p} Pi_{p,-p} / Pi_pp (p's row and column of M = -a^2 Pi^-1
  deleted). First-order rules: only nu.
- project: e = Kj_{-p}^-1 Kj[-p, p]; nu' = nu_{-p} + nu_p e; Pi' = A Pi A' with
  A = [I | e] (e in column p). First-order rules: only nu.

An alternative mean for "remove", ``remove_mean="unlearn"`` (nu' = -(1/a) Pi' (g/zeta)_{-p}:
p's natural-parameter term g_p phi(x_p) is taken out of h = Sigma^-1 mu too), with its KL
score, is available for comparison; it is not the semantics above.

Batch pruning (``batch`` = q >= 1, default 1): when an update takes the list to
``budget + 1``, q of them leave at once, so that the list holds ``budget + 1 - q`` after the
prune (and at most ``budget`` after every round). Which q (:meth:`RefBudgetLearner.choose_many`):

- ``"oldest"``: the q that entered first.
- ``"random"``: q successive draws without replacement, one counter step per draw: draw j
  (j = 0..q-1, counter c + j) takes, from the list in entry order with the newest and the
  j already drawn left out (m = n - 1 - j candidates), the min(floor(U m), m - 1)-th.
- ``"smallest"``: the q smallest KL scores (all but the newest), computed ONCE on the model
  before the prune (not recomputed between the q). Ties: oldest.
- ``"project"``: the q smallest project scores (over all n), computed once. Ties: oldest.

How the set V leaves (A = the rest; :func:`remove_many`, :func:`project_many`):

- remove: Pi' = Pi_AA - Pi_AV Pi_VV^-1 Pi_VA (V's rows and columns of M deleted:
  M' = M_AA); nu' = nu_A ("drop") or nu' = -(1/a) Pi' (g/zeta)_A ("unlearn"). This is
  exactly q successive single removals of V's members (a principal submatrix of a
  principal submatrix), so the set is all that batching changes for remove policies.
- project (Csato & Opper, several points at once): E = Kj_AA^-1 Kj_AV (|A| x |V|: each
  removed input written in the kept ones), T = [I_A ; E'] in the (A, V) ordering,
  nu' = T' nu = nu_A + E nu_V, Pi' = T' Pi T. This is the KL-optimal Gaussian on the span
  of A (mu' = P_A mu, Sigma' = a (I - P_A) + P_A Sigma P_A, P_A the orthogonal projection
  onto span Phi_A in the feature space of the jittered kernel, where Kj is a Gram matrix);
  since P_A P_{A+p} = P_A, it also equals projecting V's members one at a time onto the
  shrinking rest (same set V), to rounding.

``batch=1`` is the round-by-round reference above, exactly (same code path).

Everything with plain ``np.linalg`` (inv / solve) each round. The support list stays in
entry order (oldest first), as the estimators' attributes are.

The seed of "random" is what the estimators draw once per model:
``int(check_random_state(random_state).randint(0, 2**62))`` (:func:`seed_from`); in
one-vs-rest every class model counts its own removals but all share the seed.
"""

from __future__ import annotations

import math

import numpy as np
import reference_dual as rd
from sklearn.utils import check_random_state

__all__ = [
    "MASK64",
    "POLICIES",
    "PROJECT_JITTER",
    "Removal",
    "RefBudgetLearner",
    "RefBudgetModel",
    "kl_scores",
    "kl_scores_primal",
    "one_minus_s",
    "project",
    "project_many",
    "project_scores",
    "remove",
    "remove_many",
    "run_ref_budget",
    "seed_from",
    "splitmix64_uniform",
]

POLICIES = ("oldest", "random", "smallest", "project")
PROJECT_JITTER = 1e-6  # kernelcw.budget.PROJECT_JITTER (a test pins them equal)
MASK64 = (1 << 64) - 1


# ---------------------------------------------------------------------------------------
# The random policy's generator, in pure Python integers
# ---------------------------------------------------------------------------------------


def splitmix64_uniform(seed: int, counter: int) -> float:
    """A uniform in [0, 1): splitmix64 of seed + counter * 0x9E3779B97F4A7C15 (mod 2^64),
    the top 53 bits over 2^53."""
    z = (int(seed) + int(counter) * 0x9E3779B97F4A7C15) & MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    z ^= z >> 31
    return (z >> 11) / 2.0**53


def seed_from(random_state) -> int:
    """The seed an estimator draws when its model is created."""
    return int(check_random_state(random_state).randint(0, 2**62))


# ---------------------------------------------------------------------------------------
# Scores and removals on (nu, Pi, K): pure functions
# ---------------------------------------------------------------------------------------


def kl_scores(nu, Pi, K, a: float, first_order: bool, gz=None) -> np.ndarray:
    """KL(N(mu, Sigma) || N(mu', Sigma')) for removing each p (the "remove" way).

    With M = -a^2 Pi^-1, B = (M - a K)^-1, b = B[:, p], k_p = K[:, p], kappa_p = K[p, p]:
    s_p = b' (a K + K Pi K) b / B_pp, m_p = nu_p^2 (kappa_p / a + k_p' B k_p - (k_p' b)^2
    / B_pp), KL_p = (m_p - s_p - log(1 - s_p)) / 2, with 1 - s_p from :func:`one_minus_s`.
    First order: nu_p^2 kappa_p / (2 a).

    ``gz`` (g / zeta per support vector): the scores of the "unlearn" mean instead
    (:func:`remove`); the mean term is then w' K w / a + (K w)' B' (K w) with w = nu' - nu
    (nu' padded with 0 at p) and B' = B - b b' / B_pp (Sigma'^-1 = I/a + Phi B' Phi').
    """
    nu = np.asarray(nu, dtype=float)
    K = np.asarray(K, dtype=float)
    kap = np.diag(K)
    if first_order:
        return nu**2 * kap / (2.0 * a)
    M = -(a**2) * np.linalg.inv(Pi)
    B = np.linalg.inv(M - a * K)
    V = a * K + K @ Pi @ K  # Phi' Sigma Phi
    out = np.empty(nu.size)
    for p in range(nu.size):
        b = B[:, p]
        kp = K[:, p]
        s = float(b @ V @ b) / B[p, p]
        if gz is None:
            m = nu[p] ** 2 * (kap[p] / a + float(kp @ B @ kp) - float(kp @ b) ** 2 / B[p, p])
        else:
            keep = np.delete(np.arange(nu.size), p)
            w = -nu.copy()
            w[keep] += remove(nu, Pi, p, False, a=a, gz=gz)[0]
            Kw = K @ w
            m = float(w @ Kw) / a + float(Kw @ B @ Kw) - float(Kw @ b) ** 2 / B[p, p]
        out[p] = (m - s - math.log(one_minus_s(Pi, B, a, p))) / 2.0
    return out


def one_minus_s(Pi, B, a: float, p: int) -> float:
    """1 - s_p without cancellation: by the matrix determinant lemma,
    1 - s_p = det(Sigma'^-1) / det(Sigma^-1) = [M^-1]_pp / B_pp = -Pi_pp / (a^2 B_pp)
    (both positive). s_p -> 1 happens (CW-Stdev: a huge precision step zeta_p), where
    1 - s_p computed from s_p would round to 0 or below."""
    return float(-Pi[p, p] / (a * a * B[p, p]))


def kl_scores_primal(S, nu, Pi, a: float, first_order: bool, gz=None) -> np.ndarray:
    """The same scores by brute force for the LINEAR kernel: mu = S' nu,
    Sigma = a I + S' Pi S in R^d, each removal made with :func:`remove` and the Gaussian
    KL divergence evaluated directly (a self-check of :func:`kl_scores`)."""
    S = np.asarray(S, dtype=float)
    d = S.shape[1]
    mu = S.T @ nu
    Sigma = a * np.eye(d) + S.T @ Pi @ S
    out = np.empty(len(nu))
    for p in range(len(nu)):
        nu2, Pi2 = remove(nu, Pi, p, first_order, a=a, gz=gz)
        keep = np.delete(np.arange(len(nu)), p)
        S2 = S[keep]
        mu2 = S2.T @ nu2
        Sigma2 = a * np.eye(d) + S2.T @ Pi2 @ S2
        P2 = np.linalg.inv(Sigma2)
        dm = mu2 - mu
        _, ld2 = np.linalg.slogdet(Sigma2)
        _, ld1 = np.linalg.slogdet(Sigma)
        out[p] = 0.5 * (np.trace(P2 @ Sigma) - d + dm @ P2 @ dm + ld2 - ld1)
    return out


def project_scores(nu, K) -> np.ndarray:
    """|nu_p| sqrt(gamma_p), gamma_p = 1 / [Kj^-1]_pp (K: the jittered kernel's)."""
    Kinv = np.linalg.inv(K)
    return np.abs(np.asarray(nu, dtype=float)) * np.sqrt(1.0 / np.diag(Kinv))


def remove(
    nu, Pi, p: int, first_order: bool, a: float | None = None, gz=None
) -> tuple[np.ndarray, np.ndarray]:
    """nu' = nu_{-p}; Pi' = Pi_{-p,-p} - Pi_{-p,p} Pi_{p,-p} / Pi_pp (first order: 0).

    ``gz`` given (g / zeta per support vector, second order): the "unlearn" mean
    instead, nu' = -(1/a) Pi' gz_{-p}, i.e. h' = h - g_p phi(x_p) in natural parameters
    (nu = a M^-1 D^-1 g = -(1/a) Pi (g / zeta), doc/dual-form.md section 2). Not the
    semantics under test (``REMOVE_MEAN`` in the tests): kept to check the alternative.
    """
    keep = np.delete(np.arange(len(nu)), p)
    nu2 = np.asarray(nu, dtype=float)[keep]
    if first_order:
        return nu2, np.zeros((keep.size, keep.size))
    Pi = np.asarray(Pi, dtype=float)
    Pi2 = Pi[np.ix_(keep, keep)] - np.outer(Pi[keep, p], Pi[p, keep]) / Pi[p, p]
    if gz is not None:
        nu2 = -(Pi2 @ np.asarray(gz, dtype=float)[keep]) / a
    return nu2, Pi2


def project(nu, Pi, K, p: int, first_order: bool) -> tuple[np.ndarray, np.ndarray]:
    """e = Kj_{-p}^-1 Kj[-p, p]; nu' = nu_{-p} + nu_p e; Pi' = A Pi A', A = [I | e]
    (K = Kj: the jittered kernel's)."""
    n = len(nu)
    keep = np.delete(np.arange(n), p)
    Kj = np.asarray(K, dtype=float)
    e = np.linalg.solve(Kj[np.ix_(keep, keep)], Kj[keep, p])
    nu = np.asarray(nu, dtype=float)
    nu2 = nu[keep] + nu[p] * e
    if first_order:
        return nu2, np.zeros((keep.size, keep.size))
    A = np.zeros((n - 1, n))
    A[np.arange(n - 1), keep] = 1.0
    A[:, p] = e
    return nu2, A @ np.asarray(Pi, dtype=float) @ A.T


def remove_many(
    nu, Pi, V, first_order: bool, a: float | None = None, gz=None
) -> tuple[np.ndarray, np.ndarray]:
    """Remove the set V (indices) at once: Pi' = Pi_AA - Pi_AV Pi_VV^-1 Pi_VA, nu' = nu_A
    (or, ``gz`` given, the "unlearn" mean nu' = -(1/a) Pi' gz_A). First order: only nu."""
    n = len(nu)
    V = np.asarray(sorted(V), dtype=int)
    keep = np.setdiff1d(np.arange(n), V)
    nu2 = np.asarray(nu, dtype=float)[keep]
    if first_order:
        return nu2, np.zeros((keep.size, keep.size))
    Pi = np.asarray(Pi, dtype=float)
    PAV = Pi[np.ix_(keep, V)]
    Pi2 = Pi[np.ix_(keep, keep)] - PAV @ np.linalg.solve(Pi[np.ix_(V, V)], PAV.T)
    Pi2 = (Pi2 + Pi2.T) / 2.0
    if gz is not None:
        nu2 = -(Pi2 @ np.asarray(gz, dtype=float)[keep]) / a
    return nu2, Pi2


def project_many(nu, Pi, K, V, first_order: bool) -> tuple[np.ndarray, np.ndarray]:
    """Project the set V at once onto the span of the rest A: E = Kj_AA^-1 Kj_AV,
    nu' = nu_A + E nu_V, Pi' = T' Pi T with T = [I_A ; E'] in the (A, V) ordering."""
    n = len(nu)
    V = np.asarray(sorted(V), dtype=int)
    keep = np.setdiff1d(np.arange(n), V)
    Kj = np.asarray(K, dtype=float)  # (the jittered kernel's)
    E = np.linalg.solve(Kj[np.ix_(keep, keep)], Kj[np.ix_(keep, V)])
    nu = np.asarray(nu, dtype=float)
    nu2 = nu[keep] + E @ nu[V]
    if first_order:
        return nu2, np.zeros((keep.size, keep.size))
    T = np.zeros((n, keep.size))
    T[keep, np.arange(keep.size)] = 1.0
    T[V, :] = E.T
    return nu2, T.T @ np.asarray(Pi, dtype=float) @ T


# ---------------------------------------------------------------------------------------
# A budgeted binary learner
# ---------------------------------------------------------------------------------------


class Removal:
    """What one removal did: at stream position ``pos`` (the round that overflowed), the
    support vector entered at position ``victim`` (index ``p`` in entry order) left;
    ``scores`` the policy's scores (None for oldest/random) and ``gap`` the relative gap
    between the best and the second-best eligible score (how close a tie it was)."""

    __slots__ = ("pos", "victim", "p", "scores", "gap")

    def __init__(self, pos, victim, p, scores=None, gap=math.inf):
        self.pos = pos
        self.victim = victim
        self.p = p
        self.scores = scores
        self.gap = gap

    def __repr__(self) -> str:
        return f"Removal(pos={self.pos}, victim={self.victim}, p={self.p}, gap={self.gap:.2e})"


def _gap(scores: np.ndarray) -> float:
    if scores.size < 2:
        return math.inf
    s = np.sort(scores)
    return float((s[1] - s[0]) / max(abs(s[1]), abs(s[0]), 1e-300))


class RefBudgetLearner(rd.RefDualLearner):
    """:class:`reference_dual.RefDualLearner` with a budget.

    Extra state: ``gram`` (K(S, S), in entry order, grown from each update's k and
    kappa), ``n_removed`` (c, the random policy's counter), ``removals`` (one
    :class:`Removal` each) and ``support_log`` (the support list after every round).
    ``budget=None``: the unbudgeted learner. ``remove_mean``: "drop" (nu' = nu_{-p}, the
    semantics under test) or "unlearn" (see :func:`remove`; keeps ``g`` per support
    vector, g = zeta f + alpha y (1 + zeta v) with f, v before its update). ``batch``: q,
    how many leave at once when the list reaches ``budget + 1`` (module docstring).
    """

    def __init__(
        self,
        rule: str,
        budget=None,
        policy: str = "project",
        seed: int = 0,
        remove_mean: str = "drop",
        batch: int = 1,
        **params,
    ) -> None:
        super().__init__(rule, **params)
        if not (isinstance(batch, int) and batch >= 1):
            raise ValueError(f"batch must be an int >= 1, got {batch!r}")
        if budget is not None and batch > budget:
            raise ValueError(f"batch {batch} > budget {budget}")
        self.batch = batch
        if policy not in POLICIES:
            raise ValueError(f"unknown policy {policy!r}")
        if remove_mean not in ("drop", "unlearn"):
            raise ValueError(f"unknown remove_mean {remove_mean!r}")
        self.remove_mean = remove_mean
        self.g: list[float] = []
        self.budget = budget
        self.policy = policy
        self.seed = int(seed)
        self.gram = np.zeros((0, 0))
        self.n_removed = 0
        self.removals: list[Removal] = []
        self.support_log: list[tuple[int, ...]] = []  # the support list after every round
        # "project" with a budget: the jittered kernel (module docstring)
        self.jitter = PROJECT_JITTER if budget is not None and policy == "project" else 0.0

    def learn(self, k, kappa, y, pos):
        n0 = self.nu.size
        kappa = float(kappa) * (1.0 + self.jitter)
        step = super().learn(k, kappa, y, pos)
        if step.update:
            f, v = self.trace[-1]
            self.g.append(step.zeta * f + step.alpha * y * (1.0 + step.zeta * v))
            G = np.empty((n0 + 1, n0 + 1))
            G[:n0, :n0] = self.gram
            G[:n0, n0] = k
            G[n0, :n0] = k
            G[n0, n0] = kappa
            self.gram = G
            if self.budget is not None and self.nu.size > self.budget:
                if self.batch == 1:
                    self._evict(pos)
                else:
                    self._evict_many(pos)
        self.support_log.append(tuple(self.support))
        return step

    # -- which one ----------------------------------------------------------------------

    def choose(self) -> tuple[int, np.ndarray | None]:
        """(index in entry order of the victim, the scores or None)."""
        n = self.nu.size
        if self.policy == "oldest":
            return 0, None
        if self.policy == "random":
            u = splitmix64_uniform(self.seed, self.n_removed)
            return min(int(math.floor(u * (n - 1))), n - 2), None
        if self.policy == "smallest":
            scores = kl_scores(self.nu, self.Pi, self.gram, self.a, self.first_order, self._gz())
            scores = scores[: n - 1]
        else:
            scores = project_scores(self.nu, self.gram)
        return int(np.argmin(scores)), scores  # first of ties = the oldest

    def choose_many(self, q: int) -> tuple[list[int], np.ndarray | None]:
        """(indices in entry order of the q victims, in the order chosen; the scores or
        None): module docstring, "Batch pruning"."""
        n = self.nu.size
        if self.policy == "oldest":
            return list(range(q)), None
        if self.policy == "random":
            pool = list(range(n - 1))  # the newest is left out
            out = []
            for j in range(q):
                u = splitmix64_uniform(self.seed, self.n_removed + j)
                m = len(pool)
                out.append(pool.pop(min(int(math.floor(u * m)), m - 1)))
            return out, None
        if self.policy == "smallest":
            scores = kl_scores(self.nu, self.Pi, self.gram, self.a, self.first_order, self._gz())
            scores = scores[: n - 1]
        else:
            scores = project_scores(self.nu, self.gram)
        order = np.argsort(scores, kind="stable")  # ties: the oldest first
        return [int(i) for i in order[:q]], scores

    def _evict_many(self, pos: int) -> None:
        q = self.batch
        V, scores = self.choose_many(q)
        if self.policy == "project":
            self.nu, self.Pi = project_many(self.nu, self.Pi, self.gram, V, self.first_order)
        else:
            self.nu, self.Pi = remove_many(
                self.nu, self.Pi, V, self.first_order, a=self.a, gz=self._gz()
            )
        keep = np.setdiff1d(np.arange(self.gram.shape[0]), V)
        self.gram = self.gram[np.ix_(keep, keep)]
        victims = [self.support[p] for p in V]
        self.support = [self.support[i] for i in keep]
        self.zeta = [self.zeta[i] for i in keep]
        self.g = [self.g[i] for i in keep]
        for p, victim in zip(V, victims, strict=True):
            self.removals.append(Removal(int(pos), int(victim), int(p), scores))
        self.n_removed += q

    def _gz(self):
        """g / zeta per support vector for the "unlearn" mean, else None."""
        if self.remove_mean == "drop" or self.first_order:
            return None
        return np.array(self.g) / np.array(self.zeta)

    def _evict(self, pos: int) -> None:
        p, scores = self.choose()
        victim = self.support[p]
        if self.policy == "project":
            self.nu, self.Pi = project(self.nu, self.Pi, self.gram, p, self.first_order)
        else:
            self.nu, self.Pi = remove(
                self.nu, self.Pi, p, self.first_order, a=self.a, gz=self._gz()
            )
        keep = np.delete(np.arange(self.gram.shape[0]), p)
        self.gram = self.gram[np.ix_(keep, keep)]
        del self.support[p]
        del self.zeta[p]  # meaningful (M - a K = diag(1/zeta)) only while nothing projected
        del self.g[p]
        gap = _gap(scores) if scores is not None else math.inf
        self.removals.append(Removal(int(pos), int(victim), p, scores, gap))
        self.n_removed += 1


# ---------------------------------------------------------------------------------------
# A whole model
# ---------------------------------------------------------------------------------------


class RefBudgetModel(rd.RefDualModel):
    """:class:`reference_dual.RefDualModel` whose binary learners carry a budget:
    ``budget``, ``budget_policy``, ``seed`` (shared by the one-vs-rest models),
    ``remove_mean`` and ``batch``."""

    def __init__(
        self,
        rule: str,
        classes,
        kernel="rbf",
        gamma=None,
        degree: int = 3,
        coef0: float = 0.0,
        budget=None,
        budget_policy: str = "project",
        seed: int = 0,
        remove_mean: str = "drop",
        batch: int = 1,
        **params,
    ) -> None:
        super().__init__(rule, classes, kernel, gamma, degree, coef0, **params)
        name = rd.kernel_name(kernel)
        self.learners = [
            RefBudgetLearner(
                rule, budget, budget_policy, seed, remove_mean, batch, name=name, **params
            )
            for _ in self.learners
        ]

    def _kernel_rows(self, X, lr):
        """k(x, x) jittered for a "project" learner (module docstring)."""
        Ks, diag = super()._kernel_rows(X, lr)
        return Ks, diag * (1.0 + lr.jitter)


def run_ref_budget(
    rule: str, X, y, kernel="rbf", classes=None, n_passes: int = 1, **params
) -> rd.RefDualResult:
    """Feed (X, y) ``n_passes`` times to a fresh :class:`RefBudgetModel`.

    ``params``: budget, budget_policy, seed, remove_mean, batch, gamma, degree, coef0 and
    the learner's parameters. The result's ``support`` / ``nu`` / ``Pi`` are in entry order."""
    return rd.run_ref_dual(
        rule, X, y, kernel, classes, n_passes, model_cls=RefBudgetModel, **params
    )
