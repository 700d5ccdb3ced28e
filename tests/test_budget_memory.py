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


@pytest.mark.parametrize("policy", ["oldest", "random"])
@pytest.mark.parametrize("kind", ["first-order", "explicit solver"])
def test_estimate_follows_the_form_the_model_is_kept_in(policy, kind):
    """A first-order rule, or solver="explicit", keeps its budget in the explicit form
    whatever the policy (engines.dual.convert.initial_form): its estimate is that
    form's, not the queue's or the lazy form's (a PA-I model at B = 20,000 under
    "oldest" was refused as needing 46.5 GiB), and still bounds what it uses."""
    from kernelcw import PAClassifier
    from kernelcw.spec import DUAL_MEMORY

    rng = np.random.default_rng(1)
    X = rng.normal(size=(700, 10))
    y = rng.integers(0, 2, 700)
    if kind == "first-order":
        est = PAClassifier(variant=1, kernel="rbf", budget=B, budget_policy=policy)
    else:
        est = AROWClassifier(kernel="rbf", budget=B, budget_policy=policy, solver="explicit")
    est.fit(X, y)
    engine = est._engine
    assert engine.factor_forms()[0] in ("explicit", "first_order")
    kept, call = DUAL_MEMORY["explicit"]
    b = engine.spec.block_size
    want = int((kept + call) * B * B * 8 + (8 * B * b + 16 * b * b) * 8)
    assert engine.spec.memory_bytes() == want
    assert engine.nbytes <= want


@pytest.mark.parametrize("policy", ["oldest", "random", "smallest", "project"])
@pytest.mark.parametrize(
    ("rule", "solver", "batch"),
    [
        ("arow", "cholesky", 1),
        ("arow", "cholesky", 3),
        ("arow", "explicit", 1),
        ("pa1", "cholesky", 1),
    ],  # fmt: skip
)
def test_the_estimate_names_the_form_the_engine_binds_into(policy, rule, solver, batch):
    """EngineSpec.bound_form, which the estimate reads, is the form the engine keeps the
    bound model in (engines.dual.convert): the two choices cannot drift apart."""
    from kernelcw import PAClassifier

    rng = np.random.default_rng(2)
    X = rng.normal(size=(80, 5))
    y = rng.integers(0, 2, 80)
    kw = dict(kernel="rbf", budget=12, budget_policy=policy, solver=solver)
    est = PAClassifier(variant=1, **kw) if rule == "pa1" else AROWClassifier(**kw)
    est.budget_batch = batch
    est.fit(X, y)
    engine = est._engine
    assert np.max(est.n_updates_) > 12  # the budget bound
    form = engine.factor_forms()[0]
    form = {"first_order": "explicit"}.get(form, form)
    if form == "pruned" and policy == "project":
        form = "pruned-project"
    assert form == engine.spec.bound_form
