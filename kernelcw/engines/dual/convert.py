"""Switching a binary dual model from one factor form to another.

A model starts in the append-only panel form (second-order rules, solver
"cholesky") or in the explicit form (solver "explicit", first-order rules). When a
budget first binds on a panel form, part-way through a block, the model continues
from that round in the batch-pruned form (``budget_batch`` q > 1, every policy),
the queue form (policy "oldest"), the lazy form (policy "random", :func:`lazy_form`)
or the explicit form ("smallest", "project"). Each switch is once per model; the new
form takes the slots over and the old one is left unchanged (so a checkpoint of it
still restores it).

A model of a removing policy ("smallest"; "random" in a model saved in the nu/Pi
form by an earlier version) or of "project" whose nu/Pi recursion left float64's
range continues in the batch-pruned form with q = 1 (the lazy form for "random"), the
same model (:func:`explicit_to_pruned`, from
``kernelcw.engines.dual.DualEngine.stabilise``).
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import LinAlgError, cholesky, solve_triangular
from scipy.linalg.lapack import dtrtri

from ...budget import make_policy
from .explicit import ExplicitForm
from .form import Context, Form
from .lazy import LazyForm
from .panels import PanelForm
from .pruned import PrunedForm
from .queue import QueueForm

__all__ = [
    "LAZY_POLICIES",
    "explicit_to_pruned",
    "initial_form",
    "lazy_form",
    "on_budget",
    "panels_to_explicit",
    "panels_to_pruned",
    "panels_to_queue",
]


#: Policies a binding budget moves to the lazy form (:mod:`.lazy`) with q = 1.
LAZY_POLICIES = ("random",)


def lazy_form(ctx: Context) -> bool:
    """Whether a second-order model of ``ctx`` keeps a binding budget in the lazy
    form: solver "cholesky", a policy of :data:`LAZY_POLICIES`, q = 1."""
    return ctx.policy in LAZY_POLICIES and ctx.batch == 1 and ctx.solver == "cholesky"


def initial_form(ctx: Context, solver: str) -> Form:
    """The form of a new model."""
    if ctx.rule.first_order or solver == "explicit":
        second = not ctx.rule.first_order
        return ExplicitForm(second, make_policy(ctx.policy, ctx.budget, ctx.seed))
    return PanelForm()


def on_budget(form: PanelForm, ctx: Context, ks: np.ndarray, remaining: int):
    """The form a panel model continues in when its budget binds with ``remaining``
    block inputs to go; returns (the new form, ks in its slot order). (A panel model
    of solver "explicit" is a union saved before combine put it in the explicit form:
    its budget binds into that form.)"""
    if ctx.solver == "explicit":
        return panels_to_explicit(form, ctx, min(form.n + remaining, ctx.budget) + 1), ks
    if ctx.batch > 1:
        return panels_to_pruned(form, ctx), ks
    if ctx.policy == "oldest":
        return panels_to_queue(form, ctx, ks)
    if lazy_form(ctx):
        return panels_to_pruned(form, ctx, LazyForm), ks
    if ctx.factor_only:
        return panels_to_pruned(form, ctx), ks
    return panels_to_explicit(form, ctx, min(form.n + remaining, ctx.budget) + 1), ks


def panels_to_explicit(p: PanelForm, ctx: Context, need: int) -> ExplicitForm:
    """nu and Pi from the factor, at capacity ``need``; the unlearning weights from
    ``M - a K = diag(1/zeta)`` and ``r = L^-1 (g / zeta)``; the policy started on the
    Gram cache."""
    a = ctx.a
    n = p.n
    nu, Pi = p.nu(a), p.Pi(a)
    cap = max(need, n + 1)
    blocked = ctx.solver != "explicit"  # (as :meth:`.explicit.ExplicitForm.from_state`)
    x = ExplicitForm(True, make_policy(ctx.policy, ctx.budget, ctx.seed), blocked=blocked)
    x.take_slots(p)
    x._nu = np.zeros(cap)
    x._nu[:n] = nu
    x._Pi = np.zeros((cap, cap))
    x._Pi[:n, :n] = Pi
    G = p.dense_gram()
    x.policy.start(G, Pi, a, cap)
    x.zsv = np.zeros(cap)
    x.zsv[:n] = p.zeta
    x.gsv = np.zeros(cap)
    x.gsv[:n] = p.zeta * p.unlearning_weights()
    return x


def panels_to_pruned(p: PanelForm, ctx: Context, cls=PrunedForm) -> PrunedForm:
    """The batch-pruned form (or its subclass ``cls``, the lazy form) from the panel
    form's state (dense L, r, zeta, Gram cache; slots in entry order); ``qv = L r``."""
    n = p.n
    x = cls(ctx.policy, ctx.budget, ctx.batch, ctx.seed)
    x.take_slots(p)
    x.L[:n, :n] = np.tril(p.LK[:n, :n])
    x.r[:n] = p.r
    x.qv[:n] = p.unlearning_weights()
    x.zeta[:n] = p.zeta
    if x.projects:
        x.G[:n, :n] = p.dense_gram()
    return x


