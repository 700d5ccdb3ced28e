"""Update rules: from the margin ``m`` and the margin variance ``v`` to a step.

Every rule sees the signed margin ``m = y (mu . x)`` and the margin variance
``v = x' Sigma x`` of the current round (before any change) and returns the step
``(alpha, beta, zeta)`` of the second-order update

    mu    <- mu + alpha y Sigma x
    Sigma <- Sigma - beta (Sigma x)(Sigma x)'     equivalently
    Sigma^-1 <- Sigma^-1 + zeta x x',             zeta = beta / (1 - beta v).

``alpha = 0`` means "no update". First-order rules (Perceptron, PA, PA-I, PA-II)
keep ``Sigma = a I`` (``beta = zeta = 0``) and take the squared norm ``|x|^2``
(``k(x, x)`` with a kernel) in place of ``v``.

All functions are pure ``@njit`` scalar functions. The printed formulas of the
papers lose digits to cancellation when ``m`` is large and positive (the update is
then tiny); the forms here are algebraically equal rearrangements (multiplied by
the conjugate) that keep full relative precision, and they take square roots of
sums of squares with ``hypot`` so that no intermediate overflows before the result
does. Division follows numpy's error model (inf/NaN, no exception): the learners
check every step for finiteness and say where it failed. Each docstring gives the printed
formula and the rearrangement; ``tests/test_rules.py`` checks both against
50-digit arithmetic.

Constants: ``phi = Phi^-1(eta)`` for the confidence ``eta`` in (0.5, 1),
``psi = 1 + phi^2 / 2``, ``xi = 1 + phi^2``.

References
----------
- K. Crammer, M. Dredze, F. Pereira. Exact convex confidence-weighted learning.
  NIPS 2008 (CW-Stdev, eqs. 10-11 and Lemma 3).
- M. Dredze, K. Crammer, F. Pereira. Confidence-weighted linear classification.
  ICML 2008 (CW-Var).
- K. Crammer, M. Dredze, F. Pereira. Confidence-weighted linear classification
  for text categorization. JMLR 13, 2012.
- J. Wang, P. Zhao, S. C. H. Hoi. Exact soft confidence-weighted learning.
  ICML 2012 (SCW-I, SCW-II).
- K. Crammer, A. Kulesza, M. Dredze. Adaptive regularization of weight vectors.
  NIPS 2009 (AROW).
- K. Crammer, O. Dekel, J. Keshet, S. Shalev-Shwartz, Y. Singer. Online
  passive-aggressive algorithms. JMLR 7, 2006 (PA, PA-I, PA-II).
- N. Cesa-Bianchi, A. Conconi, C. Gentile. A second-order perceptron algorithm.
  SIAM J. Comput. 34(3), 2005 (SOP).
"""

from __future__ import annotations

import math
from enum import IntEnum
from typing import NamedTuple

from numba import njit

__all__ = [
    "DIAG_METHODS",
    "Rule",
    "RuleParams",
    "RULES",
    "FIRST_ORDER",
    "is_first_order",
    "negligible",
    "cw_stdev",
    "cw_var",
    "scw1",
    "scw2",
    "arow",
    "sop",
    "perceptron",
    "pa",
    "pa1",
    "pa2",
    "stdev_sqrt_u",
    "step",
    "update_condition",
    "STEP_RTOL",
    "VAR_FLOOR",
]


class Rule(IntEnum):
    """The rules' integer codes (the compiled loops take the plain int)."""

    PERCEPTRON = 0
    PA = 1
    PA1 = 2
    PA2 = 3
    STDEV = 4
    VAR = 5
    SCW1 = 6
    SCW2 = 7
    AROW = 8
    SOP = 9


