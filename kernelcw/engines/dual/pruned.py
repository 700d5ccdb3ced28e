"""The batch-pruned Cholesky form of a budgeted binary dual model.

Second-order rules, solver "cholesky", ``budget_batch`` q > 1, any policy. The model
keeps ``M = L L'`` (``Pi = -a^2 M^-1``) and ``r = L^-1 qv`` (``nu = a L'^-1 r``,
``qv = M nu / a``; ``qv = g / zeta`` while nothing was projected) in dense buffers of
capacity B + 1, slots in entry order. Between prunes it grows exactly as the
append-only panel form (``doc/dual-form.md`` sections 2-3: one ``trsm`` per block
part, the walk in block space). When an update makes it B + 1, q support vectors
leave at once (``tests/reference_budget.py``, "Batch pruning"), chosen on the model
before the prune and removed with BLAS-3 work:

- remove ("oldest", "random", "smallest"): ``M' = M_AA``. Rows of L above the first
  leaver p0 are unchanged; the trailing kept rows t satisfy
  ``L'_tt L'_tt' = L[t, A_t] L[t, A_t]' + L[t, V] L[t, V]'`` (their kept columns from
  p0 on, a lower triangle, and the leavers' columns): the kept rows and columns move
  up in place and the leavers' columns are folded in by one rank-q update, Givens
  sweeps for a few, else LAPACK's blocked QR in bands of :data:`STAIR_GROUP`
  leavers (:func:`kernelcw._cholupdate.staircase_update`; about 2/3 n^2 flops per
  leaver spread over the factor, where refactoring the trailing rows cost
  ``n_t^2 (n - p0) + n_t^3 / 3`` per prune); ``qv' = qv_A``, r refreshed from p0.
- project (several points at once, Csato & Opper): with ``E = Kj_AA^-1 Kj_AV``
  (from ``Kj^-1``: ``E = -[Kj^-1]_AV [Kj^-1]_VV^-1``), ``T = [I_A; E']`` and
  ``U = [-E; I_V]`` (A, V order): ``nu' = nu_A + E nu_V`` and
  ``M' = (T' M^-1 T)^-1 = M_AA - m (U'MU)^-1 m'``, ``m = (M U)_A`` (block inverse
  plus Woodbury: ``T'M^-1T = M_AA^-1 + S Z^-1 S'``, ``Z = [M^-1]_VV``,
  ``S = [M^-1]_AV + E Z``). Computed without forming M' (which cancels badly when
  a K dwarfs D^-1): ``M'^-1 = Z'Z``, ``Z = L^-1 T``, and a QR of Z with its columns
  reversed, ``Z J = Q R``, gives ``L' = J R^-1 J``; ``qv' = M' nu' / a``.

Scores, once per prune: "smallest" from ``m_p = [M^-1]_pp`` (column norms of
``L^-1``): with ``M - a K = diag(1/zeta)``, ``1 - s_p = m_p / zeta_p``,
``v_p = s_p / zeta_p`` and ``zeta_p f_p - g_p = -nu_p / a``; "project" from
``[Kj^-1]_pp`` (the Gram cache ``G`` factored).

Rollback. Appends write rows at or after the model's size at the call's start (the
buffers never grow); only a prune changes the model's rows in place, from p0 on (a
projection: all of them, and the Gram cache). So a checkpoint holds references and
counts, and a prune first copies the lower triangles of the rows it is about to
change (those not copied yet in this call) into a spare buffer the form keeps
between calls (fresh memory costs page faults on every call) for the live
checkpoint (:meth:`PrunedForm._save_rows`). Rows an append writes after a prune in
the same call lie after that prune's first leaver (q distinct leavers among n: the
first is at most n - q), so they were copied by then.
"""

from __future__ import annotations

import math
import weakref
from typing import NamedTuple

import numpy as np
from numba import njit
from scipy.linalg import cho_factor, cho_solve, qr, solve_triangular
from scipy.linalg.blas import dgemv
from scipy.linalg.lapack import dpotrf, dpotri, dtrtri

