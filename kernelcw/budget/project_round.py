""" "project"'s round, when an update takes the model past its budget, in one pass over
each triangle.

The explicit walk's round that appends a support vector and then projects one out
passed over each of Pi and the inverse Gram matrix ``kinv`` three times, each a stream
of n^2 / 2 numbers: the update's rank-one term (``-beta c c'``; kinv's ``w w' / s``,
:func:`.kernels.kinv_border`), the projection's rank-two term (Pi) or Schur deletion
(kinv, :func:`.kernels.project`, :func:`.kernels.schur_delete`), and, once per walk,
the walk's check that the triangles are finite (a walk of one row: once per round),
besides the products ``Pi k`` and ``kinv k`` the round reads. All that the second
term needs of the first is O(n): which slot leaves (its score reads kinv's new
diagonal) and column p of each updated triangle. :func:`project_evict` computes those
from the first term's factors, then rewrites each triangle once with both terms, in the
operations and the order of the two passes, and checks what it writes: the same bits
(``tests/test_project_round.py``; numba contracts no multiply-add into a fused one
without fastmath, so a sum kept in a register rounds as the one stored between passes).
A call of one row that updates ("project", B = 200) then reads and writes each
triangle once after its product, where it did three times.

Only where both terms are loops (n <= :data:`kernelcw._blas.RANK_LOOP_MAX`; above,
dsyr and dsyr2, which round otherwise), with Pi or without (first-order rules: kinv
alone); every other round takes :func:`.kernels.evict`. The dropped row and column p
are checked too: a non-finite value there sends the walk to its full check of the
model (``steps.all_finite``), which decides.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .._blas import RANK_LOOP_MAX
from .kernels import (
    PROJECT,
    append_gram_row,
    gram_leaves,
    kinv_border,
    swap_last_lower,
)
from .scores import least_projection_slot

__all__ = ["fuses", "project_append", "project_evict"]


@njit(cache=True, error_model="numpy")
def fuses(pol, n):
    """Whether an update of a model of n support vectors takes :func:`project_evict`'s
    way: "project", past its budget after the append, both terms loops."""
    return pol.code == PROJECT and n + 1 > pol.budget and n + 1 <= RANK_LOOP_MAX


@njit(cache=True, error_model="numpy")
def project_append(pol, n, kv, kap_new, work):
    """:func:`.kernels.policy_append` for "project" without kinv's rank-one term: the
    Gram matrix's new row, kinv's (``w = kinv k`` into ``work[:n]``); returns ``1/s``."""
    append_gram_row(pol.G, n, kv, kap_new)
    return kinv_border(n, pol.kinv, kv, kap_new, work, pol.blas)


@njit(cache=True, error_model="numpy")
def _first(A, a1, x, m, i, p):
    """Entry (i, p) of the lower triangle of ``A + a1 x x'`` on its leading m x m (as
    :func:`kernelcw._blas.sym_r1` makes it), row m as A holds it."""
    hi, lo = (i, p) if i >= p else (p, i)
    if hi < m:
        return A[hi, lo] + (a1 * x[hi]) * x[lo]
    return A[m, lo]


@njit(cache=True, error_model="numpy")
def _pi_pass(m, A, a1, x, e, q, save, saving):
    """A's lower triangle on its leading m + 1 = ``(A + a1 x x' on the leading m) +
    (e q' + q e')`` (:func:`kernelcw._blas.sym_r1_save` then ``sym_r2``), with
    ``saving`` the leading m x m before it into ``save``; 1 if it wrote inf or NaN."""
    bad = 0
    for i in range(m):
        row = A[i]
        s = a1 * x[i]
        ax = e[i]
        ay = q[i]
        if saving:
            keep = save[i]
            for j in range(i + 1):
                p = row[j]
                keep[j] = p
                t = (p + s * x[j]) + (ax * q[j] + ay * e[j])
                row[j] = t
                bad |= np.int64(not ((t - t) == 0.0))
        else:
            for j in range(i + 1):
                t = (row[j] + s * x[j]) + (ax * q[j] + ay * e[j])
                row[j] = t
                bad |= np.int64(not ((t - t) == 0.0))
    row = A[m]
    ax = e[m]
    ay = q[m]
    for j in range(m + 1):
        t = row[j] + (ax * q[j] + ay * e[j])
        row[j] = t
        bad |= np.int64(not ((t - t) == 0.0))
    return bad


@njit(cache=True, error_model="numpy")
def _kinv_pass(m, A, a1, x, a2, col, save, saving):
    """:func:`_pi_pass` with the second term ``a2 col col'`` (``sym_r1``)."""
    bad = 0
    for i in range(m):
        row = A[i]
        s = a1 * x[i]
        s2 = a2 * col[i]
        if saving:
            keep = save[i]
            for j in range(i + 1):
                p = row[j]
                keep[j] = p
                t = (p + s * x[j]) + s2 * col[j]
                row[j] = t
                bad |= np.int64(not ((t - t) == 0.0))
        else:
            for j in range(i + 1):
                t = (row[j] + s * x[j]) + s2 * col[j]
                row[j] = t
                bad |= np.int64(not ((t - t) == 0.0))
    row = A[m]
    s2 = a2 * col[m]
    for j in range(m + 1):
        t = row[j] + s2 * col[j]
        row[j] = t
        bad |= np.int64(not ((t - t) == 0.0))
    return bad


