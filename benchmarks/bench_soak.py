"""Soak: long streams through the sparse diagonal and the budgeted dual learners.

Throughput, resident memory and drift at checkpoints.

Two parts, each on a synthetic stream drawn from a fixed seed (reproducible, no download):

- ``diag``: ``--diag-rows`` (default 1,000,000) rows of ``AROWClassifier(covariance="diag")``
  on sparse rows hashed into 2^20 features (``--nnz`` non-zeros each; the label is the sign
  of a hidden sparse linear model plus noise), learnt in chunks of ``--chunk`` rows.
- ``dual``: ``--dual-rows`` (default 100,000) rows of ``AROWClassifier(kernel="rbf",
  budget=B)`` for each budget policy (B = ``--budget``, default 200) on 10 dense features
  (the label: a noisy ring), learnt in chunks.

At each checkpoint: rows so far, throughput of the last stretch (rows/s), resident memory
now and at its peak (VmRSS, VmHWM from /proc, MiB), the progressive error (predicted before
learnt) and the drift: the final model's decision values on 2,000 held-out rows, computed by
the engine, against a float64 recomputation from its fitted attributes (diag: ``X mean_'``
by scipy; dual: ``dual_coef_ K(support_vectors_, X)`` with the squared distances from
``scipy.spatial.distance.cdist``), as ``max |f_engine - f_ref| / max |f_ref|``.

Timings depend on the machine: the lead records them on a quiet one.
"""

from __future__ import annotations

import time

import numpy as np
import scipy.sparse as sp
from scipy.spatial.distance import cdist

from ._common import argument_parser, md_table, progress, write_result

HASHED = 2**20
POLICIES = ("oldest", "random", "smallest", "project")


def _rss_mib() -> tuple[float, float]:
    """(VmRSS, VmHWM) of this process in MiB (Linux /proc; NaN elsewhere)."""
    vals = {"VmRSS:": float("nan"), "VmHWM:": float("nan")}
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(("VmRSS:", "VmHWM:")):
                    key, kb = line.split()[:2]
                    vals[key] = int(kb) / 1024
    except OSError:
        pass
    return vals["VmRSS:"], vals["VmHWM:"]


# ------------------------------------------------------------------ streams


