"""Engines: the model forms behind one interface (:class:`Engine`).

- :mod:`.primal_full`: linear kernel, full covariance, learnt in blocks;
- :mod:`.primal_diag`: linear kernel, diagonal covariance (text);
- :mod:`.dual`: any kernel, over a support set, with or without a budget.

:func:`build_engine` makes the engine a :class:`kernelcw.spec.EngineSpec` names.
"""

from __future__ import annotations

from .base import Engine, LearnResult

__all__ = ["Engine", "LearnResult", "build_engine", "engine_class"]


def engine_class(form: str) -> type:
    """The engine class of a form (one of :data:`kernelcw.spec.FORMS`)."""
    if form == "primal_full":
        from .primal_full import PrimalFullEngine

        return PrimalFullEngine
    if form == "primal_diag":
        from .primal_diag import PrimalDiagEngine

        return PrimalDiagEngine
    if form == "dual":
        from .dual import DualEngine

        return DualEngine
    raise ValueError(f"unknown engine form {form!r}")


def build_engine(spec) -> Engine:
    """A fresh engine (the prior N(0, a I)) for ``spec``."""
    return engine_class(spec.form)(spec)
