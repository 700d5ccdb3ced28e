"""kernelcw.combine against the dense natural-parameter formulas of doc/combination.md."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.metrics.pairwise import rbf_kernel

from kernelcw import (
    AROWClassifier,
    CWClassifier,
    PAClassifier,
    SCWClassifier,
    combine,
    primal_from_dual,
)
from kernelcw.budget import PROJECT_JITTER
from kernelcw.engines import engine_class
from kernelcw.engines.dual.combine_state import projections

# ---------------------------------------------------------------- the dense reference


def ref_combine(gaussians, method, a, weights=None, start=None):
    """(mu, Sigma) of the combination, by explicit inverses of dense matrices."""
    C = len(gaussians)
    w = np.ones(C) if weights is None else np.asarray(weights, float)
    d = gaussians[0][0].shape[0]
    if method == "average":
        mu = sum(wc * m for wc, (m, _) in zip(w, gaussians, strict=True)) / w.sum()
        return mu, sum(wc * s for wc, (_, s) in zip(w, gaussians, strict=True)) / w.sum()
    nat = [(np.linalg.inv(s), np.linalg.inv(s) @ m) for m, s in gaussians]
    if method == "kl":
        Lam = sum(wc * L for wc, (L, _) in zip(w, nat, strict=True)) / w.sum()
        h = sum(wc * hc for wc, (_, hc) in zip(w, nat, strict=True)) / w.sum()
    else:
        if start is None:
            L0, h0 = np.eye(d) / a, np.zeros(d)
        else:
            L0 = np.linalg.inv(start[1])
            h0 = L0 @ start[0]
        Lam = L0 + sum(wc * (L - L0) for wc, (L, _) in zip(w, nat, strict=True))
        h = h0 + sum(wc * (hc - h0) for wc, (_, hc) in zip(w, nat, strict=True))
    Sig = np.linalg.inv(Lam)
    return Sig @ h, Sig


def gaussian(model, k=None):
    """(mu, Sigma) of binary model k as dense arrays, any form."""
    if model._engine.spec.form == "dual":
        mu, S = primal_from_dual(model)
    else:
        mu, S = model.mean_, model.covariance_
        if S.ndim == mu.ndim:  # diagonal
            S = np.stack([np.diag(s) for s in np.atleast_2d(S)])
            S = S[0] if mu.ndim == 1 else S
    return (mu, S) if k is None else (mu[k], S[k])


def stream(n=150, d=4, classes=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    W = rng.standard_normal((d, classes))
    y = np.argmax(X @ W + 0.5 * rng.standard_normal((n, classes)), axis=1)
    if classes == 2:
        y = (X[:, 0] + 0.5 * rng.standard_normal(n) > 0).astype(int)
    return X, y


def fit_parts(make, X, y, C=3, classes=None):
    classes = np.unique(y) if classes is None else classes
    return [make().partial_fit(X[i::C], y[i::C], classes=classes) for i in range(C)]


def assert_matches(combined, parts, method, a, **kw):
    K = len(combined.classes_) if len(combined.classes_) > 2 else 1
    for k in range(K):
        kk = None if K == 1 else k
        ref_mu, ref_S = ref_combine([gaussian(p, kk) for p in parts], method, a, **kw)
        mu, S = gaussian(combined, kk)
        np.testing.assert_allclose(mu, ref_mu, atol=1e-10, rtol=1e-10)
        np.testing.assert_allclose(S, ref_S, atol=1e-10, rtol=1e-10)


# ---------------------------------------------------------------- against the formulas

MAKERS = {
    "dual": lambda: SCWClassifier(mode="dual", a=0.7),
    "full": lambda: SCWClassifier(covariance="full", a=0.7),
    "diag": lambda: AROWClassifier(covariance="diag", a=0.7, r=2.0),
}


@pytest.mark.parametrize("method", ["kl", "bayes", "average"])
@pytest.mark.parametrize("form", list(MAKERS))
@pytest.mark.parametrize("classes", [2, 3])
def test_combination_equals_the_dense_formulas(form, method, classes):
    X, y = stream(classes=classes)
    parts = fit_parts(MAKERS[form], X, y)
    before = [copy.deepcopy(p._engine.state_dict()) for p in parts]
    combined = combine(parts, method)
    assert type(combined) is type(parts[0]) and combined is not parts[0]
    assert_matches(combined, parts, method, 0.7)
    for p, st in zip(parts, before, strict=True):  # inputs untouched
        for key, v in p._engine.state_dict().items():
            np.testing.assert_array_equal(v, st[key])


def test_diagonal_models_trained_on_sparse_input_combine_per_feature():
    X, y = stream(d=6)
    X[:, 3] = 0.0  # a feature no part sees keeps s = a, mu = 0
    Xs = sp.csr_matrix(X)
    parts = fit_parts(lambda: CWClassifier(covariance="diag", a=0.5), Xs, y)
    combined = combine(parts, "kl")
    assert_matches(combined, parts, "kl", 0.5)
    assert combined.covariance_[3] == 0.5 and combined.mean_[3] == 0.0


@pytest.mark.parametrize("form", list(MAKERS))
def test_bayes_with_a_start_model_is_iterative_parameter_mixing(form):
    X, y = stream(n=200)
    start = MAKERS[form]().fit(X[:50], y[:50])
    parts = [copy.deepcopy(start).partial_fit(X[50 + i :: 3], y[50 + i :: 3]) for i in range(3)]
    combined = combine(parts, "bayes", start=start)
    assert_matches(combined, parts, "bayes", 0.7, start=gaussian(start))
    if form == "dual":  # the start's support vectors merge back to one copy each
        assert combined.n_support_ == sum(p.n_support_ for p in parts) - 2 * start.n_support_


def test_first_order_parts_average_their_means():
    X, y = stream()
    for make in (lambda: PAClassifier(mode="dual"), lambda: PAClassifier()):
        parts = fit_parts(make, X, y)
        mus = [gaussian(p)[0] for p in parts]
        for method in ("kl", "average"):
            np.testing.assert_allclose(gaussian(combine(parts, method))[0], np.mean(mus, 0))
        np.testing.assert_allclose(gaussian(combine(parts, "bayes"))[0], np.sum(mus, 0))


# ---------------------------------------------------------------- algebra


@pytest.mark.parametrize("form", list(MAKERS))
def test_combining_one_model_returns_it(form):
    X, y = stream()
    model = MAKERS[form]().fit(X, y)
    for method in ("kl", "bayes", "average"):
        out = combine([model], method)
        assert out is not model and out.get_params() == model.get_params()
        st0, st1 = model._engine.state_dict(), out._engine.state_dict()
        assert st0.keys() == st1.keys()
        for k in st0:
            np.testing.assert_array_equal(st0[k], st1[k])
    twice = combine([model, model], "kl")  # the same model twice: itself, to rounding
    np.testing.assert_allclose(
        twice.decision_function(X), model.decision_function(X), rtol=1e-9, atol=1e-10
    )


class _RecordedLock:
    """An engine's RLock that records its engine's name when taken."""

    def __init__(self, name, log):
        self.lock, self.name, self.log = __import__("threading").RLock(), name, log

    def __enter__(self):
        self.log.append(self.name)
        return self.lock.__enter__()

    def __exit__(self, *exc):
        return self.lock.__exit__(*exc)


def test_parts_are_locked_in_one_order_whatever_their_order():
    """combine([a, b]) in one thread and combine([b, a]) in another took the engines'
    locks in argument order: each held one and waited for the other, for good."""
    X, y = stream()
    a, b = (AROWClassifier(covariance="diag").fit(X[i::2], y[i::2]) for i in (0, 1))
    log: list = []
    for name, model in (("a", a), ("b", b)):
        model._engine.__dict__["_lock"] = _RecordedLock(name, log)
    combine([a, b])
    first = list(log)
    log.clear()
    combine([b, a])
    assert sorted(first) == ["a", "b"] and log == first


@pytest.mark.parametrize("method", ["kl", "bayes", "average"])
@pytest.mark.parametrize("form", list(MAKERS))
def test_the_tree_order_does_not_matter(form, method):
    X, y = stream(n=160)
    m1, m2, m3 = fit_parts(MAKERS[form], X, y)
    left = combine([combine([m1, m2], method), m3], method, weights=[2, 1])
    right = combine([m1, combine([m2, m3], method)], method, weights=[1, 2])
    flat = combine([m1, m2, m3], method)
    for out in (left, right):
        mu, S = gaussian(out)
        np.testing.assert_allclose(mu, gaussian(flat)[0], rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(S, gaussian(flat)[1], rtol=1e-10, atol=1e-10)


def test_combined_dual_model_keeps_learning_like_the_union_model():
    """Linear kernel: the combined dual model continues exactly as a primal full model
    built from the dense formula; RBF: as the union built in another order."""
    X, y = stream(n=240, classes=3)
    parts = fit_parts(MAKERS["dual"], X[:150], y[:150])
    combined = combine(parts, "kl")
    primal = MAKERS["full"]().partial_fit(X[:5], y[:5], classes=np.unique(y))
    spec = primal._engine.spec
    nat = [ref_combine([gaussian(p, k) for p in parts], "kl", 0.7) for k in range(3)]
    state = {"mean": np.stack([m for m, _ in nat]), "covariance": np.stack([s for _, s in nat])}
    primal._engine = engine_class("primal_full").from_state(spec, state)
    combined.partial_fit(X[150:], y[150:])
    primal.partial_fit(X[150:], y[150:])
    np.testing.assert_allclose(
        combined.decision_function(X), primal.decision_function(X), rtol=1e-8, atol=1e-8
    )
    rbf = fit_parts(lambda: SCWClassifier(kernel="rbf", gamma=0.3), X[:150], y[:150])
    a, b = combine(rbf, "kl"), combine(rbf[::-1], "kl")
    for m in (a, b):
        m.partial_fit(X[150:], y[150:])
    np.testing.assert_allclose(a.decision_function(X), b.decision_function(X), atol=1e-9)
    np.testing.assert_allclose(a.predict_proba(X), b.predict_proba(X), atol=1e-9)


@pytest.mark.parametrize("policy", ["oldest", "random", "smallest"])
def test_a_union_over_the_budget_is_pruned_with_the_models_policy(policy):
    X, y = stream(n=240)
    make = lambda: SCWClassifier(kernel="rbf", budget=25, budget_policy=policy)  # noqa: E731
    parts = fit_parts(make, X[:180], y[:180])
    assert sum(p.n_support_ for p in parts) > 25
    combined = combine(parts, "kl")
    assert combined.n_support_ == 25
    # pruned in the nu/Pi form; "random" then continues in its lazy Cholesky form,
    # "oldest" in the panel form, which binds into the queue
    want = {"oldest": "panels", "random": "lazy", "smallest": "explicit"}[policy]
    assert combined._engine.factor_forms() == [want]
    assert np.all(np.isfinite(combined.predict_proba(X)))
    combined.partial_fit(X[180:], y[180:])
    assert combined.n_support_ <= 25
    assert np.mean(combined.predict(X) == y) > 0.6


# ---------------------------------------------------------------- parts pruned by projection


def feature_gaussians(models, gamma, a):
    """Each binary model's (mu, Sigma) in one exact finite feature space: the span of
    every support vector of ``models`` (RBF features through the eigendecomposition of
    their Gram matrix, R R' = K), where Sigma = a I + F' Pi F, mu = F' nu."""
    svs = [[np.asarray(S) for S in m._engine.support_vectors()] for m in models]
    Z = np.unique(np.concatenate([S for ss in svs for S in ss]), axis=0)
    w, V = np.linalg.eigh(rbf_kernel(Z, gamma=gamma))
    R = V * np.sqrt(np.clip(w, 0.0, None))
    out = []
    for m, ss in zip(models, svs, strict=True):
        coefs = zip(ss, m._engine.dual_coef(), m._engine.covariance_coef(), strict=True)
        res = []
        for S, nu, Pi in coefs:
            F = R[[int(np.flatnonzero((Z == s).all(1))[0]) for s in S]]
            res.append((F.T @ nu, a * np.eye(len(Z)) + F.T @ Pi @ F))
        out.append(res)
    return out


def projected_parts(kernel, B=8, batch=1, classes=2, n=240):
    """Three parts, the last two pruned by projection (budget B, q = batch), the first
    with a budget its part never reaches: the combined model takes its budget."""
    X, y = stream(n=n, classes=classes)
    kw = {"a": 0.7, "budget_policy": "project"}
    kw.update({"mode": "dual"} if kernel == "linear" else {"kernel": "rbf", "gamma": 0.3})
    cl = np.unique(y)
    parts = [SCWClassifier(budget=500, **kw).partial_fit(X[0::3], y[0::3], classes=cl)]
    for i in (1, 2):
        m = SCWClassifier(budget=B, budget_batch=batch, **kw)
        parts.append(m.partial_fit(X[i::3], y[i::3], classes=cl))
    assert all(np.all(p.n_support_ <= B) for p in parts[1:])
    assert all(projections(f) > 0 for p in parts[1:] for f in p._engine.forms)
    return X, y, parts


@pytest.mark.parametrize("method", ["kl", "bayes", "average"])
@pytest.mark.parametrize("kernel, batch, classes", [("linear", 1, 3), ("rbf", 1, 2), ("rbf", 3, 2)])
def test_parts_pruned_by_projection_combine_exactly(kernel, batch, classes, method):
    """A projected part's precision is I/a + Phi X Phi' with X dense: the combination
    from nu and Pi equals the dense formulas (linear kernel: in the input space; RBF: in
    the exact feature space of all support vectors), and is a model of the "project"
    policy that carries the parts' projections."""
    X, y, parts = projected_parts(kernel, batch=batch, classes=classes)
    before = [copy.deepcopy(p._engine.state_dict()) for p in parts]
    combined = combine(parts, method)
    assert np.all(combined.n_support_ == sum(p.n_support_ for p in parts))  # disjoint parts
    if kernel == "linear":
        assert_matches(combined, parts, method, 0.7)
    else:
        g = feature_gaussians([*parts, combined], 0.3, 0.7)
        ref_mu, ref_S = ref_combine([gp[0] for gp in g[:3]], method, 0.7)
        np.testing.assert_allclose(g[3][0][0], ref_mu, atol=1e-10, rtol=1e-10)
        np.testing.assert_allclose(g[3][0][1], ref_S, atol=1e-10, rtol=1e-10)
    for f in combined._engine.forms:
        assert f.name == "explicit" and f.policy.name == "project" and f.policy.counter > 0
    for p, st in zip(parts, before, strict=True):  # inputs untouched
        for key, v in p._engine.state_dict().items():
            np.testing.assert_array_equal(v, st[key])


def test_a_combination_of_projected_parts_keeps_learning_like_the_dense_model():
    """Linear kernel: it continues exactly as a primal full model built from the dense
    formula (the budget, 500, is not reached)."""
    X, y, parts = projected_parts("linear", classes=3)
    combined = combine(parts, "kl")
    primal = MAKERS["full"]().partial_fit(X[:5], y[:5], classes=np.unique(y))
    nat = [ref_combine([gaussian(p, k) for p in parts], "kl", 0.7) for k in range(3)]
    state = {"mean": np.stack([m for m, _ in nat]), "covariance": np.stack([s for _, s in nat])}
    primal._engine = engine_class("primal_full").from_state(primal._engine.spec, state)
    Xn, yn = stream(n=90, classes=3, seed=5)
    np.testing.assert_allclose(
        combined.decision_function(X), primal.decision_function(X), rtol=1e-8, atol=1e-8
    )
    combined.partial_fit(Xn, yn)
    primal.partial_fit(Xn, yn)
    # a budgeted "project" model learns with the jittered kernel (k(x, x) times
    # 1 + PROJECT_JITTER): the primal model's to that
    want = primal.decision_function(X)
    tol = 1e3 * PROJECT_JITTER
    np.testing.assert_allclose(
        combined.decision_function(X), want, rtol=tol, atol=tol * np.abs(want).max()
    )


@pytest.mark.parametrize("method", ["kl", "average"])
def test_projected_parts_in_a_tree_combine_like_all_at_once(method):
    X, y, (m1, m2, m3) = projected_parts("rbf")
    flat = combine([m1, m2, m3], method)
    for out in (
        combine([combine([m1, m2], method), m3], method, weights=[2, 1]),
        combine([combine([m1, m3], method), m2], method, weights=[2, 1]),
    ):
        np.testing.assert_allclose(out.decision_function(X), flat.decision_function(X), atol=1e-10)
        np.testing.assert_allclose(out.predict_proba(X), flat.predict_proba(X), atol=1e-10)
    one = combine([flat])  # a combination of projected parts is itself combinable
    np.testing.assert_array_equal(one.decision_function(X), flat.decision_function(X))
    twice = combine([flat, flat], "kl")
    np.testing.assert_allclose(twice.decision_function(X), flat.decision_function(X), atol=1e-9)


def test_a_projected_union_over_the_budget_is_pruned_by_projection():
    X, y = stream(n=240)
    make = lambda: SCWClassifier(kernel="rbf", gamma=0.3, budget=10)  # noqa: E731
    parts = fit_parts(make, X[:180], y[:180])
    combined = combine(parts, "kl")
    form = combined._engine.forms[0]
    assert combined.n_support_ == 10 and form.policy.name == "project"
    assert form.policy.counter == sum(p._engine.forms[0].policy.counter for p in parts) + 20
    assert np.all(np.isfinite(combined.predict_proba(X)))
    combined.partial_fit(X[180:], y[180:])
    assert combined.n_support_ == 10
    assert np.mean(combined.predict(X) == y) > 0.7


def test_projected_parts_need_a_result_that_projects():
    X, y, parts = projected_parts("rbf")
    for first in (
        SCWClassifier(kernel="rbf", gamma=0.3, a=0.7),
        SCWClassifier(kernel="rbf", gamma=0.3, a=0.7, budget=500, budget_policy="oldest"),
    ):
        first.fit(X[:20], y[:20])
        with pytest.raises(ValueError, match=r"estimators\[1\] was pruned by projection"):
            combine([first, *parts[1:]])


def test_bayes_from_a_start_that_the_parts_projected_away_is_refused():
    """Each part's change is then not a precision gained: the sum is no Gaussian."""
    X, y = stream(n=240)
    start = SCWClassifier(kernel="rbf", gamma=0.3, a=0.7, budget=20).fit(X[:60], y[:60])
    parts = [copy.deepcopy(start).partial_fit(X[60 + i :: 3], y[60 + i :: 3]) for i in range(3)]
    with pytest.raises(ValueError, match="not positive definite"):
        combine(parts, "bayes", start=start)


# ---------------------------------------------------------------- refusals


def test_mismatches_are_named():
    X, y = stream()
    base = SCWClassifier(kernel="rbf", gamma=0.5).fit(X, y)
    cases = {
        "SCWClassifier": CWClassifier(kernel="rbf", gamma=0.5).fit(X, y),
        "rule": SCWClassifier(variant=2, kernel="rbf", gamma=0.5).fit(X, y),
        "kernel": SCWClassifier(kernel="laplacian", gamma=0.5).fit(X, y),
        "kernel gamma": SCWClassifier(kernel="rbf", gamma=0.1).fit(X, y),
        "'a'|a ": SCWClassifier(kernel="rbf", gamma=0.5, a=2.0).fit(X, y),
        "form": SCWClassifier(gamma=0.5).fit(X, y),
        "classes_": SCWClassifier(kernel="rbf", gamma=0.5).fit(X, np.where(y == 1, 5, 0)),
        "n_features_in_": SCWClassifier(kernel="rbf", gamma=0.5).fit(X[:, :3], y),
    }
    for what, other in cases.items():
        with pytest.raises(ValueError, match=what):
            combine([base, other])
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        combine([base, SCWClassifier(kernel="rbf", gamma=0.5)])
    with pytest.raises(ValueError, match="method"):
        combine([base], "median")
    with pytest.raises(ValueError, match="start"):
        combine([base, base], "kl", start=base)
    with pytest.raises(ValueError, match="weights"):
        combine([base, base], weights=[1, -1])
    with pytest.raises(TypeError):
        combine([base, object()])


@pytest.mark.parametrize("kw", [{}, {"covariance": "diag"}, {"kernel": "rbf"}])
def test_parts_with_other_feature_names_are_refused(kw):
    """Parts fitted on frames whose columns differ (another order, another name, or
    names in one part only) are refused with both parts and the difference named,
    start= included; parts of the same columns combine into a model that carries
    their feature_names_in_ and checks frames as any fitted estimator does."""
    pd = pytest.importorskip("pandas")
    X, y = stream(n=240)
    df = pd.DataFrame(X, columns=list("abcd"))
    make = lambda: SCWClassifier(**kw)  # noqa: E731
    p0, p1 = make().fit(df[:120], y[:120]), make().fit(df[120:], y[120:])
    reordered = make().fit(df[120:][list("dcba")], y[120:])
    renamed = make().fit(df[120:].rename(columns={"d": "e"}), y[120:])
    unnamed = make().fit(X[120:], y[120:])
    cases = [
        ([p0, reordered], r"estimators\[1\] has feature_names_in_ \['d', 'c', 'b', 'a'\].*"
         r"estimators\[0\] has \['a', 'b', 'c', 'd'\].*another order"),
        ([p0, p1, renamed], r"estimators\[2\].*only in estimators\[2\]: \['e'\].*\['d'\]"),
        ([p0, unnamed], r"estimators\[0\] was fitted with feature names.*estimators\[1\] "
         "without"),
        ([unnamed, p0], r"estimators\[1\] was fitted with feature names.*estimators\[0\] "
         "without"),
    ]  # fmt: skip
    for parts, match in cases:
        with pytest.raises(ValueError, match=match):
            combine(parts)
    with pytest.raises(ValueError, match=r"start.*another order"):
        combine([p0, p1], "bayes", start=reordered)
    combined = combine([p0, p1])
    assert combined.feature_names_in_.tolist() == list("abcd")
    with pytest.raises(ValueError, match="same order"):
        combined.predict(df[list("dcba")])
    plain = combine([make().fit(X[:120], y[:120]), unnamed])  # the same model, unnamed
    assert not hasattr(plain, "feature_names_in_")
    np.testing.assert_allclose(  # to rounding: a frame's values arrive column-major
        combined.decision_function(df), plain.decision_function(X), rtol=1e-12, atol=1e-12
    )


def test_kernelcw_combine_is_the_function_whatever_was_imported_first():
    import kernelcw
    import kernelcw.combination
    import kernelcw.distributed  # noqa: F401  (imports kernelcw.combination)

    assert kernelcw.combine is combine is kernelcw.combination.combine


@pytest.mark.parametrize("method", ["kl", "bayes", "average"])
def test_repeated_inputs_merge_exactly_and_keep_their_entry_order(method):
    """An input that entered twice (two passes, and a row repeated in the data) is one
    support vector of the union, with its terms added."""
    X, y = stream(n=60)
    X = np.vstack([X, X[:5]])
    y = np.concatenate([y, y[:5]])
    make = lambda: SCWClassifier(mode="dual", a=0.7, n_iter=2)  # noqa: E731
    parts = [make().fit(X[i::2], y[i::2]) for i in range(2)]
    combined = combine(parts, method)
    assert_matches(combined, parts, method, 0.7)
    sv = combined.support_vectors_
    assert len({r.tobytes() for r in sv}) == sv.shape[0]
    first = parts[0].support_vectors_
    keys = [r.tobytes() for r in first]
    expected = [k for i, k in enumerate(keys) if k not in keys[:i]]
    assert [r.tobytes() for r in sv[: len(expected)]] == expected


@pytest.mark.parametrize("kw", [{}, {"covariance": "diag"}, {"kernel": "rbf"}])
def test_intercept_models_combine_and_a_mismatch_is_named(kw):
    import kernelcw
    from kernelcw import SCWClassifier

    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 4)) + 2.0
    y = (X[:, 0] > 2.0).astype(int)
    a = SCWClassifier(fit_intercept=True, **kw).fit(X[:100], y[:100])
    b = SCWClassifier(fit_intercept=True, **kw).fit(X[100:], y[100:])
    c = kernelcw.combine([a, b], method="average")
    assert np.all(np.isfinite(c.intercept_)) and np.any(c.intercept_ != 0.0)
    if not kw:  # the intercept is the constant feature's weight: averaged with the rest
        np.testing.assert_allclose(c.intercept_, (a.intercept_ + b.intercept_) / 2, rtol=1e-12)
    with pytest.raises(ValueError, match="intercept"):
        kernelcw.combine([a, SCWClassifier(**kw).fit(X[100:], y[100:])])


