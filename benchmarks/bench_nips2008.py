"""NIPS 2008 Fig. 2: a 20-d synthetic stream, second-order against first-order online learners.

Reproduces the synthetic experiment of Crammer, Dredze & Pereira, *Exact convex
confidence-weighted learning*, NIPS 2008, section 5 and Fig. 2: 1,000 training
points in R^20 whose label depends on the first two coordinates only, learned in
one online pass (predict, then learn) by the Perceptron, PA, the second-order
perceptron (SOP), CW-Var and CW-Stdev (diagonal and full covariance), and, beside
them, SCW-I, SCW-II and AROW (which came after the paper).

The paper's description (paraphrased, as summarised in our issue #5)
--------------------------------------------------------------------
The first two coordinates come from a 45-degree rotated Gaussian distribution
with standard deviation 1, the other 18 from independent N(0, 2); the label
depends on the first two coordinates through a separator along the long axis of
the ellipse, so the set is linearly separable. Parameters were tuned on a
single similar data set. The paper reports the cumulative mistakes after 1,000
rounds: every second-order method under 80, the first-order ones at least 129,
and CW-Var 8% (diagonal) and 17% (full) more mistakes than CW-Stdev.

Decisions
---------
- **The ellipse.** A rotated Gaussian with a single standard deviation is round
  and has no "long axis", so one axis has std 1 and the other is not given. Two
  readings: (A) std 1 along the long axis, the short one much smaller; (B) std 1
  along the short axis, the long one larger. The short axis sets the margin
  against the noise coordinates and so the first-order learners' mistakes:
  under (A) with short std 0.1 the Perceptron and PA make about 460-470 mistakes
  (sensitivity table), some 3.6 times the paper's 129; under (B) they make about
  120-175 for any long-axis std from 2 to 5, near the paper's. We therefore take
  (B): ``--short-std 1``, and ``--long-std 3`` for the unspecified long axis (an
  elongated 3:1 ellipse). This choice of reading uses one reported number (the
  first-order count); the others (second-order counts, the CW-Var/CW-Stdev
  ratios) are then checked, not fitted. Coordinates: ``x_12 = z_long u +
  z_short w`` with ``u = (1, 1)/sqrt(2)``, ``w = (1, -1)/sqrt(2)``,
  ``z_long ~ N(0, long_std^2)``, ``z_short ~ N(0, short_std^2)``.
- **The label.** The separator is the line through the origin along ``u`` (the
  long axis): ``y = sign(z_short) = sign(w . x)``. Through the origin because
  none of the learners has a bias term and the paper calls the set linearly
  separable. No label noise.
- **N(0, 2).** Read as variance 2 (std sqrt(2)), the usual N(mean, variance)
  notation. The sensitivity table also runs std 2 (variance 4).
- **Runs.** 20 reported data sets (seeds ``seed .. seed + 19``), each streamed
  once in its generated order; the test error of each run's final model is
  measured on 10,000 fresh points of the same distribution. Mean and sample std
  (ddof = 1) over the runs.
- **Tuning.** The paper tuned "over a single similar data set"; we tune every
  parameter on ``--tune-runs 5`` further data sets (seeds ``seed + 1000 ..``,
  never reported), by the mean cumulative mistakes after the last round (ties:
  the first value of the grid), then run the 20 reported data sets with the
  chosen values. Grids (``learners()``): eta over 0.55 .. 0.99 for CW and SCW;
  C over 1e-3 .. 1e2 for SCW and PA-I; r for AROW and a for SOP over
  1e-5 .. 1e5 (half decades). ``a = 1`` (Sigma_1 = I) for the CW family:
  CW-Stdev's predictions do not depend on it (Lemma 3); for CW-Var, SCW and
  AROW a change of a is a change of eta, C or r
  (``tests/test_primal_reference.py::test_scale_invariance``). SOP's only
  parameter is a (the paper's a is 1 / a here). ``--single-tune K`` also tunes
  the four CW learners on K single data sets (seeds ``seed + 2000 ..``), as the
  paper did, to show how much its CW-Var/CW-Stdev ratios can move with the
  tuning set alone.
- **PA.** "PA" is PA-I with C tuned, the grid including C = infinity (plain PA,
  ``variant=0``). The Perceptron has no parameter (its predictions do not depend
  on a).
- **Diagonal CW.** ``diag_method="kl"`` (diagonalised precision update, the
  choice of JMLR 2012 section 6).

``--sensitivity`` repeats the whole protocol, tuning included, for other
readings: long-axis std 2, 5 and 10; noise coordinates with std 2; and reading
(A) with long std 1, short std 0.1.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from kernelcw import (
    AROWClassifier,
    CWClassifier,
    PAClassifier,
    PerceptronClassifier,
    SCWClassifier,
    SOPClassifier,
    run_online,
)

from ._common import (
    PAPERS,
    RESULTS,
    argument_parser,
    md_table,
    pyplot,
    require_matplotlib,
    write_result,
)

D = 20
ETAS = [0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 0.99]
CS = [1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0]
LOG_GRID = [float(10.0**k) for k in np.arange(-5.0, 5.01, 0.5)]


@dataclass(frozen=True)
class Learner:
    name: str
    make: Callable[..., object]
    grid: list[dict]
    first_order: bool
    paper: str  # what the paper reports for it (cumulative mistakes after 1,000 rounds)


def learners() -> list[Learner]:
    eta_grid = [{"eta": e} for e in ETAS]
    scw_grid = [{"eta": e, "C": c} for e in ETAS for c in CS]
    pa_grid = [{"variant": 0}] + [{"variant": 1, "C": c} for c in CS]
    return [
        Learner("Perceptron", PerceptronClassifier, [{}], True, ">= 129"),
        Learner("PA", PAClassifier, pa_grid, True, ">= 129"),
        Learner("SOP", SOPClassifier, [{"a": a} for a in LOG_GRID], False, "< 80"),
        Learner(
            "CW-Var (diag)",
            lambda **kw: CWClassifier(rule="var", covariance="diag", **kw),
            eta_grid,
            False,
            "< 80; 1.08 x CW-Stdev (diag)",
        ),
        Learner(
            "CW-Var (full)",
            lambda **kw: CWClassifier(rule="var", **kw),
            eta_grid,
            False,
            "< 80; 1.17 x CW-Stdev (full)",
        ),
        Learner(
            "CW-Stdev (diag)",
            lambda **kw: CWClassifier(rule="stdev", covariance="diag", **kw),
            eta_grid,
            False,
            "< 80",
        ),
        Learner(
            "CW-Stdev (full)",
            lambda **kw: CWClassifier(rule="stdev", **kw),
            eta_grid,
            False,
            "< 80",
        ),
        Learner("SCW-I", lambda **kw: SCWClassifier(variant=1, **kw), scw_grid, False, "-"),
        Learner("SCW-II", lambda **kw: SCWClassifier(variant=2, **kw), scw_grid, False, "-"),
        Learner("AROW", AROWClassifier, [{"r": r} for r in LOG_GRID], False, "-"),
    ]


# --------------------------------------------------------------------------- data


@dataclass(frozen=True)
class Setting:
    short_std: float = 1.0
    long_std: float = 3.0
    noise_std: float = math.sqrt(2.0)

    def describe(self) -> str:
        return (
            f"long-axis std {self.long_std:g}, short-axis std {self.short_std:g}, "
            f"noise std {self.noise_std:.3g} (variance {self.noise_std**2:.3g})"
        )


def make_data(seed: int, n: int, s: Setting) -> tuple[np.ndarray, np.ndarray]:
    """n points in R^20 (module docstring): labels +-1 from the short-axis coordinate."""
    rng = np.random.default_rng(seed)
    z_long = s.long_std * rng.standard_normal(n)
    z_short = s.short_std * rng.standard_normal(n)
    u = np.array([1.0, 1.0]) / math.sqrt(2.0)
    w = np.array([1.0, -1.0]) / math.sqrt(2.0)
    X = np.empty((n, D))
    X[:, :2] = z_long[:, None] * u + z_short[:, None] * w
    X[:, 2:] = s.noise_std * rng.standard_normal((n, D - 2))
    y = np.where(z_short >= 0.0, 1, -1)
    return X, y


# --------------------------------------------------------------------------- runs


def run_one(est, X, y, X_test=None, y_test=None):
    """(cumulative mistakes, test error or NaN, variance-floored rounds) of one pass."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # floored rounds are counted
        res = run_online(est, X, y)
    err = np.nan
    if X_test is not None:
        err = float(np.mean(res.estimator.predict(X_test) != y_test))
    return res.cumulative_mistakes, err, int(np.sum(res.estimator.n_variance_floored_))


