"""The interface every engine (model form) implements.

An engine owns the fitted state of ``K`` binary one-vs-rest models of one form
(primal full covariance, primal diagonal, dual) and nothing else: no parameter
validation (that is :mod:`kernelcw.spec`), no labels (the estimator maps classes to
``Y`` in {-1, +1}), no warnings. Estimators talk to engines only through this
interface; save/load and model combination read :meth:`Engine.state_dict`.
"""

from __future__ import annotations

import threading
from typing import Any, NamedTuple, Protocol, runtime_checkable

import numpy as np

__all__ = [
    "Engine",
    "EveryRowLearns",
    "LearnResult",
    "Locked",
    "MaybeDrift",
    "OtherPath",
    "RowsUnchecked",
    "check_shapes",
    "check_width",
    "finite_margins",
    "learn_or_stabilise",
    "nonfinite_prediction",
]


class OtherPath(Exception):
    """Raised by :meth:`Engine.learn_row` where its row needs what only
    :meth:`Engine.learn` does (a budget that binds and switches the model's form, an
    error to report or to learn again in a stronger form), with the state part-way:
    the caller restores its checkpoint and calls :meth:`Engine.learn`."""


class MaybeDrift(ValueError):
    """The error of a numerically weak form that cannot tell its own drift from bad
    input: a margin variance below zero in the nu/Pi recursion for a kernel not known
    to be positive semi-definite (a callable, a precomputed matrix). As for a
    FloatingPointError, :func:`learn_or_stabilise` learns the call again in the stronger
    form where the engine has one, which tells them apart; else the caller gets it.
    ``what``: the failure alone, for the warning of a call learned again. ``floored``: a
    margin variance at its floor, which the weak form counts and goes on from where the
    engine has no stronger form after all."""

    def __init__(self, message: str, what: str, floored: bool = False):
        super().__init__(message)
        self.what = what
        self.floored = floored

    def __reduce__(self):  # (pickled by joblib and dask: every argument)
        return type(self), (self.args[0], self.what, self.floored)


class RowsUnchecked(ValueError):
    """A row of CSR X that an engine's walk refused as it read it, before learning
    anything of it (``row``: its index in X; None: X as a whole, its row pointers, or
    an engine that checks no rows in its walk): column indices out of order or out of
    range, or, in a call on values nobody has checked (``learn(checked=False)``,
    :attr:`Engine.checks_rows`), values not finite or too large. The rows before it
    may be learnt: the caller restores its checkpoint, and an estimator then makes its
    own checks, which name what is wrong."""

    def __init__(self, row: int | None):
        where = "X" if row is None else f"row {row} of X"
        super().__init__(
            f"{where}: sparse rows with column indices out of order or out of range, or "
            "values that are not finite or too large (the estimators check X first)"
        )
        self.row = row

    def __reduce__(self):
        return type(self), (self.row,)


class LearnResult(NamedTuple):
    """What one pass of :meth:`Engine.learn` reports, per binary model."""

    #: (n, K) decision values ``mu . x`` each round saw *before* its update (what the
    #: online protocol predicts from).
    margins: np.ndarray
    #: (K,) rounds that changed the model.
    n_updates: np.ndarray
    #: (K,) rounds whose ``sign(margin)`` (``sign(0) = +1``) differed from the label.
    n_mistakes: np.ndarray
    #: (K,) rounds whose margin variance was raised to the floor
    #: ``VAR_FLOOR * a * k(x, x)`` (:data:`kernelcw.rules.VAR_FLOOR`).
    n_floored: np.ndarray


