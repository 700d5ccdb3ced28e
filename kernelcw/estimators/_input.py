"""Input checks of the estimators: rows (and, through :mod:`._labels`, labels and
classes), all before any state changes (a bad call leaves the model as it was)."""

from __future__ import annotations

import contextlib
import math

import numpy as np
import scipy.sparse as sp
from numba import njit
from sklearn.utils import check_array
from sklearn.utils.validation import validate_data

from .._validation import csr_rows_in_range
from ..engines.base import RowsUnchecked
from ..spec import intercept_value
from ._labels import _check_targets, resolve_classes

_FLOAT_MAX = float(np.finfo(np.float64).max)


def _values(X) -> np.ndarray:
    return X.data if sp.issparse(X) else X


def _finite(big) -> bool:
    """Whether values whose :func:`_max_abs` is ``big`` (None: no values) are all
    finite."""
    return big is None or math.isfinite(big)


def _first_nonfinite_row(X) -> int:
    """Index of the first row holding NaN or +-inf, or -1."""
    if sp.issparse(X):
        bad = np.flatnonzero(~np.isfinite(X.data))
        if bad.size == 0:
            return -1
        return int(np.searchsorted(X.indptr, bad[0], side="right") - 1)
    bad = np.flatnonzero(~np.isfinite(X).all(axis=1))
    return int(bad[0]) if bad.size else -1


def checked_values(X, offset: int = 0):
    """(X, big): X itself, or for a CSR matrix with duplicate or unsorted entries a
    canonical copy (duplicates summed), and :func:`_max_abs` of its stored values
    (``big``). The sparse walks read each stored entry as one x_j. CSR indices come as
    int32 wherever they fit (scipy's own choice below 2^31 entries): the compiled walks
    are compiled for one index type, not again for int64 (2-3 s in a fresh install);
    only the index arrays are copied, the values are shared. A CSR matrix whose
    structure is out of range is refused first (:func:`_check_csr`, which gives ``big``
    too)."""
    if not sp.issparse(X):
        return X, _max_abs(X)
    big = _check_csr(X, offset)
    wide = X.indices.dtype != np.int32 or X.indptr.dtype != np.int32
    if wide and max(X.nnz, X.shape[1]) < 2**31:
        idx = (X.indices.astype(np.int32), X.indptr.astype(np.int32))
        X = type(X)((X.data, *idx), shape=X.shape)
    if not X.has_canonical_format:
        X = X.copy()
        X.sum_duplicates()
        big = _max_abs(X)  # (sums of duplicates)
    return X, big


def _check_csr(X, offset: int = 0):
    """ValueError unless CSR matrix X's row pointers and column indices are in range
    (scipy's constructor does not check them; the compiled walks index the model's
    arrays with them, unchecked: out of range they wrote outside them). A bad column
    index is named with its row (``offset`` + its index in X). Returns
    :func:`_max_abs` of the stored values (None: none), the first nnz of X.data."""
    n, d = X.shape
    indptr, indices, data = X.indptr, X.indices, X.data
    nnz = int(indptr[-1]) if indptr.shape[0] else -1
    ordered, lo, hi, big = False, 0, 0, None
    if (
        indptr.shape[0] == n + 1
        and indptr[0] == 0
        and 0 <= nnz <= min(indices.shape[0], data.shape[0])
    ):
        values = np.ascontiguousarray(data[:nnz], dtype=np.float64)  # (a view, as a rule)
        ordered, lo, hi, big = _csr_scan(indptr, indices, values)
        big = big if nnz else None
    if not ordered:
        raise ValueError(
            f"sparse X is malformed: its row pointers (indptr) do not describe {n} rows "
            "of its stored values (build it with scipy.sparse.csr_matrix from dense "
            "rows, or check it with X.check_format(full_check=True))"
        )
    if nnz and (lo < 0 or hi >= d):
        cols = indices[:nnz]
        j = int(np.flatnonzero((cols < 0) | (cols >= d))[0])
        row = int(np.searchsorted(indptr, j, side="right")) - 1
        raise ValueError(
            f"sparse X stores column index {int(cols[j])} in row {row + offset} (0-based), "
            f"outside its {d} columns (0 to {d - 1})"
        )
    return big


