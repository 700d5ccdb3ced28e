"""Diagonal CW on wide hashed text: 20 Newsgroups comp.* vs rest, HashingVectorizer 2^20 and 2^24.

The user's setting of the scaling issue: the whole 20 Newsgroups training split
(11,293 documents), label 1 for the five ``comp.*`` groups and 0 for the other 15,
``HashingVectorizer(n_features=2**k, binary=True)`` with scikit-learn's other
defaults (``alternate_sign=True``, ``norm="l2"``: the user named only ``binary``),
the split streamed once in one fixed random order (the file keeps each group's
documents together), one BLAS thread. Beside scikit-learn's passive-aggressive
update, ``SGDClassifier(loss="hinge", penalty=None, learning_rate="pa1",
eta0=1.0, shuffle=False)`` driven by one ``partial_fit`` over the same rows.

Two times per learner: ``fit`` as users run it (a fresh estimator: input
validation, the state's allocation, the rollback checkpoint, the pass), and the
compiled row loop alone (``engine.learn`` on a fresh engine made outside the
timer; not available for SGDClassifier). Numba compilation is excluded; the
contenders run interleaved, and each ratio is taken against the SGDClassifier run
of the same repeat, then summarised by its median and minimum. The papers' learners
run without an intercept (``fit_intercept=False``); two rows run with the defaults,
an intercept, as SGDClassifier fits one.

Then one row per call: after a ``partial_fit`` on the first 100 rows, each of the
next ``--row-calls`` rows in its own ``partial_fit`` (a CSR row, as a stream of
hashed documents arrives), CW-Var diag with the defaults against SGDClassifier,
interleaved call by call; the median microseconds of a call.
"""

from __future__ import annotations

import time

import numpy as np
from sklearn.feature_extraction.text import HashingVectorizer
from sklearn.linear_model import SGDClassifier
from threadpoolctl import threadpool_limits

from kernelcw import AROWClassifier, CWClassifier

from ._common import PAPERS, argument_parser, md_table, median, progress, write_result
from .datasets import _newsgroups_all_groups

SGD = "SGDClassifier pa1 (scikit-learn)"
DEFAULTS = "CW-Var, diag kl, with intercept (defaults)"


def contenders():
    diag = {"covariance": "diag", **PAPERS}
    return {
        "CW-Var, diag kl": lambda: CWClassifier(rule="var", **diag),
        "CW-Var, diag l2": lambda: CWClassifier(rule="var", diag_method="l2", **diag),
        "CW-Var, diag exact": lambda: CWClassifier(rule="var", diag_method="exact", **diag),
        "AROW, diag": lambda: AROWClassifier(**diag),
        DEFAULTS: lambda: CWClassifier(rule="var", covariance="diag"),
        "AROW, diag, with intercept (defaults)": lambda: AROWClassifier(covariance="diag"),
        SGD: lambda: SGDClassifier(
            loss="hinge", penalty=None, learning_rate="pa1", eta0=1.0, shuffle=False
        ),
    }


def one_pass(est, X, y):
    if isinstance(est, SGDClassifier):
        return est.partial_fit(X, y, classes=np.array([0, 1]))
    return est.fit(X, y)


def comp_vs_rest(subset: str, seed: int | None):
    """(texts, y) of one split, 1 for comp.*; shuffled by ``seed`` (None: file order)."""
    data = _newsgroups_all_groups(None, None)[subset]
    y = np.array([label.startswith("comp.") for label in data["labels"]], dtype=np.int64)
    texts = data["texts"]
    if seed is not None:
        order = np.random.default_rng(seed).permutation(len(y))
        texts, y = [texts[i] for i in order], y[order]
    return texts, y


def loop_runner(make, X, y):
    """(prepare, run) for the compiled row loop alone: ``engine.learn`` on a fresh engine
    that ``prepare`` builds outside the timer."""
    est = make().fit(X[:2], np.array([0, 1]))  # the classes and engine spec
    Y = np.where(y == 1, 1.0, -1.0)[:, None]
    spec, cls = est.engine_.spec, type(est.engine_)
    box = {}

    def prepare():
        box["eng"] = cls(spec)

    def run():
        box.pop("eng").learn(X, Y)

    return prepare, run


def time_setting(makers, X, y, repeats, desc):
    """{name: [seconds]} of the fits and of the loops (``name + " loop"``), the
    contenders interleaved as in :func:`benchmarks._common.interleaved`, each
    ``prepare`` run before its timer starts."""
    runs = {}
    for name, make in makers.items():
        runs[name] = (None, lambda make=make: one_pass(make(), X, y))
        if name != SGD:
            runs[name + " loop"] = loop_runner(make, X, y)
    for prepare, run in runs.values():  # compile and warm outside the timings
        if prepare:
            prepare()
        run()
    times: dict[str, list[float]] = {k: [] for k in runs}
    with progress(total=repeats * len(runs), desc=desc, unit="run") as bar:
        for _ in range(repeats):
            for name, (prepare, run) in runs.items():
                if prepare:
                    prepare()
                time.sleep(0.3)  # let BLAS threads of the previous run stop spinning
                t0 = time.perf_counter()
                run()
                times[name].append(time.perf_counter() - t0)
                bar.update(1)
    return times


