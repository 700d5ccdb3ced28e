"""Parameter checks shared by the estimators and the kernels, and the structure check
of CSR rows that both the estimators and the diagonal engine's walk make."""

from __future__ import annotations

import math
import numbers

from numba import njit


@njit(cache=True)
def csr_rows_in_range(indptr, n_indices, n_data):
    """Whether CSR row pointers start at 0, never fall, and end within both the
    indices (``n_indices`` of them) and the data: every row a compiled walk reads is
    then within X's arrays (scipy's constructor checks only the first and the last)."""
    if indptr.shape[0] == 0 or indptr[0] != 0 or indptr[-1] > min(n_indices, n_data):
        return False
    for i in range(indptr.shape[0] - 1):
        if indptr[i + 1] < indptr[i]:
            return False
    return True


def check_option(name: str, value, allowed) -> None:
    """value must be one of ``allowed`` (strings or integers; bools are not integers)."""
    ok_type = isinstance(value, str | numbers.Integral) and not isinstance(value, bool)
    if ok_type and value in allowed:
        return
    raise ValueError(f"{name}={value!r} is not one of {', '.join(map(repr, allowed))}")


def check_positive(name: str, value) -> float:
    """value must be a finite real number > 0."""
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Real)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ValueError(f"{name}={value!r} must be a finite number > 0")
    return float(value)


def check_finite(name: str, value) -> float:
    """value must be a finite real number."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise ValueError(f"{name}={value!r} must be a finite number")
    return float(value)


def check_eta(eta) -> float:
    """eta must lie in the open interval (0.5, 1)."""
    if isinstance(eta, bool) or not isinstance(eta, numbers.Real) or not 0.5 < eta < 1.0:
        raise ValueError(
            f"eta={eta!r} must lie in the open interval (0.5, 1): it is the probability "
            "of a correct classification the update enforces"
        )
    return float(eta)


def check_positive_int(name: str, value, allow_none: bool = False) -> None:
    """value must be an integer >= 1 (bools are not integers), or None if allowed."""
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        what = "None or an integer >= 1" if allow_none else "an integer >= 1"
        raise ValueError(f"{name}={value!r} must be {what}")
