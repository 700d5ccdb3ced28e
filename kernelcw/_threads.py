"""BLAS threads: the ``blas_threads`` setting and the limit the engines enter per call.

numpy and scipy each bundle an OpenBLAS (two thread pools). The engines make many
small BLAS calls (one kernel block, one triangular solve, a few b x b products per
block); with OpenBLAS's default threads every call wakes the pool, and its threads
busy-wait after the call. On an idle machine that costs little, but when another
process holds a core the spinning threads and the one doing the work fight over it:
fits ran 12-40x slower than with one thread. So each engine call runs inside a
:class:`BlasThreads` limit that covers both pools (threadpoolctl, as scikit-learn
does), chosen from the work per call:

- ``"auto"`` (the default): one thread for a block whose largest BLAS call takes
  fewer than :data:`AUTO_MIN_FLOPS` flops, BLAS's own setting (the thread count found on entry,
  e.g. ``OPENBLAS_NUM_THREADS`` or the cores) for larger ones, but no more than the
  cores other processes leave free (:class:`_LoadProbe`: one, on two cores with
  another process busy); blocks from :data:`AUTO_IDLE_MIN_FLOPS` up get two threads
  where a recent reading found the cores free (an idle machine), else one;
- an int ``n``: exactly ``n`` threads in every call;
- ``None``: leave BLAS alone (a user's own ``threadpoolctl.threadpool_limits``
  applies).

Users choose with :func:`set_config` (process-wide) or :func:`config_context` (a
``with`` block, this thread only), in the style of scikit-learn's. Nothing happens
at import: the threadpoolctl controller is made on first use and reused.
"""

from __future__ import annotations

import contextlib
import numbers
import os
import threading
import time
from collections.abc import Iterator

__all__ = [
    "AUTO_IDLE_MIN_FLOPS",
    "AUTO_MIN_FLOPS",
    "BlasThreads",
    "config_context",
    "get_config",
    "set_config",
]

#: Flops of a block's largest BLAS call (``n_sv u b`` for a step of the dual engine's
#: forward solve, ``d^2 b`` for the primal products) from which "auto" lets BLAS use
#: its threads. Measured on a shared 2-core machine (``python -m benchmarks under_load
#: --parts rule``): from about 5e8 flops two threads gained 1.1-1.3x, idle and under
#: load; below, they gained at most 1.8x on calls of well under a millisecond but lost
#: up to 14x (a call waiting for a descheduled thread) where another process was busy.
AUTO_MIN_FLOPS = 5e8

#: Flops from which a smaller block gets two threads where the cores are free: idle,
#: two threads took 0.5-0.65 of one thread's time from about 2.5e5 flops up (``python
#: -m benchmarks under_load --parts rule``, session 29: a triangular solve of 32 x 32 by
#: 256 columns 1.76x, 64 x 64 1.83x, a primal product at d = 105 1.56x; 1.2-1.45x for
#: the first two and the third by hand the same day; below, OpenBLAS runs such calls on
#: one thread anyway), and fits of such blocks (digits, RBF) ran at 0.7 of "auto"'s
#: one thread with BLAS's threads unlimited. Only on a reading of the load over at
#: most :data:`IDLE_SPAN` seconds: one over a long pause says little of the load now.
#: A reading lags a process that starts by up to :data:`LOAD_PERIOD`, which bounds
#: what a wrong guess costs.
AUTO_IDLE_MIN_FLOPS = 2.5e5

#: The longest window (seconds) of a load reading that lets a small block have threads
#: (fits a second or two apart, as a benchmark's or a search's, read over 1-2 s).
IDLE_SPAN = 10.0

#: Seconds between two readings of the machine's CPU use (:class:`_LoadProbe`).
LOAD_PERIOD = 0.2

_UNSET = object()
_global = {"blas_threads": "auto"}
_local = threading.local()


def _check_blas_threads(value):
    if value is None or value == "auto":
        return value
    if isinstance(value, numbers.Integral) and not isinstance(value, bool) and value >= 1:
        return int(value)
    raise ValueError(
        f"blas_threads={value!r} must be 'auto', None or an integer >= 1 "
        "(the number of BLAS threads)"
    )


def get_config() -> dict:
    """kernelcw's settings as a dict: ``{"blas_threads": ...}`` (see :func:`set_config`)."""
    override = getattr(_local, "stack", None)
    return dict(override[-1]) if override else dict(_global)


def set_config(blas_threads=_UNSET) -> None:
    """Set kernelcw's settings for the whole process.

    ``blas_threads``: how many threads the BLAS calls of ``fit``, ``partial_fit`` and
    prediction use. ``"auto"`` (default): one thread for small blocks of work, two for
    medium ones where the machine is idle, BLAS's own setting for large ones but no
    more than the cores other processes leave free;
    an int: exactly that many; ``None``: leave BLAS as it is (your own
    ``threadpoolctl.threadpool_limits`` applies).
    """
    if blas_threads is not _UNSET:
        _global["blas_threads"] = _check_blas_threads(blas_threads)


