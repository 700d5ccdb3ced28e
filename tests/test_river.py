"""kernelcw.river: river's own estimator checks, progressive validation, and the
adapter against the plain estimator on the zero-padded matrix (the reference)."""

from __future__ import annotations

import copy
import decimal
import pickle
import re
import socket
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from kernelcw.budget import PROJECT_JITTER

river = pytest.importorskip("river")
pd = pytest.importorskip("pandas")

from river import datasets, evaluate, linear_model, metrics, preprocessing  # noqa: E402
from river.checks import check_estimator  # noqa: E402

from kernelcw import (  # noqa: E402
    AROWClassifier,
    CWClassifier,
    PAClassifier,
    PerceptronClassifier,
    SCWClassifier,
    SOPClassifier,
)
from kernelcw.grow import add_models, mirror, widen  # noqa: E402
from kernelcw.river import Classifier  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

#: One learner per engine form: primal full, primal diagonal (and its exact method),
#: dual (Cholesky panels), dual explicit nu/Pi, dual budgeted (queue, projection,
#: batch-pruned).
FORMS = {
    "primal_full": lambda: SCWClassifier(),
    "primal_diag": lambda: CWClassifier(covariance="diag"),
    # the "exact" step's scratch: the stream's, grown with the rows' width
    "primal_diag_exact": lambda: CWClassifier(covariance="diag", diag_method="exact"),
    "dual_panels": lambda: SCWClassifier(kernel="rbf", gamma=0.3),
    "dual_explicit": lambda: PAClassifier(kernel="poly", gamma=0.3, solver="explicit"),
    "dual_oldest": lambda: AROWClassifier(
        kernel="rbf", gamma=0.3, budget=15, budget_policy="oldest"
    ),
    "dual_project": lambda: AROWClassifier(kernel="rbf", gamma=0.3, budget=15),
    "dual_pruned": lambda: SCWClassifier(kernel="rbf", gamma=0.3, budget=15, budget_batch=4),
    "dual_first_order": lambda: PerceptronClassifier(kernel="rbf", gamma=0.3, budget=15),
    "dual_sop": lambda: SOPClassifier(kernel="laplacian", gamma=0.3),
}
#: Where the adapter is bit for bit the estimator on the padded matrix (elementwise
#: arithmetic); elsewhere BLAS and the kernels sum over the wider rows in another
#: order, which moves the last bits (relative 1e-13).
EXACT_WIDEN = {"primal_diag", "primal_diag_exact"}


def _stream(n=120, d=6, seed=0, n_classes=2):
    """Rows whose features appear over time: feature j is 0 before row 15 j."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    for j in range(d):
        X[: 15 * j, j] = 0.0
    score = X[:, 0] - X[:, 2] + 0.8 * X[:, 4] + 0.3 * rng.normal(size=n)
    if n_classes == 2:
        y = (score > 0).astype(int)
    else:
        y = np.digitize(score, np.quantile(score, np.linspace(0, 1, n_classes + 1)[1:-1]))
    dicts = [{f"f{j}": float(v) for j, v in enumerate(r) if v != 0.0} for r in X]
    return X, y, dicts


def _padded(model, dicts):
    """The dicts as the adapter's columns: the reference's input."""
    M = np.zeros((len(dicts), model.estimator_.n_features_in_))
    for i, x in enumerate(dicts):
        for k, v in x.items():
            M[i, model.feature_names.index(k)] = v
    return M


# ------------------------------------------------------------------ river's checks


@pytest.mark.shipped_defaults
@pytest.mark.parametrize(
    "params",
    [
        {"estimator": CWClassifier(covariance="diag")},
        {"estimator": SCWClassifier(kernel="rbf", gamma=0.1, budget=10)},
        {"estimator": AROWClassifier(), "classes": (False, True)},
    ],
    ids=["primal_diag", "rbf_budget", "declared_binary"],
)
def test_passes_rivers_check_estimator(params):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # CW's variance floor on Phishing
        check_estimator(Classifier(**params))


def test_unit_test_params_build_and_unbudgeted_kernels_skip_only_the_memory_check():
    for params in Classifier._unit_test_params():
        assert isinstance(Classifier(**params), Classifier)
    assert Classifier(SCWClassifier(kernel="rbf"))._unit_test_skips() == {
        "check_bounded_memory_growth"
    }
    assert Classifier(SCWClassifier(kernel="rbf", budget=5))._unit_test_skips() == set()


def test_progressive_val_score_on_bundled_phishing_without_network(monkeypatch):
    def no_network(*args, **kwargs):
        raise AssertionError("the test tried to use the network")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    model = preprocessing.StandardScaler() | Classifier(AROWClassifier(covariance="diag"))
    metric = evaluate.progressive_val_score(datasets.Phishing(), model, metrics.Accuracy())
    assert metric.get() > 0.85  # river's PAClassifier: 0.84, LogisticRegression: 0.89
    clf = model["Classifier"]
    assert sorted(clf.labels) == [False, True]
    assert clf.estimator_.n_mistakes_ > 0


# ------------------------------------------------------------------ against the estimator


@pytest.mark.parametrize("intercept", [False, True])
@pytest.mark.parametrize("form", list(FORMS))
def test_growing_features_equal_the_estimator_on_the_padded_matrix(form, intercept):
    """With an intercept, a primal model's new features go in before its constant
    column, and a dual model's kernel keeps c^2."""
    _, y, dicts = _stream()
    labels = y.tolist()
    make = lambda: FORMS[form]().set_params(fit_intercept=intercept, intercept_scaling=1.5)  # noqa: E731
    model = Classifier(make(), classes=(0, 1))
    for x, v in zip(dicts, labels, strict=True):
        model.learn_one(x, v)
    assert model.feature_names == [f"f{j}" for j in range(6)]
    M = _padded(model, dicts)
    ref = make().partial_fit(M, y, classes=[0, 1])
    if intercept:
        assert np.any(model.estimator_.intercept_ != 0.0)
        np.testing.assert_allclose(model.estimator_.intercept_, ref.intercept_, rtol=1e-6)
    got, want = model.estimator_.decision_function(M), ref.decision_function(M)
    # one row at a time against one block: the kernel values differ in their last bits (a
    # small block's distances come from the differences, a large one's from the BLAS
    # expansion), which "project" (a jittered Gram of condition ~1e6) amplifies
    tol = 1e-6 if form == "dual_project" else 1e-10
    if form in EXACT_WIDEN:
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol * 1e-2)
    assert model.estimator_.n_mistakes_ == ref.n_mistakes_
    proba = pd.DataFrame([model.predict_proba_one(x) for x in dicts])
    np.testing.assert_allclose(proba[[0, 1]].to_numpy(), ref.predict_proba(M), atol=tol)
    assert [model.predict_one(x) for x in dicts] == ref.predict(M).tolist()


