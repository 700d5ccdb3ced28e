"""The dual (kernel) engine: K one-vs-rest binary models over one shared support store.

By the representer theorem (``doc/dual-form.md`` section 1) each binary model is

    mu    = sum_p nu_p phi(x_p),     Sigma = a I + sum_pq Pi_pq phi(x_p) phi(x_q)'

over its support set S; with ``k = K(S, x)``, ``kappa = k(x, x)``:
``f = mu . x = nu . k`` and ``v = a kappa + k' Pi k``. :class:`DualEngine` is the
:class:`kernelcw.engines.Engine` face to the estimators: it runs the block loop
(one kernel block per block of inputs, shared by the models; a call of one row for one
model in :mod:`.one_row`), lets each model's factor form walk the block (:mod:`.panels`,
:mod:`.explicit`, :mod:`.queue`, :mod:`.lazy`, :mod:`.pruned`), switches forms when a
budget binds (:mod:`.convert`), raises the walks' errors
(:mod:`.status`), and gives rollback, prediction, the dual attributes in the order
the support vectors entered, and the fitted state as plain arrays.

Margin variance. Rounding can push v below zero. A v under ``VAR_FLOOR * a * kappa``
is raised to it and counted. For a kernel not known to be positive semi-definite (a
callable, a precomputed matrix), a v under ``-PSD_TOL * a * kappa`` (or kappa < 0)
means it is not, and learning raises a ``ValueError`` naming it (in the nu/Pi form
after a retry in a factor form, which tells Pi's drift apart); the built-in kernels are,
so there every negative v is rounding, floored in every form (:func:`.status.walk_psd_tol`).
"""

from __future__ import annotations

import numpy as np

from ..._threads import BlasThreads
from ...kernels import NonFiniteKernel
from ...rules import RuleParams
from ..base import LearnResult, Locked, check_shapes, check_width, finite_margins
from .convert import explicit_to_pruned, initial_form, lazy_form, on_budget
from .explicit import ExplicitForm
from .form import BlockData, Context, Form, entered_inputs, factor_form_at_hand, for_call
from .lazy import LazyForm
from .one_row import learn_row, learn_row_at_once, row_counted, takes_row, undo_row
from .panels import PanelForm
from .pruned import PrunedForm
from .queue import QueueForm
from .quiet import quiet_row, stashed_block, stashed_column, stashed_row
from .status import OK, STOP, check_mercer, kernel_error_at, raise_for, unusable
from .store import SupportStore, jitter_saved, kernel_jitter, store_rows

__all__ = ["DualEngine"]

_FORMS = {c.code: c for c in (PanelForm, ExplicitForm, QueueForm, PrunedForm, LazyForm)}


def _plain(rule: RuleParams) -> RuleParams:
    """The rule record with plain Python scalars (one compiled signature)."""
    return RuleParams(int(rule.rule), float(rule.phi), float(rule.C), float(rule.r), float(rule.a))


