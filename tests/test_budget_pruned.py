"""The batch-pruned Cholesky form (kernelcw/engines/dual/pruned.py) against the slow
reference with batch pruning (tests/reference_budget.py, ``batch`` = q).

``budget_batch`` is an :class:`kernelcw.spec.EngineSpec` field the estimators read with a
default of 1 (set here as an attribute of the estimator). With q > 1 a second-order
model switches to the "pruned" form when the budget binds. Checked: every policy x
second-order rule, binary and 3-class, budgets 2..5 and larger, q from 2 to the budget,
block sizes 1..64: same predictions, mistakes, updates and surviving positions as the
reference, nu and Pi within RTOL; cutting the stream (one row at a time, ragged chunks)
does not matter; state_dict round trips bit for bit; an error mid-block restores the
model; streams on which the explicit form raises FloatingPointError (CW-Stdev on
contradictory labels, features scaled by 1e4) run through "oldest", "random" and
"smallest" without error or NaN ("project" still fails on the unscaled one: xfail,
with the reason), with q > 1 and with q = 1: "random" in the lazy Cholesky form
(kernelcw/engines/dual/lazy.py) from the start, "smallest" once the blocked nu/Pi
walk fails and the call is learned again in this form (``DualEngine.stabilise``;
"random" takes that route too in a model saved in the nu/Pi form).
"""

from __future__ import annotations

import warnings

import helpers
import numpy as np
import pytest
import reference_budget as rb
from test_budget import (
    RS,
    SECOND_ORDER,
    assert_rel_close,
    make_est,
    make_stream,
    run_ref,
)

from kernelcw import run_online
from kernelcw.engines.dual import convert

POLICIES = rb.POLICIES
RTOL = 1e-8


def est_q(rule, budget, policy, q, **over):
    est = make_est(rule, "cholesky", budget, policy, **over)
    est.budget_batch = q
    return est


def _per(value, k, binary):
    return value if binary else value[k]


def check(rule, policy, budget, q, block_size, n=260, d=5, n_classes=2, seed=0):
    rng = np.random.default_rng(seed)
    X, y = make_stream(rng, n, d, n_classes, separable=rule == "stdev")
    r = run_ref(rule, X, y, budget, policy, batch=q)
    binary = len(r.classes) == 2
    what = f"{rule}/{policy} B={budget} q={q} block={block_size} classes={n_classes}"
    res = run_online(est_q(rule, budget, policy, q, block_size=block_size), X, y, fresh=False)
    est = res.estimator
    assert set(est._engine.factor_forms()) == {"pruned"}, what
    helpers.assert_same_predictions(res.predictions, r.predictions, what=what)
    np.testing.assert_array_equal(res.cumulative_mistakes, r.cumulative_mistakes)
    np.testing.assert_array_equal(est.n_updates_, r.n_updates)
    np.testing.assert_array_equal(est.n_mistakes_, r.n_mistakes)
    for k, lr in enumerate(r.learners):
        assert len(lr.removals) >= 2 * q, what
        np.testing.assert_array_equal(_per(est.support_, k, binary), lr.support, err_msg=what)
        assert_rel_close(_per(est.dual_coef_, k, binary), lr.nu, RTOL, what=f"{what} nu")
        assert_rel_close(_per(est.covariance_coef_, k, binary), lr.Pi, RTOL, what=f"{what} Pi")
    assert np.all(np.atleast_1d(est.n_support_) <= budget)
    return X, y, est


@pytest.mark.parametrize("rule", SECOND_ORDER)
@pytest.mark.parametrize("policy", POLICIES)
def test_matches_the_batch_reference(policy, rule):
    check(rule, policy, 12, 3, 16, seed=POLICIES.index(policy))


@pytest.mark.parametrize(
    ("budget", "q", "block_size"),
    [(2, 2, 1), (3, 2, 5), (4, 3, 2), (5, 4, 16), (5, 2, 3), (30, 7, 8), (30, 30, 64)],
)
@pytest.mark.parametrize("policy", POLICIES)
def test_budgets_batches_and_block_sizes(policy, budget, q, block_size):
    check("arow", policy, budget, q, block_size, seed=budget + q)


