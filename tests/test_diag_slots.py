"""The diagonal engine's two storages give the same numbers, bit for bit.

A fresh :class:`~kernelcw.engines.primal_diag.PrimalDiagEngine` over a wide space
keeps its state in slots (:mod:`kernelcw.engines._diag_slots`) and moves it to the
dense ``(d, K, 2)`` buffer when ``mean`` is read or dense rows come; a narrow one is
dense from the start (``SLOTS_FROM``). Here the same calls go to a twin of each
kind: margins, counts, decisions, margin variances and ``state_dict`` must be
equal (``np.array_equal``) after learning in chunks, undoing a call, failing a
call, pickling, and moving from slots to dense. The other engine tests run at
small d: dense.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import scipy.sparse as sp

from kernelcw import AROWClassifier, CWClassifier, PAClassifier, SCWClassifier, load, save
from kernelcw.engines._diag_walk import diag_fit
from kernelcw.engines.primal_diag import PrimalDiagEngine
from kernelcw.spec import engine_spec

D = 40
MAKERS = {
    "kl": lambda: CWClassifier(eta=0.7, covariance="diag"),
    "l2": lambda: SCWClassifier(variant=2, C=0.5, covariance="diag", diag_method="l2"),
    "exact": lambda: SCWClassifier(variant=1, C=0.3, covariance="diag", diag_method="exact"),
    "arow": lambda: AROWClassifier(r=0.7, covariance="diag", fit_intercept=True),
    "pa1": lambda: PAClassifier(variant=1, C=0.5, covariance="diag"),
}


class Slotted(PrimalDiagEngine):
    SLOTS_FROM = 0


class Dense(PrimalDiagEngine):
    SLOTS_FROM = 2**62


def _data(n_classes: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    n = 200
    X = rng.normal(size=(n, D)) * (rng.random((n, D)) < 0.15)
    W = rng.normal(size=(max(n_classes, 2), D))
    y = np.argmax(X @ W.T + 0.5 * rng.normal(size=(n, W.shape[0])), axis=1)
    K = 1 if n_classes == 2 else n_classes
    Y = np.where(y[:, None] == (np.arange(K) if K > 1 else [1]), 1.0, -1.0)
    return sp.csr_matrix(X), Y, y


def _twins(name: str, n_classes: int):
    spec = engine_spec(MAKERS[name](), D, n_classes)  # with an intercept: D + 1 columns
    return Slotted(spec), Dense(spec)


def _assert_same(a: PrimalDiagEngine, b: PrimalDiagEngine, P) -> None:
    np.testing.assert_array_equal(a.decision(P), b.decision(P))
    np.testing.assert_array_equal(a.margin_variance(P), b.margin_variance(P))
    for e in (a, b):  # both sums in one pass: each the same as alone
        f, v = e.margins(P)
        np.testing.assert_array_equal(f, e.decision(P))
        np.testing.assert_array_equal(v, e.margin_variance(P))
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys()
    for k in sa:
        np.testing.assert_array_equal(sa[k], sb[k], err_msg=k)


def _learn_both(a, b, X, Y):
    ra, rb = a.learn(X, Y), b.learn(X, Y)
    for fa, fb in zip(ra, rb, strict=True):
        np.testing.assert_array_equal(fa, fb)


def _cols(X, spec):
    """X with the intercept's column when the spec has one (as the estimator adds it)."""
    if not spec.intercept:
        return X
    return sp.hstack([X, np.full((X.shape[0], 1), spec.intercept)], format="csr")


@pytest.mark.parametrize("n_classes", [2, 3])
@pytest.mark.parametrize("name", list(MAKERS))
def test_slots_equal_dense_in_chunks_with_undo(name, n_classes):
    a, b = _twins(name, n_classes)
    X, Y, _ = _data(n_classes)
    X = _cols(X, a.spec)
    P = X[::3]
    _assert_same(a, b, P)  # the prior
    _learn_both(a, b, X[:60], Y[:60])
    assert a._slots is not None and b._slots is None
    for lo, hi in [(60, 61), (61, 120)]:  # a checkpointed call, undone
        ca, cb = a.checkpoint(X[lo:hi]), b.checkpoint(X[lo:hi])
        placed = int(a._slots.n[0])
        _learn_both(a, b, X[lo:hi], Y[lo:hi])
        a.restore(ca)
        b.restore(cb)
        assert int(a._slots.n[0]) == placed
        _assert_same(a, b, P)
    _learn_both(a, b, X[60:150], Y[60:150])
    assert a._slots is not None  # predicting and state_dict stay in slots
    _assert_same(a, b, P)
    a.mean  # noqa: B018 -- reading the means moves the state to dense
    assert a._slots is None
    _assert_same(a, b, P)
    _learn_both(a, b, X[150:], Y[150:])
    _assert_same(a, b, P)