def test_names_that_fit_in_the_spare_width_are_columns_too():
    """The width grows by half: later names take the spare (always-zero) columns."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(100, 14))
    for j in range(10, 14):
        X[: 20 * (j - 9), j] = 0.0
    y = (X[:, 0] + X[:, 12] > 0).astype(int)
    dicts = [{f"f{j}": float(v) for j, v in enumerate(r) if v != 0.0} for r in X]
    model = Classifier(CWClassifier(covariance="diag"), classes=(0, 1))
    for x, v in zip(dicts, y.tolist(), strict=True):
        model.learn_one(x, v)
    assert len(model.feature_names) == 14 and model.estimator_.n_features_in_ == 15
    M = _padded(model, dicts)
    ref = CWClassifier(covariance="diag").partial_fit(M, y, classes=[0, 1])
    np.testing.assert_array_equal(model.estimator_.decision_function(M), ref.decision_function(M))


def test_declared_multiclass_equals_partial_fit_with_classes():
    _, y, dicts = _stream(n_classes=3)
    model = Classifier(CWClassifier(covariance="diag"), classes=(2, 0, 1))
    model.learn_many(pd.DataFrame(dicts[:50]).fillna(0.0), pd.Series(y[:50]))
    for x, v in zip(dicts[50:], y[50:].tolist(), strict=True):
        model.learn_one(x, v)
    M = _padded(model, dicts)
    ref = CWClassifier(covariance="diag").partial_fit(M, y, classes=[0, 1, 2])
    np.testing.assert_array_equal(model.estimator_.decision_function(M), ref.decision_function(M))
    np.testing.assert_array_equal(model.estimator_.n_updates_, ref.n_updates_)


def test_discovered_binary_labels_equal_declared_ones():
    """The rows of the first label are kept and learnt when the second one appears."""
    _, y, dicts = _stream()
    labels = ["no" if v == 0 else "yes" for v in y]
    labels[:4] = ["no"] * 4  # the stream starts with rows of one label
    make = lambda: AROWClassifier(covariance="diag")  # noqa: E731
    found, declared = Classifier(make()), Classifier(make(), ("no", "yes"))
    for x, v in zip(dicts, labels, strict=True):
        for m in (found, declared):
            m.learn_one(x, v)
    M = _padded(found, dicts)
    assert found.labels == ["no", "yes"]
    np.testing.assert_array_equal(
        found.estimator_.decision_function(M), declared.estimator_.decision_function(M)
    )


def test_a_third_label_keeps_both_binary_models():
    """At the third label the binary model and its mirror become the first two of
    three one-vs-rest models (which learn the new row as a negative); the new label's
    model starts at the prior."""
    _, y, dicts = _stream(n=80)
    model = Classifier(SCWClassifier(kernel="rbf", gamma=0.3, budget=20))
    for x, v in zip(dicts, y.tolist(), strict=True):
        model.learn_one(x, v)
    new = {"f0": 0.5, "f3": -1.0}
    row = _padded(model, [new])
    as_0, as_1 = (copy.deepcopy(model.estimator_.engine_) for _ in range(2))
    as_0.learn(row, np.array([[-1.0]]))  # class 1's model: the row is a negative
    as_1.learn(row, np.array([[1.0]]))  # class 0's model: the binary model's positive
    model.learn_one(new, "new")
    M = _padded(model, dicts)
    after = model.estimator_.decision_function(M)
    np.testing.assert_array_equal(after[:, 1], as_0.decision(M)[:, 0])
    np.testing.assert_array_equal(after[:, 0], -as_1.decision(M)[:, 0])
    assert model.labels == [y[0], 1 - y[0], "new"]  # in the order they appeared
    assert set(model.predict_proba_one(dicts[0])) == {0, 1, "new"}
    updates = model.estimator_.n_updates_
    assert updates.shape == (3,) and updates[0] == updates[1] and updates[2] == 1
    fresh = SCWClassifier(kernel="rbf", gamma=0.3, budget=20).partial_fit(row, [1], classes=[0, 1])
    np.testing.assert_allclose(after[:, 2], fresh.decision_function(M), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("form", ["primal_full", "primal_diag", "dual_panels", "dual_pruned"])
def test_learn_many_equals_learn_one_in_order(form):
    _, y, dicts = _stream()
    one, many = Classifier(FORMS[form]()), Classifier(FORMS[form]())
    for x, v in zip(dicts, y.tolist(), strict=True):
        one.learn_one(x, v)
    for lo in range(0, len(dicts), 40):
        frame = pd.DataFrame(dicts[lo : lo + 40]).fillna(0.0)
        many.learn_many(frame, pd.Series(y[lo : lo + 40]))
    M = _padded(one, dicts)
    order = [many.feature_names.index(k) for k in one.feature_names]
    Mm = np.zeros_like(M)
    Mm[:, order] = M[:, : len(order)]
    np.testing.assert_allclose(
        one.estimator_.decision_function(M),
        many.estimator_.decision_function(Mm),
        rtol=1e-9,
        atol=1e-12,
    )
    frame = pd.DataFrame(dicts).fillna(0.0)
    assert many.predict_many(frame).tolist() == [many.predict_one(x) for x in dicts]
    P = many.predict_proba_many(frame)
    np.testing.assert_allclose(P.to_numpy(), pd.DataFrame(map(many.predict_proba_one, dicts)))


def test_fast_path_ignores_the_order_of_a_dicts_keys():
    """A binary diagonal model learns each dict's non-zeros in column order (the
    order of the engine's dense walk), whatever order the dict lists them in."""
    _, y, dicts = _stream()
    rng = np.random.default_rng(3)
    shuffled = [dict(sorted(x.items(), key=lambda _: rng.random())) for x in dicts]
    plain, mixed = (Classifier(CWClassifier(covariance="diag"), (0, 1)) for _ in range(2))
    for x, xs, v in zip(dicts, shuffled, y.tolist(), strict=True):
        assert plain.predict_proba_one(x) == mixed.predict_proba_one(xs)
        plain.learn_one(x, v)
        mixed.learn_one(xs, v)
    assert plain._fast is not None  # the fast path ran
    np.testing.assert_array_equal(plain.estimator_.mean_, mixed.estimator_.mean_)
    np.testing.assert_array_equal(plain.estimator_.covariance_, mixed.estimator_.covariance_)