# Plain-int aliases for compiled code (numba types an IntEnum member apart from an int).
PERCEPTRON, PA, PA1, PA2, STDEV, VAR, SCW1, SCW2, AROW, SOP = (int(r) for r in Rule)
#: User-facing rule name -> code (a name -> code registry, as in pynndescent).
RULES: dict[str, int] = {r.name.lower(): int(r) for r in Rule}
#: Rules that keep Sigma = a I and read the squared norm in place of v. The codes carry
#: no order: test membership (here, :attr:`RuleParams.first_order`, or
#: :func:`is_first_order` in compiled code), never ``rule <= PA2``.
FIRST_ORDER = frozenset({PERCEPTRON, PA, PA1, PA2})

#: The margin variance is floored at ``VAR_FLOOR * a * k(x, x)``. Every rule only
#: shrinks Sigma, so ``v <= a k(x, x)`` always; a smaller ``v`` means the model is
#: certain to 12 digits about x. CW-Stdev/CW-Var on a non-separable stream drive
#: v there geometrically (each mistake needs ``zeta >= phi^2 / v``), and below it
#: a ``v`` computed as a difference is rounding noise and the step ``alpha ~ |m| / v``
#: leaves float64's range. Floored rounds are counted and reported by the learners.
VAR_FLOOR = 1e-12

#: A step is skipped (no update, no support vector) when the change it makes to the
#: margin at x, ``alpha v`` (first order: ``alpha a |x|^2``), is at most ``STEP_RTOL |f|``.
#: Such a step lies within rounding of the update boundary: an input that repeats one
#: just learnt lies exactly on it, and rounding alone would decide whether a negligible
#: update happens (under a budget it would take a slot). An input with ``k(x, x) = 0``
#: (an all-zero row, linear kernel) changes nothing and is skipped too. ``doc/rules.md``.
STEP_RTOL = 1e-10

#: The diagonal-covariance methods of JMLR 2012 section 6 -> code.
DIAG_METHODS = {"kl": 0, "l2": 1, "exact": 2}


class RuleParams(NamedTuple):
    """The scalars a rule needs, as one record the compiled loops take whole:
    the integer code, ``phi = Phi^-1(eta)``, ``C``, ``r``, and the prior scale ``a``
    (``Sigma_1 = a I``), which sets the variance floor."""

    rule: int
    phi: float = 0.0
    C: float = 1.0
    r: float = 1.0
    a: float = 1.0

    @property
    def first_order(self) -> bool:
        return self.rule in FIRST_ORDER


@njit(cache=True)
def rule_from_plain(r):
    """The :class:`RuleParams` of its fields as a plain tuple (or of a RuleParams): a
    compiled call from Python takes the rule as ``tuple(rule)``, which numba types
    faster than the namedtuple (about 0.4 us a call, by hand)."""
    return RuleParams(r[0], r[1], r[2], r[3], r[4])


@njit(cache=True, error_model="numpy")
def negligible(gain, f):
    """Whether a step whose margin change at x is ``gain`` (``alpha v``; first order
    ``alpha a |x|^2``) is skipped at decision value ``f``: ``gain <= STEP_RTOL |f|``
    (:data:`STEP_RTOL`). Call it on finite values only."""
    return not (gain > STEP_RTOL * abs(f))


@njit(cache=True, error_model="numpy")
def is_first_order(rule):
    """``rule in FIRST_ORDER`` for compiled code (which cannot read a frozenset);
    ``tests/test_rules.py`` checks that the two agree on every code."""
    return rule == PERCEPTRON or rule == PA or rule == PA1 or rule == PA2


@njit(cache=True, error_model="numpy")
def stdev_sqrt_u(alpha, v, phi):
    """sqrt(u), u = x' Sigma_new x, after a CW-Stdev-family step ``alpha``.

    Printed: ``sqrt(u) = (-alpha v phi + sqrt(alpha^2 v^2 phi^2 + 4 v)) / 2``.
    Used here: ``2 v / (alpha v phi + sqrt(alpha^2 v^2 phi^2 + 4 v))`` (no cancellation).
    """
    avp = alpha * v * phi
    return 2.0 * v / (avp + math.hypot(avp, 2.0 * math.sqrt(v)))


