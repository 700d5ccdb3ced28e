"""Row at a time: one ``partial_fit`` per row against one ``fit`` on the same rows, for
every budget policy and unbudgeted, and whether throughput declines over the stream.

Stream: KEEL magic (z-scored, one fixed random order) when ``benchmarks.datasets`` has it
cached, else (or with ``--data synthetic``) a reproducible synthetic stream of the same
shape: 10 Gaussian features, labels from a fixed non-linear rule with 10% flipped. Model:
SCW-I with an RBF kernel (gamma = 1/d, C = 1), one BLAS thread by default. For a budget B
(every policy) the first ``--rows`` rows and unbudgeted the first ``--unbudgeted-rows``
rows are learned once one row per ``partial_fit`` call and once by one ``fit`` with the
same settings, in one run. Reported: rows/s over the first and the last ``--window``
rows of the row-at-a-time run (each call timed alone), its total time over the ``fit``
time, the median time of ``predict`` on one row (the first ``--window`` rows, by the
model at the end), and on how many of the stream's rows their predictions differ.

``--load`` runs it all with a CPU-bound process pinned to core 0 (the busy machine of
``bench_under_load``); with ``--blas-threads 0`` the library's own thread choice applies,
as users run it.

Goals (the scaling issue): no decline beyond the model's own growth (with a budget the
model stops growing, so last/first should stay near 1), and within 3x of one ``fit``
for B = 200.
"""

from __future__ import annotations

import contextlib
import copy
import time

import numpy as np
from threadpoolctl import threadpool_limits

from kernelcw import SCWClassifier

from ._common import argument_parser, md_table, median, progress, write_result
from .bench_under_load import Load
from .datasets import CACHE_FILES, cache_dir, magic

POLICIES = ("oldest", "random", "smallest", "project")
MAGIC_SHAPE = (19020, 10)


