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
  terms added since (``U (s * (U' k))``, O(n) per term); a removed start slot's
  column of Pi_0 leaves the remaining inputs' products once, when it is removed;
- at the sub-block's end the terms are added to Pi in two dsyrk calls (positive and
  negative weights), after the slots are moved as the round-by-round form moves
  them (the last slot into the removed one's place), so the model is laid out
  exactly as :func:`.explicit.explicit_walk` lays it out.

"project" needs ``w = kinv k`` only for the inputs that enter. Where its inverse is at
most :data:`LAZY_W_MAX_N` slots and fewer than half of the previous sub-block's inputs
entered, a sub-block leaves ``kinv_0`` out of its dsymm and takes ``kinv_0 k`` by one
dsymv per entering input (:func:`lazy_inverse_product`). One-pass SCW-I on magic enters
about a third of its inputs; ``python -m benchmarks scaling`` times its headline fits
(B = 500 and 1000) both ways in one run. The walk's first sub-block always takes the
dsymm (the same choices for the same call, whatever came before), as do larger models
(a dsymv from memory cost 3.3 dsymm columns at n = 4000, timed alone).

"smallest" scores from nu and Pi's diagonal (kept term by term) instead of the Gram
matrix passes of the round-by-round walk (:func:`kernelcw.budget.kernels.choose_victim`):
the same scores for a model learnt round by round, whose zeta and g describe its nu and
Pi, but not for one given by nu and Pi alone (combine's "average"), which therefore
walks round by round (:meth:`.explicit.ExplicitForm.walk`).

nu is kept as that walk keeps it: ``nu += alpha y c`` on an update; after a removal,
``nu = -Pi q / a`` with ``q = g / zeta`` (``Pi_0 q`` from the same dsymm); after a
projection ``nu += nu_p e``. "project" refreshes its inverse Gram matrix where the
round-by-round walk does (:func:`kernelcw.budget.kernels.kinv_refresh_due`): a
sub-block ends there.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import njit

from ..._blas import sym_mm
from ...budget.kernels import (
    PROJECT,
    SMALLEST,
    jth_entered_slot,
    kinv_refresh,
    kinv_refresh_due,
    kl_variances,
    schur_inverse,
    swap_last_matrix,
)
from ...budget.scores import least_kl_slot, least_projection_slot
from .deferred_terms import column, drop_start_slot, low_rank, product, product_now, settle
from .status import OK
from .steps import ExplicitResult, checked_step, save_model

__all__ = ["SUB_BLOCK", "Deferred", "deferred_scratch", "deferred_walk", "sub_block"]

#: The most inputs per sub-block: Pi K for all of them in one dsymm, then each input
#: pays O(n) per change made since the sub-block started (``doc/dual-form.md``
#: section 8 on the choice; :func:`sub_block`). Results do not depend on it beyond
#: rounding.
SUB_BLOCK = 64

#: "project" computes ``kinv_0 k`` per entering input (dsymv) instead of for every input
#: of a sub-block (in the dsymm with ``Pi_0``) while its inverse has at most this many
#: slots: up to here a dsymv cost 1.4-1.6x a column of the dsymm, at n = 4000 3.3x (each
#: timed alone, by hand; whole fits: ``python -m benchmarks scaling``, headline, and by
#: hand one-pass SCW-I on magic at B = 1500 and 2000 took 9 % and 4 % less time).
LAZY_W_MAX_N = 2048


def sub_block(budget: int) -> int:
    """Inputs per sub-block for a model of at most ``budget`` support vectors:
    ``(budget^2 / 4)^(1/3)`` (half the queue's walk, :func:`.queue.part_size`) to the
    nearest multiple of 8, at least 16 and at most :data:`SUB_BLOCK`: 16 at B = 100,
    24 at 200, 40 at 500, 64 from 1000 on (63 inputs, the formula's own value there,
    made "project"'s fit at B = 1000 5 % slower than 64: BLAS's kernels work in
    multiples of 4 and 8 columns). One-pass SCW-I fits on magic's 12,680 training
    rows (one thread, timed by hand against fixed sub-blocks of 16-64): with 64 at
    every budget, "smallest" took 0.129, 0.204 and 0.283 s at B = 100, 200 and 300,
    with 16-32 0.093-0.096, 0.156-0.160 and 0.243-0.245 s; "project" 0.088 / 0.158 /
    0.251 s against 0.078 / 0.147 / 0.246 s; from B = 500 on, 32-64 measured alike."""
    return min(SUB_BLOCK, max(16, 8 * round((budget * budget / 4.0) ** (1.0 / 3.0) / 8.0)))


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
    kP: np.ndarray  # physical vectors: kernel, c, work, nu, q, and the diagonal of
    # kinv ("project") or of Pi ("smallest")
    cP: np.ndarray
    wP: np.ndarray
    nuP: np.ndarray
    qP: np.ndarray
    dk: np.ndarray
    dead: np.ndarray
    srcP: np.ndarray  # block input of each slot that entered in the sub-block
    lg: np.ndarray  # slot (logical, as the round-by-round form lays it out) -> physical
    ops: np.ndarray  # the sub-block's slot moves: -1 an append, j >= 0 removal of slot j
    tmp: np.ndarray
    Ulog: np.ndarray  # cap x terms: the terms by slot, for dsyrk
    cnt: np.ndarray  # the walk's counters (N, NP, ...)


def _counters() -> np.ndarray:
    """The walk's counters (:data:`N` ...), with the lazy inverse product's size limit
    (:data:`LAZY_W_MAX_N`, read now)."""
    c = np.zeros(16, dtype=np.int64)
    c[LAZY_MAX] = LAZY_W_MAX_N
    return c


def deferred_scratch(cap: int, project: bool, budget: int) -> Deferred:
    """Work space for a walk on a model of capacity ``cap`` and the given budget
    (sub-blocks of :func:`sub_block` inputs)."""
    sb = sub_block(budget)
    P = cap + sb + 1
    R = 3 * sb + 2
    RV = 2 * sb + 2 if project else 1
    f = np.empty
    return Deferred(
        f((cap, sb + 1)), f((cap, sb + 1)), f((cap, sb) if project else (1, 1)),
        f((R, P)), f(R), f((RV, P) if project else (1, 1)), f(RV),
        f(P), f(P), f(P), f(P), f(P), f(P), np.zeros(P, dtype=np.bool_),
        np.zeros(P, dtype=np.int64), np.zeros(cap + 1, dtype=np.int64),
        np.zeros(2 * sb + 2, dtype=np.int64), f(R), f((cap, R)),
        _counters(),
    )  # fmt: skip


#: Indices of the walk's counters (``Deferred.cnt``): live slots, physical slots,
#: Pi's terms, the inverse Gram matrix's terms, slot moves, start slots, the
#: sub-block's size and first input, the entry clock, inputs entered, removals.
N, NP, NR, NV, NOPS, N0, SB, T0, CLOCK, NEW, COUNT = range(11)
#: ... whether the sub-block takes kinv_0 k input by input (:func:`lazy_inverse_product`),
#: the inputs seen and entered in the sub-block so far, the largest inverse for which it
#: may, and how many sub-blocks did (over the work space's life: a diagnostic).
LAZY_W, SEEN, ENTERED, LAZY_MAX, LAZY_SUBS = range(11, 16)


@njit(cache=True, error_model="numpy")
def lazy_inverse_product(n0, seen, entered, most):
    """Whether a sub-block of "project" on ``n0`` slots takes ``kinv_0 k`` input by
    input: when the inverse has at most ``most`` slots (:data:`LAZY_W_MAX_N`) and fewer
    than half of the inputs entered in the previous sub-block (none seen: no)."""
    return n0 <= most and seen > 0 and 2 * entered < seen


@njit(cache=True, error_model="numpy")
def _open(blk, t, sb, sup, pol, dw):
    """A sub-block of inputs t..t+sb-1 starts on the support of ``cnt[N]`` slots: their
    kernel values against its inputs and q = g / zeta (Kold), Pi_0 times them (C0; and
    kinv_0 times them, "project"), the physical vectors and the counters."""
    c = dw.cnt
    n0 = c[N]
    project = pol.code == PROJECT
    ks, Kold, dk = sup.ks, dw.Kold, dw.dk
    width = sb if project else sb + 1  # q = g / zeta: removal's nu (not "project")
    for i in range(n0):
        k_s = ks[i]
        for j in range(sb):
            Kold[i, j] = blk.K0[k_s, t + j] if k_s >= 0 else blk.Kbb[-1 - k_s, t + j]
        if not project:
            Kold[i, sb] = dw.qP[i] = sup.gsv[i] / sup.zsv[i]
    sym_mm(pol.blas, n0, width, sup.Pi, Kold, dw.C0)
    c[LAZY_W] = project and lazy_inverse_product(n0, c[SEEN], c[ENTERED], c[LAZY_MAX])
    c[LAZY_SUBS] += c[LAZY_W]
    c[SEEN] = c[ENTERED] = 0
    if project:
        if not c[LAZY_W]:
            sym_mm(pol.blas, n0, sb, pol.kinv, Kold, dw.D0)
        for i in range(n0):
            dk[i] = pol.kinv[i, i]
    elif pol.code == SMALLEST:
        for i in range(n0):
            dk[i] = sup.Pi[i, i]
    for i in range(n0):
        dw.nuP[i] = sup.nu[i]
        dw.dead[i] = False
        dw.lg[i] = i
    c[NP] = n0
    c[NR] = c[NV] = c[NOPS] = 0
    c[N0] = n0
    c[SB] = sb
    c[T0] = t


@njit(cache=True, error_model="numpy")
def _read(blk, t, dw, fns):
    """Input t's kernel vector (kP, zero at removed slots), its margin f, c = Pi k (cP)
    and k' c."""
    c = dw.cnt
    n0, nP, col = c[N0], c[NP], t - c[T0]
    kP, dead = dw.kP, dw.dead
    for i in range(n0):
        kP[i] = 0.0 if dead[i] else dw.Kold[i, col]
    for i in range(n0, nP):
        kP[i] = 0.0 if dead[i] else blk.Kbb[dw.srcP[i], t]
    f = 0.0
    for i in range(nP):
        f += dw.nuP[i] * kP[i]
    product(fns, dw.C0, col, n0, dw.Ut, dw.s, c[NR], kP, nP, dead, dw.cP, dw.tmp)
    q = 0.0
    for i in range(nP):
        q += kP[i] * dw.cP[i]
    return f, q


@njit(cache=True, error_model="numpy")
def _enter(blk, t, sup, pol, dw, a, f, ay, beta, zeta, v):
    """Input t updates and enters as a new slot: "project"'s inverse Gram matrix gains
    it (kinv_append's term), the Gram matrix its row; Pi's term
    ``-beta (c + a e_new)(c + a e_new)'``; nu, and the slot's records."""
    c = dw.cnt
    n, nP, nr, nv, n0 = c[N], c[NP], c[NR], c[NV], c[N0]
    kP, cP, wP, dk, lg = dw.kP, dw.cP, dw.wP, dw.dk, dw.lg
    kap_t = blk.kap[t]
    Pn = nP
    if pol.code == PROJECT:
        if c[LAZY_W]:  # kinv_0 k now, for this input alone
            product_now(pol.blas, pol.kinv, n0, dw.Vt, dw.sig, nv, kP, nP, dw.dead, wP,
                        dw.tmp)  # fmt: skip
        else:
            product(pol.blas, dw.D0, t - c[T0], n0, dw.Vt, dw.sig, nv, kP, nP, dw.dead, wP,
                     dw.tmp)  # fmt: skip
        sk = kap_t  # (the jittered kernel's k(x, x): the store's)
        for i in range(nP):
            sk -= kP[i] * wP[i]
        inv_s = schur_inverse(kap_t, sk)
        row = dw.Vt[nv]
        for i in range(nP):
            row[i] = wP[i]
            dk[i] += inv_s * wP[i] * wP[i]
        row[Pn] = -1.0
        dk[Pn] = inv_s
        dw.sig[nv] = inv_s
        for r in range(nv):  # the earlier terms are zero at the new slot
            dw.Vt[r, Pn] = 0.0
        c[NV] = nv + 1
    if pol.track_kinv or pol.track_kl:  # the Gram matrix gains the new row
        G = pol.G
        for i in range(n):
            G[n, i] = kP[lg[i]]
            G[i, n] = kP[lg[i]]
        G[n, n] = kap_t
    row = dw.Ut[nr]
    for i in range(Pn):
        row[i] = cP[i]
        dw.nuP[i] += ay * cP[i]
    row[Pn] = a
    dw.s[nr] = -beta
    for r in range(nr):
        dw.Ut[r, Pn] = 0.0
    if pol.code == SMALLEST:  # Pi's diagonal, for the scores
        for i in range(Pn):
            dk[i] -= beta * cP[i] * cP[i]
        dk[Pn] = -beta * a * a
    dw.nuP[Pn] = ay * a
    dw.dead[Pn] = False
    dw.srcP[Pn] = t
    sup.zsv[n] = zeta
    sup.gsv[n] = zeta * f + ay * (1.0 + zeta * v)
    dw.qP[Pn] = sup.gsv[n] / zeta if pol.code != PROJECT else 0.0
    sup.kap[n] = kap_t
    sup.entry[n] = c[CLOCK]
    sup.ks[n] = -1 - t
    lg[n] = Pn
    dw.ops[c[NOPS]] = -1
    c[NOPS] += 1
    c[CLOCK] += 1
    c[N] = n + 1
    c[NP] = nP + 1
    c[NR] = nr + 1


@njit(cache=True, error_model="numpy")
def _leave(sup, pol, dw, a, work, nxt):
    """The model is over budget: the policy's victim leaves (removed, or projected
    onto the others), ``nxt`` the sub-block column of the next input. Returns whether
    "project" refreshes its inverse Gram matrix now."""
    c = dw.cnt
    n, nP, nr, nv, n0 = c[N], c[NP], c[NR], c[NV], c[N0]
    project = pol.code == PROJECT
    Ut, s, cP, wP, nuP, lg = dw.Ut, dw.s, dw.cP, dw.wP, dw.nuP, dw.lg
    if project:
        jv = least_projection_slot(n, sup, lg, nuP, dw.dk)
    elif pol.code == SMALLEST:
        jv = least_kl_slot(n, sup, lg, nuP, dw.dk, a)
    else:  # "random": the j-th in entry order (choose_victim), in O(n)
        jv = jth_entered_slot(pol, c[COUNT], n, sup.entry, work)
    c[COUNT] += 1
    P = lg[jv]
    fns = pol.blas
    column(fns, sup.Pi, n0, Ut, s, nr, P, nP, dw.dead, cP, dw.tmp)  # pi_p, current
    pPP = cP[P]
    if project:
        # nu += nu_p e and Pi += e q' + q e' with e = -kinv[:, p] / kinv[p, p]
        # and q = pi_p + (Pi_pp / 2) e; the inverse Gram matrix without p
        column(fns, pol.kinv, n0, dw.Vt, dw.sig, nv, P, nP, dw.dead, wP, dw.tmp)
        kPP = wP[P]
        wP[P] = 0.0
        nup = nuP[P]
        r1, r2 = Ut[nr], Ut[nr + 1]
        half = 0.5 * pPP
        me = 0.0
        mq = 0.0
        for i in range(nP):
            e = -wP[i] / kPP
            nuP[i] += nup * e
            qv = cP[i] + half * e
            r1[i] = e
            r2[i] = qv
            me = max(me, abs(e))
            mq = max(mq, abs(qv))
        # e q' + q e' = (u u' - v v') / 2 with u, v = e / g +- g q for any g > 0: g^2 =
        # max|e| / max|q| makes both halves about |e| |q|. With g = 1, where |q| << |e|
        # (Pi's entries tiny beside kinv's: large kernel values), each half was ~|e|^2
        # and their difference lost Pi's positive definiteness to cancellation
        g = math.sqrt(me / mq) if me > 0.0 and mq > 0.0 else 1.0
        for i in range(nP):
            e = r1[i] / g
            qv = r2[i] * g
            r1[i] = e + qv
            r2[i] = e - qv
        s[nr] = 0.5
        s[nr + 1] = -0.5
        c[NR] = nr + 2
        row = dw.Vt[nv]
        inv_k = -1.0 / kPP
        for i in range(nP):
            row[i] = wP[i]
            dw.dk[i] += inv_k * wP[i] * wP[i]
        row[P] = kPP
        dw.sig[nv] = inv_k
        c[NV] = nv + 1
    else:  # Pi without p: the Schur complement -pi_p pi_p' / Pi_pp
        row = Ut[nr]
        for i in range(nP):
            row[i] = cP[i]
        s[nr] = -1.0 / pPP
        c[NR] = nr + 1
        if pol.code == SMALLEST:
            for i in range(nP):
                dw.dk[i] -= cP[i] * cP[i] / pPP
    if pol.track_kinv or pol.track_kl:
        swap_last_matrix(n, jv, pol.G)
    nuP[P] = 0.0
    dw.dead[P] = True
    if P < n0:  # the next inputs' products lose its column (Pi_0 q too: column sb)
        drop_start_slot(sup.Pi, dw.C0, n0, P, dw.Kold, nxt, c[SB] + (0 if project else 1), wP)
        if project and not c[LAZY_W]:
            drop_start_slot(pol.kinv, dw.D0, n0, P, dw.Kold, nxt, c[SB], wP)
    if not project:  # nu = -Pi q / a, as the round-by-round removal recomputes it
        dw.qP[P] = 0.0
        for i in range(n0):
            wP[i] = dw.C0[i, c[SB]]  # Pi_0 q less the removed start slots' columns
        for i in range(n0, nP):
            wP[i] = 0.0
        low_rank(fns, Ut, s, c[NR], dw.qP, nP, wP, dw.tmp, dw.dead)
        for i in range(nP):
            nuP[i] = -wP[i] / a
    last = n - 1
    for arr in (sup.zsv, sup.gsv, sup.kap):
        arr[jv] = arr[last]
    sup.entry[jv] = sup.entry[last]
    sup.ks[jv] = sup.ks[last]
    lg[jv] = lg[last]
    c[N] = last
    dw.ops[c[NOPS]] = jv
    c[NOPS] += 1
    return project and kinv_refresh_due(c[COUNT], pol.budget)


@njit(cache=True, error_model="numpy")
def _close(sup, pol, dw, refresh, a):
    """The sub-block ends (or the walk stops): its changes go into nu, Pi and kinv;
    "project" refreshes its inverse where the round-by-round walk does; "smallest"'s
    variances at the support vectors are written as the state keeps them."""
    c = dw.cnt
    n = c[N]
    for i in range(n):
        sup.nu[i] = dw.nuP[dw.lg[i]]
    if c[NR]:
        settle(sup.Pi, c[N0], n, dw.ops, c[NOPS], dw.lg, dw.Ut, dw.s, c[NR], dw.Ulog,
                pol.blas)  # fmt: skip
    if pol.code == PROJECT and c[NV]:
        settle(pol.kinv, c[N0], n, dw.ops, c[NOPS], dw.lg, dw.Vt, dw.sig, c[NV], dw.Ulog,
                pol.blas)  # fmt: skip
    if refresh:
        kinv_refresh(n, pol.G, pol.kinv, pol.blas)
    if pol.code == SMALLEST:
        kl_variances(n, sup.Pi, sup.zsv, pol.vsv, a)


@njit(cache=True, error_model="numpy")
def deferred_walk(blk, t0, sup, n, clock, pol, rule, psd_tol, scr, undo, dw):
    """The rounds of :func:`.explicit.explicit_walk` (second-order rule, budget policy
    "random", "smallest" or "project") from block input t0 on, in sub-blocks with their
    changes to Pi deferred (module docstring); same arguments, plus the work space
    ``dw`` (:func:`deferred_scratch`). Returns an :class:`.steps.ExplicitResult`."""
    b = blk.kap.shape[0]
    a = rule.a
    c = dw.cnt
    c[N] = n
    c[CLOCK] = clock
    c[NEW] = 0
    c[COUNT] = pol.counter
    c[SEEN] = c[ENTERED] = 0  # the walk's first sub-block takes the product (the same
    # choices for the same call, whatever the calls before)
    armed = undo.armed
    nfl = 0
    t = t0
    sb_max = dw.Kold.shape[1] - 1
    status = OK
    stop_at = -1
    while t < b and status == OK:
        te = min(b, t + sb_max)
        _open(blk, t, te - t, sup, pol, dw)
        refresh = False
        tt = t
        while tt < te:
            f, q = _read(blk, tt, dw, pol.blas)
            scr.f_out[tt] = f
            kap_t = blk.kap[tt]
            y_t = blk.y[tt]
            st = checked_step(rule, y_t * f, f, a * kap_t + q, kap_t, psd_tol)
            if st.status != OK:
                status = st.status
                stop_at = tt
                break
            nfl += st.floored
            tt += 1
            c[SEEN] += 1
            if not st.alpha > 0.0:
                continue
            c[ENTERED] += 1
            if armed:  # the call's first change is next: save what restore needs
                save_model(c[N], sup, pol, undo, np.bool_(True), np.bool_(True))
                armed = False
            _enter(blk, tt - 1, sup, pol, dw, a, f, st.alpha * y_t, st.beta, st.zeta, st.v)
            scr.src[c[NEW]] = tt - 1
            c[NEW] += 1
            if c[N] > pol.budget:
                refresh = _leave(sup, pol, dw, a, scr.work, tt - t)
                if refresh:
                    break
        _close(sup, pol, dw, refresh, a)
        t = tt
    return ExplicitResult(c[N], c[COUNT], c[CLOCK], c[NEW], nfl, stop_at, status, False)
