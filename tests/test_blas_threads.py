"""The BLAS thread setting (kernelcw._threads): respected inside fit, restored after it,
results independent of it; and the full learner's scratch never reaching its products."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

import kernelcw
from kernelcw import AROWClassifier, SCWClassifier, _threads
from kernelcw._threads import AUTO_IDLE_MIN_FLOPS, AUTO_MIN_FLOPS, BlasThreads, blas_libraries
from kernelcw.engines import primal_full


def _blas_threads() -> list[int]:
    blas_libraries()  # scipy's BLAS loaded, as in any fit
    return sorted(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas")


def _data(n=200, d=6, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = (X[:, 0] + 0.5 * rng.normal(size=n) > 0).astype(int)
    return X, y


class _SpyKernel:
    """An RBF kernel that records the BLAS thread counts it sees."""

    __name__ = "spy"

    def __init__(self):
        self.seen: list[list[int]] = []

    def __call__(self, A, B):
        self.seen.append(_blas_threads())
        D = (A * A).sum(1)[:, None] + (B * B).sum(1)[None, :] - 2 * A @ B.T
        return np.exp(-0.1 * np.maximum(D, 0.0))


class _Probe:
    """A stand-in for the load probe: ``free`` is what it answers (None: no reading)."""

    def __init__(self, free):
        self.answer = free

    def free(self):
        return self.answer

    def free_recent(self, span):
        return self.answer

    def prime(self):
        pass

    def forget(self):
        pass


@pytest.fixture(autouse=True)
def idle_machine(monkeypatch):
    """These tests see no reading of the machine's load (the probe's real reading
    depends on what else runs beside the suite); the probe's own tests are below."""
    monkeypatch.setattr(_threads, "_probe", _Probe(None))


@pytest.fixture
def two_threads():
    """Both BLAS pools at 2 threads for the test (whatever the environment set)."""
    blas_libraries()
    with threadpool_limits(2, user_api="blas"):
        yield


@pytest.mark.parametrize(
    ("setting", "inside"),
    [("auto", [1, 1]), (1, [1, 1]), (2, [2, 2])],
)
def test_dual_fit_runs_under_the_setting_and_restores(two_threads, setting, inside):
    X, y = _data()
    k = _SpyKernel()
    with kernelcw.config_context(blas_threads=setting):
        SCWClassifier(kernel=k).fit(X, y)
        assert k.seen and all(s == inside for s in k.seen)
        est = SCWClassifier(kernel=k).partial_fit(X[:5], y[:5], classes=[0, 1])
        est.partial_fit(X[5:6], y[5:6])  # one row
        assert k.seen[-1] == inside
    assert _blas_threads() == [2, 2]


def test_none_leaves_the_users_limit_alone(two_threads):
    X, y = _data()
    k = _SpyKernel()
    with kernelcw.config_context(blas_threads=None):
        SCWClassifier(kernel=k).fit(X, y)
        assert all(s == [2, 2] for s in k.seen)
        with threadpool_limits(1, user_api="blas"):
            k.seen.clear()
            SCWClassifier(kernel=k).fit(X, y)
            assert k.seen and all(s == [1, 1] for s in k.seen)
    assert _blas_threads() == [2, 2]


def test_auto_uses_blas_threads_for_large_blocks(two_threads):
    seen = []
    with BlasThreads(0.0) as t:
        seen.append(_blas_threads())
        t.block(AUTO_MIN_FLOPS)
        seen.append(_blas_threads())
        t.block(1.0)
        seen.append(_blas_threads())
    assert seen == [[1, 1], [2, 2], [1, 1]]
    assert _blas_threads() == [2, 2]


def test_auto_uses_no_more_threads_than_the_free_cores(two_threads, monkeypatch):
    """Large blocks: BLAS's own count, capped by the cores the others leave (rounded,
    at least one); a count the user chose is not second-guessed."""
    seen = []
    for free in (1.0, 1.4, 0.2, 1.6, 5.0):
        monkeypatch.setattr(_threads, "_probe", _Probe(free))
        with BlasThreads(0.0) as t:
            t.block(1e12)
            seen.append(_blas_threads())
            t.block(1.0)
            seen.append(_blas_threads())
    assert seen == [[1, 1]] * 6 + [[2, 2], [1, 1], [2, 2], [1, 1]]
    monkeypatch.setattr(_threads, "_probe", _Probe(1.0))
    with kernelcw.config_context(blas_threads=2), BlasThreads(0.0) as t:
        t.block(1e12)
        assert _blas_threads() == [2, 2]
    assert _blas_threads() == [2, 2]