@contextlib.contextmanager
def config_context(*, blas_threads=_UNSET) -> Iterator[None]:
    """kernelcw's settings within a ``with`` block (this thread only), restored on
    exit, also on error. Same values as :func:`set_config`::

        with kernelcw.config_context(blas_threads=1):
            clf.fit(X, y)
    """
    cfg = get_config()
    if blas_threads is not _UNSET:
        cfg["blas_threads"] = _check_blas_threads(blas_threads)
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    stack.append(cfg)
    try:
        yield
    finally:
        stack.pop()


_libs: list | None = None


def blas_libraries() -> list:
    """threadpoolctl's controllers of the BLAS libraries loaded (numpy's and scipy's
    OpenBLAS), found once, on first use."""
    global _libs
    if _libs is None:
        import scipy.linalg  # noqa: F401  (loads scipy's BLAS before the controller looks)
        from threadpoolctl import ThreadpoolController

        ctl = ThreadpoolController()
        _libs = [lib for lib in ctl.lib_controllers if lib.user_api == "blas"]
    return _libs


_lock = threading.Lock()
_active = 0  # BlasThreads limits entered and not yet left, in all Python threads
_base: list = []  # (get, set, the thread count) of each library before the first was entered
# whether a limit set a library's count since _base was read: until then the counts
# are _base's, and neither a limit nor the last one's exit need to read them again
_dirty = False


def _setter(lib):
    """The library's own setter. threadpoolctl >= 3.6 lets only one Python thread (the
    first to set a limit, while it lives) change OpenBLAS's process-wide count and
    ignores the others silently: after a fit in a worker thread, every limit set from
    the main thread was a no-op, and fits ran with all threads (4-30x slower on a busy
    machine). The limit of an engine call must hold whichever thread makes it."""
    return getattr(lib, "_real_set_num_threads", lib.set_num_threads)


_handles: list | None = None


def _pools() -> list:
    """(get, set) of each BLAS library's thread count: for OpenBLAS its own C functions,
    the symbols threadpoolctl calls (resolved once: through threadpoolctl's methods a
    one-row ``partial_fit`` spent about 2 us per call looking them up again), else
    threadpoolctl's methods."""
    global _handles
    if _handles is None:
        out = []
        for lib in blas_libraries():
            get, put = lib.get_num_threads, _setter(lib)
            symbol = getattr(lib, "_get_symbol", None)
            if getattr(lib, "internal_api", None) == "openblas" and symbol is not None:
                omp = getattr(lib, "threading_layer", None) == "openmp"
                fast_get = symbol("omp_get_max_threads" if omp else "openblas_get_num_threads")
                fast_put = symbol("omp_set_num_threads" if omp else "openblas_set_num_threads")
                if fast_get is not None and fast_put is not None:
                    get, put = fast_get, fast_put
            out.append((get, put))
        _handles = out
    return _handles


class _LoadProbe:
    """The cores other processes leave free to this one: of the cores it may run on
    (its affinity), their CPU time (``/proc/stat``, Linux: user, system, irq, softirq
    and steal; not nice, whose processes yield to this one, nor idle and iowait) less
    this process's own (:func:`time.process_time`, all its threads: BLAS's included),
    per second of the last :data:`LOAD_PERIOD` seconds or more, taken from the number
    of those cores. A CPU-bound process beside a fit made BLAS's threads lose: an
    unbudgeted RBF fit with about 4,900 support vectors took 1.36x its one-thread time
    with them, against 0.48x idle (``python -m benchmarks under_load``). Read at most
    once per period (about 20 us), only for blocks large enough for threads (and once
    as the first engine call starts); between readings the last answer stands. None
    (no limit) until two readings (:meth:`prime` takes the first as an engine call
    starts), after a fork, and where ``/proc/stat`` cannot be read. The process's own
    CPU time is all its threads': other Python threads of the process that keep the
    cores busy count as its own, not as other processes (their BLAS calls share the
    process's one BLAS thread count anyway)."""

    def __init__(self, path: str = "/proc/stat"):
        self.path = path
        self.usable = True
        self.free_now: float | None = None
        self.span = float("inf")  # the seconds free_now was measured over
        self.last: tuple[float, float, float] | None = None  # (wall, cores' busy s, own s)
        self.pid = os.getpid()  # whose readings these are (:meth:`forget`)
        self.cpus: set[int] | None = None
        self.tick = 100.0

    def free(self) -> float | None:
        if not self.usable:
            return None
        now = time.monotonic()
        last = self.last
        if last is not None and now - last[0] < LOAD_PERIOD:
            return self.free_now
        used = self._cores_busy()
        if used is None:
            self.usable, self.free_now = False, None
            return None
        own = time.process_time()
        if last is not None:
            others = (used - last[1]) - (own - last[2])
            self.span = now - last[0]
            self.free_now = len(self.cpus) - max(others, 0.0) / self.span
        self.last = (now, used, own)
        return self.free_now

    def free_recent(self, span: float) -> float | None:
        """:meth:`free` where it was measured over at most ``span`` seconds, else None."""
        free = self.free()
        return free if free is not None and self.span <= span else None

    def prime(self) -> None:
        """A first reading, if there is none yet in this process (a forked child's
        first too, :meth:`forget`): called as an engine call starts, so that a large
        block later (a model grows to one) has a window to measure the load over
        instead of going uncapped until a second reading."""
        if self.last is None and self.usable:
            self.free()

    def forget(self) -> None:
        """Drop the readings: in a forked child (``os.register_at_fork``), whose CPU
        time starts at 0 and whose parent's readings are not its own."""
        self.pid, self.last, self.free_now, self.cpus = os.getpid(), None, None, None
        self.span = float("inf")

    def _cores_busy(self) -> float | None:
        """Seconds of CPU time the cores this process may use have spent busy since
        boot (as counted above), or None where that cannot be read."""
        try:
            if self.cpus is None:
                self.cpus = set(os.sched_getaffinity(0))
                self.tick = float(os.sysconf("SC_CLK_TCK"))
            with open(self.path, "rb") as f:
                text = f.read()
        except (OSError, AttributeError, ValueError):
            return None
        ticks = 0
        for line in text.split(b"\n"):
            if not line.startswith(b"cpu") or line.startswith(b"cpu "):
                continue
            fields = line.split()
            try:
                if int(fields[0][3:]) not in self.cpus:
                    continue
                v = [int(x) for x in fields[1:9]]
            except ValueError:
                return None
            v += [0] * (8 - len(v))
            ticks += v[0] + v[2] + v[5] + v[6] + v[7]  # user, system, irq, softirq, steal
        return ticks / self.tick


