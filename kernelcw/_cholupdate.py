"""Rank-k updates of a Cholesky factor in place: ``L L' + Lam Lam' = L_new L_new'``.

A support vector leaving a factor form folds its column into the factor's trailing
rows (:mod:`kernelcw.engines.dual.queue`, :mod:`kernelcw.engines.dual.lazy`); so do
the Woodbury factors of the walks (:mod:`kernelcw.engines.dual.steps`). A few columns
go by Givens sweeps (:func:`givens_update`), more by LAPACK's blocked QR of
``[L'; Lam']`` (dtpqrt, :func:`tpqrt_update`), and columns that are zero above
increasing rows (the leavers' columns of a factor, each zero above its own row) by
the same QR taken band by band, so that the zeros cost nothing
(:func:`staircase_update`). Calls go through :mod:`kernelcw._blas`'s routine
addresses, on C-ordered views (a C-ordered lower ``L`` is the Fortran upper ``L'``).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, types

from ._blas import _M, _call, _caller, _fn, _fn12, _ld

__all__ = ["GIVENS_MAX_RANK", "givens_update", "staircase_update", "tpqrt_update"]

_dtpqrt = _fn("lapack", "dtpqrt")
_dtpmqrt = _fn("lapack", "dtpmqrt")
_fn17 = _caller(17)
_L, _T = ord("L"), ord("T")


@njit(cache=True)
def _positive_diagonal(L):
    """Flip the sign of the columns of lower-triangular L whose diagonal is negative
    (the strict upper triangle is left alone)."""
    n = L.shape[0]
    for i in range(n):
        for j in range(i + 1):
            if L[j, j] < 0.0 and j != i:
                L[i, j] = -L[i, j]
    for j in range(n):
        if L[j, j] < 0.0:
            L[j, j] = -L[j, j]


#: Rank updates of at most this many columns are made by Givens sweeps
#: (:func:`givens_update`), wider ones by LAPACK's blocked QR (dtpqrt).
GIVENS_MAX_RANK = 4


def tpqrt_update(L: np.ndarray, Lam: np.ndarray, nb: int = 64) -> int:
    """Rank-k update of a Cholesky factor in place: L L' + Lam Lam' = L_new L_new'.

    L (n x n, lower) and Lam (n x k) are C-ordered views. The QR factorisation
    of ``[L'; Lam']`` (LAPACK dtpqrt, triangular-pentagonal, blocked) gives
    ``R`` with ``R'R = L L' + Lam Lam'``; ``L_new = R'`` with its columns' signs
    made positive. Lam is overwritten (on the dtpqrt path). About 2 n^2 k flops, BLAS-3. For k up to
    :data:`GIVENS_MAX_RANK` (one row at a time: k = 1), k Givens sweeps do the same
    in a fraction of the time (LAPACK's blocking costs more than the work there).
    """
    n, k = Lam.shape
    if n == 0 or k == 0:
        return 0
    if k <= GIVENS_MAX_RANK:  # (Lam contiguous: the compiled callers' layout)
        givens_update(L, np.ascontiguousarray(Lam))
        return 0
    # one band from the first row: a single dtpqrt over all the columns
    return staircase_update(L, Lam, np.zeros(k, dtype=np.int64), group=k, nb=nb)


@njit(cache=True)
def givens_update(L, Lam):
    """L L' + Lam Lam' = L_new L_new' in place (L lower with a positive diagonal, its
    strict upper triangle untouched), one column x of Lam at a time by plane
    rotations: column m's rotation (c, s) = (L_mm, x_m) / r, r = hypot(L_mm, x_m),
    takes (L_im, x_i) to (c L_im + s x_i, c x_i - s L_im) in every row i > m. Taken
    row by row, so that L is read along its C-ordered rows: row i applies the
    rotations of the columns before it, then makes its own. Lam is left as it was.

    A row's x passes through its rotations one after the other, a chain of dependent
    multiply-adds that waits on each: rows are therefore taken four at a time, four
    chains through the columns before them (then each of the four finishes, in order,
    with the rotations of the group's rows before it). Every row makes the same
    operations in the same order as alone, so the result is the same to the bit, in
    about half the time (n = 100, one column: 7.5 -> 4.3 us; n = 200: 31 -> 13 us)."""
    n, k = Lam.shape
    c = np.empty(n)
    s = np.empty(n)
    for j in range(k):
        i = np.int64(0)  # (typed, not the literal 0: _finish_row compiles once)
        while i + 4 <= n:
            r0, r1, r2, r3 = L[i], L[i + 1], L[i + 2], L[i + 3]
            x0, x1, x2, x3 = Lam[i, j], Lam[i + 1, j], Lam[i + 2, j], Lam[i + 3, j]
            for m in range(i):
                cm, sm = c[m], s[m]
                l0, l1, l2, l3 = r0[m], r1[m], r2[m], r3[m]
                r0[m] = cm * l0 + sm * x0
                x0 = cm * x0 - sm * l0
                r1[m] = cm * l1 + sm * x1
                x1 = cm * x1 - sm * l1
                r2[m] = cm * l2 + sm * x2
                x2 = cm * x2 - sm * l2
                r3[m] = cm * l3 + sm * x3
                x3 = cm * x3 - sm * l3
            _finish_row(r0, x0, i, i, c, s)
            _finish_row(r1, x1, i, i + 1, c, s)
            _finish_row(r2, x2, i, i + 2, c, s)
            _finish_row(r3, x3, i, i + 3, c, s)
            i += 4
        for t in range(i, n):  # (the last n % 4 rows, one at a time)
            _finish_row(L[t], Lam[t, j], np.int64(0), t, c, s)


@njit(cache=True)
def _finish_row(row, xi, lo, i, c, s):
    """Row i of :func:`givens_update`, whose x is ``xi`` after the rotations of the
    columns before ``lo``: the rotations of columns lo..i-1, then its own (c[i], s[i])."""
    for m in range(lo, i):
        lim = row[m]
        row[m] = c[m] * lim + s[m] * xi
        xi = c[m] * xi - s[m] * lim
    lii = row[i]
    r = math.hypot(lii, xi)
    c[i] = lii / r
    s[i] = xi / r
    row[i] = r


def staircase_update(L: np.ndarray, Lam: np.ndarray, first: np.ndarray, group: int = 32,
                     nb: int = 32) -> int:  # fmt: skip
    """:func:`tpqrt_update` for a ``Lam`` whose column j is zero in the rows before
    ``first[j]`` (non-decreasing). The QR of ``[L'; Lam']`` is taken in bands of
    ``group`` columns of Lam: the band of columns g .. g + group - 1 starts at row
    ``first[g]`` and ends where the next band starts; its reflectors (dtpqrt over
    Lam's columns 0 .. g + group - 1 only, the others being zero there) are applied
    to the rows after it (dtpmqrt). For k columns at rows spread evenly over n, about
    2/3 n^2 k flops instead of 2 n^2 k. Lam is overwritten; 0 or LAPACK's info."""
    n, k = Lam.shape
    if n == 0 or k == 0:
        return 0
    f = np.ascontiguousarray(first, dtype=np.int64)
    if f.shape[0] != k or np.any(np.diff(f) < 0) or f[0] < 0 or f[-1] > n:
        raise ValueError("first must hold k non-decreasing rows in [0, n]")
    sig = (types.int64, _M, _M, types.int64[:], types.int64, types.int64)
    args = (_dtpmqrt, L, Lam, f, max(1, group), max(1, nb))
    return int(_call(_staircase, sig, _dtpqrt, *args))


def _staircase(fn, fn_apply, L, Lam, first, group, nb):
    n, k = Lam.shape
    ldl, ldm = _ld(L), _ld(Lam)
    T = np.empty(nb * n)
    work = np.empty(nb * n)
    ch = np.array([_L, _T], dtype=np.uint8)
    ints = np.zeros(12, dtype=np.int32)  # M, N, K, l, NB, LDV/LDB, LDT, LDA, info, N2
    qr = _fn12(fn)
    apply = _fn17(fn_apply)
    g = 0
    while g < k:
        act = min(g + group, k)
        c0 = first[g]
        c1 = first[act] if act < k else n
        w = c1 - c0
        if w > 0:
            nbg = min(nb, w)
            ints[0], ints[1], ints[2], ints[3], ints[4] = act, w, w, 0, nbg
            ints[5], ints[6], ints[7], ints[9] = ldm, nbg, ldl, n - c1
            # Fortran: A = L'[c0:c1, c0:c1] (upper), B = Lam'[:act, c0:c1]
            qr(ints[0:].ctypes, ints[1:].ctypes, ints[3:].ctypes, ints[4:].ctypes,
               L[c0:, c0:].ctypes, ints[7:].ctypes, Lam[c0:, :].ctypes, ints[5:].ctypes,
               T.ctypes, ints[6:].ctypes, work.ctypes, ints[8:].ctypes)  # fmt: skip
            if ints[8] != 0:
                return ints[8]
            if c1 < n:  # Q' on [L'[c0:c1, c1:]; Lam'[:act, c1:]]
                apply(ch[0:].ctypes, ch[1:].ctypes, ints[0:].ctypes, ints[9:].ctypes,
                      ints[2:].ctypes, ints[3:].ctypes, ints[4:].ctypes, Lam[c0:, :].ctypes,
                      ints[5:].ctypes, T.ctypes, ints[6:].ctypes, L[c1:, c0:].ctypes,
                      ints[7:].ctypes, Lam[c1:, :].ctypes, ints[5:].ctypes, work.ctypes,
                      ints[8:].ctypes)  # fmt: skip
                if ints[8] != 0:
                    return ints[8]
        g = act
    _positive_diagonal(L)
    return 0
