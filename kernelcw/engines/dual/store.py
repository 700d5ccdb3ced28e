"""The support store the one-vs-rest models share, and every kernel block read from it.

Every input that entered some model's support set is stored once: dense rows in a
capacity buffer, a CSR matrix, or (``kernel="precomputed"``) only its position in
the training stream (``pos`` holds the positions in all cases). The store appends a
block's new support inputs, drops rows no model refers to any more (compaction,
under a budget), and makes the kernel blocks: a training block against the store
and against itself, and test inputs against the store.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from numba import njit

from ...budget import PROJECT_JITTER
from ...kernels import Kernel

__all__ = ["SupportStore", "jitter_saved", "jittered", "kernel_jitter", "store_rows", "symmetrised"]


def kernel_jitter(spec) -> float:
    """The jitter a model of ``spec`` learns with (:class:`SupportStore`): a budgeted
    "project" model's :data:`kernelcw.budget.PROJECT_JITTER`, else 0."""
    return PROJECT_JITTER if spec.projects else 0.0


def jittered(kap: np.ndarray, jitter: float) -> np.ndarray:
    """k(x, x) of the kernel learnt with ``jitter`` (:class:`SupportStore`) from the
    plain kernel's ``kap`` (``kap`` itself for no jitter)."""
    return kap * (1.0 + jitter) if jitter else kap


def _dense(M) -> np.ndarray:
    return M.toarray() if sp.issparse(M) else np.asarray(M)


def _diagonal(K: np.ndarray) -> np.ndarray:
    """K's diagonal as a new, writeable array: numpy's is a read-only view, and a view
    of a block of one row is contiguous, so ``ascontiguousarray`` handed it on as it
    was; each compiled walk then compiled once more for a read-only k(x, x), seconds
    each in a fresh environment (one-row calls of callable and precomputed kernels)."""
    return np.diagonal(K).copy()


