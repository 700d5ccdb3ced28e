"""Calls of one row each (the quiet try, the call's one block, the store's one-row append)
learn the same model bit for bit as the same rows in calls of several rows walked in
blocks of one (the block loop), for every factor form (panels before a budget binds,
then the queue, lazy and nu/Pi forms), with the switch of form inside a call, first- and
second-order rules, dense and CSR rows, with and without the intercept; a failed call
leaves the model as it was (a call that fails after changing the model in place, the
nu/Pi form's fused rollback copies included: ``tests/test_reliability.py``'s one-row
calls). The kernel rows' fused finiteness flag (:func:`kernelcw.kernels.rbf_direct_rows`)
gives the values and the errors of the check it replaces, and k(x, x) of one row comes
writeable for every kind of kernel."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import scipy.sparse as sp
from helpers import stream

import kernelcw.engines.dual.engine as engine_module
from kernelcw import PAClassifier, SCWClassifier
from kernelcw.kernels import Kernel, rbf_direct_rows


def _assert_same_state(a, b) -> None:
    sa, sb = a._engine.state_dict(), b._engine.state_dict()
    assert sa.keys() == sb.keys()
    for k in sa:
        np.testing.assert_array_equal(sa[k], sb[k], err_msg=k, strict=True)
    assert a._counts == b._counts


MODELS = {
    "oldest": lambda: SCWClassifier(kernel="rbf", gamma=0.3, budget=40, budget_policy="oldest"),
    "random": lambda: SCWClassifier(
        kernel="rbf", gamma=0.3, budget=40, budget_policy="random", random_state=2
    ),
    "smallest": lambda: SCWClassifier(kernel="rbf", gamma=0.3, budget=40, budget_policy="smallest"),
    "project": lambda: SCWClassifier(kernel="rbf", gamma=0.3, budget=40, budget_policy="project"),
    "unbudgeted": lambda: SCWClassifier(kernel="rbf", gamma=0.3),
    "explicit solver": lambda: SCWClassifier(kernel="rbf", gamma=0.3, solver="explicit"),
    "first order": lambda: PAClassifier(
        kernel="rbf", gamma=0.3, budget=40, budget_policy="project"
    ),
    "poly": lambda: SCWClassifier(kernel="poly", degree=2, budget=40, budget_policy="oldest"),
    "no intercept": lambda: SCWClassifier(
        kernel="rbf", gamma=0.3, budget=40, budget_policy="project", fit_intercept=False
    ),
    "sparse rows": lambda: SCWClassifier(
        kernel="rbf", gamma=0.3, budget=40, budget_policy="random", random_state=1
    ),
}


@pytest.mark.parametrize("start", [0, 30])
@pytest.mark.parametrize("name", MODELS)
def test_one_row_calls_are_the_block_loop_bit_for_bit(name, start):
    """From the first row (the budget binds inside a one-row call: the form switches)
    or after a fit of 30 rows, one row per call (the quiet try, the call's one block,
    the store's one-row append) and the same rows two per call in blocks of one (the
    block loop, no quiet try): the same margins, counters and state, bit for bit."""
    X, y = stream(160, d=4)
    if name == "sparse rows":  # (CSR rows: the store keeps CSR, its append's other way)
        X[np.abs(X) < 0.5] = 0.0
        X = sp.csr_matrix(X)
    fast = MODELS[name]().set_params(block_size=1)
    if start:
        fast.fit(X[:start], y[:start])
    slow = copy.deepcopy(fast)
    for i in range(start, X.shape[0], 2):
        f_fast = np.vstack([fast.partial_fit_margins(X[j : j + 1], y[j : j + 1], classes=[0, 1])
                            for j in (i, i + 1)])  # fmt: skip
        f_slow = slow.partial_fit_margins(X[i : i + 2], y[i : i + 2], classes=[0, 1])
        np.testing.assert_array_equal(f_fast, f_slow)
        if i % 16 == 0 or i + 2 >= X.shape[0]:
            _assert_same_state(fast, slow)
    assert fast.n_updates_ > 0 and fast.n_support_ <= (fast.budget or X.shape[0])
    if fast.budget is not None:
        assert fast._engine.factor_forms() != ["panels"]  # (the budget bound)


@pytest.mark.parametrize("tried", [True, False], ids=["quiet try", "no try"])
@pytest.mark.parametrize("policy", ["oldest", "random", "smallest", "project"])
def test_a_failed_one_row_call_leaves_the_model_as_it_was(policy, tried, monkeypatch):
    """A row the checks pass whose poly kernel values overflow: the call raises (in the
    quiet try, or without one in the learning call's kernel rows), the model is
    unchanged, and it learns on as if the call had not been made."""
    if not tried:
        monkeypatch.setattr(engine_module.DualEngine, "quiet_row", lambda *args: None)
    X, y = stream(80, d=4)
    est = SCWClassifier(kernel="poly", degree=3, budget=20, budget_policy=policy).fit(
        X[:40], y[:40]
    )
    for i in range(40, 50):
        est.partial_fit(X[i : i + 1], y[i : i + 1])
    twin = copy.deepcopy(est)
    with pytest.raises(ValueError, match="NaN or infinity"):
        est.partial_fit(np.full((1, 4), 1e60), y[:1])
    _assert_same_state(est, twin)
    for i in range(50, 80):
        est.partial_fit(X[i : i + 1], y[i : i + 1])
        twin.partial_fit(X[i : i + 1], y[i : i + 1])
    _assert_same_state(est, twin)


def test_rbf_direct_rows_flag_settles_finiteness():
    """The kernel rows of a row against a small store (one compiled call: differences,
    exp, offset and the finiteness flag) are the block's rows, bit for bit (every small
    RBF block takes the same exp), with and without an offset; values that are not
    finite clear the flag and rows_block raises as the block does."""
    rng = np.random.default_rng(1)
    A = rng.normal(size=(30, 5))
    B = rng.normal(size=(1, 5))
    idx = rng.permutation(30)[:17].astype(np.int64)
    kern = Kernel("rbf", 0.7, 3, 0.0, 5)
    K, ok = rbf_direct_rows(A, idx, B, 0.7, 0.0)
    assert ok
    np.testing.assert_array_equal(K, kern.block(A, B)[idx])
    np.testing.assert_array_equal(kern.rows_block(A, idx, B), kern.block(A, B)[idx])
    Bn = B.copy()
    Bn[0, 2] = np.nan
    assert not rbf_direct_rows(A, idx, Bn, 0.7, 0.0)[1]
    with pytest.raises(ValueError, match="NaN or infinity"):
        kern.rows_block(A, idx, Bn)
    Bi = B.copy()
    Bi[0, 0] = np.inf
    K, ok = rbf_direct_rows(A, idx, Bi, 0.7, 0.0)  # -inf exponents: kernel values 0, finite
    assert ok and not K.any()
    np.testing.assert_array_equal(kern.rows_block(A, idx, Bi), np.zeros((17, 1)))
    assert not rbf_direct_rows(Bi, np.zeros(1, np.int64), Bi, 0.7, 0.0)[1]  # inf - inf: NaN
    K, ok = rbf_direct_rows(A, idx, B, -0.7, 0.0)  # exponents above 0: finite values above 1
    assert ok and (K > 1.0).all()
    shifted = Kernel("rbf", 0.7, 3, 0.0, 5, offset=1.0)  # (an intercept's: checked too)
    np.testing.assert_array_equal(shifted.rows_block(A, idx, B), kern.block(A, B)[idx] + 1.0)
    np.testing.assert_array_equal(shifted.rows_block(A, idx, B), shifted.block(A, B)[idx])
    for bad_offset, rows in [(1.0, Bn), (np.inf, B)]:  # a NaN row; an offset of inf
        with pytest.raises(ValueError, match="NaN or infinity"):
            Kernel("rbf", 0.7, 3, 0.0, 5, offset=bad_offset).rows_block(A, idx, rows)


@pytest.mark.parametrize("kernel", ["rbf", "callable", "precomputed"])
def test_kappa_of_one_row_is_a_writeable_array(kernel):
    """k(x, x) of a block of one row comes as a new writeable array for every kind of
    kernel: numpy's diagonal is a read-only view, and the compiled walks compiled once
    more for a read-only argument (seconds each in a fresh environment)."""
    X, y = stream(30, d=4)
    if kernel == "precomputed":
        K = np.exp(-0.3 * ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1))
        est, rows = SCWClassifier(kernel="precomputed"), K
    else:
        k = (lambda A, B: (A @ B.T + 1.0) ** 2) if kernel == "callable" else "rbf"
        est, rows = SCWClassifier(kernel=k), X
    est.partial_fit(rows[:20], y[:20])  # (a precomputed fit needs the square Gram matrix)
    store = est._engine.store
    for i in range(20, 23):
        Kbb, kap = store.kernel_block(rows[i : i + 1], np.array([i]))
        assert kap.flags.writeable and kap.flags.c_contiguous and kap.shape == (1,)
        est.partial_fit(rows[i : i + 1], y[i : i + 1])


@pytest.mark.parametrize("policy", ["oldest", "random", "smallest", "project", None])
def test_one_row_calls_take_the_lean_way_and_the_general_call_where_it_must(policy, monkeypatch):
    """The engine's learn_row (kernelcw.engines.dual.one_row), or for the queue form its
    learn_row_at_once (kernelcw.engines.dual.queue_row), learns the one-row calls that
    update; where the budget binds inside one (the form switches) learn_row hands the
    row to the general call (OtherPath), and the model is the block loop's all the same."""
    import kernelcw.estimators._one_row as one_row_module

    seen = {"rows": 0, "other": 0}
    real = engine_module.DualEngine.learn_row

    def spy(self, X, Y):
        try:
            out = real(self, X, Y)
        except one_row_module.OtherPath:
            seen["other"] += 1
            raise
        seen["rows"] += out is not None
        return out

    real_at_once = engine_module.DualEngine.learn_row_at_once

    def spy_at_once(self, X, Y):  # (the queue form's rows: .queue_row)
        out = real_at_once(self, X, Y)
        seen["at once"] += out is not None and out[1] > 0
        return out

    seen["at once"] = 0
    monkeypatch.setattr(engine_module.DualEngine, "learn_row", spy)
    monkeypatch.setattr(engine_module.DualEngine, "learn_row_at_once", spy_at_once)
    X, y = stream(120, d=4)
    make = lambda: SCWClassifier(kernel="rbf", gamma=0.3, budget=policy and 30,  # noqa: E731
                                 budget_policy=policy or "project", block_size=1,
                                 random_state=0)  # fmt: skip
    fast, slow = make(), make()
    for i in range(X.shape[0]):
        fast.partial_fit(X[i : i + 1], y[i : i + 1], classes=[0, 1])
    slow.partial_fit(X, y, classes=[0, 1])
    np.testing.assert_array_equal(fast.decision_function(X), slow.decision_function(X))
    np.testing.assert_array_equal(fast.dual_coef_, slow.dual_coef_)
    assert fast._counts == slow._counts
    assert seen["rows"] + seen["at once"] >= fast.n_updates_ // 2
    assert (seen["at once"] > 0) == (policy == "oldest")  # (the queue form: .queue_row)
    assert seen["other"] == (0 if policy is None else 1)  # (the budget binds once)


