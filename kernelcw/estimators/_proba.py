"""What ``predict_proba`` means: probabilities under the models' Gaussians over weights.

A fitted model holds a Gaussian N(mu, Sigma) over weight vectors, so for an input x the
score w . x is N(m, v) with m = mu . x (``decision_function``) and v = x' Sigma x
(``a k(x, x) + k' Pi k`` in the dual form).

- Two classes (one model): P(classes_[1]) = P(w . x > 0) = Phi(m / sqrt(v)). Both tails are
  computed directly (``ndtr(-z)`` for the smaller one, never ``1 - ndtr(z)``), so the small
  probability keeps its relative accuracy down to about 1e-308.
- K > 2 classes (K one-vs-rest models, independent Gaussians N(m_k, v_k)): P(k) is the
  probability that class k's score is the largest,

      P(k) = integral phi(t) prod_{j != k} Phi((m_k + s_k t - m_j) / s_j) dt,  s_k = sqrt(v_k),

  by Gauss-Hermite quadrature (128 nodes) when the s_k differ by at most a factor 3
  (nearly every row of a fitted model), else by composite Gauss-Legendre on t in [-9, 9]
  (the mass of phi outside is 2e-19), with panel ends at every factor's step
  (t = c_j +- 2 w_j, c_j +- 6 w_j with c_j = (m_j - m_k) / s_k, w_j = min(s_j / s_k, 1)),
  so a factor that is nearly a step is integrated as accurately as a smooth one. Rows are
  then renormalised (the quadrature's rounding, ~1e-12).

Never exactly 0 or 1 for finite margins and v > 0: a probability below the smallest positive
float64 (Phi(-38.5) ~ 1e-324) is reported as that float (4.9e-324), and one that rounds to 1
as the largest float below 1 (1 - 2**-53); ``scipy.special.log_ndtr(z)`` gives the exact
logarithm of a two-class probability. Exactly 0 and 1 (and 1/2 on a tie) remain where
they are true: v = 0 (the model's Gaussian is a point along x, e.g. x = 0) or an infinite
margin.
"""

from __future__ import annotations

import numpy as np
from numpy.polynomial.legendre import leggauss
from scipy.special import ndtr

__all__ = ["binary_proba", "multiclass_proba"]

#: The smallest positive float64 and the largest below 1: the clip of an underflowed tail.
SMALLEST = np.nextafter(0.0, 1.0)
LARGEST_BELOW_ONE = np.nextafter(1.0, 0.0)
#: phi's integration range [-T, T], its fixed panel ends, the nodes per panel.
T = 9.0
_BASE = np.linspace(-T, T, 13)
_NODES, _WEIGHTS = leggauss(10)
#: Panel ends around each sharp factor's step, in units of its width.
_STEP_ENDS = np.array([-6.0, -2.0, 2.0, 6.0])
#: Rows whose standard deviations differ by at most this factor use Gauss-Hermite with 128
#: nodes (every factor is then at least a third as wide as the density: error < 1e-9). That
#: is nearly every row: on digits the 99th percentile of the ratio was 1.6-2.8 for linear
#: SCW-I and CW, RBF SCW-I and AROW.
SMOOTH_RATIO = 3.0
_GH_T, _GH_W = np.polynomial.hermite_e.hermegauss(128)
_GH_W = _GH_W / _GH_W.sum()
#: Rows per quadrature block: its arrays are rows x K x K x nodes floats.
_BLOCK_FLOATS = 4_000_000


def _check(F: np.ndarray, V: np.ndarray) -> np.ndarray:
    """The variances as the probabilities take them (a new array: -0.0 as 0, whose
    square root -0.0 would turn z = f / sqrt(v), and a step, the other way), after
    checking both arrays."""
    if F.shape != V.shape or F.ndim != 2:
        raise ValueError(f"margins {F.shape} and variances {V.shape} must be equal (n, K) arrays")
    if np.isnan(F).any() or np.isnan(V).any() or (V < 0).any():
        raise ValueError(
            "margins and variances must be numbers and the variances >= 0; got NaN or a "
            "negative variance (the model's covariance is no longer positive semi-definite)"
        )
    if np.isinf(V).any():
        raise ValueError("a margin variance is infinite: x' Sigma x overflowed float64")
    return V + 0.0


def _z(f: np.ndarray, v: np.ndarray) -> np.ndarray:
    """f / sqrt(v): +-inf for v = 0 by the sign of f, 0 for f = v = 0 (a tie). (f and v
    as :func:`_check` passes and returns them: no NaN, v finite, no -0.0.)"""
    if (v > 0.0).all():  # nothing to quiet or replace (errstate: a third of a row's call)
        return f / np.sqrt(v)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = f / np.sqrt(v)
    return np.where(np.isnan(z), 0.0, z)


