"""BLAS and LAPACK on sub-blocks of larger arrays, without copies.

``scipy.linalg.blas`` (f2py) copies any argument that is not contiguous, so a
leading ``n x n`` block of a capacity buffer is copied on every call. The
budgeted dual engine solves with such blocks once per input block, and the copy
would cost as much memory traffic as the solve. These wrappers call the same
routines through the function pointers scipy exports for Cython
(``scipy.linalg.cython_blas`` / ``cython_lapack``), so a sub-block is passed as a
pointer and a leading dimension, as in Fortran. Same library, same threads as
``scipy.linalg.blas`` (see :mod:`kernelcw.engines.dual.panels` on why one BLAS).

The calls are made from compiled code that takes the routine's address as an int
argument and makes it a function pointer of the routine's signature (an intrinsic per
argument count: the address is not baked into the compiled code, which is cached on
disk like the rest). Through ctypes from Python a call cost about 10 us of argument
conversion, as much as a small solve, and a one-row ``partial_fit`` makes a dozen;
compiled, about 2 us. (A ctypes function passed as the argument cost about 1.5 us of
``ctypes.cast`` per function per call: 10 us for each call of a walk handed the 7 of
:data:`SYM_BLAS`.) Each wrapper is compiled for
arrays of any layout (one signature each) when it is first called, and loaded from
the cache after that (tens of milliseconds): a process that never solves does not
pay for it.

Arrays are C-ordered float64; every wrapper speaks in C terms and translates to
Fortran (a C-ordered ``A`` is the Fortran ``A'``). Callers pass views whose last
axis is contiguous; the leading dimension is the row stride.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit, types
from numba.core.typing.ctypes_utils import get_pointer
from numba.extending import get_cython_function_address, intrinsic

from ._symloops import r1_loop, r2_loop, symv_loop

__all__ = [
    "gemm_sub",
    "rows_mv",
    "potrf_lower",
    "symm_lower",
    "trsm_lower_left",
    "trsm_lower_rows",
    "trsv_lower",
]


def _fn(module: str, name: str) -> int:
    """The routine's address (an int: the compiled callers take it as one)."""
    return int(get_cython_function_address(f"scipy.linalg.cython_{module}", name))


_dtrsm = _fn("blas", "dtrsm")
_dtrsv = _fn("blas", "dtrsv")
_dgemm = _fn("blas", "dgemm")
_dsymv = _fn("blas", "dsymv")
_dsyr = _fn("blas", "dsyr")
_dsyr2 = _fn("blas", "dsyr2")
_dsymm = _fn("blas", "dsymm")
_dsyrk = _fn("blas", "dsyrk")
_dgemv = _fn("blas", "dgemv")
_dpotrf = _fn("lapack", "dpotrf")
_dpotri = _fn("lapack", "dpotri")


def _caller(nargs: int):
    """An intrinsic that makes an address (an int) the function pointer of a routine of
    ``nargs`` pointer arguments returning nothing (Fortran's calling convention: every
    argument by reference), the type numba gives such a ctypes function. An int is
    unboxed for nothing, where a ctypes function argument cost about 1.5 us of Python
    (``ctypes.cast``) on every call of a compiled function that takes one."""
    ptr = types.ExternalFunctionPointer(
        types.none(*([types.voidptr] * nargs)), get_pointer=get_pointer
    )

    @intrinsic
    def at(typingctx, addr):
        if not (isinstance(addr, types.Integer) and addr.bitwidth == 64):
            return None  # an address only: anything else fails to compile

        def codegen(context, builder, sig, args):
            return builder.inttoptr(args[0], context.get_value_type(ptr))

        return ptr(addr), codegen

    return at


_fn5, _fn7, _fn8, _fn9, _fn10, _fn11, _fn12, _fn13 = (
    _caller(k) for k in (5, 7, 8, 9, 10, 11, 12, 13)
)

_M = types.float64[:, :]  # any layout: one compiled version per wrapper
_RM = types.Array(types.float64, 2, "A", readonly=True)  # read only (writable ones pass too)
_V = types.float64[:]
_GEMM = (types.float64, _RM, _RM, types.float64, _M, types.boolean, types.boolean)
_N, _T, _U, _R, _L = (ord(c) for c in "NTURL")