@pytest.mark.parametrize("form", ["primal_full", "primal_diag", "dual_project", "dual_panels"])
def test_pickle_mid_stream_continues_exactly(form):
    _, y, dicts = _stream()
    model = Classifier(FORMS[form]())
    pairs = list(zip(dicts, y.tolist(), strict=True))
    for x, v in pairs[:60]:
        model.learn_one(x, v)
    copy = pickle.loads(pickle.dumps(model))
    for x, v in pairs[60:]:
        assert model.predict_proba_one(x) == copy.predict_proba_one(x)
        model.learn_one(x, v)
        copy.learn_one(x, v)
    M = _padded(model, dicts)
    np.testing.assert_array_equal(
        model.estimator_.decision_function(M), copy.estimator_.decision_function(M)
    )


# ------------------------------------------------------------------ engine growth


def _fit(make, X, y):
    return make().partial_fit(X, y, classes=[0, 1])


@pytest.mark.parametrize("form", list(FORMS))
def test_mirror_is_learning_the_flipped_labels(form):
    X, y, _ = _stream(n=80)
    original = _fit(FORMS[form], X, y).engine_
    state = mirror(original).state_dict()
    want = {0: _fit(FORMS[form], X, 1 - y).engine_.state_dict(), 1: original.state_dict()}
    for i, sub in want.items():
        for k, v in sub.items():
            engine_wide = (
                "n_models",
                "factor_only",
                "nu_pi_models",
                "kernel_jitter",
                "floors_drift",
            )
            if k in engine_wide:
                assert np.array_equal(state[k], v) or k == "n_models", k
                continue
            if k.startswith("store."):  # shared by the models
                got = state[k]
            elif k.startswith("model0."):
                got = state[k.replace("model0.", f"model{i}.")]
            else:  # primal arrays, stacked over the models
                got = state[k][i : i + 1]
            np.testing.assert_array_equal(got, v, err_msg=f"model {i}: {k}")


@pytest.mark.parametrize("form", ["primal_full", "primal_diag", "dual_project"])
def test_added_models_are_the_prior_and_widen_refuses_to_shrink(form):
    X, y, _ = _stream(n=60)
    est = _fit(FORMS[form], X, y)
    eng = add_models(est.engine_, 2)
    assert eng.n_models == 3
    F, V = eng.decision(X), eng.margin_variance(X)
    np.testing.assert_array_equal(F[:, 1:], 0.0)
    # (a budgeted "project" model's kernel is jittered: k(x, x) = 1 + PROJECT_JITTER)
    kappa = (X * X).sum(axis=1) if form != "dual_project" else np.ones(len(X))
    if form == "dual_project" and est.engine_.spec.budget is not None:
        kappa = kappa * (1.0 + PROJECT_JITTER)
    np.testing.assert_allclose(V[:, 1:], est.a * kappa[:, None] * np.ones((1, 2)), rtol=1e-12)
    with pytest.raises(ValueError, match="below the current"):
        widen(est.engine_, 2)
    for n_new in (0, -1, 1.5):  # (0 did nothing, -1 failed in numpy or the state check)
        with pytest.raises(ValueError, match=r"n_new=.* must be an integer >= 1"):
            add_models(est.engine_, n_new)


# ------------------------------------------------------------------ errors and import


