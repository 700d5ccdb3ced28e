"""The primal engine with full covariance (linear kernel): ``mu`` (K, d) and
``Sigma`` (K, d, d) held as plain arrays, learnt in blocks (BLAS-3).

The blocked walk itself is :func:`kernelcw.primal.full_fit` (``doc/dual-form.md``
section 5). First-order rules keep ``Sigma = a I``: they learn with the diagonal
walk and report the full matrix.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .. import primal
from ..spec import EngineSpec
from .base import LearnResult

__all__ = ["PrimalFullEngine"]


def _check_same_a(old: float, new: float) -> None:
    if new != old:
        raise ValueError(
            f"a={new!r} differs from the a={old!r} this model started with; "
            "the prior scale is part of the stored state: call fit to start over"
        )


class PrimalFullEngine:
    """``mean`` (K, d) and ``covariance`` (K, d, d), C-contiguous float64."""

    def __init__(self, spec: EngineSpec):
        K, d = spec.n_models, spec.n_features
        self.spec = spec
        self.rule = spec.rule
        self.mean = np.zeros((K, d))
        self.covariance = np.zeros((K, d, d))
        self.covariance[:, np.arange(d), np.arange(d)] = spec.a

    @property
    def n_models(self) -> int:
        return self.mean.shape[0]

    def set_rule(self, rule) -> None:
        _check_same_a(self.rule.a, rule.a)
        self.rule = rule

    def _block(self) -> int:
        b = self.spec.block_size
        return primal.default_block_size(self.spec.n_features) if b is None else b

    def learn(self, X, Y: np.ndarray, positions=None) -> LearnResult:
        K, d = self.mean.shape
        out = np.empty((X.shape[0], K))
        if self.rule.first_order:  # Sigma = a I never changes
            s = np.full((K, d), self.rule.a)
            counts = primal.diag_fit(self.mean, s, X, Y, self.rule, out, self.spec.diag_method)
        else:
            counts = primal.full_fit(
                self.mean, self.covariance, X, Y, self.rule, out, block_size=self.spec.block_size
            )
        return LearnResult(out, *counts)

    def checkpoint(self, X):
        # full_fit changes nothing in a block that fails (every one-vs-rest model walks a
        # block before any changes), so a call of one block needs no copy: O(d^2) per
        # >= b rows otherwise. The first-order walk goes row by row: a copy of the mean.
        if self.rule.first_order:
            return self.mean.copy(), None
        if X.shape[0] <= self._block():
            return None
        return self.mean.copy(), self.covariance.copy()

    def restore(self, checkpoint) -> None:
        if checkpoint is None:
            return
        mean, cov = checkpoint
        self.mean[...] = mean
        if cov is not None:
            self.covariance[...] = cov

    def decision(self, X) -> np.ndarray:
        return np.asarray(X @ self.mean.T)

    def margin_variance(self, X) -> np.ndarray:
        sigma = self.covariance
        if sp.issparse(X):
            cols = [np.asarray(X.multiply(X @ S).sum(axis=1)).ravel() for S in sigma]
        else:
            cols = [np.einsum("ij,ij->i", X @ S, X) for S in sigma]
        return np.stack(cols, axis=1)

    def state_dict(self) -> dict[str, np.ndarray]:
        return {"mean": self.mean.copy(), "covariance": self.covariance.copy()}

    @classmethod
    def from_state(cls, spec: EngineSpec, state: dict[str, np.ndarray]) -> PrimalFullEngine:
        eng = cls.__new__(cls)
        eng.spec, eng.rule = spec, spec.rule
        K, d = spec.n_models, spec.n_features
        eng.mean = np.array(state["mean"], dtype=np.float64, order="C").reshape(K, d)
        eng.covariance = np.array(state["covariance"], dtype=np.float64, order="C").reshape(K, d, d)
        return eng
