"""Kernel against linear: test error and training time of RBF and linear CW, SVC and SGD.

Kernel SCW-I and CW-Stdev (RBF, dual form; unbudgeted, and with a budget of
``--budget-frac`` of the unbudgeted support size, policy "project") against the
linear (primal, full covariance) learners of the same rules, scikit-learn's
``SVC(kernel="rbf")`` (batch) and ``SGDClassifier`` (linear, hinge loss), on
two problems:

- KEEL magic, as ``bench_magic`` does: one fixed random order (``--seed``), the
  first ``--magic-train`` rows (12,000) the training stream and the other 7,020
  the test set, features z-scored with the training rows' statistics;
- Fashion-MNIST T-shirt/top (0) vs shirt (6), pixels in [0, 1]: the first
  ``--fashion-train`` rows of a random order (``--seed``) of the 12,000 training
  images of the pair, tested on the 2,000 t10k images of the pair.

Online learners make one pass over the training stream (``run_online``: predict
each example, then learn from it), which gives the online mistake rate; the test
error is that of the final model. All kernel learners, SVC included, use one
gamma: 1/d unless ``--gamma`` is given (kernelcw's default; on magic it equals
SVC's ``gamma="scale"``, 1/10, as in ``bench_magic``). Where ``"scale"`` differs,
SVC with it is shown too. SVC runs with its default C = 1.

``SGDClassifier`` twice, both ``random_state=0`` and otherwise default (hinge
loss, alpha 1e-4, the "optimal" learning rate): ``fit`` (shuffled epochs until
its stopping rule, a batch learner) and one online pass (``partial_fit`` on the
stream in order, ``shuffle=False``). The one-pass online mistake rate comes from ``run_online``,
which drives it one example at a time; its time is that of one ``partial_fit``
call over the whole stream, whose model is checked to be the same (to 1e-9).

Training time: ``run_online``'s wall clock for the online learners, ``fit`` /
``partial_fit`` for scikit-learn's; numba compilation excluded. With
``--repeats`` > 1 the contenders run in turn that many times and the median
is shown. On a loaded machine pass ``--blas-threads 1`` (see ``bench_libol``).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable

import numpy as np
from sklearn.linear_model import SGDClassifier
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC
from threadpoolctl import threadpool_limits

from kernelcw import CWClassifier, SCWClassifier, run_online

from ._common import (
    RESULTS,
    argument_parser,
    md_table,
    median,
    pyplot,
    require_matplotlib,
    write_result,
)
from .datasets import fashion_mnist, magic

RULES: dict[str, type] = {"SCW-I": SCWClassifier, "CW-Stdev": CWClassifier}


def load_magic(n_train: int, seed: int):
    """bench_magic's split: one random order, the first n_train rows train, the rest test."""
    X, y = magic()
    order = np.random.default_rng(seed).permutation(len(y))
    X, y = X[order], y[order]
    X_tr, y_tr, X_te, y_te = X[:n_train], y[:n_train], X[n_train:], y[n_train:]
    scaler = StandardScaler().fit(X_tr)
    return scaler.transform(X_tr), y_tr, scaler.transform(X_te), y_te


def load_fashion(n_train: int, seed: int):
    X, y = fashion_mnist(classes=(0, 6), subset="train")
    order = np.random.default_rng(seed).permutation(len(y))[:n_train]
    X_te, y_te = fashion_mnist(classes=(0, 6), subset="test")
    return np.ascontiguousarray(X[order]), y[order], X_te, y_te


def quiet(fn: Callable[[], object]) -> object:
    with warnings.catch_warnings():
        # CW-Stdev's hard constraint on a non-separable stream: the floored rounds are counted
        warnings.filterwarnings("ignore", message=".*margin variance fell below")
        return fn()


