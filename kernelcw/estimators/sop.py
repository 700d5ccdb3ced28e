"""The second-order perceptron (SIAM J. Comput. 2005)."""

from __future__ import annotations

from ..rules import RULES, RuleParams
from ._base import CWEstimator
from ._docs import ATTR_DOC, SOP_DOC

__all__ = ["SOPClassifier"]


class SOPClassifier(CWEstimator):
    __doc__ = f"""Second-order perceptron (Cesa-Bianchi, Conconi & Gentile, SIAM J. Comput. 2005).

    Predicts ``sign(b' (c I + S + x x')^-1 x)``, with ``S`` the sum of ``x x'`` and
    ``b`` the sum of ``y x`` over the past mistakes, and on a mistake adds ``x`` to
    both. In this library's terms ``Sigma^-1 = I / a + S`` and ``mu = Sigma b``, so
    the paper's parameter ``c`` (its ``a``) is ``1 / a`` here. The step is AROW's
    with ``r = 1``, taken only on mistakes (``y mu . x <= 0``; a tie updates, as
    the Perceptron here): see :func:`kernelcw.rules.sop` for the derivation.

    Parameters
    ----------
    a : float > 0, default=1.0
        ``Sigma_1 = a I``: one over the paper's ``a``. Small ``a`` (a large paper
        ``a``) makes SOP behave like the Perceptron, large ``a`` whitens the
        inputs by the mistakes' correlation matrix alone.
{SOP_DOC}
{ATTR_DOC}

    References
    ----------
    N. Cesa-Bianchi, A. Conconi, C. Gentile. A second-order perceptron algorithm.
    SIAM J. Comput. 34(3), 640-668, 2005.

    Examples
    --------
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.preprocessing import StandardScaler
    >>> from kernelcw import SOPClassifier
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> X = StandardScaler().fit_transform(X)
    >>> clf = SOPClassifier().fit(X, y)  # one online pass
    >>> clf.n_mistakes_, clf.n_updates_  # it learns from its mistakes only
    (34, 34)
    >>> round(clf.score(X, y), 3)
    0.954
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
        covariance="full",
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
        return RuleParams(RULES["sop"])
