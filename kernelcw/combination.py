"""Model combination: one fitted estimator from several trained on parts of a stream
(JMLR 2012 section 7.10; the rules in natural parameters are ``doc/combination.md``).

Every second-order model is a Gaussian N(mu, Sigma); combining is arithmetic on its
natural parameters ``Lambda = Sigma^-1`` and ``h = Lambda mu``: per binary model,
for primal full covariances (d x d), per feature for diagonal ones, and exactly over
the union of the support sets for dual (kernel) models. The sums are associative,
so a tree of pairwise combinations (:mod:`kernelcw.distributed`) is exact given the
parts' weights, while no budget binds: a union past a budget is pruned at the node
that makes it, so with a binding budget the tree's shape (and ``CombinedClassifier``'s
``n_parts``) changes the model.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp
from scipy.linalg import LinAlgError, cho_factor, cho_solve
from sklearn.base import clone

from ._combine_checks import (
    METHODS,
    check_parts,
    check_started_covariance,
    continues_nu_pi,
    part_weights,
    same_value,
)
from .engines import engine_class
from .engines.dual.combine_state import (
    build_engine,
    natural_parameters,
    projected_model,
    projections,
)
from .estimators._mixins import COUNTERS

__all__ = ["METHODS", "combine"]


def combine(estimators: Sequence, method: str = "kl", *, weights=None, start=None):
    """A new fitted estimator combining models trained on disjoint parts of a stream.

    The inputs are not changed; the result is an ordinary fitted estimator of the
    same class and parameters (the first one's: the rule's own parameters, eta, C
    and r, may differ between the parts, which learnt with their own, and the result
    continues with the first one's), ready to predict, give
    ``predict_proba`` and continue with ``partial_fit``. Its counters
    (``n_updates_``, ...) are the parts' sums.

    Parameters
    ----------
    estimators : sequence of fitted estimators
        Of one class, rule, kernel (and its parameters), prior scale ``a``,
        covariance form, ``classes_``, feature count and feature names
        (``feature_names_in_``: the same columns in the same order, or none in any);
        the result has their ``feature_names_in_``.
    method : {"kl", "bayes", "average"}, default="kl"
        With ``Lambda_c``, ``h_c`` the parts' natural parameters and ``w_c`` their
        weights (``W = sum w_c``):

        - ``"kl"``: the precision-weighted mean of JMLR 2012 section 7.10,
          ``Lambda = sum_c w_c Lambda_c / W``, ``h = sum_c w_c h_c / W``,
          ``mu = Lambda^-1 h`` (per feature for diagonal models). The paper prints
          the *sum* of the precisions; the Gaussian minimising ``sum_c KL(N || N_c)``
          has their *average*, with the same mean. We take the average: it is the
          true KL minimiser, it keeps the prior scale ``a`` (so the result is a
          model of the same parameters, which the summed form, a prior ``a / C``,
          is not), and its confidence does not grow with the number of parts.
        - ``"bayes"``: the shared-prior product, ``Lambda = Lambda_0 + sum_c
          (Lambda_c - Lambda_0)``, likewise h, with ``Lambda_0`` the prior I/a or the
          ``start`` model's: each part's data counted once, the prior once. Exact
          (the model one learner would hold, had its updates been made against the
          parts' models) for parts that all started from ``start``: iterative
          parameter mixing.
        - ``"average"``: uniform parameter averaging (McDonald et al. 2010):
          ``mu = sum w_c mu_c / W``, ``Sigma = sum w_c Sigma_c / W`` (or of the
          diagonals).

        First-order learners (perceptron, PA; Sigma = a I) have ``h = mu / a``:
        "kl" and "average" average mu (dual: nu over the union), "bayes" adds the
        parts' changes to the start (their sum without one).
    weights : array-like of shape (n_estimators,), optional
        Positive weights, default all 1: the number of parts each estimator already
        combines, so that ``combine([combine([m1, m2]), m3], weights=[2, 1])`` is
        ``combine([m1, m2, m3])`` (to rounding, where no budget binds: the inner
        union is pruned to the budget first). "bayes" sums and ignores them (a
        combined model already counts each of its parts once).
    start : fitted estimator, optional
        ``method="bayes"`` only: the model every part started from.

    Returns
    -------
    estimator
        A new fitted estimator (a copy of the only one when given one).

    Notes
    -----
    Primal full models are inverted through Cholesky factors (``cho_factor`` and
    ``cho_solve``, never an explicit inverse of a non-factored matrix); the
    combined covariance is symmetrised. A dual model becomes a dual model over the
    union of the parts' support sets, identical inputs merged exactly (their zeta
    and g add): ``M = diag(1/zeta) + a K``, factored once, in the library's own
    append-only Cholesky form (:mod:`kernelcw.engines.dual.combine_state`). A
    budgeted model whose union exceeds the budget is pruned to it with its own
    budget policy, one support vector at a time, and continues in the explicit
    form the engine uses while a budget binds.

    A part pruned by projection (``budget_policy="project"``, the default) has a
    precision ``I/a + Phi X Phi'`` with X a dense matrix, not a diagonal one: such
    parts are combined exactly from their nu and Pi (one LU factorisation of the
    stacked parts' size, ``doc/combination.md``), into the explicit nu/Pi form with
    the "project" policy. The result must then have a budget and
    ``budget_policy="project"`` (a removal policy would need the diagonal terms
    it unlearns); it is refused otherwise.
    """
    ests = check_parts(estimators, method, start)
    w = part_weights(weights, len(ests))
    if method == "bayes":  # a sum: each part already counted once, whatever it combines
        w = np.ones(len(ests))
    first = ests[0]
    with _parts_locked(ests + ([start] if start is not None else [])):
        # again, with no part learning: a fit since the checks may have changed one
        ests = check_parts(ests, method, start)
        if start is not None:
            check_started_covariance(ests, start)
        if len(ests) == 1 and start is None:
            return copy.deepcopy(ests[0])
        spec = first._engine.spec
        if spec.form == "dual":
            engine = _combine_dual(ests, w, method, start)
        else:
            engines = [e._engine for e in ests]
            e0 = None if start is None else start._engine
            fn = _combine_full if spec.form == "primal_full" else _combine_diag
            state = fn(engines, w, method, e0, spec)
            engine = engine_class(spec.form).from_state(spec, state)
        return _assemble(first, ests, engine, start)


@contextlib.contextmanager
def _parts_locked(models: list):
    """Hold the engine locks of ``models`` (no part learns while it is read), taken in
    one order whatever the parts' (by id: combine([a, b]) in one thread and
    combine([b, a]) in another each held one lock and waited for the other's), and
    taken again if a ``fit`` replaced a part's engine before its lock was held."""
    while True:
        with contextlib.ExitStack() as stack:
            engines = {id(m._engine): m._engine for m in models}
            for _, engine in sorted(engines.items()):
                stack.enter_context(engine.lock)
            if all(engines.get(id(m._engine)) is m._engine for m in models):
                yield
                return


def _assemble(first, ests, engine, start):
    """A new estimator: the first one's parameters and fitted attributes, the new
    engine, and the parts' counters summed (with ``start``, which every part's counters
    include, once: ``start + sum(part - start)``)."""
    new = clone(first)
    for k, v in vars(first).items():
        if k.endswith("_") and not k.startswith("_"):
            setattr(new, k, copy.deepcopy(v))
    # the values it began with are first's, as the clone's own objects where they are
    # the same values (clone copies a kernel object: an identity check saw a change)
    began = copy.copy(first._began_with)
    for k, v in began.items():
        if same_value(getattr(new, k), v):
            began[k] = getattr(new, k)
    new._began_with = began
    new._engine = engine
    totals = [sum(getattr(e, k) for e in ests) for k in COUNTERS]
    if start is not None:  # (start's rows, which every part's counters include)
        totals = [
            t - (len(ests) - 1) * getattr(start, k) for t, k in zip(totals, COUNTERS, strict=True)
        ]
    new._counts = tuple(t if np.ndim(t) else int(t) for t in totals)
    return new


# ---------------------------------------------------------------- primal


def _chol(A: np.ndarray, what: str):
    try:
        return cho_factor(A, lower=True, check_finite=True)
    except (LinAlgError, ValueError) as err:
        raise ValueError(f"{what} is not positive definite ({err})") from None


def _natural_full(mean, cov) -> tuple[np.ndarray, np.ndarray]:
    """(Lambda, h) of N(mean, cov): one Cholesky factorisation, two solves."""
    c = _chol(cov, "a part's covariance")
    Lam = cho_solve(c, np.eye(mean.shape[0]))
    return 0.5 * (Lam + Lam.T), cho_solve(c, mean)


def _combine_full(engines, w, method, e0, spec) -> dict:
    K, d = spec.n_models, spec.n_features
    W = w.sum()
    means = [e.state_dict()["mean"].reshape(K, d) for e in engines]
    covs = [e.state_dict()["covariance"].reshape(K, d, d) for e in engines]
    out_mu, out_cov = np.empty((K, d)), np.empty((K, d, d))
    first_order = spec.rule.first_order
    for k in range(K):
        if method == "average" or (first_order and method == "kl"):
            out_mu[k] = sum(wc * m[k] for wc, m in zip(w, means, strict=True)) / W
            out_cov[k] = sum(wc * c[k] for wc, c in zip(w, covs, strict=True)) / W
            continue
        if first_order:  # bayes: the changes to the start added
            base = np.zeros(d) if e0 is None else e0.state_dict()["mean"].reshape(K, d)[k]
            out_mu[k] = base + sum(wc * (m[k] - base) for wc, m in zip(w, means, strict=True))
            out_cov[k] = covs[0][k]
            continue
        nat = [_natural_full(m[k], c[k]) for m, c in zip(means, covs, strict=True)]
        if method == "kl":
            Lam = sum(wc * L for wc, (L, _) in zip(w, nat, strict=True)) / W
            h = sum(wc * hc for wc, (_, hc) in zip(w, nat, strict=True)) / W
        else:
            if e0 is None:
                L0, h0 = np.eye(d) / spec.a, np.zeros(d)
            else:
                s0 = e0.state_dict()
                L0, h0 = _natural_full(s0["mean"].reshape(K, d)[k], s0["covariance"][k])
            Lam = L0 + sum(wc * (L - L0) for wc, (L, _) in zip(w, nat, strict=True))
            h = h0 + sum(wc * (hc - h0) for wc, (_, hc) in zip(w, nat, strict=True))
        c = _chol(0.5 * (Lam + Lam.T), "the combined precision")
        cov = cho_solve(c, np.eye(d))
        out_cov[k] = 0.5 * (cov + cov.T)
        out_mu[k] = cho_solve(c, h)
    return {"mean": out_mu, "covariance": out_cov}


def _combine_diag(engines, w, method, e0, spec) -> dict:
    """Per feature: the same rules on 1/s_j and mu_j / s_j."""
    K, d = spec.n_models, spec.n_features
    W = w.sum()
    st = [e.state_dict() for e in engines]
    mu = np.stack([s["mean"].reshape(K, d) for s in st])  # (C, K, d)
    var = np.stack([s["variance"].reshape(K, d) for s in st])
    wc = w[:, None, None]
    if method == "average" or (spec.rule.first_order and method == "kl"):
        return {"mean": (wc * mu).sum(0) / W, "variance": (wc * var).sum(0) / W}
    if spec.rule.first_order:
        base = np.zeros((K, d)) if e0 is None else e0.state_dict()["mean"].reshape(K, d)
        return {"mean": base + (wc * (mu - base)).sum(0), "variance": var[0]}
    if np.any(~(var > 0.0)):
        raise ValueError("a part holds a zero or negative variance: no finite precision")
    lam, h = 1.0 / var, mu / var
    if method == "kl":
        Lam, H = (wc * lam).sum(0) / W, (wc * h).sum(0) / W
    else:
        if e0 is None:
            L0, H0 = np.full((K, d), 1.0 / spec.a), np.zeros((K, d))
        else:
            s0 = e0.state_dict()
            v0 = s0["variance"].reshape(K, d)
            L0, H0 = 1.0 / v0, s0["mean"].reshape(K, d) / v0
        Lam = L0 + (wc * (lam - L0)).sum(0)
        H = H0 + (wc * (h - H0)).sum(0)
    if np.any(~(Lam > 0.0)):
        raise ValueError(
            "the combined precision is not positive on some features (method='bayes' "
            "with parts that did not start from `start`?)"
        )
    return {"mean": H / Lam, "variance": 1.0 / Lam}


# ---------------------------------------------------------------- dual


def _row_keys(rows) -> list[bytes]:
    """A key per input that equal inputs share (exact: their bytes)."""
    if sp.issparse(rows):
        R = rows.tocsr().copy()
        R.sum_duplicates()
        R.eliminate_zeros()
        R.sort_indices()
        p = R.indptr
        return [
            R.indices[p[i] : p[i + 1]].astype(np.int64).tobytes()
            + b"|"
            + (R.data[p[i] : p[i + 1]] + 0.0).tobytes()
            for i in range(R.shape[0])
        ]
    R = np.ascontiguousarray(rows, dtype=np.float64) + 0.0  # -0.0 and 0.0 alike
    return [R[i].tobytes() for i in range(R.shape[0])]


def _union_store(engines):
    """The union of the parts' support stores, identical inputs once. Returns (the
    store state, its rows, and per part the map from its store rows to the union's).
    Positions continue across parts as if their streams were concatenated."""
    all_rows, maps, keys, pos = [], [], {}, []
    sparse = any(sp.issparse(e.store.rows) for e in engines)
    offset = 0
    for e in engines:
        st = e.store
        rows = st.take(np.arange(st.n)) if st.n else None
        m = np.empty(st.n, dtype=np.int64)
        if st.n:
            rows = sp.csr_matrix(rows) if sparse else np.asarray(rows)
            for i, key in enumerate(_row_keys(rows)):
                j = keys.get(key)
                if j is None:
                    j = keys[key] = len(pos)
                    all_rows.append(rows[i])
                    pos.append(int(st.pos[i]) + offset)
                m[i] = j
        maps.append(m)
        offset += st.n_seen
    if not all_rows:
        R = None
    elif sparse:
        R = sp.vstack(all_rows, format="csr")
    else:
        R = np.ascontiguousarray(np.stack(all_rows))
    store = {
        "n": np.array(len(pos), dtype=np.int64),
        "pos": np.array(pos, dtype=np.int64),
        "n_seen": np.array(offset, dtype=np.int64),
    }
    if R is None:
        store["kind"] = np.array(0)
    elif sparse:
        store.update(kind=np.array(2), data=R.data, indices=R.indices, indptr=R.indptr)
        store["shape"] = np.array(R.shape, dtype=np.int64)
    else:
        store.update(kind=np.array(1), rows=R)
    return store, R, maps


def _merge(parts, fields: tuple[str, ...], U: int):
    """Sum each field over the parts' (union index, value) pairs. Returns the union
    indices in order of first appearance and the summed fields."""
    order, seen = [], np.zeros(U, dtype=bool)
    sums = {f: np.zeros(U) for f in fields}
    for ids, t, vals in parts:
        for f in fields:
            np.add.at(sums[f], ids, t * vals[f])
        new = ids[~seen[ids]]
        new = new[np.sort(np.unique(new, return_index=True)[1])]  # once, first appearance
        seen[new] = True
        order.extend(new.tolist())
    idx = np.array(order, dtype=np.int64)
    return idx, {f: s[idx] for f, s in sums.items()}


def _combine_dual(ests, w, method, start):
    """The union model of each binary model (module ``doc/combination.md``)."""
    spec = ests[0]._engine.spec
    engines = [e._engine for e in ests] + ([start._engine] if start is not None else [])
    W = w.sum()
    if method == "bayes":
        t = list(w) + ([1.0 - W] if start is not None else [])
    else:
        t = list(w / W)
    store, R, maps = _union_store(engines)
    U = int(store["n"])
    # a part given by nu and Pi alone (an "average" combination) has no natural
    # parameters: its zsv and gsv are its parts' sums, which do not describe it
    nu_pi = [bool(e.nu_pi_models) and method != "average" for e in engines]
    models = []
    for k in range(spec.n_models):
        forms = [e.forms[k] for e in engines]
        removed = [projections(f) for f in forms]
        if (any(removed) or any(nu_pi)) and not spec.rule.first_order:
            _projected_target(spec, removed, nu_pi, len(ests))
            models.append(projected_model(forms, maps, t, method, spec, R, U))
            models[-1]["removed"] = sum(removed)
            continue
        nat = [natural_parameters(f) for f in forms]
        parts = [(maps[c][p["idx"]], t[c], p) for c, p in enumerate(nat)]
        if spec.rule.first_order:
            idx, s = _merge(parts, ("nu",), U)
            models.append({"idx": idx, "nu": s["nu"], "Pi": None, "zsv": 0 * s["nu"]})
            models[-1]["gsv"] = s["nu"] / spec.a
        elif method == "average":
            models.append(_average_model(engines, k, parts, U, spec))
        else:
            idx, s = _merge(parts, ("zeta", "g"), U)
            models.append({"idx": idx, **_clean(s["zeta"], s["g"], parts, idx, U)})
            models[-1]["idx"] = idx[models[-1].pop("keep")]
    return build_engine(spec, store, R, models)


def _clean(zeta, g, parts, idx, U) -> dict:
    """Drop support vectors whose merged terms cancelled (a start's, under
    "bayes"); refuse a negative zeta."""
    scale = np.zeros(U)
    for ids, t, p in parts:
        np.add.at(scale, ids, abs(t) * np.abs(p["zeta"]))
    tol = 1e-9 * scale[idx]
    if np.any(zeta < -tol):
        raise ValueError(
            "the combined precision has a negative term: with method='bayes' and "
            "start=, every part must have started from start (continued it) and "
            "kept its support vectors (no budget pruned them)"
        )
    keep = zeta > tol
    return {"zeta": zeta[keep], "g": g[keep], "keep": keep}


def _average_model(engines, k, parts, U, spec) -> dict:
    """mu and Sigma averaged: nu and Pi over the union (the explicit form)."""
    idx, s = _merge(parts, ("zeta", "g"), U)
    where = np.full(U, -1, dtype=np.int64)
    where[idx] = np.arange(idx.size)
    nu = np.zeros(idx.size)
    Pi = np.zeros((idx.size, idx.size))
    for e, (ids, t, _) in zip(engines, parts, strict=True):
        f = e.forms[k]
        order = f.order()
        E = sp.csr_matrix(
            (np.ones(ids.size), (np.arange(ids.size), where[ids])), shape=(ids.size, idx.size)
        )
        nu += t * (E.T @ f.nu(spec.a)[order])
        Pi += t * (E.T @ (E.T @ f.Pi(spec.a)[np.ix_(order, order)]).T)
    Pi = 0.5 * (Pi + Pi.T)
    return {"idx": idx, "nu": nu, "Pi": Pi, "zsv": s["zeta"], "gsv": s["g"]}


def _projected_target(spec, removed: list[int], nu_pi: list[bool], n_ests: int) -> None:
    """ValueError unless the combined model (estimators[0]'s parameters) can hold a
    part pruned by projection, or one given by nu and Pi alone (``nu_pi``: an
    "average" combination, under "kl" or "bayes"), both combined from nu and Pi: a
    budget and the "project" policy."""
    if continues_nu_pi(spec.rule.first_order, spec.budget, spec.budget_policy):
        return
    c = next((i for i, r in enumerate(removed) if r), None)
    if c is None:
        c = nu_pi.index(True)
        where = "start" if c == n_ests else f"estimators[{c}]"
        raise ValueError(
            f"{where} is a combination by method='average' (mu and Sigma averaged): it "
            "is given by nu and Pi alone, without the natural parameters that "
            "'kl' and 'bayes' add up; combine the models it was made of, use "
            "method='average', or combine into a model with a budget and "
            "budget_policy='project' (from nu and Pi, exactly)"
        )
    where = "start" if c == n_ests else f"estimators[{c}]"
    raise ValueError(
        f"{where} was pruned by projection (budget_policy='project'), which only a "
        "model with a budget and budget_policy='project' can hold exactly; the "
        f"combined model takes estimators[0]'s parameters, budget={spec.budget!r} and "
        f"budget_policy={spec.budget_policy!r}: put such a model first"
    )