def tune(learner: Learner, data: list, bar) -> tuple[dict, float]:
    """The grid point with the fewest mean mistakes over the tuning data sets."""
    best, best_score = learner.grid[0], math.inf
    for params in learner.grid:
        total = 0.0
        for X, y in data:
            total += run_one(learner.make(**PAPERS, **params), X, y)[0][-1]
            bar.update()
        score = total / len(data)
        if score < best_score:
            best, best_score = params, score
    return best, best_score


def evaluate(learner: Learner, params: dict, runs: list, bar) -> dict:
    curves, errs, floored = [], [], 0
    for X, y, X_te, y_te in runs:
        cm, err, fl = run_one(learner.make(**PAPERS, **params), X, y, X_te, y_te)
        curves.append(cm)
        errs.append(err)
        floored += fl
        bar.update()
    curves = np.array(curves)
    return {
        "params": params,
        "mistakes": curves[:, -1].astype(float),
        "test_error": np.array(errs),
        "floored": floored,
        "curve": curves.mean(axis=0),
    }


def reported_runs(s: Setting, args) -> list:
    runs = []
    for i in range(args.runs):
        X, y = make_data(args.seed + i, args.n_train, s)
        X_te, y_te = make_data(args.seed + 500_000 + i, args.n_test, s)
        runs.append((X, y, X_te, y_te))
    return runs


