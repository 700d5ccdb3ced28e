"""kernelcw learners as river classifiers (``pip install "kernelcw[river]"``).

:class:`Classifier` wraps any kernelcw estimator, primal or kernel, budgeted or not, behind
river's online API: ``learn_one``/``predict_one``/``predict_proba_one`` on feature dicts and
``learn_many``/``predict_many``/``predict_proba_many`` on pandas frames. It talks to the
estimator's engine directly (one row needs no scikit-learn validation), so a row costs a few
microseconds on top of the update itself.

Features. Names map to columns in the order they first appear; a name absent from a dict is
0. When new names appear the model widens (:func:`kernelcw.grow.widen`): the primal mean gets
0 and the covariance the prior ``a I`` in the new coordinates, the support vectors a 0 column
(an intercept stays as it was): exactly the model that had the wider inputs from the start.
The width grows by half at a time (amortised O(1) copies). A kernel's ``gamma=None`` is
``1 / n_features`` when the model starts, then fixed. Only learning adds names: a prediction
changes nothing, and predicts for a new name what the model that has it would
(:func:`kernelcw.grow.wider_margins`: the prior variance ``a`` there; for a kernel model, the
support vectors' 0 there).

Labels. With ``classes`` given the model learns exactly as the estimator's
``partial_fit(X, y, classes=classes)`` on the zero-padded rows. Without it, labels are learnt
as they appear: rows are kept while only one label has been seen (a binary model needs both
sides); at the second label the binary model starts (its positive class is the second label
seen) and learns the kept rows first, so the two-class stream is the estimator's own. At the
third label the binary model becomes two one-vs-rest models, itself and its mirror
(:func:`kernelcw.grow.mirror`, exact: every rule is odd in the label), and each later label
gets a new one-vs-rest model at the prior, which has not learnt from the earlier rows (which
it would have seen as negatives); declare ``classes`` when the labels are known in advance.
"""

from __future__ import annotations

import copy

try:
    from river import base as _river_base
except ImportError as exc:  # pragma: no cover - exercised in a subprocess by the tests
    raise ImportError(
        'kernelcw.river needs the river package: pip install "kernelcw[river]"'
    ) from exc

import numpy as np

from ._diag_stream import DiagStream, fast_engine
from ._interrupt import deferred_interrupt, surface_interrupt, surfaces_interrupts
from ._river_input import (
    check_labels,
    check_rows,
    checked_template,
    columns,
    declared_labels,
    dict_row,
    frame_values,
    label_array,
    label_rows,
    template,
    too_large,
)
from .estimators import CWClassifier
from .estimators._input import with_intercept
from .estimators._mixins import margin_proba
from .estimators._warnings import warn_floor, warn_stabilised
from .grow import add_models, mirror, widen, wider_margins
from .spec import check_memory, check_params, engine_spec, intercept_value

__all__ = ["Classifier"]

#: The adapter's attributes a failed learning call puts back as they were, by
#: reference: the calls replace the width, kept rows and floored count, and grow the
#: labels, pending rows and feature index in place (only at their ends), which
#: :meth:`Classifier._learn_whole` cuts back to their sizes before the call.
_PUT_BACK = ("_width", "_rows_y", "_floored", "_labels", "_pending", "_index")


