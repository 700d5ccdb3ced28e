"""The command line's parser: the ``kernelcw`` and ``kernelcw run`` options, their types and help.

It also turns the ``-a`` values into algorithm names (:func:`parse_algorithms`). The
choices of the kernel, solver, covariance, diagonal-method and budget-policy options
come from :mod:`kernelcw.registry`, evaluated only when an option is checked or
``run --help`` is shown, so building the parser imports nothing heavy.
"""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from .. import __version__, registry
from ..datasets import BUILTIN, DEFAULT
from ..registry import ALGORITHMS, DEFAULT_ALGORITHMS

PROG = "kernelcw"

#: Streams longer than this show a progress bar unless ``--no-progress``.
PROGRESS_THRESHOLD = 5000

#: The rule parameters the options set: constructor argument (= option dest) -> option.
RULE_OPTIONS = {"eta": "--eta", "C": "--C", "r": "--r"}


#: The default run when no -a, --data, --dataset or --kernel is given: linear and
#: kernel learners side by side on the built-in moons.
DEMO_ALGORITHMS = (
    "scw1:linear",
    "scw1:rbf",
    "arow:linear",
    "arow:rbf",
    "pa1:linear",
    "pa1:rbf",
)


class CLIError(Exception):
    """A usage or data problem: reported as one line on stderr, exit code 2."""


@dataclass(frozen=True)
class AlgSpec:
    """One ``-a`` entry, ``NAME[:KERNEL][:BUDGET]``: an algorithm, and optionally its own
    kernel and budget (None: the --kernel / --budget options apply)."""

    name: str
    kernel: str | None = None
    budget: int | None = None

    @property
    def label(self) -> str:
        """The row's name in the table: the entry in canonical form, e.g. ``scw1:rbf:200``."""
        parts = [self.name, self.kernel, None if self.budget is None else str(self.budget)]
        return ":".join(p for p in parts if p is not None)


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (the usage of ``run`` is long)."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


class _Choices(Sequence):
    """An option's choices, computed on first use from a :mod:`kernelcw.registry` list.

    argparse reads choices only to check a given value or to show ``run --help``, so
    the modules that own the lists (they import numba) load only then.
    """

    def __init__(self, compute: Callable[[], Sequence[str]]):
        self._compute = compute

    def _values(self) -> tuple[str, ...]:
        return tuple(self._compute())

    def __getitem__(self, i):
        return self._values()[i]

    def __len__(self) -> int:
        return len(self._values())

    def __iter__(self) -> Iterator[str]:
        return iter(self._values())

    def __contains__(self, value) -> bool:
        return value in self._values()


def _cli_kernels() -> tuple[str, ...]:
    # "precomputed" takes a Gram matrix as X: a data file holds features, so it is not offered.
    return tuple(k for k in registry.kernels() if k != "precomputed")


def _budget_policies() -> tuple[str, ...]:
    # The default policy first, as the help text describes it first.
    policies = registry.budget_policies()
    return ("project", *(p for p in policies if p != "project"))


def _add_choice_option(group, *flags: str, choices: Callable[[], Sequence[str]], **kwargs):
    """``group.add_argument`` with lazily computed ``choices``.

    They are set after ``add_argument``, which would otherwise format them (and so
    compute them) at once to check the metavar.
    """
    action = group.add_argument(*flags, **kwargs)
    action.choices = _Choices(choices)
    return action


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
        opts = ", ".join(RULE_OPTIONS[p] for p in alg.params)
        lines.append(f"  {name:<{width}}{alg.summary}" + (f" [{opts}]" if opts else ""))
    lines.append(f"  {'all':<{width}}every algorithm above")
    lines.append(f"  default: {','.join(DEMO_ALGORITHMS)} (no --data, --dataset or --kernel)")
    lines.append(f"           {','.join(DEFAULT_ALGORITHMS)} (otherwise)")
    lines.append("  NAME:KERNEL[:B] gives one entry its own kernel (and budget B)")
    return "\n".join(lines)


def _dataset_help() -> str:
    width = max(map(len, BUILTIN)) + 2
    lines = ["built-in data sets (--dataset NAME; generated or bundled with scikit-learn, "]
    lines[0] += "no network):"
    lines += [f"  {name:<{width}}{text}" for name, text in BUILTIN.items()]
    return "\n".join(lines)


