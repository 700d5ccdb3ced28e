"""Dual (kernel) engine: support set, Gram cache and two solvers.

By the representer theorem (``doc/dual-form.md`` section 1) the model is

    mu    = sum_p nu_p phi(x_p),     Sigma = a I + sum_pq Pi_pq phi(x_p) phi(x_q)'

over the support set S. With ``k = K(S, x)``, ``kappa = k(x, x)``:
``f = mu . x = nu . k`` and ``v = a kappa + k' Pi k``.

Two solvers keep the same model:

``"explicit"`` (section 1): nu and Pi themselves, updated in place round by round
(``nu += alpha y c``, ``Pi -= beta c c'``, ``c = Pi k``, and a new row). About
1.5 n^2 numbers of memory traffic per round. The readable reference.

``"cholesky"`` (sections 2-3): ``Pi = -a^2 M^-1`` with ``M = D^-1 + a K(S, S)``
symmetric positive definite, kept as its append-only Cholesky factor
``M = L L'`` and the vector ``r`` (``nu = a L'^-1 r``). Per round
``w = L^-1 k``, ``f = a r . w``, ``v = a kappa - a^2 |w|^2``, and an update appends
the row ``[a w, L_nn]``, ``L_nn = sqrt(1/zeta + v)``, and
``r_new = alpha y L_nn`` (``doc/dual-form.md``'s ``(g/zeta - (a w) . r) / L_nn`` with
``g = zeta f + alpha y (1 + zeta v)`` and ``(a w) . r = f``). Nothing stored
changes, so M stays positive definite by construction.

Blocks (section 3). For ``b`` inputs ``X_B`` and the support set ``S_0`` at the
block's start: ``K0 = K(S_0, X_B)`` is one kernel block, ``W0 = L^-1 K0`` one
blocked forward substitution (BLAS-3), ``G = W0' W0`` one more product. The rows
appended inside the block begin with ``a W0[:, s]``, so their products with any
``w`` come from ``G``: the walk through the block runs in b x b space

    e_t[i] = (K_BB[s_i, t] - a G[s_i, t] - a E[i, :i] . e_t[:i]) / L_ii
    f_t = a (r_0 . W0[:, t] + r_new . e_t),  v_t = a kappa_t - a^2 (G[t, t] + |e_t|^2)

(``s_i`` the block input that appended new row i, ``e_t`` the part of ``w_t`` on
the new rows) and never touches an n-vector.

Storage. L and the Gram cache K(S, S) are stored as row panels, one per block
that updated: panel j holds the ``u_j`` rows appended in that block, of length
``off_j + u_j``, as a rectangle ``R_j`` (u_j x off_j) and a lower triangle
``T_j`` (u_j x u_j), both C-contiguous. That is exactly the lower triangle
(plus a u_j^2/2 sliver per panel), with no capacity slack, and the forward
substitution over panels is a sequence of in-place ``dgemm`` and ``dtrsm`` calls
on transposed (Fortran-ordered) views, without copies.

One BLAS. numpy and scipy each bundle an OpenBLAS, and their worker threads
busy-wait after a call: alternating the two in a loop made each slower (see
``benchmarks/_common.py``). The engine's products therefore all go through
scipy's BLAS (``scipy.linalg.blas``), which numba's ``np.dot`` also uses.

First-order rules (Perceptron, PA) never change Sigma = a I: both solvers keep nu
alone, with ``v = a kappa``.

Margin variance. Rounding can push v slightly below zero. A v under
``VAR_FLOOR * a * kappa`` is raised to it and counted; a v under
``-PSD_TOL * a * kappa`` (or kappa < 0) means the kernel is not positive
semi-definite, and the learner raises a ``ValueError`` naming it.
"""

from __future__ import annotations

import copy
import math

import numpy as np
import scipy.sparse as sp
from numba import njit
from scipy.linalg import solve_triangular
from scipy.linalg.blas import dgemm, dgemv, dtrsm

from . import _blas
from . import budget as bud
from .kernels import Kernel
from .rules import FIRST_ORDER, VAR_FLOOR, RuleParams, step

__all__ = ["PSD_TOL", "DualModel", "BinaryDual"]

#: A margin variance below ``-PSD_TOL * a * k(x, x)`` is beyond rounding: the
#: kernel is not positive semi-definite.
PSD_TOL = 1e-6

_OK, _NONFINITE, _NOT_PSD, _STOP = 0, 1, 2, 3


# --------------------------------------------------------------------------- walks


@njit(cache=True)
def _checked_step(rule, m, f, v, a, kap, phi, C, r, psd_tol):
    """The rule's step after the variance floor and the PSD and finiteness checks
    (a v below ``-psd_tol * a * kap`` is an error; above it, v is floored).

    Returns (alpha, beta, zeta, v after the floor, floored?, status).
    """
    if not (kap >= 0.0) or v < -psd_tol * a * kap:
        return 0.0, 0.0, 0.0, v, False, _NOT_PSD
    floored = False
    vmin = VAR_FLOOR * a * kap
    if v < vmin:
        v = vmin
        floored = True
    alpha, beta, zeta = step(rule, m, v, phi, C, r)
    if not (math.isfinite(alpha) and math.isfinite(beta) and math.isfinite(zeta)):
        return alpha, beta, zeta, v, floored, _NONFINITE
    if not math.isfinite(f):
        return alpha, beta, zeta, v, floored, _NONFINITE
    return alpha, beta, zeta, v, floored, _OK


@njit(cache=True)
def _block_rows_part(Kbb, G, rW, rn, E, Ld, src, u, t, a, e):
    """For block input t: ``e[:u]``, the part of ``w_t = L^-1 k_t`` on the u rows
    appended in this block (module docstring), and ``(r . w_t, |e|^2)``."""
    for i in range(u):
        s = src[i]
        acc = Kbb[s, t] - a * G[s, t]
        for j in range(i):
            acc -= a * E[i, j] * e[j]
        e[i] = acc / Ld[i]
    rw = rW[t]
    ee = 0.0
    for i in range(u):
        rw += rn[i] * e[i]
        ee += e[i] * e[i]
    return rw, ee


@njit(cache=True)
def _cholesky_walk(G, rW, Kbb, kap, y, rule, phi, C, r, a, limit, E, Ld, rn, zt, src, f_out, e):
    """Second-order rules, cholesky solver: walk one block (module docstring).

    Writes the new rows' data (E, Ld, rn, zt, src) and f_out; returns
    (n_new, n_floored, index, status). With ``limit`` new rows made, the next
    round that would update stops the walk before it changes anything (status
    _STOP at that index): a budget binds there.
    """
    b = rW.shape[0]
    u = 0
    nfl = 0
    for t in range(b):
        f, ee = _block_rows_part(Kbb, G, rW, rn, E, Ld, src, u, t, a, e)
        f *= a
        f_out[t] = f
        v = a * kap[t] - a * a * (G[t, t] + ee)
        alpha, beta, zeta, v, fl, status = _checked_step(
            rule, y[t] * f, f, v, a, kap[t], phi, C, r, PSD_TOL
        )
        if status != _OK:
            return u, nfl, t, status
        if alpha > 0.0 and u == limit:
            return u, nfl, t, _STOP
        nfl += fl
        if alpha > 0.0:
            lnn = math.sqrt(1.0 / zeta + v)
            Ld[u] = lnn
            rn[u] = alpha * y[t] * lnn
            zt[u] = zeta
            for j in range(u):
                E[u, j] = e[j]
            src[u] = t
            u += 1
    return u, nfl, -1, _OK


