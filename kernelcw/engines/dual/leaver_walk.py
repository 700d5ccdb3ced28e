"""The walk with leavers: a block walked with the support vectors that leave in it
corrected by Woodbury, shared by the "oldest" queue form (:mod:`.queue`) and the
"random" lazy form (:mod:`.lazy`).

The rows the walk appends extend the factor of all the support at the walk's start,
leavers included, so ``M = D^-1 + a K`` stays over everything, and the model without
the D leavers so far is its restriction by the identity of ``doc/dual-form.md``
section 6; the leavers leave the factor after the walk (the queue's truncation and
fold, the lazy form's purge). A leaver whose pivot in the Woodbury factor is lost to
cancellation (extreme kernel values) ends the walk before its round, so the leavers
so far leave exactly and the next walk goes on from there (section 6, session 27).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import njit

from .status import NONFINITE, OK, STOP, walk_psd_tol
from .steps import QueueResult, block_rows_part, checked_step, chol_rank1, chol_solve_lower

__all__ = ["DEATH_PIVOT", "Candidates", "QueueRows", "queue_walk", "walk_tols", "walk_with_rows"]


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


#: A leaver whose pivot in H's factor keeps less than this share of its diagonal
#: (:func:`_add_death`) is numerically in the span of the walk's earlier leavers.
DEATH_PIVOT = 1e-8


def walk_tols(known_psd: bool) -> tuple[float, float]:
    """:func:`queue_walk`'s ``tols``: (:func:`.status.walk_psd_tol`, :data:`DEATH_PIVOT`),
    read at each call (tests set the pivot to split walks at every leaver)."""
    return walk_psd_tol(known_psd), DEATH_PIVOT


@njit(cache=True)
def _add_death(H0, PN, Ch, D, u, p, y1, pivot):
    """Candidate D leaves: the factor ``Ch`` of H gains its row and column (the rows
    0..u-1 of PN). Returns whether its pivot is above ``pivot`` (:data:`DEATH_PIVOT`)
    times its diagonal: otherwise H's factor has lost it to cancellation (extreme kernel values,
    an unscaled feature under a cubic kernel) and the correction would not be exact."""
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
    return diag > pivot * p[D]


@njit(cache=True)
def queue_walk(blk, cand, rule, tols, n_alive, budget, rows, f_out):
    """Walk one block in (b + c)-space (``blk`` a :class:`.steps.Block`).

    The rows appended in the block extend the factor of *all* the support at the
    block's start, leavers included, exactly as without a budget, so that ``M``
    stays ``D^-1 + a K`` over everything. The model without the D leavers so far is
    its restriction, by the identity ``k_S' M_S^-1 q_S = k' M^-1 q - p' H^-1 rho``
    with ``Y = L^-1 E_dead``, ``p = Y' w``, ``rho = Y' r``, ``H = Y'Y``
    (``doc/dual-form.md`` section 6); the new rows' entries of Y are ``rows.PN``,
    ``Ch`` is the Cholesky factor of H over the dead; ``tols = (psd_tol, pivot)``
    (:func:`walk_tols`). Returns a
    :class:`QueueResult`; STOP at the round whose update would need a (c+1)-th death,
    or a death whose pivot in H's factor is lost (:func:`_add_death`; not the walk's
    first): the round is walked again after the leavers so far leave the factor
    exactly, where the new walk's first leaver always factors.
    """
    a = rule.a
    psd_tol, pivot = tols
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
        st = checked_step(rule, y_t * f, f, v, kap_t, psd_tol)
        if st.status != OK:
            return QueueResult(u, D, nfl, t, st.status)
        if st.alpha > 0.0 and n_alive + 1 > budget and D == c:
            return QueueResult(u, D, nfl, t, STOP)
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
            dies = n_alive + 1 > budget  # (its own row, at u, counts in H: u + 1 rows)
            if dies and not _add_death(cand.H0, PN, Ch, D, u + 1, p, y1, pivot) and D > 0:
                return QueueResult(u, D, nfl, t, STOP)  # (nothing of round t kept)
            u += 1
            if dies:
                D += 1
            else:
                n_alive += 1
        nfl += st.floored
    return QueueResult(u, D, nfl, -1, OK)


@njit(cache=True)
def walk_with_rows(blk, cand, rule, tols, n, budget, f_part):
    """:func:`queue_walk` of ``blk`` (margins into ``f_part``) with the records of the
    rows it may append made here: (QueueResult, QueueRows). The queue's and the lazy
    form's walk (:func:`.lazy_block.lazy_walk`)."""
    bs = blk.kap.shape[0]
    c = cand.new.shape[0]
    rows = QueueRows(np.empty((bs, bs)), np.empty(bs), np.empty(bs), np.empty(bs),
                     np.empty(bs), np.empty(bs, dtype=np.int64), np.empty((bs, c)))  # fmt: skip
    return queue_walk(blk, cand, rule, tols, n, budget, rows, f_part), rows
