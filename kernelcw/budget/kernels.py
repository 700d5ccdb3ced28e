"""The budget's compiled kernels: one round's eviction and the removal, projection
and bookkeeping updates it is made of (the policies themselves are
:mod:`kernelcw.budget.policies`; the maths is in :mod:`kernelcw.budget`'s docstring).

The explicit walk of the dual engine (the hot loop) calls :func:`policy_append` after
each update and :func:`evict` when a round takes the model past its budget, with
the policy's :class:`PolicyState` record and the model's :class:`Support` record.

Pi and the inverse Gram matrix ``kinv`` are kept by their lower triangle: every O(n^2)
pass reads or writes one triangle, half the memory traffic of the whole matrix: dsymv
(:data:`kernelcw._blas.SYM_BLAS`, in the policy record), and rank-one and rank-two
updates by loops up to :data:`kernelcw._blas.RANK_LOOP_MAX` support vectors, dsyr and
dsyr2 above. The strict upper triangles hold stale values; readers outside take the
lower triangle (:func:`lower_symmetric`). The Gram matrix ``G`` is kept whole.

``second`` / ``second_order`` is True for a second-order rule and None for a
first-order one: a compile-time constant (``is not None``), so that the first-order
walks of the explicit form do not compile the passes over Pi.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import njit

from .._blas import sym_inverse, sym_mv, sym_r1, sym_r1_save, sym_r2
from .scores import kl_score, least_kl_slot, newest_slot, takes_place

__all__ = [
    "KINV_REFRESH",
    "NO_BUDGET",
    "OLDEST",
    "POLICIES",
    "PROJECT",
    "PROJECT_JITTER",
    "RANDOM",
    "SMALLEST",
    "PolicyState",
    "Support",
    "append_gram_row",
    "evict",
    "evict_smallest",
    "gram_leaves",
    "jth_entered_slot",
    "kinv_border",
    "kinv_refresh",
    "kinv_refresh_due",
    "kl_variances",
    "lower_symmetric",
    "policy_append",
    "schur_inverse",
    "splitmix64_uniform",
]

POLICIES = ("oldest", "random", "smallest", "project")
OLDEST, RANDOM, SMALLEST, PROJECT = range(4)
#: The code of an unbounded model (the explicit walk never evicts).
NO_BUDGET = -1

#: Relative jitter on the Gram matrix used by "project".
PROJECT_JITTER = 1e-6
#: "project" recomputes its inverse Gram matrix every this many removals, or every
#: ``budget`` removals when the budget is larger (:func:`kinv_refresh_due`).
KINV_REFRESH = 256


class PolicyState(NamedTuple):
    """What a budget policy gives the explicit walk: its integer ``code``
    (:data:`NO_BUDGET` for none), the ``budget`` (``inf`` for none), the random
    policy's ``seed`` and removal ``counter``, whether it keeps the inverse jittered
    Gram matrix ``kinv`` ("project") and the Gram matrix ``G`` and variances at the
    support vectors ``vsv`` ("smallest"; "project" keeps ``G`` too)."""

    code: int
    budget: float
    seed: np.uint64
    counter: int
    track_kinv: bool
    track_kl: bool
    kinv: np.ndarray
    G: np.ndarray
    vsv: np.ndarray
    blas: object


class Support(NamedTuple):
    """A model's support slots in the explicit form (capacity buffers, the leading n
    in use): ``nu``, ``Pi``, the unlearning weights ``zsv`` (zeta) and ``gsv`` (g),
    ``kap`` (k(x, x)), ``entry`` (when each entered) and ``ks`` (where the walk finds
    its kernel values)."""

    nu: np.ndarray
    Pi: np.ndarray
    zsv: np.ndarray
    gsv: np.ndarray
    kap: np.ndarray
    entry: np.ndarray
    ks: np.ndarray


@njit(cache=True, error_model="numpy")
def splitmix64_uniform(seed, counter):
    """A uniform in [0, 1) from (seed, counter): splitmix64 of seed + counter * golden,
    the top 53 bits. Counter-based, so the c-th draw is the same however the stream
    was cut. All arithmetic in uint64 (wrapping mod 2^64)."""
    z = np.uint64(seed) + np.uint64(counter) * np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z = z ^ (z >> np.uint64(31))
    return float(z >> np.uint64(11)) * (1.0 / 9007199254740992.0)


def lower_symmetric(A: np.ndarray) -> np.ndarray:
    """The symmetric matrix whose lower triangle is A's (a new array)."""
    L = np.tril(A)
    return L + np.tril(A, -1).T


