"""kernelcw._blas: BLAS/LAPACK on sub-blocks of capacity buffers, against numpy."""

import math

import numpy as np
import pytest
from numba import njit

from kernelcw import _blas, _cholupdate


def _buffer(rng, n0, n):
    """A capacity buffer whose leading n x n block holds an SPD matrix's lower
    triangle, and whose strict upper triangle is random data to be kept."""
    A = rng.normal(size=(n, n))
    M = A @ A.T + n * np.eye(n)
    buf = rng.normal(size=(n0, n0))
    buf[:n, :n] = np.tril(M) + np.triu(buf[:n, :n], 1)
    return buf, M


@pytest.mark.parametrize(("n0", "n", "k"), [(9, 7, 3), (150, 130, 40), (70, 70, 1)])
def test_factor_solve_update_on_sub_blocks(n0, n, k):
    rng = np.random.default_rng(n)
    buf, M = _buffer(rng, n0, n)
    upper = np.triu(buf, 1).copy()
    assert _blas.potrf_lower(buf[:n, :n]) == 0
    L = np.tril(buf[:n, :n])
    np.testing.assert_allclose(L @ L.T, M, rtol=1e-12, atol=1e-12 * n)
    B = rng.normal(size=(n, k + 2))[:, :k]  # strided rows
    want = np.linalg.solve(L, B)
    _blas.trsm_lower_left(buf[:n, :n], B)
    np.testing.assert_allclose(B, want, rtol=1e-10, atol=1e-12)
    Lam = rng.normal(size=(n, k + 5))[:, 2 : 2 + k]
    target = L @ L.T + Lam @ Lam.T
    assert _cholupdate.tpqrt_update(buf[:n, :n], Lam) == 0
    L2 = np.tril(buf[:n, :n])
    assert np.all(np.diag(L2) > 0)
    np.testing.assert_allclose(L2 @ L2.T, target, rtol=1e-11, atol=1e-11 * n)
    np.testing.assert_array_equal(np.triu(buf, 1), upper)  # the other triangle is kept


def test_gemm_sub_both_forms_and_empty_inner_dimension():
    rng = np.random.default_rng(0)
    A = rng.normal(size=(5, 9))[:, :7]
    B = rng.normal(size=(7, 4))
    C = rng.normal(size=(6, 8))[:5, :4]
    want = 0.5 * C - 2.0 * A @ B
    _blas.gemm_sub(-2.0, A, B, 0.5, C)
    np.testing.assert_allclose(C, want, rtol=1e-13)
    At = rng.normal(size=(7, 5))
    C2 = np.empty((5, 4))
    _blas.gemm_sub(1.0, At, B, 0.0, C2, trans_a=True)
    np.testing.assert_allclose(C2, At.T @ B, rtol=1e-13)
    Bt = rng.normal(size=(4, 9))[:, :7]  # op(B) = B', strided rows
    C4 = np.empty((5, 4))
    _blas.gemm_sub(1.0, A, Bt, 0.0, C4, trans_b=True)
    np.testing.assert_allclose(C4, A @ Bt.T, rtol=1e-13)
    C5 = np.empty((5, 4))
    _blas.gemm_sub(1.0, At, Bt, 0.0, C5, trans_a=True, trans_b=True)
    np.testing.assert_allclose(C5, At.T @ Bt.T, rtol=1e-13)
    C3 = np.full((3, 2), np.nan)  # beta = 0 does not read C, as in BLAS
    _blas.gemm_sub(1.0, np.zeros((0, 3)), np.zeros((0, 2)), 0.0, C3, trans_a=True)
    np.testing.assert_array_equal(C3, 0.0)


@pytest.mark.parametrize(("n0", "n", "m"), [(9, 7, 3), (150, 130, 40), (70, 70, 2)])
@pytest.mark.parametrize("trans", [False, True])
def test_trsm_on_rows_is_the_left_solve_of_the_transpose(n0, n, m, trans):
    """trsm_lower_rows solves for BT's rows (BT = B', strided rows) with only L's lower
    triangle read: the same solve as trsm_lower_left on B."""
    rng = np.random.default_rng(n + m)
    buf, _ = _buffer(rng, n0, n)
    assert _blas.potrf_lower(buf[:n, :n]) == 0
    L = np.tril(buf[:n, :n])
    buf[:n, :n] += np.triu(np.full((n, n), np.nan), 1)  # never read
    BT = rng.normal(size=(m, n + 3))[:, 1 : 1 + n]
    want = np.linalg.solve(L.T if trans else L, BT.T).T
    _blas.trsm_lower_rows(buf[:n, :n], BT, trans=trans)
    np.testing.assert_allclose(BT, want, rtol=1e-10, atol=1e-12)


