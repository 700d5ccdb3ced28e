"""Slow, obviously-correct NumPy reference for the primal learners of ``kernelcw``.

Written independently of ``kernelcw/`` from the formulas in ``doc/rules.md``. One
round at a time, plain Python/NumPy, the *printed* formulas of the papers (no
cancellation-avoiding rearrangements), the full covariance kept as an explicit matrix.
The tests compare the compiled estimators against this module.

Precision: the printed formulas lose digits to cancellation (m near the threshold,
m << 0 with small v, CW-Var with phi^2 v far from 1; on a noisy stream the printed
sqrt(u) even rounds to 0). :class:`RefLearner` therefore evaluates each round's printed
formula in decimal arithmetic with as many digits as it needs and rounds the step to
doubles (``precise=True``, the default); the vector updates are plain NumPy doubles.
``ref_rule(..., precise=False)`` gives the printed formulas in plain doubles.

Conventions (doc/rules.md):

- ``m = y (mu . x)``, ``v = x' Sigma x`` (before the update); a rule turns (m, v) into a
  step ``(alpha, beta)`` and the learner does
  ``mu <- mu + alpha y Sigma x``, ``Sigma <- Sigma - beta (Sigma x)(Sigma x)'``.
- ``zeta = beta / (1 - beta v)`` is the precision step (``Sigma^-1 += zeta x x'``); it is
  computed here from its closed forms (Stdev/SCW ``alpha phi / sqrt(u)``, Var
  ``2 alpha phi``, AROW ``1/r``, SOP ``1``, first order ``0``), which is what the
  diagonal "kl" method needs.
- SOP (second-order perceptron, Cesa-Bianchi, Conconi & Gentile 2005) in this form:
  ``Sigma^-1 = I/a + sum x x'`` and ``mu = Sigma sum y x`` over the mistakes, so a mistake
  (``m <= 0``, ties included as for the Perceptron) adds ``x x'`` to the precision
  (``zeta = 1``, ``beta = 1/(1 + v)``) and ``y x`` to ``Sigma^-1 mu``, which is
  ``alpha = (1 - m) / (1 + v)``. ``tests/test_baselines.py`` checks this against the
  paper's own matrix-inverse formula.
- ``mu = 0``, ``Sigma = a I`` at the start; prediction ``sign(mu . x)`` with sign(0) = +1;
  a round is a mistake when the prediction differs from ``y``; an update is a round with
  ``alpha > 0`` (Perceptron: every mistake) whose margin change at x, ``alpha v`` (first
  order ``alpha a |x|^2``), exceeds ``STEP_RTOL |f|`` (:func:`skip_negligible`; a zero
  row never updates).
- First-order rules (perceptron, pa, pa1, pa2) keep ``Sigma = a I``, read ``|x|^2`` in
  place of ``v`` in the alpha formula and step ``mu <- mu + alpha y a x``.

Diagonal covariance ``Sigma = diag(s)`` (JMLR 2012, section 6):

- ``"kl"``: alpha from the rule with ``v = sum_p s_p x_p^2``; ``mu += alpha y s x``;
  ``1/s_p += zeta x_p^2``.
- ``"l2"``: same alpha and mean step; ``s_p -= beta (s_p x_p)^2``.
- ``"exact"``: the KL projection restricted to diagonal covariances, solved from its KKT
  conditions with ``scipy.optimize.brentq`` (see :func:`diag_exact_step`). AROW, SOP and
  the first-order rules: identical to ``"kl"``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal, DivisionByZero, InvalidOperation, localcontext

import numpy as np
import scipy.sparse as sp
from scipy.optimize import brentq
from scipy.stats import norm

from kernelcw.rules import STEP_RTOL

__all__ = [
    "ALL_RULES",
    "CW_FAMILY",
    "FIRST_ORDER_RULES",
    "SECOND_ORDER_RULES",
    "RefLearner",
    "RefOvR",
    "RefResult",
    "Step",
    "diag_exact_step",
    "phi_from_eta",
    "ref_rule",
    "ref_step",
    "run_ref",
    "skip_negligible",
    "scw2_alpha_printed",
    "stdev_alpha_printed",
    "stdev_beta_printed",
    "stdev_sqrt_u_printed",
    "update_condition",
    "var_alpha_printed",
]

SECOND_ORDER_RULES = ("stdev", "var", "scw1", "scw2", "arow", "sop")
FIRST_ORDER_RULES = ("perceptron", "pa", "pa1", "pa2")
ALL_RULES = SECOND_ORDER_RULES + FIRST_ORDER_RULES
#: Rules whose constraint is y mu.x >= phi sqrt(x' Sigma x) (the "Stdev" constraint).
CW_FAMILY = ("stdev", "scw1", "scw2")

_EPS = np.finfo(float).eps


def phi_from_eta(eta: float) -> float:
    """phi = Phi^-1(eta), the inverse standard normal CDF."""
    return float(norm.ppf(eta))


# ---------------------------------------------------------------------------------------
# Printed formulas (doc/rules.md table)
#
# Written once for any number type with + - * / and a square root: plain floats, or
# ``decimal.Decimal`` (only integer literals appear, so the two never mix).
# ---------------------------------------------------------------------------------------


def _sqrt(x):
    return x.sqrt() if isinstance(x, Decimal) else math.sqrt(x)


def stdev_alpha_printed(m, v, phi):
    """CW-Stdev: max{0, (-m psi + sqrt(m^2 phi^4 / 4 + v phi^2 xi)) / (v xi)}."""
    psi = 1 + phi**2 / 2
    xi = 1 + phi**2
    return max(0, (-m * psi + _sqrt(m**2 * phi**4 / 4 + v * phi**2 * xi)) / (v * xi))


def stdev_sqrt_u_printed(alpha, v, phi):
    """sqrt(u) = (-alpha v phi + sqrt(alpha^2 v^2 phi^2 + 4 v)) / 2, u = x' Sigma_new x."""
    return (-alpha * v * phi + _sqrt(alpha**2 * v**2 * phi**2 + 4 * v)) / 2


