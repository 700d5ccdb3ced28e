"""Calls of one row check their input against a record of the last call that passed
the full checks (``CWEstimator._row_call``): they must learn exactly what the full
checks would let through, and refuse exactly what they refuse, with the same error."""

from __future__ import annotations

import copy
import pickle
import warnings

import numpy as np
import pytest

import kernelcw.estimators._base as base
import kernelcw.estimators._input as base_input
from kernelcw import AROWClassifier, CWClassifier, PAClassifier, SCWClassifier


def _stream(n=120, d=4, seed=0, labels=(0, 1)):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    k = len(labels)
    idx = (np.floor((X[:, 0] + 2.0) * k / 4.0).clip(0, k - 1)).astype(int)
    flip = rng.random(n) < 0.1
    idx[flip] = (idx[flip] + 1) % k
    return X, np.asarray(labels)[idx]


MODELS = {
    "dual rbf budget": lambda: SCWClassifier(kernel="rbf", budget=30, budget_policy="project"),
    "dual rbf oldest": lambda: AROWClassifier(kernel="rbf", budget=25, budget_policy="oldest"),
    "dual linear": lambda: PAClassifier(mode="dual"),
    "primal full": lambda: CWClassifier(),
    "primal diag": lambda: SCWClassifier(covariance="diag"),
}

LABELS = {
    "int": (3, 7),
    "three ints": (0, 1, 2),
    "str": ("no", "yes"),
    "bool": (False, True),
    "float": (-1.0, 1.0),
}


def _state(est):
    attrs = ["n_updates_", "n_mistakes_", "n_variance_floored_"]
    if hasattr(est, "dual_coef_"):
        attrs += ["dual_coef_", "support_"]
    else:
        attrs += ["mean_"]
    return {k: copy.deepcopy(getattr(est, k)) for k in attrs}


def _assert_equal(x, y, what):
    if isinstance(x, list | tuple):  # (one array per binary model)
        assert len(x) == len(y), what
        for i, (u, v) in enumerate(zip(x, y, strict=True)):
            _assert_equal(u, v, f"{what}[{i}]")
    else:
        np.testing.assert_array_equal(x, y, err_msg=what)


def _assert_same_state(a, b):
    sa, sb = _state(a), _state(b)
    for k in sa:
        _assert_equal(sa[k], sb[k], k)


def _full_checks_only(est, X, y, **kw):
    """partial_fit with the record dropped first: the full checks, every call."""
    est.__dict__.pop("_row_memo", None)
    return est.partial_fit_margins(X, y, **kw)


@pytest.mark.parametrize("labels", LABELS, ids=list(LABELS))
@pytest.mark.parametrize("model", MODELS, ids=list(MODELS))
def test_one_row_calls_skip_the_full_checks_and_learn_the_same(model, labels, monkeypatch):
    X, y = _stream(labels=LABELS[labels])
    classes = np.unique(y)
    fast, full = MODELS[model](), MODELS[model]()
    calls = []
    real = base.validate_training
    monkeypatch.setattr(base, "validate_training", lambda *a, **k: calls.append(1) or real(*a, **k))
    for i in range(len(y)):
        m1 = fast.partial_fit_margins(X[i : i + 1], y[i : i + 1], classes=classes)
        n = len(calls)
        m2 = _full_checks_only(full, X[i : i + 1], y[i : i + 1], classes=classes)
        assert len(calls) == n + 1
        np.testing.assert_array_equal(m1, m2)
    # the first two calls of ``fast`` ran the full checks (start, then the record)
    assert len(calls) == len(y) + 2
    _assert_same_state(fast, full)
    np.testing.assert_array_equal(fast.decision_function(X), full.decision_function(X))


def _primed(model="dual rbf budget", labels=(0, 1)):
    X, y = _stream(labels=labels)
    est = MODELS[model]()
    for i in range(40):
        est.partial_fit(X[i : i + 1], y[i : i + 1], classes=np.unique(y))
    assert est.__dict__.get("_row_memo") is not None
    return est, X, y


