"""From an estimator's parameters to a validated engine specification.

The one place where parameters are checked and the engine chosen: the estimators
call :func:`check_params` / :func:`engine_spec` before any state changes, and the
command line calls the same functions to report bad options before any data work.
The one memory estimate (:meth:`EngineSpec.memory_bytes`) and the one limit
(:func:`check_memory`) live here too.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import numpy as np

from ._validation import check_option, check_positive, check_positive_int
from .budget import POLICIES
from .kernels import KERNELS, Kernel
from .options import COVARIANCES, MODES, SOLVERS
from .rules import DIAG_METHODS, FIRST_ORDER, RuleParams

__all__ = [
    "COUNT_MAX",
    "COVARIANCES",
    "DUAL_A_RANGE",
    "DUAL_BLOCK",
    "FORMS",
    "MODES",
    "SOLVERS",
    "EngineSpec",
    "check_memory",
    "check_params",
    "engine_spec",
    "memory_limit",
]

#: The engines: primal full covariance, primal diagonal, dual (kernel).
FORMS = ("primal_full", "primal_diag", "dual")
#: Inputs per block of the dual engine when ``block_size=None``.
DUAL_BLOCK = 256
#: Counters and sizes beyond this are not from a stream (and would overflow int64):
#: the bound a loaded state's counts are checked against.
COUNT_MAX = 2**62
#: The prior scales a the dual engine accepts: it forms a^2 k(x, z), which must stay well
#: inside float64's range (the primal engine takes any a > 0).
DUAL_A_RANGE = (1e-100, 1e100)


@dataclass
class EngineSpec:
    """Everything an engine needs to be built, validated.

    ``form`` is one of :data:`FORMS`; ``rule`` carries the prior scale ``a``.
    ``kernel`` is set for the dual form only; ``block_size=None`` lets the engine
    choose. ``seed`` drives the "random" budget policy. ``budget_batch`` (q): how
    many support vectors leave at once when an update takes a budgeted model past
    its budget (1: one per round; q > 1: the batch-pruned Cholesky form).
    ``intercept``: the value c of the constant feature that carries the intercept (0:
    none); the primal engines see it as a last column of X (``n_features`` counts
    it), the dual engine as ``c^2`` added to the kernel.
    """

    form: str
    rule: RuleParams
    n_features: int
    n_models: int
    block_size: int | None = None
    diag_method: str = "kl"
    kernel: Kernel | None = None
    solver: str = "cholesky"
    budget: int | None = None
    budget_policy: str = "project"
    seed: int = 0
    budget_batch: int = 1
    intercept: float = 0.0

    @property
    def a(self) -> float:
        return self.rule.a

    @property
    def projects(self) -> bool:
        """A budget with the "project" policy: the model learns with the jittered
        kernel (``PROJECT_JITTER``) and a leaver's weight goes to those kept."""
        return self.budget is not None and self.budget_policy == "project"

    @property
    def bound_form(self) -> str:
        """The :data:`DUAL_MEMORY` form a dual model keeps a binding budget in, as
        ``engines.dual.convert`` chooses it (``initial_form``, ``on_budget``; checked
        against the engine in tests/test_budget_memory.py): the explicit form for a
        first-order rule or solver "explicit", else the pruned form for q > 1, the
        queue for "oldest", the lazy form for "random", the explicit nu/Pi walk for
        "smallest" and "project"."""
        if self.rule.first_order or self.solver == "explicit":  # never a factor
            return "explicit"
        if self.budget_batch > 1:
            return "pruned-project" if self.budget_policy == "project" else "pruned"
        return {"oldest": "queue", "random": "lazy"}.get(self.budget_policy, "explicit")

    def memory_bytes(self) -> int:
        """The memory a model needs at most (the primal forms' whole size): K d^2
        doubles for full covariances, 2 K d for diagonal ones, and for the dual form,
        if bounded, ``(c K + p) B^2`` doubles: c B^2 kept per model (factor or nu/Pi,
        Gram caches, the spare a call's rollback copies into) and p B^2 of one call's
        temporaries, by the form the budget binds into (:data:`DUAL_MEMORY`), plus a
        block's worth (``8 K B b + 16 b^2``, which dominates only at small budgets)."""
        K, d = self.n_models, self.n_features
        if self.form == "primal_full":
            return K * d * d * 8 + K * d * 8
        if self.form == "primal_diag":
            return 2 * K * d * 8
        B = self.budget or 0
        kept, call = DUAL_MEMORY[self.bound_form]
        b = self.block_size or DUAL_BLOCK  # a block's kernel rows and b x b work arrays
        return int((kept * K + call) * B * B * 8 + (8 * K * B * b + 16 * b * b) * 8)