_probe = _LoadProbe()
if hasattr(os, "register_at_fork"):  # (not on Windows)
    os.register_at_fork(after_in_child=lambda: _probe.forget())


class BlasThreads:
    """The BLAS thread limit of one engine call (a context manager).

    On entry it reads the configured ``blas_threads``; :meth:`block` (before each
    block of work, with the flops of its largest BLAS call) sets the count "auto"
    chooses, touching the libraries only when the choice changes; when the last limit
    entered in the process is left, every library gets back the count it had before
    the first, if a limit changed one. With an int, the count is set on entry; with
    None nothing is touched. Entering and leaving costs a few microseconds
    (``python -m benchmarks under_load --parts overhead``).
    """

    __slots__ = ("_mode", "_now", "_flops")

    def __init__(self, flops: float = 0.0):
        self._flops = flops

    def __enter__(self) -> BlasThreads:
        global _active, _base, _dirty
        override = getattr(_local, "stack", None)  # (get_config's, without its copy)
        mode = (override[-1] if override else _global)["blas_threads"]
        self._mode = mode
        self._now = None
        if mode is None:
            return self
        pools = _pools() if _handles is None else _handles
        with _lock:
            if _active == 0:
                _base = [(get, put, get()) for get, put in pools]
                _dirty = False
            _active += 1
            if mode == "auto":
                _probe.prime()
        if mode == "auto":
            self.block(self._flops)
        else:
            self._set(mode)
        return self

    def block(self, flops: float) -> None:
        """Before a block whose largest BLAS call takes ``flops``: "auto" picks one
        thread below :data:`AUTO_MIN_FLOPS`, above it BLAS's own count (before any
        limit) but no more than the cores other processes leave free
        (:class:`_LoadProbe`, rounded, at least one); from :data:`AUTO_IDLE_MIN_FLOPS`
        up to it, two threads if a recent reading leaves that many cores free (an
        idle machine), else one."""
        if self._mode == "auto":
            if flops < AUTO_MIN_FLOPS:
                n = 1
                if flops >= AUTO_IDLE_MIN_FLOPS:
                    with _lock:
                        free = _probe.free_recent(IDLE_SPAN)
                    n = 1 if free is None else min(2, max(1, int(free + 0.5)))
                self._set(n, cap=n > 1)
                return
            with _lock:
                free = _probe.free()
            if free is None:
                self._set(0)
            else:
                self._set(max(1, int(free + 0.5)), cap=True)

    def _set(self, n: int, cap: bool = False) -> None:
        """n threads in every library (``cap``: no more than its count before any
        limit); 0: each library's count before any limit. A library is read only
        once a limit has set one (``_dirty``): before, its count is taken to be the
        one read on entry (a call of one row read each library three times, about
        1 us), so a count changed meanwhile by something else (threadpoolctl in
        another thread) is left as it is until a limit sets one."""
        global _dirty
        key = (n, cap)
        if key == self._now:
            return
        for get, put, base in _base:
            want = base if n == 0 else (min(n, base) if cap and base else n)
            if want is not None and (get() if _dirty else base) != want:
                _dirty = True  # (first: a limit entered meanwhile reads the libraries)
                put(want)
        self._now = key

    def __exit__(self, *exc) -> None:
        global _active, _dirty
        if self._mode is None:
            return
        with _lock:
            _active -= 1
            if _active == 0 and _dirty:
                for get, put, base in _base:
                    if base is not None and get() != base:
                        put(base)
                _dirty = False
        self._now = None
