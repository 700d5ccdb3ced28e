"""The "oldest" budget's queue form (:mod:`.queue`): its rollback and its plain-array state.

Rollback. Appends write outside the model's leading blocks of the buffers, a rebuild
or a growth allocates new buffers, and only the removal of the oldest changes the
leading blocks (``L_N``, ``r_N``, and the leavers' columns of ``L_NO``) in place. So a
checkpoint holds references and counts, and :func:`save_leading`, called before that
in-place change, copies ``L_N`` and ``r_N``'s leading blocks once per call (O(n_N^2))
and the leavers' columns of ``L_NO`` at each removal (O(n_N D): the columns of
successive removals are disjoint, as O only shrinks until a rebuild), and only if the
buffers are still the checkpointed ones. The form holds a weak reference to the live checkpoint: a
checkpoint dropped after a successful call keeps nothing alive.

State. Only the model's blocks (``LO[:nO, :nO]``, ``LNO[:nN, :nO]``, ...) are part of
the state, with the buffers' capacities so a loaded form continues bit for bit; what
lies outside the blocks is scratch (a failed call may leave it changed).
"""

from __future__ import annotations

import weakref

import numpy as np

__all__ = [
    "QueueCheckpoint",
    "load_queue_state",
    "queue_state",
    "restore_checkpoint",
    "save_leading",
    "take_checkpoint",
]

#: The queue form's attributes a checkpoint holds by reference.
CHECKPOINTED = ("zeta", "qv", "LO", "rO", "LNO", "KNO", "LN", "rN", "idx", "entry", "kap")


class QueueCheckpoint:
    """One call's checkpoint: ``refs`` (attributes by name), ``counts`` (nO, nN,
    clock), ``nu`` (the prediction cache) and ``saved`` (copies of L_N and r_N's
    leading blocks, taken on the first in-place change, and a list of (first column,
    copy) of the leading rows of L_NO's columns that removals changed; None until
    then)."""

    __slots__ = ("__weakref__", "counts", "nu", "refs", "saved")

    def __init__(self, refs: dict, counts: tuple[int, int, int], nu):
        self.refs = refs
        self.counts = counts
        self.nu = nu
        self.saved: tuple[np.ndarray, np.ndarray, list] | None = None


def take_checkpoint(form) -> QueueCheckpoint:
    """The checkpoint of ``form`` now; the form keeps a weak reference to it."""
    refs = {k: getattr(form, k) for k in CHECKPOINTED}
    cp = QueueCheckpoint(refs, (form.nO, form.nN, form.clock), form._nu_cache)
    form._cp_ref = weakref.ref(cp)
    return cp


def save_leading(form, lo: int, hi: int) -> None:
    """Before the leading blocks change in place (L_N, r_N, and L_NO's columns lo..hi-1,
    the leavers'): copy them into the live checkpoint, if there is one and the buffers
    are still its own (L_N and r_N on the call's first change only)."""
    ref = getattr(form, "_cp_ref", None)  # (absent in forms pickled before it existed)
    cp = ref() if ref is not None else None
    if cp is None:
        return
    r = cp.refs
    if not (form.LN is r["LN"] and form.LNO is r["LNO"] and form.rN is r["rN"]):
        return  # new buffers since the checkpoint: the checkpointed ones are untouched
    nO, nN, _ = cp.counts
    if cp.saved is None:
        cp.saved = (form.LN[:nN, :nN].copy(), form.rN[:nN].copy(), [])
    hi = min(hi, nO)
    if lo < hi:
        cp.saved[2].append((lo, form.LNO[:nN, lo:hi].copy()))


def restore_checkpoint(form, cp: QueueCheckpoint) -> None:
    """``form`` as when ``cp`` was taken (its model blocks bit for bit)."""
    for k, v in cp.refs.items():
        setattr(form, k, v)
    form.nO, form.nN, form.clock = cp.counts
    form._nu_cache = cp.nu
    if cp.saved is not None:
        LN, rN, columns = cp.saved
        nN = form.nN
        form.LN[:nN, :nN] = LN
        for lo, block in columns:
            form.LNO[:nN, lo : lo + block.shape[1]] = block
        form.rN[:nN] = rN
        cp.saved = None
    form._cp_ref = weakref.ref(cp)


def _blocks(form) -> dict[str, np.ndarray]:
    nO, nN = form.nO, form.nN
    return {
        "LO": form.LO[:nO, :nO],
        "rO": form.rO[:nO],
        "LNO": form.LNO[:nN, :nO],
        "KNO": form.KNO[:nN, :nO],
        "LN": form.LN[:nN, :nN],
        "rN": form.rN[:nN],
    }


def queue_state(form) -> dict[str, np.ndarray]:
    """The model's blocks (copies), ``zeta``, ``qv``, ``nO``, ``nN`` and the
    capacities ``capO``, ``capN`` (the slots are the form's own)."""
    state = {k: v.copy() for k, v in _blocks(form).items()}
    state["zeta"], state["qv"] = form.zeta.copy(), form.qv.copy()
    ints = {"nO": form.nO, "nN": form.nN, "capO": form.LO.shape[0], "capN": form.LN.shape[0]}
    for k, v in ints.items():
        state[k] = np.array(v, dtype=np.int64)
    return state


def load_queue_state(form, state: dict[str, np.ndarray]) -> None:
    """Buffers of the saved capacities holding the saved blocks (zeros elsewhere)."""
    form.zeta = np.array(state["zeta"], dtype=np.float64)
    form.qv = np.array(state["qv"], dtype=np.float64)
    form.nO, form.nN = int(state["nO"]), int(state["nN"])
    capO, capN = int(state["capO"]), int(state["capN"])
    form.LO, form.rO = np.zeros((capO, capO)), np.zeros((capO, 1))
    form.LNO, form.KNO = np.zeros((capN, capO)), np.zeros((capN, capO))
    form.LN, form.rN = np.zeros((capN, capN)), np.zeros((capN, 1))
    for k, view in _blocks(form).items():
        view[...] = state[k]
