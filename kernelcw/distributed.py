"""Training on a Dask cluster: one model per part of the data, combined on the cluster.

:class:`CombinedClassifier` learns each part (a dask array chunk, a dask dataframe
partition, or a contiguous slice of an in-memory array) in its own task from the
same starting model, then combines the parts with :func:`kernelcw.combine` in a
pairwise tree of tasks on the cluster: only the final model travels to the client.
With ``n_epochs > 1`` every epoch starts every part from the last combination and
combines with the shared-prior rule relative to it (iterative parameter mixing,
``doc/combination.md``). :func:`tree_combine` is the same tree, run in this
process (the reference the cluster's result equals bit for bit).

Dask is optional: ``pip install "kernelcw[dask]"``; importing this module does not
import it.
"""

from __future__ import annotations

import copy
import numbers

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, MetaEstimatorMixin, clone
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted, validate_data

from ._combine_checks import check_parts, continues_nu_pi, same_value
from ._interrupt import restore_on_error
from ._validation import check_option, check_positive_int
from .combination import METHODS, combine
from .estimators._base import STRUCTURAL, CWEstimator
from .estimators._input import check_stream
from .estimators._labels import check_labels_in, check_same_classes
from .estimators._locks import model_lock
from .spec import check_params, inert_parameters

__all__ = ["CombinedClassifier", "tree_combine"]

_MISSING = (
    'kernelcw.distributed needs dask.distributed: pip install "kernelcw[dask]" '
    '(or pip install "dask[distributed]")'
)


def _distributed():
    try:
        import dask  # noqa: F401
        import distributed
    except ImportError as err:
        raise ImportError(_MISSING) from err
    return distributed


# ---------------------------------------------------------------- the tasks


def fit_part(template, start, X, y, classes, part=None):
    """One part learnt in one pass (``partial_fit``) from ``start`` (a fitted model)
    or, without one, from the prior of ``template`` (an unfitted estimator). An error
    names the ``part`` (its index) it came from: its rows are numbered within it."""
    X = _as_array(X)
    y = np.asarray(y).ravel()
    if X.shape[0] == 0 and part is not None:  # (a filtered frame's partitions, often)
        raise ValueError(
            f"part {part} of the data is empty (a dask chunk or partition of 0 rows): "
            "every part must hold rows; repartition, or drop the empty partitions"
        )
    try:
        if start is None:
            return clone(template).partial_fit(X, y, classes=classes)
        return copy.deepcopy(start).partial_fit(X, y)
    except ValueError as err:
        if part is None:
            raise
        raise ValueError(f"part {part} of the data (its rows numbered from 0): {err}") from err


def _as_array(X):
    if hasattr(X, "to_numpy"):  # a pandas partition
        return X.to_numpy(dtype=np.float64)
    return X


def combine_pair(a, b, method: str, wa: float, wb: float, start):
    """One node of the tree (:func:`kernelcw.combine` of two)."""
    if start is not None:
        return combine([a, b], "bayes", start=start)
    return combine([a, b], method, weights=[wa, wb])


def _tree(nodes: list, method: str, start, pair):
    """Pairwise tree over ``nodes`` [(model, weight)], level by level, (0, 1), (2, 3),
    ...; an odd last node goes up as it is. ``pair`` makes a node from two."""
    while len(nodes) > 1:
        up = []
        for i in range(0, len(nodes) - 1, 2):
            (a, wa), (b, wb) = nodes[i], nodes[i + 1]
            up.append((pair(a, b, method, wa, wb, start), wa + wb))
        if len(nodes) % 2:
            up.append(nodes[-1])
        nodes = up
    return nodes[0][0]


def tree_combine(models: list, method: str = "kl", start=None):
    """The combination :class:`CombinedClassifier` computes on the cluster, here:
    the same pairwise tree of :func:`kernelcw.combine` (``start``: combine with the
    shared-prior rule relative to it, ``method="bayes"`` whatever ``method`` says, as
    the epochs after the first do). A new model, also from one part."""
    check_option("method", method, METHODS)
    models = list(models)
    if not models:
        raise ValueError("tree_combine needs at least one model")
    if len(models) == 1:  # (the shared-prior rule of one part relative to start: the part)
        check_parts(models, method if start is None else "bayes", start)  # (combine's checks)
        return copy.deepcopy(models[0])
    return _tree([(m, 1.0) for m in models], method, start, combine_pair)


