"""The memory check's estimate of a budgeted dual model (EngineSpec.memory_bytes)
bounds what the model keeps and what a call adds: a fit that the check lets through
fits. Measured as engine.nbytes once the budget binds, plus tracemalloc's peak over
one call, for every policy, q = 1 and q > 1, binary and 3-class."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from kernelcw import AROWClassifier

B = 150


@pytest.mark.parametrize("policy", ["oldest", "random", "smallest", "project"])
@pytest.mark.parametrize("batch", [1, 15])
@pytest.mark.parametrize("n_classes", [2, 3])
def test_estimate_bounds_the_kept_state_and_one_call(policy, batch, n_classes):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(900, 10))
    y = rng.integers(0, n_classes, 900)  # random labels: every round updates
    est = AROWClassifier(kernel="rbf", budget=B, budget_policy=policy, budget_batch=batch)
    est.fit(X[:500], y[:500])
    est.partial_fit(X[500:600], y[500:600])  # the forms' spare buffers exist now
    tracemalloc.start()
    try:
        est.partial_fit(X[600:], y[600:])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    engine = est._engine
    assert max(f.n for f in engine.forms) > B - batch  # the budget binds
    used = engine.nbytes + peak
    estimate = engine.spec.memory_bytes()
    assert used <= estimate, (engine.factor_forms(), used / (8 * B * B), estimate / (8 * B * B))
    assert estimate <= 10 * used  # and not so loose that it refuses fits that would fit
