"""The dual (kernel) engine against the slow NumPy reference (tests/reference_dual.py).

Every rule x kernel (rbf, poly degree 2 and 3, laplacian, linear via mode="dual", a
callable, precomputed) x solver ("explicit", "cholesky") on noisy streams: identical
per-round predictions (``run_online``), identical update/mistake counts and support sets,
``dual_coef_`` (nu) and ``covariance_coef_`` (Pi) within a norm-relative ``RTOL`` = 1e-8,
and ``decision_function`` / ``predict_proba`` on new data equal to the reference's
nu . k and Phi(f / sqrt(a k(x, x) + k' Pi k)). Also: block sizes, partial_fit chunks,
two passes, pickling mid-stream, the linear kernel against the primal full-covariance
learner, the degree-2 polynomial kernel against the primal learner on the explicit
feature map, the scale invariances (Lemma 3), one-vs-rest and kernels that are not
positive semi-definite; and self-checks of the reference.

Conditioning. nu and Pi are compared at RTOL only where the problem is well posed: the
reference's M = D^-1 + a K(S, S) (D = diag(zeta), Pi = -a^2 M^-1, doc/dual-form.md section 2)
must have a condition number below ``COND_MAX`` (asserted, so a stream that is not well
conditioned fails loudly instead of being skipped). On every stream used here it is below
3e4 (measured: fast and reference differ by at most 5e-12 relative). First-order rules
keep Pi = 0 (compared exactly) and nu is a plain list of steps.
"""

from __future__ import annotations

import contextlib
import functools
import math
import pickle
import warnings

import helpers
import numpy as np
import pytest
import reference as ref
import reference_dual as rd
from scipy.special import ndtr
from scipy.stats import norm
from threadpoolctl import threadpool_limits

from kernelcw import (
    primal_from_dual,
    run_online,
)
from kernelcw.estimators._proba import multiclass_proba

RTOL = 1e-8  # fast vs reference: nu, Pi, primal mu and Sigma (norm-relative)
RTOL_SELF = 1e-10  # the fast engine against itself (block sizes, chunks, pickling)
COND_MAX = 1e6  # premise of the RTOL comparison of nu and Pi (see the module docstring)

ALL_RULES = ref.ALL_RULES
SECOND_ORDER = ref.SECOND_ORDER_RULES
SOLVERS = ("explicit", "cholesky")
A = helpers.A

# As tests/test_primal_reference.py (non-default values so that a parameter that is not
# passed through shows up). On the streams below the reference never floors v.
RULE_PARAMS = helpers.RULE_PARAMS


def cauchy(A, B):
    """A callable kernel: 1 / (1 + 0.1 |x - z|^2) (positive definite: a scale mixture of
    Gaussians)."""
    D = np.sum((A[:, None, :] - B[None, :, :]) ** 2, axis=-1)
    return 1.0 / (1.0 + 0.1 * D)


PRE_GAMMA = 0.15  # "precomputed": rows of the rbf Gram matrix with this gamma
KERNEL_CASES = {
    "rbf": dict(kernel="rbf", gamma=0.1),
    "poly2": dict(kernel="poly", degree=2, gamma=0.2, coef0=1.0),
    "poly3": dict(kernel="poly", degree=3, gamma=0.1, coef0=1.0),
    "laplacian": dict(kernel="laplacian", gamma=0.1),
    "linear": dict(kernel="linear", mode="dual"),
    "callable": dict(kernel=cauchy),
    "precomputed": dict(kernel="precomputed"),
}
KERNEL_IDS = list(KERNEL_CASES)


@pytest.fixture(autouse=True, scope="module")
def _one_blas_thread():
    """numpy's and scipy's BLAS on one thread for this module. Besides the fits, the
    checks here are many small BLAS calls: the tests' and the reference's NumPy (SVDs for
    the condition numbers, norms, products) and the fitted models' accessors
    (``covariance_coef_``). On an idle 2-core machine OpenBLAS's two threads made those
    calls erratically slow (the 42 SVDs of test_binary_stream_matches_reference took 2.4-4 s
    against 0.05-0.1 s on one thread, same values to 2e-15) and the module 16-38 s against
    8 s. The engines' own calls are unchanged: "auto" runs every block here on one thread
    anyway (the largest is 1.9e8 flops, below kernelcw._threads.AUTO_MIN_FLOPS = 5e8), and
    tests/test_blas_threads.py checks that results do not depend on the thread count."""
    with threadpool_limits(1, user_api="blas"):
        yield


# ---------------------------------------------------------------------------------------
# Estimators and streams
# ---------------------------------------------------------------------------------------


def _kernel_params(kernel) -> dict:
    return dict(KERNEL_CASES[kernel]) if isinstance(kernel, str) else dict(kernel)


def make_estimator(rule, kernel="rbf", solver="cholesky", a=A, **over):
    """The kernelcw estimator for ``rule`` with RULE_PARAMS (overridden by ``over``) on
    ``kernel`` (a KERNEL_CASES id or a dict of kernel parameters)."""
    p = {**RULE_PARAMS[rule], **over}
    common = dict(a=a, solver=solver, **_kernel_params(kernel))
    for key in ("n_iter", "block_size", "mode", "covariance", "shuffle"):
        if key in p:
            common[key] = p.pop(key)
    return helpers.make_rule_estimator(rule, p, **common)


def make_primal(rule, a=A, **over):
    """The primal full-covariance estimator for ``rule``."""
    return make_estimator(
        rule, dict(kernel="linear"), a=a, mode="primal", covariance="full", **over
    )


def ref_params(rule, kernel="rbf", a=A, **over) -> dict:
    """Keyword arguments of reference_dual.run_ref_dual matching make_estimator."""
    p = {**RULE_PARAMS[rule], **over}
    kp = _kernel_params(kernel)
    kp.pop("mode", None)
    return dict(a=a, **kp, **p)


def make_stream(rng, n, d, n_classes=2, flip=0.1):
    """Features with unequal scales; labels from a non-linear function plus noise and
    ``flip`` random flips, so that updates keep happening."""
    X = rng.normal(size=(n, d)) * rng.uniform(0.5, 1.5, size=d)
    s = X[:, 0] * X[:, 1] + np.sin(2.0 * X[:, 2]) + 0.5 * X[:, 3:].sum(axis=1) / math.sqrt(d)
    if n_classes == 2:
        y = (s + 0.3 * rng.normal(size=n) > 0).astype(int)
        flips = rng.random(n) < flip
        y[flips] = 1 - y[flips]
    else:
        scores = np.column_stack([s, X[:, 0] - X[:, 3], np.cos(X[:, 1]) - 0.5])[:, :n_classes]
        y = np.argmax(scores + 0.3 * rng.normal(size=scores.shape), axis=1)
        flips = rng.random(n) < flip
        y[flips] = rng.integers(n_classes, size=int(flips.sum()))
    return X, y


