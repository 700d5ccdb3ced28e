"""Budgets: online mistake rate against the budget, throughput and memory.

1. ``accuracy``: online mistake rate (one pass, predict then learn) against the
   budget B for every policy, for kernel SCW-I and CW-Stdev (RBF), with budgeted
   kernel PA-I (the first-order baseline) beside them, on KEEL magic and on
   Fashion-MNIST T-shirt/top vs shirt (``--stream`` rows each, one fixed random
   order, features z-scored / pixels in [0, 1]). Goal: "project" at a budget of
   10% of the unbudgeted support size within 2 percentage points of the
   unbudgeted mistake rate (that budget is added to the grid).
2. ``throughput``: time per round at B = 4000 against the unbudgeted model at
   n_sv = 4000, on the stream of ``bench_dual_throughput`` (AROW, RBF, d = 50,
   random labels: every round updates, so every round at the budget removes),
   for "oldest" (the blocked Cholesky queue form, timed over ``--tp-cycle``
   rounds so that its periodic refactorisations are in the average) and
   "random" (nu/Pi, O(B^2) per round, as "smallest" and "project"). Goal: at least 1/4 of the
   unbudgeted speed.
3. ``memory``: resident memory after 2,000, 10,000 and 50,000 rounds of that
   stream at B = 1000, in a process of its own (it should not grow). Run it
   alone (``--parts memory``): the peak covers everything the process did.
"""

from __future__ import annotations

import time

import numpy as np
from sklearn.preprocessing import StandardScaler

from kernelcw import AROWClassifier, CWClassifier, PAClassifier, SCWClassifier, run_online

from ._common import (
    RESULTS,
    argument_parser,
    md_table,
    median,
    progress,
    pyplot,
    require_matplotlib,
    write_result,
)
from .datasets import fashion_mnist, magic

POLICIES = ("oldest", "random", "smallest", "project")
RULES = {
    "SCW-I": lambda **kw: SCWClassifier(kernel="rbf", **kw),
    "CW-Stdev": lambda **kw: CWClassifier(kernel="rbf", **kw),
}


def load(name: str, n: int, seed: int):
    if name == "magic":
        X, y = magic()
        X = StandardScaler().fit_transform(X)
    else:
        X, y = fashion_mnist(classes=(0, 6), subset="train")
    order = np.random.default_rng(seed).permutation(len(y))[:n]
    return np.ascontiguousarray(X[order]), y[order]


def accuracy(args) -> tuple[str, dict]:
    from tqdm.auto import tqdm

    sections = []
    curves = {}
    budgets = [int(b) for b in args.budgets.split(",")]
    for data in args.data.split(","):
        X, y = load(data, args.stream, args.seed)
        rows = []
        for rule, make in RULES.items():
            full = run_online(make(), X, y)
            n_full = full.estimator.n_support_
            b10 = max(1, round(0.1 * n_full))
            grid = sorted(set(budgets + [b10]))
            res = {}
            jobs = [(p, B) for p in POLICIES for B in grid]
            for policy, B in tqdm(jobs, desc=f"{data} {rule}", leave=False):
                est = _batched(make(budget=B, budget_policy=policy, random_state=0), args)
                res[policy, B] = run_online(est, X, y, fresh=False).mistake_rate
            for B in grid:
                res["PA-I", B] = run_online(
                    PAClassifier(kernel="rbf", budget=B, budget_policy="random", random_state=0),
                    X,
                    y,
                ).mistake_rate
            curves[data, rule] = (grid, res, full.mistake_rate, n_full)
            for B in grid:
                rows.append(
                    [rule, B if B != b10 else f"**{B}** (10%)"]
                    + [f"{100 * res[p, B]:.1f}" for p in POLICIES]
                    + [f"{100 * res['PA-I', B]:.1f}"]
                )
            rows.append(
                [rule, f"unbudgeted ({n_full} SVs)"]
                + [f"{100 * full.mistake_rate:.1f}"] * len(POLICIES)
                + ["-"]
            )
            gap = 100 * (res["project", b10] - full.mistake_rate)
            rows.append(
                [
                    rule,
                    f"goal: project at B = {b10} within 2 pp",
                    f"{gap:+.1f} pp: {'met' if gap <= 2 else 'NOT met'}",
                    "",
                    "",
                    "",
                    "",
                ]
            )
        sections.append(
            f"### {data}: {len(y)} rounds\n\n"
            + md_table(
                ["rule", "budget", *POLICIES, "PA-I (random)"],
                rows,
            )
        )
    return "\n\n".join(sections), curves


