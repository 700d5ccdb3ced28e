"""Passive-aggressive PA, PA-I and PA-II (JMLR 2006)."""

from __future__ import annotations

from .._validation import check_option, check_positive
from ..rules import RULES, RuleParams
from ._base import CWEstimator
from ._docs import ATTR_DOC, FIRST_ORDER_DOC, FIRST_ORDER_NOTE

__all__ = ["PAClassifier"]


class PAClassifier(CWEstimator):
    __doc__ = f"""Passive-aggressive classifier: PA, PA-I or PA-II (Crammer et al., JMLR 2006).

    Parameters
    ----------
    variant : {{0, 1, 2}}, default=1
        0: PA (alpha = l / |x|^2); 1: PA-I (capped at C); 2: PA-II. PA-I with
        C = 1 is scikit-learn's ``PassiveAggressiveClassifier`` default.
    C : float > 0, default=1.0
        Aggressiveness of PA-I and PA-II (unused by PA).
{FIRST_ORDER_DOC}
{FIRST_ORDER_NOTE}
{ATTR_DOC}

    References
    ----------
    K. Crammer, O. Dekel, J. Keshet, S. Shalev-Shwartz, Y. Singer. Online
    passive-aggressive algorithms. JMLR 7, 2006.
    """

    def __init__(
        self,
        *,
        variant=1,
        C=1.0,
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
        self.variant = variant
        self.C = C
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
        check_option("variant", self.variant, (0, 1, 2))
        C = check_positive("C", self.C)
        return RuleParams(RULES[("pa", "pa1", "pa2")[self.variant]], C=C)