@njit(cache=True)
def _explicit_walk(
    K0,
    Kbb,
    kap,
    y,
    t0,
    nu,
    Pi,
    kinv,
    G,
    zsv,
    gsv,
    vsv,
    kap_sv,
    entry,
    ks,
    n,
    budget,
    policy,
    second,
    track_kinv,
    track_kl,
    rule,
    phi,
    C,
    r,
    a,
    seed,
    counter,
    clock,
    f_out,
    src,
    kv,
    c,
    work,
    psd_tol,
):
    """nu and Pi updated in place, one round at a time, from block input t0 on
    (the explicit solver, first-order rules, and budgeted models).

    Per support vector slot i: ``kap_sv`` its k(x, x), ``entry`` when it entered,
    ``ks`` where its kernel values are: row ks of K0 (support at the block's
    start) or, for ks < 0, row -1-ks of K_BB (an input of this block). With more
    than ``budget`` support vectors after an update, one leaves at once
    (:mod:`kernelcw.budget`). ``zsv`` and ``gsv`` hold each support vector's
    precision and natural-mean weights (zeta, g) for unlearning it; ``kinv``
    (policy "project") and ``G, vsv`` (policy "smallest") are kept up to date for
    their scores. Returns
    (n, counter, clock, n_new, n_floored, bad_index, status).
    """
    b = kap.shape[0]
    u = 0
    nfl = 0
    for t in range(t0, b):
        for i in range(n):
            s = ks[i]
            kv[i] = K0[s, t] if s >= 0 else Kbb[-1 - s, t]
        f = 0.0
        for i in range(n):
            f += nu[i] * kv[i]
        f_out[t] = f
        if second:
            q = 0.0
            for i in range(n):
                acc = 0.0
                for j in range(n):
                    acc += Pi[i, j] * kv[j]
                c[i] = acc
                q += kv[i] * acc
            v_raw = a * kap[t] + q
            alpha, beta, zeta, v, fl, status = _checked_step(
                rule, y[t] * f, f, v_raw, a, kap[t], phi, C, r, psd_tol
            )
            if status != _OK:
                return n, counter, clock, u, nfl, t, status
            nfl += fl
        else:  # first order: Sigma = a I, k(x, x) in place of v
            if not (kap[t] >= 0.0):
                return n, counter, clock, u, nfl, t, _NOT_PSD
            v_raw = a * kap[t]
            alpha, beta, zeta = step(rule, y[t] * f, kap[t], phi, C, r)
            if not (math.isfinite(alpha) and math.isfinite(f)):
                return n, counter, clock, u, nfl, t, _NONFINITE
        if alpha > 0.0:
            ay = alpha * y[t]
            if track_kl:
                bud.kl_append(n, G, vsv, kv, kap[t], c, beta, v_raw, a, second, work)
            if track_kl or track_kinv:
                for i in range(n):
                    G[n, i] = kv[i]
                    G[i, n] = kv[i]
                G[n, n] = kap[t]
            zsv[n] = zeta
            gsv[n] = zeta * f + ay * (1.0 + zeta * v) if second else ay
            if second:
                for i in range(n):
                    nu[i] += ay * c[i]
                    bci = beta * c[i]
                    for j in range(n):
                        Pi[i, j] -= bci * c[j]
                    Pi[n, i] = -beta * a * c[i]
                    Pi[i, n] = -beta * a * c[i]
                Pi[n, n] = -beta * a * a
            nu[n] = ay * a
            if track_kinv:
                bud.kinv_append(n, kinv, kv, kap[t] * (1.0 + bud.PROJECT_JITTER), work)
            kap_sv[n] = kap[t]
            entry[n] = clock
            ks[n] = -1 - t
            clock += 1
            n += 1
            src[u] = t
            u += 1
            if n > budget:
                p = bud.choose_victim(
                    policy, n, nu, kap_sv, kinv, entry, seed, counter, G, zsv, gsv, vsv, a
                )
                counter += 1
                if track_kl:
                    bud.kl_remove(n, p, G, zsv, vsv, Pi, a, second, work)
                if policy == bud.PROJECT:
                    bud.project(n, p, nu, Pi, kinv, second)
                    zsv[p] = zsv[n - 1]
                    gsv[p] = gsv[n - 1]
                else:
                    bud.remove(n, p, nu, Pi, zsv, gsv, a, second)
                if track_kl or track_kinv:
                    bud.swap_last_matrix(n, p, G)
                if track_kinv:
                    bud.schur_delete(n, p, kinv)
                    if counter % bud.KINV_REFRESH == 0:
                        bud.kinv_refresh(n - 1, G, kinv)
                kap_sv[p] = kap_sv[n - 1]
                entry[p] = entry[n - 1]
                ks[p] = ks[n - 1]
                n -= 1
    return n, counter, clock, u, nfl, -1, _OK


@njit(cache=True)
def _chol_rank1(Ch, D, x):
    """Ch Ch' + x x' = Ch_new Ch_new' in place on the leading D x D block (lower);
    x (length >= D) is overwritten."""
    for k in range(D):
        ckk = Ch[k, k]
        rr = math.hypot(ckk, x[k])
        c = rr / ckk
        s = x[k] / ckk
        Ch[k, k] = rr
        for i in range(k + 1, D):
            Ch[i, k] = (Ch[i, k] + s * x[i]) / c
            x[i] = c * x[i] - s * Ch[i, k]


@njit(cache=True)
def _chol_solve_lower(Ch, D, rhs, out):
    """out = Ch^-1 rhs on the leading D x D block."""
    for i in range(D):
        acc = rhs[i]
        for j in range(i):
            acc -= Ch[i, j] * out[j]
        out[i] = acc / Ch[i, i]


