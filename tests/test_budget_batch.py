"""Batch pruning in the slow reference (tests/reference_budget.py, ``batch`` = q).

When an update takes a budgeted model to ``budget + 1`` support vectors, q of them leave
at once (the reference's module docstring says which and how). Checked here:

- q = 1 through the batch code path (:meth:`RefBudgetLearner._evict_many`) is the
  round-by-round reference exactly (same victims, predictions, nu and Pi to rounding),
  every policy, second- and first-order rules, binary and 3-class;
- the bound: at most ``budget`` support vectors after every round, exactly
  ``budget + 1 - q`` right after a prune;
- the removals: :func:`remove_many` equals q successive single removals (a principal
  submatrix of a principal submatrix, both means); :func:`project_many` (the multi-point
  KL projection nu' = T' nu, Pi' = T' Pi T) equals q successive single projections of the
  same set onto the shrinking rest, and is the dense primal KL projection onto the span of
  the rest (mu' = P mu, Sigma' = a (I - P) + P Sigma P, linear kernel, jittered Gram);
- the choices: q oldest, q random draws one counter step each, q smallest scores
  computed once.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import reference_budget as rb
import reference_dual as rd
from test_budget import GAMMA, RULES, A, make_stream

POLICIES = rb.POLICIES


class _ManyOne(rb.RefBudgetLearner):
    """The batch code path with q = 1."""

    def _evict(self, pos):
        self._evict_many(pos)


class _ManyOneModel(rb.RefBudgetModel):
    def __init__(self, rule, classes, kernel="rbf", gamma=None, degree=3, coef0=0.0, **kw):
        super().__init__(rule, classes, kernel, gamma, degree, coef0, **kw)
        for lr in self.learners:
            lr.__class__ = _ManyOne


def _run(rule, X, y, budget, policy, batch=1, model_cls=None, remove_mean="unlearn"):
    return rd.run_ref_dual(
        rule,
        X,
        y,
        "rbf",
        None,
        1,
        model_cls=model_cls or rb.RefBudgetModel,
        a=A,
        gamma=GAMMA,
        budget=budget,
        budget_policy=policy,
        seed=77,
        remove_mean=remove_mean,
        batch=batch,
        **RULES[rule],
    )


@pytest.mark.parametrize("n_classes", [2, 3])
@pytest.mark.parametrize("rule", ["scw1", "arow", "pa1"])
@pytest.mark.parametrize("policy", POLICIES)
def test_batch_of_one_is_the_round_by_round_reference(policy, rule, n_classes):
    X, y = make_stream(np.random.default_rng(5), 160, 5, n_classes)
    one = _run(rule, X, y, 9, policy)
    many = _run(rule, X, y, 9, policy, model_cls=_ManyOneModel)
    assert isinstance(many.learners[0], _ManyOne)
    np.testing.assert_array_equal(one.predictions, many.predictions)
    for l1, lm in zip(one.learners, many.learners, strict=True):
        assert len(l1.removals) > 20
        assert [r.victim for r in l1.removals] == [r.victim for r in lm.removals]
        assert l1.support == lm.support
        np.testing.assert_allclose(lm.nu, l1.nu, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(lm.Pi, l1.Pi, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("q", [2, 3, 5])
@pytest.mark.parametrize("policy", POLICIES)
def test_batch_keeps_the_bound_after_every_round(policy, q):
    X, y = make_stream(np.random.default_rng(6), 200, 5)
    B = 8
    r = _run("arow", X, y, B, policy, batch=q)
    lr = r.learners[0]
    sizes = [len(s) for s in lr.support_log]
    assert max(sizes) <= B
    pruned = sorted({rem.pos for rem in lr.removals})
    assert len(pruned) > 5 and len(lr.removals) == q * len(pruned)
    for t in pruned:
        assert sizes[t] == B + 1 - q
    # the victims are distinct support vectors of the round before, never the newest
    for t in pruned:
        vs = [rem.victim for rem in lr.removals if rem.pos == t]
        assert len(set(vs)) == q
        before = set(lr.support_log[t - 1]) | {t}
        assert set(vs) <= before and set(vs).isdisjoint(lr.support_log[t])
        if policy != "project":
            assert t not in vs
    # and the model stays a valid Gaussian (Sigma positive definite)
    if not lr.first_order:
        M = -(A**2) * np.linalg.inv(lr.Pi)
        assert np.all(np.linalg.eigvalsh((M + M.T) / 2) > 0)


def test_batch_choices_oldest_and_random():
    X, y = make_stream(np.random.default_rng(8), 200, 5)
    B, q = 7, 3
    r = _run("perceptron", X, y, B, "oldest", batch=q)
    lr = r.learners[0]
    for t in sorted({rem.pos for rem in lr.removals}):
        vs = [rem.victim for rem in lr.removals if rem.pos == t]
        assert vs == list(lr.support_log[t - 1][:q])  # the q oldest
    r = _run("arow", X, y, B, "random", batch=q)
    lr = r.learners[0]
    c = 0
    for t in sorted({rem.pos for rem in lr.removals}):
        pool = list(lr.support_log[t - 1])  # before the update: all but the newest
        for j in range(q):
            u = rb.splitmix64_uniform(77, c)
            c += 1
            m = len(pool)
            victim = pool.pop(min(math.floor(u * m), m - 1))
            rem = [x for x in lr.removals if x.pos == t][j]
            assert rem.victim == victim
    assert lr.n_removed == c


def _model(rule, policy, n=150, d=14, budget=10, seed=0):
    """A reference model after some removals (linear kernel, d > budget)."""
    X, y = make_stream(np.random.default_rng(seed), n, d)
    r = rb.run_ref_budget(
        rule, X, y, kernel="linear", a=A, budget=budget, budget_policy=policy, seed=3,
        **RULES[rule],
    )  # fmt: skip
    return X, r.learners[0]


def _successive(fn, nu, Pi, V):
    """Apply a single-point removal to the members of V one at a time (indices shift)."""
    idx = list(range(len(nu)))
    for v in V:
        p = idx.index(v)
        nu, Pi = fn(nu, Pi, p)
        del idx[p]
    return nu, Pi


@pytest.mark.parametrize("rule", ["scw1", "arow", "pa1"])
def test_remove_many_is_successive_removals(rule):
    X, lr = _model(rule, "smallest")
    gz = None if lr.first_order else lr._gz()
    V = [7, 2, 4]
    nu1, Pi1 = rb.remove_many(lr.nu, lr.Pi, V, lr.first_order, a=A, gz=gz)
    gzl = None if gz is None else list(gz)

    def one(nu, Pi, p):
        nonlocal gzl
        g = None if gzl is None else np.array(gzl)
        out = rb.remove(nu, Pi, p, lr.first_order, a=A, gz=g)
        if gzl is not None:
            del gzl[p]
        return out

    nu2, Pi2 = _successive(one, lr.nu, lr.Pi, V)
    np.testing.assert_allclose(nu1, nu2, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(Pi1, Pi2, rtol=1e-9, atol=1e-12)
    if not lr.first_order:  # M' = M_AA
        M = -(A**2) * np.linalg.inv(lr.Pi)
        keep = np.setdiff1d(np.arange(len(lr.nu)), V)
        np.testing.assert_allclose(-(A**2) * np.linalg.inv(Pi1), M[np.ix_(keep, keep)], 1e-8)


@pytest.mark.parametrize("rule", ["scw1", "arow", "pa1"])
def test_project_many_is_successive_projections_and_the_primal_projection(rule):
    X, lr = _model(rule, "oldest")
    V = [6, 1, 3]
    Kj = lr.gram * (1.0 + np.eye(len(lr.gram)) * rb.PROJECT_JITTER)  # the jittered kernel's
    nu1, Pi1 = rb.project_many(lr.nu, lr.Pi, Kj, V, lr.first_order)
    K = [Kj]

    def one(nu, Pi, p):
        out = rb.project(nu, Pi, K[0], p, lr.first_order)
        keep = np.delete(np.arange(K[0].shape[0]), p)
        K[0] = K[0][np.ix_(keep, keep)]
        return out

    nu2, Pi2 = _successive(one, lr.nu, lr.Pi, V)
    # exact in exact arithmetic (nested projections in the jittered kernel's feature space)
    np.testing.assert_allclose(nu1, nu2, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(Pi1, Pi2, rtol=1e-8, atol=1e-10)
    # the dense primal KL projection onto span(S_A), the jittered Gram as a Gram matrix:
    # augmented features [x, sqrt(jitter k_ii) e_i] have Gram matrix Kj exactly
    S = X[lr.support]
    n, d = S.shape
    Sa = np.hstack([S, np.diag(np.sqrt(rb.PROJECT_JITTER * np.diag(lr.gram)))])
    keep = np.setdiff1d(np.arange(n), V)
    SA = Sa[keep]
    P = SA.T @ np.linalg.solve(SA @ SA.T, SA)
    D = d + n
    mu = Sa.T @ lr.nu  # the model read in the augmented space
    Sig = A * np.eye(D) + Sa.T @ lr.Pi @ Sa
    np.testing.assert_allclose(SA.T @ nu1, P @ mu, rtol=1e-8, atol=1e-9)
    want = A * (np.eye(D) - P) + P @ Sig @ P
    got = A * np.eye(D) + SA.T @ Pi1 @ SA
    np.testing.assert_allclose(got, want, rtol=1e-8, atol=1e-9)


def test_batch_smallest_scores_once():
    X, y = make_stream(np.random.default_rng(9), 150, 5)
    r = _run("arow", X, y, 8, "smallest", batch=3)
    lr = r.learners[0]
    for t in sorted({rem.pos for rem in lr.removals})[:5]:
        rems = [x for x in lr.removals if x.pos == t]
        s = rems[0].scores
        assert all(x.scores is s for x in rems)
        assert [x.p for x in rems] == list(np.argsort(s, kind="stable")[:3])


def test_bad_batch():
    with pytest.raises(ValueError, match="batch"):
        rb.RefBudgetLearner("arow", budget=3, batch=4)
    with pytest.raises(ValueError, match="batch"):
        rb.RefBudgetLearner("arow", budget=3, batch=0)