N_NEW = 40  # held-out rows for decision_function / predict_proba


@functools.cache
def stream_for(kernel, seed, n_classes=2, n_range=(150, 251), d_range=(5, 13)):
    """(X_fit, y, X_new) for ``kernel``: the raw rows, or for "precomputed" the kernel
    rows K(X, X_train) of the rbf kernel with PRE_GAMMA. Also returns the raw rows."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(*n_range))
    d = int(rng.integers(*d_range))
    X, y = make_stream(rng, n + N_NEW, d, n_classes)
    X, y, X_new = X[:n], y[:n], X[n:]
    for arr in (X, y, X_new):
        arr.setflags(write=False)
    if kernel == "precomputed":
        K = rd.ref_kernel(X, X, "rbf", PRE_GAMMA)
        K_new = rd.ref_kernel(X_new, X, "rbf", PRE_GAMMA)
        K.setflags(write=False)
        K_new.setflags(write=False)
        return K, y, K_new, X, X_new
    return X, y, X_new, X, X_new


@functools.cache
def reference_for(rule, kernel, seed, n_classes=2, n_passes=1, n_range=(150, 251), **over):
    X, y, *_ = stream_for(kernel, seed, n_classes, n_range=n_range)
    return rd.run_ref_dual(rule, X, y, n_passes=n_passes, **ref_params(rule, kernel, **over))


SEEDS = {k: 100 + i for i, k in enumerate(KERNEL_IDS)}


# ---------------------------------------------------------------------------------------
# Comparison helpers
# ---------------------------------------------------------------------------------------


assert_same_predictions = helpers.assert_same_predictions


def assert_rel_close(got, want, rtol=RTOL, what=""):
    helpers.assert_rel_close(got, want, rtol, what)


def _per_model(value, k: int, binary: bool):
    return value if binary else value[k]


def reference_condition(r: rd.RefDualResult) -> float:
    """Largest condition number of M = D^-1 + a K(S, S) over the second-order models."""
    worst = 1.0
    for k, lr in enumerate(r.learners):
        if lr.first_order or not lr.support:
            continue
        M = np.diag(1.0 / np.array(lr.zeta)) + lr.a * r.model.support_gram(k)
        worst = max(worst, float(np.linalg.cond(M)))
    return worst


def assert_exercised(r: rd.RefDualResult, n_rounds: int):
    """The reference stream is a fair test: updates happen (more than 5% of the rounds),
    v never reached the floor, and nu / Pi are well conditioned."""
    for lr in r.learners:
        assert lr.n_updates > 0.05 * n_rounds, f"only {lr.n_updates} updates"
        assert lr.n_floored == 0, "the reference floored v: pick a gentler stream"
    cond = reference_condition(r)
    assert cond < COND_MAX, f"reference M has condition {cond:.2e}: not a well-posed stream"


def assert_dual_state(
    est, r: rd.RefDualResult, X_raw, what="", rtol=RTOL, precomputed=False, rows_of=None
):
    """Fitted state of a dual estimator against the reference. ``rows_of=n``: ``support_``
    holds rows of the n training inputs (``fit`` with ``n_iter`` > 1), not stream
    positions."""
    np.testing.assert_array_equal(est.classes_, r.classes, err_msg=what)
    binary = len(r.classes) == 2
    np.testing.assert_array_equal(est.n_updates_, r.n_updates, err_msg=f"{what} n_updates_")
    np.testing.assert_array_equal(est.n_mistakes_, r.n_mistakes, err_msg=f"{what} n_mistakes_")
    np.testing.assert_array_equal(
        est.n_variance_floored_, r.n_floored, err_msg=f"{what} n_variance_floored_"
    )
    if binary:
        assert isinstance(est.n_support_, int | np.integer), f"{what}: n_support_ not an int"
    n_sup = np.atleast_1d(est.n_support_)
    for k, lr in enumerate(r.learners):
        w = f"{what} [model {k}]"
        sup = np.asarray(_per_model(est.support_, k, binary))
        want_sup = np.asarray(lr.support, dtype=int)
        if rows_of is not None:
            want_sup = want_sup % rows_of
        np.testing.assert_array_equal(sup, want_sup, err_msg=f"{w} support_")
        assert n_sup[k] == len(lr.support), f"{w} n_support_"
        if not precomputed:
            S = np.asarray(_per_model(est.support_vectors_, k, binary))
            want = np.asarray(X_raw)[np.asarray(lr.support, dtype=int) % len(X_raw)]
            np.testing.assert_array_equal(S.reshape(want.shape), want, err_msg=f"{w} SVs")
        nu = np.asarray(_per_model(est.dual_coef_, k, binary))
        Pi = np.asarray(_per_model(est.covariance_coef_, k, binary))
        assert nu.shape == lr.nu.shape, f"{w} dual_coef_ shape {nu.shape}"
        assert Pi.shape == lr.Pi.shape, f"{w} covariance_coef_ shape {Pi.shape}"
        assert_rel_close(nu, lr.nu, rtol, what=f"{w} dual_coef_")
        if lr.first_order:
            np.testing.assert_array_equal(Pi, 0.0, err_msg=f"{w} first order: Pi = 0")
        else:
            assert_rel_close(Pi, lr.Pi, rtol, what=f"{w} covariance_coef_")


def _kernel_new(est, kernel_id, X_new, k: int, binary: bool):
    """K(x_new, S_fast) from the fast model's own support set, with the reference's
    kernel, and k(x, x) (None for precomputed)."""
    if kernel_id == "precomputed":
        return np.asarray(X_new)[:, np.asarray(_per_model(est.support_, k, binary))], None
    kp = _kernel_params(kernel_id)
    kp.pop("mode", None)
    kern = kp.pop("kernel")
    S = np.asarray(_per_model(est.support_vectors_, k, binary)).reshape(-1, X_new.shape[1])
    Ks = rd.ref_kernel(X_new, S, kern, **kp) if len(S) else np.zeros((len(X_new), 0))
    return Ks, rd.ref_kernel_diag(X_new, kern, **kp)


def check_new_data(est, r: rd.RefDualResult, X_new, kernel_id, what=""):
    """decision_function / predict / predict_proba on held-out rows.

    1. Against the reference: |f_fast - f_ref| <= RTOL ||nu|| ||k|| per row (what nu
       within RTOL allows, by Cauchy-Schwarz); p within the matching first-order bound
       0.4 (df / sqrt(v) + |f| dv / (2 v^1.5)), dv = RTOL ||Pi|| ||k||^2 (0.4 >= the
       normal density), normalised for one-vs-rest.
    2. The fast model's own invariants, with its own coefficients and the reference's
       kernel: f == dual_coef_ . k(S, x) and p == Phi(f / sqrt(a k(x,x) + k' Pi k)),
       to rounding (1e-12 of ||nu|| ||k||, 1e-10 on p).
    """
    binary = len(r.classes) == 2
    precomputed = kernel_id == "precomputed"
    F = np.asarray(est.decision_function(X_new)).reshape(len(X_new), -1)
    F_ref = np.asarray(r.model.decision_function(X_new)).reshape(len(X_new), -1)
    V_ref = None if precomputed else r.model.variance(X_new)
    dP = np.zeros_like(F)
    P_own = np.zeros_like(F)
    V_own = np.zeros_like(F)
    for k, lr in enumerate(r.learners):
        w = f"{what} [model {k}]"
        Ks_ref, _ = r.model._kernel_rows(X_new, lr)
        knorm = np.linalg.norm(Ks_ref, axis=1)
        df = RTOL * np.linalg.norm(lr.nu) * knorm
        err = np.abs(F[:, k] - F_ref[:, k])
        assert np.all(err <= df + 1e-300), (
            f"{w} decision_function: max |fast - ref| = {err.max():.3e}, "
            f"bound {df[np.argmax(err - df)]:.3e}"
        )
        nu = np.asarray(_per_model(est.dual_coef_, k, binary))
        Pi = np.asarray(_per_model(est.covariance_coef_, k, binary))
        Ks, kappa = _kernel_new(est, kernel_id, X_new, k, binary)
        own = Ks @ nu
        bound = 1e-12 * np.linalg.norm(nu) * np.linalg.norm(Ks, axis=1) + 1e-300
        assert np.all(np.abs(F[:, k] - own) <= bound), f"{w}: f != dual_coef_ . k(S, x)"
        if not precomputed:
            v = V_ref[:, k]
            assert np.all(v > 1e-3 * lr.a * kappa), f"{w}: held-out v too small for the bound"
            dv = RTOL * np.linalg.norm(lr.Pi) * knorm**2
            dP[:, k] = 0.4 * (df / np.sqrt(v) + np.abs(F_ref[:, k]) * dv / (2 * v**1.5))
            v_own = lr.a * kappa + np.einsum("ij,jk,ik->i", Ks, Pi, Ks)
            P_own[:, k] = ndtr(F[:, k] / np.sqrt(v_own))
            V_own[:, k] = v_own
    # predict agrees with the decision function
    pred = est.predict(X_new)
    if binary:
        want = np.where(F[:, 0] >= 0.0, r.classes[1], r.classes[0])
    else:
        want = r.classes[np.argmax(F, axis=1)]
    assert_same_predictions(pred, want, what=f"{what} predict vs decision_function")
    if precomputed:
        return
    P = np.asarray(est.predict_proba(X_new))
    if binary:
        P_ref = r.model.predict_proba(X_new)
        tol = np.column_stack([dP[:, 0], dP[:, 0]])
        own = np.column_stack([1.0 - P_own[:, 0], P_own[:, 0]])
    else:  # P(k's score is the largest), tests/test_proba.py checks the combination itself
        P_ref = multiclass_proba(F_ref, V_ref)
        # each P_k moves by at most the sum of what every model's change moves its own
        # Phi(f / sqrt(v)) (the normal density bounds both), twice for safety
        tol = 2.0 * dP.sum(axis=1, keepdims=True) + 1e-9
        own = multiclass_proba(F, V_own)
    assert P.shape == P_ref.shape
    err = np.abs(P - P_ref)
    assert np.all(err <= tol + 1e-15), f"{what} predict_proba: max err {err.max():.3e}"
    np.testing.assert_allclose(P, own, rtol=0, atol=1e-10, err_msg=f"{what} proba invariant")


def check_against_reference(rule, kernel_id, solver, seed, n_classes=2, **over):
    X, y, X_new, X_raw, X_raw_new = stream_for(kernel_id, seed, n_classes)
    r = reference_for(rule, kernel_id, seed, n_classes)
    assert_exercised(r, len(y))
    what = f"{rule}/{kernel_id}/{solver}"
    pre = kernel_id == "precomputed"
    res = run_online(make_estimator(rule, kernel_id, solver, **over), X, y)
    assert_same_predictions(res.predictions, r.predictions, what=f"{what} run_online")
    np.testing.assert_array_equal(res.cumulative_mistakes, r.cumulative_mistakes)
    np.testing.assert_array_equal(res.n_updates, r.n_updates)
    assert_dual_state(res.estimator, r, X_raw, what=f"{what} run_online", precomputed=pre)
    est = make_estimator(rule, kernel_id, solver, **over).fit(X, y)
    assert_dual_state(est, r, X_raw, what=f"{what} fit", precomputed=pre)
    check_new_data(est, r, X_new, kernel_id, what=what)
    return r, est


# ---------------------------------------------------------------------------------------
# Every rule x kernel x solver
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("kernel_id", KERNEL_IDS)
@pytest.mark.parametrize("rule", ALL_RULES)
def test_binary_stream_matches_reference(rule, kernel_id, solver):
    r, _ = check_against_reference(rule, kernel_id, solver, SEEDS[kernel_id])
    if rule == "scw1":  # the cap C binds on some rounds
        assert any(s.alpha == RULE_PARAMS["scw1"]["C"] for s in r.learners[0].history)
    if rule == "pa1":
        assert any(s.alpha == RULE_PARAMS["pa1"]["C"] for s in r.learners[0].history)


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("rule", ALL_RULES)
def test_multiclass_matches_ovr_reference(rule, solver):
    _, est = check_against_reference(rule, "rbf", solver, 7, n_classes=3)
    assert len(est.dual_coef_) == 3 and len(est.covariance_coef_) == 3
    assert np.shape(est.n_support_) == (3,)


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("rule", ["scw2", "pa2"])
def test_multiclass_precomputed(rule, solver):
    check_against_reference(rule, "precomputed", solver, 8, n_classes=3)


@pytest.mark.parametrize("labels", [np.array([-1, 1]), np.array(["no", "yes"])], ids=str)
def test_labels_mapping(labels):
    """classes_[0] -> -1, classes_[1] -> +1 in the dual as in the primal."""
    X, y01, *_ = stream_for("rbf", 9)
    y = labels[y01]
    r = rd.run_ref_dual("arow", X, y, **ref_params("arow"))
    res = run_online(make_estimator("arow"), X, y)
    assert_same_predictions(res.predictions, r.predictions, what=f"labels {labels}")
    assert_dual_state(res.estimator, r, X, what=f"labels {labels}")


# ---------------------------------------------------------------------------------------
# Blocks, chunks, passes, pickling
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("kernel_id", ["rbf", "precomputed"])
@pytest.mark.parametrize(
    "rule", ["stdev", "var", "scw1", "scw2", "arow", "sop", "perceptron", "pa1"]
)
def test_block_size_does_not_matter(rule, kernel_id, solver):
    X, y, *_ = stream_for(kernel_id, 11, n_range=(300, 301))
    runs = {
        b: run_online(make_estimator(rule, kernel_id, solver, block_size=b), X, y)
        for b in (1, 7, 256)
    }
    base = runs[1].estimator
    for b, res in runs.items():
        what = f"{rule}/{kernel_id}/{solver} block_size={b}"
        assert_same_predictions(res.predictions, runs[1].predictions, what=what)
        est = res.estimator
        assert est.n_updates_ == base.n_updates_ and est.n_mistakes_ == base.n_mistakes_
        np.testing.assert_array_equal(est.support_, base.support_, err_msg=what)
        assert_rel_close(est.dual_coef_, base.dual_coef_, RTOL_SELF, what=f"{what} nu")
        assert_rel_close(est.covariance_coef_, base.covariance_coef_, RTOL_SELF, what=f"{what} Pi")
    r = rd.run_ref_dual(rule, X, y, **ref_params(rule, kernel_id))
    assert_same_predictions(runs[256].predictions, r.predictions, what="block 256 vs reference")


CHUNKS = (0, 1, 3, 8, 21, 55, 120)


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("kernel_id", ["rbf", "callable", "precomputed"])
@pytest.mark.parametrize("rule", ["stdev", "scw2", "arow", "pa1"])
def test_partial_fit_in_chunks_equals_fit(rule, kernel_id, solver):
    """Ragged partial_fit calls (precomputed: rows counted across calls) == one fit."""
    X, y, *_ = stream_for(kernel_id, 12)
    full = make_estimator(rule, kernel_id, solver).fit(X, y)
    pf = make_estimator(rule, kernel_id, solver)
    bounds = [*CHUNKS, len(y)]
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        pf.partial_fit(X[lo:hi], y[lo:hi], classes=np.unique(y))
    what = f"{rule}/{kernel_id}/{solver} chunks"
    np.testing.assert_array_equal(pf.support_, full.support_, err_msg=what)
    assert pf.n_updates_ == full.n_updates_ and pf.n_mistakes_ == full.n_mistakes_
    assert_rel_close(pf.dual_coef_, full.dual_coef_, RTOL_SELF, what=f"{what} nu")
    assert_rel_close(pf.covariance_coef_, full.covariance_coef_, RTOL_SELF, what=f"{what} Pi")
    res7 = run_online(make_estimator(rule, kernel_id, solver), X, y, chunk_size=7)
    res = run_online(make_estimator(rule, kernel_id, solver), X, y)
    assert_same_predictions(res7.predictions, res.predictions, what=f"{what} run_online 7")
    r = reference_for(rule, kernel_id, 12)
    assert_same_predictions(res.predictions, r.predictions, what=f"{what} vs reference")


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("rule", ["scw1", "arow", "pa1"])
def test_two_passes(rule, solver):
    """n_iter=2 == two partial_fit passes == the reference fed the stream twice.

    ``support_`` after two partial_fit calls counts rows across the calls (the second
    pass enters positions n, n + 1, ...); after ``fit(n_iter=2)`` it holds rows of X
    (the stream position mod n), which is what lets "precomputed" read k(x, x) = K[t, t]
    on the second pass: checked against the rbf kernel on the same rows."""
    X, y, *_ = stream_for("rbf", 13, n_range=(120, 151))
    n = len(y)
    r = reference_for(rule, "rbf", 13, n_passes=2, n_range=(120, 151))
    assert_exercised(r, 2 * n)
    assert max(r.support) >= n
    two = make_estimator(rule, "rbf", solver, n_iter=2).fit(X, y)
    pf = make_estimator(rule, "rbf", solver)
    pf.partial_fit(X, y, classes=np.unique(y))
    pf.partial_fit(X, y)
    assert_dual_state(two, r, X, what="n_iter=2", rows_of=n)
    assert_dual_state(pf, r, X, what="partial_fit x2")
    K, *_ = stream_for("precomputed", 13, n_range=(120, 151))
    r_pre = rd.run_ref_dual(
        rule, X, y, n_passes=2, **ref_params(rule, dict(kernel="rbf", gamma=PRE_GAMMA))
    )
    pre = make_estimator(rule, "precomputed", solver, n_iter=2).fit(K, y)
    assert_dual_state(pre, r_pre, X, what="precomputed n_iter=2", precomputed=True, rows_of=n)


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("kernel_id", ["rbf", "precomputed"])
@pytest.mark.parametrize("rule", ["stdev", "scw1", "arow", "pa"])
def test_pickle_mid_stream(rule, kernel_id, solver):
    X, y, X_new, *_ = stream_for(kernel_id, 14)
    classes = np.unique(y)
    straight = run_online(make_estimator(rule, kernel_id, solver), X, y)
    h = len(y) // 2 + 3
    first = run_online(make_estimator(rule, kernel_id, solver), X[:h], y[:h], classes=classes)
    est = first.estimator
    copy = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(copy.decision_function(X_new), est.decision_function(X_new))
    rest_copy = run_online(copy, X[h:], y[h:], fresh=False)
    rest_orig = run_online(est, X[h:], y[h:], fresh=False)
    what = f"{rule}/{kernel_id}/{solver} pickled"
    assert_same_predictions(rest_copy.predictions, rest_orig.predictions, what=what)
    assert_same_predictions(
        np.concatenate([first.predictions, rest_copy.predictions]),
        straight.predictions,
        what=f"{what} vs straight",
    )
    s = straight.estimator
    for other, tol in ((est, 1e-12), (s, RTOL_SELF)):
        np.testing.assert_array_equal(copy.support_, other.support_)
        assert copy.n_updates_ == other.n_updates_ and copy.n_mistakes_ == other.n_mistakes_
        assert_rel_close(copy.dual_coef_, other.dual_coef_, tol, what=f"{what} nu")
        assert_rel_close(copy.covariance_coef_, other.covariance_coef_, tol, what=f"{what} Pi")


# ---------------------------------------------------------------------------------------
# The dual and the primal learn the same model
# ---------------------------------------------------------------------------------------


def _linear_stream(kind, seed):
    rng = np.random.default_rng(seed)
    if kind == "few-support":  # d > n >= n_sv: the support inputs are independent
        n, d = 35, 40
        X = rng.normal(size=(n, d)) * rng.uniform(0.5, 1.5, size=d)
        y = (X @ rng.normal(size=d) + 0.5 * rng.normal(size=n) > 0).astype(int)
        flips = rng.random(n) < 0.15
        y[flips] = 1 - y[flips]
    else:  # separable, with a margin
        n, d = 200, 8
        X = rng.normal(size=(n, d))
        w = rng.normal(size=d)
        s = X @ w
        keep = np.abs(s) > 0.1 * np.abs(s).mean()
        X, y = X[keep], (s[keep] > 0).astype(int)
    return X, y


@pytest.mark.parametrize("stream", ["few-support", "separable"])
@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("rule", ALL_RULES)
def test_linear_dual_equals_primal(rule, solver, stream):
    """mode="dual" with the linear kernel == the primal full-covariance learner:
    primal_from_dual gives mu = S' nu and Sigma = a I + S' Pi S."""
    X, y = _linear_stream(stream, 15)
    dual = run_online(make_estimator(rule, "linear", solver), X, y)
    primal = run_online(make_primal(rule), X, y)
    what = f"{rule}/{solver}/{stream}"
    assert_same_predictions(dual.predictions, primal.predictions, what=what)
    d_est, p_est = dual.estimator, primal.estimator
    assert d_est.n_updates_ == p_est.n_updates_ > 0
    assert d_est.n_mistakes_ == p_est.n_mistakes_
    assert d_est.n_variance_floored_ == p_est.n_variance_floored_ == 0
    mu, Sigma = primal_from_dual(d_est)
    d = X.shape[1]
    assert np.shape(mu) == (d,) and np.shape(Sigma) == (d, d)
    assert_rel_close(mu, p_est.mean_, what=f"{what} mu")
    Sigma_primal = p_est.covariance_
    if np.ndim(Sigma_primal) == 1:  # first-order estimators may report the diagonal
        Sigma_primal = np.diag(Sigma_primal)
    assert_rel_close(Sigma, Sigma_primal, what=f"{what} Sigma")
    # and the definition, with the model's own coefficients
    S = d_est.support_vectors_
    assert_rel_close(mu, S.T @ d_est.dual_coef_, 1e-13, what="mu = S' nu")
    assert_rel_close(
        Sigma, A * np.eye(d) + S.T @ d_est.covariance_coef_ @ S, 1e-13, what="Sigma = a I + S' Pi S"
    )


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("rule", ["scw1", "arow", "pa1"])
def test_linear_dual_equals_primal_multiclass(rule, solver):
    rng = np.random.default_rng(16)
    n, d = 30, 40
    X = rng.normal(size=(n, d))
    y = np.argmax(X @ rng.normal(size=(d, 3)) + 0.5 * rng.normal(size=(n, 3)), axis=1)
    dual = run_online(make_estimator(rule, "linear", solver), X, y)
    primal = run_online(make_primal(rule), X, y)
    assert_same_predictions(dual.predictions, primal.predictions, what=f"{rule} OvR")
    mu, Sigma = primal_from_dual(dual.estimator)
    assert np.shape(mu) == (3, d) and np.shape(Sigma) == (3, d, d)
    assert_rel_close(mu, primal.estimator.mean_, what="OvR mu")
    Sigma_primal = primal.estimator.covariance_
    if np.ndim(Sigma_primal) == 2:
        Sigma_primal = np.stack([np.diag(s) for s in Sigma_primal])
    assert_rel_close(Sigma, Sigma_primal, what="OvR Sigma")


def _quadratic_stream(rng, noisy: bool):
    n, d = 150, 4
    X = rng.normal(size=(n, d))
    s = X[:, 0] ** 2 + X[:, 1] * X[:, 2] - 0.5 * X[:, 3] - 1.0
    if not noisy:
        return X, (s > 0).astype(int)
    y = (s + 0.3 * rng.normal(size=n) > 0).astype(int)
    flips = rng.random(n) < 0.1
    y[flips] = 1 - y[flips]
    return X, y


POLY2_EXPLICIT = dict(kernel="poly", degree=2, gamma=1.0, coef0=1.0)


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("rule", ALL_RULES)
def test_poly2_dual_equals_primal_on_explicit_features(rule, solver):
    """(x . z + 1)^2 = phi(x) . phi(z) with the explicit map of reference_dual: the dual
    learner is the primal one on phi(X); primal mu = Phi_S' nu, Sigma = a I + Phi_S' Pi Phi_S.
    Hard-constraint rules (CW-Stdev, CW-Var) on separable labels, the others noisy."""
    rng = np.random.default_rng(17)
    X, y = _quadratic_stream(rng, noisy=rule not in ("stdev", "var"))
    F = rd.degree2_features(X)
    dual = run_online(make_estimator(rule, POLY2_EXPLICIT, solver), X, y)
    primal = run_online(make_primal(rule), F, y)
    what = f"{rule}/{solver} poly2"
    assert_same_predictions(dual.predictions, primal.predictions, what=what)
    d_est, p_est = dual.estimator, primal.estimator
    assert d_est.n_updates_ == p_est.n_updates_ > 0
    assert d_est.n_mistakes_ == p_est.n_mistakes_
    FS = rd.degree2_features(d_est.support_vectors_)
    assert_rel_close(FS.T @ d_est.dual_coef_, p_est.mean_, what=f"{what} mu")
    Sigma = A * np.eye(F.shape[1]) + FS.T @ d_est.covariance_coef_ @ FS
    Sigma_primal = p_est.covariance_
    if np.ndim(Sigma_primal) == 1:
        Sigma_primal = np.diag(Sigma_primal)
    assert_rel_close(Sigma, Sigma_primal, what=f"{what} Sigma")


# ---------------------------------------------------------------------------------------
# Scale invariances (doc/rules.md): nu scales as mu, Pi as Sigma
# ---------------------------------------------------------------------------------------

A_BIG = 7.3


def _invariance_cases():
    """(rule, params at a = A_BIG, params at a = 1, nu scale, Pi scale).

    Lemma 3: CW-Stdev's (m, v) at a are (sqrt(a) m, a v) at 1, so alpha scales by
    a^-1/2, beta by 1/a, and the recursion nu' = [nu + alpha y Pi k, alpha y a],
    Pi' = [[Pi - beta c c', -beta a c], ...] keeps nu(a) = sqrt(a) nu(1) and
    Pi(a) = a Pi(1) (as mu(a) = sqrt(a) mu(1), Sigma(a) = a Sigma(1)). AROW(a, r) =
    AROW(1, r / a): alpha and beta scale by 1/a, nu unchanged; Perceptron: nu by a.
    """
    s = math.sqrt(A_BIG)
    return [
        ("stdev", dict(eta=0.8), dict(eta=0.8), s, A_BIG),
        ("scw1", dict(eta=0.8, C=0.3), dict(eta=0.8, C=0.3 * s), s, A_BIG),
        ("scw2", dict(eta=0.8, C=0.5), dict(eta=0.8, C=0.5 * A_BIG), s, A_BIG),
        ("var", dict(eta=0.6), dict(eta=float(norm.cdf(ref.phi_from_eta(0.6) * s))), s, A_BIG),
        ("arow", dict(r=0.7), dict(r=0.7 / A_BIG), 1.0, A_BIG),
        ("perceptron", dict(), dict(), A_BIG, A_BIG),
    ]


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize(
    "case", range(6), ids=["stdev-lemma3", "scw1", "scw2", "var", "arow", "perceptron"]
)
def test_scale_invariance_in_the_dual(case, solver):
    rule, p_big, p_one, nu_scale, pi_scale = _invariance_cases()[case]
    X, y, *_ = stream_for("rbf", 18)
    big = run_online(make_estimator(rule, "rbf", solver, a=A_BIG, **p_big), X, y)
    one = run_online(make_estimator(rule, "rbf", solver, a=1.0, **p_one), X, y)
    what = f"{rule}/{solver} a={A_BIG} vs 1"
    assert_same_predictions(big.predictions, one.predictions, what=what)
    eb, e1 = big.estimator, one.estimator
    assert eb.n_updates_ == e1.n_updates_ and eb.n_mistakes_ == e1.n_mistakes_
    np.testing.assert_array_equal(eb.support_, e1.support_)
    assert_rel_close(eb.dual_coef_, nu_scale * e1.dual_coef_, what=f"{what} nu scaling")
    assert_rel_close(eb.covariance_coef_, pi_scale * e1.covariance_coef_, what=f"{what} Pi")
    # the reference obeys the same scaling
    rb = rd.run_ref_dual(rule, X, y, **ref_params(rule, a=A_BIG, **p_big))
    r1 = rd.run_ref_dual(rule, X, y, **ref_params(rule, a=1.0, **p_one))
    assert rb.n_floored == r1.n_floored == 0
    assert_same_predictions(rb.predictions, r1.predictions, what="reference")
    assert_rel_close(rb.nu, nu_scale * r1.nu, what="reference nu scaling")
    assert_rel_close(rb.Pi, pi_scale * r1.Pi, what="reference Pi scaling")
    assert_dual_state(eb, rb, X, what=f"{what} vs reference")


# ---------------------------------------------------------------------------------------
# Kernels that are not positive semi-definite
# ---------------------------------------------------------------------------------------


def neg_linear(A, B):
    """-x . z: k(x, x) = -|x|^2 < 0."""
    return -(A @ B.T)


def one_minus_sq(A, B):
    """1 - 0.1 |x - z|^2: k(x, x) = 1 > 0 but indefinite (large negative off-diagonal)."""
    return 1.0 - 0.1 * np.sum((A[:, None, :] - B[None, :, :]) ** 2, axis=-1)


def exp_pow4(A, B):
    """exp(-|x - z|^4): |k(x, z)| <= 1 = k(x, x), so every 2 x 2 minor is positive
    semi-definite (Cauchy-Schwarz holds), but the kernel is indefinite (exp(-|t|^p)
    is positive definite only for p <= 2): only a round's variance shows it."""
    return np.exp(-(np.sum((A[:, None, :] - B[None, :, :]) ** 2, axis=-1) ** 2))


