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
are corrected by Woodbury (:func:`.leaver_walk.queue_walk`), so each round sees the model with
exactly the budget. Once N holds ``QUEUE_REBUILD`` of the budget, all survivors become
O again: one Cholesky factorisation (n^3 / 3 flops) from the Gram cache (:meth:`QueueForm.rebuild`),
or, where ``a K + D^-1`` assembled from the cache does not factor in float64 (extreme kernel
values: an unscaled feature under a cubic kernel), from the model's own factor, by a QR of
its rows taken in the new order (:func:`_lower_from_rows`, about 4x the flops).

Buffers (C-ordered; the Gram cache shares the square ones): ``LO`` (lower: L_O;
strict upper: K(O, O)), ``LNO`` and ``KNO`` (N x O), ``LN`` (lower: L_N; strict
upper: K(N, N)), ``rO``, ``rN`` (r = L^-1 (g / zeta)). Slots are the rows, [O[:n_O], N].

Rollback. The form is too large to copy per call, and need not be: only the
removal of the oldest (:meth:`QueueForm._drop_oldest`) changes the model's blocks
in place, and copies them first, once per call (:mod:`.queue_state`).
"""

from __future__ import annotations

import functools

import numpy as np
from numba import njit
from scipy.linalg import qr, solve_triangular

from ... import _blas, _cholupdate
from ...rules import VAR_FLOOR, rule_from_plain
from .form import Form, Walked, entered_inputs
from .leaver_walk import Candidates, walk_tols, walk_with_rows
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
from .status import OK, STOP, walk_psd_tol
from .steps import Block, QueueResult, plain_result

__all__ = ["QUEUE_REBUILD", "QueueForm", "part_size", "walk_in_parts"]

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


@njit(cache=True)
def queue_part(fns, bufs, sizes, data, rule, tols, slots, f_blk, pre):
    """One walk of :meth:`QueueForm._walk_part` in one compiled call (from Python, the
    products, the walk's records and the rows' bookkeeping were two dozen small numpy
    calls: a third of a one-row ``partial_fit``). Block inputs t0..t1-1 on the
    support ``ks``: :func:`.queue_block.block_products`, :func:`.leaver_walk.queue_walk` (margins
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
    res, rows = walk_with_rows(blk, cand, rule, tols, nO + nN, budget, f_blk[t0:t1])
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


def _lower_from_rows(out: np.ndarray, F: np.ndarray) -> bool:
    """``out``'s lower triangle := the Cholesky factor of ``F F'`` (F square, of full
    rank: a factor with its rows permuted), by a QR of F' (``F = R' Q'``, so
    ``F F' = R' R``), which does not break down where forming ``F F'`` and factoring
    it would; the strict upper triangle is left as it is. False if not finite."""
    R = qr(F.T, mode="r", check_finite=False)[0]
    R *= np.where(np.diagonal(R) < 0.0, -1.0, 1.0)[:, None]  # a positive diagonal
    lower = np.tril_indices(F.shape[0])
    out[lower] = R.T[lower]
    return bool(np.isfinite(out[lower]).all())


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

    def _factor_from(self, LO: np.ndarray, cap_n: int, rows=None) -> None:
        """O := everything, from ``LO`` made by :func:`assemble_precision` (factorised
        here, in place); N empty with room for ``cap_n`` rows. ``rows``: None, or a
        function giving the model's own factor with its rows in LO's order, for where
        LO does not factor."""
        n = LO.shape[0]
        if _blas.potrf_lower(LO) and (rows is None or not _lower_from_rows(LO, rows())):
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

    def rebuild(self, ctx, ks: np.ndarray, K=None, L=None) -> np.ndarray:
        """All support vectors become O, in reverse entry order (one Cholesky
        factorisation). ``K``: the dense Gram matrix when coming from the panel form
        (else the queue's own Gram cache is read), ``L`` that form's factor by slot.
        Returns ks permuted alike."""
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
        # (the model's own factor, its rows in the new order: the queue's, or the panels')
        rows = (lambda: self.factor()[0][perm]) if K is None else None
        if K is not None and L is not None:
            rows = lambda: L[perm]  # noqa: E731
        self._factor_from(M, int(QUEUE_REBUILD * ctx.budget) + ctx.block_size + 1, rows)
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
        tol = walk_psd_tol(ctx.known_psd)
        taken, f, pre = quiet_queue(_blas.TRI_PLAIN, bufs, nO, nN, K0, Kbb, kap, y, rule, tol)
        keep_products(self, taken, K0, (nO, nN, 0, 1), pre)  # (for the walk: _walk_part)
        return taken, f

    def one_input_blas(self, ctx) -> bool:
        """Loops up to ONE_INPUT_MAX_N support vectors (products, the oldest's fold, r_N:
        :func:`.queue_block.drop_columns`), but LAPACK where the walk may rebuild."""
        return self.nN + 1 > QUEUE_REBUILD * ctx.budget or self.n >= ONE_INPUT_MAX_N

    def walk(self, ctx, blk, t0: int, ks: np.ndarray, f_blk: np.ndarray) -> Walked:
        """Block inputs t0.. in walks of :func:`part_size` inputs (a walk also ends
        where its candidates run out: then a rebuild)."""
        w = walk_in_parts(self, ctx, blk, t0, ks, f_blk, self._after_stop)
        if w.status == OK and self.nN > QUEUE_REBUILD * ctx.budget:
            w = w._replace(ks=self.rebuild(ctx, w.ks))
        return w

    def _after_stop(self, ctx, ks: np.ndarray) -> np.ndarray:
        """After a walk that stopped, its leavers dropped: a rebuild where O ran out
        of them; none where the walk stopped before a leaver its Woodbury correction
        could not take exactly (:func:`.leaver_walk.queue_walk`), the next walk's first."""
        return self.rebuild(ctx, ks) if self.nO == 0 else ks

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
        tols = walk_tols(ctx.known_psd)
        fns = _blas.TRI_PLAIN
        out, S, slots = queue_part(fns, bufs, sizes, data, rule, tols, slots, f_blk, pre)
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
