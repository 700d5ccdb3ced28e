""" "project"'s fused round (kernelcw.budget.project_round) against the passes it
fuses, as the explicit walk made them: Pi's rank-one update, the policy's append
(kinv's rank-one update), then the eviction (the projection's rank-two update of Pi,
the Schur deletion from kinv). The same operations in the same order: the same bits,
the same rollback copies, and a finiteness flag that sees what the passes wrote."""

import numpy as np
import pytest

from kernelcw._blas import SYM_BLAS, sym_r1_save
from kernelcw.budget import kernels as bk
from kernelcw.budget.project_round import fuses, project_append, project_evict
from kernelcw.engines.dual.steps import Undo


def _state(seed: int, n: int, cap: int, second: bool):
    """A "project" model of n support vectors (RBF Gram matrix, its jittered inverse
    by the lower triangle, a symmetric Pi) and a new input's kernel column."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n + 1, 3))
    K = np.exp(-0.5 * ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1))
    G = np.zeros((cap, cap))
    G[:n, :n] = K[:n, :n]
    kinv = np.full((cap, cap), np.nan)  # (the strict upper triangle is never read)
    inv = bk.symmetric_inverse(K[:n, :n] * (1 + np.eye(n) * bk.PROJECT_JITTER))
    kinv[:n, :n] = np.tril(inv) + np.triu(kinv[:n, :n], 1)
    Pi = np.full((cap, cap), np.nan)
    S = rng.normal(size=(n, n)) * 0.1
    Pi[:n, :n] = np.tril(-(S @ S.T)) + np.triu(Pi[:n, :n], 1)
    if not second:
        Pi = np.zeros((0, 0))
    sup = bk.Support(
        np.r_[rng.normal(size=n), np.zeros(cap - n)],
        Pi,
        np.r_[rng.uniform(0.1, 1, size=n), np.zeros(cap - n)],
        np.r_[rng.normal(size=n), np.zeros(cap - n)],
        np.r_[np.ones(n), np.zeros(cap - n)],
        np.r_[rng.permutation(n).astype(np.int64), np.zeros(cap - n, np.int64)],
        np.r_[np.arange(n, dtype=np.int64), np.zeros(cap - n, np.int64)],
    )
    kv = K[n, :n].copy()
    kap = K[n, n] * (1 + bk.PROJECT_JITTER)
    c = rng.normal(size=cap) * 0.1
    return G, kinv, sup, kv, kap, c


def _undo(cap: int, second: bool) -> Undo:
    nan = np.full((cap, cap), np.nan)
    return Undo(True, np.array([-1]), np.zeros(cap), nan.copy() if second else np.zeros((0, 0)),
                np.zeros(cap), np.zeros(cap), nan.copy(), np.zeros((0, 0)), np.zeros(0),
                np.array([-1]), np.full(cap, np.nan))  # fmt: skip


def _round(fused: bool, seed: int, second: bool, saving: bool, counter: int, ay: float = 0.4):
    """One round as the explicit walk makes it, the passes fused or not (``ay``: the
    new support vector's nu, by which a tiny one is the one that leaves)."""
    n, B = 12, 12
    cap = n + 2
    G, kinv, sup, kv, kap, c = _state(seed, n, cap, second)
    pol = bk.PolicyState(bk.PROJECT, float(B), np.uint64(0), counter, True, False,
                         kinv, G, np.zeros(0), SYM_BLAS)  # fmt: skip
    undo = _undo(cap, second)
    work = np.full(4 * cap, np.nan)
    sec = True if second else None
    beta, a, zeta = 0.7, 1.0, 0.3
    glog = (undo.gp, undo.grow, np.array([n]))
    assert fuses(pol, n)
    if fused:
        inv_s = project_append(pol, n, kv, kap, work)
    else:
        if second:
            sym_r1_save(SYM_BLAS, n, -beta, c, sup.Pi, undo.Pi, saving)
        bk.policy_append(pol, n, kv, kap, c, beta, 1.0, a, sec, work, undo.kinv, saving)
    sup.zsv[n], sup.gsv[n] = zeta, ay
    for i in range(n):
        sup.nu[i] += ay * c[i]
        if second:
            sup.Pi[n, i] = -beta * a * c[i]
    if second:
        sup.Pi[n, n] = -beta * a * a
    sup.nu[n] = ay * a
    sup.kap[n], sup.entry[n], sup.ks[n] = kap, 10**6, -1
    ok = None
    if fused:
        ok = project_evict(pol, n + 1, sup, sec, (c, -beta, inv_s), work, undo, saving, glog)
        if bk.kinv_refresh_due(counter + 1, B):  # (the walk's, after the round)
            bk.kinv_refresh(n, G, kinv, SYM_BLAS)
    else:
        bk.evict(pol, counter, n + 1, sup, a, sec, work, glog, False)
    return sup, pol, undo, ok, n


@pytest.mark.parametrize("second", [True, False])
@pytest.mark.parametrize("saving", [False, True])
@pytest.mark.parametrize("seed", range(5))
def test_the_fused_round_is_the_passes_bit_for_bit(second, saving, seed):
    counter = 5 if seed != 3 else bk.KINV_REFRESH - 1  # (seed 3: kinv refreshed after)
    ay = 1e-12 if seed == 4 else 0.4  # (seed 4: the new support vector leaves at once)
    want = _round(False, seed, second, saving, counter, ay)
    got = _round(True, seed, second, saving, counter, ay)
    sw, pw, uw, _, n = want
    sg, pg, ug, ok, _ = got
    for field in ("nu", "zsv", "gsv", "kap", "entry", "ks"):
        np.testing.assert_array_equal(getattr(sg, field)[:n], getattr(sw, field)[:n], field)
    low = np.tril_indices(n)
    np.testing.assert_array_equal(pg.kinv[:n, :n][low], pw.kinv[:n, :n][low])
    np.testing.assert_array_equal(pg.G[:n, :n], pw.G[:n, :n])
    if second:
        np.testing.assert_array_equal(sg.Pi[:n, :n][low], sw.Pi[:n, :n][low])
    if saving:  # the rollback copies of the triangles before the round
        np.testing.assert_array_equal(ug.kinv[:n, :n][low], uw.kinv[:n, :n][low])
        if second:
            np.testing.assert_array_equal(ug.Pi[:n, :n][low], uw.Pi[:n, :n][low])
    np.testing.assert_array_equal(ug.gp, uw.gp)  # G's logged row (the leaver's)
    np.testing.assert_array_equal(ug.grow[:n], uw.grow[:n])
    assert ok  # its own check: what it wrote is finite
    assert (10**6 in sg.entry[:n]) == (seed != 4)  # (the newest's entry: 10**6)


@pytest.mark.parametrize("second", [True, False])
def test_the_fused_round_reports_what_overflowed(second):
    """A new row's rank-one term past float64's range: the pass says so (the walk then
    checks the model whole, ``explicit.all_finite``)."""
    n, B, cap = 12, 12, 14
    G, kinv, sup, kv, kap, c = _state(0, n, cap, second)
    pol = bk.PolicyState(bk.PROJECT, float(B), np.uint64(0), 5, True, False, kinv, G,
                         np.zeros(0), SYM_BLAS)  # fmt: skip
    undo = _undo(cap, second)
    work = np.full(4 * cap, np.nan)
    inv_s = project_append(pol, n, kv, kap, work)
    for i in range(n):
        if second:
            sup.Pi[n, i] = 0.0
    sup.entry[n] = 10**6
    c[:] = 1e200  # -beta c c': 1e400
    terms = (c, -0.5, inv_s) if second else (c, -0.5, 1e300)
    if not second:
        work[:n] = 1e200  # kinv's w w' / s
    ok = project_evict(pol, n + 1, sup, True if second else None, terms, work, undo, False,
                       (undo.gp, undo.grow, np.array([n])))  # fmt: skip
    assert not ok


def test_fuses_only_project_past_its_budget_with_loops():
    from kernelcw._blas import RANK_LOOP_MAX

    def pol(code, B):
        return bk.PolicyState(code, float(B), np.uint64(0), 0, True, False, np.zeros((0, 0)),
                              np.zeros((0, 0)), np.zeros(0), SYM_BLAS)  # fmt: skip

    assert fuses(pol(bk.PROJECT, 10), 10)
    assert not fuses(pol(bk.PROJECT, 10), 9)  # within the budget after the append
    assert not fuses(pol(bk.SMALLEST, 10), 10)
    assert not fuses(pol(bk.PROJECT, np.inf), 10)
    B = RANK_LOOP_MAX - 1
    assert fuses(pol(bk.PROJECT, B), B)
    assert not fuses(pol(bk.PROJECT, B + 1), B + 1)  # dsyr2 above the loops
