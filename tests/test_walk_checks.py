"""CSR rows whose values the diagonal engine's walk checks as it reads them
(``Engine.checks_rows``): ``fit`` and ``partial_fit`` on plain CSR X leave the pass
over X's values to the walk. They must learn exactly what the estimators' own checks
let through, and refuse exactly what those refuse, with the same error and the model
as it was."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import scipy.sparse as sp

import kernelcw.estimators._input as est_input
from kernelcw import (
    AROWClassifier,
    CWClassifier,
    PAClassifier,
    PerceptronClassifier,
    SCWClassifier,
)
from kernelcw._validation import csr_rows_in_range
from kernelcw.engines import _diag_walk as walk
from kernelcw.engines._diag_undo import no_log
from kernelcw.engines.base import RowsUnchecked
from kernelcw.engines.primal_diag import PrimalDiagEngine
from kernelcw.spec import check_params

MAKERS = {
    "cw kl": lambda: CWClassifier(rule="var", covariance="diag", shuffle=False),
    "cw exact, 3 passes shuffled": lambda: CWClassifier(
        covariance="diag", diag_method="exact", n_iter=3, shuffle=True, random_state=1
    ),
    "cw stdev, 3 passes": lambda: CWClassifier(covariance="diag", diag_method="exact", n_iter=3),
    "arow, intercept": lambda: AROWClassifier(covariance="diag", fit_intercept=True),
    "scw l2": lambda: SCWClassifier(covariance="diag", diag_method="l2"),
    "pa": lambda: PAClassifier(covariance="diag"),
}


def _csr(n=60, d=30, seed=0, classes=2):
    rng = np.random.default_rng(seed)
    D = rng.normal(size=(n, d)) * (rng.random((n, d)) < 0.3)
    y = (np.floor((D[:, :3].sum(axis=1) + 3.0) * classes / 6.0)).clip(0, classes - 1)
    X = sp.csr_matrix(D)
    X.indices, X.indptr = X.indices.astype(np.int32), X.indptr.astype(np.int32)
    return X, y.astype(int)


def _state(est):
    state = est.engine_.state_dict()  # (a model in slots stays there)
    return state["mean"], state["variance"], est.n_updates_, est.n_mistakes_


def _same(a, b):
    for u, v in zip(a, b, strict=True):
        np.testing.assert_array_equal(u, v)


@pytest.fixture
def checked_first(monkeypatch):
    """A switch: the estimators check X's values themselves, as before the walk did."""

    def switch():
        monkeypatch.setattr(PrimalDiagEngine, "checks_rows", False)

    return switch


def _counted_scans(monkeypatch) -> list:
    calls: list = []
    real = est_input.checked_values
    monkeypatch.setattr(
        est_input, "checked_values", lambda *a, **k: calls.append(1) or real(*a, **k)
    )
    return calls


@pytest.mark.parametrize("classes", [2, 3])
@pytest.mark.parametrize("name", list(MAKERS))
def test_values_left_to_the_walk_learn_the_same_model(name, classes, monkeypatch):
    X, y = _csr(classes=classes)
    scans = _counted_scans(monkeypatch)
    late = MAKERS[name]().fit(X, y)
    more = MAKERS[name]().partial_fit(X[:20], y[:20], classes=np.unique(y))
    more.partial_fit(X[20:], y[20:])
    shuffled = int(MAKERS[name]().shuffle)  # (a shuffled fit checks X before it draws)
    assert len(scans) == shuffled  # (else no pass over X's values before the walk)
    monkeypatch.setattr(PrimalDiagEngine, "checks_rows", False)
    _same(_state(late), _state(MAKERS[name]().fit(X, y)))
    again = MAKERS[name]().partial_fit(X[:20], y[:20], classes=np.unique(y))
    _same(_state(more), _state(again.partial_fit(X[20:], y[20:])))
    assert len(scans) == 3 + shuffled


def _nan(X):
    X.data[X.indptr[7] + 1] = np.nan
    return X