BAD = {
    "NaN": lambda X, y: (np.array([[np.nan, 0.0, 1.0, 2.0]]), y[:1]),
    "inf": lambda X, y: (np.array([[0.0, -np.inf, 1.0, 2.0]]), y[:1]),
    "too large": lambda X, y: (np.array([[1e155, 1e155, 0.0, 0.0]]), y[:1]),
    "width": lambda X, y: (X[:1, :3], y[:1]),
    "unknown label": lambda X, y: (X[:1], np.array([5])),
    "label of another type": lambda X, y: (X[:1], np.array(["a"])),
    "NaN label": lambda X, y: (X[:1], np.array([np.nan])),
    "non-integral label": lambda X, y: (X[:1], np.array([0.5])),
    "y of two": lambda X, y: (X[:1], y[:2]),
}


@pytest.mark.parametrize("bad", BAD, ids=list(BAD))
def test_a_bad_row_is_refused_as_the_full_checks_refuse_it(bad):
    est, X, y = _primed()
    Xb, yb = BAD[bad](X, y)
    before = _state(est)
    twin = copy.deepcopy(est)
    with pytest.raises((ValueError, TypeError)) as got:
        est.partial_fit(Xb, yb)
    with pytest.raises(type(got.value)) as ref:
        _full_checks_only(twin, Xb, yb)
    assert str(got.value) == str(ref.value)
    after = _state(est)
    for k in before:
        _assert_equal(after[k], before[k], k)
    # the model goes on as if the bad call had not been made
    est.partial_fit(X[40:41], y[40:41])
    _full_checks_only(twin, X[40:41], y[40:41])
    _assert_same_state(est, twin)


@pytest.mark.parametrize(
    "call",
    [
        lambda X, y: (X[:1].astype(np.float32), y[:1], {}),
        lambda X, y: (X[:1].astype(int), y[:1], {}),
        lambda X, y: (np.asfortranarray(X[:2])[:1], y[:1], {}),
        lambda X, y: (X[:1], y[:1].astype(np.int32), {}),
        lambda X, y: (X[:1], y[:1].astype(float), {}),
        lambda X, y: (X[:1], y[:1].tolist(), {}),
        lambda X, y: (X[:1].tolist(), y[:1], {}),
        lambda X, y: (X[:1], y[:1], {"classes": [0, 1]}),
        lambda X, y: (X[:1], y[:1], {"classes": np.array([0, 1])}),
        lambda X, y: (X[:1], y[:1].reshape(1, 1), {}),
    ],
    ids=[
        "float32",
        "int X",
        "strided",
        "int32 y",
        "float y",
        "list y",
        "list X",
        "classes",
        "array classes",
        "column y",
    ],
)
@pytest.mark.filterwarnings("ignore:A column-vector y was passed")
def test_rows_the_full_checks_convert_learn_the_same(call):
    est, X, y = _primed()
    twin = copy.deepcopy(est)
    for i in range(40, 60):
        Xi, yi, kw = call(X[i : i + 2], y[i : i + 2])
        m1 = est.partial_fit_margins(Xi, yi, **kw)
        m2 = _full_checks_only(twin, Xi, yi, **kw)
        np.testing.assert_array_equal(m1, m2)
    _assert_same_state(est, twin)


def test_other_classes_are_refused():
    est, X, y = _primed()
    for classes in ([0, 1, 2], [0, 2], ["a", "b"]):
        with pytest.raises(ValueError, match="not the same as on the first call"):
            est.partial_fit(X[:1], y[:1], classes=classes)