def protocol(s: Setting, args, bar) -> dict:
    """Tune on the tuning seeds, then run the reported seeds; one dict per learner."""
    tune_data = [make_data(args.seed + 1000 + i, args.n_train, s) for i in range(args.tune_runs)]
    runs = reported_runs(s, args)
    return {lr.name: evaluate(lr, tune(lr, tune_data, bar)[0], runs, bar) for lr in learners()}


CW_NAMES = ("CW-Var (diag)", "CW-Stdev (diag)", "CW-Var (full)", "CW-Stdev (full)")


def single_tune_ratios(s: Setting, args, bar) -> np.ndarray:
    """(K, 2) CW-Var / CW-Stdev mistake ratios (diag, full) on the reported runs, with
    the CW parameters tuned on one data set at a time (seeds seed + 2000 + k)."""
    runs = reported_runs(s, args)
    cw = [lr for lr in learners() if lr.name in CW_NAMES]
    out = []
    for k in range(args.single_tune):
        data = [make_data(args.seed + 2000 + k, args.n_train, s)]
        mean = {
            lr.name: evaluate(lr, tune(lr, data, bar)[0], runs, bar)["mistakes"].mean() for lr in cw
        }
        out.append(
            [
                mean["CW-Var (diag)"] / mean["CW-Stdev (diag)"],
                mean["CW-Var (full)"] / mean["CW-Stdev (full)"],
            ]
        )
    return np.array(out)


def n_jobs(args, n_settings: int) -> int:
    per_setting = sum(len(lr.grid) * args.tune_runs + args.runs for lr in learners())
    cw = sum(len(lr.grid) + args.runs for lr in learners() if lr.name in CW_NAMES)
    return per_setting * n_settings + cw * args.single_tune


# --------------------------------------------------------------------------- report

SECOND = ("SOP", "CW-Var (diag)", "CW-Var (full)", "CW-Stdev (diag)", "CW-Stdev (full)")
FIRST = ("Perceptron", "PA")


def _fmt_params(p: dict) -> str:
    if not p:
        return "-"
    if p.get("variant") == 0:
        return "C = inf (PA)"
    return ", ".join(f"{k} = {v:g}" for k, v in p.items() if k != "variant")


def _ms(x: np.ndarray, scale: float = 1.0, digits: int = 1) -> str:
    return f"{scale * x.mean():.{digits}f} ± {scale * x.std(ddof=1):.{digits}f}"


def main_table(res: dict) -> str:
    rows = []
    for lr in learners():
        r = res[lr.name]
        rows.append(
            [
                lr.name,
                _fmt_params(r["params"]),
                _ms(r["mistakes"]),
                lr.paper,
                _ms(r["test_error"], 100.0, 2),
                r["floored"],
            ]
        )
    return md_table(
        [
            "learner",
            "tuned parameters",
            "mistakes after 1,000 rounds (mean ± std)",
            "paper (Fig. 2)",
            "test error % (mean ± std)",
            "variance-floored rounds",
        ],
        rows,
    )


