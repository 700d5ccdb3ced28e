"""kernelcw.distributed on an in-process LocalCluster: the cluster's combination equals
the same tree of kernelcw.combine run here, bit for bit."""

from __future__ import annotations

import copy
import dataclasses
import subprocess
import sys

import numpy as np
import pytest

from kernelcw import CWClassifier, PAClassifier, SCWClassifier

distributed = pytest.importorskip("distributed")
da = pytest.importorskip("dask.array")

from kernelcw.distributed import CombinedClassifier, tree_combine  # noqa: E402


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(
        processes=False, n_workers=2, threads_per_worker=1, dashboard_address=None
    )
    with distributed.Client(cluster) as c:
        yield c
    cluster.close()


def data(n=240, d=5, seed=0, classes=2):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    y = (X[:, 0] + 0.4 * rng.standard_normal(n) > 0).astype(int)
    if classes == 3:
        y = y + (X[:, 1] > 0.8)
    return X, y


def sequential(est, pieces, method, n_epochs=1, start=None):
    classes = np.unique(np.concatenate([y for _, y in pieces]))
    model = start
    for _ in range(n_epochs):
        if model is None:
            parts = [copy.deepcopy(est).partial_fit(X, y, classes=classes) for X, y in pieces]
            model = tree_combine(parts, method)
        else:
            parts = [copy.deepcopy(model).partial_fit(X, y) for X, y in pieces]
            model = tree_combine(parts, method, start=model)
    return model


def assert_same_state(a, b):
    sa, sb = a._engine.state_dict(), b._engine.state_dict()
    assert sa.keys() == sb.keys()
    for k in sa:
        np.testing.assert_array_equal(sa[k], sb[k], err_msg=k)


def split(X, y, P):
    b = np.linspace(0, X.shape[0], P + 1).astype(int)
    return [(X[lo:hi], y[lo:hi]) for lo, hi in zip(b[:-1], b[1:], strict=True)]


@pytest.mark.parametrize(
    "est",
    [
        SCWClassifier(kernel="rbf", gamma=0.3),
        SCWClassifier(kernel="rbf", gamma=0.3, budget=20),  # parts and nodes project
        CWClassifier(covariance="diag"),
    ],
    ids=["dual", "dual-project", "diag"],
)
@pytest.mark.parametrize("method", ["kl", "bayes"])
def test_in_memory_parts_equal_the_sequential_tree_bit_for_bit(client, est, method):
    X, y = data(classes=3)
    clf = CombinedClassifier(est, method=method, n_parts=5).fit(X, y)
    ref = sequential(est, split(X, y, 5), method)
    assert_same_state(clf.combined_, ref)
    assert clf.n_parts_ == 5 and clf.classes_.tolist() == [0, 1, 2]
    np.testing.assert_array_equal(clf.predict(X), ref.predict(X))
    np.testing.assert_array_equal(clf.predict_proba(X), ref.predict_proba(X))
    assert clf.score(X, y) > 0.7


def test_dask_array_input_one_part_per_chunk(client):
    X, y = data()
    dX, dy = da.from_array(X, chunks=(60, 5)), da.from_array(y, chunks=60)
    clf = CombinedClassifier(SCWClassifier(mode="dual"), method="average").fit(dX, dy)
    assert clf.n_parts_ == 4
    assert_same_state(
        clf.combined_, sequential(SCWClassifier(mode="dual"), split(X, y, 4), "average")
    )


def test_dataframe_input_one_part_per_partition(client):
    dd = pytest.importorskip("dask.dataframe")
    pd = pytest.importorskip("pandas")
    X, y = data()
    dX = dd.from_pandas(pd.DataFrame(X, columns=list("abcde")), npartitions=3)
    dy = dd.from_pandas(pd.Series(y), npartitions=3)
    clf = CombinedClassifier(CWClassifier(covariance="diag")).fit(dX, dy)
    pieces = [(X[lo:hi], y[lo:hi]) for lo, hi in _bounds(dX)]
    assert clf.n_parts_ == 3
    assert_same_state(clf.combined_, sequential(CWClassifier(covariance="diag"), pieces, "kl"))