class SupportStore:
    """``rows`` (None until the first support input, and for "precomputed"), the
    ``n`` rows in use, their training positions ``pos`` (its first n: dense ``rows``
    and ``pos`` are capacity buffers), and ``n_seen`` (training rows seen: the
    default positions continue from there).

    ``jitter`` (a budgeted "project" model's :data:`kernelcw.budget.PROJECT_JITTER`,
    else 0): the models learn with the kernel
    ``k(x, x') + jitter k(x, x) [x and x' are the same round of the stream]``, a
    Mercer kernel (each input has a private feature of variance ``jitter k(x, x)``),
    so every input's ``k(x, x)`` here, of a training block's and of new inputs, is
    multiplied by ``1 + jitter``; a kernel between two inputs is unchanged.
    ("project" writes the inputs that leave in the kept ones: exactly, in this
    kernel's feature space, whose Gram matrices are positive definite.)"""

    def __init__(self, kernel: Kernel, jitter: float = 0.0):
        self.kernel = kernel
        self.jitter = float(jitter)
        self.rows = None
        self.n = 0
        self.pos = np.zeros(0, dtype=np.int64)
        self.n_seen = 0

    # ------------------------------------------------------------ kernel blocks

    def kernel_store(self, XB, n: int | None = None) -> np.ndarray:
        """K(store[:n], XB), (n, b) (n: all rows by default)."""
        n = self.n if n is None else n
        if n == 0:
            return np.zeros((0, XB.shape[0]))
        if self.kernel.precomputed:
            K = np.ascontiguousarray(_dense(XB[:, self.pos[:n]]).T)
            if self.kernel.offset:  # the intercept's kernel, added to the user's
                K += self.kernel.offset
            return K
        if self.rows is None:  # no support vector yet (every update so far was skipped)
            return np.zeros((0, XB.shape[0]))
        return self.kernel.block(self.rows[:n], XB)

    def kernel_rows(self, XB, idx: np.ndarray) -> np.ndarray:
        """``kernel_store(XB)[idx]``, (len(idx), b): the store rows a model uses, in
        its slots' order, the same values (:meth:`kernelcw.kernels.Kernel.rows_block`:
        a row against a small store computes only those rows)."""
        if self.kernel.precomputed or self.rows is None or self.n == 0:
            return self.kernel_store(XB)[idx]
        return self.kernel.rows_block(self.rows[: self.n], idx, XB)

    def row_blas_free(self, XB) -> bool:
        """Whether the kernel values of one row XB (:meth:`kernel_rows`,
        :meth:`kernel_store`, :meth:`kernel_block`) make no BLAS call, so need no BLAS
        thread limit (:meth:`kernelcw.kernels.Kernel.blas_free`: the RBF kernel's rows
        from the differences against a small dense store, the laplacian's, a sparse
        operand's; k(x, x) = 1 for both, or a block of its own)."""
        kernel = self.kernel
        if not kernel.unit_diagonal:  # (k(x, x) of a linear or poly kernel: a product)
            return False
        if self.rows is None or self.n == 0:  # (no rows: zeros)
            return True
        return kernel.blas_free(self.rows[: self.n], XB)

    def kernel_block(self, XB, cols: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(K(XB, XB), kappa) for a training block whose rows have positions cols
        (jittered: class docstring)."""
        if XB.shape[0] == 1 and self.kernel.unit_diagonal:  # k(x, x) = 1 (+ offset)
            kap = np.empty(1)  # (what kernel.diag adds up, then jittered, as a scalar)
            kap[0] = (1.0 + self.kernel.offset) * (1.0 + self.jitter)
            return kap.reshape(1, 1), kap
        Kbb, kap = self._kernel_block(XB, cols)
        if self.jitter:
            kap = jittered(kap, self.jitter)  # a new array
            if Kbb.shape[0] == 1:  # (not symmetrised into a new array: maybe a callable's)
                return kap.reshape(1, 1), kap
            np.fill_diagonal(Kbb, kap)
        return Kbb, kap

    def _kernel_block(self, XB, cols: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if self.kernel.precomputed:
            if cols.max() >= XB.shape[1]:
                first = int(cols[cols >= XB.shape[1]].min())
                raise ValueError(
                    f"kernel='precomputed': training row {first} needs column "
                    f"{first} (its kernel with itself) but X has {XB.shape[1]} "
                    "columns; rows must hold kernel values against all training inputs, "
                    "in stream order"
                )
            Kbb = np.ascontiguousarray(_dense(XB[:, cols]))
            Kbb = symmetrised(Kbb)
            if self.kernel.offset:
                Kbb += self.kernel.offset
            return Kbb, _diagonal(Kbb)
        Kbb = self.kernel.block(XB, XB)
        if Kbb.shape[0] > 1:
            Kbb = symmetrised(Kbb)  # exact symmetry for the walk
        if self.kernel._f is None:
            kap = self.kernel.diag(XB)
        else:
            kap = _diagonal(Kbb)
        return Kbb, kap

    def gram(self, idx: np.ndarray, kap: np.ndarray) -> np.ndarray | None:
        """K(rows idx, rows idx), exactly symmetric with ``kap`` on its diagonal, as the
        walks see it; None where the store keeps no rows ("precomputed")."""
        if self.kernel.precomputed or self.rows is None:
            return None
        R = self.rows[idx]
        G = self.kernel.block(R, R)
        G = symmetrised(G)
        G[np.diag_indices_from(G)] = kap
        return G

    def kappa_test(self, X) -> np.ndarray:
        """k(x, x) of new inputs (jittered: class docstring)."""
        if self.kernel.precomputed:
            raise ValueError(
                "predict_proba with kernel='precomputed' needs k(x, x) of the new inputs: "
                "not available from rows of K(X, X_train)"
            )
        return jittered(self.kernel.diag(X), self.jitter)

    # ------------------------------------------------------------ rows

    def append(self, XB, rows: np.ndarray, cols: np.ndarray) -> None:
        """Add block rows ``rows`` to the store, as its rows n, n + 1, ... in that order.
        ``pos`` and dense ``rows`` are capacity buffers (their first n in use): written
        past n in place, or copied into larger ones."""
        k = rows.shape[0]
        first = self.n
        pos = self.pos
        if first + k > pos.shape[0]:
            pos = np.zeros(max(first + k, int(pos.shape[0] * 1.5) + 16), dtype=np.int64)
            pos[:first] = self.pos[:first]
            self.pos = pos
        dense = type(XB) is np.ndarray and type(self.rows) is np.ndarray
        if k == 1:  # (a call of one row: no index arrays)
            r = rows.item(0)
            pos[first] = cols.item(r)
            if dense and first < len(self.rows):
                self.rows[first] = XB[r]
                self.n = first + 1
                return
        else:
            pos[first : first + k] = cols[rows]
        if self.kernel.precomputed:
            pass  # (no rows: the kernel values come with X)
        elif dense and first + k <= len(self.rows):
            self.rows[first : first + k] = XB[rows]  # room: no format to settle, no copy
        else:
            new = XB[rows]
            if self.rows is not None:  # the store keeps the format it began with
                if sp.issparse(self.rows) and not sp.issparse(new):
                    new = sp.csr_matrix(new)
                elif not sp.issparse(self.rows) and sp.issparse(new):
                    new = new.toarray()
            if sp.issparse(new):
                self.rows = (
                    new.tocsr()
                    if self.rows is None
                    else sp.vstack([self.rows[: self.n], new], format="csr")
                )
            else:
                cap = 0 if self.rows is None else self.rows.shape[0]
                if first + k > cap:
                    buf = np.empty((max(first + k, int(cap * 1.5) + 16), XB.shape[1]))
                    if first:
                        buf[:first] = self.rows[:first]
                    self.rows = buf
                self.rows[first : first + k] = new
        self.n += k

    def room_for_row(self) -> bool:
        """Whether dense capacity buffers have room for one more row (:meth:`append_row`)."""
        rows, n = self.rows, self.n
        return type(rows) is np.ndarray and n < rows.shape[0] and n < self.pos.shape[0]

    def append_row(self, XB, col: int) -> bool:
        """:meth:`append` of a dense XB's one row at position ``col`` where the capacity
        buffers have room (True), else nothing (False: :meth:`append` grows them)."""
        if type(XB) is not np.ndarray or not self.room_for_row():
            return False
        n = self.n
        self.pos[n] = col
        self.rows[n] = XB[0]
        self.n = n + 1
        return True

    def compacts(self, n_used: int) -> bool:
        """Whether :meth:`compact` of ``n_used`` rows would change the store."""
        return not (n_used == self.n or n_used > self.n // 2)

    def compact(self, used: np.ndarray) -> np.ndarray | None:
        """Keep only the rows ``used`` (sorted, unique) when that frees more than half
        (budgets remove support vectors: memory stays flat on long streams). Returns
        the map old position -> new (-1 for dropped rows), or None if nothing changed."""
        if not self.compacts(used.size):
            return None
        new_pos = np.full(self.n, -1, dtype=np.int64)
        new_pos[used] = np.arange(used.size)
        self.pos = self.pos[used]  # (exactly the rows kept: appends past them copy)
        if not self.kernel.precomputed:
            rows = self.rows[used]
            self.rows = rows.tocsr() if sp.issparse(rows) else np.ascontiguousarray(rows)
        self.n = int(used.size)
        return new_pos

    def take(self, idx: np.ndarray):
        """The stored rows at ``idx`` (dense rows or CSR; none stored yet: (0, 0))."""
        if self.rows is None:
            return np.zeros((len(idx), 0))
        return self.rows[idx]

    # ------------------------------------------------------------ rollback, state

    def checkpoint(self):
        """Rows are only appended past ``n`` or replaced whole (compaction): the
        references and counts restore them."""
        return self.rows, self.n, self.pos, self.n_seen

    def restore(self, cp) -> None:
        self.rows, self.n, self.pos, self.n_seen = cp

    @property
    def nbytes(self) -> int:
        if self.rows is None:
            rows = 0
        elif sp.issparse(self.rows):
            rows = self.rows.data.nbytes + self.rows.indices.nbytes + self.rows.indptr.nbytes
        else:
            rows = self.rows[: self.n].nbytes
        return rows + self.pos[: self.n].nbytes

    def state_dict(self) -> dict[str, np.ndarray]:
        """The rows in use (dense, or the CSR arrays), positions and counters."""
        state = {
            "n": np.array(self.n, dtype=np.int64),
            "pos": self.pos[: self.n].copy(),
            "n_seen": np.array(self.n_seen, dtype=np.int64),
        }
        if self.rows is None:
            state["kind"] = np.array(0)
        elif sp.issparse(self.rows):
            R = self.rows[: self.n].tocsr()
            state.update(kind=np.array(2), data=R.data.copy(), indices=R.indices.copy())
            state.update(indptr=R.indptr.copy(), shape=np.array(R.shape, dtype=np.int64))
        else:
            state.update(kind=np.array(1), rows=self.rows[: self.n].copy())
        return state

    @classmethod
    def from_state(
        cls, kernel: Kernel, state: dict[str, np.ndarray], jitter: float = 0.0
    ) -> SupportStore:
        new = cls(kernel, jitter)
        new.n = int(state["n"])
        new.pos = np.array(state["pos"], dtype=np.int64)
        new.n_seen = int(state["n_seen"])
        kind = int(state["kind"])
        if kind == 1:
            new.rows = np.array(state["rows"], dtype=np.float64, order="C")
        elif kind == 2:
            arrays = (state["data"], state["indices"], state["indptr"])
            new.rows = sp.csr_matrix(
                tuple(np.array(x) for x in arrays), shape=tuple(state["shape"])
            )
        return new


def jitter_saved(state: dict[str, np.ndarray], n_models: int, jitter: float) -> None:
    """A budgeted "project" model saved before such models learned with the jittered
    kernel (:class:`SupportStore`): its k(x, x), and the Gram caches' diagonals,
    become the jittered kernel's (its inverse Gram matrix was of that already: that
    version jittered it itself); it continues with that kernel."""
    for i in range(n_models):
        n = state[f"model{i}.idx"].shape[0]
        state[f"model{i}.kap"] = jittered(state[f"model{i}.kap"], jitter)
        for key in (f"model{i}.G", f"model{i}.policy.G"):
            G = state.get(key)
            if G is not None and G.ndim == 2 and min(G.shape) >= n:
                G[np.diag_indices(n)] *= 1.0 + jitter


@njit(cache=True, boundscheck=True)  # a broken invariant raises, as numpy indexing did
def store_rows(old, ks, union, first, b):
    """Each slot's store row after a block of b inputs: ``old[ks]`` for a slot whose
    kernel source is a row of K0 (ks >= 0), ``first + i`` for the block input
    ``union[i]`` (the block's inputs that entered the store, sorted: rows first,
    first + 1, ...)."""
    where = np.full(b, -1, dtype=np.int64)
    for i in range(union.shape[0]):
        where[union[i]] = first + i
    out = np.empty(ks.shape[0], dtype=np.int64)
    for i in range(ks.shape[0]):
        s = ks[i]
        out[i] = old[s] if s >= 0 else where[-1 - s]
    return out


def symmetrised(K: np.ndarray) -> np.ndarray:
    """``(K + K') / 2`` as a new, exactly symmetric array, halved before the sum: the
    same values wherever the halves stay normal numbers (halving is exact there; a
    subnormal entry may differ in its last place), and no overflow to inf for kernel
    values past half of float64's largest (a poly kernel on a huge row once put inf on
    the diagonal, and into the factor)."""
    return 0.5 * K + 0.5 * K.T