@runtime_checkable
class Engine(Protocol):
    """One model form behind one interface.

    ``spec`` is the :class:`kernelcw.spec.EngineSpec` the engine was built from.
    Rows ``X`` are float64, dense C-ordered or canonical CSR, already validated.
    """

    spec: Any

    #: (a class attribute, where True) the engine's walk checks CSR rows as it reads
    #: them, and :meth:`learn` takes ``checked=False``: X's values then unchecked,
    #: which the walk refuses, with :class:`RowsUnchecked`, where they are not finite
    #: or too large (the estimators leave that check to it, :meth:`learn` raising
    #: :class:`RowsUnchecked` where it cannot). Engines without it check nothing.
    checks_rows: bool

    @property
    def n_models(self) -> int:
        """K, the number of binary models (1 for two classes)."""

    def set_rule(self, rule) -> None:
        """Use ``rule`` (a :class:`kernelcw.rules.RuleParams`) from the next round on:
        eta, C and r may change between calls; the prior scale ``a`` may not."""

    def learn(self, X, Y: np.ndarray, positions: np.ndarray | None = None) -> LearnResult:
        """One pass over the rows of X in order, ``Y`` (n, K) in {-1, +1}.

        ``positions``: the rows' positions in the training data (the dual engine's
        ``support_`` and the ``"precomputed"`` kernel's columns); by default the
        stream continues from the previous call. X of another width than the model's,
        or Y not (n, K): a ValueError, nothing changed (:func:`check_shapes`). Another
        exception may leave the state part-way: callers restore a :meth:`checkpoint`."""

    def decision(self, X) -> np.ndarray:
        """(n, K) mean margins ``mu . x``."""

    def margin_variance(self, X) -> np.ndarray:
        """(n, K) margin variances ``x' Sigma x``, floored as in learning."""

    def margins(self, X) -> tuple[np.ndarray, np.ndarray]:
        """(:meth:`decision`, :meth:`margin_variance`) of X, from one pass where the
        two share their work (the dual engine's kernel rows)."""

    def stabilise(self) -> bool:
        """After a :meth:`learn` call raised FloatingPointError or :class:`MaybeDrift`
        and was restored: move
        the models to a numerically stronger form of the same model, if the engine has
        one it has not used yet. True if it did (the caller may then try the call once
        more), False if there is nothing stronger."""

    def checkpoint(self, X) -> Any:
        """What :meth:`restore` needs to undo a :meth:`learn` call on X that raised (the
        engine chooses: a length to cut back to, a copy of what the call can touch, or
        nothing where a failed call changes nothing)."""

    def restore(self, checkpoint) -> None:
        """After a :meth:`learn` call on X raised: put the state back as it was when
        ``checkpoint(X)`` was taken; also after the call returned, where
        :meth:`undoes_finished` says so."""

    def undoes_finished(self, checkpoint) -> bool:
        """Whether :meth:`restore` of ``checkpoint`` also puts back a :meth:`learn`
        call that returned (nothing since). The estimator stores a call's counters
        after it returns; where this is False (a checkpoint that holds nothing because
        a failed call changes nothing) it holds Ctrl-C back from the call's start to
        that store instead."""

    def quiet_row(self, X, Y: np.ndarray) -> tuple[np.ndarray, Any, int] | None:
        """For one row X (1, d) that the engine can show changes nothing but the stream
        position: (the (1, K) margins :meth:`learn` would return, its mistakes as
        :class:`LearnResult` counts them, the stream position before the row), with
        nothing changed: the caller then moves the stream on (:meth:`seek`) and counts
        the mistakes. None: the row goes to :meth:`learn` (the default, and wherever
        the engine cannot show it cheaply)."""

    def seek(self, position: int) -> None:
        """Continue the stream from ``position`` (after a :meth:`quiet_row`, or to put
        it back); engines that keep no stream position ignore it."""

    def takes_row(self, X, Y: np.ndarray) -> bool:
        """Whether :meth:`learn_row` learns the one row X (1, d) (False: the default)."""

    def learn_row(self, X, Y: np.ndarray) -> tuple[float, int, int, int]:
        """:meth:`learn` of a row :meth:`takes_row` accepted, into one model, by a leaner
        way: (the margin, updates, mistakes, floored rounds) as Python numbers. Raises
        :class:`OtherPath` where it cannot finish the row."""

    def learn_row_at_once(self, X, Y: np.ndarray) -> tuple[float, int, int, int] | None:
        """One row X (1, d) learnt into the engine's one model by one compiled call,
        where its form has one: (the margin, updates, mistakes, floored rounds), the row
        learnt and committed, its undo kept until :meth:`row_counted`; or None, nothing
        changed (the default): the row then goes to :meth:`quiet_row`,
        :meth:`learn_row` or :meth:`learn`. An error or a Ctrl-C inside leaves the
        model as it was."""

    def undo_row(self) -> None:
        """The model as before the :meth:`learn_row_at_once` that changed it, if one did
        and :meth:`row_counted` has not come since (the caller's counters failed to
        land); else nothing."""

    def row_counted(self) -> None:
        """The caller's counters of the last :meth:`learn_row_at_once` landed: its undo
        goes."""

    def state_dict(self) -> dict[str, np.ndarray]:
        """The fitted state as plain numpy arrays (scalars as 0-d arrays), enough for
        :meth:`from_state` to rebuild an engine that continues bit for bit."""

    @classmethod
    def from_state(cls, spec, state: dict[str, np.ndarray]) -> Engine:
        """An engine built from ``spec`` holding the state of :meth:`state_dict`."""


