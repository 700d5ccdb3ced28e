"""A linear-kernel dual model reproduces the primal one.

The dual (kernel) form keeps mu and Sigma as combinations of the support inputs:
``mu = S' nu`` and ``Sigma = a I + S' Pi S``, S the support vectors as rows. With
the linear kernel it must therefore learn exactly what the primal form learns.
This script fits each second-order learner both ways (``mode="primal"`` and
``mode="dual"``) on scikit-learn's breast cancer data, rebuilds the dual model's
mu and Sigma with ``kernelcw.primal_from_dual``, and prints the largest
difference from the primal model's, relative to the largest entry of the primal
one, and whether the two models' online mistakes and test predictions are the same.

Run it (a few seconds)::

    python examples/dual_primal_equivalence.py
    python examples/dual_primal_equivalence.py --solver explicit
"""

from __future__ import annotations

import argparse

import numpy as np
from sklearn.datasets import load_breast_cancer
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from kernelcw import AROWClassifier, CWClassifier, SCWClassifier, primal_from_dual

LEARNERS = {
    "CW-Stdev": lambda **kw: CWClassifier(rule="stdev", **kw),
    "CW-Var": lambda **kw: CWClassifier(rule="var", **kw),
    "SCW-I": lambda **kw: SCWClassifier(variant=1, **kw),
    "SCW-II": lambda **kw: SCWClassifier(variant=2, **kw),
    "AROW": lambda **kw: AROWClassifier(**kw),
}


def relative_difference(a: np.ndarray, b: np.ndarray) -> float:
    """max |a - b| / max |b|: the error relative to the scale of the reference b."""
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--n-samples",
        type=int,
        default=None,
        help="use only the first N rows of the data (default: all 569)",
    )
    ap.add_argument(
        "--solver",
        choices=["cholesky", "explicit"],
        default="cholesky",
        help="the dual engine's solver (default: cholesky)",
    )
    args = ap.parse_args(argv)

    X, y = load_breast_cancer(return_X_y=True)
    X, y = X[: args.n_samples], y[: args.n_samples]
    X_tr, X_te, y_tr, y_te = train_test_split(X, y, random_state=0, stratify=y)
    scaler = StandardScaler().fit(X_tr)
    X_tr, X_te = scaler.transform(X_tr), scaler.transform(X_te)
    print(
        f"breast cancer: {len(X_tr)} training rows, {len(X_te)} test rows, "
        f"{X.shape[1]} features; dual solver: {args.solver}"
    )

    header = (
        f"{'learner':<9} {'mu rel. diff':>12} {'Sigma rel. diff':>15} {'support':>7} "
        f"{'mistakes (primal/dual)':>22} {'same predictions':>16}"
    )
    print(header)
    print("-" * len(header))
    results = {}
    for name, make in LEARNERS.items():
        primal = make(mode="primal").fit(X_tr, y_tr)
        dual = make(mode="dual", solver=args.solver).fit(X_tr, y_tr)  # kernel="linear"
        mu, sigma = primal_from_dual(dual)
        row = {
            "mu": relative_difference(mu, primal.mean_),
            "sigma": relative_difference(sigma, primal.covariance_),
            "n_support": dual.n_support_,
            "mistakes_primal": primal.n_mistakes_,
            "mistakes_dual": dual.n_mistakes_,
            "same_predictions": bool(np.array_equal(primal.predict(X_te), dual.predict(X_te))),
        }
        results[name] = row
        mistakes = f"{row['mistakes_primal']}/{row['mistakes_dual']}"
        print(
            f"{name:<9} {row['mu']:>12.1e} {row['sigma']:>15.1e} {row['n_support']:>7} "
            f"{mistakes:>22} {str(row['same_predictions']):>16}"
        )
    return results


if __name__ == "__main__":
    main()
