"""Online evaluation: the papers' protocol (progressive validation).

Each example is first predicted with the current model, then learned from. The
cumulative count of wrong predictions is the online mistake curve the papers plot.
"""

from __future__ import annotations

import contextlib
import copy
import re
import time
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.utils.validation import column_or_1d

from ._interrupt import put_back
from ._validation import check_positive_int
from .estimators._input import check_stream
from .estimators._labels import _check_targets, _unique_labels, check_labels_in

__all__ = ["OnlineResult", "run_online"]


@dataclass(frozen=True)
class OnlineResult:
    """What :func:`run_online` measured.

    Attributes
    ----------
    predictions : ndarray of shape (n_samples,)
        The label predicted for each example before learning from it.
    cumulative_mistakes : ndarray of shape (n_samples,)
        Wrong predictions among the first 1, 2, ..., n examples.
    mistake_rate : float
        ``cumulative_mistakes[-1] / n_samples``.
    n_mistakes : int
        ``cumulative_mistakes[-1]`` (0 for no examples).
    n_updates : int, ndarray or None
        Rounds that changed the model (the estimator's ``n_updates_`` gained
        during the run; per class for one-vs-rest models); None for an estimator
        that does not count them.
    seconds : float
        Wall-clock time of the run (learning and prediction).
    estimator : object
        The fitted estimator after the run.
    """

    predictions: np.ndarray
    cumulative_mistakes: np.ndarray
    mistake_rate: float
    n_updates: int | np.ndarray
    seconds: float
    estimator: object

    @property
    def n_mistakes(self) -> int:
        return int(self.cumulative_mistakes[-1]) if self.cumulative_mistakes.size else 0


def _empty_model_prediction(classes: np.ndarray):
    """What scikit-learn's linear classifiers predict with every score 0: the first of
    the sorted classes (``scores > 0`` for two, the first of argmax's ties for more)."""
    return np.unique(classes)[0]


def _predictions_from_decisions(F: np.ndarray, classes: np.ndarray) -> np.ndarray:
    if F.shape[1] == 1:
        return np.where(F[:, 0] >= 0.0, classes[1], classes[0])
    return classes[np.argmax(F, axis=1)]


def run_online(
    estimator,
    X,
    y,
    *,
    classes=None,
    progress: bool | str = False,
    chunk_size: int = 1024,
    fresh: bool = True,
) -> OnlineResult:
    """Run the online protocol: predict each example, then learn from it.

    Parameters
    ----------
    estimator : kernelcw estimator, or any scikit-learn classifier with ``partial_fit``
        kernelcw estimators report the margin each round saw before its update,
        so the run costs one pass. Other estimators are driven one example at a
        time (``predict`` then ``partial_fit``), e.g. scikit-learn's
        ``SGDClassifier`` or ``PassiveAggressiveClassifier``.
    X : {array-like, sparse matrix} of shape (n_samples, n_features)
    y : array-like of shape (n_samples,)
    classes : array-like, optional
        All labels; by default ``np.unique(y)`` (with ``fresh=False``, a fitted
        estimator's ``classes_``). The empty model scores every class 0: a kernelcw
        estimator's first prediction is then the larger of two classes (sign(0) = +1)
        and the first of more (argmax takes the first tie), as its ``predict`` would
        say; for another estimator, which cannot predict before it learns, the first
        class, as scikit-learn's linear classifiers predict with scores 0.
    progress : bool or str, default=False
        Show a tqdm progress bar, labelled with the estimator's class name or with
        the string given.
    chunk_size : int, default=1024
        Rows handed to the learner at a time, an integer >= 1 (results do not depend
        on it).
    fresh : bool, default=True
        Learn from a clone of ``estimator`` (an unfitted copy) instead of
        continuing from its current state. With ``fresh=False`` a run that fails or
        is interrupted leaves ``estimator`` as it was before the run (a copy of it is
        kept while it runs), not part-way through the stream.

    For a kernelcw estimator the values are checked as ``fit`` checks them, on the
    whole stream before anything is learnt: an error names the row in the stream.

    Returns
    -------
    OnlineResult
    """
    if not hasattr(estimator, "partial_fit"):
        raise TypeError(
            f"run_online needs an estimator that learns online (has partial_fit); "
            f"{type(estimator).__name__} has none (a Pipeline, for one, learns only in batch: "
            "scale the stream beforehand and pass the classifier itself)"
        )
    check_positive_int("chunk_size", chunk_size)
    est = clone(estimator) if fresh else estimator
    X, y, classes = _stream(est, X, y, classes)
    n = y.shape[0]
    own = hasattr(est, "partial_fit_margins")  # kernelcw: returns the margins it saw
    chunk = int(chunk_size)
    if not own:
        chunk = 1
    preds = np.empty(n, dtype=classes.dtype if classes.dtype != object else object)
    updates_before = _updates(est)

    bar = None
    if progress:
        from tqdm.auto import tqdm

        label = progress if isinstance(progress, str) else type(est).__name__
        bar = tqdm(total=n, unit="ex", desc=label, leave=False)
    kept = None if fresh else _snapshot(est)  # (a failed run puts it back)
    t0 = time.perf_counter()
    try:
        for start in range(0, n, chunk):
            stop = min(n, start + chunk)
            Xc = X[start:stop]
            yc = y[start:stop]
            with _rows_of_the_stream(start):
                if own:
                    F = est.partial_fit_margins(Xc, yc, classes=classes)
                    preds[start:stop] = _predictions_from_decisions(F, est.classes_)
                else:
                    if hasattr(est, "classes_"):
                        preds[start:stop] = est.predict(Xc)
                    else:  # the empty model: all scores 0
                        preds[start:stop] = _empty_model_prediction(classes)
                    est.partial_fit(Xc, yc, classes=classes)
            if bar is not None:
                bar.update(stop - start)
    except BaseException:
        if kept is not None:  # the caller's estimator, as before the run
            _put_back(est, kept)
        raise
    finally:
        if bar is not None:
            bar.close()
    seconds = time.perf_counter() - t0
    wrong = preds != y
    cum = np.cumsum(wrong)
    n_upd = _updates(est)
    if n_upd is not None and updates_before is not None:
        n_upd = n_upd - updates_before
    return OnlineResult(
        predictions=preds,
        cumulative_mistakes=cum,
        mistake_rate=float(cum[-1] / n) if n else 0.0,
        n_updates=n_upd,
        seconds=seconds,
        estimator=est,
    )


