"""The Cholesky budget forms on extreme kernel values, and their walks split at leavers.

A cubic kernel on a feature about 1,800 times the others gives kernel values up to 4e19:
``a K + D^-1`` is then far beyond float64's conditioning. Before session 27 the "oldest"
queue form raised LinAlgError (its rebuild's Cholesky factorisation) or FloatingPointError
(a leaver's pivot in the Woodbury factor lost to cancellation, floored at 1e-300), and the
"random" lazy form raised FloatingPointError, or a ValueError that blamed the (positive
semi-definite) kernel, depending on the block size. Every policy now runs through at every
block size, floors (and counts) the variances rounding pushes below zero, as the nu/Pi
forms do, and keeps every array finite.

The walks' new stop before such a leaver is exact: a walk split there is the same model
(forced at every leaver by setting the pivot threshold to 1).
"""

from __future__ import annotations

import warnings

import helpers
import numpy as np
import pytest
from test_budget import make_est, make_stream

from kernelcw import AROWClassifier
from kernelcw.engines.dual import lazy, leaver_walk, queue


def _extreme_stream():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(400, 4))
    y = (X[:, 0] + 0.3 * rng.normal(size=400) > 0).astype(int)
    X[:, 1] *= 10 ** rng.uniform(1, 3)  # (about 1,833: k(x, x) up to 3.8e19)
    return X, y


def _extreme_est(policy, block_size):
    kernel = dict(kernel="poly", degree=3, gamma=1.0, coef0=1.0)
    return AROWClassifier(r=1.0, budget=20, budget_policy=policy, block_size=block_size,
                          random_state=0, **kernel)  # fmt: skip


@pytest.mark.parametrize("policy", ["oldest", "random", "smallest", "project"])
def test_extreme_kernel_values_run_through_every_block_size(policy, monkeypatch):
    X, y = _extreme_stream()
    fallbacks = []
    real = queue._lower_from_rows
    monkeypatch.setattr(queue, "_lower_from_rows", lambda *a: fallbacks.append(1) or real(*a))
    for block_size in (1, 5, 32, 256):
        est = _extreme_est(policy, block_size)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            est.fit(X, y)
        assert est.n_support_ <= 20
        assert helpers.all_finite_state(est), block_size
        assert np.all(np.isfinite(est.decision_function(X))), block_size
        floored = [str(w.message) for w in caught if "variance fell below" in str(w.message)]
        assert bool(floored) == (est.n_variance_floored_ > 0), block_size  # (said if counted)
        if policy in ("oldest", "random"):  # (the Cholesky forms: rounding, floored)
            assert floored, block_size
    if policy == "oldest":  # (the rebuild took the model's own factor at least once)
        assert fallbacks


def test_extreme_kernel_values_one_row_per_call():
    X, y = _extreme_stream()
    for policy in ("oldest", "random"):
        est = _extreme_est(policy, None)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # (floored: expected)
            for i in range(X.shape[0]):
                est.partial_fit(X[i : i + 1], y[i : i + 1], classes=[0, 1])
        assert est.n_support_ <= 20
        assert helpers.all_finite_state(est)


@pytest.mark.parametrize("policy", ["oldest", "random"])
@pytest.mark.parametrize("block_size", [16, 64])
def test_walks_split_at_every_leaver_are_the_same_model(policy, block_size, monkeypatch):
    """DEATH_PIVOT = 1: every leaver after a walk's first stops the walk, which drops
    the leavers so far and goes on from that round (no rebuild: O has more)."""
    X, y = make_stream(np.random.default_rng(11), 400, 4)
    want = make_est("scw1", budget=12, policy=policy, block_size=block_size).fit(X, y)
    stops = []
    monkeypatch.setattr(leaver_walk, "DEATH_PIVOT", 1.0)
    real_after, real_go_on = queue.QueueForm._after_stop, lazy._go_on

    def after_stop(form, ctx, ks):
        stops.append(form.nO > 0)
        return real_after(form, ctx, ks)

    monkeypatch.setattr(queue.QueueForm, "_after_stop", after_stop)
    monkeypatch.setattr(lazy, "_go_on", lambda ctx, ks: stops.append(True) or real_go_on(ctx, ks))
    got = make_est("scw1", budget=12, policy=policy, block_size=block_size).fit(X, y)
    assert sum(stops) > 20  # (split at leavers, not only at O's end)
    helpers.assert_same_budget_model(got, want, X)


