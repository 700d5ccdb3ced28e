"""The three ways of a call of one row that skip the general learning call's layers
(``CWEstimator._learn_locked``): one row learnt into one model in one compiled call where
its form has one (:meth:`OneRowMixin._learn_at_once`,
:mod:`kernelcw.engines.dual.queue_row`), a row that changes nothing
(:meth:`OneRowMixin._learn_quiet`, :func:`kernelcw.engines.dual.quiet.quiet_row`), and one
row learnt into one model by the engine's ``learn_row`` (:meth:`OneRowMixin._learn_row`,
:mod:`kernelcw.engines.dual.one_row`). All or nothing, counters included, as the general
call is."""

from __future__ import annotations

import numpy as np

from .._interrupt import deferred_interrupt
from ..engines.base import OtherPath

__all__ = ["OneRowMixin"]


class OneRowMixin:
    """``_learn_quiet`` and ``_learn_row`` of :class:`kernelcw.estimators._base.CWEstimator`
    (its counters in ``_counts``, its engine's lock held by the caller)."""

    def _learn_one(self, engine, X, Y):
        """A call of one row by one of the three ways: (its margins, the rounds it
        floored), or None, nothing changed, for the general call. The engine's lock is
        held."""
        at_once = self._learn_at_once(engine, X, Y)
        if at_once is not None:
            return at_once
        quiet = self._learn_quiet(engine, X, Y)
        if quiet is not None:
            return quiet, 0
        return self._learn_row(engine, X, Y)

    def _learn_at_once(self, engine, X, Y):
        """A one-row call learnt by the engine in one compiled call
        (:meth:`kernelcw.engines.Engine.learn_row_at_once`), then counted: (its
        margins, the rounds it floored), or None (nothing changed). All or nothing: an
        error or a Ctrl-C before the counters land puts the row back out of the model
        (:meth:`~kernelcw.engines.Engine.undo_row`). The engine's lock is held."""
        counts = None
        try:
            out = engine.learn_row_at_once(X, Y)
            if out is None:
                return None
            f, u, m, fl = out
            c = self._counts
            counts = (c[0] + u, c[1] + m, c[2] + fl)
            if self.__dict__.get("_engine") is engine:  # (else a fit dropped it)
                self._counts = counts  # one store: the call is done, counted whole
        except BaseException:
            if counts is None or self.__dict__.get("_counts") is not counts:
                with deferred_interrupt():
                    engine.undo_row()
            raise
        engine.row_counted()
        margins = np.empty((1, 1))
        margins[0, 0] = f
        return margins, fl

    def _learn_quiet(self, engine, X, Y):
        """A one-row call whose row ``engine`` shows changes nothing but the stream
        position (:meth:`kernelcw.engines.Engine.quiet_row`), done without a learning
        call: the stream moves on and the mistakes are counted, both or neither (an
        error or a Ctrl-C between them puts the position back). Returns its margins,
        or None (the row must be learnt). The engine's lock is held."""
        quiet = engine.quiet_row(X, Y)
        if quiet is None:
            return None
        margins, mistakes, position = quiet
        u, m, f = self._counts
        counts = (u, m + mistakes, f)
        d = self.__dict__
        try:
            engine.seek(position + 1)
            if d.get("_engine") is engine:  # (else a fit dropped it: as _learn_locked)
                self._counts = counts
        except BaseException:
            if d.get("_counts") is not counts:  # (as _learn_locked restores)
                with deferred_interrupt():
                    engine.seek(position)
            raise
        return margins

    def _learn_row(self, engine, X, Y):
        """:meth:`_learn_locked` of one row by the engine's ``learn_row`` (a call of
        one row for one model, without the general call's layers): (the (1, 1)
        margins, the rounds floored) or None, nothing changed, for the general call.
        All or nothing as there; where the row needs the general call (OtherPath) the
        state goes back and the caller makes it."""
        if not engine.takes_row(X, Y):  # (before the checkpoint: the primal engines')
            return None
        checkpoint = engine.checkpoint(X)
        counts = None
        try:
            f, u, m, fl = engine.learn_row(X, Y)
            c = self._counts
            counts = (c[0] + u, c[1] + m, c[2] + fl)
            if self.__dict__.get("_engine") is engine:  # (else a fit dropped it)
                self._counts = counts  # one store: the call is done, counted whole
        except OtherPath:
            with deferred_interrupt():
                engine.restore(checkpoint)
            return None
        except BaseException:  # an error or a Ctrl-C: the model as before the call
            if counts is None or self.__dict__.get("_counts") is not counts:
                with deferred_interrupt():
                    engine.restore(checkpoint)
            raise
        margins = np.empty((1, 1))
        margins[0, 0] = f
        return margins, fl