@njit(cache=True)
def _csr_scan(indptr, indices, values):
    """A CSR matrix's structure and stored ``values`` (its first nnz) in one compiled
    call: (row pointers non-decreasing, least and largest column index,
    :func:`_max_abs_c` of the values). Where these were three numpy passes, hashed text
    at 2^20 spent 0.75 ms of a 7 ms ``fit`` in them after a pause, 0.5 here (by hand)."""
    nnz = values.shape[0]
    ordered = True
    for i in range(indptr.shape[0] - 1):
        if indptr[i + 1] < indptr[i]:
            ordered = False
    lo = np.int64(0)
    hi = np.int64(0)
    if nnz > 0:
        lo = np.int64(indices[0])
        hi = lo
        for k in range(nnz):
            j = np.int64(indices[k])
            lo = min(lo, j)
            hi = max(hi, j)
    return ordered, lo, hi, _max_abs_c(values) if nnz > 0 else 0.0


def _check_finite_rows(X, big, offset: int = 0) -> None:
    """ValueError naming the first row with NaN or infinity (``offset`` + its index in
    X: X's first row is the stream's row ``offset``). ``big``: X's :func:`_max_abs`
    (finite: every value is finite; the rows are searched only otherwise)."""
    if _finite(big):
        return
    row = _first_nonfinite_row(X)
    if row >= 0:
        raise ValueError(
            f"Input X contains NaN or infinity in row {row + offset} (0-based); remove or "
            "impute it first"
        )


def _max_abs(X) -> float | None:
    """max |x| over X's stored values: NaN if any is NaN, else inf if any is infinite;
    None for no values."""
    v = _values(X)
    if v.size == 0:
        return None
    if v.dtype == np.float64 and (v.flags.c_contiguous or v.flags.f_contiguous):
        return _max_abs_c(v if v.flags.c_contiguous else v.T)  # (order does not matter)
    return float(np.max(np.abs(v)))  # strided, or labels of other types: max keeps NaN


@njit(cache=True)
def _max_abs_c(v):
    """:func:`_max_abs` of a C-contiguous float64 array, from the values' bit patterns
    with the sign bit cleared: their largest is the bits of max |x| (IEEE order is the
    integers' order for non-negative values; NaN's patterns lie above inf's). One pass
    of integer maxima, which the compiler vectorises, where a float pass must keep
    NaN's order: half the time of numpy's max and min together on 1.5 million values
    (by hand). A call of one row checks its values by :func:`row_passes` instead."""
    bits = v.reshape(-1).view(np.int64)
    m = 0
    for i in range(bits.shape[0]):
        m = max(m, bits[i] & 0x7FFFFFFFFFFFFFFF)
    out = np.empty(1, np.int64)
    out[0] = m
    return out.view(np.float64)[0]


@njit(cache=True)
def row_passes(x, a, extra):
    """Whether the full checks surely pass a dense float64 row ``x`` (1-d) for the prior
    scale ``a`` > 0 and the intercept's ``extra = c^2``: ``a (|x|^2 + c^2)`` at most half
    of float64's largest value, which holds
    only if every value is finite (NaN and inf make it NaN or inf) and a times the
    squared norm does not overflow in any order of summation (what
    :func:`_first_overflowing_row` refuses). One compiled pass for a call of one row,
    where :func:`_max_abs` and that bound took two calls and their Python. False says
    nothing: the full checks then decide, and name what is wrong."""
    sq = extra
    for i in range(x.shape[0]):
        sq += x[i] * x[i]
    return a * sq <= 0.5 * _FLOAT_MAX


def _first_overflowing_row(X, a: float, big, extra: float = 0.0) -> int:
    """First row whose squared norm, with the intercept's ``extra = c^2``, times ``a``
    overflows float64, or -1.

    The bound (max|x_ij|^2 * (entries per row) + c^2) * a settles the common case
    without a pass over the rows. ``big``: X's :func:`_max_abs`.
    """
    if big is None:  # no values
        return -1
    per_row = X.shape[1]  # a bound on a row's entries that needs no pass over X
    if sp.issparse(X) and not math.isfinite((big * big * per_row + extra) * a):
        per_row = int(np.diff(X.indptr).max())  # the stored ones
    if math.isfinite((big * big * per_row + extra) * a):
        return -1
    if sp.issparse(X):
        sq = np.asarray(X.multiply(X).sum(axis=1)).ravel()
    else:
        sq = np.einsum("ij,ij->i", X, X)
    bad = np.flatnonzero(~np.isfinite((sq + extra) * a))
    return int(bad[0]) if bad.size else -1


def validate_X(est, X, reset: bool, engine=None):
    """Rows for prediction: scikit-learn's checks (feature count, names), canonical
    CSR, and no NaN or infinity (named by row); for a primal model with an intercept,
    its constant column appended (``engine``: the model's engine the caller holds, by
    default ``est._engine``)."""
    if reset or not _plain_X(est, X):  # (a plain X: what validate_data would return)
        X = validate_data(
            est, X, accept_sparse="csr", dtype=np.float64, ensure_all_finite=False, reset=reset
        )
    X, big = checked_values(X)  # one pass serves both checks
    _check_finite_rows(X, big)
    spec = (est._engine if engine is None else engine).spec
    _check_not_too_large(X, spec.a, big, extra=spec.intercept**2)
    return with_intercept(X, spec)


