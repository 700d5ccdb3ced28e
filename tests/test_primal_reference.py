"""The compiled primal estimators against the slow NumPy reference (tests/reference.py).

Random noisy streams (updates keep happening), every rule x {full, diag-kl, diag-l2,
diag-exact}: mean and covariance within a norm-relative 1e-9
(||fast - ref|| <= 1e-9 ||ref||), identical per-round predictions (``run_online``) and
identical update/mistake counts. Also sparse == dense, one-vs-rest, the scale
invariances of doc/rules.md (Lemma 3 and its relatives), n_iter vs partial_fit, a long
stream, and self-checks of the reference (its "exact" diagonal step is the constrained
optimum).
"""

from __future__ import annotations

import math

import helpers
import numpy as np
import pytest
import reference as ref
import scipy.sparse as sp
from scipy.optimize import minimize
from scipy.stats import norm

from kernelcw import (
    PerceptronClassifier,
    run_online,
)

RTOL = 1e-9

ALL_RULES = ref.ALL_RULES
CONFIGS = [("full", "kl"), ("diag", "kl"), ("diag", "l2"), ("diag", "exact")]
CONFIG_IDS = ["full", "diag-kl", "diag-l2", "diag-exact"]

# Parameters in tests/helpers.py. On these streams the reference keeps v / (a |x|^2)
# above 1e-4 (1e-5 on the long stream), so the variance floor never acts.
RULE_PARAMS = helpers.RULE_PARAMS
A = helpers.A


def make_estimator(rule, covariance="full", diag_method="kl", a=A, **over):
    """The kernelcw estimator for ``rule`` with RULE_PARAMS (overridden by ``over``)."""
    p = {**RULE_PARAMS[rule], **over}
    common = dict(a=a, covariance=covariance, diag_method=diag_method)
    for key in ("n_iter", "shuffle", "random_state"):
        if key in p:
            common[key] = p.pop(key)
    return helpers.make_rule_estimator(rule, p, **common)


def ref_params(rule, covariance="full", diag_method="kl", a=A, **over):
    """Keyword arguments of reference.RefLearner matching make_estimator."""
    p = {**RULE_PARAMS[rule], **over}
    for key in ("n_iter", "shuffle", "random_state"):
        p.pop(key, None)
    return dict(a=a, covariance=covariance, diag_method=diag_method, **p)


def make_stream(rng, n, d, n_classes=2, density=None, flip=0.1):
    """Features with unequal scales, labels from a random linear model plus noise and
    ``flip`` random label flips (so the stream is not separable and updates go on)."""
    X = rng.normal(size=(n, d)) * rng.uniform(0.3, 2.0, size=d)
    if density is not None:
        X *= rng.random((n, d)) < density
        for i in np.flatnonzero(~X.any(axis=1)):
            X[i, rng.integers(d)] = rng.normal()
    if n_classes == 2:
        w = rng.normal(size=d)
        y = (X @ w + 0.5 * rng.normal(size=n) > 0).astype(int)
        flips = rng.random(n) < flip
        y[flips] = 1 - y[flips]
    else:
        W = rng.normal(size=(n_classes, d))
        y = np.argmax(X @ W.T + 0.5 * rng.normal(size=(n, n_classes)), axis=1)
        flips = rng.random(n) < flip
        y[flips] = rng.integers(n_classes, size=int(flips.sum()))
    return X, y


def stream_for(seed, n_range=(100, 301), d_range=(5, 41), **kw):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(*n_range))
    d = int(rng.integers(*d_range))
    return make_stream(rng, n, d, **kw)


# ---------------------------------------------------------------------------------------
# Comparison helpers
# ---------------------------------------------------------------------------------------


assert_same_predictions = helpers.assert_same_predictions


def assert_rel_close(got, want, rtol=RTOL, what=""):
    helpers.assert_rel_close(got, want, rtol, what)