@pytest.mark.parametrize("form", ["primal_full", "primal_diag"])  # diag: the fast path
def test_bad_values_are_named_and_leave_the_model_unchanged(form):
    _, y, dicts = _stream(n=30)
    model = Classifier(FORMS[form](), classes=(0, 1))
    for x, v in zip(dicts, y.tolist(), strict=True):
        model.learn_one(x, v)
    before = pickle.dumps(model)
    with pytest.raises(TypeError, match="feature 'colour' is 'red'"):
        model.learn_one({"f0": 1.0, "colour": "red"}, 1)
    with pytest.raises(ValueError, match=re.escape("feature 'f1' is nan")):
        model.learn_one({"f0": 1.0, "f1": float("nan")}, 1)
    with pytest.raises(ValueError, match="feature 'f1' is None"):
        model.learn_one({"f0": 1.0, "f1": None}, 1)
    with pytest.raises(ValueError, match="too large"):
        model.learn_one({"f0": 1e200}, 1)
    with pytest.raises(ValueError, match="label 7 is not one of classes"):
        model.learn_one({"f0": 1.0}, 7)
    with pytest.raises(ValueError, match="not in classes"):
        model.learn_many(pd.DataFrame([{"f0": 1.0}] * 2), pd.Series([0, 7]))
    with pytest.raises(ValueError, match="row 1, column 'f2' is nan"):
        model.learn_many(pd.DataFrame({"f2": [1.0, np.nan]}), pd.Series([0, 1]))
    assert pickle.dumps(model) == before


@pytest.mark.parametrize("form", ["primal_diag", "primal_full", "dual_panels"])
def test_repeated_column_names_are_refused_before_anything_changes(form):
    """A frame that names a column twice is a ValueError naming the repeats, from every
    method that takes frames, on an adapter that keeps rows of one label and on a
    started one, which stay as they were (the repeats of a new name took a column each
    while the model widened by one: a diagonal model's walk wrote past its state)."""
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(rng.normal(size=(5, 5)), columns=["b", "a", "a", "c", "c"])
    labels = pd.Series([True, False, True, False, True])
    waiting, started = Classifier(FORMS[form]()), Classifier(FORMS[form]())
    waiting.learn_one({"b": 1.0}, True)
    started.learn_many(pd.DataFrame({"b": [1.0, -1.0]}), pd.Series([True, False]))
    for model in (waiting, started):
        before = pickle.dumps(model)
        calls = [
            lambda m=model: m.learn_many(frame, labels),
            lambda m=model: m.predict_many(frame),
            lambda m=model: m.predict_proba_many(frame),
        ]
        for call in calls:
            with pytest.raises(ValueError, match=r"names 'a', 'c' more than once"):
                call()
        assert pickle.dumps(model) == before
    started.learn_many(frame.iloc[:, :2], labels)  # without the repeats: learnt
    assert started.feature_names == ["b", "a"]


@pytest.mark.parametrize("intercept", [False, True])
@pytest.mark.parametrize("form", list(FORMS))
def test_predicting_changes_nothing_and_unseen_names_count_as_registered(form, intercept):
    """river's convention: predicting does not change the model. A name first seen at
    prediction time is not added, and the predictions are those of a model that has it
    registered but never learnt from it (0 in every row: mean 0 and the prior variance
    a there, a 0 coordinate of every support vector): a linear mean ignores it, a
    kernel's mean and every variance do not. The first unseen name falls in the
    model's spare column, the second past it."""
    _, y, dicts = _stream(n=80, d=5)
    make = lambda: FORMS[form]().set_params(fit_intercept=intercept)  # noqa: E731
    model, registered = (Classifier(make(), classes=(0, 1)) for _ in range(2))
    for i, (x, v) in enumerate(zip(dicts, y.tolist(), strict=True)):
        model.learn_one(x, v)
        registered.learn_one({**x, "u1": 0.0, "u2": 0.0} if i == 0 else x, v)
    assert len(model.feature_names) == 5 and model.estimator_.n_features_in_ == 6
    model.predict_proba_one(dicts[0])  # a dual form caches nu on its first prediction
    names, before = model.feature_names, pickle.dumps(model)
    state = model.estimator_.engine_.state_dict()
    probes = [{**x, "u1": 0.8, "u2": -1.5} for x in dicts[::7]] + [{"u2": 2.0}]
    frame = pd.DataFrame(probes).fillna(0.0)
    tol = 1e-6 if form == "dual_project" else 1e-9  # see the padded-matrix test above
    got = pd.DataFrame([model.predict_proba_one(x) for x in probes])
    want = pd.DataFrame([registered.predict_proba_one(x) for x in probes])
    np.testing.assert_allclose(got.to_numpy(), want.to_numpy(), rtol=tol, atol=tol)
    got, want = model.predict_proba_many(frame), registered.predict_proba_many(frame)
    np.testing.assert_allclose(got.to_numpy(), want.to_numpy(), rtol=tol, atol=tol)
    assert [model.predict_one(x) for x in probes] == [registered.predict_one(x) for x in probes]
    assert model.predict_many(frame).tolist() == registered.predict_many(frame).tolist()
    if form.startswith("primal"):  # the mean: the rows without the unseen names
        known = [{k: v for k, v in x.items() if k in names} for x in probes]
        np.testing.assert_allclose(
            model.estimator_.decision_function(_padded(model, known)),
            registered.estimator_.decision_function(_padded(registered, probes)),
            rtol=1e-12,
        )
    assert model.feature_names == names and pickle.dumps(model) == before
    after = model.estimator_.engine_.state_dict()
    assert after.keys() == state.keys()
    for k, v in after.items():
        np.testing.assert_array_equal(v, state[k], err_msg=k)


def test_predicting_before_the_model_starts_adds_no_name():
    model = Classifier()
    model.learn_one({"a": 1.0}, "x")  # one label: the model waits for a second
    before = pickle.dumps(model)
    assert model.predict_one({"b": 1.0}) == "x"
    assert model.predict_proba_many(pd.DataFrame({"c": [1.0]})).to_numpy().tolist() == [[1.0]]
    assert model.feature_names == ["a"] and pickle.dumps(model) == before


