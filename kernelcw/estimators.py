"""scikit-learn estimators: CW-Stdev/CW-Var, SCW-I/II, AROW, SOP, PA, Perceptron.

The public classes only store their parameters; ``fit`` resets the model and runs
the same machinery as ``partial_fit``. One binary model per one-vs-rest class is
kept in arrays with a leading class axis (see :mod:`kernelcw.primal`).
"""

from __future__ import annotations

import math
import numbers
import os
import warnings

import numpy as np
import scipy.sparse as sp
from scipy.special import ndtr, ndtri
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils import check_random_state
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from . import primal
from ._validation import check_option, check_positive
from .budget import POLICIES
from .dual import DualModel
from .kernels import KERNELS, Kernel
from .primal import DIAG_METHODS, RuleParams
from .rules import FIRST_ORDER, RULES, VAR_FLOOR

__all__ = [
    "primal_from_dual",
    "CWClassifier",
    "SCWClassifier",
    "AROWClassifier",
    "SOPClassifier",
    "PAClassifier",
    "PerceptronClassifier",
]

_MODES = ("auto", "primal", "dual")
_SOLVERS = ("cholesky", "explicit")
#: Inputs per block of the dual engine when ``block_size=None``.
DUAL_BLOCK = 256
_COVARIANCES = ("full", "diag")


def _check_eta(eta) -> float:
    if isinstance(eta, bool) or not isinstance(eta, numbers.Real) or not 0.5 < eta < 1.0:
        raise ValueError(
            f"eta={eta!r} must lie in the open interval (0.5, 1): it is the probability "
            "of a correct classification the update enforces"
        )
    return float(eta)


def _values(X) -> np.ndarray:
    return X.data if sp.issparse(X) else X


def _all_finite(X) -> bool:
    """No NaN or inf in X (max/min propagate NaN; no temporaries)."""
    v = _values(X)
    return v.size == 0 or (math.isfinite(v.max()) and math.isfinite(v.min()))


def _first_nonfinite_row(X) -> int:
    """Index of the first row holding NaN or +-inf, or -1."""
    if _all_finite(X):
        return -1
    if sp.issparse(X):
        bad = np.flatnonzero(~np.isfinite(X.data))
        if bad.size == 0:
            return -1
        return int(np.searchsorted(X.indptr, bad[0], side="right") - 1)
    bad = np.flatnonzero(~np.isfinite(X).all(axis=1))
    return int(bad[0]) if bad.size else -1


def _canonical(X):
    """X itself, or for a CSR matrix with duplicate or unsorted entries a canonical copy
    (duplicates summed): the sparse walks read each stored entry as one x_j."""
    if sp.issparse(X) and not X.has_canonical_format:
        X = X.copy()
        X.sum_duplicates()
    return X


def _check_finite_rows(X) -> None:
    row = _first_nonfinite_row(X)
    if row >= 0:
        raise ValueError(
            f"Input X contains NaN or infinity in row {row} (0-based); remove or impute it first"
        )


def _first_overflowing_row(X, a: float) -> int:
    """First row whose squared norm times ``a`` overflows float64, or -1.

    The bound max|x_ij|^2 * (entries per row) * a settles the common case
    without a pass over the rows.
    """
    v = _values(X)
    if v.size == 0:
        return -1
    big = max(abs(float(v.max())), abs(float(v.min())))
    per_row = int(np.diff(X.indptr).max()) if sp.issparse(X) else X.shape[1]
    if math.isfinite(big * big * per_row * a):
        return -1
    if sp.issparse(X):
        sq = np.asarray(X.multiply(X).sum(axis=1)).ravel()
    else:
        sq = np.einsum("ij,ij->i", X, X)
    bad = np.flatnonzero(~np.isfinite(sq * a))
    return int(bad[0]) if bad.size else -1


def _unique_labels(labels: np.ndarray, what: str) -> np.ndarray:
    """np.unique, with a clear error for labels that cannot be ordered (mixed types)."""
    try:
        return np.unique(labels)
    except TypeError as exc:
        kinds = sorted({type(v).__name__ for v in labels.ravel()[:1000]})
        raise ValueError(
            f"{what} mixes label types ({', '.join(kinds)}) that cannot be sorted into classes: "
            "use one type"
        ) from exc


#: The prior scales a the dual engine accepts: it forms a^2 k(x, z), which must stay well
#: inside float64's range (the primal engine takes any a > 0).
DUAL_A_RANGE = (1e-100, 1e100)


def _check_targets(y: np.ndarray) -> None:
    """scikit-learn's check_classification_targets, without its cost for the common
    dtypes (it re-validates y each call: a third of a small fit's time). Integer, bool
    and string labels are classes by their dtype; floats must be integral; other
    (object) arrays go through scikit-learn's check."""
    kind = y.dtype.kind
    if kind in "iubUS":
        return
    if kind == "f":
        if not np.all(np.isfinite(y)):
            raise ValueError("Input y contains NaN or infinity.")
        if np.any(y != np.floor(y)):
            raise ValueError(
                "Unknown label type: continuous. Maybe you are trying to fit a classifier, "
                "which expects discrete classes on a regression target with continuous values."
            )
        return
    check_classification_targets(y)