def _cholesky_of_precision(M: np.ndarray, zeta: np.ndarray):
    """(the lower Cholesky factor of ``M = diag(1/zeta) + a K``, zeta), or (None, zeta).

    M is positive definite, but in float64 not always: CW-Stdev's hard constraint
    drives some zeta to 1e111 on contradictory labels, and with a Gram matrix of low
    rank (a linear kernel on 3 features, 20 support vectors) M's smallest pivots are
    then below its rounding. Where it does not factor, its diagonal gains
    ``n eps max(diag M)``, its own rounding (the model with each 1/zeta raised by that,
    returned as the zeta of the factor), once: the model the fallback exists to keep."""
    n = M.shape[0]
    if not n:
        return np.zeros((0, 0)), zeta
    try:
        return cholesky(M, lower=True, check_finite=True), zeta
    except (LinAlgError, ValueError):
        pass
    lift = n * np.finfo(float).eps * float(np.max(np.diagonal(M)))
    if not (np.isfinite(lift) and lift > 0.0):
        return None, zeta
    M[np.diag_indices(n)] += lift
    try:
        return cholesky(M, lower=True, check_finite=True), 1.0 / (1.0 / zeta + lift)
    except (LinAlgError, ValueError):
        return None, zeta


def explicit_to_pruned(x: ExplicitForm, ctx: Context, G: np.ndarray) -> PrunedForm | None:
    """The batch-pruned form (q = ``ctx.batch``; the lazy form for "random" with q = 1)
    of an explicit second-order model, on the Gram matrix ``G`` of its support by slot.
    A removing policy's is built from what its rounds recorded rather than from its
    nu and Pi: with nothing projected, ``M = diag(1/zeta) + a K``
    (``Pi = -a^2 M^-1``) and ``qv = g / zeta`` (:mod:`.pruned`). "project"'s, whose
    projections leave that structure, from nu and Pi (:func:`_factor_of_pi`).
    Slots in entry order, as the pruned form keeps them. None if M is not positive
    definite in floating point."""
    n = x.n
    o = x.order()
    zeta = x.zsv[:n][o]
    projects = ctx.policy == "project"
    if projects:
        nu = x.nu(ctx.a)[o]
        L = _factor_of_pi(x.Pi(ctx.a)[np.ix_(o, o)], ctx.a)
    else:
        M = ctx.a * G[np.ix_(o, o)]
        M[np.diag_indices(n)] += 1.0 / zeta
        L, zeta = _cholesky_of_precision(M, zeta)
    if L is None:
        return None
    y = (LazyForm if lazy_form(ctx) else PrunedForm)(ctx.policy, ctx.budget, ctx.batch, ctx.seed)
    y.idx, y.entry, y.kap, y.clock = x.idx[o], x.entry[o], x.kap[o], x.clock
    y.counter = x.policy.counter
    y.L[:n, :n] = L
    y.zeta[:n] = zeta
    if projects:
        y.r[:n] = (L.T @ nu) / ctx.a  # nu = a L'^-1 r
        y.qv[:n] = L @ y.r[:n]  # qv = M nu / a = L r
        y.G[:n, :n] = G[np.ix_(o, o)]
    else:
        qv = x.gsv[:n][o] / zeta
        y.qv[:n] = qv
        y.r[:n] = solve_triangular(L, qv, lower=True, check_finite=False) if n else qv
    return y


def _factor_of_pi(Pi: np.ndarray, a: float) -> np.ndarray | None:
    """Lower L with ``L L' = M = -a^2 Pi^-1``, without forming M: with
    ``P = -Pi / a^2 = M^-1`` and J the reversal, ``J P J = C C'`` (Cholesky) gives
    ``P = U U'``, ``U = J C J`` upper, so ``M = U'^-1 U^-1`` and ``L = U'^-1``.
    None if -Pi is not positive definite in floating point."""
    n = Pi.shape[0]
    if n == 0:
        return np.zeros((0, 0))
    P = np.ascontiguousarray(Pi[::-1, ::-1]) * (-1.0 / (a * a))
    try:
        C = cholesky(P, lower=True, check_finite=True)
    except (LinAlgError, ValueError):
        return None
    Uinv, info = dtrtri(C[::-1, ::-1], lower=0)  # U = J C J, upper
    if info or not np.all(np.isfinite(Uinv)):
        return None
    return np.ascontiguousarray(Uinv.T)


def panels_to_queue(p: PanelForm, ctx: Context, ks: np.ndarray):
    """The queue with everything in O (one factorisation of the dense Gram cache);
    returns (the queue, ks permuted alike)."""
    q = QueueForm()
    q.take_slots(p)
    K = p.dense_gram()
    q.zeta = p.zeta
    q.qv = p.unlearning_weights()  # g / zeta = L r
    return q, q.rebuild(ctx, ks, K, np.tril(p.LK[: p.n, : p.n]))
