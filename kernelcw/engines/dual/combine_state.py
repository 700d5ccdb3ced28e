"""Dual models read as natural parameters, and dual engines built from them
(for :func:`kernelcw.combine`, ``doc/combination.md``).

Every second-order binary dual model is ``Lambda = I/a + Phi D Phi'``,
``h = Phi g`` over its support set (``D = diag(zeta)``, ``zeta`` and ``g`` fixed
when each input entered; ``doc/dual-form.md`` section 2). The forms keep them:
the panel form as ``zeta`` and ``g / zeta = L r``; the queue and batch-pruned
forms as ``zeta`` and ``qv = g / zeta``; the explicit form as ``zsv`` and ``gsv``.
Removal policies unlearn exactly, so these stay exact under a budget; a
*projection* ("project") changes Lambda by more than a diagonal term, and a
model that has projected has no such (zeta, g) (:func:`projections` counts them):
:func:`natural_parameters` refuses it, and :mod:`kernelcw.combination` combines
it from nu and Pi instead (``doc/combination.md``, "Parts pruned by projection").
First-order models hold nu alone (Sigma = a I).

:func:`build_engine` makes a :class:`.DualEngine` from plain arrays: a model given
as (zeta, g) becomes the append-only panel form, ``M = diag(1/zeta) + a K``,
``L = chol(M)``, ``r = L^-1 (g / zeta)``; a model given as (nu, Pi) becomes the
explicit form. A budgeted model over more than its budget is then pruned with its
own policy (:func:`kernelcw.budget.evict`, one support vector at a time, in the
explicit form, the slow reference of every policy's round-by-round removal); a
"random" one then continues in its lazy Cholesky form (:mod:`.lazy`), an "oldest"
one in the panel form, whose budget binds into the queue (:mod:`.queue`), one with
``budget_batch`` q > 1 in the batch-pruned form (:mod:`.pruned`), the others in the
explicit form. With ``solver="explicit"`` every second-order model is in the explicit
form (the round-by-round recursion the solver promises), natural parameters included.
"""

from __future__ import annotations

import warnings

import numpy as np
import scipy.sparse as sp
from scipy.linalg import LinAlgError, cholesky, eigh, lu_factor, lu_solve, solve_triangular

from ...budget import Support, evict, make_policy
from .convert import explicit_to_pruned, lazy_form, panels_to_explicit
from .engine import DualEngine
from .explicit import ExplicitForm
from .panels import PanelForm
from .pruned import PrunedForm
from .queue import QueueForm
from .store import _diagonal, jittered, kernel_jitter, symmetrised

__all__ = [
    "build_engine",
    "check_covariance",
    "gram",
    "natural_parameters",
    "projected_model",
    "projections",
]


def projections(form) -> int:
    """How many projections made a second-order binary model what it is: its
    "project" policy's removal counter (which a model combined from projected
    parts carries on), 0 for a model whose natural parameters are exact."""
    if isinstance(form, PrunedForm) and form.projects:
        return int(form.counter)
    if isinstance(form, ExplicitForm) and form.second and form.policy.name == "project":
        return int(form.policy.counter)
    return 0


def natural_parameters(form) -> dict[str, np.ndarray]:
    """One binary model's parameters in entry order: ``idx`` (store rows) and either
    ``zeta``, ``g`` (second order) or ``nu`` (first order); ``nu`` and ``Pi`` are
    given for every model (the "average" rule reads them)."""
    order = form.order()
    out = {"idx": form.idx[order].copy()}
    if isinstance(form, ExplicitForm) and not form.second:
        out["nu"] = form.nu(1.0)[order]
        return out
    if isinstance(form, PanelForm):
        zeta, g = form.zeta, form.zeta * form.unlearning_weights()
    elif isinstance(form, QueueForm | PrunedForm):
        n = form.n
        zeta, g = form.zeta[:n], form.zeta[:n] * form.qv[:n]
        if projections(form):
            raise _projected()
    elif isinstance(form, ExplicitForm):
        n = form.n
        zeta, g = form.zsv[:n], form.gsv[:n]
        if projections(form):
            raise _projected()
    else:  # pragma: no cover - every form is listed above
        raise TypeError(f"unknown dual form {type(form).__name__}")
    out["zeta"] = np.array(zeta, dtype=np.float64)[order]
    out["g"] = np.array(g, dtype=np.float64)[order]
    return out


