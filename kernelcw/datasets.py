"""Small data loaders for the command line and examples: no network needed.

* :func:`load_default` -- scikit-learn's bundled Wisconsin breast cancer data
  (binary, 569 x 30), the command line's default;
* :func:`load_builtin` -- one of the data sets bundled with scikit-learn
  (:data:`BUILTIN`);
* :func:`load_svmlight` -- a LIBSVM / svmlight text file (sparse CSR features).

Each returns a :class:`Dataset`. Every failure to read or recognise the data
raises :class:`DatasetError` (a ``ValueError``) with a one-line message.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # scipy loads on first use: `kernelcw --help` imports this module
    import scipy.sparse as sp

__all__ = [
    "BUILTIN",
    "DEFAULT",
    "Dataset",
    "DatasetError",
    "load_builtin",
    "load_default",
    "load_svmlight",
]

#: Data sets bundled with scikit-learn (no download), with a one-line description.
BUILTIN: dict[str, str] = {
    "breast_cancer": "Wisconsin diagnostic breast cancer, 569 x 30, 2 classes",
    "digits": "8x8 handwritten digits, 1797 x 64, 10 classes",
    "iris": "Fisher's iris, 150 x 4, 3 classes (rows sorted by class)",
    "wine": "wine cultivars, 178 x 13, 3 classes",
}

#: The name :func:`load_default` loads.
DEFAULT = "breast_cancer"


class DatasetError(ValueError):
    """A data set could not be found, read or used."""


@dataclass(frozen=True)
class Dataset:
    """Features, labels and a name to show.

    Attributes
    ----------
    name : str
        The built-in name or the file's base name.
    X : ndarray or scipy.sparse.csr_matrix of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,)
    source : str
        Where the data came from (``"scikit-learn"`` or the file path).
    """

    name: str
    X: np.ndarray | sp.csr_matrix
    y: np.ndarray
    source: str

    @property
    def n_samples(self) -> int:
        return int(self.X.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.X.shape[1])

    @property
    def classes(self) -> np.ndarray:
        return np.unique(self.y)

    @property
    def sparse(self) -> bool:
        import scipy.sparse as sp

        return sp.issparse(self.X)


def load_default() -> Dataset:
    """scikit-learn's bundled breast cancer data (binary, 569 x 30), unscaled."""
    return load_builtin(DEFAULT)


def load_builtin(name: str) -> Dataset:
    """One of the data sets bundled with scikit-learn (see :data:`BUILTIN`), unscaled.

    Raises
    ------
    DatasetError
        For a name not in :data:`BUILTIN`.
    """
    from sklearn import datasets as skd

    loaders = {
        "breast_cancer": skd.load_breast_cancer,
        "digits": skd.load_digits,
        "iris": skd.load_iris,
        "wine": skd.load_wine,
    }
    if name not in loaders:
        raise DatasetError(f"unknown built-in data set {name!r}; choose from {', '.join(BUILTIN)}")
    X, y = loaders[name](return_X_y=True)
    return Dataset(
        name=name, X=np.asarray(X, dtype=np.float64), y=np.asarray(y), source="scikit-learn"
    )


def _data_lines(path: str):
    """(line number, text) of each example line of an svmlight file: comments cut, blank
    lines skipped, ``.gz`` / ``.bz2`` decompressed, as scikit-learn reads it."""
    import bz2
    import gzip

    opener = {".gz": gzip.open, ".bz2": bz2.open}.get(os.path.splitext(path)[1], open)
    with opener(path, "rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                text = "\ufffd" + raw.decode("utf-8", "replace")  # marked: not UTF-8
            text = text.split("#", 1)[0].strip()
            if text:
                yield lineno, text


#: The largest feature index scikit-learn's svmlight reader takes (32-bit indices).
MAX_INDEX = 2**31 - 2


def _line_problem(text: str) -> str | None:
    """What is wrong with one example line (``label index:value ...``), or None."""
    if text.startswith("\ufffd"):
        return "it holds bytes that are not UTF-8 text"
    label, *pairs = text.split()
    try:
        value = float(label)
    except ValueError:
        return f"the label {label!r} is not a number"
    if not math.isfinite(value) or value != round(value):
        return f"the label {label!r} is not a class label (an integer)"
    for pair in pairs:
        index, sep, val = pair.partition(":")
        if not sep:
            return f"{pair!r} is not index:value"
        if index == "qid":
            continue
        try:
            i = int(index)
        except ValueError:
            return f"the index in {pair!r} is not an integer"
        if i < 0:
            return f"the index in {pair!r} is negative"
        if i > MAX_INDEX:
            return f"the index in {pair!r} is larger than {MAX_INDEX:,} (a 32-bit feature index)"
        try:
            number = float(val)
        except ValueError:
            return f"the value in {pair!r} is not a number"
        if not math.isfinite(number):
            return f"the value in {pair!r} is not finite"
    return None


def _first_bad_line(path: str) -> str | None:
    """``line N: what is wrong: the line`` for the first bad example line, or None."""
    for lineno, text in _data_lines(path):
        problem = _line_problem(text)
        if problem:
            text = text.lstrip("\ufffd")
            shown = text if len(text) <= 60 else text[:57] + "..."
            return f"line {lineno}: {problem}: {shown!r}"
    return None


def load_svmlight(path: str | os.PathLike) -> Dataset:
    """Read a LIBSVM / svmlight file (``label index:value ...`` per line).

    Feature indices may be zero- or one-based (detected as scikit-learn does);
    ``.gz`` and ``.bz2`` files are decompressed. Features come back as a
    float64 CSR matrix.

    Raises
    ------
    DatasetError
        If the file is missing, unreadable, not in the format, or holds no examples.
    """
    import scipy.sparse as sp
    from sklearn.datasets import load_svmlight_file

    path = os.fspath(path)
    if not os.path.exists(path):
        raise DatasetError(f"data file {path!r} does not exist")
    if os.path.isdir(path):
        raise DatasetError(f"data file {path!r} is a directory, not a file")
    try:
        X, y = load_svmlight_file(path, dtype=np.float64)
    except OSError as e:
        raise DatasetError(f"cannot read data file {path!r}: {e.strerror or e}") from None
    except (ValueError, TypeError, IndexError, OverflowError) as e:  # incl. UnicodeDecodeError
        detail = _first_bad_line(path) or (str(e).splitlines()[0] if str(e) else type(e).__name__)
        raise DatasetError(
            f"{path!r} is not a LIBSVM/svmlight file ('label index:value ...' per line): {detail}"
        ) from None
    if X.shape[0] == 0:
        raise DatasetError(f"data file {path!r} holds no examples")
    labels = np.asarray(y)
    if not (np.all(np.isfinite(X.data)) and np.all(np.isfinite(labels))) or np.any(
        labels != np.round(labels)
    ):
        detail = _first_bad_line(path) or "non-finite values or non-integer labels"
        raise DatasetError(f"{path!r}: {detail}")
    # Integral float labels (1.0, -1.0) read back as ints, so they print as in the file.
    if labels.size and np.all(np.isfinite(labels)) and np.all(labels == np.round(labels)):
        labels = labels.astype(np.int64)
    return Dataset(
        name=os.path.basename(path) or path,
        X=sp.csr_matrix(X, dtype=np.float64),
        y=labels,
        source=path,
    )
