"""One sparse row at a time through a binary primal-diagonal engine, for
:mod:`kernelcw.river`: a row costs one compiled call, not the engine's per-call setup.

A linear model learnt one feature dict at a time spends most of its time around the
update, not in it: ``PrimalDiagEngine.learn`` builds the rule record, the counters
and an undo log, and walks the rows of a matrix, for every row. :class:`DiagStream`
builds them once and calls the engine's own compiled round (``_diag_row``, the code
``learn`` runs) on the row's non-zeros, so the update is the engine's, bit for bit,
as long as the non-zeros come in increasing column order (the order the dense walk
adds them in). With one model a round that meets a non-finite step leaves the state
untouched (:class:`kernelcw.engines._diag_walk.RoundResult`), so a failed row needs
no undo.

The calls go to the compiled entry points bound to the exact argument types of the
first call (numba's dispatcher spends 2-3 microseconds a call resolving the types of
ten arguments, eleven now, three of them records: a third of a row's time); every
later call passes arrays built the same way (int64 and float64, C-ordered, 1-d), so
the types cannot change.
"""

from __future__ import annotations

import decimal
import math
import numbers

import numpy as np
from numba import njit

from .engines._diag_walk import _WALK, _diag_row, no_log, row_margin
from .engines._primal_common import new_counts, raise_nonfinite, rule_record
from .engines.base import nonfinite_prediction
from .rules import DIAG_METHODS

__all__ = ["DiagStream", "fast_engine", "is_number", "sum_of_squares"]

#: The common types of a feature value, taken without a look at their shape (the
#: fast path's and the adapter's, ``_river_input``).
_PLAIN = frozenset((float, int, bool))


#: Compiled entry points by handle. A model keeps the int handle, not the entry point:
#: an object graph that reached numba's compiled objects reached its global state too
#: (river's memory check walks the graph, and met a dead weak reference there).
_ENTRIES: list = []
_HANDLES: dict = {}


def _entry(dispatcher, args: tuple) -> int:
    """The handle in :data:`_ENTRIES` of the compiled entry point of ``dispatcher`` for
    the types of ``args`` (after a call with them), or of the dispatcher itself if it
    has none."""
    sig = tuple(dispatcher.typeof_pyval(a) for a in args)
    compiled = dispatcher.overloads.get(sig)
    fn = dispatcher if compiled is None else compiled.entry_point
    handle = _HANDLES.get(id(fn))
    if handle is None:
        handle = _HANDLES[id(fn)] = len(_ENTRIES)
        _ENTRIES.append(fn)  # kept alive here, so its id stays its own
    return handle


def fast_engine(engine) -> bool:
    """Whether :class:`DiagStream` serves ``engine``: primal diagonal, one model."""
    return engine.spec.form == "primal_diag" and engine.n_models == 1


@njit(cache=True)
def sum_of_squares(val):
    """``sum(val ** 2)`` in float64 (inf past its range, with no warning)."""
    sq = 0.0
    for q in range(val.shape[0]):
        sq += val[q] * val[q]
    return sq


@njit(**_WALK)
def _round(mu, s, idx, val, Yi, out, rp, method, counts, log, ts):
    """The engine's round (``_diag_row`` inlined), compiled as its walks are, without
    numba's runtime: the call then wraps no array it is passed in a reference-counted
    record (0.23 against 0.76 us a call, by hand)."""
    return _diag_row(mu, s, (idx, val), Yi, out, rp, method, counts, log, ts, (np.int64(0), 0.0))


@njit(**_WALK)
def _margin(mu, s, idx, val, out, a):
    """``out = (mu . x, x' diag(s) x)`` of model 0 over the non-zeros (idx, val), in
    their order (the rounds' order); returns ``|x|^2``."""
    f, v, sq = row_margin(mu, s, np.int64(0), idx, val, a, None, np.int64(0), 0.0, None)
    out[0] = f
    out[1] = v
    return sq


def is_number(v) -> bool:
    """Whether a feature value is a real number (a bool, numpy's scalars and 0-d arrays
    of them, a Decimal, a fraction) or None (read as NaN, which the caller's check
    names); not a complex number, a date or a duration (numpy reads them as numbers:
    the real part, days or nanoseconds since 1970)."""
    if isinstance(v, np.ndarray):
        return v.ndim == 0 and v.dtype.kind in "biuf"
    if isinstance(v, np.timedelta64):  # (a numpy integer to numbers.Integral)
        return False
    return v is None or isinstance(v, (numbers.Real, np.bool_, decimal.Decimal))