def _projected() -> ValueError:
    return ValueError(
        "a part pruned by projection (budget_policy='project') has no diagonal natural "
        "parameters (a projection changes the precision by more than one term per "
        "support vector): combine it from its nu and Pi (kernelcw.combine does)"
    )


def gram(kernel, rows) -> tuple[np.ndarray, np.ndarray]:
    """(K(S, S) exactly symmetric, kappa) as the engine forms them for a block, of the
    plain kernel (:func:`build_engine`)."""
    K = kernel.block(rows, rows)
    K = symmetrised(K)
    kap = kernel.diag(rows) if kernel._f is None else _diagonal(K)
    return K, kap


def _slots(idx: np.ndarray, kap: np.ndarray) -> dict[str, np.ndarray]:
    n = idx.shape[0]
    return {
        "idx": np.asarray(idx, dtype=np.int64),
        "entry": np.arange(n, dtype=np.int64),
        "kap": np.asarray(kap, dtype=np.float64),
        "clock": np.array(n, dtype=np.int64),
    }


def panel_state(K: np.ndarray, kap: np.ndarray, zeta: np.ndarray, g: np.ndarray, a: float):
    """The panel form's arrays for ``Lambda = I/a + Phi diag(zeta) Phi'``, ``h = Phi g``.

    ``M = diag(1/zeta) + a K`` is factored once (LAPACK Cholesky) and ``r`` is one
    triangular solve: no inverse is formed. M is positive definite for zeta > 0 and
    a positive semi-definite kernel; a failed factorisation is a ValueError."""
    n = zeta.shape[0]
    if np.any(~(zeta > 0.0)) or not np.all(np.isfinite(g)):
        raise ValueError("combined support vectors need finite g and zeta > 0")
    Kd = K.copy()
    Kd[np.diag_indices(n)] = kap
    M = a * Kd
    with np.errstate(over="ignore"):  # (checked next, with a message that says why)
        M[np.diag_indices(n)] += 1.0 / zeta
    if not np.all(np.isfinite(M)):  # (zeta weighted down to ~1e-310: 1/zeta overflows)
        raise ValueError(
            "the combined model's M = D^-1 + a K is not finite: a support vector's weight "
            "is too small for float64 (its 1/zeta overflows; a part's weight far below "
            "the others', or a kernel value near float64's largest)"
        )
    try:
        L = cholesky(M, lower=True, check_finite=True) if n else np.zeros((0, 0))
    except LinAlgError as err:
        raise ValueError(
            f"the combined model's M = D^-1 + a K is not positive definite ({err}): the "
            "kernel is not positive semi-definite on the union of the support sets"
        ) from None
    r = solve_triangular(L, g / zeta, lower=True, check_finite=False) if n else np.zeros(0)
    LK = np.tril(L) + np.triu(Kd, 1)
    return {
        "form": np.array(PanelForm.code, dtype=np.int64),
        "LK": LK,
        "capacity": np.array(n, dtype=np.int64),
        "r": r,
        "zeta": np.array(zeta, dtype=np.float64),
    }