def sparse_chunk(rng: np.random.Generator, w: np.ndarray, n: int, nnz: int):
    """n hashed sparse rows (nnz non-zeros each, indices in [0, 2^20): half from 2^12
    frequent features, as in text) and labels sign(x . w + noise) in {0, 1}."""
    indices = rng.integers(0, HASHED, size=(n, nnz))
    indices[:, : nnz // 2] = rng.integers(0, 2**12, size=(n, nnz // 2))
    data = rng.normal(size=(n, nnz))
    indptr = np.arange(0, n * nnz + 1, nnz)
    X = sp.csr_matrix((data.ravel(), indices.ravel(), indptr), shape=(n, HASHED))
    X.sum_duplicates()
    margin = X @ w + 0.3 * rng.normal(size=n)
    return X, (margin > 0).astype(np.int64)


def dense_chunk(rng: np.random.Generator, n: int, d: int = 10):
    """n rows of d normal features; label 1 inside a ring (|x|^2 < d), 10% flipped."""
    X = rng.normal(size=(n, d))
    y = (np.einsum("ij,ij->i", X, X) < d).astype(np.int64)
    flip = rng.random(n) < 0.1
    y[flip] = 1 - y[flip]
    return X, y


# ------------------------------------------------------------------ drift


def _drift(f: np.ndarray, ref: np.ndarray) -> float:
    return float(np.abs(f - ref).max() / max(np.abs(ref).max(), np.finfo(float).tiny))


def diag_drift(est, X) -> float:
    ref = np.asarray(X @ est.mean_.T, dtype=np.float64).ravel() + est.intercept_[0]
    return _drift(np.ravel(est.decision_function(X)), ref)


def dual_drift(est, X) -> float:
    SV = np.asarray(est.support_vectors_, dtype=np.float64)
    kernel = est.engine_.spec.kernel  # the RBF, plus c^2 with an intercept
    K = np.exp(-kernel.gamma * cdist(SV, X, "sqeuclidean")) + kernel.offset
    ref = np.ravel(est.dual_coef_) @ K
    return _drift(np.ravel(est.decision_function(X)), ref)


# ------------------------------------------------------------------ the two parts


def _checkpoint_row(done, stretch_rows, stretch_s, errors, seen, extra, drift):
    rss, hwm = _rss_mib()
    return [
        f"{done:,}",
        f"{stretch_rows / max(stretch_s, 1e-12):,.0f}",
        f"{rss:.0f}",
        f"{hwm:.0f}",
        f"{errors / max(seen, 1):.4f}",
        *extra,
        f"{drift:.1e}",
    ]


def _stream(est, next_chunk, rows: int, chunk: int, checkpoints: int, desc: str, at_mark):
    """Feed ``rows`` rows to ``est`` in chunks (``next_chunk(n) -> (X, y)``), timing
    ``partial_fit_margins`` only; at each of ``checkpoints`` marks a row of
    :func:`_checkpoint_row` with ``at_mark(est) -> (extra cells, drift)``."""
    marks = set(np.linspace(0, rows, checkpoints + 1, dtype=int)[1:])
    out, errors, seen, last, t_stretch = [], 0, 0, 0, 0.0
    for lo in progress(range(0, rows, chunk), desc=desc, unit="chunk"):
        n = min(chunk, rows - lo)
        X, y = next_chunk(n)
        t0 = time.perf_counter()
        f = est.partial_fit_margins(X, y, classes=[0, 1])
        t_stretch += time.perf_counter() - t0
        errors += int(np.count_nonzero((np.ravel(f) >= 0) != (y == 1)))
        seen += n
        done = lo + n
        if any(last < m <= done for m in marks):
            extra, drift = at_mark(est)
            out.append(_checkpoint_row(done, done - last, t_stretch, errors, seen, extra, drift))
            last, t_stretch = done, 0.0
    return out


def soak_diag(rows: int, chunk: int, nnz: int, checkpoints: int, seed: int) -> str:
    from kernelcw import AROWClassifier

    rng = np.random.default_rng(seed)
    w = np.zeros(HASHED)
    hidden = rng.choice(HASHED, size=HASHED // 16, replace=False)
    w[hidden] = rng.normal(size=hidden.size)
    w[: 2**12] = rng.normal(size=2**12)  # the frequent features carry the signal
    X_test, _ = sparse_chunk(np.random.default_rng(seed + 1), w, 2000, nnz)
    out = _stream(
        AROWClassifier(covariance="diag"), lambda n: sparse_chunk(rng, w, n, nnz), rows, chunk,
        checkpoints, "soak diag", lambda est: ([], diag_drift(est, X_test)),
    )  # fmt: skip
    header = ["rows", "rows/s (stretch)", "RSS (MiB)", "peak RSS (MiB)", "progressive error"]
    return md_table([*header, "drift"], out)


def soak_dual(rows: int, chunk: int, budget: int, checkpoints: int, seed: int, policy: str):
    from kernelcw import AROWClassifier

    rng = np.random.default_rng(seed)
    X_test, _ = dense_chunk(np.random.default_rng(seed + 1), 2000)
    est = AROWClassifier(kernel="rbf", budget=budget, budget_policy=policy, random_state=seed)

    def at_mark(est):
        extra = [str(est.n_support_), est.engine_.factor_forms()[0]]
        return extra, dual_drift(est, X_test)

    return _stream(est, lambda n: dense_chunk(rng, n), rows, chunk, checkpoints,
                   f"soak dual {policy}", at_mark)  # fmt: skip


def main(argv=None):
    ap = argument_parser(__doc__)
    ap.add_argument("--parts", default="diag,dual", help="comma list of diag, dual")
    ap.add_argument("--diag-rows", type=int, default=1_000_000)
    ap.add_argument("--dual-rows", type=int, default=100_000)
    ap.add_argument("--chunk", type=int, default=10_000, help="rows per partial_fit (diag)")
    ap.add_argument("--dual-chunk", type=int, default=1_000, help="rows per partial_fit (dual)")
    ap.add_argument("--nnz", type=int, default=30, help="non-zeros per sparse row")
    ap.add_argument("--budget", type=int, default=200)
    ap.add_argument("--policies", default=",".join(POLICIES))
    ap.add_argument("--checkpoints", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-write", action="store_true", help="print only, no results file")
    args = ap.parse_args(argv)
    parts = set(args.parts.split(","))
    body = []
    if "diag" in parts:
        table = soak_diag(args.diag_rows, args.chunk, args.nnz, args.checkpoints, args.seed)
        body.append(
            f"## Sparse diagonal: AROWClassifier(covariance='diag'), {args.diag_rows:,} rows, "
            f"2^20 hashed features, {args.nnz} non-zeros per row, chunks of {args.chunk:,}\n\n"
            + table
        )
    if "dual" in parts:
        out = []
        for policy in args.policies.split(","):
            rows = soak_dual(
                args.dual_rows, args.dual_chunk, args.budget, args.checkpoints, args.seed, policy
            )
            out += [[policy, *r] for r in rows]
        header = ["policy", "rows", "rows/s (stretch)", "RSS (MiB)", "peak RSS (MiB)"]
        header += ["progressive error", "n_support_", "form", "drift"]
        body.append(
            f"## Budgeted dual: AROWClassifier(kernel='rbf', budget={args.budget}), "
            f"{args.dual_rows:,} rows of 10 features, chunks of {args.dual_chunk:,}\n\n"
            + md_table(header, out)
        )
    text = (
        "\n\n".join(body)
        + "\n\nDrift: max |f_engine - f_float64| / max |f_float64| on 2,000 held-out rows.\n"
    )
    if args.no_write:
        print(text)
    else:
        print(write_result("soak", "Soak: long streams, memory and drift", text).read_text())


if __name__ == "__main__":
    main()