class _CWBase(ClassifierMixin, BaseEstimator):
    """Shared machinery of every estimator (not public).

    Subclasses store their own parameters in ``__init__`` and implement
    ``_rule_params()``, which validates them and returns a ``RuleParams``.
    """

    # ------------------------------------------------------------ parameters

    def _common_params(self, rule: RuleParams) -> dict:
        """Validate the parameters every estimator shares; return the engine choice."""
        a = check_positive("a", self.a)
        if not callable(self.kernel):
            check_option("kernel", self.kernel, KERNELS)
        check_option("mode", self.mode, _MODES)
        check_option("solver", self.solver, _SOLVERS)
        if self.block_size is not None and (
            isinstance(self.block_size, bool)
            or not isinstance(self.block_size, numbers.Integral)
            or self.block_size < 1
        ):
            raise ValueError(f"block_size={self.block_size!r} must be None or an integer >= 1")
        check_option("covariance", self.covariance, _COVARIANCES)
        check_option("diag_method", self.diag_method, tuple(DIAG_METHODS))
        if (
            isinstance(self.n_iter, bool)
            or not isinstance(self.n_iter, numbers.Integral)
            or self.n_iter < 1
        ):
            raise ValueError(f"n_iter={self.n_iter!r} must be an integer >= 1")
        if not isinstance(self.shuffle, bool | np.bool_):
            raise ValueError(f"shuffle={self.shuffle!r} must be True or False")
        if self.budget is not None and (
            isinstance(self.budget, bool)
            or not isinstance(self.budget, numbers.Integral)
            or self.budget < 1
        ):
            raise ValueError(f"budget={self.budget!r} must be None or an integer >= 1")
        check_option("budget_policy", self.budget_policy, POLICIES)
        # gamma, degree and coef0 are checked whatever the kernel, as scikit-learn's SVC does
        Kernel(self.kernel, self.gamma, self.degree, self.coef0, 1)
        linear = isinstance(self.kernel, str) and self.kernel == "linear"
        if self.mode == "primal" and not linear:
            raise ValueError(
                f"mode='primal' needs kernel='linear' (got kernel={self.kernel!r}): a "
                "non-linear kernel is learned in the dual; use mode='auto' or 'dual'"
            )
        if self.mode == "primal" and self.budget is not None:
            raise ValueError(
                "a budget bounds the support set of the dual engine: use mode='auto' or "
                "'dual' (the primal engine keeps no support vectors)"
            )
        dual = self.mode == "dual" or not linear or self.budget is not None
        if dual and not DUAL_A_RANGE[0] <= a <= DUAL_A_RANGE[1]:
            raise ValueError(
                f"a={self.a!r} is outside [{DUAL_A_RANGE[0]:g}, {DUAL_A_RANGE[1]:g}], the range "
                "the dual engine supports (it works with a^2 k(x, z)); rescale the kernel or "
                "X instead (CW-Stdev's predictions do not depend on a; for the other rules a "
                "change of a is a change of eta, C or r)"
            )
        if dual and self.covariance == "diag" and rule.rule not in FIRST_ORDER:
            raise ValueError(
                "covariance='diag' exists only in the primal mode: the dual engine keeps "
                "the full covariance in the kernel's feature space (use covariance='full')"
            )
        return {"a": a, "dual": dual}

    @property
    def _is_dual(self) -> bool:
        return "_dual" in self.__dict__

    def _params(self) -> tuple[RuleParams, float, bool]:
        """Validate every parameter: (rule, a, whether the dual engine learns)."""
        rule = self._rule_params()
        common = self._common_params(rule)
        rule.a = common["a"]
        return rule, common["a"], common["dual"]

    # ------------------------------------------------------------ validation

    def _validate_X(self, X, reset: bool):
        X = validate_data(
            self,
            X,
            accept_sparse="csr",
            dtype=np.float64,
            ensure_all_finite=False,
            reset=reset,
        )
        X = _canonical(X)
        _check_finite_rows(X)
        return X

    def _validate_training(self, X, y, classes, first_call: bool, dual: bool, square: bool = False):
        """All checks before any state changes; returns (X, y, classes_). ``dual``: the
        engine that will learn (from ``_params``); ``square``: a precomputed kernel's X
        must be the whole Gram matrix (``fit``)."""
        # validate_data(reset=True) writes n_features_in_ (and feature_names_in_):
        # put them back if anything below fails, so a bad call changes nothing.
        saved = {
            k: self.__dict__[k]
            for k in ("n_features_in_", "feature_names_in_")
            if k in self.__dict__
        }
        try:
            X, y = validate_data(
                self,
                X,
                y,
                accept_sparse="csr",
                dtype=np.float64,
                ensure_all_finite=False,
                reset=first_call,
            )
            X = _canonical(X)
            _check_finite_rows(X)
            if (
                square
                and isinstance(self.kernel, str)
                and self.kernel == "precomputed"
                and (X.shape[0] != X.shape[1])
            ):
                raise ValueError(
                    "kernel='precomputed': fit needs the square Gram matrix "
                    f"K(X_train, X_train), got X of shape {X.shape}"
                )
            row = _first_overflowing_row(X, float(self.a))
            if row >= 0:
                raise ValueError(
                    f"row {row} of X is too large: its squared norm times a overflows "
                    "float64 (rescale X)"
                )
            _check_targets(y)
            classes_ = self._resolve_classes(y, classes, first_call)
            if first_call:
                self._check_memory(X.shape[1], len(classes_), dual)
        except Exception:
            for k in ("n_features_in_", "feature_names_in_"):
                self.__dict__.pop(k, None)
            self.__dict__.update(saved)
            raise
        return X, y, classes_

    def _resolve_classes(self, y, classes, first_call: bool) -> np.ndarray:
        if first_call:
            if classes is None:
                classes_ = _unique_labels(y, "y")
                if classes_.size < 2:
                    raise ValueError(
                        f"y contains only one class ({classes_.tolist()[0]!r}); a classifier needs "
                        "two. Pass classes=[...] to partial_fit to declare the others."
                    )
            else:
                given = np.asarray(classes)
                if given.ndim != 1:
                    raise ValueError(f"classes={classes!r} must be a 1-d list of labels")
                if given.dtype.kind == "f" and not np.all(np.isfinite(given)):
                    raise ValueError(f"classes={classes!r} holds NaN or infinity")
                classes_ = _unique_labels(given, "classes")
                if classes_.size < 2:
                    raise ValueError(f"classes={classes!r} must hold at least two labels")
        else:
            classes_ = self.classes_
            if classes is not None and not np.array_equal(np.unique(classes), classes_):
                raise ValueError(
                    f"classes={classes!r} is not the same as on the first call "
                    f"to partial_fit ({classes_!r})"
                )
        try:
            unknown = np.setdiff1d(_unique_labels(y, "y"), classes_)
        except TypeError as exc:  # labels of another type than the classes
            raise ValueError(
                f"y holds labels of another type than the classes {classes_.tolist()!r}"
            ) from exc
        if unknown.size:
            raise ValueError(
                f"y contains labels {unknown.tolist()!r} that are not in classes "
                f"{classes_.tolist()!r}"
            )
        return classes_

    # ------------------------------------------------------------ state

    @property
    def _n_models(self) -> int:
        return 1 if len(self.classes_) == 2 else len(self.classes_)

    def _init_state(
        self, classes_: np.ndarray, d: int, a: float, rule: RuleParams, dual: bool
    ) -> None:
        K = 1 if len(classes_) == 2 else len(classes_)
        for key in ("mean_", "covariance_", "_dual"):
            self.__dict__.pop(key, None)
        self._began_with = self._structure()
        if dual:
            kernel = Kernel(self.kernel, self.gamma, self.degree, self.coef0, d)
            block = DUAL_BLOCK if self.block_size is None else self.block_size
            seed = int(check_random_state(self.random_state).randint(0, 2**62))
            self._dual = DualModel(
                kernel, rule, K, self.solver, block, self.budget, self.budget_policy, seed
            )
            self._set_counters(classes_, K)
            return
        full = self.covariance == "full"
        shape_mu = (d,) if K == 1 else (K, d)
        self.mean_ = np.zeros(shape_mu)
        if full:
            cov = np.zeros((K, d, d))
            cov[:, np.arange(d), np.arange(d)] = a
        else:
            cov = np.full((K, d), a)
        self.covariance_ = cov[0] if K == 1 else cov
        self._set_counters(classes_, K)

    #: Parameters that shape the stored state: ``partial_fit`` refuses to continue a model
    #: after ``set_params`` changed one of them (the rule's own parameters, such as eta, C
    #: or r, may change between calls and apply from the next round on).
    _STRUCTURAL = (
        "a",
        "kernel",
        "gamma",
        "degree",
        "coef0",
        "mode",
        "solver",
        "covariance",
        "budget",
        "budget_policy",
    )

    def _structure(self) -> dict:
        return {k: getattr(self, k) for k in self._STRUCTURAL}

    def _check_structure(self) -> None:
        """ValueError if set_params changed a structural parameter since the model began."""
        began = self.__dict__.get("_began_with")
        if began is None:
            return
        now = self._structure()
        changed = [
            k
            for k in self._STRUCTURAL
            if not (now[k] is began[k] or (not callable(now[k]) and now[k] == began[k]))
        ]
        if changed:
            what = ", ".join(f"{k} from {began[k]!r} to {now[k]!r}" for k in changed)
            raise ValueError(
                f"set_params changed {what} since this model began; these shape the stored "
                "state, so partial_fit cannot continue it: call fit to start over (or set "
                "them back)"
            )

    def _check_memory(self, d: int, n_classes: int, dual: bool) -> None:
        """A primal full covariance must fit in half of this machine's memory (checked
        with the input, before any state changes)."""
        if dual or self.covariance != "full":
            return
        K = 1 if n_classes == 2 else n_classes
        need = K * d * d * 8
        try:
            avail = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError, AttributeError):  # pragma: no cover
            avail = None
        if avail is not None and need > avail // 2:
            raise ValueError(
                f"covariance='full' needs {need / 2**30:.1f} GiB for {K} model(s) with "
                f"{d} features, more than half of this machine's memory; use "
                "covariance='diag' for high-dimensional (e.g. text) data"
            )

    def _set_counters(self, classes_: np.ndarray, K: int) -> None:
        self.classes_ = classes_
        if K == 1:
            self.n_updates_ = 0
            self.n_mistakes_ = 0
            self.n_variance_floored_ = 0
        else:
            self.n_updates_ = np.zeros(K, dtype=np.int64)
            self.n_mistakes_ = np.zeros(K, dtype=np.int64)
            self.n_variance_floored_ = np.zeros(K, dtype=np.int64)

    def _label_matrix(self, y) -> np.ndarray:
        """(n, K) targets in {-1, +1} for the K binary models."""
        if len(self.classes_) == 2:
            return np.where(y == self.classes_[1], 1.0, -1.0)[:, None]
        return np.where(y[:, None] == self.classes_[None, :], 1.0, -1.0)

    def _learn(self, X, Y, rule: RuleParams, a: float, positions=None) -> np.ndarray:
        """One pass in the given order; returns (n, K) decision values before each update.

        ``positions``: the rows' positions in the training data (dual engine: what
        ``support_`` reports and where ``"precomputed"`` rows hold k(x, x)); by
        default the stream continues from the previous call.
        """
        K = self._n_models
        d = X.shape[1]
        out = np.empty((X.shape[0], K))
        if self._is_dual:
            self._dual.set_rule(rule)  # parameters may be set_params'd between calls
            n_upd, n_mis, n_fl = self._dual.learn(X, Y, out, positions)
        elif self.covariance == "full" and rule.rule not in FIRST_ORDER:
            mu = self.mean_.reshape(K, d)
            sigma = self.covariance_.reshape(K, d, d)
            # all or nothing: full_fit changes nothing in a block that fails, so only a call
            # of more than one block needs a copy of the state (O(d^2) per >= b rows)
            b = self.block_size or primal.default_block_size(d)
            saved = (mu.copy(), sigma.copy()) if X.shape[0] > b else None
            try:
                n_upd, n_mis, n_fl = primal.full_fit(
                    mu, sigma, X, Y, rule, out, block_size=self.block_size
                )
            except BaseException:
                if saved is not None:
                    mu[...], sigma[...] = saved
                raise
        else:
            mu = self.mean_.reshape(K, d)
            if self.covariance == "full":  # first-order: Sigma = a I never changes
                s = np.full((K, d), a)
            else:
                s = self.covariance_.reshape(K, d)
            # all or nothing: a copy of the coordinates this call can touch, put back if a
            # round fails part-way: for a few sparse rows of a wide model the columns of
            # their non-zeros (np.unique costs O(nnz log nnz)), else the whole (K, d) state
            few = sp.issparse(X) and 16 * X.nnz < K * d
            cols = np.unique(X.indices) if few else slice(None)
            saved = (mu[:, cols].copy(), s[:, cols].copy())
            try:
                n_upd, n_mis, n_fl = primal.diag_fit(mu, s, X, Y, rule, out, self.diag_method)
            except BaseException:
                mu[:, cols], s[:, cols] = saved
                raise
        first_floor = not np.any(self.n_variance_floored_) and n_fl.any()
        if K == 1:
            self.n_updates_ += int(n_upd[0])
            self.n_mistakes_ += int(n_mis[0])
            self.n_variance_floored_ += int(n_fl[0])
        else:
            self.n_updates_ += n_upd
            self.n_mistakes_ += n_mis
            self.n_variance_floored_ += n_fl
        if first_floor:
            warnings.warn(
                f"{type(self).__name__}: the margin variance fell below "
                f"{VAR_FLOOR:g} * a * |x|^2 on {int(n_fl.sum())} round(s) and was raised to "
                "that floor (n_variance_floored_ counts them). The model is certain to "
                "12 digits where it still errs: a hard-constraint rule on a non-separable "
                "stream (a soft rule, SCW or AROW, or a smaller eta avoids it), features of "
                "very different scales (standardise X), or, in the dual's explicit nu/Pi "
                "form (solver='explicit', or a budget other than 'oldest'), Pi's "
                "recursion drifting in floating point.",
                RuntimeWarning,
                stacklevel=3,
            )
        return out

    # ------------------------------------------------------------ training

    def fit(self, X, y):
        """Fit the model from scratch: ``n_iter`` passes over (X, y).

        Each pass walks the rows in order (``shuffle=False``) or in a fresh random
        order drawn from ``random_state``. One pass is the online learning of the
        papers; ``n_mistakes_`` counts the mistakes over all passes.
        """
        rule, a, dual = self._params()
        X, y, classes_ = self._validate_training(X, y, None, True, dual, square=True)
        self._init_state(classes_, X.shape[1], a, rule, dual)
        Y = self._label_matrix(y)
        rng = check_random_state(self.random_state)
        for _ in range(self.n_iter):
            if self.shuffle:
                order = rng.permutation(X.shape[0])
                self._learn(X[order], Y[order], rule, a, positions=order)
            else:
                self._learn(X, Y, rule, a, positions=np.arange(X.shape[0]))
        return self

    def partial_fit(self, X, y, classes=None):
        """Learn from (X, y) in the given order, continuing from the current model.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        classes : array-like, optional
            All labels the stream will hold. Needed on the first call only when
            the first batch does not show at least two of them.

        Returns
        -------
        self
        """
        self._learn_online(X, y, classes)
        return self

    def _learn_online(self, X, y, classes=None) -> np.ndarray:
        """partial_fit that returns the (n, K) decision values seen before each update."""
        rule, a, dual = self._params()
        first_call = not hasattr(self, "classes_")
        if not first_call:
            self._check_structure()
        if not first_call and dual != self._is_dual:
            raise ValueError(
                f"kernel={self.kernel!r}, mode={self.mode!r} selects the "
                f"{'dual' if dual else 'primal'} engine but this model was started in the "
                f"{'dual' if self._is_dual else 'primal'} one; call fit to start over"
            )
        X, y, classes_ = self._validate_training(X, y, classes, first_call, dual)
        if first_call:
            self._init_state(classes_, X.shape[1], a, rule, dual)
        return self._learn(X, self._label_matrix(y), rule, a)

    # ------------------------------------------------------------ prediction

    def _decision(self, X) -> np.ndarray:
        if self._is_dual:
            return self._dual.decision(X)[0]
        K = self._n_models
        mu = self.mean_.reshape(K, -1)
        return np.asarray(X @ mu.T)

    def decision_function(self, X):
        """The mean margin ``mu . x``: (n_samples,) for two classes, else (n_samples, K)."""
        check_is_fitted(self)
        X = self._validate_X(X, reset=False)
        f = self._decision(X)
        return f[:, 0] if f.shape[1] == 1 else f

    def _margin_variance(self, X) -> np.ndarray:
        """``v = x' Sigma x`` for every row and model, (n, K)."""
        if self._is_dual:
            return self._dual.decision(X, with_variance=True)[1]
        K = self._n_models
        d = X.shape[1]
        if self.covariance == "full":
            sigma = self.covariance_.reshape(K, d, d)
            if sp.issparse(X):
                return np.stack(
                    [np.asarray(X.multiply(X @ sigma[k]).sum(axis=1)).ravel() for k in range(K)],
                    axis=1,
                )
            return np.stack([np.einsum("ij,ij->i", X @ sigma[k], X) for k in range(K)], axis=1)
        s = self.covariance_.reshape(K, d)
        X2 = X.multiply(X) if sp.issparse(X) else X * X
        return np.asarray(X2 @ s.T)

    def predict_proba(self, X):
        """Probability that a weight vector drawn from N(mu, Sigma) gives each class.

        For one binary model this is ``p = Phi(mu . x / sqrt(x' Sigma x))`` for
        ``classes_[1]`` and ``1 - p`` for ``classes_[0]``. With more classes each
        one-vs-rest model's ``p`` is normalised over the classes.
        """
        check_is_fitted(self)
        X = self._validate_X(X, reset=False)
        f = self._decision(X)
        v = self._margin_variance(X)
        with np.errstate(divide="ignore", invalid="ignore"):
            z = np.where(v > 0, f / np.sqrt(np.maximum(v, 0)), np.sign(f) * np.inf)
        z = np.where(np.isnan(z), 0.0, z)
        p = ndtr(z)
        if p.shape[1] == 1:
            return np.hstack([1.0 - p, p])
        tot = p.sum(axis=1, keepdims=True)
        K = p.shape[1]
        return np.where(tot > 0, p / np.where(tot > 0, tot, 1.0), 1.0 / K)

    def predict(self, X):
        """The sign of ``mu . x`` (``sign(0) = +1``, i.e. ``classes_[1]``); argmax for OvR."""
        check_is_fitted(self)
        X = self._validate_X(X, reset=False)
        f = self._decision(X)
        if f.shape[1] == 1:
            return np.where(f[:, 0] >= 0.0, self.classes_[1], self.classes_[0])
        return self.classes_[np.argmax(f, axis=1)]

    @property
    def coef_(self) -> np.ndarray:
        """The mean weights in scikit-learn's shape: (1, d) for two classes, (K, d) else.

        With a dual model only for the linear kernel (``mu = S' nu``).
        """
        check_is_fitted(self)
        if self._is_dual:
            if self._dual.kernel.name != "linear":
                # AttributeError, so hasattr(), getattr(..., None) and dir() work
                raise AttributeError(
                    f"coef_ exists for the linear kernel only; this model's kernel is "
                    f"{self._dual.kernel.name!r}, whose feature space has no finite weight "
                    "vector here: see dual_coef_ and support_vectors_"
                )
            return primal_from_dual(self)[0].reshape(self._n_models, -1)
        return self.mean_.reshape(self._n_models, -1)

    # ------------------------------------------------------------ dual attributes

    def _dual_attr(self, name: str):
        check_is_fitted(self)
        if not self._is_dual:
            raise AttributeError(
                f"{name} exists for dual (kernel) models only; this one is primal "
                "(kernel='linear', mode='auto'): see mean_ and covariance_"
            )
        self._dual.check_usable()
        return self._dual

    def _per_model(self, values: list):
        return values[0] if len(values) == 1 else values

    @property
    def support_(self):
        """Positions of the support inputs in the training data, in the order they
        entered: row indices of X after ``fit`` (with ``n_iter > 1`` an input can
        enter more than once), rows counted across calls after ``partial_fit``; a
        list per class for more than two classes."""
        dm = self._dual_attr("support_")
        return self._per_model([dm.pos[m.idx[m.order()]] for m in dm.models])

    @property
    def support_vectors_(self):
        """The support inputs (n_sv, n_features), in the order they entered."""
        dm = self._dual_attr("support_vectors_")
        if dm.kernel.precomputed:
            raise AttributeError("kernel='precomputed' keeps no inputs: see support_")
        rows = [dm.store[m.idx[m.order()]] for m in dm.models]
        return self._per_model(rows)

    @property
    def dual_coef_(self):
        """nu: mu = sum_p nu_p phi(x_p) over the support vectors."""
        dm = self._dual_attr("dual_coef_")
        return self._per_model([m.nu(dm.a)[m.order()] for m in dm.models])

    @property
    def covariance_coef_(self):
        """Pi: Sigma = a I + sum_pq Pi_pq phi(x_p) phi(x_q)'."""
        dm = self._dual_attr("covariance_coef_")
        return self._per_model([m.Pi(dm.a)[np.ix_(m.order(), m.order())] for m in dm.models])

    @property
    def n_support_(self):
        """Number of support vectors (an array over classes for more than two)."""
        dm = self._dual_attr("n_support_")
        n = [m.n for m in dm.models]
        return n[0] if len(n) == 1 else np.array(n)

    @property
    def intercept_(self) -> np.ndarray:
        """Always zero: the papers' learners have no bias (append a constant feature)."""
        check_is_fitted(self)
        return np.zeros(self._n_models)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        # rows of a Gram matrix: scikit-learn's splitters then cut K[train][:, train]
        tags.input_tags.pairwise = isinstance(self.kernel, str) and self.kernel == "precomputed"
        return tags


