"""The ``kernelcw`` command line: run the online protocol on a data set and compare learners.

``kernelcw run`` predicts each example with the current model, then learns from it
(progressive validation), for one or several algorithms side by side, and prints
one row per algorithm: mistakes, mistake rate, updates, support size and time.
See ``kernelcw run --help``.

Everything heavy (scikit-learn's data sets, matplotlib) is imported only when needed.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import sys
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from . import __version__
from .datasets import BUILTIN, DEFAULT, Dataset, DatasetError

__all__ = ["ALGORITHMS", "DEFAULT_ALGORITHMS", "main", "plot_mistakes"]

PROG = "kernelcw"

#: Streams longer than this show a progress bar unless ``--no-progress``.
PROGRESS_THRESHOLD = 5000

#: ``--covariance full`` is refused when the covariance matrices would need more bytes.
FULL_COVARIANCE_LIMIT = 2 * 2**30


@dataclass(frozen=True)
class Algorithm:
    """How one command-line name maps to an estimator."""

    estimator: str  # class name in kernelcw.estimators
    fixed: dict  # constructor arguments that define this algorithm
    params: tuple[str, ...]  # the rule's own parameters the options may set
    summary: str
    first_order: bool = False  # keeps Sigma = a I: --covariance only changes the bookkeeping


#: Command-line names, in the order ``-a all`` runs them.
ALGORITHMS: dict[str, Algorithm] = {
    "cw-stdev": Algorithm(
        "CWClassifier", {"rule": "stdev"}, ("eta",), "CW-Stdev, exact convex CW (NIPS 2008)"
    ),
    "cw-var": Algorithm(
        "CWClassifier", {"rule": "var"}, ("eta",), "CW-Var, the linearised CW (ICML 2008)"
    ),
    "scw1": Algorithm("SCWClassifier", {"variant": 1}, ("eta", "C"), "SCW-I, soft CW (ICML 2012)"),
    "scw2": Algorithm("SCWClassifier", {"variant": 2}, ("eta", "C"), "SCW-II, soft CW (ICML 2012)"),
    "arow": Algorithm("AROWClassifier", {}, ("r",), "AROW (NIPS 2009)"),
    "sop": Algorithm("SOPClassifier", {}, (), "the second-order perceptron (SIAM J. Comput. 2005)"),
    "pa": Algorithm(
        "PAClassifier", {"variant": 0}, (), "passive-aggressive PA (JMLR 2006)", first_order=True
    ),
    "pa1": Algorithm("PAClassifier", {"variant": 1}, ("C",), "PA-I", first_order=True),
    "pa2": Algorithm("PAClassifier", {"variant": 2}, ("C",), "PA-II", first_order=True),
    "perceptron": Algorithm("PerceptronClassifier", {}, (), "the Perceptron", first_order=True),
}

DEFAULT_ALGORITHMS = ("cw-stdev", "cw-var", "scw1", "scw2", "arow", "pa1", "perceptron")

# The rule parameters the options set: constructor argument (= option dest) -> option.
_RULE_OPTIONS = {"eta": "--eta", "C": "--C", "r": "--r"}


class CLIError(Exception):
    """A usage or data problem: reported as one line on stderr, exit code 2."""


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (the usage of ``run`` is long)."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


# ------------------------------------------------------------------------------ parser


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least 1")
    return value


def _seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if not 0 <= value < 2**32:
        raise argparse.ArgumentTypeError(f"{text!r} must lie in [0, 2**32)")
    return value


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None


def _algorithm_help() -> str:
    width = max(map(len, ALGORITHMS)) + 2
    lines = ["algorithms (-a NAME; the options each one takes besides --a, --covariance, "]
    lines[0] += "--diag-method):"
    for name, alg in ALGORITHMS.items():
        opts = ", ".join(_RULE_OPTIONS[p] for p in alg.params)
        lines.append(f"  {name:<{width}}{alg.summary}" + (f" [{opts}]" if opts else ""))
    lines.append(f"  {'all':<{width}}every algorithm above")
    lines.append(f"  default: {','.join(DEFAULT_ALGORITHMS)}")
    return "\n".join(lines)


def _dataset_help() -> str:
    width = max(map(len, BUILTIN)) + 2
    lines = ["built-in data sets (--dataset NAME; bundled with scikit-learn, no network):"]
    lines += [f"  {name:<{width}}{text}" for name, text in BUILTIN.items()]
    return "\n".join(lines)


_COLUMNS_HELP = """\
output columns:
  mistakes   wrong predictions, each made before learning from that example
  rate (%)   mistakes / examples
  updates    rounds that changed the model (summed over the one-vs-rest models
             when there are more than two classes)
  support    support vectors kept by the dual (kernel) engine (summed over the
             one-vs-rest models, each of which keeps its own); "-" for primal
             models, which keep weights instead
  seconds    wall-clock time of the pass; an untimed warm-up on the first 64
             examples loads the compiled code first, so the first algorithm
             is not penalised"""

_EXAMPLES = """\
examples:
  kernelcw run
  kernelcw run -a scw1 -a arow --eta 0.9 --plot mistakes.png
  kernelcw run --dataset digits --algorithms cw-stdev,pa1 --covariance diag --json
  kernelcw run --data rcv1.svm.bz2 --covariance diag --shuffle --seed 0"""


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``kernelcw`` and its ``run`` command."""
    parser = _Parser(
        prog=PROG,
        description=(
            "Online confidence-weighted learning (CW, SCW, AROW, SOP, PA, Perceptron):\n"
            "run the online protocol on a data set and compare the learners."
        ),
        epilog="Run 'kernelcw run --help' for the options of 'run'.\n\n" + _EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    run = commands.add_parser(
        "run",
        help="run the online protocol (predict, then learn) with one or more algorithms",
        description=(
            "Run the online protocol on a data set: each example is predicted with the\n"
            "current model, then learned from, in one pass. One row per algorithm is\n"
            "printed. Omitted parameters take each estimator's own default."
        ),
        epilog="\n\n".join([_algorithm_help(), _dataset_help(), _COLUMNS_HELP, _EXAMPLES]),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )

    g = run.add_argument_group("algorithms and their parameters")
    g.add_argument(
        "-a",
        "--algorithms",
        action="append",
        metavar="NAMES",
        help="algorithm(s) to run: repeat the option or separate names with commas; "
        "'all' runs every one (default: the seven listed below)",
    )
    g.add_argument(
        "--eta",
        type=_number,
        help="confidence: probability of a correct prediction the update enforces, in "
        "(0.5, 1) (cw-stdev, cw-var, scw1, scw2; defaults 0.7 for CW, 0.75 for SCW-I, "
        "0.9 for SCW-II)",
    )
    g.add_argument(
        "--C",
        type=_number,
        help="aggressiveness > 0 (scw1, scw2, pa1, pa2; default 1)",
    )
    g.add_argument(
        "--r",
        type=_number,
        help="AROW's regularisation > 0, larger is more conservative (default 1)",
    )
    g.add_argument(
        "--a",
        type=_number,
        metavar="A",
        help="initial covariance Sigma = A * I, > 0 (every algorithm; default 1)",
    )
    g.add_argument(
        "--covariance",
        choices=("full", "diag"),
        help="full d x d covariance (the papers' algorithms, O(d^2) memory; the default) "
        "or diagonal (O(d), for high-dimensional sparse data)",
    )
    g.add_argument(
        "--diag-method",
        choices=("kl", "l2", "exact"),
        help="how the diagonal covariance is kept: diagonalised precision (kl, the "
        "default), diagonalised covariance (l2), or exact",
    )

    g = run.add_argument_group("kernel (a non-linear kernel learns in the dual form)")
    g.add_argument(
        "--kernel",
        choices=("linear", "rbf", "poly", "laplacian"),
        help="k(x, z): linear (the default; primal), rbf exp(-gamma |x-z|^2), poly "
        "(gamma x.z + coef0)^degree, laplacian exp(-gamma |x-z|_1)",
    )
    g.add_argument(
        "--gamma", type=_number, help="kernel width > 0 (default 1 / number of features)"
    )
    g.add_argument("--degree", type=_positive_int, help="poly degree, an integer >= 1 (default 3)")
    g.add_argument("--coef0", type=_number, help="poly constant (default 0)")
    g.add_argument(
        "--solver",
        choices=("cholesky", "explicit"),
        help="dual solver: the blocked append-only Cholesky form (the default) or the "
        "papers' explicit nu/Pi recursion",
    )
    g.add_argument(
        "--dual",
        action="store_true",
        help="learn a linear kernel in the dual form too (mode='dual'; same results)",
    )
    g.add_argument(
        "--budget",
        type=_positive_int,
        metavar="B",
        help="keep at most B support vectors (dual form; bounded memory and time per round)",
    )
    g.add_argument(
        "--budget-policy",
        choices=("project", "oldest", "random", "smallest"),
        help="which support vector leaves at the budget (default project: the one whose "
        "projection onto the others moves the model least, and its weight is projected "
        "onto them)",
    )

    g = run.add_argument_group("data")
    src = g.add_mutually_exclusive_group()
    src.add_argument(
        "--dataset",
        choices=tuple(BUILTIN),
        metavar="NAME",
        help=f"a built-in data set: {', '.join(BUILTIN)} (default: {DEFAULT})",
    )
    src.add_argument(
        "--data",
        metavar="FILE",
        help="a LIBSVM/svmlight file ('label index:value ...' per line; .gz/.bz2 too), "
        "read as a sparse matrix",
    )
    g.add_argument("--limit", type=_positive_int, metavar="N", help="use only the first N examples")
    g.add_argument(
        "--shuffle",
        action="store_true",
        help="shuffle the stream once before the run (then --limit takes the first N)",
    )
    g.add_argument(
        "--seed",
        type=_seed,
        help="seed of --shuffle (needs --shuffle; default: a random seed, printed so the "
        "run can be repeated)",
    )
    g.add_argument(
        "--scale",
        choices=("none", "standard"),
        help="standard: z-score every feature with the mean and standard deviation of the "
        "whole stream (after --limit), as the papers preprocess their data; sparse data "
        "are only divided by the standard deviation, to stay sparse. Default: standard "
        "for built-in data, none for --data files (LIBSVM files usually come scaled)",
    )

    g = run.add_argument_group("output")
    g.add_argument("--json", action="store_true", help="print the results as JSON instead")
    g.add_argument(
        "--plot",
        metavar="FILE",
        help="draw the cumulative-mistake curves to FILE (.png, .pdf, .svg, ...)",
    )
    g.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help=f"progress bar on stderr (default: only for streams over "
        f"{PROGRESS_THRESHOLD} examples)",
    )
    return parser


