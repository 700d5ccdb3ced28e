"""What every factor form of a binary dual model is: its slots and its interface.

A binary model lives in exactly one form at a time (:mod:`.panels`, :mod:`.explicit`,
:mod:`.queue`, :mod:`.pruned`, :mod:`.lazy`; :mod:`.convert` switches between them).
Support vector i lives in slot i; every form keeps, by slot, ``idx`` (its row in the
engine's support store), ``entry`` (when it entered: removals move the last slot into
the freed one, so the dual attributes are sorted by entry) and ``kap`` (its k(x, x)),
and the count ``clock`` of support vectors ever added. The interface:

- ``n``, ``nu(a)``, ``Pi(a)``, ``variance(Ks, kap, a)``: the model by slot;
- ``walk(ctx, blk, t0, ks, f_blk)``: learn block inputs t0.. (:class:`Walked`);
- ``checkpoint()`` / ``restore(cp)``: undo a call;
- ``state_dict()`` / ``from_state(state, ctx)``: the form as plain arrays;
- ``nbytes``: the memory it holds.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = [
    "BlockData",
    "Context",
    "Form",
    "Walked",
    "entered_inputs",
    "factor_form_at_hand",
    "for_call",
]


class Context(NamedTuple):
    """What the engine tells a form's walk: the rule (a
    :class:`kernelcw.rules.RuleParams`), the prior scale, the budget (None for
    none), the budget policy's name and seed, the block size, whether the kernel
    is positive semi-definite by construction, ``batch``: how many support
    vectors leave at once when the budget overflows (:mod:`.pruned` for q > 1),
    ``rows_after``: how many inputs of the current call come after this block
    (a growing buffer sizes itself by it, :mod:`.panels`), the ``solver``
    ("cholesky", or "explicit": the round-by-round nu/Pi recursion throughout), and
    ``factor_only``: a budget binding on a removing policy continues in the pruned
    form (q = ``batch``) instead of nu/Pi (set once that recursion failed,
    ``DualEngine.stabilise``), ``threads``: the call's
    :class:`kernelcw._threads.BlasThreads` (None outside a call), for a form that
    chooses the threads of its own large calls (:mod:`.lazy`), and ``nu_pi``: the
    engine holds models given by nu and Pi alone (``DualEngine.nu_pi_models``), whose
    zeta and g do not describe them (:meth:`.explicit.ExplicitForm.walk`), and
    ``floors_drift``: a floored margin variance in the nu/Pi form is taken for its drift
    where :func:`factor_form_at_hand` (cleared where the factor form did not factor:
    ``DualEngine.stabilise``)."""

    rule: object
    a: float
    budget: int | None
    policy: str
    seed: int
    block_size: int
    known_psd: bool
    batch: int = 1
    rows_after: int = 0
    solver: str = "cholesky"
    factor_only: bool = False
    threads: object = None
    nu_pi: bool = False
    floors_drift: bool = True


_CALL_FIELDS = (Context._fields.index("rows_after"), Context._fields.index("threads"))


def factor_form_at_hand(ctx: Context) -> bool:
    """Whether a model of this engine in the nu/Pi form has a factor form to go on in
    after its recursion failed (:meth:`.engine.DualEngine.stabilise`, which may still
    find that the Gram matrix is not at hand or does not factor): a budget policy that
    the nu/Pi form serves, the Cholesky solver, a second-order rule, and a model
    learnt round by round ("project"'s factor comes from nu and Pi too)."""
    if ctx.budget is None or ctx.policy not in ("random", "smallest", "project"):
        return False
    if ctx.solver != "cholesky" or ctx.rule.first_order:
        return False
    return not ctx.nu_pi or ctx.policy == "project"


def for_call(ctx: Context, rows_after: int, threads) -> Context:
    """``ctx._replace(rows_after=rows_after, threads=threads)`` without ``_replace``'s
    keyword handling (about 1.5 us, paid by every call of one row: each call enters
    its own threads)."""
    fields = list(ctx)
    fields[_CALL_FIELDS[0]], fields[_CALL_FIELDS[1]] = rows_after, threads
    return Context._make(fields)


class BlockData(NamedTuple):
    """One training block for one model: ``K0 = K(S_0, X_B)`` by slot at the block's
    start, the block's own kernel ``Kbb``, ``kap = k(x, x)`` and the labels ``y``."""

    K0: np.ndarray
    Kbb: np.ndarray
    kap: np.ndarray
    y: np.ndarray


class Walked(NamedTuple):
    """What a form's walk did: the block inputs that entered (in order), ``ks`` (each
    slot's kernel source after the walk: row ks of K0 or, for ks < 0, block input
    -1-ks), floored rounds, and where it stopped (``index``, -1 if it went through)
    with its status (:mod:`.status`; STOP: a budget binds there, continue in
    another form)."""

    entered: np.ndarray
    ks: np.ndarray
    n_floored: int
    index: int
    status: int


def entered_inputs(parts: list[np.ndarray]) -> np.ndarray:
    """The block inputs that entered over a walk's parts (:attr:`Walked.entered`; one
    part: itself, an array the walk made for it)."""
    if len(parts) == 1:
        return parts[0]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


class Form:
    """The slots every form keeps; subclasses add the factor."""

    #: The form's name (:meth:`kernelcw.engines.dual.DualEngine.factor_forms`).
    name = ""
    #: The form's code in a state dict.
    code = -1
    #: ``quiet(ctx, K0, Kbb, kap, y)``: (whether the walk surely leaves the model unchanged
    #: at this one row, the walk's decision value), or None where the walk decides
    #: every row (:mod:`.quiet`).
    quiet = None
    #: Whether :attr:`quiet` calls BLAS (then under the learning call's thread limit).
    quiet_blas = False
    #: The share of rows :attr:`quiet` must take for trying it to pay, and below it the
    #: period of the rows it is tried on (:mod:`.quiet`).
    quiet_min_rate = 0.15
    quiet_probe = 16
    #: The most support vectors at which :attr:`quiet` is tried (None: any number).
    quiet_max_n = None

    def __init__(self):
        self.idx = np.zeros(0, dtype=np.int64)  # store positions, by slot
        self.entry = np.zeros(0, dtype=np.int64)  # entry time, by slot
        self.kap = np.zeros(0)  # k(x, x), by slot
        self.clock = 0  # support vectors ever added

    @property
    def n(self) -> int:
        return int(self.kap.shape[0])

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state.pop("_quiet_pre", None)  # (a call's products, for its walk: .quiet)
        state.pop("_row_save", None)  # (a one-row call's rollback scratch: .queue_row)
        return state

    def learn_flops(self, b: int) -> float:
        """Flops of the largest BLAS call this form makes learning a block of b inputs,
        which sizes the block's BLAS threads (``DualEngine._call_flops``): here the
        forward solve ``L^-1 K0``, n^2 b."""
        return float(self.n) * self.n * b

    def one_input_blas(self, ctx: Context) -> bool:
        """Whether a walk of one input (a call of one row, :mod:`.one_row`) may call
        BLAS or LAPACK, and so runs under the call's BLAS thread limit; a form whose
        walk of one input is loops at the model's size says False, and the call skips
        the limit (entering and leaving it was 3 us of a 60 us call of one row that
        updates, B = 200 "project")."""
        return True

    def order(self) -> np.ndarray:
        """Slots in the order their support vectors entered."""
        return np.argsort(self.entry, kind="stable")

    def take_slots(self, other: Form) -> None:
        """The slots of ``other`` (a form this one replaces)."""
        self.idx, self.entry, self.kap, self.clock = other.idx, other.entry, other.kap, other.clock

    def slots_nbytes(self) -> int:
        return self.idx.nbytes + self.entry.nbytes + self.kap.nbytes

    def slots_state(self) -> dict[str, np.ndarray]:
        return {
            "idx": self.idx.copy(),
            "entry": self.entry.copy(),
            "kap": self.kap.copy(),
            "clock": np.array(self.clock, dtype=np.int64),
        }

    def load_slots(self, state: dict[str, np.ndarray]) -> None:
        self.idx = np.array(state["idx"], dtype=np.int64)
        self.entry = np.array(state["entry"], dtype=np.int64)
        self.kap = np.array(state["kap"], dtype=np.float64)
        self.clock = int(state["clock"])
