"""The references in tests/ (``reference*.py``) are the papers' learners, which have no
bias term, so the estimators are compared with them at ``fit_intercept=False``: for
every test here, the fixture below makes False the estimators' default. Tests of what
a user gets (the README's and the CLI's output, scikit-learn's and river's estimator
checks, the intercept itself) are marked ``shipped_defaults`` and see the defaults as
shipped (``fit_intercept=True``). Estimators built at collection time (in
``parametrize`` lists) keep the shipped default too."""

from __future__ import annotations

import pytest

from kernelcw import estimators

ESTIMATORS = [getattr(estimators, n) for n in estimators.__all__ if n.endswith("Classifier")]


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "shipped_defaults: run with the estimators' shipped defaults"
    )


@pytest.fixture(autouse=True)
def _papers_setting(request):
    if request.node.get_closest_marker("shipped_defaults"):
        yield
        return
    defaults = [cls.__init__.__kwdefaults__ for cls in ESTIMATORS]
    saved = [d["fit_intercept"] for d in defaults]
    for d in defaults:
        d["fit_intercept"] = False
    try:
        yield
    finally:
        for d, v in zip(defaults, saved, strict=True):
            d["fit_intercept"] = v