def test_set_params_between_rows():
    """A structural change is refused by name; a rule parameter takes effect at once."""
    est, X, y = _primed()
    est.set_params(gamma=0.5)
    with pytest.raises(ValueError, match="set_params changed gamma"):
        est.partial_fit(X[40:41], y[40:41])
    est.set_params(gamma=None, C=0.1)
    twin = copy.deepcopy(est)
    for i in range(40, 60):
        est.partial_fit(X[i : i + 1], y[i : i + 1])
        _full_checks_only(twin, X[i : i + 1], y[i : i + 1])
    _assert_same_state(est, twin)
    ref, _, _ = _primed()
    for i in range(40, 60):
        ref.partial_fit(X[i : i + 1], y[i : i + 1])
    assert not np.array_equal(ref.dual_coef_, est.dual_coef_)  # C = 0.1 applied


def test_a_fit_or_a_copy_starts_its_own_record():
    est, X, y = _primed()
    loaded = pickle.loads(pickle.dumps(est))
    copied = copy.deepcopy(est)
    for i in range(40, 80):
        est.partial_fit(X[i : i + 1], y[i : i + 1])
        loaded.partial_fit(X[i : i + 1], y[i : i + 1])
        copied.partial_fit(X[i : i + 1], y[i : i + 1])
    _assert_same_state(est, loaded)
    _assert_same_state(est, copied)
    assert loaded._row_memo[1] is loaded._engine  # (its own, made by its calls)
    # fit starts a new engine: the old record goes
    X3, y3 = _stream(labels=(0, 1, 2), seed=3)
    est.fit(X3[:30], y3[:30])
    assert "_row_memo" not in est.__dict__
    est.partial_fit(X3[30:31], y3[30:31])
    est.partial_fit(X3[31:32], y3[31:32])
    assert est._row_memo[1] is est._engine
    with pytest.raises(ValueError, match=r"labels \[5\] that are not in classes \[0, 1, 2\]"):
        est.partial_fit(X3[31:32], np.array([5]))


# ---------------------------------------------------------------------------------------
# prediction: a plain float64 X skips scikit-learn's validate_data (``_plain_X``)


def _predictions(est, X):
    out = [est.decision_function(X), est.predict(X)]
    if hasattr(est, "predict_proba"):
        out.append(est.predict_proba(X))
    return out


@pytest.mark.parametrize("labels", ["int", "three ints"])
@pytest.mark.parametrize("model", MODELS, ids=list(MODELS))
def test_plain_rows_predict_as_validated_rows(model, labels, monkeypatch):
    X, y = _stream(labels=LABELS[labels])
    est = MODELS[model]().fit(X[:80], y[:80])
    rows = [X[80:81], X[80:120], np.asfortranarray(X[80:120]), X[80:120:3]]
    fast = [_predictions(est, R) for R in rows]
    monkeypatch.setattr(base_input, "_plain_X", lambda est, X, reset=False: False)
    for R, got in zip(rows, fast, strict=True):
        for a, b in zip(got, _predictions(est, R), strict=True):
            np.testing.assert_array_equal(a, b)


def _count_validate_data(monkeypatch):
    """scikit-learn's ``validate_data`` as the estimators call it, counted: (a list that
    gets an entry per call, the real function)."""
    seen = []
    real = base_input.validate_data

    def counted(*args, **kw):
        seen.append(1)
        return real(*args, **kw)

    monkeypatch.setattr(base_input, "validate_data", counted)
    return seen, real


