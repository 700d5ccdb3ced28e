"""The scikit-learn face of the estimators: checks, validation, state, pickling."""

from __future__ import annotations

import pickle
import re

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.stats import norm
from sklearn.datasets import make_blobs
from sklearn.preprocessing import StandardScaler
from sklearn.utils import shuffle as sk_shuffle
from sklearn.utils.estimator_checks import parametrize_with_checks

from kernelcw import (
    AROWClassifier,
    CWClassifier,
    PAClassifier,
    PerceptronClassifier,
    SCWClassifier,
    SOPClassifier,
    run_online,
)

FIRST_ORDER = (PAClassifier, PerceptronClassifier)

CHECKED = [
    CWClassifier(),
    CWClassifier(rule="var", covariance="diag"),
    SCWClassifier(),
    SCWClassifier(variant=2, covariance="diag", diag_method="exact"),
    AROWClassifier(),
    AROWClassifier(covariance="diag", diag_method="l2"),
    PAClassifier(),
    PAClassifier(variant=2),
    PerceptronClassifier(),
    SCWClassifier(kernel="rbf"),
    CWClassifier(kernel="poly", degree=2, coef0=1.0, solver="explicit"),
    AROWClassifier(mode="dual", block_size=7),
    PAClassifier(kernel="laplacian"),
    SOPClassifier(),
    SOPClassifier(covariance="diag", diag_method="exact"),
    SOPClassifier(kernel="rbf", solver="explicit"),
    SCWClassifier(kernel="precomputed"),
    PAClassifier(kernel="precomputed"),
]

_PROBA_REASON = (
    "predict_proba is Phi(mu . x / sqrt(x' Sigma x)), the probability that a weight vector "
    "drawn from N(mu, Sigma) gives the class: it ranks inputs by the normalised margin, not by "
    "mu . x, whenever the margin variance differs between inputs (even Sigma = a I gives "
    "v = a |x|^2)"
)
_MULTI_REASON = (
    "with more than two classes predict is argmax_k mu_k . x (the decision function) while "
    "predict_proba is the probability that class k's score is the largest under the "
    "one-vs-rest Gaussians N(mu_k . x, v_k); with unequal variances v_k their argmax can "
    "differ. The accuracy part of this check is asserted in "
    "test_multiclass_training_accuracy_and_consistency."
)
#: The checks a precomputed kernel fails by design (rows of a Gram matrix against the
#: training inputs, in stream order); predict_proba is hidden, so the proba checks pass.
_PRECOMPUTED_REASONS = {
    "check_fit_score_takes_y": (
        "partial_fit continues the stream: after fit on the n x n Gram matrix, its rows "
        "are training inputs n..2n-1 and need kernel columns against all 2n inputs; the "
        "check passes the same n x n matrix again"
    ),
    "check_positive_only_tag_during_fit": (
        "the check subtracts the mean from the Gram matrix X X', which is then no longer "
        "positive semi-definite: refused, as CW's variances need a Mercer kernel"
    ),
    "check_estimators_dtypes": (
        "the check also casts the Gram matrix X X' to integers; the truncation breaks "
        "Cauchy-Schwarz (|k(x_i, x_j)| > sqrt(k(x_i, x_i) k(x_j, x_j))), so fit refuses "
        "it as no Mercer kernel (the float32 and float64 matrices pass)"
    ),
    "check_estimators_nan_inf": (
        "the check predicts on a 10 x 3 X holding NaN after a fit on a 10 x 10 Gram "
        "matrix: the width error (3 columns, 10 expected) comes first"
    ),
}


def _expected_failures(est):
    """The checks each configuration fails by design, or may fail on the check's own
    data, and why. Two of the latter pass today (XPASS, not strict): CW-Stdev with full
    covariance in check_classifiers_train (its class variances happen to leave the
    argmaxes equal) and diagonal AROW "l2" in check_decision_proba_consistency (its
    variances happen to keep the ranking): nothing guarantees either."""
    if est.kernel == "precomputed":
        return dict(_PRECOMPUTED_REASONS)
    first_order = isinstance(est, FIRST_ORDER)  # Sigma = a I: v = a k(x, x)
    unit_diag = est.kernel in ("rbf", "laplacian")  # k(x, x) = 1
    fails = {}
    if not (first_order and unit_diag):  # else v = a for every input: proba monotone in f
        fails["check_decision_proba_consistency"] = _PROBA_REASON
    # v_k = a k(x, x) is the same for every class model of a first-order rule; on the
    # check's data SCW-I's and AROW's argmaxes agree too (not guaranteed), CW's and SOP's not
    if isinstance(est, CWClassifier | SOPClassifier):
        fails["check_classifiers_train"] = _MULTI_REASON
    return fails


@parametrize_with_checks(CHECKED, expected_failed_checks=_expected_failures)
def test_sklearn_estimator_checks(estimator, check, request):
    expected = request.node.get_closest_marker("xfail")  # from _expected_failures
    if expected is None or request.config.option.runxfail:
        check(estimator)
        return
    # An expected failure ends as the marker would end it (xfailed, with its reason; a
    # check that passes stays an XPASS), but without its traceback: pytest formats that
    # (parsing scikit-learn's 5,600-line estimator_checks.py again for each frame) for a
    # report that shows only the reason, 5 s for the 29 expected failures here. Hence
    # pytest.xfail outside the except clause, where the failure would be its context.
    try:
        check(estimator)
    except Exception:
        pass
    else:
        return
    pytest.xfail(expected.kwargs["reason"])


def _blobs():
    """The data of scikit-learn's check_classifiers_train."""
    X, y = make_blobs(n_samples=300, random_state=0)
    X, y = sk_shuffle(X, y, random_state=7)
    return StandardScaler().fit_transform(X), y


