"""The dual engine's own interface: the fitted state as plain arrays (state_dict /
from_state continue bit for bit), rollback through checkpoint / restore after an error
part-way through a call, the factor forms it reports, and the errors of its statuses."""

from __future__ import annotations

import copy
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from kernelcw import AROWClassifier, CWClassifier, PAClassifier, SCWClassifier
from kernelcw._blas import RANK_LOOP_MAX
from kernelcw.engines.dual import DualEngine
from kernelcw.engines.dual.deferred import sub_block
from kernelcw.engines.dual.status import NONFINITE, NOT_PSD, OK, raise_for
from kernelcw.rules import AROW, STDEV, VAR

# (estimator, parameters, the factor form each model is in after the first chunk)
FORMS = {
    "panels": (AROWClassifier, dict(r=1.0), "panels"),
    "explicit": (AROWClassifier, dict(r=1.0, solver="explicit"), "explicit"),
    "first_order": (PAClassifier, dict(), "first_order"),
    "queue": (AROWClassifier, dict(r=1.0, budget=15, budget_policy="oldest"), "queue"),
    "random": (SCWClassifier, dict(budget=15, budget_policy="random"), "lazy"),
    "smallest": (AROWClassifier, dict(r=1.0, budget=15, budget_policy="smallest"), "explicit"),
    "project": (AROWClassifier, dict(r=2.0, budget=15, budget_policy="project"), "explicit"),
    "explicit_oldest": (
        AROWClassifier,
        dict(r=1.0, solver="explicit", budget=15, budget_policy="oldest"),
        "explicit",
    ),
    "first_order_random": (PAClassifier, dict(budget=15, budget_policy="random"), "first_order"),
}
INPUTS = ["dense-rbf", "sparse-rbf", "dense-linear", "precomputed"]


