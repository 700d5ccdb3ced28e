"""kernelcw.save / kernelcw.load: round trips that continue bit for bit, every engine form,
budget policy and solver; files that are corrupted, truncated, foreign or from an
unknown version; atomic saving; no pickle anywhere."""

from __future__ import annotations

import io
import json
import os
import re
import zipfile
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import kernelcw
from kernelcw import AROWClassifier, SCWClassifier, persistence
from kernelcw._saved_values import json_param
from kernelcw.engines import saved_state
from kernelcw.registry import ALGORITHMS, make

README = Path(__file__).resolve().parents[1] / "README.md"


def _data(n=48, d=4, n_classes=2, seed=0, sparse=False):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = (X[:, 0] + 0.5 * rng.normal(size=n) > 0).astype(int)
    if n_classes > 2:
        y = np.digitize(X[:, 0] + 0.3 * X[:, 1], np.linspace(-1, 1, n_classes - 1))
    if sparse:
        X = sp.csr_matrix(np.where(np.abs(X) > 0.6, X, 0.0))
    return X, y


def _state(est) -> dict:
    """Everything fitted, as plain values (engine arrays and counters)."""
    out = {f"engine.{k}": v for k, v in est.engine_.state_dict().items()}
    for c in ("classes_", "n_updates_", "n_mistakes_", "n_variance_floored_"):
        out[c] = np.asarray(getattr(est, c))
    return out


def _assert_same(a, b, X) -> None:
    sa, sb = _state(a), _state(b)
    assert sorted(sa) == sorted(sb)
    for k in sa:
        assert sa[k].dtype == sb[k].dtype, k
        assert np.array_equal(sa[k], sb[k]), k
    assert np.array_equal(a.decision_function(X), b.decision_function(X))
    assert np.array_equal(a.predict_proba(X), b.predict_proba(X))
    assert np.array_equal(a.predict(X), b.predict(X))


def _round_trip(est, X, y, tmp_path, cuts=(20, 34)):
    """Learn X[:cuts[0]], save, load; then feed both the rest in two calls: the loaded
    model must stay identical to the one never saved, at every step."""
    path = tmp_path / "model.kcw"
    classes = np.unique(y)
    est.partial_fit(X[: cuts[0]], y[: cuts[0]], classes=classes)
    kernelcw.save(est, path)
    loaded = kernelcw.load(path)
    assert type(loaded) is type(est)
    assert loaded.get_params() == est.get_params()
    _assert_same(est, loaded, X)
    for lo, hi in ((cuts[0], cuts[1]), (cuts[1], X.shape[0])):
        est.partial_fit(X[lo:hi], y[lo:hi])
        loaded.partial_fit(X[lo:hi], y[lo:hi])
        _assert_same(est, loaded, X)
    return loaded


# ------------------------------------------------------------------ round trips


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
@pytest.mark.parametrize("n_classes", [2, 3])
def test_every_algorithm_primal_full(name, n_classes, tmp_path):
    X, y = _data(n_classes=n_classes)
    _round_trip(make(name), X, y, tmp_path)


@pytest.mark.parametrize("method", ["kl", "l2", "exact"])
@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("name", ["cw-var", "arow", "scw1"])
def test_primal_diagonal(name, method, sparse, tmp_path):
    X, y = _data(sparse=sparse, n_classes=3 if sparse else 2)
    _round_trip(make(name, covariance="diag", diag_method=method), X, y, tmp_path)


@pytest.mark.parametrize("kernel", ["linear", "rbf", "poly", "laplacian"])
@pytest.mark.parametrize("solver", ["cholesky", "explicit"])
def test_dual_every_kernel_and_solver(kernel, solver, tmp_path):
    X, y = _data()
    est = make("scw1", kernel=kernel, mode="dual", solver=solver, block_size=8)
    _round_trip(est, X, y, tmp_path)


@pytest.mark.parametrize(
    "kw", [{}, {"covariance": "diag"}, {"kernel": "rbf"}, {"kernel": "rbf", "budget": 10}]
)
@pytest.mark.parametrize("sparse", [False, True])
def test_fit_intercept_round_trip(kw, sparse, tmp_path):
    X, y = _data(sparse=sparse, n_classes=3)
    est = make("scw1", fit_intercept=True, intercept_scaling=1.5, **kw)
    loaded = _round_trip(est, X, y, tmp_path)
    assert np.array_equal(loaded.intercept_, est.intercept_)
    assert np.any(loaded.intercept_ != 0.0)


def test_dual_precomputed_kernel(tmp_path):
    X, y = _data(n=40)
    G = X @ X.T
    est = make("arow", kernel="precomputed")
    path = tmp_path / "m.kcw"
    est.partial_fit(G[:25], y[:25])
    kernelcw.save(est, path)
    loaded = kernelcw.load(path)
    est.partial_fit(G[25:], y[25:])
    loaded.partial_fit(G[25:], y[25:])
    for k, v in _state(est).items():
        assert np.array_equal(v, _state(loaded)[k]), k
    assert np.array_equal(est.decision_function(G), loaded.decision_function(G))


@pytest.mark.parametrize("policy", ["oldest", "random", "smallest", "project"])
@pytest.mark.parametrize("batch", [1, 2])
@pytest.mark.parametrize("n_classes", [2, 3])
def test_dual_budget_policies(policy, batch, n_classes, tmp_path):
    """Saved after the budget bound (the model is in its budgeted form) and continued
    through more evictions; "random" draws from the saved seed and counter."""
    X, y = _data(n_classes=n_classes, sparse=policy == "smallest")
    est = make("arow", kernel="rbf", budget=4, budget_policy=policy, budget_batch=batch)
    est.set_params(block_size=5)
    loaded = _round_trip(est, X, y, tmp_path)
    assert loaded.engine_.spec.seed == est.engine_.spec.seed
    assert np.all(np.asarray(loaded.n_support_) <= 4)


@pytest.mark.parametrize("solver", ["cholesky", "explicit"])
def test_dual_budget_explicit_first_order_and_random_seed_none(solver, tmp_path):
    """random_state=None draws the policy's seed at the first call: it is saved."""
    X, y = _data(n=60)
    est = make("pa1", kernel="poly", degree=2, budget=3, budget_policy="random", solver=solver)
    _round_trip(est, X, y, tmp_path, cuts=(25, 40))
    est2 = make("sop", kernel="rbf", budget=3, budget_policy="random", solver=solver)
    _round_trip(est2, X, y, tmp_path, cuts=(25, 40))


