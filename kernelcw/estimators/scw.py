"""SCW-I and SCW-II, soft confidence-weighted learning (ICML 2012)."""

from __future__ import annotations

from scipy.special import ndtri

from .._validation import check_eta, check_option, check_positive
from ..rules import RULES, RuleParams
from ._base import CWEstimator
from ._docs import ATTR_DOC, SECOND_ORDER_DOC

__all__ = ["SCWClassifier"]


class SCWClassifier(CWEstimator):
    __doc__ = f"""Soft confidence-weighted classifier, SCW-I or SCW-II (ICML 2012).

    CW-Stdev with a soft constraint: SCW-I caps the step at ``C``, SCW-II adds a
    squared hinge penalty weighted by ``C``.

    Parameters
    ----------
    variant : {{1, 2}}, default=1
    C : float > 0, default=1.0
        Aggressiveness (LIBOL's default 1).
    eta : float in (0.5, 1) or None, default=None
        None uses LIBOL's defaults: 0.75 for SCW-I, 0.9 for SCW-II.
{SECOND_ORDER_DOC}
{ATTR_DOC}

    References
    ----------
    J. Wang, P. Zhao, S. C. H. Hoi. Exact soft confidence-weighted learning. ICML 2012.
    """

    def __init__(
        self,
        *,
        variant=1,
        C=1.0,
        eta=None,
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
        self.variant = variant
        self.C = C
        self.eta = eta
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
        check_option("variant", self.variant, (1, 2))
        C = check_positive("C", self.C)
        eta = (0.75 if self.variant == 1 else 0.9) if self.eta is None else self.eta
        rule = RULES["scw1"] if self.variant == 1 else RULES["scw2"]
        return RuleParams(rule, phi=ndtri(check_eta(eta)), C=C)
