"""Ctrl-C held back across the few statements that must not be cut in half.

A KeyboardInterrupt arrives between any two Python statements. Where a model's state
is committed in several statements that no checkpoint can undo (a restore after an
error, a primal full block learnt without a copy and its counters, the river
adapter's counts taken from its fast path), :func:`deferred_interrupt` records a
SIGINT that arrives meanwhile and delivers it when the block ends, so the model is
changed wholly or not at all. Long computations stay interruptible: only the commit
is guarded, and the primal full engine's call of one block (a block of rows for each
one-vs-rest model), which keeps no copy to restore. A call whose engine can undo it
stores its counters in one statement and restores the checkpoint on a Ctrl-C before
that: no handler swapped (two system calls) on every call.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import threading

try:  # the C module under ``signal``: the same calls without the enum conversions
    import _signal as _sig  # (a few microseconds per call, on every partial_fit)
except ImportError:  # pragma: no cover - an interpreter without it
    _sig = signal

__all__ = [
    "as_interrupt",
    "deferred_interrupt",
    "put_back",
    "restore_on_error",
    "surface_interrupt",
    "surfaces_interrupts",
]


class deferred_interrupt:  # noqa: N801 - used as a function: ``with deferred_interrupt():``
    """Run the block with SIGINT recorded instead of raised, then deliver it. Outside
    the main thread (where no signal arrives) this does nothing."""

    __slots__ = ("_previous", "_received", "_active")

    def __enter__(self) -> None:
        self._active = False
        self._received = False
        if threading.current_thread() is not threading.main_thread():
            return
        try:
            self._previous = _sig.signal(signal.SIGINT, self._record)
        except ValueError:  # pragma: no cover - not the main interpreter
            return
        self._active = True

    def _record(self, signum, frame) -> None:
        self._received = True

    def __exit__(self, *exc) -> None:
        if not self._active:
            return
        previous = self._previous
        _sig.signal(signal.SIGINT, previous)
        if self._received:
            if callable(previous):
                previous(signal.SIGINT, None)  # Python's default raises KeyboardInterrupt
            elif previous == signal.SIG_DFL:  # pragma: no cover - a process without Python's
                os.kill(os.getpid(), signal.SIGINT)


@contextlib.contextmanager
def restore_on_error(obj, before: dict | None = None):
    """On any error or interrupt inside, ``obj``'s attributes go back to ``before``
    (default: as on entry), Ctrl-C held back while they do: a call that builds a new
    state aside (a ``fit``, a first ``partial_fit``) and fails part-way leaves the
    object as it was."""
    if before is None:
        before = obj.__dict__.copy()
    try:
        yield
    except BaseException:
        put_back(obj, before)
        raise


def put_back(obj, before: dict) -> None:
    """``obj``'s attributes as in ``before`` (a copy of its ``__dict__``), Ctrl-C held
    back while they are put back."""
    with deferred_interrupt():
        d = obj.__dict__
        for k in [k for k in d if k not in before]:
            del d[k]
        d.update(before)


def as_interrupt(err: BaseException) -> BaseException:
    """The KeyboardInterrupt behind ``err``, if ``err`` is the SystemError numba raises
    when a Ctrl-C lands while it boxes a compiled call's result ("returned a result
    with an exception set", the interrupt among its causes); else ``err``. A caller
    that catches KeyboardInterrupt then sees one."""
    if isinstance(err, SystemError):
        seen, cause = set(), err
        while cause is not None and id(cause) not in seen:
            if isinstance(cause, KeyboardInterrupt):
                return cause
            seen.add(id(cause))
            cause = cause.__cause__ or cause.__context__
    return err


def surfaces_interrupts(method):
    """``method`` (a public entry point: fit, partial_fit, the predictions, the river
    adapter's calls), with numba's SystemError for a Ctrl-C (:func:`as_interrupt`)
    raised as the KeyboardInterrupt it carries: compiled code runs outside the learning
    call's own translation too (a one-row call's quiet try and input check, every
    prediction), and a user's ``except KeyboardInterrupt`` must see one. Free unless
    something is raised."""

    @functools.wraps(method)
    def call(*args, **kwargs):
        try:
            return method(*args, **kwargs)
        except SystemError as err:
            surface_interrupt(err)

    return call


def surface_interrupt(err: SystemError):
    """Raise the KeyboardInterrupt behind numba's ``err`` (:func:`as_interrupt`), else
    ``err`` itself: for a call too short for :func:`surfaces_interrupts`' extra frame
    (about 0.13 us, 5 % of a river ``learn_one`` on the diagonal fast path), whose body
    catches SystemError and calls this."""
    interrupt = as_interrupt(err)
    if interrupt is not err:
        raise interrupt from None
    raise err