@pytest.mark.parametrize("n_classes", [2, 3])
@pytest.mark.parametrize("name", list(MAKERS))
def test_intercept_left_to_the_walk_is_the_stored_column(name, n_classes):
    """CSR rows without the intercept's column (as the estimator passes them to this
    engine): each walk appends the constant c itself, and learns, undoes, fails and
    predicts as from the matrix that stores the column, bit for bit, in both storages,
    with the same slots in the same order (the intercept's placed after the first row's
    coordinates, by the first call, and given back when that call is undone: the
    prior); the column stored still works."""
    est = MAKERS[name]().set_params(fit_intercept=True, intercept_scaling=2.5)
    spec = engine_spec(est, D, n_classes)
    assert spec.intercept == 2.5 and spec.n_features == D + 1
    X, Y, _ = _data(n_classes, seed=2)
    X[5] = 0.0  # a row of no stored entry: the intercept's alone
    X.eliminate_zeros()
    W = _cols(X, spec)
    for Twin in (Slotted, Dense):
        a, b = Twin(spec), Twin(spec)  # a learns X, b the stored column
        _same_as(a, X, b, W)  # the prior, the intercept's coordinate in no slot yet
        _learn_both_as(a, X, b, W, slice(0, 1), Y)  # placed by a first call, undone
        restore_both_as(a, X, b, W, slice(1, 2), Y)
        a.restore(None)  # (a first call's checkpoint: the prior)
        b.restore(None)
        _same_as(a, X, b, W)
        if Twin is Slotted:
            assert int(a._slots.n[0]) == 0
        _learn_both_as(a, X, b, W, slice(0, 70), Y)
        for lo, hi in [(70, 71), (71, 130)]:  # a checkpointed call, undone
            restore_both_as(a, X, b, W, slice(lo, hi), Y)
            _same_as(a, X, b, W)
        bad = X[130:160].toarray()
        bad[9, 4] = 1e300  # the walk raises at row 9 (not AROW, PA-I: their steps go to 0)
        bad = sp.csr_matrix(bad)
        raised = []
        for eng, rows in ((a, bad), (b, _cols(bad, spec))):
            ck = eng.checkpoint(rows)
            try:
                eng.learn(rows, Y[130:160])
            except FloatingPointError:
                raised.append(eng)
            eng.restore(ck)
        assert len(raised) == (0 if name in ("arow", "pa1") else 2)
        _same_as(a, X, b, W)
        _learn_both_as(a, X, b, W, slice(70, None), Y)
        assert (a._slots is not None) == (Twin is Slotted)
        _same_as(a, X, b, W)
        _learn_both_as(a, W, b, W, slice(0, 40), Y)  # the stored column: as before
        _same_as(a, X, b, W)
    with pytest.raises(ValueError, match="intercept"):  # full-width rows: not with it
        diag_fit(np.zeros((1, D + 1)), np.zeros((1, D + 1)), W[:3], Y[:3, :1], spec.rule,
                 np.empty((3, 1)), intercept=2.5)  # fmt: skip


def restore_both_as(a, Xa, b, Xb, rows, Y):
    """A checkpointed call on each (its rows), then its restore; the slots as before."""
    before = None if a._slots is None else (int(a._slots.n[0]), int(b._slots.n[0]))
    ca, cb = a.checkpoint(Xa[rows]), b.checkpoint(Xb[rows])
    _learn_both_as(a, Xa, b, Xb, rows, Y)
    a.restore(ca)
    b.restore(cb)
    if before is not None:
        assert (int(a._slots.n[0]), int(b._slots.n[0])) == before


def _learn_both_as(a, Xa, b, Xb, rows, Y):
    ra, rb = a.learn(Xa[rows], Y[rows]), b.learn(Xb[rows], Y[rows])
    for fa, fb in zip(ra, rb, strict=True):
        np.testing.assert_array_equal(fa, fb)


def _same_as(a, Xa, b, Xb):
    np.testing.assert_array_equal(a.decision(Xa), b.decision(Xb))
    np.testing.assert_array_equal(a.margin_variance(Xa), b.margin_variance(Xb))
    np.testing.assert_array_equal(a.decision(Xa), a.decision(Xb))
    f, v = a.margins(Xa)  # (both in one pass, the intercept's entry appended)
    np.testing.assert_array_equal(f, b.decision(Xb))
    np.testing.assert_array_equal(v, b.margin_variance(Xb))
    sa, sb = a.state_dict(), b.state_dict()
    for k in sa:
        np.testing.assert_array_equal(sa[k], sb[k], err_msg=k)
    if a._slots is not None:  # the same slots, in the same order
        n = int(a._slots.n[0])
        assert n == int(b._slots.n[0])
        np.testing.assert_array_equal(a._slots.keys[: n + 1], b._slots.keys[: n + 1])
        np.testing.assert_array_equal(a._slots.table, b._slots.table)
        np.testing.assert_array_equal(a._pairs[: n + 1], b._pairs[: n + 1])


