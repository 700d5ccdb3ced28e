"""One estimator used from several threads: learning and prediction are serialised by
the engine's lock, so no reader sees (or caches) a half-updated model, and the model
ends as a sequential run would leave it."""

from __future__ import annotations

import pickle
import threading
import time

import numpy as np
import pytest

from kernelcw import AROWClassifier, CWClassifier, SCWClassifier


def _stream(seed=0, n=400, d=4):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = (X[:, 0] * X[:, 1] + 0.3 * rng.normal(size=n) > 0).astype(int)
    return X, y


def _run_threads(targets):
    errors = []

    def wrap(fn):
        def run():
            try:
                fn()
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        return run

    threads = [threading.Thread(target=wrap(t)) for t in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


@pytest.mark.filterwarnings("ignore:.*variance fell below")
@pytest.mark.parametrize(
    "make",
    [
        lambda: SCWClassifier(kernel="rbf", block_size=16),
        lambda: SCWClassifier(kernel="rbf", budget=30, budget_policy="project"),
        lambda: AROWClassifier(kernel="rbf", budget=30, budget_policy="oldest"),
        lambda: CWClassifier(rule="var"),
        lambda: CWClassifier(covariance="diag"),
    ],
    ids=["rbf", "rbf-project", "rbf-oldest", "primal-full", "primal-diag"],
)
def test_reading_while_learning_leaves_the_sequential_model(make):
    X, y = _stream()
    est = make().partial_fit(X[:20], y[:20])
    done = threading.Event()

    def learn():
        for lo in range(20, len(y), 10):
            est.partial_fit(X[lo : lo + 10], y[lo : lo + 10])
        done.set()

    def read():
        while not done.is_set():
            p = est.predict_proba(X[:50])
            assert np.all(np.isfinite(p))
            est.decision_function(X[:50])
            if est.get_params()["kernel"] != "linear":
                assert all(np.isfinite(np.ravel(est.dual_coef_)))

    _run_threads([learn, read])
    ref = make().partial_fit(X[:20], y[:20])
    for lo in range(20, len(y), 10):
        ref.partial_fit(X[lo : lo + 10], y[lo : lo + 10])
    np.testing.assert_array_equal(est.decision_function(X), ref.decision_function(X))
    np.testing.assert_array_equal(est.predict_proba(X), ref.predict_proba(X))
    assert est.n_updates_ == ref.n_updates_


def test_two_threads_learning_one_model_keep_it_consistent():
    """Calls from two threads are applied one after the other (in an order the threads
    decide): every row is learnt once and the model stays usable and picklable."""
    X, y = _stream(1)
    est = SCWClassifier(kernel="rbf")
    halves = [(X[:200], y[:200]), (X[200:], y[200:])]

    def learner(part):
        Xp, yp = part

        def run():
            for lo in range(0, len(yp), 20):
                est.partial_fit(Xp[lo : lo + 20], yp[lo : lo + 20], classes=[0, 1])

        return run

    _run_threads([learner(halves[0]), learner(halves[1])])
    assert est.n_support_ == est.n_updates_
    assert sorted(est.support_.tolist()) == sorted(set(est.support_.tolist()))
    assert np.all(np.isfinite(est.predict_proba(X)))
    again = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(again.decision_function(X), est.decision_function(X))


def test_estimators_fitted_in_parallel_threads_equal_sequential_fits():
    X, y = _stream(2)
    makers = [
        lambda: SCWClassifier(kernel="rbf", budget=40),
        lambda: AROWClassifier(kernel="poly", degree=2),
        lambda: CWClassifier(),
    ]
    parallel = [m() for m in makers]
    _run_threads([lambda e=e: e.fit(X, y) for e in parallel])
    for est, make in zip(parallel, makers, strict=True):
        ref = make().fit(X, y)
        np.testing.assert_array_equal(est.decision_function(X), ref.decision_function(X))


def test_a_failed_first_call_does_not_drop_a_call_that_waited_for_it():
    """Thread A's first partial_fit fails inside its kernel while thread B, which found
    the model started, waits for it: B then starts the model itself, and the estimator
    ends as B's data alone would make it (A's failure leaves nothing behind, and
    drops nothing of B's)."""
    rng = np.random.default_rng(3)
    XA, XB = rng.normal(size=(20, 3)), rng.normal(size=(30, 3))
    XA[:, 0] = 99.0  # the kernel recognises A's rows
    yA, yB = rng.integers(0, 2, 20), rng.integers(0, 2, 30)
    b_started = threading.Event()

    def kernel(A, B):
        if np.any(A[:, 0] == 99.0) or np.any(B[:, 0] == 99.0):
            b_started.wait(5.0)
            threading.Event().wait(0.2)  # B reaches the engine's lock meanwhile
            raise ValueError("A's rows are refused")
        return np.exp(-0.5 * ((A[:, None, :] - B[None, :, :]) ** 2).sum(-1))

    est = AROWClassifier(kernel=kernel)
    errors = {}

    def run(name, X, y):
        try:
            if name == "B":
                b_started.set()
            est.partial_fit(X, y, classes=[0, 1])
        except Exception as e:  # noqa: BLE001 - recorded for the assertions
            errors[name] = e

    a = threading.Thread(target=run, args=("A", XA, yA))
    a.start()
    threading.Event().wait(0.05)
    b = threading.Thread(target=run, args=("B", XB, yB))
    b.start()
    a.join()
    b.join()
    assert "B" not in errors and "refused" in str(errors["A"])
    ref = AROWClassifier(kernel=kernel).partial_fit(XB, yB, classes=[0, 1])
    np.testing.assert_array_equal(est.decision_function(XB), ref.decision_function(XB))
    assert est.n_updates_ == ref.n_updates_


@pytest.mark.parametrize(
    "make",
    [lambda: AROWClassifier(), lambda: SCWClassifier(kernel="rbf", budget=8)],
    ids=["primal-full", "rbf-budget"],
)
def test_a_fit_waits_for_a_call_learning_into_the_engine_it_replaces(make, monkeypatch):
    """A ``fit`` that replaces the model while another thread's call is learning into
    the old engine waits for that call (it holds the old engine's lock), so the call's
    counters never land on the new model: after both, the model and its counters are
    the fit's alone (a reviewer's race: the fit's counters plus the dropped call's)."""
    import kernelcw.estimators._base as base

    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 5))
    y = (X[:, 0] > 0).astype(int)
    ref = make().fit(X, y)
    est = make().fit(X[:10], y[:10])
    learn = base.learn_or_stabilise
    in_learn, fit_called = threading.Event(), threading.Event()

    def slow(*args, **kw):
        res = learn(*args, **kw)
        if threading.current_thread().name == "other":
            in_learn.set()
            fit_called.wait(10)
            time.sleep(0.2)  # (the fit, started meanwhile, must wait for this call)
        return res

    monkeypatch.setattr(base, "learn_or_stabilise", slow)
    other = threading.Thread(target=est.partial_fit, args=(X[:5], 1 - y[:5]), name="other")
    other.start()
    assert in_learn.wait(10)
    fit_called.set()
    est.fit(X, y)
    other.join()
    assert (est.n_updates_, est.n_mistakes_) == (ref.n_updates_, ref.n_mistakes_)
    np.testing.assert_array_equal(est.decision_function(X), ref.decision_function(X))


