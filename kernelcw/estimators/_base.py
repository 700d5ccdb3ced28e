"""The estimators' thin base class: validate, ask the engine to learn, restore its
checkpoint on error, count.

Parameters become an engine specification in :mod:`kernelcw.spec`; the state lives
in the engine (:mod:`kernelcw.engines`), held as ``_engine``; prediction and the
fitted attributes are the mixins of :mod:`._mixins`.
"""

from __future__ import annotations

import contextlib
import math
import operator

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils import check_random_state

from .._interrupt import deferred_interrupt, put_back, surface_interrupt, surfaces_interrupts
from ..engines import build_engine, engine_class
from ..engines.base import RowsUnchecked, learn_or_stabilise
from ..spec import check_memory, check_params, engine_spec, inert_parameters
from ._input import (
    checked_late,
    row_passes,
    validate_training,
    with_intercept,
    x_errors_first,
)
from ._labels import _same_classes
from ._locks import model_lock, put_back_model, release
from ._mixins import COUNTERS, CountersMixin, DualAttributesMixin, PredictionMixin
from ._one_row import OneRowMixin
from ._params import param_getter, param_values, params_key, same_objects
from ._warnings import warn_floor, warn_stabilised

__all__ = ["CWEstimator"]

#: Parameters that shape the stored state: ``partial_fit`` refuses to continue a model
#: after ``set_params`` changed one of them (the rule's own parameters, such as eta, C
#: or r, may change between calls and apply from the next round on).
STRUCTURAL = (
    "a",
    "kernel",
    "gamma",
    "degree",
    "coef0",
    "mode",
    "solver",
    "covariance",
    "diag_method",
    "budget",
    "budget_policy",
    "budget_batch",
    "fit_intercept",
    "intercept_scaling",
)

_STRUCTURE = operator.itemgetter(*STRUCTURAL)
_NO_GUARD = contextlib.nullcontext()  # (a call whose engine can undo it after it returned)