def test_labels_of_every_type_keep_their_dtype(tmp_path):
    X, _ = _data(n=30)
    base = (X[:, 0] > 0).astype(int)
    labels = [
        np.array([3, 7])[base],
        np.array([2.0, -1.0])[base],
        np.array([False, True])[base],
        np.array(["no", "yes"])[base],
        np.array(["no", "yes"], dtype=object)[base],
        np.array([b"n", b"y"])[base],
        np.array([1, 2, 3], dtype=np.uint8)[np.arange(30) % 3],
    ]
    for y in labels:
        est = make("arow").fit(X, y)
        kernelcw.save(est, tmp_path / "m.kcw")
        loaded = kernelcw.load(tmp_path / "m.kcw")
        assert loaded.classes_.dtype == est.classes_.dtype
        assert np.array_equal(loaded.classes_, est.classes_)
        assert all(type(a) is type(b) for a, b in zip(loaded.classes_, est.classes_, strict=True))
        assert np.array_equal(loaded.predict(X), est.predict(X))


def test_feature_names_and_counters(tmp_path):
    pd = pytest.importorskip("pandas")
    X, y = _data()
    df = pd.DataFrame(X, columns=["a", "b", "c", "d"])
    est = make("scw2").fit(df, y)
    kernelcw.save(est, tmp_path / "m.kcw")
    loaded = kernelcw.load(tmp_path / "m.kcw")
    assert loaded.feature_names_in_.dtype == object
    assert list(loaded.feature_names_in_) == ["a", "b", "c", "d"]
    assert loaded.n_features_in_ == 4
    assert type(loaded.n_updates_) is int and loaded.n_updates_ == est.n_updates_
    assert loaded.n_mistakes_ == est.n_mistakes_
    assert np.array_equal(loaded.predict(df), est.predict(df))
    with pytest.raises(ValueError, match="feature names"):  # checked as for the original
        loaded.predict(df.rename(columns={"a": "z"}))


def test_unfitted_model_saves_its_parameters(tmp_path):
    est = make("scw1", eta=0.8, C=2, kernel="rbf", gamma=np.float64(0.5), random_state=3)
    kernelcw.save(est, tmp_path / "m.kcw")
    loaded = kernelcw.load(tmp_path / "m.kcw")
    assert loaded.get_params() == est.get_params()
    assert not hasattr(loaded, "classes_")
    X, y = _data()
    assert np.array_equal(loaded.fit(X, y).decision_function(X), est.fit(X, y).decision_function(X))


def test_non_finite_floats_are_written_as_strict_json():
    for value in (np.inf, -np.inf):
        text = json.dumps(json_param("C", value), allow_nan=False)
        assert persistence._param_value("C", json.loads(text), "f") == value
    nan = persistence._param_value("C", json_param("C", np.nan), "f")
    assert np.isnan(nan)


def test_parameters_that_are_not_plain_values_are_refused(tmp_path):
    path = tmp_path / "m.kcw"
    for est, name in [
        (make("arow", kernel=lambda A, B: A @ B.T), "kernel"),
        (make("arow", random_state=np.random.RandomState(0)), "random_state"),
    ]:
        with pytest.raises(ValueError, match=f"cannot save {name}="):
            kernelcw.save(est, path)
        assert not path.exists()
    with pytest.raises(TypeError, match="kernelcw estimator"):
        kernelcw.save(object(), path)

    class Sub(kernelcw.AROWClassifier):
        pass

    with pytest.raises(TypeError, match="kernelcw estimator"):
        kernelcw.save(Sub(), path)


# ------------------------------------------------------------------ paths, atomicity


def test_same_model_same_bytes_and_new_files_follow_the_umask(tmp_path):
    est = make("arow", kernel="rbf", budget=4, budget_policy="random").fit(*_data())
    kernelcw.save(est, tmp_path / "a")
    kernelcw.save(est, tmp_path / "b")
    assert (tmp_path / "a").read_bytes() == (tmp_path / "b").read_bytes()
    old = os.umask(0o027)
    try:
        kernelcw.save(est, tmp_path / "c")
    finally:
        os.umask(old)
    assert (tmp_path / "c").stat().st_mode & 0o777 == 0o640


def test_path_is_used_as_given(tmp_path):
    est = make("arow").fit(*_data())
    kernelcw.save(est, str(tmp_path / "plain"))
    assert os.listdir(tmp_path) == ["plain"]  # no ".npz" added, no temporary left
    kernelcw.save(est, tmp_path / "with.model")
    assert sorted(os.listdir(tmp_path)) == ["plain", "with.model"]
    assert isinstance(kernelcw.load(str(tmp_path / "plain")), kernelcw.AROWClassifier)
    with pytest.raises(TypeError, match="str or os.PathLike"):
        kernelcw.save(est, io.BytesIO())
    with pytest.raises(FileNotFoundError):
        kernelcw.load(tmp_path / "absent")


def test_save_through_a_symbolic_link_replaces_the_file_it_points_to(tmp_path):
    """``current.kcw -> v1.kcw``: the save replaced the link with a file and left v1.kcw
    holding the old model."""
    X, y = _data()
    (tmp_path / "models").mkdir()
    real = tmp_path / "models" / "v1.kcw"
    kernelcw.save(make("arow").fit(X[:20], y[:20]), real)
    link = tmp_path / "current.kcw"
    link.symlink_to(real)
    new = make("arow").fit(X, y)
    kernelcw.save(new, link)
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert np.array_equal(kernelcw.load(real).decision_function(X), new.decision_function(X))
    assert sorted(os.listdir(tmp_path / "models")) == ["v1.kcw"]  # (no temporary file left)


def test_failed_save_leaves_the_old_file(tmp_path, monkeypatch):
    X, y = _data()
    path = tmp_path / "m.kcw"
    old = make("arow").fit(X[:20], y[:20])
    kernelcw.save(old, path)
    os.chmod(path, 0o640)
    before = path.read_bytes()
    new = make("arow").fit(X, y)

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    def ctrl_c(*args, **kwargs):
        raise KeyboardInterrupt

    for where, fail in [("write_array", full_disk), ("fsync", full_disk), ("replace", ctrl_c)]:
        with monkeypatch.context() as m:
            if where == "write_array":
                m.setattr(np.lib.format, "write_array", fail)
            else:
                m.setattr(os, where, fail)
            with pytest.raises((OSError, KeyboardInterrupt)):
                kernelcw.save(new, path)
        assert os.listdir(tmp_path) == ["m.kcw"], where  # the temporary file is gone
        assert path.read_bytes() == before
        assert np.array_equal(kernelcw.load(path).decision_function(X), old.decision_function(X))
    kernelcw.save(new, path)
    assert path.stat().st_mode & 0o777 == 0o640  # the old file's permissions
    assert np.array_equal(kernelcw.load(path).decision_function(X), new.decision_function(X))