def _pause_after_start(monkeypatch, name: str) -> threading.Event:
    """Thread ``name`` pauses for 0.3 s just after :meth:`CWEstimator._start` made its
    new engine the model's (a thread switch there); the event is set as it pauses."""
    from kernelcw.estimators._base import CWEstimator

    start, paused = CWEstimator._start, threading.Event()

    def slow(self, *args):
        out = start(self, *args)
        if threading.current_thread().name == name:
            paused.set()
            time.sleep(0.3)
        return out

    monkeypatch.setattr(CWEstimator, "_start", slow)
    return paused


def test_a_call_that_sees_a_first_call_start_waits_for_its_rows(monkeypatch):
    """Thread A's first partial_fit fails in learning, after its new engine became the
    model's; thread B, which sees the model started in between, waits for A's call
    (the engine's lock is A's from before the model had it) and then finds the model
    as A's failure left it, unfitted: its own row alone cannot start it (one class),
    and it is not learnt into A's dropped engine with B told it went in."""
    paused = _pause_after_start(monkeypatch, "A")
    est = SCWClassifier(kernel="poly", degree=3)
    out = {}

    def a():
        try:
            est.partial_fit(np.full((1, 4), 1e60), np.array([0]), classes=[0, 1])
        except ValueError as e:
            out["A"] = e

    def b():
        paused.wait(5)
        try:
            out["B"] = est.partial_fit_margins(np.ones((1, 4)), np.array([1]))
        except ValueError as e:
            out["B"] = e

    ta, tb = threading.Thread(target=a, name="A"), threading.Thread(target=b, name="B")
    ta.start()
    tb.start()
    ta.join()
    tb.join()
    assert "NaN or infinity" in str(out["A"])
    assert "one class" in str(out["B"])
    assert not hasattr(est, "classes_")


