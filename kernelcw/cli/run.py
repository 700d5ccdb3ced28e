"""The ``kernelcw run`` command: prepare the stream, build the learners, run the online protocol.

Each algorithm named on the command line becomes an estimator through
:mod:`kernelcw.registry`; the stream is loaded, shuffled, cut and scaled; every
estimator is warmed up untimed, then predicts each example before learning from
it (:func:`kernelcw.online.run_online`). :mod:`kernelcw.cli.report` prints the result.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import threading
import time
import warnings

import numpy as np

from .. import registry
from ..datasets import DEFAULT, Dataset, DatasetError
from ..registry import ALGORITHMS
from . import report
from .parser import PROG, PROGRESS_THRESHOLD, RULE_OPTIONS, AlgSpec, CLIError, parse_specs
from .report import RunResult

__all__ = ["make_estimator", "run_command"]

#: Seconds a warm-up may take before the "compiling" notice appears on stderr.
COMPILE_NOTICE_AFTER = 1.0


# Options every algorithm takes (option dest = constructor argument).
_SHARED_OPTIONS = (
    "a",
    "fit_intercept",
    "covariance",
    "diag_method",
    "kernel",
    "gamma",
    "degree",
    "coef0",
    "solver",
    "budget",
    "budget_policy",
    "budget_batch",
)


def run_command(args: argparse.Namespace) -> int:
    """``kernelcw run``: check, build, load, learn, report; returns the exit code."""
    demo = args.data is None and args.dataset is None and args.kernel is None
    specs = parse_specs(args.algorithms, demo=demo)
    notes = _check_options(args, specs)
    estimators = {
        s.label: make_estimator(s.name, args, kernel=s.kernel, budget=s.budget) for s in specs
    }
    check_parameters(estimators)
    if args.plot:
        report.check_plot(args.plot, args.data)
    for note in notes:  # after the checks: an error stays one line
        print(f"{PROG} run: note: {note}; ignored", file=sys.stderr)

    data, info = _prepare(_load(args), args)
    _check_classes(data, info, shuffled=args.shuffle)
    asked = _fit_budgets(estimators, data.n_samples)
    check_memory(estimators, data.n_features, data.classes.size, data.source)
    progress = args.progress if args.progress is not None else data.n_samples > PROGRESS_THRESHOLD
    notice = args.progress is not False and (args.progress or sys.stderr.isatty())
    lines = _FileLines(data, info)
    results, errors = [], []
    for name, est in estimators.items():
        try:
            results.append(_learn(name, est, data, progress, notice, lines))
        except CLIError as e:  # (the others still run, and their results are printed)
            errors.append(e)
    if not results:
        _raise_all(errors)
    for r in results:  # (reported as asked: the same model)
        if r.algorithm in asked:
            estimators[r.algorithm].set_params(budget=asked[r.algorithm])
            r.params["budget"] = asked[r.algorithm]

    plot, failed = args.plot, None
    if plot:  # a plot that cannot be written fails the run after its results are out
        try:
            report.write_plot(results, plot, data)
        except CLIError as e:
            plot, failed = None, e
    if args.json:
        report.print_json(data, info, results, shuffle=args.shuffle, plot=plot)
    else:
        dual = {name for name, est in estimators.items() if _is_dual(est)}
        bases = {s.label: s.name for s in specs}
        covariance = report.covariance_summary(estimators, dual, bases)
        report.print_table(data, info, results, covariance=covariance, plot=plot)
    _raise_all(errors + ([] if failed is None else [failed]))
    return 0


def _raise_all(errors: list[CLIError]) -> None:
    """The errors on stderr, one line each (the last raised, for main to print)."""
    for e in errors[:-1]:
        print(f"{PROG} run: error: {e}", file=sys.stderr)
    if errors:
        raise errors[-1]


# ------------------------------------------------------------------------------ checks


def _check_options(args: argparse.Namespace, specs: list[AlgSpec]) -> list[str]:
    """Refuse --seed without --shuffle; return notes on the options this run does not
    use (or some of its algorithms ignore)."""
    if args.seed is not None and not args.shuffle:
        raise CLIError("--seed only applies with --shuffle")
    if args.plot is not None and not args.plot.strip():
        raise CLIError("--plot needs a file name, such as mistakes.png")
    notes = []
    names = list(dict.fromkeys(s.name for s in specs))
    for p, option in RULE_OPTIONS.items():
        ignoring = [n for n in names if p not in ALGORITHMS[n].params]
        if getattr(args, p) is not None and ignoring:
            notes.append(f"{option} does not apply to {', '.join(ignoring)}")
    for option, own in (("kernel", "kernel"), ("budget", "budget")):
        if getattr(args, option) is not None and all(getattr(s, own) is not None for s in specs):
            notes.append(f"--{option} does not apply: every -a entry names its own {own}")
    return notes + _unused_options(args, specs)


def _unused_options(args: argparse.Namespace, specs: list[AlgSpec]) -> list[str]:
    """Options the user gave that this run does not use (kernel, solver and budget ones)."""
    kernels = {s.kernel or args.kernel or "linear" for s in specs}
    budgeted = [s for s in specs if (s.budget if s.budget is not None else args.budget)]
    dual = bool(budgeted) or args.dual or kernels != {"linear"}
    primal = any(
        (s.kernel or args.kernel or "linear") == "linear"
        and (s.budget if s.budget is not None else args.budget) is None
        for s in specs
    )
    shown = "/".join(sorted(kernels))
    uses = {
        "gamma": bool(kernels & {"rbf", "poly", "laplacian"}),
        "degree": "poly" in kernels,
        "coef0": "poly" in kernels,
        "solver": dual,
        "budget_policy": bool(budgeted),
        "budget_batch": bool(budgeted),
        "diag_method": args.covariance == "diag" and primal and not args.dual,
    }
    why = {
        "gamma": f"the {shown} kernel has no width",
        "degree": f"only the poly kernel has a degree (this run: {shown})",
        "coef0": f"only the poly kernel has a constant (this run: {shown})",
        "solver": "the solver is the dual form's, and this run is primal (linear kernel, "
        "no budget, no --dual)",
        "budget_policy": "there is no budget",
        "budget_batch": "there is no budget",
        "diag_method": "it needs --covariance diag in the primal form",
    }
    return [
        f"--{p.replace('_', '-')} does not apply: {why[p]}"
        for p, used in uses.items()
        if getattr(args, p, None) is not None and not used
    ]


def check_parameters(estimators: dict) -> None:
    """Validate each estimator's parameters (:func:`kernelcw.spec.check_params`, what
    ``fit`` checks first), so bad options fail before any data work."""
    from ..spec import check_params

    errors = {}
    for name, est in estimators.items():
        try:
            check_params(est)
        except ValueError as e:
            errors[name] = str(e)
    if errors:
        name, message = next(iter(errors.items()))
        message = _named_option(message)
        if len(errors) == len(estimators) > 1 and len(set(errors.values())) == 1:
            raise CLIError(message)  # an option every algorithm shares: no one to name
        raise CLIError(f"{name}: {message}")


def _named_option(message: str) -> str:
    """The library's message about a parameter (``gamma=0.0 must be ...``) led by the
    command-line option that sets it (``--gamma: ...``), where one does."""
    from .parser import option_flag

    found = re.match(r"(\w+)=", message)
    flag = None if found is None else option_flag(found.group(1))
    return message if flag is None else f"{flag}: {message}"


def check_memory(estimators: dict, n_features: int, n_classes: int, source: str = "") -> None:
    """The library's one memory limit (:func:`kernelcw.spec.check_memory`), checked
    for each estimator once the data's shape is known, before any learning. ``source``:
    the data file, whose widest line a primal model's error names."""
    from ..spec import check_memory as check

    for name, est in estimators.items():
        spec = _spec(est, n_features, n_classes)
        try:
            check(spec)
        except ValueError as e:
            hint = "; on the command line: --covariance diag" if spec.form == "primal_full" else ""
            if spec.form != "dual":
                hint += _widest(source, n_features)
            raise CLIError(f"-a {name}: {e}{hint}") from None


