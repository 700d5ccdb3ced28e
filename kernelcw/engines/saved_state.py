"""The engine state of a saved model file, checked before any engine is rebuilt from it
(:func:`kernelcw.load`): plain float64 and integer arrays of the shapes the parameters
give, a primal covariance positive semi-definite, and the dual engine's store, slots and
factor forms by :mod:`.dual.state_check`."""

from __future__ import annotations

import numpy as np
from scipy.linalg import LinAlgError, cho_factor

from .dual.state_check import check_state

__all__ = ["DUAL_V2", "check_saved_state"]

#: The dual engine's members a file of format version 2 must hold (version 1 files
#: gained them over time; one without them is from before, with their values then).
DUAL_V2 = ("factor_only", "nu_pi_models", "kernel_jitter")

#: The state's integer members (a model's without its ``model{k}.`` prefix): counts,
#: positions, capacities, codes and flags; every other member holds float64 values.
INTEGER_MEMBERS = frozenset(
    {"capN", "capO", "capacity", "clock", "counter", "entry", "factor_only", "form", "idx"}
    | {"floors_drift"}
    | {"nN", "nO", "n_models", "nu_pi_models", "policy.counter", "store.kind", "store.n"}
    | {"store.n_seen", "store.pos", "store.indices", "store.indptr", "store.shape"}
)


def check_saved_state(spec, state: dict[str, np.ndarray], bad, version: int) -> None:
    """Plain numeric arrays whose shapes fit the parameters: the primal forms here, the
    dual form by :func:`kernelcw.engines.dual.state_check.check_state` (its store,
    slots, factor forms and counters), with the members :data:`DUAL_V2` from format
    version 2 on. ``bad(what)``: the ValueError to raise, naming the file."""
    K, d = spec.n_models, spec.n_features
    for k, v in state.items():
        if v.dtype.kind not in "biuf":
            raise bad(f"engine.{k} has dtype {v.dtype}, not a numeric one")
        name = k.split(".", 1)[1] if k.startswith("model") else k
        if name in INTEGER_MEMBERS:
            if v.dtype.kind not in "biu":
                raise bad(f"engine.{k} has dtype {v.dtype}; it holds integers")
        elif not _float64(v):  # (a float16 one loaded rounded, a bool one as 0/1)
            raise bad(f"engine.{k} has dtype {v.dtype}; the model's arrays are float64")
        elif not np.all(np.isfinite(v)):
            raise bad(f"engine.{k} holds NaN or infinity")
    if spec.form == "dual":
        if version >= 2:
            for k in DUAL_V2:
                if k not in state:
                    raise bad(f"member engine.{k} is missing")
        n_models = state.get("n_models")
        if n_models is None or n_models.shape != () or int(n_models) != K:
            raise bad(f"engine.n_models must be {K} (the classes' binary models)")
        try:
            check_state(spec, state)
        except ValueError as e:
            raise bad(str(e)) from None
        return
    shapes = {"mean": (K, d), "variance": (K, d)}
    if spec.form == "primal_full":
        shapes = {"mean": (K, d), "covariance": (K, d, d)}
    for k, shape in shapes.items():
        if k not in state:
            raise bad(f"member engine.{k} is missing")
        if state[k].shape != shape:
            raise bad(f"engine.{k} has shape {state[k].shape}; the parameters need {shape}")
        if not _float64(state[k]):
            raise bad(f"engine.{k} has dtype {state[k].dtype}; the model's arrays are float64")
    if spec.form == "primal_full":
        S = state["covariance"]
        diag = np.diagonal(S, axis1=1, axis2=2)
        if np.any(diag <= 0.0) or np.abs(S - S.transpose(0, 2, 1)).max() > 1e-10 * diag.max():
            raise bad("engine.covariance must be symmetric with a positive diagonal")
        for k in range(K):  # (a learnt covariance is positive definite, to rounding:
            try:  # a Cholesky factor after a shift of 1e-8 of its largest diagonal entry)
                cho_factor(S[k] + (1e-8 * diag[k].max()) * np.eye(d), check_finite=False)
            except LinAlgError:
                raise bad(f"engine.covariance of model {k} is not positive semi-definite") from None


def _float64(v: np.ndarray) -> bool:
    """Double precision in either byte order (a file written on a big-endian machine)."""
    return v.dtype.kind == "f" and v.dtype.itemsize == 8