@pytest.mark.parametrize("where", ["store", "general"])
def test_a_ctrl_c_after_the_lean_way_changed_the_model_puts_it_back(where, monkeypatch):
    """A KeyboardInterrupt as the row's new support vector enters the store (the walk
    has changed the model in place): model and counters as before the call. Its place
    in the store by the lean way's own step (the store's one-row append) or by the
    general call's (DualEngine._place)."""
    import kernelcw.engines.dual.one_row as lean
    from kernelcw.engines.dual.store import SupportStore

    X, y = stream(80, d=4)
    est = SCWClassifier(kernel="rbf", gamma=0.3, budget=20, budget_policy="project")
    est.fit(X[:40], y[:40])
    if where == "store":
        owner, name = SupportStore, "append_row"
    else:  # (the lean way hands every row to the general call's _place)
        owner, name = engine_module.DualEngine, "_place"
        monkeypatch.setattr(lean, "_place", lambda engine, X, cols, w, ks0: engine._place(
            X, cols, [w.entered], [None if w.ks is ks0 else w.ks]))  # fmt: skip
    real = getattr(owner, name)
    hits = 0
    for i in range(40, 80):
        twin = copy.deepcopy(est)
        hit = []

        def place(self, *args, hit=hit):
            hit.append(1)
            raise KeyboardInterrupt

        monkeypatch.setattr(owner, name, place)
        try:
            est.partial_fit(X[i : i + 1], y[i : i + 1])
            interrupted = False
        except KeyboardInterrupt:
            interrupted = True
        monkeypatch.setattr(owner, name, real)
        assert interrupted == bool(hit)  # (the Ctrl-C reaches the caller, always)
        if hit:
            hits += 1
            _assert_same_state(est, twin)
            est.partial_fit(X[i : i + 1], y[i : i + 1])
        twin.partial_fit(X[i : i + 1], y[i : i + 1])
        _assert_same_state(est, twin)
    assert hits >= 10  # (the rows that update: the walk changed the model first)