# ------------------------------------------------------------------ bad files


def _saved(tmp_path, est=None) -> Path:
    path = tmp_path / "m.kcw"
    kernelcw.save(est or make("arow", kernel="rbf", budget=5).fit(*_data()), path)
    return path


def _in_both(**edit):
    """A meta edit of params and of the engine's learnt_with alike: past the check that
    they agree, to the state's own checks (a file edited with care, or one from before
    session 26, which has no learnt_with)."""

    def rewrite(meta):
        meta["params"].update(edit)
        meta.get("engine", {}).get("learnt_with", {}).update(edit)

    return rewrite


def _rewrite(path: Path, meta_edit=None, arrays_edit=None) -> None:
    """Rewrite a saved file with its JSON document or arrays changed."""
    with zipfile.ZipFile(path) as zf:
        meta = json.loads(zf.read(persistence.META))
        arrays = {
            n[:-4]: np.lib.format.read_array(io.BytesIO(zf.read(n)))
            for n in zf.namelist()
            if n.endswith(".npy")
        }
    if meta_edit:
        meta_edit(meta)
    if arrays_edit:
        arrays_edit(arrays)
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(persistence.META, json.dumps(meta))
        for name, arr in arrays.items():
            buf = io.BytesIO()
            np.lib.format.write_array(buf, arr, allow_pickle=True)
            zf.writestr(name + ".npy", buf.getvalue())


@pytest.mark.parametrize(
    ("kw", "member"),
    [({"kernel": "rbf"}, "engine.store.rows"), ({}, "engine.mean"), ({}, "engine.variance")],
)
def test_float_arrays_of_another_precision_are_refused(tmp_path, kw, member):
    """A float16 or float32 array loaded converted, rounded: another model, silently."""
    X, y = _data()
    path = tmp_path / "m.kcw"
    kw = kw or {"covariance": "diag"}  # (the dual engine keeps the full covariance)
    kernelcw.save(AROWClassifier(**kw).fit(X, y), path)
    for dtype in (np.float16, np.float32):

        def lower(arrays, dtype=dtype):
            arrays[member] = arrays[member].astype(dtype)

        _rewrite(path, arrays_edit=lower)
        with pytest.raises(ValueError, match=rf"{member[7:]} has dtype {np.dtype(dtype)}"):
            kernelcw.load(path)


def test_unknown_format_version(tmp_path):
    path = _saved(tmp_path)
    _rewrite(path, lambda m: m.update(format_version=3))
    with pytest.raises(ValueError, match=r"format_version 3; this kernelcw .* reads format"):
        kernelcw.load(path)
    _rewrite(path, lambda m: m.update(format_version=True))
    with pytest.raises(ValueError, match="format_version True"):
        kernelcw.load(path)


def test_files_that_are_not_models(tmp_path):
    path = tmp_path / "x"
    path.write_bytes(b"hello, world")
    with pytest.raises(ValueError, match="not a kernelcw model file"):
        kernelcw.load(path)
    np.savez(tmp_path / "plain.npz", a=np.arange(3))
    with pytest.raises(ValueError, match="not a kernelcw model file"):
        kernelcw.load(tmp_path / "plain.npz")
    path = _saved(tmp_path)
    _rewrite(path, lambda m: m.update(format="other"))
    with pytest.raises(ValueError, match="not a kernelcw model file"):
        kernelcw.load(path)
    _rewrite(_saved(tmp_path), lambda m: m.update(estimator="os.system"))
    with pytest.raises(ValueError, match="names estimator 'os.system'"):
        kernelcw.load(path)


@pytest.mark.parametrize("keep", [0.3, 0.9, 0.999])
def test_truncated_files(tmp_path, keep):
    path = _saved(tmp_path)
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])
    with pytest.raises(ValueError, match="truncated or corrupted"):
        kernelcw.load(path)


def test_corrupted_bytes_are_caught_by_the_checksum(tmp_path):
    path = _saved(tmp_path)
    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo("engine.model0.Pi.npy")
    at = info.header_offset + 30 + len(info.filename) + info.file_size - 3
    data[at] ^= 0xFF  # one byte of the array's data
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"engine.model0.Pi.npy is truncated or corrupted"):
        kernelcw.load(path)


def test_random_damage_gives_a_value_error_or_the_same_model(tmp_path):
    """Flipped bytes and cuts anywhere: a ValueError, or (a byte no checksum covers,
    such as a header's date) the very same model; never another exception."""
    X, y = _data(n_classes=3)
    est = make("arow", kernel="rbf", budget=4, budget_policy="random").fit(X, y)
    good = _saved(tmp_path, est).read_bytes()
    rng = np.random.default_rng(0)
    path = tmp_path / "damaged"
    for t in range(120):
        data = bytearray(good[: rng.integers(0, len(good))] if t % 4 == 0 else good)
        for _ in range(0 if t % 4 == 0 else rng.integers(1, 4)):
            data[rng.integers(0, len(data))] = rng.integers(0, 256)
        path.write_bytes(bytes(data))
        try:
            loaded = kernelcw.load(path)
        except ValueError:
            continue
        assert np.array_equal(loaded.predict_proba(X), est.predict_proba(X))
        state = _state(loaded)
        assert all(np.array_equal(v, state[k]) for k, v in _state(est).items())


def test_missing_and_unexpected_members(tmp_path):
    path = _saved(tmp_path)
    _rewrite(path, arrays_edit=lambda a: a.pop("engine.store.rows"))
    with pytest.raises(ValueError, match="missing member.*engine.store.rows"):
        kernelcw.load(path)
    path = _saved(tmp_path)
    _rewrite(path, arrays_edit=lambda a: a.update(extra=np.zeros(2)))
    with pytest.raises(ValueError, match="unexpected member.*extra.npy"):
        kernelcw.load(path)


def test_object_arrays_are_refused_and_never_unpickled(tmp_path, monkeypatch):
    path = _saved(tmp_path)
    _rewrite(path, arrays_edit=lambda a: a.update(classes_=np.array([0, 1], dtype=object)))
    calls = []
    real = np.load
    monkeypatch.setattr(np, "load", lambda *a, **k: calls.append(k) or real(*a, **k))
    with pytest.raises(ValueError, match="classes_.npy.*object array"):
        kernelcw.load(path)
    assert calls and all(k.get("allow_pickle") is False for k in calls)


