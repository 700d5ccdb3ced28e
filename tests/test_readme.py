"""The README's Python example runs and prints what its comments say."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.shipped_defaults  # what a user gets (tests/conftest.py)

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_python_example_runs_and_matches_its_comments():
    text = README.read_text()
    code = re.search(r"## In Python\n\n```python\n(.*?)```", text, re.S).group(1)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, str(README), "exec"), {})
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("0.930")  # "# 0.930...: test accuracy"
    assert "32 0.056" in lines  # "# 32 0.056"


def test_readme_starts_with_the_two_setup_commands():
    block = re.search(r"```bash\n(.*?)```", README.read_text(), re.S).group(1)
    assert block.splitlines() == [
        "python3 -m pip install . && kernelcw run",
        'python3 -m pip install ".[test]" && python3 -m pytest',
    ]


def test_readme_cli_output_is_what_kernelcw_run_prints(capsys):
    """The quoted `kernelcw run` table, all but its (machine-dependent) seconds column."""
    from kernelcw.cli import main

    quoted = re.search(r"Output of\n`kernelcw run`:\n\n```\n(.*?)```", README.read_text(), re.S)
    assert main(["run"]) == 0
    printed = capsys.readouterr().out

    def without_seconds(text):
        rows = [line.split() for line in text.strip().splitlines() if line.strip()]
        return [r[:-1] if r and r[-1].replace(".", "").isdigit() else r for r in rows]

    assert without_seconds(quoted.group(1)) == without_seconds(printed)
