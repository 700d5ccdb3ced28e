"""The blocked nu/Pi walk's deferred terms (:mod:`.deferred`): products with the matrix
a sub-block started from plus the rank-one terms made since, and settling the terms
into the matrix at the sub-block's end.

A matrix (Pi, or "project"'s inverse jittered Gram matrix) is its start value ``A0``
(by its lower triangle, the start slots), padded with the slots that enter in the
sub-block, plus ``U diag(s) U'`` over the terms (rows of ``Ut``); removed slots read
as zero.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from ..._blas import rows_mv, sym_mv, sym_rk
from ...budget.kernels import lower, swap_last_lower

__all__ = [
    "add_terms",
    "column",
    "drop_start_slot",
    "low_rank",
    "product",
    "product_now",
    "settle",
]


@njit(cache=True, error_model="numpy")
def add_terms(fns, Ut, nr, coef, nP, out, dead):
    """out[:nP] += sum_r coef[r] Ut[r] (one dgemv), then zero at removed slots."""
    rows_mv(fns, nr, nP, Ut, coef, 1.0, out, np.bool_(True))  # (typed: one compile)
    for i in range(nP):
        if dead[i]:
            out[i] = 0.0


@njit(cache=True, error_model="numpy")
def low_rank(fns, Ut, s, nr, x, nP, out, tmp, dead):
    """out[:nP] += U diag(s) U' x over the nr terms (rows of Ut), zero at removed
    slots: two dgemv (the terms' dot products in a compiled loop, which cannot be
    vectorised, were a third of a "project" round at B = 1000)."""
    rows_mv(fns, nr, nP, Ut, x, 0.0, tmp, np.bool_(False))
    for r in range(nr):
        tmp[r] *= s[r]
    add_terms(fns, Ut, nr, tmp, nP, out, dead)


@njit(cache=True, error_model="numpy")
def column(fns, A0, n0, Ut, s, nr, P, nP, dead, out, tmp):
    """Column P of the current matrix (start matrix A0 by its lower triangle, padded,
    plus the terms), zero at removed slots."""
    for i in range(nP):
        out[i] = lower(A0, i, P) if P < n0 and i < n0 else 0.0
    for r in range(nr):
        tmp[r] = s[r] * Ut[r, P]
    add_terms(fns, Ut, nr, tmp, nP, out, dead)


@njit(cache=True, error_model="numpy")
def product(fns, C0, col, n0, Ut, s, nr, kP, nP, dead, out, tmp):
    """out = (current matrix) k for the kernel vector kP (zero at removed slots): the
    start matrix's product from the sub-block's dsymm (column ``col`` of C0, which
    :func:`drop_start_slot` keeps free of the removed start slots), plus the terms;
    zero at removed slots."""
    for i in range(n0):
        out[i] = C0[i, col]
    _plus_terms(fns, n0, Ut, s, nr, kP, nP, dead, out, tmp)


@njit(cache=True, error_model="numpy")
def product_now(fns, A0, n0, Ut, s, nr, kP, nP, dead, out, tmp):
    """:func:`product` with the start matrix's part taken now, by one dsymv of A0 (its
    lower triangle) with kP (zero at removed slots), for an input whose sub-block left
    A0 out of its dsymm."""
    sym_mv(fns, n0, A0, kP, out)
    _plus_terms(fns, n0, Ut, s, nr, kP, nP, dead, out, tmp)


@njit(cache=True, error_model="numpy")
def _plus_terms(fns, n0, Ut, s, nr, kP, nP, dead, out, tmp):
    """The rest of a product whose start part is in ``out[:n0]``: zero at the slots
    entered since, plus the terms, zero at removed slots."""
    for i in range(n0, nP):
        out[i] = 0.0
    low_rank(fns, Ut, s, nr, kP, nP, out, tmp, dead)


@njit(cache=True, error_model="numpy")
def drop_start_slot(A0, C0, n0, p, Kold, c0, c1, col0):
    """Start slot p is removed: the products ``A0 K`` of the sub-block's inputs c0..c1-1
    lose p's term, ``A0[:, p] K[p, j]`` (one read of the column, into ``col0``)."""
    for i in range(n0):
        col0[i] = lower(A0, i, p)
    for i in range(n0):
        x = col0[i]
        row = C0[i]
        for j in range(c0, c1):
            row[j] -= x * Kold[p, j]


@njit(cache=True, error_model="numpy")
def settle(A, n0, n_end, ops, nops, lg, Ut, s, nr, Ulog, fns):
    """Add the terms to A (lower triangle, start layout on entry): first the slot
    moves of the sub-block (an append is a zero row and column, a removal moves the
    last slot into its place), then the terms by slot, positive and negative weights
    in one dsyrk each."""
    n = n0
    for o in range(nops):
        j = ops[o]
        if j < 0:
            for i in range(n + 1):
                A[n, i] = 0.0
            n += 1
        else:
            swap_last_lower(n, j, A)
            n -= 1
    for sign in (1.0, -1.0):
        k = np.int64(0)  # (typed, not the literal 0: sym_rk compiles once)
        for r in range(nr):
            w = s[r] * sign
            if w > 0.0:
                sq = math.sqrt(w)
                row = Ut[r]
                for i in range(n_end):
                    Ulog[i, k] = sq * row[lg[i]]
                k += 1
        sym_rk(fns, n_end, k, sign, Ulog, A)