_COMMON_DOC = """
    a : float, default=1.0
        Initial covariance ``Sigma_1 = a I``. CW-Stdev's predictions do not depend
        on it (NIPS 2008 Lemma 3); the other rules are invariant after rescaling
        their parameter (``kernelcw.rules``).
    kernel : {{"linear", "rbf", "poly", "laplacian", "precomputed"}} or callable, default="linear"
        The Mercer kernel k(x, z): ``x . z``; ``exp(-gamma |x - z|^2)``;
        ``(gamma x . z + coef0)^degree``; ``exp(-gamma |x - z|_1)``; rows of a
        Gram matrix against the training inputs (``fit(K_train, y)``,
        ``predict(K_test)``; the support set then holds positions); or a
        callable ``k(A, B) -> (len(A), len(B))`` matrix.
    gamma : float or None, default=None
        Kernel width for rbf, poly and laplacian; None means 1 / n_features.
    degree : int, default=3
        Degree of the poly kernel.
    coef0 : float, default=0.0
        Constant of the poly kernel.
    mode : {{"auto", "primal", "dual"}}, default="auto"
        Which engine learns: the primal (weights mu, Sigma) or the dual form
        (coefficients over support vectors, any kernel). "auto" picks the primal
        engine for the linear kernel and the dual one otherwise; "dual" forces the
        dual engine for the linear kernel (it reproduces the primal run:
        :func:`kernelcw.primal_from_dual`).
    solver : {{"cholesky", "explicit"}}, default="cholesky"
        Dual engine only. "cholesky": the append-only Cholesky form, in blocks of
        ``block_size`` inputs with BLAS-3 kernel blocks and triangular solves;
        "explicit": the papers' nu/Pi recursion, one round at a time (the readable
        reference). Both give the same model to rounding.
    budget : int or None, default=None
        At most this many support vectors after every round (dual engine; a
        budget selects it under ``mode="auto"``): when an update makes one too
        many, one leaves at once. Memory and time per round then stay bounded.
        Once the budget binds, "oldest" with a second-order rule and the
        Cholesky solver keeps a blocked Cholesky form (a queue of two factors,
        BLAS-3); the other policies keep nu and Pi (O(budget^2) per round); see
        :mod:`kernelcw.budget`.
    budget_policy : {{"oldest", "random", "smallest", "project"}}, default="project"
        Which support vector leaves and how: the oldest (Forgetron), a random one
        other than the newest (randomized budget perceptron; seeded by
        ``random_state``), the one whose removal moves the mean least, or the one
        whose projection onto the others moves it least, projected KL-optimally
        (Csato & Opper 2002). Every policy keeps Sigma positive definite.
    block_size : int or None, default=None
        Inputs per block of the blocked learners (the dual engine, and the primal
        one with full covariance); None picks 256 for the dual and
        ``kernelcw.primal.default_block_size(d)`` for the primal. Results do not
        depend on it beyond rounding.
    covariance : {{"full", "diag"}}, default="{cov_default}"
        Primal mode: full d x d covariance (the papers' exact algorithms, O(d^2)
        memory) or a diagonal one (JMLR 2012 section 6: O(d) memory, for text and
        other high-dimensional sparse data). The dual engine always keeps the full
        covariance in the kernel's feature space.{cov_note}
    diag_method : {{"kl", "l2", "exact"}}, default="kl"
        How the diagonal is kept (JMLR 2012 section 6): diagonalised precision
        update ("kl", the paper's best), diagonalised covariance update ("l2"), or
        the exact solution of the problem restricted to diagonal matrices.
    n_iter : int, default=1
        Passes over the data in ``fit``. One pass is online learning.
    shuffle : bool, default=False
        Shuffle the rows before each pass of ``fit`` (``partial_fit`` never does).
    random_state : int, RandomState instance or None, default=None
        Seeds the shuffling and the "random" budget policy."""

