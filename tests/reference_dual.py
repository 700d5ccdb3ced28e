"""Slow, obviously-correct NumPy reference for the dual (kernel) learners of ``kernelcw``.

Written independently of ``kernelcw/`` from ``doc/dual-form.md`` section 1 (the
representer form) and ``doc/rules.md``. One round at a time, the kernel evaluated by
the plain formulas below (not kernelcw's), the step from the printed formulas of
``tests/reference.py`` (:func:`reference.ref_rule`, in decimal arithmetic by default), and
the coefficients kept explicitly:

    mu    = sum_p nu_p phi(x_p)
    Sigma = a I + sum_{p,q} Pi_pq phi(x_p) phi(x_q)'

over the support set S (the rounds that updated, in order). A round with k = K(S, x) and
kappa = k(x, x) reads

    f = mu . x = nu . k,   v = x' Sigma x = a kappa + k' Pi k,   c = Pi k,   m = y f,

asks the rule for (alpha, beta) and, when it updates (Sigma x = a phi(x) + sum_p c_p phi(x_p)),

    nu <- [nu + alpha y c, alpha y a]
    Pi <- [[Pi - beta c c', -beta a c], [-beta a c', -beta a^2]].

First-order rules (Perceptron, PA, PA-I, PA-II) keep Sigma = a I (Pi = 0, c = 0), read
kappa in place of v and append alpha y a. Prediction sign(f) with sign(0) = +1; the mistake
is counted before the update.

Margin variance: a kernel that is not positive semi-definite shows up as kappa < 0 or
v < -1e-6 a kappa and raises a ValueError naming the kernel; otherwise a v below
``VAR_FLOOR * a * kappa`` (1e-12, the primal learners' floor) is raised to it and the round
counted in ``n_floored`` (second-order rules only).

Stream positions: every input the learner is shown gets the next position 0, 1, 2, ...
(counted across calls and passes); ``support`` holds the positions of the rounds that
updated. With ``kernel="precomputed"`` the inputs are kernel rows against the training
inputs: row t holds k(x_t, x_j) for every training input j, so k = row[support] and
kappa = row[t].
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from reference import FIRST_ORDER_RULES, Step, phi_from_eta, ref_rule, skip_negligible
from scipy.special import ndtr

__all__ = [
    "KERNELS",
    "PSD_TOL",
    "VAR_FLOOR",
    "RefDualLearner",
    "RefDualModel",
    "RefDualResult",
    "degree2_features",
    "kernel_name",
    "ref_kernel",
    "ref_kernel_diag",
    "resolve_gamma",
    "run_ref_dual",
]

KERNELS = ("linear", "rbf", "poly", "laplacian")
VAR_FLOOR = 1e-12
PSD_TOL = 1e-6


# ---------------------------------------------------------------------------------------
# Kernels: the plain formulas, one row at a time
# ---------------------------------------------------------------------------------------


def _dense(X) -> np.ndarray:
    if sp.issparse(X):
        X = X.toarray()
    X = np.asarray(X, dtype=float)
    return X[None, :] if X.ndim == 1 else X


def resolve_gamma(gamma, n_features: int) -> float:
    """gamma = None means 1 / n_features (scikit-learn's default)."""
    return 1.0 / n_features if gamma is None else float(gamma)


def kernel_name(kernel) -> str:
    """What an error message should name: the string, or the callable's __name__."""
    return kernel if isinstance(kernel, str) else getattr(kernel, "__name__", repr(kernel))


def ref_kernel(A, B, kernel, gamma: float = 1.0, degree: int = 3, coef0: float = 0.0):
    """K[i, j] = k(A_i, B_j):

    - linear     x . z
    - rbf        exp(-gamma |x - z|^2)
    - poly       (gamma x . z + coef0)^degree
    - laplacian  exp(-gamma |x - z|_1)
    - callable   kernel(A, B), which must return a (len(A), len(B)) array.
    """
    A = _dense(A)
    B = _dense(B)
    if callable(kernel):
        K = np.asarray(kernel(A, B), dtype=float)
        if K.shape != (A.shape[0], B.shape[0]):
            raise ValueError(f"kernel returned shape {K.shape}, not {(A.shape[0], B.shape[0])}")
        return K
    K = np.empty((A.shape[0], B.shape[0]))
    for i, x in enumerate(A):
        if kernel == "linear":
            K[i] = np.sum(x * B, axis=1)
        elif kernel == "rbf":
            K[i] = np.exp(-gamma * np.sum((x - B) ** 2, axis=1))
        elif kernel == "poly":
            K[i] = (gamma * np.sum(x * B, axis=1) + coef0) ** degree
        elif kernel == "laplacian":
            K[i] = np.exp(-gamma * np.sum(np.abs(x - B), axis=1))
        else:
            raise ValueError(f"unknown kernel {kernel!r}")
    return K


def ref_kernel_diag(A, kernel, gamma: float = 1.0, degree: int = 3, coef0: float = 0.0):
    """k(x, x) for every row x of A (callable: one 1 x 1 call per row)."""
    A = _dense(A)
    return np.array([ref_kernel(x, x, kernel, gamma, degree, coef0)[0, 0] for x in A])


def degree2_features(X) -> np.ndarray:
    """Explicit feature map of the degree-2 polynomial kernel with gamma = 1, coef0 = 1:
    phi(x) . phi(z) = (x . z + 1)^2 = sum_{i,j} x_i x_j z_i z_j + 2 x . z + 1, i.e.
    phi(x) = [x_i^2 (i), sqrt(2) x_i x_j (i < j), sqrt(2) x_i (i), 1]."""
    X = _dense(X)
    d = X.shape[1]
    iu, ju = np.triu_indices(d, k=1)
    return np.hstack(
        [X**2, math.sqrt(2.0) * X[:, iu] * X[:, ju], math.sqrt(2.0) * X, np.ones((len(X), 1))]
    )


# ---------------------------------------------------------------------------------------
# One binary learner on (k, kappa)
# ---------------------------------------------------------------------------------------


class RefDualLearner:
    """Binary dual learner, labels in {-1, +1}: explicit nu and Pi, one round at a time.

    Parameters as :class:`reference.RefLearner` (``rule``, ``a``, ``eta`` or ``phi``,
    ``C``, ``r``, ``precise``) plus ``name`` (the kernel, for error messages).
    State: ``nu`` (n,), ``Pi`` (n, n), ``support`` (stream positions), ``n_updates``,
    ``n_mistakes``, ``n_floored``, ``history`` (one :class:`reference.Step` per round),
    ``trace`` (the (f, v) each round saw, v after the floor; v = kappa for first-order
    rules) and ``zeta`` (the precision step of each support round).
    """

    def __init__(
        self,
        rule: str,
        a: float = 1.0,
        eta: float = 0.7,
        C: float = 1.0,
        r: float = 1.0,
        phi: float | None = None,
        precise: bool = True,
        name: str = "kernel",
    ) -> None:
        self.rule = rule
        self.a = float(a)
        self.phi = phi_from_eta(eta) if phi is None else float(phi)
        self.C = float(C)
        self.r = float(r)
        self.precise = precise
        self.name = name
        self.first_order = rule in FIRST_ORDER_RULES
        self.nu = np.zeros(0)
        self.Pi = np.zeros((0, 0))
        self.support: list[int] = []
        self.zeta: list[float] = []
        self.n_updates = 0
        self.n_mistakes = 0
        self.n_floored = 0
        self.history: list[Step] = []
        self.trace: list[tuple[float, float]] = []
        self.floored_at: list[int] = []  # positions of the floored rounds

    # -- reading the model -----------------------------------------------------------

    def score(self, k: np.ndarray) -> float:
        """f = mu . x = nu . k (k = K(S, x))."""
        return float(self.nu @ k) if self.nu.size else 0.0

    def variance(self, k: np.ndarray, kappa: float) -> float:
        """v = x' Sigma x = a kappa + k' Pi k (no floor)."""
        return self.a * kappa + (float(k @ self.Pi @ k) if self.nu.size else 0.0)

    def _not_psd(self, what: str):
        return ValueError(
            f"kernel {self.name!r} is not positive semi-definite: {what} on this round "
            f"(position {self._pos})"
        )

    # -- one round ----------------------------------------------------------------------

    def learn(self, k: np.ndarray, kappa: float, y: int, pos: int) -> Step:
        """One round with k = K(S, x) (aligned with ``support``), kappa = k(x, x), label
        y in {-1, +1} and stream position ``pos``. Returns the rule's step."""
        self._pos = pos
        k = np.asarray(k, dtype=float)
        kappa = float(kappa)
        y = int(y)
        if y not in (-1, 1):
            raise ValueError("labels must be -1/+1")
        if k.shape != self.nu.shape:
            raise ValueError(f"k has shape {k.shape}, the support set {self.nu.shape}")
        if not kappa >= 0.0:
            raise self._not_psd(f"k(x, x) = {kappa!r} < 0")
        f = self.score(k)
        mistake = (1 if f >= 0.0 else -1) != y
        self.n_mistakes += int(mistake)
        m = y * f
        v = kappa
        if self.first_order:
            step = ref_rule(self.rule, m, kappa, C=self.C, y=y, precise=self.precise)
            step = skip_negligible(step, step.alpha * self.a * kappa, f)
            if step.update:
                self.nu = np.append(self.nu, step.alpha * y * self.a)
                self.Pi = np.zeros((self.nu.size, self.nu.size))
        else:
            c = self.Pi @ k
            v = self.a * kappa + float(k @ c)
            if v < -PSD_TOL * self.a * kappa:
                raise self._not_psd(f"x' Sigma x = {v!r} < -{PSD_TOL:g} a k(x, x)")
            vmin = VAR_FLOOR * self.a * kappa
            if v < vmin:
                v = vmin
                self.n_floored += 1
                self.floored_at.append(int(pos))
            step = ref_rule(
                self.rule, m, v, phi=self.phi, C=self.C, r=self.r, y=y, precise=self.precise
            )
            step = skip_negligible(step, step.alpha * v, f)
            if step.update:
                a, b = self.a, step.beta
                n = self.nu.size
                nu = np.empty(n + 1)
                nu[:n] = self.nu + step.alpha * y * c
                nu[n] = step.alpha * y * a
                Pi = np.empty((n + 1, n + 1))
                Pi[:n, :n] = self.Pi - b * np.outer(c, c)
                Pi[:n, n] = -b * a * c
                Pi[n, :n] = -b * a * c
                Pi[n, n] = -b * a * a
                self.nu, self.Pi = nu, Pi
        if step.update:
            self.support.append(int(pos))
            self.zeta.append(step.zeta)
        self.history.append(step)
        self.trace.append((f, v))
        self.n_updates += int(step.update)
        return step


# ---------------------------------------------------------------------------------------
# A whole model: kernel, stream store, binary or one-vs-rest
# ---------------------------------------------------------------------------------------


class RefDualModel:
    """Binary (two classes) or one-vs-rest (more) dual model over a kernel.

    ``kernel``: "linear", "rbf", "poly", "laplacian", a callable k(A, B) -> matrix, or
    "precomputed" (inputs are kernel rows against the training inputs, see the module
    docstring). ``gamma=None`` is resolved to 1 / n_features on the first input.
    ``params`` go to :class:`RefDualLearner`.

    Binary: classes[0] -> -1, classes[1] -> +1, predicted classes[1] when f >= 0.
    One-vs-rest: model k sees +1 for classes[k]; every example updates every model;
    prediction classes[argmax_k f_k] (first of ties).
    """

    def __init__(
        self,
        rule: str,
        classes,
        kernel="rbf",
        gamma=None,
        degree: int = 3,
        coef0: float = 0.0,
        **params,
    ) -> None:
        self.classes = np.asarray(classes)
        if len(self.classes) < 2:
            raise ValueError("need at least two classes")
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.precomputed = isinstance(kernel, str) and kernel == "precomputed"
        n_models = 1 if len(self.classes) == 2 else len(self.classes)
        name = kernel_name(kernel)
        self.learners = [RefDualLearner(rule, name=name, **params) for _ in range(n_models)]
        self.stream: list[np.ndarray] = []  # every input shown, by position
        self.predictions: list = []

    @property
    def binary(self) -> bool:
        return len(self.learners) == 1

    def _k(self, A, B) -> np.ndarray:
        return ref_kernel(A, B, self.kernel, self.gamma, self.degree, self.coef0)

    def _rows(self, X) -> np.ndarray:
        X = _dense(X)
        if self.gamma is None and not self.precomputed:
            self.gamma = resolve_gamma(None, X.shape[1])
        return X

    # -- learning -----------------------------------------------------------------------

    def _round(self, x: np.ndarray, label):
        pos = len(self.stream)
        self.stream.append(x)
        if self.precomputed:
            row, kappa = x, float(x[pos])
        else:
            S = np.array(self.stream)
            row = self._k(x, S)[0]  # k(x, x_p) for every position p so far
            kappa = float(self._k(x, x)[0, 0])
        ks = [row[np.asarray(lr.support, dtype=int)] for lr in self.learners]
        scores = [lr.score(k) for lr, k in zip(self.learners, ks, strict=True)]
        if self.binary:
            pred = self.classes[1] if scores[0] >= 0.0 else self.classes[0]
            ys = [1 if label == self.classes[1] else -1]
        else:
            pred = self.classes[int(np.argmax(scores))]
            ys = [1 if label == c else -1 for c in self.classes]
        for lr, k, yb in zip(self.learners, ks, ys, strict=True):
            lr.learn(k, kappa, yb, pos)
        self.predictions.append(pred)
        return pred

    def learn(self, X, y) -> np.ndarray:
        """One pass over (X, y) in order; returns the labels predicted before each round."""
        X = self._rows(X)
        y = np.asarray(y)
        if len(X) != len(y):
            raise ValueError("X and y differ in length")
        return np.array([self._round(x, label) for x, label in zip(X, y, strict=True)])

    # -- reading the model --------------------------------------------------------------

    def _kernel_rows(self, X, lr: RefDualLearner) -> tuple[np.ndarray, np.ndarray]:
        """(K(X, S) of learner lr, k(x, x) per row; NaN for precomputed, unknown)."""
        X = self._rows(X)
        sup = np.asarray(lr.support, dtype=int)
        if self.precomputed:
            return X[:, sup], np.full(len(X), np.nan)
        if sup.size == 0:
            Ks = np.zeros((len(X), 0))
        else:
            Ks = self._k(X, np.array(self.stream)[sup])
        return Ks, ref_kernel_diag(X, self.kernel, self.gamma, self.degree, self.coef0)

    def decision_function(self, X) -> np.ndarray:
        """nu . k for every row: (n,) binary, (n, K) one-vs-rest."""
        F = np.column_stack([self._kernel_rows(X, lr)[0] @ lr.nu for lr in self.learners])
        return F[:, 0] if self.binary else F

    def variance(self, X, kappa=None) -> np.ndarray:
        """a k(x, x) + k' Pi k per row and model, (n, K) (``kappa`` for precomputed)."""
        cols = []
        for lr in self.learners:
            Ks, diag = self._kernel_rows(X, lr)
            if kappa is not None:
                diag = np.asarray(kappa, dtype=float)
            cols.append(lr.a * diag + np.einsum("ij,jk,ik->i", Ks, lr.Pi, Ks))
        return np.column_stack(cols)

    def predict_proba(self, X, kappa=None) -> np.ndarray:
        """Phi(f / sqrt(v)) for classes[1] (binary: [1 - p, p]); one-vs-rest p normalised
        over the classes (uniform when all are 0). v = 0 gives Phi(+-inf) by the sign
        of f (0.5 at f = 0)."""
        F = self.decision_function(X).reshape(len(_dense(X)), -1)
        V = self.variance(X, kappa)
        with np.errstate(divide="ignore", invalid="ignore"):
            Z = np.where(V > 0, F / np.sqrt(np.maximum(V, 0.0)), np.sign(F) * np.inf)
        P = ndtr(np.where(np.isnan(Z), 0.0, Z))
        if self.binary:
            return np.column_stack([1.0 - P[:, 0], P[:, 0]])
        tot = P.sum(axis=1, keepdims=True)
        return np.where(tot > 0, P / np.where(tot > 0, tot, 1.0), 1.0 / P.shape[1])

    def support_gram(self, k: int = 0) -> np.ndarray:
        """K(S, S) of model k (precomputed: read off the stored kernel rows)."""
        sup = np.asarray(self.learners[k].support, dtype=int)
        if self.precomputed:
            return np.array(self.stream)[sup][:, sup] if sup.size else np.zeros((0, 0))
        S = self.support_vectors(k)
        return self._k(S, S)

    def support_vectors(self, k: int = 0) -> np.ndarray:
        """The support inputs of model k in the order they entered, (n_sv, d)."""
        lr = self.learners[k]
        d = len(self.stream[0]) if self.stream else 0
        if not lr.support:
            return np.zeros((0, d))
        return np.array(self.stream)[np.asarray(lr.support, dtype=int)]

    def primal(self, k: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """(mu, Sigma) of model k for the linear kernel: mu = S' nu, Sigma = a I + S' Pi S."""
        S = self.support_vectors(k)
        lr = self.learners[k]
        d = S.shape[1]
        return S.T @ lr.nu, lr.a * np.eye(d) + S.T @ lr.Pi @ S


@dataclass
class RefDualResult:
    classes: np.ndarray
    predictions: np.ndarray  # label predicted before learning, every round (all passes)
    cumulative_mistakes: np.ndarray
    nu: object  # (n_sv,) binary, list of them one-vs-rest
    Pi: object  # (n_sv, n_sv) binary, list
    support: object  # (n_sv,) int positions, binary; list
    n_updates: object  # int binary, (K,) one-vs-rest
    n_mistakes: object
    n_floored: object
    model: RefDualModel

    @property
    def learners(self) -> list[RefDualLearner]:
        return self.model.learners


def run_ref_dual(
    rule: str, X, y, kernel="rbf", classes=None, n_passes: int = 1, model_cls=None, **params
) -> RefDualResult:
    """Feed (X, y) ``n_passes`` times, in order, to a fresh ``model_cls`` (default
    :class:`RefDualModel`).

    ``params``: gamma, degree, coef0 and the learner's parameters.
    """
    y = np.asarray(y)
    classes = np.unique(y) if classes is None else np.asarray(classes)
    model = (model_cls or RefDualModel)(rule, classes, kernel=kernel, **params)
    preds = np.concatenate([model.learn(X, y) for _ in range(n_passes)])
    lrs = model.learners

    def per_model(get, as_array=False):
        vals = [get(lr) for lr in lrs]
        if model.binary:
            return vals[0]
        return np.array(vals) if as_array else vals

    return RefDualResult(
        classes=classes,
        predictions=preds,
        cumulative_mistakes=np.cumsum(preds != np.tile(y, n_passes)),
        nu=per_model(lambda lr: lr.nu),
        Pi=per_model(lambda lr: lr.Pi),
        support=per_model(lambda lr: np.asarray(lr.support, dtype=int)),
        n_updates=per_model(lambda lr: lr.n_updates, as_array=True),
        n_mistakes=per_model(lambda lr: lr.n_mistakes, as_array=True),
        n_floored=per_model(lambda lr: lr.n_floored, as_array=True),
        model=model,
    )