def explicit_state(spec, K, kap, nu, Pi, zsv, gsv, removed=0) -> dict[str, np.ndarray]:
    """The explicit form's arrays (nu, Pi, the unlearning weights), its budget
    policy started on the Gram matrix as when a budget binds, its removal counter
    ``removed`` (the parts' projections, for a model combined from projected ones)."""
    n = nu.shape[0]
    second = Pi is not None
    Pi = np.zeros((n, n)) if Pi is None else Pi
    Kd = K.copy()
    Kd[np.diag_indices(n)] = kap
    pol = make_policy(spec.budget_policy, spec.budget, spec.seed)
    pol.start(Kd, Pi, spec.a, max(n, 1))
    state = {
        "form": np.array(ExplicitForm.code, dtype=np.int64),
        "nu": np.asarray(nu, dtype=np.float64),
        "Pi": Pi if second else np.zeros((0, 0)),
        "zsv": np.asarray(zsv, dtype=np.float64),
        "gsv": np.asarray(gsv, dtype=np.float64),
    }
    state.update({f"policy.{k}": v for k, v in pol.state_dict(n).items()})
    state["policy.counter"] = np.array(removed, dtype=np.int64)
    return state


def build_engine(spec, store: dict[str, np.ndarray], rows, models: list[dict]) -> DualEngine:
    """A dual engine over the support store ``store`` (a
    :meth:`.store.SupportStore.state_dict`, ``rows`` its inputs) whose binary model k is
    ``models[k]``: ``idx`` (store rows, in entry order) with either ``zeta`` and
    ``g`` (natural parameters: the panel form), or ``nu`` and ``Pi`` (None for
    first order) with ``zsv``, ``gsv`` and optionally ``removed`` (the explicit
    form). ``K`` and ``kap``, where given, are the Gram matrix over ``idx`` and its
    diagonal (the plain kernel's). Budgeted models over their budget are pruned with
    their policy."""
    # The combination is the plain kernel's (doc/combination.md); a budgeted "project"
    # result then learns with the jittered one (:class:`.store.SupportStore`): its
    # k(x, x), Gram caches and inverse Gram matrix are built from the jittered kap.
    jitter = kernel_jitter(spec)
    state = {"n_models": np.array(len(models), dtype=np.int64)}
    state["kernel_jitter"] = np.array(jitter)
    state.update({f"store.{k}": v for k, v in store.items()})
    for i, m in enumerate(models):
        idx = np.asarray(m["idx"], dtype=np.int64)
        if "K" in m:
            K, kap = m["K"], m["kap"]
        elif idx.size:
            K, kap = gram(spec.kernel, rows[idx])
        else:
            K, kap = np.zeros((0, 0)), np.zeros(0)
        kap = jittered(kap, jitter)
        if "zeta" in m:
            form = panel_state(K, kap, m["zeta"], m["g"], spec.a)
        else:
            args = (m["nu"], m["Pi"], m["zsv"], m["gsv"], m.get("removed", 0))
            form = explicit_state(spec, K, kap, *args)
        form.update(_slots(idx, kap))
        state.update({f"model{i}.{k}": v for k, v in form.items()})
    eng = DualEngine.from_state(spec, state)
    eng.nu_pi_models = any("zeta" not in m and m.get("Pi") is not None for m in models)
    if spec.solver == "explicit":  # the round-by-round nu/Pi recursion throughout
        eng.forms = [
            panels_to_explicit(f, eng._ctx, f.n + 1) if isinstance(f, PanelForm) else f
            for f in eng.forms
        ]
    if spec.budget is not None:
        for k, form in enumerate(eng.forms):
            if form.n > spec.budget:
                form = prune_to_budget(form, eng._ctx)
            if isinstance(form, ExplicitForm):
                form = _factored(form, eng, "zeta" in models[k])
            eng.forms[k] = form
    return eng


def _as_panels(form: ExplicitForm, eng: DualEngine):
    """An "oldest" model of natural parameters (q = 1, solver "cholesky") pruned to its
    budget in the explicit form, back in the panel form (removals unlearn exactly: its
    zsv and gsv describe what is left), so that its budget binds, as a fitted model's
    does, into the queue (:func:`.convert.panels_to_queue`), not the round-by-round
    nu/Pi walk; the explicit form where no Gram matrix is at hand or M does not
    factor."""
    G = eng.store.gram(form.idx, form.kap)
    if G is None:
        return form
    o = form.order()
    try:
        state = panel_state(G[np.ix_(o, o)], form.kap[o], form.zsv[: form.n][o],
                            form.gsv[: form.n][o], eng._ctx.a)  # fmt: skip
    except ValueError:
        return form
    state.update(_slots(form.idx[o], form.kap[o]))
    return PanelForm.from_state(state, eng._ctx)


