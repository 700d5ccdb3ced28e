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
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
from numba import njit

from ..rules import AROW, DIAG_METHODS, SOP, VAR_FLOOR, RuleParams, is_first_order, step
from ..spec import EngineSpec
from ._diag_exact import exact_zeta
from ._primal_common import (
    Counts,
    check_same_a,
    new_counts,
    raise_nonfinite,
    rule_record,
)
from .base import LearnResult, Locked

__all__ = ["PrimalDiagEngine", "diag_fit"]

_L2, _EXACT = DIAG_METHODS["l2"], DIAG_METHODS["exact"]


class RoundResult(NamedTuple):
    """What one diagonal round reports (built in compiled code)."""

    #: the decision value ``mu . x`` before the update
    margin: float
    #: the step; 0 without an update, NaN when a non-finite step was met (the state is
    #: then untouched)
    alpha: float
    #: whether the margin variance was raised to the floor
    floored: bool


@njit(cache=True)
def _diag_round(mu, s, idx, val, y, rp, method):
    """One round of one binary model on the non-zeros (idx, val) of x, with the rule
    record ``rp`` (:class:`kernelcw.rules.RuleParams`) and the method code ``method``.

    On a floored round the "exact" method takes the "kl" step: its equation lives on
    the unfloored t_p.
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
    first = is_first_order(rp.rule)  # |x|^2 in place of v
    floored = False
    if not first and v < VAR_FLOOR * rp.a * sq:
        v = VAR_FLOOR * rp.a * sq
        floored = True
    alpha, beta, zeta = step(rp.rule, m, sq if first else v, rp.phi, rp.C, rp.r)
    if not (math.isfinite(alpha) and math.isfinite(beta) and math.isfinite(f)):
        return RoundResult(f, np.nan, floored)
    if alpha <= 0.0:
        return RoundResult(f, 0.0, floored)
    decoupled = rp.rule == AROW or rp.rule == SOP
    if method == _EXACT and not first and not decoupled and not floored:
        alpha, zeta = exact_zeta(rp, m, v, idx, val, s)
        if not (math.isfinite(alpha) and math.isfinite(zeta)):
            return RoundResult(f, np.nan, floored)
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
    return RoundResult(f, alpha, floored)


@njit(cache=True)
def _diag_row(mu, s, idx, val, Yi, out_i, rp, method, counts):
    """One input through every model; bookkeeping shared by both drivers.

    Returns False when a non-finite step was met.
    """
    for k in range(mu.shape[0]):
        res = _diag_round(mu[k], s[k], idx, val, Yi[k], rp, method)
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


@njit(cache=True)
def _diag_csr(mu, s, indptr, indices, data, Y, out, rp, method, counts):
    """The rows of a CSR matrix in order; the first failing row, or -1."""
    for i in range(indptr.shape[0] - 1):
        lo = indptr[i]
        hi = indptr[i + 1]
        if not _diag_row(mu, s, indices[lo:hi], data[lo:hi], Y[i], out[i], rp, method, counts):
            return i
    return -1


@njit(cache=True)
def _diag_dense(mu, s, X, Y, out, rp, method, counts):
    """The rows of a dense C-ordered matrix in order; the first failing row, or -1."""
    idx = np.arange(X.shape[1])
    for i in range(X.shape[0]):
        if not _diag_row(mu, s, idx, X[i], Y[i], out[i], rp, method, counts):
            return i
    return -1


def diag_fit(mu, s, X, Y, params: RuleParams, out, method: str = "kl") -> Counts:
    """Diagonal covariance (and every first-order rule), one round at a time.

    ``mu``, ``s`` (K, d) C-contiguous float64, changed in place; ``X`` dense (n, d) or
    CSR; ``Y`` (n, K) in {-1, +1}; ``out`` (n, K). Rows before a failing one stay
    learnt: callers that need all or nothing restore a copy.
    """
    counts = new_counts(mu.shape[0])
    rp = rule_record(params)
    code = DIAG_METHODS[method]
    if sp.issparse(X):
        X = sp.csr_matrix(X)
        bad = _diag_csr(mu, s, X.indptr, X.indices, X.data, Y, out, rp, code, counts)
    else:
        bad = _diag_dense(mu, s, np.ascontiguousarray(X), Y, out, rp, code, counts)
    if bad >= 0:
        raise_nonfinite(bad)
    return counts


class PrimalDiagEngine(Locked):
    """``mean`` and ``variance`` (K, d), C-contiguous float64."""

    def __init__(self, spec: EngineSpec):
        K, d = spec.n_models, spec.n_features
        self.spec = spec
        self.rule = spec.rule
        self.mean = np.zeros((K, d))
        self.variance = np.full((K, d), spec.a)

    @property
    def n_models(self) -> int:
        return self.mean.shape[0]

    def set_rule(self, rule) -> None:
        check_same_a(self.rule.a, rule.a)
        self.rule = rule

    def learn(self, X, Y: np.ndarray, positions=None) -> LearnResult:
        out = np.empty((X.shape[0], self.n_models))
        counts = diag_fit(self.mean, self.variance, X, Y, self.rule, out, self.spec.diag_method)
        return LearnResult(out, *counts)

    def checkpoint(self, X):
        # the coordinates this call can touch: for a few sparse rows of a wide model the
        # columns of their non-zeros (np.unique costs O(nnz log nnz)), else all of (K, d)
        K, d = self.mean.shape
        few = sp.issparse(X) and 16 * X.nnz < K * d
        cols = np.unique(X.indices) if few else slice(None)
        return cols, self.mean[:, cols].copy(), self.variance[:, cols].copy()

    def restore(self, checkpoint) -> None:
        cols, mean, var = checkpoint
        self.mean[:, cols] = mean
        self.variance[:, cols] = var

    def decision(self, X) -> np.ndarray:
        return np.asarray(X @ self.mean.T)

    def margin_variance(self, X) -> np.ndarray:
        X2 = X.multiply(X) if sp.issparse(X) else X * X
        return np.asarray(X2 @ self.variance.T)

    def state_dict(self) -> dict[str, np.ndarray]:
        return {"mean": self.mean.copy(), "variance": self.variance.copy()}

    @classmethod
    def from_state(cls, spec: EngineSpec, state: dict[str, np.ndarray]) -> PrimalDiagEngine:
        eng = cls.__new__(cls)
        eng.spec, eng.rule = spec, spec.rule
        K, d = spec.n_models, spec.n_features
        eng.mean = np.array(state["mean"], dtype=np.float64, order="C").reshape(K, d)
        eng.variance = np.array(state["variance"], dtype=np.float64, order="C").reshape(K, d)
        return eng
