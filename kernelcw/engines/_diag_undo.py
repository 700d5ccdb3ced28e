"""The diagonal engine's undo log: what a learn call overwrote, so that a failed or
interrupted call leaves the model as it was (``PrimalDiagEngine.checkpoint`` arms
one, the compiled walks of :mod:`._diag_walk` write it, ``restore`` plays it back)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

__all__ = ["SlotUndo", "UndoLog", "log_coordinate", "no_log"]


class UndoLog(NamedTuple):
    """What a learn call overwrote, written by the compiled walks: each coordinate's
    ``(mean, variance)`` in every model before the call's first write to it
    (:meth:`.primal_diag.PrimalDiagEngine.checkpoint`). O(coordinates written), not
    O(K d).

    While a logging call runs, a coordinate is marked as logged by the sign bit of
    its variance in model 0 (variances are never negative; the walks read
    ``abs(s)``): the mark lives in the cache line the round reads anyway, where a
    separate set of marks cost an extra cache miss per non-zero (measured: +40% at
    d = 2^20). :func:`._diag_walk.diag_fit` clears the marks before it returns or
    raises.
    """

    #: (cap,) int64 logged coordinates, in order of first write (empty: no logging)
    idx: np.ndarray
    #: (cap, K, 2) their mean and variance in each model before the call
    val: np.ndarray
    #: (1,) int64 entries used
    n: np.ndarray


def no_log(K: int) -> UndoLog:
    """A log that records nothing."""
    return UndoLog(np.zeros(0, dtype=np.int64), np.zeros((0, K, 2)), np.zeros(1, np.int64))


@njit(cache=True)
def log_coordinate(mu, s, p, log):
    """Log coordinate p of every model, and mark it (see :class:`UndoLog`)."""
    j = log.n[0]
    log.idx[j] = p
    for k in range(mu.shape[0]):
        log.val[j, k, 0] = mu[k, p]
        log.val[j, k, 1] = s[k, p]
    log.n[0] = j + 1
    s[0, p] = -s[0, p]


class SlotUndo(NamedTuple):
    """A checkpoint of an engine that keeps its state in slots: the log (of slots) and
    the slots in use before the call (the ones placed after it are given back)."""

    log: UndoLog
    n: int