@njit(cache=True, error_model="numpy")
def _stdev_beta_zeta(alpha, v, phi):
    """beta = alpha phi / (sqrt(u) + v alpha phi) and zeta = alpha phi / sqrt(u)."""
    if alpha <= 0.0:
        return 0.0, 0.0
    su = stdev_sqrt_u(alpha, v, phi)
    ap = alpha * phi
    return ap / (su + v * ap), ap / su


@njit(cache=True, error_model="numpy")
def _stdev_alpha(m, v, phi):
    """CW-Stdev alpha (NIPS 2008 eq. 10), cancellation-free.

    Printed: ``max{0, (-m psi + sqrt(m^2 phi^4 / 4 + v phi^2 xi)) / (v xi)}``.
    The update happens exactly when ``m < phi sqrt(v)``. For ``m >= 0`` the
    numerator is rewritten with its conjugate:
    ``alpha = (phi sqrt(v) - m)(phi sqrt(v) + m) / (v (S + m psi))``,
    ``S = sqrt(m^2 phi^4 / 4 + v phi^2 xi)``.
    """
    if not v > 0.0:
        return 0.0
    sv = phi * math.sqrt(v)
    if m >= sv:
        return 0.0
    phi2 = phi * phi
    psi = 1.0 + 0.5 * phi2
    xi = 1.0 + phi2
    s = math.hypot(0.5 * m * phi2, phi * math.sqrt(v * xi))
    if m < 0.0:
        return (s - m * psi) / (v * xi)
    return (sv - m) * ((sv + m) / v) / (s + m * psi)


@njit(cache=True, error_model="numpy")
def cw_stdev(m, v, phi):
    """CW-Stdev (exact convex CW, NIPS 2008 eqs. 10-11): returns (alpha, beta, zeta).

    ``beta = alpha phi / (sqrt(u) + v alpha phi)``, ``zeta = alpha phi / sqrt(u)``.
    """
    alpha = _stdev_alpha(m, v, phi)
    beta, zeta = _stdev_beta_zeta(alpha, v, phi)
    return alpha, beta, zeta


@njit(cache=True, error_model="numpy")
def cw_var(m, v, phi):
    """CW-Var (ICML 2008, linearised variance constraint): returns (alpha, beta, zeta).

    Printed: ``alpha = max{0, (-b + sqrt(b^2 - 8 phi (m - phi v))) / (4 phi v)}``,
    ``b = 1 + 2 phi m``. The discriminant equals ``(1 - 2 phi m)^2 + 8 phi^2 v``
    (computed so, never negative); for ``b > 0`` the conjugate gives
    ``alpha = 2 (phi v - m) / (v (b + sqrt(disc)))``. Updates exactly when
    ``m < phi v``. ``beta = 2 alpha phi / (1 + 2 alpha phi v)``, ``zeta = 2 alpha phi``.
    """
    if not v > 0.0:
        return 0.0, 0.0, 0.0
    if m >= phi * v:
        return 0.0, 0.0, 0.0
    b = 1.0 + 2.0 * phi * m
    c = 1.0 - 2.0 * phi * m
    sd = math.hypot(c, math.sqrt(8.0) * phi * math.sqrt(v))
    if b > 0.0:
        alpha = 2.0 * ((phi * v - m) / v) / (b + sd)
    else:
        alpha = (sd - b) / (4.0 * phi * v)
    zeta = 2.0 * alpha * phi
    beta = zeta / (1.0 + zeta * v)
    return alpha, beta, zeta


@njit(cache=True, error_model="numpy")
def scw1(m, v, phi, C):
    """SCW-I (ICML 2012): ``alpha = min{C, CW-Stdev alpha}``, beta as CW-Stdev."""
    alpha = min(C, _stdev_alpha(m, v, phi))
    beta, zeta = _stdev_beta_zeta(alpha, v, phi)
    return alpha, beta, zeta