def _stream(seed: int, n: int, n_classes: int, inputs: str = "dense-rbf"):
    """Inputs and labels; for "precomputed" the rows of the RBF Gram matrix."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5))
    if inputs.startswith("sparse"):
        X = sp.csr_matrix(np.where(rng.random(X.shape) < 0.5, X, 0.0))
    y = rng.integers(0, n_classes, size=n)
    if inputs == "precomputed":
        X = FailingRBF()(X, X)
    return X, y


def _estimator(form: str, inputs: str, **over):
    cls, params, _ = FORMS[form]
    kernel = (
        dict(kernel="rbf", gamma=0.4) if "rbf" in inputs else dict(kernel="linear", mode="dual")
    )
    return cls(**{**params, **kernel, "block_size": 16, "random_state": 5, **over})


def _labels(est, y) -> np.ndarray:
    return est._label_matrix(y)


def _assert_same_state(s1: dict, s2: dict) -> None:
    assert s1.keys() == s2.keys()
    for k in s1:
        assert np.array_equal(s1[k], s2[k]), k


def _assert_same_engine(e1: DualEngine, e2: DualEngine, X) -> None:
    np.testing.assert_array_equal(e1.decision(X), e2.decision(X))
    for a, b in zip(e1.dual_coef(), e2.dual_coef(), strict=True):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(e1.covariance_coef(), e2.covariance_coef(), strict=True):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(e1.support_positions(), e2.support_positions(), strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("inputs", INPUTS)
@pytest.mark.parametrize("n_classes", [2, 3])
@pytest.mark.parametrize("form", list(FORMS))
def test_state_dict_round_trip_continues_bit_for_bit(form, n_classes, inputs):
    X, y = _stream(1, 200, n_classes, inputs)
    est = _estimator(form, inputs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        est.partial_fit(X[:90], y[:90], classes=np.arange(n_classes))
    eng = est._engine
    assert eng.factor_forms() == [FORMS[form][2]] * eng.n_models
    state = eng.state_dict()
    assert all(type(v) is np.ndarray for v in state.values())
    assert all(v.dtype != object for v in state.values())
    copy = DualEngine.from_state(eng.spec, state)
    assert copy.factor_forms() == eng.factor_forms()
    _assert_same_state(copy.state_dict(), state)
    _assert_same_engine(eng, copy, X)
    if inputs != "precomputed":  # k(x, x) of new inputs is unknown there
        np.testing.assert_array_equal(eng.margin_variance(X), copy.margin_variance(X))
    Y = _labels(est, y)
    for lo, hi in [(90, 140), (140, 200)]:  # the budget keeps binding; forms may switch
        r1 = eng.learn(X[lo:hi], Y[lo:hi])
        r2 = copy.learn(X[lo:hi], Y[lo:hi])
        for a, b in zip(r1, r2, strict=True):
            np.testing.assert_array_equal(a, b)
    assert copy.factor_forms() == eng.factor_forms()
    _assert_same_engine(eng, copy, X)
    _assert_same_state(copy.state_dict(), eng.state_dict())


def test_state_dict_of_a_fresh_engine_and_of_a_switch_mid_block():
    """Before any support vector, and for a budget binding inside the next block (the
    panel form switches on the copy exactly as on the original)."""
    X, y = _stream(2, 120, 2)
    est = _estimator("smallest", "dense-rbf", budget=40)
    est.partial_fit(X[:5], y[:5], classes=[0, 1])
    eng = est._engine
    assert eng.factor_forms() == ["panels"]
    fresh = DualEngine.from_state(eng.spec, DualEngine(eng.spec).state_dict())
    assert fresh.n_support() == [0]
    copy = DualEngine.from_state(eng.spec, eng.state_dict())
    Y = _labels(est, y)
    r1, r2 = eng.learn(X[5:], Y[5:]), copy.learn(X[5:], Y[5:])
    np.testing.assert_array_equal(r1.margins, r2.margins)
    assert eng.factor_forms() == copy.factor_forms() == ["explicit"]
    _assert_same_engine(eng, copy, X)


class FailingRBF:
    """An RBF kernel (callable) that raises on its ``fail_at``-th call from now on."""

    __name__ = "failing_rbf"

    def __init__(self):
        self.calls = 0
        self.fail_at = None

    def __call__(self, A, B):
        self.calls += 1
        if self.fail_at is not None and self.calls == self.fail_at:
            raise KeyboardInterrupt("injected")
        A = A.toarray() if sp.issparse(A) else A
        B = B.toarray() if sp.issparse(B) else B
        d = (A * A).sum(1)[:, None] + (B * B).sum(1)[None, :] - 2.0 * A @ B.T
        return np.exp(-0.4 * np.maximum(d, 0.0))


@pytest.mark.parametrize(
    "form", ["panels", "explicit", "first_order", "smallest", "project", "random"]
)
@pytest.mark.parametrize("n_classes", [2, 3])
def test_checkpoint_restore_exact_after_an_error_mid_call(form, n_classes):
    """An error in the third block of a call (two kernel calls per block) leaves the state
    exactly as before the call, including a form switched part-way (panels -> explicit,
    panels -> lazy); learning then continues as if the failed call never happened."""
    X, y = _stream(3, 160, n_classes)
    kernel = FailingRBF()
    budgeted = ("smallest", "project", "random")
    over = dict(kernel=kernel, budget=30) if form in budgeted else dict(kernel=kernel)
    est = _estimator(form, "dense-rbf", **over)
    est.partial_fit(X[:20], y[:20], classes=np.arange(n_classes))
    forms_before = est._engine.factor_forms()
    before = est._engine.state_dict()
    counts = (np.copy(est.n_updates_), np.copy(est.n_mistakes_))
    kernel.fail_at = kernel.calls + 6
    with pytest.raises(KeyboardInterrupt, match="injected"):
        est.partial_fit(X[20:120], y[20:120])
    kernel.fail_at = None
    assert est._engine.factor_forms() == forms_before
    _assert_same_state(est._engine.state_dict(), before)
    np.testing.assert_array_equal(est.n_updates_, counts[0])
    np.testing.assert_array_equal(est.n_mistakes_, counts[1])
    ref = _estimator(form, "dense-rbf", **over)
    ref.partial_fit(X[:20], y[:20], classes=np.arange(n_classes))
    est.partial_fit(X[20:], y[20:])
    ref.partial_fit(X[20:], y[20:])
    if form in ("smallest", "project"):
        assert ref._engine.factor_forms() == ["explicit"] * ref._engine.n_models
    np.testing.assert_array_equal(est.decision_function(X), ref.decision_function(X))
    _assert_same_state(est._engine.state_dict(), ref._engine.state_dict())


@pytest.mark.parametrize(("form", "name"), [("queue", "queue"), ("random", "lazy")])
def test_queue_form_error_mid_call_restores_the_model(form, name):
    """The queue and lazy forms are restored like the others (what their removals
    change in place is copied first, once per call and row range): same state after
    removals in two blocks of the failed call, and it continues exactly."""
    X, y = _stream(4, 160, 2)
    kernel = FailingRBF()
    est = _estimator(form, "dense-rbf", kernel=kernel)
    est.partial_fit(X[:60], y[:60], classes=[0, 1])
    assert est._engine.factor_forms() == [name]
    before = est._engine.state_dict()
    twin = copy.deepcopy(est)
    kernel.fail_at = kernel.calls + 3
    with pytest.raises(KeyboardInterrupt):
        est.partial_fit(X[60:], y[60:])
    _assert_same_state(est._engine.state_dict(), before)
    kernel.fail_at = None
    est.partial_fit(X[60:], y[60:])
    twin.partial_fit(X[60:], y[60:])
    _assert_same_engine(est._engine, twin._engine, X)


def test_factor_forms_follow_the_budget():
    X, y = _stream(5, 120, 3)
    est = _estimator("queue", "dense-rbf", budget=50)
    est.partial_fit(X[:10], y[:10], classes=[0, 1, 2])
    assert est._engine.factor_forms() == ["panels"] * 3
    est.partial_fit(X[10:], y[10:])
    assert est._engine.factor_forms() == ["queue"] * 3
    assert est._engine.nbytes > 0


def test_soft_rule_advice_for_cw_stdev_and_var():
    """A non-finite step of CW-Stdev / CW-Var advises a soft rule (the integer rule code
    was once compared with names, so the advice never printed)."""
    for rule in (STDEV, VAR):
        with pytest.raises(FloatingPointError, match="use a soft rule such as SCW or AROW"):
            raise_for(NONFINITE, 7, "rbf", rule, explicit=False, first_order=False)
    with pytest.raises(FloatingPointError) as info:
        raise_for(NONFINITE, 7, "rbf", AROW, explicit=True, first_order=False)
    assert "soft rule" not in str(info.value) and "row 7" in str(info.value)
    with pytest.raises(ValueError, match="not positive semi-definite"):
        raise_for(NOT_PSD, 3, "rbf", AROW, explicit=False, first_order=False)
    raise_for(OK, 0, "rbf", AROW, explicit=False, first_order=False)
    # end to end: CW-Stdev's hard constraint on noisy labels in the explicit form
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 3))
    y = (X[:, 0] + 0.8 * rng.normal(size=600) > 0).astype(int)
    est = CWClassifier(rule="stdev", eta=0.95, kernel="linear", mode="dual", solver="explicit")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        with pytest.raises(FloatingPointError, match="use a soft rule such as SCW or AROW"):
            est.fit(X, y)


def test_one_fit_grows_the_factor_buffer_a_few_times(monkeypatch):
    """A fit sizes the growing factor by the rows still to come (at the update rate
    seen so far): a handful of copies of the leading block, not one per GROWTH step
    (a fit of 12,000 rows spent 7 of its 26 s in 47 copies), and a final capacity
    near the model's size on a stream whose update rate holds."""
    from kernelcw.engines.dual import panels

    grows = []
    real = panels.PanelForm._reserve

    def counting(self, need, expected=0):
        cap = self.capacity
        real(self, need, expected)
        if self.capacity != cap:
            grows.append(self.capacity)

    monkeypatch.setattr(panels.PanelForm, "_reserve", counting)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(3000, 5))
    y = rng.integers(0, 2, 3000)  # random labels: AROW updates on most rows
    est = AROWClassifier(kernel="rbf", block_size=64).fit(X, y)
    form = est.engine_.forms[0]
    steps = np.log(form.n / panels.MIN_CAPACITY) / np.log(panels.GROWTH)
    assert len(grows) <= 12 < steps
    assert form.capacity <= 1.25 * form.n
    # calls cut at block boundaries learn the same model bit for bit (the capacity is
    # no part of it)
    ref = AROWClassifier(kernel="rbf", block_size=64)
    for lo in range(0, 3000, 640):
        ref.partial_fit(X[lo : lo + 640], y[lo : lo + 640], classes=[0, 1])
    np.testing.assert_array_equal(ref.dual_coef_, est.dual_coef_)


