"""What :mod:`kernelcw.river` accepts from a stream, checked before the adapter
changes anything: frames whose column names are unique (features are placed by
name: a repeated name would be two columns of a model that registers it once).
Plain functions of the input, no adapter state.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

__all__ = ["frame_values", "repeated"]


def repeated(names: list) -> list:
    """The names that occur more than once, in order of first occurrence (equal as
    dict keys, the adapter's index: ``1``, ``1.0`` and ``True`` are one name)."""
    return [k for k, n in Counter(names).items() if n > 1]


def frame_values(X) -> tuple[list, np.ndarray]:
    """A pandas frame's column names and its values as float64 (n, len(names)).
    ValueError for a repeated column name, TypeError for values that are not numbers."""
    names = list(X.columns)
    twice = repeated(names)
    if twice:
        raise ValueError(
            f"X names {', '.join(map(repr, twice))} more than once: features are placed "
            "by name (rename or drop the repeated columns)"
        )
    try:
        values = X.to_numpy(dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(
            "X holds values that are not numbers: kernelcw learns from numbers only "
            "(encode categories first)"
        ) from exc
    return names, values