def _assert_finite_state(est, what):
    for name in ("dual_coef_", "covariance_coef_"):
        if hasattr(est, name):
            vals = getattr(est, name)
            vals = vals if isinstance(vals, list) else [vals]
            assert all(np.all(np.isfinite(v)) for v in vals), f"{what}: NaN/inf in {name}"


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("rule", ALL_RULES)
def test_negative_kernel_is_a_value_error_naming_it(rule, solver):
    X, y, *_ = stream_for("rbf", 19)
    with pytest.raises(ValueError, match="neg_linear"):
        rd.run_ref_dual(rule, X, y, **ref_params(rule, dict(kernel=neg_linear)))
    est = make_estimator(rule, dict(kernel=neg_linear), solver)
    with pytest.raises(ValueError, match="neg_linear"):
        est.fit(X, y)
    _assert_finite_state(est, "after the error")


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("rule", ["stdev", "scw1", "arow"])
def test_indefinite_kernel_is_caught_at_the_round_it_shows(rule, solver):
    """k(x, x) > 0 and Cauchy-Schwarz holds, but the Gram matrix is indefinite: the
    reference meets v < -1e-6 a k(x, x) at some round p. Up to p the fast model matches
    the reference (finite, same support set); the round p raises a ValueError naming the
    kernel; no NaN anywhere. (1-d inputs: there exp(-|t|^4) shows within 60 rounds.)"""
    rng = np.random.default_rng(20)
    X = rng.normal(size=(60, 1))
    y = rng.integers(0, 2, size=60)
    model = rd.RefDualModel(rule, [0, 1], **ref_params(rule, dict(kernel=exp_pow4)))
    with pytest.raises(ValueError, match="exp_pow4"):
        model.learn(X, y)
    p = len(model.stream) - 1  # the round that failed
    assert p >= 3
    lr = model.learners[0]
    v = lr.variance(rd.ref_kernel(X[p], X[lr.support], exp_pow4)[0], 1.0)
    assert v < -1e-3, f"the failing round has v = {v}: not clearly indefinite"
    r_before = rd.run_ref_dual(
        rule, X[:p], y[:p], classes=[0, 1], **ref_params(rule, dict(kernel=exp_pow4))
    )
    est = make_estimator(rule, dict(kernel=exp_pow4), solver)
    est.partial_fit(X[:p], y[:p], classes=[0, 1])
    _assert_finite_state(est, "before the indefinite round")
    np.testing.assert_array_equal(est.support_, r_before.support)
    f_before = r_before.model.decision_function(X)
    assert_same_predictions(est.predict(X), np.where(f_before >= 0.0, 1, 0), what="before p")
    with pytest.raises(ValueError, match="exp_pow4"):
        est.partial_fit(X[p : p + 1], y[p : p + 1])
    _assert_finite_state(est, "after the error")
    assert np.all(np.isfinite(est.decision_function(X)))
    with pytest.raises(ValueError, match="exp_pow4"):
        make_estimator(rule, dict(kernel=exp_pow4), solver).fit(X, y)


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("rule", ALL_RULES)
@pytest.mark.parametrize("rows", [1, 5, 60])
def test_kernel_values_beyond_cauchy_schwarz_are_refused(rule, solver, rows):
    """A kernel no Mercer kernel can be (here 1 - 0.1 |x - z|^2, whose values fall far
    below -1 = -sqrt(k(x, x) k(z, z))) is refused at the first block where a pair of
    training inputs shows it, within the block or against a support vector (calls of
    1, 5 or 60 rows), by every rule: first-order ones, whose steps never read a
    variance, included. The model is left as before the call."""
    rng = np.random.default_rng(4)
    X = 2.0 * rng.normal(size=(60, 3))
    y = rng.integers(0, 2, size=60)
    est = make_estimator(rule, dict(kernel=one_minus_sq), solver)
    with pytest.raises(ValueError, match="one_minus_sq' is not positive semi-definite"):
        for lo in range(0, 60, rows):
            est.partial_fit(X[lo : lo + rows], y[lo : lo + rows], classes=[0, 1])
    if hasattr(est, "classes_"):
        _assert_finite_state(est, "after the error")


