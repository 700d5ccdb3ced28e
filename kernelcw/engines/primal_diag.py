"""The primal engine with diagonal covariance (linear kernel; JMLR 2012 section 6):
``mu`` (K, d) and the variances ``s`` (K, d), learnt one row at a time touching
only each row's non-zeros (dense rows are walked as all-index rows), for sparse
text. Every first-order rule walks here too (its ``Sigma = a I`` never changes).

With ``Sigma = diag(s)``, ``t_p = s_p x_p^2`` and ``v = sum_p t_p``, the mean step is
``mu_p += alpha y s_p x_p`` (the second-order update of :mod:`kernelcw.rules`,
``doc/rules.md``) and the covariance step one of JMLR 2012 section 6's:

- ``"kl"``: diagonalise the precision update, ``1/s_p += zeta x_p^2``;
- ``"l2"``: diagonalise the covariance update, ``s_p -= beta (s_p x_p)^2``,
  evaluated as ``s_p (1 + zeta (v - t_p)) / (1 + zeta v)`` (equal, and never
  negative, as ``1 - beta v`` can be tiny);
- ``"exact"``: solve the problem restricted to diagonal covariances exactly
  (:mod:`kernelcw.engines._diag_exact`). AROW's (and SOP's) mean and covariance
  decouple, so its exact diagonal equals ``"kl"``.

The prior costs no memory: a stored variance of 0 stands for the prior ``a`` (a real
variance is never 0; one that would underflow to 0 is kept as the smallest positive
double), so the state starts as zeros, which the system hands over page by page as
coordinates are first touched. A model over 2^24 hashed features that sees 10^5 of
them holds those pages only, and a ``fit`` does not first write d prior variances
(43 of the 61 ms of a 2^24 fit on 20 Newsgroups).

A wide engine (``d K >= SLOTS_FROM``) starts with its pairs in slots instead
(:mod:`._diag_slots`): hashing scatters a stream's coordinates over every page of
a dense buffer (all 256 MB at 2^24).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
from numba import njit

from ..rules import (
    AROW,
    DIAG_METHODS,
    SOP,
    VAR_FLOOR,
    RuleParams,
    is_first_order,
    negligible,
    step,
)
from ..spec import EngineSpec
from . import _diag_slots as ds
from ._diag_exact import exact_zeta
from ._diag_slots import place
from ._diag_undo import SlotUndo, UndoLog, log_coordinate, no_log
from ._prefetch import AHEAD, prefetch
from ._primal_common import Counts, check_same_a, new_counts, raise_nonfinite, rule_record
from .base import EveryRowLearns, LearnResult, Locked, check_shapes, finite_margins

__all__ = ["PrimalDiagEngine", "diag_fit"]

_L2, _EXACT = DIAG_METHODS["l2"], DIAG_METHODS["exact"]


class RoundResult(NamedTuple):
    """What one diagonal round reports (built in compiled code)."""

    #: the decision value ``mu . x`` before the update
    margin: float
    #: the step; 0 without an update, NaN for a non-finite step (state left untouched)
    alpha: float
    #: whether the margin variance was raised to the floor
    floored: bool


#: A variance that would underflow to 0 (which stands for the prior) is kept as this.
_TINY = 5e-324


@njit(cache=True)
def _var(raw, a):
    """The variance a stored value stands for: 0 is the prior ``a``; ``abs``: the sign
    bit is the undo log's mark (:class:`UndoLog`)."""
    v = abs(raw)
    return a if v == 0.0 else v


@njit(cache=True)
def row_margin(mu, s, k, idx, val, a, ts=None):
    """``(mu_k . x, x' diag(s_k) x, |x|^2)`` over the non-zeros (idx, val) of x, in their
    order (stored variances: 0 is the prior ``a``); with ``ts``, each term s_p x_p^2 of
    the variance kept there as the sum takes it (the "exact" step's, read once)."""
    f = 0.0
    v = 0.0
    sq = 0.0
    for q in range(idx.shape[0]):
        p = idx[q]
        x = val[q]
        f += mu[k, p] * x
        t = _var(s[k, p], a) * x * x
        v += t
        if ts is not None:  # (a compile-time branch: numba prunes it without ts)
            ts[q] = t
        sq += x * x
    return f, v, sq