def stdev_beta_printed(alpha, v, phi):
    """beta = alpha phi / (sqrt(u) + v alpha phi)."""
    su = stdev_sqrt_u_printed(alpha, v, phi)
    return alpha * phi / (su + v * alpha * phi)


def var_alpha_printed(m, v, phi):
    """CW-Var: max{0, (-(1 + 2 phi m) + sqrt((1 + 2 phi m)^2 - 8 phi (m - phi v))) / (4 phi v)}.

    At phi = 0 the printed form is 0/0; its limit (phi -> 0) is max{0, -m / v}.
    """
    if phi == 0:
        return max(0, -m / v)
    b = 1 + 2 * phi * m
    return max(0, (-b + _sqrt(b**2 - 8 * phi * (m - phi * v))) / (4 * phi * v))


def scw2_alpha_printed(m, v, phi, C):
    """SCW-II: max{0, (-(2 m n + phi^2 m v) + gamma) / (2 (n^2 + n v phi^2))},
    n = v + 1/(2C), gamma = phi sqrt(phi^2 m^2 v^2 + 4 n v (n + v phi^2))."""
    n = v + 1 / (2 * C)
    gamma = phi * _sqrt(phi**2 * m**2 * v**2 + 4 * n * v * (n + v * phi**2))
    return max(0, (-(2 * m * n + phi**2 * m * v) + gamma) / (2 * (n**2 + n * v * phi**2)))