def test_a_ctrl_c_numba_reports_in_the_lean_walk_reaches_the_caller(monkeypatch):
    """numba reports a Ctrl-C in compiled code as SystemError (its cause the
    KeyboardInterrupt): the lean way took it for a walk that needs the general call,
    which learnt the row, and the interrupt was lost."""
    X, y = stream(120, d=4)
    est = SCWClassifier(kernel="rbf", gamma=0.3, budget=30, budget_policy="project")
    est.fit(X[:60], y[:60])
    form_class = type(est._engine.forms[0])
    real = form_class.walk

    fired = []

    def walk(self, *args):
        out = real(self, *args)  # (the walk ran; then numba failed to box its result)
        if fired:
            return out
        fired.append(1)
        err = SystemError("CPUDispatcher(...) returned a result with an exception set")
        err.__cause__ = KeyboardInterrupt()
        raise err

    for i in range(60, 120):
        fired.clear()  # (once a call: the general call, had it learnt the row, went on)
        twin = copy.deepcopy(est)
        monkeypatch.setattr(form_class, "walk", walk)
        quiet = est._engine.quiet_row  # (a row the quiet try takes never walks)
        monkeypatch.setattr(est._engine, "quiet_row", lambda *args: None)
        with pytest.raises(KeyboardInterrupt):
            est.partial_fit(X[i : i + 1], y[i : i + 1])
        monkeypatch.setattr(form_class, "walk", real)
        monkeypatch.setattr(est._engine, "quiet_row", quiet)
        _assert_same_state(est, twin)
        est.partial_fit(X[i : i + 1], y[i : i + 1])