def _stream(est, X, y, classes):
    """(X, y, classes) for the run, checked: X rows-sliceable, y 1-d of as many labels,
    for a kernelcw estimator X's values as ``fit`` checks them on the whole stream
    (each chunk's call would name rows of its chunk), y class labels, and the classes:
    given, the fitted estimator's, or y's (at least two)."""
    if sp.issparse(X):
        X = X.tocsr()  # COO and others cannot be sliced by rows
    elif not hasattr(X, "shape"):
        X = np.asarray(X)  # lists and other array-likes
    # a column (n, 1) becomes (n,) with scikit-learn's warning, as fit takes it (compared
    # as a column with the (n,) predictions it broadcast to n x n mistakes)
    y = column_or_1d(y, warn=True)
    n = y.shape[0]
    if X.shape[0] != n:
        raise ValueError(f"X has {X.shape[0]} rows but y has {n} labels")
    if n == 0:
        raise ValueError("run_online needs at least one example; X and y are empty")
    if hasattr(est, "partial_fit_margins"):  # (kernelcw)
        check_stream(X, y, est)
    else:
        _check_targets(y)
    if classes is None and not hasattr(est, "classes_"):
        classes = _unique_labels(y, "y")  # (y's own: every label is one)
        if len(classes) < 2:
            raise ValueError(
                f"y contains only one class ({classes.tolist()[0]!r}); a classifier needs "
                "two. Pass classes=[...] to declare the others."
            )
        return X, y, classes
    classes = np.asarray(est.classes_ if classes is None else classes)
    check_labels_in(y, classes)
    return X, y, classes


@contextlib.contextmanager
def _rows_of_the_stream(start: int):
    """A primal engine's FloatingPointError names its row within the call's X ("input
    row N"); a chunk's is row ``start + N`` of the stream, as every other error of a
    run names it (the dual engine's "training row" is its stream position already)."""
    try:
        yield
    except FloatingPointError as err:
        found = re.search(r"\binput row (\d+)\b", str(err))
        if not start or found is None:
            raise
        row = f"input row {start + int(found.group(1))} of the stream"
        raise FloatingPointError(str(err).replace(found.group(0), row, 1)) from None


def _snapshot(est):
    """A deep copy of ``est``, made while no call learns into a kernelcw model."""
    engine = est.__dict__.get("_engine")
    if engine is None:
        return copy.deepcopy(est)
    with engine.lock:
        return copy.deepcopy(est)


def _put_back(est, kept) -> None:
    """``est``'s attributes as ``kept``'s (a deep copy made before the run,
    :func:`._interrupt.put_back`); a kernelcw estimator keeps its own model lock
    (copies leave it out)."""
    lock = {k: v for k, v in est.__dict__.items() if k == "_model_lock"}
    put_back(est, {**kept.__dict__, **lock})


def _updates(est):
    n = getattr(est, "n_updates_", None)
    if n is None:
        return None
    return np.array(n, copy=True) if np.ndim(n) else int(n)
