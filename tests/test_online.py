"""The online protocol: predict each example with the current model, then learn."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.linear_model import SGDClassifier

from kernelcw import (
    AROWClassifier,
    CWClassifier,
    OnlineResult,
    PAClassifier,
    SCWClassifier,
    run_online,
)


def _data(seed=0, n=250, d=6, classes=2):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    W = rng.normal(size=(classes, d))
    s = X @ W.T + 0.3 * rng.normal(size=(n, classes))
    y = (s[:, 0] > 0).astype(int) if classes == 2 else np.argmax(s, axis=1)
    return X, y


def _slow_protocol(est, X, y, classes):
    """Predict with the model as it is, then partial_fit one example."""
    preds = []
    for i in range(len(y)):
        if hasattr(est, "classes_"):
            preds.append(est.predict(X[i : i + 1])[0])
        else:  # the empty model scores every class 0
            preds.append(classes[1] if len(classes) == 2 else classes[0])
        est.partial_fit(X[i : i + 1], y[i : i + 1], classes=classes)
    return np.array(preds)


@pytest.mark.parametrize("classes", [2, 3])
@pytest.mark.parametrize("chunk", [1, 13, 1024])
def test_predictions_equal_the_slow_protocol(classes, chunk):
    X, y = _data(classes=classes)
    labels = np.unique(y)
    res = run_online(CWClassifier(eta=0.8), X, y, chunk_size=chunk)
    assert isinstance(res, OnlineResult)
    slow = _slow_protocol(CWClassifier(eta=0.8), X, y, labels)
    np.testing.assert_array_equal(res.predictions, slow)
    np.testing.assert_array_equal(res.cumulative_mistakes, np.cumsum(slow != y))
    assert res.mistake_rate == pytest.approx(np.mean(slow != y))
    assert res.seconds >= 0


def test_binary_mistakes_match_estimator_counter_and_updates_reported():
    X, y = _data(1)
    res = run_online(AROWClassifier(), X, y)
    assert res.n_mistakes == res.estimator.n_mistakes_
    assert res.n_updates == res.estimator.n_updates_ > 0


def test_fresh_clone_by_default_and_continue_on_request():
    X, y = _data(2)
    est = PAClassifier().fit(X, y)
    before = est.mean_.copy()
    run_online(est, X, y)
    np.testing.assert_array_equal(est.mean_, before)  # untouched: a clone learned
    updates_before = est.n_updates_
    res = run_online(est, X, y, fresh=False)
    assert res.estimator is est and not np.array_equal(est.mean_, before)
    assert res.n_updates == est.n_updates_ - updates_before


def test_any_sklearn_partial_fit_estimator_runs_through_the_same_protocol():
    X, y = _data(3)
    sgd = SGDClassifier(
        loss="hinge",
        penalty=None,
        learning_rate="pa1",
        eta0=1.0,
        fit_intercept=False,
        shuffle=False,
    )
    res_sgd = run_online(sgd, X, y)
    res_pa = run_online(PAClassifier(variant=1, C=1.0), X, y)
    # the same model after each row; before the first, each predicts as its own zero
    # model would: SGD's scores > 0 the first class, kernelcw's sign(0) = +1 the second
    np.testing.assert_array_equal(res_sgd.predictions[1:], res_pa.predictions[1:])
    assert (res_sgd.predictions[0], res_pa.predictions[0]) == (0, 1)
    assert res_sgd.n_updates is None


def test_sparse_input_and_progress_bar(capsys):
    X, y = _data(4)
    res = run_online(CWClassifier(covariance="diag"), sp.csr_matrix(X), y, progress=True)
    ref = run_online(CWClassifier(covariance="diag"), X, y)
    np.testing.assert_array_equal(res.predictions, ref.predictions)
    assert "250" in capsys.readouterr().err  # tqdm drew its bar on stderr


def test_length_mismatch_is_an_error():
    X, y = _data(5)
    with pytest.raises(ValueError, match="rows"):
        run_online(CWClassifier(), X, y[:-1])


@pytest.mark.parametrize("bad", [0, -3, 2.7, 2.0, True, "8", None])
def test_chunk_size_must_be_an_integer_of_at_least_one(bad):
    """chunk_size is checked like the estimators' integer parameters: anything but an
    integer >= 1 (a bool is not one) is a ValueError naming it, not coerced; a numpy
    integer is an integer."""
    X, y = _data(5, n=20)
    with pytest.raises(ValueError, match=rf"chunk_size={bad!r} must be an integer >= 1"):
        run_online(CWClassifier(), X, y, chunk_size=bad)
    res = run_online(CWClassifier(), X, y, chunk_size=np.int64(7))
    assert res.n_mistakes == run_online(CWClassifier(), X, y, chunk_size=1).n_mistakes


def test_run_online_needs_an_online_learner():
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X = np.zeros((4, 2))
    y = np.array([0, 1, 0, 1])
    with pytest.raises(TypeError, match=r"Pipeline has none \(a Pipeline, for one"):
        run_online(make_pipeline(StandardScaler(), AROWClassifier()), X, y)


def test_run_online_takes_what_the_estimators_take():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(50, 3))
    y = (X[:, 0] > 0).astype(int)
    ref = run_online(AROWClassifier(), X, y)
    for given in (X.tolist(), sp.coo_matrix(X), sp.csc_matrix(X)):
        res = run_online(AROWClassifier(), given, y)
        assert res.n_mistakes == ref.n_mistakes
        np.testing.assert_allclose(res.estimator.mean_, ref.estimator.mean_, rtol=1e-12)


def test_a_column_of_labels_is_taken_as_fit_takes_it():
    """y of shape (n, 1): scikit-learn's warning and the run of y (n,), not n x n mistakes
    (the column compared with the (n,) predictions broadcast to a matrix)."""
    from sklearn.exceptions import DataConversionWarning

    X, y = _data(3, n=60)
    ref = run_online(SCWClassifier(), X, y)
    with pytest.warns(DataConversionWarning):
        res = run_online(SCWClassifier(), X, y.reshape(-1, 1))
    assert res.n_mistakes == ref.n_mistakes <= 60
    np.testing.assert_array_equal(res.cumulative_mistakes, ref.cumulative_mistakes)
    with pytest.raises(ValueError, match="1d array"):
        run_online(SCWClassifier(), X[:4], y[:4].reshape(2, 2))


def test_empty_and_unsortable_label_streams_are_errors():
    X, y = _data(3, n=10)
    with pytest.raises(ValueError, match="at least one example"):
        run_online(SCWClassifier(), X[:0], y[:0])
    mixed = np.array([1, "a", 2, "b"], dtype=object)
    with pytest.raises(ValueError, match=r"y mixes label types \(int, str\)"):
        run_online(SCWClassifier(), X[:4], mixed)


def _state(est):
    return (est.n_updates_, est.n_mistakes_, est.decision_function(_data(9, n=20)[0]).tolist())


@pytest.mark.parametrize(
    "make",
    [lambda: AROWClassifier(), lambda: SCWClassifier(kernel="rbf", budget=30)],
    ids=["primal", "rbf-budget"],
)
def test_a_failed_run_on_a_fitted_model_leaves_it_as_before(make, monkeypatch):
    """fresh=False continues the caller's estimator: a run that fails after some chunks
    were learnt (a bad row in the third chunk, or a Ctrl-C) puts it back as it was, and
    the error names the row in the stream, not in its chunk."""
    X, y = _data(5, n=300)
    est = make().fit(X[:40], y[:40])
    before = _state(est)
    bad = X.copy()
    bad[250, 1] = np.nan
    with pytest.raises(ValueError, match="NaN or infinity in row 250 "):
        run_online(est, bad, y, fresh=False, chunk_size=100)
    assert _state(est) == before
    bad = X.copy()
    bad[250] = 1e200
    with pytest.raises(ValueError, match="row 250 of X is too large"):
        run_online(est, bad, y, fresh=False, chunk_size=100)
    assert _state(est) == before
    calls = []
    learn = type(est).partial_fit_margins

    def interrupted(self, *args, **kw):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return learn(self, *args, **kw)

    monkeypatch.setattr(type(est), "partial_fit_margins", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run_online(est, X, y, fresh=False, chunk_size=100)
    assert len(calls) == 3 and _state(est) == before
    monkeypatch.undo()
    res = run_online(est, X, y, fresh=False, chunk_size=100)  # (and it goes on)
    assert res.estimator is est and est.n_updates_ > before[0]


def test_labels_are_checked_as_y_not_as_classes():
    """run_online finds the classes in y: a bad y is reported as y's, as fit reports it,
    whatever the chunk it falls in."""
    X, y = _data(6, n=1500)
    yf = y.astype(float)
    yf[1100] = np.nan
    with pytest.raises(ValueError, match="Input y contains NaN"):
        run_online(AROWClassifier(), X, yf)
    with pytest.raises(ValueError, match=r"y contains only one class \(0\)"):
        run_online(AROWClassifier(), X, np.zeros(1500, dtype=int))
    yo = y.astype(object)
    yo[1100] = None
    with pytest.raises(ValueError, match=r"y mixes label types \(NoneType, int\)"):
        run_online(AROWClassifier(), X, yo)


def test_the_stream_is_checked_a_piece_at_a_time_and_named_by_its_row():
    """check_stream converts and checks X a piece at a time (no float64 copy of a
    float32 or int stream), naming rows by their place in the whole stream."""
    from kernelcw.estimators._input import check_stream

    X, y = _data(7, n=50)
    est = SCWClassifier(a=1.0)
    X32 = X.astype(np.float32)
    check_stream(X32, y, est, rows=7)
    X32[20, 3] = np.inf
    with pytest.raises(ValueError, match=r"NaN or infinity in row 20 "):
        check_stream(X32, y, est, rows=7)
    with pytest.raises(ValueError, match=r"NaN or infinity in row 20 "):
        check_stream(sp.csr_matrix(X32), y, est, rows=7)
    big = X.copy()
    big[33] = 1e200
    with pytest.raises(ValueError, match="row 33 of X is too large"):
        check_stream(big, y, est, rows=7)


def test_a_label_outside_the_classes_is_named_by_its_row_before_learning():
    """y[2500] = 7 with classes=[0, 1]: refused when its chunk reached partial_fit, after
    the chunks before it were learnt, naming no row."""
    X, y = _data(7, n=3000)
    y = y.copy()
    y[2500] = 7
    est = SCWClassifier()
    with pytest.raises(ValueError, match=r"label 7 at row 2500, not one of the classes \[0, 1\]"):
        run_online(est, X, y, classes=[0, 1])
    assert not hasattr(est, "classes_")  # (nothing learnt)