def test_overlapping_rows_are_refused():
    A = np.lib.stride_tricks.as_strided(np.zeros(10), shape=(3, 4), strides=(8, 8))
    with pytest.raises(ValueError, match="overlap"):
        _blas.trsm_lower_left(np.eye(3), A)


@pytest.mark.parametrize(("n", "k"), [(1, 1), (6, 2), (90, 1), (90, 4)])
def test_givens_update_is_the_rank_k_update_and_keeps_the_rest(n, k):
    """The rotation sweeps (used for k <= GIVENS_MAX_RANK) against the dense update:
    a positive diagonal, the strict upper triangle and Lam left as they were."""
    rng = np.random.default_rng(n + k)
    buf, M = _buffer(rng, n + 3, n)
    assert _blas.potrf_lower(buf[:n, :n]) == 0
    L = np.tril(buf[:n, :n])
    upper = np.triu(buf, 1).copy()
    Lam = rng.normal(size=(n, k + 2))[:, 1 : 1 + k]
    lam0 = Lam.copy()
    _cholupdate.givens_update(buf[:n, :n], Lam)
    L2 = np.tril(buf[:n, :n])
    assert np.all(np.diag(L2) > 0)
    np.testing.assert_allclose(L2 @ L2.T, L @ L.T + lam0 @ lam0.T, rtol=1e-12, atol=1e-12 * n)
    np.testing.assert_array_equal(np.triu(buf, 1), upper)
    np.testing.assert_array_equal(Lam, lam0)
    # the wrapper takes the same path up to GIVENS_MAX_RANK and agrees with dtpqrt past it
    wide = rng.normal(size=(n, _cholupdate.GIVENS_MAX_RANK + 1))
    A, B = L.copy(), L.copy()
    _cholupdate.tpqrt_update(A, wide.copy())
    for j in range(wide.shape[1]):
        _cholupdate.givens_update(B, wide[:, j : j + 1])
    np.testing.assert_allclose(np.tril(A), np.tril(B), rtol=1e-10, atol=1e-12)


@njit
def _givens_row_by_row(L, Lam):
    """givens_update as it was written first, one row at a time: the reference."""
    n, k = Lam.shape
    c = np.empty(n)
    s = np.empty(n)
    for j in range(k):
        for i in range(n):
            xi = Lam[i, j]
            row = L[i]
            for m in range(i):
                lim = row[m]
                row[m] = c[m] * lim + s[m] * xi
                xi = c[m] * xi - s[m] * lim
            lii = row[i]
            r = math.hypot(lii, xi)
            c[i] = lii / r
            s[i] = xi / r
            row[i] = r


@pytest.mark.parametrize("n", [0, 1, 3, 4, 5, 6, 8, 10, 11, 64, 97])
def test_givens_update_four_rows_at_a_time_is_row_by_row_to_the_bit(n):
    """On the leading block and on a trailing block's view (as the lazy form's purge
    passes it), with one column and with three."""
    rng = np.random.default_rng(n)
    for k, lo in ((1, 0), (3, 0), (1, 2), (3, 2)):
        buf, _ = _buffer(rng, n + 5, n + lo)
        assert _blas.potrf_lower(buf[: n + lo, : n + lo]) == 0
        Lam = rng.normal(size=(n, k)) * 10.0 ** rng.uniform(-3, 1)
        got, want = buf.copy(), buf.copy()
        _cholupdate.givens_update(got[lo : lo + n, lo : lo + n], Lam)
        _givens_row_by_row(want[lo : lo + n, lo : lo + n], Lam)
        np.testing.assert_array_equal(got, want)


