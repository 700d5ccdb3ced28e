"""The "oldest" budget's Cholesky form of a binary dual model (the queue).

Second-order rules, solver "cholesky", budget policy "oldest". Removing the oldest
support vector from an append-only factor would rewrite all of it. So the support
set is split in two, like a queue made of two stacks: O, factored once in *reverse*
entry order (its oldest is its last row, so removing it truncates the factor), and
N, the rows appended since, in entry order. ``L = [[L_O, 0], [L_NO, L_N]]`` over
[O[:n_O], N]: L_O is the leading block of the rebuilt factor, L_NO the N rows'
entries at O's columns. When O's rows ``n_O - D .. n_O - 1`` leave, ``L_O`` is
truncated and ``L_N`` takes their columns ``Lam`` of ``L_NO``: ``L_N L_N' + Lam Lam'``
is refactored by one blocked QR (LAPACK dtpqrt, 2 n_N^2 D flops), once per walk
(a block is walked in parts of :func:`part_size` inputs). Inside a walk the leavers
are corrected by Woodbury (:func:`queue_walk`), so each round sees the model with
exactly the budget. Once N holds ``QUEUE_REBUILD`` of the budget, all survivors become
O again: one Cholesky factorisation (n^3 / 3 flops) from the Gram cache (:meth:`QueueForm.rebuild`).

Buffers (C-ordered; the Gram cache shares the square ones): ``LO`` (lower: L_O;
strict upper: K(O, O)), ``LNO`` and ``KNO`` (N x O), ``LN`` (lower: L_N; strict
upper: K(N, N)), ``rO``, ``rN`` (r = L^-1 (g / zeta)). Slots are the rows, [O[:n_O], N].

Rollback. The form is too large to copy per call, and need not be: only the
removal of the oldest (:meth:`QueueForm._drop_oldest`) changes the model's blocks
in place, and copies them first, once per call (:mod:`.queue_state`).
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import numpy as np
from numba import njit
from scipy.linalg import solve_triangular

from ... import _blas, _cholupdate
from ...rules import VAR_FLOOR, rule_from_plain
from .form import Form, Walked, entered_inputs
from .one_input import ONE_INPUT_MAX_N
from .queue_block import (
    NO_FORWARD,
    append_rows,
    assemble_precision,
    block_products,
    drop_oldest,
    drop_slots,
    grown_slots,
    quiet_queue,
)
from .queue_state import (
    QueueCheckpoint,
    load_queue_state,
    queue_state,
    restore_checkpoint,
    save_leading,
    take_checkpoint,
)
from .quiet import keep_products, kept_products
from .status import NONFINITE, OK, PSD_TOL, STOP
from .steps import (
    Block,
    QueueResult,
    block_rows_part,
    checked_step,
    chol_rank1,
    chol_solve_lower,
    plain_result,
)

__all__ = ["QUEUE_REBUILD", "QueueForm", "part_size", "queue_walk", "walk_in_parts"]

#: The queue form rebuilds its factor once N holds this fraction of the budget.
QUEUE_REBUILD = 0.5


@functools.lru_cache(maxsize=256)  # (every walk asks; a model's size repeats)
def part_size(n: int) -> int:
    """Inputs per walk of a model of n support vectors (the queue and the lazy form):
    ``(2 n^2)^(1/3)``, at least 16 (43 at n = 200, 126 at n = 1000, 318 at n = 4000;
    a walk also ends with its block). A walk with c candidate leavers costs O(c u)
    scalar work per input (u rows appended so far) and O(c n) per input in its
    products, where its solve ``L^-1 K0`` costs O(n^2) per input however the block is
    cut. Timed by hand for the lazy form (SCW-I fits of 8,000 rows at B = 200-2000,
    and AROW at B = 4000 with every round removing), against walks of 1, 1.5 and 3
    times this length: these were 2-20 % faster than the shorter ones and as fast as
    the longer ones; whole blocks of 256 at B = 200 several times slower. The queue
    form walked whole blocks (c up to the block's length) until it took these walks:
    one-pass "oldest" fits of SCW-I on magic's 12,680 training rows (one thread,
    timed by hand, the same test error) went from 0.31 to 0.13 s at B = 200, 0.60 to
    0.30 s at B = 500, 0.87 to 0.61 s at B = 1000 and 1.76 to 1.55 s at B = 2000.
    """
    return max(16, round((2.0 * n * n) ** (1.0 / 3.0)))


class Candidates(NamedTuple):
    """The next leavers (candidate d is the d-th to leave) at the block's start:
    ``P0 = Y0' W0``, ``H0 = Y0' Y0``, ``rho0 = Y0' r`` with ``Y0 = L^-1 E_cands``;
    ``new[d]``: -1, or k for a leaver that is the walk's own k-th appended row (its
    rows of P0, H0, rho0 are zero: Y0 is zero on the support at the walk's start)."""

    P0: np.ndarray
    H0: np.ndarray
    rho0: np.ndarray
    new: np.ndarray


