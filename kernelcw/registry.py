"""The one registry of kernelcw's algorithms: which names exist and how each becomes an estimator.

:data:`ALGORITHMS` maps each algorithm name (the command line's ``-a`` names) to its
estimator class, the constructor arguments that define it, the rule parameters an
option may set, a one-line summary and whether it is first-order; :func:`make`
builds the estimator for a name. The option lists the command line offers
(:func:`kernels`, :func:`budget_policies`, :func:`diag_methods`, :func:`solvers`,
:func:`modes`, :func:`covariances`) are read from the modules that own them.

Importing this module is cheap: estimator classes and option lists are looked up on
first use, so ``kernelcw --help`` does not import numba, scipy or scikit-learn.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field

from . import options

__all__ = [
    "ALGORITHMS",
    "DEFAULT_ALGORITHMS",
    "Algorithm",
    "budget_policies",
    "covariances",
    "diag_methods",
    "estimator_class",
    "kernels",
    "make",
    "modes",
    "solvers",
]

#: Where the estimator classes live (looked up by name, on first use).
ESTIMATORS_MODULE = "kernelcw.estimators"


@dataclass(frozen=True)
class Algorithm:
    """How one algorithm name maps to an estimator."""

    estimator: str  # class name in kernelcw.estimators
    fixed: dict = field(hash=False)  # constructor arguments that define this algorithm
    params: tuple[str, ...]  # the rule's own parameters the options may set
    summary: str
    first_order: bool = False  # keeps Sigma = a I: --covariance only changes the bookkeeping


#: Algorithm names, in the order ``kernelcw run -a all`` runs them.
ALGORITHMS: dict[str, Algorithm] = {
    "cw-stdev": Algorithm(
        "CWClassifier", {"rule": "stdev"}, ("eta",), "CW-Stdev, exact convex CW (NIPS 2008)"
    ),
    "cw-var": Algorithm(
        "CWClassifier", {"rule": "var"}, ("eta",), "CW-Var, the linearised CW (ICML 2008)"
    ),
    "scw1": Algorithm("SCWClassifier", {"variant": 1}, ("eta", "C"), "SCW-I, soft CW (ICML 2012)"),
    "scw2": Algorithm("SCWClassifier", {"variant": 2}, ("eta", "C"), "SCW-II, soft CW (ICML 2012)"),
    "arow": Algorithm("AROWClassifier", {}, ("r",), "AROW (NIPS 2009)"),
    "sop": Algorithm("SOPClassifier", {}, (), "the second-order perceptron (SIAM J. Comput. 2005)"),
    "pa": Algorithm(
        "PAClassifier", {"variant": 0}, (), "passive-aggressive PA (JMLR 2006)", first_order=True
    ),
    "pa1": Algorithm("PAClassifier", {"variant": 1}, ("C",), "PA-I", first_order=True),
    "pa2": Algorithm("PAClassifier", {"variant": 2}, ("C",), "PA-II", first_order=True),
    "perceptron": Algorithm("PerceptronClassifier", {}, (), "the Perceptron", first_order=True),
}

#: The algorithms ``kernelcw run`` compares when no ``-a`` is given.
DEFAULT_ALGORITHMS = ("cw-stdev", "cw-var", "scw1", "scw2", "arow", "pa1", "perceptron")


def estimator_class(name: str) -> type:
    """The estimator class of algorithm ``name`` (imports the estimators on first use)."""
    return getattr(importlib.import_module(ESTIMATORS_MODULE), _algorithm(name).estimator)


def make(name: str, **params):
    """The unfitted estimator for algorithm ``name``, with constructor arguments ``params``.

    ``params`` may hold any constructor argument except the ones that define the
    algorithm (e.g. ``variant`` of ``"scw1"``)::

        make("scw1", eta=0.8, C=0.5, kernel="rbf")  # SCWClassifier(variant=1, eta=0.8, ...)
    """
    alg = _algorithm(name)
    clash = sorted(set(alg.fixed) & set(params))
    if clash:
        raise TypeError(f"{name!r} fixes {', '.join(clash)}: they cannot be set")
    return estimator_class(name)(**alg.fixed, **params)


def _algorithm(name: str) -> Algorithm:
    try:
        return ALGORITHMS[name]
    except KeyError:
        raise KeyError(f"unknown algorithm {name!r}; choose from {', '.join(ALGORITHMS)}") from None


# ------------------------------------------------------------------ the library's option lists
# Read from kernelcw.options, which imports nothing heavy: ``kernelcw run --help`` lists
# them without loading numba, scipy or scikit-learn.


def kernels() -> tuple[str, ...]:
    """The kernels by name, "precomputed" included."""
    return options.KERNELS


def budget_policies() -> tuple[str, ...]:
    """The budget policies."""
    return options.POLICIES


def diag_methods() -> tuple[str, ...]:
    """How a diagonal covariance may be kept."""
    return tuple(options.DIAG_METHODS)


def solvers() -> tuple[str, ...]:
    """The dual solvers (``"cholesky"``, ``"explicit"``)."""
    return options.SOLVERS


def modes() -> tuple[str, ...]:
    """The engine modes (``"auto"``, ``"primal"``, ``"dual"``)."""
    return options.MODES


def covariances() -> tuple[str, ...]:
    """The covariance forms (``"full"``, ``"diag"``)."""
    return options.COVARIANCES
