"""Shared pieces of the benchmark scripts: side-by-side timing and result files.

Machines here are shared and noisy, so every comparison is measured in one run,
the contenders interleaved (A, B, C, A, B, C, ...), and reported as ratios.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import platform
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
RESULTS = PACKAGE_DIR / "results"

#: The papers' learners have no bias term. Their reproductions (nips2008, jmlr2012,
#: the text benchmarks and combination's Fig. 6) and the comparison with LIBOL's
#: implementations of the same updates pass this; kernelcw's default is True.
PAPERS = {"fit_intercept": False}

#: The command the runner (``python -m benchmarks NAME ...``) is executing, while it runs one.
_RUNNER_COMMAND: ContextVar[str | None] = ContextVar("benchmarks_runner_command", default=None)
#: ``python -m benchmarks NAME``: the program name argparse shows, while the runner runs NAME.
_RUNNER_PROG: ContextVar[str | None] = ContextVar("benchmarks_runner_prog", default=None)


def _git_commit() -> str:
    """``commit abc1234`` of the checkout the benchmark ran from, ``+ local changes`` when its
    code (kernelcw/, benchmarks/ but their results, pyproject.toml) differs from it; ``no git
    checkout`` outside one."""
    root = PACKAGE_DIR.parent
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            [
                "git",
                "status",
                "--porcelain",
                "--untracked-files=no",
                "--",
                "kernelcw",
                "benchmarks",
                "pyproject.toml",
                ":(exclude)benchmarks/results",
            ],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "no git checkout"
    return f"commit {head}" + (" + local changes" if dirty else "")


#: Read once, when the benchmark starts: the code that ran, not what the tree holds at its end.
_COMMIT_AT_START = _git_commit()


def _blas_owner(path: str) -> str:
    """Which package bundles the BLAS at ``path`` (numpy and scipy wheels each ship one)."""
    for name in ("numpy", "scipy"):
        if f"{name}.libs" in path or f"/{name}/" in path:
            return name
    return Path(path).name or "?"


def versions() -> str:
    """One markdown line: kernelcw's version and commit, the library versions, the BLAS in use
    (and whose it is) and the CPU."""
    import numba
    import numpy
    import scipy
    import sklearn
    import tqdm
    from threadpoolctl import threadpool_info

    import kernelcw

    blas = [
        f"{_blas_owner(i.get('filepath', ''))}: {i.get('internal_api')} {i.get('version')} "
        f"({i.get('num_threads')} threads)"
        for i in threadpool_info()
        if i.get("user_api") == "blas"
    ]
    try:  # optional (the plot and bench extras): the benchmarks that do not plot run without it
        import matplotlib

        mpl = matplotlib.__version__
    except ImportError:
        mpl = "not installed"
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            names = [ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name")]
        cpu = f"{names[0]} x {len(names)}" if names else cpu
    except OSError:
        pass
    return (
        f"kernelcw {kernelcw.__version__} ({_COMMIT_AT_START}); "
        f"Python {platform.python_version()}, numpy {numpy.__version__}, "
        f"scipy {scipy.__version__}, numba {numba.__version__}, "
        f"scikit-learn {sklearn.__version__}, matplotlib {mpl}, "
        f"tqdm {tqdm.__version__}; BLAS: "
        f"{', '.join(blas) or 'unknown'}; CPU: {cpu}"
    )


#: How to get matplotlib, which kernelcw itself does not require (its ``bench`` extra has it).
PLOT_INSTALL = 'pip install "kernelcw[bench]"'


def require_matplotlib(prog: str | None, hint: str = "") -> None:
    """Exit with a one-line message naming the extra to install when matplotlib is missing.

    The benchmarks that plot call it before any work, so a missing matplotlib costs no
    run; ``hint`` adds another way out (such as an option that skips the plot)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise SystemExit(
            f"{prog or 'benchmarks'}: plotting needs matplotlib, which is not installed; "
            f"install it with: {PLOT_INSTALL}{hint}"
        ) from None