def _widest(source: str, n_features: int) -> str:
    """Where a data file's largest feature index is (which sets a primal model's
    width: a weight per feature), or ""."""
    from ..datasets import _data_lines

    if not os.path.isfile(source):
        return ""
    best = (-1, 0)  # (the largest index, its line): the width is it or it + 1
    try:
        for line, text in _data_lines(source):
            for token in text.split()[1:]:
                index = token.split(":")[0]
                if index.isdigit() and int(index) > best[0]:
                    best = (int(index), line)
    except (OSError, EOFError, ValueError):
        return ""
    if best[0] < 0:
        return ""
    name = os.path.basename(source)
    return (f" (its {n_features:,} features: index {best[0]} on line {best[1]} of {name}; "
            "a kernel model keeps no weight per feature)")  # fmt: skip


def _fit_budgets(estimators: dict, n_samples: int) -> dict:
    """A budget above the stream's length is learnt as the stream's length: one pass
    holds no more support vectors than it has rows and the model is the same (the
    budget never binds), but memory is checked, and set aside, for the budget. Returns
    the budgets as asked, by algorithm, of the estimators changed."""
    asked = {}
    for name, est in estimators.items():
        budget = est.get_params().get("budget")
        if budget is not None and budget > n_samples:
            q = est.get_params().get("budget_batch") or 1
            est.set_params(budget=max(n_samples, q))
            asked[name] = budget
    return asked


