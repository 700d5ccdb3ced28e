"""Growing a fitted engine: wider inputs, more one-vs-rest models, a mirrored model.

An engine is built for a fixed number of features and models; a stream whose feature
names and labels appear as it goes (:mod:`kernelcw.river`) needs both to grow. Each
operation here reads the engine's :meth:`~kernelcw.engines.Engine.state_dict`,
extends the plain arrays and rebuilds the engine with
:meth:`~kernelcw.engines.Engine.from_state`; no engine code changes.

- :func:`widen`: ``n`` new features that were 0 in every past input. The primal mean
  gets 0 and the covariance the prior ``a I`` in the new coordinates, the dual
  support vectors a 0 column: exactly the model that had the wider inputs from the
  start, because a feature that was 0 in every input never entered an update
  (``Sigma x`` and ``x' Sigma x`` do not read the new block) and the kernels
  (linear, poly, rbf, laplacian) of zero-padded vectors are the kernels of the
  vectors.
- :func:`add_models`: new binary models at the prior N(0, a I) (no support vectors).
- :func:`mirror`: of a single binary model (``classes_[1]`` against ``classes_[0]``),
  the two one-vs-rest models ``[classes_[0], classes_[1]]``. Every rule is odd in the
  label (the update of ``-y`` at ``-mu`` is the negated update of ``y`` at ``mu``,
  the covariance unchanged), so the model of the other class is the one whose
  sign-carrying arrays (:data:`SIGNED`) are negated, bit for bit; the tests check
  this against learning the flipped labels for every engine form.
- :func:`wider_margins`: what :func:`widen` would predict for rows with new features,
  without widening (a prediction does not change the model).
"""

from __future__ import annotations

import copy
import dataclasses

import numpy as np
import scipy.sparse as sp

from .engines import Engine, build_engine, engine_class
from .kernels import Kernel

__all__ = ["SIGNED", "add_models", "mirror", "widen", "wider_margins"]

#: The state arrays that change sign with the labels (the mean, in each form's
#: terms); every other array (covariances, factors, support slots) is even.
SIGNED = frozenset({"mean", "nu", "gsv", "r", "qv", "rO", "rN"})


def _rebuild(engine: Engine, spec, state: dict[str, np.ndarray]) -> Engine:
    return engine_class(spec.form).from_state(spec, state)


def widen(engine: Engine, n_features: int) -> Engine:
    """The engine for inputs of ``n_features`` (>= its own) whose new trailing features
    were 0 in every input it learnt from. Returns a new engine (``engine`` itself for
    its own width); ``engine`` is unchanged.

    A kernel's ``gamma`` stays the one the engine was built with (``gamma=None``
    resolved at the first width), so the kernel of past inputs does not change. An
    intercept stays what it is: a primal engine's constant column stays last (the
    new features go before it), a dual engine's ``c^2`` stays added to the kernel.
    """
    spec = engine.spec
    tail = 1 if spec.intercept and spec.form != "dual" else 0  # the constant column
    d = spec.n_features - tail
    if n_features < d:
        raise ValueError(f"widen: n_features={n_features} is below the current {d}")
    if n_features == d:
        return engine
    state = engine.state_dict()
    w0, w1 = d + tail, n_features + tail  # the engine's widths, before and after
    new = dataclasses.replace(spec, n_features=int(w1))
    old = np.r_[0:d, n_features : n_features + tail]  # where the old coordinates go
    fresh = np.arange(d, n_features)
    if spec.form == "primal_full":
        K = spec.n_models
        mean = np.zeros((K, w1))
        mean[:, old] = np.asarray(state["mean"]).reshape(K, w0)
        cov = np.zeros((K, w1, w1))
        cov[:, old[:, None], old] = np.asarray(state["covariance"]).reshape(K, w0, w0)
        cov[:, fresh, fresh] = spec.a
        state = {"mean": mean, "covariance": cov}
    elif spec.form == "primal_diag":
        K = spec.n_models
        mean, var = np.zeros((K, w1)), np.zeros((K, w1))
        mean[:, old] = np.asarray(state["mean"]).reshape(K, w0)
        var[:, old] = np.asarray(state["variance"]).reshape(K, w0)
        var[:, fresh] = spec.a
        state = {"mean": mean, "variance": var}
    else:
        k = spec.kernel
        if k.precomputed:
            raise ValueError("kernel='precomputed' has no features to widen")
        new.kernel = Kernel(k.kernel, k.gamma, k.degree, k.coef0, n_features, k.offset)
        extra = n_features - d
        state = dict(state)
        kind = int(state["store.kind"])
        if kind == 1:
            rows = np.asarray(state["store.rows"])
            state["store.rows"] = np.hstack([rows, np.zeros((rows.shape[0], extra))])
        elif kind == 2:
            state["store.shape"] = np.array([state["store.shape"][0], n_features])
    return _rebuild(engine, new, state)