def _inf(X):
    X.data[X.indptr[9]] = -np.inf
    return X


def _too_large(X):
    X.data[X.indptr[5]] = 1e160  # (|x|^2 a overflows)
    return X


def _column_out_of_range(X):
    X.indices[X.indptr[8] + 1] = 10_000
    return X


def _negative_column(X):
    X.indices[X.indptr[4]] = -1
    return X


def _falling_row_pointers(X):
    X.indptr[3] = X.indptr[5]
    return X


REFUSED = {
    "nan": (_nan, "row 7"),
    "inf": (_inf, "row 9"),
    "too large": (_too_large, "row 5 of X is too large"),
    "column out of range": (_column_out_of_range, "column index 10000 in row 8"),
    "negative column": (_negative_column, "column index -1 in row 4"),
    "falling row pointers": (_falling_row_pointers, "row pointers"),
}


@pytest.mark.parametrize("bad", list(REFUSED))
@pytest.mark.parametrize(
    "name", ["cw kl", "cw exact, 3 passes shuffled", "cw stdev, 3 passes", "arow, intercept"]
)
def test_a_row_the_walk_refuses_gets_the_estimators_error_and_the_model_stays(
    name, bad, checked_first
):
    X, y = _csr()
    spoil, match = REFUSED[bad]
    errors = []
    for late in (True, False):
        if not late:
            checked_first()
        fitted = MAKERS[name]().fit(X, y)
        before = _state(fitted)
        with pytest.raises(ValueError, match=match) as fit_err:
            fitted.fit(spoil(X.copy()), y)  # a refit keeps the model it had
        _same(_state(fitted), before)
        with pytest.raises(ValueError, match=match) as call_err:
            fitted.partial_fit(spoil(X.copy()), y)
        _same(_state(fitted), before)
        fresh = MAKERS[name]()
        with pytest.raises(ValueError, match=match):
            fresh.partial_fit(spoil(X.copy()), y)
        assert not hasattr(fresh, "classes_")
        errors.append((str(fit_err.value), str(call_err.value)))
    assert errors[0] == errors[1]


def _unsorted(X):
    lo, hi = X.indptr[6], X.indptr[7]
    X.indices[lo:hi] = X.indices[lo:hi][::-1].copy()
    X.data[lo:hi] = X.data[lo:hi][::-1].copy()
    X.has_sorted_indices = False
    return X


def _duplicates(X):
    """Row 2's first entry stored as two halves, in a matrix rebuilt to hold both."""
    rows = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
    k = X.indptr[2]
    data = np.insert(X.data, k, X.data[k] / 2)
    data[k + 1] /= 2
    cols = np.insert(X.indices, k, X.indices[k])
    indptr = np.searchsorted(np.insert(rows, k, 2), np.arange(X.shape[0] + 1)).astype(np.int32)
    return sp.csr_matrix((data, cols.astype(np.int32), indptr), shape=X.shape)


def _large_but_fine(X):
    """|x|^2 a of row 3 above half of float64's largest (the walk's own bound), below
    the largest (the estimators' bound): refused by the walk, learnt after the checks."""
    lo, hi = X.indptr[3], X.indptr[4]
    X.data[lo:hi] = 0.0
    X.data[lo] = 1.2e154
    return X


LEARNT = {"unsorted": _unsorted, "duplicates": _duplicates, "large but fine": _large_but_fine}


@pytest.mark.parametrize("case", list(LEARNT))
@pytest.mark.parametrize("name", ["cw kl", "cw stdev, 3 passes", "pa"])
def test_rows_the_walk_refuses_but_the_checks_pass_are_learnt_as_checked(name, case, monkeypatch):
    X, y = _csr()
    S = LEARNT[case](X.copy())
    if case == "large but fine":
        assert 0.5 * np.finfo(float).max < (S[3].data ** 2).sum() < np.finfo(float).max
    caught = []
    real = walk.diag_fit

    def spy(*a, **k):
        try:
            return real(*a, **k)
        except RowsUnchecked as err:
            caught.append(err.row)
            raise

    monkeypatch.setattr("kernelcw.engines.primal_diag.diag_fit", spy)
    with np.errstate(over="ignore"):
        late = MAKERS[name]().fit(S, y)
        assert caught  # (the walk refused the row, and the estimator's checks took over)
        monkeypatch.setattr(PrimalDiagEngine, "checks_rows", False)
        _same(_state(late), _state(MAKERS[name]().fit(S, y)))