def test_arrays_that_do_not_fit_the_parameters(tmp_path):
    est = make("arow").fit(*_data())
    path = _saved(tmp_path, est)
    _rewrite(path, arrays_edit=lambda a: a.update({"engine.mean": np.zeros((1, 5))}))
    with pytest.raises(ValueError, match=r"engine.mean has shape \(1, 5\)"):
        kernelcw.load(path)
    path = _saved(tmp_path, est)
    _rewrite(path, meta_edit=lambda m: m.update(n_features_in=3))
    with pytest.raises(ValueError, match=r"engine.mean has shape \(1, 4\).*\(1, 3\)"):
        kernelcw.load(path)
    path = _saved(tmp_path, make("arow", covariance="diag").fit(*_data()))
    _rewrite(path, arrays_edit=lambda a: a["engine.variance"].__setitem__((0, 0), np.nan))
    with pytest.raises(ValueError, match="engine.variance holds NaN"):
        kernelcw.load(path)
    path = _saved(tmp_path)
    _rewrite(path, arrays_edit=lambda a: a.update({"engine.store.rows": np.zeros((5, 7))}))
    with pytest.raises(ValueError, match=r"engine.store.rows has shape \(5, 7\)"):
        kernelcw.load(path)
    path = _saved(tmp_path)
    _rewrite(path, arrays_edit=lambda a: a.update({"engine.model0.nu": np.zeros(2)}))
    with pytest.raises(ValueError, match=r"engine.model0.nu has shape \(2,\); .* 5 support"):
        kernelcw.load(path)
    path = _saved(tmp_path)
    _rewrite(path, arrays_edit=lambda a: a["engine.model0.idx"].__setitem__(0, -1))
    with pytest.raises(ValueError, match="engine.model0.idx must index the 5 stored"):
        kernelcw.load(path)
    path = _saved(tmp_path)
    _rewrite(path, arrays_edit=lambda a: a.update({"engine.model0.form": np.array(99)}))
    with pytest.raises(ValueError, match="form 99 is a factor form this version .* not know"):
        kernelcw.load(path)
    path = _saved(tmp_path)
    _rewrite(path, arrays_edit=lambda a: a.update(n_updates_=np.array(-1)))
    with pytest.raises(ValueError, match="n_updates_ must be non-negative"):
        kernelcw.load(path)


@pytest.mark.parametrize("policy", ["oldest", "random", "smallest", "project"])
def test_support_beyond_the_budget_is_refused(policy, tmp_path):
    """A file whose budget is below its models' support size (edited by hand) is a
    ValueError at load, before any buffer sized by the budget is filled (the lazy form
    once wrote past its buffers and crashed the process)."""
    X, y = _data(120, 5)
    est = make("scw1", kernel="rbf", budget=20, budget_policy=policy, random_state=0)
    path = _saved(tmp_path, est.fit(X, y))
    assert est.n_support_ == 20
    _rewrite(path, _in_both(budget=5))
    with pytest.raises(ValueError, match="model 0 holds 20 support vectors; the budget is 5"):
        kernelcw.load(path)


def test_save_refuses_parameters_the_model_was_not_learnt_with(tmp_path):
    """set_params after fit changing a parameter that shapes the state (gamma, budget,
    kernel, covariance, ...) makes save refuse (the file would pair the state with
    parameters it was not learnt with: a different model, or one that cannot load); the
    rule's own parameters (C, r) are saved as set; setting a value back saves again."""
    X, y = _data(80, 4)
    for change in [dict(gamma=0.5), dict(budget=5), dict(kernel="poly"), dict(a=2.0)]:
        est = make("scw1", kernel="rbf", gamma=0.25, budget=20, random_state=0).fit(X, y)
        old = {k: est.get_params()[k] for k in change}
        est.set_params(**change)
        name = next(iter(change))
        with pytest.raises(ValueError, match=f"cannot save: set_params changed {name} from"):
            kernelcw.save(est, tmp_path / "refused.kcw")
        assert not (tmp_path / "refused.kcw").exists()
        est.set_params(**old)
        _assert_same(kernelcw.load(_saved(tmp_path, est)), est, X)
    est = make("arow", covariance="full").fit(X, y).set_params(covariance="diag")
    with pytest.raises(ValueError, match="covariance from 'full' to 'diag'"):
        kernelcw.save(est, tmp_path / "refused.kcw")
    est = make("scw1", kernel="rbf").fit(X, y).set_params(C=0.25)
    back = kernelcw.load(_saved(tmp_path, est))
    assert back.C == 0.25
    _assert_same(back, est, X)


def _set(key, index, value):
    """An arrays edit: arrays[key][index] = value (a new 0-d array for index None)."""

    def edit(a):
        if index is None:
            a[key] = np.array(value, dtype=a[key].dtype if key in a else np.int64)
        else:
            a[key] = a[key].copy()
            a[key][index] = value

    return edit


