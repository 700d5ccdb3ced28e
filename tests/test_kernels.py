"""Kernel functions (``kernelcw.kernels``) and the kernel parameters of the estimators.

``kernel_matrix`` / ``kernel_diag`` against scikit-learn's pairwise kernels and the plain
formulas of ``tests/reference_dual.py``, dense and sparse; ``gamma=None`` means
1 / n_features; bad kernel names and parameters are ValueErrors at ``fit``; ``mode``
picks the engine.
"""

from __future__ import annotations

import math
import zlib

import numpy as np
import pytest
import reference_dual as rd
import scipy.sparse as sp
from sklearn.metrics.pairwise import (
    laplacian_kernel,
    linear_kernel,
    polynomial_kernel,
    rbf_kernel,
)

from kernelcw import (
    AROWClassifier,
    CWClassifier,
    PAClassifier,
    PerceptronClassifier,
    SCWClassifier,
    SOPClassifier,
)
from kernelcw.kernels import kernel_diag, kernel_matrix

ESTIMATORS = [
    CWClassifier,
    SCWClassifier,
    AROWClassifier,
    SOPClassifier,
    PAClassifier,
    PerceptronClassifier,
]

# (kernel, gamma, degree, coef0, scikit-learn function taking (A, B))
SK_CASES = {
    "linear": ("linear", 1.0, 3, 0.0, linear_kernel),
    "rbf": ("rbf", 0.15, 3, 0.0, lambda A, B: rbf_kernel(A, B, gamma=0.15)),
    "poly2": (
        "poly",
        0.3,
        2,
        1.0,
        lambda A, B: polynomial_kernel(A, B, degree=2, gamma=0.3, coef0=1.0),
    ),
    "poly3": (
        "poly",
        0.2,
        3,
        0.5,
        lambda A, B: polynomial_kernel(A, B, degree=3, gamma=0.2, coef0=0.5),
    ),
    "poly3-homogeneous": (
        "poly",
        0.2,
        3,
        0.0,
        lambda A, B: polynomial_kernel(A, B, degree=3, gamma=0.2, coef0=0.0),
    ),
    "laplacian": ("laplacian", 0.25, 3, 0.0, lambda A, B: laplacian_kernel(A, B, gamma=0.25)),
}


def _data(rng, n, d, density=None):
    X = rng.normal(size=(n, d)) * rng.uniform(0.5, 1.5, size=d)
    if density is not None:
        X *= rng.random((n, d)) < density
    return X


def _assert_kernel_close(got, want, what):
    """Entry-wise within 1e-12 relative, absolute 1e-12 of the largest entry (poly values
    near 0 and rbf values far in the tail are compared absolutely)."""
    got = np.asarray(got)
    assert isinstance(got, np.ndarray), f"{what}: {type(got)} is not a dense ndarray"
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    assert got.dtype == np.float64, f"{what}: dtype {got.dtype}"
    scale = max(1.0, float(np.abs(want).max()))
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12 * scale, err_msg=what)


@pytest.mark.parametrize("case", list(SK_CASES))
@pytest.mark.parametrize("fmt", ["dense", "sparse", "mixed"])
def test_kernel_matrix_matches_sklearn(case, fmt):
    kernel, gamma, degree, coef0, sk = SK_CASES[case]
    rng = np.random.default_rng(zlib.crc32(f"{case}/{fmt}".encode()))
    density = None if fmt == "dense" else 0.4
    A = _data(rng, 23, 7, density)
    B = _data(rng, 11, 7, density)
    if fmt == "sparse":
        A, B = sp.csr_matrix(A), sp.csr_matrix(B)
    elif fmt == "mixed":
        A = sp.csr_matrix(A)
    want = sk(A, B)
    got = kernel_matrix(A, B, kernel, gamma, degree, coef0)
    _assert_kernel_close(got, want, f"{case} {fmt} K(A, B)")
    Ad = A.toarray() if sp.issparse(A) else A
    Bd = B.toarray() if sp.issparse(B) else B
    _assert_kernel_close(got, rd.ref_kernel(Ad, Bd, kernel, gamma, degree, coef0), "vs reference")
    # the same inputs on both sides (rbf/laplacian: 1 on the diagonal)
    got_aa = kernel_matrix(A, A, kernel, gamma, degree, coef0)
    _assert_kernel_close(got_aa, sk(A, A), f"{case} {fmt} K(A, A)")
    if kernel in ("rbf", "laplacian"):
        np.testing.assert_allclose(np.diag(got_aa), 1.0, rtol=0, atol=1e-13)
    # a single row
    _assert_kernel_close(
        kernel_matrix(A[:1], B, kernel, gamma, degree, coef0), want[:1], "one row of A"
    )