def assert_state_matches(est, r: ref.RefResult, what=""):
    np.testing.assert_array_equal(est.classes_, r.classes, err_msg=what)
    floored = np.sum(getattr(est, "n_variance_floored_", 0))
    assert floored == 0, f"{what}: variance floor used {floored} times (the reference has none)"
    assert_rel_close(est.mean_, r.mu, what=f"{what} mean_")
    assert_rel_close(est.covariance_, r.Sigma, what=f"{what} covariance_")
    np.testing.assert_array_equal(est.n_updates_, r.n_updates, err_msg=f"{what} n_updates_")
    np.testing.assert_array_equal(est.n_mistakes_, r.n_mistakes, err_msg=f"{what} n_mistakes_")


def check_against_reference(rule, cov, method, X, y, what="", **over):
    r = ref.run_ref(rule, X, y, **ref_params(rule, cov, method, **over))
    est = make_estimator(rule, cov, method, **over).fit(X, y)
    assert_state_matches(est, r, what=f"{what} fit")
    res = run_online(make_estimator(rule, cov, method, **over), X, y)
    assert_same_predictions(res.predictions, r.predictions, what=f"{what} run_online")
    np.testing.assert_array_equal(res.cumulative_mistakes, r.cumulative_mistakes)
    np.testing.assert_array_equal(res.n_updates, r.n_updates)
    assert_state_matches(res.estimator, r, what=f"{what} run_online")
    return r, est


# ---------------------------------------------------------------------------------------
# Binary streams: every rule x covariance x diag method
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("cov,method", CONFIGS, ids=CONFIG_IDS)
@pytest.mark.parametrize("rule", ALL_RULES)
def test_binary_stream_matches_reference(rule, cov, method, seed):
    X, y = stream_for(seed)
    r, _ = check_against_reference(rule, cov, method, X, y, what=f"{rule}/{cov}-{method}")
    # the stream exercises the rule: updates happen, and not on every round
    n = len(y)
    assert 0 < r.n_updates < n or rule in ("arow", "pa", "pa1", "pa2")
    assert r.n_updates > 0.05 * n
    if rule == "scw1":  # the cap C binds on some rounds
        assert any(s.alpha == RULE_PARAMS["scw1"]["C"] for s in r.learners[0].history)
    if rule == "pa1":
        assert any(s.alpha == RULE_PARAMS["pa1"]["C"] for s in r.learners[0].history)


@pytest.mark.parametrize(
    "labels", [np.array([-1, 1]), np.array([7, 3]), np.array(["no", "yes"])], ids=str
)
def test_binary_labels_mapping(labels):
    """classes_ = sorted labels; classes_[0] -> -1, classes_[1] -> +1."""
    X, y01 = stream_for(5)
    y = labels[y01]
    check_against_reference("stdev", "full", "kl", X, y, what=f"labels {labels}")
    check_against_reference("arow", "diag", "exact", X, y, what=f"labels {labels}")


def test_perceptron_updates_on_ties_without_counting_a_mistake():
    """mu = 0 at the start: mu.x = 0 predicts +1. doc/rules.md's Perceptron updates when
    m = y (mu . x) <= 0 (the classic rule, as scikit-learn's Perceptron), so a y = +1
    example at a tie is learned from although its prediction was right: an update, not
    a mistake. A y = -1 example at a tie is both."""
    X = np.array([[1.0, 2.0], [0.5, -1.0], [-2.0, 0.3]])
    y = np.array([1, 0, 1])
    for cov, method in CONFIGS:
        est = PerceptronClassifier(a=A, covariance=cov, diag_method=method)
        est.partial_fit(X[:1], y[:1], classes=[0, 1])
        assert est.n_mistakes_ == 0
        assert est.n_updates_ == 1, f"{cov}-{method}: no update on a tie"
        np.testing.assert_allclose(est.mean_, A * X[0])
        check_against_reference("perceptron", cov, method, X, y, what=f"{cov}-{method}")