@pytest.mark.parametrize("name", ["kl", "exact"])
def test_slots_after_a_failed_call_and_dense_rows(name):
    """A call that fails part-way is undone (placed slots given back); dense rows move
    the state to dense first."""
    a, b = _twins(name, 3)
    X, Y, _ = _data(3, seed=1)
    _learn_both(a, b, X[:80], Y[:80])
    bad = X[80:100].toarray()
    bad[7, 3] = 1e300  # a margin variance that overflows: the walk raises at row 7
    bad = sp.csr_matrix(bad)
    for eng in (a, b):
        ck = eng.checkpoint(bad)
        with pytest.raises(FloatingPointError):
            eng.learn(bad, Y[80:100])
        eng.restore(ck)
    _assert_same(a, b, X)
    _learn_both(a, b, X[80:120].toarray(), Y[80:120])
    assert a._slots is None
    _learn_both(a, b, X[120:], Y[120:])
    _assert_same(a, b, X)


def test_slots_failing_in_a_fit_restore_the_prior():
    a, b = _twins("kl", 2)
    X, Y, _ = _data(2)
    bad = X[:30].toarray()
    bad[20, 1] = 1e300
    for eng in (a, b):
        ck = eng.checkpoint(sp.csr_matrix(bad))
        with pytest.raises(FloatingPointError):
            eng.learn(sp.csr_matrix(bad), Y[:30])
        eng.restore(ck)
    _assert_same(a, b, X)
    assert a._slots is not None and int(a._slots.n[0]) == 0


def test_slots_pickle_and_from_state_continue_bit_for_bit():
    a, b = _twins("l2", 3)
    X, Y, _ = _data(3, seed=2)
    _learn_both(a, b, X[:100], Y[:100])
    copy = pickle.loads(pickle.dumps(a))
    assert copy._slots is not None
    rebuilt = Slotted.from_state(a.spec, a.state_dict())  # a wide model: slots again
    assert rebuilt._slots is not None and rebuilt._w is None
    n_off_prior = int(np.count_nonzero(np.any(b.state_dict()["mean"] != 0.0, axis=0)))
    assert int(rebuilt._slots.n[0]) >= n_off_prior  # the coordinates learnt, not all d
    dense = Dense.from_state(a.spec, a.state_dict())
    assert dense._slots is None
    _learn_both(a, b, X[100:], Y[100:])
    for eng in (copy, rebuilt, dense):
        eng.learn(X[100:], Y[100:])
        _assert_same(eng, b, X)
    _assert_same(a, b, X)


def test_a_wide_fit_keeps_slots_and_matches_dense(monkeypatch, tmp_path):
    """Through the estimator: fit, partial_fit, predict_proba and save/load of a model
    in slots equal those of the dense one; coef_ reads (and moves) the state."""
    X, _, y = _data(3, seed=3)
    models = []
    for frm in (0, 2**62):
        monkeypatch.setattr(PrimalDiagEngine, "SLOTS_FROM", frm)
        est = CWClassifier(eta=0.8, covariance="diag", fit_intercept=True).fit(X[:120], y[:120])
        est.partial_fit(X[120:], y[120:])
        assert (est.engine_._slots is not None) == (frm == 0)
        save(est, tmp_path / f"m{frm}.zip")
        models.append(est)
    slotted, dense = models
    np.testing.assert_array_equal(slotted.predict_proba(X), dense.predict_proba(X))
    back = load(tmp_path / "m0.zip")
    np.testing.assert_array_equal(back.decision_function(X), dense.decision_function(X))
    np.testing.assert_array_equal(slotted.covariance_, dense.covariance_)
    assert slotted.engine_._slots is not None
    np.testing.assert_array_equal(slotted.intercept_, dense.intercept_)
    assert slotted.engine_._slots is not None  # one coordinate: read from the slots
    np.testing.assert_array_equal(slotted.coef_, dense.coef_)
    assert slotted.engine_._slots is None


def test_slots_predict_reads_no_index_past_the_stored_entries():
    """Prediction's checks read a CSR matrix's indices up to its last row pointer (the
    stored entries); the slots' gather must read no further (an index array with room
    left past nnz held anything: read, a crash)."""
    a, b = _twins("kl", 2)
    X, Y, _ = _data(2)
    _learn_both(a, b, X, Y)
    P = sp.csr_matrix(X[:3], copy=True)
    P.indices = np.concatenate([P.indices, np.full(300, 2**31 - 2, np.int32)])
    P.data = np.concatenate([P.data, np.zeros(300)])
    assert a._slots is not None
    for e in (a, b):
        np.testing.assert_array_equal(e.decision(P), e.decision(X[:3]))
        np.testing.assert_array_equal(e.margins(P)[1], e.margin_variance(X[:3]))