def test_explicit_form_copies_for_rollback_only_when_a_call_changes_it():
    """The explicit form's checkpoint saves nu, Pi and the policy's matrices at the
    call's first update, into spare buffers it keeps: calls whose rows do not update
    save nothing (one-row calls on a mature budgeted model), and one that does saves
    the model as it was, into the same buffers each time; restoring after a failure
    past the first update is the conformance suite's (tests/test_engines.py)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 3))
    y = (X[:, 0] > 0).astype(int)
    est = AROWClassifier(kernel="rbf", budget=20, budget_policy="project").fit(X, y)
    assert est.engine_.factor_forms() == ["explicit"]
    form = est.engine_.forms[0]

    def saved():
        return -1 if form._spare is None else int(form._spare.saved[0])

    before = est.engine_.state_dict()
    f = est.decision_function(X)
    sure = np.argsort(-np.abs(f) * ((f >= 0) == (y == 1)))[:5]
    n_upd = est.n_updates_
    for i in sure:  # confidently right: AROW's loss is 0, nothing changes
        est.partial_fit(X[i : i + 1], y[i : i + 1])
        assert saved() == -1
    assert est.n_updates_ == n_upd and len(sure) == 5
    after = est.engine_.state_dict()
    for k in before:
        if k != "store.n_seen":  # the rows seen: counted
            np.testing.assert_array_equal(after[k], before[k], err_msg=k)
    wrong = np.flatnonzero((f >= 0) != (y == 1))[:2]
    spares = []
    for i in wrong:  # a mistake: it updates, and saves the model before the update
        model = est.engine_.state_dict()
        est.partial_fit(X[i : i + 1], y[i : i + 1])
        assert saved() == form.n == 20
        np.testing.assert_array_equal(form._spare.nu[:20], model["model0.nu"])
        # Pi and the inverse Gram matrix are kept by their lower triangles
        np.testing.assert_array_equal(
            np.tril(form._spare.Pi[:20, :20]), np.tril(model["model0.Pi"])
        )
        np.testing.assert_array_equal(
            np.tril(form._spare.kinv[:20, :20]), np.tril(model["model0.policy.kinv"])
        )
        spares.append(form._spare.Pi)
    assert spares[0] is spares[1]  # the same memory, not a copy per call


def test_blas_threads_of_each_form_follow_its_largest_learning_call():
    """The "auto" BLAS threads are chosen from a block's largest call: the explicit
    form's round-by-round walk learns with level-2 calls one input at a time (n^2 flops
    each); blocked (the Cholesky solver's policies at the budget) its largest call is a
    sub-block's Pi K (n^2 times the sub-block's inputs); it predicts with one product
    Pi K of the whole chunk (n^2 b); a factor form solves the whole block, the
    batch-pruned one included; the lazy form's walks size their own products."""
    rng = np.random.default_rng(4)
    X = rng.normal(size=(300, 4))
    y = (X[:, 0] > 0).astype(int)
    for solver, width in [("explicit", 1), ("cholesky", sub_block(40))]:
        est = SCWClassifier(kernel="rbf", budget=40, budget_policy="smallest", solver=solver)
        eng = est.fit(X, y).engine_
        assert eng.factor_forms() == ["explicit"]
        n = eng.forms[0].n
        assert eng._call_flops(256, 0, learning=True) == n * n * width
        assert eng._call_flops(256, 0) == n * n * 256
    assert sub_block(40) == 16
    panels = SCWClassifier(kernel="rbf").fit(X, y).engine_
    m = panels.forms[0].n
    assert panels._call_flops(256, 0, learning=True) == m * m * 256
    est = SCWClassifier(kernel="rbf", budget=40, budget_policy="smallest", budget_batch=5)
    pruned = est.fit(X, y).engine_
    assert pruned.factor_forms() == ["pruned"]
    n = pruned.forms[0].n
    assert pruned._call_flops(256, 0, learning=True) == n * n * 256
    # the lazy form ("random") learns input by input between its walks' solves
    lazy = SCWClassifier(kernel="rbf", budget=40, budget_policy="random").fit(X, y).engine_
    assert lazy.factor_forms() == ["lazy"]
    n = lazy.forms[0].n
    assert lazy._call_flops(256, 0, learning=True) == n * n
    assert lazy._call_flops(256, 0) == n * n * 256