_SECOND_ORDER_DOC = _COMMON_DOC.format(cov_default="full", cov_note="")
_FIRST_ORDER_DOC = _COMMON_DOC.format(
    cov_default="diag",
    cov_note=(
        "\n        Sigma = a I never changes for a first-order rule, so the diagonal\n"
        '        form is exact; "full" stores the same a I as a d x d array.'
    ),
)

_ATTR_DOC = """
    Attributes
    ----------
    mean_ : ndarray of shape (n_features,) or (n_classes, n_features)
        Primal mode: the mean weights mu (one row per one-vs-rest model with > 2
        classes).
    covariance_ : ndarray
        Primal mode: Sigma, (n_features, n_features) full or (n_features,)
        diagonal, with a leading class axis for more than two classes.
    support_vectors_ : ndarray of shape (n_support, n_features)
        Dual mode: the support inputs in the order they entered (a list per class
        for more than two classes; absent for ``kernel="precomputed"``).
    support_ : ndarray of shape (n_support,)
        Dual mode: positions of the support inputs in the training data.
    dual_coef_ : ndarray of shape (n_support,)
        Dual mode: nu, with ``mu = sum_p nu_p phi(x_p)``.
    covariance_coef_ : ndarray of shape (n_support, n_support)
        Dual mode: Pi, with ``Sigma = a I + sum_pq Pi_pq phi(x_p) phi(x_q)'``
        (computed on demand from the Cholesky factor).
    n_support_ : int or ndarray of shape (n_classes,)
        Dual mode: the number of support vectors.
    coef_ : ndarray of shape (1, n_features) or (n_classes, n_features)
        mu in scikit-learn's shape (primal mode, or the dual with a linear kernel).
    intercept_ : ndarray of shape (1,) or (n_classes,)
        Zeros: the learners have no bias term.
    n_updates_ : int or ndarray of shape (n_classes,)
        Rounds that changed the model.
    n_mistakes_ : int or ndarray of shape (n_classes,)
        Online mistakes made while fitting (each counted before that round's
        update), summed over ``partial_fit`` calls and reset by ``fit``.
    n_variance_floored_ : int or ndarray of shape (n_classes,)
        Rounds whose margin variance was raised to the floor
        ``kernelcw.rules.VAR_FLOOR * a * |x|^2`` (a warning is issued the first
        time). Zero on well-posed streams.
    classes_ : ndarray
        The labels; with two, ``classes_[0]`` is -1 and ``classes_[1]`` is +1.
    n_features_in_ : int"""