def test_lower_from_rows_is_the_factor_of_the_rows_product():
    rng = np.random.default_rng(3)
    n = 9
    L = np.tril(rng.normal(size=(n, n))) + 3 * np.eye(n)
    F = L[rng.permutation(n)]  # (a factor with its rows permuted)
    out = np.full((n, n), 7.0)
    assert queue._lower_from_rows(out, F)
    got = np.tril(out)
    np.testing.assert_allclose(got @ got.T, F @ F.T, rtol=1e-12, atol=1e-12)
    assert np.all(np.diagonal(got) > 0)
    assert np.all(out[np.triu_indices(n, 1)] == 7.0)  # (the Gram cache's half: untouched)


def test_the_panels_factor_is_the_fallback_where_the_budget_first_binds(monkeypatch):
    """Where the budget first binds, the panels form becomes the queue through a
    refactorisation of a K + D^-1 from the Gram matrix; on a feature 10^2.5-10^3.5
    times the others it did not factor and "oldest" raised LinAlgError where every other
    policy went on (a review found it). It now takes the panels' own factor."""
    from kernelcw.engines.dual import convert

    used = []
    real, real_p2q = queue._lower_from_rows, convert.panels_to_queue
    monkeypatch.setattr(queue, "_lower_from_rows", lambda *a: used.append(1) or real(*a))
    converted = []
    monkeypatch.setattr(
        convert, "panels_to_queue", lambda *a: converted.append(len(used)) or real_p2q(*a)
    )
    for seed in range(3):
        rng = np.random.default_rng(seed)
        X = rng.normal(size=(300, 4))
        y = (X[:, 0] + 0.3 * rng.normal(size=300) > 0).astype(int)
        X[:, 1] *= 10 ** rng.uniform(2.5, 3.5)
        for budget in (20, 40):
            est = AROWClassifier(r=1.0, budget=budget, budget_policy="oldest", random_state=0,
                                 kernel="poly", degree=3, gamma=1.0, coef0=1.0)  # fmt: skip
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                try:
                    est.fit(X, y)
                except FloatingPointError:  # (the panels form itself overflows on some)
                    continue
            assert helpers.all_finite_state(est)
    assert used and converted


def _linear(A, B):
    return np.asarray(A @ B.T)


@pytest.mark.parametrize("kernel", ["linear", "callable", "precomputed"])
def test_a_kernel_not_known_psd_gets_the_factor_form_where_nu_pi_drifts(kernel):
    """CW-Stdev under "smallest" on contradictory labels: Pi's recursion drifts below
    zero. The built-in kernel floored it and moved to the factor form; the same values
    from a callable or a precomputed Gram matrix were "not positive semi-definite", the
    call refused and the model stuck in the nu/Pi form, refusing most later calls."""
    from kernelcw import CWClassifier

    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 3))
    y = (X[:, 0] + 0.8 * rng.normal(size=600) > 0).astype(int)
    Xin, kern = {"linear": (X, "linear"), "callable": (X, _linear),
                 "precomputed": (X @ X.T, "precomputed")}[kernel]  # fmt: skip
    m = CWClassifier(rule="stdev", eta=0.95, kernel=kern, mode="dual", budget=20,
                     budget_policy="smallest", random_state=0)  # fmt: skip
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for i in range(0, 600, 30):
            m.partial_fit(Xin[i : i + 30], y[i : i + 30], classes=[0, 1])
    assert m.engine_.factor_forms() == ["pruned"]
    assert any("learned again" in str(w.message) for w in seen)
    assert np.all(np.isfinite(m.decision_function(Xin[:50])))