def test_a_call_that_sees_a_fit_start_continues_the_fitted_model(monkeypatch):
    """A partial_fit in another thread that sees a fit's new engine before the fit's
    first pass waits for the whole fit (its lock is the fit's from before the model had
    it): the model is the fit's, then the row; never the row, then the fit's passes on
    top of it."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3))
    y = (X[:, 0] > 0).astype(int)
    xb, yb = np.array([[5.0, -5.0, 5.0]]), np.array([0])
    ref = SCWClassifier(kernel="rbf").fit(X, y).partial_fit(xb, yb)
    est = SCWClassifier(kernel="rbf").fit(X[:5], y[:5])
    paused = _pause_after_start(monkeypatch, "A")
    ta = threading.Thread(target=lambda: est.fit(X, y), name="A")
    tb = threading.Thread(target=lambda: (paused.wait(5), est.partial_fit(xb, yb)), name="B")
    ta.start()
    tb.start()
    ta.join()
    tb.join()
    np.testing.assert_array_equal(est.decision_function(X), ref.decision_function(X))
    np.testing.assert_array_equal(est.support_, ref.support_)
    assert (est.n_updates_, est.n_mistakes_) == (ref.n_updates_, ref.n_mistakes_)


def _pause_in_validate(monkeypatch, name: str, fail: bool) -> threading.Event:
    """Thread ``name`` pauses for 0.4 s in its call's input checks (after a ``fit`` or a
    first ``partial_fit`` has noted the model it would put back), then raises if
    ``fail``; the event is set as it pauses."""
    from kernelcw.estimators._base import CWEstimator

    validate, paused = CWEstimator._validate, threading.Event()

    def slow(self, *args, **kw):
        if threading.current_thread().name == name:
            paused.set()
            time.sleep(0.4)
            if fail:
                raise ValueError("A's rows are refused")
        return validate(self, *args, **kw)

    monkeypatch.setattr(CWEstimator, "_validate", slow)
    return paused


def _two(a, b) -> dict:
    """Run ``a`` in thread "A", then ``b`` in thread "B" once A paused; their errors."""
    errors: dict = {}

    def run(name, fn):
        try:
            fn()
        except Exception as e:  # noqa: BLE001 - recorded for the assertions
            errors[name] = e

    ta = threading.Thread(target=run, args=("A", a), name="A")
    tb = threading.Thread(target=run, args=("B", b), name="B")
    ta.start()
    tb.start()
    ta.join()
    tb.join()
    return errors


def test_a_failing_fit_does_not_undo_a_fit_that_finished_meanwhile(monkeypatch):
    """Thread A's fit fails after thread B's fit of the same estimator began: fits are
    applied one after the other, so B's model stays (A's failure once put back the
    model from before both, though B's fit had returned)."""
    X, y = _stream(4, n=120)
    ref = SCWClassifier(kernel="rbf").fit(X[60:], y[60:])
    est = SCWClassifier(kernel="rbf").fit(X[:10], y[:10])
    paused = _pause_in_validate(monkeypatch, "A", fail=True)
    errors = _two(lambda: est.fit(X, y), lambda: (paused.wait(5), est.fit(X[60:], y[60:])))
    assert "B" not in errors and "refused" in str(errors["A"])
    np.testing.assert_array_equal(est.decision_function(X), ref.decision_function(X))
    assert (est.n_updates_, est.n_mistakes_) == (ref.n_updates_, ref.n_mistakes_)