@pytest.mark.parametrize("rule", ["pa1", "scw1", "arow"])
def test_precomputed_distance_or_negated_kernel_is_refused(rule):
    """The classic mistakes with kernel="precomputed": a distance matrix (zero diagonal,
    positive elsewhere; with or without the intercept) and a negated Gram matrix give a
    ValueError saying why, not a silent model that learnt nothing or the wrong way."""
    rng = np.random.default_rng(5)
    X = rng.normal(size=(40, 3))
    y = rng.integers(0, 2, size=40)
    sq = (X * X).sum(1)
    D = np.sqrt(np.maximum(sq[:, None] + sq[None, :] - 2.0 * X @ X.T, 0.0))
    for K, why in [(D, "exceeds sqrt"), (-np.exp(-(D**2)), "exceeds sqrt|< 0")]:
        for intercept in (True, False):
            est = make_estimator(
                rule, dict(kernel="precomputed", fit_intercept=intercept), "cholesky"
            )
            with pytest.raises(ValueError, match=f"not positive semi-definite: .*({why})"):
                est.fit(K, y)


# ---------------------------------------------------------------------------------------
# Variance collapse; API edges
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("seed", [0, 1])
def test_variance_collapse_is_floored_or_refused_never_nan(seed, solver):
    """CW-Stdev's hard constraint (eta = 0.95) on a non-separable stream in 3 dimensions
    (linear kernel) drives v down to the floor 1e-12 a k(x, x) within ~60 rounds.

    While the reference's v / (a k(x, x)) = rho stays above 1e-8 (round t8) the model is well
    determined and the Cholesky solver's predictions must be the reference's (its v is
    accurate to about eps / rho). The explicit recursion subtracts beta c c' with beta ~ 1/v,
    so its v is accurate to about eps / rho^2 only (3 % at rho = 6e-8: both the former
    compiled loops and the BLAS level-2 form drift from the reference there, by different
    rounding): it is compared while rho > 1e-7. Below, v is rounding noise: the
    explicit Pi (the reference's too) soon drifts to v < 0, which the explicit solver floors
    (the linear kernel is positive semi-definite by construction) until the recursion leaves
    float64's range and is refused with a FloatingPointError; M = D^-1 + a K stays positive
    definite by construction, so the Cholesky solver must finish, count the floored rounds
    and warn. Never NaN."""
    rng = np.random.default_rng(seed)
    n, d = 600, 3
    X = rng.normal(size=(n, d))
    y = (X[:, 0] + 0.8 * rng.normal(size=n) > 0).astype(int)
    model = rd.RefDualModel("stdev", [0, 1], kernel="linear", eta=0.95, a=A)
    with contextlib.suppress(ValueError):
        model.learn(X, y)
    lr = model.learners[0]
    assert lr.floored_at, "the reference did not reach the floor"
    ratio = np.array([v / (A * (x @ x)) for (_, v), x in zip(lr.trace, X, strict=False)])
    t8 = int(np.argmax(ratio < 1e-8))
    assert 10 < t8 <= lr.floored_at[0] < 200
    if solver == "explicit":
        t8 = int(np.argmax(ratio < 1e-7))
        assert t8 > 10
    est = make_estimator("stdev", "linear", solver, eta=0.95)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            res = run_online(est, X, y)
        except FloatingPointError:
            assert solver == "explicit", "the Cholesky form cannot lose positive definiteness"
            res = None
    if res is None:
        est = make_estimator("stdev", "linear", solver, eta=0.95)
        res = run_online(est, X[:t8], y[:t8])
    else:
        assert any(
            issubclass(w.category, RuntimeWarning) and "margin variance" in str(w.message)
            for w in caught
        ), "no RuntimeWarning about the floored margin variance"
        assert res.estimator.n_variance_floored_ > 0
    assert_same_predictions(
        res.predictions[:t8], np.array(model.predictions[:t8]), what="while v > 1e-8 a k"
    )
    e = res.estimator
    _assert_finite_state(e, "after the collapse")
    assert np.all(np.isfinite(e.decision_function(X)))
    assert np.all(np.isfinite(e.predict_proba(X)))


