"""Compact storage of the diagonal engine's state for sparse rows: a coordinate's
(mean, variance) pairs live in a slot, handed out in the order coordinates first
appear, so the state a stream touches is packed together whatever the width d.

A model over ``2^24`` hashed features that meets ``10^5`` of them held a
``(d, K, 2)`` buffer whose pages all got touched (hashing scatters the features
over every page): 256 MB zeroed by the system page by page, twice the 128 MB of a
``(d,)`` weight vector. Here a fit holds a ``(d,)`` table of slot numbers (4
bytes a coordinate, zeroed lazily as well) and ``(slots, K, 2)`` pairs. On 20
Newsgroups at ``2^24`` the pass took 34-35 ms instead of 51-55 (scikit-learn's
``SGDClassifier(pa1)``: 51-61); at ``2^22`` the two tie (25 ms); at ``2^20`` the
dense buffer is faster (15 ms against 21: the slot is a second dependent load per
non-zero), hence ``PrimalDiagEngine.SLOTS_FROM``.

The rounds are :mod:`kernelcw.engines._diag_walk`'s own (``_diag_row``), run on a
row whose coordinates were replaced by their slots: the arithmetic, and its order,
is the dense walk's, so the results are the same bit for bit. Slot 0 is no
coordinate's and stays ``(0, 0)`` (mean 0, the prior variance): a row looked up
through the table without learning (:func:`slot_rows`) reads the prior for
coordinates never seen.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from ._prefetch import AHEAD, prefetch

__all__ = [
    "Slots",
    "csr_times",
    "from_arrays",
    "new_slots",
    "place",
    "reserve",
    "slot_rows",
    "to_dense",
    "trim",
]


class Slots(NamedTuple):
    """Where each coordinate's pairs are (the compiled walk fills it in place)."""

    #: (d,) int32 (int64 past 2^31 - 2 coordinates): a coordinate's slot, 0: none yet
    table: np.ndarray
    #: (cap,) int64 the coordinate of each slot (entry 0 unused)
    keys: np.ndarray
    #: (1,) int64 slots in use: 1..n
    n: np.ndarray


def new_slots(d: int, K: int, cap: int = 1) -> tuple[Slots, np.ndarray]:
    """No coordinate placed yet, and the ``(cap + 1, K, 2)`` pair buffer (slot 0 zero)."""
    dtype = np.int32 if d < 2**31 - 1 else np.int64
    slots = Slots(np.zeros(d, dtype=dtype), np.zeros(cap + 1, np.int64), np.zeros(1, np.int64))
    w = np.empty((cap + 1, K, 2))
    w[0] = 0.0
    return slots, w


def from_arrays(mean: np.ndarray, var: np.ndarray, a: float) -> tuple[Slots, np.ndarray]:
    """Slots holding the (K, d) means and variances of a saved state: one for every
    coordinate where a model is off the prior (mean 0, variance a), in coordinate
    order; the others read as the prior, as in the model that was saved."""
    K, d = mean.shape
    touched = np.flatnonzero((mean != 0.0).any(axis=0) | (var != a).any(axis=0))
    n = touched.shape[0]
    slots, w = new_slots(d, K, max(n, 1))
    slots.table[touched] = np.arange(1, n + 1)
    slots.keys[1 : n + 1] = touched
    slots.n[0] = n
    w[1 : n + 1, :, 0] = mean[:, touched].T
    w[1 : n + 1, :, 1] = var[:, touched].T + 0.0  # -0.0 -> +0.0: the sign is the undo mark
    return slots, w


def reserve(slots: Slots, w: np.ndarray, nnz: int) -> tuple[Slots, np.ndarray]:
    """Room for a call on rows with ``nnz`` stored entries: every one may be a new
    coordinate (at most ``d`` in all). Grows by at least doubling (a stream of small
    calls reallocates O(log n) times); returns the same objects when they suffice."""
    n = int(slots.n[0])
    need = n + 1 + min(slots.table.shape[0] - n, nnz)
    cap = w.shape[0]
    if need <= cap:
        return slots, w
    return _resized(slots, w, max(need, 2 * cap))


def trim(slots: Slots, w: np.ndarray) -> tuple[Slots, np.ndarray]:
    """The buffers cut to twice the slots in use when they are more than four times
    that (a fit reserves one slot per stored entry of X; most repeat a coordinate)."""
    n = int(slots.n[0])
    if w.shape[0] <= max(64, 4 * (n + 1)):
        return slots, w
    return _resized(slots, w, 2 * (n + 1))


def _resized(slots: Slots, w: np.ndarray, cap: int) -> tuple[Slots, np.ndarray]:
    n = int(slots.n[0])
    keys = np.empty(cap, np.int64)
    keys[: n + 1] = slots.keys[: n + 1]
    grown = np.empty((cap,) + w.shape[1:])
    grown[: n + 1] = w[: n + 1]
    return Slots(slots.table, keys, slots.n), grown


