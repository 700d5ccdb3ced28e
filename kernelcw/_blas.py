"""BLAS and LAPACK on sub-blocks of larger arrays, without copies.

``scipy.linalg.blas`` (f2py) copies any argument that is not contiguous, so a
leading ``n x n`` block of a capacity buffer is copied on every call. The
budgeted dual engine solves with such blocks once per input block, and the copy
would cost as much memory traffic as the solve. These wrappers call the same
routines through the function pointers scipy exports for Cython
(``scipy.linalg.cython_blas`` / ``cython_lapack``), so a sub-block is passed as a
pointer and a leading dimension, as in Fortran. Same library, same threads as
``scipy.linalg.blas`` (see :mod:`kernelcw.engines.dual.panels` on why one BLAS).

Arrays are C-ordered float64; every wrapper speaks in C terms and translates to
Fortran (a C-ordered ``A`` is the Fortran ``A'``). Callers pass views whose last
axis is contiguous; the leading dimension is the row stride.
"""

from __future__ import annotations

import ctypes

import numpy as np
import scipy.linalg.cython_blas as _cb
import scipy.linalg.cython_lapack as _cl
from numba import njit

__all__ = ["gemm_sub", "potrf_lower", "tpqrt_update", "trsm_lower_left", "trsv_lower"]

_get = ctypes.pythonapi.PyCapsule_GetPointer
_get.restype = ctypes.c_void_p
_get.argtypes = [ctypes.py_object, ctypes.c_char_p]
_name = ctypes.pythonapi.PyCapsule_GetName
_name.restype = ctypes.c_char_p
_name.argtypes = [ctypes.py_object]

_P = ctypes.c_void_p


def _fn(module, name: str, nargs: int):
    cap = module.__pyx_capi__[name]
    return ctypes.CFUNCTYPE(None, *([_P] * nargs))(_get(cap, _name(cap)))


_dtrsm = _fn(_cb, "dtrsm", 11)
_dtrsv = _fn(_cb, "dtrsv", 8)
_dgemm = _fn(_cb, "dgemm", 13)
_dpotrf = _fn(_cl, "dpotrf", 5)
_dtpqrt = _fn(_cl, "dtpqrt", 12)


def _c(ch: str):
    return ctypes.c_char_p(ch.encode())


def _i(v: int):
    return ctypes.byref(ctypes.c_int(int(v)))


def _d(v: float):
    return ctypes.byref(ctypes.c_double(float(v)))


def _ptr(A: np.ndarray) -> ctypes.c_void_p:
    return ctypes.c_void_p(A.ctypes.data)


def _ld(A: np.ndarray) -> int:
    if A.dtype != np.float64 or (A.ndim == 2 and A.shape[1] > 1 and A.strides[1] != 8):
        raise ValueError("expected float64 rows with a contiguous last axis")
    if A.ndim != 2:
        return 1
    ld = A.strides[0] // 8
    if A.shape[0] <= 1:
        ld = max(ld, A.shape[1])  # numpy may give a single row any stride
    if ld < A.shape[1] or ld < 1:
        raise ValueError(f"rows of {A.shape} overlap (row stride {A.strides[0]})")
    return max(1, ld)


def trsm_lower_left(L: np.ndarray, B: np.ndarray, trans: bool = False) -> None:
    """B <- L^-1 B (``trans``: L'^-1 B) in place; L (n x n) lower triangular, B (n x m).
    Only L's lower triangle is read (its strict upper triangle may hold other data)."""
    n, m = B.shape
    if n == 0 or m == 0:
        return
    # C: L X = B  <=>  Fortran: X' L' = B' with X' = B' (m x n), L' upper;
    # C: L' X = B <=>  Fortran: X' L = B', i.e. X' (L')' = B'
    _dtrsm(
        _c("R"),
        _c("U"),
        _c("T" if trans else "N"),
        _c("N"),
        _i(m),
        _i(n),
        _d(1.0),
        _ptr(L),
        _i(_ld(L)),
        _ptr(B),
        _i(_ld(B)),
    )


def trsv_lower(L: np.ndarray, x: np.ndarray, trans: bool = False) -> None:
    """x <- L^-1 x (``trans``: L'^-1 x) in place for one contiguous vector x; L as in
    :func:`trsm_lower_left` (one right-hand side: no packing of L, half the traffic)."""
    n = x.shape[0]
    if n == 0:
        return
    if x.dtype != np.float64 or x.ndim != 1 or x.strides[0] != 8:
        raise ValueError("expected a contiguous float64 vector")
    # C-ordered lower L is the Fortran upper L': L x = b is (L')' x = b
    _dtrsv(
        _c("U"),
        _c("N" if trans else "T"),
        _c("N"),
        _i(n),
        _ptr(L),
        _i(_ld(L)),
        _ptr(x),
        _i(1),
    )


def gemm_sub(
    alpha: float, A: np.ndarray, B: np.ndarray, beta: float, C: np.ndarray, trans_a: bool = False
) -> None:
    """C <- alpha op(A) B + beta C in place, op(A) = A' if trans_a (C-ordered)."""
    m, n = C.shape
    k = A.shape[0] if trans_a else A.shape[1]
    if m == 0 or n == 0:
        return
    if k == 0:
        if beta == 0.0:
            C[...] = 0.0  # BLAS semantics: C is not read when beta = 0
        else:
            C *= beta
        return
    # C' = B' op(A)'  (Fortran: C' is n x m; B' is n x k; op(A)' is k x m)
    _dgemm(
        _c("N"),
        _c("T" if trans_a else "N"),
        _i(n),
        _i(m),
        _i(k),
        _d(alpha),
        _ptr(B),
        _i(_ld(B)),
        _ptr(A),
        _i(_ld(A)),
        _d(beta),
        _ptr(C),
        _i(_ld(C)),
    )


def potrf_lower(M: np.ndarray) -> int:
    """Cholesky in place: the lower triangle of M (C-ordered) becomes L, M = L L'.
    The strict upper triangle is neither read nor written. Returns LAPACK's info."""
    n = M.shape[0]
    info = ctypes.c_int(0)
    if n:
        _dpotrf(_c("U"), _i(n), _ptr(M), _i(_ld(M)), ctypes.byref(info))
    return info.value


def tpqrt_update(L: np.ndarray, Lam: np.ndarray, nb: int = 64) -> int:
    """Rank-k update of a Cholesky factor in place: L L' + Lam Lam' = L_new L_new'.

    L (n x n, lower) and Lam (n x k) are C-ordered views. The QR factorisation
    of ``[L'; Lam']`` (LAPACK dtpqrt, triangular-pentagonal, blocked) gives
    ``R`` with ``R'R = L L' + Lam Lam'``; ``L_new = R'`` with its columns' signs
    made positive. Lam is overwritten. About 2 n^2 k flops, BLAS-3.
    """
    n, k = Lam.shape
    if n == 0 or k == 0:
        return 0
    nb = max(1, min(nb, n))
    T = np.empty((n, nb))  # Fortran nb x n, ld nb
    work = np.empty(nb * n)
    info = ctypes.c_int(0)
    # Fortran view: A = L' (n x n upper, ld), B = Lam' (k x n, ld)
    _dtpqrt(
        _i(k),
        _i(n),
        _i(0),
        _i(nb),
        _ptr(L),
        _i(_ld(L)),
        _ptr(Lam),
        _i(_ld(Lam)),
        _ptr(T),
        _i(nb),
        _ptr(work),
        ctypes.byref(info),
    )
    _positive_diagonal(L)  # L_new = R' D with D = sign(diag R)
    return info.value


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