# ------------------------------------------------------------------------------ the run


@dataclass
class RunResult:
    """One algorithm's row of the table."""

    algorithm: str
    mistakes: int
    mistake_rate: float
    updates: int | None
    support: int | None
    seconds: float
    params: dict
    curve: np.ndarray = field(repr=False)


def parse_algorithms(values: Sequence[str] | None) -> list[str]:
    """Names from repeated/comma-separated ``-a`` values, in order, without repeats."""
    if not values:
        return list(DEFAULT_ALGORITHMS)
    # Case, "-" and "_" do not matter: "SCW-1", "cw_stdev" and "pa1" all work.
    canonical = {a.replace("-", ""): a for a in ALGORITHMS}
    names: list[str] = []
    for value in values:
        for raw in value.split(","):
            name = raw.strip().lower()
            if not name:
                continue
            key = name.replace("-", "").replace("_", "")
            if name == "all":
                chosen = list(ALGORITHMS)
            elif key in canonical:
                chosen = [canonical[key]]
            else:
                close = [a for a in ALGORITHMS if a.startswith(name)]
                close = close or difflib.get_close_matches(name, list(ALGORITHMS), n=1)
                hint = f" (did you mean {' or '.join(map(repr, close))}?)" if close else ""
                raise CLIError(
                    f"unknown algorithm {raw.strip()!r}{hint}; choose from "
                    f"{', '.join(ALGORITHMS)}, all"
                )
            names += [c for c in chosen if c not in names]
    if not names:
        raise CLIError("no algorithm given to -a/--algorithms")
    return names


