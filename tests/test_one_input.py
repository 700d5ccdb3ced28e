"""The Cholesky forms' products for one input (:mod:`kernelcw.engines.dual.one_input`)
against numpy, and against the BLAS products the same functions make for a block:
the same values to rounding, and NaN carried through."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.linalg import solve_triangular

from kernelcw import _blas
from kernelcw.engines.dual import lazy_block, queue_block
from kernelcw.engines.dual.one_input import dot, solve_lower, sub_mv

RTOL = 1e-11


def _lower(rng, n: int, cap: int) -> np.ndarray:
    """A well-conditioned Cholesky factor in a cap x cap buffer, garbage above it
    (the loops must not read the strict upper triangle)."""
    A = rng.normal(size=(n, n))
    out = rng.normal(size=(cap, cap)) * 1e6
    out[:n, :n] = np.linalg.cholesky(A @ A.T + n * np.eye(n)) + np.triu(out[:n, :n], 1)
    return out


@pytest.mark.parametrize("n", [0, 1, 7, 64, 203])
def test_the_loops_agree_with_numpy(n):
    rng = np.random.default_rng(n)
    L = _lower(rng, n, n + 5)
    b = rng.normal(size=n + 3)
    x = b.copy()
    solve_lower(L, 0, n, x)
    want = solve_triangular(np.tril(L[:n, :n]), b[:n], lower=True)
    np.testing.assert_allclose(x[:n], want, rtol=RTOL, atol=1e-14)
    assert np.array_equal(x[n:], b[n:])  # (past n: untouched)
    lo = n // 3  # a trailing block of the factor: L[lo:n, lo:n]
    x = b.copy()
    solve_lower(L, lo, n, x)
    want = solve_triangular(np.tril(L[lo:n, lo:n]), b[: n - lo], lower=True)
    np.testing.assert_allclose(x[: n - lo], want, rtol=RTOL, atol=1e-14)
    A = rng.normal(size=(n + 2, n + 4))
    y = rng.normal(size=n + 2)
    got = y.copy()
    sub_mv(A, n + 1, n, b, got)
    np.testing.assert_allclose(got[: n + 1], y[: n + 1] - A[: n + 1, :n] @ b[:n], rtol=RTOL)
    assert got[n + 1] == y[n + 1]
    assert dot(b, x, n) == pytest.approx(float(b[:n] @ x[:n]), rel=RTOL, abs=1e-14)


def test_a_nan_goes_through_the_loops():
    rng = np.random.default_rng(0)
    L = _lower(rng, 5, 5)
    x = rng.normal(size=5)
    x[2] = np.nan
    solve_lower(L, 0, 5, x)
    assert np.isnan(x[2:]).all() and np.isfinite(x[:2]).all()
    assert np.isnan(dot(x, x, 5))


def _queue_buffers(rng, nO: int, nN: int, cap: int = 300):
    LO, LN = _lower(rng, nO, cap), _lower(rng, nN, cap)
    LNO = rng.normal(size=(cap, cap))
    rO, rN = rng.normal(size=(cap, 1)), rng.normal(size=(cap, 1))
    return LO, LNO, LN, rO, rN


@pytest.mark.parametrize(("nO", "nN"), [(120, 80), (1, 0), (3, 40), (200, 1)])
def test_the_queue_products_of_one_input_are_the_blocks_first_column(nO, nN):
    """forward_products and the one candidate's products of block_products for one
    input (loops) against the same input as the first of two (BLAS)."""
    rng = np.random.default_rng(nO + nN)
    bufs = _queue_buffers(rng, nO, nN)
    n = nO + nN
    K0 = rng.normal(size=(n, 2))
    Kbb = np.eye(2)
    ks = np.arange(n)
    fns = _blas.tri_record(_blas.TRI_PLAIN)
    none = queue_block.NO_FORWARD  # (no try's products: made here)
    one = queue_block.block_products(fns, bufs, nO, nN, K0[:, :1].copy(), Kbb[:1, :1], ks, 0,
                                     1, 1, none)  # fmt: skip
    two = queue_block.block_products(fns, bufs, nO, nN, K0, Kbb, ks, 0, 2, 1, none)
    names = ("K0c", "Kss", "WO", "X", "G", "rW", "P0", "H0", "rho0")
    for name, a, b in zip(names, one, two, strict=True):
        if name in ("G", "Kss", "rW"):
            a, b = a[0, 0], b[0, 0]
        elif a.ndim == 2 and name != "H0":
            a, b = a[:, 0], b[:, 0]
        np.testing.assert_allclose(a, b, rtol=RTOL, atol=1e-12, err_msg=name)


@pytest.mark.parametrize(("n", "leaver"), [(150, 0), (150, 77), (150, 149), (1, 0)])
def test_the_lazy_products_of_one_input_are_the_blocks_first_column(n, leaver):
    rng = np.random.default_rng(n + leaver)
    L = _lower(rng, n, n + 10)
    r = rng.normal(size=n + 10)
    K0 = rng.normal(size=(n, 2))
    Kbb = np.eye(2)
    ks = np.arange(n)
    V, new = np.array([leaver]), np.array([-1])
    args = (L, r)
    none = lazy_block.NO_LAZY_FORWARD
    one = lazy_block.lazy_products(_blas.TRI_PLAIN, *args, K0[:, :1].copy(), Kbb[:1, :1], ks,
                                   0, 1, V, new, 8, none)  # fmt: skip
    two = lazy_block.lazy_products(_blas.TRI_PLAIN, *args, K0, Kbb, ks, 0, 2, V, new, 8, none)
    names = ("Kss", "W", "G", "rW", "P", "H", "rho")
    for name, a, b in zip(names, one, two, strict=True):
        if name in ("G", "Kss"):
            a, b = a[0, 0], b[0, 0]
        elif name in ("W", "P"):
            a, b = a[:, 0], b[:, 0]
        elif name == "rW":
            a, b = a[0], b[0]
        np.testing.assert_allclose(a, b, rtol=RTOL, atol=1e-12, err_msg=name)


@pytest.mark.parametrize(
    ("m", "p0"), [(5, 0), (5, 2), (3, 3), (1024, 100), (1025, 100), (1100, 1099)]
)
def test_refresh_of_r_by_loops_and_by_blas(m, p0):
    """lazy_block.refresh_r, ``r[p0:m] = L[p0:m, p0:m]^-1 (qv[p0:m] - L[p0:m, :p0] r[:p0])``:
    by the loops up to ONE_INPUT_MAX_N = 1024, by BLAS above (both sides of the bound),
    against scipy; the rest of r untouched, the strict upper triangle not read."""
    rng = np.random.default_rng(m + p0)
    L = _lower(rng, m, m + 2)
    r, qv = rng.normal(size=m + 2), rng.normal(size=m + 2)
    r0 = r.copy()
    Ll = np.tril(L[:m, :m])
    want = solve_triangular(Ll[p0:m, p0:m], qv[p0:m] - Ll[p0:m, :p0] @ r0[:p0], lower=True)
    lazy_block.refresh_r(_blas.TRI_PLAIN, L, r, qv, p0, m)
    np.testing.assert_allclose(r[p0:m], want, rtol=RTOL, atol=1e-13)
    assert np.array_equal(r[:p0], r0[:p0]) and np.array_equal(r[m:], r0[m:])


@pytest.mark.parametrize(("nN", "nO2", "nO"), [(0, 5, 6), (4, 0, 1), (10, 20, 22),
                                               (500, 524, 525), (500, 525, 526)])  # fmt: skip
def test_drop_columns_by_loops_and_by_blas(nN, nO2, nO):
    """queue_block.drop_columns: L_N takes the leavers' columns of L_NO (which become
    zero) and ``r_N = L_N^-1 (q_N - L_NO r_O)``, r_N by the loops up to nN + nO2 = 1024
    and by BLAS above, against scipy."""
    rng = np.random.default_rng(nN + nO)
    capN, capO = nN + 3, nO + 3
    LN = _lower(rng, nN, capN)
    LNO = rng.normal(size=(capN, capO)) * 0.1
    rO, rN, qN = rng.normal(size=(capO, 1)), rng.normal(size=(capN, 1)), rng.normal(size=nN)
    before = np.tril(LN[:nN, :nN])
    Lam = LNO[:nN, nO2:nO].copy()
    rN_tail = rN[nN:].copy()
    queue_block.drop_columns(_blas.TRI_BLAS, (LN, LNO, rO, rN), nN, nO2, nO, qN)
    after = np.tril(LN[:nN, :nN])
    np.testing.assert_allclose(after @ after.T, before @ before.T + Lam @ Lam.T, rtol=1e-10,
                               atol=1e-10)  # fmt: skip
    assert not LNO[:nN, nO2:nO].any()
    want = solve_triangular(after, qN - LNO[:nN, :nO2] @ rO[:nO2, 0], lower=True)
    np.testing.assert_allclose(rN[:nN, 0], want, rtol=RTOL, atol=1e-13)
    assert np.array_equal(rN[nN:], rN_tail)
