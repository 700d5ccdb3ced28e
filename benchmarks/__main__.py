"""The benchmark runner: ``python -m benchmarks NAME [args...]`` runs ``bench_NAME.py``.

``python -m benchmarks`` (or ``--list``) lists every benchmark with its one-line
summary. The benchmarks are discovered from the ``bench_*.py`` files next to this
one, so a new benchmark needs no edit here. Their summaries are read with
:mod:`ast`, without importing them, so listing is instant and a file that does
not import (or not yet parse) still shows up.

``python -m benchmarks NAME ARGS`` imports ``benchmarks.bench_NAME`` and calls
its ``main(ARGS)``: ``python -m benchmarks NAME --help`` shows its options. The
result files record ``python -m benchmarks NAME ARGS`` as their command. An
unknown NAME is an error (exit code 2) that lists the valid ones; a data source
that cannot be reached is a one-paragraph message (exit code 1).
"""

from __future__ import annotations

import ast
import difflib
import importlib
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from ._common import PACKAGE_DIR, runner_command
from .datasets import DataSourceError

PREFIX = "bench_"
PACKAGE = __package__ or "benchmarks"
USAGE = "usage: python -m benchmarks [--list] | NAME [args...]"
_NAME = re.compile(r"[A-Za-z0-9_]+")


def summary(path: Path) -> str:
    """The summary of the module docstring of ``path``, read without importing it.

    That is its first line, or its first paragraph joined into one line when the
    summary was wrapped.
    """
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (OSError, SyntaxError, ValueError) as exc:
        return f"(cannot read the summary: {type(exc).__name__})"
    doc = ast.get_docstring(tree)
    if not doc or not doc.strip():
        return "(no docstring)"
    paragraph = doc.strip().split("\n\n", 1)[0]
    return " ".join(paragraph.split())


def discover(directory: Path = PACKAGE_DIR) -> dict[str, str]:
    """``{NAME: one-line summary}`` for every ``bench_NAME.py`` in ``directory``, by name."""
    found = {}
    for path in sorted(Path(directory).glob(f"{PREFIX}*.py")):
        name = path.stem[len(PREFIX) :]
        if _NAME.fullmatch(name):
            found[name] = summary(path)
    return found


def listing(benches: dict[str, str]) -> str:
    width = max((len(n) for n in benches), default=0)
    lines = [
        USAGE,
        "",
        "benchmarks (python -m benchmarks NAME --help shows one's options):",
    ]
    lines += [f"  {name:<{width}}  {text}" for name, text in benches.items()]
    if not benches:
        lines.append("  (none found)")
    return "\n".join(lines)


def run(name: str, args: Sequence[str]) -> int:
    """Import ``bench_NAME`` and call its ``main(args)``; its exit code (0 unless an int).

    While it runs, ``sys.argv`` is what a direct run (``python -m
    benchmarks.bench_NAME ARGS``) would see, so argparse names the benchmark in
    its messages, and result files record ``python -m benchmarks NAME ARGS``.
    """
    module = importlib.import_module(f"{PACKAGE}.{PREFIX}{name}")
    main = getattr(module, "main", None)
    if not callable(main):
        print(f"python -m benchmarks: {PREFIX}{name}.py has no main(argv)", file=sys.stderr)
        return 2
    args = list(args)
    saved = sys.argv
    sys.argv = [str(getattr(module, "__file__", None) or f"{PREFIX}{name}.py"), *args]
    try:
        with runner_command(name, args):
            code = main(args)
    except DataSourceError as exc:  # unreachable or unexpected data: the message, no traceback
        print(f"python -m benchmarks {name}: {exc}", file=sys.stderr)
        return 1
    finally:
        sys.argv = saved
    return code if isinstance(code, int) else 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-l", "--list"):
        print(listing(discover()))
        return 0
    if argv[0] in ("-h", "--help"):
        print(__doc__.strip() + "\n\n" + listing(discover()))
        return 0
    benches = discover()
    name = argv[0].removesuffix(".py")
    name = name[len(PREFIX) :] if name.startswith(PREFIX) else name
    if name not in benches:
        close = difflib.get_close_matches(name, list(benches), n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        print(
            f"python -m benchmarks: unknown benchmark {argv[0]!r}.{hint}\n"
            f"Valid names: {', '.join(benches) or '(none found)'}\n{USAGE}",
            file=sys.stderr,
        )
        return 2
    return run(name, argv[1:])


if __name__ == "__main__":
    sys.exit(main())