@pytest.mark.parametrize("model", MODELS, ids=list(MODELS))
def test_csr_rows_skip_scikit_learns_checks_and_learn_the_same(model, monkeypatch):
    """Later calls on scipy CSR rows of float64 (matrix or array) take them as
    ``validate_data`` would return them, without calling it; other CSR rows (float32, a
    wrong width) still go through it. Margins, predictions and the model: the same as
    through it, bit for bit."""
    import scipy.sparse as sp

    X, y = _stream()
    X[X < -0.5] = 0.0  # stored entries and gaps
    est = MODELS[model]().fit(sp.csr_matrix(X[:40]), y[:40])
    twin = copy.deepcopy(est)
    seen, real = _count_validate_data(monkeypatch)

    def checked(call, *args):  # the same call through scikit-learn's checks
        with monkeypatch.context() as m:
            m.setattr(base_input, "_plain_X", lambda est, X, reset=False: False)
            n = len(seen)
            out = call(*args)
            assert len(seen) > n
            return out

    rows = [sp.csr_matrix(X[i : i + 1]) for i in range(40, 80)]
    rows += [sp.csr_array(X[80:90]), sp.csr_matrix(X[90:120:3])]
    ys = [y[i : i + 1] for i in range(40, 80)] + [y[80:90], y[90:120:3]]
    wide = sp.csr_matrix(X[100:101])  # int64 indices
    wide.indices, wide.indptr = wide.indices.astype(np.int64), wide.indptr.astype(np.int64)
    cols = np.flatnonzero(X[101])  # unsorted, with a duplicate of cols[0] (summed)
    vals = X[101, cols]
    dup = sp.csr_matrix(
        (np.r_[vals[::-1], vals[0]], np.r_[cols[::-1], cols[0]], [0, cols.size + 1]),
        shape=(1, X.shape[1]),
    )
    assert not dup.has_canonical_format
    rows += [wide, dup]
    ys += [y[100:101], y[101:102]]
    for R in rows:  # what the skipped checks would give: R itself, no warning
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            kw = {"accept_sparse": "csr", "dtype": np.float64, "ensure_all_finite": False}
            assert real(est, R, reset=False, **kw) is R
    for R, yy in zip(rows, ys, strict=True):
        n = len(seen)
        got = est.partial_fit_margins(R, yy)
        assert len(seen) == n
        np.testing.assert_array_equal(got, checked(_full_checks_only, twin, R, yy))
        _assert_same_state(est, twin)
    n = len(seen)
    fast = _predictions(est, rows[-1])
    assert len(seen) == n
    for a, b in zip(fast, checked(_predictions, twin, rows[-1]), strict=True):
        np.testing.assert_array_equal(a, b)
    n = len(seen)
    est.partial_fit(sp.csr_matrix(X[:2], dtype=np.float32), y[:2])  # converted: checked
    assert len(seen) > n
    with pytest.raises(ValueError, match="features"):
        est.partial_fit(sp.csr_matrix(X[:2, :3]), y[:2])


@pytest.mark.parametrize("model", MODELS, ids=list(MODELS))
def test_first_calls_on_plain_arrays_skip_scikit_learns_checks_and_learn_the_same(
    model, monkeypatch
):
    """A ``fit`` or first ``partial_fit`` on a float64 ndarray or CSR X and a plain y
    records what ``validate_data(reset=True)`` would (the feature count; no names, also
    where a refit drops a DataFrame's) without calling it; the model is the same
    as through it, bit for bit. Anything else (float32, an empty X, NaN labels) is still
    checked by scikit-learn, with its errors."""
    import pandas as pd
    import scipy.sparse as sp

    X, y = _stream()
    seen, real = _count_validate_data(monkeypatch)
    cases = [X, np.asfortranarray(X), X[::2], sp.csr_matrix(X), sp.csr_array(X)]
    for R in cases:
        yy = y[: R.shape[0]]
        for first in ("fit", "partial_fit"):
            fast = MODELS[model]()
            if first == "fit":  # (a refit: the names recorded before go)
                fast.fit(pd.DataFrame(X, columns=list("abcd")), y)
                assert fast.feature_names_in_.tolist() == list("abcd")
            slow = copy.deepcopy(fast)
            n = len(seen)
            kw = {"classes": np.unique(y)} if first == "partial_fit" else {}
            getattr(fast, first)(R, yy, **kw)
            assert len(seen) == n
            with monkeypatch.context() as m:
                m.setattr(base_input, "_plain_X", lambda est, X, reset=False: False)
                getattr(slow, first)(R, yy, **kw)
            assert len(seen) > n
            assert fast.n_features_in_ == slow.n_features_in_ == 4
            assert not hasattr(fast, "feature_names_in_")
            assert not hasattr(slow, "feature_names_in_")
            _assert_same_state(fast, slow)
            for a, b in zip(_predictions(fast, X), _predictions(slow, X), strict=True):
                np.testing.assert_array_equal(a, b)
    n = len(seen)
    MODELS[model]().fit(X.astype(np.float32), y)  # converted: checked
    assert len(seen) > n
    for R, yy, match in [
        (np.zeros((0, 4)), y[:0], "0 sample"),
        (np.zeros((3, 0)), y[:3], "0 feature"),
        (X[:3], np.array([0.0, np.nan, 1.0]), "NaN"),
    ]:
        with pytest.raises(ValueError, match=match):
            MODELS[model]().fit(R, yy)