_compiled: dict = {}


def _call(impl, sig, fn, *args):
    """``impl(fn, *args)`` compiled for the signature ``sig`` (argument types after
    ``fn``, the routine's address), compiled or loaded from the cache on the first call."""
    kernel = _compiled.get(impl)
    if kernel is None:
        kernel = _compiled[impl] = njit(types.int64(types.intp, *sig), cache=True)(impl)
    return kernel(fn, *args)


@njit(cache=True)
def _ld(A):
    """A's leading dimension (row stride in elements), after checking its rows: float64
    with a contiguous last axis that do not overlap."""
    m, n = A.shape
    if n > 1 and A.strides[1] != 8:
        raise ValueError("expected float64 rows with a contiguous last axis")
    ld = A.strides[0] // 8
    if m <= 1:
        ld = max(ld, n)  # numpy may give a single row any stride
    if ld < n or ld < 1:
        raise ValueError("rows of the array overlap (row stride below the row length)")
    return max(1, ld)


def _trsm(fn, L, B, trans, rows):
    """One dtrsm with C-ordered lower L. ``rows`` False: B (n x m) <- L^-1 B, which
    Fortran sees as X' L' = B' (side R, upper L'; ``trans``: X' L = B'); ``rows``
    True: the right-hand sides are B's rows (m x n), B <- (L^-1 B')', which Fortran
    sees as (L')' X = B' (side L, upper L' transposed; ``trans``: L' X = B')."""
    a, b = B.shape
    side, transa = (_L, _N if trans else _T) if rows else (_R, _T if trans else _N)
    ch = np.array([side, _U, transa, _N], dtype=np.uint8)
    ints = np.array([b, a, _ld(L), _ld(B)], dtype=np.int32)
    one = np.ones(1)
    fp = _fn11(fn)
    fp(ch[0:].ctypes, ch[1:].ctypes, ch[2:].ctypes, ch[3:].ctypes, ints[0:].ctypes,
       ints[1:].ctypes, one.ctypes, L.ctypes, ints[2:].ctypes, B.ctypes,
       ints[3:].ctypes)  # fmt: skip
    return 0


def _trsv(fn, L, x, trans):
    n = x.shape[0]
    # C-ordered lower L is the Fortran upper L': L x = b is (L')' x = b
    ch = np.array([_U, _N if trans else _T, _N], dtype=np.uint8)
    ints = np.array([n, _ld(L), 1], dtype=np.int32)
    fp = _fn8(fn)
    fp(ch[0:].ctypes, ch[1:].ctypes, ch[2:].ctypes, ints[0:].ctypes, L.ctypes,
       ints[1:].ctypes, x.ctypes, ints[2:].ctypes)  # fmt: skip
    return 0


def _gemm(fn, alpha, A, B, beta, C, trans_a, trans_b):
    m, n = C.shape
    k = A.shape[0] if trans_a else A.shape[1]
    # C' = op(B)' op(A)'  (Fortran: C' is n x m; op(B)' is n x k; op(A)' is k x m; a
    # C-ordered X is the Fortran X')
    ch = np.array([_T if trans_b else _N, _T if trans_a else _N], dtype=np.uint8)
    ints = np.array([n, m, k, _ld(B), _ld(A), _ld(C)], dtype=np.int32)
    sc = np.array([alpha, beta])
    fp = _fn13(fn)
    fp(ch[0:].ctypes, ch[1:].ctypes, ints[0:].ctypes, ints[1:].ctypes, ints[2:].ctypes,
       sc[0:].ctypes, B.ctypes, ints[3:].ctypes, A.ctypes, ints[4:].ctypes, sc[1:].ctypes,
       C.ctypes, ints[5:].ctypes)  # fmt: skip
    return 0


def _potrf(fn, M):
    n = M.shape[0]
    ch = np.array([_U], dtype=np.uint8)
    ints = np.array([n, _ld(M), 0], dtype=np.int32)
    fp = _fn5(fn)
    fp(ch.ctypes, ints[0:].ctypes, M.ctypes, ints[1:].ctypes, ints[2:].ctypes)
    return ints[2]


