"""predict_proba: the probabilities under the models' Gaussians, against slow references.

- Two classes: [Phi(-z), Phi(z)], z = m / sqrt(v), both tails accurate, never exactly 0 or 1
  for finite z and v > 0.
- More classes: P(k) = P(class k's score is the largest) for independent N(m_k, v_k), the
  fast quadrature against scipy.integrate.quad row by row (sharp steps included).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.integrate import quad
from scipy.special import ndtr
from sklearn.datasets import make_blobs, make_classification

from kernelcw import AROWClassifier, CWClassifier, SCWClassifier
from kernelcw.estimators._input import with_intercept
from kernelcw.estimators._proba import (
    LARGEST_BELOW_ONE,
    SMALLEST,
    SMOOTH_RATIO,
    binary_proba,
    multiclass_proba,
)


def ref_largest(m: np.ndarray, v: np.ndarray) -> np.ndarray:
    """P(k is the largest) by adaptive quadrature over class k's score, one class at a time;
    the steps of the other factors (centre and +-2, +-6 widths) are quad's break points."""
    s = np.sqrt(v)
    out = []
    for k in range(len(m)):
        others = [j for j in range(len(m)) if j != k]

        def integrand(t, k=k, others=others):
            x = m[k] + s[k] * t
            return (
                np.exp(-0.5 * t * t)
                / np.sqrt(2 * np.pi)
                * np.prod([ndtr((x - m[j]) / s[j]) for j in others])
            )

        steps = [(m[j] - m[k] + d * s[j]) / s[k] for j in others for d in (-6, -2, 0, 2, 6)]
        pts = sorted(p for p in steps if abs(p) < 12)
        val, _ = quad(integrand, -12, 12, points=pts or None, epsabs=1e-13, epsrel=1e-12, limit=400)
        out.append(val)
    return np.array(out)


@pytest.mark.parametrize("spread", [0.3, 1.5, 3.0])
def test_multiclass_quadrature_matches_adaptive_reference(spread):
    """Random margins and variances, standard deviations differing by up to e^(2 spread)
    between classes (at 3.0 some factors are steps 400x sharper than the density)."""
    rng = np.random.default_rng(int(10 * spread))
    n, K = 12, 4
    F = rng.normal(scale=2.0, size=(n, K))
    V = np.exp(rng.uniform(-2 * spread, 2 * spread, size=(n, K)))
    P = multiclass_proba(F, V)
    R = np.array([ref_largest(F[i], V[i]) for i in range(n)])
    np.testing.assert_allclose(R.sum(axis=1), 1.0, atol=1e-9)  # the reference is right
    np.testing.assert_allclose(P, R, rtol=0, atol=1e-8)


def test_multiclass_smooth_rows_hermite_matches_adaptive_reference():
    """Standard deviations within the factor SMOOTH_RATIO: the Gauss-Hermite path, at its
    limit (some rows exactly at the factor)."""
    rng = np.random.default_rng(7)
    n, K = 16, 5
    F = rng.normal(scale=2.0, size=(n, K))
    S = np.exp(rng.uniform(0, np.log(SMOOTH_RATIO), size=(n, K)))
    S[::2, 0], S[::2, 1] = 1.0, SMOOTH_RATIO
    V = S**2
    R = np.array([ref_largest(F[i], V[i]) for i in range(n)])
    np.testing.assert_allclose(multiclass_proba(F, V), R, rtol=0, atol=1e-9)


@pytest.mark.parametrize("spread", [0.3, 3.0])
def test_multiclass_rows_too_large_for_a_block_go_by_groups_of_classes(spread, monkeypatch):
    """A row whose K x K x nodes floats exceed the block (the quadrature's are K^3: at
    K = 80 one row took 800 MB) is computed in groups of classes, each K x nodes: the
    same probabilities (both paths, smooth and not), and memory bounded by the block."""
    import tracemalloc

    from kernelcw.estimators import _proba

    rng = np.random.default_rng(11)
    n, K = 3, 9
    F = rng.normal(scale=2.0, size=(n, K))
    V = np.exp(rng.uniform(-2 * spread, 2 * spread, size=(n, K)))
    whole = multiclass_proba(F, V)
    monkeypatch.setattr(_proba, "_BLOCK_FLOATS", 3 * K * 1000)  # a few classes a group
    np.testing.assert_allclose(multiclass_proba(F, V), whole, rtol=1e-12, atol=1e-300)
    monkeypatch.undo()
    K = 60  # unsplit: 60 x 60 x 2530 floats (73 MB) per array and row, several arrays
    F = rng.normal(scale=3.0, size=(1, K))
    V = np.exp(rng.uniform(-6, 6, size=(1, K)))
    tracemalloc.start()
    try:
        P = multiclass_proba(F, V)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * 8 * _proba._BLOCK_FLOATS and abs(P.sum() - 1.0) < 1e-9  # (was 211 MB)


