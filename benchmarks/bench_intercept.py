"""fit_intercept: test accuracy with and without the intercept, to choose its default.

One online pass (``fit``) of SCW-I, AROW and CW-Var, linear (primal, full
covariance) and RBF (dual, gamma = 1/d), and of the first-order PA-I (C = 1) in both
forms, with ``fit_intercept`` False and True
(``intercept_scaling=1``), on data as users bring it: two moons (noise 0.3) centred
and shifted by +5, breast cancer and magic z-scored and raw, digits (pixels 0..16).
Each data set is split once at random (seed 0, 2/3 to train); LogisticRegression
(which has an intercept) is the batch reference. Accuracy only: no timings.
"""

from __future__ import annotations

import numpy as np
from sklearn.datasets import load_breast_cancer, load_digits, make_moons
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from kernelcw import AROWClassifier, CWClassifier, PAClassifier, SCWClassifier

from ._common import argument_parser, md_table, progress, write_result
from .datasets import magic

LEARNERS = {
    "SCW-I linear": lambda **kw: SCWClassifier(**kw),
    "AROW linear": lambda **kw: AROWClassifier(**kw),
    "CW-Var linear": lambda **kw: CWClassifier(rule="var", eta=0.9, **kw),
    "SCW-I RBF": lambda **kw: SCWClassifier(kernel="rbf", **kw),
    "AROW RBF": lambda **kw: AROWClassifier(kernel="rbf", **kw),
    "PA-I linear": lambda **kw: PAClassifier(variant=1, **kw),
    "PA-I RBF": lambda **kw: PAClassifier(variant=1, kernel="rbf", **kw),
}
FIRST_ORDER = {"PA-I linear", "PA-I RBF"}


def datasets(magic_rows: int):
    X, y = make_moons(3000, noise=0.3, random_state=0)
    yield "moons", X, y
    yield "moons + 5", X + 5.0, y
    X, y = load_breast_cancer(return_X_y=True)
    yield "breast cancer, z-scored", StandardScaler().fit_transform(X), y
    yield "breast cancer, raw / max", X / X.max(axis=0), y
    X, y = magic()
    order = np.random.default_rng(0).permutation(len(y))[:magic_rows]
    X, y = X[order], y[order]
    yield "magic, z-scored", StandardScaler().fit_transform(X), y
    yield "magic, raw / max", X / np.abs(X).max(axis=0), y
    X, y = load_digits(return_X_y=True)
    yield "digits, pixels / 16", X / 16.0, y


def main(argv=None):
    ap = argument_parser(__doc__)
    ap.add_argument("--magic-rows", type=int, default=6000)
    args = ap.parse_args(argv)
    rows = []
    wins = {(fo, w): 0 for fo in (False, True) for w in (False, True)}
    sets = list(datasets(args.magic_rows))
    for name, X, y in progress(sets, desc="intercept", unit="data set"):
        Xtr, Xte, ytr, yte = train_test_split(X, y, train_size=2 / 3, random_state=0)
        lr = make_pipeline(LogisticRegression(max_iter=2000)).fit(Xtr, ytr).score(Xte, yte)
        for lname, make in LEARNERS.items():
            acc = {fi: make(fit_intercept=fi).fit(Xtr, ytr).score(Xte, yte) for fi in (False, True)}
            diff = acc[True] - acc[False]
            if abs(diff) > 0.005:
                wins[lname in FIRST_ORDER, diff > 0] += 1
            rows.append(
                [name, lname, f"{100 * acc[False]:.1f}", f"{100 * acc[True]:.1f}",
                 f"{100 * diff:+.1f}", f"{100 * lr:.1f}"]
            )  # fmt: skip
    body = md_table(
        [
            "data",
            "learner",
            "no intercept %",
            "fit_intercept %",
            "difference",
            "LogisticRegression %",
        ],
        rows,
    )
    body += (
        "\n\nTest accuracy, one pass. Of the comparisons that differ by more than half a "
        f"point, the intercept wins {wins[False, True]} and loses {wins[False, False]} for the "
        f"second-order learners, and wins {wins[True, True]} and loses {wins[True, False]} "
        "for PA-I.\n"
    )
    path = write_result("intercept", "fit_intercept: accuracy with and without", body)
    print(path.read_text())


if __name__ == "__main__":
    main()