def cw_ratios(res: dict) -> tuple[float, float]:
    """CW-Var / CW-Stdev mean mistakes: (diag, full)."""
    return tuple(
        res[f"CW-Var ({c})"]["mistakes"].mean() / res[f"CW-Stdev ({c})"]["mistakes"].mean()
        for c in ("diag", "full")
    )


def claims_table(res: dict, spread: np.ndarray | None) -> str:
    second = {n: res[n]["mistakes"].mean() for n in SECOND}
    first = {n: res[n]["mistakes"].mean() for n in FIRST}
    worst = max(second, key=second.get)
    over = [f"{n} {v:.1f}" for n, v in second.items() if v >= 80.0]
    second_cell = f"{second[worst]:.1f} at most ({worst})"
    if over:
        second_cell += "; at or over 80: " + ", ".join(over)
    first_cell = ", ".join(f"{n} {v:.1f}" for n, v in first.items())
    under = [f"{n} {v:.1f}" for n, v in first.items() if v < 129.0]
    if under:
        first_cell += "; under 129: " + ", ".join(under)
    rows = [
        ["every second-order method (SOP, CW-Var, CW-Stdev) makes fewer than", "80", second_cell],
        ["first-order methods (Perceptron, PA) make at least", "129", first_cell],
    ]
    for (cov, paper), ours in zip((("diag", 1.08), ("full", 1.17)), cw_ratios(res), strict=True):
        cell = f"{ours:.2f}"
        if spread is not None and len(spread):
            col = spread[:, 0 if cov == "diag" else 1]
            cell += (
                f" (tuned on one data set, {len(col)} choices: {col.min():.2f} .. "
                f"{col.max():.2f}, median {np.median(col):.2f})"
            )
        rows.append([f"CW-Var / CW-Stdev mistakes, {cov}", f"{paper:.2f}", cell])
    return md_table(["claim of the paper (Fig. 2)", "paper", "ours"], rows)


def _pct(ours: float, paper: float) -> str:
    return f"{100.0 * (ours - paper) / paper:+.0f}%"


def differences(results: dict, spread: np.ndarray | None) -> list[str]:
    """Where the main run differs from the paper, by how much, and the evidence for why."""
    res = results["main"]
    m = {n: res[n]["mistakes"].mean() for n in res}
    lines = ["## Where we differ from the paper, and why", ""]
    first = ", ".join(f"{n} {m[n]:.1f} ({_pct(m[n], 129.0)} against 129)" for n in FIRST)
    lines.append(
        f"- **First-order counts** ({first}). They are set by the short-axis std against the "
        "noise, which the paper does not give; we chose the reading under which they land near "
        "129 (module docstring), so their agreement is by construction, not a confirmation."
    )
    second_over = [n for n in SECOND if m[n] >= 80.0]
    diag = ", ".join(f"{n.split()[0]} {m[n]:.1f}" for n in SECOND if "diag" in n)
    text = (
        f"- **Second-order counts.** SOP {m['SOP']:.1f}, full CW-Var {m['CW-Var (full)']:.1f} "
        f"and CW-Stdev {m['CW-Stdev (full)']:.1f}; diagonal: {diag}. "
    )
    if second_over:
        text += (
            f"Over the paper's 80: {', '.join(second_over)} "
            f"({', '.join(_pct(m[n], 80.0) for n in second_over)}). "
        )
    text += (
        "A diagonal covariance cannot hold the correlation of x1 and x2 that the 45-degree "
        "rotation creates, so the diagonal learners pay for the elongation of the ellipse, "
        "which the paper does not give either"
    )
    if "long std 10" in results:
        cols = [("long std 2", "2"), ("main", "3"), ("long std 5", "5"), ("long std 10", "10")]
        path = " -> ".join(
            f"{results[c]['CW-Stdev (diag)']['mistakes'].mean():.0f}" for c, _ in cols
        )
        full = " -> ".join(
            f"{results[c]['CW-Stdev (full)']['mistakes'].mean():.0f}" for c, _ in cols
        )
        text += (
            f": CW-Stdev (diag) makes {path} mistakes as the long-axis std goes "
            f"{' -> '.join(k for _, k in cols)}, while CW-Stdev (full) makes {full}"
        )
    lines.append(text + ".")
    ratio = cw_ratios(res)
    text = (
        f"- **CW-Var against CW-Stdev.** Ours {ratio[0]:.2f} (diag) and {ratio[1]:.2f} (full), "
        f"the paper's 1.08 and 1.17 ({_pct(ratio[0], 1.08)}, {_pct(ratio[1], 1.17)} in the "
        "ratio). "
    )
    worse = [c for c, r in zip(("diag", "full"), ratio, strict=True) if r > 1.0]
    if len(worse) == 2:
        text += "CW-Var makes more mistakes than CW-Stdev in both forms, as in the paper. "
    else:
        text += f"CW-Var makes more mistakes than CW-Stdev only in: {', '.join(worse) or 'none'}. "
    if spread is not None and len(spread):
        inside = [
            lo <= paper <= hi
            for lo, hi, paper in zip(
                spread.min(axis=0), spread.max(axis=0), (1.08, 1.17), strict=True
            )
        ]
        text += (
            f"The size of the gap depends on the tuning: the paper tuned on a single data set, "
            f"and tuning the four CW learners on each of {len(spread)} single data sets in turn "
            f"moves the ratios on the same reported runs over {spread[:, 0].min():.2f} .. "
            f"{spread[:, 0].max():.2f} (diag) and {spread[:, 1].min():.2f} .. "
            f"{spread[:, 1].max():.2f} (full). "
        )
        if all(inside):
            text += "Both of the paper's ratios lie inside these ranges."
        else:
            which = [c for c, ok in zip(("diag", "full"), inside, strict=True) if not ok]
            text += f"The paper's {' and '.join(which)} ratio lies outside them."
    lines.append(text)
    return lines + [""]