def test_trsm_of_one_column_as_trsv_and_of_a_strided_column():
    rng = np.random.default_rng(3)
    buf, _ = _buffer(rng, 12, 10)
    assert _blas.potrf_lower(buf[:10, :10]) == 0
    L = np.tril(buf[:10, :10])
    for trans in (False, True):
        want = np.linalg.solve(L.T if trans else L, np.arange(1.0, 11.0))
        col = np.arange(1.0, 11.0).reshape(10, 1)  # contiguous: the dtrsv path
        _blas.trsm_lower_left(buf[:10, :10], col, trans=trans)
        np.testing.assert_allclose(col[:, 0], want, rtol=1e-12)
        wide = np.zeros((10, 3))
        wide[:, 1] = np.arange(1.0, 11.0)
        strided = wide[:, 1:2]  # one column whose entries are 3 apart: dtrsm
        _blas.trsm_lower_left(buf[:10, :10], strided, trans=trans)
        np.testing.assert_allclose(wide[:, 1], want, rtol=1e-12)
        np.testing.assert_array_equal(wide[:, [0, 2]], 0.0)


@pytest.mark.parametrize("fns", ["blas", "loops"])
def test_symmetric_level2_reads_and_writes_the_lower_triangle_only(fns):
    """sym_mv, sym_r1, sym_r2 (the explicit dual form's passes) against dense numpy on
    a leading block of a capacity buffer whose strict upper triangle is NaN: the rank
    updates' loops (n <= RANK_LOOP_MAX) and BLAS's (above); sym_mv by dsymv, and by the
    loop of SYM_LOOPS (a walk of one input's) at every size, odd and even orders
    (its rows go two at a time)."""
    from numba import njit

    @njit
    def run(fns, n, A, x, y, out):
        _blas.sym_mv(fns, n, A, x, out)
        _blas.sym_r1(fns, n, -0.25, x, A)
        _blas.sym_r2(fns, n, 2.0, x, y, A)

    rng = np.random.default_rng(7)
    big = _blas.RANK_LOOP_MAX + 2
    record = _blas.SYM_BLAS if fns == "blas" else _blas.sym_record(_blas.SYM_LOOPS)
    for n, cap in [(1, 1), (2, 2), (5, 8), (6, 9), (120, 130), (big, big + 3)]:
        S = rng.normal(size=(n, n))
        S = S + S.T
        A = np.full((cap, cap), np.nan)
        A[:n, :n] = np.where(np.tri(n, dtype=bool), S, np.nan)
        x, y, out = rng.normal(size=n), rng.normal(size=n), np.full(n, np.nan)
        run(record, n, A, x, y, out)
        np.testing.assert_allclose(out, S @ x, rtol=1e-12, atol=1e-12 * n)
        want = S - 0.25 * np.outer(x, x) + 2.0 * (np.outer(x, y) + np.outer(y, x))
        low = np.tri(n, dtype=bool)
        np.testing.assert_allclose(A[:n, :n][low], want[low], rtol=1e-12, atol=1e-12 * n)
        assert np.isnan(A[:n, :n][~low]).all() and np.isnan(A[n:]).all()


def test_sym_inverse_in_place_on_the_lower_triangle():
    from numba import njit

    @njit
    def run(fns, n, A):
        return _blas.sym_inverse(fns, n, A)

    rng = np.random.default_rng(11)
    buf, M = _buffer(rng, 40, 33)
    upper = np.triu(buf, 1).copy()
    assert run(_blas.SYM_BLAS, 33, buf) == 0
    low = np.tril(buf[:33, :33])
    inv = low + np.tril(low, -1).T
    np.testing.assert_allclose(inv @ M, np.eye(33), atol=1e-10)
    np.testing.assert_array_equal(np.triu(buf, 1), upper)
    bad = -np.eye(3)
    assert run(_blas.SYM_BLAS, 3, bad) > 0  # not positive definite: LAPACK's info


def test_read_only_factors_and_operands():
    """A factor from a read-only memory map (a model unpickled with mmap) is only read."""
    rng = np.random.default_rng(5)
    buf, _ = _buffer(rng, 8, 8)
    assert _blas.potrf_lower(buf) == 0
    L = np.tril(buf)
    buf.setflags(write=False)
    for m in (1, 3):
        B = rng.normal(size=(8, m))
        want = np.linalg.solve(L, B)
        _blas.trsm_lower_left(buf, B)
        np.testing.assert_allclose(B, want, rtol=1e-10)
    x = rng.normal(size=8)
    want = np.linalg.solve(L.T, x)
    _blas.trsv_lower(buf, x, trans=True)
    np.testing.assert_allclose(x, want, rtol=1e-10)
    C = np.zeros((8, 8))
    _blas.gemm_sub(1.0, buf, buf, 0.0, C, trans_a=True)
    np.testing.assert_allclose(C, buf.T @ buf, rtol=1e-12)


