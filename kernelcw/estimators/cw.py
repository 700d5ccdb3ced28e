"""CW-Stdev and CW-Var (NIPS 2008, ICML 2008; JMLR 2012)."""

from __future__ import annotations

from scipy.special import ndtri

from .._validation import check_eta, check_option
from ..rules import RULES, RuleParams
from ._base import CWEstimator
from ._docs import ATTR_DOC, SECOND_ORDER_DOC

__all__ = ["CWClassifier"]


class CWClassifier(CWEstimator):
    __doc__ = f"""Confidence-weighted linear classifier (CW-Stdev or CW-Var).

    Keeps a Gaussian N(mu, Sigma) over weight vectors and, after each example,
    moves to the closest Gaussian (in KL divergence) that classifies it
    correctly with probability ``eta``.

    Parameters
    ----------
    rule : {{"stdev", "var"}}, default="stdev"
        "stdev": the exact convex CW of Crammer, Dredze & Pereira (NIPS 2008);
        "var": the linearised variance constraint of Dredze, Crammer & Pereira
        (ICML 2008).
    eta : float in (0.5, 1), default=0.7
        Required probability of a correct classification; ``phi = Phi^-1(eta)``.
        0.7 is LIBOL's default for CW (Hoi, Wang & Zhao, JMLR 2014).
{SECOND_ORDER_DOC}
{ATTR_DOC}

    References
    ----------
    K. Crammer, M. Dredze, F. Pereira. Exact convex confidence-weighted learning. NIPS 2008.
    M. Dredze, K. Crammer, F. Pereira. Confidence-weighted linear classification. ICML 2008.
    K. Crammer, M. Dredze, F. Pereira. Confidence-weighted linear classification for
    text categorization. JMLR 13, 2012.

    Examples
    --------
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.preprocessing import StandardScaler
    >>> from kernelcw import CWClassifier
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> X = StandardScaler().fit_transform(X)
    >>> clf = CWClassifier(eta=0.9).fit(X, y)  # one online pass
    >>> clf.n_mistakes_, clf.n_updates_
    (25, 90)
    >>> round(clf.score(X, y), 3)
    0.984
    >>> clf.predict_proba(X[:1]).round(4)
    array([[1., 0.]])
    """

    def __init__(
        self,
        *,
        rule="stdev",
        eta=0.7,
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
        self.rule = rule
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
        check_option("rule", self.rule, ("stdev", "var"))
        return RuleParams(RULES[self.rule], phi=ndtri(check_eta(self.eta)))
