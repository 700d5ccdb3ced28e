"""The scripts in examples/ run and print what their docstrings promise.

Each script's ``main(argv)`` runs in this process with small arguments, and the
tests check what it printed (and returned). Each script also runs as
``__main__`` with command-line arguments, and one in a fresh process, as
``python examples/<name>.py``.
"""

from __future__ import annotations

import importlib.util
import os
import re
import runpy
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.shipped_defaults  # what a user gets (tests/conftest.py)

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def load(name: str):
    """The example script as a module (examples/ is not a package)."""
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_examples_are_these_four_each_with_a_docstring_and_a_main():
    names = sorted(p.stem for p in EXAMPLES.glob("*.py"))
    assert names == ["budgeted_stream", "dual_primal_equivalence", "rbf_nonlinear", "text_diagonal"]
    for name in names:
        module = load(name)
        assert f"python examples/{name}.py" in module.__doc__
        assert callable(module.main)
        assert 'if __name__ == "__main__":' in (EXAMPLES / f"{name}.py").read_text()


def test_rbf_nonlinear_beats_linear_and_writes_the_figure(tmp_path, monkeypatch, capsys):
    import matplotlib.image

    monkeypatch.chdir(tmp_path)  # the default output goes to the current directory
    res = load("rbf_nonlinear").main([])  # the defaults: 1000 points of two moons
    out = capsys.readouterr().out
    rbf = float(re.search(r"^SCW-I, RBF \(gamma=1\)\s+([\d.]+)\s+(\d+)$", out, re.M).group(1))
    lin = float(re.search(r"^SCW-I, linear\s+([\d.]+)\s+-$", out, re.M).group(1))
    assert (rbf, lin) == (round(res["accuracy_rbf"], 3), round(res["accuracy_linear"], 3))
    assert rbf >= 0.9, out
    assert rbf >= lin + 0.05, out  # two moons are not linearly separable
    # the README's figures are these defaults' (they once quoted a run without intercept)
    assert f"(test accuracy {rbf:.3f} against {lin:.3f})" in _readme_examples()
    png = tmp_path / "rbf_nonlinear.png"
    assert res["figure"] == Path("rbf_nonlinear.png") and f"figure: {res['figure']}" in out
    assert png.stat().st_size > 10_000
    img = matplotlib.image.imread(png)
    assert img.shape[:2] == (460, 1500)  # 15 x 4.6 inches at 100 dpi: three panels
    assert img[..., :3].std() > 0.1  # not a blank canvas