def _count_limits(monkeypatch) -> list:
    """The BLAS thread limits one-row calls enter (kernelcw.engines.dual.one_row's, and
    queue_row's for the queue's rebuild), one entry each, in the list returned."""
    import kernelcw.engines.dual.one_row as lean
    import kernelcw.engines.dual.queue_row as at_once

    entered = []
    real = lean.BlasThreads

    class Counted(real):
        def __enter__(self):
            entered.append(1)
            return super().__enter__()

    monkeypatch.setattr(lean, "BlasThreads", Counted)
    monkeypatch.setattr(at_once, "BlasThreads", Counted)
    return entered


def _count_rebuilds(monkeypatch) -> list:
    """The queue form's rebuilds (LAPACK), one entry each, in the list returned."""
    from kernelcw.engines.dual.queue import QueueForm

    rebuilt, real = [], QueueForm.rebuild

    def rebuild(self, *args, **kwargs):
        rebuilt.append(1)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(QueueForm, "rebuild", rebuild)
    return rebuilt


@pytest.mark.parametrize("policy", ["oldest", "random", "smallest", "project"])
def test_one_row_walks_of_loops_enter_no_blas_thread_limit(policy, monkeypatch):
    """A walk of one input of the queue, lazy and nu/Pi forms on a model of their loops'
    size calls no BLAS (sym_mv by the loops' record, the rank updates, r's refresh by
    loops): the call enters no BLAS thread limit, but where the form says its walk may
    call LAPACK (the queue's rebuild, "project"'s refresh of its inverse) or above that
    size (the queue form's calls in one compiled call enter none); the model is the
    block loop's all the same (the tests above)."""
    from kernelcw._blas import RANK_LOOP_MAX

    entered, said = _count_limits(monkeypatch), []
    X, y = stream(260, d=4)
    est = SCWClassifier(kernel="rbf", gamma=0.3, budget=30, budget_policy=policy)
    est.fit(X[:100], y[:100])
    form_class = type(est._engine.forms[0])
    asked = form_class.one_input_blas

    def spy(self, ctx):
        said.append(asked(self, ctx))
        return said[-1]

    monkeypatch.setattr(form_class, "one_input_blas", spy)
    at_once, real_at_once = [], engine_module.DualEngine.learn_row_at_once
    rebuilt, rebuilt_at_once = _count_rebuilds(monkeypatch), []

    def spy_at_once(self, X, Y):  # (the queue form's: one compiled call, loops only,
        before = len(rebuilt)  # but for the queue's rebuild, in the limit)
        out = real_at_once(self, X, Y)
        at_once.append(out is not None)
        rebuilt_at_once.append(len(rebuilt) - before)
        return out

    monkeypatch.setattr(engine_module.DualEngine, "learn_row_at_once", spy_at_once)
    u0 = est.n_updates_
    for i in range(100, 260):
        est.partial_fit(X[i : i + 1], y[i : i + 1])
    assert est.n_updates_ - u0 >= 30  # (rows updated, through the lean ways)
    walked = len(said) + sum(at_once)
    assert len(entered) == sum(said) + sum(rebuilt_at_once) and walked >= 30
    assert sum(said) <= walked // 4
    assert (sum(at_once) >= 30) == (policy == "oldest")
    if policy == "oldest":  # (the queue rebuilds every B / 2 appends: LAPACK, in the limit)
        assert sum(rebuilt_at_once) >= 1
    form, ctx = est._engine.forms[0], est._engine._ctx
    if policy == "project":
        pol = form.policy
        counter = pol.counter
        pol.counter = 255  # (the next removal, the 256th, refreshes kinv: LAPACK)
        assert asked(form, ctx)
        pol.counter = counter
    if form_class.__name__ == "ExplicitForm":
        kap = form.kap
        form.kap = np.ones(RANK_LOOP_MAX)  # (n: the slots' count)
        assert asked(form, ctx)
        form.kap = kap