# ---------------------------------------------------------------------------------------
# Sparse input
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("cov,method", CONFIGS, ids=CONFIG_IDS)
@pytest.mark.parametrize("rule", ALL_RULES)
def test_sparse_equals_dense(rule, cov, method):
    X, y = stream_for(10, density=0.3)
    Xs = sp.csr_matrix(X)
    r = ref.run_ref(rule, X, y, **ref_params(rule, cov, method))
    dense = make_estimator(rule, cov, method).fit(X, y)
    sparse = make_estimator(rule, cov, method).fit(Xs, y)
    assert_state_matches(sparse, r, what=f"{rule}/{cov}-{method} sparse")
    # sparse and dense differ at most by summation order
    assert_rel_close(sparse.mean_, dense.mean_, rtol=1e-12, what="sparse vs dense mean_")
    assert_rel_close(sparse.covariance_, dense.covariance_, rtol=1e-12, what="sparse vs dense cov")
    assert sparse.n_updates_ == dense.n_updates_
    assert sparse.n_mistakes_ == dense.n_mistakes_
    res = run_online(make_estimator(rule, cov, method), Xs, y)
    assert_same_predictions(res.predictions, r.predictions, what="sparse run_online")


# ---------------------------------------------------------------------------------------
# One-vs-rest
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("n_classes", [3, 4])
@pytest.mark.parametrize("cov,method", CONFIGS, ids=CONFIG_IDS)
@pytest.mark.parametrize("rule", ALL_RULES)
def test_multiclass_matches_ovr_reference(rule, cov, method, n_classes):
    X, yi = stream_for(20 + n_classes, n_classes=n_classes, n_range=(150, 251))
    names = np.array(["ant", "bee", "cat", "dog"])[:n_classes]
    y = names[yi]
    r, est = check_against_reference(rule, cov, method, X, y, what=f"{rule} K={n_classes}")
    assert est.mean_.shape == (n_classes, X.shape[1])
    if cov == "full":
        assert est.covariance_.shape == (n_classes, X.shape[1], X.shape[1])
    else:
        assert est.covariance_.shape == (n_classes, X.shape[1])


# ---------------------------------------------------------------------------------------
# Scale invariances (doc/rules.md, "Facts worth a test")
# ---------------------------------------------------------------------------------------

A_BIG = 7.3


def _invariance_cases():
    """(rule, params at a = A_BIG, params at a = 1, mean scale, covariance scale)."""
    s = math.sqrt(A_BIG)
    return [
        ("stdev", dict(eta=0.8), dict(eta=0.8), s, A_BIG),  # Lemma 3 (NIPS 2008)
        ("scw1", dict(eta=0.8, C=0.3), dict(eta=0.8, C=0.3 * s), s, A_BIG),
        ("scw2", dict(eta=0.8, C=0.5), dict(eta=0.8, C=0.5 * A_BIG), s, A_BIG),
        ("var", dict(eta=0.6), dict(eta=float(norm.cdf(ref.phi_from_eta(0.6) * s))), s, A_BIG),
        ("arow", dict(r=0.7), dict(r=0.7 / A_BIG), 1.0, A_BIG),
        ("perceptron", dict(), dict(), A_BIG, A_BIG),
    ]