@pytest.mark.parametrize("case", list(SK_CASES))
@pytest.mark.parametrize("fmt", ["dense", "sparse"])
def test_kernel_diag_matches_sklearn(case, fmt):
    kernel, gamma, degree, coef0, sk = SK_CASES[case]
    rng = np.random.default_rng(zlib.crc32(f"{case}/{fmt}/diag".encode()))
    A = _data(rng, 19, 6, None if fmt == "dense" else 0.5)
    A[3] = 0.0  # an all-zero row: linear 0, poly coef0^degree, rbf/laplacian 1
    if fmt == "sparse":
        A = sp.csr_matrix(A)
    want = np.diag(sk(A, A))
    got = np.asarray(kernel_diag(A, kernel, gamma, degree, coef0))
    assert got.shape == (19,)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
    Ad = A.toarray() if sp.issparse(A) else A
    np.testing.assert_allclose(
        got, rd.ref_kernel_diag(Ad, kernel, gamma, degree, coef0), rtol=1e-12, atol=1e-14
    )


def test_reference_kernels_match_sklearn():
    """The reference's plain formulas are what scikit-learn computes."""
    rng = np.random.default_rng(5)
    A, B = _data(rng, 9, 4), _data(rng, 6, 4)
    for case, (kernel, gamma, degree, coef0, sk) in SK_CASES.items():
        _assert_kernel_close(rd.ref_kernel(A, B, kernel, gamma, degree, coef0), sk(A, B), case)


def test_degree2_features_reproduce_the_poly_kernel():
    rng = np.random.default_rng(6)
    A, B = _data(rng, 8, 5), _data(rng, 7, 5)
    F, G = rd.degree2_features(A), rd.degree2_features(B)
    assert F.shape == (8, 5 + 10 + 5 + 1)
    _assert_kernel_close(F @ G.T, (A @ B.T + 1.0) ** 2, "phi(x).phi(z) = (x.z + 1)^2")


# ---------------------------------------------------------------------------------------
# Through the estimators
# ---------------------------------------------------------------------------------------


def _stream(rng, n=80, d=7):
    X = _data(rng, n, d)
    y = (X[:, 0] * X[:, 1] + 0.3 * rng.normal(size=n) > 0).astype(int)
    return X, y


@pytest.mark.parametrize("kernel", ["rbf", "poly", "laplacian"])
@pytest.mark.parametrize("Est", [SCWClassifier, PAClassifier], ids=lambda c: c.__name__)
def test_gamma_none_is_one_over_n_features(kernel, Est):
    rng = np.random.default_rng(7)
    X, y = _stream(rng, d=7)
    default = Est(kernel=kernel, gamma=None, coef0=1.0).fit(X, y)
    explicit = Est(kernel=kernel, gamma=1.0 / 7, coef0=1.0).fit(X, y)
    assert default.get_params()["gamma"] is None, "fit must not change the gamma parameter"
    np.testing.assert_array_equal(default.support_, explicit.support_)
    np.testing.assert_array_equal(default.dual_coef_, explicit.dual_coef_)
    np.testing.assert_array_equal(default.decision_function(X), explicit.decision_function(X))
    # and it is the reference's gamma = 1 / n_features
    rule = "scw1" if Est is SCWClassifier else "pa1"
    params = dict(eta=0.75, C=1.0) if Est is SCWClassifier else dict(C=1.0)
    r = rd.run_ref_dual(rule, X, y, kernel=kernel, gamma=None, coef0=1.0, **params)
    assert r.model.gamma == 1.0 / 7
    np.testing.assert_array_equal(default.support_, r.support)
    np.testing.assert_allclose(default.dual_coef_, r.nu, rtol=1e-10, atol=1e-12)


