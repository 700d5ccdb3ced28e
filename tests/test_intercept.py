"""fit_intercept: the intercept is the weight of a constant feature c with prior variance
a c^2. The references are the same learners without an intercept on X with the constant
column appended (primal), and with c^2 added to the kernel (dual)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import make_moons
from sklearn.metrics.pairwise import rbf_kernel

from kernelcw import (
    AROWClassifier,
    CWClassifier,
    PAClassifier,
    PerceptronClassifier,
    SCWClassifier,
    SOPClassifier,
)

RULES = {
    "scw": lambda **kw: SCWClassifier(**kw),
    "arow": lambda **kw: AROWClassifier(**kw),
    "cw": lambda **kw: CWClassifier(eta=0.8, **kw),
    "sop": lambda **kw: SOPClassifier(**kw),
    "pa": lambda **kw: PAClassifier(**kw),
    "perceptron": lambda **kw: PerceptronClassifier(**kw),
}


def _stream(n=300, d=4, seed=0, shift=3.0, n_classes=2):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) + shift
    y = rng.integers(0, n_classes, n)
    return X, y


def _augment(X, c):
    if sp.issparse(X):
        return sp.hstack([X, sp.csr_matrix(np.full((X.shape[0], 1), c))], format="csr")
    return np.hstack([X, np.full((X.shape[0], 1), c)])


@pytest.mark.parametrize("rule", sorted(RULES))
@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"covariance": "diag"},
        {"covariance": "diag", "diag_method": "l2"},
        {"covariance": "diag", "diag_method": "exact"},
    ],  # fmt: skip
)
@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("n_classes", [2, 3])
def test_primal_intercept_is_a_constant_column(rule, kw, sparse, n_classes):
    X, y = _stream(n_classes=n_classes)
    c = 2.5
    Xs = sp.csr_matrix(X) if sparse else X
    est = RULES[rule](fit_intercept=True, intercept_scaling=c, **kw).fit(Xs[:200], y[:200])
    est.partial_fit(Xs[200:], y[200:])
    ref = RULES[rule](**kw).fit(_augment(Xs[:200], c), y[:200])
    ref.partial_fit(_augment(Xs[200:], c), y[200:])
    np.testing.assert_array_equal(est.decision_function(Xs), ref.decision_function(_augment(Xs, c)))
    d = X.shape[1]
    coef = np.atleast_2d(ref.mean_)
    np.testing.assert_array_equal(est.coef_, coef[:, :d])
    np.testing.assert_array_equal(est.intercept_, c * coef[:, d])
    assert est.n_features_in_ == d
    assert est.mean_.shape[-1] == d
    assert est.covariance_.shape[-1] == d


@pytest.mark.parametrize("rule", ["scw", "arow", "cw", "sop", "pa"])
def test_dual_linear_intercept_matches_primal(rule):
    X, _ = _stream()
    y = (X @ np.array([1.0, -1.0, 0.5, 0.2]) > 2.0).astype(int)  # separable, off the origin
    p = RULES[rule](fit_intercept=True, intercept_scaling=0.7).fit(X, y)
    d = RULES[rule](fit_intercept=True, intercept_scaling=0.7, mode="dual").fit(X, y)
    np.testing.assert_allclose(d.decision_function(X), p.decision_function(X), rtol=1e-8,
                               atol=1e-10)  # fmt: skip
    np.testing.assert_allclose(d.coef_, p.coef_, rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(d.intercept_, p.intercept_, rtol=1e-8, atol=1e-12)
    assert not np.all(p.intercept_ == 0.0)


@pytest.mark.parametrize("solver", ["cholesky", "explicit"])
@pytest.mark.parametrize("budget", [None, 40])
def test_dual_intercept_adds_c2_to_the_kernel(solver, budget):
    X, y = _stream(shift=0.5)
    c = 1.5
    kw = {"solver": solver, "budget": budget, "random_state": 0}
    est = SCWClassifier(kernel="rbf", gamma=0.3, fit_intercept=True, intercept_scaling=c, **kw)
    est.fit(X, y)

    def k(A, B):
        return rbf_kernel(A, B, gamma=0.3) + c * c

    ref = SCWClassifier(kernel=k, **kw).fit(X, y)
    np.testing.assert_allclose(est.decision_function(X), ref.decision_function(X), rtol=1e-9,
                               atol=1e-12)  # fmt: skip
    np.testing.assert_allclose(est.predict_proba(X), ref.predict_proba(X), rtol=1e-9,
                               atol=1e-12)  # fmt: skip
    np.testing.assert_allclose(est.intercept_, [c * c * ref.dual_coef_.sum()], rtol=1e-9)


@pytest.mark.parametrize("budget", [None, 40])
def test_precomputed_kernel_intercept_adds_c2_to_the_gram_matrix(budget):
    X, y = _stream(shift=0.5)
    Xt, _ = _stream(n=50, seed=1, shift=0.5)
    c = 1.5
    K, Kt = rbf_kernel(X, X, gamma=0.3), rbf_kernel(Xt, X, gamma=0.3)
    kw = {"kernel": "precomputed", "budget": budget}
    est = SCWClassifier(fit_intercept=True, intercept_scaling=c, **kw).fit(K, y)
    ref = SCWClassifier(fit_intercept=False, **kw).fit(K + c * c, y)
    f, f_ref = est.decision_function(Kt), ref.decision_function(Kt + c * c)
    # rounding: c^2 added after, so the two Gram matrices differ in their last bits and
    # a budget's walk carries that on (1.4e-12 at a decision value of 2e-3 under B = 40)
    np.testing.assert_allclose(f, f_ref, rtol=1e-10, atol=1e-10 * np.abs(f_ref).max())
    np.testing.assert_array_equal(est.support_, ref.support_)  # the Gram matrix's symmetrising
    np.testing.assert_allclose(est.intercept_, [c * c * ref.dual_coef_.sum()], rtol=1e-10)
    rbf = SCWClassifier(kernel="rbf", gamma=0.3, fit_intercept=True, intercept_scaling=c)
    rbf.set_params(budget=budget).fit(X, y)
    np.testing.assert_allclose(est.decision_function(Kt), rbf.decision_function(Xt), atol=1e-9)


def test_intercept_shapes_multiclass_dual():
    X, y = _stream(n_classes=3)
    est = AROWClassifier(kernel="rbf", fit_intercept=True).fit(X, y)
    assert est.intercept_.shape == (3,)
    assert np.all(np.isfinite(est.intercept_))
    est0 = AROWClassifier(kernel="rbf").fit(X, y)
    np.testing.assert_array_equal(est0.intercept_, np.zeros(3))


def test_intercept_helps_off_the_origin():
    """moons shifted by +5 (issue #12): linear SCW 0.815 without, 0.851 with the
    intercept (LogisticRegression 0.848)."""
    X, y = make_moons(2000, noise=0.3, random_state=0)
    Xt, yt = make_moons(2000, noise=0.3, random_state=1)
    without = SCWClassifier().fit(X + 5, y).score(Xt + 5, yt)
    with_b = SCWClassifier(fit_intercept=True).fit(X + 5, y).score(Xt + 5, yt)
    assert with_b > without + 0.02


@pytest.mark.shipped_defaults
@pytest.mark.parametrize("rule", sorted(RULES))
def test_every_estimator_learns_an_intercept_by_default(rule):
    X, y = _stream(n=60)
    est = RULES[rule]()
    assert est.fit_intercept is True and est.intercept_scaling == 1.0
    assert est.fit(X, y).engine_.spec.intercept == 1.0  # the constant feature c = 1


@pytest.mark.parametrize(
    ("kw", "msg"),
    [
        ({"fit_intercept": "yes"}, "fit_intercept"),
        ({"fit_intercept": True, "intercept_scaling": 0.0}, "intercept_scaling"),
        ({"fit_intercept": True, "intercept_scaling": np.inf}, "intercept_scaling"),
        # (FloatingPointError 'rescale X', or the rbf kernel 'returned NaN', before)
        (
            {"fit_intercept": True, "intercept_scaling": 1e155},
            r"intercept_scaling=1e\+155 is too large for a=1.0",
        ),
        (
            {"fit_intercept": True, "intercept_scaling": 1e155, "kernel": "rbf"},
            "intercept_scaling=1e.155 is too large",
        ),
        (
            {"fit_intercept": True, "intercept_scaling": 1e150, "a": 1e10},
            "prior variance a . intercept_scaling",
        ),
    ],
)
def test_intercept_parameter_errors(kw, msg):
    X, y = _stream(n=20)
    with pytest.raises(ValueError, match=msg):
        SCWClassifier(**kw).fit(X, y)


def test_changing_fit_intercept_mid_stream_is_refused():
    X, y = _stream(n=40)
    est = SCWClassifier(fit_intercept=True).fit(X, y)
    est.set_params(fit_intercept=False)
    with pytest.raises(ValueError, match="fit_intercept"):
        est.partial_fit(X, y)
