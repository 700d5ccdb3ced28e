"""The Perceptron (Rosenblatt 1958)."""

from __future__ import annotations

from ..rules import RULES, RuleParams
from ._base import CWEstimator
from ._docs import ATTR_DOC, FIRST_ORDER_DOC, FIRST_ORDER_NOTE

__all__ = ["PerceptronClassifier"]


class PerceptronClassifier(CWEstimator):
    __doc__ = f"""The Perceptron (Rosenblatt 1958): ``mu += y a x`` on every mistake.

    Parameters
    ----------
{FIRST_ORDER_DOC}
{FIRST_ORDER_NOTE}
{ATTR_DOC}
    """

    def __init__(
        self,
        *,
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
        covariance="diag",
        diag_method="kl",
        n_iter=1,
        shuffle=False,
        random_state=None,
        fit_intercept=True,
        intercept_scaling=1.0,
    ):
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
        return RuleParams(RULES["perceptron"])
