"""The walks' statuses and the errors they raise, in one place.

The compiled walks never raise: they stop and report a status code and the block
input where it happened. :func:`raise_for` turns a status into the exception the
user sees, naming the training row and what to do; :func:`unusable` is the error of
a model left part-way by an error it cannot be restored from; :func:`check_mercer`
refuses a kernel block that no positive semi-definite kernel gives (the engine runs
it on the blocks of kernels taken on trust: callables and precomputed matrices).
"""

from __future__ import annotations

import numpy as np

from ...kernels import schwarz_violation
from ...rules import STDEV, VAR
from ..base import MaybeDrift

__all__ = [
    "NONFINITE",
    "NOT_PSD",
    "OK",
    "PSD_TOL",
    "STOP",
    "check_mercer",
    "walk_psd_tol",
    "raise_for",
    "unusable",
]

#: A margin variance below ``-PSD_TOL * a * k(x, x)`` is beyond rounding: the
#: kernel is not positive semi-definite.
PSD_TOL = 1e-6


def walk_psd_tol(known_psd: bool) -> float:
    """The walks' ``psd_tol``: PSD_TOL for a kernel not known to be positive
    semi-definite (a callable, a precomputed matrix), whose negative v may be the
    kernel's; infinite for the built-in kernels, which are, so that a negative v is
    rounding (extreme kernel values: an unscaled feature under a cubic kernel), floored
    and counted as every form floors it, never blamed on the kernel."""
    return np.inf if known_psd else PSD_TOL


#: The walk went through its rounds.
OK = 0
#: A margin or step left float64's range.
NONFINITE = 1
#: A margin variance below ``-PSD_TOL * a * k(x, x)`` (or ``k(x, x) < 0``).
NOT_PSD = 2
#: A budget binds at this round: the caller continues in another form.
STOP = 3
#: The nu/Pi recursion floored a margin variance where the model has a factor form to go
#: on in (:func:`.form.factor_form_at_hand`): taken for Pi's drift, which floors far
#: earlier than the factor forms do on the same stream and then steps without bound (a
#: "smallest" model on contradictory labels left float64's range 50 rows later, where a
#: factor form floored 30 rows later and stayed finite), so the call is learned again in
#: the factor form (:meth:`.engine.DualEngine.stabilise`).
FLOORED = 4


def raise_for(
    status: int, row: int, kernel_name, rule: int, explicit: bool, first_order: bool
) -> None:
    """Raise the error of a walk's ``status`` at training ``row`` (nothing for OK).

    ``explicit``: the walk ran in the explicit nu/Pi form (the advice differs);
    ``rule``: the rule's integer code (CW-Stdev and CW-Var get the advice to use a
    soft rule)."""
    if status == OK:
        return
    if status == FLOORED:
        what = f"a margin variance at its floor from training row {row}"
        raise MaybeDrift(
            f"{what} in the explicit nu/Pi form, whose recursion drifts in floating point",
            what,
            floored=True,
        )
    if status == NOT_PSD:
        hint = (
            " In the explicit nu/Pi form (solver='explicit', or budget_policy "
            "'smallest' or 'project' once the budget binds) this also happens when "
            "Pi's recursion loses positive definiteness in floating point; with the "
            "built-in kernels that is floored and counted instead, and "
            "solver='cholesky' without a budget keeps it positive definite by "
            "construction."
            if explicit
            else ""
        )
        message = (
            f"kernel {kernel_name!r} is not positive semi-definite: at training "
            f"row {row} the margin variance a k(x,x) + k' Pi k came out below "
            f"-{PSD_TOL:g} a k(x,x) (or k(x,x) < 0). CW needs a Mercer kernel.{hint}"
        )
        if explicit:  # (the engine's factor form, where it has one, tells which)
            raise MaybeDrift(message, f"a negative margin variance at training row {row}")
        raise ValueError(message)
    if explicit and not first_order:
        advice = (
            "in the explicit nu/Pi form (solver='explicit', or budget_policy "
            "'smallest' or 'project' once the budget binds), Pi's recursion loses "
            "precision when the variance collapses or the features have very "
            "different scales: standardise X, or keep a Cholesky factor "
            "(solver='cholesky' without a budget, or budget_policy='oldest' or 'random')"
        )
    else:
        advice = "rescale X"
    if rule in (STDEV, VAR):
        advice += ", or use a soft rule such as SCW or AROW"
    raise FloatingPointError(
        f"non-finite margin or step at training row {row}: the model left float64's "
        f"range ({advice})"
    )


def kernel_error_at(err, cols) -> ValueError:
    """A :class:`kernelcw.kernels.NonFiniteKernel` of a block's kernel values K(., XB),
    naming the training row of its column (``cols``: the block's stream positions)."""
    where = f" at training row {int(cols[err.column])}" if 0 <= err.column < len(cols) else ""
    what, sep, advice = str(err).partition(" (")
    return ValueError(what + where + sep + advice)


def unusable(reason: str) -> RuntimeError:
    """The error of a model an earlier error left part-way and unrestorable."""
    return RuntimeError(
        "this model was left part-way through a partial_fit call by an error "
        f"({reason}) that could not be undone, so the model is unusable: call fit to "
        "start over"
    )


def check_mercer(K, da, db, rows_a, rows_b, kernel_name) -> None:
    """ValueError if the kernel values K between training rows ``rows_a`` (self-values
    ``da``) and ``rows_b`` (``db``) break ``k(x, x) >= 0`` or Cauchy-Schwarz beyond
    rounding (:func:`kernelcw.kernels.schwarz_violation`): a distance matrix or a
    negated kernel passed as the kernel, which the walks alone would not always
    notice (a zero or negative k(x, x) gives no update, or a step the wrong way)."""
    i, j = schwarz_violation(K, da, db, PSD_TOL)
    if i < 0 and j < 0:
        return
    if j < 0 or i < 0:
        row, value = (int(rows_a[i]), da[i]) if j < 0 else (int(rows_b[j]), db[j])
        what = f"k(x, x) = {value:.6g} < 0 at training row {row}"
    else:
        what = (
            f"|k(x_i, x_j)| = {abs(K[i, j]):.6g} exceeds sqrt(k(x_i, x_i) k(x_j, x_j)) = "
            f"{np.sqrt(da[i] * db[j]):.6g} for training rows i = {int(rows_a[i])}, "
            f"j = {int(rows_b[j])}"
        )
    raise ValueError(
        f"kernel {kernel_name!r} is not positive semi-definite: {what}. CW needs a Mercer "
        "kernel (a similarity such as rbf; a distance matrix, or a negated kernel, is not one)"
    )