def make_estimator(name: str, args: argparse.Namespace):
    """The unfitted estimator for ``name`` with the options the user gave."""
    from . import estimators

    alg = ALGORITHMS[name]
    kwargs = dict(alg.fixed)
    for p in alg.params:
        value = getattr(args, p, None)
        if value is not None:
            kwargs[p] = value
    for p in (
        "a",
        "covariance",
        "diag_method",
        "kernel",
        "gamma",
        "degree",
        "coef0",
        "solver",
        "budget",
        "budget_policy",
    ):
        value = getattr(args, p, None)
        if value is not None:
            kwargs[p] = value
    if getattr(args, "dual", False):
        kwargs["mode"] = "dual"
    return getattr(estimators, alg.estimator)(**kwargs)


def _is_dual(est) -> bool:
    params = est.get_params()
    return (
        params.get("kernel") != "linear"
        or params.get("mode") == "dual"
        or params.get("budget") is not None
    )


def _unused_options(args: argparse.Namespace) -> list[str]:
    """Options the user gave that this run does not use (kernel, solver and budget ones)."""
    kernel = args.kernel or "linear"
    dual = kernel != "linear" or args.dual or args.budget is not None
    uses = {
        "gamma": kernel in ("rbf", "poly", "laplacian"),
        "degree": kernel == "poly",
        "coef0": kernel == "poly",
        "solver": dual,
        "budget_policy": args.budget is not None,
        "diag_method": args.covariance == "diag" and not dual,
    }
    why = {
        "gamma": f"the {kernel} kernel has no width",
        "degree": f"only the poly kernel has a degree (this run: {kernel})",
        "coef0": f"only the poly kernel has a constant (this run: {kernel})",
        "solver": "the solver is the dual form's, and this run is primal (linear kernel, "
        "no --budget, no --dual)",
        "budget_policy": "there is no --budget",
        "diag_method": "it needs --covariance diag in the primal form",
    }
    return [
        f"--{p.replace('_', '-')} does not apply: {why[p]}"
        for p, used in uses.items()
        if getattr(args, p, None) is not None and not used
    ]


