"""The compiled scalar rules (``kernelcw.rules``) against the printed formulas.

Three references:

1. the printed formulas in plain floats (``tests/reference.py``), in regions where they
   are well conditioned: rtol 1e-12;
2. the printed formulas in ``decimal`` arithmetic (50 digits, more where the printed form
   needs it to converge, see ``exact_prec``), everywhere, including the
   regions where the float forms cancel (m near the threshold, m << 0, v tiny or huge);
3. algebraic facts: the update condition, zeta = beta / (1 - beta v), a tight constraint
   after a full-covariance step, phi = 0 leaves Sigma alone.

Tolerance against the decimal values. The inputs (m, v, phi, C, r) are exact doubles and
the decimal value is the exact output for them. Near the update threshold the output
itself is ill conditioned: alpha is proportional to phi^2 v - m^2, so a relative change
eps in v or phi moves alpha by about eps / delta, delta = 1 - m / (phi sqrt(v)). Any
double-precision code that rounds phi * sqrt(v) once inherits that (only extra precision,
e.g. an error-free phi^2 v - m^2, would avoid it), so a flat 1e-13 cannot hold there:
at delta = 1e-6 the error is ~1e-10 for both the printed and the rearranged forms
(unless phi sqrt(v) happens to be exact, e.g. v = 1). The fast forms are held to

    |fast - exact| / |exact| <= 1e-13 + 4 eps kappa,

where kappa = sum_p |d log(out) / d log(p)| over the inputs p is the relative condition
number of that output, computed in decimal. Where kappa = O(1) (everything away from the
threshold) this is a flat 1e-13. (Measured: the fast forms stay within about
1.5 eps max(1, kappa).) ``test_printed_float_forms_lose_digits`` shows concrete points
with kappa = O(1) where the printed float forms miss by orders of magnitude and the fast
forms do not. The realistic range is v in [1e-12, 1e12]; ``test_extreme_magnitudes``
checks 1e-300 .. 1e200 separately (overflow/underflow of intermediate products).
"""

from __future__ import annotations

import decimal
import math
from decimal import Decimal, localcontext

import numpy as np
import pytest
import reference as ref
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernelcw import rules as K

EPS = float(np.finfo(float).eps)
DEC_PREC = 50

SETTINGS = settings(
    max_examples=300,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)

SECOND_ORDER = ("stdev", "var", "scw1", "scw2", "arow", "sop")
FIRST_ORDER = ("perceptron", "pa", "pa1", "pa2")


def fast(rule, m, v, phi=0.0, C=1.0, r=1.0):
    """The compiled rule as (alpha, beta, zeta); ``v`` = |x|^2 for first-order rules."""
    if rule == "stdev":
        out = K.cw_stdev(m, v, phi)
    elif rule == "var":
        out = K.cw_var(m, v, phi)
    elif rule == "scw1":
        out = K.scw1(m, v, phi, C)
    elif rule == "scw2":
        out = K.scw2(m, v, phi, C)
    elif rule == "arow":
        out = K.arow(m, v, r)
    elif rule == "sop":
        out = K.sop(m, v)
    elif rule == "perceptron":
        out = K.perceptron(m, v)
    elif rule == "pa":
        out = K.pa(m, v)
    elif rule == "pa1":
        out = K.pa1(m, v, C)
    elif rule == "pa2":
        out = K.pa2(m, v, C)
    else:
        raise ValueError(rule)
    assert len(out) == 3
    return tuple(float(o) for o in out)


# ---------------------------------------------------------------------------------------
# 50-digit printed formulas
# ---------------------------------------------------------------------------------------


