"""The explicit form's blocked walk: nu and Pi with their updates deferred.

A budgeted model whose policy is "random", "smallest" or "project" keeps nu and Pi
(:mod:`.explicit`) once its budget binds. Round by round, each input reads all of
Pi (``c = Pi k``) and each update and removal rewrites it: several passes over an
n x n triangle per round, bound by memory once Pi leaves the cache (at B = 4000,
128 MB a matrix). This walk makes the same rounds with the same results, to
rounding, in BLAS-3 calls (``doc/dual-form.md`` section 8):

- every change a round makes to Pi is a symmetric rank-one term on the padded
  matrix, whose slots are the support at the sub-block's start followed by the
  inputs that enter in it (an entering input's row and column included):
  an update is ``-beta z z'`` with ``z = c + a e_new``; removing p ("random") is the
  Schur complement ``-pi_p pi_p' / Pi_pp``, which zeroes p's row and column;
  projecting p is ``e q' + q e' = (e + q)(e + q)' / 2 - (e - q)(e - q)' / 2``
  (``q = pi_p + Pi_pp e / 2``), and p's row and column are no longer read (a
  removed slot's kernel value is taken as 0). The inverse jittered Gram matrix of
  "project" changes the same way (append ``s^-1 (w - e_new)(w - e_new)'``, remove
  ``-kcol kcol' / kinv_pp``);
- a sub-block of at most :data:`SUB_BLOCK` inputs starts with ``C0 = Pi_0 K`` (and
  ``kinv_0 K``) for all its inputs in one dsymm; each input then needs only the
  terms added since (``U (s * (U' k))``, O(n) per term) and the columns of Pi_0 at
  the slots removed since;
- at the sub-block's end the terms are added to Pi in two dsyrk calls (positive and
  negative weights), after the slots are moved as the round-by-round form moves
  them (the last slot into the removed one's place), so the model is laid out
  exactly as :func:`.explicit.explicit_walk` lays it out.

"smallest" scores from nu and Pi's diagonal (kept term by term) instead of the Gram
matrix passes of the round-by-round walk (:func:`_least_kl`).

nu is kept as that walk keeps it: ``nu += alpha y c`` on an update; after a removal,
``nu = -Pi q / a`` with ``q = g / zeta`` (``Pi_0 q`` from the same dsymm); after a
projection ``nu += nu_p e``. "project" refreshes its inverse Gram matrix every
:data:`kernelcw.budget.kernels.KINV_REFRESH` removals, where the round-by-round walk
does: a sub-block ends there.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import njit

from ..._blas import sym_mm, sym_rk
from ...budget.kernels import (
    KINV_REFRESH,
    PROJECT,
    PROJECT_JITTER,
    SMALLEST,
    kinv_refresh,
    kl_score,
    lower,
    splitmix64_uniform,
    swap_last_lower,
    swap_last_matrix,
)
from .explicit import ExplicitResult, save_model
from .status import OK
from .steps import checked_step

__all__ = ["SUB_BLOCK", "Deferred", "deferred_walk", "deferred_scratch"]

#: Inputs per sub-block: Pi K for all of them in one dsymm, then each input pays
#: O(n) per change made since the sub-block started (chosen by measurement,
#: ``benchmarks/bench_budget.py``).
SUB_BLOCK = 64


class Deferred(NamedTuple):
    """The blocked walk's work space for a model of capacity ``cap`` (physical slots:
    at most ``cap + SUB_BLOCK``; terms: ``3 SUB_BLOCK`` for Pi, ``2 SUB_BLOCK`` for
    the inverse Gram matrix)."""

    Kold: np.ndarray  # cap x (SB + 1): kernel of the start slots, then q = g / zeta
    C0: np.ndarray  # cap x (SB + 1): Pi_0 Kold
    D0: np.ndarray  # cap x SB: kinv_0 Kold ("project")
    Ut: np.ndarray  # terms x P: Pi's deferred terms, one per row
    s: np.ndarray  # their weights
    Vt: np.ndarray  # the inverse Gram matrix's ("project")
    sig: np.ndarray
    kP: np.ndarray  # physical vectors: kernel, c, work, nu, q, diag of kinv
    cP: np.ndarray
    wP: np.ndarray
    nuP: np.ndarray
    qP: np.ndarray
    hP: np.ndarray
    dk: np.ndarray
    dead: np.ndarray
    srcP: np.ndarray  # block input of each slot that entered in the sub-block
    lg: np.ndarray  # slot (logical, as the round-by-round form lays it out) -> physical
    ops: np.ndarray  # the sub-block's slot moves: -1 an append, j >= 0 removal of slot j
    gone: np.ndarray  # start slots removed in the sub-block
    tmp: np.ndarray
    Ulog: np.ndarray  # cap x terms: the terms by slot, for dsyrk


def deferred_scratch(cap: int, project: bool) -> Deferred:
    """Work space for a walk on a model of capacity ``cap``."""
    sb = SUB_BLOCK
    P = cap + sb + 1
    R = 3 * sb + 2
    RV = 2 * sb + 2 if project else 1
    f = np.empty
    return Deferred(
        f((cap, sb + 1)), f((cap, sb + 1)), f((cap, sb) if project else (1, 1)),
        f((R, P)), f(R), f((RV, P) if project else (1, 1)), f(RV),
        f(P), f(P), f(P), f(P), f(P), f(P), f(P), np.zeros(P, dtype=np.bool_),
        np.zeros(P, dtype=np.int64), np.zeros(cap + 1, dtype=np.int64),
        np.zeros(2 * sb + 2, dtype=np.int64), np.zeros(sb + 1, dtype=np.int64),
        f(R), f((cap, R)),
    )  # fmt: skip


@njit(cache=True, error_model="numpy")
def _least_kl(n, sup, lg, nuP, dPi, a):
    """The slot "smallest" removes (:func:`kernelcw.budget.kernels.choose_victim`: the
    least KL score, the newest left out, ties to the older) from O(n) quantities: with
    ``M = D^-1 + a K`` (``Pi = -a^2 M^-1``), the mean at support vector p is
    ``f_p = (g_p - nu_p / a) / zeta_p`` and its variance
    ``v_p = 1 / zeta_p + Pi_pp / (a zeta_p)^2`` (``doc/dual-form.md`` section 7), where
    the round-by-round walk keeps ``K nu`` and the variances by passes over the Gram
    matrix."""
    entry = sup.entry
    newest = 0
    for i in range(1, n):
        if entry[i] > entry[newest]:
            newest = i
    best = -1
    best_score = 0.0
    for i in range(n):
        if i == newest:
            continue
        P = lg[i]
        z = sup.zsv[i]
        g = sup.gsv[i]
        f_p = (g - nuP[P] / a) / z
        v_p = 1.0 / z + dPi[P] / (a * a * z * z)
        score = kl_score(f_p, v_p, z, g)
        if best < 0 or score < best_score or (score == best_score and entry[i] < entry[best]):
            best = i
            best_score = score
    return best


@njit(cache=True, error_model="numpy")
def _jth_entered(pol, counter, n, entry, work):
    """The slot :func:`kernelcw.budget.kernels.choose_victim` chooses for "random"
    (the j-th support vector in entry order, the newest left out), by selection in
    O(n) instead of its sort: entries are distinct, so the j-th smallest is one slot."""
    j = int(splitmix64_uniform(pol.seed, counter) * (n - 1))
    if j >= n - 1:
        j = n - 2
    x = work[:n]
    for i in range(n):
        x[i] = entry[i]
    lo, hi = 0, n - 1
    while lo < hi:  # quickselect (Hoare partition around the middle element)
        pivot = x[(lo + hi) // 2]
        i, k = lo, hi
        while i <= k:
            while x[i] < pivot:
                i += 1
            while x[k] > pivot:
                k -= 1
            if i <= k:
                x[i], x[k] = x[k], x[i]
                i += 1
                k -= 1
        if j <= k:
            hi = k
        elif j >= i:
            lo = i
        else:
            break
    want = x[j]
    for i in range(n):
        if entry[i] == want:
            return i
    return -1


@njit(cache=True, error_model="numpy")
def _low_rank(Ut, s, nr, x, nP, out, tmp):
    """out[:nP] += U diag(s) U' x over the nr terms (rows of Ut)."""
    for r in range(nr):
        row = Ut[r]
        acc = 0.0
        for i in range(nP):
            acc += row[i] * x[i]
        tmp[r] = s[r] * acc
    for r in range(nr):
        row = Ut[r]
        c = tmp[r]
        if c != 0.0:
            for i in range(nP):
                out[i] += c * row[i]