class EveryRowLearns:
    """:meth:`Engine.quiet_row`, :meth:`Engine.seek`, :meth:`Engine.takes_row` and
    :meth:`Engine.learn_row_at_once` of an engine whose rows all go to
    :meth:`Engine.learn` and that keeps no stream position
    (the primal engines: their one-row calls are already cheap)."""

    def quiet_row(self, X, Y: np.ndarray) -> None:
        return None

    def seek(self, position: int) -> None:
        return None

    def takes_row(self, X, Y: np.ndarray) -> bool:
        return False

    def learn_row(self, X, Y: np.ndarray):  # (takes_row is False: the general call's)
        raise OtherPath

    def learn_row_at_once(self, X, Y: np.ndarray) -> None:
        return None

    def undo_row(self) -> None:  # (learn_row_at_once learns none)
        return None

    def row_counted(self) -> None:
        return None


class Locked:
    """One re-entrant lock per engine, so that the estimator serialises learning and
    prediction on one model across threads (a reader never sees, or caches, a state
    half-way through an update). The lock is not part of the state: pickling and
    copying drop it, and it is made again on first use."""

    @property
    def lock(self) -> threading.RLock:
        lock = self.__dict__.get("_lock")
        if lock is None:  # dict.setdefault is atomic: two threads get the same lock
            lock = self.__dict__.setdefault("_lock", threading.RLock())
        return lock

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state.pop("_lock", None)
        return state


def check_shapes(X, Y, n_features: int | None, n_models: int) -> None:
    """ValueError unless X has ``n_features`` columns (None: any number) and Y is
    (n, K): every :meth:`Engine.learn` checks this first. The compiled walks index
    the state by column and the labels by (row, model) without bounds checks (rows
    wider than the model wrote past a diagonal model's state). Shapes only, O(1): the
    estimators have validated the values."""
    if n_features is not None:
        check_width(X, n_features)
    if Y.shape != (X.shape[0], n_models):
        raise ValueError(
            f"Y is {Y.shape}, not ({X.shape[0]}, {n_models}): one label a row and model"
        )


def finite_margins(F: np.ndarray, what: str = "decision value") -> np.ndarray:
    """F, a prediction's (n, K) margins or variances, unless one is inf or NaN: then a
    FloatingPointError naming the first such row. A model whose walks stayed in range
    can still overflow on a new input, or sum its finite terms in another order than
    the walk did (``nu @ K0`` in blocks: a poly kernel on unscaled features gave NaN
    decision values, and ``predict`` then the first class for them, quietly)."""
    ok = np.isfinite(F)
    if not ok.all():
        row = int(np.flatnonzero(~ok.reshape(F.shape[0], -1).all(axis=1))[0])
        raise nonfinite_prediction(what, f"row {row} of X")
    return F


def nonfinite_prediction(what: str, where: str) -> FloatingPointError:
    """The error of a prediction (``what``: "decision value" or "margin variance") that
    is not finite at ``where`` (:func:`finite_margins`; the river adapter's row path)."""
    return FloatingPointError(
        f"the {what} of {where} is not finite: the model's sums left float64's range "
        "there (features of very different scales, or kernel values that overflow): "
        "standardise X, or lower the kernel's gamma or degree"
    )


def check_width(X, n_features: int) -> None:
    """ValueError unless X has ``n_features`` columns (the compiled code reads rows
    by the model's width, unchecked)."""
    if X.shape[1] != n_features:
        raise ValueError(
            f"X has {X.shape[1]} columns, the model {n_features} (the features it was "
            "built for; a primal model's intercept column is one of them)"
        )


def learn_or_stabilise(engine, checkpoint, X, Y, positions=None, late: bool = False):
    """:meth:`Engine.learn`; should it raise FloatingPointError or :class:`MaybeDrift`,
    the state restored from ``checkpoint`` (taken before this call),
    :meth:`Engine.stabilise`, and, if that moved the models to a stronger form, the call
    learned once more. Returns (the :class:`LearnResult`, what the first try met when
    the call was learned again, else None). An error raised from here may leave the
    state part-way: the caller restores ``checkpoint``, as after :meth:`Engine.learn`.
    ``late``: X's values are for the engine's walk to check (``learn(checked=False)``,
    :attr:`Engine.checks_rows`)."""
    options = {"checked": False} if late else {}
    try:
        return engine.learn(X, Y, positions, **options), None
    except (FloatingPointError, MaybeDrift) as err:
        engine.restore(checkpoint)
        if engine.stabilise():
            return engine.learn(X, Y, positions, **options), getattr(err, "what", str(err))
        if getattr(err, "floored", False):  # (no stronger form after all: floors counted)
            return engine.learn(X, Y, positions, **options), None
        raise