@njit(cache=True, error_model="numpy")
def project_evict(pol, n, sup, second, terms, work, undo, saving, glog):
    """:func:`.kernels.evict` for "project" (:func:`fuses`) with the round's rank-one
    terms still to add: the model holds n = budget + 1 slots, the last the new support
    vector (in nu, zsv, gsv, kap, entry, ks, G and the last rows of Pi and kinv),
    while the leading n - 1 of Pi lack ``-beta c c'`` and kinv's ``w w' / s``
    (``terms = (c, -beta, 1 / s)``, w in ``work[:n - 1]``: :func:`project_append`).
    With ``saving``, Pi's and kinv's leading n - 1 before them into ``undo``'s (the
    call's rollback copy); ``glog``: :func:`.kernels.evict`'s. Returns whether every
    value written into Pi and kinv is finite. The caller counts the removal and
    refreshes kinv where it is due (:func:`.kernels.kinv_refresh_due`; compiled
    once, in the walk, which :func:`.kernels.evict` brings it into anyway)."""
    m = n - 1
    c, nb, inv_s = terms
    kinv, Pi, nu = pol.kinv, sup.Pi, sup.nu
    w = work[:m]
    q, e, col = work[n : 2 * n], work[2 * n : 3 * n], work[3 * n : 4 * n]
    for i in range(m):  # kinv's new diagonal (in q until the choice), as sym_r1 makes it
        q[i] = kinv[i, i] + (inv_s * w[i]) * w[i]
    q[m] = kinv[m, m]
    p = least_projection_slot(n, sup, None, nu, q)
    kpp = q[p]
    for i in range(n):  # project's e and schur_delete's column: kinv's column p
        col[i] = _first(kinv, inv_s, w, m, i, p)
        e[i] = -col[i] / kpp
    e[p] = 0.0
    nup = nu[p]
    for i in range(n):
        if i != p:
            nu[i] += nup * e[i]
    bad = 0
    if second is not None:  # project's q = pi_p + (Pi_pp / 2) e, of the updated Pi
        half = 0.5 * _first(Pi, nb, c, m, p, p)
        for i in range(n):
            q[i] = _first(Pi, nb, c, m, i, p) + half * e[i]
        bad |= _pi_pass(m, Pi, nb, c, e, q, undo.Pi, saving)
        swap_last_lower(n, p, Pi)
    nu[p] = nu[m]
    sup.zsv[p] = sup.zsv[m]
    sup.gsv[p] = sup.gsv[m]
    gram_leaves(n, p, pol.G, glog)
    bad |= _kinv_pass(m, kinv, inv_s, w, -1.0 / kpp, col, undo.kinv, saving)
    swap_last_lower(n, p, kinv)
    sup.kap[p] = sup.kap[m]
    sup.entry[p] = sup.entry[m]
    sup.ks[p] = sup.ks[m]
    return bad == 0