def _check_parameters(estimators: dict) -> None:
    """Fit each estimator on a 2 x 1 problem, so bad parameters fail before any data work."""
    from sklearn.base import clone

    X = np.array([[1.0], [-1.0]])
    y = np.array([0, 1])
    errors = {}
    for name, est in estimators.items():
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                clone(est).fit(X, y)
        except ValueError as e:
            errors[name] = str(e)
    if errors:
        name, message = next(iter(errors.items()))
        if len(errors) == len(estimators) > 1 and len(set(errors.values())) == 1:
            raise CLIError(message)  # an option every algorithm shares: no one to name
        raise CLIError(f"{name}: {message}")


def _warm_up(est, X, y, classes) -> None:
    """Learn from the first rows of X, untimed, so the timed run excludes one-off costs.

    The first call loads the compiled (numba) code and starts the BLAS threads;
    without this the first algorithm of the table would look slower than it is.
    Wide data is cut to 64 columns (the compiled code does not depend on the width).
    """
    from sklearn.base import clone

    d = X.shape[1]
    k = d if _full_covariance_bytes(d, len(classes)) <= 2**28 else min(d, 64)
    rows = X[:64, :k] if sp.issparse(X) else np.ascontiguousarray(X[:64, :k])
    warm = clone(est)
    budget = warm.get_params().get("budget")
    if budget is not None:  # a small budget binds within the warm-up: its code loads too
        warm.set_params(budget=min(budget, 8))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            warm.partial_fit(rows, y[:64], classes=classes)
    except (ValueError, FloatingPointError):
        pass  # the real run reports it


def _full_covariance_bytes(n_features: int, n_classes: int) -> int:
    models = 1 if n_classes <= 2 else n_classes
    return models * n_features * n_features * 8


def _count(value) -> int | None:
    if value is None:
        return None
    try:
        return int(np.sum(value))
    except (TypeError, ValueError):
        return None


def _support_size(est) -> int | None:
    """``n_support_`` of a dual-engine model (summed over classes), else None."""
    try:
        value = getattr(est, "n_support_", None)
    except (AttributeError, ValueError):  # e.g. a property of an unfitted model
        return None
    return _count(value)


def _prepare(data: Dataset, args: argparse.Namespace) -> tuple[Dataset, dict]:
    """Shuffle, limit and scale; returns the stream and a description of what was done."""
    X, y = data.X, data.y
    n_total = data.n_samples
    info: dict = {"n_total": n_total, "seed": None}
    if args.shuffle:
        seed = args.seed
        if seed is None:
            seed = int(np.random.SeedSequence().entropy % 2**32)
        order = np.random.default_rng(seed).permutation(n_total)
        X, y = X[order], y[order]
        info["seed"] = seed
    if args.limit is not None and args.limit < n_total:
        X, y = X[: args.limit], y[: args.limit]
    scale = args.scale or ("standard" if args.data is None else "none")
    info["scale"] = scale
    if scale == "standard":
        from sklearn.preprocessing import StandardScaler

        X = StandardScaler(with_mean=not data.sparse).fit_transform(X)
    return Dataset(name=data.name, X=X, y=y, source=data.source), info


def _load(args: argparse.Namespace) -> Dataset:
    from . import datasets

    try:
        if args.data is not None:
            return datasets.load_svmlight(args.data)
        return datasets.load_builtin(args.dataset or DEFAULT)
    except DatasetError as e:
        raise CLIError(str(e)) from None