def test_multiclass_rows_sum_to_one_and_stay_inside_zero_one():
    rng = np.random.default_rng(1)
    F = rng.normal(scale=30.0, size=(200, 6))  # many classes far behind: tails underflow
    V = np.exp(rng.uniform(-3, 3, size=(200, 6)))
    P = multiclass_proba(F, V)
    np.testing.assert_allclose(P.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    assert P.min() >= SMALLEST and P.max() <= LARGEST_BELOW_ONE
    assert (P == SMALLEST).any()  # some did underflow: clipped, not 0


def test_multiclass_equal_variances_rank_like_the_margins():
    """With one variance for all classes, P(k) increases with m_k: argmax P = argmax m."""
    rng = np.random.default_rng(2)
    F = rng.normal(size=(300, 5))
    V = np.repeat(np.exp(rng.uniform(-2, 2, size=(300, 1))), 5, axis=1)
    P = multiclass_proba(F, V)
    np.testing.assert_array_equal(np.argsort(P, axis=1), np.argsort(F, axis=1))


def test_multiclass_variances_of_minus_zero_are_zero():
    """sqrt(-0.0) = -0.0 turned a zero variance's step the other way."""
    F = np.array([[1.0, 0.0, -1.0], [1.0, 0.0, -1.0]])
    V = np.array([[0.0, 0.5, 0.5], [0.0, 0.0, 0.0]])
    neg = np.where(V == 0.0, -0.0, V)
    np.testing.assert_array_equal(multiclass_proba(F, neg), multiclass_proba(F, V))
    np.testing.assert_array_equal(multiclass_proba(F, neg)[1], [1.0, 0.0, 0.0])


def test_multiclass_degenerate_rows():
    """v = 0 is a point mass: exact 0/1 for a strict argmax, equal shares on a tie; x = 0
    (every m and v zero) is uniform."""
    F = np.array([[1.0, 0.0, -1.0], [0.5, 0.5, -3.0], [0.0, 0.0, 0.0], [2.0, 0.0, 0.0]])
    V = np.array([[0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 1.0, 1.0]])
    P = multiclass_proba(F, V)
    np.testing.assert_array_equal(P[0], [1.0, 0.0, 0.0])
    np.testing.assert_array_equal(P[1], [0.5, 0.5, 0.0])
    np.testing.assert_allclose(P[2], [1 / 3] * 3, rtol=1e-15)
    p0 = ndtr(2.0) ** 2  # m_0 = 2 exactly; both others N(0, 1) below it
    np.testing.assert_allclose(P[3], [p0, (1 - p0) / 2, (1 - p0) / 2], rtol=1e-12)


def test_multiclass_refuses_nan_and_negative_variance():
    with pytest.raises(ValueError, match="NaN or a negative variance"):
        multiclass_proba(np.zeros((1, 3)), -np.ones((1, 3)))
    with pytest.raises(ValueError, match="NaN"):
        binary_proba(np.array([np.nan]), np.array([1.0]))
    with pytest.raises(ValueError, match="infinite"):
        multiclass_proba(np.zeros((1, 3)), np.full((1, 3), np.inf))


@pytest.mark.parametrize("z", [0.3, 5.0, 8.0, 9.0, 37.0, 40.0, 1e3])
def test_binary_tails_are_accurate_and_never_exactly_zero_or_one(z):
    for sign in (1.0, -1.0):
        P = binary_proba(np.array([sign * z * 2.0]), np.array([4.0]))[0]
        small, big = (P[0], P[1]) if sign > 0 else (P[1], P[0])
        assert 0.0 < small < 0.5 < big < 1.0
        want = ndtr(-z)  # the small tail, computed directly (0 once it underflows)
        if want > 0:
            np.testing.assert_allclose(small, want, rtol=1e-14)
        else:
            assert small == SMALLEST
        assert abs(P.sum() - 1.0) <= 2.0**-52


def test_binary_exact_only_when_degenerate():
    P = binary_proba(np.array([3.0, -3.0, 0.0]), np.zeros(3))
    np.testing.assert_array_equal(P, [[0.0, 1.0], [1.0, 0.0], [0.5, 0.5]])
    # a variance of -0.0 is a variance of 0 (sqrt(-0.0) = -0.0 flipped the sign of z)
    P = binary_proba(np.array([3.0, -3.0, 0.0]), np.array([-0.0, -0.0, -0.0]))
    np.testing.assert_array_equal(P, [[0.0, 1.0], [1.0, 0.0], [0.5, 0.5]])


def _binary_stream(seed):
    X, y = make_classification(
        n_samples=300, n_features=6, n_informative=4, random_state=seed, class_sep=1.5
    )
    return X, y


@pytest.mark.parametrize(
    "est",
    [SCWClassifier(), AROWClassifier(covariance="diag"), CWClassifier(kernel="rbf")],
    ids=["scw-full", "arow-diag", "cw-rbf"],
)
def test_binary_estimator_ranks_by_normalised_margin(est):
    """predict_proba is monotone in z = m / sqrt(v), not in m:
    inputs with a large margin variance are less certain at the same margin."""
    X, y = _binary_stream(3)
    est.fit(X[:200], y[:200])
    Xt = X[200:]
    m = est.decision_function(Xt)
    v = est.engine_.margin_variance(with_intercept(Xt, est.engine_.spec))[:, 0]
    z = m / np.sqrt(v)
    order = np.argsort(z)
    P = est.predict_proba(Xt)
    assert np.all(np.diff(P[order, 1]) >= 0)
    np.testing.assert_allclose(P, binary_proba(m, v), rtol=0, atol=0)
    assert np.all((P > 0) & (P < 1))
    np.testing.assert_array_equal(P[:, 1] > 0.5, m > 0)  # same side as predict


def test_multiclass_estimator_matches_reference_on_its_own_gaussians():
    """A fitted 4-class linear CW: m_k = mu_k . x, v_k = x' Sigma_k x from the fitted
    attributes, then the adaptive reference; predict agrees with argmax P wherever the
    pairwise bound proves the leading margin's class the most probable."""
    X, y = make_blobs(n_samples=240, centers=4, n_features=3, random_state=0, cluster_std=2.5)
    clf = CWClassifier().fit(X[:200], y[:200])
    Xt = X[200:]
    F = Xt @ clf.mean_.T
    V = np.einsum("ij,kjl,il->ik", Xt, clf.covariance_, Xt)
    P = clf.predict_proba(Xt)
    R = np.array([ref_largest(F[i], V[i]) for i in range(len(Xt))])
    np.testing.assert_allclose(P, R, rtol=0, atol=1e-8)
    # P(top) >= 1 - sum_j P(X_j > X_top) = 1 - sum_j Phi(-(m_top - m_j) / sqrt(v_top + v_j)):
    # where that bound exceeds 1/2, the class predict picks (argmax m) has the largest P
    top = F.argmax(axis=1)
    rows = np.arange(len(Xt))
    gap = (F[rows, top][:, None] - F) / np.sqrt(V[rows, top][:, None] + V)
    gap[rows, top] = np.inf
    clear = 1.0 - ndtr(-gap).sum(axis=1) > 0.5
    assert clear.sum() >= 10
    np.testing.assert_array_equal(clf.predict(Xt)[clear], clf.classes_[P.argmax(axis=1)][clear])


@pytest.mark.shipped_defaults
def test_readme_probabilities_example_runs_and_prints_its_comments():
    """The README's "Probabilities" block: run it, compare with the numbers in its comments."""
    import contextlib
    import io
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    code = re.search(r"## Probabilities\n.*?```python\n(.*?)```", text, re.S).group(1)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {})
    printed = out.getvalue().splitlines()
    quoted = re.findall(r"print\(.*\)  # ([0-9. ]+):", code)
    assert len(quoted) == 2
    assert printed == [q.strip() for q in quoted]
