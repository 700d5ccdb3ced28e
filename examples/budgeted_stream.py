"""A long stream learnt in bounded memory by a budgeted kernel model.

An unbudgeted kernel learner keeps every input it updated on as a support vector,
so its memory and its time per round grow without bound on a long stream (the
dual covariance alone is n_sv x n_sv). With ``budget=B`` the model never holds
more than B support vectors: when an update would make it B + 1, one leaves at
once (``budget_policy="project"``: the one whose removal moves the mean least is
projected onto the others, Csato & Opper 2002).

The stream is a noisy 4 x 4 checkerboard in the plane, a problem no linear model
can learn: each label is flipped with probability ``--noise`` (default 5%), which
is therefore the best mistake rate any learner can reach. The script feeds it in
chunks to ``partial_fit`` of SCW-I with an RBF kernel and a budget of 200. After
each chunk it prints the mistake rate of that chunk and of the whole stream so
far (each example is predicted before the model learns from it), ``n_support_``,
and the resident memory of this process (VmRSS from /proc/self/status; "n/a"
where there is no /proc). Then it learns the same stream without a budget.

Run it (about 6 seconds on an idle 2-core machine, most of it the unbudgeted model; a
loaded machine can make it several times slower, as BLAS threads contend)::

    python examples/budgeted_stream.py
    python examples/budgeted_stream.py --n-rounds 50000 --budget 500 --no-unbudgeted
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from kernelcw import SCWClassifier


def checkerboard_stream(n: int, noise: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """n points uniform on [-1, 1]^2, labelled by the 4 x 4 checkerboard; a fraction
    ``noise`` of the labels flipped."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1.0, 1.0, size=(n, 2))
    cells = np.floor(2.0 * (X + 1.0)).astype(int)  # cell index 0..3 on each axis
    y = (cells.sum(axis=1) % 2).astype(int)
    flip = rng.random(n) < noise
    y[flip] = 1 - y[flip]
    return X, y


def resident_mib() -> float | None:
    """This process's resident memory in MiB (Linux's VmRSS), or None elsewhere."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0  # the value is in kB
    except (OSError, ValueError, IndexError):
        pass
    return None


def learn_stream(model, X, y, chunk: int, title: str) -> list[dict]:
    """partial_fit chunk by chunk, printing one line per chunk; returns the lines."""
    print(f"\n{title}")
    print(
        f"{'rounds':>7} {'chunk mistakes %':>16} {'stream mistakes %':>17} "
        f"{'n_support_':>10} {'VmRSS MiB':>9}"
    )
    rows = []
    start = time.perf_counter()
    for lo in range(0, len(y), chunk):
        before = model.n_mistakes_ if hasattr(model, "n_mistakes_") else 0
        model.partial_fit(X[lo : lo + chunk], y[lo : lo + chunk], classes=[0, 1])
        seen = min(lo + chunk, len(y))
        rss = resident_mib()
        row = {
            "rounds": seen,
            "chunk_mistake_rate": (model.n_mistakes_ - before) / (seen - lo),
            "mistake_rate": model.n_mistakes_ / seen,
            "n_support": int(model.n_support_),
            "rss_mib": rss,
        }
        rows.append(row)
        print(
            f"{seen:>7} {100 * row['chunk_mistake_rate']:>16.2f} "
            f"{100 * row['mistake_rate']:>17.2f} {row['n_support']:>10} "
            f"{'n/a' if rss is None else f'{rss:.1f}':>9}"
        )
    print(f"({time.perf_counter() - start:.1f} s)")
    return rows


def rss_change(rows: list[dict]) -> str:
    """Resident-memory change from the first chunk to the last, as text."""
    if rows[0]["rss_mib"] is None:
        return "resident memory not available on this system"
    return f"resident memory {rows[0]['rss_mib']:.1f} -> {rows[-1]['rss_mib']:.1f} MiB"


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-rounds", type=int, default=20_000)
    ap.add_argument("--chunk", type=int, default=2_000, help="rows per partial_fit call")
    ap.add_argument("--budget", type=int, default=200)
    ap.add_argument("--gamma", type=float, default=5.0, help="RBF width (default 5.0)")
    ap.add_argument("--noise", type=float, default=0.05, help="label noise (default 0.05)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--no-unbudgeted", dest="unbudgeted", action="store_false", help="skip the unbudgeted model"
    )
    args = ap.parse_args(argv)

    X, y = checkerboard_stream(args.n_rounds, args.noise, args.seed)
    print(
        f"stream: {args.n_rounds} rounds of a 4 x 4 checkerboard, "
        f"{100 * args.noise:g}% label noise; SCW-I, RBF kernel (gamma={args.gamma:g})"
    )

    budgeted = SCWClassifier(
        kernel="rbf", gamma=args.gamma, budget=args.budget, budget_policy="project"
    )
    rows_b = learn_stream(
        budgeted, X, y, args.chunk, f"budget={args.budget}, budget_policy='project'"
    )
    result = {"budgeted": rows_b, "budget": args.budget}
    most = max(row["n_support"] for row in rows_b)
    summary = [
        f"budgeted:   n_support_ at most {most} (budget {args.budget}); {rss_change(rows_b)}"
    ]
    del budgeted

    if args.unbudgeted:
        unbudgeted = SCWClassifier(kernel="rbf", gamma=args.gamma)
        rows_u = learn_stream(unbudgeted, X, y, args.chunk, "no budget")
        result["unbudgeted"] = rows_u
        n_sv = rows_u[-1]["n_support"]
        summary.append(
            f"unbudgeted: n_support_ = {n_sv} ({n_sv / args.budget:.1f} x the "
            f"budget); {rss_change(rows_u)}"
        )
    print()
    print("\n".join(summary))
    return result


if __name__ == "__main__":
    main()
