"""What a saved state of the dual engine must hold before it is rebuilt.

:func:`kernelcw.load` runs :func:`check_state` on a file's arrays: shapes that fit the
parameters and the support size, indices in range (the sparse store's CSR arrays
included: scipy and the compiled walks trust them), the values the forms assume
(positive step weights ``zeta``, non-negative self-kernels ``kap``,
counters in range, buffer capacities bounded by the inputs seen), and a factor form
the rule and the budget allow. A state that broke one of these crashed the process,
divided by zero, exhausted memory or predicted NaN silently later. Each error names
the member (``engine.<key>``).
"""

from __future__ import annotations

import numpy as np

from ...spec import COUNT_MAX, DUAL_BLOCK
from .explicit import ExplicitForm
from .lazy import LazyForm
from .panels import PanelForm
from .pruned import PrunedForm
from .queue import QueueForm
from .store import SupportStore, jittered, kernel_jitter

__all__ = ["check_state"]

#: Arrays of the support set's length n (each axis n, or 0 where the form or policy
#: keeps none); the "oldest" queue form keeps its blocks, checked by its sizes.
SLOTS = ("idx", "entry", "kap")
#: The form codes (each form's ``code``) and what each needs.
PANELS, EXPLICIT, QUEUE, PRUNED, LAZY = (
    f.code for f in (PanelForm, ExplicitForm, QueueForm, PrunedForm, LazyForm)
)


def _int(state, key: str, lo: int, hi: int) -> int:
    v = state.get(key)
    if v is None or v.shape != () or v.dtype.kind not in "iu" or not lo <= int(v) <= hi:
        raise ValueError(f"engine.{key} must be an integer in [{lo}, {hi}]")
    return int(v)


def _ints_in(state, key: str, lo: int, hi: int, shape) -> np.ndarray:
    v = state.get(key)
    if v is None or v.shape != shape or v.dtype.kind not in "iu":
        raise ValueError(f"engine.{key} must be integers of shape {shape}")
    if v.size and (v.min() < lo or v.max() >= hi):
        raise ValueError(f"engine.{key} must lie in [{lo}, {hi})")
    return v


def check_state(spec, state: dict[str, np.ndarray]) -> None:
    """ValueError naming the member if ``state`` (a :meth:`DualEngine.state_dict`
    whose arrays the caller found plain and finite numbers) does not fit ``spec`` or
    breaks an invariant."""
    for flag in ("factor_only", "nu_pi_models", "floors_drift"):
        if flag in state:
            _int(state, flag, 0, 1)
    if "kernel_jitter" in state:
        want = kernel_jitter(spec)
        got = state["kernel_jitter"]
        if got.shape != () or float(got) != want:
            raise ValueError(
                f"engine.kernel_jitter is {got!r}; these parameters learn with {want!r} "
                '(PROJECT_JITTER for a budgeted "project" model, else 0)'
            )
    n_store, n_seen = _check_store(spec, state)
    block = spec.block_size or DUAL_BLOCK
    for k in range(spec.n_models):
        n = _check_model(spec, state, f"model{k}.", n_store, n_seen, block)
        if spec.budget is not None and n > spec.budget:  # (the buffers hold the budget)
            raise ValueError(f"model {k} holds {n} support vectors; the budget is {spec.budget}")
    _check_self_kernels(spec, state)


def _check_self_kernels(spec, state) -> None:
    """Each model's k(x, x) at its support vectors (kap) is what the kernel of the
    parameters gives on the stored rows: a kernel, degree, coef0 or intercept that is
    not the one the state was learnt with shows here (callables and precomputed
    matrices keep no way to recompute it)."""
    kernel = spec.kernel
    kind = int(state["store.kind"])
    if kernel is None or kernel.precomputed or kernel._f is not None or kind == 0:
        return
    store = {k[len("store.") :]: v for k, v in state.items() if k.startswith("store.")}
    rows = SupportStore.from_state(kernel, store).rows  # (its arrays checked above)
    diag = kernel.diag(rows)
    if "kernel_jitter" in state:  # (checked: the spec's; files before it: none)
        diag = jittered(diag, kernel_jitter(spec))
    for k in range(spec.n_models):
        idx, kap = state[f"model{k}.idx"], state[f"model{k}.kap"]
        if idx.size and not np.allclose(kap, diag[idx], rtol=1e-9, atol=1e-12 * diag.max()):
            raise ValueError(
                f"engine.model{k}.kap is not k(x, x) of the stored support vectors under "
                f"kernel {kernel.name!r} with these parameters: the state was learnt with "
                "another kernel"
            )