def wider_margins(engine: Engine, X, U, variance: bool = True):
    """(f, v), (n, K) each (v None unless ``variance``): the mean margins and margin
    variances of the rows ``[X U]`` under the engine :func:`widen` would make for U's
    columns (features that were 0 in every input it learnt from), without making it.
    X: dense rows at the engine's width (a primal intercept column included), U: dense
    (n, u).

    Primal: the new coordinates have mean 0 and the prior variance ``a``, no
    covariance with the others, so f is X's and v is X's plus ``a |u|^2``. Dual: the
    support vectors are 0 there, but a kernel of them is not that of X (rbf and
    laplacian distances grow, so does a poly kernel's ``k(x, x)``): the kernel blocks
    of ``[X U]`` against the support vectors padded with zeros, through a shallow
    copy of the engine (every factor shared; the support rows copied once a call,
    no more values than a kernel block of them reads).
    """
    if not U.shape[1] or not U.any():
        return engine.margins(X) if variance else (engine.decision(X), None)
    if engine.spec.form != "dual":
        f = engine.decision(X)
        if not variance:
            return f, None
        sq = np.einsum("ij,ij->i", U, U)
        return f, engine.margin_variance(X) + engine.spec.a * sq[:, None]
    view = _padded_view(engine, U.shape[1])
    XU = np.hstack([X, U])
    return view.margins(XU) if variance else (view.decision(XU), None)


def _padded_view(engine: Engine, u: int) -> Engine:
    """A dual engine for inputs ``u`` features wider, for prediction only: a shallow
    copy of ``engine`` (the same factor forms) whose store holds the support rows
    with ``u`` zero columns and a kernel of the wider width (the same gamma)."""
    spec, store = engine.spec, copy.copy(engine.store)
    k, d = spec.kernel, spec.n_features
    if k.precomputed:
        raise ValueError("kernel='precomputed' has no features to widen")
    store.kernel = Kernel(k.kernel, k.gamma, k.degree, k.coef0, d + u, k.offset)
    if store.rows is not None:
        R, n = store.rows[: store.n], store.n
        if sp.issparse(R):
            store.rows = sp.csr_matrix((R.data, R.indices, R.indptr), shape=(n, d + u))
        else:
            store.rows = np.hstack([R, np.zeros((n, u))])
    view = copy.copy(engine)
    view.spec = dataclasses.replace(spec, n_features=d + u, kernel=store.kernel)
    view.store = store
    return view


def _model_keys(state: dict[str, np.ndarray], i: int) -> dict[str, np.ndarray]:
    prefix = f"model{i}."
    return {k[len(prefix) :]: v for k, v in state.items() if k.startswith(prefix)}


def _dual_models(engine: Engine, models: list[dict[str, np.ndarray]], spec) -> Engine:
    """The dual engine of ``spec`` with ``engine``'s store, its engine-wide flags
    (``factor_only``, ``nu_pi_models``) and the given model states."""
    state = {k: v for k, v in engine.state_dict().items() if not k.startswith("model")}
    state["n_models"] = np.array(len(models), dtype=np.int64)
    for i, sub in enumerate(models):
        state.update({f"model{i}.{k}": v for k, v in sub.items()})
    return _rebuild(engine, spec, state)


def add_models(engine: Engine, n_new: int) -> Engine:
    """The engine with ``n_new`` more binary models at the prior N(0, a I), after its
    own (``n_new`` >= 1). Returns a new engine; ``engine`` is unchanged."""
    if isinstance(n_new, bool) or int(n_new) != n_new or n_new < 1:
        raise ValueError(f"add_models: n_new={n_new!r} must be an integer >= 1")
    spec = engine.spec
    K = spec.n_models
    new = dataclasses.replace(spec, n_models=K + int(n_new))
    state = engine.state_dict()
    if spec.form == "dual":
        fresh = build_engine(dataclasses.replace(spec, n_models=1)).state_dict()
        models = [_model_keys(state, i) for i in range(K)]
        models += [_model_keys(fresh, 0) for _ in range(n_new)]
        return _dual_models(engine, models, new)
    prior = build_engine(dataclasses.replace(spec, n_models=int(n_new))).state_dict()
    d = spec.n_features
    shapes = {"mean": (d,), "variance": (d,), "covariance": (d, d)}
    state = {
        k: np.concatenate(
            [np.asarray(v).reshape(K, *shapes[k]), np.asarray(prior[k]).reshape(-1, *shapes[k])]
        )
        for k, v in state.items()
    }
    return _rebuild(engine, new, state)


def _negated(sub: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {k: (-np.asarray(v) if k in SIGNED else np.array(v, copy=True)) for k, v in sub.items()}


def mirror(engine: Engine) -> Engine:
    """Of a one-model (binary) engine, the two-model engine ``[negated, original]``:
    the one-vs-rest models of ``classes_[0]`` and ``classes_[1]``. Returns a new
    engine; ``engine`` is unchanged."""
    spec = engine.spec
    if spec.n_models != 1:
        raise ValueError(f"mirror needs a one-model engine, this one has {spec.n_models}")
    new = dataclasses.replace(spec, n_models=2)
    state = engine.state_dict()
    if spec.form == "dual":
        sub = _model_keys(state, 0)
        return _dual_models(engine, [_negated(sub), sub], new)
    both = {k: np.concatenate([_negated({k: v})[k], np.asarray(v)]) for k, v in state.items()}
    return _rebuild(engine, new, both)