@pytest.mark.parametrize(("n0", "n", "m"), [(9, 7, 3), (150, 130, 65), (5, 5, 1)])
def test_symmetric_level3_reads_and_writes_the_lower_triangle_only(n0, n, m):
    """sym_mm (dsymm) and sym_rk (dsyrk), the blocked dual walk's calls, on leading
    sub-blocks of capacity buffers, against dense numpy: only the lower triangle of the
    symmetric operand is read, only its lower triangle written."""
    rng = np.random.default_rng(n)
    fns = _blas.SYM_BLAS
    buf, M = _buffer(rng, n0, n)
    buf[:n, :n] += np.triu(rng.normal(size=(n, n)), 1)  # junk above the diagonal
    B = rng.normal(size=(n0, m + 3))
    C = np.full((n0, m + 3), 7.0)
    _blas.sym_mm(fns, n, m, buf, B, C)
    np.testing.assert_allclose(C[:n, :m], M @ B[:n, :m], rtol=1e-12, atol=1e-12 * n)
    assert np.all(C[n:] == 7.0) and np.all(C[:, m:] == 7.0)
    upper = np.triu(buf, 1).copy()
    U = rng.normal(size=(n0, m + 2))
    _blas.sym_rk(fns, n, m, -0.5, U, buf)
    want = M - 0.5 * U[:n, :m] @ U[:n, :m].T
    np.testing.assert_allclose(np.tril(buf[:n, :n]), np.tril(want), rtol=1e-12, atol=1e-11 * n)
    np.testing.assert_array_equal(np.triu(buf, 1), upper)


@pytest.mark.parametrize(("m", "n"), [(0, 5), (5, 0), (1, 1), (7, 13), (64, 200)])
def test_rows_mv_on_sub_blocks_both_ways(m, n):
    """rows_mv (dgemv), the blocked walk's products with its terms, on the leading
    m x n of a wider buffer: y = A x + beta y and y = A' x + beta y against numpy, and
    nothing written past y's length."""
    rng = np.random.default_rng(m * 31 + n)
    fns = _blas.SYM_BLAS
    A = rng.normal(size=(m + 2, n + 5))
    for trans, (lx, ly) in ((False, (n, m)), (True, (m, n))):
        x = rng.normal(size=lx + 3)
        for beta in (0.0, 1.0):
            y = np.full(ly + 2, 3.0)
            _blas.rows_mv(fns, m, n, A, x, beta, y, trans)
            op = A[:m, :n].T if trans else A[:m, :n]
            want = op @ x[:lx] + beta * 3.0
            np.testing.assert_allclose(y[:ly], want, rtol=1e-12, atol=1e-12 * max(m, n, 1))
            assert np.all(y[ly:] == 3.0)


def test_address_records_keep_their_order():
    """The routine records are tuples of ints: compiled code cached on disk in other
    modules reads them by position, and a reordered record would hand one routine
    another's arguments without a recompile. New fields go at the end."""
    assert _blas.SymBlas._fields == (
        "symv", "syr", "syr2", "potrf", "potri", "symm", "syrk", "gemv",
    )  # fmt: skip
    assert _blas.TriBlas._fields == ("trsm", "trsv", "gemm")
    assert all(isinstance(a, int) for a in _blas.SYM_BLAS + _blas.TRI_BLAS)
    # the loops' record: dsymv's address 0 (sym_mv's loop), the others BLAS's
    assert _blas.SYM_LOOPS == (0, *_blas.SYM_PLAIN[1:]) and _blas.SYM_BLAS.symv != 0