from ... import _blas, _cholupdate
from ...budget import splitmix64_uniform
from ...rules import VAR_FLOOR, rule_from_plain
from .form import Form, Walked, entered_inputs
from .lazy_block import copy_lower, purge_rows, refresh_r
from .status import NONFINITE, OK, walk_psd_tol
from .steps import Block, WalkResult, block_rows_part, checked_step

__all__ = ["PRUNE", "STAIR_GROUP", "PrunedForm", "pruned_walk"]

#: Walk status: an update made the model budget + 1 at this index: prune, go on.
PRUNE = 4

#: Leavers per band of a removal's QR (:func:`kernelcw._cholupdate.staircase_update`)
#: and of the lazy form's solve for its leavers. 16 measured best of 8, 16 and 32
#: (fits at B = 200 and 1000, the lazy form).
STAIR_GROUP = 16


class PrunedRows(NamedTuple):
    """The rows the walk appends: as :class:`.steps.NewRows`, plus ``qn``
    (g / zeta, their entries of qv)."""

    E: np.ndarray
    Ld: np.ndarray
    rn: np.ndarray
    qn: np.ndarray
    zt: np.ndarray
    src: np.ndarray


@njit(cache=True)
def pruned_walk(blk, rule, limit, psd_tol, rows, f_out, e):
    """The panel walk (``doc/dual-form.md`` section 3) that stops right *after* the
    update that appends its ``limit``-th row (status PRUNE at that index). A v below
    ``-psd_tol * a * kappa`` is an error, above it is floored (counted). Returns a
    :class:`.steps.WalkResult`'s fields as a plain tuple (see
    :func:`.panels.panel_walk`: no namedtuple crosses back into Python)."""
    b = blk.rW.shape[0]
    rule = rule_from_plain(rule)  # (a plain tuple from Python)
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
            return (u, nfl, t, st.status)
        nfl += st.floored
        if st.alpha > 0.0:
            lnn = math.sqrt(1.0 / st.zeta + st.v)
            ay = st.alpha * blk.y[t]
            qn = f + ay * lnn * lnn
            if not math.isfinite(qn):  # (finite: so are lnn and ay lnn; a huge k(x, x))
                return (u, nfl, t, NONFINITE)
            rows.Ld[u] = lnn
            rows.rn[u] = ay * lnn
            rows.qn[u] = qn
            rows.zt[u] = st.zeta
            for j in range(u):
                rows.E[u, j] = e[j]
            rows.src[u] = t
            u += 1
            if u == limit:
                return (u, nfl, t, PRUNE)
    return (u, nfl, -1, OK)