@njit(cache=True, error_model="numpy")
def lower(A, i, j):
    """A[i, j] of a symmetric matrix kept by its lower triangle."""
    return A[i, j] if i >= j else A[j, i]


@njit(cache=True, error_model="numpy")
def choose_victim(pol, counter, n, sup, work):
    """Index (0..n-1) of the support vector that leaves; ``sup.entry`` holds the rounds
    the support vectors entered (the newest is the largest)."""
    policy = pol.code
    entry = sup.entry
    if policy == OLDEST:
        best = 0
        for i in range(1, n):
            if entry[i] < entry[best]:
                best = i
        return best
    if policy == RANDOM:
        # the j-th support vector in entry order, the newest (the last) left out;
        # slots are not in entry order once a removal has moved the last slot
        return jth_entered_slot(pol, counter, n, entry, work)
    newest = newest_slot(n, entry)
    if policy == SMALLEST:
        sym_mv(pol.blas, n, pol.G, sup.nu, work)  # f at the support vectors
    best = -1
    best_score = 0.0
    for i in range(n):
        if policy == SMALLEST and i == newest:
            continue
        if policy == SMALLEST:
            score = kl_score(work[i], pol.vsv[i], sup.zsv[i], sup.gsv[i])
        else:
            score = abs(sup.nu[i]) / math.sqrt(pol.kinv[i, i])
        if takes_place(score, i, best_score, best, entry):
            best = i
            best_score = score
    return best


