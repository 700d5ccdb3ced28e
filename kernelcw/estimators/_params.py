"""The parameter objects a call was checked for: each estimator class's parameters read
from an instance's ``__dict__`` in one C call, compared by identity (the one-row
record, ``CWEstimator._row_call``) or made a hashable key when they are plain values
(the cache of ``CWEstimator._checked_params``). scikit-learn's ``get_params`` reads the
signature with ``inspect`` on every call, most of a one-row call's checks."""

from __future__ import annotations

import operator

__all__ = ["param_getter", "param_values", "params_key", "same_objects"]

_PLAIN = frozenset((int, float, str, bool, type(None)))
_PARAM_NAMES: dict[type, operator.itemgetter] = {}


def param_getter(cls) -> operator.itemgetter:
    """The class's parameters, in order, from an instance's ``__dict__``."""
    getter = _PARAM_NAMES.get(cls)
    if getter is None:  # scikit-learn reads the signature with inspect on every call
        getter = _PARAM_NAMES[cls] = operator.itemgetter(*cls._get_param_names())
    return getter


def param_values(est) -> tuple | None:
    """The parameter objects, in the class's order (None if one is not an attribute)."""
    try:
        return param_getter(type(est))(est.__dict__)
    except KeyError:
        return None


def same_objects(getter: operator.itemgetter, est, values: tuple) -> bool:
    """Whether ``getter(est.__dict__)`` are the very objects ``values`` (False if one
    is not set as an attribute): two cheap C calls where every call of a stream passes."""
    try:
        return all(map(operator.is_, getter(est.__dict__), values))
    except KeyError:
        return False


def params_key(est) -> tuple | None:
    """The parameters as a hashable key, (their types, their values) in the class's
    parameter order, or None if one is not a plain scalar or string (whose checks could
    depend on more than its value)."""
    getter = param_getter(type(est))
    try:
        values = getter(est.__dict__)
    except KeyError:  # a parameter not set as an attribute: check it every call
        return None
    types = tuple(map(type, values))
    if not _PLAIN.issuperset(types):
        return None
    return types, values