@pytest.mark.filterwarnings("ignore:.*margin variance fell below")
@pytest.mark.parametrize("est", CHECKED, ids=repr)
def test_multiclass_training_accuracy_and_consistency(est):
    """check_classifiers_train's accuracy bar (0.83) on its own data, one pass (a
    precomputed kernel gets its linear Gram matrix).

    CW-Stdev's hard constraint on the 3 overlapping blobs (no bias term, so the
    one-vs-rest problems are not separable) reaches 0.82: 0.80 is its bar there.
    """
    X, y = _blobs()
    for Xs, ys in ((X, y), (X[y != 2], y[y != 2])):
        if est.kernel == "precomputed":
            Xs = Xs @ Xs.T
        clf = est.fit(Xs, ys)
        pred = clf.predict(Xs)
        hard = isinstance(clf, CWClassifier) and clf.rule == "stdev" and len(clf.classes_) > 2
        assert np.mean(pred == ys) > (0.80 if hard else 0.83)
        dec = clf.decision_function(Xs)
        if dec.ndim == 1:
            by_sign = np.where(dec >= 0, clf.classes_[1], clf.classes_[0])
            np.testing.assert_array_equal(by_sign, pred)
            if hasattr(clf, "predict_proba"):
                proba = clf.predict_proba(Xs)
                np.testing.assert_array_equal(clf.classes_[np.argmax(proba, axis=1)], pred)
        else:
            np.testing.assert_array_equal(clf.classes_[np.argmax(dec, axis=1)], pred)


def _stream(rng, n=200, d=8, noise=0.3, classes=2):
    X = rng.normal(size=(n, d))
    if classes == 2:
        w = rng.normal(size=d)
        y = (X @ w + noise * rng.normal(size=n) > 0).astype(int)
    else:
        W = rng.normal(size=(classes, d))
        y = np.argmax(X @ W.T + noise * rng.normal(size=(n, classes)), axis=1)
    return X, y


ALL_CONFIGS = [
    CWClassifier(eta=0.8),
    CWClassifier(rule="var", eta=0.8),
    SCWClassifier(C=0.5),
    SCWClassifier(variant=2),
    AROWClassifier(r=0.5),
    SOPClassifier(a=0.5),
    PAClassifier(variant=0),
    PerceptronClassifier(),
    CWClassifier(eta=0.8, covariance="diag", diag_method="exact"),
    SCWClassifier(covariance="diag", diag_method="l2"),
]


def _state(est):
    keys = sorted(k for k in vars(est) if k.endswith("_") and not k.startswith("_"))
    return {k: np.array(getattr(est, k), copy=True) for k in keys}


def _assert_same_state(a, b):
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


