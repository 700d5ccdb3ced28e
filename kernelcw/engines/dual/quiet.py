"""A row that cannot update, learnt at the cost of its prediction (one-row calls).

Most rounds of a trained model do not update (SCW-I on magic at B = 200: six in ten),
and such a round changes nothing but the stream position. A one-row ``partial_fit``
still paid the whole learning call for it: the checkpoint, the BLAS thread limit, the
walk's set-up and its thirty-odd array arguments (about 40 us, against 10 us per row in
one ``fit``; ``doc/dual-form.md`` section 9). :func:`quiet_row` decides first, from the
margin and the variance, whether the walk would update; where it surely would not, the
call ends there with the walk's own decision value.

Exactness, nu/Pi form (:func:`quiet_explicit`). The decision value ``f`` is the
walk's, bit for bit: the same kernel row (the store's rows in the model's slot order) and
the same sum in the same order (no FMA, no reassociation). The variance
``v = a kappa + k' Pi k`` the walk takes from BLAS's dsymv, whose order of summation is
its own; here a compiled loop computes it in another order together with
``S = |k|' |Pi| |k|``. Each is within ``gamma_(2n+3) S`` of the exact value
(``gamma_m = m u / (1 - m u)``, u the unit roundoff: a product and a sum, in any order,
with or without FMA; products below the normal range add an absolute error of at most
the smallest subnormal each, times ``|k_i|``), so the two differ by at most half of
``tol`` below. The row is taken here only if the rule's update condition
(:func:`kernelcw.rules.update_condition`, the exact comparison each rule's step makes
first) is false at ``v + tol``, and ``v - tol`` is above the variance floor: the
condition is monotone in v (``phi sqrt(v)`` and ``phi v`` with ``phi > 0``), so the walk,
with its v in that interval, would not update, floor or fail either. Rows near the
decision (a few units of roundoff in ``S``) and any non-finite value go to the walk,
which decides them as before. Tried up to ``quiet_max_n`` (768) support vectors: above,
that pass is as long as the walk's own dsymv, the most of a call.

Exactness, Cholesky forms (:func:`quiet_factor`: the append-only panels, the "oldest"
queue, the "random" lazy form). Their walk's first round reads ``|w|^2`` and ``r . w``
(``w = L^-1 k``) from products the form makes before it; here the same calls
(:meth:`.panels.PanelForm._one_row`, :func:`.queue_block.forward_products`,
:func:`.lazy_block.lazy_forward`) give the same values, and f, v and the rule's checked
step are the walk's own expressions: the walk's decision exactly. The panels' products
are BLAS calls, made under the same BLAS thread limit as the walk's (one thread for a
one-row call below ``AUTO_MIN_FLOPS``, about 22,000 support vectors; above it "auto"
follows the machine's load, and a walk is then not reproducible from run to run
either); the queue and lazy forms try only up to :data:`.one_input.ONE_INPUT_MAX_N`
support vectors, where a walk of one input takes compiled loops, not BLAS.
A row the form would learn keeps its products for the walk of the same call
(:func:`keep_products`, :func:`kept_products`: the same arrays, so the same bits).
In the queue and lazy forms a row sent on still costs the try (its call and checks):
about 10 us, where a row taken saves about 22 (SCW-I, B = 200 on magic, by hand; 17-19
us and 20 before session 21 made the walk take the try's products and the products
loops, with no BLAS thread limit). They try while three rows in ten are quiet,
``quiet_min_rate``.

So a model learns the same bits with or without this path, and ``tests/test_quiet_rows.py``
compares them on random streams for every rule and form. A multi-class model's one-vs-rest
models must all take the row (the first that would change sends it to the learning call,
with the kernel rows made so far). Left to the learning call: kernels not known to be
positive semi-definite (a callable or precomputed kernel's row is checked there,
:func:`.status.check_mercer`), the budgeted store's compaction (``DualEngine._place``) and
the queue's rebuild.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from ..._threads import BlasThreads
from ...kernels import NonFiniteKernel
from ...rules import VAR_FLOOR, rule_from_plain, update_condition
from .status import OK
from .steps import checked_step

__all__ = [
    "QUIET_SPAN",
    "keep_products",
    "kept_products",
    "quiet_explicit",
    "quiet_factor",
    "quiet_row",
    "stashed_block",
    "stashed_column",
    "stashed_row",
]

_U = 2.0**-53  # the unit roundoff of float64
_ETA = 2.0**-1074  # the smallest subnormal
_NO_COLS = np.zeros(1, dtype=np.int64)

#: Below its form's share of rows taken (:attr:`.form.Form.quiet_min_rate`, a running
#: mean over about QUIET_SPAN tries), a model tries only every
#: :attr:`.form.Form.quiet_probe`-th row. The share is where trying breaks even: in the
#: nu/Pi form a row taken saves about 30 us of a 40 us call and one sent on to the walk
#: costs about 4 us (B = 200 on magic, by hand), so one row in eight ("smallest" updates
#: at nearly every row once its budget binds); in the queue and lazy forms about three
#: in ten (a try that fails costs them about 10 us, one taken saves about 22). A long
#: span keeps a stream near the share from switching back and forth (the queue and the
#: lazy form on magic: 43-44 % quiet, the running share below 0.3 about a tenth of the
#: time).
QUIET_SPAN = 32.0


@njit(cache=True, fastmath={"reassoc", "contract"})
def _pi_quad(Pi, n, k):
    """(k' Pi k, k' |Pi| k in absolute values, sum |k|) from Pi's lower triangle, in any
    order of summation (reassociated and vectorised: a bound covers it,
    :func:`quiet_explicit`)."""
    q = 0.0
    s = 0.0
    ka = 0.0
    for i in range(n):
        ka += abs(k[i])
        r = 0.0
        ra = 0.0
        for j in range(i):
            p = Pi[i, j] * k[j]
            r += p
            ra += abs(p)
        d = Pi[i, i] * k[i]
        q += k[i] * (2.0 * r + d)
        s += abs(k[i]) * (2.0 * ra + abs(d))
    return q, s, ka


@njit(cache=True)
def quiet_explicit(nu, Pi, n, K0, kap, y, rule, second):
    """(whether the nu/Pi walk's round for this row surely leaves the model unchanged,
    the walk's decision value f). ``K0`` (n, 1): the row's kernel values by slot;
    ``rule``: the rule's fields as a plain tuple; ``second``: a second-order rule (Pi
    kept)."""
    r = rule_from_plain(rule)
    f = 0.0
    for i in range(n):  # the walk's sum, in its order (explicit_walk)
        f += nu[i] * K0[i, 0]
    if not (math.isfinite(f) and kap >= 0.0 and r.phi >= 0.0):
        return False, f
    m = y * f
    if not second:  # Sigma = a I: the step reads k(x, x) alone
        return not update_condition(r.rule, m, kap, r.phi), f
    vmin = VAR_FLOOR * r.a * kap
    if update_condition(r.rule, m, vmin, r.phi):  # it updates at any v the walk can take
        return False, f
    k = np.ascontiguousarray(K0[:, 0])  # (unit stride: vectorised)
    q, s, ka = _pi_quad(Pi, n, k)
    v = r.a * kap + q
    tol = 8.0 * (n + 2) * _U * s + 4.0 * _U * (abs(r.a * kap) + abs(q)) + 1e-300
    tol += 4.0 * (n + 2) * _ETA * (ka + 1.0)  # gradual underflow: absolute, times |k|
    if not (math.isfinite(v) and math.isfinite(tol)):
        return False, f
    if v - tol < vmin:  # the walk might floor it (or find it not PSD)
        return False, f
    return not update_condition(r.rule, m, v + tol, r.phi), f


@njit(cache=True)
def quiet_factor(g, rw, kap, y, rule, psd_tol):
    """(whether a Cholesky form's walk leaves the model unchanged at its first round:
    no update, no floor, no error; its decision value f) from ``g = |w|^2`` and
    ``rw = r . w`` (``w = L^-1 k``) made by the walk's own products: f and v by the
    expressions of :func:`.panels.cholesky_walk` and :func:`.leaver_walk.queue_walk` (no
    row appended yet, no leaver), then :func:`.steps.checked_step`, as they call it."""
    r = rule_from_plain(rule)
    a = r.a
    f = rw
    f *= a
    v = a * kap - a * a * (g + 0.0)
    st = checked_step(r, y * f, f, v, kap, psd_tol)
    return st.status == OK and not st.floored and not st.alpha > 0.0, f


def quiet_row(engine, X, Y):
    """:meth:`kernelcw.engines.dual.DualEngine.quiet_row`: (margins (1, K), mistakes (an
    int for one model, else one per model), the stream position) of a row X (1, d) that
    every model would learn without a change, or None (the learning call decides).
    Nothing of the models changes here; where the row goes to the walks, its kernel rows
    stay for that call (``engine._quiet_k0``; the panels keep their products too), and
    the engine keeps the running share of rows taken (``_quiet_rate``)."""
    d = engine.__dict__
    d.pop("_quiet_k0", None)
    forms = engine.forms
    form = forms[0]
    if form.quiet is None:
        return None
    one = len(forms) == 1
    rate = d.get("_quiet_rate", 1.0)  # (not the model: a running mean)
    if one:
        least, probe = form.quiet_min_rate, form.quiet_probe
    else:  # (the strictest of the models' forms)
        least = max(m.quiet_min_rate for m in forms)
        probe = max(m.quiet_probe for m in forms)
    if rate < least:  # (first: the cheap way out for a model that updates)
        tries = engine._quiet_tries = d.get("_quiet_tries", 0) + 1
        if tries % probe:
            return None
    spec = engine.spec
    if engine.broken is not None or not engine._ctx.known_psd or spec.kernel.precomputed:
        return None
    if X.shape[1] != spec.n_features:  # (the learning call says what is wrong)
        return None
    most = 0
    blas = False
    for model in forms:  # (one-vs-rest: every model must take the row)
        n, limit = model.n, model.quiet_max_n
        if model.quiet is None or n == 0 or (limit is not None and n > limit):
            return None
        most = n if n > most else most
        blas = blas or model.quiet_blas
    store = engine.store
    if engine._ctx.budget is not None and most <= store.n // 2:  # (as DualEngine._place)
        # the learning call would compact the store: one model's slots are its rows;
        # several models' rows are the union of their slots
        if one or store.compacts(np.unique(np.concatenate([m.idx for m in forms])).size):
            return None
    cols = _NO_COLS  # (the row's position: read by precomputed kernels alone, not here)
    # the RBF kernel's rows from the differences (Kernel.rows_block, .block) and the
    # nu/Pi, queue and lazy forms' tries (loops) call no BLAS; else BLAS's threads as
    # the learning call sets them
    try:
        if not blas and store.row_blas_free(X):
            taken, f, K0, Ks, Kbb, kap = _quiet_models(engine, X, Y, cols, one)
        else:
            with BlasThreads(engine._call_flops(1, X.shape[1], learning=True)):
                taken, f, K0, Ks, Kbb, kap = _quiet_models(engine, X, Y, cols, one)
    except NonFiniteKernel:  # (the learning call names the row)
        return None
    engine._quiet_rate = rate + ((1.0 if taken else 0.0) - rate) / QUIET_SPAN
    if not taken:  # (the learning call's kernel values)
        engine._quiet_k0 = (X, [m.idx for m in forms], K0, Ks, Kbb, kap)
        return None
    out = np.empty((1, len(forms)))
    if one:  # (Python's floats: a row of one model is the common call)
        out[0, 0] = f
        return out, int((f >= 0.0) != (Y.item(0) > 0.0)), store.n_seen
    out[0] = f
    return out, ((f >= 0.0) != (Y[0] > 0.0)).astype(np.int64), store.n_seen


def _quiet_models(engine, X, Y, cols, one: bool):
    """(whether every model's walk leaves it unchanged at row X, the decision value of
    one model or those of all, each model's kernel row or None, for several models
    the column against the whole store they come from, and the row's own kernel block
    and k(x, x)) for :func:`quiet_row`:
    the models in order, until one would change. The kernel rows are the learning
    call's (``DualEngine._learn_block``: one model's by slot; several models' from one
    column against the whole store, taken by slot)."""
    store = engine.store
    Kbb, kap = store.kernel_block(X, cols)
    forms = engine.forms
    ctx, kx = engine._ctx, kap.item(0)
    if one:
        K0 = store.kernel_rows(X, forms[0].idx)
        taken, f = forms[0].quiet(ctx, K0, Kbb, kx, Y.item(0))
        return taken, f, [K0], None, Kbb, kap
    Ks = store.kernel_store(X)
    f = np.zeros(len(forms))
    K0 = [None] * len(forms)  # (None: a model not asked; its walk makes its own)
    for k, form in enumerate(forms):
        K0[k] = Ks[form.idx]
        taken, f[k] = form.quiet(ctx, K0[k], Kbb, kx, Y.item(0, k))
        if not taken:
            return False, f, K0, Ks, Kbb, kap
    return True, f, K0, Ks, Kbb, kap


def stashed_block(stash, XB, store, cols):
    """(K(XB, XB), kappa) for a learning call: those :func:`quiet_row` made for this very
    XB (``stash``, the engine's ``_quiet_k0``; a kernel it tries, never precomputed, does
    not read the positions ``cols``), or the store's."""
    if stash is not None and stash[0] is XB:
        return stash[4], stash[5]
    return store.kernel_block(XB, cols)


