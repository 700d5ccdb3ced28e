"""The explicit form's rollback (:mod:`.explicit`): spare buffers the walk saves into.

nu, Pi and the policy's arrays (the inverse Gram matrix, the Gram matrix G, the
variances at the support vectors) are updated in place. A call's checkpoint is a
:class:`Saved` holding nothing until the walk is about to make the call's first
change: then :func:`.steps.save_model` copies the model's leading blocks into an
:class:`.steps.Undo` of spare buffers (Pi and kinv by their lower triangles, G by
its lower triangle or, for a walk of one input, by the one row its removal
overwrites; the round-by-round walk saves Pi and kinv in the passes of their first
updates, :func:`kernelcw._blas.sym_r1_save` and :func:`kernelcw.budget.kernels.kinv_append`), and
:func:`restore_saved` writes them back. The spares stay with the
form between calls (:func:`spares`), so a call of one row that updates writes into
memory it already has.
"""

from __future__ import annotations

import numpy as np

from .steps import Undo

__all__ = ["SPARE_BYTES", "UNARMED", "Saved", "restore_saved", "spares"]

#: Spare buffers of at most this many bytes stay with the form between calls of
#: several rows; larger ones are made for such a call and freed with its checkpoint,
#: as large as the model they save (:func:`spares`: calls of one row keep them).
SPARE_BYTES = 32 << 20

#: The walk's undo when nothing is to be saved (the call already saved, or cuts back).
UNARMED = Undo(False, np.full(1, -1, dtype=np.int64), *([np.zeros(0), np.zeros((0, 0))]
               + [np.zeros(0)] * 2 + [np.zeros((0, 0))] * 2 + [np.zeros(0)]),
               np.full(1, -2, dtype=np.int64), np.zeros(0))  # fmt: skip


class Saved:
    """A checkpoint's save: the :class:`Undo` the walk saved the model into at the
    call's first update (None until then: nothing to undo)."""

    __slots__ = ("undo",)

    def __init__(self):
        self.undo = None


def spares(form, cap: int, rec, one_input: bool = False) -> Undo:
    """The armed :class:`Undo` of ``form`` for a walk on capacity ``cap`` (``rec``:
    its policy, or the policy's record; ``one_input``: the walk holds one input and is the call's
    last, so nothing changes the model after it): the kept spare buffers if they are
    large enough for the model's capacity and the policy's arrays, else new ones.
    They stay with the form for the next call while they hold at most
    :data:`SPARE_BYTES`, or whatever their size while the calls walk one input each
    (a row per call): such a call that updates saves the model, and buffers made for
    each call cost it fresh memory as well (B = 2000 "project", AROW d = 50: 12.3
    against 8.3 ms a call, by hand). A call's peak is the same either way: it holds
    both. A walk of one input removes at most one support vector: it logs G's one
    changed row instead of copying G."""
    sp = form._spare
    # a walk of one input logs G by row (Undo): no copy of G to hold
    G = rec.G[:0, :0] if one_input else rec.G
    pol = (rec.kinv, G, rec.vsv)
    if (
        sp is None
        or sp.nu.shape[0] < cap
        or sp.kinv.shape[0] < rec.kinv.shape[0]
        or sp.G.shape[0] < G.shape[0]
        or sp.vsv.shape[0] < rec.vsv.shape[0]
    ):
        c = max(cap, form.capacity)
        mat = (c, c) if form.second else (0, 0)
        sp = Undo(True, np.full(1, -1, dtype=np.int64), np.empty(c), np.empty(mat),
                  np.empty(c), np.empty(c), *(np.empty(x.shape) for x in pol),
                  np.full(1, -2, dtype=np.int64), np.empty(c))  # fmt: skip
    if one_input:
        form._spare = sp
    else:
        form._spare = sp if sum(x.nbytes for x in sp[2:]) <= SPARE_BYTES else None
    sp.saved[0] = -1
    sp.gp[0] = -1 if one_input else -2
    return sp


def restore_saved(form, undo: Undo, counter: int) -> None:
    """``form``'s model and policy as ``undo`` saved them (its first ``saved[0]``)."""
    n = int(undo.saved[0])
    form._nu[:n] = undo.nu[:n]
    form.zsv[:n] = undo.zsv[:n]
    form.gsv[:n] = undo.gsv[:n]
    if form.second:
        _lower_into(form._Pi, undo.Pi, n)
    pol = form.policy
    pol.counter = counter
    if pol.tracks_kinv:
        _lower_into(pol.kinv, undo.kinv, n)
    if pol.tracks_gram and undo.gp[0] == -2:  # its lower triangle: the upper mirrors it
        _lower_into(pol.G, undo.G, n, mirror=True)
    elif pol.tracks_gram and undo.gp[0] >= 0:  # one row logged: it is its column too
        p = int(undo.gp[0])
        pol.G[p, :n] = pol.G[:n, p] = undo.grow[:n]
    if pol.tracks_kl:
        pol.vsv[:n] = undo.vsv[:n]


def _lower_into(dst: np.ndarray, src: np.ndarray, n: int, mirror: bool = False) -> None:
    """The lower triangle of ``src[:n, :n]`` into dst's (what :func:`.steps.save_model`
    saved of Pi and kinv, which nothing reads above the diagonal), and with ``mirror``
    into dst's upper triangle too (the Gram matrix G, symmetric and read whole)."""
    for i in range(n):
        dst[i, : i + 1] = src[i, : i + 1]
        if mirror:
            dst[:i, i] = src[i, :i]
