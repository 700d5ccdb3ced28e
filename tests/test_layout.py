"""The package's shape, checked: one job per module, no calls back up into a caller.

The layers, lowest first; a module may import from its own layer's package and from
layers below it, never from a layer above (estimator -> engine -> compiled loop, and
back only through return values). The size limits keep modules and functions
readable: a module states its job in its opening docstring, stays under about 500
lines, its functions under about 120, and a compiled loop takes at most about 12
parameters (records of arrays instead of long positional lists).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "kernelcw"

#: Lowest first. A module's layer is its first dotted part below ``kernelcw``.
LAYERS = [
    {"options", "_validation", "_interrupt", "_atomic", "_symloops"},
    {"rules", "kernels", "_blas", "_cholupdate", "_threads"},
    {"budget"},
    {"spec"},
    {"engines"},
    {"estimators"},
    {
        "online",
        "registry",
        "datasets",
        "grow",
        "river",
        "_diag_stream",
        "_river_input",
        "persistence",
        "_saved_values",
        "combination",
        "_combine_checks",
    },
    {"distributed"},
    {"cli", "__main__"},
]
MAX_MODULE_LINES = 520
MAX_FUNCTION_LINES = 125
MAX_JIT_PARAMETERS = 12


def _layer(part: str) -> int:
    for i, names in enumerate(LAYERS):
        if part in names:
            return i
    raise AssertionError(f"kernelcw.{part} is in no layer of tests/test_layout.py: add it")


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def _name(path: Path) -> str:
    return ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)


def _imports(path: Path) -> list[str]:
    """The kernelcw modules ``path`` imports (absolute dotted names)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    here = _name(path).split(".")
    package = here[:-1]  # what a level-1 relative import names (for __init__: the package)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
                names = [f"{mod}.{a.name}" for a in node.names] if not node.module else [mod]
            else:
                names = [node.module or ""]
            out += names
        elif isinstance(node, ast.Import):
            out += [a.name for a in node.names]
    return [n for n in out if n == "kernelcw" or n.startswith("kernelcw.")]


MODULES = _modules()


@pytest.mark.parametrize("path", MODULES, ids=_name)
def test_no_import_from_a_layer_above(path):
    parts = _name(path).split(".")
    if parts[1] == "__init__":  # kernelcw/__init__.py re-exports the public names, lazily
        return
    mine = _layer(parts[1])
    for target in _imports(path):
        tparts = target.split(".")
        if len(tparts) < 2 or tparts[1] == parts[1] or tparts[1].startswith("__"):
            continue  # the package root (e.g. __version__) or its own layer package
        assert _layer(tparts[1]) <= mine, (
            f"{_name(path)} imports {target}, a layer above it: data flows estimator -> "
            "engine -> compiled loop, and back only through return values"
        )


@pytest.mark.parametrize("path", MODULES, ids=_name)
def test_module_states_its_job_and_stays_small(path):
    text = path.read_text(encoding="utf-8")
    tree = ast.parse(text)
    if path.name != "__main__.py":
        assert ast.get_docstring(tree), f"{_name(path)} has no opening docstring saying its job"
    n = len(text.splitlines())
    assert n <= MAX_MODULE_LINES, f"{_name(path)} has {n} lines (at most ~500)"


def _is_jit(fn: ast.FunctionDef) -> bool:
    for dec in fn.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        if isinstance(target, ast.Name) and target.id in ("njit", "jit"):
            return True
        if isinstance(target, ast.Attribute) and target.attr in ("njit", "jit"):
            return True
    return False


@pytest.mark.parametrize("path", MODULES, ids=_name)
def test_functions_stay_small(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        length = node.end_lineno - node.lineno + 1
        assert length <= MAX_FUNCTION_LINES, (
            f"{_name(path)}.{node.name} has {length} lines (at most ~120)"
        )
        if _is_jit(node):
            n = len(node.args.args)
            assert n <= MAX_JIT_PARAMETERS, (
                f"compiled loop {_name(path)}.{node.name} takes {n} parameters (at most "
                f"~{MAX_JIT_PARAMETERS}: pass records of arrays)"
            )