def main(argv=None):
    ap = argument_parser(__doc__)
    ap.add_argument("--repeats", type=int, default=15, help="interleaved repetitions")
    ap.add_argument(
        "--log2-features",
        type=int,
        nargs="+",
        default=[20, 24],
        help="HashingVectorizer widths to run, as powers of two (default: 20 24)",
    )
    ap.add_argument("--seed", type=int, default=0, help="stream order")
    ap.add_argument(
        "--row-calls", type=int, default=2000, help="one-row partial_fit calls timed (0: none)"
    )
    args = ap.parse_args(argv)

    txt_tr, y_tr = comp_vs_rest("train", args.seed)
    txt_te, y_te = comp_vs_rest("test", None)
    makers = contenders()
    tables = []
    with threadpool_limits(1):
        for k in args.log2_features:
            vec = HashingVectorizer(n_features=2**k, binary=True)
            X_tr = vec.transform(txt_tr).astype(np.float64).tocsr()
            X_te = vec.transform(txt_te).astype(np.float64).tocsr()
            times = time_setting(makers, X_tr, y_tr, args.repeats, f"text_hashed 2^{k}")
            tables.append(_table(k, makers, times, X_tr, y_tr, X_te, y_te))
            if args.row_calls:
                tables.append(_row_table(k, makers, X_tr, y_tr, args.row_calls))
    nnz = X_tr.nnz / X_tr.shape[0]
    body = (
        "Goal (the scaling issue): the diagonal learners within 1.2x of SGDClassifier(pa1) "
        "at 2^20 and 2^24 hashed features, one pass, one thread, compile time excluded.\n\n"
        f"Data: 20 Newsgroups train split, comp.* (1, {int(y_tr.sum())} documents) vs the "
        f"other 15 groups (0, {int((1 - y_tr).sum())}); {nnz:.0f} non-zeros per document; "
        f"test split {len(y_te)} documents; stream order seed {args.seed}; "
        "`HashingVectorizer(n_features=2**k, binary=True)` (alternate_sign=True, "
        f"norm='l2': scikit-learn's defaults); {args.repeats} interleaved repeats, one pass "
        "each, one BLAS thread.\n\n"
        "*fit*: a fresh estimator's `fit` (`partial_fit` for SGDClassifier), validation "
        "included. *loop*: the compiled row loop alone (`engine.learn` on a fresh engine "
        "built outside the timer). *predict*: `predict` of the test split by the fitted "
        "model, 9 interleaved repeats. Ratios are to the SGDClassifier run of the same "
        "repeat: median (min) over the repeats.\n\n" + "\n\n".join(tables) + "\n"
    )
    path = write_result("text_hashed", "Diagonal CW on wide hashed text (20 Newsgroups)", body)
    print(path.read_text())


def _table(k, makers, times, X_tr, y_tr, X_te, y_te) -> str:
    sgd = np.array(times[SGD])
    fitted = {name: one_pass(make(), X_tr, y_tr) for name, make in makers.items()}
    predict = _predict_times(fitted, X_te)
    rows = []
    for name, est in fitted.items():
        err = np.mean(est.predict(X_te) != y_te)
        mistakes = getattr(est, "n_mistakes_", None)
        fit = np.array(times[name])
        cells = [name, f"{median(fit) * 1e3:.1f}", _ratio(fit, sgd)]
        if name == SGD:
            cells += ["-", "-"]
        else:
            loop = np.array(times[name + " loop"])
            cells += [f"{median(loop) * 1e3:.1f}", _ratio(loop, sgd)]
        pred = np.array(predict[name])
        cells += [
            f"{median(pred) * 1e3:.1f}",
            _ratio(pred, np.array(predict[SGD])),
            f"{100 * err:.1f}",
            "-" if mistakes is None else f"{100 * mistakes / len(y_tr):.1f}",
        ]
        rows.append(cells)
    head = [
        "learner (one pass)",
        "fit ms (median)",
        "fit / SGD",
        "loop ms (median)",
        "loop / SGD",
        "predict ms (median)",
        "predict / SGD",
        "test error %",
        "online mistakes %",
    ]
    return f"### n_features = 2^{k} ({2**k:,})\n\n" + md_table(head, rows)


def _predict_times(fitted: dict, X_te, repeats: int = 9) -> dict[str, list[float]]:
    """{name: [seconds]} of ``predict`` on the test set, the fitted models interleaved,
    each after a short pause."""
    times: dict[str, list[float]] = {name: [] for name in fitted}
    for est in fitted.values():
        est.predict(X_te)  # (compiled and warm outside the timings)
    for _ in range(repeats):
        for name, est in fitted.items():
            time.sleep(0.05)
            t0 = time.perf_counter()
            est.predict(X_te)
            times[name].append(time.perf_counter() - t0)
    return times


def _row_table(k, makers, X, y, calls: int) -> str:
    """One CSR row per ``partial_fit`` (:data:`DEFAULTS` and SGDClassifier), the calls
    of the two interleaved after a first call of 100 rows; median us a call."""
    names = [DEFAULTS, SGD]
    models = {name: makers[name]() for name in names}
    for est in models.values():
        est.partial_fit(X[:100], y[:100], classes=np.array([0, 1]))
    stop = min(X.shape[0], 100 + calls)
    rows = [X[i : i + 1] for i in range(100, stop)]
    us = {name: [] for name in names}
    for i, row in enumerate(rows):
        for name, est in models.items():
            t0 = time.perf_counter()
            est.partial_fit(row, y[100 + i : 101 + i])
            us[name].append((time.perf_counter() - t0) * 1e6)
    sgd = median(us[SGD])
    out = [[n, f"{median(us[n]):.0f}", f"{median(us[n]) / sgd:.2f}"] for n in names]
    return (
        f"One CSR row per `partial_fit` at 2^{k} ({len(rows)} calls each, interleaved):\n\n"
        + md_table(["learner", "median us a call", "/ SGD"], out)
    )


def _ratio(t: np.ndarray, sgd: np.ndarray) -> str:
    r = t / sgd
    return f"{median(list(r)):.2f} ({r.min():.2f})"


if __name__ == "__main__":
    main()