@pytest.mark.parametrize("indices", [np.int32, np.int64])
def test_one_pass_over_a_csr_matrix_finds_what_numpys_passes_find(indices):
    """``_csr_scan``, the one compiled call behind :func:`checked_values` for CSR X: row
    pointers in order, the least and largest column index, and max |x| (NaN over inf
    over any finite value) of the stored values only (``_check_csr`` alike), on random
    matrices."""
    import scipy.sparse as sp

    rng = np.random.default_rng(5)
    for _ in range(200):
        n, d = rng.integers(1, 6), rng.integers(1, 8)
        D = rng.normal(size=(n, d)) * 10.0 ** rng.integers(-300, 300)
        D[rng.random((n, d)) < 0.5] = 0.0
        for v in (np.nan, np.inf, -np.inf):
            if rng.random() < 0.2:
                D[rng.integers(n), rng.integers(d)] = v
        S = sp.csr_matrix(D)
        indptr, idx = S.indptr.astype(indices), S.indices.astype(indices)
        data = np.r_[S.data, np.nan]  # a value past the stored ones: not read
        if rng.random() < 0.2 and n > 1:
            indptr[1] = S.nnz + 1  # (row pointers that fall)
        ordered, lo, hi, big = base_input._csr_scan(indptr, idx, data[: S.nnz])
        assert ordered == bool(np.all(np.diff(indptr) >= 0))
        if S.nnz:
            assert (lo, hi) == (S.indices.min(), S.indices.max())
            want = np.abs(S.data)
            want = np.nan if np.isnan(want).any() else want.max()
            np.testing.assert_equal(big, want)
        else:
            assert big == 0.0
        if ordered:  # _check_csr's value: the same, from X.data's first nnz
            M = sp.csr_matrix((data[: S.nnz], idx, indptr), shape=(n, d))
            M.data = data  # (a value past the stored ones, as scipy lets one be set)
            np.testing.assert_equal(base_input._check_csr(M), big if S.nnz else None)


@pytest.mark.parametrize(
    ("X", "match"),
    [
        (np.zeros((0, 4)), "0 sample"),
        (np.zeros((1, 3)), "features"),
        (np.array([[0.0, np.nan, 1.0, 2.0]]), "NaN or infinity in row 0"),
        (np.array([[1e155, 1e155, 0.0, 0.0]]), "too large"),
        (np.zeros(4), "2D array"),
    ],
)
def test_prediction_refuses_what_validation_refuses(X, match):
    Xt, y = _stream()
    est = SCWClassifier(kernel="rbf", budget=30).fit(Xt, y)
    for method in (est.predict, est.decision_function, est.predict_proba):
        with pytest.raises(ValueError, match=match):
            method(X)