@njit(cache=True, inline="always")
def _diag_round(mu, s, k, idx, val, y, rp, method, log, ts):
    """One round of model k (rows ``mu[k]``, ``s[k]``) on the non-zeros (idx, val) of
    x, with the rule record ``rp`` (:class:`kernelcw.rules.RuleParams`) and the method
    code ``method``; every first write of a coordinate goes to ``log`` first; ``ts``:
    room for the t_p of the row's non-zeros (the "exact" method's; else unused).

    On a floored round the "exact" method takes the "kl" step: its equation lives on
    the unfloored t_p.
    """
    if method == _EXACT:  # (the terms of v kept for the exact step: ts)
        f, v, sq = row_margin(mu, s, k, idx, val, rp.a, ts)
    else:
        f, v, sq = row_margin(mu, s, k, idx, val, rp.a)
    m = y * f
    first = is_first_order(rp.rule)  # |x|^2 in place of v
    floored = False
    if not first and v < VAR_FLOOR * rp.a * sq:
        v = VAR_FLOOR * rp.a * sq
        floored = True
    alpha, beta, zeta = step(rp.rule, m, sq if first else v, rp.phi, rp.C, rp.r)
    if not (math.isfinite(alpha) and math.isfinite(beta) and math.isfinite(f)):
        return RoundResult(f, np.nan, floored)
    if alpha <= 0.0 or negligible(alpha * (rp.a * sq if first else v), f):
        return RoundResult(f, 0.0, floored)
    decoupled = rp.rule == AROW or rp.rule == SOP
    if method == _EXACT and not first and not decoupled and not floored:
        alpha, zeta = exact_zeta(rp, m, v, ts[: idx.shape[0]])
        if not (math.isfinite(alpha) and math.isfinite(zeta)):
            return RoundResult(f, np.nan, floored)
    ay = alpha * y
    logging = log.idx.shape[0] != 0
    for q in range(idx.shape[0]):
        p = idx[q]
        x = val[q]
        if logging and math.copysign(1.0, s[0, p]) > 0.0:
            log_coordinate(mu, s, p, log)
        raw = s[k, p]  # its sign bit: the log's mark
        sp_ = _var(raw, rp.a)
        mu[k, p] += ay * sp_ * x
        if zeta > 0.0:
            t = sp_ * x * x
            if method == _L2:  # the ratio first: sp_ * (1 + zeta (v - t)) overflows at a ~ 1e155
                nv = sp_ * _l2_ratio(zeta, v, t)
            else:
                nv = sp_ / (1.0 + zeta * t)
            s[k, p] = math.copysign(nv if nv > 0.0 else _TINY, raw)
    return RoundResult(f, alpha, floored)


@njit(cache=True)
def _l2_ratio(zeta, v, t):
    """``s_new / s_p`` of the "l2" step, ``(1 + zeta (v - t)) / (1 + zeta v)`` (t = s_p
    x_p^2 <= v), in [0, 1]; where ``zeta v`` overflows, its limit ``(v - t) / v``."""
    den = 1.0 + zeta * v
    if math.isinf(den):
        return max(v - t, 0.0) / v
    return (1.0 + zeta * max(v - t, 0.0)) / den


@njit(cache=True, inline="always")
def _diag_row(mu, s, idx, val, Yi, out_i, rp, method, counts, log, ts):
    """One input through every model; bookkeeping shared by the drivers, which inline
    it and :func:`_diag_round` (numba IR): called, their dozen array arguments cost an
    atomic reference-count pair each (20 Newsgroups, 2^20: 7.6 ms a pass, 6.0 inlined;
    the drivers are compiled without numba's runtime, which drops the pairs the
    inlined arguments still cost: :func:`_diag_csr`).

    Returns False when a non-finite step was met.
    """
    for k in range(mu.shape[0]):
        res = _diag_round(mu, s, k, idx, val, Yi[k], rp, method, log, ts)
        out_i[k] = res.margin
        if res.floored:
            counts.n_floored[k] += 1
        if res.alpha != res.alpha:
            return False
        if (1.0 if res.margin >= 0.0 else -1.0) != Yi[k]:
            counts.n_mistakes[k] += 1
        if res.alpha > 0.0:
            counts.n_updates[k] += 1
    return True


#: The walks' options. Compiled without numba's runtime (``_nrt=False``, numba's own
#: switch; ``numba.extending``'s docs show it): the arrays the inlined rounds take
#: are then not reference-counted, where numba's pruning left an atomic increment
#: and decrement per array per row (20 Newsgroups at 2^20, the compiled pass on warm
#: memory: 5.8 -> 4.0-4.1 ms, medians of interleaved runs timed by hand). A walk
#: cannot allocate: :func:`diag_fit` hands it its buffers (the "exact" method's t_p,
#: the slots of a row).
_WALK = {"cache": True, "_nrt": False}


