"""The queue form's call of one row in one compiled call (:mod:`kernelcw.engines.dual.queue_row`):
the same bits as the ways it replaces (the quiet try, ``learn_row``, the general call) on
streams of every second-order rule, two kernels, with and without the intercept; where it
cannot finish a row (a rebuild due, a kernel that needs BLAS) the other ways take it; an
error or a Ctrl-C at any point of it, or as the estimator stores its counters, leaves
the model as it was; its rollback scratch is not part of the model."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest
from helpers import RULE_PARAMS, make_rule_estimator, stream
from test_one_row import _assert_same_state

import kernelcw.engines.dual.one_row as one_row_mod
import kernelcw.engines.dual.queue_row as queue_row_mod
from kernelcw import SCWClassifier
from kernelcw.engines.dual.engine import DualEngine
from kernelcw.engines.dual.queue import QueueForm
from kernelcw.engines.dual.store import SupportStore

SECOND_ORDER = ("stdev", "var", "scw1", "scw2", "arow")


def _spied(monkeypatch) -> list:
    """Each learn_row_at_once's outcome (True: learnt the row), in the list returned."""
    seen, real = [], DualEngine.learn_row_at_once

    def spy(self, X, Y):
        out = real(self, X, Y)
        seen.append(out is not None)
        return out

    monkeypatch.setattr(DualEngine, "learn_row_at_once", spy)
    return seen


@pytest.mark.parametrize("intercept", [True, False])
@pytest.mark.parametrize("kernel", ["rbf", "laplacian"])
@pytest.mark.parametrize("rule", SECOND_ORDER)
def test_rows_at_once_are_the_other_ways_bit_for_bit(rule, kernel, intercept, monkeypatch):
    """After a fit of 40 rows (B = 25: the queue form), 260 rows one per call, once in one
    compiled call where it can and once by the other ways: the same margins, counters and
    state, bit for bit; most rows went at once, and some (the queue's rebuilds) not."""
    X, y = stream(300, seed=len(rule), d=4)
    params = dict(RULE_PARAMS[rule])
    common = dict(kernel=kernel, gamma=0.3, budget=25, budget_policy="oldest",
                  fit_intercept=intercept)  # fmt: skip
    fast = make_rule_estimator(rule, params, **common).fit(X[:40], y[:40])
    slow = copy.deepcopy(fast)
    assert fast._engine.factor_forms() == ["queue"]
    seen = _spied(monkeypatch)
    runs = []
    for est in (fast, slow):  # (predictions between rows: the prediction cache cleared)
        f = [(est.partial_fit_margins(X[i : i + 1], y[i : i + 1]),
              est.decision_function(X[:20]) if i % 7 == 0 else None)
             for i in range(40, 300)]  # fmt: skip
        runs.append(f)
        monkeypatch.setattr(one_row_mod, "_AT_ONCE", {})
    for (f_fast, p_fast), (f_slow, p_slow) in zip(*runs, strict=True):
        np.testing.assert_array_equal(f_fast, f_slow)
        if p_fast is not None:
            np.testing.assert_array_equal(p_fast, p_slow)
    _assert_same_state(fast, slow)
    assert fast.n_updates_ > 40
    assert sum(seen) >= 200 and not all(seen)  # (at once, but for the store's growth)
    np.testing.assert_array_equal(fast.decision_function(X), slow.decision_function(X))


def test_rows_at_once_keep_no_scratch_in_the_model():
    """The fold's rollback copies are scratch: not in the state, not pickled, and a
    model copied or loaded mid-stream continues bit for bit."""
    X, y = stream(200, d=4)
    est = SCWClassifier(kernel="rbf", gamma=0.3, budget=20, budget_policy="oldest")
    est.fit(X[:40], y[:40])
    for i in range(40, 100):
        est.partial_fit(X[i : i + 1], y[i : i + 1])
    form = est._engine.forms[0]
    assert "_row_save" in form.__dict__  # (the oldest left: its fold made copies)
    assert not any("save" in k for k in est._engine.state_dict())
    twin = pickle.loads(pickle.dumps(est))
    assert "_row_save" not in twin._engine.forms[0].__dict__
    for i in range(100, 200):
        est.partial_fit(X[i : i + 1], y[i : i + 1])
        twin.partial_fit(X[i : i + 1], y[i : i + 1])
    _assert_same_state(est, twin)


def _interrupt_once(monkeypatch, owner, name, exc):
    """``owner.name`` raising ``exc()`` on its next call after running (once); returns
    the list that records that it fired."""
    real, fired = getattr(owner, name), []

    def wrapped(*args, **kwargs):
        out = real(*args, **kwargs)
        if not fired:
            fired.append(1)
            raise exc()
        return out

    monkeypatch.setattr(owner, name, wrapped)
    return fired


def _numba_ctrl_c():
    err = SystemError("CPUDispatcher(...) returned a result with an exception set")
    err.__cause__ = KeyboardInterrupt()
    return err


def _call_and_compare(est, twin, X, y, i, fired, monkeypatch) -> bool:
    """Row i into ``est`` (the interrupt armed), then into ``twin``: an interrupted call
    reaches the caller and leaves ``est`` as ``twin`` was, and the row learnt again
    after it gives ``twin``'s state. Returns whether the call was interrupted."""
    try:
        est.partial_fit(X[i : i + 1], y[i : i + 1])
        interrupted = False
    except KeyboardInterrupt:
        interrupted = True
    monkeypatch.undo()
    assert interrupted == bool(fired)  # (the Ctrl-C reaches the caller, always)
    if interrupted:
        _assert_same_state(est, twin)
        est.partial_fit(X[i : i + 1], y[i : i + 1])
    twin.partial_fit(X[i : i + 1], y[i : i + 1])
    _assert_same_state(est, twin)
    return interrupted