def test_a_first_call_does_not_replace_a_fit_that_finished_meanwhile(monkeypatch):
    """Thread A's first partial_fit is checking its rows when thread B fits the same
    estimator: one after the other, so the model ends as B's fit (A's call once
    started a fresh model over B's fitted one, which B had been told was done)."""
    X, y = _stream(5, n=120)
    ref = SCWClassifier(kernel="rbf").fit(X, y)
    est = SCWClassifier(kernel="rbf")
    paused = _pause_in_validate(monkeypatch, "A", fail=False)
    errors = _two(
        lambda: est.partial_fit(X[:3], y[:3], classes=[0, 1]),
        lambda: (paused.wait(5), est.fit(X, y)),
    )
    assert not errors
    np.testing.assert_array_equal(est.decision_function(X), ref.decision_function(X))
    assert (est.n_updates_, est.n_mistakes_) == (ref.n_updates_, ref.n_mistakes_)


def test_a_failing_fit_keeps_the_counts_of_calls_that_continued_the_model(monkeypatch):
    """While thread A's fit (which fails) checks its rows, thread B continues the model
    it would replace: A puts back that model with B's rows counted (it put back the
    counters from before B's call beside an engine that had learnt B's rows)."""
    X, y = _stream(6, n=120)
    ref = SCWClassifier(kernel="rbf").fit(X[:30], y[:30]).partial_fit(X[30:60], y[30:60])
    est = SCWClassifier(kernel="rbf").fit(X[:30], y[:30])
    paused = _pause_in_validate(monkeypatch, "A", fail=True)
    errors = _two(
        lambda: est.fit(X, y), lambda: (paused.wait(5), est.partial_fit(X[30:60], y[30:60]))
    )
    assert "B" not in errors and "refused" in str(errors["A"])
    np.testing.assert_array_equal(est.decision_function(X), ref.decision_function(X))
    assert (est.n_updates_, est.n_mistakes_) == (ref.n_updates_, ref.n_mistakes_)


def test_a_ctrl_c_anywhere_in_install_leaves_the_fitted_model_and_its_counters():
    """A KeyboardInterrupt at each line of ``_install`` (where a refit replaces the
    model) leaves the model it had and its counters (a review found one line after
    which the old model came back with the new model's zeroed counters)."""
    import sys

    from kernelcw.estimators._base import CWEstimator

    X, y = _stream(7, n=60)
    code = CWEstimator._install.__code__
    lines = sorted({line for _, _, line in code.co_lines() if line and line > code.co_firstlineno})
    assert len(lines) >= 6
    for at in lines:
        est = SCWClassifier(kernel="rbf").fit(X[:30], y[:30])
        before = (est.n_updates_, est.n_mistakes_, est.decision_function(X))
        fired = []

        def tracer(frame, event, arg, at=at, fired=fired):
            if frame.f_code is not code:
                return None

            def local(frame, event, arg):
                if event == "line" and frame.f_lineno == at and not fired:
                    fired.append(at)
                    raise KeyboardInterrupt
                return local

            return local

        sys.settrace(tracer)
        try:
            est.fit(X, y)
        except KeyboardInterrupt:
            pass
        finally:
            sys.settrace(None)
        if not fired:  # (a line this fit does not run)
            continue
        assert (est.n_updates_, est.n_mistakes_) == before[:2], at
        np.testing.assert_array_equal(est.decision_function(X), before[2])


