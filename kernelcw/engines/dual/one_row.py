"""A learning call of one row for one binary model: the engine's block step
(:meth:`.engine.DualEngine._learn_block`, then ``_place``) without its loops.

A stream of ``partial_fit`` calls of one row each spends most of a call outside the
compiled walks. For one model (binary labels) and a kernel known to be positive
semi-definite, :func:`learn_row` takes the row through the same steps in the same
order as the block step does for a block of one: the kernel values (those the quiet
try made for this row, :mod:`.quiet`, or the store's), the model's walk
(``DualEngine._walk_model``: the form may switch where a budget binds), then the
store and the slots (:func:`place_row`). It only leaves out what one row of one
model does not need: the lists of entered inputs and slots over the models, their
union, and the count arrays. Results are the block step's, bit for bit
(``tests/test_one_row.py``).
"""

from __future__ import annotations

import numpy as np

from .form import BlockData
from .quiet import stashed_block, stashed_row
from .store import store_rows

__all__ = ["learn_row", "place_row"]


def learn_row(engine, X, Y, cols, threads, quiet_k0):
    """Row X (1, d), label Y (1, 1) in {-1, +1}, stream position ``cols`` (1,), for
    the engine's one model (its BLAS ``threads`` entered). Returns (f as a (1, 1)
    array, updates, mistakes, floored rounds)."""
    store = engine.store
    Kbb, kap = stashed_block(quiet_k0, X, store, cols)
    form = engine.forms[0]
    y = Y.reshape(1)
    K0 = stashed_row(quiet_k0, X, 0, form)  # (None: quiet_row made none)
    if K0 is None:
        K0 = store.kernel_rows(X, form.idx)
    f, src, ks, nfl = engine._walk_model(0, BlockData(K0, Kbb, kap, y), cols, 0, threads)
    place_row(engine, X, cols, src, ks)
    mistake = int((f.item(0) >= 0.0) != (y.item(0) > 0.0))
    return f.reshape(1, 1), src.shape[0], mistake, nfl


def place_row(engine, X, cols, src, ks) -> None:
    """``DualEngine._place`` for one model: the row enters the store if the model took
    it (``src``: [0] or empty), the model's slots point at store rows (``ks``: its
    slots' kernel sources after the walk, None where they stayed as they were), and
    the store drops rows the model no longer uses once they are more than half."""
    store, form = engine.store, engine.forms[0]
    if src.shape[0]:
        first = store.n
        store.append(X, src, cols)
        form.idx = store_rows(form.idx, ks, src, first, 1)
    elif ks is not None:
        form.idx = form.idx[ks]
    if engine._ctx.budget is not None and form.n <= store.n // 2:
        new_pos = store.compact(np.unique(form.idx))
        if new_pos is not None:
            form.idx = new_pos[form.idx]
