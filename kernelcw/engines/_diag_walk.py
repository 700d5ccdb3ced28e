"""The diagonal engine's compiled rounds and walks (:mod:`.primal_diag` keeps the
state): one round of every rule and method on a row's non-zeros (:func:`_diag_round`),
and the drivers over dense rows, CSR rows, and CSR rows on the pairs of
:mod:`._diag_slots`, behind :func:`diag_fit`. CSR rows may leave the state's last
column, the intercept's constant, to the walk (:func:`_row_entries`).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
from numba import njit

from .._validation import csr_rows_in_range
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
from . import _diag_slots as ds
from ._diag_exact import exact_zeta
from ._diag_slots import place
from ._diag_undo import UndoLog, log_coordinate, no_log
from ._prefetch import AHEAD, prefetch
from ._primal_common import Counts, new_counts, raise_nonfinite, rule_record
from .base import RowsUnchecked

__all__ = ["RoundResult", "diag_fit", "row_margin"]

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
#: The largest finite float64: a mean beyond it (inf, or NaN) fails the round.
_MAX = 1.7976931348623157e308
#: A round's steps of the mean below this in size need no check (its means stay below
#: 1e300 unless 1e150 such steps add up): :func:`_diag_round`.
_STEP_SAFE = 1e150
#: A CSR row's largest ``a |x|^2`` in a walk whose values no one checked
#: (``diag_fit(checked=False)``): half of float64's largest, so that the estimators'
#: check (the same sum in numpy's order) surely holds too.
_SQ_MAX = 0.5 * _MAX


@njit(cache=True)
def _var(raw, a):
    """The variance a stored value stands for: 0 is the prior ``a``; ``abs``: the sign
    bit is the undo log's mark (:class:`UndoLog`)."""
    v = abs(raw)
    return a if v == 0.0 else v


@njit(cache=True)
def row_margin(mu, s, k, idx, val, a, ts=None, jt=0, ct=0.0, width=None):
    """``(mu_k . x, x' diag(s_k) x, |x|^2)`` over the non-zeros (idx, val) of x, in their
    order (stored variances: 0 is the prior ``a``); with ``ts``, each term s_p x_p^2 of
    the variance kept there as the sum takes it (the "exact" step's, read once).
    ``ct`` != 0: x ends with one more entry, ct at coordinate ``jt`` (the intercept's
    constant, which CSR rows leave to the walk: :func:`diag_fit`), taken last.

    ``width`` (a CSR row's columns): each index is checked before it is read, strictly
    above the one before and below ``width``; at the first that is not, |x|^2 is NaN
    and nothing more is read (a branch the processor predicts: the check costs 0.03 of
    a 5.2 ms pass over 20 Newsgroups at 2^20, a pass of its own 0.4 ms)."""
    f = 0.0
    v = 0.0
    sq = 0.0
    m = idx.shape[0]
    prev = -1
    for q in range(m + (1 if ct != 0.0 else 0)):
        if q < m:
            p = idx[q]
            x = val[q]
            if width is not None:  # (a compile-time branch, as for ts)
                if p <= prev or p >= width:
                    return f, v, np.nan
                prev = p
        else:
            p = jt
            x = ct
        f += mu[k, p] * x
        t = _var(s[k, p], a) * x * x
        v += t
        if ts is not None:  # (a compile-time branch: numba prunes it without ts)
            ts[q] = t
        sq += x * x
    return f, v, sq