@pytest.mark.parametrize("method", ["kl", "average"])
def test_random_union_over_the_budget_keeps_its_model_in_the_lazy_form(method, monkeypatch):
    """A "random" union pruned to its budget: given by natural parameters ("kl") it
    continues in the lazy Cholesky form, the same model as in the nu/Pi form; an
    "average" model (nu and Pi, no such form) stays as it was averaged and pruned."""
    from kernelcw.engines.dual import convert

    X, y = stream(n=240)
    make = lambda: SCWClassifier(kernel="rbf", budget=25, budget_policy="random")  # noqa: E731
    parts = fit_parts(make, X[:180], y[:180])
    combined = combine(parts, method)
    with monkeypatch.context() as m:
        m.setattr(convert, "LAZY_POLICIES", ())
        ref = combine(parts, method)
    assert ref._engine.factor_forms() == ["explicit"]
    want = "lazy" if method == "kl" else "explicit"
    assert combined._engine.factor_forms() == [want]
    np.testing.assert_allclose(
        combined.decision_function(X), ref.decision_function(X), rtol=1e-9, atol=1e-10
    )


@pytest.mark.parametrize("method", ["kl", "bayes"])
def test_an_average_union_is_combined_again_from_nu_and_pi_or_refused(method):
    """An "average" union is nu and Pi alone: its zsv and gsv are its parts' sums,
    which do not describe it, so "kl" and "bayes" must not add them up (they did:
    0.05 off the dense formulas in mu). Into a budgeted "project" model it is combined
    from nu and Pi, exactly; otherwise refused by name. "average" of it stays open."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((60, 3))
    y = (X[:, 0] > 0).astype(int)
    for kw in ({}, {"budget": 500, "budget_policy": "project"}):
        m1, m2, m3 = (
            SCWClassifier(kernel="linear", mode="dual", a=0.7, **kw).fit(
                X[i : i + 20], y[i : i + 20]
            )
            for i in (0, 20, 40)
        )
        u = combine([m1, m2], "average")
        assert u._engine.nu_pi_models
        if not kw:
            with pytest.raises(ValueError, match=r"estimators\[0\] is a combination by"):
                combine([u, m3], method)
            assert_matches(combine([u, m3], "average"), [u, m3], "average", 0.7)
            continue
        assert_matches(combine([u, m3], method), [u, m3], method, 0.7)


def test_an_oldest_union_over_the_budget_binds_into_the_queue(monkeypatch):
    """An "oldest" union of natural parameters pruned to its budget returns to the
    panel form (removals unlearn exactly), so its budget binds into the queue as a
    fitted model's does (it stayed in the nu/Pi form, walked round by round: 0.47
    against 0.16 s for 3,000 rows at B = 1000, by hand): the same model to rounding."""
    from kernelcw.engines.dual import combine_state

    X, y = stream(n=400, d=4)
    make = lambda: SCWClassifier(kernel="rbf", gamma=0.3, budget=20,  # noqa: E731
                                 budget_policy="oldest")  # fmt: skip
    parts = fit_parts(make, X[:150], y[:150])
    union = combine(parts, "kl")
    assert union.n_support_ == 20 and union._engine.factor_forms() == ["panels"]
    monkeypatch.setattr(combine_state, "_as_panels", lambda form, eng: form)
    nu_pi = combine(parts, "kl")
    assert nu_pi._engine.factor_forms() == ["explicit"]
    np.testing.assert_allclose(union.decision_function(X), nu_pi.decision_function(X),
                               rtol=1e-10, atol=1e-12)  # fmt: skip
    for m in (union, nu_pi):
        m.partial_fit(X[150:], y[150:])
    assert union._engine.factor_forms() == ["queue"]
    np.testing.assert_array_equal(union.support_, nu_pi.support_)
    rel = np.linalg.norm(union.dual_coef_ - nu_pi.dual_coef_) / np.linalg.norm(nu_pi.dual_coef_)
    assert rel < 1e-9


def test_a_union_that_does_not_factor_says_it_removes_one_at_a_time(monkeypatch):
    """Where the union's precision does not factor (explicit_to_pruned: None), it
    stays in the nu/Pi form, removing one at a time, and a RuntimeWarning says so."""
    from kernelcw.engines.dual import combine_state

    monkeypatch.setattr(combine_state, "explicit_to_pruned", lambda *args: None)
    X, y = stream(n=200, d=4)
    make = lambda: SCWClassifier(kernel="rbf", budget=20, budget_policy="smallest",  # noqa: E731
                                 budget_batch=3)  # fmt: skip
    parts = fit_parts(make, X[:150], y[:150])
    with pytest.warns(RuntimeWarning, match="not budget_batch=3"):
        union = combine(parts, "kl")
    assert union._engine.factor_forms() == ["explicit"]


@pytest.mark.parametrize("budget", [None, 20])
def test_an_explicit_solver_union_walks_nu_pi_and_reloads_exactly(budget, tmp_path):
    """With solver="explicit" a "kl" union (natural parameters) is in the explicit
    form, walked round by round as the solver promises (it was the panel form, then a
    blocked nu/Pi walk that a saved and loaded copy did not take: 1e-14 to 1e-12
    apart), and a saved and loaded union continues bit for bit in calls of any size."""
    import kernelcw

    X, y = stream(n=300, d=4)
    p = dict(kernel="rbf", gamma=0.3, solver="explicit", budget=budget, budget_policy="smallest")
    union = combine([SCWClassifier(**p).fit(X[a : a + 50], y[a : a + 50]) for a in (0, 50)], "kl")
    assert union._engine.factor_forms() == ["explicit"]
    assert not union._engine.forms[0].blocked
    kernelcw.save(union, tmp_path / "u.npz")
    loaded = kernelcw.load(tmp_path / "u.npz")
    for lo in range(100, 300, 37):
        union.partial_fit(X[lo : lo + 37], y[lo : lo + 37])
        loaded.partial_fit(X[lo : lo + 37], y[lo : lo + 37])
    for name in ("support_", "dual_coef_", "covariance_coef_"):
        np.testing.assert_array_equal(getattr(loaded, name), getattr(union, name), err_msg=name)


@pytest.mark.parametrize("policy", ["oldest", "random", "smallest", "project"])
def test_a_panel_model_of_the_explicit_solver_binds_into_nu_pi(policy):
    """A union saved before combine put solver="explicit" models in the explicit form
    is a panel model of that solver: its budget binds into the nu/Pi form walked round
    by round ("oldest" went to the Cholesky queue), the model a solver="explicit" fit
    makes, to rounding."""
    import dataclasses

    from kernelcw.engines.dual import DualEngine

    X, y = stream(n=200, d=4)
    p = dict(kernel="rbf", gamma=0.3, budget=20, budget_policy=policy, random_state=0)
    est = SCWClassifier(**p).partial_fit(X[:20], y[:20], classes=[0, 1])
    assert est._engine.factor_forms() == ["panels"]
    spec = dataclasses.replace(est._engine.spec, solver="explicit")
    est._engine = DualEngine.from_state(spec, est._engine.state_dict())  # (as loaded)
    est.set_params(solver="explicit")
    est._began_with = est._structure()
    est.partial_fit(X[20:], y[20:])
    assert est._engine.factor_forms() == ["explicit"]
    assert not est._engine.forms[0].blocked
    ref = SCWClassifier(**p, solver="explicit").partial_fit(X[:20], y[:20], classes=[0, 1])
    ref.partial_fit(X[20:], y[20:])
    np.testing.assert_array_equal(est.support_, ref.support_)
    rel = np.linalg.norm(est.dual_coef_ - ref.dual_coef_) / np.linalg.norm(ref.dual_coef_)
    assert rel < 1e-9


@pytest.mark.parametrize("policy", ["oldest", "random", "smallest", "project"])
def test_a_union_over_the_budget_keeps_its_budget_batch(policy, tmp_path):
    """A union pruned to its budget at combine time (one support vector at a time, by
    the policy) then removes budget_batch = 3 at a time when its budget overflows, as
    the same model fitted would (the batch-pruned form; it had stayed in the nu/Pi
    form, removing one at a time), and reloads exactly."""
    import kernelcw

    X, y = stream(n=400, d=4)
    make = lambda: SCWClassifier(kernel="rbf", budget=20, budget_policy=policy,  # noqa: E731
                                 budget_batch=3, random_state=0)  # fmt: skip
    union = combine(fit_parts(make, X[:150], y[:150]), "kl")
    assert union.n_support_ == 20
    assert union._engine.factor_forms() == ["pruned"]
    kernelcw.save(union, tmp_path / "u.npz")
    loaded = kernelcw.load(tmp_path / "u.npz")
    sizes = set()
    for i in range(150, 400):
        union.partial_fit(X[i : i + 1], y[i : i + 1])
        sizes.add(union.n_support_)
    assert max(sizes) == 20 and 18 in sizes  # (21 - 3 after an overflow)
    loaded.partial_fit(X[150:], y[150:])
    np.testing.assert_array_equal(loaded.support_, union.support_)
    rel = np.linalg.norm(loaded.dual_coef_ - union.dual_coef_) / np.linalg.norm(union.dual_coef_)
    assert rel < 1e-9


@pytest.mark.parametrize("method", ["average", "kl"])
def test_a_smallest_union_learns_alike_however_the_calls_are_cut(method, tmp_path):
    """A "smallest" union continues to the same model whether its rows come one per
    call, in blocks or in one call: an "average" union, whose zeta and g do not
    describe its nu and Pi, walks round by round with the Gram matrix's scores (the
    blocked walk's scores from Pi's diagonal, zeta and g chose other victims: 1.4
    relative apart in dual_coef_ against one-row calls); a "kl" union takes the
    blocked walk for its blocks. A saved and loaded union continues alike."""
    import kernelcw

    rng = np.random.default_rng(3)
    X = rng.normal(size=(600, 5))
    y = (np.abs(X[:, 0] * X[:, 1]) + 0.5 * X[:, 2] > 0.6).astype(int)

    def make(**kw):
        return SCWClassifier(kernel="rbf", gamma=0.2, budget=25, budget_policy="smallest",
                             random_state=0, **kw)  # fmt: skip

    union = combine([make().fit(X[:150], y[:150]), make().fit(X[150:300], y[150:300])], method)
    assert union._engine.nu_pi_models == (method == "average")
    whole = copy.deepcopy(union).partial_fit(X[300:], y[300:])
    rows = copy.deepcopy(union)
    for i in range(300, 600):
        rows.partial_fit(X[i : i + 1], y[i : i + 1])
    blocks = copy.deepcopy(union).set_params(block_size=7)
    for lo in range(300, 600, 40):
        blocks.partial_fit(X[lo : lo + 40], y[lo : lo + 40])
    kernelcw.save(union, tmp_path / "union.npz")
    loaded = kernelcw.load(tmp_path / "union.npz")
    for i in range(300, 600, 3):
        loaded.partial_fit(X[i : i + 3], y[i : i + 3])
    for other in (rows, blocks, loaded):
        np.testing.assert_array_equal(other.support_, whole.support_)
        for name in ("dual_coef_", "covariance_coef_"):
            got, want = getattr(other, name), getattr(whole, name)
            assert np.linalg.norm(got - want) <= 1e-10 * np.linalg.norm(want), name


@pytest.mark.parametrize("method", ["kl", "average"])
def test_an_averaged_union_is_never_rebuilt_from_zeta_and_g(method):
    """An "average" union is given by nu and Pi: were its nu/Pi walk to fail later, the
    factor form rebuilt from its zeta, g and K would be the "kl" model, another model.
    So stabilise refuses it (the error stands) and the engine remembers why, saved and
    loaded; a "kl" union can be rebuilt."""
    from kernelcw.engines.dual import DualEngine

    X, y = stream(n=240)
    make = lambda: SCWClassifier(kernel="rbf", budget=25, budget_policy="smallest")  # noqa: E731
    combined = combine(fit_parts(make, X[:180], y[:180]), method)
    eng = combined._engine
    assert eng.factor_forms() == ["explicit"]
    assert eng.nu_pi_models == (method == "average")
    before = eng.state_dict()
    assert eng.stabilise() == (method == "kl")
    if method == "average":
        assert eng.factor_forms() == ["explicit"]
        for k, v in before.items():
            np.testing.assert_array_equal(eng.state_dict()[k], v, err_msg=k)
    back = DualEngine.from_state(eng.spec, eng.state_dict())
    assert back.nu_pi_models == eng.nu_pi_models


@pytest.mark.parametrize(("budget", "q"), [(30, 1), (30, 3), (500, 1)])
def test_project_parts_combine_in_their_jittered_kernel_once(budget, q):
    """Budgeted "project" parts learn with the jittered kernel (k(x, x) times
    1 + PROJECT_JITTER): their combination keeps it, jittered once."""
    X, y = stream(n=300)
    parts = [
        SCWClassifier(kernel="rbf", gamma=0.3, budget=budget, budget_batch=q).fit(
            X[i * 100 : (i + 1) * 100], y[i * 100 : (i + 1) * 100]
        )
        for i in range(3)
    ]
    for method in ("kl", "average"):
        combined = combine(parts, method)
        eng = combined._engine
        assert eng.store.jitter == PROJECT_JITTER
        f = eng.forms[0]
        plain = eng.store.kernel.diag(eng.store.rows[f.idx])
        np.testing.assert_allclose(f.kap, plain * (1.0 + PROJECT_JITTER), rtol=1e-15)
        n = f.n
        if hasattr(f, "projects"):  # the batch-pruned form (q > 1): its Gram cache is Kj
            assert f.projects and q > 1
            np.testing.assert_array_equal(np.diagonal(f.G[:n, :n]), f.kap)
        elif hasattr(f, "policy"):  # the nu/Pi form: its inverse Gram matrix is Kj's
            low = np.tril(f.policy.kinv[:n, :n])
            Kj = f.policy.G[:n, :n]
            assert np.abs(Kj @ (low + np.tril(low, -1).T) - np.eye(n)).max() < 1e-8
            np.testing.assert_array_equal(np.diagonal(Kj), f.kap)


def test_stabilised_combination_of_projected_parts_saves_and_loads(tmp_path):
    """A combination's projected slots have no zeta (0); moved to the pruned form
    (stabilise, from nu and Pi) the model still saves, loads and learns."""
    import kernelcw

    X, y = stream(n=300)
    parts = fit_parts(lambda: SCWClassifier(kernel="rbf", gamma=0.3, budget=30), X, y)
    combined = combine(parts, "kl")
    assert combined._engine.factor_forms() == ["explicit"]
    assert combined._engine.stabilise()
    assert combined._engine.factor_forms() == ["pruned"]
    kernelcw.save(combined, tmp_path / "m.kcw")
    back = kernelcw.load(tmp_path / "m.kcw")
    np.testing.assert_array_equal(back.decision_function(X), combined.decision_function(X))
    back.partial_fit(X[:50], y[:50])
    combined.partial_fit(X[:50], y[:50])
    np.testing.assert_array_equal(back.decision_function(X), combined.decision_function(X))


def test_counters_of_a_shared_prior_combination_count_the_start_once():
    """Every part continued ``start``, so each part's counters include the start's:
    the combination's are start + sum(part - start) (they once counted the start once
    per part, and CombinedClassifier's later epochs grew them geometrically)."""
    rng = np.random.default_rng(5)
    X = rng.normal(size=(90, 4))
    y = (X[:, 0] > 0).astype(int)
    start = SCWClassifier().fit(X[:30], y[:30])
    parts = [
        copy.deepcopy(start).partial_fit(X[lo : lo + 20], y[lo : lo + 20]) for lo in (30, 50, 70)
    ]
    out = combine(parts, "bayes", start=start)
    for name in ("n_updates_", "n_mistakes_", "n_variance_floored_"):
        expected = getattr(start, name) + sum(
            getattr(p, name) - getattr(start, name) for p in parts
        )
        assert getattr(out, name) == expected, name
    assert out.n_mistakes_ <= 90


