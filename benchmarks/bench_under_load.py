"""BLAS threads on an idle and on a busy machine: the library default ("auto") against one
thread and against the old behaviour (no limit: BLAS's default threads).

Fits (each one online pass, in this process, interleaved with ``_common.interleaved``):

- ``dual``: SCW-I with an RBF kernel on scikit-learn's digits (1,797 x 64, ten classes,
  pixels / 16): many small BLAS calls (kernel blocks, triangular solves); and AROW with
  an RBF kernel, unbudgeted, on 5,000 rows of the synthetic budget stream (d = 50,
  about 4,900 support vectors): block solves large enough for "auto" to use BLAS's
  threads;
- ``primal``: SCW-I with full covariance on an adult-like stand-in (48,842 x 105: eight
  one-hot categorical groups plus numeric columns, as the UCI adult data one-hot
  encoded; that data is not available offline);
- ``dual budget``: budgeted RBF models past their budget on synthetic streams: the
  blocked nu/Pi walk of ``kernelcw.engines.dual.deferred`` with "project" at B = 500,
  where "auto" gives the walk one thread, and "smallest" at B = 3000, where its
  per-sub-block product crosses the threshold and BLAS may use its threads; "random"
  at B = 3000 (the lazy Cholesky form, its products on the threads "auto" allows) and
  "smallest" with budget_batch = 375 (the batch-pruned form, its block solves
  likewise).

Parts (``--parts``):

- ``idle``: the three settings side by side;
- ``load``: the same with a CPU-bound process (a Python busy loop) pinned to core 0 while
  the fit may use every core: the case of a test suite or ``GridSearchCV(n_jobs=2)``
  beside the fit;
- ``rule``: the evidence for the "auto" rule: single BLAS-3 calls of the engines' shapes
  (the dual engine's triangular solve, n x n against 256 columns; the primal product
  ``Sigma X_B'``) with one thread and with BLAS's default threads, idle and under load,
  against their flops;
- ``floor``: the dual engine's block at n_sv = ``--floor-n`` (AROW, RBF, d = 50, a
  stream on which nearly every round updates) against the BLAS-3 calls it must make (a
  kernel block, a triangular solve and a b x b product, timed alone in the same run),
  the repeats with room for the block in the factor buffer (the first call, which grows
  the buffer as a stream does once per ~15 % more rows, is timed once on its own);
- ``overhead``: the cost of entering and leaving the thread limit, per ``learn`` call,
  against a one-row ``partial_fit``;
- ``history``: the primal fit in fresh processes against processes with a 'dirty'
  history (other fits first; glibc malloc settings; a fit in a worker thread that took
  control of OpenBLAS through threadpoolctl), each process timing three repeats: the
  full learner's time must not depend on what the process did before.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import time

import numpy as np

from ._common import argument_parser, interleaved, md_table, median, progress, write_result

SETTINGS = {
    "default (auto)": "auto",
    "one thread": 1,
    "old: no limit (BLAS default threads)": None,
}


def adult_like(n: int = 48842, seed: int = 0):
    """A stand-in for UCI adult one-hot encoded: 48,842 x 105, eight categorical groups
    (one-hot, skewed category frequencies) and numeric columns, a noisy linear label."""
    rng = np.random.default_rng(seed)
    cards = [9, 16, 7, 15, 6, 5, 2, 41]  # workclass, education, ..., native-country
    cols = []
    for c in cards:
        p = rng.dirichlet(np.full(c, 0.5))
        oh = np.zeros((n, c))
        oh[np.arange(n), rng.choice(c, size=n, p=p)] = 1.0
        cols.append(oh)
    cols.append(rng.normal(size=(n, 105 - sum(cards))))
    X = np.ascontiguousarray(np.hstack(cols))
    y = (X @ rng.normal(size=X.shape[1]) + rng.normal(size=n) > 0).astype(int)
    return X, y


def digits():
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    return np.ascontiguousarray(X / 16.0), y


def budget_stream(n: int, d: int, seed: int = 0):
    """A synthetic stream for the budgeted fits: Gaussian rows, a nonlinear label with
    10 % of the labels flipped (so the budget binds and keeps removing)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = (X[:, 0] * X[:, 1] + np.sin(X[:, 2]) > 0).astype(int)
    flip = rng.random(n) < 0.1
    y[flip] = 1 - y[flip]
    return X, y


