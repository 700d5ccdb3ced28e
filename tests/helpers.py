"""Comparisons shared by the tests against the slow references."""

from __future__ import annotations

import numpy as np


def assert_rel_close(got, want, rtol, what=""):
    """||got - want|| <= rtol ||want|| (Frobenius over the whole array), got finite."""
    got = np.asarray(got, dtype=float)
    want = np.asarray(want, dtype=float)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    assert np.all(np.isfinite(got)), f"{what}: non-finite values"
    err = float(np.linalg.norm(got - want))
    scale = float(np.linalg.norm(want))
    assert err <= rtol * scale, (
        f"{what}: ||fast - ref|| = {err:.3e}, ||ref|| = {scale:.3e}, "
        f"relative {err / scale if scale else np.inf:.3e} > {rtol:g}"
    )


def assert_same_predictions(got, want, what=""):
    """Identical per-round predictions; on failure, the first round that differs."""
    got = np.asarray(got)
    want = np.asarray(want)
    assert got.shape == want.shape, f"{what}: {got.shape} != {want.shape}"
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, (
        f"{what}: {bad.size} of {want.size} predictions differ, first at round {bad[0]} "
        f"(fast {got[bad[0]]!r}, ref {want[bad[0]]!r})"
    )
