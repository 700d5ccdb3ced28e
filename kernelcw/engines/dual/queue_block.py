"""The queue form's products at the start of a walk, in one compiled call.

Before :func:`.leaver_walk.queue_walk` walks block inputs t0.., the queue form
(:mod:`.queue`) needs, over the support [O, N] at that point, ``W0 = L^-1 K0`` (split
at O | N), ``G = W0' W0``, ``rW = W0' r`` and the next leavers' ``Y0 = L^-1 E_cands``
products (:class:`.leaver_walk.Candidates`). Made from Python these were a dozen BLAS calls
and as many small numpy operations, each paying Python's and the dispatcher's
overhead: most of a one-row ``partial_fit``'s time with a budget of a few hundred.
Here they are one compiled call making the same BLAS calls with the same arguments
(:func:`kernelcw._blas.trsm_lower_left_c`, :func:`kernelcw._blas.gemm_sub_c`), so
the results are the same to the bit; for one input (a call of one row) on a model of
at most :data:`.one_input.ONE_INPUT_MAX_N` support vectors, compiled loops instead
(:mod:`.one_input`: the same values to rounding). Likewise the rows a walk appends are written
into the buffers by one compiled call (:func:`append_rows`), not eight numpy ones,
and the oldest leave the buffers and the slot arrays in one (:func:`drop_oldest`),
not a dozen. :func:`.queue.queue_part` makes the products, the walk and the append
in one call.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..._blas import gemm_sub_c, tri_record, trsm_lower_left_c
from ..._cholupdate import givens_update
from .one_input import ONE_INPUT_MAX_N, dot, solve_lower, sub_mv
from .quiet import quiet_factor
from .steps import own_block

__all__ = [
    "NO_FORWARD",
    "append_rows",
    "assemble_precision",
    "block_products",
    "drop_columns",
    "drop_oldest",
    "drop_slots",
    "forward_products",
    "gather_kernels",
    "grown_slots",
    "quiet_queue",
]


@njit(cache=True)
def gather_kernels(K0, Kbb, ks, t0, t1):
    """(K0c, Kss) for block inputs t0..t1-1: ``K0c[i] = K(support slot i, inputs)``,
    from row ks[i] of K0, or for ks[i] < 0 from block input -1-ks[i] (a row that
    entered earlier in the block), and ``Kss`` their own kernel block."""
    n = ks.shape[0]
    bs = t1 - t0
    K0c = np.empty((n, bs))
    for i in range(n):
        s = ks[i]
        for j in range(bs):
            K0c[i, j] = K0[s, t0 + j] if s >= 0 else Kbb[-1 - s, t0 + j]
    Kss = np.empty((bs, bs))
    for i in range(bs):
        for j in range(bs):
            Kss[i, j] = Kbb[t0 + i, t0 + j]
    return K0c, Kss


@njit(cache=True)
def forward_products(fns, bufs, nO, nN, K0, Kbb, ks, t0, t1):
    """The first products of :func:`block_products`: (K0c, Kss, WO, X, G, rW) with
    ``W0 = L^-1 K0c`` split at O | N (WO, X), ``G = W0' W0`` and ``rW = W0' r``."""
    LO, LNO, LN, rO, rN = bufs
    bs = t1 - t0
    K0c, Kss = gather_kernels(K0, Kbb, ks, t0, t1)
    if bs == 1 and nO + nN <= ONE_INPUT_MAX_N:  # one input: loops, not seven BLAS calls
        return (K0c, Kss) + _forward_one(bufs, nO, nN, K0c)
    # W0 = L^-1 K0 over [O, N] (forward)
    WO = K0c[:nO].copy()
    trsm_lower_left_c(fns, LO[:nO, :nO], WO, False)
    X = K0c[nO:].copy()
    gemm_sub_c(fns, -1.0, LNO[:nN, :nO], WO, 1.0, X, False)
    trsm_lower_left_c(fns, LN[:nN, :nN], X, False)
    G = np.empty((bs, bs))
    gemm_sub_c(fns, 1.0, WO, WO, 0.0, G, True)
    gemm_sub_c(fns, 1.0, X, X, 1.0, G, True)
    rW = np.empty((bs, 1))
    gemm_sub_c(fns, 1.0, WO, rO[:nO], 0.0, rW, True)
    gemm_sub_c(fns, 1.0, X, rN[:nN], 1.0, rW, True)
    return K0c, Kss, WO, X, G, rW


@njit(cache=True)
def _forward_one(bufs, nO, nN, K0c):
    """(WO, X, G, rW) of :func:`forward_products` for one input (``K0c``: n x 1)."""
    LO, LNO, LN, rO, rN = bufs
    WO = K0c[:nO].copy()
    w = WO.reshape(-1)  # (its 1-d, contiguous view, solved in place: .one_input)
    solve_lower(LO, np.int64(0), nO, w)
    X = K0c[nO:].copy()
    x = X.reshape(-1)
    sub_mv(LNO, nN, nO, w, x)
    solve_lower(LN, np.int64(0), nN, x)
    G = np.empty((1, 1))
    G[0, 0] = dot(w, w, nO) + dot(x, x, nN)
    rW = np.empty((1, 1))
    rW[0, 0] = dot(w, rO.reshape(-1), nO) + dot(x, rN.reshape(-1), nN)
    return WO, X, G, rW


@njit(cache=True)
def quiet_queue(fns, bufs, nO, nN, K0, Kbb, kap, y, rule, psd_tol):
    """:func:`.quiet.quiet_factor` at a one-row walk's first round: G and rW by
    :func:`forward_products`, as :func:`block_products` makes them for the walk.
    Returns (taken, f, the products: the walk's own, if the row goes on to it)."""
    ks = np.arange(nO + nN)  # (the slots at the walk's start, in order)
    pre = forward_products(tri_record(fns), bufs, nO, nN, K0, Kbb, ks, np.int64(0), np.int64(1))
    G, rW = pre[4], pre[5]
    taken, f = quiet_factor(G[0, 0], rW[0, 0], kap, y, rule, psd_tol)
    return taken, f, pre


#: ``pre`` for :func:`block_products` when there are no products to take (empty arrays of
#: the products' own types: one compiled specialization, not two, whether or not a try
#: made them; a walk always has at least one input, so an empty G marks it).
NO_FORWARD = tuple(np.empty((0, 0)) for _ in range(6))


@njit(cache=True)
def block_products(fns, bufs, nO, nN, K0, Kbb, ks, t0, t1, c, pre):
    """For block inputs t0..t1-1 on the support ``ks`` (row ks of K0, or for ks < 0 block
    input -1-ks), with the factor buffers ``bufs = (LO, LNO, LN, rO, rN)`` (O rows
    nO, N rows nN) and ``c`` candidates: (K0c, Kss, WO, X, G, rW, P0, H0, rho0), W0
    split at O | N as :meth:`.queue.QueueForm.forward` makes it and the candidates'
    products of :class:`.leaver_walk.Candidates`. ``fns``: a :class:`kernelcw._blas.TriBlas`.
    ``pre``: :func:`forward_products`'s result for these very inputs and support,
    which :func:`quiet_queue` made for a row it sent on (:data:`NO_FORWARD`: made here)."""
    LO, LNO, LN, rO, rN = bufs
    bs = t1 - t0
    if pre[4].shape[0] == 0:
        K0c, Kss, WO, X, G, rW = forward_products(fns, bufs, nO, nN, K0, Kbb, ks, t0, t1)
    else:
        K0c, Kss, WO, X, G, rW = pre
    if bs == 1 and c == 1 and nO + nN <= ONE_INPUT_MAX_N:  # (one input, one leaver: loops)
        return (K0c, Kss, WO, X, G, rW) + _candidate_one(bufs, nO, nN, WO, X)
    # the candidates: Y0 on O lives on the tail T = nO - c .. nO - 1 (L_O[T, T]^-1),
    # on N it is -L_N^-1 L_NO[:, T] L_O[T, T]^-1; columns in leaving order
    T0 = nO - c
    YO = np.eye(c)
    trsm_lower_left_c(fns, LO[T0:nO, T0:nO], YO, False)
    YO = np.ascontiguousarray(YO[:, ::-1])
    YN = np.zeros((nN, c))
    gemm_sub_c(fns, -1.0, LNO[:nN, T0:nO], YO, 0.0, YN, False)
    trsm_lower_left_c(fns, LN[:nN, :nN], YN, False)
    P0 = np.empty((c, bs))
    gemm_sub_c(fns, 1.0, YO, WO[T0:nO], 0.0, P0, True)
    gemm_sub_c(fns, 1.0, YN, X, 1.0, P0, True)
    H0 = np.empty((c, c))
    gemm_sub_c(fns, 1.0, YO, YO, 0.0, H0, True)
    gemm_sub_c(fns, 1.0, YN, YN, 1.0, H0, True)
    rho0 = np.empty((c, 1))
    gemm_sub_c(fns, 1.0, YO, rO[T0:nO], 0.0, rho0, True)
    gemm_sub_c(fns, 1.0, YN, rN[:nN], 1.0, rho0, True)
    return K0c, Kss, WO, X, G, rW, P0, H0, rho0[:, 0].copy()


@njit(cache=True)
def _candidate_one(bufs, nO, nN, WO, X):
    """(P0, H0, rho0) of :func:`block_products` for one input and one candidate, the
    oldest (O's last row): ``Y0 = [1 / L_O[-1, -1]; -L_N^-1 L_NO[:, -1] / L_O[-1, -1]]``."""
    LO, LNO, LN, rO, rN = bufs
    yo = 1.0 / LO[nO - 1, nO - 1]
    yn = np.empty(nN)
    for i in range(nN):
        yn[i] = -(LNO[i, nO - 1] * yo)
    solve_lower(LN, np.int64(0), nN, yn)
    P0 = np.empty((1, 1))
    P0[0, 0] = yo * WO[nO - 1, 0] + dot(yn, X.reshape(-1), nN)
    H0 = np.empty((1, 1))
    H0[0, 0] = yo * yo + dot(yn, yn, nN)
    rho0 = np.empty(1)
    rho0[0] = yo * rO[nO - 1, 0] + dot(yn, rN.reshape(-1), nN)
    return P0, H0, rho0


@njit(cache=True)
def append_rows(bufs, nO, nN, a, S, E, Ld, rn, WO, X, K0c, Kss):
    """The u = len(S) rows a walk appended (block inputs S) extend the factor of the
    support at its start, in the buffers ``bufs = (LNO, KNO, LN, rN)``: their entries
    ``a W0[:, S]'`` at O's and N's columns, their kernel values (the Gram cache: KNO,
    and LN's strict upper triangle), their own block (:func:`.steps.own_block`) and r."""
    LNO, KNO, LN, rN = bufs
    u = S.shape[0]
    for k in range(u):
        i = nN + k
        s = S[k]
        for j in range(nO):
            LNO[i, j] = a * WO[j, s]
            KNO[i, j] = K0c[j, s]
        for j in range(nO, LNO.shape[1]):
            LNO[i, j] = 0.0
        for j in range(nN):
            LN[i, j] = a * X[j, s]
            LN[j, i] = K0c[nO + j, s]
        rN[i, 0] = rn[k]
    own_block(Kss, S, E, Ld, a, LN[nN : nN + u, nN : nN + u])


@njit(cache=True)
def drop_columns(fns, bufs, nN, nO2, nO, qN):
    """O's rows nO2..nO-1 (a few: up to :data:`kernelcw._cholupdate.GIVENS_MAX_RANK`) leave,
    in the buffers ``bufs = (LN, LNO, rO, rN)``: L_N takes their columns of L_NO
    (Givens sweeps, as :func:`kernelcw._cholupdate.tpqrt_update` makes them for a few
    columns), which become zero, and ``r_N = L_N^-1 (q_N - L_NO r_O)`` with O's
    remaining nO2 rows (:meth:`.queue.QueueForm.refresh_rN`): a product and a solve of
    one column, by the loops of :mod:`.one_input` up to ONE_INPUT_MAX_N support
    vectors (so a walk of one input calls no BLAS: ``QueueForm.one_input_blas``), by
    BLAS above."""
    LN, LNO, rO, rN = bufs
    if nN > 0 and nO > nO2:
        givens_update(LN[:nN, :nN], np.ascontiguousarray(LNO[:nN, nO2:nO]))  # (one layout)
    for i in range(nN):
        for j in range(nO2, nO):
            LNO[i, j] = 0.0
        rN[i, 0] = qN[i]
    if nN + nO2 <= ONE_INPUT_MAX_N:  # (rO, rN: (cap, 1), their 1-d views contiguous)
        r = rN[:nN].reshape(-1)
        sub_mv(LNO, nN, nO2, rO[:nO2].reshape(-1), r)
        solve_lower(LN, np.int64(0), nN, r)
        return
    gemm_sub_c(fns, -1.0, LNO[:nN, :nO2], rO[:nO2], 1.0, rN[:nN], False)
    trsm_lower_left_c(fns, LN[:nN, :nN], rN[:nN], False)


@njit(cache=True)
def _without(x, lo, hi):
    """A new array: ``x`` without its entries lo..hi-1."""
    out = np.empty(x.shape[0] - (hi - lo), dtype=x.dtype)
    out[:lo] = x[:lo]
    out[lo:] = x[hi:]
    return out


@njit(cache=True)
def drop_slots(slots, lo, hi):
    """The slot arrays ``(entry, kap, zeta, qv, ks)`` without slots lo..hi-1 (O's
    leavers), as new arrays (a checkpoint holds the old ones)."""
    entry, kap, zeta, qv, ks = slots
    return (_without(entry, lo, hi), _without(kap, lo, hi), _without(zeta, lo, hi),
            _without(qv, lo, hi), _without(ks, lo, hi))  # fmt: skip


@njit(cache=True)
def drop_oldest(fns, bufs, nN, nO2, nO, slots):
    """:func:`drop_columns` (with q_N from the slots' ``qv``) and :func:`drop_slots`
    in one compiled call: the few oldest, O's rows nO2..nO-1, leave (``fns``: a
    :class:`kernelcw._blas.TriBlas`, or its plain tuple)."""
    drop_columns(tri_record(fns), bufs, nN, nO2, nO, slots[3][nO:])
    return drop_slots(slots, nO2, nO)


@njit(cache=True)
def grown_slots(entry, kap, ks, clock, kap_t, S, t0):
    """The slot records with a walk's new rows appended, as new arrays (a checkpoint
    holds the old ones): entries ``clock, clock + 1, ...``, their k(x, x) from the
    walk's ``kap_t``, and kernel source ``-1 - (t0 + S)`` (block inputs t0 + S)."""
    u = S.shape[0]
    entry = np.concatenate((entry, clock + np.arange(u)))
    kap = np.concatenate((kap, kap_t[S]))
    ks = np.concatenate((ks, -1 - (t0 + S)))
    return entry, kap, ks


@njit(cache=True)
def assemble_precision(KO, nO, KNO, KN, nN, kap, perm, a, zeta, out):
    """``out``: lower triangle ``a K + diag(1 / zeta)``, strict upper triangle ``K``,
    over the slots [O[:nO], N[:nN]] taken in the order ``perm`` (``zeta`` already in
    that order). K is read from the queue's Gram cache: the strict upper triangles of
    ``KO`` and ``KN``, ``KNO``, and ``kap`` on the diagonal. One pass, no temporaries."""
    n = nO + nN
    for i in range(n):
        si = perm[i]
        for j in range(i):
            sj = perm[j]
            lo = min(si, sj)
            hi = max(si, sj)
            if hi < nO:
                k = KO[lo, hi]
            elif lo >= nO:
                k = KN[lo - nO, hi - nO]
            else:
                k = KNO[hi - nO, lo]
            out[i, j] = a * k
            out[j, i] = k
        out[i, i] = a * kap[si] + 1.0 / zeta[i]
