"""Ctrl-C (SIGINT) during a long partial_fit leaves the model as it was before the call,
its counters with it, and a retry learns the batch once."""

from __future__ import annotations

import copy
import signal
import threading
import time

import numpy as np
import pytest

from kernelcw import AROWClassifier, CWClassifier, SCWClassifier
from kernelcw._interrupt import deferred_interrupt

pytestmark = [
    pytest.mark.skipif(not hasattr(signal, "pthread_kill"), reason="POSIX signals"),
    pytest.mark.skipif(
        signal.getsignal(signal.SIGINT) is signal.SIG_IGN,
        reason="SIGINT is ignored in this process (a non-interactive shell starts background "
        "jobs so, e.g. `bash .ci/run &`): no Ctrl-C can reach it",
    ),
]


def _stream(n, d=6, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = rng.integers(0, 3, size=n)
    return X, y


def _sigint_after(seconds: float) -> tuple[threading.Thread, threading.Event]:
    """A thread that sends SIGINT to the main thread ``seconds`` after ``go`` is set."""
    main = threading.main_thread().ident
    go = threading.Event()

    def fire():
        go.wait()
        time.sleep(seconds)
        signal.pthread_kill(main, signal.SIGINT)

    t = threading.Thread(target=fire, daemon=True)
    t.start()
    return t, go


def _snapshot(est, X):
    return (
        est.decision_function(X).copy(),
        np.array(est.n_updates_, copy=True),
        np.array(est.n_mistakes_, copy=True),
    )


@pytest.mark.filterwarnings("ignore:.*variance fell below")
@pytest.mark.parametrize(
    ("make", "n"),
    [
        (lambda: CWClassifier(block_size=8), 3000),
        (lambda: CWClassifier(covariance="diag"), 400_000),
        (lambda: SCWClassifier(kernel="rbf", block_size=32), 3000),
        (lambda: AROWClassifier(kernel="rbf", budget=60, budget_policy="project"), 3000),
    ],
    ids=["primal-full", "primal-diag", "rbf", "rbf-project"],
)
def test_ctrl_c_leaves_the_model_as_before_the_call(make, n):
    X, y = _stream(n)
    probe = X[:100]
    seen_interrupt = False
    uninterrupted = None  # the same for every delay: computed once, on the first interrupt
    for delay in (0.002, 0.01, 0.03, 0.08):
        est = make().partial_fit(X[:200], y[:200])
        before = _snapshot(est, probe)
        kept = copy.deepcopy(est)
        killer, go = _sigint_after(delay)
        try:
            go.set()
            est.partial_fit(X[200:], y[200:])
        except KeyboardInterrupt:
            seen_interrupt = True
            after = _snapshot(est, probe)
            for a, b in zip(after, before, strict=True):
                np.testing.assert_array_equal(a, b)
            # a retry learns the batch once, exactly as an uninterrupted call. Every
            # delay starts from the same deterministic model (make() on the first 200
            # rows), so the uninterrupted call's result is the same for all: one fit of
            # the batch, not one per delay (for "rbf" each is 0.6-0.9 s)
            est.partial_fit(X[200:], y[200:])
            if uninterrupted is None:
                uninterrupted = _snapshot(kept.partial_fit(X[200:], y[200:]), probe)
            for a, b in zip(_snapshot(est, probe), uninterrupted, strict=True):
                np.testing.assert_array_equal(a, b)
        finally:
            try:  # a signal after the call finished lands here, not in the next round
                killer.join()
                time.sleep(0.02)
            except KeyboardInterrupt:
                pass
    if not seen_interrupt:
        pytest.skip("every call finished before the signal (a very fast machine)")


def test_deferred_interrupt_delivers_at_the_end():
    done = []
    with pytest.raises(KeyboardInterrupt):
        with deferred_interrupt():
            signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
            time.sleep(0.01)
            done.append(1)  # not cut short
    assert done == [1]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_ctrl_c_while_locks_are_released_releases_them_all():
    """``fit`` and a first ``partial_fit`` release the engines' locks they hold on the
    way out: a Ctrl-C landing after the first release is delivered after the last."""
    from kernelcw.estimators._locks import release

    class Lock:  # an RLock whose ownership check sends SIGINT (the first engine's)
        def __init__(self, signals):
            self.rlock, self.signals = threading.RLock(), signals
            self.rlock.acquire()

        def _is_owned(self):
            if self.signals:
                signal.raise_signal(signal.SIGINT)
            return self.rlock._is_owned()

        def release(self):
            self.rlock.release()

    class Engine:
        def __init__(self, signals):
            self.lock = Lock(signals)

    held = [Engine(True), Engine(False)]
    with pytest.raises(KeyboardInterrupt):
        release(held)
    for e in held:
        assert not e.lock.rlock._is_owned()


class _SignalWhileCounting:
    """A :class:`kernelcw.engines.base.LearnResult` that sends SIGINT to this process
    when its mistakes count is read: a Ctrl-C that lands while the counters are added
    up, after the engine learnt the call."""

    def __init__(self, res):
        self._res = res

    def __getattr__(self, name):
        if name == "n_mistakes":
            signal.raise_signal(signal.SIGINT)
        return getattr(self._res, name)


def _trap_counting(monkeypatch, module):
    learn = module.learn_or_stabilise

    def trapped(*args, **kw):
        res, failed = learn(*args, **kw)
        return _SignalWhileCounting(res), failed

    monkeypatch.setattr(module, "learn_or_stabilise", trapped)


@pytest.mark.parametrize("n_classes", [2, 3], ids=["binary", "three-classes"])
@pytest.mark.parametrize(
    "make",
    [
        lambda: SCWClassifier(kernel="rbf", budget=8, budget_policy="project"),
        lambda: AROWClassifier(),
        lambda: CWClassifier(rule="var", covariance="diag"),
    ],
    ids=["rbf-project", "primal-full", "primal-diag"],
)
@pytest.mark.parametrize("via", ["estimator", "river"])
def test_ctrl_c_while_counting_leaves_the_call_whole_or_undone(make, n_classes, via, monkeypatch):
    """The counters follow the model: a Ctrl-C while they are added up (here sent from
    inside the count, after the engine learnt the call) leaves the model and its
    counters both as before the call, never the model learnt and the counters not (or
    half added), also through the river adapter (whose own call path counted without
    guarding it, and now learns through the estimator's); a retry then learns the rows
    once."""
    rng = np.random.default_rng(3)
    X, y = rng.normal(size=(60, 4)), np.arange(60) % n_classes
    if via == "river":
        pytest.importorskip("river")
        pd = pytest.importorskip("pandas")
        from kernelcw.river import Classifier

        model = Classifier(make())
        cols = [f"x{j}" for j in range(4)]

        def learn(m, lo, hi):
            m.learn_many(pd.DataFrame(X[lo:hi], columns=cols), pd.Series(y[lo:hi]))
            return m.estimator_

    else:
        model = make()

        def learn(m, lo, hi):
            return m.partial_fit(X[lo:hi], y[lo:hi], classes=np.arange(n_classes))

    import kernelcw.estimators._base as module  # (the adapter learns through it too)

    probe = X[:20]

    def state(est):
        return (est.decision_function(probe), est.n_updates_, est.n_mistakes_)

    def same(a, b) -> bool:
        return all(np.array_equal(u, v) for u, v in zip(a, b, strict=True))

    est = learn(model, 0, 40)
    before = tuple(np.array(v, copy=True) for v in state(est))
    twin = copy.deepcopy(model)
    whole = state(learn(copy.deepcopy(model), 40, 47))  # the call uninterrupted
    _trap_counting(monkeypatch, module)
    with pytest.raises(KeyboardInterrupt):
        learn(model, 40, 47)
    monkeypatch.undo()
    # undone (an engine that can undo a call that returned), or done whole (one that
    # cannot holds the Ctrl-C back until the count is stored: a primal full block)
    full = isinstance(make(), AROWClassifier)
    assert same(state(est), whole if full else before)
    if not full:  # a retry learns the rows once
        assert same(state(learn(model, 40, 47)), state(learn(twin, 40, 47)))


def test_no_compiled_call_returns_a_named_tuple_to_python():
    """numba boxes a named tuple a compiled function returns by looking its class up
    in Python code (``numba.core.serialize._numba_unpickle``), and a Ctrl-C that lands
    there crashed the process (numba 0.68: a segmentation fault; a reviewer's
    reproducer, for the panel, pruned and primal full walks). So every compiled call
    that returns to Python returns plain tuples: learning and predicting with every
    engine form look up no class but ``numpy.ndarray`` (the arrays it returns)."""
    import sys

    import scipy.sparse as sp

    from kernelcw import PAClassifier

    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 5))
    y3 = rng.integers(0, 3, size=200)
    makers = [
        lambda: SCWClassifier(block_size=16),
        lambda: AROWClassifier(covariance="diag"),
        lambda: CWClassifier(covariance="diag", diag_method="exact"),
        lambda: PAClassifier(),
        lambda: SCWClassifier(kernel="rbf", block_size=16),
        lambda: PAClassifier(kernel="rbf", budget=12),
        lambda: AROWClassifier(kernel="rbf", budget=12, budget_batch=4),
        lambda: AROWClassifier(kernel="rbf", budget=12, solver="explicit"),
    ] + [
        lambda p=p: AROWClassifier(kernel="rbf", budget=12, budget_policy=p)
        for p in ("oldest", "random", "smallest", "project")
    ]

    def run():
        for make in makers:
            for y in (y3, (y3 > 0).astype(int)):
                est = make().fit(X[:100], y[:100])
                est.partial_fit(X[100:150], y[100:150])
                for i in range(150, 155):
                    est.partial_fit(X[i : i + 1], y[i : i + 1])
                est.predict_proba(X[:20])
        est = CWClassifier(covariance="diag").fit(sp.csr_matrix(X), y3)
        est.partial_fit(sp.csr_matrix(X[:1]), y3[:1])

    looked_up = set()

    def profile(frame, event, arg):
        if event == "return" and frame.f_code.co_name == "_numba_unpickle":
            looked_up.add(arg)

    run()  # (compiled first: compiling looks up more)
    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
    assert looked_up <= {np.ndarray}, looked_up