def test_feature_names_are_recorded_at_fit_and_checked_after(client):
    """As a scikit-learn estimator: a frame's columns become feature_names_in_ (of the
    combined model too), the parts learn them in that order, and a frame with the
    columns in another order or one missing is refused by predict, predict_proba,
    decision_function and partial_fit, instead of being scored silently."""
    pd = pytest.importorskip("pandas")
    X, y = data()
    df = pd.DataFrame(X, columns=list("abcde"))
    est = CWClassifier(covariance="diag")
    clf = CombinedClassifier(est, n_parts=2).fit(df, y)
    assert clf.feature_names_in_.tolist() == list("abcde")
    assert clf.combined_.feature_names_in_.tolist() == list("abcde")
    ref = sequential(est, split(X, y, 2), "kl")
    assert_same_state(clf.combined_, ref)
    np.testing.assert_allclose(  # to rounding: a frame's values arrive column-major
        clf.predict_proba(df), ref.predict_proba(X), rtol=1e-12, atol=1e-15
    )
    for method in (clf.predict, clf.predict_proba, clf.decision_function):
        with pytest.raises(ValueError, match="same order"):
            method(df[list("edcba")])
        with pytest.raises(ValueError, match="missing"):
            method(df.drop(columns="c"))
    with pytest.raises(ValueError, match="same order"):
        clf.partial_fit(df[list("edcba")], y)
    assert_same_state(clf.combined_, ref)  # the refused call changed nothing
    clf.partial_fit(df, y)  # the start travels without names: the parts learn arrays
    assert_same_state(clf.combined_, sequential(est, split(X, y, 2), "kl", start=ref))
    assert clf.combined_.feature_names_in_.tolist() == list("abcde")
    bad = pd.DataFrame(np.vstack([X[:, :4], np.full((1, 4), np.nan)]), columns=list("pqrs"))
    with pytest.raises(ValueError, match="NaN"):  # a failed refit keeps names and model
        clf.fit(bad, np.r_[y, 0])
    assert clf.feature_names_in_.tolist() == list("abcde") and clf.n_features_in_ == 5
    clf.partial_fit(df, y)
    clf.fit(X, y)
    assert not hasattr(clf, "feature_names_in_")
    assert not hasattr(clf.combined_, "feature_names_in_")
    dd = pytest.importorskip("dask.dataframe")
    dX = dd.from_pandas(df, npartitions=2)
    lazy = CombinedClassifier(est).fit(dX, dd.from_pandas(pd.Series(y), npartitions=2))
    assert lazy.feature_names_in_.tolist() == list("abcde")
    with pytest.raises(ValueError, match="same order"):
        lazy.predict(df[list("edcba")])


def _bounds(ddf):
    sizes = ddf.map_partitions(len).compute().tolist()
    ends = np.cumsum([0] + sizes)
    return list(zip(ends[:-1], ends[1:], strict=True))


def test_epochs_mix_parameters_from_the_last_combination(client):
    X, y = data()
    est = SCWClassifier(mode="dual")
    clf = CombinedClassifier(est, method="kl", n_epochs=2, n_parts=3).fit(X, y)
    pieces = split(X, y, 3)
    one = sequential(est, pieces, "kl")
    two = tree_combine([copy.deepcopy(one).partial_fit(a, b) for a, b in pieces], start=one)
    assert_same_state(clf.combined_, two)


def test_partial_fit_continues_the_combined_model(client):
    X, y = data(n=300)
    est = CWClassifier(covariance="diag")
    clf = CombinedClassifier(est, n_parts=2)
    clf.partial_fit(X[:150], y[:150], classes=[0, 1]).partial_fit(X[150:], y[150:])
    first = sequential(est, split(X[:150], y[:150], 2), "kl")
    ref = sequential(est, split(X[150:], y[150:], 2), "kl", start=first)
    assert_same_state(clf.combined_, ref)


def test_clear_errors(client):
    X, y = data(n=20)
    with pytest.raises(ValueError, match="method"):
        CombinedClassifier(CWClassifier(), method="vote").fit(X, y)
    with pytest.raises(ValueError, match="n_epochs"):
        CombinedClassifier(CWClassifier(), n_epochs=0).fit(X, y)
    with pytest.raises(ValueError, match="n_parts"):
        CombinedClassifier(CWClassifier(), n_parts=30).fit(X, y)
    with pytest.raises(TypeError, match="both"):
        CombinedClassifier(CWClassifier()).fit(da.from_array(X), y)
    with pytest.raises(TypeError, match="kernelcw estimator"):
        CombinedClassifier(object()).fit(X, y)
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        CombinedClassifier(CWClassifier()).predict(X)