def _factored(form: ExplicitForm, eng: DualEngine, natural: bool):
    """A budgeted second-order model in the explicit form (solver "cholesky") in the
    form a fitted one learns in once its budget binds
    (:func:`.convert.explicit_to_pruned`): with ``budget_batch`` q > 1 the
    batch-pruned form, which removes q at a time, a "random" one with q = 1 its
    lazy form, an "oldest" one with q = 1 the panel form, which binds into the queue
    (:func:`_as_panels`); others as they are. A removing policy's factor is built from the
    model's zeta, g and Gram matrix, so only for a model given by ``natural``
    parameters (one given as nu and Pi, averaged, has no such factor: it keeps the
    explicit form and removes one at a time); "project"'s comes from Pi itself."""
    ctx = eng._ctx
    if not form.second or ctx.solver != "cholesky":
        return form
    if natural and ctx.batch == 1 and ctx.policy == "oldest":
        return _as_panels(form, eng)
    batched = ctx.batch > 1 and (natural or ctx.policy == "project")
    if not (batched or (natural and lazy_form(ctx))):
        return form
    G = eng.store.gram(form.idx, form.kap)
    factored = None if G is None else explicit_to_pruned(form, eng._ctx, G)
    if factored is None and batched:
        warnings.warn(
            f"combine: the union's precision does not factor in floating point, so it "
            f"stays in the nu/Pi form and removes one support vector at a time, not "
            f"budget_batch={ctx.batch}",
            RuntimeWarning,
            stacklevel=4,
        )
    return form if factored is None else factored


def prune_to_budget(form, ctx) -> ExplicitForm:
    """``form`` brought down to ``ctx.budget`` support vectors by the budget policy's
    own eviction (the one a budget binding one round at a time runs), in the
    explicit form."""
    if isinstance(form, PanelForm):
        form = panels_to_explicit(form, ctx, form.n + 1)
    n = form.n
    form.ensure_capacity(n + 1)
    cap = form.capacity
    sup = Support(
        form._nu,
        form._Pi,
        form.zsv,
        form.gsv,
        _grown(form.kap, cap),
        _grown(form.entry, cap),
        _grown(form.idx, cap),  # the slots' store rows travel with them
    )
    work = np.empty(2 * cap)
    pol = form.policy
    while n > ctx.budget:
        second = True if form.second else None
        evict(pol.record(), pol.counter, n, sup, ctx.a, second, work, None, False)
        pol.counter += 1
        n -= 1
    form.kap, form.entry, form.idx = sup.kap[:n].copy(), sup.entry[:n].copy(), sup.ks[:n].copy()
    return form


def _grown(x: np.ndarray, cap: int) -> np.ndarray:
    out = np.zeros(cap, dtype=x.dtype)
    out[: x.shape[0]] = x
    return out