def _check_store(spec, state) -> tuple[int, int]:
    """The support store: (its row count, the inputs seen)."""
    d = spec.n_features
    n_seen = _int(state, "store.n_seen", 0, COUNT_MAX)
    n = _int(state, "store.n", 0, COUNT_MAX)  # (more than n_seen after passes of a fit)
    _ints_in(state, "store.pos", 0, max(n_seen, 1), (n,))
    kind = _int(state, "store.kind", 0, 2)
    precomputed = spec.kernel is not None and spec.kernel.precomputed
    if (kind == 0) != (precomputed or n == 0):
        raise ValueError("engine.store.kind does not fit the kernel (rows kept for a kernel "
                         "of features, none for kernel='precomputed')")  # fmt: skip
    rows = state.get("store.rows", np.zeros(0)).shape
    if kind == 1 and rows != (n, d):
        raise ValueError(f"engine.store.rows has shape {rows}; the parameters need ({n}, {d})")
    if kind == 2:
        shape = _ints_in(state, "store.shape", 0, COUNT_MAX, (2,))
        if tuple(shape) != (n, d):
            raise ValueError(f"engine.store.shape must be ({n}, {d})")
        data = state.get("store.data", np.zeros((0, 0)))
        if data.ndim != 1:
            raise ValueError("engine.store.data must be a vector")
        indptr = _ints_in(state, "store.indptr", 0, data.size + 1, (n + 1,))
        if indptr[0] != 0 or indptr[-1] != data.size or np.any(np.diff(indptr) < 0):
            raise ValueError("engine.store.indptr must rise from 0 to the stored values' count")
        _ints_in(state, "store.indices", 0, d, data.shape)
    return n, n_seen


def _check_model(spec, state, prefix: str, n_store: int, n_seen: int, block: int) -> int:
    """One binary model's arrays; returns its support size n."""
    form = _check_form(spec, state, prefix)
    idx = state.get(prefix + "idx")
    if idx is None or idx.ndim != 1:
        raise ValueError(f"engine.{prefix}idx is missing or not a vector")
    n = idx.shape[0]
    if n and (idx.dtype.kind not in "iu" or idx.min() < 0 or idx.max() >= n_store):
        raise ValueError(f"engine.{prefix}idx must index the {n_store} stored support inputs")
    clock = _int(state, prefix + "clock", n, COUNT_MAX)
    _ints_in(state, prefix + "entry", 0, max(clock, 1), (n,))
    cap_max = 2 * (n_store + n_seen + block) + 64  # what growth allocates at most
    if form == PANELS:
        _int(state, prefix + "capacity", n, cap_max)
    if form == QUEUE:
        n_old = _int(state, prefix + "nO", 0, n)
        if _int(state, prefix + "nN", 0, n) != n - n_old:
            raise ValueError(f"engine.{prefix}nO + nN must be the {n} support vectors")
        _int(state, prefix + "capO", n_old, cap_max)
        _int(state, prefix + "capN", n - n_old, cap_max)
    for name, shape in _required(form, n, state, prefix, spec).items():
        arr = state.get(prefix + name)
        if arr is None:
            raise ValueError(f"member engine.{prefix}{name} is missing")
        if arr.shape != shape:
            raise ValueError(
                f"engine.{prefix}{name} has shape {arr.shape}; the model has {n} support "
                f"vectors and needs {shape}"
            )
    for key, arr in state.items():
        if not key.startswith(prefix) or arr.ndim == 0:
            continue
        name = key[len(prefix) :]
        if form == QUEUE and name not in SLOTS + ("zeta", "qv"):
            continue
        if any(m not in (n, 0) for m in arr.shape) or (name in SLOTS and arr.shape != (n,)):
            raise ValueError(
                f"engine.{key} has shape {arr.shape}; the model has {n} support vectors"
            )
    if np.any(state[prefix + "kap"] < 0.0):
        raise ValueError(f"engine.{prefix}kap holds a negative k(x, x)")
    # zeta > 0; a budgeted "project" model reads none, and may hold 0 (slots a
    # combination wrote by projection, which no zeta describes)
    zeta = state.get(prefix + "zeta") if form != EXPLICIT else None
    if zeta is not None and np.any(zeta < 0.0 if spec.projects else zeta <= 0.0):
        raise ValueError(f"engine.{prefix}zeta must be positive")
    # the explicit form's zsv likewise, but for models given by nu and Pi (combine's)
    zsv = state.get(prefix + "zsv") if form == EXPLICIT else None
    given = int(state.get("nu_pi_models", 0))
    second = not spec.rule.first_order  # (a first-order rule's zsv are 0: unused)
    if zsv is not None and second and not spec.projects and not given and np.any(zsv <= 0.0):
        raise ValueError(f"engine.{prefix}zsv must be positive")
    for key in ("LK", "L", "LO", "LN"):  # a Cholesky factor's diagonal is positive
        F = state.get(prefix + key)
        if F is not None and F.ndim == 2 and F.shape[0] == F.shape[1] and F.shape[0]:
            if not np.all(np.diagonal(F) > 0.0):
                raise ValueError(f"engine.{prefix}{key}'s diagonal (a factor's) must be positive")
    if form in (EXPLICIT, PRUNED, LAZY):  # the budget policy's removals so far
        _int(state, prefix + ("policy.counter" if form == EXPLICIT else "counter"), 0, COUNT_MAX)
    for key in ("G", "policy.G"):  # a Gram cache holds k(x, x) on its diagonal
        G = state.get(prefix + key)
        if G is not None and G.shape == (n, n) and n:
            kap = state[prefix + "kap"]  # (to the kernel block's rounding)
            if not np.allclose(np.diagonal(G), kap, rtol=1e-6, atol=1e-12 * kap.max()):
                raise ValueError(f"engine.{prefix}{key}'s diagonal must be the kap of its slots")
            if key == "policy.G" and not np.array_equal(G, G.T):  # (a rollback mirrors it)
                raise ValueError(f"engine.{prefix}{key} must be exactly symmetric")
            if not np.allclose(G, G.T, rtol=1e-9, atol=1e-12 * kap.max()):  # (K, to rounding)
                raise ValueError(f"engine.{prefix}{key} must be symmetric")
    return n