@pytest.mark.parametrize(
    "where", ["compiled call", "compiled call, numba's Ctrl-C", "store", "rebuild", "counters"]
)
def test_a_ctrl_c_inside_a_row_at_once_puts_the_model_back(where, monkeypatch):
    """A KeyboardInterrupt after the compiled call changed the model in place (the fold
    of the oldest, the new row's slots), as the row enters the store, after the queue's
    rebuild (new buffers), or as the estimator stores its counters: model and counters as
    before the call, and the stream goes on as if it had not been made."""
    X, y = stream(160, d=4)
    est = SCWClassifier(kernel="rbf", gamma=0.3, budget=20, budget_policy="oldest")
    est.fit(X[:40], y[:40])
    hits = 0
    for i in range(40, 160):
        twin = copy.deepcopy(est)
        if where == "compiled call":
            fired = _interrupt_once(monkeypatch, queue_row_mod, "queue_row", KeyboardInterrupt)
        elif where == "compiled call, numba's Ctrl-C":
            fired = _interrupt_once(monkeypatch, queue_row_mod, "queue_row", _numba_ctrl_c)
        elif where == "store":
            fired = _interrupt_once(monkeypatch, SupportStore, "append_row", KeyboardInterrupt)
        elif where == "rebuild":  # (every B / 2 rows: new buffers, the fold's in the old)
            fired = _interrupt_once(monkeypatch, QueueForm, "rebuild", KeyboardInterrupt)
        else:
            fired = _counters_interrupt(monkeypatch, type(est))
        hits += _call_and_compare(est, twin, X, y, i, fired, monkeypatch)
    assert hits >= (8 if where == "rebuild" else 40)


def _counters_interrupt(monkeypatch, cls):
    """The estimator's next store of its counters raises KeyboardInterrupt (once)."""
    fired = []

    def get(self):
        return self.__dict__["_counts"]

    def put(self, value):
        if not fired:
            fired.append(1)
            raise KeyboardInterrupt
        self.__dict__["_counts"] = value

    monkeypatch.setattr(cls, "_counts", property(get, put), raising=False)
    return fired


def test_an_error_in_the_compiled_call_hands_the_row_to_the_other_ways(monkeypatch):
    """An error of the compiled call itself (not a Ctrl-C): the model goes back and the
    other ways learn the row, as they would have."""
    X, y = stream(120, d=4)
    est = SCWClassifier(kernel="rbf", gamma=0.3, budget=20, budget_policy="oldest")
    est.fit(X[:40], y[:40])
    twin = copy.deepcopy(est)
    real = queue_row_mod.queue_row

    def failing(*args):
        real(*args)  # (it changed the model in place, then failed)
        raise ZeroDivisionError

    monkeypatch.setattr(queue_row_mod, "queue_row", failing)
    for i in range(40, 120):
        est.partial_fit(X[i : i + 1], y[i : i + 1])
    monkeypatch.undo()
    monkeypatch.setattr(one_row_mod, "_AT_ONCE", {})
    for i in range(40, 120):
        twin.partial_fit(X[i : i + 1], y[i : i + 1])
    _assert_same_state(est, twin)


def test_a_ctrl_c_before_the_compiled_call_or_after_it_returned_puts_the_model_back(
    monkeypatch,
):
    """Two windows a review found: a Ctrl-C as the compiled call's arguments are made,
    after an earlier call's fold left its copies in the scratch (the undo copied those
    into this model: the flag is now lowered before), and one after the call committed
    the row but before the estimator's counters (the row stayed learnt, uncounted: the
    undo record now waits on the engine)."""
    X, y = stream(160, d=4)
    est = SCWClassifier(kernel="rbf", gamma=0.3, budget=20, budget_policy="oldest")
    est.fit(X[:40], y[:40])
    real_at_once = one_row_mod._AT_ONCE[QueueForm]
    hits = [0, 0]
    for i in range(40, 160):
        twin = copy.deepcopy(est)
        before = i % 2 == 0
        if before:  # (walk_tols: read as queue_row's arguments are made)
            fired = _interrupt_once(monkeypatch, queue_row_mod, "walk_tols", KeyboardInterrupt)
        else:
            fired = []

            def after(engine, X, Y, fired=fired):
                out = real_at_once(engine, X, Y)
                if out is not None and not fired:
                    fired.append(1)
                    raise KeyboardInterrupt
                return out

            monkeypatch.setitem(one_row_mod._AT_ONCE, QueueForm, after)
        hits[before] += _call_and_compare(est, twin, X, y, i, fired, monkeypatch)
    assert min(hits) >= 40


def test_a_cleared_floors_drift_is_saved_and_loaded(tmp_path):
    """Context.floors_drift (cleared where a nu/Pi model's factor form did not factor) is
    part of the state: a model saved and loaded, or rebuilt from its state, continues
    as the original does (a review found it lost on load)."""
    import kernelcw
    from kernelcw.engines.dual.engine import DualEngine as Engine

    X, y = stream(120, d=4)
    est = SCWClassifier(kernel="rbf", gamma=0.3, budget=20, budget_policy="smallest")
    est.fit(X[:60], y[:60])
    eng = est._engine
    eng._ctx = eng._ctx._replace(floors_drift=False)
    state = eng.state_dict()
    assert int(state["floors_drift"]) == 0
    assert not Engine.from_state(eng.spec, state)._ctx.floors_drift
    kernelcw.save(est, tmp_path / "m.zip")
    loaded = kernelcw.load(tmp_path / "m.zip")
    assert not loaded._engine._ctx.floors_drift
    assert SCWClassifier(kernel="rbf", budget=20).fit(X[:60], y[:60])._engine._ctx.floors_drift