@pytest.mark.parametrize("est", ALL_CONFIGS, ids=repr)
def test_partial_fit_in_chunks_equals_one_pass(est):
    rng = np.random.default_rng(1)
    X, y = _stream(rng, n=300, d=12)
    one = est.__class__(**est.get_params()).fit(X, y)
    for chunk in (1, 7, 100):
        inc = est.__class__(**est.get_params())
        for s in range(0, len(y), chunk):
            inc.partial_fit(X[s : s + chunk], y[s : s + chunk], classes=[0, 1])
        np.testing.assert_allclose(inc.mean_, one.mean_, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(inc.covariance_, one.covariance_, rtol=1e-10, atol=1e-12)
        assert inc.n_mistakes_ == one.n_mistakes_
        assert inc.n_updates_ == one.n_updates_


@pytest.mark.filterwarnings("ignore:.*margin variance fell below")
@pytest.mark.parametrize("est", ALL_CONFIGS, ids=repr)
def test_pickle_mid_stream_continues_exactly(est):
    rng = np.random.default_rng(2)
    X, y = _stream(rng, n=240, d=6, classes=3)
    straight = est.__class__(**est.get_params()).partial_fit(X, y)
    half = est.__class__(**est.get_params()).partial_fit(X[:120], y[:120], classes=[0, 1, 2])
    resumed = pickle.loads(pickle.dumps(half))
    resumed.partial_fit(X[120:], y[120:])
    _assert_same_state(_state(resumed), _state(straight))


def test_multiclass_shapes_and_labels():
    rng = np.random.default_rng(3)
    X, y = _stream(rng, n=150, d=5, classes=4)
    labels = np.array(["ant", "bee", "cat", "dog"])[y]
    for cov in ("full", "diag"):
        clf = CWClassifier(covariance=cov).fit(X, labels)
        assert clf.mean_.shape == (4, 5)
        assert clf.covariance_.shape == ((4, 5, 5) if cov == "full" else (4, 5))
        assert clf.coef_.shape == (4, 5) and clf.intercept_.shape == (4,)
        assert clf.n_updates_.shape == (4,) and clf.n_mistakes_.shape == (4,)
        assert set(clf.predict(X)) <= set(labels)
        proba = clf.predict_proba(X)
        assert proba.shape == (150, 4)
        np.testing.assert_allclose(proba.sum(axis=1), 1.0)


def test_binary_label_mapping_and_attributes():
    rng = np.random.default_rng(4)
    X, y = _stream(rng, n=100, d=4)
    labels = np.where(y == 1, "spam", "ham")
    clf = AROWClassifier().fit(X, labels)
    np.testing.assert_array_equal(clf.classes_, ["ham", "spam"])
    assert clf.mean_.shape == (4,) and clf.covariance_.shape == (4, 4)
    assert clf.coef_.shape == (1, 4)
    assert isinstance(clf.n_updates_, int) and isinstance(clf.n_mistakes_, int)
    f = clf.decision_function(X)
    np.testing.assert_allclose(f, X @ clf.mean_)
    np.testing.assert_array_equal(clf.predict(X), np.where(f >= 0, "spam", "ham"))


def test_counters_add_per_binary_model_whatever_their_type():
    """A call adds its counts per binary model by the engine's model count: a counter
    set to a plain int on a three-class model becomes that int plus each model's count
    (what in-place addition gave), not model 0's count alone."""
    rng = np.random.default_rng(5)
    X, y = _stream(rng, n=60, d=4, classes=3)
    est, ref = AROWClassifier().fit(X, y), AROWClassifier().fit(X, y)
    est.n_updates_ = 0
    ref.n_updates_ = np.zeros(3, dtype=np.int64)
    before = ref.n_mistakes_.copy()
    for e in (est, ref):
        e.partial_fit(X[:10], y[:10])
    np.testing.assert_array_equal(est.n_updates_, ref.n_updates_)
    np.testing.assert_array_equal(est.n_mistakes_, ref.n_mistakes_)
    assert ref.n_updates_.shape == (3,) and (ref.n_mistakes_ - before).shape == (3,)


def test_pickles_with_the_counters_as_three_attributes_load():
    """Models pickled when the counters were three attributes of their own (before
    ``_counts``) load with them, and go on counting."""
    rng = np.random.default_rng(6)
    X, y = _stream(rng, n=60, d=4)
    est = AROWClassifier(kernel="rbf").fit(X, y)
    state = est.__getstate__()
    counts = state.pop("_counts")
    state.update(zip(("n_updates_", "n_mistakes_", "n_variance_floored_"), counts, strict=True))
    old = AROWClassifier.__new__(AROWClassifier)
    old.__setstate__(state)
    assert (old.n_updates_, old.n_mistakes_, old.n_variance_floored_) == counts
    assert not {"n_updates_", "n_mistakes_", "n_variance_floored_"} & set(vars(old))
    old.partial_fit(X[:5], y[:5])
    est.partial_fit(X[:5], y[:5])
    assert old.n_updates_ == est.n_updates_ and old.n_mistakes_ == est.n_mistakes_


@pytest.mark.parametrize("cov", ["full", "diag"])
def test_predict_proba_is_gaussian_probability_of_the_sign(cov):
    rng = np.random.default_rng(5)
    X, y = _stream(rng, n=120, d=5)
    clf = CWClassifier(covariance=cov).fit(X, y)
    S = clf.covariance_ if cov == "full" else np.diag(clf.covariance_)
    v = np.einsum("ij,jk,ik->i", X, S, X)
    p = norm.cdf((X @ clf.mean_) / np.sqrt(v))
    np.testing.assert_allclose(clf.predict_proba(X), np.column_stack([1 - p, p]), rtol=1e-12)
    Xs = sp.csr_matrix(X)
    np.testing.assert_allclose(clf.predict_proba(Xs), clf.predict_proba(X), rtol=1e-12)


def test_predict_proba_zero_input_is_one_half():
    clf = CWClassifier().fit(np.eye(3), [0, 1, 1])
    np.testing.assert_allclose(clf.predict_proba(np.zeros((1, 3))), [[0.5, 0.5]])


def test_first_prediction_of_empty_model_is_positive_class():
    X = np.array([[1.0, 2.0], [-1.0, 0.5], [0.3, -2.0]])
    res = run_online(CWClassifier(), X, np.array(["no", "yes", "no"]))
    assert res.predictions[0] == "yes"
    assert res.cumulative_mistakes[0] == 1


def test_fit_resets_and_n_mistakes_sum_over_partial_fit():
    rng = np.random.default_rng(6)
    X, y = _stream(rng, n=200, d=5)
    clf = SCWClassifier()
    clf.partial_fit(X[:100], y[:100])
    m1 = clf.n_mistakes_
    clf.partial_fit(X[100:], y[100:])
    total = clf.n_mistakes_
    assert total >= m1
    assert total == run_online(SCWClassifier(), X, y).n_mistakes
    clf.fit(X[:100], y[:100])
    assert clf.n_mistakes_ == m1


def test_n_iter_and_shuffle():
    rng = np.random.default_rng(7)
    X, y = _stream(rng, n=150, d=5)
    two = CWClassifier(n_iter=2).fit(X, y)
    manual = CWClassifier().fit(X, y).partial_fit(X, y)
    np.testing.assert_allclose(two.mean_, manual.mean_, rtol=1e-12)
    a = CWClassifier(n_iter=3, shuffle=True, random_state=0).fit(X, y)
    b = CWClassifier(n_iter=3, shuffle=True, random_state=0).fit(X, y)
    c = CWClassifier(n_iter=3, shuffle=True, random_state=1).fit(X, y)
    np.testing.assert_array_equal(a.mean_, b.mean_)
    assert not np.array_equal(a.mean_, c.mean_)


@pytest.mark.parametrize("est", ALL_CONFIGS, ids=repr)
def test_sparse_equals_dense(est):
    rng = np.random.default_rng(8)
    X, y = _stream(rng, n=150, d=10)
    X[rng.random(X.shape) < 0.6] = 0.0
    dense = est.__class__(**est.get_params()).fit(X, y)
    sparse = est.__class__(**est.get_params()).fit(sp.csr_matrix(X), y)
    np.testing.assert_allclose(sparse.mean_, dense.mean_, rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(sparse.covariance_, dense.covariance_, rtol=1e-10, atol=1e-13)
    assert sparse.n_mistakes_ == dense.n_mistakes_


def test_inputs_not_mutated():
    rng = np.random.default_rng(9)
    X, y = _stream(rng, n=80, d=4)
    X0, y0 = X.copy(), y.copy()
    CWClassifier().fit(X, y).predict_proba(X)
    CWClassifier(covariance="diag").fit(sp.csr_matrix(X), y)
    np.testing.assert_array_equal(X, X0)
    np.testing.assert_array_equal(y, y0)


def test_zero_rows_and_duplicates_stay_finite():
    X = np.zeros((20, 3))
    X[::2, 0] = 1.0
    y = np.arange(20) % 2
    for est in ALL_CONFIGS:
        clf = est.__class__(**est.get_params()).fit(X, y)
        assert np.all(np.isfinite(clf.mean_)) and np.all(np.isfinite(clf.covariance_))
        assert np.all(np.isfinite(clf.predict_proba(X)))


# ----------------------------------------------------------------- bad input


def _fitted():
    rng = np.random.default_rng(10)
    X, y = _stream(rng, n=60, d=4)
    return CWClassifier().fit(X, y), X, y


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        (lambda X, y: (np.where(np.arange(60)[:, None] == 17, np.nan, X), y), "row 17"),
        (lambda X, y: (np.where(np.arange(60)[:, None] == 3, np.inf, X), y), "row 3"),
        (lambda X, y: (X[:, :3], y), "features"),
        (lambda X, y: (X, np.where(y == 1, 5, y)), r"labels \[5\]"),
        (lambda X, y: (np.full((60, 4), 1e200), y), "overflows"),
    ],
)
def test_bad_training_input_leaves_state_untouched(bad, match):
    clf, X, y = _fitted()
    before = _state(clf)
    Xb, yb = bad(X, y)
    with pytest.raises(ValueError, match=match):
        clf.partial_fit(Xb, yb)
    _assert_same_state(_state(clf), before)