@pytest.mark.parametrize("form", ["full", "diag", "dual"])
@pytest.mark.parametrize(
    "weights", [[2.0**1021, 2.0**1021, 2.0**1020], [2.0**-1070, 2.0**-1070, 2.0**-1071]]
)
def test_extreme_weights_combine_as_their_ratios(form, weights):
    """Only the weights' ratios matter: weights near float64's largest or in its
    subnormal range, in the ratios 2 : 2 : 1, give the model of [2, 2, 1] bit for bit
    (their sum once overflowed to a prior model or NaN, or lost digits)."""
    rng = np.random.default_rng(6)
    X = rng.normal(size=(60, 3))
    y = (X[:, 0] + X[:, 1] > 0).astype(int)
    make = {
        "full": lambda: SCWClassifier(),
        "diag": lambda: SCWClassifier(covariance="diag"),
        "dual": lambda: SCWClassifier(kernel="rbf", gamma=0.5),
    }[form]
    parts = [make().fit(X[lo : lo + 20], y[lo : lo + 20]) for lo in (0, 20, 40)]
    for method in ("kl", "average"):
        ref = combine(parts, method, weights=[2, 2, 1])
        out = combine(parts, method, weights=weights)
        np.testing.assert_array_equal(out.decision_function(X), ref.decision_function(X))
        assert np.all(np.isfinite(out.predict_proba(X)))


