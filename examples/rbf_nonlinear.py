"""Nonlinear classification with an RBF kernel: decision boundary, confidence, margins.

A confidence-weighted learner is linear, but in its dual form it learns in the
feature space of any kernel. Here SCW-I with an RBF kernel learns scikit-learn's
two moons (or two circles) in one online pass, next to the same learner with the
linear kernel. The script prints both test accuracies and draws one PNG with:

1. the kernel model's decision boundary (mu . phi(x) = 0) and its support vectors;
2. its predictive confidence ``predict_proba``: the probability that a weight
   vector drawn from N(mu, Sigma) puts x on the positive side. It is near 0.5 both
   on the boundary and far from the data, where the model has seen nothing;
3. the margin distribution on the test set, for both models: histograms of the
   probabilistic margin y mu . x / sqrt(x' Sigma x), the margin in units of its
   standard deviation (negative: a mistake; Phi of it is ``predict_proba`` of
   the true class).

Run it (a few seconds; writes ``rbf_nonlinear.png`` in the current directory; needs
matplotlib: ``pip install "kernelcw[plot]"``)::

    python examples/rbf_nonlinear.py
    python examples/rbf_nonlinear.py --data circles --output circles.png
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from scipy.special import ndtri
from sklearn.datasets import make_circles, make_moons
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from kernelcw import SCWClassifier


def make_data(name: str, n_samples: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's synthetic two-class problems in the plane."""
    if name == "moons":
        return make_moons(n_samples, noise=0.25, random_state=seed)
    return make_circles(n_samples, noise=0.1, factor=0.5, random_state=seed)


def require_matplotlib() -> None:
    """Exit with a clear message, before any work, when matplotlib is missing: kernelcw
    does not require it, its ``plot`` extra does."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise SystemExit(
            "rbf_nonlinear.py draws its figure with matplotlib, which is not installed; "
            'install it with: pip install "kernelcw[plot]"'
        ) from None


def plot(path: Path, kernel_model, linear_model, X_tr, y_tr, X_te, y_te) -> None:
    """Boundary, confidence map and margin histograms, written to ``path``."""
    # The Agg canvas directly: no GUI backend is touched, nothing global changes.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    lo, hi = X_tr.min(axis=0) - 1.0, X_tr.max(axis=0) + 1.0
    g0, g1 = np.meshgrid(np.linspace(lo[0], hi[0], 150), np.linspace(lo[1], hi[1], 150))
    grid = np.column_stack([g0.ravel(), g1.ravel()])
    f = kernel_model.decision_function(grid).reshape(g0.shape)
    p = kernel_model.predict_proba(grid)[:, 1].reshape(g0.shape)

    fig = Figure(figsize=(15, 4.6), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    ax1, ax2, ax3 = fig.subplots(1, 3)

    ax1.contourf(g0, g1, f > 0, levels=[-0.5, 0.5, 1.5], colors=["#c6dbef", "#fcbba1"])
    ax1.contour(g0, g1, f, levels=[0.0], colors="k", linewidths=1.5)
    ax1.scatter(*X_tr.T, c=y_tr, cmap="coolwarm", s=10, edgecolors="none")
    sv = kernel_model.support_vectors_
    ax1.scatter(
        *sv.T,
        s=40,
        facecolors="none",
        edgecolors="k",
        linewidths=0.6,
        label=f"support vectors ({len(sv)})",
    )
    ax1.legend(loc="lower left", fontsize=8)
    ax1.set_title("SCW-I, RBF kernel: decision boundary")

    im = ax2.contourf(g0, g1, p, levels=np.linspace(0, 1, 21), cmap="coolwarm")
    ax2.contour(g0, g1, f, levels=[0.0], colors="k", linewidths=1.0)
    ax2.scatter(*X_te.T, c=y_te, cmap="coolwarm", s=8, edgecolors="k", linewidths=0.3)
    fig.colorbar(im, ax=ax2, label="predict_proba (class 1)")
    ax2.set_title("confidence P(w . phi(x) > 0), w ~ N(mu, Sigma)")

    # The probabilistic margin z = y mu . x / sqrt(x' Sigma x): the margin in units
    # of its own standard deviation under N(mu, Sigma), so the two models compare on
    # one scale. predict_proba of the true class is Phi(z); invert it, clipped
    # because Phi(z) rounds to 1 beyond z ~ 8.
    rows = np.arange(len(y_te))
    true_col = np.searchsorted(kernel_model.classes_, y_te)
    z = {
        label: np.clip(ndtri(model.predict_proba(X_te)[rows, true_col]), -8.0, 8.0)
        for model, label in ((linear_model, "linear kernel"), (kernel_model, "RBF kernel"))
    }
    bins = np.linspace(min(v.min() for v in z.values()), max(v.max() for v in z.values()), 40)
    for label, v in z.items():
        ax3.hist(v, bins=bins, alpha=0.55, label=label)
    ax3.axvline(0.0, color="k", lw=1)
    ax3.set_xlabel("y mu.x / sqrt(x' Sigma x) on the test set (< 0: a mistake)")
    ax3.set_ylabel("test points")
    ax3.legend()
    ax3.set_title("probabilistic margin distribution")
    fig.savefig(path, dpi=100)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", choices=["moons", "circles"], default="moons")
    ap.add_argument("--n-samples", type=int, default=1000)
    ap.add_argument("--gamma", type=float, default=1.0, help="RBF width (default 1.0)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--output", type=Path, default=Path("rbf_nonlinear.png"))
    args = ap.parse_args(argv)
    require_matplotlib()

    X, y = make_data(args.data, args.n_samples, args.seed)
    X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.3, random_state=args.seed)
    # The learners have no bias term: centring the data lets the linear model's
    # boundary, which passes through the origin, cut the data where it can.
    scaler = StandardScaler().fit(X_tr)
    X_tr, X_te = scaler.transform(X_tr), scaler.transform(X_te)

    # One online pass each. kernel="rbf" selects the dual (kernel) engine.
    kernel_model = SCWClassifier(kernel="rbf", gamma=args.gamma).fit(X_tr, y_tr)
    linear_model = SCWClassifier().fit(X_tr, y_tr)
    acc_rbf = kernel_model.score(X_te, y_te)
    acc_lin = linear_model.score(X_te, y_te)

    print(f"data: {args.data}, {len(X_tr)} training and {len(X_te)} test points")
    print(f"{'learner':<24} {'test accuracy':>13} {'support vectors':>15}")
    print(
        f"{f'SCW-I, RBF (gamma={args.gamma:g})':<24} {acc_rbf:>13.3f} {kernel_model.n_support_:>15}"
    )
    print(f"{'SCW-I, linear':<24} {acc_lin:>13.3f} {'-':>15}")

    plot(args.output, kernel_model, linear_model, X_tr, y_tr, X_te, y_te)
    print(f"figure: {args.output}")
    return {
        "accuracy_rbf": acc_rbf,
        "accuracy_linear": acc_lin,
        "n_support": kernel_model.n_support_,
        "figure": args.output,
    }


if __name__ == "__main__":
    main()
