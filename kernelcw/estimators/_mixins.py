"""What a fitted estimator shows: predictions, its counters, and the fitted attributes
of the primal (``mean_``, ``covariance_``, ``coef_``) and dual (``support_``,
``dual_coef_``, ...) forms, all read from the engine (the counters from ``_counts``)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted

from .._interrupt import surfaces_interrupts
from ._input import validate_X
from ._proba import binary_proba, multiclass_proba

__all__ = [
    "COUNTERS",
    "CountersMixin",
    "DualAttributesMixin",
    "PredictionMixin",
    "margin_proba",
    "primal_from_dual",
]


#: The fitted counters, kept together in ``_counts`` (:class:`CountersMixin`).
COUNTERS = ("n_updates_", "n_mistakes_", "n_variance_floored_")


def _counter(i: int) -> property:
    """The counter ``COUNTERS[i]`` in the ``_counts`` tuple, which a call replaces in
    one store after learning (``CWEstimator._learn_locked``): a Ctrl-C leaves model
    and counters both as before the call or both after it, with no signal handler
    swapped per call."""
    name = COUNTERS[i]

    def get(self):
        counts = self.__dict__.get("_counts")
        if counts is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return counts[i]

    def put(self, value):
        counts = list(self.__dict__.get("_counts", (0, 0, 0)))
        counts[i] = value
        self._counts = tuple(counts)

    return property(get, put, doc=f"``{name}`` (fitted; see the class docstring).")


class CountersMixin:
    """``n_updates_``, ``n_mistakes_``, ``n_variance_floored_``: one tuple, ``_counts``."""

    n_updates_ = _counter(0)
    n_mistakes_ = _counter(1)
    n_variance_floored_ = _counter(2)


def _check_fitted(est) -> None:
    """scikit-learn's NotFittedError unless ``est`` has its engine (which every fit and
    first partial_fit leaves, and a failed one takes back): its ``check_is_fitted``
    looks at every attribute, 5-8 us of a one-row prediction."""
    if "_engine" not in est.__dict__:
        check_is_fitted(est)


def _is_dual(est) -> bool:
    return est._engine.spec.form == "dual"


def _one_or_list(values: list):
    return values[0] if len(values) == 1 else values


def margin_proba(f: np.ndarray, v: np.ndarray) -> np.ndarray:
    """:meth:`PredictionMixin.predict_proba` from the (n, K) mean margins ``f`` and margin
    variances ``v`` (shared with :mod:`kernelcw.river`, which has them per row)."""
    if f.shape[1] == 1:
        return binary_proba(f[:, 0], v[:, 0])
    return multiclass_proba(f, v)


def _has_proba(est) -> bool:
    """``predict_proba`` is there unless the kernel is "precomputed" (the parameter, or
    the fitted model's kernel): it needs each input's margin variance v = a k(x, x) +
    k' Pi k, and rows of K(X, X_train) do not hold k(x, x). ``available_if`` turns the
    AttributeError into a missing method, as SVC's is for ``probability=False``."""
    fitted = est.__dict__.get("_engine")
    if (isinstance(est.kernel, str) and est.kernel == "precomputed") or (
        fitted is not None and fitted.spec.form == "dual" and fitted.spec.kernel.precomputed
    ):
        raise AttributeError(
            "predict_proba is not available with kernel='precomputed': it needs the margin "
            "variance a k(x, x) + k' Pi k of each input, and rows of K(X, X_train) do not "
            "hold k(x, x) (decision_function and predict work)"
        )
    return True


class _Reading:
    """``with _Reading(est) as engine``: the model's engine with its lock held, read once
    and again once its lock is taken (a ``fit`` in another thread may put in a new engine
    between two reads of ``_engine``: a second read saw it mid-training, without its
    lock). Replacing an engine takes its lock (``CWEstimator._install``), so while it is
    held the engine and ``classes_`` stay the model's. A class, not a generator: 0.26
    against 0.95 us a call (timeit), on every one-row predict."""

    __slots__ = ("est", "lock")

    def __init__(self, est):
        self.est = est

    def __enter__(self):
        est = self.est
        while True:
            engine = est._engine
            engine.lock.acquire()
            try:
                if est._engine is engine:
                    self.lock = engine.lock
                    return engine
            except BaseException:  # (a Ctrl-C here: not left holding it)
                engine.lock.release()
                raise
            engine.lock.release()

    def __exit__(self, *exc) -> None:
        self.lock.release()


class PredictionMixin:
    """decision_function, predict, predict_proba and the primal attributes."""

    @surfaces_interrupts
    def decision_function(self, X):
        """The mean margin ``mu . x``: (n_samples,) for two classes, else (n_samples, K)."""
        _check_fitted(self)
        with _Reading(self) as engine:
            f = engine.decision(validate_X(self, X, reset=False, engine=engine))
        return f[:, 0] if f.shape[1] == 1 else f

    def _margins(self, X) -> tuple[np.ndarray, np.ndarray]:
        _check_fitted(self)
        with _Reading(self) as engine:
            return engine.margins(validate_X(self, X, reset=False, engine=engine))

    @available_if(_has_proba)
    @surfaces_interrupts
    def predict_proba(self, X):
        """Probability of each class under the model's Gaussian N(mu, Sigma) over weights.

        Two classes: ``P(classes_[1]) = P(w . x > 0) = Phi(m / sqrt(v))``, m = mu . x (the
        decision function) and v = x' Sigma x. More classes: the probability that class k's
        one-vs-rest score is the largest, the scores independent N(m_k, v_k). These are the
        model's own beliefs, not calibrated frequencies (wrap the estimator in
        ``CalibratedClassifierCV`` for those), and with v varying between inputs they do not
        rank inputs as ``decision_function`` does. Never exactly 0 or 1 unless v = 0: see
        :mod:`kernelcw.estimators._proba`. Not available with ``kernel="precomputed"``
        (rows of K(X, X_train) do not hold k(x, x), which v needs).

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
        """
        f, v = self._margins(X)
        return margin_proba(f, v)

    @surfaces_interrupts
    def predict(self, X):
        """The sign of ``mu . x`` (``sign(0) = +1``, i.e. ``classes_[1]``); argmax for OvR."""
        _check_fitted(self)
        with _Reading(self) as engine:
            f = engine.decision(validate_X(self, X, reset=False, engine=engine))
            classes = self.classes_
        if f.shape[1] == 1:
            return np.where(f[:, 0] >= 0.0, classes[1], classes[0])
        return classes[np.argmax(f, axis=1)]

    def _primal_attr(self, name: str):
        check_is_fitted(self)
        if _is_dual(self):
            # AttributeError, so hasattr(), getattr(..., None) and dir() work
            raise AttributeError(
                f"{name} exists for primal models only; this one learns in the dual form: "
                "see dual_coef_, covariance_coef_ and support_vectors_"
            )
        return self._engine

    @property
    def mean_(self) -> np.ndarray:
        """mu: (n_features,) for two classes, else (n_classes, n_features). With
        ``fit_intercept`` the weights of the features only (the intercept's is in
        ``intercept_``)."""
        eng = self._primal_attr("mean_")
        with eng.lock:  # (a copy: the model's own array changes as it learns, and a
            mean = eng.mean[:, : self.n_features_in_].copy()  # write into it would skip
        return mean[0] if mean.shape[0] == 1 else mean  # every check)

    @property
    def covariance_(self) -> np.ndarray:
        """Sigma: (d, d) or its diagonal (d,) for two classes; stacked per class else.
        With ``fit_intercept``, the covariance of the features' weights (the marginal:
        the intercept's row and column left out)."""
        eng = self._primal_attr("covariance_")
        d = self.n_features_in_
        with eng.lock:  # (a copy, as mean_'s)
            if eng.spec.form == "primal_full":
                cov = eng.covariance[:, :d, :d].copy()
            else:
                cov = eng.variance[:, :d].copy()
        return cov[0] if cov.shape[0] == 1 else cov

    @property
    def coef_(self) -> np.ndarray:
        """The mean weights in scikit-learn's shape: (1, d) for two classes, (K, d) else.

        With a dual model only for the linear kernel (``mu = S' nu``).
        """
        check_is_fitted(self)
        eng = self._engine
        if _is_dual(self):
            if eng.spec.kernel.name != "linear":
                raise AttributeError(
                    f"coef_ exists for the linear kernel only; this model's kernel is "
                    f"{eng.spec.kernel.name!r}, whose feature space has no finite weight "
                    "vector here: see dual_coef_ and support_vectors_"
                )
            return primal_from_dual(self)[0].reshape(eng.n_models, -1)
        with eng.lock:  # (a copy, as mean_'s and the dual coef_'s)
            return eng.mean[:, : self.n_features_in_].copy()

    @property
    def engine_(self):
        """The fitted engine (:mod:`kernelcw.engines`) that holds the model: its state as
        plain arrays (``engine_.state_dict()``), its form (``engine_.spec.form``) and, for
        the dual engine, its size in bytes (``engine_.nbytes``)."""
        check_is_fitted(self)
        return self._engine

    @property
    def intercept_(self) -> np.ndarray:
        """The mean intercept b (decision ``mu . x + b``), (1,) for two classes, (K,)
        else; zero without ``fit_intercept`` (the papers' learners have none). The
        intercept is the weight of a constant feature c = ``intercept_scaling`` with
        prior variance ``a c^2``: ``b = c mu_c`` (primal), ``b = c^2 sum(nu)`` (dual)."""
        check_is_fitted(self)
        eng = self._engine
        c = eng.spec.intercept
        if not c:
            return np.zeros(eng.n_models)
        if _is_dual(self):
            with eng.lock:
                return np.array([c * c * float(np.sum(nu)) for nu in eng.dual_coef()])
        at = getattr(eng, "mean_at", None)  # a wide diagonal model's slots stay slots
        return c * (at(-1) if at is not None else eng.mean[:, -1])


class DualAttributesMixin:
    """The dual form's fitted attributes: a list per class for more than two."""

    def _dual_engine(self, name: str):
        check_is_fitted(self)
        if not _is_dual(self):
            raise AttributeError(
                f"{name} exists for dual (kernel) models only; this one is primal "
                "(kernel='linear', mode='auto'): see mean_ and covariance_"
            )
        return self._engine

    @property
    def support_(self):
        """Positions of the support inputs in the training data, in the order they
        entered: row indices of X after ``fit`` (with ``n_iter > 1`` an input can
        enter more than once), rows counted across calls after ``partial_fit``; a
        list per class for more than two classes."""
        eng = self._dual_engine("support_")
        with eng.lock:
            return _one_or_list(eng.support_positions())

    @property
    def support_vectors_(self):
        """The support inputs (n_sv, n_features), in the order they entered."""
        eng = self._dual_engine("support_vectors_")
        if eng.spec.kernel.precomputed:
            raise AttributeError("kernel='precomputed' keeps no inputs: see support_")
        with eng.lock:
            return _one_or_list(eng.support_vectors())

    @property
    def dual_coef_(self):
        """nu: mu = sum_p nu_p phi(x_p) over the support vectors."""
        eng = self._dual_engine("dual_coef_")
        with eng.lock:
            return _one_or_list(eng.dual_coef())

    @property
    def covariance_coef_(self):
        """Pi: Sigma = a I + sum_pq Pi_pq phi(x_p) phi(x_q)'."""
        eng = self._dual_engine("covariance_coef_")
        with eng.lock:
            return _one_or_list(eng.covariance_coef())

    @property
    def n_support_(self):
        """Number of support vectors (an array over classes for more than two)."""
        eng = self._dual_engine("n_support_")
        with eng.lock:
            n = eng.n_support()
        return n[0] if len(n) == 1 else np.array(n)


def primal_from_dual(model) -> tuple[np.ndarray, np.ndarray]:
    """(mu, Sigma) of a fitted linear-kernel dual model: ``mu = S' nu`` and
    ``Sigma = a I + S' Pi S``, S the support vectors (rows).

    With the linear kernel the dual run reproduces the primal full-covariance run;
    this is how to check it. Binary: (d,), (d, d); more classes: stacked (K, d),
    (K, d, d).
    """
    check_is_fitted(model)
    eng = getattr(model, "_engine", None)
    if eng is None or eng.spec.form != "dual":
        raise ValueError("primal_from_dual needs a dual model (mode='dual' or a kernel)")
    if eng.spec.kernel.name != "linear":
        raise ValueError(
            f"primal_from_dual needs the linear kernel; this model's kernel is "
            f"{eng.spec.kernel.name!r}, whose feature space has no finite weight vector here"
        )
    d = model.n_features_in_
    a = eng.spec.a
    mus, sigmas = [], []
    with eng.lock:
        parts = list(
            zip(eng.support_vectors(), eng.dual_coef(), eng.covariance_coef(), strict=True)
        )
    for S, nu, Pi in parts:
        S = S.toarray() if sp.issparse(S) else np.asarray(S)
        mus.append(S.T @ nu if nu.size else np.zeros(d))
        sig = a * np.eye(d)
        if nu.size:
            sig += S.T @ Pi @ S
        sigmas.append(sig)
    if len(mus) == 1:
        return mus[0], sigmas[0]
    return np.stack(mus), np.stack(sigmas)