def _check_form(spec, state, prefix: str) -> int:
    """The model's form code, one the rule and the budget allow."""
    form = _int(state, prefix + "form", 0, COUNT_MAX)
    if form not in (PANELS, EXPLICIT, QUEUE, PRUNED, LAZY):
        raise ValueError(
            f"engine.{prefix}form {form} is a factor form this version of kernelcw does not "
            "know (a file written by a newer version?)"
        )
    if spec.rule.first_order and form != EXPLICIT:
        raise ValueError(
            f"engine.{prefix}form {form} is a second-order form; the rule is first-order"
        )
    if form in (QUEUE, PRUNED, LAZY) and spec.budget is None:
        raise ValueError(f"engine.{prefix}form {form} is a budgeted form; the model has no budget")
    needs = {QUEUE: "oldest", LAZY: "random"}
    if form in needs and (spec.budget_policy != needs[form] or spec.budget_batch != 1):
        raise ValueError(
            f"engine.{prefix}form {form} serves budget_policy={needs[form]!r} with "
            "budget_batch=1 only"
        )
    return form


def _required(form: int, n: int, state, prefix: str, spec) -> dict[str, tuple]:
    """The arrays form ``form`` reads, with their shapes for n support vectors."""
    vec, mat = (n,), (n, n)
    need = {"kap": vec}
    if form == PANELS:
        need.update(LK=mat, r=vec, zeta=vec)
    elif form == EXPLICIT:
        need.update(nu=vec, zsv=vec, gsv=vec, Pi=(0, 0) if spec.rule.first_order else mat)
    elif form == QUEUE:
        o = int(state.get(prefix + "nO", -1))
        m = n - o
        need.update(LO=(o, o), rO=(o, 1), LNO=(m, o), KNO=(m, o), LN=(m, m), rN=(m, 1))
        need.update(zeta=vec, qv=vec)
    else:
        side = mat if spec.budget_policy == "project" and form == PRUNED else (0, 0)
        need.update(L=mat, r=vec, qv=vec, zeta=vec, G=side)
    return need