def test_a_ctrl_c_numba_reports_as_a_system_error_is_a_keyboard_interrupt():
    """numba raises SystemError ("returned a result with an exception set") when a
    Ctrl-C lands while it boxes a compiled call's result, the KeyboardInterrupt among
    its causes (a reviewer saw about a quarter of interrupted calls so): learning
    restores the model and raises the KeyboardInterrupt itself."""
    from kernelcw._interrupt import as_interrupt

    interrupt = KeyboardInterrupt()
    inner = SystemError("inner")
    inner.__cause__ = interrupt
    outer = SystemError("CPUDispatcher(...) returned a result with an exception set")
    outer.__cause__ = inner
    assert as_interrupt(outer) is interrupt
    other = SystemError("no interrupt behind it")
    assert as_interrupt(other) is other
    err = ValueError()
    assert as_interrupt(err) is err


def test_learning_turns_numba_s_system_error_into_the_interrupt(monkeypatch):
    import kernelcw.estimators._base as base

    X, y = _stream(40)
    est = SCWClassifier(kernel="rbf", budget=8).fit(X[:30], y[:30])
    before = _snapshot(est, X)
    learn = base.learn_or_stabilise

    def boxed(*args, **kw):
        learn(*args, **kw)  # (the engine learnt; numba then failed to box its result)
        err = SystemError("CPUDispatcher(...) returned a result with an exception set")
        err.__cause__ = KeyboardInterrupt()
        raise err

    monkeypatch.setattr(base, "learn_or_stabilise", boxed)
    with pytest.raises(KeyboardInterrupt):
        est.partial_fit(X[30:], y[30:])
    for a, b in zip(_snapshot(est, X), before, strict=True):
        np.testing.assert_array_equal(a, b)