@njit(cache=True, error_model="numpy")
def jth_entered_slot(pol, counter, n, entry, work):
    """The slot "random" removes (:func:`choose_victim`): the j-th support vector in
    entry order, the newest left out, j drawn from (seed, counter). By selection in
    O(n) (a sort was a tenth of a round at n = 4000): entries are distinct, so the
    j-th smallest is one slot. ``work`` holds at least n floats."""
    j = int(splitmix64_uniform(pol.seed, counter) * (n - 1))
    if j >= n - 1:
        j = n - 2
    x = work[:n]
    for i in range(n):
        x[i] = entry[i]
    lo, hi = 0, n - 1
    while lo < hi:  # quickselect (Hoare partition around the middle element)
        pivot = x[(lo + hi) // 2]
        i, k = lo, hi
        while i <= k:
            while x[i] < pivot:
                i += 1
            while x[k] > pivot:
                k -= 1
            if i <= k:
                x[i], x[k] = x[k], x[i]
                i += 1
                k -= 1
        if j <= k:
            hi = k
        elif j >= i:
            lo = i
        else:
            break
    want = x[j]
    for i in range(n):
        if entry[i] == want:
            return i
    return -1


@njit(cache=True, error_model="numpy")
def remove(n, p, nu, Pi, zsv, gsv, a, second_order, work, fns):
    """Unlearn p: Pi' = Pi_{-p,-p} - Pi_{-p,p} Pi_{p,-p} / Pi_pp and
    nu' = -(1/a) Pi' (g / zeta) (first order: nu' = nu_{-p}).

    In place on the leading n x n block (lower triangle); the last support vector
    moves into slot p (``zsv`` and ``gsv`` too; callers move their other per-vector
    arrays alike).
    """
    if second_order is not None:
        schur_delete(n, p, Pi, work, fns)
    nu[p] = nu[n - 1]
    last = n - 1
    zsv[p] = zsv[last]
    gsv[p] = gsv[last]
    if second_order is not None:
        w = work[last : 2 * last]
        for j in range(last):
            w[j] = gsv[j] / zsv[j]
        sym_mv(fns, last, Pi, w, work)
        for i in range(last):
            nu[i] = -work[i] / a


@njit(cache=True, error_model="numpy")
def project(n, p, nu, Pi, kinv, second_order, work, fns):
    """Project p onto the span of the others: nu' = nu_{-p} + nu_p e,
    Pi' = A Pi A', e = K_{-p}^-1 k_{-p,p} = -kinv[-p, p] / kinv[p, p]
    (lower triangles; then the last slot moves into p)."""
    kpp = kinv[p, p]
    nup = nu[p]
    e = work[:n]
    for i in range(n):
        e[i] = -lower(kinv, i, p) / kpp
    e[p] = 0.0
    for i in range(n):
        if i != p:
            nu[i] += nup * e[i]
    if second_order is not None:
        # Pi' = Pi + e pi_p' + pi_p e' + Pi_pp e e' on the -p block (pi_p: p's
        # column, read first) = Pi + e q' + q e' with q = pi_p + (Pi_pp / 2) e: one
        # pass; row and column p change too, and are dropped
        q = work[n : 2 * n]
        half = 0.5 * Pi[p, p]
        for i in range(n):
            q[i] = lower(Pi, i, p) + half * e[i]
        sym_r2(fns, n, 1.0, e, q, Pi)
    _swap_last(n, p, nu, Pi, second_order)


@njit(cache=True, error_model="numpy")
def schur_delete(n, p, A, work, fns):
    """A_{-p} - A_{-p,p} A_{p,-p} / A_pp in place on the lower triangle, then the last
    row and column move into slot p. For A = X^-1 this is (X_{-p})^-1: Pi for M
    without p, and the inverse Gram matrix without p."""
    col = work[:n]
    for i in range(n):
        col[i] = lower(A, i, p)
    sym_r1(fns, n, -1.0 / A[p, p], col, A)  # row and column p are dropped next
    swap_last_lower(n, p, A)


@njit(cache=True, error_model="numpy")
def schur_inverse(kappa, s):
    """1 / s for a new vector's Schur complement ``s = kappa - k' kinv k`` against the
    jittered Gram matrix (``kappa``: its k(x, x), jitter included), s first raised to
    its exact lower bound, jitter times k(x, x) (the jittered Gram matrix is K + jitter
    diag(K)). A smaller computed value is rounding (a near-duplicate of the others on an
    ill-conditioned Gram matrix, where ``kinv``'s entries are ~1 / jitter): an update
    by ``1 / s`` of the noise blew the inverse up to 1e280 (the periodic refresh,
    :func:`kinv_refresh_due`, restores it)."""
    floor = PROJECT_JITTER * kappa / (1.0 + PROJECT_JITTER)
    if not s >= floor:
        s = floor if floor > 0.0 else 1e-300
    return 1.0 / s


@njit(cache=True, error_model="numpy")
def kinv_append(n, kinv, G, kvec, kappa, work, fns, save, saving):
    """Inverse Gram with a new last vector (kernel column kvec over the n others,
    k(x, x) = kappa, jitter added; ``G`` holds its row): :func:`kinv_border`, then
    kinv += w w' / s, lower triangle; with ``saving``, kinv's before it into ``save``
    in the same pass (the walk's rollback copy, ``steps.save_model``'s for kinv)."""
    inv_s = kinv_border(n, kinv, kvec, kappa, work, fns)
    sym_r1_save(fns, n, inv_s, work, kinv, save, saving)


@njit(cache=True, error_model="numpy")
def kinv_border(n, kinv, kvec, kappa, work, fns):
    """:func:`kinv_append`'s O(n) part: ``w = kinv kvec`` into ``work[:n]``, the new
    vector's row n of the inverse (``-w / s``, ``1 / s``), and ``1 / s`` returned,
    the factor of the rank-one term ``w w'`` the leading n x n still lacks (s bounded
    below: :func:`schur_inverse`)."""
    sym_mv(fns, n, kinv, kvec, work)
    s = kappa
    for i in range(n):
        s -= kvec[i] * work[i]
    inv_s = schur_inverse(kappa, s)
    for i in range(n):
        kinv[n, i] = -work[i] * inv_s
    kinv[n, n] = inv_s
    return inv_s


@njit(cache=True, error_model="numpy")
def _swap_last(n, p, nu, Pi, second_order):
    last = n - 1
    nu[p] = nu[last]
    if second_order is not None:
        swap_last_lower(n, p, Pi)


@njit(cache=True, error_model="numpy")
def swap_last_lower(n, p, A):
    """The last slot's row and column move into slot p, lower triangle only."""
    last = n - 1
    if p == last:
        return
    for j in range(p):
        A[p, j] = A[last, j]
    for j in range(p + 1, last):
        A[j, p] = A[last, j]
    A[p, p] = A[last, last]


@njit(cache=True, error_model="numpy")
def swap_last_matrix(n, p, A):
    last = n - 1
    if p != last:
        for j in range(n):
            A[p, j] = A[last, j]
        for i in range(n):
            A[i, p] = A[i, last]
        A[p, p] = A[last, last]


@njit(cache=True, error_model="numpy")
def kinv_refresh_due(counter, budget):
    """Whether "project" recomputes its inverse Gram matrix after its ``counter``-th
    removal: every :data:`KINV_REFRESH` removals, or every ``budget`` removals when
    the budget is larger. The refresh costs n^3 flops at n = budget, so it adds at
    most n^2 per removal, one pass over the matrix, where every 256 removals it was
    most of a round at B = 1000 and above; what that costs in accuracy is measured in
    ``doc/dual-form.md`` section 8. Counted in removals, so independent of how the
    stream is cut."""
    return counter % max(KINV_REFRESH, int(budget)) == 0


@njit(cache=True, error_model="numpy")
def kinv_refresh(n, G, kinv, fns):
    """kinv = G^-1 (G: the jittered kernel's, as the support store gives it) from
    scratch, in place on its lower triangle: Cholesky and inverse from the factor
    (n^3 flops, half of an LU inverse, exactly symmetric; at n = 4000 the refresh
    was most of a removal's cost). Should rounding leave the jittered Gram matrix
    not positive definite, the LU inverse (:func:`symmetric_inverse`)."""
    for i in range(n):
        for j in range(i):
            kinv[i, j] = G[i, j]
        kinv[i, i] = G[i, i]
    if sym_inverse(fns, n, kinv) != 0:
        X = symmetric_inverse(G[:n, :n].copy())
        for i in range(n):  # element by element: no shape-check code to compile
            for j in range(n):
                kinv[i, j] = X[i, j]


@njit(cache=True, error_model="numpy")
def symmetric_inverse(A):
    """inv(A) of a symmetric A, with each pair of mirrored entries averaged.

    LAPACK's inverse of a symmetric matrix is not exactly symmetric, and its two
    triangles are not interchangeable when A is ill-conditioned: on a jittered Gram
    matrix of condition 1e7, ``kappa - k' X k`` of the next vector (its Schur
    complement, ~1e-6) came out right from the whole inverse or the average of its
    triangles, and as -8e-5 from its lower triangle alone, which is what the
    symmetric BLAS routines read."""
    X = np.linalg.inv(A)
    n = X.shape[0]
    for i in range(n):
        for j in range(i):
            v = 0.5 * (X[i, j] + X[j, i])
            X[i, j] = v
            X[j, i] = v
    return X


@njit(cache=True, error_model="numpy")
def kl_append(n, G, vsv, kv, kap_new, c, beta, v_raw, a, second, work, fns):
    """Keep the variances at the support vectors through an update that appends a
    support vector as slot n (the caller keeps G).

    ``c = Pi k`` before the update and ``v_raw = a kappa + k' c`` (unfloored). For
    an existing p, ``k_p' Pi_new k_p = k_p' Pi k_p - beta ((K c)_p + a K_np)^2``.
    """
    if second is not None:
        sym_mv(fns, n, G, c, work)
        for i in range(n):
            w = work[i] + a * kv[i]
            vsv[i] -= beta * w * w
        vsv[n] = v_raw - beta * v_raw * v_raw
    else:
        vsv[n] = a * kap_new


@njit(cache=True, error_model="numpy")
def kl_remove(n, p, G, zsv, vsv, Pi, a, second, work, fns):
    """Keep the same through the removal of p (before ``remove`` changes Pi):
    Sigma' = Sigma + zeta_p Sigma phi_p phi_p' Sigma / (1 - zeta_p v_p), so
    v_r += zeta_p (x_r' Sigma phi_p)^2 / (1 - zeta_p v_p), with
    x_r' Sigma phi_p = a K_rp + (K Pi K)_rp; then slot p takes the last one (the
    caller moves G)."""
    zp = zsv[p]
    if second is not None and zp > 0.0:
        den = 1.0 - zp * vsv[p]
        h = work[n : 2 * n]
        sym_mv(fns, n, Pi, G[p], h)  # h = Pi K[:, p] (G is symmetric)
        sym_mv(fns, n, G, h, work)  # K Pi K[:, p]
        for r in range(n):
            acc = a * G[r, p] + work[r]
            vsv[r] += zp * acc * acc / den
    vsv[p] = vsv[n - 1]


@njit(cache=True, error_model="numpy")
def append_gram_row(G, n, kv, kap_new):
    """The Gram matrix's new vector n (kernel column ``kv`` over the n others)."""
    for i in range(n):
        G[n, i] = kv[i]
        G[i, n] = kv[i]
    G[n, n] = kap_new


@njit(cache=True, error_model="numpy")
def policy_append(pol, n, kv, kap_new, c, beta, v_raw, a, second, work, save, saving):
    """What the policy tracks, through an update that appends slot n (kernel column
    ``kv`` over the n others, ``c = Pi k`` before the update, ``v_raw`` unfloored;
    ``save``, ``saving``: kinv's rollback copy, :func:`kinv_append`)."""
    if pol.track_kl:
        kl_append(n, pol.G, pol.vsv, kv, kap_new, c, beta, v_raw, a, second, work, pol.blas)
    if pol.track_kl or pol.track_kinv:
        append_gram_row(pol.G, n, kv, kap_new)
    if pol.track_kinv:
        kinv_append(n, pol.kinv, pol.G, kv, kap_new, work, pol.blas, save, saving)


@njit(cache=True, error_model="numpy")
def gram_leaves(n, p, G, glog):
    """The last slot's row and column of the Gram matrix move into slot p, which leaves;
    ``glog``: None, or a walk's rollback log (gp, grow, saved): if ``gp[0] == -1``, G's
    row p (of the ``saved[0]`` slots saved) into ``grow`` and p into ``gp[0]`` first."""
    if glog is not None and glog[0][0] == -1 and p < glog[2][0]:
        glog[1][: glog[2][0]] = G[p, : glog[2][0]]
        glog[0][0] = p
    swap_last_matrix(n, p, G)


@njit(cache=True, error_model="numpy")
def evict_smallest(pol, n, sup, a, second, work, glog):
    """:func:`evict` for "smallest" (second-order) by the blocked walk's O(n) scores
    (:func:`kernelcw.budget.scores.least_kl_slot`: nu, Pi's diagonal, zeta and g, where
    :func:`choose_victim` reads ``K nu`` and the variances ``vsv`` that
    :func:`kl_append` and :func:`kl_remove` keep by passes over the Gram matrix: the
    same scores to rounding for a model learnt round by round). ``vsv`` is left to the
    caller (:func:`kl_variances`). The caller counts the removal."""
    d = work[:n]  # (read before remove() takes the work space)
    for i in range(n):
        d[i] = sup.Pi[i, i]
    p = least_kl_slot(n, sup, None, sup.nu, d, a)
    remove(n, p, sup.nu, sup.Pi, sup.zsv, sup.gsv, a, second, work, pol.blas)
    gram_leaves(n, p, pol.G, glog)
    sup.kap[p] = sup.kap[n - 1]
    sup.entry[p] = sup.entry[n - 1]
    sup.ks[p] = sup.ks[n - 1]


@njit(cache=True, error_model="numpy")
def kl_variances(n, Pi, zsv, vsv, a):
    """The variances at the support vectors that "smallest" keeps, from Pi's diagonal
    (``1 / zeta + Pi_pp / (a zeta)^2``, as the blocked walk writes them)."""
    for i in range(n):
        z = zsv[i]
        vsv[i] = 1.0 / z + Pi[i, i] / (a * a * z * z)


@njit(cache=True, error_model="numpy")
def evict(pol, counter, n, sup, a, second, work, glog, diag):
    """One round's eviction: the model holds n = budget + 1 support vectors; the one
    the policy chooses (its ``counter``-th removal) leaves (removed or projected) and
    the last slot moves into its place. The caller counts the removal. ``glog``:
    :func:`gram_leaves`'s. ``diag``: "smallest" by :func:`evict_smallest`."""
    if diag:
        evict_smallest(pol, n, sup, a, second, work, glog)
        return
    p = choose_victim(pol, counter, n, sup, work)
    counter += 1
    fns = pol.blas
    if pol.track_kl:
        kl_remove(n, p, pol.G, sup.zsv, pol.vsv, sup.Pi, a, second, work, fns)
    if pol.code == PROJECT:
        project(n, p, sup.nu, sup.Pi, pol.kinv, second, work, fns)
        sup.zsv[p] = sup.zsv[n - 1]
        sup.gsv[p] = sup.gsv[n - 1]
    else:
        remove(n, p, sup.nu, sup.Pi, sup.zsv, sup.gsv, a, second, work, fns)
    if pol.track_kl or pol.track_kinv:
        gram_leaves(n, p, pol.G, glog)
    if pol.track_kinv:
        schur_delete(n, p, pol.kinv, work, fns)
        if kinv_refresh_due(counter, pol.budget):
            kinv_refresh(n - 1, pol.G, pol.kinv, fns)
    sup.kap[p] = sup.kap[n - 1]
    sup.entry[p] = sup.entry[n - 1]
    sup.ks[p] = sup.ks[n - 1]