def test_precomputed_predict_proba_needs_the_diagonal():
    """Rows of K(X_new, X_train) do not carry k(x, x): predict_proba must refuse rather
    than guess (decision_function and predict work). The estimator hides the method
    (AttributeError); the engine refuses the margin variance itself (ValueError)."""
    K, y, K_new, *_ = stream_for("precomputed", 27)
    est = make_estimator("arow", "precomputed").fit(K, y)
    assert est.decision_function(K_new).shape == (len(K_new),)
    with pytest.raises(AttributeError) as err:
        est.predict_proba(K_new)
    assert "k(x, x)" in str(err.value.__cause__)
    with pytest.raises(ValueError, match="k\\(x, x\\)"):
        est.engine_.margin_variance(K_new)
    with pytest.raises(ValueError):
        est.decision_function(K_new[:, :-1])  # rows must span the training inputs


def test_primal_from_dual_needs_a_linear_dual_model():
    X, y, *_ = stream_for("rbf", 28)
    with pytest.raises(ValueError):
        primal_from_dual(make_estimator("arow", "rbf").fit(X, y))
    with pytest.raises(ValueError):
        primal_from_dual(make_primal("arow").fit(X, y))


# ---------------------------------------------------------------------------------------
# Self-checks of the reference (independent of kernelcw's dual engine)
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("stream", ["noisy", "few-support"])
@pytest.mark.parametrize("rule", ALL_RULES)
def test_reference_linear_dual_equals_reference_primal(rule, stream):
    """reference_dual with the linear kernel reproduces reference.RefLearner (full)."""
    if stream == "noisy":
        rng = np.random.default_rng(21)
        X, y = make_stream(rng, 200, 10)
    else:
        X, y = _linear_stream("few-support", 22)
    r = rd.run_ref_dual(rule, X, y, **ref_params(rule, "linear"))
    rp = ref.run_ref(rule, X, y, **{**RULE_PARAMS[rule], "a": A})
    assert_same_predictions(r.predictions, rp.predictions, what="reference dual vs primal")
    assert r.n_updates == rp.n_updates and r.n_mistakes == rp.n_mistakes
    mu, Sigma = r.model.primal()
    assert_rel_close(mu, rp.mu, 1e-9, what="S' nu")
    assert_rel_close(Sigma, rp.Sigma, 1e-9, what="a I + S' Pi S")


