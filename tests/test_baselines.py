"""Baselines against independent implementations of the published algorithms.

- PA-I/PA-II against scikit-learn's passive-aggressive updates, the Perceptron against a
  plain loop.
- SOP against a literal transcription of the second-order perceptron of Cesa-Bianchi,
  Conconi & Gentile (SIAM J. Comput. 2005): a matrix inverse per round, with the paper's
  parameter ``a_paper = 1 / a`` (kernelcw's ``Sigma_1 = a I``); and, for the dual engine,
  against the paper's kernel form (the Gram matrix of the mistakes).
"""

from __future__ import annotations

import helpers
import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.linear_model import SGDClassifier
from sklearn.metrics.pairwise import rbf_kernel

from kernelcw import PAClassifier, PerceptronClassifier, SOPClassifier, run_online


def _data(rng, n=300, d=15):
    X = rng.normal(size=(n, d))
    y = (X @ rng.normal(size=d) + 0.5 * rng.normal(size=n) > 0).astype(int)
    return X, y


@pytest.mark.parametrize("variant", [1, 2])
@pytest.mark.parametrize("C", [0.01, 1.0, 10.0])
@pytest.mark.parametrize("sparse", [False, True])
def test_pa_equals_sgd_passive_aggressive(variant, C, sparse):
    rng = np.random.default_rng(variant * 100 + int(C * 10))
    X, y = _data(rng)
    Xin = sp.csr_matrix(X) if sparse else X
    ours = PAClassifier(variant=variant, C=C).fit(Xin, y)
    sgd = SGDClassifier(
        loss="hinge",
        penalty=None,
        learning_rate=f"pa{variant}",
        eta0=C,
        fit_intercept=False,
        shuffle=False,
    ).partial_fit(Xin, y, classes=[0, 1])
    np.testing.assert_allclose(ours.coef_, sgd.coef_, rtol=1e-10, atol=1e-12)


def test_perceptron_matches_plain_loop():
    rng = np.random.default_rng(0)
    X, y = _data(rng)
    w = np.zeros(X.shape[1])
    mistakes = 0
    for x, label in zip(X, np.where(y == 1, 1.0, -1.0), strict=True):
        if label * (w @ x) <= 0:  # sign(0) = +1: a -1 example at margin 0 is a mistake
            mistakes += (1.0 if w @ x >= 0 else -1.0) != label
            w += label * x
    clf = PerceptronClassifier().fit(X, y)
    np.testing.assert_allclose(clf.mean_, w, rtol=1e-12)
    assert clf.n_mistakes_ == mistakes


# ---------------------------------------------------------------------------------------
# The second-order perceptron, as printed
# ---------------------------------------------------------------------------------------


def textbook_sop(X, y, a_paper):
    """SOP exactly as the paper states it, labels y in {-1, +1}.

    Round t: w = (a I + S + x x')^-1 v, predict sign(w . x) (sign(0) = +1); on a mistake
    (here y w . x <= 0, the Perceptron's tie convention) S += x x' and v += y x, where S
    and v sum over the past mistakes. Returns the predictions, the number of mistakes and
    of updates, and the final mean (a I + S)^-1 v and covariance (a I + S)^-1.
    """
    d = X.shape[1]
    S = np.zeros((d, d))
    v = np.zeros(d)
    preds, n_mistakes, n_updates = [], 0, 0
    for x, label in zip(X, y, strict=True):
        w = np.linalg.inv(a_paper * np.eye(d) + S + np.outer(x, x)) @ v
        margin = w @ x
        pred = 1 if margin >= 0 else -1
        preds.append(pred)
        n_mistakes += pred != label
        if label * margin <= 0:
            S += np.outer(x, x)
            v += label * x
            n_updates += 1
    cov = np.linalg.inv(a_paper * np.eye(d) + S)
    return np.array(preds), n_mistakes, n_updates, cov @ v, cov


def textbook_kernel_sop(K, y, a_paper):
    """SOP in its kernel form on the Gram matrix ``K`` of the stream.

    With M the past mistakes and the current input t appended,
    w . x_t = y_M' (a I + K[M+t, M+t])^-1 K[M+t, t], where y_M holds 0 for the current
    input. Returns the predictions, the number of mistakes and of updates, and M.
    """
    mistakes: list[int] = []
    preds, n_mistakes = [], 0
    for t, label in enumerate(y):
        idx = [*mistakes, t]
        G = K[np.ix_(idx, idx)]
        ym = np.array([*(float(y[i]) for i in mistakes), 0.0])
        margin = ym @ np.linalg.solve(a_paper * np.eye(len(idx)) + G, K[idx, t])
        pred = 1 if margin >= 0 else -1
        preds.append(pred)
        n_mistakes += pred != label
        if label * margin <= 0:
            mistakes.append(t)
    return np.array(preds), n_mistakes, len(mistakes), mistakes


