"""The checks of :func:`kernelcw.combine` before it reads any part: the parts are fitted
kernelcw estimators of one class, rule, form, kernel, width, classes and columns, and
their weights positive numbers (scaled by a power of two, which changes no ratio)."""

from __future__ import annotations

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
    start from it gave the combination negative counts, and a model it never was), and
    a primal part's covariance is at most start's (learning only adds precision: a part
    trained from the prior on other rows combined into a wrong model, silently)."""
    for i, est in enumerate(ests):
        for c in COUNTERS:
            if np.any(np.asarray(getattr(est, c)) < np.asarray(getattr(start, c))):
                raise ValueError(
                    f"estimators[{i}] did not start from start: its {c} "
                    f"{getattr(est, c)!r} are fewer than start's {getattr(start, c)!r}"
                )
        grown = _covariance_grown(est._engine, start._engine)
        if grown is not None:
            raise ValueError(
                f"estimators[{i}] did not start from start: its covariance exceeds "
                f"start's by {grown:.3g} along some direction, and learning only shrinks it"
            )


def _covariance_grown(engine, start) -> float | None:
    """How far a primal ``engine``'s covariance exceeds ``start``'s (the largest
    eigenvalue of the difference, per variance for a diagonal one), beyond rounding
    (1e-8 of start's largest variance), or None."""
    form = engine.spec.form
    if form == "dual" or engine.rule.first_order:  # (the dual form: _clean's check)
        return None
    if form == "primal_full":  # (start - part positive semi-definite: one Cholesky each)
        scale = float(np.abs(np.diagonal(start.covariance, axis1=1, axis2=2)).max())
        for part, s0 in zip(engine.covariance, start.covariance, strict=True):
            room = s0 - part
            room[np.diag_indices_from(room)] += 1e-8 * scale
            try:
                np.linalg.cholesky(room)
            except np.linalg.LinAlgError:
                return float(np.linalg.eigvalsh(part - s0)[-1])
        return None
    else:
        a = engine.spec.a  # (a stored 0 is the prior a)
        part, s0 = (np.where(e._s == 0.0, a, np.abs(e._s)) for e in (engine, start))
        grown, scale = float((part - s0).max()), float(s0.max())
    return grown if grown > 1e-8 * scale else None


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
        if not _same_function(k0._f, k1._f):
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


def _same_function(f, g) -> bool:
    """Whether two kernel callables are one function: the same object, equal, or copies
    of one (dask sends each part its own copy of a function defined in a script or a
    notebook, or of a lambda: the same module, name, code, defaults and closure)."""
    if f is g:
        return True
    try:
        if f == g:
            return True
        c0, c1 = f.__code__, g.__code__
        same = (f.__module__, f.__qualname__, f.__defaults__) == (
            g.__module__,
            g.__qualname__,
            g.__defaults__,
        )
        same = same and (c0.co_code, c0.co_consts, c0.co_names) == (
            c1.co_code,
            c1.co_consts,
            c1.co_names,
        )
        cells = [tuple(c.cell_contents for c in h.__closure__ or ()) for h in (f, g)]
        return bool(same and cells[0] == cells[1])
    except (AttributeError, ValueError, TypeError):  # (no code; closures of arrays)
        return False


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