def with_intercept(X, spec):
    """X with the intercept's constant column ``spec.intercept`` appended, for a primal
    engine with an intercept (the dual engine adds ``c^2`` to its kernel instead; the
    primal diagonal engine appends c to CSR rows as it walks them, so those pass as
    they are: ``PrimalDiagEngine._tail``)."""
    c = spec.intercept
    if not c or spec.form == "dual":
        return X
    if spec.form == "primal_diag" and sp.issparse(X):  # its walk appends c to each row
        return X  # (PrimalDiagEngine._tail): the copy took half of a fit on wide text
    if sp.issparse(X):
        col = sp.csr_matrix(np.full((X.shape[0], 1), c))
        return sp.hstack([X, col], format="csr")
    out = np.empty((X.shape[0], X.shape[1] + 1))
    out[:, :-1] = X
    out[:, -1] = c
    return out


def check_stream(X, y, est, rows: int = 65536) -> None:
    """The value checks ``fit`` makes, on a whole stream before any of it is learnt (so
    that an error names the row in the stream, not in a part of it): X's rows finite and
    not too large for the estimator ``est``'s a (and intercept), y (1-d) class labels.
    X (any array-like or sparse matrix with rows) is read ``rows`` rows at a time, each
    as ``fit`` converts it (float64, CSR): at most one such piece is held at once, not a
    float64 copy of the stream."""
    _check_targets(y)
    a, extra = est.a, intercept_value(est) ** 2
    for lo in range(0, X.shape[0], rows):
        piece = X[lo : lo + rows]
        piece = check_array(piece, accept_sparse="csr", dtype=np.float64, ensure_all_finite=False)
        piece, big = checked_values(piece, lo)
        _check_finite_rows(piece, big, lo)
        _check_not_too_large(piece, a, big, lo, extra)


def _check_not_too_large(X, a: float, big, offset: int = 0, extra: float = 0.0) -> None:
    """The check ``fit`` makes: a row whose squared norm (with the intercept's constant
    feature c: ``extra = c^2``) times ``a`` overflows float64 would give an infinite
    margin variance (and ``predict_proba`` a silent 0.5, or no update at all)."""
    row = _first_overflowing_row(X, float(a), big, float(extra))
    if row >= 0:
        alone = extra and _first_overflowing_row(X, float(a), big) == row  # (without c)
        with_c = " with the intercept's intercept_scaling^2" if extra and not alone else ""
        raise ValueError(
            f"row {row + offset} of X is too large: its squared norm{with_c} times a "
            "overflows float64 (rescale X)"
        )


#: The input types :func:`_plain_X` takes: numpy's arrays and scipy's CSR.
_PLAIN_TYPES = (np.ndarray, sp.csr_matrix, getattr(sp, "csr_array", np.ndarray))


def _plain_X(est, X, reset: bool = False) -> bool:
    """Whether ``validate_data(est, X, reset=reset, accept_sparse="csr",
    dtype=np.float64, ensure_all_finite=False)`` would return X as it is and neither
    raise nor warn: exactly for a float64 2-d ndarray with at least one row and the
    feature count the model was fitted with, of a model fitted without feature names
    (scikit-learn's checks would find nothing to convert, name or warn about), or a
    scipy CSR matrix or array of float64 with those shapes (returned as it is too).
    With ``reset`` (a first call), any count of at least one feature: the caller then
    records what ``validate_data`` would (:func:`_record_features`).
    Calls of one row at a time spend most of their time in those checks otherwise (a
    one-row ``predict`` of a B = 200 kernel model, 67 us, by hand: more than half; a
    CSR row of hashed text, 280 us a ``partial_fit``, most of it pandas-like input
    detection; a ``fit`` of 20 Newsgroups hashed at 2^20, 0.5 of its 7 ms)."""
    if type(X) not in _PLAIN_TYPES or X.dtype != np.float64 or X.ndim != 2:
        return False
    if reset:
        return X.shape[0] > 0 and X.shape[1] > 0
    d = est.__dict__
    if X.shape[0] == 0 or X.shape[1] != d.get("n_features_in_", -1):
        return False
    return "feature_names_in_" not in d