@pytest.mark.parametrize("form", ["primal_full", "primal_diag"])  # diag: the fast path
def test_text_is_refused_even_where_it_reads_as_a_number(form):
    """'3.5' as str, numpy's str_ or bytes is refused as 'red' is, though numpy reads
    it as 3.5: from dicts on the fast path (known names) and the general one (a new
    name), and from frames (object and string columns), learning and predicting; the
    adapter is as it was."""
    _, y, dicts = _stream(n=30)
    model = Classifier(FORMS[form](), classes=(0, 1))
    for x, v in zip(dicts, y.tolist(), strict=True):
        model.learn_one(x, v)
    before = pickle.dumps(model)
    for text in ("3.5", np.str_("3.5"), b"3.5"):
        for x, name in [({"f0": text}, "f0"), ({"f0": 1.0, "new": text}, "new")]:
            want = re.escape(f"feature '{name}' is {text!r}: kernelcw learns from numbers only")
            for call in (
                model.predict_one,
                model.predict_proba_one,
                lambda x: model.learn_one(x, 1),
            ):
                with pytest.raises(TypeError, match=want):
                    call(x)
        frames = [
            (pd.DataFrame({"f0": [1.0, text]}), f"row 1, column 'f0' is {text!r}"),
            (pd.DataFrame({"f0": [1.0, 2.0], "f1": ["2", "3.5"]}), "row 0, column 'f1' is '2'"),
        ]
        for frame, where in frames:
            want = re.escape(f"{where}: kernelcw learns from numbers only")
            calls = (
                model.predict_many,
                model.predict_proba_many,
                lambda X: model.learn_many(X, [0, 1]),
            )
            for call in calls:
                with pytest.raises(TypeError, match=want):
                    call(frame)
    assert pickle.dumps(model) == before
    fresh = Classifier()
    with pytest.raises(TypeError, match="numbers only"):
        fresh.learn_one({"a": "3.5"}, True)
    assert fresh.feature_names == [] and fresh.labels == []


def test_predictions_before_learning():
    assert Classifier().predict_proba_one({"a": 1.0}) == {}
    assert Classifier().predict_one({"a": 1.0}) is None
    assert Classifier(classes=("b", "a")).predict_proba_one({"a": 1.0}) == {"a": 0.5, "b": 0.5}
    one = Classifier()
    one.learn_one({"a": 1.0}, "x")
    assert one.predict_proba_one({"a": 2.0}) == {"x": 1.0}
    with pytest.raises(TypeError, match="not a kernelcw estimator"):
        Classifier(linear_model.PAClassifier()).learn_one({"a": 1.0}, 0)
    with pytest.raises(ValueError, match="precomputed"):
        Classifier(SCWClassifier(kernel="precomputed"), classes=(0, 1)).learn_one({"a": 1.0}, 0)


@pytest.mark.parametrize("form", ["primal_full", "primal_diag", "dual_project"])
def test_empty_dicts_are_zero_rows(form):
    est = FORMS[form]()
    ref = FORMS[form]().partial_fit(np.array([[0.0], [0.0], [2.0]]), ["x", "y", "y"])
    model = Classifier(est)
    for x, v in [({}, "x"), ({}, "y"), ({"a": 2.0}, "y")]:
        model.learn_one(x, v)
    M = np.array([[0.0], [1.0]])
    np.testing.assert_array_equal(model.estimator_.decision_function(M), ref.decision_function(M))
    model.learn_one({}, "z")  # a third label at a zero row
    assert model.labels == ["x", "y", "z"]
    assert set(model.predict_proba_one({})) == {"x", "y", "z"}


def test_import_kernelcw_does_not_import_river_and_its_absence_is_explained():
    code = (
        "import sys; import kernelcw; kernelcw.CWClassifier; "
        "assert 'river' not in sys.modules, 'kernelcw imported river'; "
        "sys.modules['river'] = None\n"
        "try:\n    import kernelcw.river\nexcept ImportError as e:\n    print(e)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True
    )
    assert 'pip install "kernelcw[river]"' in out.stdout


@pytest.mark.shipped_defaults
def test_readme_river_example_runs_and_prints_what_it_says(capsys):
    text = (ROOT / "README.md").read_text()
    code = re.search(r"### With river\n.*?```python\n(.*?)```", text, re.S).group(1)
    exec(compile(code, "README.md", "exec"), {})
    printed = capsys.readouterr().out.strip().splitlines()
    claimed = [ln.split("# ", 1)[1] for ln in code.splitlines() if "print(" in ln and "# " in ln]
    assert printed == claimed


@pytest.mark.parametrize("form", ["dual_project", "primal_diag", "primal_full"])
def test_a_new_label_that_fails_to_be_added_leaves_the_adapter_as_it_was(form, monkeypatch):
    """The third label's model is built aside and installed whole: an error or a Ctrl-C
    while it is built (here in ``add_models``) leaves the labels, classes, models and
    counters as they were, and the label is added on the next row that brings it (a
    reviewer's find: the label was kept without its model, and every later row
    failed)."""
    import kernelcw.river as adapter

    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 3))
    labels = np.array(["a", "b"])[rng.integers(0, 2, size=60)]
    model = Classifier(FORMS[form]())
    for i in range(50):
        model.learn_one({f"x{j}": X[i, j] for j in range(3)}, labels[i])
    before = copy.deepcopy(model)
    add_models = adapter.add_models

    def interrupted(*args, **kw):
        raise KeyboardInterrupt("injected")

    monkeypatch.setattr(adapter, "add_models", interrupted)
    row = {"x0": 1.0, "x1": 0.0, "x2": 0.0}
    with pytest.raises(KeyboardInterrupt, match="injected"):
        model.learn_one(row, "c")
    monkeypatch.setattr(adapter, "add_models", add_models)
    assert model.labels == before.labels
    np.testing.assert_array_equal(model.estimator_.classes_, before.estimator_.classes_)
    np.testing.assert_array_equal(model.estimator_.n_updates_, before.estimator_.n_updates_)
    for m in (model, before):
        m.learn_one(row, "c")
        m.learn_one({f"x{j}": X[55, j] for j in range(3)}, labels[55])
    assert model.labels == before.labels == ["a", "b", "c"]
    np.testing.assert_array_equal(model.estimator_.n_updates_, before.estimator_.n_updates_)
    assert model.predict_proba_one(row) == before.predict_proba_one(row)


