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
copy (first-order rules without a budget only append: cut back instead).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import njit

from ...budget import BudgetPolicy, Support, evict, make_policy, policy_append
from ...budget.kernels import symv
from ...budget.policies import grown
from ...rules import FIRST_ORDER, VAR_FLOOR, negligible, step
from .form import BlockData, Form, Walked
from .status import NONFINITE, NOT_PSD, OK, PSD_TOL
from .steps import checked_step

__all__ = ["COPY", "ExplicitForm", "explicit_walk"]

#: Walk status: the first update of a call is next (nothing changed yet): save, resume.
COPY = 5


class Scratch(NamedTuple):
    """The walk's outputs and work space: margins ``f_out``, the block inputs that
    entered ``src``, the kernel column ``kv``, ``c = Pi k`` and ``work``."""

    f_out: np.ndarray
    src: np.ndarray
    kv: np.ndarray
    c: np.ndarray
    work: np.ndarray


class ExplicitResult(NamedTuple):
    """Support vectors after the walk, the policy's removal counter, the entry clock,
    rows that entered, floored rounds, stop index (-1: went through) and status."""

    n: int
    counter: int
    clock: int
    n_new: int
    n_floored: int
    index: int
    status: int


@njit(cache=True, error_model="numpy")
def explicit_walk(blk, t0, sup, n, clock, pol, rule, second, psd_tol, scr, stop_first,
                  budgeted=None):  # fmt: skip
    """nu and Pi (``sup``, a :class:`kernelcw.budget.Support`) updated in place, one
    round at a time, from block input t0 on (``blk`` a :class:`.form.BlockData`).

    ``sup.ks[i]`` says where slot i's kernel values are: row ks of K0 (support at
    the block's start) or, for ks < 0, row -1-ks of Kbb (an input of this block).
    With more than ``pol.budget`` support vectors after an update, one leaves at
    once (:func:`kernelcw.budget.evict`). With ``stop_first`` the walk stops (status
    :data:`COPY`) at the first update, before it changes anything: the caller then
    saves what a rollback needs and resumes there. Returns an :class:`ExplicitResult`.

    ``budgeted`` is None for a model without a budget: numba then prunes the eviction
    branch at compile time, so an unbudgeted run does not compile every policy
    (``evict`` is most of a cold start's compile time otherwise).
    """
    b = blk.kap.shape[0]
    a = rule.a
    nu, Pi, kv, c, ks = sup.nu, sup.Pi, scr.kv, scr.c, sup.ks
    counter = pol.counter
    u = 0
    nfl = 0
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
        if second:
            symv(n, Pi, kv, c)
            q = 0.0
            for i in range(n):
                q += kv[i] * c[i]
            v_raw = a * kap_t + q
            st = checked_step(rule, y_t * f, f, v_raw, kap_t, psd_tol)
            if st.status != OK:
                return ExplicitResult(n, counter, clock, u, nfl, t, st.status)
            nfl += st.floored
            alpha, beta, zeta, v = st.alpha, st.beta, st.zeta, st.v
        else:  # first order: Sigma = a I, k(x, x) in place of v
            if not (kap_t >= 0.0):
                return ExplicitResult(n, counter, clock, u, nfl, t, NOT_PSD)
            v_raw = a * kap_t
            alpha, beta, zeta = step(rule.rule, y_t * f, kap_t, rule.phi, rule.C, rule.r)
            v = v_raw
            if not (math.isfinite(alpha) and math.isfinite(f)):
                return ExplicitResult(n, counter, clock, u, nfl, t, NONFINITE)
            if alpha > 0.0 and negligible(alpha * a * kap_t, f):
                alpha = 0.0
        if alpha > 0.0:
            if stop_first:
                return ExplicitResult(n, counter, clock, u, nfl, t, COPY)
            ay = alpha * y_t
            policy_append(pol, n, kv, kap_t, c, beta, v_raw, a, second, scr.work)
            sup.zsv[n] = zeta
            sup.gsv[n] = zeta * f + ay * (1.0 + zeta * v) if second else ay
            if second:
                for i in range(n):
                    nu[i] += ay * c[i]
                    ci = c[i]
                    row = Pi[i]
                    for j in range(n):  # beta (c_i c_j): Pi stays exactly symmetric
                        row[j] -= beta * (ci * c[j])
                    Pi[n, i] = -beta * a * c[i]
                    Pi[i, n] = -beta * a * c[i]
                Pi[n, n] = -beta * a * a
            nu[n] = ay * a
            sup.kap[n] = kap_t
            sup.entry[n] = clock
            ks[n] = -1 - t
            clock += 1
            n += 1
            scr.src[u] = t
            u += 1
            if budgeted is not None:  # a compile-time constant (see above)
                if n > pol.budget:
                    evict(pol, counter, n, sup, a, second, scr.work)
                    counter += 1
                    n -= 1
    return ExplicitResult(n, counter, clock, u, nfl, -1, OK)


