"""The checks of :func:`kernelcw.combine` before it reads any part: the parts are fitted
kernelcw estimators of one class, rule, form, kernel, width, classes and columns, and
their weights positive numbers (scaled by a power of two, which changes no ratio)."""

from __future__ import annotations

import functools
import math

import numpy as np
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted

from .estimators._base import CWEstimator
from .estimators._mixins import COUNTERS
from .rules import Rule

__all__ = ["METHODS", "check_parts", "continues_nu_pi", "part_weights"]

#: The combination rules (:func:`kernelcw.combine`).
METHODS = ("kl", "bayes", "average")


def check_parts(estimators, method: str, start) -> list:
    """The parts as a list, after the checks (ValueError or TypeError naming what is
    wrong and where)."""
    if method not in METHODS:
        raise ValueError(f"method={method!r} is not one of {', '.join(map(repr, METHODS))}")
    if isinstance(estimators, str) or not hasattr(estimators, "__iter__"):
        raise TypeError("combine takes a sequence of fitted estimators")
    ests = list(estimators)
    if not ests:
        raise ValueError("combine needs at least one estimator")
    if start is not None and method != "bayes":
        raise ValueError(f"start= applies to method='bayes' only, not {method!r}")
    ref = ests[0]
    for i, est in enumerate(ests + ([start] if start is not None else [])):
        where = "start" if i == len(ests) else f"estimators[{i}]"
        if not isinstance(est, CWEstimator):
            raise TypeError(f"{where} is a {type(est).__name__}, not a kernelcw estimator")
        try:
            check_is_fitted(est)
        except NotFittedError as err:  # (scikit-learn's message names no part)
            raise NotFittedError(f"{where} is not fitted: {err}") from None
        if est is not ref:
            _same(ref, est, where)
    if start is not None:
        _started_from(ests, start)
    spec = ref._engine.spec
    if spec.form == "dual" and spec.kernel.precomputed:
        raise ValueError(
            "kernel='precomputed' models keep positions in their own training streams, "
            "not inputs: their support sets cannot be merged"
        )
    return ests


def _started_from(ests: list, start) -> None:
    """Each part continues ``start``: its counters include start's (a part that did not
    start from it gave the combination negative counts, and a model it never was)."""
    for i, est in enumerate(ests):
        for c in COUNTERS:
            if np.any(np.asarray(getattr(est, c)) < np.asarray(getattr(start, c))):
                raise ValueError(
                    f"estimators[{i}] did not start from start: its {c} "
                    f"{getattr(est, c)!r} are fewer than start's {getattr(start, c)!r}"
                )


def check_started_covariance(ests: list, start) -> None:
    """A primal part's covariance is at most start's, which it continued (learning only
    adds precision): parts trained from the prior on other rows combined into a worse
    model, silently. A necessary condition only: a part trained from the prior on more
    rows than start's may pass it. Made once, with the parts' locks held."""
    for i, est in enumerate(ests):
        grown = _covariance_grown(est._engine, start._engine)
        if grown is not None:
            raise ValueError(
                f"estimators[{i}] did not start from start: its covariance exceeds "
                f"start's by {grown:.3g} along some direction, and learning only shrinks it"
            )


#: Slack of :func:`_covariance_grown`: relative to start's covariance in every
#: direction, and absolute, of its largest variance. A tree of combinations inverts
#: precisions, whose rounding grows with their condition number (7.6e-6 of the largest
#: variance seen, a feature 1,000 times the others); a part trained from the prior
#: exceeds start by what start learnt, of the order of the prior's a (0.015 seen).
GROWN_SLACK = 1e-3


