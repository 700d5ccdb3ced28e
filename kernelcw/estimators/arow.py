"""AROW, adaptive regularization of weight vectors (NIPS 2009)."""

from __future__ import annotations

from .._validation import check_positive
from ..rules import RULES, RuleParams
from ._base import CWEstimator
from ._docs import ATTR_DOC, SECOND_ORDER_DOC

__all__ = ["AROWClassifier"]


class AROWClassifier(CWEstimator):
    __doc__ = f"""Adaptive regularization of weight vectors (Crammer, Kulesza & Dredze, NIPS 2009).

    Parameters
    ----------
    r : float > 0, default=1.0
        Regularisation: larger r means smaller, more conservative steps
        (LIBOL's default 1).
{SECOND_ORDER_DOC}
{ATTR_DOC}

    References
    ----------
    K. Crammer, A. Kulesza, M. Dredze. Adaptive regularization of weight vectors. NIPS 2009.
    """

    def __init__(
        self,
        *,
        r=1.0,
        a=1.0,
        kernel="linear",
        gamma=None,
        degree=3,
        coef0=0.0,
        mode="auto",
        solver="cholesky",
        block_size=None,
        budget=None,
        budget_policy="project",
        budget_batch=1,
        covariance="full",
        diag_method="kl",
        n_iter=1,
        shuffle=False,
        random_state=None,
        fit_intercept=True,
        intercept_scaling=1.0,
    ):
        self.r = r
        self.a = a
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.mode = mode
        self.solver = solver
        self.block_size = block_size
        self.budget = budget
        self.budget_policy = budget_policy
        self.budget_batch = budget_batch
        self.covariance = covariance
        self.diag_method = diag_method
        self.n_iter = n_iter
        self.shuffle = shuffle
        self.random_state = random_state
        self.fit_intercept = fit_intercept
        self.intercept_scaling = intercept_scaling

    def _rule_params(self) -> RuleParams:
        return RuleParams(RULES["arow"], r=check_positive("r", self.r))