@njit(cache=True, inline="always")
def _diag_round(mu, s, k, idx, val, y, rp, method, log, ts, tail, limits=None):
    """One round of model k (rows ``mu[k]``, ``s[k]``) on the non-zeros (idx, val) of
    x, with the rule record ``rp`` (:class:`kernelcw.rules.RuleParams`) and the method
    code ``method``; every first write of a coordinate goes to ``log`` first; ``ts``:
    room for the t_p of the row's non-zeros (the "exact" method's; else unused);
    ``tail = (jt, ct)``, ct != 0: the row ends with ct at coordinate jt (:func:`row_margin`).

    On a floored round the "exact" method takes the "kl" step: its equation lives on
    the unfloored t_p.

    ``limits = (width, sq_max)``: the row is checked as it is read (:func:`row_margin`),
    and the round fails, changing nothing, unless its indices are in order and in range
    and ``a |x|^2 <= sq_max`` (with the intercept's c^2): which also holds x finite.
    """
    jt, ct = tail
    width = None if limits is None else limits[0]
    if method == _EXACT:  # (the terms of v kept for the exact step: ts)
        f, v, sq = row_margin(mu, s, k, idx, val, rp.a, ts, jt, ct, width)
    else:
        f, v, sq = row_margin(mu, s, k, idx, val, rp.a, None, jt, ct, width)
    if limits is not None and not rp.a * sq <= limits[1]:
        return RoundResult(f, np.nan, False)
    nnz = idx.shape[0] + (1 if ct != 0.0 else 0)
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
        alpha, zeta = exact_zeta(rp, m, v, ts[:nnz])
        if not (math.isfinite(alpha) and math.isfinite(zeta)):
            return RoundResult(f, np.nan, floored)
    ay = alpha * y
    # a finite step can still take the mean out of float64's range (PA, a huge a):
    # |ay s_p x_p| <= |ay| sqrt(a v), so where that bound is small no mean can overflow;
    # else the new means are checked before any is written (a round that fails leaves
    # the state untouched, as the river stream, which keeps no undo log, needs)
    if not abs(ay) * math.sqrt(rp.a * v) <= _STEP_SAFE and not _means_stay_finite(
        mu, s, k, idx, val, ay, rp.a, jt, ct
    ):
        return RoundResult(f, np.nan, floored)
    logging = log.idx.shape[0] != 0
    for q in range(nnz):
        if q < idx.shape[0]:
            p = idx[q]
            x = val[q]
        else:  # (the intercept's entry)
            p = jt
            x = ct
        if logging and math.copysign(1.0, s[0, p]) > 0.0:
            log_coordinate(mu, s, p, log)
        raw = s[k, p]  # its sign bit: the log's mark
        sp_ = _var(raw, rp.a)
        mu[k, p] += ay * sp_ * x
        t = sp_ * x * x
        # t = 0 (a dense row's zero): s_p stays, as 1 + zeta t = 1 keeps it at a finite
        # zeta; at an infinite one (r ~ 1e-310) 1 + inf * 0 was NaN, stored as 5e-324
        if zeta > 0.0 and t > 0.0:
            if method == _L2:  # the ratio first: sp_ * (1 + zeta (v - t)) overflows at a ~ 1e155
                nv = sp_ * _l2_ratio(zeta, v, t)
            else:
                nv = sp_ / (1.0 + zeta * t)
            s[k, p] = math.copysign(nv if nv > 0.0 else _TINY, raw)
    return RoundResult(f, alpha, floored)


@njit(cache=True)
def _means_stay_finite(mu, s, k, idx, val, ay, a, jt, ct):
    """Whether every mean :func:`_diag_round` is about to write is finite: the same
    expression, in the same order, without writing."""
    for q in range(idx.shape[0] + (1 if ct != 0.0 else 0)):
        p, x = (idx[q], val[q]) if q < idx.shape[0] else (jt, ct)
        if x != 0.0 and not abs(mu[k, p] + ay * _var(s[k, p], a) * x) <= _MAX:
            return False
    return True


@njit(cache=True)
def _l2_ratio(zeta, v, t):
    """``s_new / s_p`` of the "l2" step, ``(1 + zeta (v - t)) / (1 + zeta v)`` (t = s_p
    x_p^2 <= v), in [0, 1]; where ``zeta v`` overflows, its limit ``(v - t) / v``."""
    den = 1.0 + zeta * v
    if math.isinf(den):
        return max(v - t, 0.0) / v
    return (1.0 + zeta * max(v - t, 0.0)) / den


@njit(cache=True, inline="always")
def _diag_row(mu, s, row, Yi, out_i, rp, method, counts, log, ts, tail, limits=None):
    """One input through every model; bookkeeping shared by the drivers, which inline
    it and :func:`_diag_round` (numba IR): called, their dozen array arguments cost an
    atomic reference-count pair each (20 Newsgroups, 2^20: 7.6 ms a pass, 6.0 inlined;
    the drivers are compiled without numba's runtime, which drops the pairs the
    inlined arguments still cost: :func:`_diag_csr`).

    ``row``: the input's (indices, values). Returns False when a non-finite step was
    met (or the row failed ``limits``). ``tail``, ``limits``: :func:`_diag_round`.
    """
    idx, val = row
    for k in range(mu.shape[0]):
        res = _diag_round(mu, s, k, idx, val, Yi[k], rp, method, log, ts, tail, limits)
        out_i[k] = res.margin
        if res.alpha != res.alpha:  # (before any count: the river stream keeps its own)
            return False
        if res.floored:
            counts.n_floored[k] += 1
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


