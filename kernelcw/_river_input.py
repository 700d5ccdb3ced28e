"""What :mod:`kernelcw.river` accepts from a stream, checked before the adapter
changes anything: feature values that are numbers, not text (numpy reads ``"3.5"``
and ``b"3.5"`` as 3.5: a number that arrives as text is a category or a field left
unparsed, and is refused as ``"red"`` is), and frames whose column names are unique
(features are placed by name: a repeated name would be two columns of a model that
registers it once). Plain functions of the input, no adapter state.
"""

from __future__ import annotations

import decimal
import math
import numbers
from collections import Counter

import numpy as np
from sklearn.base import clone

from ._diag_stream import _PLAIN, is_number, sum_of_squares
from .estimators._base import CWEstimator
from .estimators._labels import _unique_labels
from .spec import inert_parameters

__all__ = [
    "TEXT",
    "check_labels",
    "check_rows",
    "checked_template",
    "columns",
    "too_large",
    "declared_labels",
    "dict_row",
    "frame_values",
    "label_array",
    "label_rows",
    "not_a_number",
    "repeated",
    "template",
]

#: Values refused as text, whatever numpy would make of them.
TEXT = (str, bytes)


def _missing(v) -> bool:
    """pandas' NA and NaT in an object column: read as NaN, which the caller names."""
    return type(v).__name__ in ("NAType", "NaTType")


def _overflows(v) -> bool:
    try:
        float(v)
    except OverflowError:
        return True
    except (TypeError, ValueError):
        return False
    return False


def not_a_number(where: str, value) -> TypeError:
    return TypeError(
        f"{where} is {value!r}: kernelcw learns from numbers only (encode categories "
        "first, e.g. river.preprocessing.OneHotEncoder)"
    )


def dict_row(x: dict, cols: list[int], width: int) -> np.ndarray:
    """A (1, width) row holding ``x``'s values at ``cols``; TypeError naming a value
    that is text or no number. (None and pandas' NA read as NaN: the caller's check
    names it.)"""
    text = [k for k, v in x.items() if isinstance(v, TEXT)]
    if text:
        raise not_a_number(f"feature {text[0]!r}", x[text[0]])
    values = list(x.values())
    if not _PLAIN.issuperset(map(type, values)):  # (a list [1.0] once read as 1.0)
        for i, (k, v) in enumerate(zip(x, values, strict=True)):
            if _missing(v):  # (pandas' NA: missing, as None is)
                values[i] = math.nan
            elif type(v) not in _PLAIN and not is_number(v):
                raise not_a_number(f"feature {k!r}", v)
    row = np.zeros((1, width))
    try:
        row[0, cols] = values
    except OverflowError:  # (an int, or a fraction, past float64's range)
        big = next(k for k, v in x.items() if _overflows(v))
        raise ValueError(f"feature {big!r} is beyond float64's range") from None
    except (TypeError, ValueError) as exc:
        bad = next(k for k, v in x.items() if not isinstance(v, numbers.Real))
        raise not_a_number(f"feature {bad!r}", x[bad]) from exc
    return row


def repeated(names: list) -> list:
    """The names that occur more than once, in order of first occurrence (equal as
    dict keys, the adapter's index: ``1``, ``1.0`` and ``True`` are one name)."""
    return [k for k, n in Counter(names).items() if n > 1]


def frame_values(X) -> tuple[list, np.ndarray]:
    """A pandas frame's column names and its values as float64 (n, len(names)).
    ValueError for a repeated column name, TypeError for values that are not numbers
    (text named by row and column)."""
    names = list(X.columns)
    twice = repeated(names)
    if twice:
        raise ValueError(
            f"X names {', '.join(map(repr, twice))} more than once: features are placed "
            "by name (rename or drop the repeated columns)"
        )
    for name, column in X.items():
        if column.dtype.kind in "cmM":  # complex, durations, dates: numbers to numpy
            raise not_a_number(f"column {name!r} (dtype {column.dtype})", column.iloc[0])
        if column.dtype.kind not in "biuf":  # only these hold numbers alone
            for i, v in enumerate(column.tolist()):
                if not (is_number(v) or _missing(v)):  # (text included)
                    raise not_a_number(f"row {i}, column {name!r}", v)
    try:
        values = X.to_numpy(dtype=np.float64)
    except OverflowError:  # (an int of an object column past float64's range)
        row, name = next((i, c) for c, col in X.items() for i, v in enumerate(col) if _overflows(v))
        raise ValueError(f"row {row}, column {name!r} is beyond float64's range") from None
    except (TypeError, ValueError) as exc:
        raise TypeError(
            "X holds values that are not numbers: kernelcw learns from numbers only "
            "(encode categories first)"
        ) from exc
    return names, values