def _spec(est, n_features: int, n_classes: int):
    from ..spec import engine_spec

    return engine_spec(est, n_features, n_classes)


def _check_classes(data: Dataset, info: dict, *, shuffled: bool) -> None:
    classes = data.classes
    if classes.size < 2:
        hint = ""
        if data.n_samples < info["n_total"] and not shuffled:
            hint = " (add --shuffle to mix the rows before --limit takes the first ones)"
        raise CLIError(
            f"{data.name}: the stream holds only one class ({classes[0]}); "
            f"a classifier needs two{hint}"
        )


# ------------------------------------------------------------------------------ estimators


def make_estimator(
    name: str, args: argparse.Namespace, *, kernel: str | None = None, budget: int | None = None
):
    """The unfitted estimator for ``name`` with the options the user gave; ``kernel``
    and ``budget`` (an ``-a NAME:KERNEL:BUDGET`` entry's own) override --kernel and --budget."""
    params = {p: getattr(args, p, None) for p in (*ALGORITHMS[name].params, *_SHARED_OPTIONS)}
    params.update({p: v for p, v in (("kernel", kernel), ("budget", budget)) if v is not None})
    params = {p: value for p, value in params.items() if value is not None}
    if getattr(args, "dual", False):
        params["mode"] = "dual"
    return registry.make(name, **params)


def _is_dual(est) -> bool:
    from ..spec import check_params

    return check_params(est)[1] == "dual"


# ------------------------------------------------------------------------------ data


def _load(args: argparse.Namespace) -> Dataset:
    from .. import datasets

    try:
        if args.data is not None:
            return datasets.load_svmlight(args.data)
        return datasets.load_builtin(args.dataset or DEFAULT)
    except DatasetError as e:
        raise CLIError(str(e)) from None


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
        X = _standardise(X, data)
    return Dataset(name=data.name, X=X, y=y, source=data.source), info