def test_a_kernel_that_is_not_psd_is_still_named_in_the_factor_form(monkeypatch):
    """The retry in the factor form tells drift from a kernel that is not positive
    semi-definite: a callable that turns indefinite once the budget has bound (within
    the blocks' Cauchy-Schwarz check) is refused after the retry, and the model is as
    before the call."""
    import copy

    from kernelcw.engines.dual.engine import DualEngine

    bad = [False]

    def kern(A, B):
        K = A @ B.T
        if bad[0]:  # (cosines mapped to 0.5 c - 0.45: indefinite, |k| within bounds)
            na, nb = np.sqrt((A * A).sum(1))[:, None], np.sqrt((B * B).sum(1))[None, :]
            K = (0.5 * K / (na * nb) - 0.45) * (na * nb)
            if A.shape == B.shape and np.array_equal(A, B):
                np.fill_diagonal(K, na[:, 0] ** 2)
        return K

    tries = []
    real = DualEngine.stabilise
    monkeypatch.setattr(DualEngine, "stabilise", lambda self: tries.append(1) or real(self))
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 3))
    y = (X[:, 0] + 0.3 * rng.normal(size=400) > 0).astype(int)
    m = AROWClassifier(kernel=kern, budget=20, budget_policy="smallest")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i in range(0, 200, 20):
            m.partial_fit(X[i : i + 20], y[i : i + 20], classes=[0, 1])
    assert m.engine_.factor_forms() == ["explicit"]
    twin = copy.deepcopy(m)
    bad[0] = True
    with pytest.raises(ValueError, match="not positive semi-definite") as err:
        for i in range(200, 400, 20):
            m.partial_fit(X[i : i + 20], y[i : i + 20])
    assert type(err.value) is ValueError and tries  # (the factor form's own refusal)
    bad[0] = False
    m.partial_fit(X[200:220], y[200:220])
    twin.partial_fit(X[200:220], y[200:220])
    np.testing.assert_array_equal(m.decision_function(X), twin.decision_function(X))


def test_the_new_errors_pickle_as_they_were():
    """joblib and dask send errors between processes: MaybeDrift and NonFiniteKernel,
    with a second argument, failed to unpickle ("A result has failed to
    un-serialize") and the error was lost."""
    import pickle

    from kernelcw.engines.base import MaybeDrift
    from kernelcw.kernels import NonFiniteKernel

    for err in (MaybeDrift("message", "what"), NonFiniteKernel("message", 3)):
        back = pickle.loads(pickle.dumps(err))
        assert type(back) is type(err) and str(back) == "message"
        assert back.__dict__ == err.__dict__


@pytest.mark.parametrize("big", [3e60, 1e110])
@pytest.mark.parametrize("rows", [None, 1])
def test_a_kernel_value_that_overflows_is_named_by_its_training_row(rows, big):
    """ "kernel 'poly' returned NaN or infinity" named no row, where a NaN in X does."""
    rng = np.random.RandomState(0)
    X = rng.randn(60, 3)
    y = (X[:, 0] > 0).astype(int)
    m = AROWClassifier(kernel="poly", degree=3, gamma=1.0, coef0=1.0, budget=10)
    m.fit(X[:40], y[:40])
    before = m.decision_function(X).copy()
    Xc = X[40:50].copy()
    Xc[6] = [big, 0.0, 0.0]  # k(x, x) overflows (and for 1e110 every k(., x): the column)
    if rows is not None:  # (rows 40-45 learnt one per call; the model before row 46)
        for i in range(6):
            m.partial_fit(Xc[i : i + 1], y[40 + i : 41 + i])
        before = m.decision_function(X).copy()
        Xc, y = Xc[6:7], y[46:47]
    with pytest.raises(ValueError, match=r"returned NaN or infinity at training row 46 \("):
        m.partial_fit(Xc, y if rows is not None else y[40:50])
    np.testing.assert_array_equal(m.decision_function(X), before)