_RULE = check_params(CWClassifier(rule="var", covariance="diag"))[0]  # (a = 1)


def _walk(X, Y, checked, rule=None):
    d = X.shape[1]
    mu, s = np.zeros((1, d)), np.zeros((1, d))
    rule = rule or _RULE
    out = np.empty((X.shape[0], 1))
    walk.diag_fit(mu, s, X, Y, rule, out, "kl", no_log(1), checked=checked)
    return mu, s


@pytest.mark.parametrize("bad", ["nan", "too large", "column out of range", "unsorted"])
def test_the_walk_stops_before_the_row_it_refuses(bad):
    X, y = _csr(seed=3)
    Y = np.where(y == 1, 1.0, -1.0)[:, None]
    spoil = {"unsorted": _unsorted, **{k: v[0] for k, v in REFUSED.items()}}[bad]
    S = spoil(X.copy())
    row = {"nan": 7, "too large": 5, "column out of range": 8, "unsorted": 6}[bad]
    d = X.shape[1]
    mu, s = np.zeros((1, d)), np.zeros((1, d))
    rule = _RULE
    with pytest.raises(RowsUnchecked) as err:
        walk.diag_fit(mu, s, S, Y, rule, np.empty((X.shape[0], 1)), "kl", checked=False)
    assert err.value.row == row
    _same((mu, s), _walk(X[:row], Y[:row], True))  # the rows before it, and none of it
    if bad in ("column out of range", "unsorted"):  # (refused whoever checked the values)
        with pytest.raises(RowsUnchecked):
            _walk(S, Y, True)
    again = pickle.loads(pickle.dumps(err.value))
    assert again.row == row and str(again) == str(err.value)


def test_the_walks_check_and_its_classifier_agree_on_random_rows():
    """A round that fails its check is told apart from a non-finite step by
    :func:`row_within`, which checks the row again: both must agree on every row."""
    rng = np.random.default_rng(5)
    rule = _RULE
    values = [0.5, -2.0, np.nan, np.inf, 1e154, 1.2e154, 1e200, 0.0]
    for _ in range(400):
        m = int(rng.integers(1, 5))
        cols = rng.integers(-1, 12, size=m).astype(np.int32)
        vals = rng.choice(values, size=m)
        X = sp.csr_matrix((vals, cols.clip(0), np.array([0, m])), shape=(1, 11))
        X.indices = cols  # (scipy's constructor would refuse -1)
        Y = np.ones((1, 1))
        limits = (np.int64(11), walk._SQ_MAX)
        fits = walk.row_within(cols, vals, limits, 1.0, 0.0)
        mu, s = np.zeros((1, 11)), np.zeros((1, 11))
        try:
            with np.errstate(all="ignore"):
                walk.diag_fit(mu, s, X, Y, rule, np.empty((1, 1)), "kl", checked=False)
            assert fits
        except RowsUnchecked:
            assert not fits
            assert not (mu.any() or s.any())
        except FloatingPointError:
            assert fits