def update_condition(rule: str, m: float, v: float, phi: float = 0.0, y: int | None = None) -> bool:
    """Whether ``rule`` updates at (m, v) (``v`` = |x|^2 for first-order rules).

    CW-Stdev/SCW: m < phi sqrt(v); CW-Var: m < phi v; AROW, PA, PA-I, PA-II: m < 1
    (PA and PA-I additionally need |x|^2 > 0, else the step is 0/0 and x = 0 anyway);
    Perceptron and SOP: m <= 0 (doc/rules.md; the classic y (w . x) <= 0, as scikit-learn's
    Perceptron): a tie m = 0 updates even when sign(0) = +1 was the right label.
    Decided in double precision (the threshold phi sqrt(v) rounded once or twice).
    """
    if rule in CW_FAMILY:
        return v > 0.0 and m < phi * math.sqrt(v)
    if rule == "var":
        return v > 0.0 and m < phi * v
    if rule == "arow":
        return m < 1.0
    if rule in ("pa", "pa1"):
        return m < 1.0 and v > 0.0
    if rule == "pa2":
        return m < 1.0
    if rule in ("perceptron", "sop"):
        return m <= 0.0
    raise ValueError(f"unknown rule {rule!r}")


@dataclass(frozen=True)
class Step:
    """One rule evaluation: step sizes and whether the round is an update."""

    alpha: float
    beta: float
    zeta: float
    update: bool


def skip_negligible(step: Step, gain: float, f: float) -> Step:
    """No update when the step's margin change at x, ``gain`` (``alpha v``; first order
    ``alpha a |x|^2``), is at most ``STEP_RTOL |f|`` (``kernelcw.rules.STEP_RTOL``)."""
    if step.update and not (gain > STEP_RTOL * abs(f)):
        return Step(0.0, 0.0, 0.0, False)
    return step


def _printed_step(rule, m, v, phi, C, r):
    """(alpha, beta, zeta) of the printed formulas in the number type of the arguments,
    assuming the update condition holds."""
    if rule in CW_FAMILY:
        if rule == "stdev":
            alpha = stdev_alpha_printed(m, v, phi)
        elif rule == "scw1":
            alpha = min(C, stdev_alpha_printed(m, v, phi))
        else:
            alpha = scw2_alpha_printed(m, v, phi, C)
        if alpha > 0:
            su = stdev_sqrt_u_printed(alpha, v, phi)
            return alpha, alpha * phi / (su + v * alpha * phi), alpha * phi / su
        return 0, 0, 0
    if rule == "var":
        alpha = var_alpha_printed(m, v, phi)
        return alpha, 2 * alpha * phi / (1 + 2 * alpha * phi * v), 2 * alpha * phi
    if rule == "arow":
        beta = 1 / (v + r)
        return (1 - m) * beta, beta, 1 / r
    if rule == "sop":  # Sigma^-1 += x x' (zeta = 1); Sigma^-1 mu += y x
        beta = 1 / (1 + v)
        return (1 - m) * beta, beta, 1
    # first order: hinge loss l = max{0, 1 - m}, |x|^2 in place of v
    if rule == "perceptron":
        return 1, 0, 0
    if rule == "pa":
        return (1 - m) / v, 0, 0
    if rule == "pa1":
        return min(C, (1 - m) / v), 0, 0
    if rule == "pa2":
        return (1 - m) / (v + 1 / (2 * C)), 0, 0
    raise ValueError(rule)  # pragma: no cover


def _precise_step(rule, m, v, phi, C, r):
    """The printed formulas in decimal arithmetic, precision doubled (from 40 digits)
    until two evaluations agree to 25 digits; rounded to doubles."""

    def at(prec):
        with localcontext() as ctx:
            ctx.prec = prec
            try:
                out = _printed_step(rule, *(Decimal(t) for t in (m, v, phi, C, r)))
            except (DivisionByZero, InvalidOperation):  # a cancellation ate every digit
                return None
            return tuple(Decimal(t) for t in out)

    prec = 40
    lo = at(prec)
    while prec <= 5000:
        hi = at(2 * prec)
        if (
            lo is not None
            and hi is not None
            and lo[0] > 0
            and all(
                (a == b == 0) or (b != 0 and abs((a - b) / b) < Decimal("1e-25"))
                for a, b in zip(lo, hi, strict=True)
            )
        ):
            return tuple(float(t) for t in hi)
        prec, lo = 2 * prec, hi
    raise RuntimeError(f"printed {rule} formula did not converge at (m, v) = ({m!r}, {v!r})")


