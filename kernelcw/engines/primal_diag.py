"""The primal engine with diagonal covariance (linear kernel; JMLR 2012 section 6):
``mu`` (K, d) and the variances ``s`` (K, d), learnt one row at a time touching
only each row's non-zeros (dense rows are walked as all-index rows), for sparse
text. Every first-order rule walks here too (its ``Sigma = a I`` never changes).

With ``Sigma = diag(s)``, ``t_p = s_p x_p^2`` and ``v = sum_p t_p``, the mean step is
``mu_p += alpha y s_p x_p`` (the second-order update of :mod:`kernelcw.rules`,
``doc/rules.md``) and the covariance step one of JMLR 2012 section 6's:

- ``"kl"``: diagonalise the precision update, ``1/s_p += zeta x_p^2``;
- ``"l2"``: diagonalise the covariance update, ``s_p -= beta (s_p x_p)^2``,
  evaluated as ``s_p (1 + zeta (v - t_p)) / (1 + zeta v)`` (equal, and never
  negative, as ``1 - beta v`` can be tiny);
- ``"exact"``: solve the problem restricted to diagonal covariances exactly
  (:mod:`kernelcw.engines._diag_exact`). AROW's (and SOP's) mean and covariance
  decouple, so its exact diagonal equals ``"kl"``.

The prior costs no memory: a stored variance of 0 stands for the prior ``a`` (a real
variance is never 0; one that would underflow to 0 is kept as the smallest positive
double), so the state starts as zeros, which the system hands over page by page as
coordinates are first touched. A model over 2^24 hashed features that sees 10^5 of
them holds those pages only, and a ``fit`` does not first write d prior variances
(43 of the 61 ms of a 2^24 fit on 20 Newsgroups).

A wide engine (``d K >= SLOTS_FROM``) starts with its pairs in slots instead
(:mod:`._diag_slots`): hashing scatters a stream's coordinates over every page of
a dense buffer (all 256 MB at 2^24).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..spec import EngineSpec
from . import _diag_slots as ds
from ._diag_undo import SlotUndo, UndoLog
from ._diag_walk import diag_fit
from ._primal_common import check_same_a
from .base import (
    EveryRowLearns,
    LearnResult,
    Locked,
    RowsUnchecked,
    check_shapes,
    finite_margins,
)

__all__ = ["PrimalDiagEngine", "diag_fit"]


class PrimalDiagEngine(EveryRowLearns, Locked):
    """``mean`` and ``variance`` (K, d) float64, kept in one of two ways:

    - dense, an interleaved buffer ``(d, K, 2)``, of which ``mean`` and the stored
      variances are strided views: the means and variances of all K models at one
      coordinate share a cache line (a non-zero of a row costs one miss, not two);
    - in slots (:mod:`._diag_slots`; a wide engine's prior, ``d K >= SLOTS_FROM``),
      while only CSR rows are learnt from and predicted: the same pairs, packed in
      the order coordinates first appear.

    Reading ``mean`` (``coef_``, a row-at-a-time stream) or learning from dense rows
    moves the state from slots to dense once; it stays dense (the views stay valid).
    The numbers are the same either way, bit for bit (``tests/test_diag_slots.py``).
    """

    #: Its walk of CSR rows checks them as it reads them (:func:`._diag_walk.diag_fit`).
    checks_rows = True

    #: A fresh engine keeps its state in slots when the dense buffer would hold at least
    #: this many coordinates times models (d K), dense otherwise.
    SLOTS_FROM = 2**22

    def __init__(self, spec: EngineSpec):
        self.spec = spec
        self.rule = spec.rule
        self._set_prior()

    def _set_prior(self) -> None:
        """(mean, variance) = (0, 0 standing for a) for every coordinate: no slot placed,
        or a dense buffer of zeros (handed over lazily)."""
        d, K = self.spec.n_features, self.spec.n_models
        if d * K >= self.SLOTS_FROM:
            self._slots, self._pairs = ds.new_slots(d, K)
            self._w = None
        else:
            self._slots = self._pairs = None
            self._w = np.zeros((d, K, 2))
        self._armed = None  # the log the next learn call writes
        self._prior = True  # the state is still the prior N(0, a I)

    def _set_buffer(self, w: np.ndarray, prior: bool) -> None:
        self._slots = self._pairs = None
        self._w = w
        self._armed = None
        self._prior = prior

    def _dense(self) -> np.ndarray:
        """The interleaved (d, K, 2) buffer, moving the state there from slots if needed
        (zeros, handed over lazily, then the slots' pairs)."""
        w = self._w
        if w is None:
            with self.lock:  # never while another thread learns into the slots
                if self._w is None:
                    slots, pairs = self._slots, self._pairs
                    w = np.zeros((self.spec.n_features, self.spec.n_models, 2))
                    n = int(slots.n[0])
                    w[slots.keys[1 : n + 1]] = pairs[1 : n + 1]
                    self._slots = self._pairs = None
                    self._w = w
                w = self._w
        return w

    @property
    def mean(self) -> np.ndarray:
        """(K, d) the means: a view of the dense buffer (moves the state there)."""
        return self._dense()[:, :, 0].T

    def mean_at(self, j: int) -> np.ndarray:
        """(K,) the means at coordinate j (from the slots, without moving the state)."""
        slots = self._slots
        return self.mean[:, j].copy() if slots is None else self._pairs[slots.table[j], :, 0].copy()

    @property
    def _s(self) -> np.ndarray:
        """(K, d) the stored variances (0 stands for the prior a; moves the state to the
        dense buffer)."""
        return self._dense()[:, :, 1].T

    @property
    def variance(self) -> np.ndarray:
        """(K, d) the variances (a copy; the prior's stored zeros read as ``a``)."""
        if self._slots is not None:
            raw = ds.to_dense(self._slots, self._pairs, 1, 0.0)
        else:
            raw = self._s
        return np.where(raw == 0.0, self.spec.a, np.abs(raw))

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self.__dict__.update(_slots=state.get("_slots"), _pairs=state.get("_pairs"))  # old: dense

    @property
    def n_models(self) -> int:
        return self.spec.n_models

    def set_rule(self, rule) -> None:
        check_same_a(self.rule.a, rule.a)
        self.rule = rule

    def _tail(self, X) -> float:
        """The intercept's constant c where X is CSR rows one column narrower than the
        state (its last column, c in every row, left to the walk: appending it made a
        copy of X, half of a fit on 20 Newsgroups at 2^20); else 0 (X holds every
        column). ``kernelcw.estimators._input.with_intercept`` passes such rows."""
        c = self.spec.intercept
        return c if c and sp.issparse(X) and X.shape[1] == self.spec.n_features - 1 else 0.0

    def learn(self, X, Y: np.ndarray, positions=None, checked: bool = True) -> LearnResult:
        c = self._tail(X)
        check_shapes(X, Y, self.spec.n_features - (1 if c else 0), self.n_models)
        if not checked and not sp.issparse(X):
            raise RowsUnchecked(None)  # (only the CSR walks check values)
        out = np.empty((X.shape[0], self.n_models))
        log, self._armed = self._armed, None
        self._prior = False
        method = self.spec.diag_method
        if self._slots is not None and sp.issparse(X):
            room = X.nnz + (1 if c else 0)
            slots, w = self._slots, self._pairs = ds.reserve(self._slots, self._pairs, room)
            counts = diag_fit(
                w[:, :, 0].T, w[:, :, 1].T, X, Y, self.rule, out, method, log, slots, c, checked
            )
            self._slots, self._pairs = ds.trim(slots, w)
        else:
            w = self._dense()
            counts = diag_fit(w[:, :, 0].T, w[:, :, 1].T, X, Y, self.rule, out, method, log,
                              intercept=c, checked=checked)  # fmt: skip
        return LearnResult(out, *counts)

    def checkpoint(self, X) -> UndoLog | SlotUndo | None:
        """Arms an undo log for the next :meth:`learn` call (on X): the walk records each
        coordinate (or slot) it first writes, O(coordinates written) per call instead of
        a copy of the (K, d) state; :meth:`restore` writes them back. While the state is
        still the prior (a ``fit``), nothing: :meth:`restore` rebuilds the prior."""
        self._armed = None
        if self._prior:
            return None
        sparse = sp.issparse(X)
        if not sparse:
            self._dense()  # dense rows are learnt there: log coordinates
        d, K = self.spec.n_features, self.n_models
        cap = min(d, X.nnz + (1 if self._tail(X) else 0)) if sparse else (d if X.shape[0] else 0)
        idx = np.empty(cap, dtype=np.int64)
        self._armed = UndoLog(idx, np.empty((cap, K, 2)), np.zeros(1, np.int64))
        if self._slots is not None:
            return SlotUndo(self._armed, int(self._slots.n[0]))
        return self._armed

    def undoes_finished(self, checkpoint) -> bool:
        return True  # (the log holds every coordinate the call wrote; None: the prior)

    def stabilise(self) -> bool:  # the diagonal is the one form: nothing stronger
        return False

    def restore(self, checkpoint: UndoLog | SlotUndo | None) -> None:
        self._armed = None
        if checkpoint is None:
            self._set_prior()
            return
        log = checkpoint.log if isinstance(checkpoint, SlotUndo) else checkpoint
        n = int(log.n[0])
        if isinstance(checkpoint, SlotUndo):
            self._pairs[log.idx[:n]] = log.val[:n]
            slots = self._slots
            placed = slots.keys[checkpoint.n + 1 : int(slots.n[0]) + 1]
            slots.table[placed] = 0  # placed by the undone call: given back
            slots.n[0] = checkpoint.n
            self._slots, self._pairs = ds.trim(slots, self._pairs)  # (as the call grew it)
            return
        self._w[log.idx[:n]] = log.val[:n]

    def _rows(self, X) -> tuple[np.ndarray, np.ndarray, tuple]:
        """(buffer, indices, tail) to read CSR rows X from: the slots' pairs and the
        rows' slots, or the dense buffer and X's own indices; ``tail``: the buffer row
        and value c of the intercept's entry that each row of X lacks (c = 0: none,
        :meth:`_tail`)."""
        c = self._tail(X)
        j = X.shape[1]
        if self._slots is not None:
            j = int(self._slots.table[j]) if c else 0
            stored = X.indices[: X.indptr[-1]]  # (beyond nnz: unchecked, unread)
            return self._pairs, ds.slot_rows(self._slots, stored), (j, c)
        return self._w, X.indices, (j if c else 0, c)

    def _csr_sums(self, X, parts: int) -> tuple[np.ndarray, np.ndarray]:
        """:func:`._diag_slots.csr_times` of CSR rows X: straight from the interleaved
        buffer, no (K, d) copy per call; ``parts`` 0, 1, 2: the means', the variances',
        both."""
        w, idx, tail = self._rows(X)
        return ds.csr_times(X.indptr, idx, X.data, w, self.spec.a, tail, parts)

    def decision(self, X) -> np.ndarray:
        if sp.issparse(X):
            return finite_margins(self._csr_sums(X, 0)[0])
        return finite_margins(np.asarray(X @ self.mean.T))

    def margin_variance(self, X) -> np.ndarray:
        if sp.issparse(X):
            v = self._csr_sums(X, 1)[1]
        else:
            v = np.asarray((X * X) @ self.variance.T)
        return finite_margins(v, "margin variance")

    def margins(self, X) -> tuple[np.ndarray, np.ndarray]:
        if sp.issparse(X):  # (one pass: a line holds a coordinate's mean and variance)
            f, v = self._csr_sums(X, 2)
            return finite_margins(f), finite_margins(v, "margin variance")
        return self.decision(X), self.margin_variance(X)

    def state_dict(self) -> dict[str, np.ndarray]:
        if self._slots is not None:
            mean = ds.to_dense(self._slots, self._pairs, 0, 0.0)
        else:
            mean = np.array(self.mean, order="C")
        return {"mean": mean, "variance": np.array(self.variance, order="C")}

    @classmethod
    def from_state(cls, spec: EngineSpec, state: dict[str, np.ndarray]) -> PrimalDiagEngine:
        eng = cls.__new__(cls)
        eng.spec, eng.rule = spec, spec.rule
        K, d = spec.n_models, spec.n_features
        var = np.asarray(state["variance"], dtype=np.float64).reshape(K, d)
        if not np.all(var > 0.0):
            raise ValueError("state['variance'] holds variances that are not positive")
        mean = np.asarray(state["mean"], dtype=np.float64).reshape(K, d)
        if d * K >= cls.SLOTS_FROM:  # a wide model comes back in slots, as it learnt
            eng._set_buffer(None, prior=False)
            eng._slots, eng._pairs = ds.from_arrays(mean, var, spec.a)
            return eng
        w = np.empty((d, K, 2))
        w[:, :, 0] = mean.T
        w[:, :, 1] = var.T + 0.0  # -0.0 -> +0.0: a variance's sign bit is the undo mark
        eng._set_buffer(w, prior=False)
        return eng