@pytest.mark.parametrize("cov,method", CONFIGS, ids=CONFIG_IDS)
@pytest.mark.parametrize(
    "case", range(6), ids=["stdev", "scw1", "scw2", "var", "arow", "perceptron"]
)
def test_scale_invariance(case, cov, method):
    """Sigma_1 = a I: same predictions and updates as Sigma_1 = I with the rescaled
    parameter; mu scales by sqrt(a) (AROW: 1, Perceptron: a), Sigma by a."""
    rule, p_big, p_one, mscale, cscale = _invariance_cases()[case]
    X, y = stream_for(30)
    big = run_online(make_estimator(rule, cov, method, a=A_BIG, **p_big), X, y)
    one = run_online(make_estimator(rule, cov, method, a=1.0, **p_one), X, y)
    assert_same_predictions(big.predictions, one.predictions, what=f"{rule} a={A_BIG} vs 1")
    np.testing.assert_array_equal(big.n_updates, one.n_updates)
    eb, e1 = big.estimator, one.estimator
    assert eb.n_mistakes_ == e1.n_mistakes_
    assert_rel_close(eb.mean_, mscale * e1.mean_, what=f"{rule} mean_ scaling")
    if rule == "perceptron":
        assert_rel_close(eb.covariance_, A_BIG * e1.covariance_, what="covariance_ = a I")
    else:
        assert_rel_close(eb.covariance_, cscale * e1.covariance_, what=f"{rule} cov scaling")
    # and the reference obeys the same invariance
    rb = ref.run_ref(rule, X, y, **ref_params(rule, cov, method, a=A_BIG, **p_big))
    r1 = ref.run_ref(rule, X, y, **ref_params(rule, cov, method, a=1.0, **p_one))
    assert_same_predictions(rb.predictions, r1.predictions, what="reference")
    assert_rel_close(rb.mu, mscale * r1.mu, what="reference mean scaling")
    assert_rel_close(rb.Sigma, cscale * r1.Sigma, what="reference cov scaling")


@pytest.mark.parametrize("cov,method", CONFIGS, ids=CONFIG_IDS)
@pytest.mark.parametrize("rule", ["stdev", "var", "scw1", "scw2"])
def test_eta_one_half_keeps_sigma(rule, cov, method):
    """eta = 0.5 (phi = 0): Sigma never changes. (From mu = 0 the constraint y mu.x >= 0
    holds with equality, so in fact nothing moves at all.) doc/rules.md puts eta in (0.5, 1):
    an estimator may reject eta = 0.5 with a ValueError; if it accepts it, it must keep
    Sigma = a I and match the reference."""
    X, y = stream_for(40)
    r = ref.run_ref(rule, X, y, **ref_params(rule, cov, method, eta=0.5))
    want = A * (np.eye(X.shape[1]) if cov == "full" else np.ones(X.shape[1]))
    np.testing.assert_array_equal(r.Sigma, want)
    # started elsewhere, the mean does learn while Sigma stays put
    lr = ref.RefLearner(rule, X.shape[1], **ref_params(rule, cov, method, eta=0.5))
    lr.mu = 0.1 * np.ones(X.shape[1])
    for xi, yi in zip(X, np.where(y == 1, 1, -1), strict=True):
        lr.learn(xi, yi)
    assert lr.n_updates > 0
    np.testing.assert_array_equal(lr.Sigma, want)
    try:
        est = make_estimator(rule, cov, method, eta=0.5).fit(X, y)
    except ValueError:
        return
    assert_state_matches(est, r, what=f"{rule} eta=0.5")
    np.testing.assert_array_equal(est.covariance_, want)


# ---------------------------------------------------------------------------------------
# Multiple passes, long streams, chunking
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("cov,method", CONFIGS, ids=CONFIG_IDS)
@pytest.mark.parametrize("rule", ALL_RULES)
def test_n_iter_equals_two_partial_fits(rule, cov, method):
    X, y = stream_for(50, n_range=(100, 151))
    two = make_estimator(rule, cov, method, n_iter=2).fit(X, y)
    pf = make_estimator(rule, cov, method)
    pf.partial_fit(X, y, classes=np.unique(y))
    pf.partial_fit(X, y)
    r = ref.run_ref(rule, X, y, n_passes=2, **ref_params(rule, cov, method))
    assert_state_matches(two, r, what="n_iter=2")
    assert_state_matches(pf, r, what="partial_fit x2")
    assert_rel_close(two.mean_, pf.mean_, rtol=1e-13, what="n_iter=2 vs partial_fit mean_")
    assert_rel_close(two.covariance_, pf.covariance_, rtol=1e-13, what="... covariance_")