@njit(cache=True, error_model="numpy")
def _column(A0, n0, Ut, s, nr, P, nP, dead, out, tmp):
    """Column P of the current matrix (start matrix A0 by its lower triangle, padded,
    plus the terms), zero at removed slots."""
    for i in range(nP):
        out[i] = 0.0
    if P < n0:
        for i in range(n0):
            out[i] = lower(A0, i, P)
    for r in range(nr):
        tmp[r] = s[r] * Ut[r, P]
    for r in range(nr):
        c = tmp[r]
        if c != 0.0:
            row = Ut[r]
            for i in range(nP):
                out[i] += c * row[i]
    for i in range(nP):
        if dead[i]:
            out[i] = 0.0


@njit(cache=True, error_model="numpy")
def _product(C0, col, A0, n0, gone, nd, Kold, Ut, s, nr, kP, nP, dead, out, tmp):
    """out = (current matrix) k for the kernel vector kP (zero at removed slots): the
    start matrix's product from the sub-block's dsymm (column ``col`` of C0) less its
    columns at the start slots removed since, plus the terms; zero at removed slots."""
    for i in range(n0):
        out[i] = C0[i, col]
    for i in range(n0, nP):
        out[i] = 0.0
    for g in range(nd):
        p = gone[g]
        kp = Kold[p, col]
        if kp != 0.0:
            for i in range(n0):
                out[i] -= lower(A0, i, p) * kp
    _low_rank(Ut, s, nr, kP, nP, out, tmp)
    for i in range(nP):
        if dead[i]:
            out[i] = 0.0