@njit(cache=True, inline="always")
def _ahead(buf, indptr, indices, i, n):
    """Prefetch ``buf``'s lines (row 0) at the coordinates of CSR row i + :data:`AHEAD`."""
    if i + AHEAD < n:
        for q in range(indptr[i + AHEAD], indptr[i + AHEAD + 1]):
            prefetch(buf, 0, indices[q])


@njit(**_WALK)
def _diag_csr(mu, s, rows, Y, out, rp, method, counts, log, ts, tail, limits):
    """The rows of a CSR matrix (``rows``: its indptr, in order and within indices and
    data, :func:`kernelcw._validation.csr_rows_in_range`; indices, data) in order
    (prefetching the state's lines of the row :data:`AHEAD` of each), each followed by
    ``tail = (j, c)`` where c != 0 (:func:`diag_fit`'s intercept), each checked against
    ``limits`` as it is read (:func:`_diag_round`). Returns -1, or the first failing
    row i: i where its step was not finite, -2 - i where it failed ``limits``
    (:func:`row_within`)."""
    indptr, indices, data = rows
    n = indptr.shape[0] - 1
    for i in range(n):
        _ahead(mu, indptr, indices, i, n)
        lo = indptr[i]
        hi = indptr[i + 1]
        idx, val = indices[lo:hi], data[lo:hi]
        if not _diag_row(
            mu, s, (idx, val), Y[i], out[i], rp, method, counts, log, ts, tail, limits
        ):
            return i if row_within(idx, val, limits, rp.a, tail[1]) else -2 - i
    return -1


@njit(cache=True)
def row_within(idx, val, limits, a, ct):
    """Whether a CSR row (idx, val, then c = ``ct`` where c != 0) passes the checks
    :func:`_diag_round` makes as it reads it: its indices strictly increasing and below
    ``limits[0]``, and ``a |x|^2 <= limits[1]``, |x|^2 summed in the round's order."""
    prev = -1
    sq = 0.0
    for q in range(idx.shape[0]):
        if idx[q] <= prev or idx[q] >= limits[0]:
            return False
        prev = idx[q]
        sq += val[q] * val[q]
    if ct != 0.0:
        sq += ct * ct
    return a * sq <= limits[1]


@njit(**_WALK)
def _slots_csr(slots, mu, s, rows, Y, out, rp, method, counts, log, bufs, checks):
    """The rows of a CSR matrix (as :func:`_diag_csr`'s) in order, on the pairs of
    :mod:`._diag_slots` (``mu``, ``s``: (K, cap) views of the pair buffer): each row's
    coordinates replaced by their slots (new ones placed, the tail's coordinate after
    the row's, as a row that stores it places it), then the dense walk's rounds;
    ``bufs = (js, ts, last)``: room for the widest row's slots and one, the "exact"
    method's t_p, the tail's coordinate as a one-entry index array. ``checks = (tail,
    limits)``: :func:`_diag_csr`'s, the coordinates checked as they are placed
    (:func:`._diag_slots.place`), |x|^2 by the rounds. Returns as :func:`_diag_csr`."""
    indptr, indices, data = rows
    n = indptr.shape[0] - 1
    table = slots.table.reshape((1, -1))
    js, ts, last = bufs
    tail, limits = checks
    ct = tail[1]
    sq_only = (None, limits[1])  # (the rounds read slots: their order is not checked)
    for i in range(n):
        _ahead(table, indptr, indices, i, n)
        lo = np.int64(indptr[i])  # (int64 here and below: place compiles once)
        hi = np.int64(indptr[i + 1])
        m = hi - lo
        if not place(slots, mu, s, indices, lo, hi, js, limits[0]):
            return -2 - i
        jt = np.int64(0)  # (typed, not the literal 0: row_margin compiles once)
        if ct != 0.0:
            place(slots, mu, s, last, np.int64(0), np.int64(1), js[m:], table.shape[1])
            jt = js[m]
        row = (js[:m], data[lo:hi])
        if not _diag_row(mu, s, row, Y[i], out[i], rp, method, counts, log, ts, (jt, ct), sq_only):
            within = row_within(indices[lo:hi], data[lo:hi], limits, rp.a, ct)
            return i if within else -2 - i
    return -1