@pytest.mark.parametrize("rule", ["stdev", "var", "scw1", "scw2", "arow", "sop", "pa1"])
def test_long_stream_full(rule):
    """n = 2000, d = 30, full covariance: many blocks of the compiled loop."""
    rng = np.random.default_rng(60)
    X, y = make_stream(rng, 2000, 30)
    check_against_reference(rule, "full", "kl", X, y, what=f"{rule} long")


@pytest.mark.parametrize(
    "cov,method", [("full", "kl"), ("diag", "exact")], ids=["full", "diag-exact"]
)
def test_run_online_chunk_size_does_not_matter(cov, method):
    X, y = stream_for(70, n_range=(250, 300))
    base = run_online(make_estimator("scw1", cov, method), X, y)
    for chunk in (1, 7, 64):
        res = run_online(make_estimator("scw1", cov, method), X, y, chunk_size=chunk)
        assert_same_predictions(res.predictions, base.predictions, what=f"chunk {chunk}")
        assert_rel_close(res.estimator.mean_, base.estimator.mean_, rtol=1e-13)
        assert_rel_close(res.estimator.covariance_, base.estimator.covariance_, rtol=1e-13)


# ---------------------------------------------------------------------------------------
# Self-checks of the reference
# ---------------------------------------------------------------------------------------


def _kl_diag(mu, s, mu0, s0):
    return 0.5 * (np.sum(np.log(s0 / s)) + np.sum(s / s0) + np.sum((mu - mu0) ** 2 / s0) - len(s))


@pytest.mark.parametrize("rule", ["stdev", "var", "scw1", "scw2"])
@pytest.mark.parametrize("seed", range(3))
def test_reference_diag_exact_is_the_constrained_optimum(rule, seed):
    """The KKT solution of reference.diag_exact_step against a general-purpose optimiser
    (SLSQP over mu, log s and, for SCW, a slack xi >= 0 with y mu.x + xi >= phi sqrt(u)
    and the penalty C xi (SCW-I) or C xi^2 (SCW-II))."""
    rng = np.random.default_rng(seed)
    d = 3
    phi = ref.phi_from_eta(0.8)
    x = rng.normal(size=d)
    s0 = rng.uniform(0.2, 2.0, size=d)
    mu0 = 0.3 * rng.normal(size=d)
    y = 1
    C = 0.05 if rule == "scw1" else 0.7  # SCW-I: the cap binds
    m = float(y * mu0 @ x)
    alpha, zeta = ref.diag_exact_step(rule, m, x, s0, phi, C)
    assert alpha > 0
    if rule == "scw1":
        assert alpha == C
    mu = mu0 + alpha * y * s0 * x
    s = 1.0 / (1.0 / s0 + zeta * x**2)
    power = 1.0 if rule == "var" else 0.5

    def gap(mu_, s_):  # constraint violation phi u^power - y mu.x
        return phi * np.sum(x**2 * s_) ** power - y * mu_ @ x

    def penalty(xi):
        return C * xi if rule == "scw1" else C * xi**2 if rule == "scw2" else 0.0

    def obj(p):
        return _kl_diag(p[:d], np.exp(p[d : 2 * d]), mu0, s0) + penalty(p[2 * d])

    cons = [
        {"type": "ineq", "fun": lambda p: p[2 * d] - gap(p[:d], np.exp(p[d : 2 * d]))},
        {"type": "ineq", "fun": lambda p: p[2 * d]},
    ]
    if rule in ("stdev", "var"):
        cons.append({"type": "eq", "fun": lambda p: p[2 * d]})
    p0 = np.r_[mu0, np.log(s0), max(0.0, gap(mu0, s0))]
    res = minimize(
        obj, p0, constraints=cons, method="SLSQP", options=dict(maxiter=2000, ftol=1e-15)
    )
    assert res.success, res.message
    xi = max(0.0, gap(mu, s))
    mine = _kl_diag(mu, s, mu0, s0) + penalty(xi)
    assert mine <= res.fun + 1e-10
    np.testing.assert_allclose(res.x[:d], mu, atol=1e-6)
    np.testing.assert_allclose(np.exp(res.x[d : 2 * d]), s, atol=1e-6)
    if rule in ("stdev", "var"):  # feasible, with a tight constraint
        assert abs(gap(mu, s)) <= 1e-12 * abs(y * mu @ x)
    if rule == "scw2":  # stationarity in xi: xi = alpha / (2C)
        assert math.isclose(xi, alpha / (2 * C), rel_tol=1e-10)


