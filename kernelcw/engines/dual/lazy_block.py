"""The lazy form's products before a walk and its purge after one, compiled.

:class:`.lazy.LazyForm` makes, per walk, a dozen BLAS calls and as many small
numpy operations; a one-row ``partial_fit`` with a budget of a few hundred spent most
of its time in their Python and dispatch overhead. Here they are one compiled call
each, making the same BLAS calls (:func:`kernelcw._blas.trsm_lower_left_c`,
:func:`kernelcw._blas.gemm_sub_c`), as :mod:`.queue_block` does for the queue form
(and for one input on a model of up to :data:`.one_input.ONE_INPUT_MAX_N` support
vectors, its compiled loops, :mod:`.one_input`);
:func:`lazy_part` makes the products, the walk and the append in one call.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..._blas import gemm_sub_c, tri_record, trsm_lower_left_c
from ..._cholupdate import givens_update
from ...budget import splitmix64_uniform
from ...rules import rule_from_plain
from .leaver_walk import Candidates, walk_with_rows
from .one_input import ONE_INPUT_MAX_N, dot, solve_lower, sub_mv
from .queue_block import gather_kernels, grown_slots
from .quiet import quiet_factor
from .status import OK, STOP
from .steps import Block, plain_result

__all__ = [
    "NO_LAZY_FORWARD",
    "append_rows",
    "compact_rows",
    "copy_lower",
    "lazy_candidates",
    "lazy_forward",
    "lazy_part",
    "lazy_products",
    "purge_rows",
    "quiet_lazy",
    "refresh_r",
]


@njit(cache=True)
def lazy_forward(fns, L, r, K0, Kbb, ks, t0, t1):
    """The first products of :func:`lazy_products`: (W, Kss, G, rW), ``W = L^-1 K0c``,
    ``G = W'W``, ``rW = W'r`` (a (bs, 1) array)."""
    n = ks.shape[0]
    bs = t1 - t0
    W, Kss = gather_kernels(K0, Kbb, ks, t0, t1)  # K0c, solved in place
    if bs == 1 and n <= ONE_INPUT_MAX_N:  # one input: loops, not three BLAS calls
        w = W.reshape(-1)  # (W is n x 1 and C-ordered: w its 1-d, contiguous view)
        solve_lower(L, np.int64(0), n, w)
        G = np.empty((1, 1))
        G[0, 0] = dot(w, w, n)
        rW = np.empty((1, 1))
        rW[0, 0] = dot(w, r, n)
        return W, Kss, G, rW
    trsm_lower_left_c(fns, L[:n, :n], W, False)
    G = np.empty((bs, bs))
    gemm_sub_c(fns, 1.0, W, W, 0.0, G, True)
    rn = r[:n].reshape((n, 1))
    rW = np.empty((bs, 1))
    gemm_sub_c(fns, 1.0, W, rn, 0.0, rW, True)
    return W, Kss, G, rW


@njit(cache=True)
def quiet_lazy(fns, L, r, n, K0, Kbb, kap, y, rule, psd_tol):
    """:func:`.quiet.quiet_factor` at a one-row walk's first round: G and rW by
    :func:`lazy_forward`, as :func:`lazy_products` makes them for the walk.
    Returns (taken, f, the products: the walk's own, if the row goes on to it)."""
    pre = lazy_forward(tri_record(fns), L, r, K0, Kbb, np.arange(n), np.int64(0), np.int64(1))
    G, rW = pre[2], pre[3]
    taken, f = quiet_factor(G[0, 0], rW[0, 0], kap, y, rule, psd_tol)
    return taken, f, pre


#: ``pre`` for :func:`lazy_products` when there are no products to take (as
#: :data:`.queue_block.NO_FORWARD`: an empty G marks it).
NO_LAZY_FORWARD = tuple(np.empty((0, 0)) for _ in range(4))


@njit(cache=True)
def lazy_products(fns, L, r, K0, Kbb, ks, t0, t1, V, new, group, pre):
    """For block inputs t0..t1-1 on the support ``ks`` (row ks of K0, or for ks < 0
    block input -1-ks) of a factor ``L`` (n x n) and ``r``: (Kss, W, G, rW, P, H,
    rho) with ``W = L^-1 K0c``, ``G = W'W``, ``rW = W'r``, and for the walk's
    leavers (slots ``V`` in leaving order; ``new[d] >= 0``: a row the walk appends,
    whose rows of P, H, rho are zero) ``Y = L^-1 E_V``, ``P = Y'W``, ``H = Y'Y``,
    ``rho = Y'r``. Y's column for slot v is zero above v: its columns, sorted by
    slot, are solved in bands of ``group``, each from its first slot's row.
    ``fns``: a :class:`kernelcw._blas.TriBlas` or its plain tuple (from Python).
    ``pre``: :func:`lazy_forward`'s result for these very inputs and support, which
    :func:`quiet_lazy` made for a row it sent on (:data:`NO_LAZY_FORWARD`: made here)."""
    fns = tri_record(fns)  # (a plain tuple from Python)
    n = ks.shape[0]
    bs = t1 - t0
    if pre[2].shape[0] == 0:
        W, Kss, G, rW = lazy_forward(fns, L, r, K0, Kbb, ks, t0, t1)
    else:
        W, Kss, G, rW = pre
    rn = r[:n].reshape((n, 1))
    c = V.shape[0]
    P0 = np.zeros((c, bs))
    H0 = np.zeros((c, c))
    rho0 = np.zeros(c)
    olds = np.flatnonzero(new < 0)
    olds = olds[np.argsort(V[olds], kind="mergesort")]  # by slot
    co = olds.shape[0]
    if co == 1 and bs == 1 and n <= ONE_INPUT_MAX_N:  # one input, one leaver: loops
        p0 = V[olds[0]]
        y = np.zeros(n - p0)
        y[0] = 1.0
        solve_lower(L, p0, n, y)
        P0[olds[0], 0] = dot(y, W.reshape(-1)[p0:], n - p0)
        H0[olds[0], olds[0]] = dot(y, y, n - p0)
        rho0[olds[0]] = dot(y, r[p0:], n - p0)
    elif co:
        p0 = V[olds[0]]
        Y = np.zeros((n - p0, co))
        for j in range(co):
            Y[V[olds[j]] - p0, j] = 1.0
        for g in range(0, co, group):
            pg = V[olds[g]]
            trsm_lower_left_c(fns, L[pg:n, pg:n], Y[pg - p0 :, g : g + group], False)
        P = np.empty((co, bs))
        H = np.empty((co, co))
        rho = np.empty((co, 1))
        gemm_sub_c(fns, 1.0, Y, W[p0:], 0.0, P, True)
        gemm_sub_c(fns, 1.0, Y, Y, 0.0, H, True)
        gemm_sub_c(fns, 1.0, Y, rn[p0:], 0.0, rho, True)
        for j in range(co):  # back to leaving order
            d = olds[j]
            P0[d] = P[j]
            rho0[d] = rho[j, 0]
            for k in range(co):
                H0[d, olds[k]] = H[j, k]
    return Kss, W, G, rW[:, 0].copy(), P0, H0, rho0


@njit(cache=True)
def compact_rows(L, p0, tail):
    """In place: kept row ``tail[k]`` (> p0) becomes row ``p0 + k``, with its
    columns before p0 and its kept columns from p0 on (the same slots ``tail``,
    sorted) moved left to p0, p0 + 1, ... (rows and columns both increase, so
    nothing is read after it was overwritten). Only the lower triangles are read and
    written."""
    for k in range(tail.shape[0]):
        i = tail[k]
        dst = p0 + k
        for j in range(p0):
            L[dst, j] = L[i, j]
        for jj in range(k + 1):
            L[dst, p0 + jj] = L[i, tail[jj]]


@njit(cache=True)
def copy_lower(src, dst, lo, hi):
    """Rows lo .. hi - 1 of ``src``'s lower triangle into ``dst``."""
    for i in range(lo, hi):
        for j in range(i + 1):
            dst[i, j] = src[i, j]


@njit(cache=True)
def purge_rows(fns, L, r, qv, zeta, N, V, fold):
    """The leavers V (sorted slots of the N) leave :class:`.lazy.LazyForm`'s factor:
    the kept rows after the first leaver p0 and their kept columns move up
    (:func:`compact_rows`), ``zeta`` and ``qv`` likewise, and their columns of the
    leavers are gathered into ``Lam`` (zero above each leaver's first later row,
    ``first``). With ``fold`` (a few leavers) Lam is folded in here by Givens sweeps
    and r refreshed (:func:`refresh_r`); else the caller folds it in and refreshes.
    Returns (the kept slots A, Lam, first). ``fns``: a TriBlas or its plain tuple."""
    fns = tri_record(fns)
    D = V.shape[0]
    p0 = V[0]
    keep = np.ones(N, dtype=np.bool_)
    for j in range(D):
        keep[V[j]] = False
    A = np.flatnonzero(keep)
    m = A.shape[0]
    tail = A[p0:]  # every slot before p0 is kept
    nt = m - p0
    Lam = np.zeros((nt, D))
    first = np.zeros(D, dtype=np.int64)
    for j in range(D):
        first[j] = np.searchsorted(tail, V[j])
        for k in range(first[j], nt):
            Lam[k, j] = L[tail[k], V[j]]
    compact_rows(L, p0, tail)
    for k in range(m):
        zeta[k] = zeta[A[k]]
        qv[k] = qv[A[k]]
    if fold:
        givens_update(L[p0:m, p0:m], Lam)
        refresh_r(fns, L, r, qv, p0, m)
    return A, Lam, first


@njit(cache=True)
def refresh_r(fns, L, r, qv, p0, m):
    """``r[p0:m] = L[p0:m, p0:m]^-1 (qv[p0:m] - L[p0:m, :p0] r[:p0])`` after the
    trailing rows of the factor changed (``fns``: a TriBlas or its plain tuple): by
    the loops of :mod:`.one_input` up to ONE_INPUT_MAX_N support vectors (so a walk of
    one input calls no BLAS: ``LazyForm.one_input_blas``), by BLAS above."""
    if m <= ONE_INPUT_MAX_N:
        rl = qv[p0:m].copy()
        sub_mv(L[p0:], m - p0, p0, r, rl)
        solve_lower(L, p0, m, rl)
        for i in range(m - p0):
            r[p0 + i] = rl[i]
        return
    fns = tri_record(fns)
    rt = qv[p0:m].copy().reshape((m - p0, 1))
    if p0 > 0:
        gemm_sub_c(fns, -1.0, L[p0:m, :p0], r[:p0].reshape((p0, 1)), 1.0, rt, False)
    trsm_lower_left_c(fns, L[p0:m, p0:m], rt, False)
    for i in range(m - p0):
        r[p0 + i] = rt[i, 0]


@njit(cache=True)
def append_rows(bufs, n, a, W, rows, u):
    """The u rows a walk appended (``rows``, a :class:`.leaver_walk.QueueRows`; block
    inputs ``rows.src``) extend the factor of the n at its start in the buffers
    ``bufs = (L, r, qv, zeta)``: their entries ``a W[:, S]'`` at the old columns,
    ``a E`` among themselves with diagonal ``Ld``, and their r, qv and zeta."""
    L, r, qv, zeta = bufs
    for k in range(u):
        i = n + k
        s = rows.src[k]
        for j in range(n):
            L[i, j] = a * W[j, s]
        for j in range(k):
            L[i, n + j] = a * rows.E[k, j]
        L[i, i] = rows.Ld[k]
        r[i] = rows.rn[k]
        qv[i] = rows.qn[k]
        zeta[i] = rows.zt[k]


@njit(cache=True)
def lazy_part(fns, bufs, sizes, data, rule, tols, cands, slots, f_blk, pre):
    """One walk of :meth:`.lazy.LazyForm._walk_part` in one compiled call (from Python,
    the walk's records and the rows' bookkeeping were a dozen small numpy calls):
    block inputs t0..t1-1 on the support ``ks``, :func:`lazy_products`,
    :func:`.leaver_walk.queue_walk` (margins into ``f_blk[t0:t1]``) and, unless it failed,
    the rows it appended written into the buffers (:func:`append_rows`).
    ``bufs = (L, r, qv, zeta)``, ``sizes = (n, t0, t1, budget, clock, group)``,
    ``data = (K0, Kbb, kap, y)`` (the block's), ``cands = (V, new)`` (the walk's
    leavers, :func:`lazy_candidates`), ``slots = (entry, kap, ks)``.
    Returns (QueueResult's fields, the block inputs that entered, the slots after the append:
    new arrays if rows were appended, as rollback needs, else the same). ``pre``: as
    :func:`lazy_products` takes it."""
    t0, t1, group = sizes[1], sizes[2], sizes[5]
    V, new = cands
    prods = lazy_products(fns, bufs[0], bufs[1], data[0], data[1], slots[2], t0, t1, V, new,
                          group, pre)  # fmt: skip
    return lazy_walk(bufs, sizes, data, rule, tols, cands, slots, f_blk, prods)


@njit(cache=True)
def lazy_walk(bufs, sizes, data, rule, tols, cands, slots, f_blk, prods):
    """:func:`lazy_part` after its products (``prods``, :func:`lazy_products`'s
    result): the walk and the append. Separate for a walk whose products take BLAS's
    threads while the walk takes one (:meth:`.lazy.LazyForm._walk_part`)."""
    rule = rule_from_plain(rule)  # (a plain tuple from Python)
    n, t0, t1, budget, clock = sizes[:5]
    kap_t = data[2][t0:t1]
    Kss, W, G, rW, P0, H0, rho0 = prods
    blk = Block(G, rW, Kss, kap_t, data[3][t0:t1])
    cand = Candidates(P0, H0, rho0, cands[1])
    res, rows = walk_with_rows(blk, cand, rule, tols, n, budget, f_blk[t0:t1])
    u = res.n_new
    S = rows.src[:u]
    if u == 0 or (res.status != OK and res.status != STOP):
        return plain_result(res), S + t0, slots
    append_rows(bufs, n, rule.a, W, rows, u)
    entry, kap, ks = slots
    return plain_result(res), S + t0, grown_slots(entry, kap, ks, clock, kap_t, S, t0)


@njit(cache=True)
def lazy_candidates(n, bs, budget, seed, counter):
    """The leavers of a walk of the lazy form (:meth:`.lazy.LazyForm._walk_part`;
    compiled: from Python, a list of the n slots and a few small arrays every walk):
    the walk's leavers in leaving order, their
    slots after its rows are appended (n + k for its k-th row), and for each the k of
    a row the walk appends, or -1. The d-th death comes after the walk's row
    ``budget - n + d`` and takes ``floor(U budget)`` of the alive slots (entry order)
    followed by the walk's rows that can leave (all but the newest)."""
    first = budget - n  # updates before the first death
    D = max(0, bs - first)
    slots = np.empty(D, dtype=np.int64)
    new = np.empty(D, dtype=np.int64)
    alive = np.arange(n)  # slots are in entry order; the first na are alive
    na = n
    fresh = np.empty(max(bs, 0), dtype=np.int64)  # the walk's rows that can leave now
    nf = 0
    made = 0
    for d in range(D):
        while made < first + d:  # death d comes after the walk's row first + d
            fresh[nf] = made
            nf += 1
            made += 1
        u = splitmix64_uniform(seed, counter + d)
        i = min(int(u * budget), budget - 1)
        if i < na:
            slots[d] = alive[i]
            new[d] = -1
            for j in range(i, na - 1):  # (list.pop(i))
                alive[j] = alive[j + 1]
            na -= 1
        else:
            k = fresh[i - na]
            slots[d] = n + k
            new[d] = k
            for j in range(i - na, nf - 1):
                fresh[j] = fresh[j + 1]
            nf -= 1
    return slots, new