@pytest.mark.parametrize("policy", POLICIES)
def test_three_classes(policy):
    check("scw1", policy, 9, 4, 7, n_classes=3, seed=1)


@pytest.mark.parametrize("policy", POLICIES)
def test_chunks_do_not_matter_and_state_round_trips(policy):
    X, y, est = check("arow", policy, 10, 3, 16, seed=4)
    one = est_q("arow", 10, policy, 3, block_size=16)
    for t in range(len(y)):  # one row at a time
        one.partial_fit(X[t : t + 1], y[t : t + 1], classes=[0, 1])
        assert one.n_support_ <= 10
    ragged = est_q("arow", 10, policy, 3, block_size=16)
    cuts = [0, 3, 40, 41, 97, 180, len(y)]
    for lo, hi in zip(cuts[:-1], cuts[1:], strict=True):
        ragged.partial_fit(X[lo:hi], y[lo:hi], classes=[0, 1])
    for other in (one, ragged):
        np.testing.assert_array_equal(other.support_, est.support_)
        assert other.n_mistakes_ == est.n_mistakes_
        helpers.assert_rel_close(other.dual_coef_, est.dual_coef_, 1e-10)
        helpers.assert_rel_close(other.covariance_coef_, est.covariance_coef_, 1e-10)
    # state_dict round trip: the restored engine continues bit for bit
    from kernelcw.engines.dual import DualEngine

    eng = est._engine
    assert eng.factor_forms() == ["pruned"]
    back = DualEngine.from_state(eng.spec, eng.state_dict())
    for k, v in eng.state_dict().items():
        np.testing.assert_array_equal(back.state_dict()[k], v, err_msg=k)
    Y = np.where(y[:60] == 1, 1.0, -1.0)[:, None]
    a = eng.learn(X[:60], Y)
    b = back.learn(X[:60], Y)
    np.testing.assert_array_equal(a.margins, b.margins)
    for k, v in eng.state_dict().items():
        np.testing.assert_array_equal(back.state_dict()[k], v, err_msg=k)


@pytest.mark.parametrize("policy", POLICIES)
def test_error_mid_block_restores(policy, monkeypatch):
    """A walk that fails part-way through a call (after prunes in that call) leaves the
    model as before the call."""
    from kernelcw.engines.dual import pruned

    X, y = make_stream(np.random.default_rng(2), 200, 5)
    est = est_q("arow", 8, policy, 3, block_size=16)
    est.partial_fit(X[:100], y[:100], classes=[0, 1])
    assert est._engine.factor_forms() == ["pruned"]
    before = est._engine.state_dict()
    real = pruned.PrunedForm._prune
    calls = []

    def failing(self, a, ks):
        calls.append(1)
        if len(calls) == 3:
            raise FloatingPointError("injected")
        return real(self, a, ks)

    monkeypatch.setattr(pruned.PrunedForm, "_prune", failing)
    with pytest.raises(FloatingPointError, match="injected"):
        est.partial_fit(X[100:], y[100:])
    monkeypatch.setattr(pruned.PrunedForm, "_prune", real)
    after = est._engine.state_dict()
    assert before.keys() == after.keys()
    for k, v in before.items():
        np.testing.assert_array_equal(after[k], v, err_msg=k)
    ref = est_q("arow", 8, policy, 3, block_size=16).fit(X[:100], y[:100])
    est.partial_fit(X[100:], y[100:])
    ref.partial_fit(X[100:], y[100:])
    np.testing.assert_array_equal(est.support_, ref.support_)
    helpers.assert_rel_close(est.dual_coef_, ref.dual_coef_, 1e-12)