def trsm_lower_left(L: np.ndarray, B: np.ndarray, trans: bool = False) -> None:
    """B <- L^-1 B (``trans``: L'^-1 B) in place; L (n x n) lower triangular, B (n x m).
    Only L's lower triangle is read (its strict upper triangle may hold other data).
    One contiguous column (m = 1) goes to dtrsv, which does not pack L."""
    if B.shape[0] == 0 or B.shape[1] == 0:
        return
    if B.shape[1] == 1 and B.strides[0] == 8:
        _call(_trsv, (_RM, _V, types.boolean), _dtrsv, L, B[:, 0], trans)
        return
    _call(_trsm, (_RM, _M, types.boolean, types.boolean), _dtrsm, L, B, trans, False)


def trsm_lower_rows(L: np.ndarray, BT: np.ndarray, trans: bool = False) -> None:
    """BT <- (L^-1 BT')' (``trans``: (L'^-1 BT')') in place: the right-hand sides are
    BT's rows (m x n, contiguous rows); L as in :func:`trsm_lower_left`. The same solve
    as :func:`trsm_lower_left` on ``BT'``, but BLAS sees its right-hand sides as
    contiguous columns and L from the left: at n = 4000, m = 256 it took 80 ms against
    97 ms on one thread (OpenBLAS 0.3.30, the right-hand-side form is slower)."""
    if BT.shape[0] == 0 or BT.shape[1] == 0:
        return
    _call(_trsm, (_RM, _M, types.boolean, types.boolean), _dtrsm, L, BT, trans, True)


def trsv_lower(L: np.ndarray, x: np.ndarray, trans: bool = False) -> None:
    """x <- L^-1 x (``trans``: L'^-1 x) in place for one contiguous vector x; L as in
    :func:`trsm_lower_left` (one right-hand side: no packing of L, half the traffic)."""
    if x.dtype != np.float64 or x.ndim != 1 or x.strides[0] != 8:
        raise ValueError("expected a contiguous float64 vector")
    if x.shape[0]:
        _call(_trsv, (_RM, _V, types.boolean), _dtrsv, L, x, trans)


def gemm_sub(
    alpha: float,
    A: np.ndarray,
    B: np.ndarray,
    beta: float,
    C: np.ndarray,
    trans_a: bool = False,
    trans_b: bool = False,
) -> None:
    """C <- alpha op(A) op(B) + beta C in place, op(X) = X' if trans_x (C-ordered)."""
    if C.shape[0] == 0 or C.shape[1] == 0:
        return
    if (A.shape[0] if trans_a else A.shape[1]) == 0:
        if beta == 0.0:
            C[...] = 0.0  # BLAS semantics: C is not read when beta = 0
        else:
            C *= beta
        return
    _call(_gemm, _GEMM, _dgemm, alpha, A, B, beta, C, trans_a, trans_b)


def potrf_lower(M: np.ndarray) -> int:
    """Cholesky in place: the lower triangle of M (C-ordered) becomes L, M = L L'.
    The strict upper triangle is neither read nor written. Returns LAPACK's info."""
    if M.shape[0] == 0:
        return 0
    return int(_call(_potrf, (_M,), _dpotrf, M))


# ---------------------------------------------------------------- symmetric level 2
# For compiled callers (the explicit dual form's O(n^2) passes): the routines travel
# in a :class:`SymBlas` record, and each wrapper takes it as its first argument.


class SymBlas(NamedTuple):
    """Addresses of the routines that compiled callers use: on symmetric matrices
    BLAS dsymv, dsyr, dsyr2, dsymm, dsyrk and LAPACK dpotrf, dpotri; and dgemv
    (:func:`rows_mv`). Append only: every field is an int, so code cached on disk in
    other modules reads them by position and would not see a reordering
    (``tests/test_blas.py`` pins the order)."""

    symv: int
    syr: int
    syr2: int
    potrf: int
    potri: int
    symm: int
    syrk: int
    gemv: int


#: The record compiled callers pass to :func:`sym_mv`, :func:`sym_r1`, :func:`sym_r2`,
#: :func:`sym_mm`, :func:`sym_rk`, :func:`sym_inverse` and :func:`rows_mv`.
SYM_BLAS = SymBlas(_dsymv, _dsyr, _dsyr2, _dpotrf, _dpotri, _dsymm, _dsyrk, _dgemv)


