"""How accurate "project"'s inverse Gram matrix stays between its refreshes.

"project" keeps ``kinv``, the inverse of the support's jittered Gram matrix
``Kj = K + PROJECT_JITTER diag(K)``, with rank-one updates per round, and recomputes
it every ``max(KINV_REFRESH, budget)`` removals
(:func:`kernelcw.budget.kernels.kinv_refresh_due`). This benchmark learns one pass
of magic and of the Fashion-MNIST pair (T-shirt/top vs shirt) in calls of
``--chunk`` rows (how a stream is cut does not change the model) and after every
call, once the budget binds, measures ``max |Kj kinv - I|`` of the model's inverse
and of a freshly computed one (Cholesky of ``Kj``, the best float64 does at that
condition number). Reported per budget: the worst and median of both, the worst
ratio, and the test error. SCW-I, RBF, scikit-learn's defaults as in ``scaling``.
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import cho_factor, cho_solve
from threadpoolctl import threadpool_limits

from kernelcw import SCWClassifier
from kernelcw.budget import kernels as budget_kernels
from kernelcw.budget.kernels import KINV_REFRESH

from ._common import argument_parser, md_table, progress, write_result
from .bench_scaling import load


def _residuals(form) -> tuple[float, float, float]:
    """(max |Kj kinv - I| of the model's inverse, of a fresh one, cond(Kj))."""
    pol = form.policy
    n = form.n
    Kj = pol.G[:n, :n].copy()  # (the jittered kernel's: the support store's k(x, x))
    low = np.tril(pol.kinv[:n, :n])
    kinv = low + np.tril(low, -1).T
    eye = np.eye(n)
    fresh = cho_solve(cho_factor(Kj, lower=True), eye)
    fresh = 0.5 * (fresh + fresh.T)
    kept = float(np.abs(Kj @ kinv - eye).max())
    best = float(np.abs(Kj @ fresh - eye).max())
    ev = np.linalg.eigvalsh(Kj)  # Kj is symmetric positive definite
    return kept, best, float(ev[-1] / ev[0])


def period(budget: int) -> int:
    """Removals between refreshes: ``kinv_refresh_due``'s rule, or KINV_REFRESH in a
    checkout from before it (this file copied into one measures the old rule)."""
    if hasattr(budget_kernels, "kinv_refresh_due"):
        return max(KINV_REFRESH, budget)
    return KINV_REFRESH


def run(data: str, budget: int, chunk: int, seed: int) -> list[object]:
    X, y, Xt, yt = load(data, seed)
    est = SCWClassifier(kernel="rbf", budget=budget, budget_policy="project", random_state=0)
    kept, best, conds = [], [], []
    for lo in progress(range(0, len(y), chunk), desc=f"{data} B={budget}", unit="call"):
        hi = min(len(y), lo + chunk)
        if lo == 0:
            est.partial_fit(X[lo:hi], y[lo:hi], classes=np.unique(y))
        else:
            est.partial_fit(X[lo:hi], y[lo:hi])
        form = est._engine.forms[0]
        if getattr(form, "policy", None) is None or form.policy.counter == 0:
            continue  # the budget has not bound yet
        k, b, c = _residuals(form)
        kept.append(k)
        best.append(b)
        conds.append(c)
    kept_a, best_a = np.array(kept), np.array(best)
    removals = est._engine.forms[0].policy.counter
    err = 100.0 * float(np.mean(est.predict(Xt) != yt))
    return [
        data,
        budget,
        period(budget),
        removals,
        f"{kept_a.max():.1e}",
        f"{np.median(kept_a):.1e}",
        f"{best_a.max():.1e}",
        f"{np.median(best_a):.1e}",
        f"{(kept_a / best_a).max():.0f}",
        f"{max(conds):.0e}",
        f"{err:.2f}",
    ]


def main(argv=None):
    ap = argument_parser(__doc__)
    ap.add_argument("--data", default="magic,fashion")
    ap.add_argument("--budgets", default="500,1000,2000")
    ap.add_argument("--chunk", type=int, default=500, help="rows per partial_fit call")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--name", default="project_inverse", help="results/NAME.md")
    args = ap.parse_args(argv)
    rows = []
    with threadpool_limits(1):
        for data in args.data.split(","):
            for B in (int(b) for b in args.budgets.split(",")):
                rows.append(run(data, B, args.chunk, args.seed))
    header = ["data", "B", "refresh every", "removals", "kept: worst", "kept: median",
              "fresh: worst", "fresh: median", "worst kept / fresh", "max cond(Kj)",
              "test error %"]  # fmt: skip
    body = (
        f"One pass, calls of {args.chunk} rows; after every call once the budget binds: "
        "`max |Kj kinv - I|` of the inverse the model keeps ('kept') and of one computed "
        "afresh from the same Gram matrix ('fresh'; float64's floor at that condition "
        "number). The worst ratio of the two over the calls, the largest condition "
        "number of Kj seen, and the test error.\n\n" + md_table(header, rows)
    )
    print(body)
    write_result(args.name, "\"project\": its inverse Gram matrix between refreshes",
                 body)  # fmt: skip


if __name__ == "__main__":
    main()