def test_rbf_nonlinear_without_matplotlib_names_the_plot_extra(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` fails
    with pytest.raises(SystemExit) as exc:
        load("rbf_nonlinear").main([])
    assert 'pip install "kernelcw[plot]"' in str(exc.value.code)
    assert capsys.readouterr().out == ""  # it stops before training
    assert list(tmp_path.iterdir()) == []


def test_rbf_nonlinear_circles(tmp_path, capsys):
    out_png = tmp_path / "sub" / "circles.png"
    out_png.parent.mkdir()
    res = load("rbf_nonlinear").main(
        ["--data", "circles", "--n-samples", "300", "--output", str(out_png)]
    )
    assert res["accuracy_rbf"] >= 0.95
    assert res["accuracy_linear"] <= 0.75  # concentric circles: no line separates them
    assert out_png.stat().st_size > 10_000


@pytest.mark.parametrize("solver", ["cholesky", "explicit"])
def test_dual_primal_equivalence_prints_tiny_differences(capsys, solver):
    res = load("dual_primal_equivalence").main(["--n-samples", "200", "--solver", solver])
    out = capsys.readouterr().out
    rows = re.findall(
        r"^(\S+)\s+([\d.e+-]+)\s+([\d.e+-]+)\s+(\d+)\s+(\d+)/(\d+)\s+(True|False)$", out, re.M
    )
    assert [r[0] for r in rows] == ["CW-Stdev", "CW-Var", "SCW-I", "SCW-II", "AROW"]
    for name, mu, sigma, n_sv, mis_p, mis_d, same in rows:
        assert float(mu) < 1e-9 and float(sigma) < 1e-9, (name, mu, sigma)
        assert res[name]["mu"] < 1e-9 and res[name]["sigma"] < 1e-9
        assert mis_p == mis_d and same == "True", name
        got = (res[name]["mistakes_primal"], res[name]["mistakes_dual"])
        assert got == (int(mis_p), int(mis_d))
        assert int(n_sv) > 0


def _readme_examples() -> str:
    """The README's "Examples" section, its lines joined (a figure may wrap)."""
    text = (EXAMPLES.parent / "README.md").read_text()
    section = re.search(r"\n## Examples\n(.*?)\n## ", text, re.S).group(1)
    return " ".join(section.split())


def test_budgeted_stream_defaults_print_the_readme_support_count(capsys):
    """The README quotes the unbudgeted model's support vectors at the script's defaults
    (20,000 rounds): that count, from the default run (a few seconds)."""
    res = load("budgeted_stream").main([])
    n = res["unbudgeted"][-1]["n_support"]
    assert all(r["n_support"] == 200 for r in res["budgeted"])
    assert f"grows to {n:,} support vectors" in _readme_examples()
    capsys.readouterr()


def test_budgeted_stream_stays_within_the_budget_in_flat_memory(capsys):
    budget = 50
    res = load("budgeted_stream").main(
        ["--n-rounds", "3000", "--chunk", "200", "--budget", str(budget)]
    )
    out = capsys.readouterr().out
    printed = [int(m) for m in re.findall(r"^\s+\d+\s+[\d.]+\s+[\d.]+\s+(\d+)\s", out, re.M)]
    rows_b, rows_u = res["budgeted"], res["unbudgeted"]
    assert len(rows_b) == len(rows_u) == 15
    assert printed == [r["n_support"] for r in rows_b + rows_u]
    # Bound at the end of every chunk, and binding from the first chunk on.
    assert all(r["n_support"] == budget for r in rows_b)
    assert rows_u[-1]["n_support"] > 10 * budget
    assert f"unbudgeted: n_support_ = {rows_u[-1]['n_support']}" in out
    # It learns the checkerboard: far better than chance (the labels are 5% noise).
    assert rows_b[-1]["mistake_rate"] < 0.2
    assert np.mean([r["chunk_mistake_rate"] for r in rows_b[-5:]]) < 0.15
    assert [r["rounds"] for r in rows_b] == list(range(200, 3001, 200))


def _same_kernelcw(**extra) -> dict:
    """The environment of a script run in a process of its own that imports the
    kernelcw under test, as this session does: a script's own folder comes first on
    its path, so in a fresh install (CI) it imported the installed copy, whose numba
    cache was still empty, and compiled what it runs again (27 against 2 s)."""
    import kernelcw

    root = str(Path(kernelcw.__file__).resolve().parents[1])
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, **extra}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
def test_budgeted_stream_memory_is_flat_in_a_fresh_process():
    """Resident memory as the script prints it, in a process of its own: inside the
    test session the allocator reuses memory freed by earlier tests, and the
    unbudgeted model's growth can hide in it."""
    proc = subprocess.run(
        [
            sys.executable,
            str(EXAMPLES / "budgeted_stream.py"),
            "--n-rounds",
            "3000",
            "--chunk",
            "500",
            "--budget",
            "50",
        ],
        env=_same_kernelcw(),
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    rows = re.findall(r"^\s+\d+\s+[\d.]+\s+[\d.]+\s+(\d+)\s+([\d.]+)$", proc.stdout, re.M)
    assert len(rows) == 12, proc.stdout
    rss_b = [float(r[1]) for r in rows[:6]]
    rss_u = [float(r[1]) for r in rows[6:]]
    assert all(int(r[0]) == 50 for r in rows[:6])
    assert rss_b[-1] - rss_b[0] < 4.0, rss_b  # flat once the budget binds
    assert rss_u[-1] - rss_u[0] > rss_b[-1] - rss_b[0] + 2.0, (rss_b, rss_u)


def test_budgeted_stream_one_round_per_call_never_exceeds_the_budget(capsys):
    res = load("budgeted_stream").main(
        ["--n-rounds", "300", "--chunk", "1", "--budget", "20", "--no-unbudgeted"]
    )
    n_sv = [r["n_support"] for r in res["budgeted"]]
    assert len(n_sv) == 300 and max(n_sv) == 20
    full = n_sv.index(20)
    assert all(b - a in (0, 1) for a, b in zip(n_sv[:full], n_sv[1 : full + 1], strict=True))
    assert n_sv[full:] == [20] * (300 - full)  # once full, it stays full
    assert "budgeted:   n_support_ at most 20 (budget 20)" in capsys.readouterr().out


def test_budgeted_stream_without_proc_prints_na(capsys):
    module = load("budgeted_stream")

    def no_proc(*args, **kwargs):
        raise FileNotFoundError("/proc/self/status")

    module.open = no_proc  # as on a system without /proc; module globals shadow builtins
    res = module.main(["--n-rounds", "400", "--chunk", "200", "--budget", "30", "--no-unbudgeted"])
    out = capsys.readouterr().out
    assert [r["rss_mib"] for r in res["budgeted"]] == [None, None]
    assert "unbudgeted" not in res
    assert len(re.findall(r"\sn/a$", out, re.M)) == 2
    assert "resident memory not available on this system" in out


def test_text_diagonal_learns_the_topic_words(capsys):
    module = load("text_diagonal")
    res = module.main(["--n-train", "1000", "--n-test", "500"])
    out = capsys.readouterr().out
    acc = float(re.search(r"one pass\s+([\d.]+)$", out, re.M).group(1))
    assert acc == round(res["accuracy_cw"], 3) and acc >= 0.8, out
    assert res["accuracy_sgd"] >= 0.75
    for cls, top in res["top_words"].items():
        assert len(top) == 10
        on_topic = [word for word, *_ in top if word in module.TOPICS[cls]]
        assert len(on_topic) >= 8, (cls, top)
        sign = 1.0 if cls == "pc" else -1.0  # classes_ == ["mac", "pc"]
        assert all(sign * m > 0 and 0 < v < 1.0 for _, m, v, _ in top), top
        assert re.search(rf"^{re.escape(top[0][0])}\s+{top[0][1]:.3f}\s", out, re.M)
    # Confidence grows with frequency: the median variance falls band by band.
    medians = list(res["median_variance"].values())
    assert len(medians) == 4 and medians == sorted(medians, reverse=True)
    assert medians[0] > 0.95 and medians[-1] < 0.5


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("rbf_nonlinear", ["--n-samples", "200"]),
        ("dual_primal_equivalence", ["--n-samples", "150"]),
        ("budgeted_stream", ["--n-rounds", "600", "--chunk", "300", "--budget", "40"]),
        ("text_diagonal", ["--n-train", "400", "--n-test", "200", "--top", "3"]),
    ],
)
def test_example_runs_as_main_with_command_line_arguments(
    tmp_path, monkeypatch, capsys, name, args
):
    """`if __name__ == "__main__"` calls main(), which reads sys.argv."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", [f"examples/{name}.py", *args])
    runpy.run_path(str(EXAMPLES / f"{name}.py"), run_name="__main__")
    assert capsys.readouterr().out.strip()
    written = sorted(p.name for p in tmp_path.iterdir())
    assert written == (["rbf_nonlinear.png"] if name == "rbf_nonlinear" else [])


def test_example_runs_in_a_fresh_process(tmp_path):
    """`python examples/rbf_nonlinear.py` as its docstring says, MPLBACKEND=Agg."""
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / "rbf_nonlinear.py"), "--n-samples", "200"],
        cwd=tmp_path,
        env=_same_kernelcw(MPLBACKEND="Agg"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"^SCW-I, RBF \(gamma=1\)\s+[\d.]+\s+\d+$", proc.stdout, re.M)
    assert (tmp_path / "rbf_nonlinear.png").stat().st_size > 10_000
