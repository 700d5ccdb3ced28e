"""The blocked walk of budgeted models ("smallest" and "project" with the Cholesky
solver, kernelcw.engines.dual.deferred) against the round-by-round walk
(solver="explicit"); "random" with the Cholesky solver is in the lazy form
(kernelcw.engines.dual.lazy), checked here against the same walk, and its blocked walk
(a model saved in that form) is reached by routing it there.

Both make the same rounds: the blocked one sums each sub-block's changes to Pi (and to
the inverse Gram matrix of "project") as deferred rank-one terms and adds them with
BLAS-3 calls, the round-by-round one changes the matrices in place at every round. The
slow references (tests/reference_budget.py) check both in tests/test_budget.py; here
long streams (more removals than the inverse Gram matrix's refresh period, several
sub-blocks per block, slots removed in the sub-block they entered) check that the two
forms give the same models to rounding, however the stream is cut.
"""

from __future__ import annotations

import numpy as np
import pytest
import reference_budget as rb

from kernelcw import AROWClassifier, CWClassifier, SCWClassifier
from kernelcw.budget.kernels import KINV_REFRESH
from kernelcw.engines.dual import convert, deferred

RULES = {
    "scw1": (SCWClassifier, dict(C=1.0, eta=0.8)),
    "scw2": (SCWClassifier, dict(C=0.5, eta=0.7, variant=2)),
    "arow": (AROWClassifier, dict(r=1.0)),
    "stdev": (CWClassifier, dict(eta=0.7)),
}


def _stream(n, d, seed, n_classes=2):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    score = X[:, 0] * X[:, 1] + np.sin(2 * X[:, 2])
    y = np.digitize(score, np.quantile(score, np.linspace(0, 1, n_classes + 1)[1:-1]))
    flip = rng.random(n) < 0.1
    y[flip] = rng.integers(0, n_classes, flip.sum())
    return X, y


def _est(rule, solver, policy, budget, **over):
    cls, p = RULES[rule]
    kw = dict(kernel="rbf", gamma=0.3, budget=budget, budget_policy=policy, solver=solver,
              random_state=3, fit_intercept=False)  # fmt: skip
    return cls(**{**kw, **p, **over})


def _fast_form(est, policy):
    """The Cholesky solver's form once the budget binds: "lazy" for "random" (unless
    routed to the blocked walk), the blocked nu/Pi walk for the others."""
    forms = est._engine.forms
    if policy in convert.LAZY_POLICIES:
        return all(f.name == "lazy" for f in forms)
    return all(f.name == "explicit" and f.blocked for f in forms)


#: "random (blocked)": "random" routed to the blocked walk (a model saved in that form).
POLICIES = ["random", "random (blocked)", "smallest", "project"]


def _route(policy, monkeypatch):
    """The policy's name; "random (blocked)" sends "random" to the blocked walk."""
    if policy == "random (blocked)":
        monkeypatch.setattr(convert, "LAZY_POLICIES", ())
        return "random"
    return policy


def _close(blocked, explicit, what):
    np.testing.assert_array_equal(blocked.n_updates_, explicit.n_updates_, err_msg=what)
    np.testing.assert_array_equal(blocked.n_mistakes_, explicit.n_mistakes_, err_msg=what)
    np.testing.assert_array_equal(blocked.support_, explicit.support_, err_msg=what)
    for name in ("dual_coef_", "covariance_coef_"):
        b, e = (np.asarray(getattr(m, name), dtype=float) for m in (blocked, explicit))
        scale = np.abs(e).max()
        assert np.abs(b - e).max() <= 1e-9 * scale, f"{what}: {name}"


@pytest.mark.parametrize("rule", list(RULES))
@pytest.mark.parametrize("policy", POLICIES)
def test_blocked_walk_is_the_round_by_round_walk(rule, policy, monkeypatch):
    """More removals than the refresh period of "project"'s inverse Gram matrix, in
    blocks of 256 (four sub-blocks each)."""
    policy = _route(policy, monkeypatch)
    X, y = _stream(KINV_REFRESH + 200, 5, 1)
    blocked = _est(rule, "cholesky", policy, 12).fit(X, y)
    explicit = _est(rule, "explicit", policy, 12).fit(X, y)
    forms = blocked._engine.forms
    assert _fast_form(blocked, policy) and not any(f.blocked for f in explicit._engine.forms)
    assert (
        forms[0].counter > KINV_REFRESH
        if policy in convert.LAZY_POLICIES
        else (forms[0].policy.counter > KINV_REFRESH)
    )
    _close(blocked, explicit, f"{rule}/{policy}")


