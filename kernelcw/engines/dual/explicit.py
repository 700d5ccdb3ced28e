"""The explicit form of a binary dual model: nu and Pi themselves, updated in place.

``doc/dual-form.md`` section 1: per round ``c = Pi k``, ``f = nu . k``,
``v = a kappa + k' c``; an update does ``nu += alpha y c``, ``Pi -= beta c c'`` and
appends a row (about 1.5 n^2 numbers of memory traffic per round). The form of
``solver="explicit"``, of first-order rules (which keep ``Sigma = a I`` and nu
alone, ``v = a kappa``), and of budgeted models once the budget binds (except
"oldest" with the Cholesky solver, :mod:`.queue`): the budget policy
(:mod:`kernelcw.budget`) evicts inside the walk, which stays compiled (the hot
loop). The per-slot unlearning weights ``zsv`` (zeta) and ``gsv`` (g) let a
removal unlearn a support vector. Updated in place, so a call is undone from a
copy that the walk itself makes at the call's first update, into spare buffers the
form keeps between calls (:mod:`.explicit_undo`; first-order rules without a budget
only append: cut back instead).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import njit

from ... import _blas
from ..._blas import sym_mv, sym_r1_save, sym_record, symm_lower
from ...budget import BudgetPolicy, Support, evict, make_policy, policy_append
from ...budget import kernels as bk
from ...budget.kernels import PolicyState, kinv_refresh, kinv_refresh_due, lower_symmetric
from ...budget.policies import grown
from ...budget.project_round import fuses, project_append, project_evict
from ...rules import FIRST_ORDER, VAR_FLOOR, negligible, rule_from_plain, step
from .deferred import Deferred, deferred_scratch, deferred_walk, sub_block
from .explicit_undo import UNARMED, Saved, restore_saved, spares
from .form import BlockData, Form, Walked, factor_form_at_hand
from .quiet import quiet_explicit
from .status import FLOORED, NONFINITE, NOT_PSD, OK, walk_psd_tol
from .steps import ExplicitResult, Undo, all_finite, checked_step, fill_slots, save_model

__all__ = ["BLOCKED_POLICIES", "ExplicitForm", "explicit_walk"]


_ROUNDS, _DIAG = 1, 2  # explicit_walk's ``budgeted``: the policy's passes, or O(n) scores


class Scratch(NamedTuple):
    """The walk's outputs and work space: margins ``f_out``, the block inputs that
    entered ``src``, the kernel column ``kv``, ``c = Pi k`` and ``work``."""

    f_out: np.ndarray
    src: np.ndarray
    kv: np.ndarray
    c: np.ndarray
    work: np.ndarray


@njit(cache=True, error_model="numpy")
def explicit_walk(blk, t0, sup, n, clock, pol, rule, second, psd_tol, scr, undo,
                  budgeted=None):  # fmt: skip
    """nu and Pi (``sup``, a :class:`kernelcw.budget.Support`) updated in place, one
    round at a time, from block input t0 on (``blk`` a :class:`.form.BlockData`).

    ``sup.ks[i]`` says where slot i's kernel values are: row ks of K0 (support at
    the block's start) or, for ks < 0, row -1-ks of Kbb (an input of this block).
    With more than ``pol.budget`` support vectors after an update, one leaves at
    once (:func:`kernelcw.budget.evict`; for "project", where both rank-one terms are
    loops, :func:`kernelcw.budget.project_round.project_evict`, which adds them to Pi
    and kinv in its eviction's passes). With ``undo.armed`` (the call's first update
    is still to come) the walk saves the model into ``undo`` as it first changes it: Pi
    in the pass that updates it (:func:`kernelcw._blas.sym_r1_save`, or the fused
    pass), the inverse Gram matrix kinv in the pass of its first change
    (``policy_append``'s :func:`kernelcw.budget.kernels.kinv_append`, or the fused
    pass), the rest before either (:func:`save_model`). Returns an
    :class:`ExplicitResult`.

    ``budgeted`` is None for a model without a budget: numba then prunes the eviction
    branch at compile time, so an unbudgeted run does not compile every policy
    (``evict`` is most of a cold start's compile time otherwise); :data:`_DIAG`: the
    blocked walk's O(n) scores (:func:`kernelcw.budget.kernels.evict_smallest`) for
    "smallest", without four passes over the Gram matrix (``kl_variances`` after).
    Likewise ``second`` is True for a second-order rule and None for a first-order one
    (Sigma = a I): a first-order walk compiles no pass over Pi (as in the budget kernels).
    """
    b = blk.kap.shape[0]
    a = rule.a
    nu, Pi, kv, c, ks = sup.nu, sup.Pi, scr.kv, scr.c, sup.ks
    counter = pol.counter
    armed = undo.armed
    u = 0
    nfl = 0
    checked = True  # every value the walk wrote into Pi and kinv checked as it went
    inv_s = 0.0
    for t in range(t0, b):
        for i in range(n):
            s = ks[i]
            kv[i] = blk.K0[s, t] if s >= 0 else blk.Kbb[-1 - s, t]
        f = 0.0
        for i in range(n):
            f += nu[i] * kv[i]
        scr.f_out[t] = f
        kap_t = blk.kap[t]
        y_t = blk.y[t]
        if second is not None:
            sym_mv(pol.blas, n, Pi, kv, c)
            q = 0.0
            for i in range(n):
                q += kv[i] * c[i]
            v_raw = a * kap_t + q
            st = checked_step(rule, y_t * f, f, v_raw, kap_t, psd_tol)
            if st.status != OK:
                return ExplicitResult(n, counter, clock, u, nfl, t, st.status, False)
            nfl += st.floored
            alpha, beta, zeta, v = st.alpha, st.beta, st.zeta, st.v
        else:  # first order: Sigma = a I, k(x, x) in place of v
            if not (kap_t >= 0.0):
                return ExplicitResult(n, counter, clock, u, nfl, t, NOT_PSD, False)
            v_raw = a * kap_t
            alpha, beta, zeta = step(rule.rule, y_t * f, kap_t, rule.phi, rule.C, rule.r)
            v = v_raw
            if not (math.isfinite(alpha) and math.isfinite(f)):
                return ExplicitResult(n, counter, clock, u, nfl, t, NONFINITE, False)
            if alpha > 0.0 and negligible(alpha * a * kap_t, f):
                alpha = 0.0
        if alpha > 0.0:
            # "project" past its budget: both triangles' terms are left to the eviction's
            # checked pass (budget.project_round); else _walk_out checks the triangles
            fused = False
            if budgeted is not None:
                fused = fuses(pol, n)
            if not fused:
                checked = False
            if second is not None and not fused:  # Pi -= beta c c' (lower); the call's
                # first change: Pi saved in the same pass, the rest next (kinv as it changes)
                sym_r1_save(pol.blas, n, -beta, c, Pi, undo.Pi, armed)
            saving = armed  # (kinv: saved as it first changes, below)
            if armed:  # before any other change: save what restore needs
                save_model(n, sup, pol, undo, np.bool_(False), np.bool_(False))
                armed = False
            ay = alpha * y_t
            if budgeted is not None:  # an unbudgeted model's policy tracks nothing
                if fused:
                    inv_s = project_append(pol, n, kv, kap_t, scr.work)
                elif budgeted == _DIAG:  # ("smallest": its variances from Pi, below)
                    bk.append_gram_row(pol.G, n, kv, kap_t)
                else:
                    policy_append(pol, n, kv, kap_t, c, beta, v_raw, a, second, scr.work,
                                  undo.kinv, saving)  # fmt: skip
            sup.zsv[n] = zeta
            if second is not None:  # Pi's lower triangle (kernelcw.budget.kernels)
                sup.gsv[n] = zeta * f + ay * (1.0 + zeta * v)
                for i in range(n):
                    nu[i] += ay * c[i]
                    Pi[n, i] = -beta * a * c[i]
                Pi[n, n] = -beta * a * a
            else:
                sup.gsv[n] = ay
            nu[n] = ay * a
            sup.kap[n] = kap_t
            sup.entry[n] = clock
            ks[n] = -1 - t
            clock += 1
            n += 1
            scr.src[u] = t
            u += 1
            if budgeted is not None:  # a compile-time constant (see above)
                glog = (undo.gp, undo.grow, undo.saved)
                if fused:
                    ok = project_evict(pol, n, sup, second, (c, -beta, inv_s), scr.work,
                                       undo, saving, glog)  # fmt: skip
                    if not ok or kinv_refresh_due(counter + 1, pol.budget):
                        checked = False  # (kinv refreshed below: LAPACK's, not checked)
                elif n > pol.budget:
                    evict(pol, counter, n, sup, a, second, scr.work, glog, budgeted == _DIAG)
                if n > pol.budget:
                    counter += 1
                    n -= 1
                    if fused and kinv_refresh_due(counter, pol.budget):
                        kinv_refresh(n, pol.G, pol.kinv, pol.blas)
    if budgeted is not None:  # (numba prunes it without a budget)
        if budgeted == _DIAG and u:
            bk.kl_variances(n, Pi, sup.zsv, pol.vsv, a)
    return ExplicitResult(n, counter, clock, u, nfl, -1, OK, checked)


@njit(cache=True)
def _walk_out(res, sup, src, slots, vsv, kinv):
    """What :meth:`ExplicitForm.walk` keeps of a walk: ((counter, clock, floored
    rounds, index, status) of ``res``, the slots' kap and entry, the inputs that
    entered and the slots' ks, and whether the model and the policy's ``vsv`` and
    ``kinv`` stayed finite after an update that went through, :func:`all_finite`). A plain tuple:
    numba boxes a namedtuple through look-ups of its class, 0.4 us a call (by hand).
    The slots' arrays are new where the walk changed them; a walk that changed nothing
    (no update, so no removal) gives back the ``slots`` it was given (kap, entry, ks),
    which numba returns as the same objects: no copies (about 1 us of a call of one
    row that does not update)."""
    n = res.n
    finite = True
    counts = (res.counter, res.clock, res.n_floored, res.index, res.status)
    if res.n_new == 0:
        return counts, slots[0], slots[1], src[:0].copy(), slots[2], finite
    if res.status == OK:  # (an update went through: n_new > 0 here)
        finite = all_finite(sup, n, vsv, kinv, res.checked)
    kap, entry, ks = sup.kap[:n].copy(), sup.entry[:n].copy(), sup.ks[:n].copy()
    return counts, kap, entry, src[: res.n_new].copy(), ks, finite


@njit(cache=True)
def records(rec, rule):
    """The walk's :class:`PolicyState` and :class:`kernelcw.rules.RuleParams` from the
    plain tuples :meth:`ExplicitForm.walk` passes (``BudgetPolicy.plain_record`` and
    the rule's fields): numba types plain tuples faster than namedtuples, about 1 us
    a call for these two (by hand)."""
    pol = PolicyState(rec[0], rec[1], rec[2], rec[3], rec[4], rec[5], rec[6], rec[7], rec[8],
                      sym_record(rec[9]))  # fmt: skip
    return pol, rule_from_plain(rule)


@njit(cache=True)
def blocked_part(data, counts, sup, slots, rec, rule, psd_tol, scr, undo, dw):
    """:func:`.deferred.deferred_walk` from plain tuples (``counts = (t0, n, clock)``,
    ``slots = (kap, entry, ks)`` the model's, copied into the walk's slot buffers
    first, :func:`.steps.fill_slots`), in one compiled call with what the form keeps of
    it (:func:`_walk_out`)."""
    t0, n, clock = counts
    s = Support(*sup)
    fill_slots(s.kap, slots[0], s.entry, slots[1], s.ks, slots[2])
    pol, rule = records(rec, rule)
    res = deferred_walk(BlockData(*data), t0, s, n, clock, pol, rule, psd_tol,
                        Scratch(*scr), Undo(*undo), Deferred(*dw))  # fmt: skip
    return _walk_out(res, s, scr[1], slots, pol.vsv, pol.kinv)


@njit(cache=True)
def explicit_part(data, counts, sup, slots, rec, rule, psd_tol, scr, undo, flags):
    """:func:`explicit_walk` as :func:`blocked_part` makes the blocked walk;
    ``flags = (second, budgeted)``."""
    t0, n, clock = counts
    s = Support(*sup)
    fill_slots(s.kap, slots[0], s.entry, slots[1], s.ks, slots[2])
    pol, rule = records(rec, rule)
    res = explicit_walk(BlockData(*data), t0, s, n, clock, pol, rule, flags[0],
                        psd_tol, Scratch(*scr), Undo(*undo), flags[1])  # fmt: skip
    return _walk_out(res, s, scr[1], slots, pol.vsv, pol.kinv)


class ExplicitForm(Form):
    """nu, Pi (second-order rules only), zsv and gsv in capacity buffers (the leading
    n in use) and the budget policy (:class:`kernelcw.budget.Unbounded` for none).

    ``blocked``: a model of the Cholesky solver that continues here when its budget
    binds (policies :data:`BLOCKED_POLICIES`: "smallest", "project", and "random" in a
    model saved in this form or combined by "average"; "oldest" and "random" otherwise
    have their own factor forms) learns in sub-blocks with its changes deferred
    (:mod:`.deferred`, BLAS-3); ``solver="explicit"`` keeps the round-by-round walk,
    the readable reference. A walk of one input (a call per row) takes the
    round-by-round walk in either case: the same round to rounding, without the
    blocked walk's set-up (B = 200, "project": 13.5 against 47 us for a call's walk,
    median, by hand); so does every walk of a "smallest" model given by nu and Pi
    alone (:meth:`_unstructured`)."""

    code = 1
    blocked = False  # (a class default: models pickled before it existed)

    def __init__(self, second: bool, policy: BudgetPolicy, blocked: bool = False):
        super().__init__()
        self.second = second
        self.policy = policy
        self.blocked = bool(blocked and second and policy.name in BLOCKED_POLICIES)
        self._dw = None  # the blocked walk's work space, kept between calls
        self._bufs = None  # the walks' slot and scratch arrays, kept between calls
        self._views = None  # (sizes, _bufs, the views of those sizes) of the last call
        self._nu = np.zeros(0)
        self._Pi = np.zeros((0, 0))
        self.zsv = np.zeros(0)
        self.gsv = np.zeros(0)
        self._armed: Saved | None = None  # the call's checkpoint, until the walk saves
        self._spare: Undo | None = None  # the save's buffers (explicit_undo.spares)

    def learn_flops(self, b: int) -> float:
        """The blocked walk's largest calls are a sub-block's ``Pi K`` (n^2 times its
        inputs, :func:`.deferred.sub_block`) and its rank-k updates; the round-by-round
        walk's are level-2 (n^2). Between them the walk works input by input, while
        BLAS's idle threads busy-wait: harmless on idle cores, and "auto" gives no more
        threads than the cores other processes leave free (``kernelcw._threads``)."""
        B = self.policy.budget
        sb = 1 if b == 1 or not self.blocked or B is None else min(b, sub_block(B))
        return float(self.n) * self.n * sb

    def __getstate__(self) -> dict:
        state = super().__getstate__()
        state["_armed"] = state["_spare"] = state["_dw"] = None  # scratch, not the model
        state["_bufs"] = state["_views"] = None
        return state

    @property
    def name(self) -> str:
        return "explicit" if self.second else "first_order"

    @property
    def capacity(self) -> int:
        return int(self._nu.shape[0])

    def ensure_capacity(self, need: int) -> None:
        cap = self.capacity
        if need <= cap:
            return
        self._grow(max(need, int(cap * 1.5) + 16))

    def _grow(self, new: int) -> None:
        n = self.n
        self._nu = grown(self._nu, n, new)
        self.zsv = grown(self.zsv, n, new)
        self.gsv = grown(self.gsv, n, new)
        if self.second:
            self._Pi = grown(self._Pi, n, new)
        self.policy.grow(n, new)

    # ------------------------------------------------------------ the model

    def nu(self, a: float) -> np.ndarray:
        return self._nu[: self.n].copy()

    def Pi(self, a: float) -> np.ndarray:
        n = self.n
        if not self.second or n == 0:
            return np.zeros((n, n))
        return lower_symmetric(self._Pi[:n, :n])

    def variance(self, Ks: np.ndarray, kap: np.ndarray, a: float) -> np.ndarray:
        if not self.second or self.n == 0:
            return a * kap
        n, b = self.n, Ks.shape[1]
        if Ks.shape[0] != n:  # (the product reads Pi's leading n x n, unchecked)
            raise ValueError(f"kernel rows {Ks.shape} for a model of {n} support vectors")
        Ks = np.ascontiguousarray(Ks, dtype=np.float64)
        PK = np.empty((n, b))
        symm_lower(self._Pi, Ks, PK)  # Pi's lower triangle (C order), as the walks keep it
        v = a * kap + np.einsum("ij,ij->j", Ks, PK)
        return np.maximum(v, VAR_FLOOR * a * kap)

    # ------------------------------------------------------------ learning

    # (its variance pass reads Pi's triangle as the walk does: from about 1,000 support
    # vectors that pass, not the call's Python, is what a row taken saves, and a row
    # sent on pays it twice; by hand, "smallest" at B = 1,000 5 % slower with the path)
    quiet_max_n = 768

    def quiet(self, ctx, K0: np.ndarray, Kbb, kap: float, y: float) -> tuple[bool, float]:
        """:func:`.quiet.quiet_explicit` for this model (its nu, Pi and the rule)."""
        second = self.second
        return quiet_explicit(self._nu, self._Pi, self.n, K0, kap, y, tuple(ctx.rule), second)

    def walk(self, ctx, blk, t0: int, ks: np.ndarray, f_blk: np.ndarray) -> Walked:
        B = ctx.budget
        b = blk.y.shape[0]
        n_now = ks.shape[0]
        cap = n_now + (b - t0) + 1 if B is None else min(n_now + (b - t0), B) + 1
        self.ensure_capacity(cap)
        kap, entry, ks_now, src, kv, c, work = self._buffers(cap, b)
        # plain tuples, made records inside the compiled call (numba types a namedtuple
        # argument slowly: ~1 us each, for the seven records of a one-row call)
        sup = (self._nu, self._Pi, self.zsv, self.gsv, kap, entry, ks_now)
        slots = (self.kap, self.entry, ks)
        scr = (f_blk, src, kv, c, work)
        # Pi's recursion drifts in floating point: a v below zero from a kernel known to
        # be positive semi-definite is that drift, floored (and counted), not an error
        psd_tol = walk_psd_tol(ctx.known_psd)
        data = (np.ascontiguousarray(blk.K0), blk.Kbb, blk.kap, blk.y)
        loops = b - t0 == 1 and n_now < _blas.RANK_LOOP_MAX  # (sym_mv's too: one_input_blas)
        rec = self.policy.plain_record(_blas.SYM_LOOPS if loops else _blas.SYM_PLAIN)
        rule = tuple(ctx.rule)
        undo = UNARMED
        if self._armed is not None:
            # the checkpoint holds the buffers before the walk saves into them, so that
            # an error raised inside the walk after its save still restores the model
            # one input, the call's last (block_size=1 walks a call of m rows m times)
            one_input = b - t0 == 1 and ctx.rows_after == 0
            undo = self._armed.undo = spares(self, cap, self.policy, one_input)
        counts = (t0, n_now, self.clock)
        if self.blocked and B is not None and b - t0 > 1 and not self._unstructured(ctx):
            dw = self._dw
            if dw is None or dw.Kold.shape[0] < cap:
                dw = self._dw = deferred_scratch(self.capacity, self.policy.tracks_kinv, B)
            out = blocked_part(data, counts, sup, slots, rec, rule, psd_tol, scr,
                               tuple(undo), tuple(dw))  # fmt: skip
        else:
            # None: numba drops the second-order code, or the eviction (explicit_walk)
            flags = (True if self.second else None, None if B is None else self._mode(ctx))
            out = explicit_part(data, counts, sup, slots, rec, rule, psd_tol, scr,
                                tuple(undo), flags)  # fmt: skip
        (
            (counter, clock, n_floored, index, status),
            self.kap,
            self.entry,
            entered,
            ks_end,
            finite,
        ) = out
        if undo.saved[0] >= 0:  # saved: nothing more for this call to save
            self._armed = None
        self.policy.counter = counter
        self.clock = clock
        if not finite:
            status, index = NONFINITE, int(entered[-1])  # Pi overflowed: no quiet inf
        elif status == OK and n_floored and ctx.floors_drift and factor_form_at_hand(ctx):
            status, index = FLOORED, t0  # (Pi's drift: status.FLOORED)
        return Walked(entered, ks_end, n_floored, index, status)

    def one_input_blas(self, ctx) -> bool:
        """Loops up to RANK_LOOP_MAX support vectors (:data:`kernelcw._blas.SYM_LOOPS`),
        but LAPACK where "project" refreshes its inverse after the removal it may make."""
        pol = self.policy
        due = pol.tracks_kinv and kinv_refresh_due(pol.counter + 1, pol.budget)
        return self.n >= _blas.RANK_LOOP_MAX or bool(due)

    def _mode(self, ctx) -> int:
        """explicit_walk's ``budgeted``: "smallest" learnt round by round by the Cholesky
        solver scores as the blocked walk; the rest (``solver="explicit"``) by passes."""
        smallest = self.policy.name == "smallest" and self.blocked
        return _DIAG if smallest and not self._unstructured(ctx) else _ROUNDS

    def _unstructured(self, ctx) -> bool:
        """A "smallest" model given by nu and Pi alone (``ctx.nu_pi``: combine's
        "average"): the blocked walk scores "smallest" from Pi's diagonal and the
        support vectors' zeta and g (:func:`kernelcw.budget.scores.least_kl_slot`),
        which describe only a model learnt round by round, so such a model walks round
        by round (with the Gram matrix's passes), the reference's choices whatever the
        calls' cuts."""
        return ctx.nu_pi and self.policy.name == "smallest"

    def _buffers(self, cap: int, b: int) -> tuple:
        """The walk's slot arrays (kap, entry, ks) and :class:`Scratch` arrays (src, kv,
        c, work), views of exactly the sizes the walk is given (capacity ``cap``, a
        block of b inputs) into buffers kept between calls (scratch, not the model: a
        call of one row allocated seven arrays)."""
        bufs = self.__dict__.get("_bufs")
        if bufs is None or bufs[0].shape[0] < cap or bufs[3].shape[0] < b:
            c = max(cap, self.capacity)
            nb = max(b, 0 if bufs is None else bufs[3].shape[0])
            i64 = np.int64
            bufs = self._bufs = (np.empty(c), np.empty(c, dtype=i64), np.empty(c, dtype=i64),
                                 np.empty(nb, dtype=i64), np.empty(c), np.empty(c),
                                 np.empty(4 * c))  # fmt: skip
        views = self.__dict__.get("_views")  # the last call's, if of the same sizes
        if views is None or views[0] != (cap, b) or views[1] is not bufs:
            kap, entry, ks, src, kv, c, work = bufs
            out = kap[:cap], entry[:cap], ks[:cap], src[:b], kv[:cap], c[:cap], work[: 4 * cap]
            views = self._views = ((cap, b), bufs, out)
        return views[2]

    # ------------------------------------------------------------ rollback, state

    @property
    def append_only(self) -> bool:
        """First-order rules without a budget only ever append."""
        return not self.second and self.policy.budget is None

    def checkpoint(self):
        """The model is saved when the call is about to change it (the walk saves it
        at its first update, into spare buffers kept between calls), not here: a call
        of rows that do not update (most rows of a mature model, one row at a time)
        copies nothing, and one that does writes into memory it already has."""
        slots = (self.idx, self.entry, self.kap, self.clock, self.policy.counter)
        if self.append_only:
            return slots, None
        self._armed = Saved()
        return slots, self._armed

    def restore(self, cp) -> None:
        (self.idx, self.entry, self.kap, self.clock, counter), saved = cp
        self._armed = None
        undo = None if saved is None else saved.undo
        if undo is not None and undo.saved[0] >= 0:  # (else nothing changed in place)
            restore_saved(self, undo, counter)

    @property
    def nbytes(self) -> int:
        own = self._nu.nbytes + self._Pi.nbytes + self.zsv.nbytes + self.gsv.nbytes
        return self.slots_nbytes() + own + self.policy.nbytes

    def state_dict(self) -> dict[str, np.ndarray]:
        """The buffers' leading n (their capacity is no part of the model), the
        policy's state."""
        n = self.n
        state = {
            "nu": self._nu[:n].copy(),
            "Pi": lower_symmetric(self._Pi[:n, :n]) if self.second else np.zeros((0, 0)),
            "zsv": self.zsv[:n].copy(),
            "gsv": self.gsv[:n].copy(),
        }
        pol = {f"policy.{k}": v for k, v in self.policy.state_dict(n).items()}
        return {**state, **pol, **self.slots_state()}

    @classmethod
    def from_state(cls, state: dict[str, np.ndarray], ctx) -> ExplicitForm:
        second = ctx.rule.rule not in FIRST_ORDER
        policy = make_policy(ctx.policy, ctx.budget, ctx.seed)
        new = cls(second, policy, blocked=ctx.solver != "explicit")
        new.load_slots(state)
        cap = new.n + 1
        new._nu = _filled(np.zeros(cap), state["nu"])
        new.zsv = _filled(np.zeros(cap), state["zsv"])
        new.gsv = _filled(np.zeros(cap), state["gsv"])
        if second:
            new._Pi = grown(np.asarray(state["Pi"], dtype=np.float64), new.n, cap)
        pol = {k[len("policy.") :]: v for k, v in state.items() if k.startswith("policy.")}
        new.policy.load_state(pol, new.n, cap)
        return new


#: The policies whose models the Cholesky solver continues in the blocked walk
#: (:mod:`.deferred`) once the budget binds.
BLOCKED_POLICIES = ("random", "smallest", "project")


def _filled(buf: np.ndarray, head: np.ndarray) -> np.ndarray:
    buf[: head.shape[0]] = head
    return buf