def test_predict_proba_is_there_when_the_estimator_has_it():
    """A kernel="precomputed" learner has no predict_proba (rows of K(X, X_train) lack
    k(x, x)): neither has the classifier that combines it."""
    assert hasattr(CombinedClassifier(SCWClassifier(kernel="rbf")), "predict_proba")
    assert not hasattr(CombinedClassifier(SCWClassifier(kernel="precomputed")), "predict_proba")


def test_importing_kernelcw_does_not_import_dask():
    code = "import sys, kernelcw, kernelcw.distributed; print('dask' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_missing_dask_says_how_to_install_it(monkeypatch):
    import kernelcw.distributed as kd

    monkeypatch.setitem(sys.modules, "distributed", None)
    with pytest.raises(ImportError, match=r'pip install "kernelcw\[dask\]"'):
        CombinedClassifier(CWClassifier(), client=None).fit(*data(n=20))
    assert kd._MISSING.startswith("kernelcw.distributed needs dask.distributed")


def test_a_scheduler_address_works_the_same(client):
    X, y = data(n=120)
    est = CWClassifier(covariance="diag")
    clf = CombinedClassifier(est, n_parts=3, client=client.scheduler.address).fit(X, y)
    assert_same_state(clf.combined_, sequential(est, split(X, y, 3), "kl"))
    assert distributed.get_client() is client  # the call's own client is closed again


@pytest.mark.shipped_defaults  # (the README's code runs with the defaults a user gets)
@pytest.mark.filterwarnings("ignore:Port .* is already in use")  # the example's dashboard
def test_readme_combination_example_runs_and_prints_its_comments():
    """The README's "Combining models" block, its printed lines against its comments.
    Last in this file: it starts and closes its own cluster and client."""
    import contextlib
    import io
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    section = re.search(r"## Combining models and training on a cluster\n(.*?)\n## ", text, re.S)
    code = re.search(r"```python\n(.*?)```", section.group(1), re.S).group(1)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {})
    lines = out.getvalue().splitlines()
    assert len(lines) == 3
    for line in lines:  # each printed line is the comment the README shows for it
        assert f"# {line}\n" in code, line


def test_tree_combine_makes_a_new_model_and_checks_its_input():
    X, y = data(n=60)
    start = SCWClassifier().fit(X[:20], y[:20])
    one = copy.deepcopy(start).partial_fit(X[20:], y[20:])
    out = tree_combine([one], "kl", start=start)  # (it once returned `one` itself)
    assert out is not one
    before = one.decision_function(X)
    out.partial_fit(X[:20], 1 - y[:20])
    np.testing.assert_array_equal(one.decision_function(X), before)
    with pytest.raises(ValueError, match="at least one model"):
        tree_combine([])
    with pytest.raises(ValueError, match="method"):
        tree_combine([one], "median")
    # one model is checked as combine checks its parts (it was returned as it came)
    with pytest.raises(TypeError):
        tree_combine([None])
    with pytest.raises(TypeError):
        tree_combine(["abc"])
    with pytest.raises((TypeError, ValueError)):
        tree_combine([one], start="garbage")
    with pytest.raises(Exception, match="fit|fitted"):
        tree_combine([SCWClassifier()])


def test_epochs_count_each_row_once(client):
    """Counters after several epochs: each epoch's parts continue the last combination,
    whose counts they all include, so the combination counts them once (four epochs of
    200 rows once reported 3,507 mistakes)."""
    X, y = data(n=200)
    clf = CombinedClassifier(SCWClassifier(), n_parts=4, n_epochs=4).fit(X, y)
    pieces = split(X, y, 4)
    ref = sequential(SCWClassifier(), pieces, "kl", n_epochs=4)
    assert (clf.combined_.n_updates_, clf.combined_.n_mistakes_) == (
        ref.n_updates_,
        ref.n_mistakes_,
    )
    assert clf.combined_.n_mistakes_ <= 800 and clf.combined_.n_updates_ <= 800


