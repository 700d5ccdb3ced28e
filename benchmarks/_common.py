"""Shared pieces of the benchmark scripts: side-by-side timing and result files.

Machines here are shared and noisy, so every comparison is measured in one run,
the contenders interleaved (A, B, C, A, B, C, ...), and reported as ratios.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import platform
import shlex
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
RESULTS = PACKAGE_DIR / "results"

#: The command the runner (``python -m benchmarks NAME ...``) is executing, while it runs one.
_RUNNER_COMMAND: ContextVar[str | None] = ContextVar("benchmarks_runner_command", default=None)


def versions() -> str:
    """One markdown line with the library versions and the BLAS in use."""
    import numba
    import numpy
    import scipy
    import sklearn
    from threadpoolctl import threadpool_info

    blas = [
        f"{i.get('internal_api')} {i.get('version')} ({i.get('num_threads')} threads)"
        for i in threadpool_info()
        if i.get("user_api") == "blas"
    ]
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            names = [ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name")]
        cpu = f"{names[0]} x {len(names)}" if names else cpu
    except OSError:
        pass
    return (
        f"Python {platform.python_version()}, numpy {numpy.__version__}, "
        f"scipy {scipy.__version__}, numba {numba.__version__}, "
        f"scikit-learn {sklearn.__version__}; BLAS: "
        f"{', '.join(blas) or 'unknown'}; CPU: {cpu}"
    )


def interleaved(
    contenders: dict[str, Callable[[], object]], repeats: int, pause: float = 0.3
) -> dict[str, list[float]]:
    """Run each contender once per repeat, in turn; return the wall-clock seconds.

    ``pause`` seconds of idling separate the runs: numpy and scipy each bundle an
    OpenBLAS whose worker threads busy-wait for a while after a call, and on two
    cores the spinning threads of one library slowed the next contender's BLAS
    calls 2-3x (measured: AROW at d = 784 took 0.09-0.13 ms/round right after
    scipy's dsymv, 0.045 ms/round after a 0.3 s pause).
    """
    times: dict[str, list[float]] = {k: [] for k in contenders}
    for _ in range(repeats):
        for name, fn in contenders.items():
            time.sleep(pause)
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
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
    try:
        yield command
    finally:
        _RUNNER_COMMAND.reset(token)


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