@njit(cache=True)
def _queue_walk(
    G,
    rW,
    P0,
    H0,
    rho0,
    Kbb,
    kap,
    y,
    rule,
    phi,
    C,
    r,
    a,
    n_alive,
    budget,
    E,
    Ld,
    rn,
    qn,
    zt,
    src,
    PN,
    f_out,
):
    """Second-order rules under the "oldest" budget in the queue form: walk one
    block (see ``_Queue``) in (b + c)-space.

    The rows appended in the block extend the factor of *all* the support at the
    block's start, leavers included, exactly as without a budget (``G = W0' W0``,
    ``rW = W0' r``; the new rows' part ``e_t`` of ``w_t = L^-1 k_t``), so that
    ``M`` stays ``D^-1 + a K`` over everything. The model without the D leavers
    so far is its restriction, by the identity
    ``k_S' M_S^-1 q_S = k' M^-1 q - p' H^-1 rho`` with ``Y = L^-1 E_dead``,
    ``p = Y' w``, ``rho = Y' r``, ``H = Y'Y``. Candidate d (the d-th to leave) has
    block-start part ``Y0[:, d]``: ``P0 = Y0' W0``, ``H0 = Y0' Y0``,
    ``rho0 = Y0' r``; the new rows' entries of Y are ``PN``. ``Ch`` is the
    Cholesky factor of H over the dead.

    Returns (n_new, deaths, n_floored, index, status); _STOP at the round whose
    update would need a (c+1)-th death.
    """
    b = kap.shape[0]
    c = P0.shape[0]
    u = 0
    D = 0
    nfl = 0
    e = np.empty(b)
    p = np.empty(c)
    y1 = np.empty(c)
    y2 = np.empty(c)
    Ch = np.zeros((c, c))
    rho = np.empty(c)
    for d in range(c):
        rho[d] = rho0[d]
    for t in range(b):
        fx, ee = _block_rows_part(Kbb, G, rW, rn, E, Ld, src, u, t, a, e)
        for d in range(c):
            acc = P0[d, t]
            for i in range(u):
                acc += PN[i, d] * e[i]
            p[d] = acc
        _chol_solve_lower(Ch, D, p, y1)
        _chol_solve_lower(Ch, D, rho, y2)
        a_ext = G[t, t] + ee
        qa = a_ext
        qb = fx
        for d in range(D):
            qa -= y1[d] * y1[d]
            qb -= y1[d] * y2[d]
        f = a * qb
        f_out[t] = f
        v = a * kap[t] - a * a * qa
        alpha, beta, zeta, v, fl, status = _checked_step(
            rule, y[t] * f, f, v, a, kap[t], phi, C, r, PSD_TOL
        )
        if status != _OK:
            return u, D, nfl, t, status
        if alpha > 0.0 and n_alive + 1 > budget and D == c:
            return u, D, nfl, t, _STOP
        nfl += fl
        if alpha > 0.0:
            # the extended model (leavers included) is a valid model: v_ext >= 0
            v_ext = a * kap[t] - a * a * a_ext
            lnn = math.sqrt(1.0 / zeta + max(v_ext, 0.0))
            q = f + alpha * y[t] * (1.0 / zeta + v)
            rnew = (q - a * fx) / lnn
            for d in range(c):
                PN[u, d] = -a * p[d] / lnn  # (e_new - a w' Y) / L_nn, e_new = 0
            for d in range(D):
                y1[d] = PN[u, d]
            _chol_rank1(Ch, D, y1)
            for d in range(c):
                rho[d] += PN[u, d] * rnew
            for k in range(u):
                E[u, k] = e[k]
            Ld[u] = lnn
            rn[u] = rnew
            qn[u] = q
            zt[u] = zeta
            src[u] = t
            u += 1
            n_alive += 1
            if n_alive > budget:  # candidate D leaves: H gains its row and column
                for d2 in range(D + 1):
                    acc = H0[D, d2]
                    for i in range(u):
                        acc += PN[i, D] * PN[i, d2]
                    p[d2] = acc
                _chol_solve_lower(Ch, D, p, y1)
                diag = p[D]
                for d2 in range(D):
                    Ch[D, d2] = y1[d2]
                    diag -= y1[d2] * y1[d2]
                Ch[D, D] = math.sqrt(max(diag, 1e-300))
                D += 1
                n_alive -= 1
    return u, D, nfl, -1, _OK


# --------------------------------------------------------------------------- panels


def _forward(panels, K0: np.ndarray) -> np.ndarray:
    """L^-1 K0 (n x b, C-ordered) for L stored as panels [(off, R, T)].

    Row block j: ``W_j = T_j^-1 (K0_j - R_j W[:off_j])``. In Fortran terms (a
    C-ordered M is the F-ordered M'): ``W_j' -= W[:off]' R_j'`` is one dgemm and
    ``W_j' T_j' = rhs'`` one right-sided dtrsm, both in place.
    """
    W = np.array(K0, dtype=np.float64, order="C", copy=True)
    for off, R, T in panels:
        u = T.shape[0]
        Wj = W[off : off + u]
        if off:
            out = dgemm(-1.0, W[:off].T, R.T, beta=1.0, c=Wj.T, overwrite_c=1)
            if not np.shares_memory(out, Wj):  # pragma: no cover - f2py copied
                Wj[...] = out.T
        out = dtrsm(1.0, T.T, Wj.T, side=1, lower=0, overwrite_b=1)
        if not np.shares_memory(out, Wj):  # pragma: no cover - f2py copied
            Wj[...] = out.T
    return W


def _panel_times(panels, r: np.ndarray, n: int) -> np.ndarray:
    """L r for L stored as panels (the unlearning weights g / zeta = L r)."""
    out = np.zeros(n)
    for off, R, T in panels:
        u = T.shape[0]
        out[off : off + u] = T @ r[off : off + u] + (R @ r[:off] if off else 0.0)
    return out


def _backward(panels, Rv: np.ndarray) -> np.ndarray:
    """L'^-1 Rv (Rv of n rows, vector or matrix)."""
    X = np.array(Rv, dtype=np.float64, copy=True)
    for off, R, T in reversed(panels):
        u = T.shape[0]
        X[off : off + u] = solve_triangular(
            T, X[off : off + u], lower=True, trans="T", check_finite=False
        )
        if off:
            X[:off] -= R.T @ X[off : off + u]
    return X


# --------------------------------------------------------------------------- queue form


@njit(cache=True)
def _assemble_precision(KO, nO, KNO, KN, nN, kap, perm, a, zeta, out):
    """``out``: lower triangle ``a K + diag(1 / zeta)``, strict upper triangle ``K``,
    over the slots [O[:nO], N[:nN]] taken in the order ``perm`` (``zeta`` already in
    that order). K is read from the queue's Gram cache: the strict upper triangles of
    ``KO`` and ``KN``, ``KNO``, and ``kap`` on the diagonal. One pass, no temporaries."""
    n = nO + nN
    for i in range(n):
        si = perm[i]
        for j in range(i):
            sj = perm[j]
            lo = min(si, sj)
            hi = max(si, sj)
            if hi < nO:
                k = KO[lo, hi]
            elif lo >= nO:
                k = KN[lo - nO, hi - nO]
            else:
                k = KNO[hi - nO, lo]
            out[i, j] = a * k
            out[j, i] = k
        out[i, i] = a * kap[si] + 1.0 / zeta[i]


#: The queue form rebuilds its factor once N holds this fraction of the budget.
QUEUE_REBUILD = 0.5