def test_bad_input_on_fit_keeps_previous_model():
    clf, X, y = _fitted()
    before = _state(clf)
    with pytest.raises(ValueError, match="row 0"):
        clf.fit(np.full((5, 7), np.nan), np.arange(5) % 2)
    _assert_same_state(_state(clf), before)
    assert clf.n_features_in_ == 4


def test_sparse_nan_row_is_named():
    X = sp.csr_matrix(np.eye(5))
    X.data[3] = np.nan
    with pytest.raises(ValueError, match="row 3"):
        CWClassifier(covariance="diag").fit(X, [0, 1, 0, 1, 0])


def test_max_abs_sees_every_value_in_any_layout():
    """The input checks' one pass (bit patterns with the sign cleared): max |x|, NaN
    over inf wherever they sit, None for no values, in any memory layout."""
    from kernelcw.estimators._input import _max_abs

    rng = np.random.default_rng(0)
    X = rng.normal(size=(50, 7))
    want = float(np.abs(X).max())
    assert _max_abs(X) == want
    assert _max_abs(np.asfortranarray(X)) == want
    assert _max_abs(X[::2, ::3]) == float(np.abs(X[::2, ::3]).max())  # a copy
    assert _max_abs(sp.csr_matrix(X)) == want
    assert _max_abs(X.astype(np.float32)) == float(np.abs(X.astype(np.float32)).max())
    assert _max_abs(np.zeros((0, 3))) is None
    assert _max_abs(np.array([-0.0, -0.0])) == 0.0
    assert _max_abs(np.array([-1e308, 5.0])) == 1e308
    for pos in (0, 3, 6):
        Y = X.copy()
        Y[pos, pos] = -np.inf
        assert _max_abs(Y) == np.inf
        Y[-pos - 1, 1] = np.nan
        assert np.isnan(_max_abs(Y))  # NaN wins over inf, before or after it
        assert np.isnan(_max_abs(np.where(np.isinf(Y), np.nan, Y)))


@pytest.mark.parametrize(
    "dtype",
    [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.int64, np.uint32, np.uint64, bool],
)
def test_counted_labels_are_np_unique(dtype):
    """Integer and bool classes found by counting equal np.unique's, dtype included,
    at the ends of each type's range; wide or extreme ranges are sorted instead."""
    from kernelcw.estimators._labels import _counted_unique, _unique_labels

    info = np.iinfo(np.uint8 if dtype is bool else dtype)
    rng = np.random.default_rng(1)
    cases = [rng.integers(0, 2, 40), rng.integers(0, 1, 5), np.array([1, 0, 1])]
    if dtype is not bool:
        lo, hi = max(int(info.min), -(2**40)), min(int(info.max), 2**40)
        cases += [np.array([lo, hi - 3, lo + 2]) if hi - lo < 5000 else np.array([lo, lo + 9])]
        cases += [np.array([info.min, info.max, info.min], dtype=dtype)]  # wide: sorted
    for labels in cases:
        y = labels.astype(dtype)
        got, want = _unique_labels(y, "y"), np.unique(y)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    assert _counted_unique(np.array([0, 10**9])) is None  # range >> count: np.unique
    near = np.array([2**62, 2**62 - 5])  # (at the edge of the counted range: counted)
    np.testing.assert_array_equal(_counted_unique(near), np.unique(near))
    past = np.array([2**62 + 1, 2**62 - 5])  # past it: sorted
    assert _counted_unique(past) is None
    np.testing.assert_array_equal(_unique_labels(past, "y"), np.unique(past))
    y = np.array([2, 7, 7, 2] * 50, dtype=np.int64)
    assert list(CWClassifier().fit(np.eye(200, 3), y).classes_) == [2, 7]
    # strided, read-only and narrow labels: one compiled form of the count (compile time)
    from kernelcw.estimators._labels import _present

    frozen = np.array([3, 1, 3], dtype=np.int16)
    frozen.flags.writeable = False
    for labels in (np.array([[1, 0], [4, 0]])[:, 0], frozen, np.array([True, False])):
        np.testing.assert_array_equal(_counted_unique(labels), np.unique(labels))
    assert len(_present.signatures) == 1