@njit(cache=True)
def sym_mv(fns, n, A, x, out):
    """``out[:n] = A[:n, :n] x[:n]`` for a symmetric A given by its lower triangle
    (C order; the strict upper triangle is not read). x and out contiguous. By BLAS
    dsymv, or by :func:`kernelcw._symloops.symv_loop` where the record's ``symv`` is 0
    (:data:`SYM_LOOPS`)."""
    _symv_at(fns.symv, n, A, x, out)


@njit(cache=True)
def _symv_at(fn, n, A, x, out):
    """:func:`sym_mv` with dsymv's address ``fn`` (0: the loop)."""
    if n == 0:
        return
    if fn == 0:
        symv_loop(n, A, x, out)
        return
    ch = np.array([_U], dtype=np.uint8)
    ints = np.array([n, _ld(A), 1], dtype=np.int32)
    sc = np.array([1.0, 0.0])
    fp = _fn10(fn)
    fp(ch.ctypes, ints[0:].ctypes, sc[0:].ctypes, A.ctypes, ints[1:].ctypes,
       x.ctypes, ints[2:].ctypes, sc[1:].ctypes, out.ctypes, ints[2:].ctypes)  # fmt: skip


#: Rank-one and rank-two updates of a triangle of at most this order (:func:`sym_r1`,
#: :func:`sym_r2`) are compiled loops, above it BLAS (dsyr, dsyr2): alone, on one
#: thread, 1.9 against dsyr's 2.7 us at n = 200 and 29 against 39 at 768, 2.3 against
#: dsyr2's 4.6 and 37 against 74; at n = 2,000 alike on one thread (432 against 376 us,
#: 622 against 686), and BLAS twice as fast with two threads, which "auto" gives the
#: explicit form's large blocks when a core is free. The same n always takes the same
#: way. The explicit walk's update of Pi saves Pi for the call's rollback in the same
#: loop (:func:`sym_r1_save`), a copy and dsyr above: by hand, one-row calls of AROW
#: (RBF, d = 50, every row updating and removing), median against copy + dsyr: B = 700
#: "project" 0.42 against 0.46 ms, "smallest" 0.40 against 0.42; B = 1000 "project"
#: 1.14 against 1.09 ms.
RANK_LOOP_MAX = 768


@njit(cache=True)
def sym_r1(fns, n, alpha, x, A):
    """The lower triangle of ``A[:n, :n]`` += alpha x x' (the strict upper triangle is
    not written)."""
    sym_r1_save(fns, n, alpha, x, A, A, np.bool_(False))  # (typed: one compile)


@njit(cache=True)
def sym_r1_save(fns, n, alpha, x, A, save, saving):
    """:func:`sym_r1`, and with ``saving`` the lower triangle of ``A[:n, :n]`` before
    it into ``save``'s: in the same pass up to :data:`RANK_LOOP_MAX` (read once, both
    written), else a copy, then BLAS dsyr. The same values saving or not (a walk's
    rollback copy of the matrix it changes first, without a pass of its own)."""
    if n == 0:
        return
    if n <= RANK_LOOP_MAX:
        r1_loop(n, alpha, x, A, save, saving)
        return
    if saving:
        for i in range(n):
            for j in range(i + 1):
                save[i, j] = A[i, j]
    ch = np.array([_U], dtype=np.uint8)
    ints = np.array([n, 1, _ld(A)], dtype=np.int32)
    sc = np.array([alpha])
    fp = _fn7(fns.syr)
    fp(ch.ctypes, ints[0:].ctypes, sc.ctypes, x.ctypes, ints[1:].ctypes, A.ctypes,
       ints[2:].ctypes)  # fmt: skip


@njit(cache=True)
def sym_r2(fns, n, alpha, x, y, A):
    """The lower triangle of ``A[:n, :n]`` += alpha (x y' + y x')."""
    if n == 0:
        return
    if n <= RANK_LOOP_MAX:
        r2_loop(n, alpha, x, y, A)
        return
    ch = np.array([_U], dtype=np.uint8)
    ints = np.array([n, 1, _ld(A)], dtype=np.int32)
    sc = np.array([alpha])
    fp = _fn9(fns.syr2)
    fp(ch.ctypes, ints[0:].ctypes, sc.ctypes, x.ctypes, ints[1:].ctypes, y.ctypes,
       ints[1:].ctypes, A.ctypes, ints[2:].ctypes)  # fmt: skip