# ---------------------------------------------------------------- the estimator


class CombinedClassifier(MetaEstimatorMixin, ClassifierMixin, BaseEstimator):
    """Train a kernelcw estimator on a Dask cluster by model combination.

    Parameters
    ----------
    estimator : kernelcw estimator
        The learner (cloned; each part makes one ``partial_fit`` pass per epoch).
    method : {"kl", "bayes", "average"}, default="kl"
        How the first epoch's parts combine (:func:`kernelcw.combine`).
    n_epochs : int, default=1
        Passes over the data. Epochs after the first start every part from the last
        combination and combine with the shared-prior rule relative to it.
        That rule subtracts the start's precision from every part's: a part whose
        budget removed or projected away the start's support vectors makes the sum
        no model, and the combination says so: with a budget that binds within a
        part, use ``n_epochs=1``. A second-order kernel model averaged
        (``method="average"``) from several parts keeps no natural parameters unless it
        has a "project" budget: later epochs, and later ``partial_fit`` calls whatever
        ``method`` is by then, are refused before any part learns.
    n_parts : int, optional
        For in-memory X: the number of contiguous parts (default: the cluster's
        worker threads). Dask arrays and dataframes give one part per row chunk or
        partition.
    client : dask.distributed.Client or str, optional
        The client, or a scheduler address. Default: the current client if there is
        one, else a ``LocalCluster`` sized to the machine, closed after the call.
    verbose : bool, default=False
        Show Dask's progress bar (``distributed.progress``) while the tasks run.

    Attributes
    ----------
    combined_ : estimator
        The combined model; predictions delegate to it.
    classes_ : ndarray
    n_parts_ : int
        Parts in the last call.
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        The column names, if X had them (a pandas or dask dataframe). The parts learn
        arrays in this column order; the combined model holds the same names, so
        frames given later must have these columns, in this order.
    """

    def __init__(
        self, estimator, *, method="kl", n_epochs=1, n_parts=None, client=None, verbose=False
    ):
        self.estimator = estimator
        self.method = method
        self.n_epochs = n_epochs
        self.n_parts = n_parts
        self.client = client
        self.verbose = verbose

    # ------------------------------------------------------------ training

    def __getstate__(self) -> dict:
        state = dict(super().__getstate__())  # (a copy: Python 3.11 gives __dict__ itself)
        state.pop("_model_lock", None)  # (a lock does not pickle; a copy makes its own)
        client = state.get("client")
        if client is not None and not isinstance(client, str):  # a Client: its address
            state["client"] = _address(client)
        return state

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True  # (CSR rows in memory: the parts learn them)
        return tags

    def __sklearn_clone__(self):
        """scikit-learn's clone, with ``client`` passed on as it is (a Client holds
        sockets: a deep copy of it fails, and a clone is to use the same cluster)."""
        client = self.client
        if client is None or isinstance(client, str):
            return super().__sklearn_clone__()
        bare = type(self).__new__(type(self))  # (not copy.copy: __getstate__ asks the client)
        bare.__dict__.update(self.__dict__)  # its other attributes: metadata requests, ...
        bare.client = None
        twin = super(CombinedClassifier, bare).__sklearn_clone__()
        twin.client = client
        return twin

    def fit(self, X, y, classes=None):
        """Learn from the parts of (X, y) from scratch, ``n_epochs`` passes."""
        self._check_params()
        with model_lock(self), restore_on_error(self):  # (one call at a time: partial_fit)
            # names and width recorded here: the parts learn arrays, in these columns' order
            validate_data(self, _columns_of(X), reset=True, skip_check_array=True)
            template = clone(self.estimator)
            with _Session(self.client) as client:
                parts = self._parts(client, X, y, classes)
                _check_split(self.estimator, len(parts))
                est = self.estimator
                rule, form = check_params(est)
                if self.n_epochs > 1 and self.method == "average" and form == "dual":
                    # (its later epochs continue an averaged model)
                    self._check_continues("n_epochs > 1", len(parts), rule.first_order,
                                          est.budget, est.budget_policy)  # fmt: skip
                classes = self._classes(client, y, classes)
                model = None
                for epoch in range(self.n_epochs):
                    model = self._epoch(client, template, model, parts, classes, epoch == 0)
                self._finish(client.gather(model), len(parts))
        return self

    def partial_fit(self, X, y, classes=None):
        """One epoch over the parts of a new batch, from the current combined model
        (the shared-prior rule relative to it); the first call starts from the prior."""
        self._check_params()
        # one fit or partial_fit at a time: two calls each continuing combined_ from
        # another thread kept only the batch of the one that finished last
        with model_lock(self):
            self._partial_fit(X, y, classes)
        return self

    def _partial_fit(self, X, y, classes) -> None:
        fitted = hasattr(self, "combined_")
        if fitted:
            check_same_classes(classes, self.classes_)
        with restore_on_error(self):  # a failed first call records no names
            validate_data(self, _columns_of(X), reset=not fitted, skip_check_array=True)
            with _Session(self.client) as client:
                parts = self._parts(client, X, y, self.classes_ if fitted else classes)
                _check_split(self.estimator, len(parts))
                if fitted:  # the parts learn arrays, already checked against the names
                    engine = self.combined_._engine
                    if getattr(engine, "nu_pi_models", False):  # (averaged)
                        spec = engine.spec  # (the model continued, whatever method now)
                        self._check_continues("a later partial_fit", len(parts),
                                              spec.rule.first_order, spec.budget,
                                              spec.budget_policy)  # fmt: skip
                    start = client.scatter(self._continued(), hash=False)
                    model = self._epoch(client, None, start, parts, self.classes_, False)
                else:
                    classes = self._classes(client, y, classes)
                    model = self._epoch(client, clone(self.estimator), None, parts, classes, True)
                self._finish(client.gather(model), len(parts))

    def _continued(self):
        """``combined_`` (a shallow copy, without names) with ``estimator``'s parameters
        as they are now: one set_params changed since (C, eta) applies to the next
        parts, as it would to the estimator; a structural one is refused before any
        part learns, as the estimator refuses it (the parts went on with the old
        values, silently). A kernel function counts as unchanged if it is a copy of
        the model's (a process cluster hands back copies: ``same_value``)."""
        model = copy.copy(_without_names(self.combined_))
        params = self.estimator.get_params(deep=False)
        began = model._began_with
        inert = inert_parameters(began, model.engine_.spec.form)  # (never read: may change)
        changed = [
            f"{k} from {began[k]!r} to {params[k]!r}"
            for k in STRUCTURAL
            if k not in inert and not same_value(params[k], began[k])
        ]
        if changed:
            raise ValueError(
                f"set_params changed the estimator's {', '.join(changed)} since this model "
                "began; these shape the combined state, so partial_fit cannot continue "
                "it: call fit to start over (or set them back)"
            )
        model.set_params(**{k: v for k, v in params.items() if k not in STRUCTURAL})
        return model

    def _epoch(self, client, template, start, parts, classes, first: bool):
        fits = [client.submit(fit_part, template, start, Xp, yp, classes, i, pure=False)
                for i, (Xp, yp) in enumerate(parts)]  # fmt: skip
        if len(fits) == 1:
            out = fits[0]
        else:
            rel = None if first else start
            out = _tree([(f, 1.0) for f in fits], self.method, rel, _submitter(client))
        if self.verbose:
            _distributed().progress(out)
        return out

    def _finish(self, model, n_parts: int) -> None:
        if hasattr(self, "feature_names_in_"):  # the combined model checks frames itself
            model.feature_names_in_ = self.feature_names_in_.copy()
        self.combined_ = model
        self.classes_ = model.classes_
        self.n_features_in_ = model.n_features_in_
        self.n_parts_ = n_parts

    def _check_params(self) -> None:
        check_option("method", self.method, METHODS)
        if isinstance(self.n_epochs, bool) or not isinstance(self.n_epochs, numbers.Integral):
            raise TypeError(f"n_epochs={self.n_epochs!r} must be an integer >= 1")
        if self.n_epochs < 1:
            raise ValueError(f"n_epochs={self.n_epochs!r} must be an integer >= 1")
        check_positive_int("n_parts", self.n_parts, allow_none=True)
        if not isinstance(self.estimator, CWEstimator):
            raise TypeError(f"estimator must be a kernelcw estimator, not {type(self.estimator)}")
        client = self.client  # (a Client, an address, None: the current client)
        if not (client is None or isinstance(client, str | _distributed().Client)):
            raise TypeError(
                f"client={client!r} must be a dask.distributed Client, a scheduler address "
                "(str) or None (the current client); for a cluster, Client(cluster)"
            )

    def _check_continues(self, why: str, n_parts: int, first_order, budget, policy) -> None:
        """Refuse, before any part learns, what the shared-prior rule cannot continue: a
        kernel model combined by "average" of several parts is given by nu and Pi alone
        (no natural parameters to subtract the start's from) unless its rule is first
        order or it keeps a "project" budget (:func:`._combine_checks.continues_nu_pi`,
        the test :func:`kernelcw.combine` makes; it once failed after every part had
        learnt)."""
        if n_parts < 2 or continues_nu_pi(first_order, budget, policy):
            return
        raise ValueError(
            f"method='average' with a kernel model: {why} would combine relative to an "
            "averaged model, which keeps no natural parameters to subtract; use "
            "method='kl' or 'bayes', n_epochs=1 and one fit, or a budget with "
            "budget_policy='project'"
        )

    # ------------------------------------------------------------ data

    def _parts(self, client, X, y, classes=None) -> list:
        """[(X part, y part)] as futures on the cluster; labels in memory outside
        ``classes`` (if given) are named by their row in y (a part named its own)."""
        if _is_dask_collection(X) != _is_dask_collection(y):
            raise TypeError("X and y must both be dask collections or both in memory")
        if _is_dask_collection(X):
            return _dask_parts(client, X, y)
        X, y = _in_memory(X, y)
        # the value checks of fit on the whole X first: an error names the row in X (a
        # part's call would name one within its part)
        check_stream(X, y, self.estimator)
        if classes is not None:
            check_labels_in(y, np.asarray(classes))
        n = X.shape[0]
        P = self.n_parts or max(1, sum(client.nthreads().values()))
        if P > n and self.n_parts is None:  # (the cluster's threads: fewer parts then)
            P = n
        if P > n:
            raise ValueError(f"n_parts={P} exceeds the {n} rows of X (n_samples = {n})")
        bounds = np.linspace(0, n, P + 1).astype(int)
        pieces = [(X[lo:hi], y[lo:hi]) for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)]
        # hash=False: identical data scattered by an earlier fit may be released
        # concurrently under the same content-hash key ("lost dependencies")
        return [tuple(client.scatter(list(p), hash=False)) for p in pieces]

    def _classes(self, client, y, classes) -> np.ndarray:
        if classes is not None:
            return np.unique(np.asarray(classes))
        if _is_dask_collection(y):
            if hasattr(y, "unique") and not hasattr(y, "chunks"):  # dask Series
                return np.unique(np.asarray(client.compute(y.unique()).result()))
            import dask.array as da

            return np.asarray(client.compute(da.unique(y.ravel())).result())
        return np.unique(np.asarray(y))

    # ------------------------------------------------------------ prediction
    # X goes to the combined model as it is: a frame's columns are checked against
    # feature_names_in_ there (another order or a missing one raises, as in fit)

    def decision_function(self, X):
        check_is_fitted(self, "combined_")
        return self.combined_.decision_function(X)

    def predict(self, X):
        check_is_fitted(self, "combined_")
        return self.combined_.predict(X)

    @available_if(lambda self: _has_proba(self))  # (defined below the class)
    def predict_proba(self, X):
        check_is_fitted(self, "combined_")
        return self.combined_.predict_proba(X)