def _batched(est, args):
    """``est`` pruning ``--batch`` support vectors at once (``budget_batch``)."""
    q = min(args.batch, est.budget) if est.budget else 1
    return est.set_params(budget_batch=q) if q > 1 else est


def plot(curves: dict, path) -> None:
    plt = pyplot()

    keys = list(curves)
    fig, axes = plt.subplots(1, len(keys), figsize=(4.2 * len(keys), 3.8), squeeze=False)
    for ax, key in zip(axes[0], keys, strict=True):
        grid, res, full, n_full = curves[key]
        for policy in POLICIES:
            ax.plot(grid, [100 * res[policy, B] for B in grid], "o-", label=policy, ms=3)
        ax.plot(grid, [100 * res["PA-I", B] for B in grid], "k:", label="PA-I (random)")
        ax.axhline(100 * full, color="gray", ls="--", label=f"unbudgeted ({n_full} SVs)")
        ax.set_xscale("log")
        ax.set_xlabel("budget B (support vectors)")
        ax.set_ylabel("online mistake rate %")
        ax.set_title(f"{key[0]}, kernel {key[1]}")
        ax.grid(True, alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def throughput(args) -> str:
    rng = np.random.default_rng(0)
    B = args.tp_budget
    calls = args.tp_calls
    n = B + 16 + calls * max(args.tp_rounds, args.tp_cycle, 2 * args.batch)
    X = rng.normal(size=(n, 50))
    y = rng.integers(0, 2, size=n)
    policies = args.tp_policy.split(",")
    for p in policies:  # compile
        AROWClassifier(kernel="rbf", budget=50, budget_policy=p).fit(X[:300], y[:300])
    AROWClassifier(kernel="rbf").fit(X[:300], y[:300])
    full = AROWClassifier(kernel="rbf")
    buds = {
        p: _batched(AROWClassifier(kernel="rbf", budget=B, budget_policy=p), args) for p in policies
    }
    # past the budget first: the one-time switch of form (O(B^3)) is not timed
    warm = B + 16
    full.partial_fit(X[:warm], y[:warm], classes=[0, 1])
    for est in buds.values():
        est.partial_fit(X[:warm], y[:warm], classes=[0, 1])
    # the unbudgeted model grows past n_sv = B; the budgeted ones stay at B. Each model
    # learns `calls` consecutive calls: the first pays one-time costs (memory the
    # process touches for the first time, work buffers), the later ones are the
    # steady state a stream of calls sees
    full_t = _calls(full, X, y, warm, args.tp_rounds, calls)
    rows = [
        [
            f"unbudgeted, n_sv {warm} -> {full.n_support_}",
            f"{full_t[0] * 1e3:.3f}",
            _later(full_t, 1e3),
            "1",
            "1",
        ]
    ]
    for p, est in progress(buds.items(), desc="budget throughput", unit="policy"):
        # "oldest" amortises a refactorisation over cycles of B/2 removals: time cycles
        rounds = max(args.tp_rounds, args.tp_cycle) if p == "oldest" else args.tp_rounds
        if args.batch > 1:  # time whole prune cycles (q removals each)
            rounds = max(rounds, 2 * args.batch)
        t = _calls(est, X, y, warm, rounds, calls)
        first = full_t[0] / t[0]
        steady = median(full_t[1:]) / median(t[1:]) if calls > 1 else first
        rows.append(
            [
                f"budget {B} ({p}), every round removes; calls of {rounds} rounds",
                f"{t[0] * 1e3:.3f}",
                _later(t, 1e3),
                f"{first:.3f}",
                f"{steady:.3f} ({'met' if steady >= 0.25 else 'NOT met'}: goal >= 0.25)",
            ]
        )
    head = ["model", "first call: ms per round", "later calls: ms per round (median)",
            "speed relative to unbudgeted, first calls", "later calls"]  # fmt: skip
    return md_table(head, rows)


def _calls(est, X, y, start: int, rounds: int, calls: int) -> list[float]:
    """Seconds per round of each of ``calls`` consecutive partial_fit calls."""
    out = []
    for c in range(calls):
        lo = start + c * rounds
        time.sleep(0.3)
        t0 = time.perf_counter()
        est.partial_fit(X[lo : lo + rounds], y[lo : lo + rounds])
        out.append((time.perf_counter() - t0) / rounds)
    return out


def _later(t: list[float], scale: float) -> str:
    return f"{median(t[1:]) * scale:.3f}" if len(t) > 1 else "-"


def memory(args) -> str:
    rng = np.random.default_rng(1)
    n = args.mem_n
    X = rng.normal(size=(n, 50))
    y = rng.integers(0, 2, size=n)
    est = AROWClassifier(kernel="rbf", budget=args.mem_budget, budget_policy="oldest")
    rows = []
    marks = {2_000, 10_000, n}
    for lo in progress(range(0, n, 1000), desc="budget memory", unit="chunk"):
        est.partial_fit(X[lo : lo + 1000], y[lo : lo + 1000], classes=[0, 1])
        if lo + 1000 in marks:
            rss, hwm = _rss_mib()
            rows.append([lo + 1000, est.n_support_, f"{rss:.0f}", f"{hwm:.0f}"])
    return md_table(["rounds", "n_support_", "resident now (MiB)", "peak so far (MiB)"], rows)


def _rss_mib() -> tuple[float, float]:
    """(VmRSS, VmHWM) of this process in MiB (Linux /proc)."""
    vals = {}
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(("VmRSS:", "VmHWM:")):
                key, kb = line.split()[:2]
                vals[key] = int(kb) / 1024
    return vals["VmRSS:"], vals["VmHWM:"]


def main(argv=None):
    ap = argument_parser(__doc__)
    ap.add_argument("--parts", default="accuracy,throughput,memory")
    ap.add_argument("--data", default="magic,fashion")
    ap.add_argument("--stream", type=int, default=12000, help="rounds per data set")
    ap.add_argument("--budgets", default="25,50,100,200,500,1000")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tp-budget", type=int, default=4000)
    ap.add_argument("--tp-rounds", type=int, default=256)
    ap.add_argument("--tp-calls", type=int, default=5, help="consecutive calls timed per model")
    ap.add_argument(
        "--tp-cycle",
        type=int,
        default=2560,
        help="rounds timed for 'oldest': more than one rebuild cycle of its queue form "
        "(half the budget, plus a block), so the rebuilds are in the average",
    )
    ap.add_argument("--tp-policy", default="oldest,random", help="comma-separated policies")
    ap.add_argument(
        "--batch",
        type=int,
        default=1,
        help="budget_batch: support vectors pruned at once when the budget overflows",
    )
    ap.add_argument("--mem-n", type=int, default=50000)
    ap.add_argument("--mem-budget", type=int, default=1000)
    args = ap.parse_args(argv)
    parts = args.parts.split(",")
    if "accuracy" in parts:
        require_matplotlib(ap.prog, hint=", or leave accuracy out of --parts")
        text, curves = accuracy(args)
        RESULTS.mkdir(exist_ok=True)
        plot(curves, RESULTS / "budget_accuracy.png")
        body = (
            "Online mistake rate (%) against the budget. Kernel gamma = 1/d, default "
            "parameters; budgeted kernel PA-I with the random policy is the "
            "randomized-budget-perceptron-style baseline.\n\n"
            + text
            + "\n\n![mistake rate against budget](./budget_accuracy.png)\n"
        )
        path = write_result("budget_accuracy", "Budgets: online mistakes against the budget", body)
        print(path.read_text())
    if "throughput" in parts:
        body = (
            f"AROW, RBF, d = 50, random labels: {args.tp_calls} consecutive partial_fit "
            f"calls after the first {args.tp_budget + 16} rounds (the unbudgeted model: "
            f"calls of {args.tp_rounds} rounds, from n_sv = {args.tp_budget + 16}). The "
            "first call after that warm-up pays one-time costs; the later calls are what "
            "a stream of calls sees, and the goal is read from them.\n\n" + throughput(args) + "\n"
        )
        name = "budget_throughput" + (f"_batch{args.batch}" if args.batch > 1 else "")
        title = f"Budgets: throughput at B = {args.tp_budget}" + (
            f", budget_batch = {args.batch}" if args.batch > 1 else ""
        )
        path = write_result(name, title, body)
        print(path.read_text())
    if "memory" in parts:
        body = (
            "AROW, RBF, d = 50, random labels (every round updates and removes).\n\n"
            + memory(args)
            + "\n"
        )
        path = write_result(
            "budget_memory",
            f"Budgets: memory on a {args.mem_n}-round stream at B = {args.mem_budget}",
            body,
        )
        print(path.read_text())


if __name__ == "__main__":
    main()