def synthetic(n: int, d: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Gaussian rows, labels sign(|x_0 x_1| + sin(2 x_2) + 0.5 x_3 - 0.6), 10% flipped."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    score = np.abs(X[:, 0] * X[:, 1]) + np.sin(2 * X[:, 2]) + 0.5 * X[:, 3] - 0.6
    y = (score > 0).astype(np.int64)
    flip = rng.random(n) < 0.1
    y[flip] = 1 - y[flip]
    return X, y


def load(kind: str, n: int, seed: int) -> tuple[np.ndarray, np.ndarray, str]:
    """(X z-scored, y, a sentence naming the data)."""
    cached = (cache_dir() / CACHE_FILES["magic"]).exists()
    if kind == "magic" or (kind == "auto" and cached):
        X, y = magic()
        order = np.random.default_rng(seed).permutation(len(y))
        X, y = X[order], y[order]
        what = f"KEEL magic ({X.shape[0]} x {X.shape[1]}, z-scored, random order seed {seed})"
        if n > X.shape[0]:
            what += f"; only {X.shape[0]} rows, so streams stop there"
    else:
        X, y = synthetic(max(n, MAGIC_SHAPE[0]), MAGIC_SHAPE[1], seed)
        why = "not cached in ~/.cache/kernelcw" if kind == "auto" else "--data synthetic"
        what = (
            f"synthetic stream of KEEL magic's width ({X.shape[0]} x {X.shape[1]}, seed "
            f"{seed}; magic {why}): Gaussian features, labels from a fixed non-linear rule "
            "with 10% flipped, z-scored"
        )
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    return np.ascontiguousarray(X), y, what


def make(budget: int | None, policy: str, d: int) -> SCWClassifier:
    kw = {} if budget is None else {"budget": budget, "budget_policy": policy}
    return SCWClassifier(variant=1, C=1.0, kernel="rbf", gamma=1.0 / d, random_state=0, **kw)


def one_at_a_time(est, X, y, classes, bar) -> tuple[np.ndarray, np.ndarray]:
    """Seconds per partial_fit call, one row each, and whether each row updated."""
    n = X.shape[0]
    times = np.empty(n)
    updated = np.zeros(n, dtype=bool)
    before = 0
    for i in range(n):
        xi, yi = X[i : i + 1], y[i : i + 1]
        t0 = time.perf_counter()
        est.partial_fit(xi, yi, classes=classes)
        times[i] = time.perf_counter() - t0
        updated[i] = est.n_updates_ > before
        before = est.n_updates_
        if (i + 1) % 500 == 0:
            bar.update(500)
    bar.update(n % 500)
    return times, updated


def predict_calls(est, X) -> np.ndarray:
    """Seconds per ``predict`` call, one row each (the trained model, held fixed)."""
    times = np.empty(X.shape[0])
    for i in range(X.shape[0]):
        xi = X[i : i + 1]
        t0 = time.perf_counter()
        est.predict(xi)
        times[i] = time.perf_counter() - t0
    return times


def engine_share(est, X, y, classes) -> tuple[float, float]:
    """Median seconds of a one-row ``partial_fit`` and of the engine's ``learn`` alone
    on the same row (two copies of the model at the stream's end, interleaved, over
    the rows X again): what the estimator's checks and bookkeeping add."""
    full, bare = copy.deepcopy(est), copy.deepcopy(est)
    engine = bare.engine_
    Y = np.where(y == classes[1], 1.0, -1.0)[:, None]
    t_full, t_bare = np.empty(X.shape[0]), np.empty(X.shape[0])
    for i in range(X.shape[0]):
        t0 = time.perf_counter()
        full.partial_fit(X[i : i + 1], y[i : i + 1], classes=classes)
        t1 = time.perf_counter()
        engine.learn(X[i : i + 1], Y[i : i + 1])
        t_full[i], t_bare[i] = t1 - t0, time.perf_counter() - t1
    return float(np.median(t_full)), float(np.median(t_bare))


def run_case(name, budget, policy, X, y, args, bar) -> list[object]:
    d = X.shape[1]
    classes = np.unique(y)
    time.sleep(args.pause)
    rows = make(budget, policy, d)
    per_call, updated = one_at_a_time(rows, X, y, classes, bar)
    per_predict = predict_calls(rows, X[: args.window])
    t_full, t_bare = (None, None)
    if len(classes) == 2:  # (the engine's targets built here for two classes)
        t_full, t_bare = engine_share(rows, X[: args.window], y[: args.window], classes)
    fits = []
    for _ in range(args.fit_repeats):
        time.sleep(args.pause)
        whole = make(budget, policy, d)
        t0 = time.perf_counter()
        whole.fit(X, y)
        fits.append(time.perf_counter() - t0)
    w = min(args.window, X.shape[0] // 2)
    first = w / per_call[:w].sum()
    last = w / per_call[-w:].sum()
    total = per_call.sum()
    differ = int(np.count_nonzero(rows.predict(X) != whole.predict(X)))
    return [
        name,
        X.shape[0],
        rows.n_support_,
        f"{first:.0f}",
        f"{last:.0f}",
        f"{last / first:.2f}",
        f"{100 * updated[:w].mean():.0f} / {100 * updated[-w:].mean():.0f}",
        f"{total:.2f}",
        f"{median(fits):.3f}",
        f"{total / median(fits):.1f}x",
        f"{np.median(per_call) * 1e6:.0f}",
        "-" if t_full is None else f"{t_full * 1e6:.0f} / {t_bare * 1e6:.0f}",
        f"{np.median(per_predict) * 1e6:.0f}",
        differ,
    ]


def main(argv=None):
    ap = argument_parser(__doc__)
    ap.add_argument("--rows", type=int, default=20000, help="rows per budgeted stream")
    ap.add_argument("--unbudgeted-rows", type=int, default=5000, help="rows without a budget")
    ap.add_argument("--budget", type=int, default=200, help="the budget B")
    ap.add_argument("--policies", default=",".join(POLICIES), help="comma-separated policies")
    ap.add_argument("--window", type=int, default=1000, help="rows in the first/last windows")
    ap.add_argument("--fit-repeats", type=int, default=3, help="fit timings (median)")
    ap.add_argument(
        "--data", choices=("auto", "magic", "synthetic"), default="auto", help="the stream"
    )
    ap.add_argument("--seed", type=int, default=0, help="stream order / synthetic data seed")
    ap.add_argument("--pause", type=float, default=0.3, help="idle seconds before each run")
    ap.add_argument(
        "--blas-threads", type=int, default=1, help="limit the BLAS threads (0: as configured)"
    )
    ap.add_argument(
        "--load",
        action="store_true",
        help="run with a CPU-bound process pinned to core 0 (bench_under_load's Load)",
    )
    ap.add_argument("--name", default="row_at_a_time", help="result file stem")
    args = ap.parse_args(argv)
    policies = [p for p in args.policies.split(",") if p]
    if set(policies) - set(POLICIES):
        ap.error(
            f"unknown policies {sorted(set(policies) - set(POLICIES))}; choose from {POLICIES}"
        )
    if min(args.rows, args.unbudgeted_rows, args.window, args.fit_repeats) < 1:
        ap.error("--rows, --unbudgeted-rows, --window and --fit-repeats must be positive")
    load = Load() if args.load else contextlib.nullcontext()
    with load, threadpool_limits(args.blas_threads or None, user_api="blas"):
        run(args, policies)


def run(args, policies: list[str]) -> None:
    X, y, what = load(args.data, max(args.rows, args.unbudgeted_rows), args.seed)
    d = X.shape[1]
    for policy in POLICIES:  # compile (or load numba's cache) outside the timings
        bound = min(2 * args.budget, X.shape[0] - 64)  # (the stream's rows, at most)
        make(args.budget, policy, d).fit(X[:bound], y[:bound])
        est = make(args.budget, policy, d)
        # rows one at a time before and after the budget binds (their own compiled
        # paths), and in chunks between
        for i in [*range(64), *range(64, bound, 7), *range(bound, bound + 64)]:
            j = i + 1 if i < 64 or i >= bound else min(i + 7, bound)
            est.partial_fit(X[i:j], y[i:j], classes=np.unique(y))
    cases = [(f"B = {args.budget}, {p}", args.budget, p, args.rows) for p in policies]
    cases.append(("unbudgeted", None, "project", args.unbudgeted_rows))
    total = sum(min(n, X.shape[0]) for *_, n in cases)
    table = []
    with progress(total=total, desc="row_at_a_time", unit="row") as bar:
        for name, budget, policy, n in cases:
            table.append(run_case(name, budget, policy, X[:n], y[:n], args, bar))
    header = [
        "model",
        "rows",
        "n_sv at end",
        f"rows/s, first {args.window}",
        f"rows/s, last {args.window}",
        "last / first",
        "rows that update, first / last, %",
        "one row per call, s",
        f"one fit, s (median of {args.fit_repeats})",
        "rows / fit",
        "median call, us",
        "again at the end: call / engine alone, us",
        "median predict of a row, us",
        "rows predicted differently",
    ]
    body = (
        "Goals (the scaling issue): no decline beyond the model's own growth; one row per "
        f"call within 3x of one `fit` for B = 200 (this run: B = {args.budget}).\n\n"
        + md_table(header, table)
        + f"\n\nData: {what}. SCW-I (C = 1, eta = 0.75), RBF kernel with gamma = 1/d, "
        f"BLAS threads: {args.blas_threads or 'as configured'}"
        + (", with a CPU-bound process pinned to core 0 throughout" if args.load else "")
        + ". Each `partial_fit` call is "
        "timed alone (perf_counter); rows/s over a window is its rows over the sum of its "
        "calls' times, and a row that updates costs more than one that does not (its "
        "share per window beside it). 'rows / fit' is the whole row-at-a-time time over "
        "one `fit` on the same rows with the same settings; 'again at the end': two "
        f"copies of the model at the stream's end learn the first {args.window} rows once "
        "more, one row per `partial_fit` and one row per `engine_.learn` (the engine "
        "alone, without the estimator's checks, checkpoint and counters), interleaved, "
        "medians; 'median predict of a row': "
        f"`predict` of one row, each of the first {args.window} rows of the stream in turn, "
        "by the model at the stream's end; 'rows predicted differently': of the stream's "
        "rows, those the two final models (one row per call, one fit) predict differently "
        "(the fit walks blocks, a call of one row round by round: the same model to "
        "rounding).\n"
    )
    path = write_result(args.name, "Row at a time: partial_fit per row against fit", body)
    print(path.read_text())


if __name__ == "__main__":
    main()