def dec_rule(rule, m, v, phi=0.0, C=1.0, r=1.0, prec=DEC_PREC):
    """Printed formulas of doc/rules.md in ``prec``-digit decimal arithmetic.

    Returns Decimals (alpha, beta, zeta) with zeta = beta / (1 - beta v) (the definition)
    for second-order rules and 0 for first-order ones. The update condition is decided in
    the same precision (CW-Stdev/SCW: m < phi sqrt(v); CW-Var: m < phi v; AROW/PA: m < 1;
    Perceptron and SOP: m <= 0). SOP in its CW form (kernelcw.rules.sop):
    Sigma^-1 += x x' (zeta = 1 by definition, beta = 1 / (1 + v)), alpha = (1 - m) beta.
    """
    Z = Decimal(0)
    with localcontext() as ctx:
        ctx.prec = prec
        m, v, phi, C, r = (Decimal(a) for a in (m, v, phi, C, r))
        one, two, four = Decimal(1), Decimal(2), Decimal(4)
        if rule in ("stdev", "scw1", "scw2"):
            if not (v > 0 and m < phi * v.sqrt()):
                return Z, Z, Z
            if phi == 0:
                alpha = -m / v if rule != "scw2" else -m / (v + one / (two * C))
                if rule == "scw1":
                    alpha = min(C, alpha)
                return +alpha, Z, Z
            psi = one + phi**2 / two
            xi = one + phi**2
            if rule in ("stdev", "scw1"):
                alpha = (-m * psi + (m**2 * phi**4 / four + v * phi**2 * xi).sqrt()) / (v * xi)
                if rule == "scw1":
                    alpha = min(C, alpha)
            else:
                n = v + one / (two * C)
                gamma = phi * (phi**2 * m**2 * v**2 + four * n * v * (n + v * phi**2)).sqrt()
                alpha = (-(two * m * n + phi**2 * m * v) + gamma) / (two * (n**2 + n * v * phi**2))
            su = (-alpha * v * phi + (alpha**2 * v**2 * phi**2 + four * v).sqrt()) / two
            beta = alpha * phi / (su + v * alpha * phi)
            return alpha, beta, beta / (one - beta * v)
        if rule == "var":
            if not (v > 0 and m < phi * v):
                return Z, Z, Z
            if phi == 0:
                return -m / v, Z, Z
            b = one + two * phi * m
            alpha = (-b + (b**2 - 8 * phi * (m - phi * v)).sqrt()) / (four * phi * v)
            beta = two * alpha * phi / (one + two * alpha * phi * v)
            return alpha, beta, beta / (one - beta * v)
        if rule == "arow":
            if not m < one:
                return Z, Z, Z
            beta = one / (v + r)
            return (one - m) * beta, beta, beta / (one - beta * v)
        if rule == "sop":
            if not m <= 0:
                return Z, Z, Z
            beta = one / (one + v)
            return (one - m) * beta, beta, beta / (one - beta * v)
        if rule == "perceptron":
            return (one if m <= 0 else Z), Z, Z
        if not m < one:
            return Z, Z, Z
        if rule == "pa":
            return (one - m) / v, Z, Z
        if rule == "pa1":
            return min(C, (one - m) / v), Z, Z
        if rule == "pa2":
            return (one - m) / (v + one / (two * C)), Z, Z
    raise ValueError(rule)


_INPUTS = {
    "stdev": ("m", "v", "phi"),
    "var": ("m", "v", "phi"),
    "scw1": ("m", "v", "phi", "C"),
    "scw2": ("m", "v", "phi", "C"),
    "arow": ("m", "v", "r"),
    "sop": ("m", "v"),
    "perceptron": ("m",),
    "pa": ("m", "v"),
    "pa1": ("m", "v", "C"),
    "pa2": ("m", "v", "C"),
}


def _agree(a, b, digits):
    with localcontext() as ctx:
        ctx.prec = 2 * DEC_PREC
        return all(
            (x == 0 and y == 0) or (y != 0 and abs((x - y) / y) < Decimal(10) ** -digits)
            for x, y in zip(a, b, strict=True)
        )


def _dec_updates(rule, args):
    """The update condition, decided in 60 digits (no cancellation in a comparison)."""
    with localcontext() as ctx:
        ctx.prec = 60
        m, v, phi = (Decimal(args[k]) for k in ("m", "v", "phi"))
        if rule in ("stdev", "scw1", "scw2"):
            return v > 0 and m < phi * v.sqrt()
        if rule == "var":
            return v > 0 and m < phi * v
        if rule in ("perceptron", "sop"):
            return m <= 0
        return m < 1 and (v > 0 or rule not in ("pa", "pa1"))


def exact_prec(rule, args):
    """A working precision (50, 100, 200, ... digits) at which the printed formula has
    converged: it agrees to 35 digits with twice the precision, and alpha is non-zero
    whenever the update condition holds.

    50 digits are enough except for CW-Var with phi^2 v far below 1, where the printed
    form cancels about -log10(phi^2 v) digits."""
    return _converged(rule, args)[0]