def _check_plot_path(path: str) -> None:
    from matplotlib.backend_bases import FigureCanvasBase

    ext = os.path.splitext(path)[1].lstrip(".").lower()
    formats = FigureCanvasBase.get_supported_filetypes()
    if ext not in formats:
        raise CLIError(
            f"--plot {path!r}: cannot tell the image format from the extension; use one of "
            + ", ".join("." + f for f in sorted(formats))
        )
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise CLIError(f"--plot {path!r}: folder {folder!r} does not exist")


def plot_mistakes(curves: dict[str, np.ndarray], path: str, *, title: str) -> None:
    """Draw cumulative-mistake curves (x: examples seen, y: cumulative mistakes) to ``path``.

    Uses matplotlib's Agg canvas directly, so no GUI backend is touched and the
    global pyplot state is left alone. Long curves are thinned to ~5000 points
    (they are monotone, so the picture is the same).
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 5), dpi=120, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    styles = ("-", "--", "-.", ":")
    for i, (label, cum) in enumerate(curves.items()):
        cum = np.asarray(cum)
        x = np.arange(1, cum.size + 1)
        if cum.size > 5000:
            keep = np.unique(np.linspace(0, cum.size - 1, 5000).astype(np.int64))
            x, cum = x[keep], cum[keep]
        last = int(cum[-1]) if cum.size else 0
        ax.plot(x, cum, linestyle=styles[i % len(styles)], linewidth=1.6, label=f"{label} ({last})")
    ax.set_xlabel("examples seen")
    ax.set_ylabel("cumulative mistakes")
    ax.set_title(title)
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend(title="algorithm (mistakes)", loc="upper left", fontsize="small")
    fig.savefig(path)


def _covariance_summary(estimators: dict) -> str:
    """How the second-order algorithms keep Sigma, e.g. "full" or "diag (kl)"; "" if none do."""
    groups: dict[str, list[str]] = {}
    for name, est in estimators.items():
        params = est.get_params()
        if _is_dual(est):
            kind = f"dual, kernel {params.get('kernel')}"
            if not ALGORITHMS[name].first_order:
                kind += f" ({params.get('solver')})"
            if params.get("budget") is not None:
                kind += f", budget {params['budget']} ({params.get('budget_policy')})"
            groups.setdefault(kind, []).append(name)
            continue
        if ALGORITHMS[name].first_order:
            continue  # Sigma = a I throughout: nothing to report
        kind = str(params.get("covariance"))
        if kind == "diag":
            kind += f" ({params.get('diag_method')})"
        groups.setdefault(kind, []).append(name)
    if len(groups) <= 1:
        return next(iter(groups), "")
    return ", ".join(f"{kind} for {', '.join(names)}" for kind, names in groups.items())


def _fmt_table(results: list[RunResult]) -> str:
    head = ("algorithm", "mistakes", "rate (%)", "updates", "support", "seconds")
    rows = [
        (
            r.algorithm,
            str(r.mistakes),
            f"{100 * r.mistake_rate:.2f}",
            "-" if r.updates is None else str(r.updates),
            "-" if r.support is None else str(r.support),
            f"{r.seconds:.3f}",
        )
        for r in results
    ]
    widths = [max(len(row[i]) for row in [head, *rows]) for i in range(len(head))]

    def line(cells):
        first = cells[0].ljust(widths[0])
        rest = [c.rjust(w) for c, w in zip(cells[1:], widths[1:], strict=True)]
        return "  ".join([first, *rest])

    return "\n".join([line(head), line(["-" * w for w in widths]), *map(line, rows)])


def _json_default(obj):
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    return repr(obj)


def _run(args: argparse.Namespace) -> int:
    from .online import run_online

    names = parse_algorithms(args.algorithms)
    if args.seed is not None and not args.shuffle:
        raise CLIError("--seed only applies with --shuffle")
    for p, option in _RULE_OPTIONS.items():
        if getattr(args, p) is not None and not any(p in ALGORITHMS[n].params for n in names):
            print(
                f"{PROG} run: note: {option} does not apply to {', '.join(names)}; ignored",
                file=sys.stderr,
            )
    for note in _unused_options(args):
        print(f"{PROG} run: note: {note}; ignored", file=sys.stderr)
    estimators = {name: make_estimator(name, args) for name in names}
    _check_parameters(estimators)
    if args.plot:
        _check_plot_path(args.plot)

    data, info = _prepare(_load(args), args)
    n, d = data.n_samples, data.n_features
    classes = data.classes
    if classes.size < 2:
        hint = ""
        if n < info["n_total"] and not args.shuffle:
            hint = " (add --shuffle to mix the rows before --limit takes the first ones)"
        raise CLIError(
            f"{data.name}: the stream holds only one class ({classes[0]}); "
            f"a classifier needs two{hint}"
        )
    full = [
        nm
        for nm, est in estimators.items()
        if est.get_params().get("covariance") == "full" and not _is_dual(est)
    ]
    need = _full_covariance_bytes(d, classes.size)
    if full and need > FULL_COVARIANCE_LIMIT:
        models = 1 if classes.size <= 2 else classes.size
        raise CLIError(
            f"covariance 'full' would need {need / 2**30:.1f} GiB ({models} model(s) x "
            f"{d}^2 doubles) for {d} features; use --covariance diag"
        )
    progress = args.progress if args.progress is not None else n > PROGRESS_THRESHOLD

    results: list[RunResult] = []
    for name, est in estimators.items():
        _warm_up(est, data.X, data.y, classes)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                res = run_online(
                    est, data.X, data.y, classes=classes, progress=name if progress else False
                )
            except (ValueError, FloatingPointError) as e:
                raise CLIError(f"{name}: {e}") from None
        for message in dict.fromkeys(str(w.message) for w in caught):  # once each, in order
            print(f"{PROG} run: warning: {name}: {message}", file=sys.stderr)
        results.append(
            RunResult(
                algorithm=name,
                mistakes=res.n_mistakes,
                mistake_rate=float(res.mistake_rate),
                updates=_count(res.n_updates),
                support=_support_size(res.estimator),
                seconds=float(res.seconds),
                params=est.get_params(),
                curve=res.cumulative_mistakes,
            )
        )

    kind = "sparse" if data.sparse else "dense"
    feats = f"{d} feature{'' if d == 1 else 's'}"
    shape = f"{n} examples x {feats}"
    if n < info["n_total"]:
        shape = f"{n} of {info['n_total']} examples x {feats}"
    order = "as stored" if info["seed"] is None else f"shuffled (seed {info['seed']})"
    scale = {
        "none": "none",
        "standard": "z-score (whole-stream statistics)"
        if not data.sparse
        else "divided by the standard deviation (whole stream; sparse, so not centred)",
    }[info["scale"]]
    settings = f"online protocol, one pass | order: {order} | scaling: {scale}"
    cov = _covariance_summary(estimators)
    if cov:
        settings += f" | covariance: {cov}"
    plot_title = f"Online mistakes on {data.name} ({n} examples x {feats})"

    if args.plot:
        try:
            plot_mistakes({r.algorithm: r.curve for r in results}, args.plot, title=plot_title)
        except (OSError, ValueError) as e:
            raise CLIError(f"--plot {args.plot!r}: {e}") from None

    if args.json:
        payload = {
            "dataset": data.name,
            "source": data.source,
            "n_samples": n,
            "n_features": d,
            "n_classes": int(classes.size),
            "sparse": data.sparse,
            "n_total": info["n_total"],
            "shuffle": bool(args.shuffle),
            "seed": info["seed"],
            "scale": info["scale"],
            "plot": args.plot,
            "results": [
                {
                    "algorithm": r.algorithm,
                    "mistakes": r.mistakes,
                    "mistake_rate": r.mistake_rate,
                    "updates": r.updates,
                    "support": r.support,
                    "seconds": r.seconds,
                    "params": r.params,
                }
                for r in results
            ],
        }
        print(json.dumps(payload, indent=2, default=_json_default))
        return 0

    print(f"data: {data.name} ({shape}, {classes.size} classes, {kind})")
    print(settings)
    print()
    print(_fmt_table(results))
    if classes.size > 2:
        summed = (
            "updates and support" if any(r.support is not None for r in results) else ("updates")
        )
        print(f"\n{summed} are summed over the {classes.size} one-vs-rest models")
    if args.plot:
        print(f"\ncumulative mistakes plotted to {args.plot}")
    return 0


# ------------------------------------------------------------------------------ entry point


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with ``argv`` (default ``sys.argv[1:]``); returns the exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # --help, --version and usage errors
        code = e.code
        return code if isinstance(code, int) else (0 if code is None else 2)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        return _run(args)
    except CLIError as e:
        print(f"{PROG} run: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader left, e.g. `kernelcw run | head -3`: stop quietly
        try:  # and keep Python from complaining when it flushes stdout at exit
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