def _adapter_state(m) -> tuple:
    """What a learning call may change: names, width, labels, kept rows, the model."""
    est = m.estimator_
    model = None
    if est is not None:
        X = np.eye(max(m._width, 1))[:, : m._width] if m._width else np.zeros((1, 0))
        frame = pd.DataFrame(X, columns=m.feature_names)
        model = (est.n_updates_, est.n_mistakes_, m.predict_proba_many(frame).to_numpy())
    pending = [r.tolist() for r in m._pending]
    return (m.feature_names, m._width, m.labels, pending, model is None, model)


def _same_state(a, b) -> None:
    assert a[:5] == b[:5]
    if a[5] is not None:
        assert a[5][:2] == b[5][:2]
        np.testing.assert_array_equal(a[5][2], b[5][2])


def test_a_model_that_fails_to_start_leaves_the_adapter_as_it_was():
    """The second label starts the model; a failure there (a rule parameter the
    estimator refuses) once left the label recorded and the kept rows dropped, and every
    later call did nothing, silently. Now the adapter is as before, and it starts once
    the parameter is set right."""
    m = Classifier(SCWClassifier(eta=5.0))
    before = _adapter_state(m)
    with pytest.raises(ValueError, match="eta"):  # (since session 28: at the first row)
        m.learn_one({"a": 1.0}, "x")
    _same_state(_adapter_state(m), before)
    m.estimator.set_params(eta=0.8)
    m.learn_one({"a": 1.0}, "x")
    m.estimator.set_params(eta=5.0)  # (the second label starts the model: refused there)
    before = _adapter_state(m)
    with pytest.raises(ValueError, match="eta"):
        m.learn_one({"a": -1.0, "b": 2.0}, "y")
    _same_state(_adapter_state(m), before)
    m.estimator.set_params(eta=0.8)
    m.learn_one({"a": -1.0, "b": 2.0}, "y")
    ref = SCWClassifier(eta=0.8).partial_fit(np.array([[1.0, 0.0], [-1.0, 2.0]]), ["x", "y"])
    assert m.labels == ["x", "y"] and m.estimator_.n_updates_ == ref.n_updates_


def test_a_failed_learning_call_changes_nothing():
    """A learn_many whose frame brings a new label and then a row the kernel refuses,
    and a learn_one whose new feature the kernel refuses: neither leaves a label, a
    name, a wider model or learnt rows behind (they once did)."""
    est = SCWClassifier(kernel="poly", degree=3, gamma=1.0, fit_intercept=False)
    m = Classifier(est)
    m.learn_one({"a": 1.0}, "x")
    m.learn_one({"a": -1.0}, "y")
    before = _adapter_state(m)
    frame = pd.DataFrame({"a": [0.5, 0.3, 1e120]})
    with pytest.raises(ValueError, match="NaN or infinity"):
        m.learn_many(frame, pd.Series(["x", "z", "x"]))
    _same_state(_adapter_state(m), before)
    with pytest.raises(ValueError, match="NaN or infinity"):
        m.learn_one({"a": 1.0, "big": 1e120}, "x")
    _same_state(_adapter_state(m), before)
    m.learn_many(frame[:2], pd.Series(["x", "z"]))  # (and it goes on)
    assert m.labels == ["x", "y", "z"]


def test_labels_and_values_the_estimators_refuse():
    m = Classifier()
    with pytest.raises(ValueError, match="NaN is no class label"):
        m.learn_one({"a": 1.0}, float("nan"))
    with pytest.raises(ValueError, match="NaN is no class label"):
        m.learn_many(pd.DataFrame({"a": [1.0, -1.0]}), pd.Series([0.0, np.nan]))
    for inf in (float("inf"), -np.inf):  # (refused by fit too: "Input y contains infinity")
        with pytest.raises(ValueError, match="infinite value is no class label"):
            m.learn_one({"a": 1.0}, inf)
        with pytest.raises(ValueError, match="infinite value is no class label"):
            m.learn_many(pd.DataFrame({"a": [1.0, -1.0]}), pd.Series([0.0, inf]))
        with pytest.raises(ValueError, match="infinite value is no class label"):
            Classifier(classes=(0.0, inf)).learn_one({"a": 1.0}, 0.0)
    with pytest.raises(ValueError, match="infinite value is no class label"):
        m.learn_one({"a": 1.0}, decimal.Decimal("-Infinity"))
    big = Classifier()  # (an int of any size is a finite label, as a str is)
    big.learn_one({"a": 1.0}, 10**400)
    big.learn_one({"a": -1.0}, 0)
    assert set(big.labels) == {0, 10**400} and big.predict_one({"a": 1.0}) in big.labels
    assert m.labels == [] and m.feature_names == []
    with pytest.raises(ValueError, match=r"feature 'b' is beyond float64's range"):
        m.learn_one({"a": 2**1023 + 5, "b": 10**400}, 1)
    with pytest.raises(TypeError, match=r"feature 'a' is \[1.0\]"):
        m.learn_one({"a": [1.0]}, 1)
    with pytest.raises(ValueError, match=r"mixes label types \(int, str\)"):
        Classifier(classes=(0, "a"))
    assert m.labels == [] and m.feature_names == []