def plot(res: dict, s: Setting, args, path) -> None:
    plt = pyplot()

    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(12, 5), gridspec_kw={"width_ratios": [1, 1.6]})
    X, y = make_data(args.seed, args.n_train, s)
    ax0.scatter(X[y > 0, 0], X[y > 0, 1], s=4, c="tab:blue", label="y = +1")
    ax0.scatter(X[y < 0, 0], X[y < 0, 1], s=4, c="tab:red", label="y = -1")
    ax0.set_aspect("equal")
    ax0.set_xlabel("x1")
    ax0.set_ylabel("x2")
    ax0.set_title("first two coordinates (one data set)")
    ax0.legend(loc="upper left", markerscale=3)
    rounds = np.arange(1, args.n_train + 1)
    for lr in learners():
        style = "--" if lr.first_order else (":" if "diag" in lr.name else "-")
        ax1.plot(rounds, res[lr.name]["curve"], style, label=lr.name)
    ax1.set_xlabel("round")
    ax1.set_ylabel(f"cumulative mistakes (mean of {args.runs} runs)")
    ax1.set_title("online mistakes (parameters tuned on other data sets)")
    ax1.grid(alpha=0.3)
    ax1.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


SENSITIVITY = [
    ("long std 2", Setting(long_std=2.0)),
    ("long std 5", Setting(long_std=5.0)),
    ("long std 10", Setting(long_std=10.0)),
    ("noise std 2", Setting(noise_std=2.0)),
    ("reading (A): long 1, short 0.1", Setting(long_std=1.0, short_std=0.1)),
]


def sensitivity_table(results: dict, labels: list[str]) -> str:
    rows = [
        [lr.name] + [f"{results[lab][lr.name]['mistakes'].mean():.1f}" for lab in labels]
        for lr in learners()
    ]
    for i, cov in enumerate(("diag", "full")):
        rows.append(
            [f"CW-Var / CW-Stdev, {cov}"] + [f"{cw_ratios(results[lab])[i]:.2f}" for lab in labels]
        )
    return md_table(["mean mistakes after the last round"] + labels, rows)