class ExplicitForm(Form):
    """nu, Pi (second-order rules only), zsv and gsv in capacity buffers (the leading
    n in use) and the budget policy (:class:`kernelcw.budget.Unbounded` for none)."""

    code = 1

    def __init__(self, second: bool, policy: BudgetPolicy):
        super().__init__()
        self.second = second
        self.policy = policy
        self._nu = np.zeros(0)
        self._Pi = np.zeros((0, 0))
        self.zsv = np.zeros(0)
        self.gsv = np.zeros(0)
        self._undo: _Undo | None = None  # the armed checkpoint (copies at the first change)

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
        return self._Pi[:n, :n].copy()

    def variance(self, Ks: np.ndarray, kap: np.ndarray, a: float) -> np.ndarray:
        if not self.second or self.n == 0:
            return a * kap
        Pi = self._Pi[: self.n, : self.n]
        v = a * kap + np.einsum("ij,ij->j", Ks, Pi @ Ks)
        return np.maximum(v, VAR_FLOOR * a * kap)

    # ------------------------------------------------------------ learning

    def walk(self, ctx, blk, t0: int, ks: np.ndarray, f_blk: np.ndarray) -> Walked:
        B = ctx.budget
        b = blk.y.shape[0]
        n_now = ks.shape[0]
        cap = n_now + (b - t0) + 1 if B is None else min(n_now + (b - t0), B) + 1
        self.ensure_capacity(cap)
        sup = Support(
            self._nu,
            self._Pi,
            self.zsv,
            self.gsv,
            _filled(np.zeros(cap), self.kap),
            _filled(np.zeros(cap, dtype=np.int64), self.entry),
            _filled(np.zeros(cap, dtype=np.int64), ks),
        )
        scr = Scratch(f_blk, np.empty(b, dtype=np.int64), np.empty(cap), np.empty(cap),
                      np.empty(2 * cap))  # fmt: skip
        # Pi's recursion drifts in floating point: a v below zero from a kernel known to
        # be positive semi-definite is that drift, floored (and counted), not an error
        psd_tol = np.inf if ctx.known_psd else PSD_TOL
        data = BlockData(np.ascontiguousarray(blk.K0), blk.Kbb, blk.kap, blk.y)
        rec = self.policy.record()
        budgeted = None if B is None else True
        res = explicit_walk(data, t0, sup, n_now, self.clock, rec, ctx.rule, self.second,
                            psd_tol, scr, self._undo is not None, budgeted)  # fmt: skip
        if res.status == COPY:  # the call's first change is next: save what restore needs
            self._undo.saved = self._copies()
            self._undo = None
            nfl = res.n_floored
            res = explicit_walk(data, res.index, sup, n_now, self.clock, rec, ctx.rule,
                                self.second, psd_tol, scr, False, budgeted)  # fmt: skip
            res = res._replace(n_floored=res.n_floored + nfl)
        n_end = res.n
        self.policy.counter = int(res.counter)
        self.clock = int(res.clock)
        self.kap = sup.kap[:n_end].copy()
        self.entry = sup.entry[:n_end].copy()
        entered = scr.src[: res.n_new].copy()
        status, index = res.status, res.index
        if status == OK and res.n_new and not _finite(self._nu[:n_end], self._Pi, n_end):
            status, index = NONFINITE, int(entered[-1])  # Pi overflowed: no quiet inf
        return Walked(entered, sup.ks[:n_end].copy(), res.n_floored, index, status)

    # ------------------------------------------------------------ rollback, state

    @property
    def append_only(self) -> bool:
        """First-order rules without a budget only ever append."""
        return not self.second and self.policy.budget is None

    def checkpoint(self):
        """Copies of the buffers are made when the call is about to change them (at its
        first update, :data:`COPY`), not here: a call of rows that do not update (most
        rows of a mature model, one row at a time) copies nothing, where it copied
        nu, Pi and the policy's O(budget^2) matrices every call."""
        slots = (self.idx, self.entry, self.kap, self.clock)
        if self.append_only:
            return slots, None
        self._undo = _Undo()
        return slots, self._undo

    def _copies(self):
        buffers = (self._nu.copy(), self._Pi.copy(), self.zsv.copy(), self.gsv.copy())
        return buffers, self.policy.copy()

    def restore(self, cp) -> None:
        (self.idx, self.entry, self.kap, self.clock), undo = cp
        self._undo = None
        if undo is not None and undo.saved is not None:
            (self._nu, self._Pi, self.zsv, self.gsv), self.policy = undo.saved

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
            "Pi": self._Pi[:n, :n].copy() if self.second else np.zeros((0, 0)),
            "zsv": self.zsv[:n].copy(),
            "gsv": self.gsv[:n].copy(),
        }
        pol = {f"policy.{k}": v for k, v in self.policy.state_dict(n).items()}
        return {**state, **pol, **self.slots_state()}

    @classmethod
    def from_state(cls, state: dict[str, np.ndarray], ctx) -> ExplicitForm:
        second = ctx.rule.rule not in FIRST_ORDER
        new = cls(second, make_policy(ctx.policy, ctx.budget, ctx.seed))
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


class _Undo:
    """A checkpoint's copies of the buffers, made at the call's first change (None
    until then: nothing to undo)."""

    __slots__ = ("saved",)

    def __init__(self):
        self.saved = None


def _filled(buf: np.ndarray, head: np.ndarray) -> np.ndarray:
    buf[: head.shape[0]] = head
    return buf


def _finite(nu: np.ndarray, Pi: np.ndarray, n: int) -> bool:
    """nu and Pi's leading n x n block hold no inf or NaN (O(n^2), as one update)."""
    return bool(np.isfinite(nu).all() and np.isfinite(Pi[:n, :n]).all())
