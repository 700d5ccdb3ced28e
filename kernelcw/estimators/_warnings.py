"""The warnings a learning call gives, pointed at the user's line: a model's first
floored margin variance, and a call learned again in a stronger form."""

from __future__ import annotations

import os
import sys
import warnings

from ..rules import VAR_FLOOR

__all__ = ["user_stacklevel", "warn_floor", "warn_stabilised"]

_FLOOR_WARNING = (
    "{name}: the margin variance fell below {floor:g} * a * |x|^2 on {n} round(s) of this "
    "call and was raised to that floor (n_variance_floored_ counts them; this warns once "
    "per model). The model is certain to "
    "12 digits where it still errs: a hard-constraint rule on a non-separable "
    "stream (a soft rule, SCW or AROW, or a smaller eta avoids it), features of "
    "very different scales (standardise X), or, in the dual's explicit nu/Pi "
    "form (solver='explicit', or budget_policy 'smallest' or 'project'), Pi's "
    "recursion drifting in floating point."
)

_STABILISED = (
    "{name}: with budget_policy={policy!r} the explicit nu/Pi form failed ({what}). The "
    "call was undone and learned again with the model kept as a Cholesky factor (the "
    "batch-pruned form with the same budget_batch: the same policy and model, without "
    "nu/Pi's drift), which it keeps from now on. That form costs more per removal (the "
    "scores of every support vector, from the inverse factor); budget_batch > 1 pays "
    "that once per budget_batch removals."
)


#: The package's folder: frames in it are the library's, not the user's.
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def user_stacklevel() -> int:
    """``warnings.warn``'s stacklevel, for the function that calls this, of the first
    frame outside kernelcw: a warning points at the user's line whichever path led
    there (fit through its interrupt wrapper, partial_fit, run_online, the river
    adapter; a fixed stacklevel pointed into the library)."""
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    return level


def warn_floor(est, n: int) -> None:
    """The RuntimeWarning of a model's first floored variance (n rounds of the call)."""
    text = _FLOOR_WARNING.format(name=type(est).__name__, floor=VAR_FLOOR, n=n)
    warnings.warn(text, RuntimeWarning, stacklevel=user_stacklevel())


def warn_stabilised(est, message: str) -> None:
    """The RuntimeWarning of a call learned again in the factor form (``message``: the
    first try's FloatingPointError, its remedies left out: they no longer apply)."""
    what = message.split(" (", 1)[0]
    text = _STABILISED.format(name=type(est).__name__, policy=est.budget_policy, what=what)
    warnings.warn(text, RuntimeWarning, stacklevel=user_stacklevel())
