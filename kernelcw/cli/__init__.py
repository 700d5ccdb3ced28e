"""The ``kernelcw`` command line: run the online protocol on a data set and compare learners.

``kernelcw run`` predicts each example with the current model, then learns from it
(progressive validation), for one or several algorithms side by side, and prints
one row per algorithm: mistakes, mistake rate, updates, support size and time.
See ``kernelcw run --help``.

This package holds :func:`main`, the entry point (exit codes, one-line errors); the
rooms are :mod:`~kernelcw.cli.parser` (options and help), :mod:`~kernelcw.cli.run`
(data, estimators, the online pass) and :mod:`~kernelcw.cli.report` (table, JSON,
plot). The algorithms come from :mod:`kernelcw.registry`. Everything heavy (numba,
scikit-learn, matplotlib) is imported only when needed.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from ..registry import ALGORITHMS, DEFAULT_ALGORITHMS
from .parser import PROG
from .parser import CLIError as CLIError
from .parser import build_parser as build_parser
from .parser import parse_algorithms as parse_algorithms
from .report import RunResult as RunResult
from .report import plot_mistakes
from .run import make_estimator as make_estimator
from .run import run_command

__all__ = ["ALGORITHMS", "DEFAULT_ALGORITHMS", "main", "plot_mistakes"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with ``argv`` (default ``sys.argv[1:]``); returns the exit code."""
    parser = build_parser()
    try:
        try:
            args = parser.parse_args(argv)
        except SystemExit as e:  # --help, --version and usage errors
            code = e.code
            sys.stdout.flush()  # (--help into a full disk: said, not lost at exit)
            return code if isinstance(code, int) else (0 if code is None else 2)
        if args.command is None:
            parser.print_help(sys.stderr)
            return 2
        code = run_command(args)
        sys.stdout.flush()
        return code
    except CLIError as e:
        print(f"{PROG} run: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader left, e.g. `kernelcw run | head -3`: stop quietly
        _drop_stdout()
        return 1
    except OSError as e:  # the output could not be written (e.g. `> /dev/full`)
        _drop_stdout()
        print(f"{PROG}: error: cannot write the output: {e}", file=sys.stderr)
        return 1


def _drop_stdout() -> None:
    """stdout to the null device, so that Python's flush at exit does not complain
    about what could not be written."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):
        pass
