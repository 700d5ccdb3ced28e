"""Symmetric level-2 operations as compiled loops, on matrices kept by their lower
triangle (C order): the matrix-vector product and the rank-one and rank-two updates
that :mod:`kernelcw._blas`'s wrappers make instead of BLAS dsymv, dsyr and dsyr2 for
small orders (:data:`kernelcw._blas.RANK_LOOP_MAX`), where a BLAS call costs more than
its work and, for a walk of one input, BLAS's thread limit more than both.
"""

from __future__ import annotations

from numba import njit

__all__ = ["r1_loop", "r2_loop", "symv_loop"]


@njit(cache=True, fastmath={"reassoc", "contract"})
def symv_loop(n, A, x, out):
    """:func:`kernelcw._blas.sym_mv` in a compiled loop: rows two at a time (each pass over the
    triangle reads x and writes out once for both rows), each row's dot product and its
    mirrored column's update in the same pass; ``fastmath`` reassociation and
    contraction so that the sums vectorise, as in
    :mod:`kernelcw.engines.dual.one_input` (an order of the compiler's choosing, as
    accurate as dsymv's own). Alone, on one thread: 1.85 against dsymv's 2.07 us at
    n = 200, 7.0 against 7.9 at 400, 28 against 29 at 768 (by hand); a walk of one
    input takes it where it would otherwise need BLAS's threads set for one call
    (:data:`kernelcw._blas.SYM_LOOPS`)."""
    for i in range(n):
        out[i] = 0.0
    i = 0
    while i + 1 < n:
        ra = A[i]
        rb = A[i + 1]
        xa = x[i]
        xb = x[i + 1]
        acc_a = 0.0
        acc_b = 0.0
        for j in range(i):
            aj = ra[j]
            bj = rb[j]
            xj = x[j]
            acc_a += aj * xj
            acc_b += bj * xj
            out[j] += aj * xa + bj * xb
        out[i] += acc_a + ra[i] * xa + rb[i] * xb
        out[i + 1] += acc_b + rb[i] * xa + rb[i + 1] * xb
        i += 2
    if i < n:
        ra = A[i]
        xa = x[i]
        acc_a = 0.0
        for j in range(i):
            acc_a += ra[j] * x[j]
            out[j] += ra[j] * xa
        out[i] += acc_a + ra[i] * xa


@njit(cache=True)
def r1_loop(n, alpha, x, A, save, saving):
    """The lower triangle of ``A[:n, :n]`` += alpha x x', and with ``saving`` its values
    before into ``save``'s in the same pass (read once, both written); elementwise,
    vectorised without reassociation."""
    for i in range(n):
        row = A[i]
        s = alpha * x[i]
        if saving:
            keep = save[i]
            for j in range(i + 1):
                p = row[j]
                keep[j] = p
                row[j] = p + s * x[j]
        else:
            for j in range(i + 1):
                row[j] += s * x[j]


@njit(cache=True)
def r2_loop(n, alpha, x, y, A):
    """The lower triangle of ``A[:n, :n]`` += alpha (x y' + y x') (as :func:`r1_loop`)."""
    for i in range(n):
        row = A[i]
        ax = alpha * x[i]
        ay = alpha * y[i]
        for j in range(i + 1):
            row[j] += ax * y[j] + ay * x[j]
