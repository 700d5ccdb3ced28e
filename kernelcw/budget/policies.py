"""One object per budget policy: what the policy tracks, as plain arrays.

A bounded model in the explicit form holds one policy object. It owns the state its
choice needs ("random": the seed and the removal counter; "smallest": the Gram
matrix and the variances at the support vectors for the KL scores; "project": the
Gram matrix and its jittered inverse), keeps it as large as the model's capacity
buffers, starts it when the budget first binds (:meth:`BudgetPolicy.start`), and
hands the compiled walk its code and arrays as one :class:`PolicyState` record; the
walk evicts with :func:`kernelcw.budget.kernels.evict`. :class:`Unbounded` is the
policy of a model without a budget (it never evicts).
"""

from __future__ import annotations

import numpy as np

from .._blas import SYM_BLAS, SYM_PLAIN
from .kernels import (
    NO_BUDGET,
    OLDEST,
    POLICIES,
    PROJECT,
    RANDOM,
    SMALLEST,
    PolicyState,
    lower_symmetric,
    symmetric_inverse,
)

__all__ = [
    "BudgetPolicy",
    "Oldest",
    "Project",
    "Random",
    "Smallest",
    "Unbounded",
    "grown",
    "make_policy",
]


class BudgetPolicy:
    """The base: the budget, the seed and removal counter, and empty tracked arrays."""

    name = ""
    code = NO_BUDGET
    tracks_kinv = False  # the inverse jittered Gram matrix
    tracks_kl = False  # the variances at the support vectors

    def __init__(self, budget: int | None, seed: int = 0):
        self.budget = budget
        self.seed = np.uint64(seed)
        self.counter = 0  # removals so far (the random policy's draw counter)
        self.kinv = np.zeros((0, 0))
        self.G = np.zeros((0, 0))
        self.vsv = np.zeros(0)

    @property
    def tracks_gram(self) -> bool:
        return self.tracks_kl or self.tracks_kinv

    def grow(self, n: int, cap: int) -> None:
        """The tracked arrays at capacity ``cap`` (the leading n kept)."""
        if self.tracks_kinv:
            self.kinv = grown(self.kinv, n, cap)
        if self.tracks_gram:
            self.G = grown(self.G, n, cap)
        if self.tracks_kl:
            self.vsv = grown(self.vsv, n, cap)

    def start(self, G: np.ndarray, Pi: np.ndarray, a: float, cap: int) -> None:
        """Start tracking when the budget binds on a model of n support vectors with
        Gram matrix ``G`` and covariance coefficients ``Pi`` (n x n each)."""
        n = G.shape[0]
        if self.tracks_kinv:
            self.kinv = np.zeros((cap, cap))
            if n:
                self.kinv[:n, :n] = symmetric_inverse(G.copy())  # (G: jittered)
        if self.tracks_gram:
            self.G = np.zeros((cap, cap))
            if n:
                self.G[:n, :n] = G
        if self.tracks_kl:
            self.vsv = np.zeros(cap)
            if n:
                self.vsv[:n] = a * np.diagonal(G) + np.einsum("ij,ij->j", G, Pi @ G)

    def record(self) -> PolicyState:
        """The policy's :class:`PolicyState`, for compiled code called with it
        (:func:`kernelcw.budget.kernels.evict` from combination); the walk takes
        :meth:`plain_record`."""
        return PolicyState(*self.plain_record()[:-1], SYM_BLAS)

    def plain_record(self, blas: tuple = SYM_PLAIN) -> tuple:
        """:meth:`record` as a plain tuple, its BLAS record too
        (:data:`kernelcw._blas.SYM_PLAIN`, or ``blas``: :data:`kernelcw._blas.SYM_LOOPS`
        for a walk of one input), for a compiled call to make the record from
        (:func:`kernelcw.engines.dual.explicit.records`): numba types a plain tuple
        argument faster than a namedtuple (about 0.6 us a call for this one, by hand)."""
        return (
            self.code,
            np.inf if self.budget is None else float(self.budget),
            self.seed,
            int(self.counter),
            self.tracks_kinv,
            self.tracks_kl,
            self.kinv,
            self.G,
            self.vsv,
            blas,
        )

    def copy(self) -> BudgetPolicy:
        new = type(self)(self.budget, int(self.seed))
        new.counter = self.counter
        new.kinv, new.G, new.vsv = self.kinv.copy(), self.G.copy(), self.vsv.copy()
        return new

    @property
    def nbytes(self) -> int:
        return self.kinv.nbytes + self.G.nbytes + self.vsv.nbytes

    def state_dict(self, n: int) -> dict[str, np.ndarray]:
        """The counter and the tracked arrays' leading n (of a model of n)."""
        return {
            "counter": np.array(self.counter, dtype=np.int64),
            "kinv": lower_symmetric(self.kinv[:n, :n]),
            "G": self.G[:n, :n].copy(),
            "vsv": self.vsv[:n].copy(),
        }

    def load_state(self, state: dict[str, np.ndarray], n: int, cap: int) -> None:
        """From :meth:`state_dict` of a model of n, at capacity ``cap``."""
        self.counter = int(state["counter"])
        if self.tracks_kinv:
            self.kinv = grown(np.asarray(state["kinv"], dtype=np.float64), n, cap)
        if self.tracks_gram:
            self.G = grown(np.asarray(state["G"], dtype=np.float64), n, cap)
        if self.tracks_kl:
            self.vsv = grown(np.asarray(state["vsv"], dtype=np.float64), n, cap)


def grown(A: np.ndarray, n: int, cap: int) -> np.ndarray:
    """A buffer of capacity ``cap`` (vector, or square matrix) holding A's leading n."""
    B = np.zeros((cap, cap) if A.ndim == 2 else (cap,))
    if A.ndim == 2:
        B[:n, :n] = A[:n, :n]
    else:
        B[:n] = A[:n]
    return B


class Unbounded(BudgetPolicy):
    """No budget: the walk never evicts."""

    name = "none"


class Oldest(BudgetPolicy):
    """The support vector that entered first leaves (the Forgetron's choice)."""

    name = "oldest"
    code = OLDEST


class Random(BudgetPolicy):
    """A uniform one among all but the newest, drawn from (seed, removal counter)."""

    name = "random"
    code = RANDOM


class Smallest(BudgetPolicy):
    """The one whose removal changes the model least in KL divergence."""

    name = "smallest"
    code = SMALLEST
    tracks_kl = True


class Project(BudgetPolicy):
    """The one whose projection onto the others moves the mean least, projected."""

    name = "project"
    code = PROJECT
    tracks_kinv = True


_CLASSES = {c.name: c for c in (Oldest, Random, Smallest, Project)}
assert tuple(_CLASSES) == POLICIES


def make_policy(name: str, budget: int | None, seed: int = 0) -> BudgetPolicy:
    """The policy object of ``budget_policy=name`` (:class:`Unbounded` for no budget)."""
    if budget is None:
        return Unbounded(None, seed)
    return _CLASSES[name](budget, seed)