def test_a_fit_failing_after_it_replaced_the_model_waits_for_no_old_lock(monkeypatch):
    """A fit that fails after its engine replaced the model puts the old one back
    without taking the old engine's lock (it holds its new engine's, and no call learns
    into the old one any more): a thread that holds the old engine's lock and waits
    for the model's current engine (``combine([est, est])`` reading the engine twice
    around the fit's replacement) no longer deadlocks with it."""
    from kernelcw.estimators._base import CWEstimator

    X, y = _stream(8, n=60)
    est = SCWClassifier(kernel="rbf").fit(X[:30], y[:30])
    old, learn, installed = est._engine, CWEstimator._learn, threading.Event()

    def failing(self, *args, **kw):
        if threading.current_thread().name == "F":
            installed.set()
            time.sleep(0.3)
            raise ValueError("the fit fails after it replaced the model")
        return learn(self, *args, **kw)

    monkeypatch.setattr(CWEstimator, "_learn", failing)

    def reader():
        with old.lock:
            installed.wait(5)
            with est._engine.lock:  # the fit's new engine, held until it put back the old
                pass

    f = threading.Thread(target=lambda: pytest.raises(ValueError, est.fit, X, y), name="F")
    r = threading.Thread(target=reader)
    f.daemon = r.daemon = True  # (a deadlock fails the test instead of hanging pytest)
    f.start()
    r.start()
    f.join(10)
    r.join(10)
    assert not f.is_alive() and not r.is_alive(), "deadlocked"
    assert est._engine is old


class _SwapOnEnter:
    """An engine lock that, when first taken, puts ``new`` in as the model's engine: a
    fit in another thread replacing the engine between a reader's two reads of it."""

    def __init__(self, est, new):
        self.lock, self.est, self.new, self.swapped = threading.RLock(), est, new, False

    def acquire(self, *args):
        out = self.lock.acquire(*args)
        if not self.swapped:
            self.swapped = True
            self.est._engine = self.new
        return out

    def release(self):
        self.lock.release()

    def __enter__(self):
        return self.acquire()

    def __exit__(self, *exc):
        self.release()


@pytest.mark.parametrize("call", ["decision_function", "predict", "predict_proba"])
def test_a_read_uses_the_engine_whose_lock_it_holds(call):
    """Reads took ``self._engine.lock`` and then read ``self._engine`` again: an engine
    a refit put in between was read without its lock, mid-training (thousands of wrong
    decisions in a stress run). The read now holds the lock of the engine it reads,
    and takes the new one's if the model changed meanwhile."""
    X, y = _xy()
    old = SCWClassifier(kernel="rbf").fit(X, y)
    new_model = SCWClassifier(kernel="rbf").fit(X[::-1], y[::-1])
    new = new_model._engine
    held = []
    decision, margins = new.decision, new.margins
    new.decision = lambda Z: held.append(new.lock._is_owned()) or decision(Z)
    new.margins = lambda Z: held.append(new.lock._is_owned()) or margins(Z)
    old._engine.__dict__["_lock"] = _SwapOnEnter(old, new)
    got = getattr(old, call)(X)
    assert held == [True]
    np.testing.assert_array_equal(got, getattr(new_model, call)(X))


def _xy():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 4))
    return X, (X[:, 0] > 0).astype(int)


@pytest.mark.parametrize("covariance", ["full", "diag"])
def test_primal_attributes_are_copies(covariance):
    """coef_, mean_ and covariance_ handed out the model's own arrays: a reference kept
    changed as the model learnt, and a write into it changed predictions unchecked
    (intercept_ and the dual attributes were copies already)."""
    X, y = _xy()
    m = AROWClassifier(covariance=covariance).fit(X[:30], y[:30])
    got = {k: getattr(m, k) for k in ("coef_", "mean_", "covariance_")}
    kept = {k: v.copy() for k, v in got.items()}
    f = m.decision_function(X)
    for v in got.values():
        v[...] = 7.0
    np.testing.assert_array_equal(m.decision_function(X), f)
    m.partial_fit(X[30:], 1 - y[30:])
    for k in got:
        assert not np.array_equal(getattr(m, k), kept[k])  # (it learnt)