def binary_proba(f: np.ndarray, v: np.ndarray) -> np.ndarray:
    """[P(w . x <= 0), P(w . x > 0)] = [Phi(-z), Phi(z)], z = f / sqrt(v), as (n, 2).

    The smaller of the two is ``ndtr(-|z|)`` and the larger ``1 -`` it; for finite z they are
    clipped to [4.9e-324, 1 - 2**-53] (only values that underflowed to 0 or rounded to 1
    change), so a row sums to 1 within 2**-53.
    """
    f, v = np.asarray(f, dtype=float).ravel(), np.asarray(v, dtype=float).ravel()
    v = _check(f[:, None], v[:, None])[:, 0]
    z = _z(f, v)
    small = ndtr(-np.abs(z))
    finite = np.isfinite(z)
    small = np.where(finite, np.maximum(small, SMALLEST), small)
    big = np.where(finite, np.minimum(1.0 - small, LARGEST_BELOW_ONE), 1.0 - small)
    pos = np.where(z >= 0, big, small)
    neg = np.where(z >= 0, small, big)
    return np.column_stack([neg, pos])


def _quadrature(M: np.ndarray, S: np.ndarray, cls: np.ndarray) -> np.ndarray:
    """Unnormalised P(k is the largest) for the classes ``cls``, (n, len(cls)).
    A zero s_j makes factor j an exact step (``ndtr(+-inf)``) whose panel end sits on it;
    0 / 0 (a tie of point masses) counts 1/2."""
    n = M.shape[0]
    Mk, Sk = M[:, cls], S[:, cls]  # the classes whose probability is computed
    with np.errstate(divide="ignore", invalid="ignore"):
        C = (M[:, None, :] - Mk[:, :, None]) / Sk[:, :, None]  # [i, k, j]: step of j in t_k
        W = S[:, None, :] / Sk[:, :, None]
    C = np.where(np.isnan(C), 0.0, C)
    W = np.where(np.isnan(W), 0.0, np.minimum(W, 1.0))  # wider than phi: no ends of its own
    c = cls.size
    ends = np.clip((C[..., None] + W[..., None] * _STEP_ENDS).reshape(n, c, -1), -T, T)
    ends = np.concatenate([np.broadcast_to(_BASE, (n, c, _BASE.size)), ends], axis=2)
    ends.sort(axis=2)
    lo, hi = ends[..., :-1], ends[..., 1:]
    half = (hi - lo) / 2.0
    t = ((lo + hi) / 2.0)[..., None] + half[..., None] * _NODES  # (n, c, panels, nodes)
    t = t.reshape(n, c, -1)
    wt = (half[..., None] * _WEIGHTS).reshape(n, c, -1) * np.exp(-0.5 * t * t)
    wt /= np.sqrt(2.0 * np.pi)
    s = Mk[:, :, None] + Sk[:, :, None] * t  # the largest score's value at class k's nodes
    with np.errstate(divide="ignore", invalid="ignore"):
        z = (s[:, :, None, :] - M[:, None, :, None]) / S[:, None, :, None]
    factors = ndtr(np.where(np.isnan(z), 0.0, z))
    factors[:, np.arange(c), cls, :] = 1.0
    return np.einsum("ikt,ikt->ik", factors.prod(axis=2), wt)


def _hermite(M: np.ndarray, S: np.ndarray, cls: np.ndarray) -> np.ndarray:
    """Unnormalised P(k is the largest) for the classes ``cls`` by
    Gauss-Hermite, for rows with all s_k > 0 within a factor SMOOTH_RATIO of each
    other, (n, len(cls))."""
    s = M[:, cls, None] + S[:, cls, None] * _GH_T
    factors = ndtr((s[:, :, None, :] - M[:, None, :, None]) / S[:, None, :, None])
    factors[:, np.arange(cls.size), cls, :] = 1.0
    return factors.prod(axis=2) @ _GH_W


def multiclass_proba(F: np.ndarray, V: np.ndarray) -> np.ndarray:
    """P(class k's score is the largest) under independent N(F[:, k], V[:, k]), (n, K).

    Rows sum to 1 (renormalised) and lie in [4.9e-324, 1 - 2**-53] when every variance is
    positive; a row with a zero variance is the degenerate case (exact 0 and 1 possible).
    """
    F, V = np.asarray(F, dtype=float), np.asarray(V, dtype=float)
    V = _check(F, V)
    n, K = F.shape
    P = np.empty((n, K))
    S = np.sqrt(V)
    full = (S > 0).all(axis=1) & np.isfinite(F).all(axis=1)
    F = np.clip(F, -1e300, 1e300)  # an infinite margin: a score beyond every other
    with np.errstate(divide="ignore", invalid="ignore"):
        smooth = full & (S.max(axis=1) <= SMOOTH_RATIO * S.min(axis=1))
    for rows, nodes, rule in (
        (np.flatnonzero(smooth), _GH_T.size, _hermite),
        (np.flatnonzero(~smooth), (_BASE.size + 4 * K) * _NODES.size, _quadrature),
    ):
        step = max(1, _BLOCK_FLOATS // (K * K * nodes))
        for lo in range(0, rows.size, step):
            r = rows[lo : lo + step]
            # all classes at once, unless one row's K x K x nodes floats exceed the block
            # (the quadrature's K^3 nodes: 800 MB at K = 80): then groups of classes
            per = max(1, _BLOCK_FLOATS // (r.size * K * nodes))
            for c0 in range(0, K, per):
                P[r, c0 : c0 + per] = rule(F[r], S[r], np.arange(c0, min(K, c0 + per)))
    tot = P.sum(axis=1, keepdims=True)
    P = np.where(tot > 0, P / np.where(tot > 0, tot, 1.0), 1.0 / K)
    P[full] = np.clip(P[full], SMALLEST, LARGEST_BELOW_ONE)
    return P
