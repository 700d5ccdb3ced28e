"""Packaging: the installed distribution's metadata agrees with the package."""

from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

import kernelcw


def _installed_from_this_checkout(dist: importlib.metadata.Distribution) -> bool:
    """Whether ``dist`` is the kernelcw imported here: the same files (a regular install run
    from site-packages), or an install of the directory this kernelcw comes from (``pip
    install .`` or ``-e .``, recorded in PEP 610's direct_url.json)."""
    here = Path(kernelcw.__file__).resolve()
    if any(Path(dist.locate_file(f)).resolve() == here for f in dist.files or ()):
        return True
    direct = json.loads(dist.read_text("direct_url.json") or "{}")
    url = urlparse(direct.get("url", ""))
    return url.scheme == "file" and Path(unquote(url.path)).resolve() == here.parent.parent


def test_installed_version_is_kernelcw_version():
    """pyproject.toml reads the version from ``kernelcw.__version__`` (one number to bump)."""
    # Installed: an INSTALLER record (pip, uv), which the kernelcw.egg-info a build leaves in
    # the checkout lacks.
    installed = [
        dist
        for dist in importlib.metadata.distributions(name="kernelcw")
        if dist.read_text("INSTALLER") is not None
    ]
    if not installed:
        pytest.skip("kernelcw is not installed")
    ours = [dist for dist in installed if _installed_from_this_checkout(dist)]
    if not ours:
        pytest.skip("the installed kernelcw is another copy than the one imported here")
    for dist in ours:
        assert dist.version == kernelcw.__version__