@njit(cache=True, error_model="numpy")
def scw2(m, v, phi, C):
    """SCW-II (ICML 2012), cancellation-free: returns (alpha, beta, zeta).

    Printed: ``alpha = max{0, (-(2 m n + phi^2 m v) + gamma) / (2 (n^2 + n v phi^2))}``
    with ``n = v + 1/(2C)``, ``gamma = phi sqrt(phi^2 m^2 v^2 + 4 n v (n + v phi^2))``.
    Multiplying by the conjugate, ``alpha = 2 (phi sqrt(v) - m)(phi sqrt(v) + m) /
    (gamma + m (2 n + phi^2 v))`` for ``m >= 0``. Updates exactly when ``m < phi sqrt(v)``.
    beta as CW-Stdev.
    """
    if not v > 0.0:
        return 0.0, 0.0, 0.0
    sv = phi * math.sqrt(v)
    if m >= sv:
        return 0.0, 0.0, 0.0
    phi2 = phi * phi
    if v > 1e100:
        # the same formulas divided through by v: gamma and w grow like v^1.5 and m v,
        # which overflow float64 from v ~ 1e205 (the plain form then returned alpha = 0)
        t = 0.5 / (C * v)
        p1 = 1.0 + t
        q1 = p1 + phi2
        h = phi * math.hypot(phi * m, 2.0 * math.sqrt(v) * math.sqrt(p1) * math.sqrt(q1))
        w1 = m * (2.0 * p1 + phi2)
        if m < 0.0:
            alpha = ((h - w1) / (2.0 * p1)) / (v * q1)
        else:
            alpha = 2.0 * ((sv - m) / v) * (sv + m) / (h + w1)
        beta, zeta = _stdev_beta_zeta(alpha, v, phi)
        return alpha, beta, zeta
    n = v + 0.5 / C
    nv = n + v * phi2
    gamma = phi * math.hypot(phi * m * v, 2.0 * math.sqrt(n) * math.sqrt(v) * math.sqrt(nv))
    w = m * (2.0 * n + phi2 * v)
    if m < 0.0:
        alpha = ((gamma - w) / (2.0 * n)) / nv
    else:
        alpha = 2.0 * (sv - m) * (sv + m) / (gamma + w)
    beta, zeta = _stdev_beta_zeta(alpha, v, phi)
    return alpha, beta, zeta


@njit(cache=True, error_model="numpy")
def arow(m, v, r):
    """AROW (NIPS 2009): ``beta = 1/(v + r)``, ``alpha = (1 - m) beta`` when m < 1.

    ``zeta = beta / (1 - beta v) = 1 / r``.
    """
    if m >= 1.0:
        return 0.0, 0.0, 0.0
    beta = 1.0 / (v + r)
    return (1.0 - m) * beta, beta, 1.0 / r


@njit(cache=True, error_model="numpy")
def sop(m, v):
    """Second-order perceptron (Cesa-Bianchi, Conconi & Gentile, SIAM J. Comput. 2005).

    Returns ``(alpha, beta, zeta) = ((1 - m) beta, 1 / (1 + v), 1)`` when ``m <= 0``,
    else zeros: AROW with ``r = 1``, restricted to mistakes.

    The paper keeps, over the past mistakes only, ``S = sum x x'`` and ``b = sum y x``
    (its ``v``), and predicts ``sign(b' (c I + S + x x')^-1 x)`` with its parameter
    ``c > 0`` (the paper's ``a``); on a mistake it adds ``x x'`` to ``S`` and ``y x``
    to ``b``. Put ``Sigma = (c I + S)^-1`` and ``mu = Sigma b``, so ``Sigma_1 = I / c``:
    the paper's ``a`` is ``1 / a`` of this library (``Sigma_1 = a I``).

    Prediction. By Sherman-Morrison, with ``v = x' Sigma x``,
    ``(Sigma^-1 + x x')^-1 x = Sigma x / (1 + v)``, so the paper's margin is
    ``mu . x / (1 + v)``: the same sign as ``mu . x``. Its update condition
    "prediction wrong" is ``m = y mu . x <= 0`` (ties update, as the Perceptron here).

    Update. ``Sigma^-1 <- Sigma^-1 + x x'`` is the precision step with ``zeta = 1``,
    i.e. ``Sigma <- Sigma - beta (Sigma x)(Sigma x)'`` with
    ``beta = zeta / (1 + zeta v) = 1 / (1 + v)``. The new mean is
    ``Sigma' (b + y x) = mu - beta Sigma x (x . mu) + y Sigma x (1 - beta v)``;
    with ``x . mu = y m`` and ``1 - beta v = beta`` this is
    ``mu + y Sigma x (beta - beta m)``: ``alpha = (1 - m) beta``. AROW's step
    (``beta = 1/(v + r)``, ``alpha = (1 - m) beta``, ``zeta = 1/r``) at ``r = 1`` is the
    same, but AROW also updates when ``0 < m < 1``.

    No cancellation: ``1 - m >= 1`` and ``1 + v >= 1`` on every update.
    """
    if m <= 0.0:
        beta = 1.0 / (1.0 + v)
        return (1.0 - m) * beta, beta, 1.0
    return 0.0, 0.0, 0.0


