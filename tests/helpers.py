"""Comparisons shared by the tests against the slow references."""

from __future__ import annotations

import numpy as np

from kernelcw import registry

#: The prior scale and rule parameters of the reference tests: non-default values, so
#: that a parameter that is not passed through shows up. Hard-constraint rules
#: (CW-Stdev, CW-Var) get eta = 0.7: with eta = 0.8 and 12% label noise their variance
#: collapses geometrically, the compiled code floors v at VAR_FLOOR * a |x|^2 by design
#: and a comparison with the floor-free references stops being meaningful.
A = 1.3
RULE_PARAMS = {
    "stdev": dict(eta=0.7),
    "var": dict(eta=0.7),
    "scw1": dict(eta=0.8, C=0.3),
    "scw2": dict(eta=0.8, C=0.5),
    "arow": dict(r=0.7),
    "sop": dict(),
    "perceptron": dict(),
    "pa": dict(),
    "pa1": dict(C=0.02),
    "pa2": dict(C=0.5),
}


#: The references' rule names that differ from kernelcw's algorithm names.
_ALGORITHM_OF_RULE = {"stdev": "cw-stdev", "var": "cw-var"}


def make_rule_estimator(rule: str, params: dict, **common):
    """kernelcw's estimator for the references' ``rule``, through kernelcw.registry: the
    rule parameters it takes from ``params`` (others ignored), and ``common``."""
    name = _ALGORITHM_OF_RULE.get(rule, rule)
    own = {p: params[p] for p in registry.ALGORITHMS[name].params}
    return registry.make(name, **own, **common)


def assert_rel_close(got, want, rtol, what=""):
    """||got - want|| <= rtol ||want|| (Frobenius over the whole array), got finite."""
    got = np.asarray(got, dtype=float)
    want = np.asarray(want, dtype=float)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    assert np.all(np.isfinite(got)), f"{what}: non-finite values"
    err = float(np.linalg.norm(got - want))
    scale = float(np.linalg.norm(want))
    assert err <= rtol * scale, (
        f"{what}: ||fast - ref|| = {err:.3e}, ||ref|| = {scale:.3e}, "
        f"relative {err / scale if scale else np.inf:.3e} > {rtol:g}"
    )


def assert_same_predictions(got, want, what=""):
    """Identical per-round predictions; on failure, the first round that differs."""
    got = np.asarray(got)
    want = np.asarray(want)
    assert got.shape == want.shape, f"{what}: {got.shape} != {want.shape}"
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, (
        f"{what}: {bad.size} of {want.size} predictions differ, first at round {bad[0]} "
        f"(fast {got[bad[0]]!r}, ref {want[bad[0]]!r})"
    )


def assert_same_budget_model(got, want, X, rtol=1e-10, what=""):
    """Two budgeted kernel models of one stream, learnt in other forms or cuts: the same
    support vectors, counters and predictions on X, nu and Pi within ``rtol``."""
    np.testing.assert_array_equal(got.support_, want.support_, err_msg=what)
    assert (got.n_updates_, got.n_mistakes_) == (want.n_updates_, want.n_mistakes_), what
    assert_rel_close(got.dual_coef_, want.dual_coef_, rtol, what=f"{what} nu")
    assert_rel_close(got.covariance_coef_, want.covariance_coef_, rtol, what=f"{what} Pi")
    assert_same_predictions(got.predict(X), want.predict(X), what)


def all_finite_state(est) -> bool:
    """Every float array of the estimator's engine state (its policies' too) is finite."""
    state = est._engine.state_dict()
    return all(np.all(np.isfinite(v)) for v in state.values() if v.dtype.kind == "f")


def learn_rows_all_or_nothing(est, X, y, classes) -> int:
    """One ``partial_fit`` per row of (X, y): each call either raises FloatingPointError
    and leaves the engine's state exactly as it was (a first call that fails: the model
    unfitted), or leaves every float array of the state finite. Returns the number of
    calls that raised (RuntimeWarnings of the floor are ignored)."""
    import warnings

    failed = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for i in range(len(y)):
            before = est._engine.state_dict() if hasattr(est, "classes_") else None
            try:
                est.partial_fit(X[i : i + 1], y[i : i + 1], classes=classes)
            except FloatingPointError:
                failed += 1
                if before is None:
                    assert not hasattr(est, "classes_"), f"row {i}: a failed first call"
                    continue
                after = est._engine.state_dict()
                assert after.keys() == before.keys(), f"row {i}"
                for k in before:
                    np.testing.assert_array_equal(after[k], before[k], err_msg=f"row {i}: {k}")
                continue
            state = est._engine.state_dict()
            bad = [k for k, v in state.items() if v.dtype.kind == "f" and not np.isfinite(v).all()]
            assert not bad, f"row {i}: {bad}"
    return failed


def stream(n: int, seed: int = 0, d: int = 5):
    """A reproducible binary stream, not linearly separable: Gaussian rows, label
    |x_0 x_1| + 0.5 x_2 > 0.6, a tenth of the labels flipped."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = (np.abs(X[:, 0] * X[:, 1]) + 0.5 * X[:, 2] > 0.6).astype(int)
    flip = rng.random(n) < 0.1
    y[flip] = 1 - y[flip]
    return X, y
