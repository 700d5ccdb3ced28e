"""Tests of kernelcw/registry.py: the algorithm map, make() and the option lists."""

from __future__ import annotations

import subprocess
import sys

import pytest

import kernelcw.budget
import kernelcw.estimators
import kernelcw.kernels
import kernelcw.rules
from kernelcw import registry
from kernelcw.registry import ALGORITHMS, DEFAULT_ALGORITHMS, make


def test_every_algorithm_builds_its_estimator_with_its_fixed_parameters():
    for name, alg in ALGORITHMS.items():
        est = make(name)
        assert type(est) is getattr(kernelcw.estimators, alg.estimator), name
        assert {k: est.get_params()[k] for k in alg.fixed} == alg.fixed, name
        assert set(alg.params) <= set(est.get_params()), name
    assert set(DEFAULT_ALGORITHMS) <= set(ALGORITHMS)


def test_make_passes_parameters_and_refuses_the_fixed_ones():
    est = make("scw2", eta=0.8, C=0.5, kernel="rbf")
    assert est.get_params()["variant"] == 2
    assert (est.eta, est.C, est.kernel) == (0.8, 0.5, "rbf")
    with pytest.raises(TypeError, match="'scw1' fixes variant"):
        make("scw1", variant=2)
    with pytest.raises(KeyError, match="unknown algorithm 'scw3'"):
        make("scw3")


def test_option_lists_are_the_owning_modules_lists():
    """The registry reads them from kernelcw.options; the modules that use them agree."""
    assert registry.kernels() == tuple(kernelcw.kernels.KERNELS)
    assert registry.budget_policies() == tuple(kernelcw.budget.POLICIES)
    assert registry.diag_methods() == tuple(kernelcw.rules.DIAG_METHODS)
    from kernelcw.spec import COVARIANCES, MODES, SOLVERS

    assert registry.solvers() == tuple(SOLVERS)
    assert registry.modes() == tuple(MODES)
    assert registry.covariances() == tuple(COVARIANCES)


@pytest.mark.parametrize("argv", [["--help"], ["run", "--help"]])
def test_help_imports_nothing_heavy(argv):
    code = (
        "import contextlib, io, sys\n"
        "from kernelcw.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    assert main({argv!r}) == 0\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & "
        "{'numba', 'scipy', 'sklearn', 'matplotlib'}))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
