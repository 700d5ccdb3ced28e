"""The locks that keep one estimator's model whole when threads share it.

Two kinds. Each engine has its own re-entrant lock (``Engine.lock``): learning into a
model and reading it are serialised by it. Calls that *replace* the model, ``fit`` and
the first ``partial_fit`` of an unfitted estimator, are serialised by the estimator's
own lock (:func:`model_lock`), held from before such a call notes the model it would
put back on failure until it has either returned or put it back. So two of them are
applied one after the other, as two ``partial_fit`` calls are: a fit that fails never
puts back a model from before another fit that has returned meanwhile, and a first
call never starts a fresh model over a fit that finished while it checked its rows
(calls that only continue a model do not take it, and wait on the engine's lock).
Lock order: the estimator's, then engines' (a new engine's, then the one it replaces,
``CWEstimator._install``); no call takes the estimator's while holding an engine's.
"""

from __future__ import annotations

import threading

from .._interrupt import deferred_interrupt, put_back

__all__ = ["model_lock", "put_back_model", "release"]


def model_lock(est) -> threading.RLock:
    """``est``'s lock for the calls that replace its model, made on first use (not part
    of the model: ``CWEstimator.__getstate__`` leaves it out, so pickles and copies
    get their own). Re-entrant, as the engines' are: a fit started from inside another
    (a callable kernel's, a warning handler's) goes on as it did before this lock."""
    lock = est.__dict__.get("_model_lock")
    if lock is None:  # dict.setdefault is atomic: two threads get the same lock
        lock = est.__dict__.setdefault("_model_lock", threading.RLock())
    return lock


def put_back_model(est, before: dict, replaced: list) -> None:
    """After a failed ``fit``: ``est``'s attributes as in ``before`` (noted under
    :func:`model_lock`), but with the counters its model has *now*: calls from other
    threads may have continued that model after ``before`` was noted. Where the fit's
    engine had replaced it, those are the counters ``CWEstimator._install`` put in
    ``replaced`` under its engine's lock before replacing it (no call learns into it
    after that); else the model is still the estimator's, and its counters are read
    under its engine's lock (taken only then: the fit holds its new engine's, and a
    thread holding the old one may wait for that). Ctrl-C is held back until it is
    done, the wait for that lock included."""
    old = before.get("_engine")
    with deferred_interrupt():
        if "_counts" not in before:  # (unfitted before: nothing continued it)
            put_back(est, before)
            return
        before = dict(before)
        if est.__dict__.get("_engine") is not old:  # (only this call could replace it)
            before["_counts"] = replaced[0]
            put_back(est, before)
            return
        with old.lock:
            before["_counts"] = est.__dict__["_counts"]
            put_back(est, before)


def release(held: list) -> None:
    """Release the engines' locks ``CWEstimator._start`` took (``held``) that this
    thread still owns. Ctrl-C is held back until all are released: one landing between
    two releases left the other lock held, and every other thread using that model
    waiting for it forever."""
    with deferred_interrupt():
        for engine in held:
            if engine.lock._is_owned():
                engine.lock.release()