def test_one_class_needs_classes():
    X = np.ones((4, 2))
    with pytest.raises(ValueError, match="only one class"):
        CWClassifier().fit(X, [1, 1, 1, 1])
    with pytest.raises(ValueError, match="only one class"):
        CWClassifier().partial_fit(X, [1, 1, 1, 1])
    clf = CWClassifier().partial_fit(X, [1, 1, 1, 1], classes=[0, 1])
    assert clf.n_updates_ >= 1


def test_classes_must_match_later_calls():
    clf, X, y = _fitted()
    with pytest.raises(ValueError, match="not the same"):
        clf.partial_fit(X, y, classes=[0, 1, 2])


@pytest.mark.parametrize(
    ("est", "match"),
    [
        (CWClassifier(eta=0.5), "eta"),
        (CWClassifier(eta=1.0), "eta"),
        (CWClassifier(eta=0.3), "eta"),
        (CWClassifier(eta="high"), "eta"),
        (SCWClassifier(eta=1.2), "eta"),
        (SCWClassifier(C=0.0), "C"),
        (SCWClassifier(C=-1), "C"),
        (PAClassifier(C=np.inf), "C"),
        (AROWClassifier(r=0), "r"),
        (CWClassifier(a=0.0), "a"),
        (CWClassifier(a=-2), "a"),
        (CWClassifier(rule="stddev"), "rule"),
        (SCWClassifier(variant=3), "variant"),
        (PAClassifier(variant=True), "variant"),
        (CWClassifier(covariance="dense"), "covariance"),
        (CWClassifier(diag_method="KL"), "diag_method"),
        (CWClassifier(mode="fast"), "mode"),
        (CWClassifier(kernel="sigmoid"), "kernel"),
        (CWClassifier(n_iter=0), "n_iter"),
        (CWClassifier(n_iter=1.5), "n_iter"),
        (CWClassifier(shuffle="yes"), "shuffle"),
    ],
    ids=repr,
)
def test_bad_parameters_raise_clear_errors(est, match):
    X = np.eye(4)
    y = [0, 1, 0, 1]
    with pytest.raises(ValueError, match=match):
        est.fit(X, y)
    clf, X2, y2 = _fitted()
    before = _state(clf)
    clf.set_params(**est.get_params()) if isinstance(est, CWClassifier) else None
    if isinstance(est, CWClassifier):
        with pytest.raises(ValueError, match=match):
            clf.partial_fit(X2, y2)
        _assert_same_state(_state(clf), before)


def test_full_covariance_too_large_suggests_diag():
    X = sp.random(4, 400_000, density=1e-5, format="csr", random_state=0)
    with pytest.raises(ValueError, match="covariance='diag'"):
        CWClassifier().fit(X, [0, 1, 0, 1])


@pytest.mark.parametrize("cov", ["full", "diag"])
def test_collapsing_variance_is_floored_counted_and_warned_once(cov):
    """CW-Stdev's hard constraint on a non-separable stream drives v to zero
    geometrically; the floor keeps every number finite and says so once."""
    rng = np.random.default_rng(2)
    X = rng.normal(size=(400, 3))
    y = rng.integers(0, 2, size=400)  # pure noise: never separable
    clf = CWClassifier(eta=0.95, covariance=cov, diag_method="kl")
    with pytest.warns(RuntimeWarning, match="margin variance fell below") as rec:
        clf.fit(X, y)
    said = [str(w.message) for w in rec if "margin variance" in str(w.message)]
    assert len(said) == 1
    assert clf.n_variance_floored_ > 0
    # its count is the call's (run_online's chunks: the first chunk's), and it says so
    assert f"on {clf.n_variance_floored_} round(s) of this call" in said[0]
    assert "warns once per model" in said[0]
    assert np.all(np.isfinite(clf.mean_)) and np.all(np.isfinite(clf.covariance_))
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no second warning on later calls
        clf.partial_fit(X, y)
    assert np.all(np.isfinite(clf.predict_proba(X)))


def test_well_posed_streams_never_floor():
    rng = np.random.default_rng(3)
    X, y = _stream(rng, n=500, d=10)
    for est in ALL_CONFIGS:
        clf = est.__class__(**est.get_params()).fit(X, y)
        assert clf.n_variance_floored_ == 0, est


@pytest.mark.parametrize("block_size", [1, 5, 64])
def test_primal_block_size_changes_nothing_but_speed(block_size):
    rng = np.random.default_rng(12)
    X, y = _stream(rng, n=200, d=12)
    ref = AROWClassifier().fit(X, y)
    est = AROWClassifier(block_size=block_size).fit(X, y)
    np.testing.assert_allclose(est.mean_, ref.mean_, rtol=1e-11, atol=1e-14)
    np.testing.assert_allclose(est.covariance_, ref.covariance_, rtol=1e-11, atol=1e-14)
    assert est.n_mistakes_ == ref.n_mistakes_ and est.n_updates_ == ref.n_updates_


# ---------------------------------------------------------------------------------------
# An error part-way through partial_fit; set_params between calls; scikit-learn's protocols
# ---------------------------------------------------------------------------------------


def _minkowski(A, B):
    """An indefinite 'kernel': the last coordinate enters with a minus sign."""
    A, B = np.asarray(A), np.asarray(B)
    return A[:, :-1] @ B[:, :-1].T - np.outer(A[:, -1], B[:, -1])


def _indefinite_stream(n=300, bad=230):
    rng = np.random.default_rng(5)
    X = rng.normal(size=(n, 4))
    y = (X[:, 0] * X[:, 1] > 0).astype(int)
    X = np.hstack([X, np.zeros((n, 1))])
    X[bad, -1] = 10.0  # x' Sigma x < 0 at this row only
    return X, y