_RBF = dict(kernel="rbf")
_INDEF = [[1.0, 5.0], [5.0, 1.0]]  # (symmetric, a positive diagonal, eigenvalues 6 and -4)
#: (model, arrays edit, the message): hand edits a fuzzer of kernelcw.load found that
#: crashed the process (the sparse store), loaded NaN silently, or failed later with
#: ZeroDivisionError, OverflowError, IndexError, MemoryError or a numpy message.
_EDITS = {
    "csr indices out of range": (
        ("arow", dict(_RBF), True), _set("engine.store.indices", 0, 2**31 - 1),
        r"engine.store.indices must lie in \[0, 4\)"),
    "csr indptr beyond the data": (
        ("arow", dict(_RBF), True), _set("engine.store.indptr", 1, 1000), "engine.store.indptr"),
    "csr indptr falling": (
        ("arow", dict(_RBF), True), _set("engine.store.indptr", 2, 0), "engine.store.indptr"),
    "NaN in nu": (("pa1", dict(_RBF), False), _set("engine.model0.nu", 0, np.nan),
                  "engine.model0.nu holds NaN"),
    "NaN in r": (("scw1", dict(_RBF), False), _set("engine.model0.r", 0, np.nan),
                 "engine.model0.r holds NaN"),
    "zeta zero": (("scw1", dict(kernel="rbf", budget=5, budget_policy="oldest"), False),
                  _set("engine.model0.zeta", 0, 0.0), "engine.model0.zeta must be positive"),
    "kap negative": (("scw1", dict(_RBF), False), _set("engine.model0.kap", 0, -1.0),
                     "negative k"),
    "clock overflowing": (("scw1", dict(_RBF), False), _set("engine.model0.clock", None, 2**63 - 1),
                          "engine.model0.clock must be an integer"),
    "n_seen below the positions": (
        ("scw1", dict(_RBF), False), _set("engine.store.n_seen", None, 1),
        "engine.store.pos must lie in"),
    "store position negative": (("scw1", dict(_RBF), False), _set("engine.store.pos", 0, -3),
                                "engine.store.pos must lie in"),
    "capacity huge": (("scw1", dict(_RBF), False), _set("engine.model0.capacity", None, 10**9),
                      "engine.model0.capacity must be an integer"),
    "Gram diagonal zero": (
        ("scw1", dict(kernel="rbf", budget=5, budget_policy="project", budget_batch=3), False),
        _set("engine.model0.G", (0, 0), 0.0), "G's diagonal must be the kap"),
    "asymmetric covariance": (("arow", {}, False), _set("engine.covariance", (0, 0, 1), 5.0),
                              "engine.covariance must be symmetric"),
    "asymmetric Gram cache": (
        ("scw1", dict(kernel="rbf", budget=5, budget_policy="smallest"), False),
        _set("engine.model0.policy.G", (0, 1), 5.0), "policy.G must be exactly symmetric"),
    # (an audit: these loaded, and predicted wrongly or failed later with numpy's TypeError)
    "indefinite covariance": (
        ("arow", {}, False), _set("engine.covariance", (0, slice(0, 2), slice(0, 2)), _INDEF),
        "engine.covariance of model 0 is not positive semi-definite"),
    "duplicate classes": (("arow", {}, False), _set("classes_", 0, 1),
                          r"classes_ \[1, 1\] must be distinct, finite"),
    "boolean covariance": (("arow", {}, False),
                           lambda a: a.update({"engine.covariance": a["engine.covariance"] > 0}),
                           "engine.covariance has dtype bool; the model.s arrays are float64"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(_EDITS))
def test_hand_edited_states_are_a_value_error_at_load(case, tmp_path):
    (name, params, sparse), edit, message = _EDITS[case]
    path = _saved(tmp_path, make(name, **params).fit(*_data(60, sparse=sparse)))
    _rewrite(path, arrays_edit=edit)
    with pytest.raises(ValueError, match=message):
        kernelcw.load(path)


@pytest.mark.parametrize(
    "params",
    [dict(kernel="rbf"), dict(kernel="rbf", solver="explicit"), dict(kernel="rbf", budget=80),
     dict(kernel="rbf", budget=20, budget_policy="oldest"), dict(kernel="precomputed")],
    ids=["panels", "explicit", "budget-not-binding", "queue", "precomputed"],
)  # fmt: skip
def test_several_passes_round_trip(params, tmp_path):
    """A fit of n_iter passes stores a support row per update of every pass (more rows
    than the inputs it has seen, whose positions repeat): such a model saves and loads
    (the state checks once bounded the store by the inputs seen)."""
    X, y = _data(40)
    if params["kernel"] == "precomputed":
        X = np.exp(-0.5 * ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1))
    for name in ("scw1", "pa1"):
        if name == "pa1" and params.get("solver"):
            continue
        est = make(name, n_iter=3, **params).fit(X, y)
        back = kernelcw.load(_saved(tmp_path, est))
        if params["kernel"] != "precomputed":  # (no predict_proba there)
            _assert_same(back, est, X)
        np.testing.assert_array_equal(back.decision_function(X), est.decision_function(X))


def test_form_that_the_rule_or_budget_cannot_have_is_refused(tmp_path):
    """A second-order factor form under a first-order estimator (renamed in the JSON),
    and a budgeted form whose budget was removed: a ValueError at load, not a
    ZeroDivisionError or TypeError at the next partial_fit; and a counter near int64's
    limit, which wrapped negative while learning."""
    path = _saved(tmp_path, make("scw1", kernel="rbf").fit(*_data()))
    rename = {"estimator": "PAClassifier", "params": {"kernel": "rbf"}, "format_version": 1}

    def renamed(meta):  # (a version 1 file edited with care: no learnt_with, no rule)
        meta.update(rename)
        del meta["engine"]["learnt_with"], meta["engine"]["rule"]

    _rewrite(path, renamed)
    with pytest.raises(ValueError, match="form 0 is a second-order form; the rule is first"):
        kernelcw.load(path)
    path = _saved(
        tmp_path, make("scw1", kernel="rbf", budget=5, budget_policy="oldest").fit(*_data())
    )
    _rewrite(path, _in_both(budget=None))
    with pytest.raises(ValueError, match="form 2 is a budgeted form; the model has no budget"):
        kernelcw.load(path)
    path = _saved(tmp_path, make("arow").fit(*_data()))
    _rewrite(path, arrays_edit=_set("n_updates_", None, 2**63 - 1))
    with pytest.raises(ValueError, match="n_updates_ must be at most 2"):
        kernelcw.load(path)


@pytest.mark.parametrize(
    "edit", [dict(kernel="poly"), dict(degree=2, kernel="poly"), dict(fit_intercept=False)]
)
def test_kernel_parameters_edited_in_the_file_are_refused(edit, tmp_path):
    """A kernel, degree or intercept edited in the JSON no longer gives the k(x, x) the
    state holds at its support vectors: a ValueError at load, where the model used to
    load and fail later (not positive semi-definite, or LinAlgError)."""
    if "degree" in edit:
        est = make("scw1", kernel="poly", degree=3, coef0=1.0)
    else:  # (the tests' default is fit_intercept=False: tests/conftest.py)
        est = make("scw1", kernel="linear", mode="dual", fit_intercept=True)
    path = _saved(tmp_path, est.fit(*_data(60)))
    _rewrite(path, _in_both(**edit))
    with pytest.raises(ValueError, match="kap is not k\\(x, x\\) .* learnt with another kernel"):
        kernelcw.load(path)