def ref_rule(
    rule: str,
    m: float,
    v: float,
    phi: float = 0.0,
    C: float = 1.0,
    r: float = 1.0,
    y: int | None = None,
    precise: bool = False,
) -> Step:
    """(alpha, beta, zeta, update) from the printed formulas; ``v`` = |x|^2 for first order.

    ``precise=False``: the printed formulas in plain double precision (they lose digits
    to cancellation near the threshold, for m << 0 and for extreme v).
    ``precise=True``: the same formulas evaluated in decimal arithmetic with enough digits
    (see :func:`_precise_step`), correctly rounded to doubles: the exact step for the
    double inputs, at any (m, v). The update decision is the double-precision
    :func:`update_condition` either way.
    """
    if not update_condition(rule, m, v, phi, y):
        return Step(0.0, 0.0, 0.0, False)
    if precise and rule not in ("perceptron",):
        out = _precise_step(rule, float(m), float(v), float(phi), float(C), float(r))
    else:
        out = _printed_step(rule, float(m), float(v), float(phi), float(C), float(r))
    alpha, beta, zeta = (float(t) for t in out)
    return Step(alpha, beta, zeta, True)


def ref_step(
    rule: str,
    m: float,
    v: float,
    phi: float = 0.0,
    C: float = 1.0,
    r: float = 1.0,
    y: int | None = None,
    precise: bool = False,
) -> tuple[float, float]:
    """(alpha, beta) of ``rule`` at (m, v), printed formulas (see :func:`ref_rule`)."""
    s = ref_rule(rule, m, v, phi=phi, C=C, r=r, y=y, precise=precise)
    return s.alpha, s.beta


# ---------------------------------------------------------------------------------------
# Diagonal covariance, "exact": KKT of the diagonal-restricted KL projection
# ---------------------------------------------------------------------------------------


def _u_after(zeta: float, x2: np.ndarray, s: np.ndarray) -> float:
    """u(zeta) = x' Sigma_new x with 1/s_new_p = 1/s_p + zeta x_p^2 (only x_p != 0 matter)."""
    return float(np.sum(x2 / (1.0 / s + zeta * x2)))


def _root(f, lo: float, hi: float) -> float:
    """Root of an increasing f on [lo, hi] (f(lo) < 0 < f(hi)) to machine precision."""
    return brentq(f, lo, hi, xtol=1e-300, rtol=4.0 * _EPS, maxiter=2000)


def _grow(f, hi: float) -> float:
    """Double hi until the increasing f is positive there."""
    for _ in range(4000):
        if f(hi) > 0.0:
            return hi
        hi *= 2.0
    raise RuntimeError("no bracket")  # pragma: no cover


