"""A row that cannot update, learnt at the cost of its prediction (one-row calls).

Most rounds of a trained model do not update (SCW-I on magic at B = 200: six in ten),
and such a round changes nothing but the stream position. A one-row ``partial_fit``
still paid the whole learning call for it: the checkpoint, the BLAS thread limit, the
walk's set-up and its thirty-odd array arguments (about 40 us, against 10 us per row in
one ``fit``; ``doc/dual-form.md`` section 9). :func:`quiet_row` decides first, from the
margin and the variance, whether the walk would update; where it surely would not, the
call ends there with the walk's own decision value.

Exactness. The decision value ``f`` is the walk's, bit for bit: the same kernel row (the
store's rows in the model's slot order) and the same sum in the same order (no FMA, no
reassociation). The variance ``v = a kappa + k' Pi k`` the walk takes from BLAS's dsymv,
whose order of summation is its own; here a compiled loop computes it in another order
together with ``S = |k|' |Pi| |k|``. Each is within ``gamma_(2n+3) S`` of the exact
value (``gamma_m = m u / (1 - m u)``, u the unit roundoff: a product and a sum, in any
order, with or without FMA), so the two differ by at most half of ``tol`` below. The
row is taken here only if the rule's update condition
(:func:`kernelcw.rules.update_condition`, the exact comparison each rule's step makes
first) is false at ``v + tol``, and ``v - tol`` is above the variance floor: the
condition is monotone in v (``phi sqrt(v)`` and ``phi v`` with ``phi > 0``), so the walk,
with its v in that interval, would not update, floor or fail either. Rows near the
decision (a few units of roundoff in ``S``) and any non-finite value go to the walk,
which decides them as before. So a model learns the same bits with or without this path
(``tests/test_quiet_rows.py`` compares them on random streams for every rule).

Forms: the nu/Pi form (:class:`.explicit.ExplicitForm`: the "smallest" and "project"
budgets once they bind, ``solver="explicit"``, and first-order rules); the Cholesky
forms compute f and v from their factors and keep :meth:`.form.Form.quiet`'s default
(the walk decides). Kernels known to be positive semi-definite only: a callable or
precomputed kernel's row is checked by the learning call (:func:`.status.check_mercer`).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from ..._threads import BlasThreads
from ...kernels import SMALL_BLOCK
from ...rules import VAR_FLOOR, rule_from_plain, update_condition

__all__ = ["QUIET_MIN_RATE", "QUIET_PROBE", "quiet_explicit", "quiet_row"]

_U = 2.0**-53  # the unit roundoff of float64

#: Below this share of rows taken (a running mean over about 16 tries), a model tries
#: only every :data:`QUIET_PROBE`-th row: a row taken saves about 30 us of a 40 us
#: call, one sent on to the walk costs about 4 us (B = 200 on magic, by hand), so
#: trying loses where fewer than about one row in eight is taken ("smallest" updates
#: at nearly every row once its budget binds).
QUIET_MIN_RATE = 0.15
QUIET_PROBE = 8


@njit(cache=True, fastmath={"reassoc", "contract"})
def _pi_quad(Pi, n, k):
    """(k' Pi k, k' |Pi| k in absolute values) from Pi's lower triangle, in any order
    of summation (reassociated and vectorised: a bound covers it, :func:`quiet_explicit`)."""
    q = 0.0
    s = 0.0
    for i in range(n):
        r = 0.0
        ra = 0.0
        for j in range(i):
            p = Pi[i, j] * k[j]
            r += p
            ra += abs(p)
        d = Pi[i, i] * k[i]
        q += k[i] * (2.0 * r + d)
        s += abs(k[i]) * (2.0 * ra + abs(d))
    return q, s


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
    q, s = _pi_quad(Pi, n, np.ascontiguousarray(K0[:, 0]))  # (unit stride: vectorised)
    v = r.a * kap + q
    tol = 8.0 * (n + 2) * _U * s + 4.0 * _U * (abs(r.a * kap) + abs(q)) + 1e-300
    if not (math.isfinite(v) and math.isfinite(tol)):
        return False, f
    if v - tol < vmin:  # the walk might floor it (or find it not PSD)
        return False, f
    return not update_condition(r.rule, m, v + tol, r.phi), f


def quiet_row(engine, X, Y):
    """:meth:`kernelcw.engines.dual.DualEngine.quiet_row`: (margins (1, 1), mistakes,
    the stream position) of a row X (1, d) that its one model would learn without a
    change, or None (the learning call decides). Nothing changes here; where the row
    goes to the walk, its kernel row stays for that call (``engine._quiet_k0``)."""
    engine.__dict__.pop("_quiet_k0", None)
    spec = engine.spec
    if len(engine.forms) != 1 or engine.broken is not None or not engine._ctx.known_psd:
        return None
    form = engine.forms[0]
    if spec.kernel.precomputed or form.n == 0 or type(form).quiet is None:
        return None
    rate = engine.__dict__.get("_quiet_rate", 1.0)  # (not the model: a running mean)
    if rate < QUIET_MIN_RATE:
        tries = engine._quiet_tries = engine.__dict__.get("_quiet_tries", 0) + 1
        if tries % QUIET_PROBE:
            return None
    store = engine.store
    cols = np.array([store.n_seen], dtype=np.int64)
    if store.n * X.shape[1] <= SMALL_BLOCK:  # (from the differences, no BLAS call)
        kap = store.kernel_block(X, cols)[1]
        K0 = store.kernel_rows(X, form.idx)
    else:  # BLAS's threads as the learning call would set them
        with BlasThreads(engine._call_flops(1, X.shape[1], learning=True)):
            kap = store.kernel_block(X, cols)[1]
            K0 = store.kernel_rows(X, form.idx)
    y = Y.item(0)
    taken, f = form.quiet(engine._ctx, K0, kap.item(0), y)
    engine._quiet_rate = rate + ((1.0 if taken else 0.0) - rate) / 16.0
    if not taken:
        engine._quiet_k0 = (X, form.idx, K0)  # (the learning call's kernel row)
        return None
    out = np.empty((1, 1))
    out[0, 0] = f
    return out, int((f >= 0.0) != (y > 0.0)), store.n_seen