_COLUMNS_HELP = """\
output columns:
  mistakes   wrong predictions, each made before learning from that example
  rate (%)   mistakes / examples
  updates    rounds that changed the model (summed over the one-vs-rest models
             when there are more than two classes)
  support    support vectors kept by the dual (kernel) engine, at the end (summed over the
             one-vs-rest models, each of which keeps its own); "-" for primal
             models, which keep weights instead
  seconds    wall-clock time of the pass, less the time numba spent compiling
             in it; an untimed warm-up on the first 64 examples loads the
             compiled code first, so the first algorithm is not penalised"""

_EXAMPLES = """\
examples:
  kernelcw run
  kernelcw run -a scw1:linear,scw1:rbf,scw1:rbf:50,arow:poly --plot mistakes.png
  kernelcw run --dataset breast_cancer
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

    _add_algorithm_options(run)
    _add_kernel_options(run)
    _add_data_options(run)
    _add_output_options(run)
    parser.run_parser = run  # (its options by parameter: option_flag)
    return parser


def option_flag(dest: str) -> str | None:
    """The ``run`` option that sets the estimator parameter ``dest`` (``--gamma``), or
    None."""
    for action in build_parser().run_parser._actions:
        if action.dest == dest and action.option_strings:
            long = [f for f in action.option_strings if f.startswith("--")]
            return (long or action.option_strings)[0]
    return None


def _add_algorithm_options(run: argparse.ArgumentParser) -> None:
    """The algorithms and the rule parameters."""
    g = run.add_argument_group("algorithms and their parameters")
    g.add_argument(
        "-a",
        "--algorithms",
        action="append",
        metavar="NAMES",
        help="algorithm(s) to run: repeat the option or separate entries with commas; "
        "'all' runs every one. An entry NAME:KERNEL gives that algorithm its own kernel "
        "and NAME:KERNEL:B also a budget of B support vectors (e.g. -a "
        "scw1:linear,scw1:rbf,arow:rbf:100), so linear and kernel learners share one "
        "table; entries without them take --kernel and --budget. Default: "
        f"{','.join(DEMO_ALGORITHMS)} on the built-in moons; with --data, --dataset or "
        "--kernel, the seven listed below",
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
        "--no-intercept",
        dest="fit_intercept",
        action="store_const",
        const=False,
        help="learn no intercept (bias term), as the papers' learners; by default every "
        "algorithm learns one (fit_intercept=True)",
    )
    _add_choice_option(
        g,
        "--covariance",
        choices=registry.covariances,
        help="full d x d covariance (the papers' algorithms, O(d^2) memory; the default) "
        "or diagonal (O(d), for high-dimensional sparse data)",
    )
    _add_choice_option(
        g,
        "--diag-method",
        choices=registry.diag_methods,
        help="how the diagonal covariance is kept: diagonalised precision (kl, the "
        "default), diagonalised covariance (l2), or exact",
    )


def _add_kernel_options(run: argparse.ArgumentParser) -> None:
    """The kernel, the dual solver and the budget."""
    g = run.add_argument_group("kernel (a non-linear kernel learns in the dual form)")
    _add_choice_option(
        g,
        "--kernel",
        choices=_cli_kernels,
        help="k(x, z): linear (the default; primal), rbf exp(-gamma |x-z|^2), poly "
        "(gamma x.z + coef0)^degree, laplacian exp(-gamma |x-z|_1)",
    )
    g.add_argument(
        "--gamma", type=_number, help="kernel width > 0 (default 1 / number of features)"
    )
    g.add_argument("--degree", type=_positive_int, help="poly degree, an integer >= 1 (default 3)")
    g.add_argument("--coef0", type=_number, help="poly constant (default 0)")
    _add_choice_option(
        g,
        "--solver",
        choices=registry.solvers,
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
    _add_choice_option(
        g,
        "--budget-policy",
        choices=_budget_policies,
        help="which support vector leaves at the budget (default project: the one whose "
        "projection onto the others moves the model least, and its weight is projected "
        "onto them)",
    )
    g.add_argument(
        "--budget-batch",
        type=_positive_int,
        metavar="Q",
        help="how many support vectors leave at once when the budget overflows (default 1, "
        "round by round; Q > 1 prunes in batches, much faster at large budgets, "
        "second-order rules only)",
    )


def _add_data_options(run: argparse.ArgumentParser) -> None:
    """The data source, its order, length and scaling."""
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


def _add_output_options(run: argparse.ArgumentParser) -> None:
    """JSON, plot and progress bar."""
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


# ------------------------------------------------------------------------------ -a


def parse_algorithms(values: Sequence[str] | None) -> list[str]:
    """Algorithm names from repeated/comma-separated ``-a`` values, in order, without
    repeats (kernel and budget parts dropped); the seven linear defaults if none."""
    if not values:
        return list(DEFAULT_ALGORITHMS)
    return list(dict.fromkeys(spec.name for spec in parse_specs(values)))


def parse_specs(values: Sequence[str] | None, *, demo: bool = False) -> list[AlgSpec]:
    """The ``-a`` entries (``NAME[:KERNEL][:BUDGET]``), in order, without repeats.

    Without ``values``: :data:`DEMO_ALGORITHMS` if ``demo``, else the seven linear
    :data:`~kernelcw.registry.DEFAULT_ALGORITHMS`.
    """
    if not values:
        return [_parse_entry(e) for e in (DEMO_ALGORITHMS if demo else DEFAULT_ALGORITHMS)]
    specs: list[AlgSpec] = []
    for value in values:
        for raw in value.split(","):
            entry = raw.strip()
            if not entry:
                continue
            if entry.lower() == "all":
                chosen = [AlgSpec(name) for name in ALGORITHMS]
            elif entry.lower().startswith("all:"):
                extra = _parse_entry("pa" + entry[3:], shown=entry)
                chosen = [AlgSpec(n, extra.kernel, extra.budget) for n in ALGORITHMS]
            else:
                chosen = [_parse_entry(entry)]
            specs += [c for c in chosen if c not in specs]
    if not specs:
        raise CLIError("no algorithm given to -a/--algorithms")
    return specs


def _parse_entry(entry: str, shown: str | None = None) -> AlgSpec:
    """One ``NAME[:KERNEL][:BUDGET]`` entry (``shown``: the entry as the user wrote it,
    for the messages, where ``all:...`` was read as one algorithm's)."""
    name, *parts = (p.strip() for p in entry.split(":"))
    name = _algorithm_name(name, entry)
    entry = entry if shown is None else shown
    kernel = budget = None
    for part in parts:
        if part.isascii() and part.isdigit():  # ("²" is a digit to str.isdigit)
            if budget is not None:
                raise CLIError(f"-a {entry!r}: two budgets; write NAME[:KERNEL][:BUDGET]")
            budget = int(part)
            if budget < 1:
                raise CLIError(f"-a {entry!r}: the budget must be at least 1")
            continue
        if kernel is not None or budget is not None:
            raise CLIError(
                f"-a {entry!r}: unexpected {part!r}; write NAME[:KERNEL][:BUDGET], "
                "e.g. scw1:rbf or scw1:rbf:200"
            )
        kernel = part.lower()
        kernels = _cli_kernels()
        if kernel not in kernels:
            close = difflib.get_close_matches(kernel, kernels, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise CLIError(
                f"-a {entry!r}: unknown kernel {part!r}{hint}; choose from {', '.join(kernels)}"
            )
    return AlgSpec(name, kernel, budget)


def _algorithm_name(text: str, entry: str) -> str:
    """The canonical algorithm name of ``text`` (case, "-" and "_" do not matter)."""
    canonical = {a.replace("-", ""): a for a in ALGORITHMS}
    name = text.lower()
    key = name.replace("-", "").replace("_", "")
    if key in canonical:
        return canonical[key]
    close = [a for a in ALGORITHMS if name and a.startswith(name)]
    close = close or difflib.get_close_matches(name, list(ALGORITHMS), n=1)
    hint = f" (did you mean {' or '.join(map(repr, close))}?)" if close else ""
    where = f" in {entry!r}" if entry != text else ""
    raise CLIError(
        f"unknown algorithm {text!r}{where}{hint}; choose from {', '.join(ALGORITHMS)}, all"
    )
