"""What the two primal engines share: the per-model counts record the compiled walks
fill, the rule record in the exact types they are compiled for, and the checks and
errors both engines raise.

State is kept in plain arrays with a leading model axis (one binary model per
one-vs-rest class; ``K = 1`` for a binary problem):

- ``mu``:    (K, d) means;
- ``sigma``: (K, d, d) full covariances, or (K, d) diagonals;
- ``Y``:     (n, K) labels in {-1, +1} for each binary model;
- ``out``:   (n, K) decision values ``mu . x`` *before* each round's update
  (what the online protocol predicts from), written by every walk.

Every walk changes ``mu``/``sigma`` in place and returns a :class:`Counts`.
``n_floored`` counts the rounds whose margin variance was raised to the floor
``VAR_FLOOR * a * |x|^2`` (:data:`kernelcw.rules.VAR_FLOOR`).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..rules import RuleParams

__all__ = ["Counts", "check_same_a", "new_counts", "raise_nonfinite", "rule_record"]


class Counts(NamedTuple):
    """(K,) int64 counts per binary model, filled in place by the compiled walks
    (the fields of :class:`kernelcw.engines.LearnResult` after the margins)."""

    #: rounds that changed the model
    n_updates: np.ndarray
    #: rounds whose ``sign(margin)`` (``sign(0) = +1``) differed from the label
    n_mistakes: np.ndarray
    #: rounds whose margin variance was raised to the floor
    n_floored: np.ndarray


def new_counts(K: int) -> Counts:
    """Zero counts for K models."""
    return Counts(*(np.zeros(K, dtype=np.int64) for _ in range(3)))


def rule_record(params: RuleParams) -> RuleParams:
    """``params`` with an ``int`` code and ``float`` scalars: the one type signature the
    compiled walks are built (and cached) for, whatever numbers the caller passed
    (an ``IntEnum`` member, ``C=1``, numpy scalars)."""
    return RuleParams(
        int(params.rule), float(params.phi), float(params.C), float(params.r), float(params.a)
    )


def check_same_a(old: float, new: float) -> None:
    """The prior scale ``a`` may not change under a fitted model."""
    if new != old:
        raise ValueError(
            f"a={new!r} differs from the a={old!r} this model started with; "
            "the prior scale is part of the stored state: call fit to start over"
        )


def raise_nonfinite(row: int) -> None:
    """The error of a walk that met a non-finite margin or step at ``row``."""
    raise FloatingPointError(
        f"non-finite margin or step at input row {row}: the model left float64's "
        "range (rescale X, or use a soft rule such as SCW or AROW)"
    )