class CWClassifier(_CWBase):
    __doc__ = f"""Confidence-weighted linear classifier (CW-Stdev or CW-Var).

    Keeps a Gaussian N(mu, Sigma) over weight vectors and, after each example,
    moves to the closest Gaussian (in KL divergence) that classifies it
    correctly with probability ``eta``.

    Parameters
    ----------
    rule : {{"stdev", "var"}}, default="stdev"
        "stdev": the exact convex CW of Crammer, Dredze & Pereira (NIPS 2008);
        "var": the linearised variance constraint of Dredze, Crammer & Pereira
        (ICML 2008).
    eta : float in (0.5, 1), default=0.7
        Required probability of a correct classification; ``phi = Phi^-1(eta)``.
        0.7 is LIBOL's default for CW (Hoi, Wang & Zhao, JMLR 2014).
{_SECOND_ORDER_DOC}
{_ATTR_DOC}

    References
    ----------
    K. Crammer, M. Dredze, F. Pereira. Exact convex confidence-weighted learning. NIPS 2008.
    M. Dredze, K. Crammer, F. Pereira. Confidence-weighted linear classification. ICML 2008.
    K. Crammer, M. Dredze, F. Pereira. Confidence-weighted linear classification for
    text categorization. JMLR 13, 2012.

    Examples
    --------
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.preprocessing import StandardScaler
    >>> from kernelcw import CWClassifier
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> X = StandardScaler().fit_transform(X)
    >>> clf = CWClassifier(eta=0.9).fit(X, y)  # one online pass
    >>> clf.n_mistakes_, clf.n_updates_
    (27, 86)
    >>> round(clf.score(X, y), 3)
    0.975
    >>> clf.predict_proba(X[:1]).round(4)
    array([[1., 0.]])
    """

    def __init__(
        self,
        *,
        rule="stdev",
        eta=0.7,
        a=1.0,
        kernel="linear",
        gamma=None,
        degree=3,
        coef0=0.0,
        mode="auto",
        solver="cholesky",
        block_size=None,
        budget=None,
        budget_policy="project",
        covariance="full",
        diag_method="kl",
        n_iter=1,
        shuffle=False,
        random_state=None,
    ):
        self.rule = rule
        self.eta = eta
        self.a = a
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.mode = mode
        self.solver = solver
        self.block_size = block_size
        self.budget = budget
        self.budget_policy = budget_policy
        self.covariance = covariance
        self.diag_method = diag_method
        self.n_iter = n_iter
        self.shuffle = shuffle
        self.random_state = random_state

    def _rule_params(self) -> RuleParams:
        check_option("rule", self.rule, ("stdev", "var"))
        return RuleParams(RULES[self.rule], phi=ndtri(_check_eta(self.eta)))