class QueueRows(NamedTuple):
    """The rows the queue walk appends: as :class:`.steps.NewRows`, plus ``qn``
    (g / zeta) and ``PN`` (their entries of Y)."""

    E: np.ndarray
    Ld: np.ndarray
    rn: np.ndarray
    qn: np.ndarray
    zt: np.ndarray
    src: np.ndarray
    PN: np.ndarray


@njit(cache=True)
def _add_death(H0, PN, Ch, D, u, p, y1):
    """Candidate D leaves: the factor ``Ch`` of H gains its row and column."""
    for d2 in range(D + 1):
        acc = H0[D, d2]
        for i in range(u):
            acc += PN[i, D] * PN[i, d2]
        p[d2] = acc
    chol_solve_lower(Ch, D, p, y1)
    diag = p[D]
    for d2 in range(D):
        Ch[D, d2] = y1[d2]
        diag -= y1[d2] * y1[d2]
    Ch[D, D] = math.sqrt(max(diag, 1e-300))


@njit(cache=True)
def queue_walk(blk, cand, rule, n_alive, budget, rows, f_out):
    """Walk one block in (b + c)-space (``blk`` a :class:`.steps.Block`).

    The rows appended in the block extend the factor of *all* the support at the
    block's start, leavers included, exactly as without a budget, so that ``M``
    stays ``D^-1 + a K`` over everything. The model without the D leavers so far is
    its restriction, by the identity ``k_S' M_S^-1 q_S = k' M^-1 q - p' H^-1 rho``
    with ``Y = L^-1 E_dead``, ``p = Y' w``, ``rho = Y' r``, ``H = Y'Y``
    (``doc/dual-form.md`` section 6); the new rows' entries of Y are ``rows.PN``,
    ``Ch`` is the Cholesky factor of H over the dead. Returns a
    :class:`QueueResult`; STOP at the round whose update would need a (c+1)-th death.
    """
    a = rule.a
    b = blk.kap.shape[0]
    P0, PN = cand.P0, rows.PN
    c = P0.shape[0]
    u = np.int64(0)  # (typed, not the literal 0: callees compile once, for int64)
    D = np.int64(0)
    nfl = 0
    e = np.empty(b)
    p = np.empty(c)
    y1 = np.empty(c)
    y2 = np.empty(c)
    Ch = np.zeros((c, c))
    rho = np.empty(c)
    for d in range(c):
        rho[d] = cand.rho0[d]
    for t in range(b):
        fx, ee = block_rows_part(blk, rows, u, t, a, e)
        for d in range(c):
            acc = P0[d, t]
            for i in range(u):
                acc += PN[i, d] * e[i]
            p[d] = acc
        chol_solve_lower(Ch, D, p, y1)
        chol_solve_lower(Ch, D, rho, y2)
        a_ext = blk.G[t, t] + ee
        qa = a_ext
        qb = fx
        for d in range(D):
            qa -= y1[d] * y1[d]
            qb -= y1[d] * y2[d]
        f = a * qb
        f_out[t] = f
        kap_t = blk.kap[t]
        y_t = blk.y[t]
        v = a * kap_t - a * a * qa
        st = checked_step(rule, y_t * f, f, v, kap_t, PSD_TOL)
        if st.status != OK:
            return QueueResult(u, D, nfl, t, st.status)
        if st.alpha > 0.0 and n_alive + 1 > budget and D == c:
            return QueueResult(u, D, nfl, t, STOP)
        nfl += st.floored
        if st.alpha > 0.0:
            # the extended model (leavers included) is a valid model: v_ext >= 0
            v_ext = a * kap_t - a * a * a_ext
            lnn = math.sqrt(1.0 / st.zeta + max(v_ext, 0.0))
            q = f + st.alpha * y_t * (1.0 / st.zeta + st.v)
            rnew = (q - a * fx) / lnn
            if not (math.isfinite(lnn) and math.isfinite(rnew)):  # (a huge k(x, x))
                return QueueResult(u, D, nfl, t, NONFINITE)
            for d in range(c):  # (e_new - a w' Y) / L_nn; e_new = 1 for its own column
                PN[u, d] = ((1.0 if cand.new[d] == u else 0.0) - a * p[d]) / lnn
            for d in range(D):
                y1[d] = PN[u, d]
            chol_rank1(Ch, D, y1)
            for d in range(c):
                rho[d] += PN[u, d] * rnew
            for k in range(u):
                rows.E[u, k] = e[k]
            rows.Ld[u] = lnn
            rows.rn[u] = rnew
            rows.qn[u] = q
            rows.zt[u] = st.zeta
            rows.src[u] = t
            u += 1
            n_alive += 1
            if n_alive > budget:
                _add_death(cand.H0, PN, Ch, D, u, p, y1)
                D += 1
                n_alive -= 1
    return QueueResult(u, D, nfl, -1, OK)


