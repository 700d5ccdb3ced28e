"""First-order learners against scikit-learn's implementation of the same updates."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.linear_model import SGDClassifier

from kernelcw import PAClassifier, PerceptronClassifier


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