def _submitter(client):
    def pair(a, b, method, wa, wb, start):
        return client.submit(combine_pair, a, b, method, wa, wb, start, pure=False)

    return pair


def _has_proba(clf) -> bool:
    """The combined model's (or the learner's) predict_proba is there: a learner of
    kernel="precomputed" has none (rows of K(X, X_train) do not hold k(x, x))."""
    return hasattr(getattr(clf, "combined_", clf.estimator), "predict_proba")


def _address(client) -> str:
    """A Client's scheduler address (what ``client=`` also takes)."""
    scheduler = getattr(client, "scheduler", None)
    address = getattr(scheduler, "address", None) or getattr(client, "scheduler_address", None)
    if not isinstance(address, str):
        raise TypeError(f"cannot save client={client!r}: it names no scheduler address")
    return address


def _check_split(estimator, n_parts: int) -> None:
    """Refuse, before any part learns, a precomputed kernel cut into parts: a part's
    rows of K(X, X) are not its own Gram matrix (it failed part-way, blaming the
    kernel), and combine refuses such models anyway."""
    if n_parts > 1 and isinstance(estimator.kernel, str) and estimator.kernel == "precomputed":
        raise ValueError(
            f"kernel='precomputed' cannot be split into {n_parts} parts: each part's rows "
            "of the Gram matrix are not a Gram matrix of its own, and such models keep "
            "positions in their own streams, which combine cannot merge; use n_parts=1 "
            "or a kernel kernelcw computes"
        )