def projected_model(forms, maps, t, method: str, spec, R, U: int) -> dict:
    """One binary model over the union, some of whose parts were pruned by projection
    (doc/combination.md, "Parts pruned by projection"): from each part's nu and Pi.

    The N stacked support vectors of the parts (N = sum n_c, before merging) carry
    the block-diagonal ``Pi_blk``, ``nu_blk``, the parts' own Gram matrices
    ``K_blk`` and the weights ``T = diag(t_c)``; ``K_big`` is the Gram matrix across
    all of them. With ``Q = I + (K_blk - K_big T) Pi_blk / a``,

        Pi = S (T Pi_blk Q^-1) S',    nu = S Q^-T T nu_blk,

    S summing the stacked vectors into the union's (equal inputs merged): one LU
    factorisation of Q, no inverse of a part's Pi or precision. One part, t = 1:
    Q = I, the part itself. "average" is the plain weighted sum of nu and Pi."""
    a = spec.a
    ids, nus, Pis = [], [], []
    for f, m in zip(forms, maps, strict=True):
        o = f.order()
        ids.append(m[f.idx[o]])
        nus.append(f.nu(a)[o])
        Pis.append(f.Pi(a)[np.ix_(o, o)])
    st = np.concatenate(ids)  # stacked -> union store rows
    first = np.sort(np.unique(st, return_index=True)[1])
    idx = st[first]  # union rows in order of first appearance
    where = np.full(U, -1, dtype=np.int64)
    where[idx] = np.arange(idx.size)
    pos = where[st]
    N, n = st.size, idx.size
    K, kap = gram(spec.kernel, R[idx]) if n else (np.zeros((0, 0)), np.zeros(0))
    Kd = K.copy()
    Kd[np.diag_indices(n)] = kap
    S = sp.csr_matrix((np.ones(N), (pos, np.arange(N))), shape=(n, N))
    tt = np.concatenate([np.full(i.size, tc) for i, tc in zip(ids, t, strict=True)])
    cuts = np.cumsum([0] + [i.size for i in ids])
    TPi = np.zeros((N, N))  # T Pi_blk, block diagonal
    for c, Pc in enumerate(Pis):
        sl = slice(cuts[c], cuts[c + 1])
        TPi[sl, sl] = t[c] * Pc
    if method == "average":
        nu_st, Pi_st = tt * np.concatenate(nus), TPi
    else:
        Kbig = Kd[np.ix_(pos, pos)]
        Q = np.eye(N)
        for c, Pc in enumerate(Pis):
            sl = slice(cuts[c], cuts[c + 1])
            A = -t[c] * Kbig[:, sl]
            A[sl] += Kbig[sl, sl]
            Q[:, sl] += (A @ Pc) / a
        try:
            lu = lu_factor(Q, check_finite=True)
        except (LinAlgError, ValueError) as err:
            raise ValueError(f"the combined model's system is singular ({err})") from None
        nu_st = lu_solve(lu, tt * np.concatenate(nus), trans=1, check_finite=False)
        Pi_st = lu_solve(lu, TPi, trans=1, check_finite=False).T  # (Q^-T Pi_blk T)'
    nu = S @ nu_st
    Pi = S @ (S @ Pi_st.T).T
    Pi = 0.5 * (Pi + Pi.T)
    if not (np.all(np.isfinite(nu)) and np.all(np.isfinite(Pi))):
        raise ValueError("the combined model of parts pruned by projection is not finite")
    if min(t) < 0.0:  # "bayes" with a start: the sum of differences may not be a model
        check_covariance(Kd, Pi, a)
    return {
        "idx": idx,
        "nu": nu,
        "Pi": Pi,
        "zsv": np.zeros(n),  # no diagonal natural parameters: "project" needs none
        "gsv": np.zeros(n),
        "K": K,
        "kap": kap,
    }


def check_covariance(Kd: np.ndarray, Pi: np.ndarray, a: float) -> None:
    """ValueError unless ``Sigma = a I + Phi Pi Phi'`` is positive definite: on the
    span of the support vectors, with ``K = V diag(w) V'``, ``I + R' Pi R / a``
    (``R = V diag(sqrt(w))``) must be."""
    w, V = eigh(Kd)
    keep = w > 1e-12 * max(w.max(initial=0.0), 1e-300)
    Rm = V[:, keep] * np.sqrt(w[keep])
    lam = np.linalg.eigvalsh(np.eye(Rm.shape[1]) + Rm.T @ Pi @ Rm / a)
    if lam.size and not lam.min() > 1e-12:
        raise ValueError(
            "the combined covariance is not positive definite: with method='bayes' and "
            "start=, parts pruned by projection must not project the start's support "
            "vectors away (combine before their budgets bind, or combine with 'kl')"
        )