@njit(cache=True, error_model="numpy")
def perceptron(m, sqnorm):
    """Perceptron: ``alpha = 1`` when ``m <= 0`` (``doc/rules.md``; the classic ``y (w . x) <= 0``,
    as scikit-learn's Perceptron). A tie ``m = 0`` updates even when the prediction
    sign(0) = +1 was right, so such a round is an update but not a mistake."""
    if m <= 0.0:
        return 1.0, 0.0, 0.0
    return 0.0, 0.0, 0.0


@njit(cache=True, error_model="numpy")
def pa(m, sqnorm):
    """PA: ``alpha = l / |x|^2`` with the hinge loss ``l = max{0, 1 - m}``."""
    if m >= 1.0 or not sqnorm > 0.0:
        return 0.0, 0.0, 0.0
    return (1.0 - m) / sqnorm, 0.0, 0.0


@njit(cache=True, error_model="numpy")
def pa1(m, sqnorm, C):
    """PA-I: ``alpha = min{C, l / |x|^2}``."""
    if m >= 1.0 or not sqnorm > 0.0:
        return 0.0, 0.0, 0.0
    return min(C, (1.0 - m) / sqnorm), 0.0, 0.0


@njit(cache=True, error_model="numpy")
def pa2(m, sqnorm, C):
    """PA-II: ``alpha = l / (|x|^2 + 1/(2C))``."""
    if m >= 1.0:
        return 0.0, 0.0, 0.0
    return (1.0 - m) / (sqnorm + 0.5 / C), 0.0, 0.0


@njit(cache=True, error_model="numpy")
def step(rule, m, v, phi, C, r):
    """Dispatch on the integer code ``rule`` (see ``RULES``).

    ``v`` is the margin variance for second-order rules and the squared norm
    ``|x|^2`` (or ``k(x, x)``) for first-order ones. Returns (alpha, beta, zeta).
    """
    if rule == STDEV:
        return cw_stdev(m, v, phi)
    if rule == VAR:
        return cw_var(m, v, phi)
    if rule == SCW1:
        return scw1(m, v, phi, C)
    if rule == SCW2:
        return scw2(m, v, phi, C)
    if rule == AROW:
        return arow(m, v, r)
    if rule == SOP:
        return sop(m, v)
    if rule == PERCEPTRON:
        return perceptron(m, v)
    if rule == PA:
        return pa(m, v)
    if rule == PA1:
        return pa1(m, v, C)
    return pa2(m, v, C)


@njit(cache=True, error_model="numpy")
def update_condition(rule, m, v, phi):
    """Whether ``rule`` updates at (m, v): the side of the constraint, no arithmetic
    on the step. CW-Stdev/SCW: ``m < phi sqrt(v)``; CW-Var: ``m < phi v``;
    AROW/PA: ``m < 1``; Perceptron and SOP: ``m <= 0``."""
    if rule == STDEV or rule == SCW1 or rule == SCW2:
        return v > 0.0 and m < phi * math.sqrt(v)
    if rule == VAR:
        return v > 0.0 and m < phi * v
    if rule == PERCEPTRON or rule == SOP:
        return m <= 0.0
    return m < 1.0
