"""The compiled pieces every walk shares, and the records the walks take and return.

A walk goes through one block of inputs round by round: predict ``f`` and ``v``,
then :func:`checked_step` turns them into the rule's step after the variance floor
and the PSD and finiteness checks. The panel and queue walks extend ``w = L^-1 k``
by the rows appended earlier in the same block with :func:`block_rows_part`
(``doc/dual-form.md`` section 3); the queue's Woodbury correction keeps a small
Cholesky factor with :func:`chol_rank1` and :func:`chol_solve_lower`. Records
(module-level NamedTuples, which numba compiles and caches): :class:`Block` (a
block's kernel data seen from the factor), :class:`NewRows` (the rows a factor walk
appends), :class:`Step` and :class:`WalkResult`; for the explicit form's two walks
(:mod:`.explicit`, :mod:`.deferred`), :class:`ExplicitResult`, :class:`Undo`,
:func:`save_model` and :func:`all_finite`; for the queue's and the lazy form's walks,
:class:`QueueResult` and :func:`plain_result`.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import njit

from ..._cholupdate import givens_update
from ...rules import VAR_FLOOR, negligible, step
from .status import NONFINITE, NOT_PSD, OK

__all__ = [
    "Block",
    "ExplicitResult",
    "NewRows",
    "QueueResult",
    "Step",
    "Undo",
    "WalkResult",
    "all_finite",
    "block_rows_part",
    "checked_step",
    "chol_rank1",
    "chol_solve_lower",
    "fill_slots",
    "own_block",
    "plain_result",
    "save_model",
]


class Block(NamedTuple):
    """One block as a factor walk sees it: ``G = W0' W0`` and ``rW = W0' r`` with
    ``W0 = L^-1 K(S_0, X_B)`` (b x b and b), the block's own kernel ``Kbb``, its
    ``kap = k(x, x)`` and labels ``y``."""

    G: np.ndarray
    rW: np.ndarray
    Kbb: np.ndarray
    kap: np.ndarray
    y: np.ndarray


class NewRows(NamedTuple):
    """The rows a factor walk appends (one per update, in order): ``E`` their
    entries at the earlier new rows (before the factor ``a``), the diagonal ``Ld``,
    ``rn`` (r's new entries), ``zt`` (zeta) and ``src`` (the block input)."""

    E: np.ndarray
    Ld: np.ndarray
    rn: np.ndarray
    zt: np.ndarray
    src: np.ndarray


class Step(NamedTuple):
    """The rule's step after the checks: ``v`` after the floor, ``floored`` whether it
    was raised to it, ``status`` OK, NOT_PSD or NONFINITE."""

    alpha: float
    beta: float
    zeta: float
    v: float
    floored: bool
    status: int


class WalkResult(NamedTuple):
    """What a factor walk reports: rows appended, floored rounds, and the block input
    where it stopped (``index``, -1 if it went through) with its status."""

    n_new: int
    n_floored: int
    index: int
    status: int


@njit(cache=True)
def checked_step(rule, m, f, v, kap, psd_tol):
    """The step of ``rule`` (a :class:`kernelcw.rules.RuleParams`) for margin ``m``,
    mean ``f`` and variance ``v`` after the variance floor and the PSD and finiteness
    checks (a v below ``-psd_tol * a * kap`` is an error; above it, v is floored); a
    negligible step is none (:func:`kernelcw.rules.negligible`)."""
    a = rule.a
    if not (kap >= 0.0) or v < -psd_tol * a * kap:
        return Step(0.0, 0.0, 0.0, v, False, NOT_PSD)
    floored = False
    vmin = VAR_FLOOR * a * kap
    if v < vmin:
        v = vmin
        floored = True
    alpha, beta, zeta = step(rule.rule, m, v, rule.phi, rule.C, rule.r)
    if not (math.isfinite(alpha) and math.isfinite(beta) and math.isfinite(zeta)):
        return Step(alpha, beta, zeta, v, floored, NONFINITE)
    if not math.isfinite(f):
        return Step(alpha, beta, zeta, v, floored, NONFINITE)
    if alpha > 0.0 and negligible(alpha * v, f):  # kernelcw.rules.STEP_RTOL
        return Step(0.0, 0.0, 0.0, v, floored, OK)
    return Step(alpha, beta, zeta, v, floored, OK)


@njit(cache=True)
def block_rows_part(blk, rows, u, t, a, e):
    """For block input t: ``e[:u]``, the part of ``w_t = L^-1 k_t`` on the u rows
    appended in this block, and ``(r . w_t, |e|^2)``:
    ``e[i] = (Kbb[s_i, t] - a G[s_i, t] - a E[i, :i] . e[:i]) / Ld[i]``."""
    Kbb, G, E, Ld, src = blk.Kbb, blk.G, rows.E, rows.Ld, rows.src
    for i in range(u):
        s = src[i]
        acc = Kbb[s, t] - a * G[s, t]
        for j in range(i):
            acc -= a * E[i, j] * e[j]
        e[i] = acc / Ld[i]
    rw = blk.rW[t]
    ee = 0.0
    for i in range(u):
        rw += rows.rn[i] * e[i]
        ee += e[i] * e[i]
    return rw, ee


@njit(cache=True)
def chol_rank1(Ch, D, x):
    """Ch Ch' + x x' = Ch_new Ch_new' in place on the leading D x D block (lower), by
    the same rotation sweep as every other rank update of a factor
    (:func:`kernelcw._cholupdate.givens_update`); x (length >= D) is left as it was."""
    givens_update(Ch[:D, :D], x[:D].reshape((D, 1)))


@njit(cache=True)
def chol_solve_lower(Ch, D, rhs, out):
    """out = Ch^-1 rhs on the leading D x D block."""
    for i in range(D):
        acc = rhs[i]
        for j in range(i):
            acc -= Ch[i, j] * out[j]
        out[i] = acc / Ch[i, i]


# ---------------------------------------------------------------- the nu/Pi walks
# What the explicit form's two walks (round by round, .explicit; blocked, .deferred)
# share: their result record and the save of the model at a call's first update.


class Undo(NamedTuple):
    """Where the walk saves the model at a call's first update (``armed``): the
    leading n of nu, zsv, gsv and the policy's vsv, the n x n of Pi and the policy's
    kinv (their lower triangles) and G (spare buffers of at least the model's
    capacity, or empty ones where a form or policy has no such array). ``saved[0]``
    becomes the n saved (-1: nothing saved yet). ``gp[0]``: -2, G is saved whole;
    otherwise (a walk of one input, which removes at most one support vector) G is
    not copied, and the removal logs the one row of G it overwrites: the slot into
    ``gp[0]`` (-1: none yet) and the row into ``grow``
    (:func:`kernelcw.budget.kernels.evict`'s ``glog``)."""

    armed: bool
    saved: np.ndarray
    nu: np.ndarray
    Pi: np.ndarray
    zsv: np.ndarray
    gsv: np.ndarray
    kinv: np.ndarray
    G: np.ndarray
    vsv: np.ndarray
    gp: np.ndarray
    grow: np.ndarray


class ExplicitResult(NamedTuple):
    """Support vectors after the walk, the policy's removal counter, the entry clock,
    rows that entered, floored rounds, stop index (-1: went through), status, and
    whether every value the walk wrote into Pi and kinv was checked finite as written
    (:mod:`kernelcw.budget.project_round`; else the form checks them after it)."""

    n: int
    counter: int
    clock: int
    n_new: int
    n_floored: int
    index: int
    status: int
    checked: bool


class QueueResult(NamedTuple):
    """Rows appended, leavers (deaths), floored rounds, stop index and status."""

    n_new: int
    deaths: int
    n_floored: int
    index: int
    status: int


@njit(cache=True)
def plain_result(res):
    """A :class:`QueueResult` as a plain tuple, for a compiled call to return to Python
    (which rebuilds it, ``QueueResult._make``): numba boxes a namedtuple through
    look-ups of its class, 0.4 us a call (by hand)."""
    return (res.n_new, res.deaths, res.n_floored, res.index, res.status)


@njit(cache=True)
def save_model(n, sup, pol, undo, with_pi=True, with_kinv=True):
    """The model's leading n, and the policy's tracked arrays, into ``undo`` (an empty
    array in ``undo`` is one the form or policy does not keep): of Pi and kinv, which
    the walks keep by their lower triangle (nothing reads above it), and of the Gram
    matrix G, which they keep exactly symmetric (a restore mirrors it), the lower
    triangle only (half the copy, on every call of one row that updates), or nothing
    of G where the walk logs its one changed row instead (``undo.gp``). Element by
    element, in one function: a slice assignment compiles numba's shape check and its
    error message, and each helper function its own compile, seconds of a cold start.
    ``with_pi=False``: not Pi (the caller saved it, :func:`kernelcw._blas.sym_r1_save`);
    ``with_kinv=False``: not kinv (the explicit walk saves it as the update that
    appends changes it first, :func:`kernelcw.budget.kernels.kinv_append`)."""
    for i in range(n):
        undo.nu[i] = sup.nu[i]
        undo.zsv[i] = sup.zsv[i]
        undo.gsv[i] = sup.gsv[i]
    if undo.vsv.shape[0]:
        for i in range(n):
            undo.vsv[i] = pol.vsv[i]
    if with_pi and undo.Pi.shape[0]:
        for i in range(n):
            for j in range(i + 1):
                undo.Pi[i, j] = sup.Pi[i, j]
    if with_kinv and undo.kinv.shape[0]:
        for i in range(n):
            for j in range(i + 1):
                undo.kinv[i, j] = pol.kinv[i, j]
    if undo.G.shape[0] and undo.gp[0] == -2:  # (else logged by row: evict's glog)
        for i in range(n):
            for j in range(i + 1):
                undo.G[i, j] = pol.G[i, j]
    undo.saved[0] = n


@njit(cache=True)
def all_finite(sup, n, vsv, kinv, checked=False):
    """The model's leading n (``sup``: nu, the unlearning weights g in gsv, and Pi's
    lower triangle), of ``vsv`` (the variances "smallest" scores by) and of ``kinv``'s
    lower triangle ("project"'s inverse Gram matrix; both empty for the other
    policies) hold no inf or NaN (x - x is NaN for both; an or-reduction of integers,
    which the compiler vectorises: 2.4x faster than the and-reduction of booleans it
    replaced, 4 us at n = 200, paid by every call of one row that updates, but those
    of "project" past its budget: ``checked``, the walk checked every value it wrote
    into Pi and kinv as it wrote it, :mod:`kernelcw.budget.project_round`). Each zeta
    (zsv) is checked finite by the step that makes it (``checked_step``). gsv, vsv and
    kinv steer no coefficient directly: an overflow there left nu and Pi finite, and
    the state kept it (CW-Stdev, solver "explicit": a g of inf that ``kernelcw.load``
    then refused; AROW on unscaled features: "smallest" choosing from NaN scores; a
    Perceptron "project" on rows of norm 1e-160: kinv of inf). The Gram matrix G is
    kernel values, checked as the kernel makes them."""
    bad = 0
    nu, gsv, Pi = sup.nu, sup.gsv, sup.Pi
    for i in range(n):
        bad |= np.int64(not ((nu[i] - nu[i]) == 0.0))
        bad |= np.int64(not ((gsv[i] - gsv[i]) == 0.0))
    for i in range(min(n, vsv.shape[0])):
        bad |= np.int64(not ((vsv[i] - vsv[i]) == 0.0))
    if not checked:  # (else the walk checked every value it wrote into them)
        for M in (Pi, kinv):
            for i in range(min(n, M.shape[0])):  # the lower triangle (the one kept)
                row = M[i]
                for j in range(i + 1):
                    bad |= np.int64(not ((row[j] - row[j]) == 0.0))
    return bad == 0


@njit(cache=True)
def own_block(Kss, S, E, Ld, a, out):
    """The diagonal block of u new rows (``out``, u x u) in a buffer that keeps L's
    lower triangle and the Gram cache's upper one (the panel form's ``LK``, the
    queue's ``LN``): lower triangle ``a E`` (their factor entries among themselves),
    diagonal ``Ld``, strict upper triangle their kernel values ``K(S, S)``."""
    u = S.shape[0]
    for i in range(u):
        for j in range(i):
            out[i, j] = a * E[i, j]
        out[i, i] = Ld[i]
        for j in range(i + 1, u):
            out[i, j] = Kss[S[i], S[j]]


@njit(cache=True)
def fill_slots(kap, kap_now, entry, entry_now, ks, ks_now):
    """The walk's slot arrays: the model's slots in front, zeros behind (element by
    element: see :func:`save_model` on slice assignments)."""
    for dst, src in ((entry, entry_now), (ks, ks_now)):
        m = src.shape[0]
        for i in range(dst.shape[0]):
            dst[i] = src[i] if i < m else 0
    m = kap_now.shape[0]
    for i in range(kap.shape[0]):
        kap[i] = kap_now[i] if i < m else 0.0