class _Clock:
    def __init__(self):
        self.wall = 0.0
        self.own = 0.0

    def monotonic(self) -> float:
        return self.wall

    def process_time(self) -> float:
        return self.own


def _fake_machine(tmp_path, monkeypatch):
    """A two-core machine for the load probe: a clock the test moves (wall and own CPU
    seconds) and a /proc/stat the test writes (:func:`_stat`); returns (clock, path)."""
    clock = _Clock()
    monkeypatch.setattr(_threads, "time", clock)
    monkeypatch.setattr(_threads.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monkeypatch.setattr(_threads.os, "sysconf", lambda name: 100)
    return clock, tmp_path / "stat"


def _stat(path, busy: dict[int, int], quiet: int = 0) -> None:
    """A /proc/stat whose cpu lines' counted fields (user, system, irq, softirq,
    steal) add up to ``busy[cpu]`` ticks; nice, idle and iowait get ``quiet`` more
    (never counted)."""
    lines = ["cpu  1 2 3 4 5 6 7 8 0 0", "intr 12345"]
    for cpu, t in busy.items():
        u, s_, irq, soft = t // 2, t // 4, t // 16, t // 32
        steal = t - u - s_ - irq - soft
        n_, idle, iow = 3 + quiet, 99999 + quiet, 77 + quiet
        lines.append(f"cpu{cpu} {u} {n_} {s_} {idle} {iow} {irq} {soft} {steal} 0 0")
    path.write_text("\n".join(lines) + "\n")


def test_auto_gives_small_blocks_two_threads_only_on_an_idle_machine(two_threads, monkeypatch):
    """Blocks from AUTO_IDLE_MIN_FLOPS to AUTO_MIN_FLOPS: two threads where the probe's
    recent reading leaves two cores free (rounded), else one; no reading: one (the
    large blocks' rule leaves BLAS its count there); smaller blocks: one, always."""
    seen = []
    for free in (2.0, 1.6, 1.4, 1.0, None, 8.0):
        monkeypatch.setattr(_threads, "_probe", _Probe(free))
        with BlasThreads(0.0) as t:
            t.block(AUTO_IDLE_MIN_FLOPS)
            seen.append(_blas_threads())
            t.block(AUTO_IDLE_MIN_FLOPS / 2)
            seen.append(_blas_threads())
    two, one = [2, 2], [1, 1]
    assert seen == [two, one, two, one, one, one, one, one, one, one, two, one]
    monkeypatch.setattr(_threads, "_probe", _Probe(1.0))
    assert _blas_threads() == [2, 2]


def test_small_blocks_take_threads_only_on_a_recent_reading(tmp_path, monkeypatch):
    """A reading over a long pause (a fit after minutes of nothing) averages the load
    over the pause: a process busy since its last seconds would pass for idle. Small
    blocks wait for a reading over at most IDLE_SPAN (the next one, a period later);
    large blocks go by any reading, as before."""
    clock, stat = _fake_machine(tmp_path, monkeypatch)
    probe = _threads._LoadProbe(str(stat))
    _stat(stat, {0: 1000, 1: 1000})
    assert probe.free_recent(_threads.IDLE_SPAN) is None  # (the first reading)
    clock.wall = 60.0  # a minute later, of which the last second one core was busy
    _stat(stat, {0: 1100, 1: 1000})
    assert probe.free() == pytest.approx(2.0 - 1.0 / 60.0)
    assert probe.free_recent(_threads.IDLE_SPAN) is None  # over 60 s: not recent
    clock.wall = 60.5  # the next reading: over half a second, one core busy
    _stat(stat, {0: 1150, 1: 1000})
    assert probe.free_recent(_threads.IDLE_SPAN) == pytest.approx(1.0)


def test_load_probe_reads_the_free_cores(tmp_path, monkeypatch):
    """Free cores = the allowed cores less (their busy time - this process's own) per
    second of at least LOAD_PERIOD: read at most once per period; cores outside the
    affinity, nice, idle and iowait are not counted; after a fork the parent's
    readings go; unreadable: no answer, for good."""
    clock, stat = _fake_machine(tmp_path, monkeypatch)
    probe = _threads._LoadProbe(str(stat))
    _stat(stat, {0: 1000, 1: 1000, 2: 0})
    assert probe.free() is None  # the first reading: nothing to compare yet
    assert probe.cpus == {0, 1}
    # 0.5 s: the allowed cores busy 0.8 s, 0.3 of it ours -> others 1.0 core, 1 free;
    # cpu2 (not ours) and the uncounted fields move a lot
    clock.wall, clock.own = 0.5, 0.3
    _stat(stat, {0: 1050, 1: 1030, 2: 9000}, quiet=5000)
    assert probe.free() == pytest.approx(1.0)
    clock.wall = 0.5 + 0.5 * _threads.LOAD_PERIOD  # within the period: the last answer
    _stat(stat, {0: 5000, 1: 5000})
    assert probe.free() == pytest.approx(1.0)
    # the next 2 s: 1.2 s busy, all ours -> 2 free
    clock.wall, clock.own = 2.5, 1.5
    _stat(stat, {0: 1110, 1: 1090}, quiet=9000)
    assert probe.free() == pytest.approx(2.0)
    probe.forget()  # as in a forked child: no answer until two readings of its own
    clock.wall, clock.own = 3.0, 0.0
    assert probe.free() is None and probe.last[0] == 3.0
    gone = _threads._LoadProbe(str(tmp_path / "missing"))
    assert gone.free() is None and gone.usable is False
    clock.wall = 10.0
    _stat(tmp_path / "missing", {0: 1})
    assert gone.free() is None  # (not read again)


def test_an_engine_call_primes_the_load_probe(tmp_path, monkeypatch):
    """ "auto" takes the probe's first reading as a call starts (once), so a large block
    later in the process is capped by the load measured since, not left uncapped
    until a second reading; int and None settings leave the probe alone."""
    clock, stat = _fake_machine(tmp_path, monkeypatch)
    _stat(stat, {0: 1000, 1: 1000})
    probe = _threads._LoadProbe(str(stat))
    monkeypatch.setattr(_threads, "_probe", probe)
    for setting in (1, None):
        with kernelcw.config_context(blas_threads=setting), BlasThreads(0.0):
            pass
        assert probe.last is None
    with BlasThreads(0.0):
        pass
    assert probe.last == (0.0, 20.0, 0.0)
    clock.wall = 0.1
    with BlasThreads(0.0):  # primed already: not read again
        pass
    assert probe.last[0] == 0.0
    # a second later another process has kept one core busy: a large block gets one
    clock.wall, clock.own = 1.0, 0.9
    _stat(stat, {0: 1100, 1: 1090})
    with BlasThreads(0.0) as t:
        t.block(AUTO_MIN_FLOPS)
        assert probe.free_now == pytest.approx(1.0)
        assert t._now == (1, True)
    probe.forget()  # as in a forked child: its first call takes a reading of its own
    clock.wall = 1.05
    with BlasThreads(0.0):
        pass
    assert probe.pid == _threads.os.getpid() and probe.last[0] == 1.05
    assert probe.free_now is None


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_drops_the_parents_load_readings(monkeypatch):
    """os.register_at_fork: a child's probe holds no reading of its parent's (its own
    CPU time starts at 0), so its first call reads afresh."""
    probe = _threads._LoadProbe()
    monkeypatch.setattr(_threads, "_probe", probe)
    probe.prime()
    assert probe.last is not None and probe.pid == os.getpid()
    pid = os.fork()
    if pid == 0:  # the child: report through the exit code, whatever happens
        ok = probe.last is None and probe.free_now is None and probe.pid == os.getpid()
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert probe.last is not None  # the parent's own readings stay


def test_primal_full_fit_runs_under_the_setting(two_threads, monkeypatch):
    seen = []
    real = primal_full.full_fit

    def spy(*args, **kw):
        seen.append(_blas_threads())
        return real(*args, **kw)

    monkeypatch.setattr(primal_full, "full_fit", spy)
    X, y = _data(d=20)
    for setting, inside in [("auto", [1, 1]), (2, [2, 2]), (None, [2, 2])]:
        with kernelcw.config_context(blas_threads=setting):
            AROWClassifier().fit(X, y)
        assert seen[-1] == inside, setting
        assert _blas_threads() == [2, 2]


def test_config_context_restores_on_exit_and_on_error():
    assert kernelcw.get_config()["blas_threads"] == "auto"
    with kernelcw.config_context(blas_threads=1):
        assert kernelcw.get_config() == {"blas_threads": 1}
        with kernelcw.config_context(blas_threads=None):
            assert kernelcw.get_config() == {"blas_threads": None}
        assert kernelcw.get_config() == {"blas_threads": 1}
    with pytest.raises(RuntimeError, match="boom"):
        with kernelcw.config_context(blas_threads=3):
            raise RuntimeError("boom")
    assert kernelcw.get_config() == {"blas_threads": "auto"}


def test_limit_restored_when_fit_raises(two_threads):
    def bad(A, B):
        raise RuntimeError("kernel failed")

    X, y = _data()
    with kernelcw.config_context(blas_threads=1):
        with pytest.raises(RuntimeError, match="kernel failed"):
            SCWClassifier(kernel=bad).fit(X, y)
    assert _blas_threads() == [2, 2]


def test_set_config_and_validation():
    try:
        kernelcw.set_config(blas_threads=1)
        assert kernelcw.get_config() == {"blas_threads": 1}
        with kernelcw.config_context(blas_threads="auto"):
            assert kernelcw.get_config() == {"blas_threads": "auto"}
        kernelcw.set_config()  # nothing given: nothing changes
        assert kernelcw.get_config() == {"blas_threads": 1}
    finally:
        kernelcw.set_config(blas_threads="auto")
    for bad in (0, -1, 1.5, True, "two"):
        with pytest.raises(ValueError, match="blas_threads"):
            kernelcw.set_config(blas_threads=bad)
        with pytest.raises(ValueError, match="blas_threads"):
            with kernelcw.config_context(blas_threads=bad):
                pass
    assert kernelcw.get_config() == {"blas_threads": "auto"}


@pytest.mark.parametrize(
    "make",
    [
        lambda: SCWClassifier(kernel="rbf", gamma=0.2, block_size=64),
        lambda: AROWClassifier(block_size=32),
    ],
    ids=["dual-rbf", "primal-full"],
)
def test_results_identical_with_one_or_two_threads(two_threads, make):
    rng = np.random.default_rng(3)
    X = rng.normal(size=(1200, 120))
    y = (X[:, :3].sum(1) + rng.normal(size=1200) > 0).astype(int)
    fits = {}
    for n in (1, 2):
        with kernelcw.config_context(blas_threads=n):
            fits[n] = make().fit(X, y)
    a, b = fits[1], fits[2]
    dec_a, dec_b = a.decision_function(X), b.decision_function(X)
    assert np.allclose(dec_a, dec_b, rtol=1e-12, atol=1e-12 * np.abs(dec_a).max())
    assert a.n_mistakes_ == b.n_mistakes_ and a.n_updates_ == b.n_updates_


def test_import_changes_nothing():
    code = (
        "import sys, kernelcw, kernelcw._threads as t\n"
        "kernelcw.config_context; kernelcw.get_config()\n"
        "assert t._libs is None and 'threadpoolctl' not in sys.modules\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "ok"


def test_full_learner_scratch_never_reaches_its_products(monkeypatch):
    """Uninitialised scratch (``np.empty``) holding garbage (here subnormals and NaN)
    must not change, nor slow, any product: the results stay bit for bit."""
    X, y = _data(n=300, d=30)
    ref = SCWClassifier(C=1.0, block_size=16).fit(X, y)

    class Dirty:
        def __getattr__(self, name):
            return getattr(np, name)

        @staticmethod
        def empty(shape, dtype=float, **kw):
            out = np.empty(shape, dtype=dtype, **kw)
            if np.dtype(dtype).kind == "f":
                out.fill(np.nan)
                out.flat[::2] = 1e-310
            return out

    monkeypatch.setattr(primal_full, "np", Dirty())
    got = SCWClassifier(C=1.0, block_size=16).fit(X, y)
    assert np.array_equal(got.mean_, ref.mean_)
    assert np.array_equal(got.covariance_, ref.covariance_)


def test_limit_holds_whichever_thread_fits(two_threads, monkeypatch):
    """threadpoolctl >= 3.6 lets only the first Python thread that set a limit (while it
    lives) change OpenBLAS's count: the cause of primal fits running 4-30x slower after
    other fits in a worker thread (their one-thread limit was silently ignored). The
    engines' limit must hold in every thread."""
    from concurrent.futures import ThreadPoolExecutor

    seen = []
    real = primal_full.full_fit

    def spy(*args, **kw):
        seen.append(_blas_threads())
        return real(*args, **kw)

    monkeypatch.setattr(primal_full, "full_fit", spy)
    X, y = _data(d=20)
    with ThreadPoolExecutor(1) as pool:  # a worker takes control of OpenBLAS, stays alive
        pool.submit(lambda: threadpool_limits(2, user_api="blas").restore_original_limits())
        pool.submit(lambda: AROWClassifier().fit(X, y)).result()  # a worker thread's fit
        AROWClassifier().fit(X, y)  # and the main thread's, while the worker lives
        k = _SpyKernel()
        pool.submit(lambda: SCWClassifier(kernel=k).fit(X, y)).result()
    assert seen == [[1, 1], [1, 1]]
    assert k.seen and all(s == [1, 1] for s in k.seen)
    assert _blas_threads() == [2, 2]


@pytest.mark.parametrize(("setting", "inside"), [("auto", [1, 1]), (2, [2, 2])])
def test_dual_attributes_run_under_the_setting_and_restore(
    two_threads, setting, inside, monkeypatch
):
    """covariance_coef_ (a factor form inverts its factor) and dual_coef_ run under the
    BLAS thread setting, like learning: "auto" gives these small models one thread."""
    from kernelcw.engines.dual import panels

    X, y = _data()
    est = SCWClassifier(kernel="rbf").fit(X, y)
    seen = []
    for name in ("Pi", "nu"):
        real = getattr(panels.PanelForm, name)

        def spy(self, a, real=real):
            seen.append(_blas_threads())
            return real(self, a)

        monkeypatch.setattr(panels.PanelForm, name, spy)
    with kernelcw.config_context(blas_threads=setting):
        Pi = est.covariance_coef_
        nu = est.dual_coef_
    assert Pi.shape == (nu.shape[-1], nu.shape[-1])
    assert seen == [inside, inside]
    assert _blas_threads() == [2, 2]


def test_a_form_switched_mid_block_learns_under_its_own_thread_choice(two_threads, monkeypatch):
    """The block's threads are chosen for the forms at its start; when a budget binds
    part-way and the model continues in another form, the rest of the block runs on
    the threads chosen for that form's own largest call, not on those chosen for the
    append-only form's large solve: here the lazy form ("random", q = 1), which counts
    no product of its own for the block (its walks size theirs) and walks on one."""
    import kernelcw._threads as threads_module
    from kernelcw.engines.dual import engine as engine_module
    from kernelcw.engines.dual import lazy

    # the append-only solve at the binding block's start (n >= 18: n^2 64 >= 20736) above
    # the threshold; the lazy form's n^2 <= 961, its walks' products (n^2 x a part of a
    # few inputs) and the kernel block (stored rows x b x d <= 62 x 64) below it
    monkeypatch.setattr(threads_module, "AUTO_MIN_FLOPS", 20000.0)
    seen, switched = [], []
    real_walk, real_switch = lazy.LazyForm._walk_part, engine_module.on_budget

    def spy_walk(self, *args):
        seen.append(_blas_threads())
        return real_walk(self, *args)

    def spy_switch(*args):
        switched.append(_blas_threads())  # the append-only form's walk just stopped
        return real_switch(*args)

    monkeypatch.setattr(lazy.LazyForm, "_walk_part", spy_walk)
    monkeypatch.setattr(engine_module, "on_budget", spy_switch)
    X, y = _data(300, d=1)
    est = AROWClassifier(kernel="rbf", budget=30, budget_policy="random", block_size=64)
    with kernelcw.config_context(blas_threads="auto"):
        est.partial_fit(X[:20], y[:20])  # a block of 64 binds from n >= 18 on
        assert est.n_support_ >= 18
        est.partial_fit(X[20:], y[20:])
    assert est._engine.factor_forms() == ["lazy"]
    assert switched == [[2, 2]]
    assert seen and all(s == [1, 1] for s in seen), seen


def test_after_a_switch_the_next_models_keep_the_blocks_threads(two_threads, monkeypatch):
    """One-vs-rest: when one model's budget binds part-way through a block, the rest of
    its block is sized by its new form and the inputs left (a few: one thread), and the
    models after it walk the whole block on the threads chosen for the block again."""
    import kernelcw._threads as threads_module
    from kernelcw.engines.dual import engine as engine_module
    from kernelcw.engines.dual import explicit, panels

    # the append-only solves (n >= 18: n^2 64 >= 20736) above the threshold; the blocked
    # walk on the inputs left (n^2 times at most 16) below it
    monkeypatch.setattr(threads_module, "AUTO_MIN_FLOPS", 20000.0)
    log = []
    real_walk, real_panels = explicit.ExplicitForm.walk, panels.PanelForm.walk
    real_switch = engine_module.on_budget

    def spy_walk(self, ctx, blk, t0, ks, f_blk):
        log.append(("walk", t0, _blas_threads()))
        return real_walk(self, ctx, blk, t0, ks, f_blk)

    def spy_panels(self, ctx, blk, t0, ks, f_blk):
        if self.n >= 18:
            log.append(("panels", t0, _blas_threads()))
        return real_panels(self, ctx, blk, t0, ks, f_blk)

    def spy_switch(form, ctx, ks, left):
        log.append(("switch", left, None))
        return real_switch(form, ctx, ks, left)

    monkeypatch.setattr(explicit.ExplicitForm, "walk", spy_walk)
    monkeypatch.setattr(panels.PanelForm, "walk", spy_panels)
    monkeypatch.setattr(engine_module, "on_budget", spy_switch)
    rng = np.random.default_rng(3)
    X = rng.normal(size=(400, 1))
    y = rng.integers(0, 3, size=400)
    est = AROWClassifier(kernel="rbf", budget=30, budget_policy="smallest", block_size=64)
    with kernelcw.config_context(blas_threads="auto"):
        est.partial_fit(X[:20], y[:20], classes=[0, 1, 2])
        est.partial_fit(X[20:], y[20:])
    assert est._engine.factor_forms() == ["explicit"] * 3
    switches = [i for i, e in enumerate(log) if e[0] == "switch"]
    assert switches
    for i in switches:
        left = log[i][1]
        resumed = log[i + 1]
        assert resumed[0] == "walk" and resumed[1] == 64 - left
        if 31 * 31 * min(left, 16) < 20000:
            assert resumed[2] == [1, 1], log
    # every append-only walk of n >= 18 (the ones after a switch included) on the block's
    # threads
    assert [e[2] for e in log if e[0] == "panels"] == [[2, 2]] * sum(e[0] == "panels" for e in log)
    assert any(e[0] == "panels" and i > switches[0] for i, e in enumerate(log))


@pytest.mark.parametrize(
    ("policy", "batch", "threshold"),
    [("smallest", 1, 10000.0), ("smallest", 5, 3000.0)],
    ids=["blocked nu/Pi walk", "batch-pruned form"],
)
@pytest.mark.parametrize("free", [2.0, 1.0])
def test_budget_forms_take_threads_by_their_largest_call(
    two_threads, monkeypatch, policy, batch, threshold, free
):
    """The budget forms that walk input by input between their BLAS-3 calls are given
    threads by those calls, capped by the free cores: the blocked nu/Pi walk by a
    sub-block's Pi K (n^2 16 at this budget, above the threshold, where one input's
    n^2 is below it), the batch-pruned form by its block's solve (n^2 b); with one free
    core, one thread."""
    import kernelcw._threads as threads_module
    from kernelcw.engines.dual import explicit, pruned

    monkeypatch.setattr(threads_module, "AUTO_MIN_FLOPS", threshold)
    monkeypatch.setattr(threads_module, "_probe", _Probe(free))
    cls, method = (explicit.ExplicitForm, "walk") if batch == 1 else (pruned.PrunedForm, "_prune")
    seen = []
    real = getattr(cls, method)

    def spy(self, *args):
        if self.n >= 26:  # (31^2 16 = 15376 >= 10000 > 961; 26^2 16 > 10000)
            seen.append(_blas_threads())
        return real(self, *args)

    monkeypatch.setattr(cls, method, spy)
    X, y = _data(400, d=1)
    est = AROWClassifier(kernel="rbf", budget=30, budget_policy=policy, budget_batch=batch,
                         block_size=16)  # fmt: skip
    with kernelcw.config_context(blas_threads="auto"):
        est.fit(X, y)
    assert est._engine.factor_forms() == (["explicit"] if batch == 1 else ["pruned"])
    want = [2, 2] if free >= 2 else [1, 1]
    # (the rest of the block where the budget binds is counted by its inputs left: a
    # few, on one thread)
    assert len(seen) > 5 and all(s == want for s in seen[1:]), seen


def test_lazy_form_products_on_threads_change_nothing(two_threads, monkeypatch):
    """The "random" lazy form's walk computes its products on the threads "auto"
    allows and walks on one when the products are large (AUTO_MIN_FLOPS), in one
    fused compiled call otherwise: on the same threads the two give the same model bit
    for bit; with BLAS's threads the products see them (the model to rounding)."""
    from kernelcw.engines.dual import lazy

    rng = np.random.default_rng(1)
    X = rng.normal(size=(900, 8))
    y = rng.integers(0, 2, size=900)

    def fit():
        est = AROWClassifier(kernel="rbf", budget=300, budget_policy="random", random_state=0)
        return est.fit(X, y)

    monkeypatch.setattr(lazy, "AUTO_MIN_FLOPS", float("inf"))  # fused only
    fused = fit()
    seen = []
    real = lazy.lazy_products

    def spy(*args):
        seen.append(_blas_threads())
        return real(*args)

    monkeypatch.setattr(lazy, "AUTO_MIN_FLOPS", 0.0)  # split always
    monkeypatch.setattr(lazy, "lazy_products", spy)
    split = fit()  # (its products small: one thread, as the fused walk's)
    assert fused._engine.factor_forms() == split._engine.factor_forms() == ["lazy"]
    assert seen and all(s == [1, 1] for s in seen)
    for name in ("dual_coef_", "covariance_coef_"):
        np.testing.assert_array_equal(getattr(split, name), getattr(fused, name))
    np.testing.assert_array_equal(split.decision_function(X), fused.decision_function(X))
    seen.clear()
    monkeypatch.setattr(_threads, "AUTO_MIN_FLOPS", 0.0)  # every block on BLAS's threads
    threaded = fit()
    assert seen and all(s == [2, 2] for s in seen)
    assert _blas_threads() == [2, 2]
    np.testing.assert_allclose(threaded.dual_coef_, fused.dual_coef_, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("free", [2.0, 1.0])
def test_lazy_form_purges_on_the_threads_of_its_n_squared_refresh(two_threads, monkeypatch, free):
    """After a split walk (products, then the walk's loops) the "random" lazy form's
    purge (a BLAS-2 refresh of r, n^2) runs on the threads "auto" gives n^2 flops: two on
    an idle machine from AUTO_IDLE_MIN_FLOPS, else one. It had run on one thread always,
    where BLAS's threads unlimited fitted a B = 3,000 model 10 % faster idle."""
    from kernelcw.engines.dual import lazy

    monkeypatch.setattr(lazy, "AUTO_MIN_FLOPS", 0.0)  # split always
    monkeypatch.setattr(_threads, "AUTO_IDLE_MIN_FLOPS", 1000.0)  # (n^2 >= 1000 here)
    monkeypatch.setattr(_threads, "_probe", _Probe(free))
    seen = []
    real = lazy.LazyForm._purge

    def spy(self, *args):
        seen.append(_blas_threads())
        return real(self, *args)

    monkeypatch.setattr(lazy.LazyForm, "_purge", spy)
    rng = np.random.default_rng(1)
    X, y = rng.normal(size=(400, 8)), rng.integers(0, 2, size=400)
    est = AROWClassifier(kernel="rbf", budget=60, budget_policy="random", random_state=0)
    with kernelcw.config_context(blas_threads="auto"):
        est.fit(X, y)
    assert est._engine.factor_forms() == ["lazy"]
    want = [2, 2] if free >= 2 else [1, 1]
    assert seen and all(s == want for s in seen), seen


def test_a_limit_that_changes_nothing_reads_each_library_once(monkeypatch):
    """With the libraries already at the count a call wants (one thread, for a row's
    small products), a limit reads each library once, on entry, and sets nothing;
    one that sets a count puts every library back on the way out."""
    calls = []
    pools = [
        (lambda i=i: calls.append(("get", i)) or counts[i], lambda n, i=i: put(i, n))
        for i in range(2)
    ]

    def put(i, n):
        calls.append(("put", i, n))
        counts[i] = n

    monkeypatch.setattr(_threads, "_handles", pools)
    counts = [1, 1]
    with BlasThreads(1.0):
        pass
    assert calls == [("get", 0), ("get", 1)] and counts == [1, 1]
    calls.clear()
    counts[:] = [2, 2]
    with BlasThreads(1.0):
        assert counts == [1, 1]
    assert counts == [2, 2]
    assert [c for c in calls if c[0] == "put"] == [
        ("put", 0, 1),
        ("put", 1, 1),
        ("put", 0, 2),
        ("put", 1, 2),
    ]
