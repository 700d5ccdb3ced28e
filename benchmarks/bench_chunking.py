"""Chunking: the digits a blocked fit keeps against row-by-row learning, badly scaled columns.

AROW with a full covariance (primal) on ``--streams`` random streams of 60 rows whose 4
columns are scaled by 10^-4..10^4, learnt by one ``fit`` (one block) and by 60
one-row ``partial_fit`` calls. Both are compared with the same rule run row by row in
long double (``numpy.longdouble``, 64-bit mantissa on x86) as ``max |f - f_ref| /
max |f_ref|`` over the training rows, and with the tolerance the library states
(README, "Chunking"): ``1024 eps max(a |x|^2 / v)``.
"""

from __future__ import annotations

import warnings

import numpy as np

from ._common import PAPERS, argument_parser, md_table, write_result


def reference_mean(X, y, a: float = 1.0, r: float = 1.0) -> np.ndarray:
    """AROW's mean after one pass, row by row in long double (no variance floor)."""
    L = np.longdouble
    mu = np.zeros(X.shape[1], dtype=L)
    S = np.eye(X.shape[1], dtype=L) * L(a)
    for x, s in zip(X.astype(L), np.where(y == 1, 1, -1), strict=True):
        Sx = S @ x
        v = x @ Sx
        m = s * (mu @ x)
        if m < 1:
            beta = 1 / (v + L(r))
            mu = mu + (1 - m) * beta * s * Sx
            S = S - beta * np.outer(Sx, Sx)
    return mu


def one_stream(seed: int):
    from kernelcw import AROWClassifier

    rng = np.random.default_rng(seed)
    X = rng.normal(size=(60, 4)) * 10.0 ** rng.integers(-4, 5, size=4)
    y = (rng.normal(size=60) > 0).astype(int)
    f_ref = (X.astype(np.longdouble) @ reference_mean(X, y)).astype(float)
    whole = AROWClassifier(mode="primal", **PAPERS).fit(X, y)  # as the reference: no bias
    rows = AROWClassifier(mode="primal", **PAPERS)
    for i in range(60):
        rows.partial_fit(X[i : i + 1], y[i : i + 1], classes=[0, 1])
    scale = np.abs(f_ref).max()
    kappa = float((np.sum(X * X, axis=1) / whole.engine_.margin_variance(X).ravel()).max())
    err = [np.abs(e.decision_function(X) - f_ref).max() / scale for e in (whole, rows)]
    return err[0], err[1], 1024 * np.finfo(float).eps * kappa


def main(argv=None):
    ap = argument_parser(__doc__)
    ap.add_argument("--streams", type=int, default=20)
    args = ap.parse_args(argv)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = np.array([one_stream(s) for s in range(args.streams)])
    rows = [
        [what, f"{np.median(res[:, i]):.1e}", f"{res[:, i].max():.1e}"]
        for i, what in enumerate(["fit (one block)", "row by row", "stated tolerance"])
    ]
    within = int(np.sum(res[:, 0] <= res[:, 2]))
    body = (
        f"{args.streams} streams; relative error against long double.\n\n"
        + md_table(["learnt by", "median", "max"], rows)
        + f"\n\nfit within the stated tolerance on {within} of {args.streams} streams.\n"
    )
    print(write_result("chunking", "Chunking: blocked fit against row by row", body).read_text())


if __name__ == "__main__":
    main()