def _dual_state(m, X):
    return (
        m.decision_function(X).copy(),
        np.copy(m.n_updates_),
        np.copy(m.n_mistakes_),
        np.copy(m.n_support_),
        np.copy(m.support_),
        np.copy(m.dual_coef_),
        np.copy(m.covariance_coef_),
    )


@pytest.mark.parametrize("est", ["arow", "pa1"])
@pytest.mark.parametrize(
    "form",
    [
        dict(),
        dict(block_size=16),
        dict(solver="explicit"),
        dict(budget=25),
        dict(budget=25, budget_policy="random"),
        dict(budget=25, budget_policy="smallest"),
        dict(budget=25, budget_policy="oldest"),
    ],
    ids=lambda f: ",".join(f"{k}={v}" for k, v in f.items()) or "cholesky",
)
def test_an_error_part_way_leaves_the_dual_model_as_it_was(est, form):
    """A kernel found indefinite at row 230 of a 100-row call (several blocks in): the model
    is exactly as before the call, and continues as if the call had not happened."""
    X, y = _indefinite_stream()
    make = {
        "arow": lambda: AROWClassifier(kernel=_minkowski, random_state=0, **form),
        "pa1": lambda: PAClassifier(variant=1, kernel=_minkowski, random_state=0, **form),
    }[est]
    m = make().partial_fit(X[:200], y[:200])
    before = _dual_state(m, X[:60])
    with pytest.raises(ValueError, match=r"not positive semi-definite: .*training row 230"):
        m.partial_fit(X[200:], y[200:])
    for a, b in zip(before, _dual_state(m, X[:60]), strict=True):
        np.testing.assert_array_equal(a, b)
    m.partial_fit(X[200:229], y[200:229])
    ref = make().partial_fit(X[:200], y[:200]).partial_fit(X[200:229], y[200:229])
    for a, b in zip(_dual_state(ref, X[:60]), _dual_state(m, X[:60]), strict=True):
        np.testing.assert_array_equal(a, b)


def test_coef_of_a_kernel_model_is_an_attribute_error():
    X, y = make_blobs(60, 3, centers=2, random_state=0)
    m = SCWClassifier(kernel="rbf").fit(X, y)
    assert not hasattr(m, "coef_")
    assert "coef_" not in dir(m)
    with pytest.raises(AttributeError, match="linear kernel only.*'rbf'"):
        m.coef_  # noqa: B018
    lin = SCWClassifier(kernel="linear", mode="dual").fit(X, y)
    assert lin.coef_.shape == (1, 3)


def test_precomputed_kernel_is_pairwise_for_scikit_learn_splitters():
    from sklearn.metrics.pairwise import rbf_kernel
    from sklearn.model_selection import GridSearchCV, cross_val_score

    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 3))
    y = (X[:, 0] * X[:, 1] > 0).astype(int)
    K = rbf_kernel(X, gamma=0.5)
    pre = cross_val_score(SCWClassifier(kernel="precomputed"), K, y, cv=3, error_score="raise")
    rbf = cross_val_score(SCWClassifier(kernel="rbf", gamma=0.5), X, y, cv=3)
    np.testing.assert_allclose(pre, rbf)
    grid = GridSearchCV(SCWClassifier(kernel="precomputed"), {"C": [0.1, 1.0]}, cv=3)
    grid.fit(K, y)
    assert grid.best_score_ == pytest.approx(
        GridSearchCV(SCWClassifier(kernel="rbf", gamma=0.5), {"C": [0.1, 1.0]}, cv=3)
        .fit(X, y)
        .best_score_
    )
    m = SCWClassifier(kernel="precomputed")
    with pytest.raises(ValueError, match=r"square Gram matrix .* shape \(100, 120\)"):
        m.fit(K[:100], y[:100])
    assert not hasattr(m, "n_features_in_")  # the failed fit changed nothing


@pytest.mark.parametrize(
    "cls", [CWClassifier, SCWClassifier, AROWClassifier, SOPClassifier, *FIRST_ORDER]
)
def test_precomputed_kernel_has_no_predict_proba(cls):
    """predict_proba needs each new input's margin variance a k(x, x) + k' Pi k, and rows
    of K(X_new, X_train) do not hold k(x, x): with kernel="precomputed" the method is
    hidden (hasattr False, fitted or not, as SVC hides it for probability=False), a
    direct call says why (the cause of scikit-learn's AttributeError), and probability
    scorers fail at once instead of on every split. Every other kernel keeps it."""
    from sklearn.metrics.pairwise import rbf_kernel
    from sklearn.model_selection import cross_val_score

    X, y = make_blobs(n_samples=90, centers=2, random_state=0)
    K = rbf_kernel(X, gamma=0.5)
    for kernel in ("linear", "rbf"):
        assert hasattr(cls(kernel=kernel), "predict_proba")
        assert hasattr(cls(kernel=kernel).fit(X, y), "predict_proba")
    pre = cls(kernel="precomputed")
    assert not hasattr(pre, "predict_proba")
    pre.fit(K, y)
    assert not hasattr(pre, "predict_proba") and "predict_proba" not in dir(pre)
    with pytest.raises(AttributeError, match="predict_proba") as err:
        pre.predict_proba(K)
    assert re.search(r"kernel='precomputed'.*k\(x, x\)", str(err.value.__cause__))
    pre.set_params(kernel="rbf")  # the fitted model is still one of a precomputed kernel
    assert not hasattr(pre, "predict_proba")
    assert pre.set_params(kernel="precomputed").score(K, y) > 0.9  # predict still works
    with pytest.raises(AttributeError, match="predict_proba"):
        cross_val_score(
            cls(kernel="precomputed"), K, y, cv=3, scoring="neg_log_loss", error_score="raise"
        )