@pytest.mark.parametrize("bad", ["nan", "column out of range", "unsorted"])
def test_wide_models_in_slots_check_rows_as_they_place_them(bad, monkeypatch):
    """The slots walk checks each coordinate before it reads the slot table, and |x|^2
    in the rounds: a model kept in slots learns as the checks-first path, refuses as
    it does, and a refused call gives back the slots it placed."""
    monkeypatch.setattr(PrimalDiagEngine, "SLOTS_FROM", 1)
    X, y = _csr()
    scans = _counted_scans(monkeypatch)
    est = MAKERS["arow, intercept"]().fit(X[:30], y[:30])
    assert est.engine_._slots is not None
    spoil = {"unsorted": _unsorted, **{k: v[0] for k, v in REFUSED.items()}}[bad]
    S = spoil(X.copy())
    n_slots = int(est.engine_._slots.n[0])
    before = _state(est)
    if bad == "unsorted":  # (learnt as its canonical form)
        est.partial_fit(S, y)
    else:
        with pytest.raises(ValueError, match=REFUSED[bad][1]):
            est.partial_fit(S, y)
        assert int(est.engine_._slots.n[0]) == n_slots
        _same(_state(est), before)
        est.partial_fit(X, y)
    assert est.engine_._slots is not None
    assert len(scans) == 1 if bad == "unsorted" else 2  # (only after a refusal)
    monkeypatch.setattr(PrimalDiagEngine, "checks_rows", False)
    again = MAKERS["arow, intercept"]().fit(X[:30], y[:30])
    _same(_state(est), _state(again.partial_fit(S if bad == "unsorted" else X, y)))


def test_row_pointers_past_the_arrays_are_refused_before_a_shuffle():
    """scipy's constructor checks only the first and last row pointer; a shuffle copies
    rows by them (``X[order]``), unchecked: they are checked before."""
    X = sp.csr_matrix(
        (np.ones(4), np.zeros(4, np.int32), np.array([0, 50_000_000, 2, 3, 4], np.int32)),
        shape=(4, 3),
    )
    est = CWClassifier(covariance="diag", shuffle=True, random_state=0)
    with pytest.raises(ValueError, match="row pointers"):
        est.fit(X, [0, 1, 0, 1])


def _overflowing_step_then_nan():
    """Rows whose Perceptron steps overflow the mean at row 9, and NaN in row 10."""
    D = np.zeros((11, 9))
    D[np.arange(9), np.arange(9)] = 0.9e154
    D[9] = -0.3e154
    D[10] = 1.0
    X = sp.csr_matrix(D)
    X.indices, X.indptr = X.indices.astype(np.int32), X.indptr.astype(np.int32)
    X.data[-1] = np.nan
    return X, np.r_[[0] * 9, 1, 1]


ORDER = {
    "nan and one class": (lambda: (_nan(_csr()[0]), np.zeros(60, int)), {}),
    "bad column and a float label": (
        lambda: (_column_out_of_range(_csr()[0]), np.r_[0.5, np.zeros(59)]),
        {},
    ),
    "falling pointers and classes=[0]": (
        lambda: (_falling_row_pointers(_csr()[0]), _csr()[1]),
        {"classes": [0]},
    ),
    "a step that overflows, then nan": (_overflowing_step_then_nan, {}),
}


@pytest.mark.parametrize("case", list(ORDER))
def test_x_errors_come_first_as_when_x_was_checked_first(case, monkeypatch):
    make, kw = ORDER[case]
    errors = []
    for checks_rows in (True, False):
        monkeypatch.setattr(PrimalDiagEngine, "checks_rows", checks_rows)
        X, y = make()
        est = MAKERS["cw kl"]()
        if case.startswith("a step"):
            est = PerceptronClassifier(covariance="diag", fit_intercept=False)
        with pytest.raises(Exception) as err:
            est.partial_fit(X, y, **kw) if kw else est.fit(X, y)
        errors.append((type(err.value), str(err.value)))
    assert errors[0] == errors[1]
    assert errors[0][0] is ValueError and "row" in errors[0][1]


def test_indices_reordered_in_place_after_scipy_cached_its_flag():
    """scipy caches whether a matrix is canonical; indices reversed in place afterwards
    leave the flag stale. The walk refuses the row, and the estimator's checks find the
    order anew: the model is that of the canonical matrix."""
    X, y = _csr()
    assert X.has_canonical_format  # (computed, and cached)
    S = X.copy()
    assert S.has_canonical_format
    lo, hi = S.indptr[6], S.indptr[7]
    S.indices[lo:hi] = S.indices[lo:hi][::-1].copy()
    S.data[lo:hi] = S.data[lo:hi][::-1].copy()
    late = MAKERS["cw kl"]().fit(S, y)
    _same(_state(late), _state(MAKERS["cw kl"]().fit(_unsorted(X.copy()), y)))