def test_parts_of_other_classes_are_named_by_their_classes():
    rng = np.random.default_rng(7)
    X = rng.normal(size=(60, 3))
    two = SCWClassifier().fit(X, (X[:, 0] > 0).astype(int))
    three = SCWClassifier().fit(X, np.digitize(X[:, 0], [-0.5, 0.5]))
    with pytest.raises(ValueError, match=r"estimators\[1\] has classes_ array\(\[0, 1, 2\]\)"):
        combine([two, three])


def test_bayes_parts_that_did_not_start_from_start_are_refused():
    """The shared-prior rule subtracts start from each part: a part trained from the
    prior instead gave a model with negative counters (PA: n_updates_ -84)."""
    X, y = stream()
    start = PAClassifier().fit(X[:100], y[:100])
    part = PAClassifier().fit(X[100:130], y[100:130])  # (from the prior, 30 rows)
    good = copy.deepcopy(start).partial_fit(X[130:], y[130:])
    with pytest.raises(ValueError, match=r"estimators\[1\] did not start from start: its n_"):
        combine([good, part], "bayes", start=start)
    out = combine([good, copy.deepcopy(start)], "bayes", start=start)
    assert out.n_updates_ == good.n_updates_


def test_what_is_wrong_with_a_part_is_said_of_that_part():
    """An unfitted part, weights that are not numbers, rules that differ (by name, not
    code), and a weight too small for float64 against another's (scikit-learn's and
    scipy's messages named none of these)."""
    from sklearn.exceptions import NotFittedError

    X, y = stream()
    a = SCWClassifier(kernel="rbf", gamma=0.3).fit(X[:60], y[:60])
    b = SCWClassifier(kernel="rbf", gamma=0.3).fit(X[60:120], y[60:120])
    with pytest.raises(NotFittedError, match=r"estimators\[1\] is not fitted"):
        combine([a, SCWClassifier(kernel="rbf", gamma=0.3)])
    with pytest.raises(ValueError, match="weights must be 2 finite positive numbers"):
        combine([a, b], weights=["a", "b"])
    with pytest.raises(ValueError, match="weights must be 2 finite positive numbers"):
        combine([a, b], weights=[True, True])  # (a mask, not weights)
    other = SCWClassifier(variant=2, kernel="rbf", gamma=0.3).fit(X[:60], y[:60])
    with pytest.raises(ValueError, match=r"has rule 'SCW2' but estimators\[0\] has 'SCW1'"):
        combine([a, other])
    with pytest.raises(ValueError, match="too small for float64"):
        combine([a, b], "kl", weights=[1e-310, 1.0])


