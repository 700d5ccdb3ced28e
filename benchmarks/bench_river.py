"""river: rows/s of one predict_one + learn_one per feature dict, kernelcw.river against
river's own PAClassifier, in one run.

Stream: river's bundled Phishing data set (1,250 dicts of 9 numeric features, no
network), each feature z-scored once over the whole set (so that no contender pays for
a scaler), repeated ``--passes`` times, as river's progressive validation feeds it: for
each dict ``predict_one(x)`` then ``learn_one(x, y)``. Contenders, interleaved (A, B, C,
A, B, C, ...; ``--repeats`` timings each, median reported):

- ``river PAClassifier``: river's linear passive-aggressive learner (``linear_model``,
  default C), the reference;
- ``kernelcw CW diag``: ``kernelcw.river.Classifier(CWClassifier(covariance="diag"))``,
  the linear diagonal CW;
- ``kernelcw SCW-I rbf B``: ``SCWClassifier(kernel="rbf", gamma=--gamma,
  budget=--budget)``, a budgeted kernel learner.

Goals (issue 12): CW diag at least as fast as PAClassifier (ratio >= 1); RBF with budget
200 at least 2,000 rows/s. Each contender's accuracy over the stream is reported too
(the same in every repeat: the runs are deterministic). The machine is shared: timing
ratios come from one run, and result files are written only with ``--write``.
"""

from __future__ import annotations

import time

from ._common import argument_parser, interleaved, md_table, median, write_result


def contenders(gamma: float, budget: int) -> dict:
    """Makers of fresh models, by name."""
    from river import linear_model

    from kernelcw import CWClassifier, SCWClassifier
    from kernelcw.river import Classifier

    return {
        "river PAClassifier": lambda: linear_model.PAClassifier(),
        "kernelcw CW diag": lambda: Classifier(CWClassifier(covariance="diag")),
        f"kernelcw SCW-I rbf B={budget}": lambda: Classifier(
            SCWClassifier(kernel="rbf", gamma=gamma, budget=budget)
        ),
    }


def scaled_phishing() -> list[tuple[dict, bool]]:
    """Phishing's dicts with each feature z-scored over the data set."""
    from river import datasets

    data = list(datasets.Phishing())
    names = sorted({k for x, _ in data for k in x})
    n = len(data)
    mean = {k: sum(x.get(k, 0.0) for x, _ in data) / n for k in names}
    var = {k: sum((x.get(k, 0.0) - mean[k]) ** 2 for x, _ in data) / n for k in names}
    scale = {k: (var[k] ** 0.5 or 1.0) for k in names}
    return [({k: (v - mean[k]) / scale[k] for k, v in x.items()}, y) for x, y in data]


def stream(model, data) -> int:
    """Progressive validation over ``data``; the number of correct predictions."""
    correct = 0
    for x, y in data:
        correct += model.predict_one(x) == y
        model.learn_one(x, y)
    return correct


def main(argv=None) -> int:
    ap = argument_parser(__doc__)
    ap.add_argument("--passes", type=int, default=4, help="passes over Phishing per run")
    ap.add_argument("--repeats", type=int, default=5, help="timed runs per contender")
    ap.add_argument("--budget", type=int, default=200, help="the RBF model's budget")
    ap.add_argument("--gamma", type=float, default=0.1, help="the RBF kernel's gamma")
    ap.add_argument("--pause", type=float, default=0.3, help="idle seconds before each run")
    ap.add_argument("--write", action="store_true", help="write results/river.md")
    args = ap.parse_args(argv)
    import warnings

    data = scaled_phishing() * args.passes
    makers = contenders(args.gamma, args.budget)
    accuracy = {}

    def runner(name):
        def go():
            accuracy[name] = stream(makers[name](), data) / len(data)

        return go

    for name in makers:  # compile and warm up once, untimed
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            runner(name)()
        print(f"warm-up {name}: {time.perf_counter() - t0:.2f} s")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # CW's variance floor on Phishing
        times = interleaved({n: runner(n) for n in makers}, args.repeats, args.pause)
    rate = {n: len(data) / median(t) for n, t in times.items()}
    ref = rate["river PAClassifier"]
    rows = [[n, f"{rate[n]:,.0f}", f"{rate[n] / ref:.2f}", f"{accuracy[n]:.4f}"] for n in makers]
    table = md_table(["model", "rows/s", "vs PAClassifier", "accuracy"], rows)
    body = (
        f"{len(data):,} rows per run (Phishing z-scored, x {args.passes}), median of "
        f"{args.repeats} "
        f"interleaved runs; one predict_one + learn_one per row.\n\n{table}\n"
    )
    print(body)
    if args.write:
        print(f"wrote {write_result('river', 'river adapter: rows/s per dict', body)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