def diag_exact_step(
    rule: str, m: float, x: np.ndarray, s: np.ndarray, phi: float, C: float = 1.0
) -> tuple[float, float]:
    """(alpha, zeta) of the exact diagonal update for stdev, scw1, scw2 and var.

    Problem: minimise KL(N(mu, diag(s')) || N(mu_old, diag(s))) over mu and s' subject to
    the rule's constraint. Lagrangian stationarity gives

        mu = mu_old + alpha y s x,       1/s'_p = 1/s_p + zeta x_p^2,

    with zeta = alpha phi / sqrt(u) (Stdev constraint y mu.x >= phi sqrt(x' Sigma' x)) or
    zeta = 2 alpha phi (Var constraint y mu.x >= phi x' Sigma' x), u = u(zeta) =
    sum_p x_p^2 s'_p, and a tight constraint, using y mu.x = m + alpha v:

    - Stdev: m + alpha v = phi sqrt(u(zeta)) with alpha = zeta sqrt(u(zeta)) / phi, i.e.
      F(zeta) = m + v zeta sqrt(u)/phi - phi sqrt(u) = 0. F is increasing (zeta sqrt(u(zeta))
      increases, u decreases), F(0) = m - phi sqrt(v) < 0 when the rule updates.
    - SCW-I: objective KL + C xi, xi >= 0 with y mu.x + xi >= phi sqrt(u): multiplier alpha
      <= C; alpha < C is the Stdev solution, otherwise alpha = C and zeta solves
      zeta sqrt(u(zeta)) = C phi (increasing in zeta).
    - SCW-II: objective KL + C xi^2: stationarity in xi gives xi = alpha / (2C), so
      m + alpha (v + 1/(2C)) = phi sqrt(u(zeta)), again with alpha = zeta sqrt(u)/phi.
    - Var: m + alpha v = phi u(2 alpha phi), increasing in alpha, root in
      [0, (phi v - m)/v] (at the right end the left side is phi v > phi u).

    With phi = 0 the covariance does not move (zeta = 0) and the mean step makes the
    constraint y mu.x >= 0 tight: alpha = -m/v (SCW-I: capped at C, SCW-II: -m/n).
    Returns (0, 0) when the rule does not update.
    """
    x = np.asarray(x, dtype=float)
    s = np.asarray(s, dtype=float)
    nz = x != 0.0
    x2 = x[nz] ** 2
    s = s[nz]
    v = float(np.sum(s * x2))
    if not update_condition(rule, m, v, phi):
        return 0.0, 0.0
    if rule == "var":
        if phi == 0.0:
            return max(0.0, -m / v), 0.0

        def g(alpha):
            return m + alpha * v - phi * _u_after(2.0 * alpha * phi, x2, s)

        if g(0.0) >= 0.0:  # round-off at the threshold: no move
            return 0.0, 0.0
        hi = _grow(g, (phi * v - m) / v)
        alpha = _root(g, 0.0, hi)
        return alpha, 2.0 * alpha * phi

    if rule not in CW_FAMILY:
        raise ValueError(f"no exact diagonal problem for {rule!r}")
    n = v + 1.0 / (2.0 * C) if rule == "scw2" else v
    if phi == 0.0:
        alpha = -m / n
        if rule == "scw1":
            alpha = min(C, alpha)
        return max(0.0, alpha), 0.0

    def sqrt_u(zeta):
        return math.sqrt(_u_after(zeta, x2, s))

    def f(zeta):
        su = sqrt_u(zeta)
        return m + n * zeta * su / phi - phi * su

    if f(0.0) >= 0.0:  # round-off at the threshold: no move
        return 0.0, 0.0
    zeta = _root(f, 0.0, _grow(f, 1.0 / v))
    alpha = zeta * sqrt_u(zeta) / phi
    if rule == "scw1" and alpha > C:

        def h(z):
            return z * sqrt_u(z) - C * phi

        zeta = _root(h, 0.0, _grow(h, 1.0 / v))
        alpha = C
    return alpha, zeta


# ---------------------------------------------------------------------------------------
# One binary learner
# ---------------------------------------------------------------------------------------