def test_prediction_keeps_scikit_learns_feature_name_checks():
    import pandas as pd

    X, y = _stream()
    named = pd.DataFrame(X, columns=list("abcd"))
    est = SCWClassifier(kernel="rbf", budget=30).fit(named, y)
    with pytest.warns(UserWarning, match="does not have valid feature names"):
        est.predict(X[:1])
    plain = SCWClassifier(kernel="rbf", budget=30).fit(X, y)
    with pytest.warns(UserWarning, match="fitted without feature names"):
        plain.predict(named.iloc[:1])
    np.testing.assert_array_equal(est.predict_proba(named), plain.predict_proba(X))


# ---------------------------------------------------------------------------------------
# cases a review found (session 17)


def _same_as_full_checks(est, calls):
    """Each call on ``est`` and on a twin that runs the full checks only: the same
    margins, or the same error; the same model after each."""
    twin = copy.deepcopy(est)
    for X, y, kw in calls:
        try:
            got = est.partial_fit_margins(X, y, **kw)
        except (ValueError, TypeError) as err:
            with pytest.raises(type(err)) as ref:
                _full_checks_only(twin, X, y, **kw)
            assert str(ref.value) == str(err)
        else:
            np.testing.assert_array_equal(got, _full_checks_only(twin, X, y, **kw))
        _assert_same_state(est, twin)


@pytest.mark.parametrize(
    "classes", [[0.5, 1.0], [0.5, 1.0, 2.0], np.array([1.0, np.inf], dtype=object)]
)
def test_float_labels_the_full_checks_refuse_stay_refused(classes):
    """classes= may declare a class that is not a whole number; y may not hold it."""
    X, _ = _stream()
    est = CWClassifier()
    est.partial_fit(X[:1], np.array([1.0]), classes=classes)
    est.partial_fit(X[1:2], np.array([1.0]))
    bad = [c for c in list(classes) if c != 1.0]
    labels = ([*bad, 1.0] * 6)[:6]
    calls = [(X[i : i + 1], np.array([v]), {}) for i, v in zip(range(2, 8), labels, strict=True)]
    _same_as_full_checks(est, calls)


def test_labels_of_another_dtype_than_the_classes_take_the_full_checks():
    """numpy compares an int class with a float label by promotion (2**53 + 1 ==
    2.0**53): the targets are the full checks' whatever that gives."""
    X, _ = _stream()
    P = 2**53
    est = SCWClassifier(covariance="diag")
    est.partial_fit(X[:1], np.array([float(P)]), classes=np.array([P, P + 1]))
    calls = [(X[i : i + 1], np.array([float(P + i % 2)]), {}) for i in range(1, 8)]
    _same_as_full_checks(est, calls)
    assert "_row_memo" not in est.__dict__


def test_a_bad_row_with_malformed_classes_gets_the_full_checks_error():
    est, X, y = _primed()
    nan_row = np.array([[np.nan, 0.0, 1.0, 2.0]])
    calls = [
        (nan_row, y[:1], {"classes": [1, None]}),
        (X[:1], y[:1], {"classes": [1, None]}),
        (X[:1], y[:1], {"classes": [[0, 1], [0]]}),
        (X[:1], y[:1], {"classes": [0, 1]}),
    ]
    _same_as_full_checks(est, calls)


def test_the_record_is_not_kept_beyond_its_engine():
    est, X, y = _primed()
    assert "_row_memo" not in pickle.loads(pickle.dumps(est)).__dict__
    assert "_row_memo" not in copy.deepcopy(est).__dict__
    est.fit(X[:30], y[:30])
    assert "_row_memo" not in est.__dict__


def test_the_dual_engine_refuses_rows_of_another_width():
    """Behind the estimator's checks (n_features_in_ deleted by hand): the compiled
    kernels read rows without bounds checks, so the engine checks the width itself."""
    X, y = _stream(d=5)
    est = SCWClassifier(kernel="rbf", budget=30).fit(X, y)
    del est.n_features_in_
    for method in (est.predict, est.decision_function, est.predict_proba):
        with pytest.raises(ValueError, match="X has 4 columns, the model 5"):
            method(X[:3, :4])