def _covariance_grown(engine, start) -> float | None:
    """How far a primal ``engine``'s covariance exceeds ``start``'s (the largest
    eigenvalue of the difference, per variance for a diagonal one), beyond
    :data:`GROWN_SLACK`, or None."""
    form = engine.spec.form
    if form == "dual" or engine.rule.first_order:  # (the dual form: _clean's check)
        return None
    if form == "primal_full":  # ((1 + slack) start - part + slack: one Cholesky each)
        scale = float(np.abs(np.diagonal(start.covariance, axis1=1, axis2=2)).max())
        for part, s0 in zip(engine.covariance, start.covariance, strict=True):
            room = (1.0 + GROWN_SLACK) * s0 - part
            room[np.diag_indices_from(room)] += GROWN_SLACK * scale
            try:
                np.linalg.cholesky(room)
            except np.linalg.LinAlgError:
                return float(np.linalg.eigvalsh(part - s0)[-1])
        return None
    if engine._slots is not None or start._slots is not None:  # (wide, in slots: a dense
        return None  # copy of every part's variances took 6.9 s and 2.7 GB at 2^24)
    part, s0 = engine.variance, start.variance
    excess = part - (1.0 + GROWN_SLACK) * s0 - GROWN_SLACK * float(s0.max())
    return float((part - s0).max()) if excess.max() > 0.0 else None


def _same(ref, est, where: str) -> None:
    """ValueError naming what differs between two fitted estimators."""
    if type(est) is not type(ref):
        raise ValueError(
            f"{where} is a {type(est).__name__}, estimators[0] a {type(ref).__name__}: "
            "only models of one class combine"
        )
    s0, s1 = ref._engine.spec, est._engine.spec
    if not np.array_equal(ref.classes_, est.classes_):  # (before n_models: what differs)
        raise ValueError(
            f"{where} has classes_ {est.classes_!r} but estimators[0] has {ref.classes_!r}"
        )
    checks = [
        ("rule", Rule(s0.rule.rule).name, Rule(s1.rule.rule).name),  # (SCW1, not 6)
        ("a", s0.a, s1.a),
        ("form (covariance / kernel / mode)", s0.form, s1.form),
        ("n_features_in_", ref.n_features_in_, est.n_features_in_),
        ("n_models", s0.n_models, s1.n_models),
        ("intercept (fit_intercept, intercept_scaling)", s0.intercept, s1.intercept),
    ]
    for name, x, y in checks:
        if x is not y and x != y:
            raise ValueError(f"{where} has {name} {y!r} but estimators[0] has {x!r}")
    if s0.form == "dual":
        k0, k1 = s0.kernel, s1.kernel
        if not same_value(k0._f, k1._f):
            raise ValueError(
                f"{where} has kernel function {k1._f!r} but estimators[0] has {k0._f!r}"
            )
        checks = [("kernel", k0.name, k1.name)]
        for attr in ("gamma", "degree", "coef0"):
            checks.append((f"kernel {attr}", getattr(k0, attr), getattr(k1, attr)))
        for name, x, y in checks:
            if x is not y and x != y:
                raise ValueError(f"{where} has {name} {y!r} but estimators[0] has {x!r}")
    _same_names(ref, est, where)


def same_value(x, y, depth: int = 0) -> bool:
    """``x`` and ``y`` the same value: the same object; equal arrays; copies of one
    function or partial (dask sends each part its own copy of a kernel function defined
    in a script or a notebook, of a lambda or a partial: the same module, name and code,
    and equal defaults, closure, and globals the code reads); else ``==``. False where
    unsure."""
    if x is y:
        return True
    if depth > 8:  # (a function that reaches itself through its globals)
        return False
    if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
        return (
            isinstance(x, np.ndarray) and isinstance(y, np.ndarray) and x.dtype == y.dtype
            and np.array_equal(x, y)
        )  # fmt: skip
    if isinstance(x, functools.partial) and isinstance(y, functools.partial):
        return _same_sequence((x.func, x.args, x.keywords), (y.func, y.args, y.keywords), depth)
    code = getattr(x, "__code__", None)
    if code is not None and type(x) is type(y) and hasattr(y, "__code__"):
        c1 = y.__code__
        if (x.__module__, x.__qualname__) != (y.__module__, y.__qualname__) or (
            code.co_code, code.co_consts, code.co_names
        ) != (c1.co_code, c1.co_consts, c1.co_names):  # fmt: skip
            return False
        cells = [tuple(c.cell_contents for c in h.__closure__ or ()) for h in (x, y)]
        names = [n for n in code.co_names if n in x.__globals__ or n in y.__globals__]
        read = [tuple(h.__globals__.get(n) for n in names) for h in (x, y)]
        return _same_sequence(
            (x.__defaults__, x.__kwdefaults__, cells[0], read[0]),
            (y.__defaults__, y.__kwdefaults__, cells[1], read[1]),
            depth,
        )
    try:
        return bool(x == y)
    except (ValueError, TypeError):
        return False