BAD_PARAMS = [
    dict(kernel="sigmoid"),
    dict(kernel="gaussian"),
    dict(kernel=3),
    dict(kernel=None),
    dict(kernel="rbf", gamma=-1.0),
    dict(kernel="rbf", gamma=0.0),
    dict(kernel="rbf", gamma=float("nan")),
    dict(kernel="laplacian", gamma=float("inf")),
    dict(kernel="poly", degree=0),
    dict(kernel="poly", degree=-2),
    dict(kernel="poly", degree=float("nan")),
    dict(kernel="poly", coef0=float("nan")),
    dict(kernel="poly", coef0=float("inf")),
    dict(kernel="rbf", solver="qr"),
    dict(kernel="rbf", solver=None),
    dict(kernel="rbf", block_size=0),
    dict(kernel="rbf", block_size=-4),
    dict(kernel="rbf", block_size=2.5),
    dict(kernel="rbf", mode="primal"),
    dict(kernel="poly", mode="primal"),
    dict(kernel="precomputed", mode="primal"),
    dict(kernel=lambda A, B: A @ B.T, mode="primal"),
    dict(kernel="rbf", mode="kernel"),
]


@pytest.mark.parametrize("params", BAD_PARAMS, ids=repr)
@pytest.mark.parametrize("Est", ESTIMATORS, ids=lambda c: c.__name__)
def test_bad_kernel_parameters_are_value_errors(Est, params):
    X, y = _stream(np.random.default_rng(8), n=20)
    with pytest.raises(ValueError):
        Est(**params).fit(X, y)
    with pytest.raises(ValueError):
        Est(**params).partial_fit(X, y, classes=[0, 1])


def test_unknown_kernel_name_in_kernel_matrix():
    A = np.ones((2, 3))
    with pytest.raises(ValueError):
        kernel_matrix(A, A, "sigmoid", 1.0, 3, 0.0)
    with pytest.raises(ValueError):
        kernel_diag(A, "sigmoid", 1.0, 3, 0.0)


def test_non_integer_degree_never_gives_nan():
    """(gamma x.z + coef0)^2.5 with a negative base is not a real number: the estimator
    must refuse it (ValueError) rather than learn NaN."""
    X, y = _stream(np.random.default_rng(9), n=40)
    assert (X @ X.T < 0).any()
    est = PAClassifier(kernel="poly", degree=2.5, coef0=0.0)
    with pytest.raises(ValueError, match="degree=2.5 must be an integer"):
        est.fit(X, y)
    assert not hasattr(est, "classes_")


def test_overflowing_named_kernel_is_a_clear_error():
    X, y = _stream(np.random.default_rng(11), n=40)
    est = PAClassifier(kernel="poly", degree=200, gamma=10.0, coef0=1.0)
    with pytest.raises(ValueError, match="kernel 'poly' returned NaN or infinity"):
        est.fit(X * 100, y)


@pytest.mark.parametrize("Est", ESTIMATORS, ids=lambda c: c.__name__)
def test_mode_picks_the_engine(Est):
    X, y = _stream(np.random.default_rng(10), n=30)
    primal = Est().fit(X, y)  # linear, auto -> primal
    assert hasattr(primal, "mean_") and not hasattr(primal, "dual_coef_")
    for params in (dict(kernel="rbf"), dict(kernel="rbf", mode="dual"), dict(mode="dual")):
        est = Est(**params).fit(X, y)
        assert hasattr(est, "dual_coef_"), f"{params}: no dual_coef_"
        assert est.support_vectors_.shape == (est.n_support_, X.shape[1])


def test_callable_kernel_with_wrong_shape_is_a_value_error():
    X, y = _stream(np.random.default_rng(11), n=20)

    def one_row_too_many(A, B):
        return np.ones((A.shape[0] + 1, B.shape[0]))

    with pytest.raises(ValueError):
        AROWClassifier(kernel=one_row_too_many).fit(X, y)


@pytest.mark.parametrize("fmt", ["dense", "csr"])
def test_callable_kernel_may_return_a_sparse_matrix(fmt):
    """A callable whose Gram block is sparse (``A @ B.T`` of CSR inputs, or a kernel
    that returns CSR) is densified: fit, predict, predict_proba and partial_fit give
    the linear dual model's values, on dense and CSR input alike."""
    X, y = _stream(np.random.default_rng(12), n=60)
    X[np.abs(X) < 0.5] = 0.0
    Xf = sp.csr_matrix(X) if fmt == "csr" else X

    def sparse_dot(A, B):
        return sp.csr_matrix(A @ B.T)

    ref = SCWClassifier(kernel="linear", mode="dual").fit(X[:40], y[:40])
    for kernel in (lambda A, B: A @ B.T, sparse_dot):
        est = SCWClassifier(kernel=kernel).fit(Xf[:40], y[:40])
        np.testing.assert_allclose(est.decision_function(Xf), ref.decision_function(X))
        np.testing.assert_allclose(est.predict_proba(Xf), ref.predict_proba(X))
        np.testing.assert_array_equal(est.predict(Xf), ref.predict(X))
        est.partial_fit(Xf[40:], y[40:])
        assert est.n_support_ >= ref.n_support_