def _converged(rule, args):
    """(exact_prec(rule, args), the printed formula at that precision)."""
    updates = _dec_updates(rule, args)

    def attempt(prec):
        try:
            return dec_rule(rule, **args, prec=prec)
        except decimal.DivisionByZero:  # 1 - beta v rounded to 0: not enough digits
            return None

    prec = DEC_PREC
    lo = attempt(prec)
    while prec <= 6400:
        hi = attempt(2 * prec)
        if lo is not None and hi is not None and _agree(lo, hi, 35) and (lo[0] != 0) == updates:
            return 2 * prec, hi
        prec, lo = 2 * prec, hi
    raise AssertionError(f"decimal reference did not converge for {rule} {args}")


def exact_value(rule, args):
    """(alpha, beta, zeta) for the exact double inputs ``args``, to >= 35 digits: the
    value exact_prec converged to (dec_rule at that precision, not computed twice)."""
    return _converged(rule, args)[1]


def condition_numbers(rule, args):
    """kappa_i = sum_p |d log(out_i) / d log(p)|, central differences (h = 1e-20) at twice
    the converged precision (so the difference quotient keeps > 35 digits)."""
    prec = 2 * exact_prec(rule, args)
    base = dec_rule(rule, **args, prec=prec)
    h = Decimal("1e-20")
    kappa = [Decimal(0)] * 3
    with localcontext() as ctx:
        ctx.prec = prec
        for name in _INPUTS[rule]:
            p = Decimal(args[name])
            if p == 0:
                continue
            plus = dec_rule(rule, **{**args, name: p * (1 + h)}, prec=prec)
            minus = dec_rule(rule, **{**args, name: p * (1 - h)}, prec=prec)
            for i in range(3):
                if base[i] != 0:
                    kappa[i] += abs((plus[i] - minus[i]) / (2 * h * base[i]))
    return [float(k) for k in kappa]


def rel_err(x, exact):
    with localcontext() as ctx:
        ctx.prec = DEC_PREC
        return float(abs((Decimal(x) - exact) / exact))


def assert_matches_decimal(rule, args, what=""):
    got = fast(rule, **args)
    exact = exact_value(rule, args)
    # kappa >= 0, so tol >= 1e-13: kappa (two more formula evaluations per input, at
    # twice the precision) is computed only where an output's error exceeds 1e-13
    kappa = None
    for i, (name, g, e) in enumerate(zip(("alpha", "beta", "zeta"), got, exact, strict=True)):
        if e == 0:
            assert g == 0.0, f"{rule} {name}: exact 0, fast {g!r} at {args} {what}"
            continue
        err = rel_err(g, e)
        if err <= 1e-13:
            continue
        if kappa is None:
            kappa = condition_numbers(rule, args)
        k = kappa[i]
        tol = 1e-13 + 4 * EPS * k
        assert err <= tol, (
            f"{rule} {name} at {args} {what}: fast {g!r}, exact {float(e)!r}, "
            f"rel err {err:.3e} > tol {tol:.3e} (kappa {k:.3e})"
        )


# ---------------------------------------------------------------------------------------
# Strategies
# ---------------------------------------------------------------------------------------

etas = st.floats(0.51, 0.999)
log_v = st.floats(-12.0, 12.0)
log_C = st.floats(-3.0, 3.0)


def _threshold(rule, v, phi):
    if rule in ("stdev", "scw1", "scw2"):
        return phi * math.sqrt(v)
    if rule == "var":
        return phi * v
    return 1.0