def _count_blas(monkeypatch) -> tuple[dict, list]:
    """Every BLAS and LAPACK routine the engines reach, counted: the addresses compiled
    code is handed (the records and the Python wrappers' own) replaced by counting
    ctypes callbacks to the same routines, and the scipy functions the factor forms call
    from Python wrapped. Returns the counter (routine name -> calls) and the callbacks,
    which the caller keeps alive while they may be called."""
    import ctypes

    import kernelcw._cholupdate as chol
    import kernelcw.budget.policies as policies
    import kernelcw.engines.dual.pruned as pruned
    import kernelcw.engines.dual.queue as queue
    from kernelcw import _blas

    counts: dict = {}
    keep = []

    def counted(name, addr, nargs):
        kind = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * nargs)
        real = kind(addr)

        def call(*args):
            counts[name] = counts.get(name, 0) + 1
            real(*args)

        cb = kind(call)
        keep.append((cb, real))
        return ctypes.cast(cb, ctypes.c_void_p).value

    names = ("dsymv", "dsyr", "dsyr2", "dpotrf", "dpotri", "dsymm", "dsyrk", "dgemv")
    arity = (10, 7, 9, 5, 5, 12, 10, 11)
    sym = tuple(counted(n, a, k) for n, a, k in zip(names, _blas.SYM_PLAIN, arity, strict=True))
    tri = tuple(counted(n, a, k) for n, a, k in zip(("dtrsm", "dtrsv", "dgemm"), _blas.TRI_PLAIN,
                                                    (11, 8, 13), strict=True))  # fmt: skip
    monkeypatch.setattr(_blas, "SYM_PLAIN", sym)
    monkeypatch.setattr(_blas, "SYM_LOOPS", (0,) + sym[1:])
    monkeypatch.setattr(_blas, "TRI_PLAIN", tri)
    monkeypatch.setattr(policies.BudgetPolicy.plain_record, "__defaults__", (sym,))
    for attr, value in zip(("_dtrsm", "_dtrsv", "_dgemm"), tri, strict=True):
        monkeypatch.setattr(_blas, attr, value)
    monkeypatch.setattr(_blas, "_dpotrf", sym[3])
    monkeypatch.setattr(chol, "_dtpqrt", counted("dtpqrt", chol._dtpqrt, 12))
    monkeypatch.setattr(chol, "_dtpmqrt", counted("dtpmqrt", chol._dtpmqrt, 17))
    for module, funcs in ((queue, ("qr", "solve_triangular")),
                          (pruned, ("qr", "solve_triangular", "cho_factor", "cho_solve", "dgemv",
                                    "dpotrf", "dpotri", "dtrtri"))):  # fmt: skip
        for name in funcs:
            real = getattr(module, name)

            def wrapped(*args, _real=real, _name=name, **kwargs):
                counts[_name] = counts.get(_name, 0) + 1
                return _real(*args, **kwargs)

            monkeypatch.setattr(module, name, wrapped)
    return counts, keep