def test_a_set_params_during_the_full_checks_leaves_no_stale_record(monkeypatch):
    """Another thread's set_params while a call's full checks run (stood in for by a
    hook in them): the record must not pair the new parameters with the old rule."""
    est, X, y = _primed()
    twin = copy.deepcopy(est)
    real = base.validate_training

    def racing(*args, **kw):
        out = real(*args, **kw)
        est.set_params(C=0.01)  # after the checks read the parameters
        return out

    est.__dict__.pop("_row_memo")  # this call takes the full checks
    monkeypatch.setattr(base, "validate_training", racing)
    est.partial_fit(X[40:41], y[40:41])
    monkeypatch.setattr(base, "validate_training", real)
    twin.partial_fit(X[40:41], y[40:41])
    twin.set_params(C=0.01)
    for i in range(41, 80):
        np.testing.assert_array_equal(
            est.partial_fit_margins(X[i : i + 1], y[i : i + 1]),
            _full_checks_only(twin, X[i : i + 1], y[i : i + 1]),
        )
    _assert_same_state(est, twin)
    est.set_params(C=-5.0)
    with pytest.raises(ValueError, match="C=-5.0"):
        est.partial_fit(X[80:81], y[80:81])


def test_a_fit_during_the_full_checks_leaves_no_stale_record(monkeypatch):
    """Another thread's fit (new classes) while a call's full checks run: the call
    starts again on the new model, and no record pairs the new engine with the old
    classes (a label of the old classes only is refused as the full checks refuse it)."""
    est, X, y = _primed(labels=(3, 7))
    X3, y3 = _stream(labels=(3, 5), seed=4)
    real = base.validate_training
    calls = []

    def racing(*args, **kw):
        out = real(*args, **kw)
        if not calls:
            calls.append(1)
            est.fit(X3[:30], y3[:30])
        return out

    est.__dict__.pop("_row_memo")
    monkeypatch.setattr(base, "validate_training", racing)
    with pytest.raises(ValueError, match=r"labels \[7\] that are not in classes \[3, 5\]"):
        est.partial_fit(X[40:41], np.array([7]))
    monkeypatch.setattr(base, "validate_training", real)
    for i in range(41, 45):
        est.partial_fit(X3[i : i + 1], y3[i : i + 1])
    with pytest.raises(ValueError, match=r"labels \[7\] that are not in classes \[3, 5\]"):
        est.partial_fit(X[45:46], np.array([7]))


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
@pytest.mark.parametrize("a", [1.0, 1e-3, 7.5e5])
def test_the_one_row_value_check_never_passes_what_the_full_checks_refuse(a):
    """``row_passes`` (the one-pass check of a row's values) is a sufficient condition:
    where it passes, every value is finite and no row's a |x|^2 overflows (the full
    checks' two); around the overflow bound it may refuse rows the full checks pass
    (they then decide, and learn the row)."""
    rng = np.random.default_rng(3)
    limit = np.finfo(np.float64).max
    for scale in [1.0, 1e100, 1e150, 1e153, 1e154, 1e155, np.sqrt(limit / 4 / a)]:
        for _ in range(20):
            x = rng.normal(size=(1, 6)) * scale
            if rng.random() < 0.2:
                x[0, rng.integers(6)] = rng.choice([np.nan, np.inf, -np.inf])
            for c2 in (0.0, 0.3 * limit / a):  # (the intercept's c^2: none, or large)
                ok = base_input.row_passes(x[0], a, c2)
                big = base_input._max_abs(x)
                first = base_input._first_overflowing_row(x, a, big, c2)
                full = base_input._finite(big) and first < 0
                assert full or not ok, (x, a, c2)
                if full and a * (float(np.sum(x * x)) + c2) <= 0.25 * limit:
                    assert ok, (x, a, c2)