def test_a_call_that_learnt_and_then_raised_keeps_what_it_learnt():
    """A warning turned into an error (or a Ctrl-C) after the learning call counted its
    rows: the call raises, and the adapter keeps the rows, their names and the counts
    together (a rollback once put back the narrower model beside the new counts)."""
    m = Classifier(CWClassifier(covariance="diag"))
    m.learn_one({"a": 1.0}, 0)
    m.learn_one({"a": -1.0}, 1)
    held = m.estimator_
    frame = pd.DataFrame({"a": np.ones(400), "b": np.ones(400)})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(RuntimeWarning, match="variance fell below"):
            m.learn_many(frame, pd.Series([0, 1] * 200))
    ref = CWClassifier(covariance="diag").partial_fit(np.array([[1.0, 0], [-1.0, 0]]), [0, 1])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref.partial_fit(frame.to_numpy(), np.array([0, 1] * 200))
    assert m.feature_names == ["a", "b"] and m.estimator_ is held
    assert (held.n_updates_, held.n_variance_floored_) == (ref.n_updates_, ref.n_variance_floored_)


def test_numpy_scalars_and_other_real_numbers_are_feature_values():
    """np.bool_ (a comparison's result), numpy floats, Decimal and 0-d arrays are
    numbers, on the general path as on the fast one; a new label keeps the estimator
    object a caller holds (it learns into a copy first, then takes its state)."""
    from decimal import Decimal

    m = Classifier(classes=None)
    m.learn_one({"a": 1.0, "b": np.bool_(True)}, 0)
    m.learn_one({"a": -1.0, "b": np.float32(2.0)}, 1)
    held = m.estimator_
    m.learn_one({"a": Decimal("0.5"), "c": np.array(3.0)}, 2)
    assert m.feature_names == ["a", "b", "c"] and m.labels == [0, 1, 2]
    assert m.estimator_ is held and held.classes_.tolist() == [0, 1, 2]


def test_the_adapters_model_saves_and_loads(tmp_path):
    """Its classes_ are in order of first appearance, not sorted as fit makes them: a
    file of it loads (a check of session 24 refused it) and predicts the same."""
    import kernelcw

    m = Classifier()
    for x, y in [({"a": 1.0}, "pos"), ({"a": -1.0}, "neg"), ({"a": 0.5, "b": 1.0}, "pos")]:
        m.learn_one(x, y)
    kernelcw.save(m.estimator_, tmp_path / "m.kcw")
    loaded = kernelcw.load(tmp_path / "m.kcw")
    X = np.array([[1.0, 0.0], [-1.0, 2.0]])
    assert loaded.classes_.tolist() == ["pos", "neg"]
    np.testing.assert_array_equal(loaded.decision_function(X), m.estimator_.decision_function(X))


def test_rows_refused_by_the_estimators_checks_are_named():
    """NaN by its row and name; a row whose squared norm overflows as too large (a frame's
    once met a lookup of column -1: 'list.index(x): x not in list')."""
    m = Classifier()
    with pytest.raises(ValueError, match=r"row 1, column 'b' is nan"):
        m.learn_many(pd.DataFrame({"a": [1.0, 2.0], "b": [0.0, np.nan]}), pd.Series([0, 1]))
    with pytest.raises(ValueError, match="row 0 is too large"):
        m.learn_many(pd.DataFrame({"a": [1e200], "b": [1e200]}), pd.Series([0]))
    with pytest.raises(ValueError, match="row 0 is too large"):
        m.learn_one({"a": 1e200, "b": 1e200}, 0)
    with pytest.raises(ValueError, match=r"feature 'b' is nan"):
        m.learn_one({"a": 1.0, "b": float("nan")}, 0)
    assert m.feature_names == [] and m.labels == []


def test_complex_numbers_dates_and_unusable_labels_are_refused_by_name():
    """numpy reads a complex number as its real part, a date as days or nanoseconds
    since 1970: they were learnt without a word (a warning for the complex part).
    None was a label (predict_one's 'no prediction yet'), an unhashable one failed
    in a dict, an object column's int past float64 raised a bare OverflowError."""
    m = Classifier()
    m.learn_one({"a": 1.0, "b": 0.5}, "x")
    m.learn_one({"a": -1.0, "b": 0.5}, "y")
    before = _adapter_state(m)
    for value in (np.complex128(1 + 2j), np.datetime64("2020-01-01"), np.timedelta64(3, "D")):
        for x in ({"a": value, "b": 1.0}, {"a": 1.0, "new": value}):  # (fast, general path)
            with pytest.raises(TypeError, match="learns from numbers only"):
                m.learn_one(x, "x")
    frames = {
        "complex": pd.Series([1 + 2j, 1.0]),
        "dates": pd.to_datetime(["2020-01-01", "2020-01-02"]),
        "durations": pd.to_timedelta([1, 2], unit="s"),
    }
    for column in frames.values():
        with pytest.raises(TypeError, match=r"column 'n' \(dtype"):
            m.learn_many(pd.DataFrame({"a": [1.0, 2.0], "n": column}), pd.Series(["x", "y"]))
    big = pd.DataFrame({"a": [1.0, 2.0], "n": pd.Series([1.0, 10**400], dtype=object)})
    with pytest.raises(ValueError, match=r"row 1, column 'n' is beyond float64's range"):
        m.learn_many(big, pd.Series(["x", "y"]))
    with pytest.raises(ValueError, match="label None is no class label"):
        m.learn_one({"a": 1.0}, None)
    for label in ([1], pd.NA):
        with pytest.raises(TypeError, match="is no class label"):
            m.learn_one({"a": 1.0}, label)
    _same_state(_adapter_state(m), before)
    m.learn_one({"a": np.array(2.0), "b": np.float64(1.0)}, "x")  # (0-d arrays: numbers)