@pytest.mark.parametrize(
    "start, change",
    [
        ({}, dict(budget=10)),
        ({}, dict(budget_policy="oldest")),
        ({}, dict(gamma=0.3)),
        ({}, dict(kernel="laplacian")),
        (dict(kernel="poly"), dict(degree=2)),
        (dict(kernel="poly"), dict(coef0=0.5)),
        ({}, dict(solver="explicit")),
        (dict(fit_intercept=True), dict(intercept_scaling=2.0)),
    ],
)
def test_partial_fit_refuses_a_structural_change_made_by_set_params(start, change):
    X, y = make_blobs(80, 3, centers=2, random_state=1)
    m = AROWClassifier(**{"kernel": "rbf", "budget": 50, **start}).partial_fit(X[:40], y[:40])
    before = m.decision_function(X).copy()
    m.set_params(**change)
    key = next(iter(change))
    with pytest.raises(ValueError, match=rf"set_params changed {key} from .* call fit"):
        m.partial_fit(X[40:], y[40:])
    np.testing.assert_array_equal(m.decision_function(X), before)
    m.fit(X, y)  # fit starts over with the new value


@pytest.mark.parametrize(
    "start, change",
    [
        (dict(), dict(gamma=0.5, degree=2, coef0=1.0, budget_policy="oldest", budget_batch=4)),
        (dict(covariance="diag"), dict(gamma=0.5, solver="explicit")),
        (dict(), dict(diag_method="l2", intercept_scaling=3.0)),  # (no intercept here)
        (dict(kernel="rbf"), dict(degree=3, coef0=2.0, budget_batch=2)),
        (dict(kernel="rbf", budget=30), dict(diag_method="l2", degree=4)),
    ],
)
def test_parameters_a_model_never_reads_may_change_between_calls(start, change, tmp_path):
    """A linear primal model refused set_params(gamma=0.5) (or a budget's policy) at
    the next partial_fit, "these shape the stored state", though it never reads them;
    they now change nothing, and save writes them as they are."""
    import kernelcw

    X, y = make_blobs(80, 3, centers=2, random_state=1)
    ref = AROWClassifier(**start).partial_fit(X[:40], y[:40]).partial_fit(X[40:], y[40:])
    m = AROWClassifier(**start).partial_fit(X[:40], y[:40])
    m.set_params(**change)
    m.partial_fit(X[40:], y[40:])
    np.testing.assert_array_equal(m.decision_function(X), ref.decision_function(X))
    kernelcw.save(m, tmp_path / "m.kcw")
    back = kernelcw.load(tmp_path / "m.kcw")
    assert {k: back.get_params()[k] for k in change} == change
    np.testing.assert_array_equal(back.decision_function(X), ref.decision_function(X))
    back.partial_fit(X[:10], y[:10])  # and it goes on


def test_primal_partial_fit_refuses_a_covariance_change_and_takes_a_new_eta():
    X, y = make_blobs(80, 3, centers=2, random_state=1)
    m = CWClassifier().partial_fit(X[:40], y[:40])
    m.set_params(covariance="diag")
    with pytest.raises(ValueError, match="set_params changed covariance from 'full' to 'diag'"):
        m.partial_fit(X[40:], y[40:])
    m.set_params(covariance="full", eta=0.9)  # the rule's parameters may change mid-stream
    m.partial_fit(X[40:], y[40:])
    ref = CWClassifier().partial_fit(X[:40], y[:40])
    ref.set_params(eta=0.9).partial_fit(X[40:], y[40:])
    np.testing.assert_array_equal(m.mean_, ref.mean_)


@pytest.mark.parametrize(
    "bad", [dict(gamma=-1.0), dict(gamma=0.0), dict(degree=0), dict(coef0=np.nan)]
)
def test_kernel_parameters_are_checked_for_every_kernel(bad):
    X, y = make_blobs(20, 2, centers=2, random_state=0)
    with pytest.raises(ValueError, match=next(iter(bad))):
        SCWClassifier(**bad).fit(X, y)  # linear kernel: checked all the same


@pytest.mark.parametrize(
    "make",
    [
        lambda: PAClassifier(variant=0),
        lambda: CWClassifier(covariance="diag"),
        lambda: AROWClassifier(covariance="diag"),
        lambda: AROWClassifier(),
        lambda: AROWClassifier(kernel="rbf"),
    ],
)
def test_csr_with_duplicate_entries_is_read_as_its_dense_value(make):
    rng = np.random.default_rng(0)
    D = rng.normal(size=(40, 6))
    y = (D[:, 0] > 0).astype(int)
    # each value stored as two halves: a CSR matrix with duplicates whose .toarray() is D
    rows, cols = np.nonzero(D)
    data = np.concatenate([D[rows, cols] / 2, D[rows, cols] / 2])
    A = sp.coo_matrix(
        (data, (np.concatenate([rows, rows]), np.concatenate([cols, cols]))), shape=D.shape
    )
    order = np.lexsort((np.r_[cols, cols], np.r_[rows, rows]))
    indptr = np.searchsorted(np.r_[rows, rows][order], np.arange(D.shape[0] + 1))
    S = sp.csr_matrix((A.data[order], A.col[order], indptr), shape=D.shape)
    assert not S.has_canonical_format
    np.testing.assert_allclose(S.toarray(), D)
    fs = make().fit(S, y).decision_function(S)
    fd = make().fit(D, y).decision_function(D)
    np.testing.assert_allclose(fs, fd, rtol=1e-12, atol=1e-12)
    assert S.nnz == 2 * D.size  # the caller's matrix is left as it was