@njit(**_WALK)
def _diag_dense(mu, s, X, Y, out, rp, method, counts, log, idx, ts):
    """The rows of a dense C-ordered matrix in order (``idx``: 0..d-1); the first
    failing row, or -1."""
    for i in range(X.shape[0]):
        if not _diag_row(
            mu, s, (idx, X[i]), Y[i], out[i], rp, method, counts, log, ts, (np.int64(0), 0.0)
        ):
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
    intercept: float = 0.0,
    checked: bool = True,
) -> Counts:
    """Diagonal covariance (and every first-order rule), one round at a time.

    ``mu``, ``s`` (K, d) float64 (C-contiguous, or strided views such as the
    engine's interleaved ones), changed in place; ``X`` dense (n, d) or CSR; ``Y``
    (n, K) in {-1, +1}; ``out`` (n, K). Rows before a failing one stay learnt:
    callers that need all or nothing restore a copy, or pass a ``log`` (its marks
    are cleared here, whatever happens) and restore from it. With ``slots`` (CSR
    rows only), ``mu`` and ``s`` are (K, cap) pairs of :mod:`._diag_slots` with room
    for every stored entry of X (:func:`._diag_slots.reserve`), and ``log`` records
    slots. ``intercept`` c != 0 (CSR rows only): X lacks the state's last column, a
    constant c, which each row's walk appends as its last entry (the rounds of the
    matrix with that column, bit for bit, without making it).

    CSR rows are checked as they are walked: indices strictly increasing (canonical
    CSR) and in range, and, where ``checked`` is False (values no one has checked),
    ``a |x|^2`` with the intercept's c^2 at most half of float64's largest (finite
    values, as the estimators' checks hold them, with room). A row that fails raises
    :class:`RowsUnchecked` before anything of it is learnt (with ``slots``, the slots
    placed for its coordinates stay, at the prior: the log gives them back).
    """
    counts = new_counts(mu.shape[0])
    rp = rule_record(params)
    code = DIAG_METHODS[method]
    log = no_log(mu.shape[0]) if log is None else log
    sparse = slots is not None or sp.issparse(X)  # (the slots walk takes CSR rows)
    d = mu.shape[1] if slots is None else slots.table.shape[0]  # the state's coordinates
    if intercept and not (sparse and X.shape[1] == d - 1):
        raise ValueError(f"intercept: CSR rows of {d - 1} columns, not {X.shape}, walk with it")
    if sparse and X.format != "csr":
        X = sp.csr_matrix(X)
    elif not sparse:
        X = np.ascontiguousarray(X)
    rows = (X.indptr, X.indices, X.data) if sparse else None

    def scratch(dtype=np.float64):  # room for the widest row's non-zeros (and c)
        width = int(np.diff(X.indptr).max(initial=0)) + 1 if sparse else X.shape[1]
        return np.empty(width, dtype)

    if sparse and not csr_rows_in_range(X.indptr, X.indices.size, X.data.size):
        raise RowsUnchecked(None)
    ts = scratch() if code == _EXACT else np.empty(0)  # (the walks cannot allocate)
    tail = (X.shape[1], float(intercept))  # the intercept's entry, where CSR rows lack it
    limits = (np.int64(X.shape[1]), math.inf if checked else _SQ_MAX)
    try:
        if slots is not None:
            bufs = (scratch(np.int64), ts, np.array([tail[0]], X.indices.dtype))
            checks = (tail, limits)
            bad = _slots_csr(slots, mu, s, rows, Y, out, rp, code, counts, log, bufs, checks)
        elif sparse:
            bad = _diag_csr(mu, s, rows, Y, out, rp, code, counts, log, ts, tail, limits)
        else:
            idx = np.arange(X.shape[1])
            bad = _diag_dense(mu, s, X, Y, out, rp, code, counts, log, idx, ts)
    finally:
        marked = log.idx[: log.n[0]]
        s[0, marked] = np.abs(s[0, marked])
    if bad >= 0:
        raise_nonfinite(bad)
    if bad <= -2:
        raise RowsUnchecked(-2 - bad)
    return counts