def test_what_the_shared_prior_rule_cannot_continue_is_refused_first(client, monkeypatch):
    """A kernel model combined by "average" keeps no natural parameters: later epochs
    and partial_fit calls are refused before any part learns (they once failed after
    every part had learnt, naming an estimators[0] the user never passed); with a
    "project" budget they go on. A changed classes= is refused as the estimators do."""
    import kernelcw.distributed as dist

    X, y = data(n=80)
    learnt = []
    fit_part = dist.fit_part
    monkeypatch.setattr(dist, "fit_part", lambda *a: learnt.append(1) or fit_part(*a))
    avg = CombinedClassifier(SCWClassifier(kernel="rbf"), method="average", n_parts=2)
    with pytest.raises(ValueError, match="n_epochs > 1 would combine relative to an averaged"):
        avg.set_params(n_epochs=2).fit(X, y)
    assert not learnt
    avg.set_params(n_epochs=1).fit(X, y)
    learnt.clear()
    with pytest.raises(ValueError, match="a later partial_fit would combine"):
        avg.partial_fit(X, y)
    assert not learnt
    budgeted = SCWClassifier(kernel="rbf", budget=30, budget_policy="project")
    CombinedClassifier(budgeted, method="average", n_parts=2, n_epochs=2).fit(X, y)
    one = CombinedClassifier(SCWClassifier(kernel="rbf"), method="average", n_parts=1)
    one.set_params(n_epochs=2).fit(X, y).partial_fit(X, y)  # (one part: nothing averaged)
    one.set_params(n_parts=2).partial_fit(X, y)  # (from a model that was not averaged)
    clf = CombinedClassifier(SCWClassifier(), n_parts=2).partial_fit(X, y, classes=[0, 1])
    with pytest.raises(ValueError, match=r"classes=\[0, 1, 2\] is not the same"):
        clf.partial_fit(X, y, classes=[0, 1, 2])
    clf.partial_fit(X, y, classes=[1, 0])  # (the same classes, in another order)


def test_the_refusal_looks_at_the_model_continued_not_the_method_now(client, monkeypatch):
    """After a fit averaged by method="average", a partial_fit under method="kl"
    continues the same averaged model and fails the same way: refused before any part
    learns (the check read the method now and let it through, to fail after every
    part had learnt). A first-order kernel model keeps nu alone, which combines
    whatever the method: its later epochs go on."""
    import kernelcw.distributed as dist

    X, y = data(n=80)
    learnt = []
    fit_part = dist.fit_part
    monkeypatch.setattr(dist, "fit_part", lambda *a: learnt.append(1) or fit_part(*a))
    avg = CombinedClassifier(SCWClassifier(kernel="rbf"), method="average", n_parts=2)
    avg.fit(X, y)
    learnt.clear()
    with pytest.raises(ValueError, match="a later partial_fit would combine"):
        avg.set_params(method="kl").partial_fit(X, y)
    assert not learnt
    first = CombinedClassifier(PAClassifier(kernel="rbf"), method="average", n_parts=2)
    first.set_params(n_epochs=2).fit(X, y).partial_fit(X, y)
    assert np.sum(first.combined_.n_support_) > 0