def test_a_dual_model_continues_across_sparse_and_dense_input():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(120, 5))
    y = (X[:, 0] * X[:, 1] > 0).astype(int)
    ref = AROWClassifier(kernel="rbf").partial_fit(X[:60], y[:60]).partial_fit(X[60:], y[60:])
    for first, second in ((sp.csr_matrix, np.asarray), (np.asarray, sp.csr_matrix)):
        m = AROWClassifier(kernel="rbf").partial_fit(first(X[:60]), y[:60])
        m.partial_fit(second(X[60:]), y[60:])
        np.testing.assert_allclose(m.decision_function(X), ref.decision_function(X), rtol=1e-12)


@pytest.mark.filterwarnings("ignore:SOPClassifier. the margin variance fell:RuntimeWarning")
@pytest.mark.parametrize("covariance", ["full", "diag"])
def test_an_error_part_way_leaves_the_primal_model_as_it_was(covariance, monkeypatch):
    """Full: the walk of the third block of the second call reports a non-finite step
    (blocks after the first changed the model). Diagonal: the walk changes every row in
    place, then reports row 150 as the failing one."""
    from kernelcw.engines import _diag_walk, primal_full

    rng = np.random.default_rng(15)
    X = rng.normal(size=(300, 4)) * 1e10
    y = (X[:, 0] > 0).astype(int)
    m = SOPClassifier(covariance=covariance, block_size=16).fit(X[:100], y[:100])
    if covariance == "full":
        walk, calls = primal_full._full_walk, []

        def failing_third(*args):
            calls.append(1)
            res = walk(*args)
            return (*res[:2], 5, -1) if len(calls) == 3 else res  # (bad_row 5, no split)

        monkeypatch.setattr(primal_full, "_full_walk", failing_third)
    if covariance == "diag":
        walk = _diag_walk._diag_dense

        def failing(*args):
            walk(*args)
            return 150

        monkeypatch.setattr(_diag_walk, "_diag_dense", failing)
    before = (m.mean_.copy(), m.covariance_.copy(), m.n_updates_, m.n_mistakes_)
    with pytest.raises(FloatingPointError, match="non-finite"):
        m.partial_fit(X[100:], y[100:])
    np.testing.assert_array_equal(m.mean_, before[0])
    np.testing.assert_array_equal(m.covariance_, before[1])
    assert (m.n_updates_, m.n_mistakes_) == before[2:]


def test_a_fit_refused_for_memory_keeps_the_previous_fit():
    X, y = make_blobs(40, 3, centers=2, random_state=0)
    m = CWClassifier().fit(X, y)
    mu = m.mean_.copy()
    # a Generator: with random_state=0 (a legacy RandomState) scipy draws the 400
    # positions by permuting all 4e7 of them (2.2 s); the same 40 x 1e6 CSR of 400
    # entries in 0.3 ms
    rng = np.random.default_rng(0)
    huge = sp.random(40, 10**6, density=1e-5, format="csr", random_state=rng)
    with pytest.raises(ValueError, match="covariance='diag'"):
        m.fit(huge, y)
    assert m.n_features_in_ == 3
    np.testing.assert_array_equal(m.mean_, mu)
    m.predict(X)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda X, y: AROWClassifier().partial_fit(X, y, classes=[0, 1, np.nan]),
            "holds NaN or infinity",
        ),
        (
            lambda X, y: AROWClassifier().partial_fit(X, y, classes=[[0, 1]]),
            "must be a 1-d list of labels",
        ),
        (
            lambda X, y: AROWClassifier().fit(X, y).partial_fit(X, np.array(["a"] * 6, object)),
            r"y contains labels \['a'\] that are not in classes \[0, 1\]",
        ),
        (
            lambda X, y: CWClassifier(a=1e160, mode="dual").fit(X, y),
            r"a=1e\+160 is outside \[1e-100, 1e\+100\], the range the dual engine supports",
        ),
        (lambda X, y: AROWClassifier(a=1e-200, kernel="rbf").fit(X, y), "is outside"),
        (
            lambda X, y: AROWClassifier().fit(X, np.array([1, "a", 2.5, "b", 1, "a"], object)),
            r"y mixes label types \(float, int, str\) that cannot be sorted",
        ),
    ],
)
def test_labels_and_prior_scale_are_checked(call, message):
    X = np.random.default_rng(0).normal(size=(6, 2))
    y = np.array([0, 1, 0, 1, 0, 1])
    with pytest.raises(ValueError, match=message):
        call(X, y)


def test_the_primal_engine_takes_any_prior_scale():
    X, y = make_blobs(60, 3, centers=2, random_state=0)
    ref = CWClassifier().fit(X, y).predict(X)
    for a in (1e-200, 1e160):  # CW-Stdev's predictions do not depend on a
        np.testing.assert_array_equal(CWClassifier(a=a).fit(X, y).predict(X), ref)


@pytest.mark.parametrize(
    "est",
    [
        SCWClassifier(),
        SCWClassifier(covariance="diag"),
        PAClassifier(),
        SCWClassifier(kernel="rbf"),
        SCWClassifier(mode="dual"),
    ],
    ids=["full", "diag", "first-order", "rbf", "linear-dual"],
)
@pytest.mark.parametrize("sparse", [False, True])
def test_prediction_refuses_rows_fit_refuses(est, sparse):
    """A row whose squared norm times a overflows float64 is refused by fit; prediction
    refuses it the same way (it gave a decision of -9e200 with predict_proba 0.5, and
    numpy's raw overflow warning), naming the row."""
    import warnings

    X, y = make_blobs(60, 4, centers=2, random_state=0)
    est.fit(X, y)
    big = X[:3].copy()
    big[1] *= 1e200
    big = sp.csr_matrix(big) if sparse else big
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for method in (est.predict, est.predict_proba, est.decision_function):
            with pytest.raises(ValueError, match="row 1 of X is too large"):
                method(big)
        with pytest.raises(ValueError, match="row 1 of X is too large"):
            est.partial_fit(big, y[:3])
