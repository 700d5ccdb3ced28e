"""The budget policies' scores of a support vector, from O(n) quantities: the KL
divergence of removing it ("smallest", :func:`kl_score`; the maths is in
:mod:`kernelcw.budget`'s docstring) and the slot each score-based policy takes where
the walk gives those quantities through its own indices (:func:`least_kl_slot`,
:func:`least_projection_slot`: the blocked walk, :mod:`kernelcw.engines.dual.deferred`;
"project"'s fused round, :mod:`.project_round`). :func:`.kernels.choose_victim`
chooses the same way in the round-by-round walk.
"""

from __future__ import annotations

import math

from numba import njit

__all__ = ["kl_score", "least_kl_slot", "least_projection_slot", "newest_slot", "takes_place"]


@njit(cache=True, inline="always")
def takes_place(score, i, best_score, best, entry) -> bool:
    """Whether slot i, of ``score``, takes the place of the slot ``best`` (-1: none
    yet) of ``best_score``: the least score leaves, ties to the older entry. Every
    score-based choice (:func:`.kernels.choose_victim`, this module's) goes by it."""
    return best < 0 or score < best_score or (score == best_score and entry[i] < entry[best])


@njit(cache=True)
def newest_slot(n, entry) -> int:
    """The slot of the newest of n support vectors (the largest entry)."""
    newest = 0
    for i in range(1, n):
        if entry[i] > entry[newest]:
            newest = i
    return newest


@njit(cache=True, error_model="numpy")
def kl_score(f_p, v_p, zeta_p, g_p):
    """KL divergence of removing p (module docstring). First-order rules
    (zeta = 0) reduce to the mean's move ``g_p^2 v_p / 2`` with ``v_p = a k_pp``
    and ``g_p = nu_p / a``."""
    s = zeta_p * v_p
    if s >= 1.0:  # Sigma' is positive definite, so only rounding gets here
        s = 1.0 - 1e-16
    d = zeta_p * f_p - g_p
    return 0.5 * (d * d * v_p / (1.0 - s) - s - math.log1p(-s))


@njit(cache=True, error_model="numpy")
def least_kl_slot(n, sup, lg, nuP, dPi, a):
    """The slot "smallest" removes (:func:`.kernels.choose_victim`: the
    least KL score, the newest left out, ties to the older) from O(n) quantities: with
    ``M = D^-1 + a K`` (``Pi = -a^2 M^-1``), the mean at support vector p is
    ``f_p = (g_p - nu_p / a) / zeta_p`` and its variance
    ``v_p = 1 / zeta_p + Pi_pp / (a zeta_p)^2`` (``doc/dual-form.md`` section 7), where
    the round-by-round walk keeps ``K nu`` and the variances by passes over the Gram
    matrix. ``lg`` maps slots to the indices of ``nuP`` and ``dPi`` (None: the slot
    itself)."""
    entry = sup.entry
    newest = newest_slot(n, entry)
    best = -1
    best_score = 0.0
    for i in range(n):
        if i == newest:
            continue
        P = i if lg is None else lg[i]
        z = sup.zsv[i]
        g = sup.gsv[i]
        f_p = (g - nuP[P] / a) / z
        v_p = 1.0 / z + dPi[P] / (a * a * z * z)
        score = kl_score(f_p, v_p, z, g)
        if takes_place(score, i, best_score, best, entry):
            best = i
            best_score = score
    return best


@njit(cache=True, error_model="numpy")
def least_projection_slot(n, sup, lg, nuP, dKinv):
    """The slot "project" projects (:func:`.kernels.choose_victim`: the least
    ``|nu_p| / sqrt(kinv_pp)``, ties to the older), with nu and the inverse Gram
    matrix's diagonal given through ``lg`` (slot -> index; None: the slot itself)."""
    jv = -1
    best = 0.0
    for i in range(n):
        P = i if lg is None else lg[i]
        score = abs(nuP[P]) / math.sqrt(dKinv[P])
        if takes_place(score, i, best, jv, sup.entry):
            jv = i
            best = score
    return jv
