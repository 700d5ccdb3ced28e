"""The Cholesky forms' products for a walk of one input (a call of one row), in loops.

Before a walk, the queue and lazy forms solve the input's kernel column with their
factor (``w = L^-1 k``), take ``|w|^2`` and ``r . w``, and for a leaver ``y = L^-1 e_p``
its products with w, itself and r (:func:`.queue_block.block_products`,
:func:`.lazy_block.lazy_products`). For a block of inputs those are BLAS-3 calls. For
one input each is a BLAS-2 or a 1 x 1 dgemm whose call costs more than its work: at
B = 200 the queue form's seven BLAS calls took 7.3 us where these loops take 2.5
(timed alone, by hand), about a tenth of a one-row ``partial_fit``.

They take over up to :data:`ONE_INPUT_MAX_N` support vectors: alone, a forward solve
took 1.8 against 2.7 us at n = 200, 10 against 13 us at 500, alike at 1,000, and at 2,000
353 against 195 us (BLAS blocks it for the cache; one thread, by hand). Beyond, the BLAS
calls stay, and their threads where "auto" gives them.

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
    C-ordered: numba vectorises only loops over unit-stride arrays it can prove so."""
    for i in range(hi - lo):
        row = L[lo + i]
        acc = 0.0
        for j in range(i):
            acc += row[lo + j] * x[j]
        x[i] = (x[i] - acc) / row[lo + i]


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