class SCWClassifier(_CWBase):
    __doc__ = f"""Soft confidence-weighted classifier, SCW-I or SCW-II (ICML 2012).

    CW-Stdev with a soft constraint: SCW-I caps the step at ``C``, SCW-II adds a
    squared hinge penalty weighted by ``C``.

    Parameters
    ----------
    variant : {{1, 2}}, default=1
    C : float > 0, default=1.0
        Aggressiveness (LIBOL's default 1).
    eta : float in (0.5, 1) or None, default=None
        None uses LIBOL's defaults: 0.75 for SCW-I, 0.9 for SCW-II.
{_SECOND_ORDER_DOC}
{_ATTR_DOC}

    References
    ----------
    J. Wang, P. Zhao, S. C. H. Hoi. Exact soft confidence-weighted learning. ICML 2012.
    """

    def __init__(
        self,
        *,
        variant=1,
        C=1.0,
        eta=None,
        a=1.0,
        kernel="linear",
        gamma=None,
        degree=3,
        coef0=0.0,
        mode="auto",
        solver="cholesky",
        block_size=None,
        budget=None,
        budget_policy="project",
        covariance="full",
        diag_method="kl",
        n_iter=1,
        shuffle=False,
        random_state=None,
    ):
        self.variant = variant
        self.C = C
        self.eta = eta
        self.a = a
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.mode = mode
        self.solver = solver
        self.block_size = block_size
        self.budget = budget
        self.budget_policy = budget_policy
        self.covariance = covariance
        self.diag_method = diag_method
        self.n_iter = n_iter
        self.shuffle = shuffle
        self.random_state = random_state

    def _rule_params(self) -> RuleParams:
        check_option("variant", self.variant, (1, 2))
        C = check_positive("C", self.C)
        eta = (0.75 if self.variant == 1 else 0.9) if self.eta is None else self.eta
        rule = RULES["scw1"] if self.variant == 1 else RULES["scw2"]
        return RuleParams(rule, phi=ndtri(_check_eta(eta)), C=C)