@pytest.mark.parametrize(
    "params, edit",
    [
        (dict(kernel="rbf"), dict(gamma=5.0)),  # (k(x, x) = 1 whatever gamma: kap agrees)
        (dict(kernel="rbf", budget=8), dict(a=2.0)),
        (dict(kernel="rbf"), dict(kernel="laplacian")),
        (dict(fit_intercept=True), dict(intercept_scaling=3.0)),  # (primal full)
        (dict(covariance="diag", fit_intercept=True), dict(intercept_scaling=3.0)),
    ],
)
def test_parameters_that_shape_the_state_edited_in_the_file_are_refused(params, edit, tmp_path):
    """The state's checks cannot see these edits (they loaded, and predicted with the
    new values); the file says what the model learnt with, and load compares. Rule
    parameters (C here) are not part of the state: edited, they load as set_params."""
    est = make("arow", **params).fit(*_data(60))
    path = _saved(tmp_path, est)
    _rewrite(path, lambda m: m["params"].update(edit))
    k, v = next(iter(edit.items()))
    with pytest.raises(ValueError, match=rf"its parameters {k}={v!r} \(learnt with .*\) are not"):
        kernelcw.load(path)
    path = _saved(tmp_path, make("scw1", **params).fit(*_data(60)))
    _rewrite(path, lambda m: m["params"].update(C=0.5))
    assert kernelcw.load(path).C == 0.5
    _rewrite(path, lambda m: m["engine"].pop("learnt_with"))  # (files before session 26)
    assert kernelcw.load(path).C == 0.5


def test_a_saved_file_loads_whatever_the_parameters_number_type(tmp_path):
    """A model begun with gamma=np.float32(0.1) and set to 0.1 since (equal to numpy, so
    it continues and saves): the file holds the gamma it learnt with, float32's
    0.10000000149..., and loads to the same predictions (it held 0.1, and the model
    loaded predicted with 0.1, or, with learnt_with, was refused)."""
    X, y = _data(60)
    est = make("arow", kernel="rbf", gamma=np.float32(0.1)).fit(X, y)
    est.set_params(gamma=0.1)
    est.partial_fit(X[:5], y[:5])
    path = _saved(tmp_path, est)
    np.testing.assert_array_equal(
        kernelcw.load(path).decision_function(X), est.decision_function(X)
    )


def test_invalid_or_unknown_parameters(tmp_path):
    path = _saved(tmp_path)
    _rewrite(path, lambda m: m["params"].update(r=-1.0))
    with pytest.raises(ValueError, match="saved parameters are invalid: r=-1.0"):
        kernelcw.load(path)
    path = _saved(tmp_path)
    _rewrite(path, lambda m: m["params"].update(mode="primal"))
    with pytest.raises(ValueError, match="saved parameters are invalid: mode='primal'"):
        kernelcw.load(path)
    path = _saved(tmp_path)
    _rewrite(path, _in_both(kernel="linear", budget=None))
    with pytest.raises(ValueError, match="engine form 'dual' .* does not fit"):
        kernelcw.load(path)
    path = _saved(tmp_path)
    _rewrite(path, lambda m: m["params"].update(extra=1))
    with pytest.raises(ValueError, match="no parameter.*extra"):
        kernelcw.load(path)
    path = _saved(tmp_path)
    _rewrite(path, lambda m: m["params"].update(r={"float": "inf"}))
    with pytest.raises(ValueError, match="saved parameters are invalid: r=inf"):
        kernelcw.load(path)
    path = _saved(tmp_path)
    _rewrite(path, lambda m: m["params"].update(r={"code": "os.system('x')"}))
    with pytest.raises(ValueError, match="parameter r = .* is not a value"):
        kernelcw.load(path)


def test_header_promising_more_data_than_the_member_holds(tmp_path):
    path = _saved(tmp_path)
    with zipfile.ZipFile(path) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    header = b"{'descr': '<f8', 'fortran_order': False, 'shape': (1000000000000,), }"
    header += b" " * (118 - len(header)) + b"\n"
    members["engine.model0.nu.npy"] = b"\x93NUMPY\x01\x00v\x00" + header + b"\0" * 8
    with zipfile.ZipFile(path, "w") as zf:
        for n, b in members.items():
            zf.writestr(n, b)
    with pytest.raises(ValueError, match="engine.model0.nu.npy .*promises"):
        kernelcw.load(path)


# ------------------------------------------------------------------ the format's layout

#: The engine state's members in format version 1, per factor form. A change to an
#: engine's state_dict changes the file format: bump persistence.FORMAT_VERSION, keep
#: loading version 1 files (convert them), and update this table.
LAYOUT_V1 = {
    "primal_full": {"mean", "covariance"},
    "primal_diag": {"mean", "variance"},
    "panels": {"LK", "capacity", "r", "zeta"},
    "explicit": {"nu", "Pi", "zsv", "gsv", "policy.counter", "policy.kinv", "policy.G"}
    | {"policy.vsv"},
    "queue": {"zeta", "qv", "LO", "rO", "LNO", "KNO", "LN", "rN", "nO", "nN", "capO", "capN"},
    "pruned": {"L", "r", "qv", "zeta", "G", "counter"},
    "lazy": {"L", "r", "qv", "zeta", "G", "counter"},  # (the pruned form's members)
}
DUAL_V1 = {"n_models", "store.n", "store.pos", "store.n_seen", "store.kind"}
#: Version 2: members version 1 files gained over time, now required.
DUAL_V2 = DUAL_V1 | {"factor_only", "nu_pi_models", "kernel_jitter"}
SLOTS_V1 = {"form", "idx", "entry", "kap", "clock"}


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"covariance": "diag"},
        {"kernel": "rbf"},
        {"kernel": "rbf", "solver": "explicit"},
        {"kernel": "rbf", "budget": 3, "budget_policy": "oldest"},
        {"kernel": "rbf", "budget": 3, "budget_batch": 2},
        {"kernel": "rbf", "budget": 3, "budget_policy": "random"},
    ],
)
def test_engine_state_layout_is_format_version_2(params):
    est = make("arow", **params).fit(*_data())
    state = est.engine_.state_dict()
    form = est.engine_.spec.form
    if form != "dual":
        assert set(state) == LAYOUT_V1[form]
        return
    (name,) = est.engine_.factor_forms()
    model = {k[len("model0.") :] for k in state if k.startswith("model0.")}
    assert model == LAYOUT_V1[name] | SLOTS_V1, "the state layout changed: see LAYOUT_V1"
    assert DUAL_V2 <= set(state)
    assert set(saved_state.DUAL_V2) == DUAL_V2 - DUAL_V1
    assert persistence.FORMAT_VERSION == 2