def test_a_full_covariance_part_that_did_not_start_from_start_is_refused():
    """Parts trained from the prior (not from start) with a start fitted on 20 other
    rows combined into a worse model, silently: a part's covariance is at most its
    start's, since learning only adds precision."""
    from kernelcw import SCWClassifier

    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 4))
    y = (X[:, 0] > 0).astype(int)
    make = lambda: SCWClassifier(covariance="full", fit_intercept=True)  # noqa: E731
    start = make().fit(-X[:20], y[:20])  # (its counters: no more than the parts')
    parts = [make().fit(X[20 + i :: 2], y[20 + i :: 2]) for i in (0, 1)]
    with pytest.raises(ValueError, match=r"estimators\[0\] did not start from start: its cov"):
        combine(parts, "bayes", start=start)
    good = [copy.deepcopy(start).partial_fit(X[20 + i :: 2], y[20 + i :: 2]) for i in (0, 1)]
    model = combine(good, "bayes", start=start)  # (parts that continued it)
    # (the shared-prior rule's model is at least as good as either part on its rows)
    assert model.score(X[20:], y[20:]) >= min(p.score(X[20:], y[20:]) for p in good)


def test_the_parts_are_checked_again_under_their_locks(monkeypatch):
    """A fit of a part between the checks and the locks (another thread) combined
    models of prior scales 1 and 50."""
    import kernelcw.combination as kc
    from kernelcw import SCWClassifier

    rng = np.random.default_rng(0)
    X = rng.standard_normal((100, 4))
    y = (X[:, 0] > 0).astype(int)
    a = SCWClassifier(covariance="full").fit(X[:50], y[:50])
    b = SCWClassifier(covariance="full").fit(X[50:], y[50:])
    real, calls = kc.check_parts, []

    def refit_meanwhile(*args):
        out = real(*args)
        if not calls:
            calls.append(1)
            b.set_params(a=50.0).fit(-X[50:], y[50:])
        return out

    monkeypatch.setattr(kc, "check_parts", refit_meanwhile)
    with pytest.raises(ValueError, match=r"estimators\[1\] has a 50.0"):
        combine([a, b], "kl")


