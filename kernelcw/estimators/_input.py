"""Input checks of the estimators: rows, labels and classes, all before any state
changes (a bad call leaves the model as it was)."""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp
from numba import njit
from sklearn.utils import check_array
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import validate_data

from ..spec import intercept_value

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


def _unique_labels(labels: np.ndarray, what: str) -> np.ndarray:
    """np.unique, with a clear error for labels that cannot be ordered (mixed types).
    Integer and bool labels within a range of a few times their count are counted
    instead (:func:`_counted_unique`, the same array)."""
    if labels.dtype.kind in "iub" and labels.ndim == 1 and labels.size:
        found = _counted_unique(labels)
        if found is not None:
            return found
    try:
        return np.unique(labels)
    except TypeError as exc:
        kinds = sorted({type(v).__name__ for v in labels.ravel()})  # (all: an error path)
        raise ValueError(
            f"{what} mixes label types ({', '.join(kinds)}) that cannot be sorted into classes: "
            "use one type"
        ) from exc


def _counted_unique(labels: np.ndarray) -> np.ndarray | None:
    """np.unique of integer or bool labels by a count of each value (O(n), where the
    sort is O(n log n): 25 against 117 us for 11,293 labels, by hand), when their range
    is at most a few times their count and within int64 without overflow; else None."""
    x = labels.view(np.uint8) if labels.dtype.kind == "b" else labels
    lo, hi = int(x.min()), int(x.max())
    if hi - lo > 4 * x.size + 1024 or lo < -(2**62) or hi > 2**62:
        return None
    present = np.flatnonzero(np.bincount(x.astype(np.int64) - lo, minlength=hi - lo + 1))
    return (present + lo).astype(labels.dtype)


def _check_targets(y: np.ndarray) -> None:
    """scikit-learn's check_classification_targets, without its cost for the common
    dtypes (it re-validates y each call: a third of a small fit's time). Integer, bool
    and string labels are classes by their dtype; floats must be integral; other
    (object) arrays go through scikit-learn's check."""
    kind = y.dtype.kind
    if kind in "iubUS":
        return
    if kind == "f":
        if not np.all(np.isfinite(y)):
            raise ValueError("Input y contains NaN or infinity.")
        if np.any(y != np.floor(y)):
            raise ValueError(
                "Unknown label type: continuous. Maybe you are trying to fit a classifier, "
                "which expects discrete classes on a regression target with continuous values."
            )
        return
    try:
        check_classification_targets(y)
    except (TypeError, ValueError):
        _unique_labels(y, "y")  # labels that cannot be sorted: our message, not "unknown"
        raise


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


def check_labels_in(y: np.ndarray, classes: np.ndarray) -> None:
    """ValueError naming the row of the first label in ``y`` outside ``classes``: for a
    whole stream checked before any of it is learnt (run_online, CombinedClassifier),
    where a chunk's or a part's call would refuse it later and name no row."""
    if y.dtype.kind in "biuf" and classes.dtype.kind in "biuf":
        outside = np.flatnonzero(~np.isin(y, classes))
        i = int(outside[0]) if outside.size else None
    else:
        known = set(classes.tolist())
        i = next((i for i, v in enumerate(y.tolist()) if v not in known), None)
    if i is not None:
        raise ValueError(
            f"y holds the label {y.tolist()[i]!r} at row {i}, not one of the classes "
            f"{classes.tolist()!r}"
        )


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


