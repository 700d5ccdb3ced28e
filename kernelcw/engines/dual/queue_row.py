"""The "oldest" budget's call of one row in one compiled call (the queue form, :mod:`.queue`).

A one-row ``partial_fit`` into a model in the queue form went through some twenty
Python pieces (the quiet try's checks, the checkpoint, the walk's parts, the fold's
rollback copies, the store's append) and three compiled calls (the try's products, the
walk, the fold of the oldest), each unboxing its arrays and boxing its results: on
magic at B = 200, about half of such a call's time was the interpreter's
(doc/dual-form.md section 9, session 32). :func:`learn_queue_row` makes the same
compiled steps on the same arrays in one call, :func:`queue_row` (the walk of one
input, :func:`.queue.queue_part`; where the oldest leaves, its fold,
:func:`.queue_block.drop_oldest`), so the model is the same bit for bit
(``tests/test_queue_row.py``), and commits the result in a few attribute stores.

It takes the calls the walk of one input takes without BLAS and without the general
call's steps: a model of fewer than ``ONE_INPUT_MAX_N`` support vectors, a row the store
takes without growing or compacting, kernel values made without BLAS
(:meth:`.store.SupportStore.row_blas_free`). Where N then holds ``QUEUE_REBUILD`` of the
budget, the queue's rebuild follows as in :meth:`.queue.QueueForm.walk` (LAPACK, under
the BLAS thread limit the general call would set). Anything else (a kernel value that is
NaN or infinite, a walk that stops or fails, a rebuild that does not factor) returns
None with nothing changed, and the call takes the other ways.

Rollback. The walk writes its new row outside the model's blocks (the counts say
what is the model), the slots are new arrays and a rebuild makes new buffers; only the
fold of the oldest changes the leading blocks in place (L_N, r_N and the leaver's column
of L_NO), and :func:`queue_row` copies them first into the form's scratch
(``_row_save``, not part of the model's state), raising its flag. :func:`undo_queue_row`
puts the references (buffers included), the counts and, where the flag is up, those
blocks back: after an error or a Ctrl-C inside :func:`learn_queue_row`, or by the caller
before the next call (its counters' store).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ... import _blas
from ..._interrupt import deferred_interrupt
from ..._threads import BlasThreads
from ...kernels import NonFiniteKernel, rbf_direct_rows
from .leaver_walk import walk_tols
from .one_input import ONE_INPUT_MAX_N
from .queue import QUEUE_REBUILD, queue_part
from .queue_block import drop_oldest
from .status import NONFINITE, OK
from .store import store_rows

__all__ = ["learn_queue_row", "queue_row", "undo_queue_row"]

_NO_COLS = np.zeros(1, dtype=np.int64)  # (the row's position: read by precomputed kernels)
_NO_K0 = np.empty((0, 1))  # (K0 made in the compiled call)
_NO_KERN = (np.empty((0, 1)), np.empty((0, 1)), 0.0, 0.0)  # (K0 given)


@njit(cache=True)
def queue_row(fns, bufs, sizes, data, kern, rule, tols, slots, save, f_out):
    """The queue form's walk of one input and, where the oldest leaves, its fold, in one
    compiled call: :func:`.queue.queue_part` over the block of that input alone, then
    :func:`.queue_block.drop_oldest`, the calls :meth:`.queue.QueueForm.walk` makes, on
    the same arrays. ``bufs = (LO, LNO, KNO, LN, rO, rN)``, ``sizes = (nO, nN, budget,
    clock, the store row the input takes if it enters)``, ``data = (K0, Kbb, kap, y)``
    (the input's, as a block of one; K0 empty where ``kern = (the store's rows, the
    input, gamma, offset)`` has rows: the RBF kernel's row is made here, as
    :meth:`kernelcw.kernels.Kernel.rows_block` makes it, and where a value is not
    finite NONFINITE is returned with nothing changed), ``slots = (entry, kap, zeta,
    qv, idx)``, ``save = (L_N's copy, r_N's, L_NO's leaver column's, flag)``: before
    the fold changes them in place, the leading blocks are copied there and the flag
    set to 1 (0 on entry). Returns (QueueResult's fields, entry, kap, zeta, qv, idx):
    the slots after the walk, new arrays where the input entered, else the same."""
    nO, nN, budget, clock, first = sizes
    entry, kap, zeta, qv, idx = slots
    sLN, srN, scol, flag = save
    flag[0] = 0
    n = nO + nN
    rows, x, gamma, offset = kern
    if rows.shape[0]:  # (the RBF kernel's row, here: one compiled call less)
        K0, finite = rbf_direct_rows(rows, idx, x, gamma, offset)
        if not finite:  # (the general call names the row)
            return (0, 0, 0, 0, NONFINITE), entry, kap, zeta, qv, idx
        data = (K0, data[1], data[2], data[3])
    c = min(nO, 1, max(0, n + 1 - budget))
    none = np.empty((0, 0))
    pre = (none, none, none, none, none, none)  # (.queue_block.NO_FORWARD: made there)
    part = (nO, nN, np.int64(0), np.int64(1), c, budget, clock)
    ks = np.arange(n)
    out, S, grown = queue_part(
        fns, bufs, part, data, rule, tols, (entry, kap, zeta, qv, ks), f_out, pre
    )
    if out[4] != OK or out[0] == 0:  # (nothing entered, or the general call's)
        return out, entry, kap, zeta, qv, idx
    LO, LNO, KNO, LN, rO, rN = bufs
    deaths = out[1]
    if deaths:  # the oldest leaves: its fold changes the leading blocks in place
        lo = nO - deaths
        for i in range(nN):  # (as .queue_state.save_leading: the blocks before the call)
            for j in range(nN):
                sLN[i, j] = LN[i, j]
            srN[i] = rN[i, 0]
            for j in range(deaths):
                scol[i, j] = LNO[i, lo + j]
        flag[0] = 1
        grown = drop_oldest(fns, (LN, LNO, rO, rN), nN + out[0], lo, nO, grown)
    entry, kap, zeta, qv, ks = grown
    return out, entry, kap, zeta, qv, store_rows(idx, ks, np.zeros(1, np.int64), first, np.int64(1))


def _room(form, store, budget: int) -> bool:
    """Whether :func:`queue_row` takes a row of this model: its walk calls no BLAS
    (fewer than ONE_INPUT_MAX_N support vectors), room in N's buffers, a leaver where
    the budget binds, and the store takes the row without growing or compacting (as
    :meth:`.engine.DualEngine._place` would leave it)."""
    nO, nN = form.nO, form.nN
    n = nO + nN
    if n >= ONE_INPUT_MAX_N or nN + 1 > form.LN.shape[0]:
        return False
    if n + 1 > budget and nO == 0:  # (no leaver: the walk stops, and the queue rebuilds)
        return False
    return store.room_for_row() and n > (store.n + 1) // 2  # (no compaction due, either way)


def _scratch(form, nN: int):
    """The form's rollback scratch for the fold (module docstring), of room for nN."""
    save = form.__dict__.get("_row_save")
    if save is None or save[0].shape[0] < nN:
        m = max(16, nN + nN // 2)
        save = (np.empty((m, m)), np.empty(m), np.empty((m, 1)), np.zeros(1, dtype=np.int64))
        form._row_save = save
    return save


def learn_queue_row(engine, X, Y):
    """:meth:`.engine.DualEngine.learn_row_at_once` of the queue form (module
    docstring): (the margin, updates, mistakes, floored rounds), the row learnt and
    committed, its undo record left on the engine (``_row_undo``, for
    :func:`undo_queue_row` until the caller's counters land); or None, nothing changed.
    An error or a Ctrl-C inside puts the model back before it propagates."""
    form, store, ctx = engine.forms[0], engine.store, engine._ctx
    if not _room(form, store, ctx.budget):
        return None
    kern = store.kernel.direct_operands(store.rows[: store.n], X)  # (as kernel_rows, inside)
    if kern is None and not store.row_blas_free(X):
        return None
    try:
        K0 = _NO_K0 if kern is not None else store.kernel_rows(X, form.idx)
        kern = _NO_KERN if kern is None else kern
        Kbb, kap = store.kernel_block(X, _NO_COLS)
    except NonFiniteKernel:  # (the general call names the row)
        return None
    nO, nN, first = form.nO, form.nN, store.n
    save = _scratch(form, nN)
    bufs = (form.LO, form.LNO, form.KNO, form.LN, form.rO, form.rN)
    undo = (form.entry, form.kap, form.zeta, form.qv, form.idx, nO, nN, form.clock,
            form._nu_cache, first, store.n_seen, save, bufs)  # fmt: skip
    save[3][0] = 0  # (before the try: an undo now must not copy an earlier call's blocks)
    engine._row_undo = (undo_queue_row, undo)  # (an undo from here on puts it all back)
    f_out = np.empty(1)
    sizes = (nO, nN, ctx.budget, form.clock, first)
    data = (K0, Kbb, kap, Y[:, 0])
    try:
        out, entry, kap_s, zeta, qv, idx = queue_row(
            _blas.TRI_PLAIN, bufs, sizes, data, kern, tuple(ctx.rule), walk_tols(ctx.known_psd),
            (form.entry, form.kap, form.zeta, form.qv, form.idx), save, f_out,
        )  # fmt: skip
        n_new, deaths, n_floored, _, status = out
        if status != OK:  # (the general call's: it raises, or learns in another form)
            undo_queue_row(engine, undo)
            return None
        if n_new:
            store.append_row(X, undo[10])  # (room: _room)
            form.entry, form.kap, form.zeta, form.qv, form.idx = entry, kap_s, zeta, qv, idx
            form.nO, form.nN, form.clock = nO - deaths, nN + n_new, form.clock + n_new
            form._nu_cache = None
            if form.nN > QUEUE_REBUILD * ctx.budget:  # (as QueueForm.walk: all become O)
                with BlasThreads(engine._call_flops(1, X.shape[1], learning=True)):
                    form.idx = form.rebuild(ctx, idx)  # (the slots' rows, permuted alike)
        store.n_seen += 1
    except SystemError:  # (numba's for a Ctrl-C: the caller surfaces it)
        undo_queue_row(engine, undo)
        raise
    except Exception:  # (the general call raises it as it should, or learns again)
        undo_queue_row(engine, undo)
        return None
    except BaseException:
        undo_queue_row(engine, undo)
        raise
    f = f_out.item(0)
    return f, n_new, int((f >= 0.0) != (Y.item(0) > 0.0)), n_floored


def undo_queue_row(engine, undo) -> None:
    """The model and the store as before :func:`learn_queue_row` made ``undo`` (before
    the next call), Ctrl-C held back meanwhile; the engine's record of it goes."""
    form, store = engine.forms[0], engine.store
    entry, kap, zeta, qv, idx, nO, nN, clock, nu, first, n_seen, save, bufs = undo
    with deferred_interrupt():
        engine.__dict__.pop("_row_undo", None)
        form.LO, form.LNO, form.KNO, form.LN, form.rO, form.rN = bufs  # (a rebuild's: new)
        if save[3][0]:  # the fold changed the leading blocks: its copies back
            form.LN[:nN, :nN] = save[0][:nN, :nN]
            form.rN[:nN, 0] = save[1][:nN]
            form.LNO[:nN, nO - 1 : nO] = save[2][:nN]
            save[3][0] = 0
        form.entry, form.kap, form.zeta, form.qv, form.idx = entry, kap, zeta, qv, idx
        form.nO, form.nN, form.clock, form._nu_cache = nO, nN, clock, nu
        store.n, store.n_seen = first, n_seen