@st.composite
def rule_inputs(draw, rule):
    """(m, v, phi, C, r) over the whole range, biased to the cancellation regions."""
    eta = draw(etas)
    phi = ref.phi_from_eta(eta)
    v = 10.0 ** draw(log_v)
    C = 10.0 ** draw(log_C)
    r = 10.0 ** draw(log_C)
    thr = _threshold(rule, v, phi)
    scale = math.sqrt(v) if rule in ("stdev", "scw1", "scw2") else thr
    kind = draw(st.sampled_from(["near", "below", "negative", "far_negative", "zero", "above"]))
    if kind == "near":  # m just under the threshold, 1e-1 .. 1e-14 relative
        m = thr * (1.0 - 10.0 ** -draw(st.floats(1.0, 14.0)))
    elif kind == "below":
        m = thr * draw(st.floats(-1.0, 1.0))
    elif kind == "negative":
        m = -scale * draw(st.floats(0.0, 10.0))
    elif kind == "far_negative":
        m = -scale * 10.0 ** draw(st.floats(1.0, 6.0))
    elif kind == "zero":
        m = 0.0
    else:
        m = thr * (1.0 + 10.0 ** -draw(st.floats(1.0, 14.0)))
    return {"m": m, "v": v, "phi": phi, "C": C, "r": r}


# ---------------------------------------------------------------------------------------
# 1. Against the printed float formulas where those are well conditioned
# ---------------------------------------------------------------------------------------


@st.composite
def well_conditioned(draw, rule):
    phi = ref.phi_from_eta(draw(st.floats(0.55, 0.95)))
    C = 10.0 ** draw(st.floats(-2.0, 2.0))
    r = 10.0 ** draw(st.floats(-1.0, 1.0))
    if rule in ("stdev", "scw1", "scw2"):
        v = 10.0 ** draw(st.floats(-2.0, 2.0))
        m = math.sqrt(v) * draw(st.floats(-3.0, 0.5 * phi))
    elif rule == "var":
        v = draw(st.floats(0.05, 5.0)) / phi**2
        m = draw(st.floats(-3.0 / phi, 0.5 * phi * v))
    elif rule == "perceptron":
        v = 10.0 ** draw(st.floats(-2.0, 2.0))
        m = draw(st.floats(-3.0, 3.0).filter(lambda t: abs(t) > 1e-6))
    else:
        v = 10.0 ** draw(st.floats(-2.0, 2.0))
        m = draw(st.floats(-3.0, 0.9))
    return {"m": m, "v": v, "phi": phi, "C": C, "r": r}


@pytest.mark.parametrize("rule", SECOND_ORDER + FIRST_ORDER)
@SETTINGS
@given(data=st.data())
def test_matches_printed_formula_well_conditioned(rule, data):
    args = data.draw(well_conditioned(rule))
    got = fast(rule, **args)
    want = ref.ref_rule(rule, **args)
    np.testing.assert_allclose(got, (want.alpha, want.beta, want.zeta), rtol=1e-12, atol=0)
    assert (got[0] > 0) == want.update


# ---------------------------------------------------------------------------------------
# 2. Against 50-digit arithmetic everywhere
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("rule", SECOND_ORDER + FIRST_ORDER)
@SETTINGS
@given(data=st.data())
def test_matches_50_digit_printed_formula(rule, data):
    args = data.draw(rule_inputs(rule))
    assert_matches_decimal(rule, args)


GRID_V = [1e-12, 1e-6, 0.37, 1.0, 2.0, 1e6, 1e12]
EXTREME_V = [1e-300, 1e-200, 1e-100, 1e100, 1e200]


@pytest.mark.parametrize("rule", ["stdev", "scw1", "scw2", "var"])
@pytest.mark.parametrize("v", GRID_V)
@pytest.mark.parametrize("eta", [0.55, 0.7, 0.9, 0.999])
def test_matches_50_digit_on_grid(rule, v, eta):
    """Fixed grid over the cancellation regions (realistic magnitudes of v)."""
    _check_grid(rule, v, eta)


@pytest.mark.parametrize("rule", ["stdev", "scw1", "scw2", "var"])
@pytest.mark.parametrize("v", EXTREME_V)
@pytest.mark.parametrize("eta", [0.7, 0.999])
def test_extreme_magnitudes(rule, v, eta):
    """The same grid at absurd magnitudes of v (1e-300 .. 1e200, m up to 1e6 sqrt(v)):
    no overflow/underflow in intermediate products. A robustness check, kept apart from
    the realistic range."""
    _check_grid(rule, v, eta)


@pytest.mark.parametrize("v", [1e150, 1e205, 1e250, 1e300])
@pytest.mark.parametrize("eta", [0.7, 0.999])
def test_scw2_at_the_largest_magnitudes(v, eta):
    """SCW-II's gamma grows like v^1.5: from v ~ 1e205 the plain form overflowed and
    returned alpha = 0 (no update); its rescaled form matches the decimal reference."""
    _check_grid("scw2", v, eta)


