"""kernelcw: online confidence-weighted learning in primal and dual (kernel) form.

Estimators follow scikit-learn's API; :func:`run_online` runs the papers'
online protocol (predict each example, then learn from it).

The public names load on first use (PEP 562), so ``kernelcw --help`` does not
pay for importing numba, scipy and scikit-learn.
"""

import importlib as _importlib

__version__ = "0.1.0"  # the one version number: pyproject.toml reads this literal statically

_PUBLIC = {
    "AROWClassifier": "estimators",
    "CWClassifier": "estimators",
    "PAClassifier": "estimators",
    "PerceptronClassifier": "estimators",
    "SCWClassifier": "estimators",
    "SOPClassifier": "estimators",
    "primal_from_dual": "estimators",
    "config_context": "_threads",
    "get_config": "_threads",
    "set_config": "_threads",
    "combine": "combination",
    "OnlineResult": "online",
    "run_online": "online",
    "load": "persistence",
    "save": "persistence",
}

__all__ = sorted(_PUBLIC)


def __getattr__(name: str):
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'kernelcw' has no attribute {name!r}")
    value = getattr(_importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({k for k in globals() if not k.startswith("_")} | set(_PUBLIC) | {"__version__"})