def contenders(X, y, gamma: float, budget_frac: float) -> dict[str, Callable[[], dict]]:
    """name -> a function that trains a fresh model and says how it went.

    Each returns ``{"model", "seconds", "rate"}`` (``rate``: the online mistake
    rate, None for batch learners). The budgeted models take their budget from
    the unbudgeted run of the same rule, which comes first.
    """
    classes = np.unique(y)
    support: dict[str, int] = {}
    out: dict[str, Callable[[], dict]] = {}

    def online(make: Callable[[], object], key: str | None = None) -> Callable[[], dict]:
        def fn() -> dict:
            res = quiet(lambda: run_online(make(), X, y))
            if key is not None:
                support[key] = int(res.estimator.n_support_)
            return {"model": res.estimator, "seconds": res.seconds, "rate": res.mistake_rate}

        return fn

    def batch(make: Callable[[], object], method: str = "fit") -> Callable[[], dict]:
        def fn() -> dict:
            model = make()
            kw = {"classes": classes} if method == "partial_fit" else {}
            t0 = time.perf_counter()
            getattr(model, method)(X, y, **kw)
            return {"model": model, "seconds": time.perf_counter() - t0, "rate": None}

        return fn

    def budget(rule: str) -> int:
        return max(1, round(budget_frac * support[rule]))

    for rule, cls in RULES.items():
        out[f"{rule}, RBF"] = online(lambda cls=cls: cls(kernel="rbf", gamma=gamma), rule)
    for rule, cls in RULES.items():
        out[f"{rule}, RBF, budget project"] = online(
            lambda cls=cls, rule=rule: cls(
                kernel="rbf",
                gamma=gamma,
                budget=budget(rule),
                budget_policy="project",
                random_state=0,
            )
        )
    for rule, cls in RULES.items():
        out[f"{rule}, linear (primal, full)"] = online(lambda cls=cls: cls(covariance="full"))
    out["SVC(kernel='rbf'), batch"] = batch(lambda: SVC(kernel="rbf", gamma=gamma))
    scale = 1.0 / (X.shape[1] * X.var())
    if abs(scale / gamma - 1) > 0.01:
        out[f"SVC(kernel='rbf', gamma='scale' = {scale:.3g}), batch"] = batch(
            lambda: SVC(kernel="rbf", gamma="scale")
        )
    out["SGDClassifier, fit (batch epochs)"] = batch(lambda: SGDClassifier(random_state=0))

    def sgd_pass() -> dict:
        timed = batch(lambda: SGDClassifier(random_state=0, shuffle=False), "partial_fit")()
        res = run_online(SGDClassifier(random_state=0, shuffle=False), X, y, classes=classes)
        one = np.append(timed["model"].coef_, timed["model"].intercept_)
        each = np.append(res.estimator.coef_, res.estimator.intercept_)
        gap = np.linalg.norm(one - each) / np.linalg.norm(one)
        if not gap < 1e-9:  # rounding only (measured: ~5e-15)
            raise RuntimeError(f"SGDClassifier: the two one-pass models differ by {gap:.2g}")
        return {**timed, "rate": res.mistake_rate}

    out["SGDClassifier, one online pass"] = sgd_pass
    return out


def evaluate(name: str, data: tuple, args) -> tuple[list[list[object]], list[tuple]]:
    X_tr, y_tr, X_te, y_te = data
    gamma = args.gamma if args.gamma is not None else 1.0 / X_tr.shape[1]
    # numba compiles outside the timings: every kernelcw form on a few rows
    few = slice(0, 300)
    for cls in RULES.values():
        for kw in ({"kernel": "rbf"}, {"kernel": "rbf", "budget": 50}, {"covariance": "full"}):
            quiet(lambda cls=cls, kw=kw: cls(**kw).fit(X_tr[few], y_tr[few]))
    jobs = contenders(X_tr, y_tr, gamma, args.budget_frac)
    seconds: dict[str, list[float]] = {k: [] for k in jobs}
    last: dict[str, dict] = {}
    from tqdm.auto import tqdm

    with tqdm(total=args.repeats * len(jobs), desc=name, unit="fit") as bar:
        for _ in range(args.repeats):
            for key, fn in jobs.items():
                bar.set_postfix_str(key)
                time.sleep(args.pause)
                last[key] = fn()
                seconds[key].append(last[key]["seconds"])
                bar.update()
    svc_s = median(seconds["SVC(kernel='rbf'), batch"])
    rows, points = [], []
    for key, got in last.items():
        model = got["model"]
        t0 = time.perf_counter()
        err = float(np.mean(model.predict(X_te) != y_te))
        t_pred = time.perf_counter() - t0
        n_sv = getattr(model, "n_support_", None)
        if isinstance(model, SVC):
            n_sv = int(np.sum(n_sv))
        elif "RBF" not in key:
            n_sv = None
        floored = getattr(model, "n_variance_floored_", None)
        t_fit = median(seconds[key])
        rows.append(
            [
                key if "budget" not in key else f"{key} (B = {model.budget})",
                "-" if got["rate"] is None else f"{100 * got['rate']:.1f}",
                f"{100 * err:.1f}",
                "-" if n_sv is None else n_sv,
                "-" if floored is None else int(np.sum(floored)),
                f"{t_fit:.2f}",
                f"{t_fit / svc_s:.2f}",
                f"{t_pred:.2f}",
            ]
        )
        points.append((key, t_fit, 100 * err))
    header = (
        f"### {name}: train {len(y_tr)} rows x {X_tr.shape[1]} features (positive rate "
        f"{y_tr.mean():.2f}), test {len(y_te)} rows; kernel gamma = {gamma:.4g}\n\n"
    )
    table = md_table(
        [
            "learner",
            "online mistakes %",
            "test error %",
            "support vectors",
            "variance-floored rounds",
            "train s",
            "train time / SVC",
            "predict s",
        ],
        rows,
    )
    return header + table, points