def fits():
    from kernelcw import AROWClassifier, SCWClassifier

    Xd, yd = digits()
    Xa, ya = adult_like()
    Xs, ys = budget_stream(8000, 10)
    Xb, yb = budget_stream(4000, 50)
    Xu, yu = budget_stream(5000, 50)
    return {
        "dual: SCW-I RBF, digits": lambda: SCWClassifier(C=1.0, kernel="rbf").fit(Xd, yd),
        # a large unbudgeted model: its block solves (n^2 256 flops) pass 5e8 from
        # n_sv ~ 1,400, so "auto" gives most blocks BLAS's threads
        "dual: AROW RBF unbudgeted, 5000 x 50": lambda: AROWClassifier(kernel="rbf").fit(Xu, yu),
        "primal: SCW-I full, adult-like": lambda: SCWClassifier(C=1.0).fit(Xa, ya),
        # the blocked nu/Pi walk: "auto" gives it one thread at B = 500 (Pi K of a
        # sub-block, 500^2 x 40 flops) and BLAS's threads at B = 3000 (3000^2 x 64)
        'dual budget: SCW-I RBF "project" B=500, 8000 x 10': lambda: SCWClassifier(
            C=1.0, kernel="rbf", budget=500, random_state=0
        ).fit(Xs, ys),
        'dual budget: AROW RBF "smallest" B=3000, 4000 x 50': lambda: AROWClassifier(
            kernel="rbf", budget=3000, budget_policy="smallest"
        ).fit(Xb, yb),
        'dual budget: AROW RBF "random" B=3000, 4000 x 50': lambda: AROWClassifier(
            kernel="rbf", budget=3000, budget_policy="random", random_state=0
        ).fit(Xb, yb),
        # the batch-pruned form (budget_batch > 1): its block solves and banded-QR
        # prunes are BLAS-3 calls that "auto" sizes by the solve (n^2 b)
        'dual budget: AROW RBF "smallest" B=3000, budget_batch=375, 4000 x 50': lambda: (
            AROWClassifier(
                kernel="rbf", budget=3000, budget_policy="smallest", budget_batch=375
            ).fit(Xb, yb)  # fmt: skip
        ),
    }


def _busy(core: int) -> None:
    os.sched_setaffinity(0, {core})
    while True:
        pass


class Load:
    """A CPU-bound process pinned to one core, while the ``with`` block runs."""

    def __init__(self, core: int = 0):
        self.core = core

    def __enter__(self):
        self.proc = mp.get_context("fork").Process(target=_busy, args=(self.core,), daemon=True)
        self.proc.start()
        time.sleep(0.5)
        return self

    def __exit__(self, *exc):
        self.proc.terminate()
        self.proc.join()


def _with_setting(fn, setting):
    import kernelcw

    def run():
        with kernelcw.config_context(blas_threads=setting):
            fn()

    return run


def part_fits(repeats: int, load: bool, settings: dict) -> tuple[str, dict]:
    rows, ratios = [], {}
    for name, fn in fits().items():
        _with_setting(fn, 1)()  # compile and warm outside the timings
        contenders = {s: _with_setting(fn, v) for s, v in settings.items()}
        if load:
            with Load():
                t = interleaved(contenders, repeats, desc=f"{name} (load)")
        else:
            t = interleaved(contenders, repeats, desc=name)
        one = median(t["one thread"])
        for s, ts in t.items():
            rows.append([name, s, f"{median(ts):.3f}", f"{min(ts):.3f}", f"{median(ts) / one:.2f}"])
        ratios[name] = {s: median(ts) / one for s, ts in t.items()}
    head = ["fit", "BLAS threads", "median s", "min s", "median / one thread"]
    return md_table(head, rows), ratios