def _quadratic(A, B):
    return (A @ B.T + 1.0) ** 2


_SCALE = 1.0


def _scaled(A, B):
    return _SCALE * (A @ B.T)


def test_copies_of_one_kernel_function_combine():
    """dask sends each part its own copy of a kernel function defined in a script (or
    a lambda): the copies were refused as different functions after every part had
    trained. Copies combine; another function is still refused."""
    import types

    from kernelcw import SCWClassifier

    rng = np.random.default_rng(0)
    X = rng.standard_normal((80, 3))
    y = (X[:, 0] > 0).astype(int)
    f = _quadratic
    twin = types.FunctionType(f.__code__, f.__globals__, f.__name__, f.__defaults__)
    twin.__qualname__ = f.__qualname__
    a = SCWClassifier(kernel=f).fit(X[:40], y[:40])
    b = SCWClassifier(kernel=twin).fit(X[40:], y[40:])
    want = combine([a, SCWClassifier(kernel=f).fit(X[40:], y[40:])])
    np.testing.assert_array_equal(combine([a, b]).decision_function(X), want.decision_function(X))
    other = SCWClassifier(kernel=lambda A, B: (A @ B.T) ** 2).fit(X[40:], y[40:])
    with pytest.raises(ValueError, match=r"estimators\[1\] has kernel function"):
        combine([a, other])