@pytest.mark.parametrize(("n", "k", "group"), [(40, 5, 2), (130, 40, 8), (130, 40, 64), (9, 9, 1)])
def test_staircase_update_is_the_rank_k_update(n, k, group):
    """Lam's column j zero above row first[j] (non-decreasing, repeats and the last
    row included): the band-by-band QR gives the dense update, a positive diagonal, and
    keeps the strict upper triangle; on strided views of capacity buffers."""
    rng = np.random.default_rng(n + k + group)
    buf, _ = _buffer(rng, n + 4, n)
    assert _blas.potrf_lower(buf[:n, :n]) == 0
    L = np.tril(buf[:n, :n])
    upper = np.triu(buf, 1).copy()
    first = np.sort(rng.integers(0, n, size=k))
    first[k // 2] = first[k // 2 - 1] if k > 1 else first[0]  # a repeated row
    first[-1] = n - 1
    store = rng.normal(size=(n, k + 3))
    Lam = store[:, 1 : 1 + k]
    Lam[np.arange(n)[:, None] < first[None, :]] = 0.0
    target = L @ L.T + Lam @ Lam.T
    assert _cholupdate.staircase_update(buf[:n, :n], Lam, first, group=group, nb=8) == 0
    L2 = np.tril(buf[:n, :n])
    assert np.all(np.diag(L2) > 0)
    np.testing.assert_allclose(L2 @ L2.T, target, rtol=1e-11, atol=1e-11 * n)
    np.testing.assert_array_equal(np.triu(buf, 1), upper)
    with pytest.raises(ValueError, match="non-decreasing"):
        _cholupdate.staircase_update(L.copy(), Lam.copy(), first[::-1] if k > 1 else [-1])


@pytest.mark.parametrize("m", [1, 3])
@pytest.mark.parametrize("layout", ["contiguous", "column of a wider array"])
def test_symm_lower_from_python_reads_the_lower_triangle_of_a_sub_block(m, layout):
    """C = A[:n, :n] B with A given by its lower triangle inside a larger buffer (junk
    above the diagonal and past n); one contiguous column by dsymv, else dsymm; B and C
    views of wider arrays (strided columns) are left to dsymm, their other columns
    untouched."""
    rng = np.random.default_rng(m)
    n, cap = 7, 10
    A = rng.normal(size=(cap, cap))
    S = np.tril(A[:n, :n]) + np.tril(A[:n, :n], -1).T
    A[np.triu_indices(cap, 1)] = np.nan  # never read
    if layout == "contiguous":
        B, C = rng.normal(size=(n, m)), np.full((n, m), np.nan)
        Bw = Cw = None
    else:
        Bw, Cw = rng.normal(size=(n, m + 2)), np.full((n, m + 2), -5.0)
        B, C = Bw[:, 1 : 1 + m], Cw[:, 1 : 1 + m]
    _blas.symm_lower(A, B, C)
    np.testing.assert_allclose(C, S @ B, rtol=1e-13, atol=1e-13)
    if Cw is not None:
        assert np.all(Cw[:, 0] == -5.0) and np.all(Cw[:, 1 + m :] == -5.0)


def test_plain_records_rebuild_the_named_ones():
    """Compiled calls from Python take the BLAS, rule and budget policy records as
    plain tuples and rebuild the namedtuples inside: field for field the same."""
    from kernelcw.budget import make_policy
    from kernelcw.engines.dual.explicit import records
    from kernelcw.rules import RULES, RuleParams, rule_from_plain

    assert _blas.sym_record(_blas.SYM_PLAIN) == _blas.SYM_BLAS
    assert _blas.tri_record(_blas.TRI_PLAIN) == _blas.TRI_BLAS
    assert _blas.tri_record(_blas.TRI_BLAS) == _blas.TRI_BLAS  # (a record passes through)
    rules = [
        RuleParams(int(code), 0.25 + i, 1.5, 2.0, 3.0) for i, code in enumerate(RULES.values())
    ]
    for r in rules:
        assert rule_from_plain(tuple(r)) == r
    for policy in ("oldest", "random", "smallest", "project"):
        pol = make_policy(policy, 7, 11)
        pol.counter = 5
        got, rule = records(pol.plain_record(), tuple(rules[0]))
        want = pol.record()
        assert rule == rules[0]
        assert got._fields == want._fields
        for name, g, w in zip(want._fields, got, want, strict=True):
            if isinstance(w, np.ndarray):
                assert g is w, name  # (numba gives the caller's own arrays back)
            else:
                assert g == w, name  # (the values; numba boxes its uint64 seed as an int)