@njit(cache=True, error_model="numpy")
def _settle(A, n0, n_end, ops, nops, lg, Ut, s, nr, Ulog, fns):
    """Add the terms to A (lower triangle, start layout on entry): first the slot
    moves of the sub-block (an append is a zero row and column, a removal moves the
    last slot into its place), then the terms by slot, positive and negative weights
    in one dsyrk each."""
    n = n0
    for o in range(nops):
        j = ops[o]
        if j < 0:
            for i in range(n + 1):
                A[n, i] = 0.0
            n += 1
        else:
            swap_last_lower(n, j, A)
            n -= 1
    for sign in (1.0, -1.0):
        k = 0
        for r in range(nr):
            w = s[r] * sign
            if w > 0.0:
                sq = math.sqrt(w)
                row = Ut[r]
                for i in range(n_end):
                    Ulog[i, k] = sq * row[lg[i]]
                k += 1
        sym_rk(fns, n_end, k, sign, Ulog, A)


@njit(cache=True, error_model="numpy")
def deferred_walk(blk, t0, sup, n, clock, pol, rule, psd_tol, scr, undo, dw):
    """The rounds of :func:`.explicit.explicit_walk` (second-order rule, budget
    policy "random", "smallest" or "project") from block input t0 on, in sub-blocks with their
    changes to Pi deferred (module docstring); same arguments, plus the work space
    ``dw`` (:func:`deferred_scratch`). Returns an :class:`.explicit.ExplicitResult`."""
    b = blk.kap.shape[0]
    a = rule.a
    fns = pol.blas
    project = pol.code == PROJECT
    smallest = pol.code == SMALLEST
    nu, Pi, ks = sup.nu, sup.Pi, sup.ks
    kinv, G = pol.kinv, pol.G
    Kold, C0, D0, Ut, s, Vt, sig = dw.Kold, dw.C0, dw.D0, dw.Ut, dw.s, dw.Vt, dw.sig
    kP, cP, wP, nuP, qP, hP, dk = dw.kP, dw.cP, dw.wP, dw.nuP, dw.qP, dw.hP, dw.dk
    dead, srcP, lg, ops, gone, tmp = dw.dead, dw.srcP, dw.lg, dw.ops, dw.gone, dw.tmp
    counter = pol.counter
    armed = undo.armed
    u = 0
    nfl = 0
    t = t0
    sb_max = Kold.shape[1] - 1
    status = OK
    stop_at = -1
    while t < b and status == OK:
        te = min(b, t + sb_max)
        sb = te - t
        n0 = n
        # the sub-block's start: kernel of the slots against its inputs, and q
        for i in range(n0):
            k_s = ks[i]
            for j in range(sb):
                Kold[i, j] = blk.K0[k_s, t + j] if k_s >= 0 else blk.Kbb[-1 - k_s, t + j]
            Kold[i, sb] = sup.gsv[i] / sup.zsv[i] if not project else 0.0
        sym_mm(fns, n0, sb + 1, Pi, Kold, C0)
        if project:
            sym_mm(fns, n0, sb, kinv, Kold, D0)
            for i in range(n0):
                dk[i] = kinv[i, i]
        elif smallest:
            for i in range(n0):
                dk[i] = Pi[i, i]
        for i in range(n0):
            nuP[i] = nu[i]
            dead[i] = False
            lg[i] = i
            qP[i] = Kold[i, sb]
            hP[i] = C0[i, sb]  # Pi_0 q less the columns of the removed start slots
        nP = n0
        nr = 0
        nv = 0
        nops = 0
        nd = 0
        refresh = False
        tt = t
        while tt < te:
            col = tt - t
            for i in range(n0):
                kP[i] = 0.0 if dead[i] else Kold[i, col]
            for i in range(n0, nP):
                kP[i] = 0.0 if dead[i] else blk.Kbb[srcP[i], tt]
            f = 0.0
            for i in range(nP):
                f += nuP[i] * kP[i]
            scr.f_out[tt] = f
            kap_t = blk.kap[tt]
            y_t = blk.y[tt]
            _product(C0, col, Pi, n0, gone, nd, Kold, Ut, s, nr, kP, nP, dead, cP, tmp)
            q = 0.0
            for i in range(nP):
                q += kP[i] * cP[i]
            v_raw = a * kap_t + q
            st = checked_step(rule, y_t * f, f, v_raw, kap_t, psd_tol)
            if st.status != OK:
                status = st.status
                stop_at = tt
                break
            nfl += st.floored
            alpha, beta, zeta, v = st.alpha, st.beta, st.zeta, st.v
            tt += 1
            if not alpha > 0.0:
                continue
            if armed:  # the call's first change is next: save what restore needs
                save_model(n, sup, pol, undo)
                armed = False
            ay = alpha * y_t
            Pn = nP
            if project:  # the inverse Gram matrix with the new vector (kinv_append)
                _product(D0, col, kinv, n0, gone, nd, Kold, Vt, sig, nv, kP, nP, dead,
                         wP, tmp)  # fmt: skip
                kj = kap_t * (1.0 + PROJECT_JITTER)
                sk = kj
                for i in range(nP):
                    sk -= kP[i] * wP[i]
                floor = PROJECT_JITTER * kj / (1.0 + PROJECT_JITTER)
                if not sk >= floor:
                    sk = floor if floor > 0.0 else 1e-300
                inv_s = 1.0 / sk
                row = Vt[nv]
                for i in range(nP):
                    row[i] = wP[i]
                    dk[i] += inv_s * wP[i] * wP[i]
                row[Pn] = -1.0
                dk[Pn] = inv_s
                sig[nv] = inv_s
                nv += 1
            if project or smallest:  # the Gram matrix gains the new row
                for i in range(n):
                    G[n, i] = kP[lg[i]]
                    G[i, n] = kP[lg[i]]
                G[n, n] = kap_t
            # Pi's update with the new row: -beta (c + a e_new)(c + a e_new)'
            nP += 1
            dead[Pn] = False
            srcP[Pn] = tt - 1
            row = Ut[nr]
            for i in range(Pn):
                row[i] = cP[i]
                nuP[i] += ay * cP[i]
            row[Pn] = a
            s[nr] = -beta
            if smallest:  # Pi's diagonal, for the scores
                for i in range(Pn):
                    dk[i] -= beta * cP[i] * cP[i]
                dk[Pn] = -beta * a * a
            nr += 1
            nuP[Pn] = ay * a
            sup.zsv[n] = zeta
            sup.gsv[n] = zeta * f + ay * (1.0 + zeta * v)
            qP[Pn] = sup.gsv[n] / zeta if not project else 0.0
            hP[Pn] = 0.0
            for r in range(nr - 1):  # the earlier terms are zero at the new slot
                Ut[r, Pn] = 0.0
            if project:
                for r in range(nv - 1):
                    Vt[r, Pn] = 0.0
            sup.kap[n] = kap_t
            sup.entry[n] = clock
            ks[n] = -1 - (tt - 1)
            lg[n] = Pn
            clock += 1
            n += 1
            ops[nops] = -1
            nops += 1
            scr.src[u] = tt - 1
            u += 1
            if n <= pol.budget:
                continue
            # one leaves: the victim, as the round-by-round walk chooses it
            if project:
                jv = -1
                best = 0.0
                for i in range(n):
                    P = lg[i]
                    score = abs(nuP[P]) / math.sqrt(dk[P])
                    if jv < 0 or score < best or (score == best and sup.entry[i] < sup.entry[jv]):
                        jv = i
                        best = score
            elif smallest:
                jv = _least_kl(n, sup, lg, nuP, dk, a)
            else:  # "random": the j-th in entry order (choose_victim), in O(n)
                jv = _jth_entered(pol, counter, n, sup.entry, scr.work)
            counter += 1
            P = lg[jv]
            _column(Pi, n0, Ut, s, nr, P, nP, dead, cP, tmp)  # pi_p, current
            pPP = cP[P]
            if project:
                # nu += nu_p e and Pi += e q' + q e' with e = -kinv[:, p] / kinv[p, p]
                # and q = pi_p + (Pi_pp / 2) e; the inverse Gram matrix without p
                _column(kinv, n0, Vt, sig, nv, P, nP, dead, wP, tmp)
                kPP = wP[P]
                wP[P] = 0.0
                nup = nuP[P]
                r1 = Ut[nr]
                r2 = Ut[nr + 1]
                half = 0.5 * pPP
                for i in range(nP):
                    e = -wP[i] / kPP
                    nuP[i] += nup * e
                    qv = cP[i] + half * e
                    r1[i] = e + qv
                    r2[i] = e - qv
                s[nr] = 0.5
                s[nr + 1] = -0.5
                nr += 2
                row = Vt[nv]
                inv_k = -1.0 / kPP
                for i in range(nP):
                    row[i] = wP[i]
                    dk[i] += inv_k * wP[i] * wP[i]
                row[P] = kPP
                sig[nv] = inv_k
                nv += 1
                swap_last_matrix(n, jv, G)
            else:
                # Pi without p: the Schur complement -pi_p pi_p' / Pi_pp
                row = Ut[nr]
                for i in range(nP):
                    row[i] = cP[i]
                s[nr] = -1.0 / pPP
                nr += 1
                if smallest:
                    for i in range(nP):
                        dk[i] -= cP[i] * cP[i] / pPP
                    swap_last_matrix(n, jv, G)
            nuP[P] = 0.0
            dead[P] = True
            if P < n0:
                gone[nd] = P
                nd += 1
            if not project:
                # nu = -Pi q / a, as the round-by-round removal recomputes it
                qP[P] = 0.0
                if P < n0:
                    qp = Kold[P, sb]
                    for i in range(n0):
                        hP[i] -= lower(Pi, i, P) * qp
                for i in range(n0):
                    wP[i] = hP[i]
                for i in range(n0, nP):
                    wP[i] = 0.0
                _low_rank(Ut, s, nr, qP, nP, wP, tmp)
                for i in range(nP):
                    nuP[i] = 0.0 if dead[i] else -wP[i] / a
            last = n - 1
            sup.zsv[jv] = sup.zsv[last]
            sup.gsv[jv] = sup.gsv[last]
            sup.kap[jv] = sup.kap[last]
            sup.entry[jv] = sup.entry[last]
            ks[jv] = ks[last]
            lg[jv] = lg[last]
            n -= 1
            ops[nops] = jv
            nops += 1
            if project and counter % KINV_REFRESH == 0:
                refresh = True
                break
        # the sub-block's end (or the stop): the changes go into nu, Pi and kinv
        for i in range(n):
            nu[i] = nuP[lg[i]]
        if nr:
            _settle(Pi, n0, n, ops, nops, lg, Ut, s, nr, dw.Ulog, fns)
        if project and nv:
            _settle(kinv, n0, n, ops, nops, lg, Vt, sig, nv, dw.Ulog, fns)
        if refresh:
            kinv_refresh(n, G, kinv, fns)
        if smallest:  # the variances at the support vectors, as the state keeps them
            for i in range(n):
                z = sup.zsv[i]
                pol.vsv[i] = 1.0 / z + Pi[i, i] / (a * a * z * z)
        t = tt
    return ExplicitResult(n, counter, clock, u, nfl, stop_at, status)