class AROWClassifier(_CWBase):
    __doc__ = f"""Adaptive regularization of weight vectors (Crammer, Kulesza & Dredze, NIPS 2009).

    Parameters
    ----------
    r : float > 0, default=1.0
        Regularisation: larger r means smaller, more conservative steps
        (LIBOL's default 1).
{_SECOND_ORDER_DOC}
{_ATTR_DOC}

    References
    ----------
    K. Crammer, A. Kulesza, M. Dredze. Adaptive regularization of weight vectors. NIPS 2009.
    """

    def __init__(
        self,
        *,
        r=1.0,
        a=1.0,
        kernel="linear",
        gamma=None,
        degree=3,
        coef0=0.0,
        mode="auto",
        solver="cholesky",
        block_size=None,
        budget=None,
        budget_policy="project",
        covariance="full",
        diag_method="kl",
        n_iter=1,
        shuffle=False,
        random_state=None,
    ):
        self.r = r
        self.a = a
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.mode = mode
        self.solver = solver
        self.block_size = block_size
        self.budget = budget
        self.budget_policy = budget_policy
        self.covariance = covariance
        self.diag_method = diag_method
        self.n_iter = n_iter
        self.shuffle = shuffle
        self.random_state = random_state

    def _rule_params(self) -> RuleParams:
        return RuleParams(RULES["arow"], r=check_positive("r", self.r))


#: The shared parameters without ``a``, which SOP documents in its own terms.
_SOP_DOC = "    kernel :" + _SECOND_ORDER_DOC.split("    kernel :", 1)[1]