class _Queue:
    """The "oldest" budget's Cholesky form (second-order rules, solver "cholesky").

    Removing the oldest support vector from an append-only factor would rewrite
    all of it. So the support set is split in two, like a queue made of two
    stacks: O, factored once in *reverse* entry order (its oldest is its last
    row, so removing it truncates the factor), and N, the rows appended since,
    in entry order. ``L = [[L_O, 0], [L_NO, L_N]]`` over [O[:n_O], N]: L_O is
    the leading block of the rebuilt factor, L_NO the N rows' entries at O's
    columns. When O's rows ``n_O - D .. n_O - 1`` leave, ``L_O`` is truncated and
    ``L_N`` takes their columns ``Lam`` of ``L_NO``: ``L_N L_N' + Lam Lam'`` is
    refactored by one blocked QR (LAPACK dtpqrt, 2 n_N^2 D flops), once per block.
    Inside a block the leavers are corrected by Woodbury (``_queue_walk``), so
    each round sees the model with exactly the budget. Once N holds
    ``QUEUE_REBUILD`` of the budget, all survivors become O again: one Cholesky
    factorisation (n^3 / 3 flops) from the Gram cache.

    Buffers (C-ordered; the Gram cache shares the square ones): ``LO`` (lower:
    L_O; strict upper: K(O, O)), ``LNO`` and ``KNO`` (N x O), ``LN`` (lower: L_N;
    strict upper: K(N, N)), ``rO``, ``rN`` (r = L^-1 (g / zeta)). Slots are the
    rows, [O[:n_O], N].
    """

    def __init__(self, LO: np.ndarray, qv, cap_n: int):
        """From ``LO`` made by ``_assemble_precision`` (factorised here, in place)."""
        n = LO.shape[0]
        if _blas.potrf_lower(LO):
            raise np.linalg.LinAlgError("the budgeted model's precision is not positive definite")
        self.LO = LO
        self.nO = n
        self.rO = np.array(qv, dtype=np.float64).reshape(n, 1)
        _blas.trsm_lower_left(LO, self.rO)
        self.nN = 0
        self._alloc(cap_n)

    def _alloc(self, cap_n: int) -> None:
        nO0 = self.LO.shape[0]
        old = getattr(self, "LN", None)
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

    @property
    def n(self) -> int:
        return self.nO + self.nN

    def assemble(self, kap, perm, a, zeta) -> np.ndarray:
        """The precision buffer of a rebuild in slot order ``perm`` (see
        ``_assemble_precision``)."""
        n = self.n
        out = np.empty((n, n))
        _assemble_precision(self.LO, self.nO, self.KNO, self.LN, self.nN, kap, perm, a, zeta, out)
        return out

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


# --------------------------------------------------------------------------- models


class BinaryDual:
    """One binary model in dual form: the positions of its support inputs in the
    shared store, and the solver's state.

    Two forms of the same model:

    - Cholesky (second-order rules with ``solver="cholesky"``, while no budget
      binds): ``L`` and ``gram`` as row panels, ``r`` and ``zeta`` per support
      vector.
    - explicit (``solver="explicit"``, first-order rules, and budgeted models
      once the budget binds): ``nu`` and ``Pi`` in capacity buffers, plus the
      inverse jittered Gram matrix for the "project" policy.

    Slots: support vector i lives in slot i; ``entry[i]`` is when it entered
    (removals move the last slot into the freed one, so the attributes sort by
    entry).
    """

    def __init__(self, solver: str, first_order: bool):
        self.first_order = first_order
        self.explicit = first_order or solver == "explicit"
        self.idx = np.zeros(0, dtype=np.int64)  # store positions, by slot
        self.entry = np.zeros(0, dtype=np.int64)  # entry time, by slot
        self.kap = np.zeros(0)  # k(x, x), by slot
        self.clock = 0  # support vectors ever added
        self.counter = 0  # removals so far (the random policy's draw counter)
        self.L: list[tuple[int, np.ndarray, np.ndarray]] = []  # (off, R, T)
        self.gram: list[tuple[int, np.ndarray]] = []
        self.r = np.zeros(0)
        self.zeta = np.zeros(0)
        self._nu = np.zeros(0)  # capacity buffers of the explicit form
        self._Pi = np.zeros((0, 0))
        self._kinv = np.zeros((0, 0))
        self._kl = np.zeros((3, 0))  # by slot: zeta, g (unlearning), v at x_p ("smallest")
        self._G = np.zeros((0, 0))  # Gram matrix of the support vectors ("smallest")
        self._nu_cache: np.ndarray | None = None
        self.q: _Queue | None = None  # the "oldest" budget's queue form
        self.qv = np.zeros(0)  # g / zeta by slot (queue form)

    @property
    def n(self) -> int:
        return int(self.idx.shape[0])

    def order(self) -> np.ndarray:
        """Slots in the order their support vectors entered."""
        return np.argsort(self.entry, kind="stable")

    def ensure_capacity(self, need: int, track_kinv: bool, track_kl: bool) -> None:
        cap = self._nu.shape[0]
        if need <= cap:
            return
        new = max(need, int(cap * 1.5) + 16)
        n = self.n

        def grown(A, square):
            B = np.zeros((new, new) if square else A.shape[:-1] + (new,))
            if square:
                B[:n, :n] = A[:n, :n]
            else:
                B[..., :n] = A[..., :n]
            return B

        self._nu = grown(self._nu, False)
        self._kl = grown(self._kl, False)
        if not self.first_order:
            self._Pi = grown(self._Pi, True)
        if track_kinv:
            self._kinv = grown(self._kinv, True)
        if track_kl or track_kinv:
            self._G = grown(self._G, True)

    def to_explicit(self, a: float, need: int, track_kinv: bool, track_kl: bool) -> None:
        """Switch the Cholesky form to nu/Pi (once, when a budget binds)."""
        n = self.n
        nu, Pi = self.nu(a), self.Pi(a)
        cap = max(need, n + 1)
        self.explicit = True
        self._nu = np.zeros(cap)
        self._nu[:n] = nu
        self._Pi = np.zeros((cap, cap))
        self._Pi[:n, :n] = Pi
        G = _dense_gram(self.gram, n) if n else np.zeros((0, 0))
        self._kinv = np.zeros((cap, cap)) if track_kinv else np.zeros((0, 0))
        if track_kinv and n:
            Gj = G.copy()
            Gj[np.diag_indices(n)] *= 1.0 + bud.PROJECT_JITTER
            self._kinv[:n, :n] = np.linalg.inv(Gj)
        # unlearning weights: M - a K = diag(1/zeta) and r = L^-1 (g / zeta)
        self._kl = np.zeros((3, cap))
        self._kl[0, :n] = self.zeta
        self._kl[1, :n] = self.zeta * _panel_times(self.L, self.r, n)
        self._G = np.zeros((cap, cap)) if (track_kl or track_kinv) else np.zeros((0, 0))
        if (track_kl or track_kinv) and n:
            self._G[:n, :n] = G
        if track_kl and n:
            self._kl[2, :n] = a * np.diagonal(G) + np.einsum("ij,ij->j", G, Pi @ G)
        self.L, self.gram = [], []
        self.r, self.zeta = np.zeros(0), np.zeros(0)

    def nu(self, a: float) -> np.ndarray:
        """The dual mean coefficients by slot (cached until the model changes)."""
        if self.q is not None:
            if self._nu_cache is None:
                L, r = self.q.factor()
                self._nu_cache = a * solve_triangular(L, r, lower=True, trans="T")
            return self._nu_cache.copy()
        if not self.explicit:
            if self._nu_cache is None:
                self._nu_cache = a * _backward(self.L, self.r) if self.n else np.zeros(0)
            return self._nu_cache.copy()
        return self._nu[: self.n].copy()

    def Pi(self, a: float) -> np.ndarray:
        """The dual covariance coefficients by slot, (n, n)."""
        n = self.n
        if self.first_order or n == 0:
            return np.zeros((n, n))
        if self.explicit:
            return self._Pi[:n, :n].copy()
        if self.q is not None:
            Linv = np.vstack(self.q.forward(np.eye(n)))
            return -(a * a) * (Linv.T @ Linv)
        Linv = _forward(self.L, np.eye(n))
        return -(a * a) * (Linv.T @ Linv)

    def variance(self, Ks: np.ndarray, kap: np.ndarray, a: float) -> np.ndarray:
        """v = a kappa + k' Pi k for each column of Ks = K(S, X) (rows by slot),
        floored as in learning at ``VAR_FLOOR * a * kappa``."""
        if self.first_order or self.n == 0:
            return a * kap
        if self.q is not None:
            WO, X = self.q.forward(Ks)
            v = a * kap - a * a * (np.einsum("ij,ij->j", WO, WO) + np.einsum("ij,ij->j", X, X))
        elif not self.explicit:
            W = _forward(self.L, Ks)
            v = a * kap - a * a * np.einsum("ij,ij->j", W, W)
        else:
            Pi = self._Pi[: self.n, : self.n]
            v = a * kap + np.einsum("ij,ij->j", Ks, Pi @ Ks)
        return np.maximum(v, VAR_FLOOR * a * kap)