def validate_training(est, X, y, classes, first_call: bool, square: bool = False, then=None):
    """All checks before any state changes; returns (X, y, classes_).

    ``square``: a precomputed kernel's X must be the whole Gram matrix (``fit``).
    ``then(X, classes_)`` runs last (e.g. the memory check). A first call's
    ``validate_data(reset=True)`` (or for plain arrays :func:`_record_features`) writes
    ``n_features_in_`` and ``feature_names_in_``:
    its callers (``fit`` and a first ``partial_fit``) put them back if anything fails
    (:func:`kernelcw._interrupt.put_back`); a later call's (``reset=False``) writes
    nothing.
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
    X, big = checked_values(X)
    _check_finite_rows(X, big)
    if (
        square
        and isinstance(est.kernel, str)
        and est.kernel == "precomputed"
        and (X.shape[0] != X.shape[1])
    ):
        raise ValueError(
            "kernel='precomputed': fit needs the square Gram matrix "
            f"K(X_train, X_train), got X of shape {X.shape}"
        )
    _check_not_too_large(X, est.a, big, extra=intercept_value(est) ** 2)
    _check_targets(y)
    classes_ = resolve_classes(est, y, classes, first_call)
    if then is not None:
        then(X, classes_)
    return X, y, classes_


def _same_classes(classes, classes_: np.ndarray) -> bool:
    """``np.unique(classes)`` equals the model's (sorted, unique) ``classes_``: an
    elementwise match settles it without sorting (a partial_fit call per row passes the
    same classes every time)."""
    given = np.asarray(classes)
    if given.shape == classes_.shape and given.dtype == classes_.dtype:
        if given.dtype.kind in "iub" and given.size <= 64:  # exact: Python's ints
            if given.tolist() == classes_.tolist():
                return True
        elif bool((given == classes_).all()):
            return True
    return np.array_equal(np.unique(given), classes_)


def check_same_classes(classes, classes_) -> None:
    """A later ``partial_fit``'s ``classes=`` (None: not given) must name the classes
    of the first call, in any order."""
    if classes is not None and not _same_classes(classes, classes_):
        raise ValueError(
            f"classes={classes!r} is not the same as on the first call "
            f"to partial_fit ({classes_!r})"
        )


def resolve_classes(est, y, classes, first_call: bool) -> np.ndarray:
    """The classes: from ``classes=`` or y on the first call, else the model's (and
    ``classes=``, if given again, must agree); every label of y must be one."""
    if first_call:
        if classes is None:
            classes_ = _unique_labels(y, "y")
            if classes_.size < 2:
                raise ValueError(
                    f"y contains only one class ({classes_.tolist()[0]!r}); a classifier needs "
                    "two. Pass classes=[...] to partial_fit to declare the others."
                )
            return classes_  # (y's own labels: every one is a class)
        else:
            given = np.asarray(classes)
            if given.ndim != 1:
                raise ValueError(f"classes={classes!r} must be a 1-d list of labels")
            if given.dtype.kind == "f" and not np.all(np.isfinite(given)):
                raise ValueError(f"classes={classes!r} holds NaN or infinity")
            classes_ = _unique_labels(given, "classes")
            if classes_.size < 2:
                raise ValueError(f"classes={classes!r} must hold at least two labels")
    else:
        classes_ = est.classes_
        check_same_classes(classes, classes_)
    try:
        if y.dtype == classes_.dtype and y.dtype.kind in "iub" and y.shape[0] <= 8:
            # a row or a few (a call per row): Python's exact comparisons of ints
            known = classes_.tolist()
            if all(v in known for v in y.tolist()):
                return classes_
            unknown = np.array(sorted({v for v in y.tolist() if v not in known}), y.dtype)
        elif y.dtype == classes_.dtype and y.dtype.kind in "iub":
            # classes_ is sorted and unique: a binary search of y itself (no np.unique
            # of y first: for a row or a few, the sort cost more than the search)
            at = np.minimum(np.searchsorted(classes_, y), classes_.size - 1)
            bad = classes_[at] != y
            unknown = np.unique(y[bad]) if bad.any() else y[:0]
        else:
            labels = _unique_labels(y, "y")
            unknown = np.setdiff1d(labels, classes_)
    except TypeError as exc:  # labels of another type than the classes
        raise ValueError(
            f"y holds labels of another type than the classes {classes_.tolist()!r}"
        ) from exc
    if unknown.size:
        raise ValueError(
            f"y contains labels {unknown.tolist()!r} that are not in classes {classes_.tolist()!r}"
        )
    return classes_
