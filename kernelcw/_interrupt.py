"""Ctrl-C held back across the few statements that must not be cut in half.

A KeyboardInterrupt arrives between any two Python statements. Where a model's state
is committed in several statements (the one-vs-rest models of a block, the counters
after a call), :func:`deferred_interrupt` records a SIGINT that arrives meanwhile and
delivers it when the block ends, so the model is changed wholly or not at all. Long
computations stay interruptible: only the commit is guarded.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["deferred_interrupt"]


@contextmanager
def deferred_interrupt() -> Iterator[None]:
    """Run the block with SIGINT recorded instead of raised, then deliver it. Outside
    the main thread (where no signal arrives) this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []
    try:
        previous = signal.signal(signal.SIGINT, lambda signum, frame: received.append(signum))
    except ValueError:  # pragma: no cover - not the main interpreter
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if received:
            if callable(previous):
                previous(signal.SIGINT, None)  # Python's default raises KeyboardInterrupt
            elif previous == signal.SIG_DFL:  # pragma: no cover - a process without Python's
                os.kill(os.getpid(), signal.SIGINT)