@njit(cache=True)
def sym_mm(fns, n, m, A, B, C):
    """``C[:n, :m] = A[:n, :n] B[:n, :m]`` for a symmetric A given by its lower
    triangle (BLAS-3 dsymm; B and C with contiguous rows, C not overlapping A or B)."""
    _symm_at(fns.symm, n, m, A, B, C)


@njit(cache=True)
def _symm_at(fn, n, m, A, B, C):
    """:func:`sym_mm` with dsymm's address ``fn``."""
    if n == 0 or m == 0:
        return
    # Fortran sees C' = B' A (A on the right, its upper triangle = our lower one)
    ch = np.array([_R, _U], dtype=np.uint8)
    ints = np.array([m, n, _ld(A), _ld(B), _ld(C)], dtype=np.int32)
    sc = np.array([1.0, 0.0])
    fp = _fn12(fn)
    fp(ch[0:].ctypes, ch[1:].ctypes, ints[0:].ctypes, ints[1:].ctypes, sc[0:].ctypes,
       A.ctypes, ints[2:].ctypes, B.ctypes, ints[3:].ctypes, sc[1:].ctypes, C.ctypes,
       ints[4:].ctypes)  # fmt: skip


def symm_lower(A: np.ndarray, B: np.ndarray, C: np.ndarray) -> None:
    """:func:`sym_mm` from Python: ``C = A[:n, :n] B`` for B and C of n rows with
    contiguous rows (A's rest, a capacity buffer's, is not read); one column by
    dsymv, which does not pack A (dsymm did: 16 against 3 us at n = 200, by hand).
    Handing a compiled function :data:`SYM_BLAS` from Python costs its typing (about
    10 us, by hand), more than a small product."""
    n, m = B.shape
    if m == 1 and B.strides[0] == 8 and C.strides[0] == 8:  # (contiguous columns)
        _symv_at(_dsymv, n, A, B[:, 0], C[:, 0])
    else:
        _symm_at(_dsymm, n, m, A, B, C)


@njit(cache=True)
def sym_rk(fns, n, k, alpha, U, A):
    """The lower triangle of ``A[:n, :n]`` += alpha U U' with ``U = U[:n, :k]`` (BLAS-3
    dsyrk; the strict upper triangle is not written)."""
    if n == 0 or k == 0:
        return
    # Fortran: A' (upper) += alpha (U')' U', i.e. trans = 'T' on the k x n matrix U'
    ch = np.array([_U, _T], dtype=np.uint8)
    ints = np.array([n, k, _ld(U), _ld(A)], dtype=np.int32)
    sc = np.array([alpha, 1.0])
    fp = _fn10(fns.syrk)
    fp(ch[0:].ctypes, ch[1:].ctypes, ints[0:].ctypes, ints[1:].ctypes, sc[0:].ctypes,
       U.ctypes, ints[2:].ctypes, sc[1:].ctypes, A.ctypes, ints[3:].ctypes)  # fmt: skip


@njit(cache=True)
def rows_mv(fns, m, n, A, x, beta, y, trans):
    """With ``A = A[:m, :n]`` (contiguous rows): ``y[:m] = A x[:n] + beta y[:m]``, or
    with ``trans`` ``y[:n] = A' x[:m] + beta y[:n]`` (BLAS dgemv; x and y contiguous,
    y not overlapping A or x). A dot product per row in a compiled loop cannot be
    vectorised (its sum is sequential) and ran at a third of dgemv's speed."""
    if m == 0 or n == 0:
        if beta == 0.0:
            y[: n if trans else m] = 0.0
        return
    # Fortran sees the n x m matrix A': A x = (A')' x ('T'), A' x ('N')
    ch = np.array([_N if trans else _T], dtype=np.uint8)
    ints = np.array([n, m, _ld(A), 1], dtype=np.int32)
    sc = np.array([1.0, beta])
    fp = _fn11(fns.gemv)
    fp(ch.ctypes, ints[0:].ctypes, ints[1:].ctypes, sc[0:].ctypes, A.ctypes,
       ints[2:].ctypes, x.ctypes, ints[3:].ctypes, sc[1:].ctypes, y.ctypes,
       ints[3:].ctypes)  # fmt: skip