def _check_grid(rule, v, eta):
    phi = ref.phi_from_eta(eta)
    thr = _threshold(rule, v, phi)
    scale = math.sqrt(v) if rule != "var" else thr
    ms = [thr * (1 - 10.0**-k) for k in (1, 3, 6, 9, 12, 14)]
    ms += [0.0, 0.5 * thr, -scale, -1e3 * scale, -1e6 * scale]
    for C in (1e-3, 1.0, 1e3):
        for m in ms:
            args = {"m": m, "v": v, "phi": phi, "C": C, "r": 1.0}
            if all(math.isfinite(x) and (x == 0 or abs(x) > 1e-290) for x in (m, v)):
                assert_matches_decimal(rule, args, what=f"(grid v={v}, eta={eta})")


@pytest.mark.parametrize("v", [1e-12, 1e-3, 1.0, 1e3, 1e12])
@pytest.mark.parametrize("r", [1e-6, 1e-2, 1.0, 1e2])
def test_arow_matches_50_digit_on_grid(v, r):
    for m in (-1e6, -1.0, 0.0, 0.5, 1.0 - 1e-12, 1.0, 2.0):
        assert_matches_decimal("arow", {"m": m, "v": v, "phi": 0.0, "C": 1.0, "r": r})


@SETTINGS
@given(data=st.data())
def test_decimal_reference_is_converged(data):
    """The exact values used above agree with ones computed at 4x the precision."""
    rule = data.draw(st.sampled_from(SECOND_ORDER + ("pa2",)))
    args = data.draw(rule_inputs(rule))
    prec = exact_prec(rule, args)
    assert _agree(exact_value(rule, args), dec_rule(rule, **args, prec=4 * prec), 35)


def test_decimal_precision_needed_for_var_tiny_v():
    """50 digits are not enough for the printed CW-Var form at phi^2 v ~ 1e-200 (the
    adaptive precision above takes care of it)."""
    args = dict(m=1e-201, v=1e-200, phi=0.5, C=1.0, r=1.0)
    assert dec_rule("var", **args, prec=50)[0] == 0
    assert exact_prec("var", args) > 200
    assert exact_value("var", args)[0] > 0


# Points where a printed float form loses many digits; the condition number of the
# output there is O(1) (or the fast form is exact), so a flat 1e-13 applies to fast.
_PHI7 = ref.phi_from_eta(0.7)
_PHI9 = ref.phi_from_eta(0.9)
LOSSY_POINTS = [
    # rule, args, output index, what cancels
    ("stdev", dict(m=-1e3, v=1e-6, phi=_PHI7), 2, "zeta: sqrt(u) = (-a v phi + sqrt(.))/2, m << 0"),
    ("stdev", dict(m=-1e4, v=1.0, phi=_PHI9), 2, "zeta, m << 0"),
    ("scw1", dict(m=-1e4, v=1.0, phi=_PHI9, C=1e9), 2, "zeta, m << 0"),
    ("scw2", dict(m=-1e4, v=4.0, phi=_PHI9, C=1.0), 2, "zeta, m << 0"),
    # v = 1, 4: phi sqrt(v) is exact in doubles, so the conjugate form stays exact here
    ("stdev", dict(m=_PHI7 * (1 - 1e-9), v=1.0, phi=_PHI7), 0, "alpha, m just under the threshold"),
    ("scw2", dict(m=_PHI9 * 2 * (1 - 1e-9), v=4.0, phi=_PHI9, C=1.0), 0, "alpha, m near threshold"),
    ("var", dict(m=0.0, v=1e-12, phi=_PHI7), 0, "alpha: sqrt(b^2 + t) - b, phi^2 v tiny"),
    ("var", dict(m=0.5 * _PHI7 * 1e-9, v=1e-9, phi=_PHI7), 0, "alpha, phi^2 v tiny"),
    ("var", dict(m=0.999 * _PHI7 * 1e6, v=1e6, phi=_PHI7), 0, "alpha, m large near phi v"),
    ("arow", dict(m=0.0, v=1e10, r=1.0), 2, "zeta = beta / (1 - beta v), v >> r"),
    ("sop", dict(m=-0.5, v=1e10), 2, "zeta = beta / (1 - beta v), v >> 1"),
]


