"""Persistence: the size of saved models, stored (kernelcw's format) and deflated.

Fits the README's breast-cancer models (primal SCW-I, RBF SCW-I unbounded and with
budget=100), saves each with :func:`kernelcw.save`, checks that the loaded model
predicts the same, and prints the file's size next to the size of the same members
deflated (``zipfile.ZIP_DEFLATED``): why the format stores the arrays uncompressed.
Sizes only, no timings: the numbers do not depend on the machine.
"""

from __future__ import annotations

import io
import os
import tempfile
import zipfile

import numpy as np

from ._common import argument_parser, md_table, write_result


def _models():
    from sklearn.datasets import load_breast_cancer
    from sklearn.preprocessing import StandardScaler

    from kernelcw import SCWClassifier

    X, y = load_breast_cancer(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    yield "SCW-I primal", SCWClassifier().fit(X, y), X
    yield "SCW-I RBF", SCWClassifier(kernel="rbf", gamma=0.1).fit(X, y), X
    yield "SCW-I RBF, budget=100", SCWClassifier(kernel="rbf", gamma=0.1, budget=100).fit(X, y), X


def _deflated(path: str) -> int:
    buf = io.BytesIO()
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as dst:
        for name in src.namelist():
            dst.writestr(name, src.read(name))
    return len(buf.getvalue())


def main(argv=None) -> int:
    parser = argument_parser(__doc__)
    parser.add_argument("--write", action="store_true", help="write results/persistence.md")
    args = parser.parse_args(argv)
    import kernelcw

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.kcw")
        for name, est, X in _models():
            kernelcw.save(est, path)
            same = np.array_equal(
                kernelcw.load(path).decision_function(X), est.decision_function(X)
            )
            stored, deflated = os.path.getsize(path), _deflated(path)
            rows.append(
                [name, f"{stored:,}", f"{deflated:,}", f"{1 - deflated / stored:.1%}", str(same)]
            )
    table = md_table(["model", "stored bytes", "deflated bytes", "saved by deflate", "same"], rows)
    print(table)
    if args.write:
        write_result("persistence", "Saved model sizes, stored and deflated", table)
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