class RefLearner:
    """Binary online learner, labels in {-1, +1}, one round at a time.

    Parameters mirror the estimators: ``rule`` in :data:`ALL_RULES`, ``a`` (Sigma_1 = a I;
    SOP's parameter is 1 / a),
    ``eta`` (phi = Phi^-1(eta)) or ``phi`` directly, ``C`` (SCW, PA-I, PA-II), ``r``
    (AROW), ``covariance`` in {"full", "diag"}, ``diag_method`` in {"kl", "l2", "exact"},
    ``precise`` (default True: each round's step is the printed formula evaluated in
    enough decimal digits, see :func:`ref_rule`; False: in plain doubles).
    State: ``mu``, ``Sigma`` ((d, d) for full, (d,) for diag), ``n_updates``,
    ``n_mistakes``.
    """

    def __init__(
        self,
        rule: str,
        d: int,
        a: float = 1.0,
        eta: float = 0.7,
        C: float = 1.0,
        r: float = 1.0,
        covariance: str = "full",
        diag_method: str = "kl",
        phi: float | None = None,
        precise: bool = True,
    ) -> None:
        if rule not in ALL_RULES:
            raise ValueError(f"unknown rule {rule!r}")
        if covariance not in ("full", "diag"):
            raise ValueError(covariance)
        if diag_method not in ("kl", "l2", "exact"):
            raise ValueError(diag_method)
        self.rule = rule
        self.d = d
        self.a = float(a)
        self.phi = phi_from_eta(eta) if phi is None else float(phi)
        self.C = float(C)
        self.r = float(r)
        self.covariance = covariance
        self.diag_method = diag_method
        self.precise = precise
        self.mu = np.zeros(d)
        self.Sigma = self.a * (np.eye(d) if covariance == "full" else np.ones(d))
        self.n_updates = 0
        self.n_mistakes = 0
        self.history: list[Step] = []

    def score(self, x: np.ndarray) -> float:
        return float(self.mu @ x)

    def predict(self, x: np.ndarray) -> int:
        return 1 if self.score(x) >= 0.0 else -1

    def learn(self, x: np.ndarray, y: int) -> tuple[bool, bool]:
        """One round: predict, count, update. Returns (mistake, updated)."""
        x = np.asarray(x, dtype=float)
        y = int(y)
        if y not in (-1, 1):
            raise ValueError("labels must be -1/+1")
        s = self.score(x)
        mistake = (1 if s >= 0.0 else -1) != y
        m = y * s
        self.n_mistakes += int(mistake)
        if self.rule in FIRST_ORDER_RULES:
            step = ref_rule(self.rule, m, float(x @ x), C=self.C, y=y, precise=self.precise)
            step = skip_negligible(step, step.alpha * self.a * float(x @ x), s)
            if step.update:
                self.mu = self.mu + step.alpha * y * self.a * x
        elif self.covariance == "full":
            Sx = self.Sigma @ x
            v = float(x @ Sx)
            step = ref_rule(
                self.rule, m, v, phi=self.phi, C=self.C, r=self.r, y=y, precise=self.precise
            )
            step = skip_negligible(step, step.alpha * v, s)
            if step.update:
                self.mu = self.mu + step.alpha * y * Sx
                self.Sigma = self.Sigma - step.beta * np.outer(Sx, Sx)
        else:
            step = self._learn_diag(x, y, m)
        self.history.append(step)
        self.n_updates += int(step.update)
        return mistake, step.update

    def _learn_diag(self, x: np.ndarray, y: int, m: float) -> Step:
        s = self.Sigma
        v = float(np.sum(s * x**2))
        method = self.diag_method
        if method == "exact" and self.rule in ("arow", "sop"):
            method = "kl"  # AROW, SOP: mean and covariance decouple, the "exact" step is "kl"
        kl = ref_rule(self.rule, m, v, phi=self.phi, C=self.C, r=self.r, y=y, precise=self.precise)
        if skip_negligible(kl, kl.alpha * v, m).update is False:  # (|f| = |m|)
            return Step(0.0, 0.0, 0.0, False)
        if method == "exact":
            alpha, zeta = diag_exact_step(self.rule, m, x, s, self.phi, self.C)
            step = Step(alpha, float("nan"), zeta, alpha > 0.0)
        else:
            step = kl
        if not step.update:
            return step
        self.mu = self.mu + step.alpha * y * s * x
        nz = x != 0.0
        s_new = s.copy()
        if method == "l2":
            s_new[nz] = s[nz] - step.beta * (s[nz] * x[nz]) ** 2
        else:  # "kl" and "exact": precision update 1/s_p += zeta x_p^2
            s_new[nz] = 1.0 / (1.0 / s[nz] + step.zeta * x[nz] ** 2)
        self.Sigma = s_new
        return step