@pytest.mark.parametrize("fit_intercept", [False, True])
@pytest.mark.parametrize("policy", [None, "random"])
def test_callable_kernel_may_return_a_read_only_array(policy, fit_intercept):
    """A callable whose Gram block is read-only or not C-ordered (a cached block, a
    memmap slice, an array from another library) is read, never written: the same
    model as from a writeable result, and the caller's array unchanged (the named
    kernels' own blocks take the intercept's offset in place, in their finiteness
    pass). Every block reaches the engines through Kernel.block, so the unbudgeted
    model and one budgeted form stand for all (each form compiles once more for a
    callable kernel's checks: seconds of a cold test run each)."""
    X, y = _stream(np.random.default_rng(14), n=80)
    seen = []

    def read_only_rbf(A, B):
        K = np.exp(-0.5 * ((A[:, None, :] - B[None, :, :]) ** 2).sum(-1))
        K = np.asfortranarray(K) if len(seen) % 2 else K  # (not C-ordered, too)
        K.flags.writeable = False
        seen.append((K, K.copy()))
        return K

    def rbf(A, B):
        return np.exp(-0.5 * ((A[:, None, :] - B[None, :, :]) ** 2).sum(-1))

    kw = dict(fit_intercept=fit_intercept, random_state=0)
    if policy is not None:
        kw.update(budget=12, budget_policy=policy)
    est = SCWClassifier(kernel=read_only_rbf, **kw).fit(X[:60], y[:60])
    ref = SCWClassifier(kernel=rbf, **kw).fit(X[:60], y[:60])
    est.partial_fit(X[60:61], y[60:61])
    ref.partial_fit(X[60:61], y[60:61])
    np.testing.assert_array_equal(est.decision_function(X), ref.decision_function(X))
    for K, before in seen:
        np.testing.assert_array_equal(K, before)


def test_callable_kernel_returning_no_matrix_is_named():
    """A callable whose result is no matrix of numbers: a ValueError naming it and the
    type it returned (not numpy's "setting an array element with a sequence")."""
    X, y = _stream(np.random.default_rng(13), n=20)

    def ragged(A, B):
        return [[1.0] * (j + 1) for j in range(A.shape[0])]

    with pytest.raises(ValueError, match="kernel ragged returned a list"):
        AROWClassifier(kernel=ragged).fit(X, y)


def test_kernel_name_helper():
    def my_kernel(A, B):
        return A @ B.T

    assert rd.kernel_name("rbf") == "rbf"
    assert rd.kernel_name(my_kernel) == "my_kernel"
    assert math.isclose(rd.resolve_gamma(None, 8), 0.125)


@pytest.mark.parametrize("fmt", ["dense", "csr"])
def test_rbf_is_accurate_for_near_rows_and_far_from_the_origin(fmt):
    """|a - b|^2 by the BLAS expansion |a|^2 + |b|^2 - 2 a.b loses its digits for near
    rows (and equal rows far from the origin gave k(x, x) = 0.26 at |x| ~ 1e8, against
    the 1 the engine assumes). Such pairs are recomputed from the difference."""
    rng = np.random.default_rng(3)
    base = rng.normal(size=(1, 5)) * 1e8
    X = base + rng.normal(size=(6, 5)) * np.array([[0.0], [1.0], [1e-3], [10.0], [0.0], [1.0]])
    X[4] = X[0]  # an exact duplicate
    A = sp.csr_matrix(X) if fmt == "csr" else X
    gamma = 0.05
    K = kernel_matrix(A, A, "rbf", gamma, 3, 0.0)
    want = np.exp(-gamma * ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1))
    np.testing.assert_array_equal(np.diagonal(K), 1.0)
    assert K[0, 4] == 1.0 and K[4, 0] == 1.0
    np.testing.assert_allclose(K, want, rtol=1e-12, atol=1e-300)
    np.testing.assert_array_equal(kernel_diag(A, "rbf", gamma, 3, 0.0), np.diagonal(K))