@pytest.mark.parametrize("member", sorted(DUAL_V2 - DUAL_V1))
def test_a_version_2_file_without_a_member_is_damaged_a_version_1_file_is_old(tmp_path, member):
    """Version 1 files gained these members over time without a new version, so one
    without a member loaded as an old file (a "project" model on a precomputed kernel
    without its jitter then learnt another model)."""
    X, y = _data()
    est = make("arow", kernel="rbf", budget=5).fit(X, y)
    path = tmp_path / "m.kcw"
    kernelcw.save(est, path)

    def drop(arrays):
        del arrays["engine." + member]

    def listed(meta):
        meta["arrays"].remove("engine." + member)

    _rewrite(path, listed, drop)
    with pytest.raises(ValueError, match=f"member engine.{member} is missing"):
        kernelcw.load(path)
    _rewrite(path, lambda m: m.update(format_version=1))
    if member == "kernel_jitter":  # (a file from before the jitter: its k(x, x) differ)
        with pytest.raises(ValueError, match="is not k"):
            kernelcw.load(path)
        return
    np.testing.assert_array_equal(kernelcw.load(path).decision_function(X),
                                  est.decision_function(X))  # fmt: skip


# ------------------------------------------------------------------ documentation


@pytest.mark.shipped_defaults  # (the README's code, as a user runs it)
def test_readme_saving_and_loading_example_runs(tmp_path, monkeypatch):
    text = README.read_text()
    code = re.search(r"## Saving and loading\n.*?```python\n(.*?)```", text, re.S).group(1)
    monkeypatch.chdir(tmp_path)
    exec(compile(code, str(README), "exec"), {})
    assert os.listdir(tmp_path) == ["model.kcw"]