def pyplot():
    """``matplotlib.pyplot`` on the Agg backend (files only, no GUI), or the message of
    :func:`require_matplotlib`."""
    require_matplotlib(None)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def progress(iterable=None, *, total: int | None = None, desc: str, unit: str = "it"):
    """A tqdm progress bar on stderr (every benchmark shows one while it runs); it is updated
    between timed sections only, never inside one."""
    from tqdm.auto import tqdm

    return tqdm(iterable, total=total, desc=desc, unit=unit)


def interleaved(
    contenders: dict[str, Callable[[], object]],
    repeats: int,
    pause: float = 0.3,
    desc: str = "timing",
) -> dict[str, list[float]]:
    """Run each contender once per repeat, in turn; return the wall-clock seconds.

    ``pause`` seconds of idling separate the runs: numpy and scipy each bundle an
    OpenBLAS whose worker threads busy-wait for a while after a call, and on two
    cores the spinning threads of one library slowed the next contender's BLAS
    calls 2-3x (measured: AROW at d = 784 took 0.09-0.13 ms/round right after
    scipy's dsymv, 0.045 ms/round after a 0.3 s pause).
    """
    times: dict[str, list[float]] = {k: [] for k in contenders}
    with progress(total=repeats * len(contenders), desc=desc, unit="run") as bar:
        for _ in range(repeats):
            for name, fn in contenders.items():
                time.sleep(pause)
                t0 = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - t0)
                bar.update(1)
    return times


def median(xs: list[float]) -> float:
    return statistics.median(xs)


def command_line() -> str:
    """The command that started this benchmark, as the user typed it.

    Through the runner this is ``python -m benchmarks NAME ARGS`` (the runner
    says so with :func:`runner_command`); run directly it is
    ``python -m benchmarks.bench_NAME ARGS``, read off ``sys.argv``. A script
    outside this package is recorded as ``python SCRIPT ARGS``.
    """
    recorded = _RUNNER_COMMAND.get()
    if recorded is not None:
        return recorded
    script, args = sys.argv[0], sys.argv[1:]
    path = Path(script)
    if path.suffix == ".py" and path.resolve().parent == PACKAGE_DIR:
        module = "benchmarks" if path.stem == "__main__" else f"benchmarks.{path.stem}"
        return shlex.join(["python", "-m", module, *args])
    return shlex.join(["python", script, *args])


@contextlib.contextmanager
def runner_command(name: str, args: Sequence[str]) -> Iterator[str]:
    """Within this block, :func:`command_line` is ``python -m benchmarks NAME ARGS``."""
    command = shlex.join(["python", "-m", "benchmarks", name, *args])
    token = _RUNNER_COMMAND.set(command)
    prog = _RUNNER_PROG.set(f"python -m benchmarks {name}")
    try:
        yield command
    finally:
        _RUNNER_PROG.reset(prog)
        _RUNNER_COMMAND.reset(token)


def argument_parser(doc: str | None) -> argparse.ArgumentParser:
    """The benchmark's argument parser: its description is the docstring's first paragraph
    (the summary the runner lists) and, through the runner, its usage line reads
    ``python -m benchmarks NAME``."""
    paragraph = (doc or "").strip().split("\n\n", 1)[0]
    return argparse.ArgumentParser(prog=_RUNNER_PROG.get(), description=" ".join(paragraph.split()))


def write_result(name: str, title: str, body: str) -> Path:
    """Write ``results/<name>.md`` with the command and versions that produced it."""
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.md"
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    text = (
        f"# {title}\n\n"
        f"Produced by `{command_line()}` on {stamp}.\n\n"
        f"{versions()}\n\n{body.rstrip()}\n"
    )
    path.write_text(text)
    return path


def md_table(header: list[str], rows: list[list[object]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)