def test_a_failed_row_with_a_new_feature_is_undone_on_the_fast_path():
    """A binary diagonal model (the fast path): the row brings a feature and its step
    fails. Taking the fast path's counters (none) stored a new counter tuple, which the
    rollback read as "the call went through": the name and the wider model stayed."""
    clf = Classifier(AROWClassifier(covariance="diag", r=1e-315), classes=(0, 1))
    clf.learn_one({"a": 1.0}, 0)
    clf.learn_one({"b": 1e-150}, 1)
    names, width = list(clf.feature_names), clf.estimator_.n_features_in_
    coef = clf.estimator_.coef_.copy()
    with pytest.raises(FloatingPointError):
        clf.learn_one({"b": 1e-150, "z": 1e-300}, 0)  # (the step overflows: r is tiny)
    assert list(clf.feature_names) == names and clf.estimator_.n_features_in_ == width
    np.testing.assert_array_equal(clf.estimator_.coef_, coef)


def test_a_failed_row_on_the_fast_path_counts_nothing():
    """Its floored round was counted before the step was found non-finite."""
    kw = dict(covariance="diag", r=1e-315, fit_intercept=False)
    clf = Classifier(AROWClassifier(**kw), classes=(0, 1))
    clf.learn_one({"b": 1e-150}, 1)
    before = clf.estimator_._counts
    with pytest.raises(FloatingPointError):
        clf.learn_one({"b": 1e-150}, 0)
    assert clf.estimator_._counts == before


def test_the_model_estimator_saves_and_loads_with_the_gamma_it_learnt_with(tmp_path):
    """gamma=None is 1 / width when the model starts, then fixed; the model widened to
    6 columns and its estimator_ (gamma None) saved as "1 / 6": the file loaded with
    another kernel and predicted otherwise, silently. The fixed value is now the
    estimator's own."""
    import kernelcw

    rng = np.random.RandomState(0)
    m = Classifier(SCWClassifier(kernel="rbf"))
    for i in range(60):
        d = {f"f{j}": rng.randn() for j in range(1 + i // 10)}  # f1..f5 appear later
        m.learn_one(d, "x" if d["f0"] + 0.5 * d.get("f1", 0.0) > 0 else "y")
    e = m.estimator_
    assert e.gamma == 1.0 and e.n_features_in_ >= len(m.feature_names) > 1
    X = rng.randn(5, e.n_features_in_)
    X[:, len(m.feature_names) :] = 0.0
    kernelcw.save(e, tmp_path / "m.kcw")
    loaded = kernelcw.load(tmp_path / "m.kcw")
    np.testing.assert_array_equal(loaded.decision_function(X), e.decision_function(X))
    rows = [{k: float(v) for k, v in zip(m.feature_names, x, strict=False)} for x in X]
    assert [m.predict_one(r) for r in rows] == loaded.predict(X).tolist()
    # a linear model keeps gamma=None (it reads none)
    lin = Classifier(AROWClassifier(covariance="diag"), classes=(0, 1))
    lin.learn_one({"a": 1.0}, 1)
    assert lin.estimator_.gamma is None


@pytest.mark.parametrize("labels", [(True, False), (0, 1), (2, 7, 5), (0.5, 1.5), ("a", "b")])
def test_a_model_with_python_labels_saves_and_loads_them_as_they_were(labels, tmp_path):
    """The adapter keeps labels as Python objects (an object array): a model of
    booleans or integers, the README's Phishing stream's, could not be saved."""
    import kernelcw

    m = Classifier()
    for i in range(30):
        m.learn_one({"a": float(i % 3), "b": 1.0}, labels[i % len(labels)])
    kernelcw.save(m.estimator_, tmp_path / "m.kcw")
    back = kernelcw.load(tmp_path / "m.kcw")
    assert back.classes_.dtype == object
    assert [(type(c), c) for c in back.classes_] == [(type(c), c) for c in m.labels]
    X = np.array([[0.0, 1.0], [2.0, 1.0]])
    assert back.predict(X).tolist() == m.estimator_.predict(X).tolist()


def test_an_invalid_estimator_is_refused_at_the_first_row():
    """Rows of a single label are kept until the second: an invalid gamma, or the
    precomputed kernel the docstring says is refused, went through 1,000 rows and
    failed at the second label."""
    for est, match in [
        (SCWClassifier(kernel="rbf", gamma=-1.0), "gamma=-1.0"),
        (SCWClassifier(kernel="precomputed"), "precomputed"),
        (AROWClassifier(a=-1.0), r"\ba=-1\.0"),
    ]:
        m = Classifier(est)
        with pytest.raises(ValueError, match=match):
            m.learn_one({"x": 1.0}, "a")
        assert m.feature_names == [] and m.labels == [] and m._pending == []


def test_pandas_na_in_a_dict_is_a_missing_value():
    """pd.NA was "kernelcw learns from numbers only (encode categories first)"; None
    and NaN say "remove or impute it first", and now so does NA."""
    pd = pytest.importorskip("pandas")
    m = Classifier()
    m.learn_one({"a": 1.0}, 0)
    for value in (None, float("nan"), pd.NA):
        with pytest.raises(ValueError, match="feature 'a' is .*remove or impute it first"):
            m.learn_one({"a": value}, 1)