def test_state_of_an_unknown_factor_form_is_a_clear_error():
    """A factor form code this version does not know (a newer writer) is a ValueError
    naming the model and the code, not a KeyError."""
    X, y = _stream(6, 60, 2)
    est = _estimator("random", "dense-rbf")
    est.partial_fit(X, y, classes=[0, 1])
    state = est._engine.state_dict()
    state["model0.form"] = np.array(99, dtype=np.int64)
    with pytest.raises(ValueError, match="model 0 is in factor form 99"):
        DualEngine.from_state(est._engine.spec, state)


@pytest.mark.parametrize("saving", [False, True])
@pytest.mark.parametrize("n", [0, 1, 37, RANK_LOOP_MAX, RANK_LOOP_MAX + 3])
def test_pi_update_writes_the_lower_triangle_and_saves_it_in_the_same_pass(n, saving):
    """The explicit walk's update of Pi (its lower triangle, in a capacity buffer) and,
    at a call's first update, the save of Pi before it (``_blas.sym_r1_save``): by one
    loop up to RANK_LOOP_MAX support vectors, by a copy and BLAS dsyr above. Nothing else
    is written."""
    from kernelcw._blas import SYM_BLAS, sym_r1_save

    rng = np.random.default_rng(n)
    cap = n + 2
    Pi, save = rng.normal(size=(cap, cap)), rng.normal(size=(cap, cap))
    Pi0, save0 = Pi.copy(), save.copy()
    c, alpha = rng.normal(size=cap), -0.37
    sym_r1_save(SYM_BLAS, n, alpha, c, Pi, save, saving)
    low = np.tril(np.ones((cap, cap), dtype=bool))
    low[n:] = low[:, n:] = False  # the leading n x n lower triangle
    want = Pi0 + alpha * np.outer(c, c)
    np.testing.assert_allclose(Pi[low], want[low], rtol=1e-13, atol=1e-13)
    np.testing.assert_array_equal(Pi[~low], Pi0[~low])
    if saving:
        np.testing.assert_array_equal(save[low], Pi0[low])  # exactly: restore's copy
        np.testing.assert_array_equal(save[~low], save0[~low])
    else:
        np.testing.assert_array_equal(save, save0)