class CWEstimator(
    PredictionMixin, DualAttributesMixin, CountersMixin, OneRowMixin, ClassifierMixin, BaseEstimator
):
    """Shared machinery of every estimator (not public).

    Subclasses store their own parameters in ``__init__`` and implement
    ``_rule_params()``, which validates the rule's own parameters and returns a
    :class:`kernelcw.rules.RuleParams`.
    """

    @surfaces_interrupts
    def fit(self, X, y):
        """Fit the model from scratch: ``n_iter`` passes over (X, y).

        Each pass walks the rows in order (``shuffle=False``) or in a fresh random
        order drawn from ``random_state``. One pass is the online learning of the
        papers; ``n_mistakes_`` counts the mistakes over all passes.
        """
        checked = check_params(self)
        held: list = []
        replaced: list = []  # (the replaced model's counters, _start's)
        with model_lock(self):  # fits and first calls one after the other (._locks)
            before = self.__dict__.copy()
            try:
                # (a shuffle draws from the user's RandomState: not before X is checked)
                X, y, classes_, spec, late = self._validate(
                    X, y, None, True, checked, square=True, defer=not self.shuffle
                )
                with x_errors_first(self, X, late):
                    # the new engine's lock held from before it is the model's until the
                    # last pass: a partial_fit from another thread continues the fitted model
                    engine = self._start(classes_, spec, held, replaced)
                    Y = self._label_matrix(y)
                    rng = check_random_state(self.random_state)
                for _ in range(self.n_iter):
                    order = rng.permutation(X.shape[0]) if self.shuffle else None
                    _, X, late = self._learn_rows(X, Y, checked[0], engine, late, order, True)
            except BaseException:  # a failed or interrupted fit keeps the model it had
                put_back_model(self, before, replaced)
                raise
            finally:
                release(held)
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
        self.partial_fit_margins(X, y, classes)
        return self

    def partial_fit_margins(self, X, y, classes=None) -> np.ndarray:
        """:meth:`partial_fit` that returns the (n, K) decision values ``mu . x`` each
        row saw before its update: the online protocol's predictions, at no extra
        cost (:func:`kernelcw.run_online` uses it)."""
        try:  # (surfaces_interrupts' work, without its frame on every row's call)
            row = self._row_call(X, y, classes)
            if row is not None:
                try:  # (checked for the recorded engine: learnt by it, or not at all)
                    return self._learn(*row)
                except _Dropped:  # a fit replaced the engine meanwhile: the full checks
                    pass
            # the parameter objects these checks are for, taken before them: a record made
            # below never pairs newer parameters (a set_params meanwhile) with an older rule
            params = param_values(self)
            checked = self._checked_params()
            if not hasattr(self, "classes_"):
                held: list = []
                # two threads starting one model: one starts, one continues; a fit meanwhile
                # waits for the whole call, or the call continues the fit's model (._locks)
                with model_lock(self):
                    if not hasattr(self, "classes_"):
                        before = self.__dict__.copy()
                        try:  # failed or interrupted anywhere: the estimator stays unfitted
                            Xv, yv, classes_, spec, late = self._validate(
                                X, y, classes, True, checked
                            )
                            # its lock held from before it is the model's: calls that
                            # continue it (seeing classes_) wait for this one
                            with x_errors_first(self, Xv, late):
                                self._start(classes_, spec, held)
                                Y = self._label_matrix(yv)
                            return self._learn_rows(Xv, Y, checked[0], held[0], late)[0]
                        except BaseException:
                            put_back(self, before)
                            raise
                        finally:
                            release(held)
            engine = self._engine  # (the model these checks are for)
            self._check_structure()
            if checked[1] != engine.spec.form:
                raise ValueError(
                    f"kernel={self.kernel!r}, mode={self.mode!r} selects the "
                    f"{_engine_word(checked[1])} engine but this model was started in the "
                    f"{_engine_word(engine.spec.form)} one; call fit to start over"
                )
            Xv, yv, _, _, late = self._validate(X, y, classes, False, checked)
            self._remember_row(Xv, yv, checked, params, engine)
            try:
                return self._learn_rows(Xv, self._label_matrix(yv), checked[0], engine, late)[0]
            except _Dropped:  # the engine was dropped or replaced meanwhile: start again
                return self.partial_fit_margins(X, y, classes)
        except SystemError as err:
            surface_interrupt(err)

    def _row_call(self, X, y, classes):
        """The arguments of :meth:`_learn` (X, Y, rule, None, the engine) for a call
        that continues the model with one dense float64 row, as the full checks would
        pass it, or None (then they run, and raise where they should). It holds to the
        record :meth:`_remember_row` made when such a call last passed them: the same
        parameter objects (plain scalars and strings, so also the same rule and
        structure), the same engine and classes, the feature count and y's dtype. A
        call of one row spent about a third of its time in the full checks and their
        dispatch (24 of 66 us, B = 200, by hand) though they find the same thing call
        after call."""
        d = self.__dict__
        memo = d.get("_row_memo")
        if memo is None or type(X) is not np.ndarray or type(y) is not np.ndarray:
            return None
        params, engine, classes_, width, a, extra, y_dtype, targets, rule = memo
        if X.shape != (1, width) or X.dtype != np.float64 or y.shape != (1,):
            return None
        if y.dtype != y_dtype or d.get("_engine") is not engine or "feature_names_in_" in d:
            return None
        if d.get("classes_") is not classes_:
            return None
        if not same_objects(param_getter(type(self)), self, params):
            return None
        if not row_passes(X[0], a, extra):  # finite, a (|x|^2 + c^2) too (the full checks')
            return None
        Y = targets.get(y.item())  # None: not a class (or a float class not a label)
        if Y is None:
            return None
        if classes is not None:  # last, as the full checks look at it after X and y
            try:
                if not _same_classes(classes, classes_):
                    return None
            except (TypeError, ValueError):  # (malformed: the full checks say how)
                return None
        return with_intercept(X, engine.spec), Y.copy(), rule, None, engine

    def _remember_row(self, X, y, checked, params, engine) -> None:
        """After a continuing call's rows passed the full checks (for the parameter
        objects ``params`` and the ``engine``, both taken before them): the record
        :meth:`_row_call` checks the next calls of one row against, if these
        parameters are plain values (the cache of :meth:`_checked_params`), the model
        has no feature names and y's labels are of a dtype compared by value. The
        record keeps the classes it read as well as the engine, and a call must find
        both still the model's: a fit meanwhile (engine first, then classes) leaves a
        pair that no call matches."""
        d = self.__dict__
        classes_ = d.get("classes_")
        if params is None or d.get("_engine") is not engine or classes_ is None:
            return
        if X.shape[0] != 1 or type(X) is not np.ndarray or y.dtype.kind not in "iubfUS":
            return
        if y.dtype != classes_.dtype:  # numpy compares across dtypes by promotion
            return
        cached = d.get("_checked_for")
        if "feature_names_in_" in d or cached is None or cached[1] is not checked:
            return  # (parameters other than plain values are checked every call)
        memo = d.get("_row_memo")
        if memo is not None and memo[1] is engine and memo[2] is classes_:
            if memo[6] == y.dtype and all(map(operator.is_, memo[0], params)):
                return  # (recorded already)
        Y = self._label_matrix(classes_)  # row i: the targets of class i
        labels = classes_.tolist()
        # a float label must be a finite whole number (_check_targets), even where
        # classes= declared another class
        ok = [y.dtype.kind != "f" or (math.isfinite(c) and c == math.floor(c)) for c in labels]
        targets = {c: Y[i : i + 1] for i, c in enumerate(labels) if ok[i]}
        width = d.get("n_features_in_")  # (a fit's, if any, sets it before both)
        a = float(params[type(self)._get_param_names().index("a")])
        extra = engine.spec.intercept**2  # (the intercept's constant feature, squared)
        record = (params, engine, classes_, width, a, extra, y.dtype, targets, checked[0])
        self._row_memo = record

    def _checked_params(self):
        """:func:`kernelcw.spec.check_params` of the current parameters, reused while they
        stay the same (same types and equal values) and are all plain scalars or strings:
        a call of ``partial_fit`` on one row spent a tenth of its time re-checking them.
        Any other value (a callable kernel, a RandomState, ...) is checked every call."""
        cached = self.__dict__.get("_checked_for")
        if cached is not None and same_objects(param_getter(type(self)), self, cached[0][1]):
            return cached[1]  # the same (immutable) objects as the cached ones: the same key
        key = params_key(self)
        if key is not None and cached is not None and cached[0] == key:
            return cached[1]
        checked = check_params(self)
        if key is not None:
            self._checked_for = (key, checked)
        return checked

    def _validate(self, X, y, classes, first_call: bool, checked, square: bool = False, defer=True):
        """Input checks, and on a first call the engine's specification and memory
        check, all before any state changes. Returns (X, y, classes_, spec or None,
        whether X's values are left to the engine's walk: :meth:`_learn_rows`; never
        without ``defer``)."""
        specs = []

        def make_spec(X, classes_):
            if first_call:
                spec = engine_spec(self, X.shape[1], len(classes_), checked)
                check_memory(spec)
                specs.append(spec)

        # a first call's checks record the feature count and names (scikit-learn's
        # validate_data): on a bare copy, which _install makes the model's together with
        # its engine, under the old engine's lock (a predict in another thread during a
        # refit checked X against the new names and width, then used the old engine)
        target = self
        if first_call:
            target = type(self).__new__(type(self))
            target.__dict__.update(self.__dict__)
        late = defer and engine_class(checked[1]).checks_rows
        X, y, classes_, late = validate_training(
            target, X, y, classes, first_call, square, make_spec, late
        )
        if first_call:
            self._meta_next = (target.n_features_in_, target.__dict__.get("feature_names_in_"))
        spec = specs[0] if specs else self._engine.spec
        return with_intercept(X, spec), y, classes_, specs[0] if specs else None, late

    def _learn_rows(self, X, Y, rule, engine, late: bool, order=None, fit: bool = False):
        """:meth:`_learn` of X's rows, in ``order`` (None: as they are), at their
        positions (``fit``) or continuing the stream. ``late``: X's values were left to
        the engine's walk (:attr:`kernelcw.engines.Engine.checks_rows`, CSR rows of
        20 Newsgroups at 2^20: their pass was 0.4 of a 6.6 ms fit); should it refuse a
        row, the call is undone and the estimator's checks name what is wrong, or, where
        they find nothing (rows not in canonical order), the call learns the checked
        rows; so too once where the rows were checked (scipy's flag that says they are
        canonical can be stale). Returns (margins, X, late), X checked anew where the
        walk refused it."""
        again = False
        while True:
            rows, targets, positions = (
                (X, Y, None) if order is None else (X[order], Y[order], order)
            )
            if fit and order is None:
                positions = np.arange(X.shape[0])
            try:
                with x_errors_first(self, X, late):  # (a step that overflows, ...: undone)
                    return self._learn(rows, targets, rule, positions, engine, late), X, late
            except RowsUnchecked:
                if again:
                    raise
            X, late, again = checked_late(self, X), False, True

    def _start(self, classes_: np.ndarray, spec, held: list | None = None, replaced=None):
        """A fresh engine and counters (the prior N(0, a I)), returned. With ``held``, its
        lock is taken before the engine becomes the model's and stays held (the engine
        in ``held``, for the caller to release, :func:`._locks.release`), so that a call from
        another thread that sees the new model waits for the caller's rows (a first
        ``partial_fit``'s, or every pass of a ``fit``), and learns into the model they
        made or, should they fail, finds the engine dropped. Ctrl-C is held back between
        taking the lock and recording it, so a held lock is always in ``held``; not
        while ``_install`` waits for the old engine's lock (another thread's call).
        ``replaced``: a list that gets the replaced model's counters, as ``_install``
        found them (:func:`._locks.put_back_model`)."""
        if spec.n_models == 1:
            counts = (0, 0, 0)
        else:
            counts = tuple(np.zeros(spec.n_models, dtype=np.int64) for _ in COUNTERS)
        engine = build_engine(spec)
        if held is not None:
            with deferred_interrupt():  # (no Ctrl-C between the lock and its record)
                engine.lock.acquire()
                held.append(engine)
        self._install(engine, classes_, counts, replaced)  # (may wait for the old one's lock)
        return engine

    def _import_state(self, engine, classes_: np.ndarray, counters: tuple) -> None:
        """Install a fitted state rebuilt outside ``fit`` (by :func:`kernelcw.load`): the
        engine, ``classes_`` and (n_updates_, n_mistakes_, n_variance_floored_), shaped
        as :meth:`_start` shapes them. The current parameters become the ones the model
        began with."""
        self._install(engine, classes_, tuple(counters))

    def _install(self, engine, classes_: np.ndarray, counts: tuple, replaced=None) -> None:
        """The model becomes ``engine`` with its classes and counters, under the replaced
        engine's lock: a call learning into that one stores its counters first.
        ``replaced``: a list that gets the replaced model's counters first."""
        old = self.__dict__.get("_engine")
        meta = self.__dict__.pop("_meta_next", None)  # (_validate's: the columns)
        with old.lock if old is not None else _NO_GUARD:
            if replaced is not None:  # (before anything changes: ._locks.put_back_model)
                replaced.append(self.__dict__.get("_counts"))
            self.__dict__.pop("_row_memo", None)  # (the last engine's: let it go)
            if meta is not None:
                self.n_features_in_ = meta[0]
                if meta[1] is None:
                    self.__dict__.pop("feature_names_in_", None)
                else:
                    self.feature_names_in_ = meta[1]
            # the engine before the classes: a call that sees classes_ continues the
            # model (partial_fit_margins), and finds its engine
            self._engine = engine
            self._began_with = self._structure()
            self.classes_ = classes_
            self._counts = counts

    def _structure(self) -> dict:
        return {k: getattr(self, k) for k in STRUCTURAL}

    def _structure_changes(self) -> str:
        """Structural parameters changed since the model began, "name from old to new, ..."
        ("" if none or not begun; :func:`~kernelcw.spec.inert_parameters` never count)."""
        began = self.__dict__.get("_began_with")
        if began is None:
            return ""
        if tuple(began) == STRUCTURAL and same_objects(_STRUCTURE, self, _STRUCTURE(began)):
            return ""  # the same objects (every call of a stream): nothing changed
        now = self._structure()
        inert = inert_parameters(began, self._engine.spec.form)  # (never read: may change)
        changed = [
            k
            for k in STRUCTURAL
            if k not in inert
            and not (now[k] is began[k] or (not callable(now[k]) and now[k] == began[k]))
        ]
        return ", ".join(f"{k} from {began[k]!r} to {now[k]!r}" for k in changed)

    def _check_structure(self, action: str = "partial_fit") -> None:
        """ValueError if set_params changed a structural parameter since the model
        began: ``partial_fit`` cannot continue it, ``save`` would write a state with
        parameters it was not learnt with."""
        what = self._structure_changes()
        if what and action == "save":
            raise ValueError(
                f"cannot save: set_params changed {what} since this model began, and these "
                "shape its state; set them back, or call fit, before saving"
            )
        if what:
            raise ValueError(
                f"set_params changed {what} since this model began; these shape the stored "
                "state, so partial_fit cannot continue it: call fit to start over (or set "
                "them back)"
            )

    def _label_matrix(self, y) -> np.ndarray:
        """(n, K) targets in {-1, +1} for the K binary models."""
        classes_ = self.classes_
        if len(classes_) == 2:
            if y.shape[0] == 1 and y.dtype == classes_.dtype:  # a row: numpy's scalar ==
                return np.array([[1.0 if y[0] == classes_[1] else -1.0]])
            return np.where(y == classes_[1], 1.0, -1.0)[:, None]
        return np.where(y[:, None] == self.classes_[None, :], 1.0, -1.0)

    def _learn(self, X, Y, rule, positions=None, engine=None, late=False) -> np.ndarray:
        """One pass in the given order, all or nothing; returns the (n, K) decision
        values before each update. ``engine``: the one the rows were checked for
        (default: the current one); if it is no longer the model's, _Dropped. ``late``:
        X's values left to the engine's walk (:meth:`_learn_rows`)."""
        engine = self._engine if engine is None else engine
        with engine.lock:  # learning and prediction on one model never interleave
            if self.__dict__.get("_engine") is not engine:
                raise _Dropped  # (a failed first call, waited for, left it unfitted; or
                # a fit or load replaced the engine the rows were checked for)
            engine.set_rule(rule)  # eta, C, r may be set_params'd between calls
            first_floor = not _any(self._counts[2])
            if positions is None and X.shape[0] == 1:  # (None: the general call)
                row = self._learn_one(engine, X, Y)
                if row is not None:
                    if first_floor and row[1]:
                        warn_floor(self, row[1])
                    return row[0]
            res, failed = self._learn_locked(engine, X, Y, positions, late)
            floored = int(res.n_floored.sum())
        if failed is not None:
            warn_stabilised(self, failed)
        if first_floor and floored:  # the model's first floored rounds
            warn_floor(self, floored)
        return res.margins

    def _learn_locked(self, engine, X, Y, positions=None, late=False):
        """:func:`learn_or_stabilise` into ``engine`` (its lock held), all or nothing:
        the counters land in one store after it, and on any error or Ctrl-C before that
        store the engine's checkpoint is restored. Returns (LearnResult, the first
        error's message where a stronger form learnt the call again, or None)."""
        checkpoint = engine.checkpoint(X)
        counts = None
        try:
            # (an engine that cannot undo a call that returned, the primal full engine's
            # call of one block: Ctrl-C held back over that block until the store)
            with _NO_GUARD if engine.undoes_finished(checkpoint) else deferred_interrupt():
                # a numerically weak form that fails learns the call once more in a
                # stronger form of the same model, if the engine has one
                res, failed = learn_or_stabilise(engine, checkpoint, X, Y, positions, late)
                counts = self._counted(res)
                if self.__dict__.get("_engine") is engine:  # (else a fit dropped it)
                    self._counts = counts  # one store: the call is done, counted whole
        except BaseException:  # an error or a Ctrl-C: the model as before the call
            if counts is None or self.__dict__.get("_counts") is not counts:
                with deferred_interrupt():
                    engine.restore(checkpoint)
            raise  # (numba's SystemError for a Ctrl-C: the public call surfaces it)
        return res, failed

    def _counted(self, res) -> tuple:
        """The counters with a call's :class:`kernelcw.engines.base.LearnResult` added,
        as new objects (the caller stores them at once: ``_counts``)."""
        u, m, f = self._counts
        if res.n_updates.shape[0] != 1:  # (one per binary model)
            return u + res.n_updates, m + res.n_mistakes, f + res.n_floored
        return u + int(res.n_updates[0]), m + int(res.n_mistakes[0]), f + int(res.n_floored[0])

    def __setstate__(self, state):
        if "_counts" not in state and all(c in state for c in COUNTERS):
            state = dict(state)  # (pickled when the counters were three attributes)
            state["_counts"] = tuple(state.pop(c) for c in COUNTERS)
        super().__setstate__(state)

    def __getstate__(self):
        state = dict(super().__getstate__())  # (scikit-learn's may be __dict__ itself)
        state.pop("_row_memo", None)  # (a cache of this process's objects, made again)
        state.pop("_model_lock", None)  # (a lock, not the model: ._locks)
        return state

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        # rows of a Gram matrix: scikit-learn's splitters then cut K[train][:, train]
        tags.input_tags.pairwise = isinstance(self.kernel, str) and self.kernel == "precomputed"
        return tags


def _any(counts) -> bool:
    """Whether a counter (an int, or an array per binary model) is nonzero anywhere."""
    return bool(counts.any() if isinstance(counts, np.ndarray) else counts)


class _Dropped(Exception):
    """The engine a call was checked for, or waited for, is no longer the model's: its
    first call failed, or a fit (or load) replaced it meanwhile."""


def _engine_word(form: str) -> str:
    return "dual" if form == "dual" else "primal"