# ---------------------------------------------------------------------------------------
# One-vs-rest and whole streams
# ---------------------------------------------------------------------------------------


class RefOvR:
    """One-vs-rest over ``classes`` (K > 2): model k sees y = +1 for classes[k], -1 else.

    Every example updates every model. Prediction: classes[argmax_k mu_k . x] (ties go
    to the first class, as ``np.argmax``).
    """

    def __init__(self, classes, d: int, **params) -> None:
        self.classes = np.asarray(classes)
        self.learners = [RefLearner(d=d, **params) for _ in self.classes]

    def predict(self, x: np.ndarray):
        scores = [lr.score(x) for lr in self.learners]
        return self.classes[int(np.argmax(scores))]

    def learn(self, x: np.ndarray, label):
        pred = self.predict(x)
        for k, lr in enumerate(self.learners):
            lr.learn(x, 1 if label == self.classes[k] else -1)
        return pred


@dataclass
class RefResult:
    classes: np.ndarray
    predictions: np.ndarray  # label predicted before learning, every round (all passes)
    cumulative_mistakes: np.ndarray
    mu: np.ndarray  # (d,) binary, (K, d) multi-class
    Sigma: np.ndarray  # (d, d) / (d,) binary, (K, d, d) / (K, d) multi-class
    n_updates: object  # int binary, (K,) multi-class
    n_mistakes: object  # int binary (online mistakes of the binary model), (K,) multi-class
    learners: list


def _rows(X):
    if sp.issparse(X):
        X = X.toarray()
    return np.asarray(X, dtype=float)


def run_ref(rule: str, X, y, classes=None, n_passes: int = 1, **params) -> RefResult:
    """Feed (X, y) ``n_passes`` times, in order, to a fresh reference learner.

    Binary (two classes): classes[0] -> -1, classes[1] -> +1, predicted label
    classes[1] when mu . x >= 0. More classes: one-vs-rest (:class:`RefOvR`).
    ``params`` go to :class:`RefLearner` (a, eta or phi, C, r, covariance, diag_method).
    """
    X = _rows(X)
    y = np.asarray(y)
    classes = np.unique(y) if classes is None else np.asarray(classes)
    n, d = X.shape
    preds = []
    if len(classes) == 2:
        lr = RefLearner(rule, d, **params)
        for _ in range(n_passes):
            for i in range(n):
                yb = 1 if y[i] == classes[1] else -1
                preds.append(classes[1] if lr.score(X[i]) >= 0.0 else classes[0])
                lr.learn(X[i], yb)
        learners = [lr]
        mu, Sigma, n_up, n_mis = lr.mu, lr.Sigma, lr.n_updates, lr.n_mistakes
    elif len(classes) > 2:
        ovr = RefOvR(classes, d, rule=rule, **params)
        for _ in range(n_passes):
            for i in range(n):
                preds.append(ovr.learn(X[i], y[i]))
        learners = ovr.learners
        mu = np.array([lr.mu for lr in learners])
        Sigma = np.array([lr.Sigma for lr in learners])
        n_up = np.array([lr.n_updates for lr in learners])
        n_mis = np.array([lr.n_mistakes for lr in learners])
    else:
        raise ValueError("need at least two classes")
    preds = np.asarray(preds)
    y_all = np.tile(y, n_passes)
    return RefResult(
        classes=classes,
        predictions=preds,
        cumulative_mistakes=np.cumsum(preds != y_all),
        mu=mu,
        Sigma=Sigma,
        n_updates=n_up,
        n_mistakes=n_mis,
        learners=learners,
    )
