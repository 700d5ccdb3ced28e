"""Primal learners for the linear kernel: full and diagonal covariance.

State is kept in plain arrays with a leading model axis (one binary model per
one-vs-rest class; ``K = 1`` for a binary problem):

- ``mu``:    (K, d) means;
- ``sigma``: (K, d, d) full covariances, or (K, d) diagonals;
- ``Y``:     (n, K) labels in {-1, +1} for each binary model;
- ``out``:   (n, K) decision values ``mu . x`` *before* each round's update
  (what the online protocol predicts from), written by every engine.

Every engine returns ``(n_updates, n_mistakes, n_floored)`` as (K,) integer
arrays and changes ``mu``/``sigma`` in place. ``n_floored`` counts the rounds
whose margin variance was raised to the floor ``VAR_FLOOR * a * |x|^2``
(:data:`kernelcw.rules.VAR_FLOOR`).

Full covariance, blocked (``doc/dual-form.md`` section 5)
----------------------------------------------------------------
A round-by-round rank-one update reads Sigma twice and writes it once per round
(memory-bound). Inside a block of ``b`` inputs ``X_B`` starting from
``(mu_0, Sigma_0)`` every update is a rank-one term
``Sigma_t = Sigma_0 - sum_{j<t} beta_j z_j z_j'`` with ``z_j = Sigma_j x_j``.
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
compute-bound; the results equal the round-by-round recursion to rounding.

Diagonal covariance (JMLR 2012 section 6)
-----------------------------------------
``Sigma = diag(s)``, one round at a time, touching only the non-zeros of ``x``
(dense rows are walked as all-index rows). With ``t_p = s_p x_p^2`` and
``v = sum_p t_p``, the mean step is ``mu_p += alpha y s_p x_p`` and

- ``"kl"``: diagonalise the precision update, ``1/s_p += zeta x_p^2``;
- ``"l2"``: diagonalise the covariance update, ``s_p -= beta (s_p x_p)^2``,
  evaluated as ``s_p (1 + zeta (v - t_p)) / (1 + zeta v)`` (equal, and never
  negative, as ``1 - beta v`` can be tiny);
- ``"exact"``: solve the problem restricted to diagonal covariances exactly.
  Its KKT conditions give ``1/s_p += zeta x_p^2`` with ``zeta`` the root of an
  increasing function of one variable (see :func:`_exact_zeta`), bracketed by
  the full-covariance ``zeta`` of the same (m, v) and a closed-form bound, and
  found by a safeguarded Newton-bisection iteration to machine precision.
  AROW's (and SOP's) mean and covariance decouple, so its exact diagonal equals ``"kl"``.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp
from numba import njit

from .rules import (
    AROW,
    DIAG_METHODS,
    PA2,
    SCW1,
    SCW2,
    SOP,
    VAR,
    VAR_FLOOR,
    RuleParams,
    cw_stdev,
    scw2,
    step,
)

__all__ = [
    "DIAG_METHODS",
    "RuleParams",
    "default_block_size",
    "full_fit",
    "diag_fit",
]

_KL, _L2, _EXACT = 0, 1, 2


def _raise_nonfinite(row: int) -> None:
    raise FloatingPointError(
        f"non-finite margin or step at input row {row}: the model left float64's "
        "range (rescale X, or use a soft rule such as SCW or AROW)"
    )


# --------------------------------------------------------------------------- full


def default_block_size(d: int) -> int:
    """Block length for the full-covariance learner (a heuristic).

    Per input the block products cost O(d^2 + d b) and the walk O(b) per update,
    so blocks much longer than ``d`` waste work. At d = 784, b = 256 was the
    fastest of 32..512 (``python -m benchmarks.bench_primal_full``).
    """
    return int(min(256, max(8, d // 2)))


@njit(cache=True)
def _full_walk(C0, F, sq, y, rule, phi, C, r, a, Q, R, ay, beta, upd, f_out):
    """Walk one block in b x b space (module docstring).

    ``sq`` holds |x|^2 of the block's rows (for the variance floor). ``Q`` and ``R``
    are scratch of the full block size; only their leading b x b part is used, so a
    short last block needs no second (non-contiguous) compiled specialisation.
    Returns (n_updated, n_floored, bad_row).
    """
    b = F.shape[0]
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
        f_out[t] = f
        vmin = VAR_FLOOR * a * sq[t]
        if v < vmin:
            v = vmin
            nfl += 1
        alpha, bet, _ = step(rule, y[t] * f, v, phi, C, r)
        if not (math.isfinite(alpha) and math.isfinite(bet) and math.isfinite(f)):
            return nu, nfl, t
        if alpha > 0.0:
            ay[t] = alpha * y[t]
            beta[t] = bet
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
    return nu, nfl, -1


def _dense_block(X, start: int, stop: int) -> np.ndarray:
    if sp.issparse(X):
        return X[start:stop].toarray()
    return X[start:stop]


def full_fit(mu, sigma, X, Y, params: RuleParams, out, block_size: int | None = None):
    """Second-order rules with full covariance, processed in blocks.

    ``mu`` (K, d), ``sigma`` (K, d, d) C-contiguous float64, changed in place;
    ``X`` (n, d) dense or CSR; ``Y`` (n, K) in {-1, +1}; ``out`` (n, K).
    """
    if params.first_order:
        raise ValueError("first-order rules keep Sigma = a I: use diag_fit")
    n, d = X.shape
    K = mu.shape[0]
    b = default_block_size(d) if block_size is None else int(block_size)
    n_upd = np.zeros(K, dtype=np.int64)
    n_mis = np.zeros(K, dtype=np.int64)
    n_fl = np.zeros(K, dtype=np.int64)
    Q = np.empty((b, b))
    R = np.empty((b, b))
    ay = np.empty(b)
    beta = np.empty(b)
    upd = np.empty(b, dtype=np.int64)
    f_blk = np.empty(b)
    for start in range(0, n, b):
        stop = min(n, start + b)
        XB = np.ascontiguousarray(_dense_block(X, start, stop))
        sq = np.einsum("ij,ij->i", XB, XB)
        m = stop - start
        pending = []  # every model walks the block before any is changed: a block is all or
        for k in range(K):  # nothing, also across the one-vs-rest models
            P = sigma[k] @ XB.T  # d x m
            C0 = XB @ P  # m x m
            F = XB @ mu[k]
            yk = np.ascontiguousarray(Y[start:stop, k])
            nu, nfl, bad = _full_walk(
                C0,
                F,
                sq,
                yk,
                params.rule,
                params.phi,
                params.C,
                params.r,
                params.a,
                Q,
                R,
                ay[:m],
                beta[:m],
                upd[:m],
                f_blk[:m],
            )
            if bad >= 0:
                _raise_nonfinite(start + bad)
            idx = upd[:nu].copy()
            pending.append(
                (k, P, R[idx, :m].copy(), ay[idx].copy(), beta[idx].copy(), f_blk[:m].copy(), nfl)
            )
        for k, P, Ru, ayu, betau, f, nfl in pending:
            yk = Y[start:stop, k]
            out[start:stop, k] = f
            n_mis[k] += np.count_nonzero(np.where(f >= 0.0, 1.0, -1.0) != yk)
            n_upd[k] += Ru.shape[0]
            n_fl[k] += nfl
            if Ru.shape[0]:  # Ru: (updates, m)
                mu[k] += P @ (ayu @ Ru)
                W = P @ (Ru.T * np.sqrt(betau))
                sigma[k] -= W @ W.T
    return n_upd, n_mis, n_fl


# --------------------------------------------------------------------------- diagonal


@njit(cache=True)
def _u_and_du(z, idx, val, s):
    """u(z) = sum t/(1 + z t) and du/dz = -sum t^2/(1 + z t)^2, t = s_p x_p^2."""
    u = 0.0
    du = 0.0
    for q in range(idx.shape[0]):
        x = val[q]
        t = s[idx[q]] * x * x
        w = 1.0 / (1.0 + z * t)
        u += t * w
        du -= (t * w) * (t * w)
    return u, du


@njit(cache=True)
def _solve_increasing(kind, lo, hi, m, cst, phi, target, idx, val, s):
    """Root of an increasing function H on [lo, hi] (H(lo) <= 0 <= H(hi)).

    kind 0 (Stdev family): H(z) = m + sqrt(u(z)) (cst z - phi^2) / phi
    kind 1 (Var):          H(z) = m + z cst / (2 phi) - phi u(z)
    kind 2 (SCW-I cap):    H(z) = z sqrt(u(z)) - target
    Newton steps from the current point, kept inside the bracket (bisection
    otherwise), until the bracket cannot shrink in float64.
    """
    z = lo
    for _ in range(200):
        u, du = _u_and_du(z, idx, val, s)
        if kind == 0:
            su = math.sqrt(u)
            h = m + su * (cst * z - phi * phi) / phi
            dh = (0.5 * du / su) * (cst * z - phi * phi) / phi + su * cst / phi
        elif kind == 1:
            h = m + z * cst / (2.0 * phi) - phi * u
            dh = cst / (2.0 * phi) - phi * du
        else:
            su = math.sqrt(u)
            h = z * su - target
            dh = su + z * 0.5 * du / su
        if h == 0.0:
            return z
        if h < 0.0:
            lo = z
        else:
            hi = z
        if not hi - lo > 2.2e-16 * hi:
            break
        zn = z - h / dh if dh > 0.0 else -1.0
        if not (lo < zn < hi):
            zn = 0.5 * (lo + hi)
        elif abs(zn - z) <= 4.4e-16 * zn:
            return zn
        z = zn
    return 0.5 * (lo + hi) if lo < hi else z


@njit(cache=True)
def _exact_zeta(rule, m, v, phi, C, r, idx, val, s):
    """(alpha, zeta) of the exact diagonal problem; the update happens (caller checked).

    CW-Stdev/SCW: KKT give mu = mu_0 + alpha y Sigma_0 x, 1/s_p += zeta x_p^2 with
    zeta = alpha phi / sqrt(u), u = sum t/(1 + zeta t) and a tight constraint
    m + alpha c = phi sqrt(u) (c = v; SCW-II: c = v + 1/(2C)). With
    alpha = zeta sqrt(u(zeta)) / phi (increasing in zeta) the constraint becomes
    H(zeta) = m + sqrt(u(zeta)) (c zeta - phi^2) / phi = 0, H increasing. u is at
    least its full-covariance value v/(1 + zeta v) (t/(1 + zeta t) is concave),
    which puts the root between the full-covariance zeta and phi^2 / c.
    SCW-I: if that alpha exceeds C, alpha = C and zeta solves zeta sqrt(u) = C phi.
    CW-Var: zeta = 2 alpha phi, H(zeta) = m + zeta v / (2 phi) - phi u(zeta),
    root between the full-covariance zeta and 2 phi (phi v - m) / v (from u <= v).
    """
    if rule == VAR:
        _, _, zf = step(VAR, m, v, phi, C, r)
        hi = 2.0 * phi * (phi * v - m) / v
        z = _solve_increasing(1, min(zf, hi), max(zf, hi), m, v, phi, 0.0, idx, val, s)
        return z / (2.0 * phi), z
    if rule == SCW2:
        cst = v + 0.5 / C
        _, _, zf = scw2(m, v, phi, C)
    else:
        cst = v
        _, _, zf = cw_stdev(m, v, phi)
    zb = phi * phi / cst
    z = _solve_increasing(0, min(zf, zb), max(zf, zb), m, cst, phi, 0.0, idx, val, s)
    u, _ = _u_and_du(z, idx, val, s)
    alpha = z * math.sqrt(u) / phi
    if rule == SCW1 and alpha > C:
        z = _solve_increasing(2, 0.0, z, m, cst, phi, C * phi, idx, val, s)
        alpha = C
    return alpha, z


@njit(cache=True)
def _diag_round(mu, s, idx, val, y, rule, method, phi, C, r, a):
    """One round of the diagonal learner on the non-zeros (idx, val) of x.

    Returns (decision value before the update, alpha, floored); alpha is NaN when
    a non-finite step was met (state untouched in that case). On a floored round
    the "exact" method takes the "kl" step: its equation lives on the unfloored t_p.
    """
    f = 0.0
    v = 0.0
    sq = 0.0
    for q in range(idx.shape[0]):
        p = idx[q]
        x = val[q]
        f += mu[p] * x
        v += s[p] * x * x
        sq += x * x
    m = y * f
    first = rule <= PA2  # Perceptron, PA, PA-I, PA-II: |x|^2 in place of v
    floored = False
    if not first and v < VAR_FLOOR * a * sq:
        v = VAR_FLOOR * a * sq
        floored = True
    alpha, beta, zeta = step(rule, m, sq if first else v, phi, C, r)
    if not (math.isfinite(alpha) and math.isfinite(beta) and math.isfinite(f)):
        return f, np.nan, floored
    if alpha <= 0.0:
        return f, 0.0, floored
    if method == _EXACT and not first and rule != AROW and rule != SOP and not floored:
        alpha, zeta = _exact_zeta(rule, m, v, phi, C, r, idx, val, s)
        if not (math.isfinite(alpha) and math.isfinite(zeta)):
            return f, np.nan, floored
    ay = alpha * y
    for q in range(idx.shape[0]):
        p = idx[q]
        x = val[q]
        sp_ = s[p]
        mu[p] += ay * sp_ * x
        if zeta > 0.0:
            t = sp_ * x * x
            if method == _L2:
                s[p] = sp_ * (1.0 + zeta * max(v - t, 0.0)) / (1.0 + zeta * v)
            else:
                s[p] = sp_ / (1.0 + zeta * t)
    return f, alpha, floored


@njit(cache=True)
def _diag_row(mu, s, idx, val, Yi, rule, method, phi, C, r, a, out_i, n_upd, n_mis, n_fl):
    """One input through every model; bookkeeping shared by both drivers.

    Returns False when a non-finite step was met.
    """
    for k in range(mu.shape[0]):
        f, alpha, floored = _diag_round(mu[k], s[k], idx, val, Yi[k], rule, method, phi, C, r, a)
        out_i[k] = f
        if floored:
            n_fl[k] += 1
        if alpha != alpha:
            return False
        if (1.0 if f >= 0.0 else -1.0) != Yi[k]:
            n_mis[k] += 1
        if alpha > 0.0:
            n_upd[k] += 1
    return True


@njit(cache=True)
def _diag_csr(mu, s, indptr, indices, data, Y, rule, method, phi, C, r, a, out, n_upd, n_mis, n_fl):
    for i in range(indptr.shape[0] - 1):
        lo = indptr[i]
        hi = indptr[i + 1]
        if not _diag_row(
            mu,
            s,
            indices[lo:hi],
            data[lo:hi],
            Y[i],
            rule,
            method,
            phi,
            C,
            r,
            a,
            out[i],
            n_upd,
            n_mis,
            n_fl,
        ):
            return i
    return -1


@njit(cache=True)
def _diag_dense(mu, s, X, Y, rule, method, phi, C, r, a, out, n_upd, n_mis, n_fl):
    idx = np.arange(X.shape[1])
    for i in range(X.shape[0]):
        if not _diag_row(
            mu, s, idx, X[i], Y[i], rule, method, phi, C, r, a, out[i], n_upd, n_mis, n_fl
        ):
            return i
    return -1


def diag_fit(mu, s, X, Y, params: RuleParams, out, method: str = "kl"):
    """Diagonal covariance (and every first-order rule), one round at a time.

    ``mu``, ``s`` (K, d) changed in place; ``X`` dense (n, d) or CSR.
    """
    K = mu.shape[0]
    n_upd = np.zeros(K, dtype=np.int64)
    n_mis = np.zeros(K, dtype=np.int64)
    n_fl = np.zeros(K, dtype=np.int64)
    code = DIAG_METHODS[method]
    args = (params.rule, code, params.phi, params.C, params.r, params.a, out, n_upd, n_mis, n_fl)
    if sp.issparse(X):
        X = sp.csr_matrix(X)
        bad = _diag_csr(mu, s, X.indptr, X.indices, X.data, Y, *args)
    else:
        bad = _diag_dense(mu, s, np.ascontiguousarray(X), Y, *args)
    if bad >= 0:
        _raise_nonfinite(bad)
    return n_upd, n_mis, n_fl