def _time_call(f, reps: int) -> float:
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def part_rule(load: bool) -> str:
    from scipy.linalg.blas import dtrsm
    from threadpoolctl import threadpool_limits

    from kernelcw._threads import AUTO_IDLE_MIN_FLOPS, AUTO_MIN_FLOPS, blas_libraries

    libs = blas_libraries()
    default = max(lib.get_num_threads() or 1 for lib in libs)
    rng = np.random.default_rng(0)
    cases = []
    for n in (32, 64, 128, 256, 512, 1024, 2048, 4096):
        L = np.tril(rng.random((n, n))) * 1e-3
        L[np.arange(n), np.arange(n)] = 1.0
        L, B = np.asfortranarray(L), np.asfortranarray(rng.random((n, 256)))
        call = lambda L=L, B=B: dtrsm(1.0, L, B, lower=1)  # noqa: E731
        cases.append((f"dual trsm, n_sv = {n}, b = 256", n * n * 256.0, call))
    for d in (50, 75, 105, 200, 400, 784, 1500):
        b = int(min(256, max(8, d // 2)))
        S, XB = rng.random((d, d)), rng.random((b, d))
        call = lambda S=S, XB=XB: S @ XB.T  # noqa: E731
        cases.append((f"primal Sigma X_B', d = {d}, b = {b}", d * d * float(b), call))
    rows = []
    ctx = Load() if load else _Null()
    with ctx:
        for name, flops, f in progress(cases, desc="rule (load)" if load else "rule"):
            reps = max(3, min(200, int(3e9 / flops)))
            t = {1: [], default: []}
            for _ in range(3):
                for th in t:
                    with threadpool_limits(th, user_api="blas"):
                        f()
                        t[th].append(_time_call(f, reps))
            t1, tn = min(t[1]), min(t[default])
            auto = "default" if flops >= AUTO_MIN_FLOPS else "1"
            if AUTO_IDLE_MIN_FLOPS <= flops < AUTO_MIN_FLOPS:
                auto = "2 if idle, else 1"
            ms = f"{t1 * 1e3:.3f}", f"{tn * 1e3:.3f}"
            rows.append([name, f"{flops:.1e}", *ms, f"{t1 / tn:.2f}", auto])
    head = ["call", "flops", "1 thread ms", f"{default} threads ms", "speed-up of threads", "auto"]
    return md_table(head, rows)


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None


def part_floor(n_sv: int, repeats: int, setting) -> str:
    """The dual engine's learn on one block of 256 rows at n_sv support vectors against
    its BLAS-3 floor (a kernel block, the triangular solve, the b x b product)."""
    import kernelcw
    from kernelcw import AROWClassifier
    from kernelcw._threads import BlasThreads
    from kernelcw.kernels import kernel_matrix

    d, b = 50, 256
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n_sv + 2 * b, d))
    y = rng.integers(0, 2, size=X.shape[0])
    with kernelcw.config_context(blas_threads=setting):
        est = AROWClassifier(kernel="rbf", block_size=b).fit(X[:n_sv], y[:n_sv])
    eng = est.engine_
    n_now = est.n_support_
    XB = np.ascontiguousarray(X[n_sv : n_sv + b])
    Y = np.where(y[n_sv : n_sv + b] == 1, 1.0, -1.0)[:, None]
    form = eng.forms[0]
    Ld = np.tril(form.state_dict()["LK"])  # the same factor, dense (the floor's triangle)
    S = eng.store.rows[: eng.store.n]
    gamma = eng.spec.kernel.gamma
    from scipy.linalg.blas import dgemm, dtrsm

    La = np.asfortranarray(Ld)

    def engine_block():
        with kernelcw.config_context(blas_threads=setting):
            cp = eng.checkpoint(XB)
            eng.learn(XB, Y)
            eng.restore(cp)

    def floor():
        with kernelcw.config_context(blas_threads=setting):
            with BlasThreads(float(n_now) * b * (n_now + d)):
                K0 = kernel_matrix(S, XB, "rbf", gamma, 3, 0.0)  # n x b
                W = dtrsm(1.0, La, np.asfortranarray(K0), lower=1)
                dgemm(1.0, W, W, trans_a=1)

    # The fit leaves the factor buffer full (sized to the rows it expected), and each
    # repeat restores the model as the fit left it: every repeat would grow the buffer (a
    # copy of the n x n leading block into fresh memory), which a stream pays once per
    # ~GROWTH - 1 = 15 % more rows, not per block. The first call grows it (timed once,
    # reported on its own); the repeats run with room for the block, as in a stream
    # between two growths.
    t0 = time.perf_counter()
    engine_block()
    t_grow = time.perf_counter() - t0
    form._reserve(n_now + b)  # the room the first call made, kept for the repeats
    engine_block()
    floor()
    t = interleaved({"engine": engine_block, "floor": floor}, repeats, desc="floor")
    te, tf = median(t["engine"]), median(t["floor"])
    rows = [
        [n_now, f"{te * 1e3:.1f}", f"{min(t['engine']) * 1e3:.1f}", f"{tf * 1e3:.1f}",
         f"{min(t['floor']) * 1e3:.1f}", f"{te / tf:.2f}", f"{t_grow * 1e3:.0f}"]
    ]  # fmt: skip
    head = [
        f"n_sv (blas_threads={setting!r})",
        "engine ms/block",
        "(min)",
        "floor ms/block",
        "(min)",
        "engine / floor",
        "block that grows the buffer, ms (once)",
    ]
    return md_table(head, rows)


def part_overhead(reps: int) -> str:
    import kernelcw
    from kernelcw import SCWClassifier
    from kernelcw._threads import BlasThreads, blas_libraries

    blas_libraries()
    Xd, yd = digits()

    def enter_leave():
        for _ in range(reps):
            with BlasThreads():
                pass

    est = SCWClassifier(kernel="rbf").partial_fit(Xd[:20], yd[:20], classes=np.unique(yd))

    def one_row(setting):
        def run():
            with kernelcw.config_context(blas_threads=setting):
                for i in range(20, 220):
                    est.partial_fit(Xd[i : i + 1], yd[i : i + 1])

        return run

    rows = []
    for setting in ("auto", None):
        with kernelcw.config_context(blas_threads=setting):
            t = [_time_call(enter_leave, 1) / reps for _ in range(5)]
        rows.append([f"enter + leave the limit ({setting!r})", f"{min(t) * 1e6:.1f}"])
    t = interleaved({"auto": one_row("auto"), "None": one_row(None)}, 3, desc="overhead")
    for k, v in t.items():
        rows.append([f"one-row partial_fit, dual RBF ({k})", f"{min(v) / 200 * 1e6:.0f}"])
    return md_table(["per call", "us (min)"], rows)


HISTORY_CODE = """
import time, numpy as np, sys
from concurrent.futures import ThreadPoolExecutor
sys.path.insert(0, {root!r})
from threadpoolctl import threadpool_limits
from benchmarks.bench_under_load import adult_like, digits
from kernelcw import SCWClassifier, AROWClassifier
import kernelcw
X, y = adult_like()
if {dirty}:
    Xd, yd = digits()
    SCWClassifier(kernel="rbf").fit(Xd, yd)
    rng = np.random.default_rng(1)
    for d in (30, 300, 784):
        Z = rng.normal(size=(3000, d)); AROWClassifier().fit(Z, (Z[:, 0] > 0).astype(int))
pool = ThreadPoolExecutor(1)
if {worker}:  # a job in a worker thread that stays alive set BLAS threads (a bare call:
    def other():  # threadpoolctl >= 3.6 then lets only that thread change them)
        threadpool_limits(2, user_api="blas")
        SCWClassifier().fit(X[:2000], y[:2000])
    pool.submit(other).result()
ts = []
with threadpool_limits(1, user_api="blas"), kernelcw.config_context(blas_threads={setting!r}):
    for _ in range(3):
        t0 = time.perf_counter()
        e = SCWClassifier(C=1.0).fit(X, y)
        ts.append(time.perf_counter() - t0)
S = e.covariance_
sub = bool((np.abs(S)[S != 0] < np.finfo(float).tiny).any())
print(min(ts), max(ts), sub)
"""

#: name: (other fits first, a worker thread took control of OpenBLAS, setting, environment)
HISTORIES = {
    "fresh process": (False, False, "auto", {}),
    "after other fits (dual RBF digits, AROW full d = 30/300/784)": (True, False, "auto", {}),
    "MALLOC_ARENA_MAX=1": (False, False, "auto", {"MALLOC_ARENA_MAX": "1"}),
    "MALLOC_MMAP_THRESHOLD_=64": (False, False, "auto", {"MALLOC_MMAP_THRESHOLD_": "64"}),
    "MALLOC_TOP_PAD_=1e9, MALLOC_PERTURB_=165": (
        False,
        False,
        "auto",
        {"MALLOC_TOP_PAD_": "1000000000", "MALLOC_PERTURB_": "165"},
    ),
    "after a worker thread set BLAS threads": (False, True, "auto", {}),
    "old (blas_threads=None), fresh process": (False, False, None, {}),
    "old (blas_threads=None), after a worker thread set BLAS threads": (False, True, None, {}),
}


def part_history(rounds: int) -> tuple[str, float]:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    res = {k: [] for k in HISTORIES}
    subs = set()
    bar = progress(total=rounds * len(HISTORIES), desc="history", unit="process")
    with bar, Load():  # the case of the reports: another process busy beside the fit
        for _ in range(rounds):
            for name, (dirty, worker, setting, env) in HISTORIES.items():
                code = HISTORY_CODE.format(root=root, dirty=dirty, worker=worker, setting=setting)
                out = subprocess.run(
                    [sys.executable, "-c", code],
                    env={**os.environ, **env},
                    capture_output=True,
                    text=True,
                    check=True,
                ).stdout.split()
                res[name].append((float(out[0]), float(out[1])))
                subs.add(out[2])
                bar.update(1)
    fresh = median([lo for lo, _ in res["fresh process"]])
    rows = []
    worst = 0.0
    for name, v in res.items():
        lo = median([a for a, _ in v])
        hi = max(b for _, b in v)
        if not name.startswith("old"):
            worst = max(worst, lo / fresh)
        rows.append([name, f"{lo:.3f}", f"{hi:.3f}", f"{lo / fresh:.2f}"])
    head = ["process", "median of per-process min s", "slowest repeat s", "vs fresh"]
    table = md_table(head, rows)
    return table + f"\n\nSubnormal entries in the fitted Sigma: {sorted(subs)}.", worst


def main(argv=None):
    ap = argument_parser(__doc__)
    ap.add_argument("--repeats", type=int, default=5, help="interleaved repetitions per part")
    ap.add_argument(
        "--parts", default="idle,load,rule,floor,overhead,history", help="comma-separated parts"
    )
    ap.add_argument("--floor-n", type=int, default=4000, help="n_sv for the floor part")
    ap.add_argument("--history-rounds", type=int, default=3, help="processes per history")
    args = ap.parse_args(argv)
    parts = args.parts.split(",")
    if "load" in parts and len(os.sched_getaffinity(0)) < 2:
        raise SystemExit("the load part needs two cores")
    load1 = os.getloadavg()[0]
    body = [
        "Goals: under load the default within 1.3x of one thread; idle no slower than the "
        "old behaviour. Times are one fit each; ratios are of medians within one part "
        f"(interleaved, {args.repeats} repeats). Load average when the run started "
        f"(other users of this shared machine): {load1:.1f}.\n"
    ]
    if "idle" in parts:
        table, _ = part_fits(args.repeats, False, SETTINGS)
        body.append("## Idle (no load of ours)\n\n" + table)
    if "load" in parts:
        table, _ = part_fits(args.repeats, True, SETTINGS)
        body.append(
            "## Under load: a busy loop pinned to core 0, the fit free to use both\n\n" + table
        )
    if "rule" in parts:
        body.append(
            '## The "auto" rule\n\n"auto" runs a block on one thread below '
            "`kernelcw._threads.AUTO_MIN_FLOPS` flops and lets BLAS use its threads above "
            "(no more than the cores other processes leave free); from "
            "`AUTO_IDLE_MIN_FLOPS` up to it, on two threads where the cores are free. "
            "Single calls, median of repeats, best of 3 interleaved rounds:\n\n"
            "Idle:\n\n" + part_rule(False) + "\n\nUnder load:\n\n" + part_rule(True)
        )
    if "floor" in parts:
        body.append(
            "## Dual engine against its floor\n\nOne block of 256 rows through the engine "
            "(`DualEngine.learn`, AROW, RBF, d = 50) against the BLAS-3 calls it must make "
            "(kernel block K(S, X_B), the triangular solve L^-1 K on the dense factor, "
            "W'W), in one run, with the default setting and with one thread; the repeats "
            "with room for the block in the factor buffer, the first call (which grows it, "
            "as a stream does once per ~15 % more rows) timed once:\n\n"
            + part_floor(args.floor_n, args.repeats, "auto")
            + "\n\n"
            + part_floor(args.floor_n, args.repeats, 1)
        )
    if "overhead" in parts:
        body.append("## Cost of the thread limit\n\n" + part_overhead(2000))
    if "history" in parts:
        table, worst = part_history(args.history_rounds)
        body.append(
            "## Primal full-covariance time against the process's history\n\n"
            "SCW-I full on the adult-like stand-in, three fits per process, with a busy "
            "loop pinned to core 0 beside it, each process "
            "under the user's `threadpool_limits(1)` (the setting of the reports: one BLAS "
            "thread), with kernelcw's default setting unless named 'old'. threadpoolctl >= 3.6 "
            "lets only the first Python thread that set a limit (while it lives) change "
            "OpenBLAS's count: after a worker thread set the threads, the main thread's "
            "one-thread limit is silently ignored. Worst history / fresh process: "
            f"{worst:.2f}.\n\n" + table
        )
    path = write_result(
        "under_load", "BLAS threads on an idle and a busy machine", "\n\n".join(body)
    )
    print(path.read_text())


if __name__ == "__main__":
    main()