def check_labels(labels: list) -> None:
    """ValueError for a NaN or infinite label, as the estimators refuse them (after
    scikit-learn); a NaN is also a label of its own to a dict, each one new."""
    for v in labels:
        if v is None:  # (river's predict_one says None for "no prediction yet")
            raise ValueError("label None is no class label (drop the row, or name its class)")
        try:
            hash(v)
            nan = bool(v != v)
        except TypeError:  # (a list, pandas' NA: no label to compare or count)
            raise TypeError(
                f"label {v!r} is no class label (labels are hashable, comparable values)"
            ) from None
        if nan:
            raise ValueError(f"label {v!r}: a NaN is no class label (drop or impute the row)")
        if _infinite(v):
            raise ValueError(f"label {v!r}: an infinite value is no class label")


def _infinite(v) -> bool:
    """Whether a label is an infinite number (a float's or a Decimal's infinity; ints and
    fractions, of any size, are finite)."""
    if isinstance(v, decimal.Decimal):
        return v.is_infinite()
    return isinstance(v, numbers.Real) and not isinstance(v, numbers.Rational) and math.isinf(v)


def declared_labels(classes) -> list:
    """The declared ``classes``, sorted and distinct, as the estimators sort labels
    (:func:`kernelcw.estimators._labels._unique_labels`: ValueError if they cannot be)."""
    given = list(classes)
    check_labels(given)
    labels = _unique_labels(label_array(given), f"classes={classes!r}").tolist()
    if len(labels) < 2:
        raise ValueError(f"classes={classes!r} must hold at least two labels")
    return labels


def label_array(labels: list) -> np.ndarray:
    arr = np.empty(len(labels), dtype=object)
    arr[:] = labels
    return arr


def label_rows(labels: list) -> dict:
    """Each label's (1, K) target row in {-1, +1} (K = 1 for two labels)."""
    if len(labels) == 2:
        return {labels[0]: np.array([[-1.0]]), labels[1]: np.array([[1.0]])}
    eye = 2.0 * np.eye(len(labels)) - 1.0
    return {v: eye[i : i + 1].copy() for i, v in enumerate(labels)}


def columns(index: dict, width: int, names: list) -> tuple[list[int], int]:
    """The columns of ``names`` (unique) in an adapter's ``index`` of ``width`` columns,
    new ones after the index's, and the width they need; the index is not changed."""
    cols, n = [], len(index)
    for k in names:
        j = index.get(k)
        if j is None:
            j, n = n, n + 1
        cols.append(j)
    return cols, max(width, n)


def check_rows(M: np.ndarray, a: float, extra: float = 0.0) -> tuple[int, int] | None:
    """Where the rows ``M`` break the estimator's own checks: (i, j) of the first NaN or
    infinity, (i, -1) for a row whose squared norm (plus ``extra``, the intercept's
    c^2) times ``a`` overflows, or None."""
    sq = [sum_of_squares(r) + extra for r in M]
    if all(math.isfinite(s * a) for s in sq):
        return None
    bad = np.argwhere(~np.isfinite(M))
    if bad.size:
        return int(bad[0][0]), int(bad[0][1])
    return next(i for i, s in enumerate(sq) if not math.isfinite(s * a)), -1


def too_large(i: int) -> str:
    return f"row {i} is too large: its squared norm times a overflows float64"


def template(estimator):
    """The adapter's ``estimator`` (None: ``AROWClassifier(covariance="diag")``), or a
    TypeError if it is not a kernelcw estimator."""
    if estimator is None:
        from .estimators import AROWClassifier

        return AROWClassifier(covariance="diag")
    if not isinstance(estimator, CWEstimator):
        raise TypeError(
            f"estimator={estimator!r} is not a kernelcw estimator (CWClassifier, "
            "SCWClassifier, AROWClassifier, PAClassifier, PerceptronClassifier, "
            "SOPClassifier); river's own learners need no adapter"
        )
    return estimator


def checked_template(estimator, width: int = 1):
    """(a clone of the adapter's ``estimator`` for a model of ``width`` features, its
    checked parameters): its errors at a stream's first row, not at its second label.
    A ``gamma=None`` its kernel reads becomes the value it is fixed to, 1 / width (the
    kernel's own for None), so that the model's estimator says it (saved, cloned) after
    the model widens."""
    est = clone(template(estimator))
    if isinstance(est.kernel, str) and est.kernel == "precomputed":
        raise ValueError("kernel='precomputed' has no features: a river stream cannot use it")
    checked = est._checked_params()
    if est.gamma is None and "gamma" not in inert_parameters(est.get_params(), checked[1]):
        est.gamma = 1.0 / width
        checked = est._checked_params()
    return est, checked