@pytest.mark.parametrize("rule,args,idx,what", LOSSY_POINTS)
def test_printed_float_forms_lose_digits(rule, args, idx, what):
    """The printed float form is off by > 1e-9 here; the compiled form by < 1e-13."""
    args = {"phi": 0.0, "C": 1.0, "r": 1.0, **args}
    exact = exact_value(rule, args)[idx]
    assert exact != 0
    got = fast(rule, **args)[idx]
    p = ref.ref_rule(rule, **args)
    printed = (p.alpha, p.beta, p.beta / (1.0 - p.beta * args["v"]))[idx]
    if rule not in ("arow", "sop") and idx == 2:
        printed = p.zeta  # alpha phi / sqrt(u) with the printed sqrt(u)
    assert rel_err(printed, exact) > 1e-9, f"{what}: printed form unexpectedly accurate"
    assert rel_err(got, exact) < 1e-13, f"{what}: fast {got!r} vs {float(exact)!r}"


# ---------------------------------------------------------------------------------------
# 3. Algebraic facts
# ---------------------------------------------------------------------------------------


def _float_condition(rule, m, v, phi):
    if rule in ("stdev", "scw1", "scw2"):
        return v > 0 and m < phi * math.sqrt(v)
    if rule == "var":
        return v > 0 and m < phi * v
    if rule in ("arow", "pa2"):
        return m < 1.0
    if rule in ("pa", "pa1"):
        return m < 1.0 and v > 0
    return m <= 0.0  # perceptron, sop (see test_perceptron_scalar)


@pytest.mark.parametrize("rule", SECOND_ORDER + FIRST_ORDER)
@SETTINGS
@given(data=st.data())
def test_update_condition_and_signs(rule, data):
    """alpha > 0 exactly when the constraint is violated; steps are finite, >= 0, and
    beta v < 1 (Sigma stays positive definite); SCW-I never exceeds C."""
    args = data.draw(rule_inputs(rule))
    a, b, z = fast(rule, **args)
    assert all(math.isfinite(t) and t >= 0.0 for t in (a, b, z)), (a, b, z)
    assert (a > 0.0) == _float_condition(rule, args["m"], args["v"], args["phi"]), (args, a)
    if a == 0.0:
        assert b == 0.0 and z == 0.0
    if rule in SECOND_ORDER:
        assert b * args["v"] < 1.0
    if rule == "scw1":
        assert a <= args["C"]
        sa = fast("stdev", **args)
        assert a == min(args["C"], sa[0])
        if sa[0] <= args["C"]:
            assert (a, b, z) == sa


def _exact_below(rule, m, v, phi):
    """m < phi sqrt(v) (resp. m < phi v) in exact rational arithmetic."""
    from fractions import Fraction as F

    m, v, phi = F(m), F(v), F(phi)
    if rule == "var":
        return m < phi * v
    return m < 0 or m * m < phi * phi * v


@pytest.mark.parametrize("rule", ["stdev", "scw1", "scw2", "var"])
def test_update_condition_at_the_boundary(rule):
    """Around the threshold, to the last ulps: the decision agrees with exact (rational)
    comparison once m is 3 ulps or more from fl(threshold); within 2 ulps the decision
    follows the rounded threshold (phi * sqrt(v) is itself rounded), but the step is
    always consistent (alpha > 0 iff the float condition) and tiny."""
    rng = np.random.default_rng(11)
    for _ in range(400):
        v = 10.0 ** rng.uniform(-8, 8)
        phi = ref.phi_from_eta(rng.uniform(0.55, 0.99))
        thr = _threshold(rule, v, phi)
        for k in range(-6, 7):
            m = thr
            step = np.inf if k > 0 else -np.inf
            for _ in range(abs(k)):
                m = np.nextafter(m, step)
            m = float(m)
            a = fast(rule, m, v, phi, 1e300, 1.0)[0]  # C large: the cap is not tested here
            assert (a > 0) == _float_condition(rule, m, v, phi)
            if abs(k) >= 3:
                assert (a > 0) == _exact_below(rule, m, v, phi), (rule, m, v, phi, k)
            if a > 0 and k >= -2:  # a negligible step, relative to the one at m = 0
                assert a < 1e-12 * fast(rule, 0.0, v, phi, 1e300, 1.0)[0]