class DualEngine(Locked):
    """``store``: the :class:`.store.SupportStore`; ``forms``: each binary model's
    factor form (one object per model)."""

    checks_rows = False  # (X checked before: Engine.checks_rows)

    def __init__(self, spec):
        self.spec = spec
        rule = _plain(spec.rule)
        self._ctx = Context(
            rule=rule,
            a=rule.a,
            budget=spec.budget,
            policy=spec.budget_policy,
            seed=int(spec.seed),
            block_size=int(spec.block_size),
            known_psd=spec.kernel.known_psd,
            batch=int(spec.budget_batch),
            solver=spec.solver,
        )
        self.store = SupportStore(spec.kernel, kernel_jitter(spec))
        self.forms: list[Form] = [
            initial_form(self._ctx, spec.solver) for _ in range(spec.n_models)
        ]
        self.broken: str | None = None  # why the model is unusable (restore)
        # models given by nu and Pi (combine's "average", parts pruned by projection):
        # their zeta and g do not describe them, so no factor form is rebuilt from those
        self.nu_pi_models = False

    @property
    def n_models(self) -> int:
        return len(self.forms)

    @property
    def a(self) -> float:
        return self._ctx.a

    def set_rule(self, rule: RuleParams) -> None:
        if rule is self.__dict__.get("_rule_in"):  # the record of the last call (immutable)
            return
        if rule.a != self.a:
            raise ValueError(
                f"a={rule.a!r} differs from the a={self.a!r} this model started with; "
                "the prior scale is part of the stored state: call fit to start over"
            )
        self._ctx = self._ctx._replace(rule=_plain(rule))
        self._rule_in = rule

    def check_usable(self) -> None:
        if self.broken is not None:
            raise unusable(self.broken)

    quiet_row = quiet_row  # a row that surely changes nothing, without the walk (.quiet)
    takes_row, learn_row = takes_row, learn_row  # one row, one model, no block loop (.one_row)
    learn_row_at_once, undo_row, row_counted = learn_row_at_once, undo_row, row_counted

    def seek(self, position: int) -> None:
        """The stream continues from ``position`` (the next row's, in ``support_``)."""
        self.store.n_seen = position

    def __getstate__(self) -> dict:
        state = super().__getstate__()
        state.pop("_quiet_k0", None)  # (a call's kernel row and X, for its walk)
        state.pop("_row_undo", None)  # (a one-row call's undo: .queue_row)
        return state

    def factor_forms(self) -> list[str]:
        """The factor form each binary model is in: "panels" (append-only Cholesky),
        "explicit" (nu/Pi), "queue" (the "oldest" budget's Cholesky queue),
        "pruned" (a budget pruned q at a time, :mod:`.pruned`), "lazy" (the "random"
        budget's Cholesky form, :mod:`.lazy`) or "first_order" (nu alone)."""
        return [f.name for f in self.forms]

    @property
    def nbytes(self) -> int:
        """Bytes of the fitted state's arrays (store, factors, buffers)."""
        return self.store.nbytes + sum(f.nbytes for f in self.forms)

    # ------------------------------------------------------------ learning
    def learn(self, X, Y: np.ndarray, positions=None) -> LearnResult:
        """One pass over X (dense or CSR) in order; Y (n, K) in {-1, +1}. An error
        part-way leaves the state part-way: callers :meth:`restore` a checkpoint."""
        quiet_k0 = self.__dict__.pop("_quiet_k0", None)  # (quiet_row's, just before)
        self.check_usable()
        K = len(self.forms)
        spec = self.spec
        precomputed = spec.kernel.precomputed
        check_shapes(X, Y, None if precomputed else spec.n_features, K)
        n = X.shape[0]
        store = self.store
        if positions is None:  # the stream continues: n_seen, n_seen + 1, ...
            positions = np.arange(store.n_seen, store.n_seen + n, dtype=np.int64)
            store.n_seen += n
        else:
            positions = np.asarray(positions, dtype=np.int64)
            if n:
                store.n_seen = max(store.n_seen, int(positions.max()) + 1)
        d = 0 if precomputed else X.shape[1]
        if n == 1:  # a call per row: its one block, without the loop's set-up
            with BlasThreads(self._call_flops(1, d, learning=True)) as threads:
                f, counts = self._learn_block(X, Y, positions, 0, d, threads, quiet_k0)
            return LearnResult(f, *np.array(counts, dtype=np.int64).reshape(3, K))
        out = np.empty((n, K))
        counts = np.zeros((3, K), dtype=np.int64)  # updates, mistakes, floored rounds
        b = self._ctx.block_size
        with BlasThreads() as threads:  # the BLAS threads of each block (kernelcw._threads)
            for lo in range(0, n, b):
                hi = min(n, lo + b)
                threads.block(self._call_flops(hi - lo, d, learning=True))
                out[lo:hi], c = self._learn_block(
                    X[lo:hi], Y[lo:hi], positions[lo:hi], n - hi, d, threads
                )
                counts += np.reshape(c, (3, K))
        return LearnResult(out, *counts)

    def _learn_block(self, XB, YB, cols, rows_after: int, d: int, threads, quiet_k0=None):
        """One block of :meth:`learn` (its BLAS threads chosen): the kernel block, each
        model's walk, the new support inputs placed. Returns (the (b, K) margins, the
        counts: updates, mistakes and floored rounds of each model, in that order).
        ``quiet_k0``: the kernel values :meth:`quiet_row` made for this row (quiet.py)."""
        store = self.store
        b, K = YB.shape
        mercer = not self._ctx.known_psd  # (a callable, or a precomputed matrix)
        # one model learning one input (a call per row): its rows of the kernel block by
        # slot, which a row against a small store computes alone (store.kernel_rows)
        one = b == 1 and K == 1 and not mercer
        try:  # (NaN or infinity named by the row it came from)
            Kbb, kap = stashed_block(quiet_k0, XB, store, cols)
            Ks = None if one else stashed_column(quiet_k0, XB, store)
        except NonFiniteKernel as err:
            raise kernel_error_at(err, cols) from None
        if mercer:
            self._check_mercer(Kbb, kap, Ks, cols)
        out = np.empty((b, K))
        counts = [0] * (3 * K)
        entered: list[np.ndarray] = []
        slots: list[np.ndarray] = []
        switched = False
        for k in range(K):
            if switched:  # the model before switched form: choose for the block again
                threads.block(self._call_flops(b, d, learning=True))
            yk = np.ascontiguousarray(YB[:, k])
            form = self.forms[k]
            K0 = stashed_row(quiet_k0, XB, k, form)  # (None: quiet_row made none)
            if K0 is None:
                try:
                    K0 = store.kernel_rows(XB, form.idx) if one else _rows(Ks, form)
                except NonFiniteKernel as err:
                    raise kernel_error_at(err, cols) from None
            f_blk, src, ks, nfl = self._walk_model(k, BlockData(K0, Kbb, kap, yk), cols,
                                                    rows_after, threads)  # fmt: skip
            switched = self.forms[k] is not form
            out[:, k] = f_blk
            if b == 1:  # one row (a call per row): Python's floats
                counts[K + k] = int((f_blk.item(0) >= 0.0) != (yk.item(0) > 0.0))
            else:
                counts[K + k] = int(np.count_nonzero((f_blk >= 0.0) != (yk > 0.0)))
            counts[k] = src.shape[0]
            counts[2 * K + k] = nfl
            entered.append(src)
            slots.append(ks)
        self._place(XB, cols, entered, slots)
        return out, counts

    def _check_mercer(self, Kbb, kap, Ks, cols) -> None:
        """:func:`.status.check_mercer` on a block's own kernel and, once for all models,
        against the stored support vectors (k(x, x) from the models' slots)."""
        name = self.spec.kernel.name
        check_mercer(Kbb, kap, kap, cols, cols, name)
        n = Ks.shape[0]
        if n:
            kap_store = np.full(n, np.inf)  # (inf: a row no model uses never breaks it)
            for f in self.forms:
                kap_store[f.idx] = f.kap
            check_mercer(Ks, kap_store, kap, self.store.pos[:n], cols, name)

    def _walk_model(self, k: int, blk: BlockData, cols: np.ndarray, rows_after: int, threads):
        """Walk one block for model k, switching its form where a budget binds (then the
        ``threads`` are chosen again for the new form and the inputs left: those chosen
        for the block need not suit it; :meth:`_learn_block` chooses for the block again
        before the next model).
        Returns (f, the block inputs that entered, each slot's kernel source after
        the block or None where that is its slot at the start, floored rounds)."""
        ctx = self._ctx
        if ctx.nu_pi != bool(self.nu_pi_models):  # (set by combine and from_state)
            ctx = self._ctx = ctx._replace(nu_pi=bool(self.nu_pi_models))
        if ctx.rows_after != rows_after or ctx.threads is not threads:
            ctx = for_call(ctx, rows_after, threads)
        b = blk.y.shape[0]
        f_blk = np.empty(b)
        form = self.forms[k]
        ks0 = ks = np.arange(form.n, dtype=np.int64)  # support at the block's start: K0's rows
        t0 = 0
        entered, nfl = [], 0
        while True:
            try:
                w = form.walk(ctx, blk, t0, ks, f_blk)
            except ZeroDivisionError:  # (numba's Python error model in the factor walks)
                rows = cols[t0:]  # (stream positions: a shuffled fit's are not in order)
                where = f"training row {int(rows[0])}" if rows.size == 1 else (
                    f"one of {rows.size} training rows ({int(rows.min())} to {int(rows.max())})"
                )  # fmt: skip
                raise FloatingPointError(
                    f"non-finite step at {where}: a divisor in the walk left float64's "
                    "range (kernel values near its largest: rescale X, or lower the "
                    "kernel's degree or gamma)"
                ) from None
            entered.append(w.entered)
            nfl += w.n_floored
            ks = w.ks
            if w.status != STOP:
                break
            form, ks = on_budget(form, ctx, ks, b - w.index)
            self.forms[k] = form
            threads.block(form.learn_flops(b - w.index))  # this model's form, the inputs left
            t0 = w.index
        if w.status != OK:
            row = int(cols[w.index]) if w.index >= 0 else -1
            rule, explicit = ctx.rule, isinstance(form, ExplicitForm)
            raise_for(w.status, row, self.spec.kernel.name, rule.rule, explicit, rule.first_order)
        # None: every slot kept its row (a walk that changed nothing may give back ks0)
        return f_blk, entered_inputs(entered), None if ks is ks0 else ks, nfl

    def _place(self, XB, cols, entered, slots) -> None:
        """This block's new support inputs enter the store once, whoever took them;
        each model's slots then point at store rows (``slots``: each model's ks after
        its walk, None for a model whose slots stayed as they were)."""
        if len(entered) == 1:  # one model: its inputs, in block order (sorted, unique)
            union = entered[0]
        else:
            union = np.unique(np.concatenate(entered)) if entered else np.zeros(0, int)
        first = self.store.n  # the new inputs' first store row
        if union.size:
            self.store.append(XB, union, cols)  # (rows first, first + 1, ... in union's order)
        for form, ks in zip(self.forms, slots, strict=True):
            if ks is None:  # (its slots as at the block's start)
                continue
            if union.size:
                form.idx = store_rows(form.idx, ks, union, first, XB.shape[0])
            else:  # nothing entered: every slot is a store row already
                form.idx = form.idx[ks]
        # compaction keeps at most half the rows: not while one model uses more
        forms = self.forms
        most = forms[0].n if len(forms) == 1 else max(f.n for f in forms)
        if self._ctx.budget is not None and most <= self.store.n // 2:
            used = np.unique(np.concatenate([f.idx for f in self.forms]))
            new_pos = self.store.compact(used)
            if new_pos is not None:
                for f in self.forms:
                    f.idx = new_pos[f.idx]

    def _call_flops(self, b: int, d: int, learning: bool = False) -> float:
        """The flops of the largest BLAS call that b inputs (a block, or a chunk to
        predict) make; it decides their BLAS threads (:class:`kernelcw._threads.BlasThreads`).
        That is the kernel block (n_store b d) or a model's largest product: ``Pi K``
        of the explicit form or the forward solve ``L^-1 K0`` of the factor forms when
        it predicts (n_k^2 b), each form's own count when it learns
        (:meth:`.form.Form.learn_flops`: the solve of a block, a sub-block's ``Pi K``
        in the blocked walk, n_k^2 for level-2 walks and for the lazy form, whose walks
        choose the threads of their own products). Forms that walk input by input
        between those calls leave BLAS's threads busy-waiting; with the other core busy
        that made fits at B = 3000 1.36-1.83x slower than one thread (sessions 9, 11), so
        they learned on one thread until "auto" counted the free cores (session 13);
        ``python -m benchmarks under_load`` measures them idle and under load."""
        big = 0.0
        for f in self.forms:
            big = max(big, f.learn_flops(b) if learning else float(f.n) * f.n * b)
        return max(float(self.store.n) * b * d, big)

    # ------------------------------------------------------------ rollback

    def stabilise(self) -> bool:
        """The nu/Pi recursion of a budget policy ("random", "smallest", "project";
        solver "cholesky", second-order rule) failed and the call was restored: from now
        on its models are kept in the batch-pruned Cholesky form with the same q, or
        "random" (q = 1, saved in the nu/Pi form by an earlier version) in its lazy form
        (:func:`.convert.explicit_to_pruned`), the same model without Pi's drift, where a
        budget that binds later binds too. False (nothing changed) for the explicit
        solver, a first-order rule, where no Gram matrix is at hand ("precomputed" under
        "random") or none factors, and for a removing policy's models given by nu and Pi
        (``nu_pi_models``: rebuilt from zeta, g and K they would be another model; not
        "project", whose factor comes from nu and Pi)."""
        ctx = self._ctx._replace(nu_pi=bool(self.nu_pi_models))
        if not factor_form_at_hand(ctx):
            return False
        # a model whose budget has not bound yet will bind into the factor form
        changed = not ctx.factor_only and ctx.batch == 1 and not lazy_form(ctx)
        changed = changed and any(isinstance(f, PanelForm) for f in self.forms)
        new = []
        for f in self.forms:
            if isinstance(f, ExplicitForm):
                G = f.policy.G[: f.n, : f.n] if f.policy.tracks_gram else None
                G = self.store.gram(f.idx, f.kap) if G is None else G
                f = None if G is None else explicit_to_pruned(f, ctx, G)
                if f is None:  # (its floors are counted from now on: none to go to)
                    self._ctx = self._ctx._replace(floors_drift=False)
                    return False
                changed = True
            new.append(f)
        self.forms = new
        self._ctx = ctx._replace(factor_only=True)
        return changed

    def checkpoint(self, X):
        """Each form's own checkpoint (append-only forms: lengths to cut back to; the
        explicit form: copies made at the call's first update; the queue form: references,
        its blocks copied before the one step that changes them in place) and the
        store's. (None, from a form that could not be restored, would mark the engine
        unusable on an error; no form returns it today.)"""
        cps = [f.checkpoint() for f in self.forms]
        if None in cps:  # (tuples and checkpoint objects: none equals None)
            return None
        forms = list(zip(self.forms, cps, strict=True))
        return self.store.checkpoint(), forms, self._ctx.factor_only

    def undoes_finished(self, checkpoint) -> bool:
        """The store and every form go back whole (references, lengths, and the
        copies made before the first change in place)."""
        return checkpoint is not None

    def restore(self, checkpoint) -> None:
        if checkpoint is None:
            self.broken = self.broken or "an error part-way through a call"
            return
        store_cp, forms, factor_only = checkpoint
        self._ctx = self._ctx._replace(factor_only=factor_only)
        self.store.restore(store_cp)
        self.forms = [form for form, _ in forms]
        for form, cp in forms:
            form.restore(cp)

    # ------------------------------------------------------------ prediction

    def decision(self, X) -> np.ndarray:
        return self._predict(X)[0]

    def margin_variance(self, X) -> np.ndarray:
        return self._predict(X, with_variance=True)[1]

    def margins(self, X) -> tuple[np.ndarray, np.ndarray]:
        return self._predict(X, with_variance=True)

    def _predict(self, X, with_variance: bool = False, chunk: int = 1024):
        """(f, v) for new data, each (n, K); v is None unless asked for. X of another
        width than the model's: a ValueError (the compiled kernels read rows
        unchecked)."""
        precomputed = self.spec.kernel.precomputed
        if not precomputed:
            check_width(X, self.spec.n_features)
        d = 0 if precomputed else X.shape[1]
        with BlasThreads(self._call_flops(min(chunk, X.shape[0]), d)):
            return self._predict_chunks(X, with_variance, chunk)

    def _predict_chunks(self, X, with_variance: bool, chunk: int):
        self.check_usable()
        n = X.shape[0]
        K = self.n_models
        a = self.a
        F = np.empty((n, K))
        V = np.empty((n, K)) if with_variance else None
        nus = [f.nu(a) for f in self.forms]
        for lo in range(0, n, chunk):
            hi = min(n, lo + chunk)
            XB = X[lo:hi]
            Ks = self.store.kernel_store(XB)
            kap = self.store.kappa_test(XB) if with_variance else None
            for k, form in enumerate(self.forms):
                K0 = _rows(Ks, form)
                F[lo:hi, k] = nus[k] @ K0 if form.n else 0.0
                if with_variance:
                    V[lo:hi, k] = form.variance(K0, kap, a)
        finite_margins(F)
        return F, V if V is None else finite_margins(V, "margin variance")

    # ------------------------------------------------------------ dual attributes
    # Lists with one entry per binary model, each in the order support vectors entered.

    def support_positions(self) -> list[np.ndarray]:
        self.check_usable()
        return [self.store.pos[f.idx[f.order()]] for f in self.forms]

    def support_vectors(self) -> list:
        self.check_usable()
        return [self.store.take(f.idx[f.order()]) for f in self.forms]

    def dual_coef(self) -> list[np.ndarray]:
        self.check_usable()
        with BlasThreads(max((float(f.n) ** 2 for f in self.forms), default=0.0)):
            return [f.nu(self.a)[f.order()] for f in self.forms]

    def covariance_coef(self) -> list[np.ndarray]:
        """Pi by model: a factor form inverts its factor (n^3 flops), under the BLAS
        thread setting as learning is."""
        self.check_usable()
        with BlasThreads(max((float(f.n) ** 3 for f in self.forms), default=0.0)):
            return [f.Pi(self.a)[np.ix_(f.order(), f.order())] for f in self.forms]

    def n_support(self) -> list[int]:
        self.check_usable()
        return [f.n for f in self.forms]

    # ------------------------------------------------------------ state

    def state_dict(self) -> dict[str, np.ndarray]:
        """The fitted state as plain numpy arrays (scalars as 0-d arrays): the store
        under ``store.``, model k's form code and arrays under ``model{k}.``, and
        ``factor_only`` (1 once :meth:`stabilise` chose the factor form for what binds
        later), ``nu_pi_models`` (1 for models given by nu and Pi) and ``floors_drift``
        (0 once a nu/Pi model's factor form did not factor: its floors are counted)."""
        self.check_usable()
        state = {
            "n_models": np.array(self.n_models, dtype=np.int64),
            "factor_only": np.array(int(self._ctx.factor_only), dtype=np.int64),
            "nu_pi_models": np.array(int(self.nu_pi_models), dtype=np.int64),
            "floors_drift": np.array(int(self._ctx.floors_drift), dtype=np.int64),
        }
        state.update({f"store.{k}": v for k, v in self.store.state_dict().items()})
        state["kernel_jitter"] = np.array(self.store.jitter)
        for i, form in enumerate(self.forms):
            state[f"model{i}.form"] = np.array(form.code, dtype=np.int64)
            state.update({f"model{i}.{k}": v for k, v in form.state_dict().items()})
        return state

    @classmethod
    def from_state(cls, spec, state: dict[str, np.ndarray]) -> DualEngine:
        """An engine for ``spec`` holding ``state`` (from :meth:`state_dict`): it
        predicts and continues learning bit for bit as the engine it came from.
        The engine owns copies: changing ``state`` afterwards changes nothing here."""
        state = {k: np.array(v, copy=True) for k, v in state.items()}
        eng = cls(spec)
        if int(state["n_models"]) != eng.n_models:
            raise ValueError(
                f"the state holds {int(state['n_models'])} models; spec says {eng.n_models}"
            )
        if bool(state.get("factor_only", False)):  # files saved before it: False
            eng._ctx = eng._ctx._replace(factor_only=True)
        eng.nu_pi_models = bool(state.get("nu_pi_models", False))  # (likewise)
        if not bool(state.get("floors_drift", True)):  # (saved before it: True)
            eng._ctx = eng._ctx._replace(floors_drift=False)
        jitter = eng.store.jitter
        if jitter and "kernel_jitter" not in state:  # saved before "project" jittered
            jitter_saved(state, eng.n_models, jitter)
        eng.store = SupportStore.from_state(spec.kernel, _under(state, "store."), jitter)
        for i in range(eng.n_models):
            sub = _under(state, f"model{i}.")
            form = _FORMS.get(int(sub["form"]))
            if form is None:
                raise ValueError(
                    f"model {i} is in factor form {int(sub['form'])}, which this version of "
                    "kernelcw does not know (a file written by a newer version?)"
                )
            eng.forms[i] = form.from_state(sub, eng._ctx)
        return eng


def _under(state: dict[str, np.ndarray], prefix: str) -> dict[str, np.ndarray]:
    return {k[len(prefix) :]: v for k, v in state.items() if k.startswith(prefix)}


def _rows(Ks: np.ndarray, form: Form) -> np.ndarray:
    """The rows of K(store, X) for a model's support vectors, by slot (for a column or a
    few, taking them costs less than finding that they are all of Ks in order)."""
    n = form.idx.shape[0]
    if Ks.shape[1] > 4 and n == Ks.shape[0] and np.array_equal(form.idx, np.arange(n)):
        return Ks
    return Ks[form.idx]