class SOPClassifier(_CWBase):
    __doc__ = f"""Second-order perceptron (Cesa-Bianchi, Conconi & Gentile, SIAM J. Comput. 2005).

    Predicts ``sign(b' (c I + S + x x')^-1 x)``, with ``S`` the sum of ``x x'`` and
    ``b`` the sum of ``y x`` over the past mistakes, and on a mistake adds ``x`` to
    both. In this library's terms ``Sigma^-1 = I / a + S`` and ``mu = Sigma b``, so
    the paper's parameter ``c`` (its ``a``) is ``1 / a`` here. The step is AROW's
    with ``r = 1``, taken only on mistakes (``y mu . x <= 0``; a tie updates, as
    the Perceptron here): see :func:`kernelcw.rules.sop` for the derivation.

    Parameters
    ----------
    a : float > 0, default=1.0
        ``Sigma_1 = a I``: one over the paper's ``a``. Small ``a`` (a large paper
        ``a``) makes SOP behave like the Perceptron, large ``a`` whitens the
        inputs by the mistakes' correlation matrix alone.
{_SOP_DOC}
{_ATTR_DOC}

    References
    ----------
    N. Cesa-Bianchi, A. Conconi, C. Gentile. A second-order perceptron algorithm.
    SIAM J. Comput. 34(3), 640-668, 2005.

    Examples
    --------
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.preprocessing import StandardScaler
    >>> from kernelcw import SOPClassifier
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> X = StandardScaler().fit_transform(X)
    >>> clf = SOPClassifier().fit(X, y)  # one online pass
    >>> clf.n_mistakes_, clf.n_updates_  # it learns from its mistakes only
    (32, 32)
    >>> round(clf.score(X, y), 3)
    0.963
    """

    def __init__(
        self,
        *,
        a=1.0,
        kernel="linear",
        gamma=None,
        degree=3,
        coef0=0.0,
        mode="auto",
        solver="cholesky",
        block_size=None,
        budget=None,
        budget_policy="project",
        covariance="full",
        diag_method="kl",
        n_iter=1,
        shuffle=False,
        random_state=None,
    ):
        self.a = a
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.mode = mode
        self.solver = solver
        self.block_size = block_size
        self.budget = budget
        self.budget_policy = budget_policy
        self.covariance = covariance
        self.diag_method = diag_method
        self.n_iter = n_iter
        self.shuffle = shuffle
        self.random_state = random_state

    def _rule_params(self) -> RuleParams:
        return RuleParams(RULES["sop"])


_FIRST_ORDER_NOTE = """
    First-order rules keep ``Sigma = a I``: the step is ``mu += alpha y a x``
    (``a = 1`` gives the published algorithm); ``covariance`` and ``diag_method``
    only choose how ``covariance_`` is reported."""


class PAClassifier(_CWBase):
    __doc__ = f"""Passive-aggressive classifier: PA, PA-I or PA-II (Crammer et al., JMLR 2006).

    Parameters
    ----------
    variant : {{0, 1, 2}}, default=1
        0: PA (alpha = l / |x|^2); 1: PA-I (capped at C); 2: PA-II. PA-I with
        C = 1 is scikit-learn's ``PassiveAggressiveClassifier`` default.
    C : float > 0, default=1.0
        Aggressiveness of PA-I and PA-II (unused by PA).
{_FIRST_ORDER_DOC}
{_FIRST_ORDER_NOTE}
{_ATTR_DOC}

    References
    ----------
    K. Crammer, O. Dekel, J. Keshet, S. Shalev-Shwartz, Y. Singer. Online
    passive-aggressive algorithms. JMLR 7, 2006.
    """

    def __init__(
        self,
        *,
        variant=1,
        C=1.0,
        a=1.0,
        kernel="linear",
        gamma=None,
        degree=3,
        coef0=0.0,
        mode="auto",
        solver="cholesky",
        block_size=None,
        budget=None,
        budget_policy="project",
        covariance="diag",
        diag_method="kl",
        n_iter=1,
        shuffle=False,
        random_state=None,
    ):
        self.variant = variant
        self.C = C
        self.a = a
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.mode = mode
        self.solver = solver
        self.block_size = block_size
        self.budget = budget
        self.budget_policy = budget_policy
        self.covariance = covariance
        self.diag_method = diag_method
        self.n_iter = n_iter
        self.shuffle = shuffle
        self.random_state = random_state

    def _rule_params(self) -> RuleParams:
        check_option("variant", self.variant, (0, 1, 2))
        C = check_positive("C", self.C)
        return RuleParams(RULES[("pa", "pa1", "pa2")[self.variant]], C=C)


class PerceptronClassifier(_CWBase):
    __doc__ = f"""The Perceptron (Rosenblatt 1958): ``mu += y a x`` on every mistake.

    Parameters
    ----------
{_FIRST_ORDER_DOC}
{_FIRST_ORDER_NOTE}
{_ATTR_DOC}
    """

    def __init__(
        self,
        *,
        a=1.0,
        kernel="linear",
        gamma=None,
        degree=3,
        coef0=0.0,
        mode="auto",
        solver="cholesky",
        block_size=None,
        budget=None,
        budget_policy="project",
        covariance="diag",
        diag_method="kl",
        n_iter=1,
        shuffle=False,
        random_state=None,
    ):
        self.a = a
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.mode = mode
        self.solver = solver
        self.block_size = block_size
        self.budget = budget
        self.budget_policy = budget_policy
        self.covariance = covariance
        self.diag_method = diag_method
        self.n_iter = n_iter
        self.shuffle = shuffle
        self.random_state = random_state

    def _rule_params(self) -> RuleParams:
        return RuleParams(RULES["perceptron"])


def primal_from_dual(model) -> tuple[np.ndarray, np.ndarray]:
    """(mu, Sigma) of a fitted linear-kernel dual model: ``mu = S' nu`` and
    ``Sigma = a I + S' Pi S``, S the support vectors (rows).

    With the linear kernel the dual run reproduces the primal full-covariance run;
    this is how to check it. Binary: (d,), (d, d); more classes: stacked (K, d),
    (K, d, d).
    """
    check_is_fitted(model)
    if not getattr(model, "_is_dual", False):
        raise ValueError("primal_from_dual needs a dual model (mode='dual' or a kernel)")
    dm = model._dual
    if dm.kernel.name != "linear":
        raise ValueError(
            f"primal_from_dual needs the linear kernel; this model's kernel is "
            f"{dm.kernel.name!r}, whose feature space has no finite weight vector here"
        )
    d = model.n_features_in_
    mus, sigmas = [], []
    for m in dm.models:
        S = dm.store[m.idx]
        S = S.toarray() if sp.issparse(S) else np.asarray(S)
        nu = m.nu(dm.a)
        Pi = m.Pi(dm.a)
        mus.append(S.T @ nu if m.n else np.zeros(d))
        sig = dm.a * np.eye(d)
        if m.n:
            sig += S.T @ Pi @ S
        sigmas.append(sig)
    if len(mus) == 1:
        return mus[0], sigmas[0]
    return np.stack(mus), np.stack(sigmas)