def _plain_arrays(est, X, y, reset: bool = False):
    """(X, y) unchanged when ``validate_data(est, X, y, reset=reset, accept_sparse="csr",
    dtype=np.float64, ensure_all_finite=False)`` would return them as they are and
    neither raise nor warn, else None (then scikit-learn checks them): a plain X
    (:func:`_plain_X`) and a 1-d ndarray y of the same length with integer, bool or
    finite float labels."""
    if type(y) is not np.ndarray or y.ndim != 1 or not _plain_X(est, X, reset):
        return None
    if y.shape[0] != X.shape[0]:
        return None
    kind = y.dtype.kind
    if kind in "iub" or (kind == "f" and _finite(_max_abs(y))):
        return X, y
    return None


def _record_features(est, X) -> None:
    """What ``validate_data(reset=True)`` records of a plain X (:func:`_plain_X`): its
    feature count, and no feature names (a plain X has none)."""
    est.n_features_in_ = X.shape[1]
    est.__dict__.pop("feature_names_in_", None)


def validate_training(
    est, X, y, classes, first_call: bool, square: bool = False, then=None, late: bool = False
):
    """All checks before any state changes; returns (X, y, classes_, late).

    ``square``: a precomputed kernel's X must be the whole Gram matrix (``fit``).
    ``then(X, classes_)`` runs last (e.g. the memory check). A first call's
    ``validate_data(reset=True)`` (or for plain arrays :func:`_record_features`) writes
    ``n_features_in_`` and ``feature_names_in_``:
    its callers (``fit`` and a first ``partial_fit``) put them back if anything fails
    (:func:`kernelcw._interrupt.put_back`); a later call's (``reset=False``) writes
    nothing. ``late`` (an engine that checks CSR rows as it walks them,
    :attr:`kernelcw.engines.Engine.checks_rows`): X's values are left to it where X is
    CSR with int32 indices and row pointers in range, and the returned ``late`` says so
    (else False); should the walk refuse a row, :func:`checked_late` makes these
    checks. Their errors come first, as where they are made here: should a check of
    y or the classes fail, X's are made before it is raised.
    """
    plain = _plain_arrays(est, X, y, reset=first_call)
    if plain is None:
        X, y = validate_data(
            est,
            X,
            y,
            accept_sparse="csr",
            dtype=np.float64,
            ensure_all_finite=False,
            reset=first_call,
        )
    else:
        X, y = plain
        if first_call:
            _record_features(est, X)
    late = late and _walkable(X)
    if not late:
        X, big = checked_values(X)
        _check_finite_rows(X, big)
    if square and isinstance(est.kernel, str) and est.kernel == "precomputed":
        if X.shape[0] != X.shape[1]:
            raise ValueError(
                "kernel='precomputed': fit needs the square Gram matrix "
                f"K(X_train, X_train), got X of shape {X.shape}"
            )
    if not late:
        _check_not_too_large(X, est.a, big, extra=intercept_value(est) ** 2)
    with x_errors_first(est, X, late):  # (X's error first, as without late)
        _check_targets(y)
        classes_ = resolve_classes(est, y, classes, first_call)
        if then is not None:
            then(X, classes_)
    return X, y, classes_, late


def _walkable(X) -> bool:
    """CSR X whose values a walk that checks rows may read unchecked: int32 indices
    and row pointers, these in range (else the walk could read outside X's arrays, and
    so could a shuffle's ``X[order]``)."""
    if not sp.issparse(X) or not X.indices.dtype == X.indptr.dtype == np.int32:
        return False
    indptr = X.indptr
    return indptr.shape[0] == X.shape[0] + 1 and csr_rows_in_range(
        indptr, X.indices.shape[0], X.data.shape[0]
    )


@contextlib.contextmanager
def x_errors_first(est, X, late: bool):
    """Where X's values were left to the walk (``late``), an error raised before it
    comes after X's own checks (:func:`checked_late`), as when X was checked first."""
    try:
        yield
    except RowsUnchecked:  # (the walk's refusal: the caller checks X and learns again)
        raise
    except Exception:
        if late:
            checked_late(est, X)
        raise


def checked_late(est, X):
    """X's value checks (:func:`validate_training`'s, left to the walk where ``late``):
    X, canonical, or a ValueError naming the first row that is not finite or too large
    for ``est``'s a (and intercept). Whether X is canonical is found out anew (a walk
    refused it: scipy's cached flag may be stale, for indices changed in place)."""
    if sp.issparse(X):
        X = type(X)((X.data, X.indices, X.indptr), shape=X.shape)  # (no cached flags)
    X, big = checked_values(X)
    _check_finite_rows(X, big)
    _check_not_too_large(X, est.a, big, extra=intercept_value(est) ** 2)
    return X
