"""The dual (kernel) engine: K one-vs-rest models over one shared support store.

The machinery is :class:`kernelcw.dual.DualModel` (``doc/dual-form.md``); this
class is its face to the estimators: learning, prediction, rollback, the fitted
state as plain arrays, and the dual attributes in the order the support vectors
entered.
"""

from __future__ import annotations

import copy

import numpy as np

from ..dual import DualModel
from ..spec import EngineSpec
from .base import LearnResult

__all__ = ["DualEngine"]


class DualEngine:
    """``model``: the :class:`kernelcw.dual.DualModel` holding the state."""

    def __init__(self, spec: EngineSpec):
        self.spec = spec
        self.model = DualModel(
            spec.kernel,
            spec.rule,
            spec.n_models,
            spec.solver,
            spec.block_size,
            spec.budget,
            spec.budget_policy,
            spec.seed,
        )

    @property
    def n_models(self) -> int:
        return len(self.model.models)

    def set_rule(self, rule) -> None:
        self.model.set_rule(rule)

    def learn(self, X, Y: np.ndarray, positions=None) -> LearnResult:
        self.model.check_usable()
        out = np.empty((X.shape[0], self.n_models))
        counts = self.model._learn(X, Y, out, positions)
        return LearnResult(out, *counts)

    def checkpoint(self, X):
        """The append-only forms (Cholesky panels, first-order coefficients) are cut
        back to their length; forms updated in place (explicit nu/Pi, a bound budget)
        are copied (O(n_sv^2), about one round's work). The "oldest" budget's queue
        form is too large to copy per call: an error there marks the model unusable."""
        dm = self.model
        if any(m.q is not None for m in dm.models):
            return "unusable", None
        if dm.budget is None and all(not m.explicit or m.first_order for m in dm.models):
            return "cut", dm._mark()
        return "copy", copy.deepcopy(dm.__dict__)

    def restore(self, checkpoint) -> None:
        how, saved = checkpoint
        dm = self.model
        if how == "cut":
            dm._cut_back(saved)
        elif how == "copy":
            dm.__dict__.clear()
            dm.__dict__.update(saved)
        else:
            dm.broken = "an error part-way through a call"

    def decision(self, X) -> np.ndarray:
        return self.model.decision(X)[0]

    def margin_variance(self, X) -> np.ndarray:
        return self.model.decision(X, with_variance=True)[1]

    # ------------------------------------------------------------ dual attributes
    # Lists with one entry per binary model, each in the order support vectors entered.

    def support_positions(self) -> list[np.ndarray]:
        dm = self.model
        dm.check_usable()
        return [dm.pos[m.idx[m.order()]] for m in dm.models]

    def support_vectors(self) -> list:
        dm = self.model
        dm.check_usable()
        return [dm.store[m.idx[m.order()]] for m in dm.models]

    def dual_coef(self) -> list[np.ndarray]:
        dm = self.model
        dm.check_usable()
        return [m.nu(dm.a)[m.order()] for m in dm.models]

    def covariance_coef(self) -> list[np.ndarray]:
        dm = self.model
        dm.check_usable()
        return [m.Pi(dm.a)[np.ix_(m.order(), m.order())] for m in dm.models]

    def n_support(self) -> list[int]:
        dm = self.model
        dm.check_usable()
        return [m.n for m in dm.models]

    def state_dict(self) -> dict[str, np.ndarray]:
        raise NotImplementedError("the dual engine's plain-array state is being built")

    @classmethod
    def from_state(cls, spec: EngineSpec, state: dict[str, np.ndarray]) -> DualEngine:
        raise NotImplementedError("the dual engine's plain-array state is being built")