def test_two_threads_calling_partial_fit_each_add_their_batch(client, monkeypatch):
    """Each call continues combined_: two at once from two threads each started from the
    same model, and the one that finished last replaced the other's batch. They now
    run one after the other, and the model counts both batches."""
    import threading
    import time

    X, y = data(n=300)
    clf = CombinedClassifier(CWClassifier(covariance="diag"), n_parts=2)
    clf.partial_fit(X[:100], y[:100], classes=[0, 1])
    epoch = CombinedClassifier._epoch
    spans = []

    def slow_epoch(self, *args):
        start = time.perf_counter()
        time.sleep(0.3)  # (the other thread starts meanwhile)
        out = epoch(self, *args)
        spans.append((start, time.perf_counter()))
        return out

    monkeypatch.setattr(CombinedClassifier, "_epoch", slow_epoch)
    before = int(clf.combined_.n_updates_)
    gains = [
        int(copy.deepcopy(clf).partial_fit(X[lo : lo + 100], y[lo : lo + 100]).combined_.n_updates_)
        - before
        for lo in (100, 200)
    ]
    spans.clear()
    threads = [
        threading.Thread(target=clf.partial_fit, args=(X[lo : lo + 100], y[lo : lo + 100]))
        for lo in (100, 200)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    (s0, e0), (s1, e1) = sorted(spans)
    assert e0 <= s1  # one after the other
    assert int(clf.combined_.n_updates_) > before + max(gains)  # both batches count


def test_a_client_object_clones_and_pickles(client):
    """clone (GridSearchCV, cross_val_score) passes the same Client on; a pickle keeps
    its scheduler's address, which client= also takes."""
    import pickle

    from sklearn.base import clone

    clf = CombinedClassifier(CWClassifier(covariance="diag"), n_parts=2, client=client)
    twin = clone(clf)
    assert twin.client is client and twin.estimator is not clf.estimator
    X, y = data()
    clf.fit(X, y)
    back = pickle.loads(pickle.dumps(clf))
    assert back.client == client.scheduler.address
    np.testing.assert_array_equal(back.predict(X), clf.predict(X))
    back.partial_fit(X[:50], y[:50])  # (through the address)


def test_a_bad_row_is_named_by_its_row_in_x_or_its_part(client):
    """In-memory X is checked whole first: the error names the row in X (a part named
    its own row 15 for X's row 95). A dask collection's part names its part."""
    X, y = data(n=120)
    bad = X.copy()
    bad[95, 2] = np.nan
    clf = CombinedClassifier(CWClassifier(covariance="diag"), n_parts=3)
    with pytest.raises(ValueError, match=r"NaN or infinity in row 95 "):
        clf.fit(bad, y)
    assert not hasattr(clf, "combined_")
    Xd, yd = da.from_array(bad, chunks=(40, 5)), da.from_array(y, chunks=40)
    with pytest.raises(ValueError, match=r"part 2 of the data .*NaN or infinity in row 15 "):
        clf.fit(Xd, yd)
    Xe = da.from_array(X, chunks=((50, 0, 70), 5))  # (a chunk of 0 rows: named as such)
    ye = da.from_array(y, chunks=((50, 0, 70),))
    with pytest.raises(ValueError, match=r"part 1 of the data is empty"):
        clf.fit(Xe, ye)


def test_pickling_leaves_it_as_it_is_and_a_clone_keeps_its_requests(client):
    """__getstate__ once edited the live estimator (Python 3.11 hands it __dict__
    itself): a pickle or deep copy swapped the Client for its address and dropped a
    lock another thread might hold. A clone with a Client keeps scikit-learn's clone
    semantics (metadata requests)."""
    import pickle

    import sklearn
    from sklearn.base import clone

    X, y = data()
    clf = CombinedClassifier(CWClassifier(covariance="diag"), n_parts=2, client=client)
    clf.fit(X, y)
    lock = clf.__dict__["_model_lock"]
    pickle.dumps(clf)
    copy.deepcopy(clf)
    assert clf.client is client and clf.__dict__["_model_lock"] is lock
    with sklearn.config_context(enable_metadata_routing=True):
        asks = CombinedClassifier(CWClassifier(), client=client).set_fit_request(classes=True)
        twin = clone(asks)
        assert twin.client is client
        assert twin.get_metadata_routing().fit.requests == {"classes": True}


def test_set_params_of_the_estimator_reaches_partial_fit_or_is_refused(client):
    """partial_fit went on from combined_ with its old parameters: a structural change
    (gamma, budget) was ignored, silently, where the estimator refuses it; a rule
    parameter (C) now applies to the next parts, as it would to the estimator."""
    X, y = data(n=200)
    clf = CombinedClassifier(SCWClassifier(kernel="rbf", gamma=0.5), n_parts=2).fit(X, y)
    before = clf.combined_
    clf.set_params(estimator__gamma=5.0, estimator__budget=3)
    with pytest.raises(ValueError, match="changed the estimator's gamma from 0.5 to 5.0"):
        clf.partial_fit(X, y)
    assert clf.combined_ is before
    clf.set_params(estimator__gamma=0.5, estimator__budget=None, estimator__C=0.125)
    clf.partial_fit(X, y)
    assert clf.combined_.C == 0.125


def test_a_parameter_the_model_never_reads_may_change_between_partial_fits(client):
    """As the estimator's own partial_fit: a linear model's gamma was refused."""
    X, y = data(n=120)
    clf = CombinedClassifier(SCWClassifier(), n_parts=2).fit(X[:60], y[:60])
    ref = copy.deepcopy(clf)
    clf.set_params(estimator__gamma=0.5, estimator__budget_policy="oldest")
    clf.partial_fit(X[60:], y[60:])
    ref.partial_fit(X[60:], y[60:])
    np.testing.assert_array_equal(clf.decision_function(X), ref.decision_function(X))


def test_a_client_of_another_type_is_named():
    """client=42 raised AttributeError: 'int' object has no attribute 'nthreads'."""
    X, y = data(n=40)
    from distributed import LocalCluster

    with LocalCluster(processes=False, n_workers=1, dashboard_address=None) as cluster:
        clf = CombinedClassifier(SCWClassifier(), n_parts=2, client=cluster)
        with pytest.raises(TypeError, match=r"Client\(cluster\)"):
            clf.fit(X, y)  # (a cluster passed where its Client goes: 'no attribute scatter')
    for bad in (42, object()):
        clf = CombinedClassifier(SCWClassifier(), n_parts=2, client=bad)
        with pytest.raises(TypeError, match="client=.* must be a dask.distributed Client"):
            clf.fit(X, y)
        with pytest.raises(TypeError, match="client=.* must be a dask.distributed Client"):
            clf.partial_fit(X, y)
        assert not hasattr(clf, "combined_")


def test_a_precomputed_kernel_is_not_split_into_parts(client):
    """A part's rows of K(X, X) are not its own Gram matrix: it failed part-way,
    blaming the kernel."""
    X, y = data(n=80)
    K = X @ X.T
    clf = CombinedClassifier(SCWClassifier(kernel="precomputed"), n_parts=2)
    with pytest.raises(ValueError, match="cannot be split into 2 parts"):
        clf.fit(K, y)
    assert not hasattr(clf, "combined_")


def test_scikit_learn_conventions_of_the_wrapper(client):
    """Its tags said no sparse input (which it takes), y=None was "X (40, 3) and y (1,)
    must have one label per row", a column of labels raised no DataConversionWarning,
    and a stream shorter than the cluster's threads was refused for n_parts."""
    import scipy.sparse as sp
    from sklearn.exceptions import DataConversionWarning
    from sklearn.utils import get_tags

    X, y = data(n=40)
    clf = CombinedClassifier(SCWClassifier())
    assert get_tags(clf).input_tags.sparse
    clf.fit(sp.csr_matrix(X), y)
    with pytest.raises(ValueError, match="requires y to be passed"):
        CombinedClassifier(SCWClassifier()).fit(X, None)
    with pytest.warns(DataConversionWarning):
        CombinedClassifier(SCWClassifier()).fit(X, y[:, None])
    one = CombinedClassifier(SCWClassifier()).partial_fit(X[:1], y[:1], classes=[0, 1])
    assert one.n_parts_ == 1


def test_dask_labels_of_another_length_are_named(client):
    """dask's own "Chunks do not add up to shape" before."""
    da = pytest.importorskip("dask.array")
    X, y = data(n=60)
    clf = CombinedClassifier(SCWClassifier())
    with pytest.raises(ValueError, match="X has 60 rows but y 50 labels"):
        clf.fit(da.from_array(X, chunks=(30, 5)), da.from_array(y[:50], chunks=25))


@dataclasses.dataclass
class _Poly:
    c: float = 1.0

    def __call__(self, A, B):
        return (np.asarray(A @ B.T) + self.c) ** 2


def test_partial_fit_continues_a_copied_kernel_and_a_deep_tree(client):
    """A kernel object (copied by clone) or a function copy (a process cluster's) counted
    as "set_params changed the kernel"; a tree of 4 parts on features of very different
    scales was refused as "did not start from start" by rounding (a review found both)."""
    X, y = data(n=120, d=3)
    clf = CombinedClassifier(CWClassifier(kernel=_Poly()), method="bayes", n_parts=2)
    clf.partial_fit(X[:60], y[:60], classes=[0, 1]).partial_fit(X[60:], y[60:])
    rng = np.random.default_rng(0)
    Z = rng.normal(size=(1000, 3))
    W = np.column_stack([Z, Z[:, 2] * (1 + 1e-9) + 1e-9 * rng.normal(size=1000), Z[:, 0] * 1e3])
    t = (Z[:, 0] + 0.3 * rng.normal(size=1000) > 0).astype(int)
    deep = CombinedClassifier(CWClassifier(), n_parts=4)
    deep.partial_fit(W[:500], t[:500], classes=[0, 1]).partial_fit(W[500:], t[500:])
    assert deep.score(W, t) > 0.8


def test_labels_outside_the_classes_are_named_by_their_row(client):
    """In memory, a part named the labels of its own rows ("part 2 ... labels [7]")."""
    X, y = data(n=60)
    clf = CombinedClassifier(SCWClassifier(), n_parts=2).fit(X, y)
    y2 = y.copy()
    y2[41] = 7
    with pytest.raises(ValueError, match=r"y holds the label 7 at row 41, not one of"):
        clf.partial_fit(X, y2)
    with pytest.raises(ValueError, match=r"label 7 at row 41"):
        CombinedClassifier(SCWClassifier(), n_parts=2).fit(X, y2, classes=[0, 1])
