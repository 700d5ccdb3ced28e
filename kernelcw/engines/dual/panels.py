"""The append-only Cholesky form of a binary dual model: one growing factor.

``Pi = -a^2 M^-1`` with ``M = D^-1 + a K(S, S)`` symmetric positive definite
(``doc/dual-form.md`` section 2), kept as its append-only Cholesky factor
``M = L L'`` and the vector ``r`` (``nu = a L'^-1 r``). Per round ``w = L^-1 k``,
``f = a r . w``, ``v = a kappa - a^2 |w|^2``, and an update appends the row
``[a w, L_nn]``, ``L_nn = sqrt(1/zeta + v)``, and ``r_new = alpha y L_nn``.
Nothing stored changes, so M stays positive definite by construction, and a call
is undone by cutting the rows back.

Blocks (section 3). For ``b`` inputs ``X_B`` and the support set ``S_0`` at the
block's start: ``W0 = L^-1 K(S_0, X_B)`` is one forward substitution (BLAS-3
``dtrsm``; ``dtrsv`` for one input) and ``G = W0' W0`` one more product; the rows
appended inside the block begin with ``a W0[:, s]``, so the walk
(:func:`cholesky_walk`) runs in b x b space and never touches an n-vector. The solve
is made on ``W0'`` (b x n, C-ordered: BLAS solves from the left on contiguous
columns, faster than the right-hand-side form on ``W0``), whose rows ``a W0'[s]``
then are the new rows of L as they are stored (:func:`write_block`).

Storage. One C-ordered square buffer ``LK`` (capacity x capacity) holds L in its
lower triangle and the Gram cache K(S, S) in its strict upper triangle (as the
"oldest" queue form does); the diagonal of K is ``kap``. A block that updates
writes its rows of L and its columns of K in place past the leading n x n block,
which no later call changes; the buffer grows by :data:`GROWTH` when full (one
copy of the leading block). Every solve runs on the leading block through
:mod:`kernelcw._blas` (the buffer's leading dimension, no copies), so the cost of
a call depends on the model's size only, not on how many calls came before. (The
form's name, "panels", is from when each block kept its rows as a separate panel.)
All products go through scipy's BLAS (one BLAS: numpy's and scipy's each bundle an
OpenBLAS whose threads busy-wait after a call, and alternating them costs time).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from ... import _blas
from ...rules import VAR_FLOOR, rule_from_plain
from .form import Form, Walked
from .quiet import keep_products, kept_products, quiet_factor
from .status import NONFINITE, OK, STOP, walk_psd_tol
from .steps import Block, NewRows, WalkResult, block_rows_part, checked_step, own_block

__all__ = ["GROWTH", "PanelForm", "cholesky_walk", "lower_times"]

#: The factor buffer's growth when full: capacity x GROWTH at least (and what the block
#: needs); within a call that has more rows to come, up to 2x, towards the size the
#: call's update rate so far predicts (:meth:`PanelForm._reserve`). At GROWTH alone the
#: model holds at most GROWTH^2 = 1.69 n^2 doubles (2.69 n^2 while the leading block is
#: copied); a prediction that overshoots because the update rate fell can leave up to
#: twice the capacity the model needs, which the memory benchmark
#: (``benchmarks/bench_dual_throughput.py``) measures. A stream of partial_fit calls
#: grows by GROWTH alone, each time copying the leading block into memory the system
#: hands over slowly on first touch: 256-row calls (AROW, RBF, every row updating) to
#: n_sv = 4500 took 1.3-1.7 s at 1.15 and 0.86-0.87 s at 1.3 (timed by hand, one
#: thread; 1.5 was no faster).
GROWTH = 1.3
#: The smallest capacity a factor buffer gets.
MIN_CAPACITY = 32


@njit(cache=True)
def cholesky_walk(blk, rule, limit, psd_tol, rows, f_out, e):
    """Second-order rules in the panel form: walk one block (``blk`` a
    :class:`Block`), appending the new rows' data to ``rows`` and the margins to
    ``f_out``. With ``limit`` new rows made, the next round that would update stops
    the walk before it changes anything (status STOP at that index): a budget binds
    there. Returns a :class:`WalkResult`."""
    b = blk.rW.shape[0]
    a = rule.a
    u = np.int64(0)  # (typed, not the literal 0: callees compile once, for int64)
    nfl = 0
    for t in range(b):
        f, ee = block_rows_part(blk, rows, u, t, a, e)
        f *= a
        f_out[t] = f
        v = a * blk.kap[t] - a * a * (blk.G[t, t] + ee)
        st = checked_step(rule, blk.y[t] * f, f, v, blk.kap[t], psd_tol)
        if st.status != OK:
            return WalkResult(u, nfl, t, st.status)
        if st.alpha > 0.0 and u == limit:
            return WalkResult(u, nfl, t, STOP)
        nfl += st.floored
        if st.alpha > 0.0:
            lnn = math.sqrt(1.0 / st.zeta + st.v)
            if not math.isfinite(st.alpha * lnn):  # (the row's own step was finite: a
                return WalkResult(u, nfl, t, NONFINITE)  # huge k(x, x) overflows here)
            rows.Ld[u] = lnn
            rows.rn[u] = st.alpha * blk.y[t] * lnn
            rows.zt[u] = st.zeta
            for j in range(u):
                rows.E[u, j] = e[j]
            rows.src[u] = t
            u += 1
    return WalkResult(u, nfl, -1, OK)


@njit(cache=True)
def panel_walk(data, rule, limit, psd_tol, src, f_blk, ks):
    """:func:`cholesky_walk` from plain tuples (numba types namedtuple arguments
    slowly): ``data = (G, rW, Kbb, kap, y)``, the rows' records made here. Returns
    (WalkResult's fields, the rows as a plain tuple (E, Ld, rn, zt, src), the inputs
    that entered, ks with them appended): no namedtuple crosses back into Python,
    whose boxing looks the class up in Python code, where a Ctrl-C crashed numba
    0.68 (a segmentation fault)."""
    rule = rule_from_plain(rule)  # (a plain tuple from Python)
    b = data[3].shape[0]
    rows = NewRows(np.empty((b, b)), np.empty(b), np.empty(b), np.empty(b), src)
    res = cholesky_walk(Block(*data), rule, limit, psd_tol, rows, f_blk, np.empty(b))
    s = src[: res.n_new]
    fields = (res.n_new, res.n_floored, res.index, res.status)
    return fields, (rows.E, rows.Ld, rows.rn, rows.zt, src), s.copy(), np.concatenate((ks, -1 - s))


@njit(cache=True)
def panel_append(LK, n0, WT, blk, rows, u, a, slots, clock):
    """The u new rows of L (and columns of K) written past the leading block of LK
    (:func:`write_block`, and their own block, :func:`.steps.own_block`), and the
    slot arrays with them appended, as new arrays (a checkpoint holds the old ones):
    ``blk = (K0, Kbb, kap)``, ``rows`` as :func:`panel_walk` returns them,
    ``slots = (r, zeta, kap, entry)``."""
    K0, Kbb, kap_blk = blk
    E, Ld, rn, zt, src = rows
    s = src[:u]
    write_block(LK, n0, WT, K0, s, a)
    own_block(Kbb, s, E, Ld, a, LK[n0 : n0 + u, n0 : n0 + u])
    r, zeta, kap, entry = slots
    r = np.concatenate((r, rn[:u]))
    zeta = np.concatenate((zeta, zt[:u]))
    kap = np.concatenate((kap, kap_blk[s]))
    entry = np.concatenate((entry, clock + np.arange(u)))
    return r, zeta, kap, entry


@njit(cache=True)
def lower_times(LK, n, r, out):
    """out = L r for L the lower triangle of the leading n x n block of LK."""
    for i in range(n):
        acc = 0.0
        for j in range(i + 1):
            acc += LK[i, j] * r[j]
        out[i] = acc


@njit(cache=True)
def write_block(LK, n0, WT, K0, s, a):
    """The new rows of L and columns of K past the leading n0 x n0 block:
    ``LK[n0 + i, :n0] = a WT[s_i]`` and ``LK[:n0, n0 + i] = K0[:, s_i]``, row by row
    in place (no n x u temporaries)."""
    u = s.shape[0]
    for i in range(u):
        src = WT[s[i]]
        dst = LK[n0 + i]
        for j in range(n0):
            dst[j] = a * src[j]
    for j in range(n0):
        src = K0[j]
        dst = LK[j]
        for i in range(u):
            dst[n0 + i] = src[s[i]]


@njit(cache=True)
def transpose(A):
    """A' as a new C-ordered array, in tiles of 64 x 8 (numpy's strided copy of a
    4000 x 256 block took 4.6-7.8 ms, this 1.2 ms)."""
    n, m = A.shape
    out = np.empty((m, n))
    for i0 in range(0, n, 64):
        i1 = min(n, i0 + 64)
        for j0 in range(0, m, 8):
            j1 = min(m, j0 + 8)
            for i in range(i0, i1):
                for j in range(j0, j1):
                    out[j, i] = A[i, j]
    return out


def _solve_rows(LK: np.ndarray, K0: np.ndarray, n: int) -> np.ndarray:
    """(L^-1 K0)' (b x n, C-ordered) for L the lower triangle of LK[:n, :n]: with the
    right-hand sides as rows, BLAS solves from the left on contiguous columns
    (:func:`kernelcw._blas.trsm_lower_rows`); one input (b = 1) goes to dtrsv."""
    WT = transpose(K0) if K0.shape[1] > 1 else K0.reshape(1, -1).copy()
    if n == 0:
        return WT
    if WT.shape[0] == 1:
        _blas.trsv_lower(LK[:n, :n], WT[0])
    else:
        _blas.trsm_lower_rows(LK[:n, :n], WT)
    return WT


def _solve(LK: np.ndarray, B: np.ndarray, n: int) -> np.ndarray:
    """L^-1 B (n x m, a C-ordered copy) for L the lower triangle of LK[:n, :n]."""
    W = np.array(B, dtype=np.float64, order="C", copy=True)
    if n == 0:
        return W
    if W.shape[1] == 1:
        _blas.trsv_lower(LK[:n, :n], W[:, 0])
    else:
        _blas.trsm_lower_left(LK[:n, :n], W)
    return W


class PanelForm(Form):
    """``LK``: the factor buffer (L lower, K(S, S) strict upper, capacity x capacity);
    ``r`` and ``zeta`` by slot (module docstring)."""

    name = "panels"
    code = 0

    def __init__(self):
        super().__init__()
        self.LK = np.zeros((0, 0))
        self.r = np.zeros(0)
        self.zeta = np.zeros(0)
        self._nu_cache: np.ndarray | None = None

    # ------------------------------------------------------------ the model

    def nu(self, a: float) -> np.ndarray:
        """The dual mean coefficients by slot (cached until the model changes)."""
        if self._nu_cache is None:
            n = self.n
            x = np.array(self.r, dtype=np.float64, copy=True)
            if n:
                _blas.trsv_lower(self.LK[:n, :n], x, trans=True)
            self._nu_cache = a * x
        return self._nu_cache.copy()

    def Pi(self, a: float) -> np.ndarray:
        n = self.n
        if n == 0:
            return np.zeros((0, 0))
        Linv = _solve(self.LK, np.eye(n), n)
        return -(a * a) * (Linv.T @ Linv)

    def variance(self, Ks: np.ndarray, kap: np.ndarray, a: float) -> np.ndarray:
        if self.n == 0:
            return a * kap
        W = _solve(self.LK, Ks, self.n)
        v = a * kap - a * a * np.einsum("ij,ij->j", W, W)
        return np.maximum(v, VAR_FLOOR * a * kap)

    def unlearning_weights(self) -> np.ndarray:
        """g / zeta = L r by slot."""
        out = np.empty(self.n)
        lower_times(self.LK, self.n, self.r, out)
        return out

    def dense_gram(self) -> np.ndarray:
        """The symmetric Gram matrix K(S, S) by slot (its diagonal: ``kap``)."""
        n = self.n
        U = np.triu(self.LK[:n, :n], 1)
        G = U + U.T
        G[np.diag_indices(n)] = self.kap
        return G

    @property
    def capacity(self) -> int:
        return int(self.LK.shape[0])

    def _reserve(self, need: int, expected: int = 0) -> None:
        """Room for ``need`` rows: a larger buffer holding the leading block if full,
        of at least GROWTH times the capacity and, when the call is expected to
        bring more (``expected`` rows in all, :meth:`_append`), of up to twice it
        (each new buffer is a copy of the leading block into memory the system must
        first hand over: 0.2-0.4 GB/s measured here, so a fit that grew by GROWTH
        alone spent 7 of its 26 s in 47 copies)."""
        cap = self.capacity
        if need <= cap:
            return
        grow = max(need, int(cap * GROWTH), MIN_CAPACITY, min(expected, 2 * cap))
        new = np.empty((grow, grow))
        n = self.n
        new[:n, :n] = self.LK[:n, :n]
        self.LK = new

    # ------------------------------------------------------------ learning

    def walk(self, ctx, blk, t0: int, ks: np.ndarray, f_blk: np.ndarray) -> Walked:
        """The walk through one block (from its start), then its new rows appended to
        the factor and the Gram cache. Stops (STOP) where a budget binds."""
        assert t0 == 0, "the panel form starts blocks only"
        b = blk.y.shape[0]
        limit = b if ctx.budget is None else ctx.budget - self.n
        src = np.empty(b, dtype=np.int64)
        self._nu_cache = None
        res, entered, ks = self._walk_block(ctx, blk, limit, src, f_blk, ks)
        return Walked(entered, ks, res.n_floored, res.index, res.status)

    def _walk_block(self, ctx, blk, limit: int, src, f_blk, ks):
        """The walk (:func:`panel_walk`) and the append of its rows. Returns
        (WalkResult, the inputs that entered, ks with them)."""
        a = ctx.a
        K0, Kbb, kap = blk.K0, blk.Kbb, blk.kap
        b = blk.y.shape[0]
        n0 = self.n
        pre = kept_products(self, K0, (n0, b))  # (quiet's, for this very K0)
        if pre is not None:
            WT, G, rW = pre
        elif b == 1:
            WT, G, rW = self._one_row(K0)
        else:
            WT = _solve_rows(self.LK, K0, n0)  # W0' (b x n0), W0 = L^-1 K0
            G = np.empty((b, b))
            _blas.gemm_sub(1.0, WT, WT, 0.0, G, trans_b=True)  # W0' W0, symmetric
            rW2 = np.empty((b, 1))
            _blas.gemm_sub(1.0, WT, self.r.reshape(-1, 1), 0.0, rW2)
            rW = rW2[:, 0]
        data, tol = (G, rW, Kbb, kap, blk.y), walk_psd_tol(ctx.known_psd)
        walked = panel_walk(data, tuple(ctx.rule), limit, tol, src, f_blk, ks)
        fields, rows, entered, ks = walked
        res = WalkResult._make(fields)
        if res.status not in (OK, STOP):
            return res, entered, ks
        u = res.n_new
        if u:
            # the call's later rows are expected to update at this block's rate
            expected = self.n + u + math.ceil(ctx.rows_after * u / b)
            if ctx.budget is not None:
                expected = min(expected, ctx.budget)
            self._append(a, rows, u, WT, K0, Kbb, kap, expected)
        return res, entered, ks

    def _one_row(self, K0):
        """W0' (1 x n), G = W0' W0 and r . w of a one-input block (:meth:`_walk_block`)."""
        WT = _solve_rows(self.LK, K0, self.n)
        w = WT[0]
        return WT, np.array([[w @ w]]), np.array([self.r @ w])

    quiet_blas = True

    def quiet(self, ctx, K0, Kbb, kap: float, y: float) -> tuple[bool, float]:
        """The walk's decision at one row, exactly: its own solve and products
        (:meth:`_one_row`), then :func:`.quiet.quiet_factor`. A row it would learn
        keeps them for the walk."""
        pre = WT, G, rW = self._one_row(K0)
        tol = walk_psd_tol(ctx.known_psd)
        taken, f = quiet_factor(G[0, 0], rW[0], kap, y, tuple(ctx.rule), tol)
        keep_products(self, taken, K0, (self.n, 1), pre)
        return taken, f

    def _append(self, a, rows, u, WT, K0, Kbb, kap, expected: int = 0) -> None:
        """The u new rows of L (and columns of K) written past the leading block
        (:func:`panel_append`); ``rows`` as :func:`panel_walk` returns them."""
        n0 = self.n
        self._reserve(n0 + u, expected)
        slots = (self.r, self.zeta, self.kap, self.entry)
        out = panel_append(self.LK, n0, WT, (K0, Kbb, kap), rows, u, float(a), slots, self.clock)
        self.r, self.zeta, self.kap, self.entry = out
        self.clock += u

    # ------------------------------------------------------------ rollback, state

    def checkpoint(self):
        """Append-only: the leading block of the buffer never changes and the arrays are
        replaced, never changed in place, so references and the count cut back."""
        return (self.LK, self.r, self.zeta, self.idx, self.entry, self.kap, self.clock)

    def restore(self, cp) -> None:
        self.LK, self.r, self.zeta, self.idx, self.entry, self.kap, self.clock = cp
        self._nu_cache = None

    @property
    def nbytes(self) -> int:
        total = self.slots_nbytes() + self.r.nbytes + self.zeta.nbytes
        return total + self.LK.nbytes

    def state_dict(self) -> dict[str, np.ndarray]:
        """The buffer's leading n x n block (L lower, K strict upper) and its capacity."""
        n = self.n
        state = {
            "LK": self.LK[:n, :n].copy(),
            "capacity": np.array(self.capacity, dtype=np.int64),
            "r": self.r.copy(),
            "zeta": self.zeta.copy(),
        }
        return {**state, **self.slots_state()}

    @classmethod
    def from_state(cls, state: dict[str, np.ndarray], ctx=None) -> PanelForm:
        new = cls()
        new.load_slots(state)
        LK = np.asarray(state["LK"], dtype=np.float64)
        n = LK.shape[0]
        if n != new.n:
            raise ValueError(f"the factor holds {n} rows but the state {new.n} slots")
        cap = max(n, int(state["capacity"]))
        new.LK = np.empty((cap, cap))
        new.LK[:n, :n] = LK
        new.r = np.array(state["r"], dtype=np.float64)
        new.zeta = np.array(state["zeta"], dtype=np.float64)
        return new