def stashed_column(stash, XB, store) -> np.ndarray:
    """K(store, XB) for a learning call: the column :func:`quiet_row` made for this
    very XB (``stash``, the engine's ``_quiet_k0``), or the store's."""
    if stash is not None and stash[0] is XB and stash[3] is not None:
        return stash[3]
    return store.kernel_store(XB)


def stashed_row(stash, XB, k: int, form):
    """Model k's kernel row that :func:`quiet_row` made for this very XB and the
    model's slots as they are, or None."""
    if stash is not None and stash[0] is XB and stash[1][k] is form.idx:
        return stash[2][k]
    return None


def keep_products(form, taken: bool, K0: np.ndarray, key: tuple, pre: tuple) -> None:
    """After a Cholesky form's ``quiet`` at one row: where the row goes on to the walk,
    the walk's products that it made (``pre``), kept with the row's kernel row ``K0``
    and ``key`` (the form's sizes and the walk's inputs) for :func:`kept_products`;
    where it was taken, nothing. Not part of the model (the forms' ``__getstate__``
    drop it)."""
    if taken:
        form.__dict__.pop("_quiet_pre", None)
    else:
        form._quiet_pre = (K0, key, pre)


def kept_products(form, K0: np.ndarray, key: tuple, default=None):
    """The products :func:`keep_products` kept for this very kernel row ``K0`` (the
    learning call's, which :func:`stashed_row` passed on, held by the stash so no other
    array can be it) and an equal ``key``, or ``default``; gone after this either way."""
    pre = form.__dict__.pop("_quiet_pre", None)
    if pre is not None and pre[0] is K0 and pre[1] == key:
        return pre[2]
    return default
