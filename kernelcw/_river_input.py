"""What :mod:`kernelcw.river` accepts from a stream, checked before the adapter
changes anything: feature values that are numbers, not text (numpy reads ``"3.5"``
and ``b"3.5"`` as 3.5: a number that arrives as text is a category or a field left
unparsed, and is refused as ``"red"`` is), and frames whose column names are unique
(features are placed by name: a repeated name would be two columns of a model that
registers it once). Plain functions of the input, no adapter state.
"""

from __future__ import annotations

import numbers
from collections import Counter

import numpy as np

__all__ = ["TEXT", "dict_row", "frame_values", "not_a_number", "repeated"]

#: Values refused as text, whatever numpy would make of them.
TEXT = (str, bytes)


def not_a_number(where: str, value) -> TypeError:
    return TypeError(
        f"{where} is {value!r}: kernelcw learns from numbers only (encode categories "
        "first, e.g. river.preprocessing.OneHotEncoder)"
    )


def dict_row(x: dict, cols: list[int], width: int) -> np.ndarray:
    """A (1, width) row holding ``x``'s values at ``cols``; TypeError naming a value
    that is text or no number. (None reads as NaN: the caller's check names it.)"""
    text = [k for k, v in x.items() if isinstance(v, TEXT)]
    if text:
        raise not_a_number(f"feature {text[0]!r}", x[text[0]])
    row = np.zeros((1, width))
    try:
        row[0, cols] = list(x.values())
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
        if column.dtype.kind not in "biuf":  # only these hold numbers alone
            for i, v in enumerate(column.tolist()):
                if isinstance(v, TEXT):
                    raise not_a_number(f"row {i}, column {name!r}", v)
    try:
        values = X.to_numpy(dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(
            "X holds values that are not numbers: kernelcw learns from numbers only "
            "(encode categories first)"
        ) from exc
    return names, values