class Classifier(_river_base.MiniBatchClassifier):
    """A kernelcw estimator as a river classifier.

    Parameters
    ----------
    estimator : kernelcw estimator, default=None
        The learner and its hyper-parameters, e.g. ``AROWClassifier(r=1.0)`` or
        ``SCWClassifier(kernel="rbf", gamma=0.1, budget=200)``; it is cloned, never
        fitted itself. None: ``AROWClassifier(covariance="diag")`` (soft, linear, O(d)
        a row). ``n_iter`` and ``shuffle`` do not apply to a stream;
        ``kernel="precomputed"`` is refused; an intercept is learnt as by the estimator.
    classes : tuple, default=None
        All labels of the stream, if known in advance: the model then learns exactly
        as ``estimator.partial_fit(X, y, classes=classes)`` and a label outside them
        is a ValueError. None: labels are learnt as they appear (see the module
        docstring for what is exact).

    Attributes
    ----------
    estimator_ : kernelcw estimator or None
        The fitted estimator holding the model (its engine, counters
        ``n_updates_``, ``n_mistakes_``), None before the model starts. Its columns
        are ``feature_names`` then spare ones (0 for every row: the width grows by
        half), ``n_features_in_`` of them; a ``gamma=None`` is the value it was fixed
        to at the start. It pickles, saves (:func:`kernelcw.save`) and predicts alone.
    feature_names : list
        The feature names seen so far, in column order.
    labels : list
        The labels seen (or declared), in the models' order: for two labels
        ``[negative, positive]``, else one one-vs-rest model each.

    Examples
    --------
    >>> from river import datasets, evaluate, metrics, preprocessing
    >>> from kernelcw import AROWClassifier
    >>> from kernelcw.river import Classifier
    >>> model = preprocessing.StandardScaler() | Classifier(AROWClassifier(covariance="diag"))
    >>> evaluate.progressive_val_score(datasets.Phishing(), model, metrics.Accuracy())
    Accuracy: 88.95%
    >>> clf = model["Classifier"]
    >>> clf.labels, clf.estimator_.n_mistakes_
    ([True, False], 139)
    """

    def __init__(self, estimator=None, classes: tuple | None = None):
        self.estimator = estimator
        self.classes = classes
        self._index: dict = {}
        self._width = 0
        self._labels: list = []
        self._rows_y: dict = {}
        self._pending: list[np.ndarray] = []
        self._model = None
        self._fast = None  # a DiagStream while the model is binary primal-diagonal
        self._floored = False  # whether a round's variance was floored (warned once)
        self._declared = None if classes is None else declared_labels(classes)
        self._known = frozenset(self._declared or ())

    # ------------------------------------------------------------ river's API

    @classmethod
    def _unit_test_params(cls):
        from .estimators import AROWClassifier, SCWClassifier

        yield {"estimator": CWClassifier(covariance="diag")}
        yield {"estimator": AROWClassifier()}
        yield {"estimator": SCWClassifier(kernel="rbf", gamma=0.1, budget=30)}

    def _unit_test_skips(self) -> set:
        est = template(self.estimator)
        if check_params(est)[1] == "dual" and est.budget is None:
            return {"check_bounded_memory_growth"}  # the support set grows: by design
        return set()

    @property
    def _multiclass(self) -> bool:
        return self._declared is None or len(self._declared) > 2

    @property
    def estimator_(self):
        self._sync()
        return self._model

    def __getstate__(self) -> dict:
        self._sync()
        state = self.__dict__.copy()
        state["_fast"] = None  # views of the engine: made again on first use
        return state

    @property
    def feature_names(self) -> list:
        return list(self._index)

    @property
    def labels(self) -> list:
        return list(self._labels)

    def learn_one(self, x: dict, y) -> None:
        try:  # (surfaces_interrupts' work, without its frame: a row here is ~2.5 us)
            if self._declared is not None and y not in self._known:
                raise ValueError(f"label {y!r} is not one of classes={self.classes!r}")
            fast = self._fast_path()
            if fast is not None and y in self._rows_y:
                row = fast.row(x, self._index)
                if row is not None:
                    with fast.engine.lock:
                        fast.learn(row[0], row[1], float(self._rows_y[y][0, 0]))
                    if not self._floored and fast.counts.n_floored[0]:
                        self._warn_floor(int(fast.counts.n_floored[0]))
                    return
            self._learn_whole(*self._row(x), [y])
        except SystemError as err:
            surface_interrupt(err)
        except TypeError:  # (an unhashable label fails the lookups above: named here)
            check_labels([y])
            raise

    @surfaces_interrupts
    def learn_many(self, X, y) -> None:
        labels = list(y)
        if len(labels) != len(X):
            raise ValueError(f"learn_many: X has {len(X)} rows but y {len(labels)} labels")
        check_labels(labels)  # (before the lookups an unhashable label would fail)
        if self._declared is not None:
            bad = [v for v in labels if v not in self._known]
            if bad:
                raise ValueError(f"labels {bad[:5]!r} are not in classes={self.classes!r}")
        if labels:
            self._learn_whole(*self._frame(X), labels)

    def predict_proba_one(self, x: dict, **kwargs) -> dict:
        try:  # (as learn_one)
            fast = self._fast_path()
            row = None if fast is None else fast.row(x, self._index)
            if row is not None:
                with fast.engine.lock:
                    f, v, _ = fast.margin(*row)
                P = margin_proba(np.array([[f]]), np.array([[v]]))
            else:
                P = self._proba(self._row(x)[1])
        except SystemError as err:
            surface_interrupt(err)
        return {} if P is None else dict(zip(self._out_labels(), P[0].tolist(), strict=True))

    def predict_one(self, x: dict, **kwargs):
        try:  # (as learn_one)
            fast = self._fast_path()
            row = None if fast is None else fast.row(x, self._index)
            if row is None:
                return self._predict(self._row(x)[1])[0]
            with fast.engine.lock:
                f = fast.margin(*row)[0]
        except SystemError as err:
            surface_interrupt(err)
        return self._labels[1] if f >= 0.0 else self._labels[0]

    @surfaces_interrupts
    def predict_proba_many(self, X):
        import pandas as pd

        P = self._proba(self._frame(X)[1])
        if P is None:
            return pd.DataFrame(index=X.index)
        return pd.DataFrame(P, index=X.index, columns=self._out_labels())

    @surfaces_interrupts
    def predict_many(self, X):
        import pandas as pd

        return pd.Series(self._predict(self._frame(X)[1]), index=X.index, dtype=object)

    # ------------------------------------------------------------ rows

    def _fast_path(self) -> DiagStream | None:
        """The row-at-a-time path of a binary primal-diagonal model, else None."""
        model, fast = self._model, self._fast
        if model is None or (fast is not None and fast.engine is model._engine):
            return fast
        self._sync()
        self._fast = DiagStream(model._engine) if fast_engine(model._engine) else None
        return self._fast

    def _sync(self) -> None:
        """Adds the fast path's counters to the estimator's."""
        if self._fast is not None:
            with deferred_interrupt():  # (taken from the fast path: stored, not lost)
                est, (u, m, f) = self._model, self._fast.take_counts()
                if u or m or f:  # (else the counters stay the same object: a failed
                    u0, m0, f0 = est._counts  # learning call tells itself by a new one)
                    est._counts = (u0 + u, m0 + m, f0 + f)

    def _row(self, x: dict) -> tuple[list, np.ndarray]:
        """``x``'s names and ``x`` as a (1, width) row, values checked, its new names
        placed after the index's (not added: see :meth:`_commit`)."""
        names = list(x)
        index = self._index
        try:
            cols, width = [index[k] for k in names], self._width
        except KeyError:
            cols, width = columns(index, self._width, names)
        row = dict_row(x, cols, width)
        bad = check_rows(row, *self._scale())
        if bad is not None:  # (NaN, infinity: by name; else the row is too large)
            i, j = bad
            name = names[cols.index(j)] if j >= 0 else None
            raise ValueError(f"feature {name!r} is {x[name]!r}: remove or impute it first"
                             if j >= 0 else too_large(i))  # fmt: skip
        return names, row

    def _frame(self, X) -> tuple[list, np.ndarray]:
        """A pandas frame's names and its (n, width) rows, its columns placed by name
        (new names after the index's, not added)."""
        names, values = frame_values(X)
        cols, width = columns(self._index, self._width, names)
        M = np.zeros((values.shape[0], width))
        M[:, cols] = values
        bad = check_rows(M, *self._scale())
        if bad is not None:  # (NaN, infinity: by row and name; else the row is too large)
            i, j = bad
            if j < 0:
                raise ValueError(too_large(i))
            where = f"row {i}, column {names[cols.index(j)]!r} is {float(M[i, j])!r}"
            raise ValueError(f"{where}: remove or impute it first")
        return names, M

    def _scale(self) -> tuple[float, float]:
        """(a, c^2): the prior scale and the intercept's constant feature squared, which
        the rows are checked against (the estimator's)."""
        if self._model is None:
            est = template(self.estimator)
            return est.a, intercept_value(est) ** 2
        spec = self._model._engine.spec
        return spec.a, spec.intercept**2

    def _commit(self, names: list, M: np.ndarray) -> np.ndarray:
        """Adds the new ``names`` of checked rows ``M`` to the index, widens the model
        if they need it, and returns ``M`` at the model's width. Learning only: a
        prediction changes nothing (:meth:`_margins`)."""
        index = self._index
        if all(k in index for k in names):
            return M
        for k in names:
            if k not in index:
                index[k] = len(index)
        need = len(index)
        if need > self._width:
            wider = need if self._model is None else max(need, self._width + self._width // 2)
            if self._model is not None:
                self._model._engine = widen(self._model._engine, wider)
                self._model.n_features_in_ = wider
            self._width = wider
        if M.shape[1] < self._width:
            M = np.hstack([M, np.zeros((M.shape[0], self._width - M.shape[1]))])
        return M

    # ------------------------------------------------------------ learning

    def _learn_whole(self, names: list, M: np.ndarray, labels: list) -> None:
        """Checked rows ``M`` (``names``) learnt all or nothing: a failed or interrupted
        call leaves the adapter as it was (names, width, labels, kept rows, model). A new
        label met while a model runs splits the rows into several learning calls: a copy
        of the model learns them; else the one call is all or nothing itself."""
        check_labels(labels)
        model = self._model
        if self._fast is not None:
            self._sync()  # (the fast path's counters into the model's)
        rows_y = self._rows_y
        fresh = model is not None and (
            labels[0] not in rows_y if len(labels) == 1 else any(v not in rows_y for v in labels)
        )
        if model is not None and not fresh and all(map(self._index.__contains__, names)):
            return self._learn(M, labels)  # (one learning call, all or nothing: nothing else)
        if fresh:
            self._model = copy.deepcopy(model)  # (the copy learns; the model is kept)
            self._fast = None  # (views of the engine learnt into)
        d = self.__dict__
        saved = {k: d[k] for k in _PUT_BACK}
        sizes = (len(self._index), len(self._labels), len(self._pending))
        kept = None if model is None else (model._engine, model.n_features_in_, model._counts)
        try:
            self._learn(self._commit(names, M), labels)
        except BaseException:
            if kept is not None and not fresh and model._counts is not kept[2]:
                raise  # (its one learning call went through and counted: final, whole)
            with deferred_interrupt():  # (the adapter as before, whole)
                d.update(saved)  # (the objects it had; below, what was added to them)
                while len(self._index) > sizes[0]:
                    self._index.popitem()  # (names are only ever added, at the end)
                del self._labels[sizes[1] :], self._pending[sizes[2] :]
                self._model = model
                if kept is not None and not fresh:  # (else the copy learnt)
                    model._engine, model.n_features_in_ = kept[:2]
                self._fast = None
            raise
        if fresh:  # (the estimator object users hold takes the copy's state)
            with deferred_interrupt():
                model.__dict__.update(self._model.__dict__)
                model.__dict__.pop("_row_memo", None)
                self._model = model

    def _learn(self, X: np.ndarray, labels: list) -> None:
        """Rows in order: runs of known labels learnt in one engine call, each new
        label handled where it appears."""
        start = 0
        for i, y in enumerate(labels):
            if y not in self._rows_y and not (self._model is None and y in self._labels):
                self._learn_known(X[start:i], labels[start:i])
                self._new_label(y)
                start = i
        self._learn_known(X[start:], labels[start:])

    def _learn_known(self, X: np.ndarray, labels: list) -> None:
        if not labels:
            return
        if self._model is None:
            if self._declared is not None:
                self._start(self._declared)
            else:  # one label so far: kept until the second (the parameters checked at
                if not self._pending:  # the first rows)
                    checked_template(self.estimator)
                self._pending.extend(r.copy() for r in X)
                return
        if X.shape[1] < self._width:  # rows made before the model started (width 0)
            X = np.hstack([X, np.zeros((X.shape[0], self._width - X.shape[1]))])
        Y = self._rows_y
        T = Y[labels[0]] if len(labels) == 1 else np.vstack([Y[v] for v in labels])
        self._learn_rows(X, T)

    def _learn_rows(self, X: np.ndarray, T: np.ndarray) -> None:
        """The estimator's ``_learn`` without its per-call costs (the rule re-set):
        all or nothing, counters included, and the variance-floor warning the first
        time it happens."""
        self._sync()
        est = self._model
        engine = est._engine
        X = with_intercept(X, engine.spec)
        with engine.lock:  # (the estimator's own all-or-nothing learning and counting)
            row = est._learn_one(engine, X, T) if X.shape[0] == 1 else None
            if row is None:  # (None: the general call; else estimators._one_row's ways)
                res, failed = est._learn_locked(engine, X, T)
                floored = int(res.n_floored.sum())
            else:
                failed, floored = None, row[1]
        if failed is not None:
            warn_stabilised(est, failed)
        if not self._floored and floored:
            self._warn_floor(floored)

    def _warn_floor(self, n: int) -> None:
        """The estimator's warning, the first time a round's variance is floored."""
        self._floored = True
        warn_floor(self._model, n)

    def _new_label(self, y) -> None:
        if self._declared is not None:  # checked on entry; the model starts on first rows
            return
        K = len(self._labels) + 1
        if K <= 2:
            self._labels.append(y)
        if K == 2:
            pending, self._pending = self._pending, []
            self._start(self._labels)
            if pending:
                P = np.zeros((len(pending), self._width))
                for i, r in enumerate(pending):
                    P[i, : r.size] = r
                self._learn_known(P, [self._labels[0]] * len(pending))
            return
        if K < 2:
            return
        self._sync()  # (the new class: its model built aside, then installed whole)
        model = self._model
        engine = add_models(mirror(model._engine) if K == 3 else model._engine, 1)
        counts = []
        for old in model._counts:
            old = np.atleast_1d(old)
            prev = np.concatenate([old, old]) if K == 3 else old
            counts.append(np.concatenate([prev, [0]]).astype(np.int64))
        labels = [*self._labels, y]
        classes_, rows_y = label_array(labels), label_rows(labels)
        with deferred_interrupt():  # the new class, whole or not at all
            model._install(engine, classes_, tuple(counts))
            self._labels.append(y)
            self._rows_y = rows_y

    def _start(self, labels: list) -> None:
        """The estimator and its engine at the prior, for ``labels`` (>= 2)."""
        self._width = max(self._width, 1)
        est, checked = checked_template(self.estimator, self._width)
        spec = engine_spec(est, self._width, len(labels), checked)
        check_memory(spec)
        est._start(label_array(labels), spec)
        est.n_features_in_ = self._width
        self._labels = list(labels)
        self._rows_y = label_rows(self._labels)
        self._model = est

    # ------------------------------------------------------------ prediction

    def _proba(self, X: np.ndarray) -> np.ndarray | None:
        """(n, n_labels) probabilities, None before any label."""
        if self._model is None:
            if not self._labels and self._declared is None:
                return None
            K = len(self._labels) if self._declared is None else len(self._declared)
            return np.full((X.shape[0], K), 1.0 / K)
        return margin_proba(*self._margins(X, variance=True))

    def _margins(self, X: np.ndarray, variance: bool) -> tuple:
        """(f, v) of rows of :meth:`_row` or :meth:`_frame` (v None unless asked for):
        their new names, in the spare columns and past the model's width, as the model
        that has them but never learnt from them would see them (:func:`wider_margins`)."""
        engine, w = self._model._engine, self._width
        with engine.lock:
            return wider_margins(engine, with_intercept(X[:, :w], engine.spec), X[:, w:], variance)

    def _out_labels(self) -> list:
        """The labels predictions are over: those seen, or all declared ones."""
        return self._labels or list(self._declared or ())

    def _predict(self, X: np.ndarray) -> list:
        labels = self._out_labels()
        if self._model is None:
            return [labels[0] if labels else None] * X.shape[0]
        f = self._margins(X, variance=False)[0]
        if f.shape[1] == 1:
            neg, pos = self._labels
            return [pos if v >= 0.0 else neg for v in f[:, 0].tolist()]
        return [self._labels[k] for k in np.argmax(f, axis=1).tolist()]