@pytest.mark.parametrize("rule", ["stdev", "var", "scw1", "scw2", "arow", "sop"])
@SETTINGS
@given(data=st.data())
def test_zeta_is_beta_over_one_minus_beta_v(rule, data):
    args = data.draw(rule_inputs(rule))
    a, b, z = fast(rule, **args)
    v = args["v"]
    if a == 0.0:
        return
    # beta = zeta / (1 + zeta v) is well conditioned everywhere
    assert math.isclose(b, z / (1.0 + z * v), rel_tol=1e-13), (args, b, z)
    # zeta = beta / (1 - beta v) is, where beta v is not close to 1
    if b * v <= 0.5:
        assert math.isclose(z, b / (1.0 - b * v), rel_tol=1e-13), (args, b, z)


def _random_spd(rng, d):
    A = rng.normal(size=(d, d))
    return A @ A.T / d + 0.2 * np.eye(d)


@pytest.mark.parametrize("rule", ["stdev", "scw1", "scw2", "var"])
@pytest.mark.parametrize("seed", range(6))
def test_constraint_tight_after_full_update(rule, seed):
    """Full covariance, random PD Sigma: after one step
    CW-Stdev, SCW-I (alpha < C):  y mu'.x = phi sqrt(x' Sigma' x);
    SCW-II:                     y mu'.x + alpha / (2C) = phi sqrt(x' Sigma' x);
    CW-Var:                     y mu'.x = phi x' Sigma' x;
    and Sigma'^-1 = Sigma^-1 + zeta x x'."""
    rng = np.random.default_rng(seed)
    d = 6
    Sigma = _random_spd(rng, d)
    x = rng.normal(size=d)
    y = rng.choice([-1, 1])
    phi = ref.phi_from_eta(rng.uniform(0.6, 0.95))
    C = 50.0
    mu = rng.normal(size=d)
    v = float(x @ Sigma @ x)
    # a violated constraint: y mu.x between -2 sqrt(v) and just under the threshold
    thr = _threshold(rule, v, phi)
    target = rng.uniform(-2.0 * math.sqrt(v), 0.9 * thr)
    mu = mu + (target - y * (mu @ x)) * y * x / (x @ x)
    m = float(y * (mu @ x))
    assert m < thr
    a, b, z = fast(rule, m, v, phi, C, 1.0)
    assert a > 0
    Sx = Sigma @ x
    mu_new = mu + a * y * Sx
    Sigma_new = Sigma - b * np.outer(Sx, Sx)
    m_new = float(y * (mu_new @ x))
    u = float(x @ Sigma_new @ x)
    if rule == "var":
        assert math.isclose(m_new, phi * u, rel_tol=1e-10)
    elif rule == "scw2":
        assert math.isclose(m_new + a / (2 * C), phi * math.sqrt(u), rel_tol=1e-10)
    else:
        assert a < C
        assert math.isclose(m_new, phi * math.sqrt(u), rel_tol=1e-10)
    P_new = np.linalg.inv(Sigma) + z * np.outer(x, x)
    np.testing.assert_allclose(np.linalg.inv(P_new), Sigma_new, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("rule", ["stdev", "var", "scw1", "scw2"])
@SETTINGS
@given(m=st.floats(-1e6, 1e6), log_v=st.floats(-10, 10), log_C=st.floats(-3, 3))
def test_phi_zero_leaves_sigma_alone(rule, m, log_v, log_C):
    """eta = 0.5 gives phi = 0 exactly: beta = zeta = 0; the mean step makes y mu.x >= 0
    tight (alpha = -m/v; SCW-I capped at C; SCW-II -m / (v + 1/(2C)))."""
    phi = ref.phi_from_eta(0.5)
    assert phi == 0.0
    v, C = 10.0**log_v, 10.0**log_C
    a, b, z = fast(rule, m, v, phi, C, 1.0)
    assert b == 0.0 and z == 0.0
    want = max(0.0, -m / v)
    if rule == "scw1":
        want = min(C, want)
    if rule == "scw2":
        want = max(0.0, -m / (v + 0.5 / C))
    assert math.isclose(a, want, rel_tol=1e-13, abs_tol=0.0)


@SETTINGS
@given(args=rule_inputs("stdev"))
def test_scw2_tends_to_stdev_and_pa2_to_pa(args):
    """C -> infinity: SCW-II -> CW-Stdev, PA-II -> PA, PA-I -> PA."""
    big = dict(args, C=1e300)
    s = fast("stdev", **args)
    w = fast("scw2", **big)
    if s[0] > 0:
        kappa = condition_numbers("stdev", args)
        for i in range(3):
            assert math.isclose(w[i], s[i], rel_tol=1e-13 + 4 * EPS * kappa[i])
    else:
        assert w == (0.0, 0.0, 0.0)
    m, sq = args["m"] / math.sqrt(args["v"]) - 0.5, args["v"]
    assert fast("pa2", m, sq, C=1e300) == pytest.approx(fast("pa", m, sq), rel=1e-14)
    assert fast("pa1", m, sq, C=1e300) == fast("pa", m, sq)


def test_perceptron_scalar():
    """alpha = 1 on m < 0, 0 on m > 0. At m = 0 (mu.x = 0, prediction +1) the round is a
    mistake only when y = -1, which the scalar (m, |x|^2) cannot see; the estimator must
    decide it (tests/test_primal_reference.py checks the whole run)."""
    for m in (-5.0, -1e-300, -1.0):
        assert fast("perceptron", m, 1.0) == (1.0, 0.0, 0.0)
    for m in (1e-300, 0.5, 7.0):
        assert fast("perceptron", m, 1.0) == (0.0, 0.0, 0.0)


@pytest.mark.parametrize("v", [0.0, 1e-12, 1e-3, 1.0, 1e3, 1e12])
def test_sop_is_arow_with_r_one_on_mistakes(v):
    """SOP = AROW(r = 1) where m <= 0 (bit for bit: the same operations), nothing where
    m > 0 (AROW still updates for 0 < m < 1); zeta = 1 exactly; a tie m = 0 updates."""
    for m in (-1e6, -3.0, -1e-300, 0.0):
        assert fast("sop", m, v) == fast("arow", m, v, r=1.0)
        assert fast("sop", m, v)[2] == 1.0
    assert fast("sop", 0.0, v)[0] == 1.0 / (1.0 + v)
    for m in (1e-300, 0.5, 1.0 - 1e-12, 2.0):
        assert fast("sop", m, v) == (0.0, 0.0, 0.0)
    assert fast("arow", 0.5, v, r=1.0)[0] > 0.0


@pytest.mark.parametrize("v", [1e-12, 1e-3, 1.0, 1e3, 1e12])
def test_sop_matches_50_digit_on_grid(v):
    for m in (-1e6, -1.0, -1e-300, 0.0, 1e-300, 0.5, 2.0):
        assert_matches_decimal("sop", {"m": m, "v": v, "phi": 0.0, "C": 1.0, "r": 1.0})


def test_sop_update_condition_compiled():
    """update_condition (the compiled loops' test, without the step) agrees with sop."""
    for m in (-2.0, -1e-300, 0.0, 1e-300, 0.5, 1.5):
        assert K.update_condition(K.SOP, m, 1.0, 0.0) == (fast("sop", m, 1.0)[0] > 0.0)
        assert K.update_condition(K.SOP, m, 1.0, 0.0) == (m <= 0.0)


def test_pa_zero_norm_is_no_update():
    for rule in ("pa", "pa1"):
        assert fast(rule, 0.0, 0.0, C=1.0) == (0.0, 0.0, 0.0)


def test_first_order_is_a_set_not_an_ordering():
    """The compiled test, the Python set and RuleParams agree on every code, and match
    the reference's first-order rules: no code relies on the codes' order."""
    for rule in K.Rule:
        code = int(rule)
        want = rule.name.lower() in ref.FIRST_ORDER_RULES
        assert (code in K.FIRST_ORDER) is want, rule
        assert K.RuleParams(code).first_order is want, rule
        assert bool(K.is_first_order(code)) is want, rule
    assert set(K.RULES) == set(ref.ALL_RULES)