#: (kept per model, one call's peak) in B^2 doubles for each form a binding budget
#: leaves a dual model in: engine.nbytes after the budget bound, and tracemalloc's
#: peak over a call of 300 rounds, at B = 300 (AROW, RBF, every round updating),
#: rounded up (tests/test_budget_memory.py checks them at B = 150).
DUAL_MEMORY = {
    "queue": (6.0, 9.5),  # "oldest": blocks and their rollback copies
    "lazy": (3.0, 3.0),  # "random"
    "explicit": (3.2, 3.0),  # "smallest", "project" (Pi, the inverse Gram matrix, G)
    "pruned": (2.2, 5.5),  # budget_batch > 1
    "pruned-project": (3.2, 8.5),
}


def memory_limit() -> int | None:
    """Half of this machine's physical memory (None where it cannot be read)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2
    except (ValueError, OSError, AttributeError):  # pragma: no cover
        return None


def check_memory(spec: EngineSpec) -> None:
    """ValueError if the state would need more than :func:`memory_limit`."""
    limit = memory_limit()
    need = spec.memory_bytes()
    if limit is None or need <= limit:
        return
    if spec.form == "primal_full":
        raise ValueError(
            f"covariance='full' needs {need / 2**30:.1f} GiB for {spec.n_models} model(s) "
            f"with {spec.n_features} features, more than half of this machine's memory; use "
            "covariance='diag' for high-dimensional (e.g. text) data"
        )
    if spec.form == "dual" and spec.budget:  # (the state is sized for the budget)
        raise ValueError(
            f"budget={spec.budget} needs {need / 2**30:.1f} GiB when the model holds that "
            "many support vectors, more than half of this machine's memory; lower the "
            "budget (a stream of n rows never holds more than n)"
        )
    raise ValueError(  # pragma: no cover - a billion features
        f"this model needs {need / 2**30:.1f} GiB, more than half of this machine's memory"
    )


def _check_batch(est, rule: RuleParams) -> None:
    """``budget_batch``: an integer in [1, budget]; q > 1 only where it is built."""
    q = est.budget_batch
    check_positive_int("budget_batch", q, allow_none=False)
    if q == 1:
        return
    if est.budget is not None and q > est.budget:
        raise ValueError(f"budget_batch={q!r} must be at most budget={est.budget!r}")
    if est.solver != "cholesky":
        raise ValueError(
            f"budget_batch={q!r} > 1 needs solver='cholesky' (the explicit nu/Pi form "
            "prunes one support vector per round)"
        )
    if rule.rule in FIRST_ORDER:
        raise ValueError(
            f"budget_batch={q!r} > 1 needs a second-order rule (a first-order one keeps "
            "no factor to prune several at once from: it prunes one per round)"
        )


def check_params(est) -> tuple[RuleParams, str]:
    """Validate every parameter of a kernelcw estimator; return its rule (with ``a``)
    and the engine form that will learn (one of :data:`FORMS`).

    Nothing depends on data here, so the command line can call it before loading
    any; the feature count enters in :func:`engine_spec`.
    """
    rule = est._rule_params()
    a = check_positive("a", est.a)
    rule = rule._replace(a=a)
    if not callable(est.kernel):
        check_option("kernel", est.kernel, KERNELS)
    check_option("mode", est.mode, MODES)
    check_option("solver", est.solver, SOLVERS)
    check_positive_int("block_size", est.block_size, allow_none=True)
    check_option("covariance", est.covariance, COVARIANCES)
    check_option("diag_method", est.diag_method, tuple(DIAG_METHODS))
    check_positive_int("n_iter", est.n_iter, allow_none=False)
    if not isinstance(est.shuffle, bool | np.bool_):
        raise ValueError(f"shuffle={est.shuffle!r} must be True or False")
    _check_intercept(est, a)
    check_positive_int("budget", est.budget, allow_none=True)
    check_option("budget_policy", est.budget_policy, POLICIES)
    _check_batch(est, rule)
    # gamma, degree and coef0 are checked whatever the kernel, as scikit-learn's SVC does
    Kernel(est.kernel, est.gamma, est.degree, est.coef0, 1)
    linear = isinstance(est.kernel, str) and est.kernel == "linear"
    if est.mode == "primal" and not linear:
        raise ValueError(
            f"mode='primal' needs kernel='linear' (got kernel={est.kernel!r}): a "
            "non-linear kernel is learned in the dual; use mode='auto' or 'dual'"
        )
    if est.mode == "primal" and est.budget is not None:
        raise ValueError(
            "a budget bounds the support set of the dual engine: use mode='auto' or "
            "'dual' (the primal engine keeps no support vectors)"
        )
    dual = est.mode == "dual" or not linear or est.budget is not None
    if dual and not DUAL_A_RANGE[0] <= a <= DUAL_A_RANGE[1]:
        raise ValueError(
            f"a={est.a!r} is outside [{DUAL_A_RANGE[0]:g}, {DUAL_A_RANGE[1]:g}], the range "
            "the dual engine supports (it works with a^2 k(x, z)); rescale the kernel or "
            "X instead (CW-Stdev's predictions do not depend on a; for the other rules a "
            "change of a is a change of eta, C or r)"
        )
    if dual and est.covariance == "diag" and rule.rule not in FIRST_ORDER:
        raise ValueError(
            "covariance='diag' exists only in the primal mode: the dual engine keeps "
            "the full covariance in the kernel's feature space (use covariance='full')"
        )
    if dual:
        return rule, "dual"
    return rule, "primal_full" if est.covariance == "full" else "primal_diag"


def inert_parameters(params: dict, form: str) -> frozenset:
    """The structural parameters (``kernelcw.estimators._base.STRUCTURAL``) that cannot
    reach the state of a model of engine ``form`` that began with ``params`` (values by
    name): a kernel's gamma, degree and coef0 where its kernel does not read them, the
    budget's policy and batch without a budget, ``diag_method`` outside the diagonal
    engine, ``solver`` outside the dual one, the dual engine's ``covariance`` (a
    second-order rule needs "full" there, which its checks say) and
    ``intercept_scaling`` without an intercept. ``set_params`` may change these
    between ``partial_fit`` calls: the model is the same."""
    kernel = params["kernel"]
    named = kernel if isinstance(kernel, str) else None
    dual = form == "dual"
    inert = set()
    if not (dual and named in ("rbf", "poly", "laplacian")):
        inert.add("gamma")
    if not (dual and named == "poly"):
        inert.update(("degree", "coef0"))
    if not (dual and params["budget"] is not None):
        inert.update(("budget_policy", "budget_batch"))
    if form != "primal_diag":
        inert.add("diag_method")
    if dual:
        inert.add("covariance")
    else:
        inert.add("solver")
    if not params["fit_intercept"]:
        inert.add("intercept_scaling")
    return frozenset(inert)


def _check_intercept(est, a: float) -> None:
    if not isinstance(est.fit_intercept, bool | np.bool_):
        raise ValueError(f"fit_intercept={est.fit_intercept!r} must be True or False")
    c = check_positive("intercept_scaling", est.intercept_scaling)
    if est.fit_intercept and not math.isfinite(a * c * c):  # (an error named X otherwise)
        raise ValueError(
            f"intercept_scaling={est.intercept_scaling!r} is too large for a={est.a!r}: the "
            "intercept's prior variance a * intercept_scaling^2 overflows float64"
        )


def intercept_value(est) -> float:
    """The constant feature's value c (0 without an intercept)."""
    return float(est.intercept_scaling) if est.fit_intercept else 0.0


def engine_spec(
    est, n_features: int, n_classes: int, checked: tuple[RuleParams, str] | None = None
) -> EngineSpec:
    """The specification of the engine ``est`` learns with, for ``n_features`` inputs
    and ``n_classes`` labels. ``checked``: what :func:`check_params` returned, when the
    caller has it already (nothing is validated twice)."""
    rule, form = check_params(est) if checked is None else checked
    K = 1 if n_classes <= 2 else n_classes
    c = intercept_value(est)
    spec = EngineSpec(
        form=form,
        rule=rule,
        n_features=int(n_features) + (1 if c and form != "dual" else 0),
        n_models=K,
        block_size=est.block_size,
        diag_method=est.diag_method,
        intercept=c,
    )
    if form == "dual":
        from sklearn.utils import check_random_state

        spec.kernel = Kernel(est.kernel, est.gamma, est.degree, est.coef0, n_features, c * c)
        spec.block_size = DUAL_BLOCK if est.block_size is None else est.block_size
        spec.solver = est.solver
        spec.budget = est.budget
        spec.budget_policy = est.budget_policy
        spec.budget_batch = int(est.budget_batch)
        spec.seed = int(check_random_state(est.random_state).randint(0, 2**62))
    return spec
