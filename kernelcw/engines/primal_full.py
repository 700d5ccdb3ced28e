"""The primal engine with full covariance (linear kernel): ``mu`` (K, d) and
``Sigma`` (K, d, d) held as plain arrays, learnt in blocks (BLAS-3).

The blocked walk (``doc/dual-form.md`` section 5)
-------------------------------------------------
The second-order update of :mod:`kernelcw.rules` (``doc/rules.md``) done round by
round reads Sigma twice and writes it once per round (memory-bound). Inside a block
of ``b`` inputs ``X_B`` starting from ``(mu_0, Sigma_0)`` every update is a rank-one
term ``Sigma_t = Sigma_0 - sum_{j<t} beta_j z_j z_j'`` with ``z_j = Sigma_j x_j``.
Write ``P = Sigma_0 X_B'`` (d x b) and ``C0 = X_B P`` (b x b). Then
``z_t = P R[t, :]'`` for a lower-triangular ``R`` and ``Q[j, :] = z_j' X_B' =
R[j, :] C0``, so the whole walk through the block runs in b x b space::

    c_j = Q[j, t]                              (j < t that updated)
    f_t = F[t] + sum_j alpha_j y_j c_j         (F = X_B mu_0)
    v_t = C0[t, t] - sum_j beta_j c_j^2
    on update:  Q[t, s] = C0[t, s] - sum_j beta_j c_j Q[j, s]   (s >= t)
                R[t, :] = e_t - sum_j beta_j c_j R[j, :]

and the block ends with ``mu += P R' (alpha y)`` and ``Sigma -= W W'``,
``W = P R' diag(sqrt(beta))`` (restricted to the rounds that updated). The heavy
work is three matrix products (``P``, ``C0``, ``W W'``), BLAS-3 and
compute-bound; the results equal the round-by-round recursion to rounding. Where
``v_t`` cancels (a variance that collapses inside the block) the block ends before
row t and the next starts there (:data:`SPLIT`), so that holds at any block size.

First-order rules keep ``Sigma = a I``: they learn with the diagonal walk
(:func:`kernelcw.engines._diag_walk.diag_fit`) and report the full matrix.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
from numba import njit

from .._threads import BlasThreads
from ..rules import VAR_FLOOR, RuleParams, negligible, step
from ..spec import EngineSpec
from ._diag_walk import diag_fit
from ._primal_common import Counts, check_same_a, new_counts, raise_nonfinite, rule_record
from .base import EveryRowLearns, LearnResult, Locked, check_shapes, finite_margins

__all__ = ["PrimalFullEngine", "default_block_size", "full_fit"]


class BlockScratch(NamedTuple):
    """Scratch of the walk through one block of m rows. ``Q`` and ``R`` are (b, b) for
    the full block size b, of which only the leading m x m part is used (a short last
    block needs no second, non-contiguous, compiled specialisation); the rest are the
    first m entries of length-b buffers."""

    Q: np.ndarray  #: Q[j, s] = z_j . x_s for the rounds j that updated (module docstring)
    R: np.ndarray  #: z_j = P R[j, :]'
    ay: np.ndarray  #: alpha_j y_j of the rounds that updated
    beta: np.ndarray  #: beta_j of the rounds that updated
    upd: np.ndarray  #: int64: the rounds that updated, in order
    f: np.ndarray  #: the decision value of every round before its update


class WalkResult(NamedTuple):
    """What the walk through one block reports (built in compiled code)."""

    #: rounds that updated: ``upd[:n_updated]``
    n_updated: int
    #: rounds whose margin variance was raised to the floor
    n_floored: int
    #: the first row (in the block) with a non-finite margin or step, or -1
    bad_row: int
    #: the row (in the block) before which the walk stopped, its variance lost to
    #: cancellation (:data:`SPLIT`), or -1
    split: int


#: A row whose margin variance ``v_t = C0[t, t] - sum_j beta_j c_j^2`` keeps less than
#: this share of ``C0[t, t]`` ends the block before it: the terms cancel, losing up to
#: log10(1 / SPLIT) digits of v_t. A prior variance that collapses inside one block (a
#: large intercept_scaling, a block longer than the data's dimension) lost most of them:
#: CW-Stdev, d = 8, intercept_scaling 1e3, block_size 400 was 3.2e-7 off in the mean
#: (against a 60-digit reference; 4e-16 at block_size 1), 1.6e-13 with the split and
#: 1.2e-10 with a threshold of 1e-6. The next block starts there with its products made
#: afresh, as a block of one row would. No block split on magic or a 100-feature stream
#: at the default block size, nor at 256 (by hand, ``/tmp/s27/splits.py``).
SPLIT = 1e-3


def default_block_size(d: int) -> int:
    """Block length for the full-covariance learner (a heuristic).

    Per input the block products cost O(d^2 + d b) and the walk O(b) per update,
    so blocks much longer than ``d`` waste work. At d = 784, b = 256 was the
    fastest of 32..512 (``python -m benchmarks.bench_primal_full``).
    """
    return int(min(256, max(8, d // 2)))


@njit(cache=True)
def _full_walk(C0, F, sq, y, rp, w, b):
    """Walk the block's first ``b`` rows in b x b space (module docstring) for the rule
    record ``rp`` (:class:`kernelcw.rules.RuleParams`), with the scratch ``w``
    (:class:`BlockScratch`).

    ``F`` holds ``X_B mu_0``, ``sq`` the rows' |x|^2 (for the variance floor), ``y``
    their labels in {-1, +1}. Stops at the first non-finite margin or step, and before
    a row whose variance cancels (:data:`SPLIT`; not the first to update). Returns a
    :class:`WalkResult`'s fields as a plain tuple: a namedtuple's boxing looks its
    class up in Python code, where a Ctrl-C crashed numba 0.68 (a segmentation fault).
    """
    Q, R, ay, beta, upd = w.Q, w.R, w.ay, w.beta, w.upd
    nu = 0
    nfl = 0
    for t in range(b):
        f = F[t]
        v = C0[t, t]
        for k in range(nu):
            j = upd[k]
            c = Q[j, t]
            f += ay[j] * c
            v -= beta[j] * c * c
        if nu > 0 and v < SPLIT * C0[t, t]:
            return (nu, nfl, -1, t)
        w.f[t] = f
        vmin = VAR_FLOOR * rp.a * sq[t]
        if v < vmin:
            v = vmin
            nfl += 1
        alpha, bet, _ = step(rp.rule, y[t] * f, v, rp.phi, rp.C, rp.r)
        if not (math.isfinite(alpha) and math.isfinite(bet) and math.isfinite(f)):
            return (nu, nfl, t, -1)
        if alpha > 0.0 and not negligible(alpha * v, f):
            ay[t] = alpha * y[t]
            # Sigma keeps the floor's variance along x, v - bet v^2 >= vmin: a downdate
            # that leaves less is rounding noise (r / (a |x|^2) below ~1e-12) and
            # made Sigma indefinite. Never binds above the floor on well-posed streams.
            beta[t] = min(bet, (1.0 - vmin / v) / v) if v > vmin else 0.0
            for s in range(t, b):
                Q[t, s] = C0[t, s]
            for s in range(b):
                R[t, s] = 0.0
            R[t, t] = 1.0
            for k in range(nu):
                j = upd[k]
                coef = beta[j] * Q[j, t]
                if coef != 0.0:
                    for s in range(t, b):
                        Q[t, s] -= coef * Q[j, s]
                    for s in range(j + 1):
                        R[t, s] -= coef * R[j, s]
            upd[nu] = t
            nu += 1
    return (nu, nfl, -1, -1)


def _dense_block(X, start: int, stop: int) -> np.ndarray:
    if sp.issparse(X):
        return X[start:stop].toarray()
    return X[start:stop]


def _walk_models(mu, sigma, XB, sq, YB, rp, w, Pbuf, C0, cut: int, start: int):
    """Every model's walk through the block's first ``cut`` rows (``P`` and ``C0`` for
    the whole block), nothing changed yet. Returns (each model's pending update: k, P,
    R of the rounds that updated, their beta, the margins, the WalkResult, the new
    mean or None; the row before which a walk split the block, or ``cut``)."""
    K, d = mu.shape
    m = XB.shape[0]
    pending = []
    split, bad = cut, cut
    for k in range(K):
        P = np.matmul(sigma[k], XB.T, out=Pbuf[k, : d * m].reshape(d, m))  # d x m
        np.matmul(XB, P, out=C0)  # m x m
        F = XB @ mu[k]
        yk = np.ascontiguousarray(YB[:, k])
        res = WalkResult._make(_full_walk(C0, F, sq, yk, rp, w, cut))
        if res.split >= 0 or res.bad_row >= 0:
            split = min(split, cut if res.split < 0 else res.split)
            bad = min(bad, cut if res.bad_row < 0 else res.bad_row)
            continue  # (a row past a split walks again in the next block)
        rows = w.upd[: res.n_updated]  # (indexing by it copies: the walk's scratch is reused)
        Ru, ayu, betau = w.R[rows, :cut], w.ay[rows], w.beta[rows]
        if cut < m:
            P = P[:, :cut]
        new = mu[k] + P @ (ayu @ Ru) if rows.size else None
        # a finite step can still take the mean out of float64's range (a huge a):
        # refused before any model changes, as the walk refuses a non-finite step
        if new is not None and not math.isfinite(new.sum()):  # (inf or NaN; or near 1e308)
            bad = min(bad, int(rows[-1]))
        pending.append((k, P, Ru, betau, w.f[:cut].copy(), res, new))
    if bad < split:
        raise_nonfinite(start + bad)
    return pending, split


def full_fit(mu, sigma, X, Y, params: RuleParams, out, block_size: int | None = None) -> Counts:
    """Second-order rules with full covariance, processed in blocks.

    ``mu`` (K, d), ``sigma`` (K, d, d) C-contiguous float64, changed in place;
    ``X`` (n, d) dense or CSR; ``Y`` (n, K) in {-1, +1}; ``out`` (n, K). A block
    that fails changes nothing (every model walks it before any changes).
    """
    if params.first_order:
        raise ValueError("first-order rules keep Sigma = a I: use diag_fit")
    n, d = X.shape
    K = mu.shape[0]
    rp = rule_record(params)
    b = default_block_size(d) if block_size is None else int(block_size)
    counts = new_counts(K)
    Q = np.empty((b, b))
    R = np.empty((b, b))
    ay = np.empty(b)
    beta = np.empty(b)
    upd = np.empty(b, dtype=np.int64)
    f_blk = np.empty(b)
    # the block's products go into buffers made once per call (P for every model: each
    # is applied after all walked), not into fresh arrays per block: fresh memory costs
    # page faults, and with MALLOC_MMAP_THRESHOLD_=64 (every array mapped anew) those
    # made a fit on adult 2x slower (``python -m benchmarks under_load --parts history``)
    # (flat, so that a short last block's arrays are contiguous views too)
    Pbuf = np.empty((K, d * b))
    C0buf = np.empty(b * b)
    Wbuf = np.empty(d * b)
    WW = np.empty((d, d))
    start = 0
    while start < n:
        stop = min(n, start + b)
        XB = np.ascontiguousarray(_dense_block(X, start, stop))
        sq = np.einsum("ij,ij->i", XB, XB)
        m = stop - start
        w = BlockScratch(Q, R, ay[:m], beta[:m], upd[:m], f_blk[:m])
        C0 = C0buf[: m * m].reshape(m, m)
        # every model walks the block before any is changed: a block is all or nothing,
        # also across the one-vs-rest models; a walk that splits it cuts it for all
        pending, cut = _walk_models(mu, sigma, XB, sq, Y[start:stop], rp, w, Pbuf, C0, m, start)
        if cut < m:  # (the rows before it walk again: the same rounds, nothing split)
            pending, _ = _walk_models(mu, sigma, XB, sq, Y[start:stop], rp, w, Pbuf, C0, cut, start)
        for k, P, Ru, betau, f, res, new in pending:
            yk = Y[start : start + cut, k]
            out[start : start + cut, k] = f
            counts.n_mistakes[k] += np.count_nonzero(np.where(f >= 0.0, 1.0, -1.0) != yk)
            counts.n_updates[k] += Ru.shape[0]
            counts.n_floored[k] += res.n_floored
            if Ru.shape[0]:  # Ru: (updates, cut)
                mu[k] = new  # (mu + P (ay R), checked finite: _walk_models)
                u = Ru.shape[0]
                W = np.matmul(P, Ru.T * np.sqrt(betau), out=Wbuf[: d * u].reshape(d, u))
                np.subtract(sigma[k], np.matmul(W, W.T, out=WW), out=sigma[k])
        start += cut
    return counts


class PrimalFullEngine(EveryRowLearns, Locked):
    """``mean`` (K, d) and ``covariance`` (K, d, d), C-contiguous float64."""

    checks_rows = False  # (X checked before: Engine.checks_rows)

    def __init__(self, spec: EngineSpec):
        K, d = spec.n_models, spec.n_features
        self.spec = spec
        self.rule = spec.rule
        self.mean = np.zeros((K, d))
        self.covariance = np.zeros((K, d, d))
        self.covariance[:, np.arange(d), np.arange(d)] = spec.a

    @property
    def n_models(self) -> int:
        return self.mean.shape[0]

    def set_rule(self, rule) -> None:
        check_same_a(self.rule.a, rule.a)
        self.rule = rule

    def _block(self) -> int:
        b = self.spec.block_size
        return default_block_size(self.spec.n_features) if b is None else b

    def learn(self, X, Y: np.ndarray, positions=None) -> LearnResult:
        K, d = self.mean.shape
        check_shapes(X, Y, d, K)
        out = np.empty((X.shape[0], K))
        if self.rule.first_order:  # Sigma = a I never changes
            s = np.full((K, d), self.rule.a)
            counts = diag_fit(self.mean, s, X, Y, self.rule, out, self.spec.diag_method)
        else:
            b = min(self._block(), max(1, X.shape[0]))
            with BlasThreads(float(d) * d * b):  # BLAS threads by the flops of a product
                counts = full_fit(
                    self.mean, self.covariance, X, Y, self.rule, out, self.spec.block_size
                )
        return LearnResult(out, *counts)

    def checkpoint(self, X):
        # full_fit changes nothing in a block that fails (every one-vs-rest model walks a
        # block before any changes), so a call of one block needs no copy: O(d^2) per
        # >= b rows otherwise. The first-order walk goes row by row: a copy of the mean.
        if self.rule.first_order:
            return self.mean.copy(), None
        if X.shape[0] <= self._block():
            return None
        return self.mean.copy(), self.covariance.copy()

    def undoes_finished(self, checkpoint) -> bool:
        return checkpoint is not None  # (None: a call of one block, not copied)

    def stabilise(self) -> bool:
        """Sigma itself is the one form: nothing stronger to move to."""
        return False

    def restore(self, checkpoint) -> None:
        if checkpoint is None:
            return
        mean, cov = checkpoint
        self.mean[...] = mean
        if cov is not None:
            self.covariance[...] = cov

    def decision(self, X) -> np.ndarray:
        return finite_margins(np.asarray(X @ self.mean.T))

    def margin_variance(self, X) -> np.ndarray:
        sigma = self.covariance
        if sp.issparse(X):
            cols = [np.asarray(X.multiply(X @ S).sum(axis=1)).ravel() for S in sigma]
        else:
            cols = [np.einsum("ij,ij->i", X @ S, X) for S in sigma]
        return finite_margins(np.stack(cols, axis=1), "margin variance")

    def margins(self, X) -> tuple[np.ndarray, np.ndarray]:
        return self.decision(X), self.margin_variance(X)

    def state_dict(self) -> dict[str, np.ndarray]:
        return {"mean": self.mean.copy(), "covariance": self.covariance.copy()}

    @classmethod
    def from_state(cls, spec: EngineSpec, state: dict[str, np.ndarray]) -> PrimalFullEngine:
        eng = cls.__new__(cls)
        eng.spec, eng.rule = spec, spec.rule
        K, d = spec.n_models, spec.n_features
        eng.mean = np.array(state["mean"], dtype=np.float64, order="C").reshape(K, d)
        eng.covariance = np.array(state["covariance"], dtype=np.float64, order="C").reshape(K, d, d)
        return eng