def test_rows_in_range():
    assert csr_rows_in_range(np.array([0, 2, 2, 5], np.int32), 5, 5)
    assert not csr_rows_in_range(np.array([0, 2, 1, 5], np.int32), 5, 5)
    assert not csr_rows_in_range(np.array([1, 2, 5], np.int32), 5, 5)
    assert not csr_rows_in_range(np.array([0, 2, 6], np.int32), 6, 5)
    assert not csr_rows_in_range(np.array([], np.int32), 0, 0)


@pytest.mark.parametrize("random_state", ["bad", 1.5])
def test_x_errors_come_before_an_invalid_random_state(random_state, monkeypatch):
    X, y = _csr()
    errors = []
    for checks_rows in (True, False):
        monkeypatch.setattr(PrimalDiagEngine, "checks_rows", checks_rows)
        est = CWClassifier(covariance="diag", random_state=random_state)
        with pytest.raises(ValueError) as err:
            est.fit(_nan(X.copy()), y)
        errors.append(str(err.value))
    assert errors[0] == errors[1] and "row 7" in errors[0]


def test_a_refused_shuffled_fit_draws_nothing_from_the_users_random_state(monkeypatch):
    """A shuffle draws its order from the user's RandomState, which a failed fit cannot
    give back: X is checked before the first draw, as before."""
    X, y = _csr()
    states = []
    for checks_rows in (True, False):
        monkeypatch.setattr(PrimalDiagEngine, "checks_rows", checks_rows)
        rs = np.random.RandomState(0)
        est = CWClassifier(covariance="diag", shuffle=True, random_state=rs)
        with pytest.raises(ValueError, match="row 7"):
            est.fit(_nan(X.copy()), y)
        states.append(_state(est.fit(X, y)))  # (the next fit's order: the next draws)
    _same(states[0], states[1])


def test_a_refused_call_leaves_the_slots_buffer_as_small_as_it_was(monkeypatch):
    """A call reserves a slot per stored entry of X before its walk; a call the walk
    refuses gives them back (the buffer trimmed as a call that returns trims it)."""
    monkeypatch.setattr(PrimalDiagEngine, "SLOTS_FROM", 1)
    rng = np.random.default_rng(2)
    X = sp.random(400, 20_000, density=3e-4, format="csr", random_state=rng)
    X.indices, X.indptr = X.indices.astype(np.int32), X.indptr.astype(np.int32)
    y = rng.integers(0, 2, 400)
    est = MAKERS["cw kl"]().fit(X[:20], y[:20])
    placed = int(est.engine_._slots.n[0])
    with pytest.raises(ValueError, match="row 7"):
        est.partial_fit(_nan(X.copy()), y)
    assert X.nnz > 8 * placed  # (the call reserved room for that many)
    assert est.engine_._pairs.shape[0] <= max(64, 4 * (placed + 1))


def test_checked_rows_whose_canonical_flag_is_stale_are_put_in_order():
    """The full-covariance engine walks first-order rules with the diagonal walk, which
    refuses rows out of order even where the estimator checked X (scipy's cached flag
    said canonical): X's order is found anew and the rows learnt in it."""
    X, y = _csr()
    assert X.has_canonical_format
    S = X.copy()
    assert S.has_canonical_format
    lo, hi = S.indptr[6], S.indptr[7]
    S.indices[lo:hi] = S.indices[lo:hi][::-1].copy()
    S.data[lo:hi] = S.data[lo:hi][::-1].copy()
    stale = PAClassifier(covariance="full").fit(S, y)
    fresh = PAClassifier(covariance="full").fit(_unsorted(X.copy()), y)
    np.testing.assert_array_equal(stale.coef_, fresh.coef_)