def _sop_stream(seed, n=250, d=12, flip=0.1):
    """Unequal feature scales, a random linear target, label noise: mistakes go on."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * rng.uniform(0.3, 2.0, size=d)
    y = np.where(X @ rng.normal(size=d) + 0.3 * rng.normal(size=n) > 0, 1, -1)
    flips = rng.random(n) < flip
    y[flips] = -y[flips]
    return X, y


@pytest.mark.parametrize("a", [0.05, 1.0, 7.0])
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("sparse", [False, True])
def test_sop_equals_the_printed_algorithm(a, seed, sparse):
    """Same predictions, mistakes and updates; mean and covariance within 1e-9."""
    X, y = _sop_stream(seed)
    preds, n_mis, n_upd, mean, cov = textbook_sop(X, y, a_paper=1.0 / a)
    assert 0.05 * len(y) < n_mis < 0.5 * len(y)
    Xin = sp.csr_matrix(X) if sparse else X
    res = run_online(SOPClassifier(a=a), Xin, y)
    helpers.assert_same_predictions(res.predictions, preds, what=f"SOP a={a}")
    est = res.estimator
    assert est.n_mistakes_ == n_mis and res.n_mistakes == n_mis
    assert est.n_updates_ == n_upd
    helpers.assert_rel_close(est.mean_, mean, 1e-9, what="mean_")
    helpers.assert_rel_close(est.covariance_, cov, 1e-9, what="covariance_")


def test_sop_ties_update_without_a_mistake():
    """mu = 0 at the start: a y = +1 first example is predicted right (sign(0) = +1) and
    still learned from (y w . x = 0), as by the Perceptron; textbook and estimator agree."""
    X, y = _sop_stream(3, n=40)
    y[0] = 1
    _, n_mis, n_upd, mean, _ = textbook_sop(X, y, a_paper=1.0)
    est = SOPClassifier().fit(X, y)
    assert n_upd == n_mis + 1
    assert (est.n_mistakes_, est.n_updates_) == (n_mis, n_upd)
    helpers.assert_rel_close(est.mean_, mean, 1e-9, what="mean_")


@pytest.mark.parametrize("solver", ["cholesky", "explicit"])
def test_sop_dual_linear_equals_the_printed_algorithm(solver):
    """mode="dual" with the linear kernel gives the paper's weights."""
    X, y = _sop_stream(4)
    preds, n_mis, n_upd, mean, _ = textbook_sop(X, y, a_paper=1.0 / 1.3)
    res = run_online(SOPClassifier(a=1.3, mode="dual", solver=solver, block_size=32), X, y)
    helpers.assert_same_predictions(res.predictions, preds, what="dual SOP")
    assert (res.estimator.n_mistakes_, res.estimator.n_updates_) == (n_mis, n_upd)
    helpers.assert_rel_close(res.estimator.coef_.ravel(), mean, 1e-9, what="coef_")


@pytest.mark.parametrize("solver", ["cholesky", "explicit"])
def test_kernel_sop_equals_the_printed_kernel_form(solver):
    """RBF kernel: the dual engine against the Gram-matrix form; support set = the
    mistakes; decision function on new inputs y_M' (a_paper I + K_MM)^-1 K_M(x)."""
    X, y = _sop_stream(5, n=200, d=4)
    gamma, a = 0.3, 2.0
    K = rbf_kernel(X, X, gamma=gamma)
    preds, n_mis, n_upd, M = textbook_kernel_sop(K, y, a_paper=1.0 / a)
    est = SOPClassifier(a=a, kernel="rbf", gamma=gamma, solver=solver, block_size=16)
    res = run_online(est, X, y)
    helpers.assert_same_predictions(res.predictions, preds, what="kernel SOP")
    fitted = res.estimator
    assert (fitted.n_mistakes_, fitted.n_updates_) == (n_mis, n_upd)
    np.testing.assert_array_equal(fitted.support_, M)
    X_new = np.random.default_rng(6).normal(size=(30, 4))
    coef = np.linalg.solve(np.eye(len(M)) / a + K[np.ix_(M, M)], y[M])
    want = rbf_kernel(X_new, X[M], gamma=gamma) @ coef
    helpers.assert_rel_close(fitted.decision_function(X_new), want, 1e-9, what="decision")
