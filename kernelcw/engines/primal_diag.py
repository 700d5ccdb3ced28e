"""The primal engine with diagonal covariance (linear kernel; JMLR 2012 section 6):
``mu`` (K, d) and the variances ``s`` (K, d), learnt one row at a time touching
only each row's non-zeros (dense or sparse text).

The walks themselves are :func:`kernelcw.primal.diag_fit`.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .. import primal
from ..spec import EngineSpec
from .base import LearnResult
from .primal_full import _check_same_a

__all__ = ["PrimalDiagEngine"]


class PrimalDiagEngine:
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
        _check_same_a(self.rule.a, rule.a)
        self.rule = rule

    def learn(self, X, Y: np.ndarray, positions=None) -> LearnResult:
        out = np.empty((X.shape[0], self.n_models))
        counts = primal.diag_fit(
            self.mean, self.variance, X, Y, self.rule, out, self.spec.diag_method
        )
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
