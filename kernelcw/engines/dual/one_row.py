"""A learning call of one row into one model: the common call of a stream, without the
block loop's set-up (:meth:`kernelcw.engines.dual.DualEngine.learn_row`).

A one-row ``partial_fit`` whose row updates the model went through every layer a block of
many rows needs: the estimator's error handling and stronger-form retry
(:func:`kernelcw.engines.base.learn_or_stabilise`), the engine's shape checks and
:class:`~kernelcw.engines.base.LearnResult`, the block step's loop over one-vs-rest
models and the walk loop that switches a model's form where its budget binds. For one
row of one model whose kernel is known to be positive semi-definite, :func:`learn_row`
makes the same calls on the same arrays (the kernel values :func:`.quiet.quiet_row` made
for the row, or the store's; the form's ``walk``; :meth:`DualEngine._place`), so the
model is the same bit for bit (``tests/test_one_row.py``). What only the general call
does it leaves to it: where the walk does not go through (a budget that binds and
switches the form, an error to report, or to learn again in a stronger form) it raises
:class:`~kernelcw.engines.base.OtherPath`, and the caller restores its checkpoint and
calls ``learn``. SCW-I, B = 200 "project" on magic, a row that updates: median 73 -> 63
us a call, by hand (doc/dual-form.md section 9).
"""

from __future__ import annotations

import numpy as np

from ..._threads import BlasThreads
from ...kernels import NonFiniteKernel
from ..base import OtherPath
from .form import BlockData, for_call
from .queue import QueueForm
from .queue_row import learn_queue_row
from .quiet import stashed_block, stashed_row
from .status import OK, kernel_error_at
from .store import store_rows

__all__ = ["learn_row", "learn_row_at_once", "row_counted", "takes_row", "undo_row"]

#: The forms whose walk of one input has a way in one compiled call (which leaves its
#: undo on the engine). The others take the quiet try and :func:`learn_row`.
_AT_ONCE = {QueueForm: learn_queue_row}


def learn_row_at_once(engine, X, Y):
    """:meth:`DualEngine.learn_row_at_once`: a row :func:`takes_row` accepts, into a
    model whose form learns one input in one compiled call (:data:`_AT_ONCE`, the
    queue form's :mod:`.queue_row`): (margin, updates, mistakes, floored rounds), its
    undo record on the engine (``_row_undo``: (undo, record)) until :func:`row_counted`
    or :func:`undo_row`; or None with nothing changed."""
    engine.__dict__.pop("_row_undo", None)  # (an earlier call's, counted)
    forms = engine.forms
    way = _AT_ONCE.get(type(forms[0])) if len(forms) == 1 else None
    if way is None or not takes_row(engine, X, Y):
        return None
    return way(engine, X, Y)


def undo_row(engine) -> None:
    """:meth:`DualEngine.undo_row`: the model as before the :func:`learn_row_at_once`
    whose record is on the engine, if one is (else nothing: none changed it)."""
    pending = engine.__dict__.get("_row_undo")
    if pending is not None:
        pending[0](engine, pending[1])


def row_counted(engine) -> None:
    """:meth:`DualEngine.row_counted`: the caller's counters landed; the undo record
    (and the arrays it holds) goes."""
    engine.__dict__.pop("_row_undo", None)


def takes_row(engine, X, Y) -> bool:
    """:meth:`DualEngine.takes_row`: whether :func:`learn_row` learns row X (1, d) with
    target Y (1, 1): one model, a kernel known to be positive semi-definite (the
    built-in ones but "precomputed", and a poly kernel's with coef0 >= 0: other rows are
    checked in ``learn``), a dense row of the model's width, a usable model. Asked
    before the caller's checkpoint, which a row it turns down does not pay."""
    ctx = engine._ctx
    if len(engine.forms) != 1 or not ctx.known_psd or engine.broken is not None:
        return False
    if type(X) is not np.ndarray or X.shape != (1, engine.spec.n_features):
        return False
    return Y.shape == (1, 1) and ctx.nu_pi == bool(engine.nu_pi_models)  # (combine's)


def learn_row(engine, X, Y):
    """:meth:`DualEngine.learn_row`: (the margin, updates, mistakes, floored rounds) of
    a row :func:`takes_row` accepted, learnt into the engine's one model. Raises
    OtherPath (the state part-way) where the walk does not go through. Under the BLAS
    thread limit only where something in it may call BLAS: the form's walk
    (``one_input_blas``), or the row's kernel values where the quiet try made none."""
    ctx = engine._ctx
    stash = engine.__dict__.pop("_quiet_k0", None)  # (quiet_row's, just before)
    store = engine.store
    form = engine.forms[0]
    K0 = stashed_row(stash, X, 0, form)  # (None: the quiet try made none)
    if form.one_input_blas(ctx) or not (K0 is not None or store.row_blas_free(X)):
        with BlasThreads(engine._call_flops(1, X.shape[1], learning=True)) as threads:
            return _learn(engine, X, Y, stash, K0, for_call(ctx, 0, threads))
    return _learn(engine, X, Y, stash, K0, ctx)  # (loops only: no thread limit)


def _learn(engine, X, Y, stash, K0, ctx):
    """:func:`learn_row`'s kernel values (``K0``: the quiet try's row, or None), walk
    and place, with ``ctx`` the call's."""
    store = engine.store
    form = engine.forms[0]
    cols = np.array([store.n_seen])
    try:  # (NaN or infinity named by the row it came from)
        Kbb, kap = stashed_block(stash, X, store, cols)
        if K0 is None:
            K0 = store.kernel_rows(X, form.idx)
    except NonFiniteKernel as err:
        raise kernel_error_at(err, cols) from None
    store.n_seen += 1
    blk = BlockData(K0, Kbb, kap, Y[:, 0])
    f_blk = np.empty(1)
    ks0 = np.arange(form.n, dtype=np.int64)
    w = _walk(form, ctx, blk, ks0, f_blk)
    _place(engine, X, cols, w, ks0)
    f = f_blk.item(0)
    return f, w.entered.shape[0], int((f >= 0.0) != (blk.y.item(0) > 0.0)), w.n_floored


def _place(engine, X, cols, w, ks0) -> None:
    """:meth:`DualEngine._place` of the walk's one input; its common case, the row
    entered a dense store with room and no compaction is due, without the general
    call's layers."""
    form, store = engine.forms[0], engine.store
    first = store.n
    if (
        w.entered.shape[0] == 1
        and (engine._ctx.budget is None or form.n > (first + 1) // 2)  # (as _place)
        and store.append_row(X, cols.item(0))
    ):
        form.idx = store_rows(form.idx, w.ks, w.entered, first, 1)
        return
    engine._place(X, cols, [w.entered], [None if w.ks is ks0 else w.ks])


def _walk(form, ctx, blk, ks0, f_blk):
    """The form's walk of the one input, or OtherPath where the general call must
    take it (an error it raises as it should, or learns again in a stronger form; a
    budget that binds)."""
    try:
        w = form.walk(ctx, blk, 0, ks0, f_blk)
    except SystemError:  # (numba's for a Ctrl-C: the caller surfaces it)
        raise
    except Exception:  # (the general call raises it as it should, or learns again)
        raise OtherPath from None
    if w.status != OK:  # (a budget that binds, an error: the general call's)
        raise OtherPath
    return w