@njit(cache=True)
def queue_part(fns, bufs, sizes, data, rule, slots, f_blk, pre):
    """One walk of :meth:`QueueForm._walk_part` in one compiled call (from Python, the
    products, the walk's records and the rows' bookkeeping were two dozen small numpy
    calls: a third of a one-row ``partial_fit``). Block inputs t0..t1-1 on the
    support ``ks``: :func:`.queue_block.block_products`, :func:`queue_walk` (margins
    into ``f_blk[t0:t1]``) and, unless it failed, the rows it appended written into the
    buffers (:func:`.queue_block.append_rows`). ``bufs = (LO, LNO, KNO, LN, rO, rN)``,
    ``sizes = (nO, nN, t0, t1, c, budget, clock)``, ``data = (K0, Kbb, kap, y)`` (the
    block's), ``slots = (entry, kap, zeta, qv, ks)``. Returns (QueueResult's fields, the block
    inputs that entered, the slots after the append: new arrays if rows were appended,
    as rollback needs, else the same). ``fns`` and ``rule`` come as plain tuples; ``pre``
    as :func:`.queue_block.block_products` takes it."""
    fns, rule = _blas.tri_record(fns), rule_from_plain(rule)
    LO, LNO, KNO, LN, rO, rN = bufs
    nO, nN, t0, t1, c, budget, clock = sizes
    K0, Kbb, kap_blk, y_blk = data
    entry, kap, zeta, qv, ks = slots
    K0c, Kss, WO, X, G, rW, P0, H0, rho0 = block_products(
        fns, (LO, LNO, LN, rO, rN), nO, nN, K0, Kbb, ks, t0, t1, c, pre
    )
    cand = Candidates(P0, H0, rho0, np.full(c, -1, dtype=np.int64))
    kap_t = kap_blk[t0:t1]
    blk = Block(G, np.ascontiguousarray(rW[:, 0]), Kss, kap_t, y_blk[t0:t1])
    res, rows = walk_with_rows(blk, cand, rule, nO + nN, budget, f_blk[t0:t1])
    u = res.n_new
    S = rows.src[:u]
    if u == 0 or (res.status != OK and res.status != STOP):
        return plain_result(res), S + t0, slots
    a = rule.a
    append_rows((LNO, KNO, LN, rN), nO, nN, a, S, rows.E, rows.Ld, rows.rn, WO, X, K0c, Kss)
    entry, kap, ks = grown_slots(entry, kap, ks, clock, kap_t, S, t0)
    zeta = np.concatenate((zeta, rows.zt[:u]))
    qv = np.concatenate((qv, rows.qn[:u]))
    return plain_result(res), S + t0, (entry, kap, zeta, qv, ks)


@njit(cache=True)
def walk_with_rows(blk, cand, rule, n, budget, f_part):
    """:func:`queue_walk` of ``blk`` (margins into ``f_part``) with the records of the
    rows it may append made here: (QueueResult, QueueRows). The queue's and the lazy
    form's walk (:func:`.lazy_block.lazy_walk`)."""
    bs = blk.kap.shape[0]
    c = cand.new.shape[0]
    rows = QueueRows(np.empty((bs, bs)), np.empty(bs), np.empty(bs), np.empty(bs),
                     np.empty(bs), np.empty(bs, dtype=np.int64), np.empty((bs, c)))  # fmt: skip
    return queue_walk(blk, cand, rule, n, budget, rows, f_part), rows