@pytest.mark.parametrize("policy", ["oldest", "random", "smallest", "project", "first order"])
def test_one_row_walks_outside_the_blas_limit_call_no_blas(policy, monkeypatch):
    """Where a form says a walk of one input calls no BLAS (``one_input_blas`` False,
    so the call enters no thread limit), the walk calls none: every BLAS and LAPACK
    routine the engines reach is counted around each one-row call (and around each try
    of the queue form's one compiled call, which enters the limit only to rebuild the
    queue); the calls where the
    form said True (the queue's rebuild, "project"'s refresh of its inverse: small
    budgets refresh often) do call some, so the count is seen to work."""
    import kernelcw.engines.dual.one_row as lean

    counts, callbacks = _count_blas(monkeypatch)
    seen = []
    real = lean.learn_row

    def spy(engine, X, Y):
        said = engine.forms[0].one_input_blas(engine._ctx)
        before = sum(counts.values())
        try:
            return real(engine, X, Y)
        finally:
            seen.append((said, sum(counts.values()) - before))

    real_at_once = lean.learn_row_at_once

    rebuilt = _count_rebuilds(monkeypatch)

    def spy_at_once(engine, X, Y):  # (the queue form's one compiled call: no limit but
        before, rebuilds = sum(counts.values()), len(rebuilt)  # for the queue's rebuild)
        try:
            return real_at_once(engine, X, Y)
        finally:
            seen.append((len(rebuilt) > rebuilds, sum(counts.values()) - before))

    monkeypatch.setattr(engine_module.DualEngine, "learn_row", spy)
    monkeypatch.setattr(engine_module.DualEngine, "learn_row_at_once", spy_at_once)
    X, y = stream(400, d=4)
    if policy == "first order":
        est = PAClassifier(kernel="rbf", gamma=0.3, budget=30, budget_policy="project")
    else:  # (B = 30: "project" refreshes its inverse every 256 removals, the queue
        # rebuilds every 15 appends)
        est = SCWClassifier(kernel="rbf", gamma=0.3, budget=30, budget_policy=policy)
    est.fit(X[:40], y[:40])
    for i in range(40, 400):
        est.partial_fit(X[i : i + 1], y[i : i + 1])
    quiet = [calls for said, calls in seen if not said]
    assert len(quiet) >= 60 and not any(quiet)  # (walks outside the limit: no BLAS)
    if policy in ("oldest", "project"):
        assert any(calls for said, calls in seen if said)  # (the count sees BLAS calls)
    assert callbacks  # (alive to the end: the engines called them)


@pytest.mark.parametrize("kernel", ["poly", "rbf", "laplacian"])
def test_one_row_kernel_values_that_may_call_blas_are_made_under_the_limit(kernel, monkeypatch):
    """A one-row call that makes its row's kernel values itself (the quiet try made
    none) makes them under the BLAS thread limit unless they come from the differences
    without BLAS (the built-in RBF kernel, a small store: SupportStore.row_blas_free):
    a poly kernel's rows are a matrix product."""
    import kernelcw.engines.dual.one_row as lean

    entered, seen = _count_limits(monkeypatch), []
    real = lean.learn_row

    def spy(engine, X, Y):
        form = engine.forms[0]
        made = lean.stashed_row(engine.__dict__.get("_quiet_k0"), X, 0, form) is not None
        walk = form.one_input_blas(engine._ctx)
        n = len(entered)
        try:
            return real(engine, X, Y)
        finally:
            seen.append((made, walk, len(entered) - n))

    monkeypatch.setattr(engine_module.DualEngine, "learn_row", spy)
    X, y = stream(300, d=4)
    est = SCWClassifier(kernel=kernel, gamma=0.3, budget=30, budget_policy="smallest")
    est.fit(X[:60], y[:60])
    for i in range(60, 300):
        est.partial_fit(X[i : i + 1], y[i : i + 1])
    own = [limit for made, walk, limit in seen if not made and not walk]
    assert len(own) >= 20  # ("smallest" updates most rows: the try is mostly not made)
    assert all(own) if kernel == "poly" else not any(own)


