"""Probabilities: log loss, Brier score and AUC of kernelcw's predict_proba against
LogisticRegression, Platt-scaled SVC and CalibratedClassifierCV, on digits, moons and magic.

kernelcw's ``predict_proba`` is the model's own belief under its Gaussian over weights
(two classes: Phi(m / sqrt(v)); more: the probability that a class's one-vs-rest score is
the largest). The kernelcw learners (SCW-I, AROW, CW-Stdev; linear primal full and RBF
dual, one online pass, default parameters) are measured as they are and wrapped in
``CalibratedClassifierCV`` (3-fold, sigmoid on ``decision_function``). The former
``predict_proba`` is shown as well: two classes [1 - Phi(z), Phi(z)] (exact 0 and 1 once
|z| > 8.3), more classes each model's Phi(m_k / sqrt(v_k)) normalised over the classes.
Each set is split once (``--seed``) into halves, features z-scored with the training
half's statistics.

- Log loss: mean -log P(true class) (sklearn ``log_loss``).
- Brier: mean over rows of sum_k (P_k - [y = k])^2, halved for two classes (there it is
  sklearn's ``brier_score_loss`` of P(classes_[1])).
- AUC: two classes ``roc_auc_score``; more: the macro average of the one-vs-rest AUCs.
  "AUC by m" ranks by ``decision_function`` instead of the probabilities.
- "0/1": rows with a probability exactly 0 or 1; "top P": the mean largest probability
  (compare with the accuracy: an honest model's mean confidence is close to it).
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy.special import ndtr
from sklearn.calibration import CalibratedClassifierCV
from sklearn.datasets import load_digits, make_moons
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss, roc_auc_score
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC

from kernelcw import AROWClassifier, CWClassifier, SCWClassifier
from kernelcw.estimators._input import with_intercept

from ._common import argument_parser, md_table, progress, write_result
from .datasets import magic


def datasets(seed: int, magic_rows: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    X_d, y_d = load_digits(return_X_y=True)
    X_m, y_m = make_moons(n_samples=2000, noise=0.3, random_state=seed)
    X_g, y_g = magic()
    keep = np.random.default_rng(seed).permutation(len(y_g))[:magic_rows]
    return {
        "digits (10 classes)": (X_d, y_d),
        "moons (noise 0.3)": (X_m, y_m),
        f"magic ({magic_rows} rows)": (X_g[keep], y_g[keep]),
    }


def kernelcw_learners() -> dict[str, object]:
    return {
        "SCW-I linear": SCWClassifier(),
        "AROW linear": AROWClassifier(),
        "CW-Stdev linear": CWClassifier(),
        "SCW-I RBF": SCWClassifier(kernel="rbf"),
        "AROW RBF": AROWClassifier(kernel="rbf"),
        "CW-Stdev RBF": CWClassifier(kernel="rbf"),
    }


def baselines(seed: int) -> dict[str, object]:
    return {
        "LogisticRegression": LogisticRegression(max_iter=2000),
        # SVC(probability=True) is deprecated in scikit-learn 1.9 (removed in 1.11); its
        # warning names this as the replacement: Platt scaling on 5 folds, one SVC refit
        "SVC + CalibratedClassifierCV(ensemble=False), RBF": CalibratedClassifierCV(
            SVC(random_state=seed), ensemble=False
        ),
    }


def former(est, X) -> np.ndarray:
    """The former predict_proba: [1 - Phi(z), Phi(z)] for two classes (exact 0 and 1 once
    |z| > 8.3); Phi(m_k / sqrt(v_k)) normalised over k for more."""
    eng = est.engine_
    X = with_intercept(X, eng.spec)  # the engine's columns (the intercept's last)
    P = ndtr(eng.decision(X) / np.sqrt(eng.margin_variance(X)))
    if P.shape[1] == 1:
        return np.column_stack([1.0 - P[:, 0], P[:, 0]])
    return P / P.sum(axis=1, keepdims=True)


def brier(y_idx: np.ndarray, P: np.ndarray) -> float:
    onehot = np.eye(P.shape[1])[y_idx]
    b = np.mean(np.sum((P - onehot) ** 2, axis=1))
    return b / 2 if P.shape[1] == 2 else b


def auc(y_idx: np.ndarray, S: np.ndarray) -> float:
    """Two classes: AUC of the score for class 1 (S is (n,) or (n, 2)); else macro OvR."""
    if S.ndim == 1 or S.shape[1] == 2:
        return roc_auc_score(y_idx, S if S.ndim == 1 else S[:, 1])
    return float(np.mean([roc_auc_score(y_idx == k, S[:, k]) for k in range(S.shape[1])]))


def row(name: str, est, P: np.ndarray, y_idx: np.ndarray, X) -> list[object]:
    acc = np.mean(P.argmax(axis=1) == y_idx) if est is None else np.mean(est.predict(X) == y_idx)
    by_m = "-"
    if est is not None and hasattr(est, "engine_"):
        by_m = f"{auc(y_idx, est.decision_function(X)):.4f}"
    exact = np.mean(np.any((P == 0) | (P == 1), axis=1))
    return [
        name,
        f"{acc:.3f}",
        f"{log_loss(y_idx, P, labels=np.arange(P.shape[1])):.3f}",
        f"{brier(y_idx, P):.4f}",
        f"{auc(y_idx, P):.4f}",
        by_m,
        f"{100 * exact:.1f} %",
        f"{np.mean(P.max(axis=1)):.3f}",
    ]


HEADER = ["model", "accuracy", "log loss", "Brier", "AUC", "AUC by m", "0/1", "top P"]


def one_set(X, y, seed: int, bar) -> list[list[object]]:
    classes, y_idx = np.unique(y, return_inverse=True)
    X_tr, X_te, y_tr, y_te = train_test_split(
        X, y_idx, test_size=0.5, random_state=seed, stratify=y_idx
    )
    scaler = StandardScaler().fit(X_tr)
    X_tr, X_te = scaler.transform(X_tr), scaler.transform(X_te)
    rows = []
    for name, est in baselines(seed).items():
        est.fit(X_tr, y_tr)
        rows.append(row(name, est, est.predict_proba(X_te), y_te, X_te))
        bar.update(1)
    for name, est in kernelcw_learners().items():
        est.fit(X_tr, y_tr)
        rows.append(row(f"{name} (predict_proba)", est, est.predict_proba(X_te), y_te, X_te))
        what = "normalised OvR" if len(classes) > 2 else "1 - Phi(z), Phi(z)"
        rows.append(row(f"{name} (former: {what})", None, former(est, X_te), y_te, X_te))
        cal = CalibratedClassifierCV(kernelcw_learners()[name], cv=3).fit(X_tr, y_tr)
        rows.append(
            row(f"{name} + CalibratedClassifierCV", cal, cal.predict_proba(X_te), y_te, X_te)
        )
        bar.update(1)
    return rows


def main(argv=None):
    ap = argument_parser(__doc__)
    ap.add_argument("--seed", type=int, default=0, help="the split and moons' noise")
    ap.add_argument("--magic-rows", type=int, default=6000, help="magic rows used (half test)")
    ap.add_argument("--no-write", action="store_true", help="print only, no results file")
    args = ap.parse_args(argv)
    sets = datasets(args.seed, args.magic_rows)
    parts = []
    n_models = len(baselines(args.seed)) + len(kernelcw_learners())
    with progress(total=len(sets) * n_models, desc="proba", unit="model") as bar:
        for name, (X, y) in sets.items():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", category=UserWarning)
                rows = one_set(X, y, args.seed, bar)
            parts.append(f"## {name}\n\n{md_table(HEADER, rows)}")
    body = (
        "Test half of each set; lower log loss and Brier are better, higher AUC. "
        "See the benchmark's docstring for the definitions.\n\n" + "\n\n".join(parts)
    )
    print(body)
    if not args.no_write:
        print(write_result("proba", "Probabilities: log loss, Brier, AUC", body))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
