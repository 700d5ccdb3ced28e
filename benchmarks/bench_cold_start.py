"""Cold start: ``import kernelcw`` plus the first ``fit``, numba compilation included,
and the whole default ``kernelcw run`` (linear and RBF learners on the built-in moons).

Each measurement is a fresh Python process. "first run" points numba's cache at
an empty directory (what a new install sees once); "cached" runs again with the
cache the first run wrote (``cache=True`` on the compiled functions).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

from ._common import argument_parser, md_table, median, progress, write_result

SNIPPET = r"""
import time, json
t0 = time.perf_counter()
import numpy as np
import kernelcw
t1 = time.perf_counter()
rng = np.random.default_rng(0)
X = rng.normal(size=(200, 20)); y = (X[:, 0] > 0).astype(int)
est = {est}
est.fit({X}, y)
t2 = time.perf_counter()
est.fit({X}, y)
t3 = time.perf_counter()
print(json.dumps({{"import": t1 - t0, "first_fit": t2 - t1, "second_fit": t3 - t2}}))
"""

CASES = {
    "CWClassifier() (full covariance)": ("kernelcw.CWClassifier()", "X"),
    "CWClassifier(covariance='diag'), sparse X": (
        "kernelcw.CWClassifier(covariance='diag')",
        "__import__('scipy.sparse').sparse.csr_matrix(X)",
    ),
    "PAClassifier()": ("kernelcw.PAClassifier()", "X"),
}


def measure(est: str, X: str, cache_dir: str) -> dict:
    env = dict(os.environ, NUMBA_CACHE_DIR=cache_dir)
    out = subprocess.run(
        [sys.executable, "-c", SNIPPET.format(est=est, X=X)],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


#: Command lines timed whole (wall clock of the process), as a user types them.
COMMANDS = {
    "kernelcw run (the default: scw1, arow, pa1, linear and rbf, on moons)": ["run"],
    "kernelcw run --dataset breast_cancer (seven linear learners)": [
        "run",
        "--dataset",
        "breast_cancer",
    ],
}


def measure_command(argv: list[str], cache_dir: str) -> float:
    """Seconds of ``python -m kernelcw ARGV`` in a fresh process with the numba cache there."""
    env = dict(os.environ, NUMBA_CACHE_DIR=cache_dir)
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "kernelcw", *argv, "--no-progress"],
        env=env,
        check=True,
        capture_output=True,
    )
    return time.perf_counter() - t0


def command_rows(repeats: int, bar) -> list[list[str]]:
    """Per command line: median seconds with an empty numba cache, then cached."""
    rows = []
    for name, argv in COMMANDS.items():
        first, cached = [], []
        for _ in range(repeats):
            with tempfile.TemporaryDirectory() as cache:
                first.append(measure_command(argv, cache))
                cached.append(measure_command(argv, cache))
            bar.update(1)
        rows.append([name, f"{median(first):.1f}", f"{median(cached):.1f}"])
    return rows


def main(argv=None):
    ap = argument_parser(__doc__)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    rows = []
    total = (len(CASES) + len(COMMANDS)) * args.repeats
    bar = progress(total=total, desc="cold_start", unit="process pair")
    for name, (est, X) in CASES.items():
        first, cached = [], []
        for _ in range(args.repeats):
            with tempfile.TemporaryDirectory() as cache:
                first.append(measure(est, X, cache))
                cached.append(measure(est, X, cache))
            bar.update(1)
        rows.append(
            [
                name,
                f"{median([r['import'] for r in first]):.2f}",
                f"{median([r['first_fit'] for r in first]):.2f}",
                f"{median([r['import'] + r['first_fit'] for r in cached]):.2f}",
                f"{median([r['second_fit'] for r in first]) * 1e3:.1f}",
            ]
        )
    commands = command_rows(args.repeats, bar)
    bar.close()
    body = (
        "Seconds, medians of fresh processes (200 x 20 data).\n\n"
        + md_table(
            [
                "estimator",
                "import (s)",
                "first fit, empty numba cache (s)",
                "import + first fit, cached (s)",
                "second fit (ms)",
            ],
            rows,
        )
        + "\n\nThe command line, whole process (seconds, medians):\n\n"
        + md_table(["command", "empty numba cache (s)", "cached (s)"], commands)
        + "\n"
    )
    path = write_result("cold_start", "Cold start: import and first fit", body)
    print(path.read_text())


if __name__ == "__main__":
    main()
