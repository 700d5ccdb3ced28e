"""How a saved model's parameters and labels are written as plain values: JSON scalars
and arrays that ``.npy`` holds without pickle (:mod:`kernelcw.persistence`)."""

from __future__ import annotations

import contextlib
import math

import numpy as np

__all__ = ["json_param", "plain_classes"]


def json_param(name: str, value):
    """A parameter as JSON: None, bool, int, str, float (non-finite as {"float": ...})."""
    if isinstance(value, np.generic) and value.dtype.kind in "biuf":
        value = value.item()
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {"float": repr(value)}
    raise ValueError(
        f"cannot save {name}={value!r}: a saved model's parameters must be None, bool, "
        "int, float or str (kernelcw files hold no code or objects); set a plain value, "
        "e.g. an integer random_state or a kernel by name, before saving"
    )


#: Labels an object array of classes_ may hold (the river adapter's are Python objects),
#: all of one kind: the array type each kind saves as (and loads back as Python objects).
_LABEL_KINDS = ((str, str), (bool | np.bool_, bool), (int | np.integer, np.int64),
                (float | np.floating, np.float64))  # fmt: skip


def plain_classes(classes: np.ndarray) -> np.ndarray:
    """classes_ as an array .npy holds without pickle: an object array of labels of one
    kind (strings, booleans, integers, floats) as an array of that kind's type."""
    if classes.dtype != object:
        return classes
    labels = classes.tolist()
    bools = [isinstance(c, bool | np.bool_) for c in labels]
    for kind, dtype in _LABEL_KINDS:
        if all(isinstance(c, kind) for c in labels) and (dtype is bool or not any(bools)):
            with contextlib.suppress(OverflowError, ValueError):
                out = classes.astype(dtype)
                if out.tolist() == labels:  # (an int past int64, a NaN: refused)
                    return out
            break
    raise ValueError(
        f"cannot save classes_ {classes.tolist()!r}: labels held as Python objects must "
        "all be strings, all booleans, all integers (int64) or all floats"
    )