def _without_names(model):
    """``model`` (shallow copy) without ``feature_names_in_``, for parts that learn arrays."""
    if not hasattr(model, "feature_names_in_"):
        return model
    out = copy.copy(model)
    del out.feature_names_in_
    return out


def _columns_of(X):
    """What scikit-learn's checks of the names and width read: X, or for a dask
    dataframe (which they do not recognise) its empty pandas frame of the same columns."""
    if _is_dask_collection(X) and not hasattr(X, "chunks") and hasattr(X, "_meta"):
        return X._meta
    return X


def _is_dask_collection(x) -> bool:
    return hasattr(x, "__dask_graph__") and hasattr(x, "to_delayed")


def _in_memory(X, y):
    import scipy.sparse as sp
    from sklearn.utils.validation import column_or_1d

    if y is None:  # (scikit-learn's words: its checks look for them)
        raise ValueError("CombinedClassifier requires y to be passed, but the target y is None")
    X = X.tocsr() if sp.issparse(X) else _as_array(X)
    X = X if sp.issparse(X) else np.asarray(X)
    y = np.asarray(y)
    y = column_or_1d(y, warn=True) if y.ndim == 2 and y.shape[1] == 1 else y.ravel()
    if X.ndim != 2 or X.shape[0] != y.shape[0]:
        raise ValueError(f"X {X.shape} and y {y.shape} must have one label per row of X")
    return X, y


