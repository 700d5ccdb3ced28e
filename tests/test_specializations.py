"""Compiled functions are specialised on types, never on a constant's value.

numba compiles a jitted callee again for each literal argument a jitted caller passes
(``f(x, 0)`` makes a ``Literal[int](0)`` specialisation beside the ``int64`` one), and
also for the literal a counter starts from (``u = 0`` ... ``u += 1``: type inference
meets the literal first). Each is a whole compilation of the callee (0.1-1 s), paid in
every fresh install and by CI, for code that runs no faster. Callers pass typed values
(``np.int64(0)``, ``np.bool_(False)``). This test runs every engine and budget form
and fails on any kernelcw function compiled more than once for the same types but a
literal's value, naming it and the literals.

It sees what its process compiles: a caller loaded from numba's disk cache does not type
its callees again. A fresh checkout (CI) compiles everything, and an edited caller is
compiled again, so a literal added to a call is caught; unchanged code in a warm tree
passes without being looked at (delete the caches to look at it).
"""

from __future__ import annotations

import sys

import numpy as np
import pytest
import scipy.sparse as sp
from numba import typeof
from numba.core import types
from numba.core.registry import CPUDispatcher

from kernelcw import AROWClassifier, CWClassifier, PAClassifier, SCWClassifier
from kernelcw.engines import _diag_walk
from kernelcw.engines.primal_diag import PrimalDiagEngine


def _stream(n=80, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.where(X[:, 0] * X[:, 1] + 0.3 * rng.normal(size=n) > 0, 1, -1)
    return X, y


def _fit_and_rows(est, X, y, rows=4):
    """One fit, then ``rows`` one-row partial_fits (the quiet and one-input paths)."""
    est.fit(X[:-rows], y[:-rows])
    for i in range(len(y) - rows, len(y)):
        est.partial_fit(X[i : i + 1], y[i : i + 1])
    est.decision_function(X[:3])


def _workloads():
    X, y = _stream()
    yield SCWClassifier(kernel="rbf", gamma=0.5), X, y  # unbudgeted Cholesky panels
    for policy in ("oldest", "random", "smallest", "project"):
        kw = dict(kernel="rbf", gamma=0.5, budget=8, budget_policy=policy, random_state=0)
        for solver in ("cholesky", "explicit"):
            yield SCWClassifier(solver=solver, **kw), X, y
            yield PAClassifier(solver=solver, **kw), X, y
        yield SCWClassifier(budget_batch=3, **kw), X, y  # (batch pruning: second order)
    for rule in ("var", "stdev"):
        yield CWClassifier(rule=rule, covariance="diag", diag_method="exact"), X, y
    yield SCWClassifier(covariance="diag", diag_method="exact"), X, y
    yield AROWClassifier(covariance="diag"), sp.csr_matrix(X), y  # CSR rows, intercept
    yield AROWClassifier(covariance="full"), X, y
    yield PAClassifier(covariance="full"), X, y  # the full engine's first-order walk


def _plain(t):
    """The type a literal or an omitted argument's default stands for."""
    if isinstance(t, types.Omitted):
        return typeof(t.value)
    return types.unliteral(t)


def _repeated_specializations() -> list[str]:
    """Each kernelcw function compiled more than once for the same types but for a
    literal's value: ``name(types) <- [the literal signatures]``."""
    found = []
    for name, module in list(sys.modules.items()):
        if not name.startswith("kernelcw"):
            continue
        for attr, obj in vars(module).items():
            if not isinstance(obj, CPUDispatcher) or obj.py_func.__module__ != name:
                continue
            by_type: dict[tuple, list[tuple]] = {}
            for sig in obj.signatures:
                by_type.setdefault(tuple(_plain(t) for t in sig), []).append(sig)
            for sigs in by_type.values():
                if len(sigs) > 1:
                    lits = [tuple(str(t) for t in s if _plain(t) != t) for s in sigs]
                    found.append(f"{name}.{attr}: {len(sigs)} compilations, literals {lits}")
    return found


@pytest.mark.filterwarnings("ignore")
def test_no_function_is_compiled_for_a_literal_argument(monkeypatch):
    for est, X, y in _workloads():
        _fit_and_rows(est, X, y)
    monkeypatch.setattr(PrimalDiagEngine, "SLOTS_FROM", 0)  # (wide text's slots walk)
    X, y = _stream()
    for method in ("kl", "exact"):
        est = CWClassifier(rule="var", covariance="diag", diag_method=method)
        _fit_and_rows(est, sp.csr_matrix(X), y)
    try:  # river's one-row fast path (kernelcw._diag_stream), where river is installed
        from kernelcw.river import Classifier
    except ImportError:
        pass
    else:
        model = Classifier()
        X, y = _stream(20)
        for x, label in zip(X, y, strict=True):
            model.learn_one({f"x{j}": v for j, v in enumerate(x)}, bool(label > 0))
            model.predict_proba_one({f"x{j}": v for j, v in enumerate(x)})
    repeated = _repeated_specializations()
    assert not repeated, "compiled again for a literal:\n" + "\n".join(repeated)
    if not _diag_walk.row_margin.signatures:  # (called only from compiled walks)
        pytest.skip("the walks came from numba's disk cache: their callees were not typed")


def test_csr_rows_with_int64_indices_learn_as_int32_ones_and_stay_the_users():
    """scikit-learn's checks (and some scipy operations) make CSR matrices with int64
    indices: the estimators take them as int32 ones (one compiled walk for both), the
    same model to the bit, and the caller's matrix keeps its own arrays."""
    X, y = _stream(60, 6)
    X[np.abs(X) < 0.7] = 0.0
    X32 = sp.csr_matrix(X)
    X64 = X32.copy()
    X64.indices, X64.indptr = X64.indices.astype(np.int64), X64.indptr.astype(np.int64)
    before = (X64.indices.copy(), X64.indptr.copy(), X64.data.copy())
    a = AROWClassifier(covariance="diag").fit(X32, y)
    b = AROWClassifier(covariance="diag").fit(X64, y)
    b.partial_fit(X64[:3], y[:3])
    a.partial_fit(X32[:3], y[:3])
    np.testing.assert_array_equal(a.coef_, b.coef_)
    np.testing.assert_array_equal(a.decision_function(X32), b.decision_function(X64))
    assert X64.indices.dtype == np.int64 and X64.indptr.dtype == np.int64
    for got, want in zip((X64.indices, X64.indptr, X64.data), before, strict=True):
        np.testing.assert_array_equal(got, want)
    mixed = X32.copy()  # (int32 indices, int64 indptr: the same)
    mixed.indptr = mixed.indptr.astype(np.int64)
    c = AROWClassifier(covariance="diag").fit(mixed, y)
    ref = AROWClassifier(covariance="diag").fit(X32, y)
    np.testing.assert_array_equal(c.decision_function(mixed), ref.decision_function(X32))
    index_types = {str(sig[2]) for sig in _diag_walk._diag_csr.signatures}
    assert not any("int64" in t for t in index_types), index_types