def test_same_function_tells_copies_from_other_functions():
    """Copies of one function (dask's, of a closure over an array or a partial) are one
    function; kwdefaults or the globals the code reads make another (a review found both
    taken as the same kernel)."""
    import functools
    import types

    from kernelcw._combine_checks import same_value as _same_function

    def copy_of(f):
        g = types.FunctionType(f.__code__, f.__globals__, f.__name__, f.__defaults__,
                               f.__closure__)  # fmt: skip
        g.__kwdefaults__, g.__qualname__ = f.__kwdefaults__, f.__qualname__
        return g

    def make(gamma):
        def k(A, B, *, g=gamma):
            return np.exp(-g * ((A[:, None] - B[None]) ** 2).sum(-1))

        return k

    assert _same_function(make(0.1), copy_of(make(0.1)))
    assert not _same_function(make(0.1), make(50.0))

    def weighting(w):
        def weighted(A, B):
            return (A * w) @ B.T

        return weighted

    assert _same_function(weighting(np.arange(3.0)), copy_of(weighting(np.arange(3.0))))
    assert not _same_function(weighting(np.arange(3.0)), weighting(np.ones(3)))
    part = functools.partial(_quadratic)
    assert _same_function(part, functools.partial(copy_of(_quadratic)))
    assert _same_function(_scaled, copy_of(_scaled))
    moved = types.FunctionType(_scaled.__code__, {**_scaled.__globals__, "_SCALE": 100.0})
    moved.__qualname__ = _scaled.__qualname__
    assert not _same_function(_scaled, moved)  # (reads another _SCALE)