def to_dense(slots: Slots, w: np.ndarray, part: int, fill: float) -> np.ndarray:
    """(K, d) ``part`` (0: means, 1: stored variances) of every coordinate, ``fill``
    where none is stored (a stored 0 is kept: the caller maps it)."""
    n = int(slots.n[0])
    out = np.full((w.shape[1], slots.table.shape[0]), fill)
    out[:, slots.keys[1 : n + 1]] = w[1 : n + 1, :, part].T
    return out


def slot_rows(slots: Slots, indices: np.ndarray) -> np.ndarray:
    """The slots of stored entries (0 for coordinates never placed: the prior)."""
    return _gathered(slots.table, indices)


#: How many entries ahead :func:`_gathered` asks for the table's lines (a row's worth
#: and more: hashed documents store about 130 entries).
GATHER_AHEAD = 256


@njit(cache=True)
def _gathered(table, indices):
    """``table[indices]``, the table's line of the entry :data:`GATHER_AHEAD` on asked
    for at each: the test set of 20 Newsgroups at 2^24 reads a 64 MB table at a
    million scattered places, 2.4-5.2 ms as numpy's gather (each read waits on its
    miss), 1.3 here (by hand, interleaved; 32 ahead 2.8, 128 to 1,024 alike)."""
    out = np.empty(indices.shape[0], table.dtype)
    lines = table.reshape((1, -1))
    n = indices.shape[0]
    for q in range(n):
        if q + GATHER_AHEAD < n:
            prefetch(lines, 0, indices[q + GATHER_AHEAD])
        out[q] = table[indices[q]]
    return out


@njit(cache=True)
def place(slots, mu, s, indices, lo, hi, js, width):
    """``js[: hi - lo]``: the slots of the coordinates ``indices[lo:hi]``, placing new
    ones in fresh slots, their pairs zero (the prior; ``mu``, ``s``: (K, cap) views of
    the pair buffer). Each coordinate is checked before it is read: False, at the first
    one not strictly above the one before or not below ``width`` (the slots placed for
    the coordinates before it stay placed, at the prior)."""
    table = slots.table
    n = slots.n[0]
    prev = -1
    for q in range(lo, hi):
        p = indices[q]
        if p <= prev or p >= width:
            slots.n[0] = n
            return False
        prev = p
        j = table[p]
        if j == 0:
            n += 1
            j = n
            table[p] = j
            slots.keys[j] = p
            for k in range(mu.shape[0]):
                mu[k, j] = 0.0
                s[k, j] = 0.0
        js[q - lo] = j
    slots.n[0] = n
    return True


@njit(cache=True)
def csr_times(indptr, indices, data, w, a, tail, parts):
    """(f, v), each (n, K): each CSR row times ``w[:, k, 0]`` (the means; a stored 0 is
    0) and its squares times ``w[:, k, 1]`` (the variances; a stored 0 is the prior
    ``a``), reading an interleaved ``(., K, 2)`` buffer in place (the dense one with
    X's indices, or the slots' pairs with the rows' slots). ``parts``: 0 the means'
    sums alone, 1 the variances' alone, 2 both in one pass (the other array of the
    first two is empty). ``tail = (j, c)``, c != 0: each row ends with one more entry c
    at buffer row j (the intercept's, which the rows lack), taken last as a matrix that
    stores it would be.

    Each sum is kept in a register, in the rows' order, and the buffer's lines of the
    row :data:`._prefetch.AHEAD` on are asked for as a row is summed, as the learning
    walks do: 20 Newsgroups' test set at 2^20 took 8.4 ms, an entry's sum waiting on
    the last through memory and each row on its own misses, 2.6 now; ``predict_proba``
    reads both halves of each line in one pass, 5.0 -> 2.9 ms (by hand)."""
    n = indptr.shape[0] - 1
    K = w.shape[1]
    lines = w.reshape((w.shape[0], K * 2))  # (the prefetch's 2-d view)
    f = np.empty((n if parts != 1 else 0, K))
    v = np.empty((n if parts != 0 else 0, K))
    j_end, c_end = tail
    extra = 1 if c_end != 0.0 else 0
    for i in range(n):
        if i + AHEAD < n:
            for q in range(indptr[i + AHEAD], indptr[i + AHEAD + 1]):
                prefetch(lines, indices[q], 0)
        lo, hi = indptr[i], indptr[i + 1]
        for k in range(K):
            acc_f = 0.0
            acc_v = 0.0
            for p in range(lo, hi + extra):
                if p < hi:
                    x = data[p]
                    j = indices[p]
                else:  # (the intercept's entry)
                    x = c_end
                    j = j_end
                if parts != 1:
                    c = w[j, k, 0]
                    acc_f += x * (0.0 if c == 0.0 else c)
                if parts != 0:
                    c = w[j, k, 1]
                    acc_v += (x * x) * (a if c == 0.0 else c)
            if parts != 1:
                f[i, k] = acc_f
            if parts != 0:
                v[i, k] = acc_v
    return f, v