@njit(**_WALK)
def _diag_csr(mu, s, rows, Y, out, rp, method, counts, log, ts):
    """The rows of a CSR matrix (``rows``: its indptr, indices, data) in order
    (prefetching the state's lines of the row :data:`AHEAD` of each); the first
    failing row, or -1."""
    indptr, indices, data = rows
    n = indptr.shape[0] - 1
    for i in range(n):
        if i + AHEAD < n:
            for q in range(indptr[i + AHEAD], indptr[i + AHEAD + 1]):
                prefetch(mu, 0, indices[q])
        lo = indptr[i]
        hi = indptr[i + 1]
        row = _diag_row(
            mu, s, indices[lo:hi], data[lo:hi], Y[i], out[i], rp, method, counts, log, ts
        )
        if not row:
            return i
    return -1


@njit(**_WALK)
def _slots_csr(slots, mu, s, rows, Y, out, rp, method, counts, log, js, ts):
    """The rows of a CSR matrix (as :func:`_diag_csr`'s) in order, on the pairs of
    :mod:`._diag_slots` (``mu``, ``s``: (K, cap) views of the pair buffer): each row's
    coordinates replaced by their slots (new ones placed; ``js``: room for the widest
    row's), then the dense walk's rounds. The first failing row, or -1."""
    indptr, indices, data = rows
    n = indptr.shape[0] - 1
    table = slots.table.reshape((1, -1))
    for i in range(n):
        if i + AHEAD < n:
            for q in range(indptr[i + AHEAD], indptr[i + AHEAD + 1]):
                prefetch(table, 0, indices[q])
        lo = indptr[i]
        hi = indptr[i + 1]
        place(slots, mu, s, indices, lo, hi, js)
        if not _diag_row(
            mu, s, js[: hi - lo], data[lo:hi], Y[i], out[i], rp, method, counts, log, ts
        ):
            return i
    return -1


@njit(**_WALK)
def _diag_dense(mu, s, X, Y, out, rp, method, counts, log, idx, ts):
    """The rows of a dense C-ordered matrix in order (``idx``: 0..d-1); the first
    failing row, or -1."""
    for i in range(X.shape[0]):
        if not _diag_row(mu, s, idx, X[i], Y[i], out[i], rp, method, counts, log, ts):
            return i
    return -1


def diag_fit(
    mu,
    s,
    X,
    Y,
    params: RuleParams,
    out,
    method: str = "kl",
    log: UndoLog | None = None,
    slots: ds.Slots | None = None,
) -> Counts:
    """Diagonal covariance (and every first-order rule), one round at a time.

    ``mu``, ``s`` (K, d) float64 (C-contiguous, or strided views such as the
    engine's interleaved ones), changed in place; ``X`` dense (n, d) or CSR; ``Y``
    (n, K) in {-1, +1}; ``out`` (n, K). Rows before a failing one stay learnt:
    callers that need all or nothing restore a copy, or pass a ``log`` (its marks
    are cleared here, whatever happens) and restore from it. With ``slots`` (CSR
    rows only), ``mu`` and ``s`` are (K, cap) pairs of :mod:`._diag_slots` with room
    for every stored entry of X (:func:`._diag_slots.reserve`), and ``log`` records
    slots.
    """
    counts = new_counts(mu.shape[0])
    rp = rule_record(params)
    code = DIAG_METHODS[method]
    log = no_log(mu.shape[0]) if log is None else log
    sparse = slots is not None or sp.issparse(X)  # (the slots walk takes CSR rows)
    X = sp.csr_matrix(X) if sparse else np.ascontiguousarray(X)
    rows = (X.indptr, X.indices, X.data) if sparse else None

    def scratch(dtype=np.float64):  # room for the widest row's non-zeros
        width = int(np.diff(X.indptr).max(initial=0)) if sparse else X.shape[1]
        return np.empty(width, dtype)

    ts = scratch() if code == _EXACT else np.empty(0)  # (the walks cannot allocate)
    try:
        if slots is not None:
            bad = _slots_csr(
                slots, mu, s, rows, Y, out, rp, code, counts, log, scratch(np.int64), ts
            )
        elif sparse:
            bad = _diag_csr(mu, s, rows, Y, out, rp, code, counts, log, ts)
        else:
            idx = np.arange(X.shape[1])
            bad = _diag_dense(mu, s, X, Y, out, rp, code, counts, log, idx, ts)
    finally:
        marked = log.idx[: log.n[0]]
        s[0, marked] = np.abs(s[0, marked])
    if bad >= 0:
        raise_nonfinite(bad)
    return counts