def _dense_gram(panels, n: int) -> np.ndarray:
    """The symmetric Gram matrix held by its lower-triangular row panels."""
    G = np.zeros((n, n))
    for off, P in panels:
        u = P.shape[0]
        G[off : off + u, : off + u] = P
    return np.tril(G) + np.tril(G, -1).T


class DualModel:
    """The support store shared by the one-vs-rest models, and the models.

    ``store`` holds every input that entered some model's support set, once
    (dense rows, a CSR matrix, or for ``"precomputed"`` the training positions);
    ``pos`` their positions in the training stream.
    """

    def __init__(
        self,
        kernel: Kernel,
        rule: RuleParams,
        n_models: int,
        solver: str,
        block,
        budget: int | None = None,
        policy: str = "project",
        seed: int = 0,
    ):
        self.kernel = kernel
        self.rule = rule
        self.a = rule.a
        self.solver = solver
        self.block_size = int(block)
        self.budget = budget
        self.policy = bud.POLICIES.index(policy)
        self.seed = np.uint64(seed)
        first = rule.rule in FIRST_ORDER
        self.models = [BinaryDual(solver, first) for _ in range(n_models)]
        self.n_store = 0
        self.store = None
        self.pos = np.zeros(0, dtype=np.int64)
        self.n_seen = 0  # training rows seen by partial_fit (default positions)
        self.broken: str | None = None  # why the model is unusable (learn's docstring)

    def set_rule(self, rule: RuleParams) -> None:
        if rule.a != self.a:
            raise ValueError(
                f"a={rule.a!r} differs from the a={self.a!r} this model started with; "
                "the prior scale is part of the stored state: call fit to start over"
            )
        self.rule = rule

    # ------------------------------------------------------------ kernel access

    def _kernel_store(self, XB, n_store: int) -> np.ndarray:
        """K(store[:n_store], XB), (n_store, b)."""
        if n_store == 0:
            return np.zeros((0, XB.shape[0]))
        if self.kernel.precomputed:
            return np.ascontiguousarray(_dense(XB[:, self.pos[:n_store]]).T)
        return self.kernel.block(self.store[:n_store], XB)

    def _kernel_block(self, XB, cols: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(K(XB, XB), kappa) for a training block whose rows have positions cols."""
        if self.kernel.precomputed:
            if cols.max() >= XB.shape[1]:
                first = int(cols[cols >= XB.shape[1]].min())
                raise ValueError(
                    f"kernel='precomputed': training row {first} needs column "
                    f"{first} (its kernel with itself) but X has {XB.shape[1]} "
                    "columns; rows must hold kernel values against all training inputs, "
                    "in stream order"
                )
            Kbb = np.ascontiguousarray(_dense(XB[:, cols]))
            Kbb = 0.5 * (Kbb + Kbb.T)
            return Kbb, np.ascontiguousarray(np.diagonal(Kbb))
        Kbb = self.kernel.block(XB, XB)
        Kbb = 0.5 * (Kbb + Kbb.T)  # exact symmetry for the walk
        if self.kernel._f is None:
            kap = self.kernel.diag(XB)
        else:
            kap = np.ascontiguousarray(np.diagonal(Kbb))
        return Kbb, kap

    def _append_store(self, XB, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """Add block rows to the store; return their store positions."""
        k = rows.shape[0]
        first = self.n_store
        self.pos = np.concatenate([self.pos, cols[rows]])
        if not self.kernel.precomputed:
            new = XB[rows]
            if self.store is not None:  # the store keeps the format it began with
                if sp.issparse(self.store) and not sp.issparse(new):
                    new = sp.csr_matrix(new)
                elif not sp.issparse(self.store) and sp.issparse(new):
                    new = new.toarray()
            if sp.issparse(new):
                self.store = (
                    new.tocsr()
                    if self.store is None
                    else sp.vstack([self.store[: self.n_store], new], format="csr")
                )
            else:
                cap = 0 if self.store is None else self.store.shape[0]
                if first + k > cap:
                    buf = np.empty((max(first + k, int(cap * 1.5) + 16), XB.shape[1]))
                    if first:
                        buf[:first] = self.store[:first]
                    self.store = buf
                self.store[first : first + k] = new
        self.n_store += k
        return np.arange(first, first + k)

    # ------------------------------------------------------------ learning

    def learn(self, X, Y: np.ndarray, out: np.ndarray, positions=None):
        """One pass over X (dense or CSR) in order; Y (n, K) in {-1, +1}; out (n, K)
        gets the decision values seen before each update; ``positions`` are the
        rows' positions in the training data (default: continuing the stream).
        Returns (n_updates, n_mistakes, n_floored) per model.

        All or nothing: an error part-way (a kernel found not positive
        semi-definite, a step out of float64's range, an interrupt) leaves the model
        as it was before the call. The append-only forms (Cholesky panels, the
        first-order coefficients) are cut back to their length at the call's start;
        the forms updated in place (the explicit nu/Pi, a budget's nu/Pi) are
        restored from a copy taken at the start (O(n_sv^2), about one round's
        work). The "oldest" budget's queue form is too large to copy per call: an
        error there marks the model unusable (``broken``) instead."""
        self.check_usable()
        if any(m.q is not None for m in self.models):
            saved, cut = None, None
        elif self.budget is None and all(not m.explicit or m.first_order for m in self.models):
            saved, cut = None, self._mark()
        else:
            saved, cut = copy.deepcopy(self.__dict__), None
        try:
            return self._learn(X, Y, out, positions)
        except BaseException as exc:
            if cut is not None:
                self._cut_back(cut)
            elif saved is not None:
                self.__dict__.clear()
                self.__dict__.update(saved)
            else:
                self.broken = f"{type(exc).__name__}: {exc}"
            raise

    def check_usable(self) -> None:
        if getattr(self, "broken", None) is not None:
            raise RuntimeError(
                "this model was left part-way through a partial_fit call by an error "
                f'({self.broken}); the "oldest" budget\'s queue form cannot be restored, so '
                "the model is unusable: call fit to start over"
            )

    def _mark(self) -> tuple:
        """What an append-only form needs to be cut back to this moment."""
        per_model = [
            (
                m.n,
                len(m.L),
                len(m.gram),
                m.r.shape[0],
                m.zeta.shape[0],
                m.kap.shape[0],
                m.entry.shape[0],
                m.clock,
                m.counter,
            )
            for m in self.models
        ]
        return self.n_store, self.pos.shape[0], self.n_seen, per_model

    def _cut_back(self, mark: tuple) -> None:
        n_store, n_pos, n_seen, per_model = mark
        self.n_store, self.pos, self.n_seen = n_store, self.pos[:n_pos], n_seen
        for m, (n, nL, ng, nr, nz, nk, ne, clock, counter) in zip(
            self.models, per_model, strict=True
        ):
            m.idx = m.idx[:n]
            del m.L[nL:], m.gram[ng:]
            m.r, m.zeta, m.kap, m.entry = m.r[:nr], m.zeta[:nz], m.kap[:nk], m.entry[:ne]
            m.clock, m.counter = clock, counter
            m._nu_cache = None

    def _learn(self, X, Y: np.ndarray, out: np.ndarray, positions=None):
        K = len(self.models)
        n = X.shape[0]
        if positions is None:
            positions = self.n_seen + np.arange(n)
        positions = np.asarray(positions, dtype=np.int64)
        if n:
            self.n_seen = max(self.n_seen, int(positions.max()) + 1)
        n_upd = np.zeros(K, dtype=np.int64)
        n_mis = np.zeros(K, dtype=np.int64)
        n_fl = np.zeros(K, dtype=np.int64)
        b = self.block_size
        for lo in range(0, n, b):
            hi = min(n, lo + b)
            XB = X[lo:hi]
            cols = positions[lo:hi]
            Kbb, kap = self._kernel_block(XB, cols)
            Ks = self._kernel_store(XB, self.n_store)
            entered: list[np.ndarray] = []
            slots: list[np.ndarray] = []
            for k, model in enumerate(self.models):
                yk = np.ascontiguousarray(Y[lo:hi, k])
                f_blk, src, ks, nfl = self._walk_model(model, _rows(Ks, model), Kbb, kap, yk, cols)
                out[lo:hi, k] = f_blk
                n_mis[k] += np.count_nonzero(np.where(f_blk >= 0.0, 1.0, -1.0) != yk)
                n_upd[k] += src.shape[0]
                n_fl[k] += nfl
                entered.append(src)
                slots.append(ks)
            # this block's new support inputs enter the store once, whoever took them
            union = np.unique(np.concatenate(entered)) if entered else np.zeros(0, int)
            where = np.full(hi - lo, -1, dtype=np.int64)
            if union.size:
                where[union] = self._append_store(XB, union, cols)
            for model, ks in zip(self.models, slots, strict=True):
                old = model.idx
                model.idx = np.where(
                    ks >= 0,
                    old[np.maximum(ks, 0)] if old.size else 0,
                    where[np.maximum(-1 - ks, 0)],
                )
            if self.budget is not None:
                self._compact_store()
        return n_upd, n_mis, n_fl

    def _walk_model(self, model: BinaryDual, K0, Kbb, kap, yk, cols):
        """Walk one block for one model; returns (f, the block inputs that entered,
        each slot's kernel source after the block, floored rounds)."""
        rp = self.rule
        a = self.a
        b = yk.shape[0]
        f_blk = np.empty(b)
        src = np.empty(b, dtype=np.int64)
        n0 = model.n
        model._nu_cache = None
        B = self.budget
        ks = np.arange(n0, dtype=np.int64)  # support at the block's start: rows of K0
        t0 = 0
        nfl = 0
        u = 0
        if model.q is not None:
            entered, ks, nfl, bad, status = self._queue_run(model, K0, Kbb, kap, yk, 0, ks, f_blk)
            self._raise(status, int(cols[bad]) if bad >= 0 else -1)
            src_all = np.concatenate(entered) if entered else np.zeros(0, dtype=np.int64)
            return f_blk, src_all, ks, nfl
        if not model.explicit:
            limit = b if B is None else B - n0
            u, nfl, stop, status = self._cholesky_block(model, K0, Kbb, kap, yk, limit, src, f_blk)
            if status == _STOP and self._queue_mode:
                # the budget binds at block input `stop`: from there on the queue form
                ks = self._to_queue(model, np.concatenate([ks, -1 - src[:u]]), u)
                entered, ks, nfl2, bad, status = self._queue_run(
                    model, K0, Kbb, kap, yk, stop, ks, f_blk
                )
                self._raise(status, int(cols[bad]) if bad >= 0 else -1)
                return f_blk, np.concatenate([src[:u], *entered]), ks, nfl + nfl2
            if status == _STOP:
                # the budget binds at block input `stop`: the rows made so far are in
                # the factor; the model continues in the explicit form from there
                ks = np.concatenate([ks, -1 - src[:u]])
                t0 = stop
                model.idx = np.concatenate([model.idx, np.full(u, -1)])  # learn() sets them
                model.to_explicit(
                    a, min(n0 + u + b - stop, B) + 1, self._track_kinv, self._track_kl
                )
            else:
                self._raise(status, int(cols[stop]) if stop >= 0 else -1)
                return f_blk, src[:u].copy(), np.concatenate([ks, -1 - src[:u]]), nfl
        n_now = ks.shape[0]
        cap = n_now + (b - t0) + 1 if B is None else min(n_now + (b - t0), B) + 1
        model.ensure_capacity(cap, self._track_kinv, self._track_kl)
        kap_sv = np.zeros(cap)
        entry = np.zeros(cap, dtype=np.int64)
        kss = np.zeros(cap, dtype=np.int64)
        kap_sv[:n_now] = model.kap
        entry[:n_now] = model.entry
        kss[:n_now] = ks
        work = np.empty(cap)
        kv = np.empty(cap)
        c = np.empty(cap)
        src2 = np.empty(b, dtype=np.int64)
        n_end, counter, clock, u2, nfl2, bad, status = _explicit_walk(
            np.ascontiguousarray(K0),
            Kbb,
            kap,
            yk,
            t0,
            model._nu,
            model._Pi,
            model._kinv,
            model._G,
            model._kl[0],
            model._kl[1],
            model._kl[2],
            kap_sv,
            entry,
            kss,
            n_now,
            np.inf if B is None else float(B),
            self.policy,
            not model.first_order,
            self._track_kinv,
            self._track_kl,
            rp.rule,
            rp.phi,
            rp.C,
            rp.r,
            a,
            self.seed,
            model.counter,
            model.clock,
            f_blk,
            src2,
            kv,
            c,
            work,
            # Pi's recursion drifts in floating point: a v below zero from a kernel known to
            # be positive semi-definite is that drift, floored (and counted), not an error
            np.inf if self.kernel.known_psd else PSD_TOL,
        )
        self._raise(status, int(cols[bad]) if bad >= 0 else -1, explicit=True)
        model.counter = int(counter)
        model.clock = int(clock)
        model.kap = kap_sv[:n_end].copy()
        model.entry = entry[:n_end].copy()
        src_all = np.concatenate([src[:u], src2[:u2]])
        return f_blk, src_all, kss[:n_end].copy(), nfl + nfl2

    @property
    def _track_kinv(self) -> bool:
        return self.budget is not None and self.policy == bud.PROJECT

    @property
    def _track_kl(self) -> bool:
        return self.budget is not None and self.policy == bud.SMALLEST

    def _cholesky_block(self, model, K0, Kbb, kap, yk, limit, src, f_blk):
        """The Cholesky walk through one block, then its new rows appended to the
        factor and the Gram cache. Returns (n_new, n_floored, index, status)."""
        rp = self.rule
        a = self.a
        b = yk.shape[0]
        n0 = model.n
        if n0:
            W0 = _forward(model.L, K0)
            G = dgemm(1.0, W0.T, W0.T, trans_b=1)  # W0' W0, symmetric (b x b)
            rW = dgemv(1.0, W0.T, model.r)  # W0' r
        else:
            W0 = np.zeros((0, b))
            G = np.zeros((b, b))
            rW = np.zeros(b)
        E = np.empty((b, b))
        Ld = np.empty(b)
        rn = np.empty(b)
        zt = np.empty(b)
        e = np.empty(b)
        u, nfl, stop, status = _cholesky_walk(
            np.ascontiguousarray(G),
            np.ascontiguousarray(rW),
            Kbb,
            kap,
            yk,
            rp.rule,
            rp.phi,
            rp.C,
            rp.r,
            a,
            limit,
            E,
            Ld,
            rn,
            zt,
            src,
            f_blk,
            e,
        )
        if status not in (_OK, _STOP):
            return u, nfl, stop, status
        if u:
            s = src[:u]
            R = np.ascontiguousarray(W0[:, s].T)
            R *= a
            T = a * np.tril(E[:u, :u], -1)
            T[np.arange(u), np.arange(u)] = Ld[:u]
            model.L.append((n0, R, T))
            model.r = np.concatenate([model.r, rn[:u]])
            model.zeta = np.concatenate([model.zeta, zt[:u]])
            Gp = np.empty((u, n0 + u))
            Gp[:, :n0] = K0[:, s].T
            Gp[:, n0:] = np.tril(Kbb[np.ix_(s, s)])
            model.gram.append((n0, Gp))
            model.kap = np.concatenate([model.kap, kap[s]])
            model.entry = np.concatenate([model.entry, model.clock + np.arange(u)])
            model.clock += u
        return u, nfl, stop, status

    # ------------------------------------------------------------ queue form

    @property
    def _queue_mode(self) -> bool:
        return (
            self.budget is not None
            and self.policy == bud.OLDEST
            and self.solver == "cholesky"
            and self.rule.rule not in FIRST_ORDER
        )

    def _to_queue(self, model: BinaryDual, ks: np.ndarray, n_new: int) -> np.ndarray:
        """Switch the panel form (n_new rows appended in this block) to the queue
        form, once, when the budget binds. Returns ks in the new slot order."""
        model.idx = np.concatenate([model.idx, np.full(n_new, -1)])  # learn() sets them
        n = ks.shape[0]
        K = _dense_gram(model.gram, n)
        model.qv = _panel_times(model.L, model.r, n)  # g / zeta = L r
        model.L, model.gram, model.r = [], [], np.zeros(0)
        return self._queue_rebuild(model, ks, K)

    def _queue_rebuild(self, model: BinaryDual, ks: np.ndarray, K=None) -> np.ndarray:
        """All support vectors become O, in reverse entry order (one Cholesky
        factorisation). ``K``: the dense Gram matrix when coming from the panel
        form. Returns ks permuted alike."""
        perm = np.argsort(-model.entry, kind="stable")
        kap = model.kap
        model.entry = model.entry[perm]
        model.kap = model.kap[perm]
        model.zeta = model.zeta[perm]
        model.qv = model.qv[perm]
        if K is None:
            M = model.q.assemble(kap, perm, self.a, model.zeta)
        else:  # the dense Gram matrix read as an O-only cache
            M = np.empty_like(K)
            none = np.zeros((0, 0))
            _assemble_precision(K, K.shape[0], none, none, 0, kap, perm, self.a, model.zeta, M)
        cap = int(QUEUE_REBUILD * self.budget) + self.block_size + 1
        model.q = _Queue(M, model.qv, cap)
        return ks[perm]

    def _queue_run(self, model: BinaryDual, K0, Kbb, kap, yk, t0, ks, f_blk):
        """Block inputs t0.. in the queue form (``_Queue``, ``_queue_walk``).
        Returns (the block inputs that entered, ks, floored rounds, bad index,
        status)."""
        rp = self.rule
        a = self.a
        B = self.budget
        b = yk.shape[0]
        entered = []
        nfl = 0
        while t0 < b:
            Q = model.q
            bs = b - t0
            nO, nN = Q.nO, Q.nN
            n = nO + nN
            if nN + bs > Q.LN.shape[0]:
                Q._alloc(nN + bs + max(16, nN // 2))
            K0c = np.empty((n, bs))
            old = ks >= 0
            K0c[old] = K0[ks[old], t0:]
            K0c[~old] = Kbb[-1 - ks[~old], t0:]
            Kss = np.ascontiguousarray(Kbb[t0:, t0:])
            c = min(nO, bs, max(0, n + bs - B))
            WO, X = Q.forward(K0c)  # W0 = L^-1 K0 over [O, N] (leavers included)
            G = np.empty((bs, bs))
            _blas.gemm_sub(1.0, WO, WO, 0.0, G, trans_a=True)
            _blas.gemm_sub(1.0, X, X, 1.0, G, trans_a=True)
            rW = np.empty((bs, 1))
            _blas.gemm_sub(1.0, WO, Q.rO[:nO], 0.0, rW, trans_a=True)
            _blas.gemm_sub(1.0, X, Q.rN[:nN], 1.0, rW, trans_a=True)
            # Y0 = L^-1 E_cands: on O it lives on the tail T (the candidates), where
            # it is L_O[T, T]^-1; on N it is -L_N^-1 L_NO[:, T] L_O[T, T]^-1.
            # Columns in leaving order (candidate d is O row nO - 1 - d).
            T = slice(nO - c, nO)
            YO = np.zeros((c, c))
            if c:
                YO = solve_triangular(
                    np.tril(Q.LO[T, T]), np.eye(c), lower=True, check_finite=False
                )[:, ::-1].copy()
            YN = np.zeros((nN, c))
            _blas.gemm_sub(-1.0, Q.LNO[:nN, T], YO, 0.0, YN)
            _blas.trsm_lower_left(Q.LN[:nN, :nN], YN)
            P0 = np.empty((c, bs))
            _blas.gemm_sub(1.0, YO, WO[T], 0.0, P0, trans_a=True)
            _blas.gemm_sub(1.0, YN, X, 1.0, P0, trans_a=True)
            H0 = np.empty((c, c))
            _blas.gemm_sub(1.0, YO, YO, 0.0, H0, trans_a=True)
            _blas.gemm_sub(1.0, YN, YN, 1.0, H0, trans_a=True)
            rho0 = np.empty((c, 1))
            _blas.gemm_sub(1.0, YO, Q.rO[T], 0.0, rho0, trans_a=True)
            _blas.gemm_sub(1.0, YN, Q.rN[:nN], 1.0, rho0, trans_a=True)
            E = np.empty((bs, bs))
            Ld, rn, qn, zt = (np.empty(bs) for _ in range(4))
            src = np.empty(bs, dtype=np.int64)
            PN = np.empty((bs, c))
            f_sub = np.empty(bs)
            u, D, fl, stop, status = _queue_walk(
                G,
                np.ascontiguousarray(rW[:, 0]),
                P0,
                H0,
                np.ascontiguousarray(rho0[:, 0]),
                Kss,
                np.ascontiguousarray(kap[t0:]),
                np.ascontiguousarray(yk[t0:]),
                rp.rule,
                rp.phi,
                rp.C,
                rp.r,
                a,
                n,
                B,
                E,
                Ld,
                rn,
                qn,
                zt,
                src,
                PN,
                f_sub,
            )
            f_blk[t0:] = f_sub
            nfl += fl
            if status not in (_OK, _STOP):
                return entered, ks, nfl, t0 + stop, status
            if u:
                # the new rows extend the factor of everything at the block's start
                S = src[:u]
                rows = slice(nN, nN + u)
                Q.LNO[rows, :nO] = a * WO[:, S].T
                Q.LNO[rows, nO:] = 0.0
                Q.KNO[rows, :nO] = K0c[:nO, S].T
                Q.LN[rows, :nN] = a * X[:, S].T
                blk = np.triu(Kss[np.ix_(S, S)], 1) + a * np.tril(E[:u, :u], -1)
                blk[np.diag_indices(u)] = Ld[:u]
                Q.LN[rows, nN : nN + u] = blk
                Q.LN[:nN, nN : nN + u] = K0c[nO:, S]
                Q.rN[rows, 0] = rn[:u]
                Q.nN = nN + u
                model.entry = np.concatenate([model.entry, model.clock + np.arange(u)])
                model.clock += u
                model.kap = np.concatenate([model.kap, kap[t0 + S]])
                model.zeta = np.concatenate([model.zeta, zt[:u]])
                model.qv = np.concatenate([model.qv, qn[:u]])
                ks = np.concatenate([ks, -1 - (t0 + S)])
                entered.append(t0 + S)
            if D:
                nO2 = nO - D
                _blas.tpqrt_update(Q.LN[: Q.nN, : Q.nN], Q.LNO[: Q.nN, nO2:nO])
                Q.LNO[: Q.nN, nO2:nO] = 0.0
                Q.nO = nO2
                keep = np.r_[0:nO2, nO : ks.shape[0]]
                model.entry, model.kap = model.entry[keep], model.kap[keep]
                model.zeta, model.qv, ks = model.zeta[keep], model.qv[keep], ks[keep]
                Q.refresh_rN(model.qv[nO2:])
            if status == _STOP:
                t0 += stop
                ks = self._queue_rebuild(model, ks)
            else:
                break
        if model.q.nN > QUEUE_REBUILD * B:
            ks = self._queue_rebuild(model, ks)
        return entered, ks, nfl, -1, _OK

    def _compact_store(self) -> None:
        """Drop store rows no model refers to any more (budgets remove support
        vectors): memory stays flat on long streams."""
        used = np.unique(np.concatenate([m.idx for m in self.models]))
        if used.size == self.n_store or used.size > self.n_store // 2:
            return
        new_pos = np.full(self.n_store, -1, dtype=np.int64)
        new_pos[used] = np.arange(used.size)
        self.pos = self.pos[used]
        if not self.kernel.precomputed:
            rows = self.store[used]
            self.store = rows.tocsr() if sp.issparse(rows) else np.ascontiguousarray(rows)
        self.n_store = int(used.size)
        for m in self.models:
            m.idx = new_pos[m.idx]

    def _raise(self, status: int, row: int, explicit: bool = False) -> None:
        if status == _OK:
            return
        if status == _NOT_PSD:
            hint = (
                " In the explicit nu/Pi form (solver='explicit', or a budget other than "
                "'oldest' once it binds) this also happens when Pi's recursion loses "
                "positive definiteness in floating point; with the built-in kernels that "
                "is floored and counted instead, and solver='cholesky' without a budget "
                "keeps it positive definite by construction."
                if explicit
                else ""
            )
            raise ValueError(
                f"kernel {self.kernel.name!r} is not positive semi-definite: at training "
                f"row {row} the margin variance a k(x,x) + k' Pi k came out below "
                f"-{PSD_TOL:g} a k(x,x) (or k(x,x) < 0). CW needs a Mercer kernel.{hint}"
            )
        if explicit and not self.models[0].first_order:
            advice = (
                "in the explicit nu/Pi form (solver='explicit', or a budget other than "
                "'oldest' once it binds), Pi's recursion loses precision when the variance "
                "collapses or the features have very different scales: standardise X, or "
                "keep a Cholesky factor (solver='cholesky' without a budget, or "
                "budget_policy='oldest')"
            )
        else:
            advice = "rescale X"
        if self.rule.rule in ("stdev", "var"):
            advice += ", or use a soft rule such as SCW or AROW"
        raise FloatingPointError(
            f"non-finite margin or step at training row {row}: the model left float64's "
            f"range ({advice})"
        )

    # ------------------------------------------------------------ prediction

    def _kernel_test(self, X, n_store: int) -> np.ndarray:
        """K(store, X) for new data, (n_store, n)."""
        if n_store == 0:
            return np.zeros((0, X.shape[0]))
        if self.kernel.precomputed:
            return np.ascontiguousarray(_dense(X[:, self.pos[:n_store]]).T)
        return self.kernel.block(self.store[:n_store], X)

    def _kappa_test(self, X) -> np.ndarray:
        if self.kernel.precomputed:
            raise ValueError(
                "predict_proba with kernel='precomputed' needs k(x, x) of the new inputs: "
                "not available from rows of K(X, X_train)"
            )
        return self.kernel.diag(X)

    def decision(self, X, with_variance: bool = False, chunk: int = 1024):
        """(f, v) for new data, each (n, K); v is None unless asked for."""
        self.check_usable()
        n = X.shape[0]
        K = len(self.models)
        F = np.empty((n, K))
        V = np.empty((n, K)) if with_variance else None
        nus = [m.nu(self.a) for m in self.models]
        for lo in range(0, n, chunk):
            hi = min(n, lo + chunk)
            XB = X[lo:hi]
            Ks = self._kernel_test(XB, self.n_store)
            kap = self._kappa_test(XB) if with_variance else None
            for k, model in enumerate(self.models):
                K0 = _rows(Ks, model)
                F[lo:hi, k] = nus[k] @ K0 if model.n else 0.0
                if with_variance:
                    V[lo:hi, k] = model.variance(K0, kap, self.a)
        return F, V


def _dense(M) -> np.ndarray:
    return M.toarray() if sp.issparse(M) else np.asarray(M)


def _rows(Ks: np.ndarray, model: BinaryDual) -> np.ndarray:
    """The rows of K(store, X) for a model's support vectors, by slot."""
    n = model.n
    if n == Ks.shape[0] and np.array_equal(model.idx, np.arange(n)):
        return Ks
    return Ks[model.idx]