def test_which_kernel_values_of_a_row_call_blas():
    """SupportStore.row_blas_free (Kernel.blas_free): the RBF kernel's rows from the
    differences against a small dense store, the laplacian's L1 distances and products
    with a sparse operand call no BLAS; a product of dense blocks does (a poly kernel's
    rows, and its k(x, x)), and a callable's may."""
    from kernelcw.engines.dual.store import SupportStore
    from kernelcw.kernels import SMALL_BLOCK

    rng = np.random.default_rng(0)
    x = rng.normal(size=(1, 8))

    def store(kernel, n, sparse=False):
        st = SupportStore(Kernel(kernel, 0.1, 2, 1.0, 8))
        rows = rng.normal(size=(n, 8))
        st.append(sp.csr_matrix(rows) if sparse else rows, np.arange(n), np.arange(n))
        return st

    assert SupportStore(Kernel("poly", 0.1, 2, 1.0, 8)).row_blas_free(x) is False  # k(x, x)
    assert SupportStore(Kernel("rbf", 0.1, 2, 1.0, 8)).row_blas_free(x)  # (no rows yet)
    assert store("rbf", 40).row_blas_free(x)
    assert not store("rbf", SMALL_BLOCK // 8 + 1).row_blas_free(x)  # (dgemm: large)
    assert store("laplacian", SMALL_BLOCK // 8 + 1).row_blas_free(x)
    assert not store("poly", 40).row_blas_free(x)
    assert not store("linear", 40).row_blas_free(x)
    assert store("rbf", 40, sparse=True).row_blas_free(x)  # (scipy's sparse product)
    assert not store(lambda A, B: A @ B.T, 40).row_blas_free(x)


def test_smallest_one_input_walks_score_from_pis_diagonal():
    """A walk of one input of "smallest" (Cholesky solver, a model learnt round by
    round) scores its leaver from nu and Pi's diagonal as the blocked walk does
    (kernelcw.budget.kernels.evict_smallest) and writes the variances it keeps from
    Pi; solver="explicit" (the readable reference), other policies and a model given by
    nu and Pi alone ("average" of two) keep the policy's passes over the Gram matrix.
    The models agree with the reference either way (tests/test_budget.py)."""
    from kernelcw.combination import combine
    from kernelcw.engines.dual.explicit import _DIAG, _ROUNDS

    X, y = stream(300, d=4)
    make = lambda solver="cholesky", policy="smallest": SCWClassifier(  # noqa: E731
        kernel="rbf", gamma=0.3, budget=30, budget_policy=policy, solver=solver)  # fmt: skip
    est = make().fit(X[:100], y[:100])
    u0 = est.n_updates_
    for i in range(100, 200):
        est.partial_fit(X[i : i + 1], y[i : i + 1])
    form, ctx = est._engine.forms[0], est._engine._ctx
    assert est.n_updates_ - u0 >= 30 and form._mode(ctx) == _DIAG
    n, a, z = form.n, est._engine.a, form.zsv[: form.n]
    want = 1.0 / z + np.diagonal(form._Pi)[:n] / (a * a * z * z)
    np.testing.assert_array_equal(form.policy.vsv[:n], want)  # (written from Pi)
    for other in (make(solver="explicit"), make(policy="project"), make(policy="random")):
        other.fit(X[:100], y[:100])
        f = other._engine.forms[0]
        assert f.name != "explicit" or f._mode(other._engine._ctx) == _ROUNDS
    parts = [make().fit(X[i : i + 100], y[i : i + 100]) for i in (0, 100)]
    union = combine(parts, "average")
    union.partial_fit(X[200:202], y[200:202])  # (a learning call: its context says so)
    f = union._engine.forms[0]
    assert union._engine.nu_pi_models and f._mode(union._engine._ctx) == _ROUNDS