class DiagStream:
    """Rows of one binary :class:`~kernelcw.engines.primal_diag.PrimalDiagEngine`.

    ``counts`` accumulates the rounds' counters (updates, mistakes, floored) until
    the caller folds them into the estimator's. Holds views of the engine's state:
    valid while the caller keeps that engine (a widened engine needs a new stream).
    """

    def __init__(self, engine):
        self.engine = engine
        self.mu, self.s = engine.mean, engine._s  # stored variances (0: the prior)
        self.rp = rule_record(engine.rule)
        self.method = DIAG_METHODS[engine.spec.diag_method]
        self.counts = new_counts(1)
        self.log = no_log(1)
        self.exact = engine.spec.diag_method == "exact"
        self.ts = np.empty(0)  # the "exact" method's scratch, grown to the widest row
        self.out = np.empty(2)
        self.targets = {1.0: np.array([1.0]), -1.0: np.array([-1.0])}
        self._learn = self._margin = None  # handles of entry points, on first use
        c = engine.spec.intercept  # an intercept: the constant last column, value c
        #: (column, value) of the intercept that every row's non-zeros must end with
        self.bias = (engine.spec.n_features - 1, c) if c else None
        self.a = engine.spec.a
        self._last = None  # (keys, columns, order) of the last dict: one lookup a row

    def row(self, x: dict, index: dict) -> tuple[np.ndarray, np.ndarray] | None:
        """``x``'s columns (increasing; the intercept's last) and values for
        :meth:`learn` and :meth:`margin`, or None where the adapter's general path must
        take it: a new name (``index``: the adapter's columns by name, which only grows
        while this stream lives), a value that is not a finite number (text included),
        or a row too large."""
        keys = tuple(x)
        last, bias = self._last, self.bias
        if last is not None and last[0] == keys:
            idx, order = last[1], last[2]
        else:
            try:
                cols = [index[k] for k in keys]
            except KeyError:
                return None
            idx = np.array(cols if bias is None else [*cols, bias[0]], dtype=np.int64)
            order = np.argsort(idx, kind="stable") if np.any(idx[1:] < idx[:-1]) else None
            if order is not None:
                idx = idx[order]
            self._last = (keys, idx, order)
        try:
            if not _PLAIN.issuperset(map(type, x.values())):  # (plain: fromiter alone)
                if not all(map(is_number, x.values())):  # (numpy's complex numbers
                    return None  # and dates: fsum and fromiter read them as numbers)
                math.fsum(x.values())  # real numbers only (fromiter reads "3.5" as 3.5)
            values = x.values() if bias is None else (*x.values(), bias[1])
            val = np.fromiter(values, np.float64, idx.shape[0])
        except (TypeError, ValueError, OverflowError):
            return None
        if order is not None:
            val = val[order]
        if not math.isfinite(sum_of_squares(val) * self.a):
            return None
        return idx, val

    def learn(self, idx: np.ndarray, val: np.ndarray, y: float) -> None:
        """One round on the non-zeros (idx increasing, int64; val float64; ending
        with :attr:`bias` if the model has an intercept), y = +-1."""
        if self.exact and idx.shape[0] > self.ts.shape[0]:
            self.ts = np.empty(2 * idx.shape[0])
        args = (self.mu, self.s, idx, val, self.targets[y], self.out, self.rp, self.method,
                self.counts, self.log, self.ts)  # fmt: skip
        if self._learn is None:
            ok = _round(*args)
            self._learn = _entry(_round, args)
        else:
            ok = _ENTRIES[self._learn](*args)
        if not ok:
            raise_nonfinite(0)

    def margin(self, idx: np.ndarray, val: np.ndarray) -> tuple[float, float, float]:
        """(mean margin, margin variance, |x|^2) of the row (as for :meth:`learn`),
        without learning."""
        args = (self.mu, self.s, idx, val, self.out, self.rp.a)
        if self._margin is None:
            sq = _margin(*args)
            self._margin = _entry(_margin, args)
        else:
            sq = _ENTRIES[self._margin](*args)
        f, v = float(self.out[0]), float(self.out[1])
        if not (math.isfinite(f) and math.isfinite(v)):  # (as every engine's prediction)
            what = "decision value" if not math.isfinite(f) else "margin variance"
            raise nonfinite_prediction(what, "this row")
        return f, v, sq

    def take_counts(self) -> tuple[int, int, int]:
        """The counters gathered since the last call, and reset them."""
        c = self.counts
        got = (int(c.n_updates[0]), int(c.n_mistakes[0]), int(c.n_floored[0]))
        for a in c:
            a[0] = 0
        return got