def _dask_parts(client, X, y) -> list:
    """One part per row chunk (dask array; columns in one chunk) or per partition
    (dask dataframe / series, as many partitions each)."""
    if hasattr(X, "chunks"):  # dask array
        if X.ndim != 2:
            raise ValueError(f"X must be 2-D, got a dask array of {X.ndim} dimensions")
        n, m = X.shape[0], y.shape[0]
        if n == n and m == m and n != m:  # (known lengths: NaN where chunks are unknown)
            raise ValueError(f"X has {n} rows but y {m} labels: one label per row of X")
        X = X.rechunk({1: -1})
        y = y.rechunk((X.chunks[0],))
        xs, ys = list(X.to_delayed().ravel()), list(y.to_delayed().ravel())
    else:
        if X.npartitions != y.npartitions:
            raise ValueError(
                f"X has {X.npartitions} partitions but y {y.npartitions}: align them "
                "(one part per partition)"
            )
        xs, ys = list(X.to_delayed()), list(y.to_delayed())
    fx, fy = client.compute(xs), client.compute(ys)
    return list(zip(fx, fy, strict=True))


class _Session:
    """The client to use, and whatever this call started (closed on exit)."""

    def __init__(self, client):
        self.given = client
        self.owned: list = []

    def __enter__(self):
        distributed = _distributed()
        if self.given is not None and not isinstance(self.given, str):
            return self.given
        if isinstance(self.given, str):
            client = distributed.Client(self.given)
            self.owned = [client]
            return client
        try:
            return distributed.get_client()
        except ValueError:
            cluster = distributed.LocalCluster(threads_per_worker=1)
            client = distributed.Client(cluster)
            self.owned = [client, cluster]
            return client

    def __exit__(self, *exc):
        for x in self.owned:
            x.close()
        return False