@pytest.mark.parametrize("rule", list(RULES))
@pytest.mark.parametrize("lazy", [True, False], ids=["kinv k per entering input", "in the dsymm"])
def test_project_inverse_product_either_way_is_the_round_by_round_walk(rule, lazy, monkeypatch):
    """A stream on which few inputs update (the label is the first feature's sign):
    "project" takes ``kinv_0 k`` by a dsymv per entering input in some sub-blocks
    (:func:`kernelcw.engines.dual.deferred.lazy_inverse_product`), or, with the size
    limit at 0, always from the sub-block's dsymm; both give the round-by-round walk's
    model to rounding, past the inverse's refresh period. (On such streams in fewer
    dimensions a victim can be a near tie, which a rounding-level difference decides
    either way: this one has none.)"""
    if not lazy:
        monkeypatch.setattr(deferred, "LAZY_W_MAX_N", 0)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(KINV_REFRESH * 4, 5))
    y = (X[:, 0] > 0).astype(int)
    blocked = _est(rule, "cholesky", "project", 30).fit(X, y)
    explicit = _est(rule, "explicit", "project", 30).fit(X, y)
    form = blocked._engine.forms[0]
    assert _fast_form(blocked, "project") and form.policy.counter > KINV_REFRESH
    subs = form._dw.cnt[deferred.LAZY_SUBS]
    assert (subs > 0) if lazy else (subs == 0)
    _close(blocked, explicit, f"{rule}, lazy={lazy}")


def test_project_refreshes_every_budget_removals_above_the_period():
    """With a budget above KINV_REFRESH, "project" refreshes its inverse every budget
    removals, in both walks at the same rounds."""
    from kernelcw.budget.kernels import kinv_refresh_due

    B = KINV_REFRESH + 44
    assert kinv_refresh_due(KINV_REFRESH, 12) and kinv_refresh_due(2 * KINV_REFRESH, 12)
    assert not kinv_refresh_due(KINV_REFRESH, B)
    assert kinv_refresh_due(B, B) and kinv_refresh_due(2 * B, B)
    X, y = _stream(2 * B + 900, 5, 4)
    blocked = _est("arow", "cholesky", "project", B).fit(X, y)
    explicit = _est("arow", "explicit", "project", B).fit(X, y)
    assert blocked._engine.forms[0].policy.counter > 2 * B
    _close(blocked, explicit, "project, budget above the refresh period")


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("cut", ["one row at a time", "block_size=7", "ragged calls"])
def test_cuts_and_sub_blocks_do_not_change_the_model(policy, cut, monkeypatch):
    """One row per call (a sub-block of one input), blocks of 7, and calls of uneven
    length, with a sub-block of 5 inputs (the walk's changes settled every 5 rounds)."""
    policy = _route(policy, monkeypatch)
    X, y = _stream(400, 4, 2, n_classes=3)
    explicit = _est("arow", "explicit", policy, 20).fit(X, y)
    monkeypatch.setattr(deferred, "SUB_BLOCK", 5)
    est = _est("arow", "cholesky", policy, 20, block_size=7 if cut == "block_size=7" else 256)
    if cut == "one row at a time":
        for i in range(len(y)):
            est.partial_fit(X[i : i + 1], y[i : i + 1], classes=[0, 1, 2])
    elif cut == "ragged calls":
        edges = [0, 1, 40, 41, 150, 333, 400]
        for lo, hi in zip(edges[:-1], edges[1:], strict=True):
            est.partial_fit(X[lo:hi], y[lo:hi], classes=[0, 1, 2])
    else:
        est.fit(X, y)
    assert _fast_form(est, policy)
    _close(est, explicit, f"{policy}, {cut}")


def test_random_victim_by_selection_is_the_sorted_choice():
    """Both walks find "random"'s victim by selection in O(n) (jth_entered_slot, called
    by choose_victim): the j-th support vector in entry order, the newest left out, as
    the slow reference sorts it, whatever order the slots are in."""
    from kernelcw.budget import Support, make_policy
    from kernelcw.budget.kernels import choose_victim, jth_entered_slot

    rng = np.random.default_rng(0)
    seed = 11
    pol = make_policy("random", 30, seed).record()
    for n in (2, 3, 17, 31):
        entry = rng.permutation(10 * n)[:n].astype(np.int64)
        z = np.zeros(n)
        sup = Support(z, np.zeros((n, n)), z, z, z, entry, np.zeros(n, dtype=np.int64))
        for counter in range(40):
            j = min(int(rb.splitmix64_uniform(seed, counter) * (n - 1)), n - 2)
            want = int(np.argsort(entry)[j])
            got = jth_entered_slot(pol, counter, n, entry, np.empty(2 * n))
            assert got == want
            assert choose_victim(pol, counter, n, sup, np.empty(2 * n)) == want


