"""The "random" budget's Cholesky form: deletions anywhere, lazy inside a walk.

Second-order rules, solver "cholesky", policy "random", ``budget_batch`` 1. The model
is the batch-pruned form's (:mod:`.pruned`): ``M = L L'`` (``Pi = -a^2 M^-1``),
``r = L^-1 qv`` (``qv = g / zeta``, nothing is ever projected) in dense buffers,
slots in entry order; only the way a round removes differs. A round that makes the
model B + 1 removes one support vector at once, exactly as the explicit nu/Pi
recursion and the reference do (q = 1, the same model to rounding), but the factor
is not rewritten per round (a deletion at slot p rewrites the (n - p)^2 rows after
it). The "random" policy's leavers do not depend on the model: the d-th death of a
walk comes right after its (B - n + d + 1)-th update and takes the support vector
``floor(U (B))`` of the model's entry order without its newest, ``U`` the counter's
draw (:mod:`kernelcw.budget`). So the walk knows its leavers before it starts
(:func:`.lazy_block.lazy_candidates`) and handles them as the "oldest" queue handles its
own (:func:`.leaver_walk.queue_walk`, ``doc/dual-form.md`` section 6): the rows it appends
extend the factor of everything at its start, leavers included, and every round
sees the model without the leavers so far through the identity
``k_A' M_AA^-1 q_A = w'u - (w'Y) (Y'Y)^-1 (Y'u)``, ``Y = L^-1 E_V``.

After the walk (:meth:`.pruned.PrunedForm._purge`), the D leavers V leave the factor at once:
rows above the first leaver p0 are unchanged; the trailing kept rows t satisfy
``L'_tt L'_tt' = L[t, A_t] L[t, A_t]' + L[t, V] L[t, V]'`` (their kept columns from
p0 on, a lower triangle, and the leavers' columns): the kept rows and columns are
moved up in place (:func:`.lazy_block.compact_rows`) and the leavers' columns folded in by one
rank-D update, Givens sweeps for a few (:func:`kernelcw._cholupdate.givens_update`),
else LAPACK's blocked QR taken in bands of :data:`STAIR_GROUP` leavers: leaver v's
column is zero above v, so a band's QR starts at its first leaver's row
(:func:`kernelcw._cholupdate.staircase_update`: about 2/3 n_t^2 flops per leaver for
leavers spread over the factor, against 2 n_t^2 for one QR of all the columns). Then
``r'_t = L'_tt^-1 (qv_t - L[t, :p0] r[:p0])``. The walk's ``Y`` is solved in the
same bands (its columns zero above their leavers' rows). A leaver that entered in
the walk itself is a row of the walk's own (:class:`.leaver_walk.Candidates` ``new``).

Cost per round at B = 4000 with every round removing: the block's solve ``L^-1 K0``
(n^2 flops per input, as without a budget), ``Y`` (about n^2 / 3 per leaver) and the
purge (about 2/3 n^2 per leaver, and moving the trailing rows): BLAS-3 throughout,
against the blocked nu/Pi walk's 4-6 n^2 (:mod:`.deferred`).

BLAS threads: a walk's products (the solve above, n^2 per input) take the threads
"auto" allows for their size and the machine's load (:class:`kernelcw._threads.BlasThreads`,
through the context), the walk and the purge one: with BLAS's threads throughout, a
fit at B = 3,000 took 1.48x its one-thread time with the other core busy. The
products alone made a round at B = 4,000 1.29x faster idle and, with the free cores
counted, no slower under load when timed by hand; ``python -m benchmarks
under_load`` gave the B = 3,000 fit 0.64-0.83 of one thread idle in four runs, and under
load 1.28-1.29 by medians in three (0.99-1.10 by minima) and 1.06 in session 14's last.

Rollback: the batch-pruned form's (:mod:`.pruned`): a checkpoint holds references
and counts, and a purge first copies the rows it is about to change.
"""

from __future__ import annotations

import numpy as np

from ... import _blas
from ..._threads import AUTO_MIN_FLOPS
from .form import Walked
from .lazy_block import (
    NO_LAZY_FORWARD,
    lazy_candidates,
    lazy_part,
    lazy_products,
    lazy_walk,
    quiet_lazy,
)
from .leaver_walk import walk_tols
from .one_input import ONE_INPUT_MAX_N
from .pruned import STAIR_GROUP, PrunedForm
from .queue import part_size, walk_in_parts
from .quiet import keep_products, kept_products
from .status import OK, STOP, walk_psd_tol
from .steps import QueueResult

__all__ = ["STAIR_GROUP", "LazyForm", "part_size"]


