"""The Cholesky forms' products for a walk of one input (a call of one row), in loops.

Before a walk, the queue and lazy forms solve the input's kernel column with their
factor (``w = L^-1 k``), take ``|w|^2`` and ``r . w``, and for a leaver ``y = L^-1 e_p``
its products with w, itself and r (:func:`.queue_block.block_products`,
:func:`.lazy_block.lazy_products`). For a block of inputs those are BLAS-3 calls. For
one input each is a BLAS-2 or a 1 x 1 dgemm whose call costs more than its work: at
B = 200 the queue form's seven BLAS calls took 7.3 us where these loops take 2.5
(timed alone, by hand), about a tenth of a one-row ``partial_fit``.

They take over up to :data:`ONE_INPUT_MAX_N` support vectors: alone, a forward solve
(:func:`solve_lower`) took 1.75 against BLAS's 2.8 us at n = 200, 10.4 against 13.6 at 500,
47 against 55 at 1,000 (one thread, by hand; until session 31 the loop was not vectorised
and took 7.4, 44 and 177 us). Beyond, the BLAS calls stay, and their threads
where "auto" gives them.

The loops sum in an order of the compiler's choosing (``fastmath`` reassociation and
contraction, so the sums vectorise; without it each row's sum is one chain of
dependent additions, three times slower than BLAS). That is as accurate as BLAS's own
order, which is also its own: the results agree with the BLAS calls to rounding. No
other fast-math flag is set, so a NaN or an infinity propagates as in BLAS. A walk of
one input on a model of a given size always takes the same way, quiet or not, so a
model learns the same bits whether or not :mod:`.quiet` tried its row (which these
forms do only up to the same size, and so without BLAS: their ``quiet_blas`` is False).
"""

from __future__ import annotations

from numba import njit

__all__ = ["ONE_INPUT_MAX_N", "dot", "solve_lower", "sub_mv"]

#: The most support vectors for which a walk of one input takes these loops.
ONE_INPUT_MAX_N = 1024

_FAST = {"reassoc", "contract"}


@njit(cache=True, fastmath=_FAST)
def solve_lower(L, lo, hi, x):
    """``x[:hi - lo] = L[lo:hi, lo:hi]^-1 x[:hi - lo]`` in place (L lower triangular;
    its strict upper triangle is not read). Vectors here are 1-d and contiguous, and L
    C-ordered: numba vectorises only loops over unit-stride arrays it can prove so, and
    only indices it can prove non-negative (each row is a slice from column lo: indexed
    ``row[lo + j]``, every read checked ``lo + j`` for a negative index, and the loop was
    not vectorised, 3.7x slower: 7.4 against 2.0 us at n = 200, alone). Rows four at a
    time: their four dot products with the x solved so far in one pass (one dependent
    chain per four rows, not per row), then their 4 x 4 triangle. Alone, one thread:
    1.75 us at n = 200, 10.4 at 500, 47 at 1,000 (BLAS's dtrsm of one column: 2.8, 13.6,
    55; by hand)."""
    m = hi - lo
    i = 0
    while i + 4 <= m:
        r0 = L[lo + i, lo:hi]
        r1 = L[lo + i + 1, lo:hi]
        r2 = L[lo + i + 2, lo:hi]
        r3 = L[lo + i + 3, lo:hi]
        a0 = 0.0
        a1 = 0.0
        a2 = 0.0
        a3 = 0.0
        for j in range(i):
            xj = x[j]
            a0 += r0[j] * xj
            a1 += r1[j] * xj
            a2 += r2[j] * xj
            a3 += r3[j] * xj
        x0 = (x[i] - a0) / r0[i]
        x1 = (x[i + 1] - a1 - r1[i] * x0) / r1[i + 1]
        x2 = (x[i + 2] - a2 - r2[i] * x0 - r2[i + 1] * x1) / r2[i + 2]
        x3 = (x[i + 3] - a3 - r3[i] * x0 - r3[i + 1] * x1 - r3[i + 2] * x2) / r3[i + 3]
        x[i] = x0
        x[i + 1] = x1
        x[i + 2] = x2
        x[i + 3] = x3
        i += 4
    while i < m:  # (the last rows, fewer than four)
        row = L[lo + i, lo:hi]
        acc = 0.0
        for j in range(i):
            acc += row[j] * x[j]
        x[i] = (x[i] - acc) / row[i]
        i += 1


@njit(cache=True, fastmath=_FAST)
def sub_mv(A, m, n, x, y):
    """``y[:m] -= A[:m, :n] x[:n]`` (A's rows contiguous)."""
    for i in range(m):
        row = A[i]
        acc = 0.0
        for j in range(n):
            acc += row[j] * x[j]
        y[i] -= acc


@njit(cache=True, fastmath=_FAST)
def dot(x, y, n):
    """``x[:n] . y[:n]``."""
    acc = 0.0
    for i in range(n):
        acc += x[i] * y[i]
    return acc