def _hard_streams():
    """Streams on which the explicit form raises FloatingPointError once a budget binds
    (:func:`test_hard_streams_in_the_explicit_form`): CW-Stdev with a hard
    constraint on noisy (contradictory) labels, and 8 of 24 columns scaled by 1e4."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 3))
    y = (X[:, 0] + 0.8 * rng.normal(size=600) > 0).astype(int)
    Xs = rng.normal(size=(400, 24))
    Xs[:, :8] *= 1e4
    ys = (Xs[:, 0] / 1e4 + Xs[:, 9] + 0.5 * rng.normal(size=400) > 0).astype(int)
    return {"contradictory": (X, y), "unscaled": (Xs, ys)}


def _hard_est(rule, policy, solver, q):
    from kernelcw import CWClassifier

    if rule == "stdev":
        est = CWClassifier(rule="stdev", eta=0.95, kernel="linear", mode="dual", solver=solver,
                           budget=20, budget_policy=policy, random_state=0)  # fmt: skip
    else:
        est = make_est(rule, solver, 20, policy, kernel="linear")
    est.budget_batch = q
    return est


HARD = [("stdev", "contradictory"), ("stdev", "unscaled"), ("arow", "unscaled")]
REMOVE = ("oldest", "random", "smallest")


def test_hard_streams_in_the_explicit_form():
    """The explicit form is the weak one on these streams: it raises FloatingPointError
    (on most of the six; which ones, rounding decides) or finishes with every array of
    its state finite, never NaN quietly."""
    raised = 0
    for policy in ("random", "smallest"):
        for rule, stream in HARD:
            X, y = _hard_streams()[stream]
            est = _hard_est(rule, policy, "explicit", 1)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                try:
                    est.fit(X, y)
                except FloatingPointError as err:
                    assert "float64's range" in str(err)
                    raised += 1
                    continue
            assert helpers.all_finite_state(est), (rule, stream, policy)
    assert raised >= 3


@pytest.mark.parametrize("policy", ("random", "smallest", "project"))
def test_explicit_form_one_row_per_call_never_keeps_an_overflow(policy):
    """One row per call on the unscaled stream (AROW, solver "explicit"): a call either
    raises FloatingPointError, leaving the model as it was, or leaves every array of
    the state finite. "smallest"'s variances at the support vectors, which steer only
    its choice of the vector that leaves, overflowed while nu and Pi stayed finite, and
    later choices were made from NaN scores (the walk's check read nu and Pi alone)."""
    X, y = _hard_streams()["unscaled"]
    est = _hard_est("arow", policy, "explicit", 1)
    est.block_size = 1
    failed = helpers.learn_rows_all_or_nothing(est, X, y, [0, 1])
    if policy == "smallest":
        assert failed > 0  # (the overflow is caught, not kept)


@pytest.mark.parametrize(("rule", "stream"), HARD)
@pytest.mark.parametrize("policy", REMOVE)
def test_hard_streams_run_without_error(rule, policy, stream):
    X, y = _hard_streams()[stream]
    est = _hard_est(rule, policy, "cholesky", 5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # v floored: expected here
        est.fit(X, y)
    assert est._engine.factor_forms() == ["pruned"]
    assert np.all(np.isfinite(est.dual_coef_))
    assert np.all(np.isfinite(est.covariance_coef_))
    assert np.all(np.isfinite(est.decision_function(X)))
    assert est.n_support_ <= 20


@pytest.mark.parametrize(("rule", "stream"), HARD)
@pytest.mark.parametrize("policy", ("oldest", "random", "smallest", "project"))
@pytest.mark.parametrize("intercept", [False, True])
def test_hard_streams_one_row_per_call_run_without_error(rule, stream, policy, intercept):
    """The same streams one row per call, q = 1, solver "cholesky": every policy runs
    through without error and with finite attributes. (Before session 16 a one-row call
    of "smallest" or "project" took the blocked nu/Pi walk, which left float64's range
    on 7 of these 24 cases where its round-by-round walk, taken now, does not; a
    drifted nu/Pi model of "project" rebuilds no factor to fall back on.)"""
    X, y = _hard_streams()[stream]
    est = _hard_est(rule, policy, "cholesky", 1).set_params(fit_intercept=intercept)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # v floored, a switch: expected
        for i in range(X.shape[0]):
            est.partial_fit(X[i : i + 1], y[i : i + 1], classes=[0, 1])
    assert est.n_support_ <= 20
    assert np.all(np.isfinite(est.dual_coef_))
    assert np.all(np.isfinite(est.covariance_coef_))
    assert np.all(np.isfinite(est.decision_function(X)))


@pytest.mark.parametrize(("rule", "stream"), HARD)
@pytest.mark.parametrize("policy", ("random", "smallest"))
def test_hard_streams_with_q_1_continue_in_the_factor(rule, stream, policy):
    """q = 1, solver "cholesky". "smallest": where the blocked nu/Pi walk leaves
    float64's range, the call is undone and learned again in the pruned form with
    q = 1 (a warning says so). A fit is then the factor form from the start: the
    round-by-round policy's model, as the slow reference has it (which fails only in
    the explicit form). "random" is in the lazy Cholesky form from the budget's
    binding on, without a switch (the lazy and pruned forms differ by rounding, which
    the collapsing variances of these streams amplify into different decisions)."""
    X, y = _hard_streams()[stream]
    # blocks of two inputs, cut as q1's below: a walk of one input takes the
    # round-by-round walk (the same rounds to rounding); this tests the blocked walk
    est = _hard_est(rule, policy, "cholesky", 1).set_params(block_size=2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est.fit(X, y)
    switched = any("learned again" in str(w.message) for w in caught)
    forms = est._engine.factor_forms()
    if policy == "random":
        assert forms == ["lazy"] and not switched
    else:
        assert forms == (["pruned"] if switched else ["explicit"])
    if stream == "contradictory" and policy != "random":  # fails however it is cut
        assert switched
    assert np.all(np.isfinite(est.dual_coef_))
    assert np.all(np.isfinite(est.covariance_coef_))
    assert np.all(np.isfinite(est.decision_function(X)))
    assert est.n_support_ <= 20
    if switched:
        q1 = _hard_est(rule, policy, "cholesky", 1).set_params(block_size=2)
        q1.partial_fit(X[:2], y[:2], classes=[0, 1])  # no budget binds yet: panels
        q1._engine._ctx = q1._engine._ctx._replace(factor_only=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            q1.partial_fit(X[2:], y[2:])  # the same blocks as est's
        np.testing.assert_array_equal(est.support_, q1.support_)
        helpers.assert_rel_close(est.dual_coef_, q1.dual_coef_, 1e-12)


@pytest.mark.filterwarnings("ignore:.*margin variance fell below")  # expected here
@pytest.mark.parametrize("policy", ("random", "smallest"))
def test_hard_stream_three_classes_continue_in_the_factor(policy):
    """Three one-vs-rest models: all move to the factor form together."""
    from kernelcw import CWClassifier

    X, _ = _hard_streams()["contradictory"]
    rng = np.random.default_rng(1)
    y = np.digitize(X[:, 0] + 0.8 * rng.normal(size=len(X)), [-0.5, 0.5])
    est = CWClassifier(rule="stdev", eta=0.95, kernel="linear", mode="dual", budget=20,
                       budget_policy=policy, random_state=0)  # fmt: skip
    if policy == "random":  # the lazy Cholesky form: nothing to switch
        est.fit(X, y)
        assert est._engine.factor_forms() == ["lazy"] * 3
    else:
        with pytest.warns(RuntimeWarning, match="learned again"):
            est.fit(X, y)
        assert est._engine.factor_forms() == ["pruned"] * 3
    assert np.all(np.isfinite(est.decision_function(X)))
    assert np.all(est.n_support_ <= 20)


def test_stabilised_call_that_fails_again_leaves_the_model_unchanged(monkeypatch):
    """The second try failing too: the error, and the model as before the call (in its
    nu/Pi form), still usable."""
    from kernelcw.engines.dual import pruned

    X, y = _hard_streams()["contradictory"]
    est = _hard_est("stdev", "smallest", "cholesky", 1)
    est.fit(X[:40], y[:40])  # (before the drift floors v: then the factor form takes over)
    assert est._engine.factor_forms() == ["explicit"]
    before = {k: v.copy() for k, v in est._engine.state_dict().items()}
    counts = (est.n_updates_, est.n_mistakes_)

    def fail(self, *args, **kw):
        raise FloatingPointError("made to fail")

    monkeypatch.setattr(pruned.PrunedForm, "walk", fail)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        with pytest.raises(FloatingPointError):
            est.partial_fit(X[60:], y[60:])
    assert est._engine.factor_forms() == ["explicit"]
    after = est._engine.state_dict()
    assert before.keys() == after.keys()
    for k in before:
        np.testing.assert_array_equal(before[k], after[k], err_msg=k)
    assert (est.n_updates_, est.n_mistakes_) == counts
    assert not est._engine._ctx.factor_only  # what binds later binds as before, too
    est.predict(X)


@pytest.mark.parametrize("policy", ("random", "smallest"))
@pytest.mark.parametrize("n_classes", (2, 3))
def test_stabilise_keeps_the_model(policy, n_classes, monkeypatch):
    """The explicit form's model, moved to the factor form (explicit_to_pruned, from
    zeta, g and the Gram matrix instead of nu and Pi), is the same model to rounding,
    and both continue alike; factor_only survives a state_dict round trip. ("random"
    routed to the nu/Pi walk, as a model saved in that form is.)"""
    from kernelcw.engines.dual import DualEngine

    monkeypatch.setattr(convert, "LAZY_POLICIES", ())
    X, y = make_stream(np.random.default_rng(5), 300, 4, n_classes)
    est = make_est("arow", "cholesky", 12, policy).fit(X[:200], y[:200])
    ref = make_est("arow", "cholesky", 12, policy).fit(X[:200], y[:200])
    assert set(est._engine.factor_forms()) == {"explicit"}
    assert est._engine.stabilise()
    assert set(est._engine.factor_forms()) == {"pruned"}
    helpers.assert_rel_close(est.decision_function(X), ref.decision_function(X), 1e-12)
    for name in ("dual_coef_", "covariance_coef_"):
        helpers.assert_rel_close(
            np.asarray(getattr(est, name), dtype=float),
            np.asarray(getattr(ref, name), dtype=float),
            1e-12,
        )
    back = DualEngine.from_state(est._engine.spec, est._engine.state_dict())
    assert back._ctx.factor_only and back.factor_forms() == est._engine.factor_forms()
    est.partial_fit(X[200:], y[200:])
    ref.partial_fit(X[200:], y[200:])
    np.testing.assert_array_equal(est.n_mistakes_, ref.n_mistakes_)
    helpers.assert_rel_close(est.decision_function(X), ref.decision_function(X), 1e-9)


@pytest.mark.parametrize(("rule", "stream"), HARD)
@pytest.mark.parametrize("q", (1, 5))
def test_hard_streams_run_through_project(rule, stream, q):
    """ "project" learns with the jittered kernel (kernelcw/engines/dual/store.py): its
    projections are exact in that kernel's feature space and Sigma stays positive
    definite. q = 5: the pruned form from the budget's binding. q = 1: the blocked
    nu/Pi walk. Until session 26 it left float64's range on these streams (its
    projection's two halves cancelled, section 8 of doc/dual-form.md) and the call
    was learned again in the pruned form with q = 1 (from nu and Pi:
    explicit_to_pruned), with a warning; with balanced halves it runs through, no
    variance floored; should it fail, the fallback still applies. (With the plain
    kernel every one of these raised FloatingPointError: the jitter, larger than K's
    small eigenvalues, made the projection stretch Sigma out of positive definiteness.)"""
    X, y = _hard_streams()[stream]
    est = _hard_est(rule, "project", "cholesky", q)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est.fit(X, y)
    switched = any("learned again" in str(w.message) for w in caught)
    if q == 5:
        assert est._engine.factor_forms() == ["pruned"] and not switched
    elif switched:
        assert est._engine.factor_forms() == ["pruned"]
    else:
        assert est._engine.factor_forms() == ["explicit"] and est.n_variance_floored_ == 0
    for name in ("dual_coef_", "covariance_coef_"):
        assert np.all(np.isfinite(getattr(est, name))), name
    assert np.all(np.isfinite(est.decision_function(X)))
    assert np.all(np.isfinite(est.predict_proba(X)))
    assert est.n_support_ <= 20


def test_project_stabilised_from_nu_pi_is_the_same_model(monkeypatch):
    """explicit_to_pruned for "project" (L from Pi without forming M = -a^2 Pi^-1):
    the pruned form's model is the explicit one to rounding, and both continue alike."""
    X, y = make_stream(np.random.default_rng(5), 300, 4, 2)
    est = make_est("arow", "cholesky", 12, "project").fit(X[:200], y[:200])
    ref = make_est("arow", "cholesky", 12, "project").fit(X[:200], y[:200])
    assert est._engine.factor_forms() == ["explicit"]
    assert est._engine.stabilise()
    assert est._engine.factor_forms() == ["pruned"]
    for name in ("dual_coef_", "covariance_coef_"):
        helpers.assert_rel_close(getattr(est, name), getattr(ref, name), 1e-9)
    est.partial_fit(X[200:], y[200:])
    ref.partial_fit(X[200:], y[200:])
    np.testing.assert_array_equal(est.n_mistakes_, ref.n_mistakes_)
    helpers.assert_rel_close(est.decision_function(X), ref.decision_function(X), 1e-7)


@pytest.mark.parametrize("q", (1, 3))
def test_project_model_saved_before_the_jitter_loads_and_continues(q):
    """A state without ``kernel_jitter`` (a budgeted "project" model saved before
    such models learned with the jittered kernel: k(x, x) and the Gram caches'
    diagonals of the plain kernel) loads with them jittered, and continues as the
    model saved now does, to rounding."""
    from kernelcw.budget import PROJECT_JITTER
    from kernelcw.engines.dual import DualEngine
    from kernelcw.engines.dual.state_check import check_state

    X, y = make_stream(np.random.default_rng(8), 200, 4, 2)
    est = make_est("arow", "cholesky", 12, "project")
    est.budget_batch = q
    est.fit(X[:120], y[:120])
    eng = est._engine
    new = eng.state_dict()
    old = {k: v.copy() for k, v in new.items() if k != "kernel_jitter"}
    n = old["model0.idx"].shape[0]
    old["model0.kap"] = old["model0.kap"] / (1.0 + PROJECT_JITTER)
    for key in ("model0.G", "model0.policy.G"):
        if key in old:
            old[key][np.diag_indices(n)] /= 1.0 + PROJECT_JITTER
    check_state(eng.spec, old)
    back = DualEngine.from_state(eng.spec, old)
    for k, v in back.state_dict().items():
        scale = np.abs(v).max() if v.size else 0.0
        np.testing.assert_allclose(v, new[k], rtol=1e-15, atol=1e-15 * scale, err_msg=k)
    Y = np.where(y[120:] == 1, 1.0, -1.0)[:, None]
    a, b = eng.learn(X[120:], Y), back.learn(X[120:], Y)
    helpers.assert_rel_close(b.margins, a.margins, 1e-9)


def test_budget_batch_validation():
    X, y = make_stream(np.random.default_rng(0), 50, 3)
    for q, msg in [(0, "budget_batch"), (2.5, "budget_batch"), (9, "at most budget")]:
        est = make_est("arow", budget=8, policy="random")
        est.budget_batch = q
        with pytest.raises(ValueError, match=msg):
            est.fit(X, y)
    # (each cause by itself: the message named both, blaming the solver of pa1 too)
    for over, says in ((dict(solver="explicit"), "needs solver='cholesky'"),
                       (dict(rule="pa1"), "needs a second-order rule")):  # fmt: skip
        rule = over.pop("rule", "arow")
        est = make_est(rule, over.get("solver", "cholesky"), 8, "random")
        est.budget_batch = 2
        with pytest.raises(ValueError, match=says):
            est.fit(X, y)
    est = make_est("arow", budget=8, policy="random", random_state=RS)
    est.budget_batch = 1  # q = 1: the round-by-round policies, as before
    est.fit(X, y)
    assert est._engine.factor_forms() == ["lazy"]


def test_the_fallback_converts_a_model_whose_precision_is_below_its_rounding():
    """CW-Stdev on contradictory labels, "smallest" at B = 20 on a linear kernel of
    3 features, in calls of 7, 1, 1 and 3 rows: at row 402 the nu/Pi form failed while
    some zeta were 1e111, and M = diag(1/zeta) + a K (K of rank 3) did not factor, so
    the call raised where fit and one row per call went on in the factor form."""
    X, y = _hard_streams()["contradictory"]
    est = _hard_est("stdev", "smallest", "cholesky", 1)
    lo, calls = 0, 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # (the switch: said, expected)
        while lo < X.shape[0]:
            c = (7, 1, 1, 3)[calls % 4]
            est.partial_fit(X[lo : lo + c], y[lo : lo + c], classes=[0, 1])
            lo, calls = lo + c, calls + 1
    assert est._engine.factor_forms() == ["pruned"]
    assert helpers.all_finite_state(est)
    assert np.all(np.isfinite(est.decision_function(X)))


def test_cholesky_of_precision_lifts_a_diagonal_below_its_rounding():
    rng = np.random.default_rng(0)
    V = rng.normal(size=(20, 3))
    zeta = np.full(20, 8e111)
    zeta[:5] = 1.0
    M = 1.3 * (V @ V.T)
    M[np.diag_indices(20)] += 1.0 / zeta
    L, z = convert._cholesky_of_precision(M.copy(), zeta)
    assert L is not None and np.all(z <= zeta) and np.all(z[:5] == pytest.approx(1.0))
    want = 1.3 * (V @ V.T) + np.diag(1.0 / z)
    np.testing.assert_allclose(L @ L.T, want, atol=1e-12 * np.abs(want).max())


def test_a_floor_in_the_nu_pi_form_moves_the_model_to_the_factor_form(monkeypatch):
    """Pi's recursion drifts: on the contradictory stream a "smallest" model in the nu/Pi
    form floored its margin variance about 40 rounds before a factor form does, then
    stepped without bound and left float64's range (on one CPU's rounding; on another it
    raised first). A floored round there is taken for that drift: the call is learned
    again in the factor form, with the warning. Where the factor form does not factor
    after all, the model stays in the nu/Pi form and its floors are counted, as before,
    without an error (until it leaves float64's range, past the rows taken here)."""
    import kernelcw.engines.dual.engine as engine_mod

    X, y = _hard_streams()["contradictory"]
    for factors in (True, False):
        if not factors:
            monkeypatch.setattr(engine_mod, "explicit_to_pruned", lambda *args: None)
        est = _hard_est("stdev", "smallest", "cholesky", 1).fit(X[:40], y[:40])
        assert est._engine.factor_forms() == ["explicit"]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for i in range(40, 200 if factors else 90):  # (the nu/Pi form's left range
                est.partial_fit(X[i : i + 1], y[i : i + 1])  # at row 116: a rounding's)
        switched = any("learned again" in str(w.message) for w in caught)
        assert switched == factors
        assert est._engine.factor_forms() == (["pruned"] if factors else ["explicit"])
        assert est.n_variance_floored_ > 0 and helpers.all_finite_state(est)
        assert est._engine._ctx.floors_drift == factors