def plot(curves: dict[str, list[tuple]], path) -> None:
    plt = pyplot()

    def style(key: str) -> dict:
        """Colour by rule or library, marker by form; open markers for the cheaper variant."""
        color = "C0" if key.startswith("SCW-I") else "C1" if key.startswith("CW-Stdev") else "k"
        if key.startswith("SGD"):
            color = "0.5"
        marker = "o"
        if "linear" in key:
            marker = "^"
        elif "budget" in key:
            marker = "s"
        elif key.startswith("SVC"):
            marker = "D"
        elif key.startswith("SGD"):
            marker = "v"
        hollow = "budget" in key or "scale" in key or "one online pass" in key
        return {"marker": marker, "color": color, "mfc": "none" if hollow else color}

    fig, axes = plt.subplots(1, len(curves), figsize=(6.4 * len(curves), 4.6), squeeze=False)
    for ax, (name, points) in zip(axes[0], curves.items(), strict=True):
        for key, t, err in points:
            ax.plot([t], [err], ls="none", ms=8, label=key, **style(key))
        ax.set_xscale("log")
        ax.set_xlabel("training time, s (log scale)")
        ax.set_ylabel("test error %")
        ax.set_title(name)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    ap = argument_parser(__doc__)
    ap.add_argument("--data", default="magic,fashion", help="comma-separated: magic,fashion")
    ap.add_argument("--magic-train", type=int, default=12000, help="magic training rows")
    ap.add_argument("--fashion-train", type=int, default=4000, help="Fashion-MNIST pair rows")
    ap.add_argument("--seed", type=int, default=0, help="random order of the training rows")
    ap.add_argument("--gamma", type=float, default=None, help="RBF gamma (default 1/d)")
    ap.add_argument(
        "--budget-frac", type=float, default=0.1, help="budget / unbudgeted support size"
    )
    ap.add_argument("--repeats", type=int, default=1, help="timed runs of each contender")
    ap.add_argument("--pause", type=float, default=0.3, help="idle seconds before each run")
    ap.add_argument("--blas-threads", type=int, default=None, help="limit the BLAS threads")
    args = ap.parse_args(argv)
    require_matplotlib(ap.prog)
    loaders = {"magic": load_magic, "fashion": load_fashion}
    data = [d for d in args.data.split(",") if d]
    if set(data) - set(loaders):
        ap.error(f"unknown data {sorted(set(data) - set(loaders))}; choose from {list(loaders)}")
    if args.repeats < 1 or not 0 < args.budget_frac < 1:
        ap.error("--repeats must be positive and --budget-frac in (0, 1)")
    rows = {"magic": args.magic_train, "fashion": args.fashion_train}
    titles = {"magic": "KEEL magic", "fashion": "Fashion-MNIST T-shirt/top vs shirt"}

    with threadpool_limits(args.blas_threads, user_api="blas"):
        sections, curves = [], {}
        for name in data:
            text, points = evaluate(titles[name], loaders[name](rows[name], args.seed), args)
            sections.append(text)
            curves[titles[name]] = points
        RESULTS.mkdir(exist_ok=True)
        plot(curves, RESULTS / "kernel_vs_linear.png")
        body = (
            "One pass of the online learners over the training stream (online mistakes: "
            "predict each example, then learn), test error of the final model. Default "
            "parameters (SCW-I: C 1, eta 0.75; CW-Stdev: eta 0.7; SVC: C 1; SGDClassifier: "
            'hinge, alpha 1e-4). Budgeted models: policy "project", B = '
            f"{args.budget_frac:g} x the unbudgeted model's support size. "
            f"Train time: median of {args.repeats} run(s), numba compilation excluded; "
            '"train time / SVC" is against SVC at the same gamma. BLAS threads: '
            f"{args.blas_threads or 'the default'} (kernelcw's dual engine is BLAS-bound and "
            "SVC's libsvm is not, so fewer BLAS threads raise kernelcw's times, not SVC's).\n\n"
            'Once the budget binds, the "project" policy works in the blocked nu/Pi walk '
            "(O(B^2) work per round, in sub-blocks of BLAS-3 products), where the unbudgeted "
            "model appends to a Cholesky factor with BLAS-3 blocks: compare their train "
            "columns. A "
            "budget also bounds memory and prediction time (the predict column).\n\n"
            + "\n\n".join(sections)
            + "\n\n![test error against training time](kernel_vs_linear.png)\n"
        )
        path = write_result(
            "kernel_vs_linear", "Kernel against linear: test error and training time", body
        )
    print(path.read_text())


if __name__ == "__main__":
    main()