def _standardise(X, data: Dataset):
    """z-scores; values whose squares overflow float64 are reported as such (numpy's raw
    overflow warning, and the NaN it leaves, would point at the wrong culprit)."""
    from sklearn.preprocessing import StandardScaler

    with warnings.catch_warnings(), np.errstate(over="ignore", invalid="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        Z = StandardScaler(with_mean=not data.sparse).fit_transform(X)
    values = Z.data if hasattr(Z, "data") and not isinstance(Z, np.ndarray) else Z
    if values.size and not np.isfinite(values).all():
        raw = X.data if hasattr(X, "data") and not isinstance(X, np.ndarray) else X
        big = float(np.max(np.abs(raw))) if raw.size else 0.0
        raise CLIError(
            f"{data.name}: --scale standard overflowed float64 (|values| up to {big:.3g}: "
            "their squares leave float64's range); rescale the data, or use --scale none"
        )
    return Z


# ------------------------------------------------------------------------------ the online run


class _FileLines:
    """The file line of a stream row, for the learners' errors, which name rows of X
    (0-based, after --shuffle): a data file's line numbers count its comments and blank
    lines, and the row a shuffle put first is not the file's first."""

    def __init__(self, data: Dataset, info: dict):
        self.path = data.source if os.path.isfile(data.source) else None
        self.seed, self.n_total = info.get("seed"), info.get("n_total")

    def named(self, message: str) -> str:
        """``message`` with its first "row N" followed by the file line, where known."""
        found = re.search(r"\brow (\d+)( of the stream| of X)?\b", message)
        if self.path is None or found is None:
            return message
        row = int(found.group(1))
        if self.seed is not None:  # (the order _prepare shuffled into)
            row = int(np.random.default_rng(self.seed).permutation(self.n_total)[row])
        from ..datasets import _data_lines

        try:
            line = next(n for i, (n, _) in enumerate(_data_lines(self.path)) if i == row)
        except (OSError, EOFError, StopIteration, ValueError):
            return message
        at = f" (line {line} of {os.path.basename(self.path)})"
        return message[: found.end()] + at + message[found.end() :]


def _learn(
    name: str, est, data: Dataset, progress: bool, notice: bool = False, lines=None
) -> RunResult:
    """One algorithm's timed online pass over the stream, after an untimed warm-up.

    With ``notice``, a warm-up that takes over :data:`COMPILE_NOTICE_AFTER` seconds (numba
    compiling on a cold cache) says so on stderr rather than looking hung.
    """
    from numba.core.event import install_timer

    from ..online import run_online

    classes = data.classes
    with _compile_notice(name, enabled=notice):
        _warm_up(est, data.X, data.y, classes)
    compiling = [0.0]  # numba's compiling inside the pass (a path the warm-up did not take)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with install_timer("numba:compile", lambda s: compiling.__setitem__(0, s)):
                res = run_online(
                    est, data.X, data.y, classes=classes, progress=name if progress else False
                )
        except (ValueError, FloatingPointError) as e:
            raise CLIError(f"{name}: {e if lines is None else lines.named(str(e))}") from None
    for message in dict.fromkeys(str(w.message) for w in caught):  # once each, in order
        print(f"{PROG} run: warning: {name}: {message}", file=sys.stderr)
    return RunResult(
        algorithm=name,
        mistakes=res.n_mistakes,
        mistake_rate=float(res.mistake_rate),
        updates=_count(res.n_updates),
        support=_support_size(res.estimator),
        seconds=max(0.0, float(res.seconds) - compiling[0]),
        params=est.get_params(),
        curve=res.cumulative_mistakes,
    )


class _compile_notice:
    """Context: if the block outlasts :data:`COMPILE_NOTICE_AFTER`, print that numba is
    compiling (from a timer thread), and at the end how long it took."""

    def __init__(self, name: str, *, enabled: bool):
        self.name, self.enabled, self.shown = name, enabled, False

    def _show(self) -> None:
        self.shown = True
        print(
            f"{PROG} run: compiling {self.name} (numba; first run only, cached afterwards) ...",
            file=sys.stderr,
            flush=True,
        )

    def __enter__(self):
        self.start = time.perf_counter()
        self.timer = threading.Timer(COMPILE_NOTICE_AFTER, self._show)
        self.timer.daemon = True
        if self.enabled:
            self.timer.start()
        return self

    def __exit__(self, *exc) -> None:
        self.timer.cancel()
        if self.enabled:
            self.timer.join()
        if self.shown:
            seconds = time.perf_counter() - self.start
            print(f"{PROG} run: compiled {self.name} in {seconds:.1f} s", file=sys.stderr)


def _warm_up(est, X, y, classes) -> None:
    """Learn from the first rows of X, untimed, so the timed run excludes one-off costs.

    The first call loads the compiled (numba) code and starts the BLAS threads;
    without this the first algorithm of the table would look slower than it is.
    Wide data is cut to 64 columns (the compiled code does not depend on the width).
    """
    import scipy.sparse as sp
    from sklearn.base import clone

    d = X.shape[1]
    k = d if _spec(est, d, len(classes)).memory_bytes() <= 2**28 else min(d, 64)
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