class PrimalDiagEngine(EveryRowLearns, Locked):
    """``mean`` and ``variance`` (K, d) float64, kept in one of two ways:

    - dense, an interleaved buffer ``(d, K, 2)``, of which ``mean`` and the stored
      variances are strided views: the means and variances of all K models at one
      coordinate share a cache line (a non-zero of a row costs one miss, not two);
    - in slots (:mod:`._diag_slots`; a wide engine's prior, ``d K >= SLOTS_FROM``),
      while only CSR rows are learnt from and predicted: the same pairs, packed in
      the order coordinates first appear.

    Reading ``mean`` (``coef_``, a row-at-a-time stream) or learning from dense rows
    moves the state from slots to dense once; it stays dense (the views stay valid).
    The numbers are the same either way, bit for bit (``tests/test_diag_slots.py``).
    """

    #: A fresh engine keeps its state in slots when the dense buffer would hold at least
    #: this many coordinates times models (d K), dense otherwise.
    SLOTS_FROM = 2**22

    def __init__(self, spec: EngineSpec):
        self.spec = spec
        self.rule = spec.rule
        self._set_prior()

    def _set_prior(self) -> None:
        """(mean, variance) = (0, 0 standing for a) for every coordinate: no slot placed,
        or a dense buffer of zeros (handed over lazily)."""
        d, K = self.spec.n_features, self.spec.n_models
        if d * K >= self.SLOTS_FROM:
            self._slots, self._pairs = ds.new_slots(d, K)
            self._w = None
        else:
            self._slots = self._pairs = None
            self._w = np.zeros((d, K, 2))
        self._armed = None  # the log the next learn call writes
        self._prior = True  # the state is still the prior N(0, a I)

    def _set_buffer(self, w: np.ndarray, prior: bool) -> None:
        self._slots = self._pairs = None
        self._w = w
        self._armed = None
        self._prior = prior

    def _dense(self) -> np.ndarray:
        """The interleaved (d, K, 2) buffer, moving the state there from slots if needed
        (zeros, handed over lazily, then the slots' pairs)."""
        w = self._w
        if w is None:
            with self.lock:  # never while another thread learns into the slots
                if self._w is None:
                    slots, pairs = self._slots, self._pairs
                    w = np.zeros((self.spec.n_features, self.spec.n_models, 2))
                    n = int(slots.n[0])
                    w[slots.keys[1 : n + 1]] = pairs[1 : n + 1]
                    self._slots = self._pairs = None
                    self._w = w
                w = self._w
        return w

    @property
    def mean(self) -> np.ndarray:
        """(K, d) the means: a view of the dense buffer (moves the state there)."""
        return self._dense()[:, :, 0].T

    def mean_at(self, j: int) -> np.ndarray:
        """(K,) the means at coordinate j (from the slots, without moving the state)."""
        slots = self._slots
        return self.mean[:, j].copy() if slots is None else self._pairs[slots.table[j], :, 0].copy()

    @property
    def _s(self) -> np.ndarray:
        """(K, d) the stored variances (0 stands for the prior a; moves the state to the
        dense buffer)."""
        return self._dense()[:, :, 1].T

    @property
    def variance(self) -> np.ndarray:
        """(K, d) the variances (a copy; the prior's stored zeros read as ``a``)."""
        if self._slots is not None:
            raw = ds.to_dense(self._slots, self._pairs, 1, 0.0)
        else:
            raw = self._s
        return np.where(raw == 0.0, self.spec.a, np.abs(raw))

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self.__dict__.update(_slots=state.get("_slots"), _pairs=state.get("_pairs"))  # old: dense

    @property
    def n_models(self) -> int:
        return self.spec.n_models

    def set_rule(self, rule) -> None:
        check_same_a(self.rule.a, rule.a)
        self.rule = rule

    def learn(self, X, Y: np.ndarray, positions=None) -> LearnResult:
        check_shapes(X, Y, self.spec.n_features, self.n_models)
        out = np.empty((X.shape[0], self.n_models))
        log, self._armed = self._armed, None
        self._prior = False
        method = self.spec.diag_method
        if self._slots is not None and sp.issparse(X):
            slots, w = self._slots, self._pairs = ds.reserve(self._slots, self._pairs, X.nnz)
            counts = diag_fit(w[:, :, 0].T, w[:, :, 1].T, X, Y, self.rule, out, method, log, slots)
            self._slots, self._pairs = ds.trim(slots, w)
        else:
            w = self._dense()
            counts = diag_fit(w[:, :, 0].T, w[:, :, 1].T, X, Y, self.rule, out, method, log)
        return LearnResult(out, *counts)

    def checkpoint(self, X) -> UndoLog | SlotUndo | None:
        """Arms an undo log for the next :meth:`learn` call (on X): the walk records each
        coordinate (or slot) it first writes, O(coordinates written) per call instead of
        a copy of the (K, d) state; :meth:`restore` writes them back. While the state is
        still the prior (a ``fit``), nothing: :meth:`restore` rebuilds the prior."""
        self._armed = None
        if self._prior:
            return None
        sparse = sp.issparse(X)
        if not sparse:
            self._dense()  # dense rows are learnt there: log coordinates
        d, K = self.spec.n_features, self.n_models
        cap = min(d, X.nnz) if sparse else (d if X.shape[0] else 0)
        idx = np.empty(cap, dtype=np.int64)
        self._armed = UndoLog(idx, np.empty((cap, K, 2)), np.zeros(1, np.int64))
        if self._slots is not None:
            return SlotUndo(self._armed, int(self._slots.n[0]))
        return self._armed

    def undoes_finished(self, checkpoint) -> bool:
        return True  # (the log holds every coordinate the call wrote; None: the prior)

    def stabilise(self) -> bool:  # the diagonal is the one form: nothing stronger
        return False

    def restore(self, checkpoint: UndoLog | SlotUndo | None) -> None:
        self._armed = None
        if checkpoint is None:
            self._set_prior()
            return
        log = checkpoint.log if isinstance(checkpoint, SlotUndo) else checkpoint
        n = int(log.n[0])
        if isinstance(checkpoint, SlotUndo):
            self._pairs[log.idx[:n]] = log.val[:n]
            slots = self._slots
            placed = slots.keys[checkpoint.n + 1 : int(slots.n[0]) + 1]
            slots.table[placed] = 0  # placed by the undone call: given back
            slots.n[0] = checkpoint.n
            return
        self._w[log.idx[:n]] = log.val[:n]

    def _rows(self, X) -> tuple[np.ndarray, np.ndarray]:
        """(buffer, indices) to read CSR rows X from: the slots' pairs and the rows'
        slots, or the dense buffer and X's own indices."""
        if self._slots is not None:
            return self._pairs, ds.slot_rows(self._slots, X.indices)
        return self._w, X.indices

    def decision(self, X) -> np.ndarray:
        if sp.issparse(X):  # straight from the interleaved buffer: no (K, d) copy per call
            w, idx = self._rows(X)
            return finite_margins(ds.csr_times(X.indptr, idx, X.data, w, 0, False, 0.0))
        return finite_margins(np.asarray(X @ self.mean.T))

    def margin_variance(self, X) -> np.ndarray:
        if sp.issparse(X):
            w, idx = self._rows(X)
            v = ds.csr_times(X.indptr, idx, X.data, w, 1, True, self.spec.a)
        else:
            v = np.asarray((X * X) @ self.variance.T)
        return finite_margins(v, "margin variance")

    def margins(self, X) -> tuple[np.ndarray, np.ndarray]:
        return self.decision(X), self.margin_variance(X)

    def state_dict(self) -> dict[str, np.ndarray]:
        if self._slots is not None:
            mean = ds.to_dense(self._slots, self._pairs, 0, 0.0)
        else:
            mean = np.array(self.mean, order="C")
        return {"mean": mean, "variance": np.array(self.variance, order="C")}

    @classmethod
    def from_state(cls, spec: EngineSpec, state: dict[str, np.ndarray]) -> PrimalDiagEngine:
        eng = cls.__new__(cls)
        eng.spec, eng.rule = spec, spec.rule
        K, d = spec.n_models, spec.n_features
        var = np.asarray(state["variance"], dtype=np.float64).reshape(K, d)
        if not np.all(var > 0.0):
            raise ValueError("state['variance'] holds variances that are not positive")
        mean = np.asarray(state["mean"], dtype=np.float64).reshape(K, d)
        if d * K >= cls.SLOTS_FROM:  # a wide model comes back in slots, as it learnt
            eng._set_buffer(None, prior=False)
            eng._slots, eng._pairs = ds.from_arrays(mean, var, spec.a)
            return eng
        w = np.empty((d, K, 2))
        w[:, :, 0] = mean.T
        w[:, :, 1] = var.T + 0.0  # -0.0 -> +0.0: a variance's sign bit is the undo mark
        eng._set_buffer(w, prior=False)
        return eng
