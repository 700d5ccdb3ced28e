"""The append-only Cholesky form of a binary dual model, kept in row panels.

``Pi = -a^2 M^-1`` with ``M = D^-1 + a K(S, S)`` symmetric positive definite
(``doc/dual-form.md`` section 2), kept as its append-only Cholesky factor
``M = L L'`` and the vector ``r`` (``nu = a L'^-1 r``). Per round ``w = L^-1 k``,
``f = a r . w``, ``v = a kappa - a^2 |w|^2``, and an update appends the row
``[a w, L_nn]``, ``L_nn = sqrt(1/zeta + v)``, and ``r_new = alpha y L_nn``.
Nothing stored changes, so M stays positive definite by construction, and a call
is undone by cutting the rows back.

Blocks (section 3). For ``b`` inputs ``X_B`` and the support set ``S_0`` at the
block's start: ``W0 = L^-1 K(S_0, X_B)`` is one blocked forward substitution
(BLAS-3) and ``G = W0' W0`` one more product; the rows appended inside the block
begin with ``a W0[:, s]``, so the walk (:func:`cholesky_walk`) runs in b x b space
and never touches an n-vector.

Storage. L and the Gram cache K(S, S) are row panels, one per block that updated:
panel j holds the ``u_j`` rows appended in that block as a rectangle ``R_j``
(u_j x off_j) and a lower triangle ``T_j`` (u_j x u_j), both C-contiguous: the
forward substitution over panels is a sequence of in-place ``dgemm`` and
``dtrsm`` calls on transposed (Fortran-ordered) views, without copies. All
products go through scipy's BLAS (one BLAS: numpy's and scipy's each bundle an
OpenBLAS whose threads busy-wait after a call, and alternating them costs time).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit
from scipy.linalg import solve_triangular
from scipy.linalg.blas import dgemm, dgemv, dtrsm

from ...rules import VAR_FLOOR
from .form import Form, Walked
from .status import OK, PSD_TOL, STOP
from .steps import Block, NewRows, WalkResult, block_rows_part, checked_step

__all__ = ["PanelForm", "backward", "cholesky_walk", "dense_gram", "forward", "panel_times"]


@njit(cache=True)
def cholesky_walk(blk, rule, limit, rows, f_out, e):
    """Second-order rules in the panel form: walk one block (``blk`` a
    :class:`Block`), appending the new rows' data to ``rows`` and the margins to
    ``f_out``. With ``limit`` new rows made, the next round that would update stops
    the walk before it changes anything (status STOP at that index): a budget binds
    there. Returns a :class:`WalkResult`."""
    b = blk.rW.shape[0]
    a = rule.a
    u = 0
    nfl = 0
    for t in range(b):
        f, ee = block_rows_part(blk, rows, u, t, a, e)
        f *= a
        f_out[t] = f
        v = a * blk.kap[t] - a * a * (blk.G[t, t] + ee)
        st = checked_step(rule, blk.y[t] * f, f, v, blk.kap[t], PSD_TOL)
        if st.status != OK:
            return WalkResult(u, nfl, t, st.status)
        if st.alpha > 0.0 and u == limit:
            return WalkResult(u, nfl, t, STOP)
        nfl += st.floored
        if st.alpha > 0.0:
            lnn = math.sqrt(1.0 / st.zeta + st.v)
            rows.Ld[u] = lnn
            rows.rn[u] = st.alpha * blk.y[t] * lnn
            rows.zt[u] = st.zeta
            for j in range(u):
                rows.E[u, j] = e[j]
            rows.src[u] = t
            u += 1
    return WalkResult(u, nfl, -1, OK)


def forward(panels, K0: np.ndarray) -> np.ndarray:
    """L^-1 K0 (n x b, C-ordered) for L stored as panels [(off, R, T)].

    Row block j: ``W_j = T_j^-1 (K0_j - R_j W[:off_j])``. In Fortran terms (a
    C-ordered M is the F-ordered M'): ``W_j' -= W[:off]' R_j'`` is one dgemm and
    ``W_j' T_j' = rhs'`` one right-sided dtrsm, both in place.
    """
    W = np.array(K0, dtype=np.float64, order="C", copy=True)
    for off, R, T in panels:
        u = T.shape[0]
        Wj = W[off : off + u]
        if off:
            out = dgemm(-1.0, W[:off].T, R.T, beta=1.0, c=Wj.T, overwrite_c=1)
            if not np.shares_memory(out, Wj):  # pragma: no cover - f2py copied
                Wj[...] = out.T
        out = dtrsm(1.0, T.T, Wj.T, side=1, lower=0, overwrite_b=1)
        if not np.shares_memory(out, Wj):  # pragma: no cover - f2py copied
            Wj[...] = out.T
    return W


def panel_times(panels, r: np.ndarray, n: int) -> np.ndarray:
    """L r for L stored as panels (the unlearning weights g / zeta = L r)."""
    out = np.zeros(n)
    for off, R, T in panels:
        u = T.shape[0]
        out[off : off + u] = T @ r[off : off + u] + (R @ r[:off] if off else 0.0)
    return out


def backward(panels, Rv: np.ndarray) -> np.ndarray:
    """L'^-1 Rv (Rv of n rows, vector or matrix)."""
    X = np.array(Rv, dtype=np.float64, copy=True)
    for off, R, T in reversed(panels):
        u = T.shape[0]
        X[off : off + u] = solve_triangular(
            T, X[off : off + u], lower=True, trans="T", check_finite=False
        )
        if off:
            X[:off] -= R.T @ X[off : off + u]
    return X


def dense_gram(panels, n: int) -> np.ndarray:
    """The symmetric Gram matrix held by its lower-triangular row panels."""
    G = np.zeros((n, n))
    for off, P in panels:
        u = P.shape[0]
        G[off : off + u, : off + u] = P
    return np.tril(G) + np.tril(G, -1).T


class PanelForm(Form):
    """``L`` and ``gram`` as row panels ``(off, R, T)`` and ``(off, P)``, ``r`` and
    ``zeta`` by slot (module docstring)."""

    name = "panels"
    code = 0

    def __init__(self):
        super().__init__()
        self.L: list[tuple[int, np.ndarray, np.ndarray]] = []
        self.gram: list[tuple[int, np.ndarray]] = []
        self.r = np.zeros(0)
        self.zeta = np.zeros(0)
        self._nu_cache: np.ndarray | None = None

    # ------------------------------------------------------------ the model

    def nu(self, a: float) -> np.ndarray:
        """The dual mean coefficients by slot (cached until the model changes)."""
        if self._nu_cache is None:
            self._nu_cache = a * backward(self.L, self.r) if self.n else np.zeros(0)
        return self._nu_cache.copy()

    def Pi(self, a: float) -> np.ndarray:
        n = self.n
        if n == 0:
            return np.zeros((0, 0))
        Linv = forward(self.L, np.eye(n))
        return -(a * a) * (Linv.T @ Linv)

    def variance(self, Ks: np.ndarray, kap: np.ndarray, a: float) -> np.ndarray:
        if self.n == 0:
            return a * kap
        W = forward(self.L, Ks)
        v = a * kap - a * a * np.einsum("ij,ij->j", W, W)
        return np.maximum(v, VAR_FLOOR * a * kap)

    def unlearning_weights(self) -> np.ndarray:
        """g / zeta = L r by slot."""
        return panel_times(self.L, self.r, self.n)

    # ------------------------------------------------------------ learning

    def walk(self, ctx, blk, t0: int, ks: np.ndarray, f_blk: np.ndarray) -> Walked:
        """The walk through one block (from its start), then its new rows appended to
        the factor and the Gram cache. Stops (STOP) where a budget binds."""
        assert t0 == 0, "the panel form starts blocks only"
        b = blk.y.shape[0]
        limit = b if ctx.budget is None else ctx.budget - self.n
        src = np.empty(b, dtype=np.int64)
        self._nu_cache = None
        res = self._walk_block(ctx, blk, limit, src, f_blk)
        u = res.n_new
        return Walked(
            src[:u].copy(), np.concatenate([ks, -1 - src[:u]]), res.n_floored, res.index, res.status
        )

    def _walk_block(self, ctx, blk, limit: int, src, f_blk) -> WalkResult:
        a = ctx.a
        K0, Kbb, kap = blk.K0, blk.Kbb, blk.kap
        b = blk.y.shape[0]
        n0 = self.n
        if n0:
            W0 = forward(self.L, K0)
            G = dgemm(1.0, W0.T, W0.T, trans_b=1)  # W0' W0, symmetric (b x b)
            rW = dgemv(1.0, W0.T, self.r)  # W0' r
        else:
            W0 = np.zeros((0, b))
            G = np.zeros((b, b))
            rW = np.zeros(b)
        rows = NewRows(np.empty((b, b)), np.empty(b), np.empty(b), np.empty(b), src)
        walk_blk = Block(np.ascontiguousarray(G), np.ascontiguousarray(rW), Kbb, kap, blk.y)
        res = cholesky_walk(walk_blk, ctx.rule, limit, rows, f_blk, np.empty(b))
        if res.status not in (OK, STOP):
            return res
        u = res.n_new
        if u:
            s = src[:u]
            R = np.ascontiguousarray(W0[:, s].T)
            R *= a
            T = a * np.tril(rows.E[:u, :u], -1)
            T[np.arange(u), np.arange(u)] = rows.Ld[:u]
            self.L.append((n0, R, T))
            self.r = np.concatenate([self.r, rows.rn[:u]])
            self.zeta = np.concatenate([self.zeta, rows.zt[:u]])
            Gp = np.empty((u, n0 + u))
            Gp[:, :n0] = K0[:, s].T
            Gp[:, n0:] = np.tril(Kbb[np.ix_(s, s)])
            self.gram.append((n0, Gp))
            self.kap = np.concatenate([self.kap, kap[s]])
            self.entry = np.concatenate([self.entry, self.clock + np.arange(u)])
            self.clock += u
        return res

    # ------------------------------------------------------------ rollback, state

    def checkpoint(self):
        """Append-only: the panel lists' lengths and the arrays (replaced, never
        changed in place) are enough to cut back."""
        return (list(self.L), list(self.gram), self.r, self.zeta, self.idx, self.entry,
                self.kap, self.clock)  # fmt: skip

    def restore(self, cp) -> None:
        L, gram, self.r, self.zeta, self.idx, self.entry, self.kap, self.clock = cp
        self.L, self.gram = list(L), list(gram)
        self._nu_cache = None

    @property
    def nbytes(self) -> int:
        total = self.slots_nbytes() + self.r.nbytes + self.zeta.nbytes
        total += sum(R.nbytes + T.nbytes for _, R, T in self.L)
        return total + sum(P.nbytes for _, P in self.gram)

    def state_dict(self) -> dict[str, np.ndarray]:
        """L and the Gram cache as dense lower triangles, the panels' offsets."""
        n = self.n
        L = np.zeros((n, n))
        for off, R, T in self.L:
            u = T.shape[0]
            L[off : off + u, :off] = R
            L[off : off + u, off : off + u] = T
        K = np.zeros((n, n))
        for off, P in self.gram:
            K[off : off + P.shape[0], : P.shape[1]] = P
        offsets = np.array([off for off, _, _ in self.L] + [n], dtype=np.int64)
        state = {"L": L, "gram": K, "offsets": offsets, "r": self.r.copy()}
        return {**state, "zeta": self.zeta.copy(), **self.slots_state()}

    @classmethod
    def from_state(cls, state: dict[str, np.ndarray], ctx=None) -> PanelForm:
        new = cls()
        new.load_slots(state)
        L = np.asarray(state["L"], dtype=np.float64)
        K = np.asarray(state["gram"], dtype=np.float64)
        off = [int(o) for o in state["offsets"]]
        for lo, hi in zip(off[:-1], off[1:], strict=True):
            R = np.ascontiguousarray(L[lo:hi, :lo])
            T = np.ascontiguousarray(L[lo:hi, lo:hi])
            new.L.append((lo, R, T))
            new.gram.append((lo, np.ascontiguousarray(K[lo:hi, :hi])))
        new.r = np.array(state["r"], dtype=np.float64)
        new.zeta = np.array(state["zeta"], dtype=np.float64)
        return new