def test_reference_precomputed_equals_kernel():
    X, y, *_ = stream_for("rbf", 23)
    K = rd.ref_kernel(X, X, "rbf", PRE_GAMMA)
    for rule in ("scw1", "pa"):
        a = rd.run_ref_dual(rule, X, y, **ref_params(rule, dict(kernel="rbf", gamma=PRE_GAMMA)))
        b = rd.run_ref_dual(rule, K, y, **ref_params(rule, "precomputed"))
        assert_same_predictions(a.predictions, b.predictions)
        np.testing.assert_array_equal(a.support, b.support)
        assert_rel_close(b.nu, a.nu, 1e-14)
        assert_rel_close(b.Pi, a.Pi, 1e-14)


@pytest.mark.parametrize("rule", SECOND_ORDER)
def test_reference_matches_the_append_only_form(rule):
    """doc/dual-form.md section 2: Pi = -a^2 M^-1 and nu = a M^-1 D^-1 g with
    M = D^-1 + a K(S, S), D = diag(zeta), g = zeta f + alpha y (1 + zeta v) per support
    round (f, v before its update). An independent route to the reference's nu and Pi."""
    X, y, *_ = stream_for("rbf", 24)
    r = rd.run_ref_dual(rule, X, y, **ref_params(rule))
    lr = r.learners[0]
    yb = np.where(y == r.classes[1], 1, -1)
    zeta = np.array(lr.zeta)
    f, v = np.array([lr.trace[p] for p in lr.support]).T
    alpha = np.array([lr.history[p].alpha for p in lr.support])
    g = zeta * f + alpha * yb[lr.support] * (1.0 + zeta * v)
    M = np.diag(1.0 / zeta) + lr.a * r.model.support_gram()
    assert_rel_close(lr.Pi, -(lr.a**2) * np.linalg.inv(M), 1e-10, what="Pi = -a^2 M^-1")
    assert_rel_close(lr.nu, lr.a * np.linalg.solve(M, g / zeta), 1e-10, what="nu")