def test_rbf_project_budget_learns_large_duplicate_rows():
    """The stored Gram matrix agrees with k(x, x) = 1 for rows far from the origin, so
    "project" keeps a usable Gram matrix on their duplicates."""
    from kernelcw import AROWClassifier

    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3)) * 1e8
    X = np.vstack([X, X[:10]])
    y = (X[:, 0] > 0).astype(int)
    est = AROWClassifier(kernel="rbf", gamma=1e-17, budget=5, budget_policy="project")
    est.fit(X, y)
    assert est.n_support_ <= 5
    assert np.all(np.isfinite(est.decision_function(X)))


def test_small_dense_blocks_from_differences_match_the_expansion():
    """Small dense RBF blocks (up to SMALL_BLOCK multiply-adds) come from the
    differences, exp included (rbf_direct_rows); they agree with the BLAS expansion
    (plus its exact recompute) to rounding, and equal rows give exactly 1 at any
    scale."""
    from kernelcw import kernels as kmod

    rng = np.random.default_rng(0)
    A, B = rng.normal(size=(3, 7)), rng.normal(size=(40, 7))
    assert A.shape[0] * B.shape[0] * 7 <= kmod.SMALL_BLOCK
    direct = kmod.kernel_matrix(A, B, "rbf", 0.3, 3, 0.0)
    np.testing.assert_array_equal(direct, kmod.rbf_direct_rows(A, np.arange(3), B, 0.3, 0.0)[0])
    np.testing.assert_allclose(direct, np.exp(kmod._neg_sqdist(A, B, 0.3)), rtol=1e-12)
    far = 1e8 + rng.normal(size=(2, 5))
    np.testing.assert_array_equal(np.diag(kmod.kernel_matrix(far, far, "rbf", 0.3, 3, 0.0)), 1.0)


@pytest.mark.parametrize("name", ["rbf", "poly", "linear", "laplacian"])
@pytest.mark.parametrize("n", [3, 300, 6553, 6554, 9000])
def test_rows_block_is_the_block_s_rows_bit_for_bit(name, n):
    """``Kernel.rows_block(A, idx, B)`` (a model's support rows against a row learnt at
    a time) is ``block(A, B)[idx]`` exactly, on both sides of the size where the block
    leaves the differences for BLAS's expansion (n * d = SMALL_BLOCK at n = 6553.6)."""
    from kernelcw.kernels import SMALL_BLOCK, Kernel

    d = 10
    assert SMALL_BLOCK == 6553.6 * d
    rng = np.random.default_rng(n)
    A, B = rng.normal(size=(n, d)), rng.normal(size=(1, d))
    A[n // 2] = B[0] + 1e-9  # (a near-duplicate: the expansion's recomputed pair)
    idx = rng.permutation(n)[: max(1, n // 2)]
    k = Kernel(name, 0.1, 3, 1.0, d, offset=0.5)
    np.testing.assert_array_equal(k.rows_block(A, idx, B), k.block(A, B)[idx])


def test_rows_block_refuses_an_index_outside_the_rows():
    from kernelcw.kernels import Kernel

    k = Kernel("rbf", 0.1, 3, 1.0, 4)
    A, B = np.ones((5, 4)), np.zeros((1, 4))
    with pytest.raises(IndexError):
        k.rows_block(A, np.array([0, 5]), B)
    with pytest.raises(IndexError):
        k.rows_block(A, np.array([-1]), B)


@pytest.mark.parametrize("degree", [10**20, 2**31, float("inf"), float("nan"), 0])
def test_a_degree_out_of_range_is_named(degree):
    """An int too large for float64 once met numpy's isfinite (a TypeError about ufunc
    casting); every degree outside 1 .. 2^31 - 1 is refused by name."""
    X, y = _stream(np.random.default_rng(9), n=10)
    with pytest.raises(ValueError, match=r"degree=.* must be an integer from 1 to 2147483647"):
        SCWClassifier(kernel="poly", degree=degree).fit(X, y)


def test_a_callable_kernel_of_complex_values_is_refused():
    """Cast to float64, its imaginary part was dropped with only numpy's warning."""
    X, y = _stream(np.random.default_rng(9), n=10)

    def kernel(A, B):
        return (A @ B.T).astype(complex) * (1 + 1e-3j)

    with pytest.raises(ValueError, match="returned complex values"):
        SCWClassifier(kernel=kernel).fit(X, y)