@pytest.mark.parametrize("rule", ["scw1", "arow"])
def test_lazy_form_at_a_budget_of_several_bands(rule):
    """ "random" in the lazy form at B = 150: walks of 36 inputs whose leavers span
    several bands of the purge's QR and of Y's solve (STAIR_GROUP), leavers that
    entered in the same walk, and both purge paths (Givens for a few leavers, the
    banded QR for more); the same model as the round-by-round walk."""
    from kernelcw.engines.dual import lazy

    assert lazy.part_size(150) > lazy.STAIR_GROUP > 4
    X, y = _stream(1100, 5, 7)
    fast = _est(rule, "cholesky", "random", 150).fit(X, y)
    explicit = _est(rule, "explicit", "random", 150).fit(X, y)
    assert fast._engine.factor_forms() == ["lazy"]
    assert fast._engine.forms[0].counter > 500
    _close(fast, explicit, f"{rule}, lazy form at B = 150")


@pytest.mark.parametrize("budget", [1, 2, 3])
@pytest.mark.parametrize("block_size", [1, 3, 16])
def test_lazy_form_at_the_smallest_budgets(budget, block_size):
    """Budgets of 1-3 (every walk's leavers include rows the walk appended; a budget of
    1 keeps only the newest) in blocks of 1, 3 and 16, two and three classes: the same
    models as the round-by-round walk."""
    for n_classes, seed in ((2, 11), (3, 12)):
        X, y = _stream(160, 4, seed, n_classes=n_classes)
        fast = _est("scw1", "cholesky", "random", budget, block_size=block_size).fit(X, y)
        explicit = _est("scw1", "explicit", "random", budget).fit(X, y)
        assert set(fast._engine.factor_forms()) == {"lazy"}
        _close(fast, explicit, f"B = {budget}, block_size = {block_size}, {n_classes} classes")


def test_queue_form_walks_blocks_in_parts(monkeypatch):
    """ "oldest" in its queue form walks a block of 256 in parts of at most
    part_size(n) inputs (a walk over the whole block carried up to 256 candidate
    leavers: 2x slower fits at B = 200-500), the same model as the round-by-round walk
    (the explicit solver)."""
    from kernelcw.engines.dual import queue

    spans = []
    walk_part = queue.QueueForm._walk_part

    def spy(self, ctx, blk, t0, t1, ks, f_blk):
        spans.append((t1 - t0, queue.part_size(self.n)))
        return walk_part(self, ctx, blk, t0, t1, ks, f_blk)

    monkeypatch.setattr(queue.QueueForm, "_walk_part", spy)
    X, y = _stream(1200, 5, 8)
    fast = _est("scw1", "cholesky", "oldest", 120, block_size=256).fit(X, y)
    explicit = _est("scw1", "explicit", "oldest", 120).fit(X, y)
    assert fast._engine.factor_forms() == ["queue"]
    assert len(spans) > 1200 // 256 + 1  # parts, not whole blocks
    assert all(span <= limit for span, limit in spans)
    _close(fast, explicit, "oldest, queue form in parts")


def test_a_projection_with_large_kernel_values_keeps_pi_positive_definite():
    """The blocked walk stores a projection's e q' + q e' as two halves of opposite
    sign. Where kernel values are large (one feature 100x the others, a cubic kernel),
    |q| << |e| and halves of size |e|^2 cancelled: Pi lost positive definiteness, the
    walk floored negative variances and took huge steps (|f| 1e4 where one row per
    call gave 30; chunks of 4 reached 1e215, then FloatingPointError). Balanced halves
    keep it: fit, chunks and one row per call agree, nothing floored."""
    rng = np.random.RandomState(1)
    X = rng.randn(120, 4)
    y = (X[:, 0] + 0.5 * X[:, 1] ** 2 > 0.3).astype(int)
    flip = rng.rand(120) < 0.1
    y[flip] = 1 - y[flip]
    X[:, 0] *= 100
    params = dict(kernel="poly", gamma=0.5, budget=10)
    for make in (AROWClassifier, SCWClassifier):
        fit = make(**params).fit(X, y)
        rows, chunks = make(**params), make(**params)
        for i in range(120):
            rows.partial_fit(X[i : i + 1], y[i : i + 1], classes=[0, 1])
        for i in range(0, 120, 4):
            chunks.partial_fit(X[i : i + 4], y[i : i + 4], classes=[0, 1])
        f = rows.decision_function(X)
        for other in (fit, chunks):
            assert other.n_variance_floored_ == 0
            np.testing.assert_allclose(
                other.decision_function(X), f, rtol=0, atol=1e-2 * abs(f).max()
            )