@njit(cache=True)
def sym_inverse(fns, n, A):
    """The lower triangle of ``A[:n, :n]`` (symmetric positive definite, by its lower
    triangle) becomes its inverse's, in place: Cholesky (dpotrf) and inverse from the
    factor (dpotri), n^3 flops (half of an LU inverse) and exactly symmetric. Returns
    LAPACK's info (> 0: not positive definite, A's lower triangle then undefined)."""
    if n == 0:
        return 0
    ch = np.array([_U], dtype=np.uint8)
    ints = np.array([n, _ld(A), 0], dtype=np.int32)
    fp = _fn5(fns.potrf)
    fp(ch.ctypes, ints[0:].ctypes, A.ctypes, ints[1:].ctypes, ints[2:].ctypes)
    if ints[2] != 0:
        return ints[2]
    fp = _fn5(fns.potri)
    fp(ch.ctypes, ints[0:].ctypes, A.ctypes, ints[1:].ctypes, ints[2:].ctypes)
    return ints[2]


# ---------------------------------------------------------------- for compiled callers
# trsm_lower_left and gemm_sub for compiled code (the queue form's products at a
# block's start, kernelcw.engines.dual.queue_block): branch for branch the wrappers
# above, calling the same routines with the same arguments. The addresses travel in a
# TriBlas record (an address in a global would be baked into the cached code).


class TriBlas(NamedTuple):
    """Addresses of BLAS dtrsm, dtrsv and dgemm, for :func:`trsm_lower_left_c` and
    :func:`gemm_sub_c`. Append only, as :class:`SymBlas`."""

    trsm: int
    trsv: int
    gemm: int


TRI_BLAS = TriBlas(_dtrsm, _dtrsv, _dgemm)

# The records as plain tuples, for a compiled call from Python to make the record from
# (:func:`sym_record`, :func:`tri_record`): numba types a plain tuple argument faster
# than a namedtuple (about 0.5 us a call for SYM_BLAS, by hand).
SYM_PLAIN = tuple(SYM_BLAS)
#: :data:`SYM_PLAIN` with dsymv's address 0: :func:`sym_mv` by
#: :func:`kernelcw._symloops.symv_loop`. With the rank updates' loops
#: (:data:`RANK_LOOP_MAX`), a walk of one input on fewer support vectors calls no BLAS
#: but LAPACK's refresh of "project"'s inverse, and needs no BLAS thread limit
#: (:meth:`kernelcw.engines.dual.form.Form.one_input_blas`).
SYM_LOOPS = (0,) + SYM_PLAIN[1:]
TRI_PLAIN = tuple(TRI_BLAS)


@njit(cache=True)
def sym_record(f):
    """The :class:`SymBlas` of :data:`SYM_PLAIN` (or of a SymBlas)."""
    return SymBlas(f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7])


@njit(cache=True)
def tri_record(f):
    """The :class:`TriBlas` of :data:`TRI_PLAIN` (or of a TriBlas)."""
    return TriBlas(f[0], f[1], f[2])


_trsm_c = njit(cache=True)(_trsm)
_trsv_c = njit(cache=True)(_trsv)
_gemm_c = njit(cache=True)(_gemm)


@njit(cache=True)
def trsm_lower_left_c(fns, L, B, trans):
    """:func:`trsm_lower_left` for compiled callers (``fns`` a :class:`TriBlas`)."""
    if B.shape[0] == 0 or B.shape[1] == 0:
        return
    if B.shape[1] == 1 and B.strides[0] == 8:
        _trsv_c(fns.trsv, L, B[:, 0], trans)
        return
    _trsm_c(fns.trsm, L, B, trans, False)


@njit(cache=True)
def gemm_sub_c(fns, alpha, A, B, beta, C, trans_a):
    """:func:`gemm_sub` for compiled callers (``fns`` a :class:`TriBlas`)."""
    if C.shape[0] == 0 or C.shape[1] == 0:
        return
    if (A.shape[0] if trans_a else A.shape[1]) == 0:
        if beta == 0.0:
            C[:, :] = 0.0  # BLAS semantics: C is not read when beta = 0
        else:
            C *= beta
        return
    _gemm_c(fns.gemm, alpha, A, B, beta, C, trans_a, False)