def test_block_size_and_diag_method_changed_after_the_start_save_as_the_model_learns(tmp_path):
    """The engine keeps the block size it started with, and the file now does too (the
    loaded model took a later set_params' block size: other rounding than the model it
    was saved from); a changed diag_method is refused as the other structural
    parameters are (it was ignored by the model and used by its saved copy)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 6))
    y = (X[:, 0] + 0.5 * rng.normal(size=200) > 0).astype(int)
    clf = SCWClassifier().partial_fit(X[:40], y[:40], classes=[0, 1])
    clf.set_params(block_size=3)
    kernelcw.save(clf, tmp_path / "bs.kcw")
    loaded = kernelcw.load(tmp_path / "bs.kcw")
    for m in (clf, loaded):
        m.partial_fit(X[40:], y[40:])
    np.testing.assert_array_equal(loaded.engine_.covariance, clf.engine_.covariance)
    diag = AROWClassifier(covariance="diag").partial_fit(X[:30], y[:30])
    diag.set_params(diag_method="l2")
    with pytest.raises(ValueError, match="diag_method"):
        diag.partial_fit(X[30:], y[30:])
    with pytest.raises(ValueError, match="diag_method"):
        kernelcw.save(diag, tmp_path / "diag.kcw")


def test_a_save_beside_a_fit_in_another_thread_writes_one_model_whole(tmp_path, monkeypatch):
    """A save whose thread is held up just before it locks the model's engine, while
    another thread fits anew: the file holds one model whole, the old one here (it once
    paired the old engine with the new fit's classes: a model of neither)."""
    import sys
    import threading
    import time

    from kernelcw.engines import base

    rng = np.random.default_rng(1)
    X = rng.normal(size=(200, 4))
    y = (X[:, 0] > 0).astype(int)
    clf = AROWClassifier().fit(X, y)
    old = clf.decision_function(X)
    lock, reading = base.Locked.lock, threading.Event()

    def slow(self):
        if sys._getframe(1).f_code.co_name.startswith("_export"):  # (save's, alone)
            reading.set()
            time.sleep(0.4)
        return lock.fget(self)

    monkeypatch.setattr(base.Locked, "lock", property(slow))
    save = threading.Thread(target=kernelcw.save, args=(clf, tmp_path / "race.kcw"))
    save.start()
    assert reading.wait(10)
    clf.fit(X, np.where(y == 1, "neg", "pos"))
    save.join()
    loaded = kernelcw.load(tmp_path / "race.kcw")
    assert loaded.classes_.tolist() == [0, 1]
    np.testing.assert_array_equal(loaded.decision_function(X), old)


@pytest.mark.parametrize("compress_type", [zipfile.ZIP_DEFLATED, zipfile.ZIP_STORED])
def test_a_member_claiming_more_than_the_file_is_refused_before_allocating(tmp_path, compress_type):
    """A 90 KB crafted file whose zip directory and .npy header both claim 512 GiB:
    MemoryError, not a ValueError saying what is wrong with the file."""
    path = _saved(tmp_path)
    with zipfile.ZipFile(path) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    victim = next(n for n in members if n.startswith("engine.") and n.endswith(".npy"))
    n = 2**36
    head = f"{{'descr': '<f8', 'fortran_order': False, 'shape': ({n},), }}".encode()
    payload = b"\x93NUMPY\x01\x00v\x00" + head + b" " * (118 - len(head)) + b"\n" + b"\0" * 64
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            if name != victim:
                zf.writestr(name, data)
                continue
            info = zipfile.ZipInfo(name)
            info.compress_type = compress_type
            with zf.open(info, "w", force_zip64=True) as f:
                f.write(payload)
            info.file_size = 8 * n + 128  # (the central directory claims 512 GiB)
            if compress_type == zipfile.ZIP_STORED:
                info.compress_size = info.file_size
    with pytest.raises(ValueError, match="compressed|more than the whole file"):
        kernelcw.load(path)


@pytest.mark.parametrize(
    ("params", "member", "where", "value", "says"),
    [
        ({"kernel": "rbf"}, "engine.model0.LK", (0, 0), -1.0, "diagonal .* must be positive"),
        ({"kernel": "rbf", "budget": 12, "budget_policy": "smallest"}, "engine.model0.zsv", 0,
         0.0, "zsv must be positive"),
        ({"kernel": "rbf", "budget": 12, "budget_batch": 3}, "engine.model0.G", (2, 1), 0.0,
         "G must be symmetric"),
    ],
)  # fmt: skip
def test_edits_that_break_an_invariant_are_refused_at_load(tmp_path, params, member, where,
                                                          value, says):  # fmt: skip
    """These loaded, and the next partial_fit blamed the kernel or the data."""
    X, y = _data(n=100)
    path = tmp_path / "m.kcw"
    kernelcw.save(make("arow", **params).fit(X, y), path)

    def edit(arrays):
        arrays[member] = arrays[member].copy()
        arrays[member][where] = value

    _rewrite(path, arrays_edit=edit)
    with pytest.raises(ValueError, match=says):
        kernelcw.load(path)


@pytest.mark.parametrize(
    ("name", "other"),
    [("sop", "PerceptronClassifier"), ("perceptron", "SOPClassifier"), ("pa1", "SCWClassifier")],
)
def test_a_file_naming_another_estimator_is_refused(tmp_path, name, other):
    """The primal state holds no trace of its rule: a Perceptron's file with its estimator
    field edited to SOPClassifier loaded, and learnt on as SOP from a Perceptron's state."""
    X, y = _data()
    path = tmp_path / "m.kcw"
    kernelcw.save(make(name).fit(X, y), path)
    _rewrite(path, lambda m: m.update(estimator=other))
    with pytest.raises(ValueError, match="learnt by the .* rule, but .* learns by"):
        kernelcw.load(path)
    kernelcw.save(make(name).fit(X, y), path)
    _rewrite(path, lambda m: m["engine"].pop("rule"))
    with pytest.raises(ValueError, match="engine field 'rule' is missing"):
        kernelcw.load(path)


@pytest.mark.parametrize(
    ("member", "dtype", "says"),
    [("engine.model0.r", bool, "has dtype bool; the model's arrays are float64"),
     ("engine.store.pos", np.float64, "has dtype float64; it holds integers")],
)  # fmt: skip
def test_arrays_of_the_wrong_kind_are_refused(tmp_path, member, dtype, says):
    """A bool array where the model keeps floats loaded as 0/1 (decisions off by 7.8)."""
    path = _saved(tmp_path, make("arow", kernel="rbf").fit(*_data()))

    def retype(arrays):
        arrays[member] = arrays[member].astype(dtype)

    _rewrite(path, arrays_edit=retype)
    with pytest.raises(ValueError, match=says):
        kernelcw.load(path)


@pytest.mark.parametrize("params", [{}, {"kernel": "rbf", "budget": 8, "budget_policy": "oldest"}])
def test_a_file_from_a_big_endian_machine_loads_and_continues(tmp_path, params):
    """np.save writes native order: '>f8' and '>i8' arrays on a big-endian host. The
    float64 check refused them (a review found it)."""
    X, y = _data(60)
    est = make("arow", **params).fit(X[:40], y[:40])
    path = _saved(tmp_path, est)

    def big_endian(arrays):
        for k, v in arrays.items():
            if v.dtype.kind in "fi" and v.dtype.itemsize > 1:
                arrays[k] = v.astype(v.dtype.newbyteorder(">"))

    _rewrite(path, arrays_edit=big_endian)
    back = kernelcw.load(path)
    est.partial_fit(X[40:], y[40:])
    back.partial_fit(X[40:], y[40:])
    np.testing.assert_array_equal(back.decision_function(X), est.decision_function(X))


def test_save_errors_name_the_path_given_not_the_temporary_file(tmp_path):
    """A missing folder or a directory as the path raised with the temporary file's
    name (".model.kcw.x1y2.tmp")."""
    clf = AROWClassifier().fit([[0.0, 1.0], [1.0, 0.0]], [0, 1])
    target = tmp_path / "no_such_dir" / "model.kcw"
    with pytest.raises(FileNotFoundError) as err:
        kernelcw.save(clf, target)
    assert err.value.filename == str(target) and ".tmp" not in str(err.value)
    with pytest.raises(IsADirectoryError) as err:
        kernelcw.save(clf, tmp_path)
    assert err.value.filename == str(tmp_path) and ".tmp" not in str(err.value)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize(
    "labels, want",
    [
        ([True, False], np.bool_),
        ([np.int64(3), 1], np.int64),
        ([0.5, 2.0], np.float64),
        (["a", "bc"], np.str_),
        ([True, 2], None),  # (True == 1: it would load as 1)
        ([1, "a"], None),
        ([2**70, 1], None),
        ([None, 1], None),
    ],
)
def test_labels_held_as_python_objects_save_when_all_of_one_kind(labels, want):
    from kernelcw._saved_values import plain_classes

    classes = np.array(labels, dtype=object)
    if want is None:
        with pytest.raises(ValueError, match="cannot save classes_"):
            plain_classes(classes)
        return
    out = plain_classes(classes)
    assert out.dtype.type is want  # (booleans as booleans: True == 1 would hide ints)
    back = out.astype(object).tolist()  # (as load makes them: Python values of the kind)
    kind = {np.bool_: bool, np.int64: int, np.float64: float, np.str_: str}[want]
    assert back == labels and all(type(v) is kind for v in back)


def test_save_refuses_parameters_load_would_refuse(tmp_path):
    """A parameter the model never reads may change (set_params), but an invalid value
    was written, and the file at the path replaced by one that does not load."""
    X, y = _data()
    est = SCWClassifier(kernel="rbf").fit(X, y)
    path = tmp_path / "m.kcw"
    kernelcw.save(est, path)
    before = path.read_bytes()
    for bad in (dict(degree=2.5), dict(budget_policy="bogus"), dict(C=-1.0)):
        est.set_params(**bad)
        with pytest.raises(ValueError, match="cannot save: "):
            kernelcw.save(est, path)
        est.set_params(**SCWClassifier(kernel="rbf").get_params())
    assert path.read_bytes() == before


@pytest.mark.parametrize("edited", [[1.0, np.nan], [np.nan, np.nan], [np.inf, 1.0]])
def test_labels_saved_as_objects_are_checked_as_the_others(edited, tmp_path):
    """Float labels held as Python objects (the river adapter's) skipped load's check
    for NaN and repeated labels: an edited file loaded classes_ [nan, nan]."""
    X, y = _data()
    est = AROWClassifier().fit(X, np.where(y == 1, 2.0, 1.0))
    est.classes_ = est.classes_.astype(object)  # (as the river adapter keeps them)
    path = tmp_path / "m.kcw"
    kernelcw.save(est, path)
    with zipfile.ZipFile(path) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    buf = io.BytesIO()
    np.lib.format.write_array(buf, np.array(edited), allow_pickle=False)
    members["classes_.npy"] = buf.getvalue()
    with zipfile.ZipFile(path, "w") as zf:
        for n, data in members.items():
            zf.writestr(zipfile.ZipInfo(n, date_time=(1980, 1, 1, 0, 0, 0)), data)
    with pytest.raises(ValueError, match="must be distinct, finite labels"):
        kernelcw.load(path)