def walk_in_parts(form, ctx, blk, t0: int, ks: np.ndarray, f_blk: np.ndarray, on_stop):
    """Block inputs t0.. of ``form`` (the queue or the lazy form) in walks of
    :func:`part_size` inputs, each by ``form._walk_part(ctx, blk, t0, t1, ks, f_blk)``;
    a walk that stops (its candidates ran out) goes on from where it stopped after
    ``ks = on_stop(ctx, ks)``. Returns the block's :class:`.form.Walked`."""
    b = blk.y.shape[0]
    entered = []
    nfl = 0
    form._nu_cache = None
    while t0 < b:
        t1 = min(b, t0 + part_size(form.n))
        res, ks, S = form._walk_part(ctx, blk, t0, t1, ks, f_blk)
        nfl += res.n_floored
        if res.status not in (OK, STOP):
            return Walked(entered_inputs(entered), ks, nfl, t0 + res.index, res.status)
        if S.size:
            entered.append(S)
        if res.status == STOP:
            t0 += res.index
            ks = on_stop(ctx, ks)
        else:
            t0 = t1
    return Walked(entered_inputs(entered), ks, nfl, -1, OK)


class QueueForm(Form):
    """The queue (module docstring); ``zeta`` and ``qv`` (g / zeta) by slot."""

    name = "queue"
    code = 2

    def __init__(self):
        super().__init__()
        self.zeta = np.zeros(0)
        self.qv = np.zeros(0)
        self.LO = np.zeros((0, 0))
        self.nO = self.nN = 0
        self.rO = np.zeros((0, 1))
        self.LNO = self.KNO = self.LN = np.zeros((0, 0))
        self.rN = np.zeros((0, 1))
        self._nu_cache: np.ndarray | None = None
        self._cp_ref = None  # weak reference to the current call's checkpoint

    def __getstate__(self) -> dict:
        state = super().__getstate__()
        state["_cp_ref"] = None  # a checkpoint belongs to one call, not to the model
        return state

    # ------------------------------------------------------------ the factor

    def _factor_from(self, LO: np.ndarray, cap_n: int) -> None:
        """O := everything, from ``LO`` made by :func:`assemble_precision` (factorised
        here, in place); N empty with room for ``cap_n`` rows."""
        n = LO.shape[0]
        if _blas.potrf_lower(LO):
            raise np.linalg.LinAlgError("the precision does not factor: rescale X (or lower gamma)")
        self.LO = LO
        self.nO = n
        self.rO = np.array(self.qv, dtype=np.float64).reshape(n, 1)
        _blas.trsm_lower_left(LO, self.rO)
        self.nN = 0
        self.LN = None
        self._alloc(cap_n)

    def _alloc(self, cap_n: int) -> None:
        nO0 = self.LO.shape[0]
        old = self.LN
        LNO = np.zeros((cap_n, nO0))
        KNO = np.zeros((cap_n, nO0))
        LN = np.zeros((cap_n, cap_n))
        rN = np.zeros((cap_n, 1))
        if old is not None:
            m = self.nN
            LNO[:m] = self.LNO[:m]
            KNO[:m] = self.KNO[:m]
            LN[:m, :m] = self.LN[:m, :m]
            rN[:m] = self.rN[:m]
        self.LNO, self.KNO, self.LN, self.rN = LNO, KNO, LN, rN

    def rebuild(self, ctx, ks: np.ndarray, K: np.ndarray | None = None) -> np.ndarray:
        """All support vectors become O, in reverse entry order (one Cholesky
        factorisation). ``K``: the dense Gram matrix when coming from the panel form
        (else the queue's own Gram cache is read). Returns ks permuted alike."""
        perm = np.argsort(-self.entry, kind="stable")
        kap = self.kap
        self.entry = self.entry[perm]
        self.kap = self.kap[perm]
        self.zeta = self.zeta[perm]
        self.qv = self.qv[perm]
        if K is None:
            M = np.empty((self.n, self.n))
            assemble_precision(
                self.LO, self.nO, self.KNO, self.LN, self.nN, kap, perm, ctx.a, self.zeta, M
            )
        else:  # the dense Gram matrix read as an O-only cache
            M = np.empty_like(K)
            none = np.zeros((0, 0))
            assemble_precision(K, K.shape[0], none, none, 0, kap, perm, ctx.a, self.zeta, M)
        self._factor_from(M, int(QUEUE_REBUILD * ctx.budget) + ctx.block_size + 1)
        self._nu_cache = None
        return ks[perm]

    def forward(self, K: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(W_O, X): ``L^-1 K`` for K (n x m, rows by slot), split at O | N."""
        nO, nN = self.nO, self.nN
        WO = np.array(K[:nO], dtype=np.float64, order="C")
        _blas.trsm_lower_left(self.LO[:nO, :nO], WO)
        X = np.array(K[nO:], dtype=np.float64, order="C")
        _blas.gemm_sub(-1.0, self.LNO[:nN, :nO], WO, 1.0, X)
        _blas.trsm_lower_left(self.LN[:nN, :nN], X)
        return WO, X

    def factor(self) -> tuple[np.ndarray, np.ndarray]:
        """The dense lower factor over the slots and r (for prediction)."""
        nO, nN = self.nO, self.nN
        L = np.zeros((nO + nN, nO + nN))
        L[:nO, :nO] = np.tril(self.LO[:nO, :nO])
        L[nO:, :nO] = self.LNO[:nN, :nO]
        L[nO:, nO:] = np.tril(self.LN[:nN, :nN])
        return L, np.concatenate([self.rO[:nO, 0], self.rN[:nN, 0]])

    def refresh_rN(self, qN: np.ndarray) -> None:
        """r_N = L_N^-1 (q_N - L_NO r_O) after L_N changed."""
        nO, nN = self.nO, self.nN
        self.rN[:nN, 0] = qN
        _blas.gemm_sub(-1.0, self.LNO[:nN, :nO], self.rO[:nO], 1.0, self.rN[:nN])
        _blas.trsm_lower_left(self.LN[:nN, :nN], self.rN[:nN])

    # ------------------------------------------------------------ the model

    def nu(self, a: float) -> np.ndarray:
        if self._nu_cache is None:
            L, r = self.factor()
            self._nu_cache = a * solve_triangular(L, r, lower=True, trans="T")
        return self._nu_cache.copy()

    def Pi(self, a: float) -> np.ndarray:
        n = self.n
        if n == 0:
            return np.zeros((0, 0))
        Linv = np.vstack(self.forward(np.eye(n)))
        return -(a * a) * (Linv.T @ Linv)

    def variance(self, Ks: np.ndarray, kap: np.ndarray, a: float) -> np.ndarray:
        if self.n == 0:
            return a * kap
        WO, X = self.forward(Ks)
        v = a * kap - a * a * (np.einsum("ij,ij->j", WO, WO) + np.einsum("ij,ij->j", X, X))
        return np.maximum(v, VAR_FLOOR * a * kap)

    # ------------------------------------------------------------ learning

    # (the try's products: .one_input's loops up to its size, no BLAS; the share where
    # trying pays, and the probe's period: .quiet.QUIET_SPAN)
    quiet_blas = False
    quiet_min_rate = 0.3
    quiet_probe = 16
    quiet_max_n = ONE_INPUT_MAX_N

    def quiet(self, ctx, K0, Kbb, kap: float, y: float) -> tuple[bool, float]:
        """The walk's decision at one row, exactly (:func:`.queue_block.quiet_queue`);
        not where the walk would rebuild the queue after it."""
        if self.nN > QUEUE_REBUILD * ctx.budget or self.n > ONE_INPUT_MAX_N:
            return False, 0.0  # (above that size its products are BLAS: quiet_blas)
        bufs = (self.LO, self.LNO, self.LN, self.rO, self.rN)
        nO, nN, rule = self.nO, self.nN, tuple(ctx.rule)
        taken, f, pre = quiet_queue(_blas.TRI_PLAIN, bufs, nO, nN, K0, Kbb, kap, y, rule)
        keep_products(self, taken, K0, (nO, nN, 0, 1), pre)  # (for the walk: _walk_part)
        return taken, f

    def walk(self, ctx, blk, t0: int, ks: np.ndarray, f_blk: np.ndarray) -> Walked:
        """Block inputs t0.. in walks of :func:`part_size` inputs (a walk also ends
        where its candidates run out: then a rebuild)."""
        w = walk_in_parts(self, ctx, blk, t0, ks, f_blk, self.rebuild)
        if w.status == OK and self.nN > QUEUE_REBUILD * ctx.budget:
            w = w._replace(ks=self.rebuild(ctx, w.ks))
        return w

    def _walk_part(self, ctx, blk, t0: int, t1: int, ks: np.ndarray, f_blk: np.ndarray):
        """One walk over block inputs t0..t1-1, or to the next rebuild; the new rows
        appended and the leavers dropped. Returns (QueueResult, ks, the block inputs
        of the new rows)."""
        B = ctx.budget
        bs = t1 - t0
        nO, nN = self.nO, self.nN
        if nN + bs > self.LN.shape[0]:
            self._alloc(nN + bs + max(16, nN // 2))
        c = min(nO, bs, max(0, nO + nN + bs - B))
        bufs = (self.LO, self.LNO, self.KNO, self.LN, self.rO, self.rN)
        slots = (self.entry, self.kap, self.zeta, self.qv, ks)
        sizes = (nO, nN, t0, t1, c, B, self.clock)
        data, rule = (blk.K0, blk.Kbb, blk.kap, blk.y), tuple(ctx.rule)
        pre = kept_products(self, blk.K0, (nO, nN, t0, t1), NO_FORWARD)  # (quiet's, if any)
        out, S, slots = queue_part(_blas.TRI_PLAIN, bufs, sizes, data, rule, slots, f_blk, pre)
        res = QueueResult._make(out)
        if res.status not in (OK, STOP):
            return res, ks, S
        if res.n_new:  # new slot arrays (a checkpoint holds the old ones)
            self.nN = nN + res.n_new
            self.clock += res.n_new
            self.entry, self.kap, self.zeta, self.qv, ks = slots
        if res.deaths:
            ks = self._drop_oldest(res.deaths, ks)
        return res, ks, S

    def _drop_oldest(self, D: int, ks: np.ndarray) -> np.ndarray:
        """O's last D rows (the D oldest) leave: L_O truncated, L_N refactored with
        their columns of L_NO folded in (one dtpqrt)."""
        nO, nN = self.nO, self.nN
        nO2 = nO - D
        save_leading(self, nO2, nO)
        slots = (self.entry, self.kap, self.zeta, self.qv, ks)
        if D <= _cholupdate.GIVENS_MAX_RANK:  # (a few: one compiled call, the same steps)
            bufs = (self.LN, self.LNO, self.rO, self.rN)
            slots = drop_oldest(_blas.TRI_PLAIN, bufs, nN, nO2, nO, slots)
        else:
            _cholupdate.tpqrt_update(self.LN[:nN, :nN], self.LNO[:nN, nO2:nO])
            self.LNO[:nN, nO2:nO] = 0.0
            slots = drop_slots(slots, nO2, nO)
        self.nO = nO2
        self.entry, self.kap, self.zeta, self.qv, ks = slots
        if D > _cholupdate.GIVENS_MAX_RANK:
            self.refresh_rN(self.qv[nO2:])
        return ks

    # ------------------------------------------------------------ rollback, state

    def checkpoint(self) -> QueueCheckpoint:
        """References and counts; the leading blocks are copied on the first in-place
        change, not here (module docstring, Rollback; :mod:`.queue_state`)."""
        return take_checkpoint(self)

    def restore(self, cp: QueueCheckpoint) -> None:
        restore_checkpoint(self, cp)

    @property
    def nbytes(self) -> int:
        arrays = (self.zeta, self.qv, self.LO, self.rO, self.LNO, self.KNO, self.LN, self.rN)
        return self.slots_nbytes() + sum(x.nbytes for x in arrays)

    def state_dict(self) -> dict[str, np.ndarray]:
        """The model's blocks of the buffers, the block sizes and capacities
        (:func:`.queue_state.queue_state`)."""
        return {**queue_state(self), **self.slots_state()}

    @classmethod
    def from_state(cls, state: dict[str, np.ndarray], ctx=None) -> QueueForm:
        new = cls()
        new.load_slots(state)
        load_queue_state(new, state)
        return new
