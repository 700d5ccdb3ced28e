"""The command line's output: the results table, the JSON document and the mistakes plot.

Nothing here learns: :mod:`kernelcw.cli.run` hands over one :class:`RunResult` per
algorithm, with the data set and what was done to it. matplotlib is optional
(``pip install "kernelcw[plot]"``) and imported only for ``--plot``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection
from dataclasses import dataclass, field

import numpy as np

from .._atomic import write_atomically
from ..datasets import Dataset
from ..registry import ALGORITHMS
from .parser import CLIError

__all__ = ["RunResult", "check_plot", "plot_mistakes", "print_json", "print_table", "write_plot"]


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


# ------------------------------------------------------------------------------ plot


def check_plot(path: str, data: str | None = None) -> None:
    """Refuse ``--plot path`` before any work: matplotlib missing, unknown format or
    folder, or the data file itself (``data``: ``--data``'s path)."""
    try:
        import matplotlib  # noqa: F401  (the package itself: a cached submodule would hide it)
    except ImportError:
        raise CLIError('--plot needs matplotlib: pip install "kernelcw[plot]"') from None
    from matplotlib.backend_bases import FigureCanvasBase

    ext = os.path.splitext(path)[1].lstrip(".").lower()
    if ext == "pgf":  # (written through a LaTeX installation, not by matplotlib alone)
        raise CLIError(f"--plot {path!r}: .pgf needs LaTeX; write .pdf or .svg instead")
    formats = {f for f in FigureCanvasBase.get_supported_filetypes() if f != "pgf"}
    if ext not in formats:
        raise CLIError(
            f"--plot {path!r}: cannot tell the image format from the extension; use one of "
            + ", ".join("." + f for f in sorted(formats))
        )
    if os.path.isdir(path):
        raise CLIError(f"--plot {path!r} is a folder; give a file name such as mistakes.png")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise CLIError(f"--plot {path!r}: folder {folder!r} does not exist")
    if not os.access(folder, os.W_OK):
        raise CLIError(f"--plot {path!r}: folder {folder!r} is not writable")
    if data is not None and os.path.exists(path) and os.path.exists(data):
        if os.path.samefile(path, data):  # (the image would replace the data)
            raise CLIError(f"--plot {path!r} is the --data file; give the plot another name")


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
    fmt = os.path.splitext(path)[1].lstrip(".").lower()
    # into a file beside path, renamed onto it once whole: a failed write (a full disk)
    # leaves the old file as it was and no cut-off image
    write_atomically(path, lambda fh: fig.savefig(fh, format=fmt))


def write_plot(results: list[RunResult], path: str, data: Dataset) -> None:
    """The cumulative-mistake curves of ``results`` to ``path``; a failure is a CLIError."""
    name = data.name.replace("$", r"\$")  # (matplotlib reads $...$ as a formula)
    title = f"Online mistakes on {name} ({data.n_samples} examples x {_features(data)})"
    try:
        plot_mistakes({r.algorithm: r.curve for r in results}, path, title=title)
    except (OSError, ValueError, RuntimeError) as e:  # (RuntimeError: a backend's tool)
        raise CLIError(f"--plot {path!r}: {e}") from None


# ------------------------------------------------------------------------------ JSON


def _json_default(obj):
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    return repr(obj)


def print_json(
    data: Dataset, info: dict, results: list[RunResult], *, shuffle: bool, plot: str | None
) -> None:
    """The run as one JSON document on stdout (``--json``)."""
    payload = {
        "dataset": data.name,
        "source": data.source,
        "n_samples": data.n_samples,
        "n_features": data.n_features,
        "n_classes": int(data.classes.size),
        "sparse": data.sparse,
        "n_total": info["n_total"],
        "shuffle": bool(shuffle),
        "seed": info["seed"],
        "scale": info["scale"],
        "plot": plot,
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


# ------------------------------------------------------------------------------ the table


def covariance_summary(
    estimators: dict, dual: Collection[str], bases: dict[str, str] | None = None
) -> str:
    """How the second-order algorithms keep Sigma, e.g. "full" or "diag (kl)"; "" if none do.

    ``dual`` names the algorithms (row labels) that learn in the dual (kernel) form;
    ``bases`` maps a row label such as ``scw1:rbf`` to its algorithm (default: itself).
    """
    groups: dict[str, list[str]] = {}
    for name, est in estimators.items():
        params = est.get_params()
        base = (bases or {}).get(name, name)
        if name in dual:
            kind = f"dual, kernel {params.get('kernel')}"
            if not ALGORITHMS[base].first_order:
                kind += f" ({params.get('solver')})"
            if params.get("budget") is not None:
                kind += f", budget {params['budget']} ({params.get('budget_policy')})"
            groups.setdefault(kind, []).append(name)
            continue
        if ALGORITHMS[base].first_order:
            continue  # Sigma = a I throughout: nothing to report
        kind = str(params.get("covariance"))
        if kind == "diag":
            kind += f" ({params.get('diag_method')})"
        groups.setdefault(kind, []).append(name)
    if len(groups) <= 1:
        return next(iter(groups), "")
    return "; ".join(f"{kind} for {', '.join(names)}" for kind, names in groups.items())


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


def _fmt_curves(results: list[RunResult], parts: int = 4) -> str:
    """The mistake curves in text: each algorithm's mistakes in each quarter of the stream
    (falling counts: it is learning), as ``--plot`` draws them."""
    n = min((r.curve.size for r in results), default=0)
    if n < parts:
        return ""
    ends = [n * (i + 1) // parts for i in range(parts)]
    width = max(len(r.algorithm) for r in results)
    spans = ", ".join(f"{a + 1}-{b}" for a, b in zip([0, *ends[:-1]], ends, strict=True))
    lines = [f"\nmistakes in each quarter of the stream (examples {spans}):"]
    for r in results:
        cum = [0, *(int(r.curve[e - 1]) for e in ends)]
        counts = [str(b - a) for a, b in zip(cum[:-1], cum[1:], strict=True)]
        lines.append(f"  {r.algorithm:<{width}}  " + "  ".join(c.rjust(4) for c in counts))
    return "\n".join(lines)


def _features(data: Dataset) -> str:
    d = data.n_features
    return f"{d} feature{'' if d == 1 else 's'}"


def _settings(data: Dataset, info: dict, covariance: str) -> str:
    """The line under the data line: protocol, order, scaling and covariance."""
    order = "as stored" if info["seed"] is None else f"shuffled (seed {info['seed']})"
    scale = {
        "none": "none",
        "standard": "z-score (whole-stream statistics)"
        if not data.sparse
        else "divided by the standard deviation (whole stream; sparse, so not centred)",
    }[info["scale"]]
    settings = f"online protocol, one pass | order: {order} | scaling: {scale}"
    if covariance:
        settings += f" | covariance: {covariance}"
    return settings


def print_table(
    data: Dataset, info: dict, results: list[RunResult], *, covariance: str, plot: str | None
) -> None:
    """The run as text on stdout: the data, the settings, the table and its footnotes."""
    n, n_classes = data.n_samples, data.classes.size
    shape = f"{n} examples x {_features(data)}"
    if n < info["n_total"]:
        shape = f"{n} of {info['n_total']} examples x {_features(data)}"
    kind = "sparse" if data.sparse else "dense"
    print(f"data: {data.name} ({shape}, {n_classes} classes, {kind})")
    print(_settings(data, info, covariance))
    print()
    print(_fmt_table(results))
    print(_fmt_curves(results))
    if n_classes > 2:
        summed = (
            "updates and support" if any(r.support is not None for r in results) else ("updates")
        )
        print(f"\n{summed} are summed over the {n_classes} one-vs-rest models")
    if plot:
        print(f"\ncumulative mistakes plotted to {plot}")