def reading(s: Setting, args) -> list[str]:
    """How the paper's loose description was read (the module docstring says why)."""
    return [
        "## How we read the paper's description",
        "",
        f"- **The ellipse.** The paper gives one std (1) for a 45-degree rotated Gaussian that "
        f"has a long axis. We read it as the short axis's std and take {s.long_std:g} for the "
        f"long axis, which the paper does not give (here: short {s.short_std:g}, long "
        f"{s.long_std:g}). The other reading, std 1 along the long axis and a short one much "
        "smaller, makes the first-order learners err some 3.6 times the paper's 129 (the last "
        "column of the last table, when run with `--sensitivity`).",
        "- **The label** is the side of the separator along the long axis, through the origin "
        "(the learners have no bias; the paper calls the set linearly separable): "
        "y = sign(w . x) with w = (1, -1)/sqrt(2). No label noise.",
        f"- **N(0, 2)** is read as variance 2: noise std {s.noise_std:.3g}.",
        f"- **Tuning.** The paper tuned on a single similar data set; we tune every parameter on "
        f"{args.tune_runs} other data sets (mean mistakes; grids in the module docstring of "
        f"`benchmarks/bench_nips2008.py`), then report {args.runs} fresh ones."
        + (
            f" `--single-tune {args.single_tune}` also tunes the CW learners on single data "
            "sets, as the paper did, to show how far that alone moves their ratios."
            if args.single_tune
            else ""
        ),
        "- **PA** is PA-I with C tuned, plain PA (C = infinity) in the grid; **diagonal CW** "
        "uses the KL diagonalisation (JMLR 2012 section 6).",
        "",
    ]


def main(argv: list[str] | None = None) -> None:
    ap = argument_parser(__doc__)
    ap.add_argument("--runs", type=int, default=20, help="reported data sets")
    ap.add_argument("--tune-runs", type=int, default=5, help="tuning data sets (other seeds)")
    ap.add_argument("--n-train", type=int, default=1000, help="rounds per data set")
    ap.add_argument("--n-test", type=int, default=10000, help="fresh test points per run")
    ap.add_argument("--short-std", type=float, default=1.0, help="std along the short axis")
    ap.add_argument("--long-std", type=float, default=3.0, help="std along the long axis")
    ap.add_argument(
        "--noise-std", type=float, default=math.sqrt(2.0), help="std of the 18 noise coordinates"
    )
    ap.add_argument("--seed", type=int, default=0, help="first reported seed")
    ap.add_argument(
        "--sensitivity", action="store_true", help="also rerun the protocol for other readings"
    )
    ap.add_argument(
        "--single-tune",
        type=int,
        default=0,
        metavar="K",
        help="also tune the CW learners on K single data sets, as the paper did",
    )
    ap.add_argument("--name", default="nips2008", help="results/<name>.md and .png")
    args = ap.parse_args(argv)
    require_matplotlib(ap.prog)
    from tqdm.auto import tqdm

    main_setting = Setting(args.short_std, args.long_std, args.noise_std)
    settings = [("main", main_setting)] + (SENSITIVITY if args.sensitivity else [])
    with tqdm(total=n_jobs(args, len(settings)), desc="nips2008 runs") as bar:
        results = {label: protocol(s, args, bar) for label, s in settings}
        spread = single_tune_ratios(main_setting, args, bar) if args.single_tune else None

    res = results["main"]
    RESULTS.mkdir(exist_ok=True)
    png = RESULTS / f"{args.name}.png"
    plot(res, main_setting, args, png)
    body = [
        f"Data: {main_setting.describe()}; {args.n_train} rounds, one online pass per data set; "
        f"{args.runs} reported data sets (seeds {args.seed}..{args.seed + args.runs - 1}), "
        f"test error on {args.n_test:,} fresh points each; parameters tuned on "
        f"{args.tune_runs} other data sets (seeds {args.seed + 1000}..). How the paper's "
        "description was read is the next section; why, with the evidence, is in the module "
        "docstring of `benchmarks/bench_nips2008.py`.",
        "",
        *reading(main_setting, args),
        "## Results",
        "",
        main_table(res),
        "",
        '"paper" is what the text of its Fig. 2 reports (cumulative mistakes after 1,000 '
        "rounds); SCW-I, SCW-II and AROW were published after it, and it reports no test "
        "error for this experiment.",
        "",
        claims_table(res, spread),
        "",
        f"![cumulative mistakes]({png.name})",
        "",
        *differences(results, spread),
    ]
    if args.sensitivity:
        labels = [label for label, _ in settings]
        body += [
            "## Other readings of the description",
            "",
            'The whole protocol, tuning included, rerun for each column ("main" is the '
            "table above; each column changes one thing from it, except reading (A)).",
            "",
            sensitivity_table(results, labels),
            "",
        ]
    path = write_result(
        args.name, "NIPS 2008 Fig. 2 reproduction: synthetic 20-d stream", "\n".join(body)
    )
    print(path.read_text())


if __name__ == "__main__":
    main()