@pytest.mark.parametrize("rule", ["stdev", "var", "scw1", "scw2"])
def test_reference_diag_exact_single_feature_is_the_full_update(rule):
    """With one non-zero feature the diagonal problem is the full one: the exact step
    equals the printed (alpha, zeta) of the rule."""
    rng = np.random.default_rng(3)
    phi = ref.phi_from_eta(0.85)
    for _ in range(50):
        d = 5
        x = np.zeros(d)
        x[rng.integers(d)] = rng.normal() * 2
        s = rng.uniform(0.1, 3.0, size=d)
        v = float(np.sum(s * x**2))
        m = float(rng.uniform(-2.0, 0.9) * (phi * math.sqrt(v) if rule != "var" else phi * v))
        C = rng.uniform(0.05, 2.0)
        alpha, zeta = ref.diag_exact_step(rule, m, x, s, phi, C)
        want = ref.ref_rule(rule, m, v, phi=phi, C=C)
        assert math.isclose(alpha, want.alpha, rel_tol=1e-11), (rule, m, v, alpha, want)
        assert math.isclose(zeta, want.zeta, rel_tol=1e-11), (rule, m, v, zeta, want)


@pytest.mark.parametrize("rule", ["stdev", "var", "scw1", "scw2", "arow", "sop"])
def test_reference_full_update_is_the_precision_update(rule):
    """One full-covariance reference round: inv(Sigma') = inv(Sigma) + zeta x x'."""
    rng = np.random.default_rng(4)
    lr = ref.RefLearner(rule, 4, a=1.0, eta=0.8, C=0.5, r=0.7)
    for _ in range(10):
        x = rng.normal(size=4)
        S0 = lr.Sigma.copy()
        lr.learn(x, int(rng.choice([-1, 1])))
        z = lr.history[-1].zeta
        np.testing.assert_allclose(
            np.linalg.inv(lr.Sigma), np.linalg.inv(S0) + z * np.outer(x, x), rtol=1e-9
        )


def test_diag_exact_sums_are_the_plain_sums():
    """The exact solver's sums u(z), du/dz run in vector lanes (``reassoc``,
    ``error_model="numpy"``): within a few ulps of the plain sums at every length
    around the vector widths, and a zero 1 + z t gives inf, not an exception."""
    from kernelcw.engines._diag_exact import u_and_du

    rng = np.random.default_rng(5)
    for n in [*range(0, 41), 134, 1000]:
        ts = rng.uniform(0.0, 2.0, size=n) * 10.0 ** rng.integers(-6, 3)
        z = float(rng.uniform(0.0, 5.0))
        u, du = u_and_du(z, ts)
        w = ts / (1.0 + z * ts)
        want_u, want_du = math.fsum(w), -math.fsum(w * w)
        assert math.isclose(u, want_u, rel_tol=1e-14, abs_tol=0.0) or u == want_u == 0.0
        assert math.isclose(du, want_du, rel_tol=1e-14, abs_tol=0.0) or du == want_du == 0.0
    u, du = u_and_du(-1.0, np.array([0.5, 1.0, 2.0]))  # 1 + z t = 0 at t = 1
    assert math.isinf(u) and math.isinf(du)