class LazyForm(PrunedForm):
    """The batch-pruned form's buffers and model (``L``, ``r``, ``qv``, ``zeta``),
    grown beyond budget + 1 to hold a walk's appended rows; removals lazy inside a
    walk (module docstring). Slots are in entry order."""

    name = "lazy"
    code = 4

    def __init__(self, policy: str, budget: int, batch: int, seed: int):
        if policy != "random" or batch != 1:
            raise ValueError("the lazy form serves budget_policy='random' with budget_batch=1")
        super().__init__(policy, budget, batch, seed)

    def _capacity(self) -> int:
        """The budget and a walk's appended rows (:func:`part_size`)."""
        return self.budget + part_size(self.budget) + 1

    def learn_flops(self, b: int) -> float:
        """n^2: no product of the block is counted here (the block's threads come from
        its kernel block and the other models); each walk's products choose their own
        threads (:meth:`_walk_part`)."""
        return float(self.n) * self.n

    # ------------------------------------------------------------ learning

    quiet_blas = False  # (as the queue form's)
    quiet_min_rate = 0.3
    quiet_probe = 16
    quiet_max_n = ONE_INPUT_MAX_N

    def quiet(self, ctx, K0, Kbb, kap: float, y: float) -> tuple[bool, float]:
        """The walk's decision at one row, exactly (:func:`.lazy_block.quiet_lazy`)."""
        n, rule = self.n, tuple(ctx.rule)
        if n > ONE_INPUT_MAX_N:  # (above that size its products are BLAS: quiet_blas)
            return False, 0.0
        tol = walk_psd_tol(ctx.known_psd)
        taken, f, pre = quiet_lazy(_blas.TRI_PLAIN, self.L, self.r, n, K0, Kbb, kap, y, rule, tol)
        keep_products(self, taken, K0, (n, 0, 1), pre)  # (for the walk: _walk_part)
        return taken, f

    def one_input_blas(self, ctx) -> bool:
        """Loops up to ONE_INPUT_MAX_N support vectors: the products, the walk, the
        purge of its one leaver (Givens, r by :func:`.lazy_block.refresh_r`'s loops)."""
        return self.n >= ONE_INPUT_MAX_N

    def walk(self, ctx, blk, t0: int, ks: np.ndarray, f_blk: np.ndarray) -> Walked:
        """Block inputs t0.. in parts of :func:`part_size` inputs, a walk and a purge
        each (a walk's leavers are known before it starts, so it never stops for
        want of one; it stops before a leaver the Woodbury correction cannot take
        exactly, :func:`.leaver_walk.queue_walk`, and the next walk goes on from there)."""
        return walk_in_parts(self, ctx, blk, t0, ks, f_blk, _go_on)

    def _walk_part(self, ctx, blk, t0: int, t1: int, ks: np.ndarray, f_blk: np.ndarray):
        """One walk of block inputs t0..t1-1 (:func:`.lazy_block.lazy_part`) and the
        purge of its leavers. Returns (QueueResult, ks, the block inputs of the new
        rows)."""
        B = ctx.budget
        n = self.n  # n + bs <= budget + part_size(budget) < capacity
        # the walk's leavers in leaving order (:func:`.lazy_block.lazy_candidates`)
        V, new = lazy_candidates(n, t1 - t0, B, self.seed, self.counter)
        bufs = (self.L, self.r, self.qv, self.zeta)
        sizes = (n, t0, t1, B, self.clock, STAIR_GROUP)
        data = (blk.K0, blk.Kbb, blk.kap, blk.y)
        slots = (self.entry, self.kap, ks)
        flops = float(n) * n * (t1 - t0)  # the solve L^-1 K0: the walk's largest call
        pre = kept_products(self, blk.K0, (n, t0, t1), NO_LAZY_FORWARD)  # (quiet's, if any)
        rule, tols = tuple(ctx.rule), walk_tols(ctx.known_psd)
        if ctx.threads is None or flops < AUTO_MIN_FLOPS:
            out, S, slots = lazy_part(
                _blas.TRI_PLAIN, bufs, sizes, data, rule, tols, (V, new), slots, f_blk, pre
            )
        else:  # the products on the threads "auto" allows; the walk (loops) and the
            # purge (its BLAS-2 refresh of r, n^2) on those of a block of n^2 flops: one,
            # or two idle (by hand, B = 3,000 "random", idle: 0.69 -> 0.63 s a fit, as
            # fast as BLAS's threads unlimited, /tmp/s29/rnd.py)
            ctx.threads.block(flops)
            prods = lazy_products(_blas.TRI_PLAIN, self.L, self.r, blk.K0, blk.Kbb, ks,
                                  t0, t1, V, new, STAIR_GROUP, pre)  # fmt: skip
            ctx.threads.block(float(n) * n)
            out, S, slots = lazy_walk(bufs, sizes, data, rule, tols, (V, new), slots, f_blk, prods)
        res = QueueResult._make(out)
        if res.status not in (OK, STOP):
            return res, ks, S
        if res.n_new:  # new slot arrays (a checkpoint holds the old ones)
            self.clock += res.n_new
            self.entry, self.kap, ks = slots
        if res.deaths:
            ks = self._purge(np.sort(V[: res.deaths]), ks)
        return res, ks, S


def _go_on(ctx, ks):
    """After a walk that stopped: its leavers so far are purged, nothing more to do."""
    return ks