def _same_sequence(xs, ys, depth: int) -> bool:
    """Element by element :func:`same_value` of tuples, lists and dicts (None alike)."""
    if isinstance(xs, dict) and isinstance(ys, dict):
        return xs.keys() == ys.keys() and all(same_value(xs[k], ys[k], depth + 1) for k in xs)
    if isinstance(xs, tuple | list) and isinstance(ys, tuple | list):
        return len(xs) == len(ys) and all(
            _same_sequence(a, b, depth + 1) if isinstance(a, tuple | list | dict) else
            same_value(a, b, depth + 1) for a, b in zip(xs, ys, strict=True)
        )  # fmt: skip
    return same_value(xs, ys, depth + 1)


def _same_names(ref, est, where: str) -> None:
    """ValueError unless both were fitted on the same columns, in the same order, or
    both without names: the weights of column j are added up, whatever it held."""
    n0 = getattr(ref, "feature_names_in_", None)
    n1 = getattr(est, "feature_names_in_", None)
    if n0 is None and n1 is None:
        return
    if n0 is None or n1 is None:
        named, unnamed = (where, "estimators[0]") if n0 is None else ("estimators[0]", where)
        names = (n0 if n1 is None else n1).tolist()
        raise ValueError(
            f"{named} was fitted with feature names {names!r} and {unnamed} without: "
            "their columns cannot be matched (fit all parts on frames of the same "
            "columns, or all on arrays)"
        )
    l0, l1 = n0.tolist(), n1.tolist()
    if l0 == l1:
        return
    if sorted(l0) == sorted(l1):
        j = next(j for j, (a, b) in enumerate(zip(l0, l1, strict=True)) if a != b)
        diff = f"the same names in another order: column {j} is {l1[j]!r} there, {l0[j]!r} here"
    else:
        diff = (
            f"only in {where}: {[c for c in l1 if c not in l0]!r}, only in "
            f"estimators[0]: {[c for c in l0 if c not in l1]!r}"
        )
    raise ValueError(
        f"{where} has feature_names_in_ {l1!r} but estimators[0] has {l0!r} ({diff}): "
        "combining would add up the weights of different features"
    )


def part_weights(weights, n: int) -> np.ndarray:
    """The n weights, checked (finite, positive) and scaled by a power of two so that
    the largest lies in [0.5, 1): every ratio, and so every combination, is the same
    bit for bit, while their sum and products stay in float64's range (weights of
    1e308 summed to inf, and made a prior model; subnormal ones lost digits)."""
    if weights is None:
        return np.ones(n)
    try:
        if np.asarray(weights).dtype.kind == "b":  # (True is not a weight: a mask?)
            raise TypeError
        w = np.asarray(weights, dtype=np.float64).ravel()
    except (TypeError, ValueError):  # (strings, objects: numpy's message names no weights)
        w = np.full(0, np.nan)
    if w.shape != (n,) or not np.all(np.isfinite(w)) or np.any(w <= 0):
        raise ValueError(f"weights must be {n} finite positive numbers, got {weights!r}")
    return np.ldexp(w, -math.frexp(float(w.max()))[1])


def continues_nu_pi(first_order: bool, budget, budget_policy: str) -> bool:
    """Whether a kernel model given by nu and Pi alone (combined by "average") can be
    combined further, as a part or as the start of a shared-prior combination: a
    first-order rule keeps nu alone, and a "project" budget combines from nu and Pi
    (:func:`kernelcw.combine`); any other model needs natural parameters it lacks."""
    return bool(first_order) or (budget is not None and budget_policy == "project")
