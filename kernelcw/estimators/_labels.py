"""Labels and classes of the estimators' training calls: the classes a first call
finds or is given, every label of a later call one of them, all before any state
changes (:mod:`._input` checks the rows)."""

from __future__ import annotations

import numpy as np
from numba import njit
from sklearn.utils.multiclass import check_classification_targets


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
    """np.unique of integer or bool labels by marking each value present (O(n), where
    the sort is O(n log n): 117 us for 11,293 labels), when their range is at most a
    few times their count and within +-2^62; else None."""
    x = labels.view(np.uint8) if labels.dtype.kind == "b" else labels
    if x.dtype == np.uint64 and int(x.max()) > 2**62:  # (past 2^63 int64 wraps them)
        return None
    x = np.require(x, np.int64, ["C", "W"])  # (one compiled form of _present)
    found = _present(x, 4 * x.size + 1024)
    return found.astype(labels.dtype) if found.size else None


@njit(cache=True)
def _present(x, span):
    """The values of int64 ``x`` (not empty) in increasing order, each once, where they
    lie within ``span`` of each other and within +-2^62; else none. One compiled call:
    its five numpy passes took 0.12 of a 6 ms fit of 20 Newsgroups after a pause (by
    hand)."""
    lo = x[0]
    hi = x[0]
    for v in x:
        lo = min(lo, v)
        hi = max(hi, v)
    if lo < -(2**62) or hi > 2**62 or hi > lo + span:  # (no overflow: lo >= -2^62)
        return np.empty(0, np.int64)
    seen = np.zeros(hi - lo + 1, np.bool_)
    for v in x:
        seen[v - lo] = True
    return np.flatnonzero(seen) + lo


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