class PrunedForm(Form):
    """``L``, ``r``, ``qv``, ``zeta`` (and for "project" the Gram cache ``G``) in
    buffers of capacity budget + 1; the policy's name, seed and removal
    counter; ``batch`` = q."""

    name = "pruned"
    code = 3

    def learn_flops(self, b: int) -> float:
        """The block's solve ``L^-1 K0`` (n^2 b) sizes its threads; the walk between the
        solves goes input by input and the prunes are band-sized LAPACK calls, while
        BLAS's idle threads busy-wait. Before the free cores were counted
        (``kernelcw._threads._LoadProbe``) that made a fit at B = 3000,
        budget_batch = 375 1.83x slower than one thread with the other core busy, and
        this form learned on one thread; now the busy core is seen and "auto" gives one
        (where the machine's load can be read: Linux, after the process's first
        reading). ``python -m benchmarks under_load`` measures both."""
        return float(self.n) * self.n * b

    def __init__(self, policy: str, budget: int, batch: int, seed: int):
        super().__init__()
        self.policy, self.budget, self.batch = policy, int(budget), int(batch)
        self.seed = int(seed)
        self.counter = 0
        cap = self._capacity()
        self.L = np.zeros((cap, cap))
        self.r = np.zeros(cap)
        self.qv = np.zeros(cap)
        self.zeta = np.zeros(cap)
        side = cap if self.projects else 0
        self.G = np.zeros((side, side))
        self._nu_cache: np.ndarray | None = None
        self._cp_ref = None  # weak reference to the current call's checkpoint

    def __getstate__(self) -> dict:
        state = super().__getstate__()
        state["_cp_ref"] = None  # a checkpoint belongs to one call, not to the model
        state.pop("_spare", None)  # (rollback scratch)
        return state

    def _capacity(self) -> int:
        """The buffers' size: the budget and the one an update adds."""
        return self.budget + 1

    @property
    def projects(self) -> bool:
        return self.policy == "project"

    # ------------------------------------------------------------ the model

    def _Ln(self) -> np.ndarray:
        return self.L[: self.n, : self.n]

    def nu(self, a: float) -> np.ndarray:
        if self._nu_cache is None:
            n = self.n
            self._nu_cache = a * solve_triangular(
                self._Ln(), self.r[:n], lower=True, trans="T", check_finite=False
            )
        return self._nu_cache.copy()

    def Pi(self, a: float) -> np.ndarray:
        n = self.n
        if n == 0:
            return np.zeros((0, 0))
        Linv = np.eye(n)
        _blas.trsm_lower_left(self._Ln(), Linv)
        return -(a * a) * (Linv.T @ Linv)

    def variance(self, Ks: np.ndarray, kap: np.ndarray, a: float) -> np.ndarray:
        if self.n == 0:
            return a * kap
        W = np.array(Ks, dtype=np.float64, order="C")
        _blas.trsm_lower_left(self._Ln(), W)
        v = a * kap - a * a * np.einsum("ij,ij->j", W, W)
        return np.maximum(v, VAR_FLOOR * a * kap)

    # ------------------------------------------------------------ learning

    def walk(self, ctx, blk, t0: int, ks: np.ndarray, f_blk: np.ndarray) -> Walked:
        """Block inputs t0..: a walk per stretch between prunes."""
        b = blk.y.shape[0]
        entered = []
        nfl = 0
        self._nu_cache = None
        while t0 < b:
            res, ks, S = self._walk_part(ctx, blk, t0, ks, f_blk)
            nfl += res.n_floored
            if S.size:
                entered.append(t0 + S)
            if res.status == PRUNE:
                ks = self._prune(ctx.a, ks)
                t0 += res.index + 1
                continue
            if res.status != OK:
                return Walked(entered_inputs(entered), ks, nfl, t0 + res.index, res.status)
            break
        return Walked(entered_inputs(entered), ks, nfl, -1, OK)

    def _walk_part(self, ctx, blk, t0: int, ks: np.ndarray, f_blk: np.ndarray):
        a = ctx.a
        b = blk.y.shape[0]
        bs = b - t0
        n = self.n
        K0c = np.empty((n, bs))
        old = ks >= 0
        K0c[old] = blk.K0[ks[old], t0:]
        K0c[~old] = blk.Kbb[-1 - ks[~old], t0:]
        W = K0c.copy()
        _blas.trsm_lower_left(self._Ln(), W)
        G = np.empty((bs, bs))
        _blas.gemm_sub(1.0, W, W, 0.0, G, trans_a=True)
        rW = np.empty((bs, 1))
        _blas.gemm_sub(1.0, W, self.r[:n].reshape(n, 1), 0.0, rW, trans_a=True)
        Kss = np.ascontiguousarray(blk.Kbb[t0:, t0:])
        kap, y = np.ascontiguousarray(blk.kap[t0:]), np.ascontiguousarray(blk.y[t0:])
        rows = PrunedRows(np.empty((bs, bs)), *(np.empty(bs) for _ in range(4)),
                          np.empty(bs, dtype=np.int64))  # fmt: skip
        f_sub = np.empty(bs)
        walk_blk = Block(G, np.ascontiguousarray(rW[:, 0]), Kss, kap, y)
        # projections and refactorisations round: with a kernel known to be positive
        # semi-definite a v below zero is that rounding, floored (and counted)
        psd_tol = walk_psd_tol(ctx.known_psd)
        limit = self.budget + 1 - n
        res = WalkResult._make(
            pruned_walk(walk_blk, tuple(ctx.rule), limit, psd_tol, rows, f_sub, np.empty(bs))
        )
        f_blk[t0:] = f_sub
        u = res.n_new
        S = rows.src[:u].copy()
        if res.status in (OK, PRUNE) and u:
            ks = self._append(a, rows, u, W, K0c, Kss, kap, t0, ks)
        return res, ks, S

    def _append(self, a, rows, u, W, K0c, Kss, kap, t0, ks) -> np.ndarray:
        n = self.n
        S = rows.src[:u]
        new = slice(n, n + u)
        self.L[new, :n] = a * W[:, S].T
        T = a * np.tril(rows.E[:u, :u], -1)
        T[np.diag_indices(u)] = rows.Ld[:u]
        self.L[new, n : n + u] = T
        self.r[new] = rows.rn[:u]
        self.qv[new] = rows.qn[:u]
        self.zeta[new] = rows.zt[:u]
        if self.projects:
            Ksn = K0c[:, S]
            Kn = Kss[np.ix_(S, S)]
            self.G[new, :n] = Ksn.T
            self.G[:n, new] = Ksn
            self.G[new, new] = Kn
        self.entry = np.concatenate([self.entry, self.clock + np.arange(u)])
        self.clock += u
        self.kap = np.concatenate([self.kap, kap[S]])
        self._nu_cache = None
        return np.concatenate([ks, -1 - (t0 + S)])

    # ------------------------------------------------------------ pruning

    def _prune(self, a: float, ks: np.ndarray) -> np.ndarray:
        """q leave at once (module docstring); returns ks without them."""
        n = self.n
        q = min(self.batch, n - 1)
        nu = self.nu(a)
        V, Kinv = self._choose(q, nu, a)
        V = np.sort(np.asarray(V, dtype=np.int64))
        if self.projects:
            A = np.setdiff1d(np.arange(n), V)
            self._save_rows(0)
            self._project(A, V, nu, Kinv, a)
            return self._keep(A, q, ks)
        return self._purge(V, ks)

    def _purge(self, V: np.ndarray, ks: np.ndarray) -> np.ndarray:
        """The leavers V (sorted slots) leave the factor (:meth:`_remove`); returns ks
        without them."""
        return self._keep(self._remove(V), V.shape[0], ks)

    def _keep(self, A: np.ndarray, left: int, ks: np.ndarray) -> np.ndarray:
        """After ``left`` leavers the slot records keep the slots A; returns ks[A]."""
        self.counter += left
        self.entry, self.kap = self.entry[A], self.kap[A]
        self._nu_cache = None
        return ks[A]

    def _choose(self, q: int, nu: np.ndarray, a: float):
        """(the q slots that leave, Kj^-1 for "project" else None)."""
        n = self.n
        order = np.argsort(self.entry, kind="stable")
        if self.policy == "oldest":
            return order[:q], None
        if self.policy == "random":
            pool = list(order[:-1])
            out = []
            for j in range(q):
                m = len(pool)
                i = min(int(splitmix64_uniform(self.seed, self.counter + j) * m), m - 1)
                out.append(pool.pop(i))
            return out, None
        if self.policy == "smallest":
            Linv, info = dtrtri(self._Ln(), lower=1)
            mp = np.einsum("ij,ij->j", Linv, Linv)  # [M^-1]_pp
            z = self.zeta[:n]
            oms = mp / z  # 1 - s_p
            s = 1.0 - oms
            vp = s / z
            d = nu / a
            scores = 0.5 * (d * d * vp / oms - s - np.log(oms))
            cand = order[:-1]
            return cand[np.argsort(scores[cand], kind="stable")[:q]], None
        Kj = self.G[:n, :n].copy()  # (the jittered kernel's: the store's)
        c, info = dpotrf(Kj, lower=1)
        if info:
            raise np.linalg.LinAlgError(
                "the support vectors' jittered Gram matrix is not positive definite in "
                "float64: kernel values too small or too large to resolve (inputs of very "
                "small or very large norm, or features of very different scales): "
                "standardise X"
            )
        Kinv, info = dpotri(c, lower=1)
        Kinv = np.tril(Kinv) + np.tril(Kinv, -1).T
        scores = np.abs(nu) / np.sqrt(np.diagonal(Kinv))
        return order[np.argsort(scores[order], kind="stable")[:q]], Kinv

    def _remove(self, V: np.ndarray) -> np.ndarray:
        """The leavers V (sorted slots) leave the factor: ``M' = M_AA`` (module
        docstring); zeta and qv follow, r is refreshed from the first leaver on.
        Returns the kept slots A."""
        p0 = int(V[0])
        self._save_rows(p0)
        fold = V.shape[0] <= _cholupdate.GIVENS_MAX_RANK
        bufs = (self.L, self.r, self.qv, self.zeta)
        A, Lam, first = purge_rows(_blas.TRI_PLAIN, *bufs, self.n, V, fold)
        m = A.shape[0]
        if not fold:  # leaver j's column is zero above its first later row
            _cholupdate.staircase_update(self.L[p0:m, p0:m], Lam, first, group=STAIR_GROUP)
            refresh_r(_blas.TRI_PLAIN, *bufs[:3], p0, m)
        return A

    def _project(self, A, V, nu, Kinv, a: float) -> None:
        """M'^-1 = T' M^-1 T = Z'Z with Z = L^-1 T (one trsm); a QR of Z with its
        columns reversed, ``Z J = Q R``, gives ``L' = J R^-1 J`` (lower, M' = L' L')
        without forming M' (whose ``M_AA - m (U'MU)^-1 m'`` cancels badly when a K
        dwarfs D^-1); nu' = nu_A + E nu_V, r' = L'' nu' / a, qv' = L' r'."""
        n = self.n
        m = A.shape[0]
        E = -cho_solve(cho_factor(Kinv[np.ix_(V, V)]), Kinv[np.ix_(V, A)]).T  # m x q
        nu2 = dgemv(1.0, E, nu[V], beta=1.0, y=nu[A].copy())
        Z = np.zeros((n, m))
        Z[A, np.arange(m)] = 1.0
        Z[V, :] = E.T
        _blas.trsm_lower_left(self._Ln(), Z)
        R = qr(Z[:, ::-1], mode="r", overwrite_a=True, check_finite=False)[0][:m]
        Rinv, info = dtrtri(R, lower=0)
        if info:
            raise np.linalg.LinAlgError("the projected precision is singular")
        Lp = np.ascontiguousarray(Rinv[::-1, ::-1])
        Lp *= np.sign(np.diagonal(Lp))[None, :]
        self.G[:m, :m] = self.G[np.ix_(A, A)]
        self.L[:m, :m] = np.tril(Lp)
        self.zeta[:m] = self.zeta[A]
        self.r[:m] = dgemv(1.0 / a, Lp, nu2, trans=1)
        self.qv[:m] = dgemv(1.0, Lp, self.r[:m])

    # ------------------------------------------------------------ rollback, state

    _ARRAYS = ("L", "r", "qv", "zeta", "G")

    def checkpoint(self) -> _Checkpoint:
        """References and counts; rows a prune changes are copied then
        (:meth:`_save_rows`), not here."""
        cp = _Checkpoint(self)
        self._cp_ref = weakref.ref(cp)
        return cp

    def _save_rows(self, lo: int) -> None:
        """Before a prune changes rows lo.. of the model at the call's start (and a
        projection the Gram cache): copy those not copied yet into the live
        checkpoint (if its buffers are still ours)."""
        ref = getattr(self, "_cp_ref", None)  # (absent in forms pickled before it)
        cp = ref() if ref is not None else None
        if cp is None or self.L is not cp.refs["L"]:
            return
        n0 = cp.n
        if cp.vectors is None:
            cp.vectors = tuple(cp.refs[k][:n0].copy() for k in ("r", "qv", "zeta"))
            spare = self.__dict__.get("_spare")
            if spare is None or spare.shape[0] < n0:  # kept between calls: warm memory
                spare = self._spare = np.empty(self.L.shape)
            cp.spare = spare
        if lo < cp.lo:
            copy_lower(self.L, cp.spare, lo, cp.lo)
            cp.lo = lo
        if self.projects and cp.gram is None:
            cp.gram = self.G[:n0, :n0].copy()

    def restore(self, cp: _Checkpoint) -> None:
        for k, v in cp.refs.items():
            setattr(self, k, v)
        self.clock, self.counter = cp.counts
        self._nu_cache = cp.nu
        n0 = cp.n
        if cp.vectors is not None:
            for k, v in zip(("r", "qv", "zeta"), cp.vectors, strict=True):
                getattr(self, k)[:n0] = v
            copy_lower(cp.spare, self.L, cp.lo, n0)
            if cp.gram is not None:
                self.G[:n0, :n0] = cp.gram
            cp.vectors, cp.spare, cp.gram, cp.lo = None, None, None, n0
        self._cp_ref = weakref.ref(cp)

    @property
    def nbytes(self) -> int:
        spare = self.__dict__.get("_spare")
        own = sum(getattr(self, k).nbytes for k in self._ARRAYS)
        return self.slots_nbytes() + own + (spare.nbytes if spare is not None else 0)

    def state_dict(self) -> dict[str, np.ndarray]:
        """The leading n of each buffer, the removal counter."""
        n = self.n
        m = n if self.projects else 0
        state = {
            "L": np.tril(self._Ln()),
            "r": self.r[:n].copy(),
            "qv": self.qv[:n].copy(),
            "zeta": self.zeta[:n].copy(),
            "G": self.G[:m, :m].copy(),
            "counter": np.array(self.counter, dtype=np.int64),
        }
        return {**state, **self.slots_state()}

    @classmethod
    def from_state(cls, state: dict[str, np.ndarray], ctx) -> PrunedForm:
        new = cls(ctx.policy, ctx.budget, ctx.batch, ctx.seed)
        new.load_slots(state)
        new.load_arrays(state)
        new.counter = int(state["counter"])
        return new

    def load_arrays(self, state: dict[str, np.ndarray]) -> None:
        """The leading n of each buffer from ``state`` (n = the slots' count)."""
        n = self.n
        self.L[:n, :n] = np.asarray(state["L"], dtype=np.float64)
        for k in ("r", "qv", "zeta"):
            getattr(self, k)[:n] = np.asarray(state[k], dtype=np.float64)
        if self.projects:
            self.G[:n, :n] = np.asarray(state["G"], dtype=np.float64)
        self._nu_cache = None


class _Checkpoint:
    """One call's checkpoint of a :class:`PrunedForm` (or :class:`.lazy.LazyForm`):
    buffer and slot references, (clock, counter), the prediction cache, the model's
    size ``n``; and what prunes changed in place: ``vectors`` (r, qv, zeta's leading
    n), in ``spare`` (the form's buffer for it, reused by every call) the lower
    triangles of rows ``lo`` to n (the first row copied so far), and ``gram`` (the
    Gram cache's leading n x n, before a projection)."""

    __slots__ = ("__weakref__", "counts", "gram", "lo", "n", "nu", "refs", "spare", "vectors")

    def __init__(self, form: PrunedForm):
        keys = ("L", "r", "qv", "zeta", "G", "idx", "entry", "kap")
        self.refs = {k: getattr(form, k) for k in keys}
        self.counts = (form.clock, form.counter)
        self.nu = form._nu_cache
        self.n = form.n
        self.lo = form.n
        self.spare = None
        self.vectors = None
        self.gram = None
