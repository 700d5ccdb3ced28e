"""Learning one row per call: the dual factor stays one growing buffer (the state does
not gain arrays with the number of calls), the model equals one ``fit`` on the same
rows to rounding, with and without a budget that binds later, and the buffer grows
across its capacity without changing the model or breaking rollback."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import stream

from kernelcw import AROWClassifier, SCWClassifier
from kernelcw.engines.dual import DualEngine
from kernelcw.engines.dual.panels import GROWTH, MIN_CAPACITY, PanelForm


def _rel(a, b) -> float:
    return float(np.linalg.norm(np.asarray(a) - b) / max(np.linalg.norm(b), 1e-300))


def _n_arrays(obj) -> int:
    """Arrays an object holds, in its attributes and in lists or tuples of them."""
    if isinstance(obj, np.ndarray):
        return 1
    if isinstance(obj, list | tuple):
        return sum(_n_arrays(x) for x in obj)
    if hasattr(obj, "__dict__") and not isinstance(obj, type):
        return sum(_n_arrays(v) for v in vars(obj).values())
    return 0


def _assert_same_model(rows, whole, X) -> None:
    assert rows.n_support_ == whole.n_support_
    np.testing.assert_array_equal(rows.support_, whole.support_)
    assert _rel(rows.dual_coef_, whole.dual_coef_) < 1e-10
    assert _rel(rows.covariance_coef_, whole.covariance_coef_) < 1e-10
    np.testing.assert_array_equal(rows.predict(X), whole.predict(X))


@pytest.mark.parametrize(
    "budget, policy",
    [(None, "project"), (90, "project"), (90, "smallest"), (90, "random"), (90, "oldest")],
)
def test_one_row_calls_keep_the_state_flat_and_equal_one_fit(budget, policy):
    X, y = stream(240)
    params = dict(kernel="rbf", gamma=0.2, budget=budget, budget_policy=policy, random_state=0)
    rows = SCWClassifier(**params)
    shapes = {}
    for i in range(X.shape[0]):
        rows.partial_fit(X[i : i + 1], y[i : i + 1], classes=[0, 1])
        if i + 1 in (40, 80, 160, 240):
            state = rows._engine.state_dict()
            form = rows._engine.forms[0]
            shapes[i + 1] = (form.name, sorted(state), _n_arrays(form))
            assert all(type(v) is np.ndarray for v in state.values())
    # the state's keys and the arrays the form holds depend on the form, not on the calls
    assert shapes[40] == shapes[80]
    assert shapes[160] == shapes[240]
    if budget is None:
        assert shapes[40] == shapes[240]
        assert shapes[240][0] == "panels"
        form = rows._engine.forms[0]
        assert isinstance(form.LK, np.ndarray) and form.LK.shape[0] >= form.n
    else:
        forms = {"oldest": "queue", "random": "lazy"}
        assert shapes[240][0] == forms.get(policy, "explicit")
        assert rows.n_support_ == budget
    whole = SCWClassifier(**params).fit(X, y)
    _assert_same_model(rows, whole, X)


@pytest.mark.parametrize("policy", ["smallest", "project"])
def test_one_row_calls_between_blocks_equal_one_fit(policy):
    """The explicit form walks one input round by round and a block in the blocked
    walk: calls of one row between calls of several, in one stream, give one fit's
    model (the two walks keep the same state; the budget binds early and removes on
    most updates)."""
    X, y = stream(420, seed=2)
    params = dict(kernel="rbf", gamma=0.2, budget=30, budget_policy=policy, random_state=0)
    est = AROWClassifier(**params).set_params(block_size=9)
    sizes = [1, 5, 1, 1, 17, 1, 40, 1, 2, 1, 64]
    lo, k = 0, 0
    while lo < X.shape[0]:
        hi = min(X.shape[0], lo + sizes[k % len(sizes)])
        est.partial_fit(X[lo:hi], y[lo:hi], classes=[0, 1])
        lo, k = hi, k + 1
    assert est._engine.factor_forms() == ["explicit"]
    _assert_same_model(est, AROWClassifier(**params).set_params(block_size=9).fit(X, y), X)


def test_factor_grows_across_capacity_boundaries_without_changing_the_model():
    """Calls of varied sizes cross several capacities; after each call the model equals
    one fit on the rows so far, and the buffer holds at most GROWTH^2 n^2 doubles."""
    X, y = stream(400, seed=1)
    params = dict(kernel="rbf", gamma=0.2, r=1.0, block_size=16)
    est = AROWClassifier(**params)
    caps, lo = [], 0
    for size in [20, 1, 3, 1, 1, 9, 40, 1, 64, 2, 100, 1, 157]:
        hi = lo + size
        est.partial_fit(X[lo:hi], y[lo:hi], classes=[0, 1])
        form = est._engine.forms[0]
        cap = form.capacity
        caps.append(cap)
        assert form.n <= cap
        assert cap == MIN_CAPACITY or cap <= max(form.n, GROWTH**2 * form.n + 1)
        whole = AROWClassifier(**params).fit(X[:hi], y[:hi])
        _assert_same_model(est, whole, X[:hi])
        lo = hi
    assert lo == X.shape[0]
    assert len(set(caps)) >= 4  # several growths
    assert caps == sorted(caps)
    form = est._engine.forms[0]
    assert form.nbytes >= form.LK.nbytes == 8 * form.capacity**2


def test_rollback_and_round_trip_across_a_growth():
    """An error after the buffer grew (within the same call) restores the model exactly;
    a state saved next to a capacity boundary continues bit for bit."""
    X, y = stream(200, seed=2)

    class Failing:
        """RBF that raises on its ``fail_at``-th call from now on."""

        __name__ = "failing_rbf"
        calls, fail_at = 0, None

        def __call__(self, A, B):
            self.calls += 1
            if self.fail_at is not None and self.calls == self.fail_at:
                raise KeyboardInterrupt("injected")
            d = (A * A).sum(1)[:, None] + (B * B).sum(1)[None, :] - 2.0 * A @ B.T
            return np.exp(-0.2 * np.maximum(d, 0.0))

    kern = Failing()
    est = AROWClassifier(kernel=kern, r=1.0, block_size=8)
    est.partial_fit(X[:30], y[:30], classes=[0, 1])
    form = est._engine.forms[0]
    assert form.n < form.capacity < form.n + 40
    before = est._engine.state_dict()
    cap = form.capacity
    kern.fail_at = kern.calls + 2 * 4 + 1  # 2 kernel calls per block: fail in block 5
    with pytest.raises(KeyboardInterrupt):
        est.partial_fit(X[30:80], y[30:80])
    assert est._engine.forms[0].capacity == cap
    after = est._engine.state_dict()
    assert after.keys() == before.keys()
    for k in before:
        np.testing.assert_array_equal(after[k], before[k], err_msg=k)
    kern.fail_at = None
    copy = DualEngine.from_state(est._engine.spec, est._engine.state_dict())
    Y = est._label_matrix(y)
    r1 = est._engine.learn(X[30:120], Y[30:120])
    r2 = copy.learn(X[30:120], Y[30:120])
    np.testing.assert_array_equal(r1.margins, r2.margins)
    assert copy.forms[0].capacity == est._engine.forms[0].capacity > cap
    s1, s2 = est._engine.state_dict(), copy.state_dict()
    for k in s1:
        np.testing.assert_array_equal(s1[k], s2[k], err_msg=k)


def test_empty_form_state_and_growth_from_nothing():
    f = PanelForm()
    assert f.n == 0 and f.capacity == 0 and f.nu(1.0).shape == (0,)
    g = PanelForm.from_state(f.state_dict())
    assert g.n == 0 and g.Pi(1.0).shape == (0, 0)
    f._reserve(5)
    assert f.capacity == MIN_CAPACITY
