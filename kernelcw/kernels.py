"""Kernels: blocks K(A, B) through BLAS and the cheap diagonal k(x, x).

A name -> function registry in the style of scikit-learn's pairwise kernels.
Every block is a matrix product (``A @ B.T``, the squared distances expanded as
``|a|^2 + |b|^2 - 2 a.b``) except the laplacian's L1 distances; the diagonal
never forms a matrix (CW needs ``k(x, x)`` for every margin variance).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable

import numpy as np
import scipy.sparse as sp
from numba import njit
from scipy.linalg.blas import dgemm
from sklearn.metrics.pairwise import manhattan_distances

from ._validation import check_finite, check_positive
from .options import KERNELS

__all__ = [
    "KERNELS",
    "Kernel",
    "NonFiniteKernel",
    "kernel_diag",
    "kernel_matrix",
    "schwarz_violation",
]


def _dot(A, B) -> np.ndarray:
    """A @ B.T as a dense C-ordered array, for dense or sparse operands.

    Dense products go through scipy's BLAS, as the rest of the dual engine does
    (see kernelcw.engines.dual.panels: alternating numpy's and scipy's OpenBLAS costs time):
    with C-ordered A and B, ``(A B')'`` = ``B A'`` is one dgemm on the
    Fortran-ordered views ``B'`` and ``A'``, no copies.
    """
    if sp.issparse(A) or sp.issparse(B):
        out = A @ B.T
        if sp.issparse(out):
            out = out.toarray()
        return np.ascontiguousarray(out, dtype=np.float64)
    A = np.ascontiguousarray(A, dtype=np.float64)
    B = np.ascontiguousarray(B, dtype=np.float64)
    if A.shape[0] == 0 or B.shape[0] == 0 or A.shape[1] == 0:
        return np.zeros((A.shape[0], B.shape[0]))
    return dgemm(1.0, B.T, A.T, trans_a=1).T


def _int32_indices(A):
    """scikit-learn's sparse L1 distances take 32-bit indices only."""
    if sp.issparse(A) and (A.indices.dtype != np.int32 or A.indptr.dtype != np.int32):
        if A.nnz >= 2**31 or max(A.shape) >= 2**31:
            return A.toarray()
        A = sp.csr_matrix(A, copy=True)
        A.indices = A.indices.astype(np.int32)
        A.indptr = A.indptr.astype(np.int32)
    return A


def _sqnorms(A) -> np.ndarray:
    if sp.issparse(A):
        return np.asarray(A.multiply(A).sum(axis=1)).ravel()
    return np.einsum("ij,ij->i", A, A)


#: A squared distance |a - b|^2 computed as |a|^2 + |b|^2 - 2 a.b is trusted when it is
#: above NEAR (|a|^2 + |b|^2); below, the expansion has lost more than 4 of its 16 digits
#: to cancellation (near or equal rows, rows far from the origin) and the pair is
#: recomputed from the difference itself.
NEAR = 1e-4


@njit(cache=True)
def _expand_sqdist(D, sa, sb):
    """D (the products a.b) becomes -|a - b|^2 in place; pairs whose expansion cancelled
    (see NEAR) are set to exactly 0 and counted (the caller recomputes them)."""
    n, m = D.shape
    c = 0
    for i in range(n):
        for j in range(m):
            scale = sa[i] + sb[j]
            d2 = scale - 2.0 * D[i, j]
            if d2 <= NEAR * scale:
                c += 1
                d2 = 0.0
            D[i, j] = -d2
    return c


@njit(cache=True)
def _sqdist_dense(A, B, pairs):
    out = np.empty(pairs.shape[0])
    for p in range(pairs.shape[0]):
        i, j = pairs[p, 0], pairs[p, 1]
        acc = 0.0
        for k in range(A.shape[1]):
            t = A[i, k] - B[j, k]
            acc += t * t
        out[p] = acc
    return out


@njit(cache=True)
def _sqdist_csr(ap, ai, ad, bp, bi, bd, pairs):
    """|a_i - b_j|^2 for CSR rows with sorted indices, by merging them."""
    out = np.empty(pairs.shape[0])
    for p in range(pairs.shape[0]):
        i, j = pairs[p, 0], pairs[p, 1]
        s, e, t, f = ap[i], ap[i + 1], bp[j], bp[j + 1]
        acc = 0.0
        while s < e or t < f:
            if t >= f or (s < e and ai[s] < bi[t]):
                acc += ad[s] * ad[s]
                s += 1
            elif s >= e or bi[t] < ai[s]:
                acc += bd[t] * bd[t]
                t += 1
            else:
                diff = ad[s] - bd[t]
                acc += diff * diff
                s += 1
                t += 1
        out[p] = acc
    return out


#: Dense distance blocks of at most this many multiply-adds (rows x rows x features) are
#: computed from the differences directly: for a row or two against a small support set
#: (row-at-a-time learning under a budget) the BLAS expansion's own work is nothing and
#: its ~10 numpy calls were most of a call's time.
SMALL_BLOCK = 1 << 16

#: The largest polynomial degree (a C int, as libsvm's): larger ones overflow the
#: compiled kernels' integer power, and every value but 0 and 1 overflows float64 long
#: before it.
_MAX_DEGREE = 2**31 - 1


@njit(cache=True)
def _neg_sqdist_direct_rows(A, idx, B, scale=1.0):
    """-|a - b|^2 times ``scale`` for the rows ``A[idx]`` and every row of B, from the
    differences, without gathering the rows (a model's support rows in the store). An
    index outside A raises IndexError, as numpy's gather would (the loops themselves
    are unchecked)."""
    n, m, d = idx.shape[0], B.shape[0], A.shape[1]
    for i in range(n):
        if idx[i] < 0 or idx[i] >= A.shape[0]:
            raise IndexError("a support row index outside the store")
    D = np.empty((n, m))
    for i in range(n):
        r = idx[i]
        for j in range(m):
            acc = 0.0
            for k in range(d):
                t = A[r, k] - B[j, k]
                acc += t * t
            D[i, j] = -acc * scale
    return D


@njit(cache=True)
def rbf_direct_rows(A, idx, B, gamma, offset):
    """(K, whether every value is finite): ``exp(-gamma |a - b|^2) + offset`` for the
    rows ``A[idx]`` and every row of B (dense, C-ordered), from the differences
    (:func:`_neg_sqdist_direct_rows`), exp by the C library's (numba's ``math.exp``).
    Every small RBF block takes it (:func:`kernel_matrix`, with offset 0;
    :meth:`Kernel.rows_block`), so a model's kernel rows made alone and taken from a
    block are the same values, whichever exp numpy would take on the CPU; and the
    queue form's call of one row makes its row inside its own compiled call
    (:mod:`kernelcw.engines.dual.queue_row`). A call of one row against a small store:
    one compiled call where the exponents, numpy's exp, the offset and the check were
    four."""
    K = _neg_sqdist_direct_rows(A, idx, B, gamma)
    bad = 0
    for i in range(K.shape[0]):
        for j in range(K.shape[1]):
            v = math.exp(K[i, j]) + offset
            K[i, j] = v
            bad |= np.int64(not ((v - v) == 0.0))  # (inf - inf and NaN - NaN: NaN)
    return K, bad == 0


@njit(cache=True)
def _all_finite(K):
    """No inf or NaN in the 2-d K (x - x is NaN for both; an or-reduction of integers,
    which the compiler vectorises: a third of the time of numpy's max and min for a
    kernel row). Reads only."""
    bad = 0
    for i in range(K.shape[0]):
        for j in range(K.shape[1]):
            bad |= np.int64(not ((K[i, j] - K[i, j]) == 0.0))
    return bad == 0


@njit(cache=True)
def _offset_all_finite(K, offset):
    """:func:`_all_finite` after adding ``offset`` to every value of K in place (the
    same sum as numpy's ``K += offset``, in the same pass), for a kernel block the
    named kernels made (their own, writeable array; numba refuses a function that
    writes for a read-only one, even where the write never runs)."""
    bad = 0
    for i in range(K.shape[0]):
        for j in range(K.shape[1]):
            K[i, j] += offset
            bad |= np.int64(not ((K[i, j] - K[i, j]) == 0.0))
    return bad == 0


@njit(cache=True)
def schwarz_violation(K, da, db, rtol):
    """Where a kernel block breaks what every positive semi-definite kernel keeps:
    ``k(x, x) >= 0`` and ``|k(x, z)| <= sqrt(k(x, x) k(z, z))`` (Cauchy-Schwarz), for
    K (n x b) between inputs with self-values ``da`` (n) and ``db`` (b), with a
    relative tolerance for rounding. Returns (i, j) of the first break, i = -1 for a
    negative ``db[j]``, j = -1 for a negative ``da[i]``; (-1, -1) if none. (A
    distance matrix has zeros on its diagonal; a negated kernel, negative ones.)"""
    for i in range(da.shape[0]):
        if da[i] < 0.0:
            return i, -1
    for j in range(db.shape[0]):
        if db[j] < 0.0:
            return -1, j
    sb = np.sqrt(db) * (1.0 + rtol)
    for i in range(K.shape[0]):
        sa = np.sqrt(da[i])
        for j in range(K.shape[1]):
            if abs(K[i, j]) > sa * sb[j]:
                return i, j
    return -1, -1


def _small(A, B) -> bool:
    """Dense, and small enough to be computed from the differences (SMALL_BLOCK)."""
    # (two ndarrays, the case of every call of one row: no sparse look-ups)
    if not (type(A) is np.ndarray and type(B) is np.ndarray):
        if sp.issparse(A) or sp.issparse(B):
            return False
    return A.shape[0] * B.shape[0] * max(A.shape[1], 1) <= SMALL_BLOCK


def _neg_sqdist(A, B, scale: float = 1.0) -> np.ndarray:
    """-|a - b|^2 (times ``scale``) for every pair of rows: BLAS expansion, then the
    pairs where it cancelled recomputed exactly (so equal rows give exactly 0, at any
    scale). (Small dense RBF blocks come from the differences instead, exp included:
    :func:`rbf_direct_rows`, :data:`SMALL_BLOCK`.)"""
    D = _dot(A, B)
    if D.size == 0:
        return D
    sa, sb = _sqnorms(A), _sqnorms(B)
    if _expand_sqdist(D, sa, sb):
        # the cancelled pairs, and only they, are exactly 0 (the rest are < 0)
        pairs = np.argwhere(D == 0.0)
        if sp.issparse(A) or sp.issparse(B):
            Ac, Bc = sp.csr_matrix(A), sp.csr_matrix(B)
            Ac.sort_indices()
            Bc.sort_indices()
            d2 = _sqdist_csr(Ac.indptr, Ac.indices, Ac.data, Bc.indptr, Bc.indices, Bc.data, pairs)
        else:
            d2 = _sqdist_dense(np.ascontiguousarray(A), np.ascontiguousarray(B), pairs)
        D[pairs[:, 0], pairs[:, 1]] = -d2
    if scale != 1.0:
        D *= scale
    return D


def kernel_matrix(A, B, kernel: str, gamma: float, degree: float, coef0: float) -> np.ndarray:
    """K(A, B), shape (len(A), len(B)), for a named kernel (gamma already resolved)."""
    if kernel == "linear":
        return _dot(A, B)
    if kernel == "rbf":
        if _small(A, B):  # (the exp every small RBF block takes: rbf_direct_rows)
            A, B = (
                np.ascontiguousarray(A, dtype=np.float64),
                np.ascontiguousarray(B, dtype=np.float64),
            )
            return rbf_direct_rows(A, np.arange(A.shape[0]), B, float(gamma), 0.0)[0]
        D = _neg_sqdist(A, B, gamma)
        return np.exp(D, out=D)
    if kernel == "poly":
        K = _dot(A, B)
        K *= gamma
        K += coef0
        with np.errstate(over="ignore"):  # Kernel.block reports inf, naming the kernel
            return K**degree
    if kernel == "laplacian":
        D = manhattan_distances(_int32_indices(A), _int32_indices(B))
        D *= -gamma
        return np.exp(D, out=D)
    raise ValueError(f"unknown kernel {kernel!r}")


def kernel_diag(A, kernel: str, gamma: float, degree: float, coef0: float) -> np.ndarray:
    """k(a, a) for every row of A, without forming a matrix."""
    if kernel in ("rbf", "laplacian"):
        return np.ones(A.shape[0])
    sq = _sqnorms(A)
    if kernel == "linear":
        return sq
    if kernel == "poly":
        return (gamma * sq + coef0) ** degree
    raise ValueError(f"unknown kernel {kernel!r}")


class NonFiniteKernel(ValueError):
    """Kernel values that are NaN or infinite. ``column``: the column of the block
    K(A, B) holding the most (a row of B; -1 if unknown), which the dual engine names by
    its training row."""

    def __init__(self, message: str, column: int):
        super().__init__(message)
        self.column = column

    def __reduce__(self):  # (pickled by joblib and dask: both arguments)
        return type(self), (self.args[0], self.column)


class Kernel:
    """A validated kernel: ``block(A, B)`` and ``diag(A)``.

    ``precomputed`` kernels are handled by the engine (rows of a Gram matrix).
    A callable is used as ``k(A, B) -> (len(A), len(B))`` (an array, or a sparse
    matrix, densified) and its diagonal is evaluated row by row, one ``k(a, a)``
    call per row.
    """

    def __init__(self, kernel, gamma, degree, coef0, n_features: int, offset: float = 0.0):
        self.kernel = kernel
        #: A constant added to every value: ``k(x, z) + offset`` is the kernel of the
        #: feature map with one more coordinate, sqrt(offset) (an intercept's).
        self.offset = float(offset)
        self.name = getattr(kernel, "__name__", repr(kernel)) if callable(kernel) else kernel
        if callable(kernel):
            self._f: Callable | None = kernel
        else:
            self._f = None
            if kernel not in KERNELS:
                raise ValueError(
                    f"kernel={kernel!r} is not one of {', '.join(map(repr, KERNELS))} "
                    "or a callable k(A, B) -> matrix"
                )
        if gamma is None:
            self.gamma = 1.0 / max(1, n_features)
        else:
            self.gamma = check_positive("gamma", gamma)
        if (
            isinstance(degree, bool)
            or not isinstance(degree, numbers.Real)
            or not (1 <= degree <= _MAX_DEGREE)  # (NaN too; an int past float64 compares)
            or float(degree) != int(degree)
        ):
            # (gamma x.z + coef0)^degree is real for negative bases only at integer
            # degrees (as scikit-learn's SVC, which takes an int)
            raise ValueError(f"degree={degree!r} must be an integer from 1 to {_MAX_DEGREE}")
        self.degree = int(degree)
        self.coef0 = check_finite("coef0", coef0)

    @property
    def precomputed(self) -> bool:
        return self.kernel == "precomputed"

    def rows_direct(self, A, B) -> bool:
        """Whether :meth:`rows_block` of rows B against A computes from the differences,
        without BLAS: the built-in RBF kernel on small dense blocks (SMALL_BLOCK)."""
        return self._f is None and self.kernel == "rbf" and _small(A, B)

    def direct_operands(self, A, B) -> tuple | None:
        """Where :meth:`rows_direct`, the operands of :func:`rbf_direct_rows` after the
        row indices: (A, B as C-ordered float64, gamma, offset); else None."""
        if not self.rows_direct(A, B):
            return None
        A = np.ascontiguousarray(A, dtype=np.float64)
        B = np.ascontiguousarray(B, dtype=np.float64)
        return A, B, float(self.gamma), float(self.offset)  # (the offset: _checked's sum)

    def blas_free(self, A, B) -> bool:
        """Whether :meth:`block` (and :meth:`rows_block`) of rows B against A make no
        BLAS call: the laplacian kernel's L1 distances (scikit-learn's
        ``manhattan_distances``: scipy's cdist, or sparse code), a product with a sparse
        operand (scipy's sparse code), the RBF kernel on small dense blocks; not a
        callable's, nor a product of dense blocks."""
        kernel = self.kernel
        if self._f is not None or kernel == "precomputed":
            return False
        if kernel == "laplacian" or (kernel == "rbf" and _small(A, B)):  # (rows_direct's)
            return True
        return sp.issparse(A) or sp.issparse(B)

    @property
    def unit_diagonal(self) -> bool:
        """k(x, x) = 1 (plus the offset) for every x, exactly as :meth:`block` computes
        it: the named distance kernels, exp(-gamma * 0)."""
        return self._f is None and self.kernel in ("rbf", "laplacian")

    @property
    def known_psd(self) -> bool:
        """Positive semi-definite by construction: linear, rbf, laplacian, and poly with
        coef0 >= 0 (an integer degree). Callables and precomputed matrices are taken on
        trust and checked as they are used."""
        if self._f is not None or self.kernel == "precomputed":
            return False
        return self.kernel != "poly" or self.coef0 >= 0.0

    def block(self, A, B) -> np.ndarray:
        if self._f is not None:
            K = self._callable_block(A, B)
            if K.shape != (A.shape[0], B.shape[0]):
                raise ValueError(
                    f"kernel {self.name} returned shape {K.shape} for inputs of "
                    f"{A.shape[0]} and {B.shape[0]} rows; expected "
                    f"({A.shape[0]}, {B.shape[0]})"
                )
        else:
            K = kernel_matrix(A, B, self.kernel, self.gamma, self.degree, self.coef0)
        return self._checked(K)

    def rows_block(self, A, idx: np.ndarray, B) -> np.ndarray:
        """``block(A, B)[idx]``, the same values: for the RBF kernel where ``block``
        computes from the differences (:func:`_small`: a row learnt at a time against
        a small store), those of the rows ``idx`` alone, without gathering them
        (:func:`rbf_direct_rows`); else, and to report values that are not finite, the
        whole block, then its rows."""
        ops = self.direct_operands(A, B)
        if ops is not None:
            K, finite = rbf_direct_rows(ops[0], idx, ops[1], ops[2], ops[3])
            if finite:
                return K
        return self.block(A, B)[idx]  # (the values not finite: block names the column)

    def _checked(self, K) -> np.ndarray:
        """A block with the offset added, refused if it holds NaN or infinity."""
        offset = self.offset
        if self._f is not None:  # the callable's result may be the caller's own array
            if offset:
                K = K + offset  # a new array
            finite = _all_finite(K)
        elif offset:  # our own new array: added in place, in the finiteness pass
            finite = _offset_all_finite(K, offset)
        else:
            finite = _all_finite(K)
        if not finite:  # (the column with the most: one huge row of B fills its column,
            # and in K(B, B) a single entry of every other column)
            column = int(np.argmax((~np.isfinite(K)).sum(axis=0))) if K.ndim == 2 else -1
            raise NonFiniteKernel(
                f"kernel {self.name!r} returned NaN or infinity (e.g. a poly kernel whose "
                "values overflow: rescale X or lower gamma/degree)",
                column,
            )
        return K

    def _callable_block(self, A, B) -> np.ndarray:
        """The callable's K(A, B) as a float64 array: a sparse result densified (a Gram
        block is dense, its zeros are values; ``A @ B.T`` of CSR inputs is CSR), and a
        read-only or not C-ordered one copied (a cached block, a memmap slice, a
        transpose): the engines' compiled walks then see the one array type they are
        compiled for, where each other type compiled them all again (a minute of a cold
        test run)."""
        K = self._f(A, B)
        if sp.issparse(K):
            K = K.toarray()
        try:
            values = np.asarray(K)
            imaginary = np.iscomplexobj(values)  # (a cast would drop it, with a warning)
            if not imaginary:
                values = np.asarray(values, dtype=np.float64)
        except (TypeError, ValueError) as err:
            raise ValueError(
                f"kernel {self.name} returned a {type(K).__name__}, not a matrix of "
                f"numbers of shape ({A.shape[0]}, {B.shape[0]}): {err}"
            ) from None
        if imaginary:
            raise ValueError(f"kernel {self.name} returned complex values; a kernel's are real")
        K = values
        if not (K.flags.writeable and K.flags.c_contiguous):
            K = np.array(K, order="C")
        return K

    def diag(self, A) -> np.ndarray:
        if self._f is not None:
            rows = (A[i : i + 1] for i in range(A.shape[0]))
            return np.array([self.block(x, x)[0, 0] for x in rows])
        d = kernel_diag(A, self.kernel, self.gamma, self.degree, self.coef0)
        if self.offset:
            d += self.offset
        return d