def _boxed(fn):
    """``fn`` that runs, then fails as numba does when a Ctrl-C lands while it boxes a
    compiled call's result."""

    def call(*args, **kw):
        fn(*args, **kw)
        err = SystemError("CPUDispatcher(...) returned a result with an exception set")
        err.__cause__ = KeyboardInterrupt()
        raise err

    return call


@pytest.mark.parametrize("where", ["quiet try", "row check", "prediction", "fit check"])
def test_a_ctrl_c_in_compiled_code_outside_learning_is_a_keyboard_interrupt(where, monkeypatch):
    """The compiled code a call runs before or without its learning call (a one-row
    call's quiet try and value check, a prediction, fit's input pass) reaches the
    caller as the KeyboardInterrupt, not numba's SystemError, and changes nothing."""
    import kernelcw.estimators._base as base
    import kernelcw.estimators._input as inp
    from kernelcw.engines.dual.engine import DualEngine

    X, y = _stream(60)
    est = SCWClassifier(kernel="rbf", budget=8).fit(X[:30], y[:30])
    for i in range(30, 40):  # the one-row record made, quiet tries going
        est.partial_fit(X[i : i + 1], y[i : i + 1])
    before = _snapshot(est, X)
    target, name = {
        "quiet try": (DualEngine, "quiet_row"),
        "row check": (base, "row_passes"),
        "prediction": (DualEngine, "decision"),
        "fit check": (inp, "_max_abs"),
    }[where]
    monkeypatch.setattr(target, name, _boxed(getattr(target, name)))
    with pytest.raises(KeyboardInterrupt):
        if where == "prediction":
            est.predict(X[40:41])
        elif where == "fit check":
            est.fit(X[40:], y[40:])
        else:
            est.partial_fit(X[40:41], y[40:41])
    monkeypatch.undo()  # (the snapshot predicts: through the real calls)
    for a, b in zip(_snapshot(est, X), before, strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("call", ["learn_one", "predict_one", "predict_proba_one"])
def test_a_ctrl_c_in_the_river_adapters_fast_path_is_a_keyboard_interrupt(call, monkeypatch):
    """The river adapter's per-row calls on the diagonal fast path (compiled rounds
    called straight from them) translate numba's SystemError for a Ctrl-C as every
    public call does."""
    pytest.importorskip("river")
    from kernelcw import CWClassifier
    from kernelcw._diag_stream import DiagStream
    from kernelcw.river import Classifier

    model = Classifier(CWClassifier(covariance="diag"))
    rng = np.random.default_rng(0)
    rows = [({"a": float(u), "b": float(v)}, bool(u > v)) for u, v in rng.normal(size=(30, 2))]
    for x, y in rows:
        model.learn_one(x, y)
    before = model.estimator_.coef_.copy()
    name = "learn" if call == "learn_one" else "margin"
    monkeypatch.setattr(DiagStream, name, _boxed(getattr(DiagStream, name)))
    with pytest.raises(KeyboardInterrupt):
        getattr(model, call)(*rows[0][: 2 if call == "learn_one" else 1])
    monkeypatch.undo()
    if call != "learn_one":
        np.testing.assert_array_equal(model.estimator_.coef_, before)