@pytest.mark.parametrize("rule", ["stdev", "scw2"])
def test_reference_constraint_is_tight_after_an_update(rule):
    """After a CW-Stdev / SCW update (alpha below any cap) the constraint holds with
    equality in the updated model: y f_new = phi sqrt(v_new) (SCW-II: the soft form
    y f_new + alpha / (2C) = phi sqrt(v_new))."""
    X, y, *_ = stream_for("rbf", 25)
    yb = np.where(y == np.unique(y)[1], 1, -1)
    lr = rd.RefDualLearner(rule, **{**RULE_PARAMS[rule], "a": A})
    kern = dict(kernel="rbf", gamma=0.1)
    checked = 0
    for t in range(len(y)):
        S = X[lr.support]
        k = rd.ref_kernel(X[t], S, **kern)[0] if len(S) else np.zeros(0)
        step = lr.learn(k, 1.0, int(yb[t]), t)
        if step.update:
            k_new = rd.ref_kernel(X[t], X[lr.support], **kern)[0]
            lhs = yb[t] * lr.score(k_new)
            if rule == "scw2":
                lhs += step.alpha / (2 * RULE_PARAMS["scw2"]["C"])
            rhs = lr.phi * math.sqrt(lr.variance(k_new, 1.0))
            assert math.isclose(lhs, rhs, rel_tol=1e-9, abs_tol=1e-12), (t, lhs, rhs)
            checked += 1
    assert checked > 20


def test_reference_first_order_keeps_pi_zero_and_steps_by_a():
    X, y, *_ = stream_for("rbf", 26)
    r = rd.run_ref_dual("perceptron", X, y, **ref_params("perceptron"))
    lr = r.learners[0]
    yb = np.where(y == r.classes[1], 1, -1)
    np.testing.assert_array_equal(lr.Pi, 0.0)
    np.testing.assert_array_equal(lr.nu, A * yb[lr.support])
