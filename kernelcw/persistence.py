"""Save and load fitted estimators without pickle: plain arrays and one JSON document.

The file format (format version 2; README "Saving and loading") is one zip
archive, uncompressed (dense float64 factors deflate poorly), holding

- ``kernelcw.json``: a UTF-8 JSON document, the archive's first member, with
  ``format`` (always ``"kernelcw-model"``), ``format_version`` (an integer),
  ``kernelcw_version`` (the library that wrote it, for information), ``estimator``
  (a class name, looked up among :data:`kernelcw.registry.ALGORITHMS`' estimators:
  nothing named in a file is ever imported), ``params`` (``get_params()``; a
  non-finite float is written ``{"float": "inf"}``, ``"-inf"`` or ``"nan"``),
  ``fitted``, and for a fitted model ``n_features_in``, ``n_classes``, ``classes_object``
  (``classes_`` held strings as objects), ``engine`` (``form``, ``n_models``, the ``seed``
  of the "random" budget policy, the ``block_size``, since session 26 ``learnt_with``:
  the parameters that shape the state as the model began, which ``params`` must match,
  and since version 2 ``rule``, the update rule's name, which the estimator and its
  ``params`` must give) and ``arrays``, the members' names;
- one ``.npy`` member per array (NumPy's ``.npy`` format, never an object array):
  ``classes_``, ``feature_names_in_`` (when the model saw column names),
  ``n_updates_``, ``n_mistakes_``, ``n_variance_floored_``, and the engine's
  :meth:`kernelcw.engines.Engine.state_dict` under ``engine.``.

:func:`load` reads the arrays with ``np.load(..., allow_pickle=False)``, checks
every member against the JSON document and the saved parameters, rebuilds the
estimator from its class and parameters (which pass the estimator's own checks),
and the engine with :meth:`~kernelcw.engines.Engine.from_state`: the loaded model
predicts and continues learning bit for bit as the saved one.
"""

from __future__ import annotations

import io
import json
import math
import os
import zipfile
import zlib

import numpy as np
import scipy.sparse as sp

from . import __version__
from ._atomic import write_atomically
from ._saved_values import json_param, plain_classes
from .engines.saved_state import check_saved_state
from .estimators._base import STRUCTURAL
from .estimators._locks import model_lock
from .estimators._mixins import COUNTERS
from .registry import ALGORITHMS
from .rules import Rule
from .spec import check_params, inert_parameters

__all__ = ["FORMAT", "FORMAT_VERSION", "load", "save"]

#: The ``format`` field of every kernelcw model file.
FORMAT = "kernelcw-model"
#: The version of the file format this library writes; it reads this one and older.
#: 2: the dual engine's ``factor_only``, ``nu_pi_models`` and ``kernel_jitter``, members
#: added to version 1 files over time (where a version 1 file lacks them, their values
#: before they existed), are required: a file without one is damaged, not old.
FORMAT_VERSION = 2
#: The format versions :func:`load` reads.
READS = (1, 2)
#: The name of the JSON member.
META = "kernelcw.json"
#: The estimator classes a file may name (looked up, never imported from the file).
WHITELIST = tuple(sorted({alg.estimator for alg in ALGORITHMS.values()}))
#: What zipfile and np.load raise on a damaged archive.
_ZIP_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError, RuntimeError)


def save(estimator, path: str | os.PathLike) -> None:
    """Save a kernelcw estimator to ``path``, atomically, without pickle.

    Parameters
    ----------
    estimator : kernelcw estimator
        One of the library's classifiers (not a subclass), fitted or not: an
        unfitted one is saved with its parameters only and loads unfitted, as
        ``clone`` would give it.
    path : str or os.PathLike
        The file to write, used as given (no extension is added). The file is
        written beside it under a temporary name, flushed to disk and renamed onto
        ``path``: an error, a crash or a full disk part-way leaves any file that
        was at ``path`` as it was. An existing file keeps its permissions.

    Raises
    ------
    TypeError
        If ``estimator`` is not a kernelcw estimator or ``path`` is not a path.
    ValueError
        If a parameter cannot be written as JSON (a callable kernel, a ``RandomState``:
        set a plain value first), or ``set_params`` changed one that shapes the fitted
        state (``kernel``, ``gamma``, ``budget``, ...) since the fit.
    RuntimeError
        If the model is unusable (an engine broken by a call it could not undo).

    See Also
    --------
    load : read the model back.

    Notes
    -----
    The state is read under the model's lock: saving while another thread learns
    saves it between two calls, never half-way through one.

    Examples
    --------
    >>> import os, tempfile, kernelcw
    >>> clf = kernelcw.AROWClassifier().fit([[0.0, 1.0], [1.0, 0.0]], [0, 1])
    >>> path = os.path.join(tempfile.mkdtemp(), "model.kcw")
    >>> kernelcw.save(clf, path)
    >>> kernelcw.load(path).predict([[0.0, 2.0]])
    array([0])
    """
    target = _check_path(path)
    meta, arrays = _export(estimator)
    blob = json.dumps(meta, allow_nan=False, indent=1).encode("utf-8")

    def write(fh) -> None:
        with zipfile.ZipFile(fh, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
            # a fixed date: the same model saves to the same bytes
            zf.writestr(zipfile.ZipInfo(META, date_time=(1980, 1, 1, 0, 0, 0)), blob)
            for name, arr in arrays.items():
                with zf.open(name + ".npy", "w", force_zip64=True) as member:
                    np.lib.format.write_array(member, arr, allow_pickle=False)

    write_atomically(target, write)


def load(path: str | os.PathLike):
    """Load an estimator saved by :func:`save`. No code from the file runs.

    Parameters
    ----------
    path : str or os.PathLike
        A file written by :func:`save` (any kernelcw version writing format
        version 1 or 2).

    Returns
    -------
    estimator
        A new estimator of the saved class with the saved parameters; if it was
        fitted, with its fitted state: it predicts as the saved model did and
        ``partial_fit`` continues exactly as the saved model would have.

    Raises
    ------
    ValueError
        If the file is not a kernelcw model, comes from an unknown format version,
        is truncated or corrupted, misses a member, or holds arrays whose shapes or
        types do not fit its parameters; the message says which.
    """
    target = _check_path(path)
    with open(target, "rb") as fh:
        if fh.read(4) != b"PK\x03\x04":
            raise ValueError(f"{target!r} is not a kernelcw model file (not a zip archive)")
        fh.seek(0)
        try:
            meta, arrays = _read(fh, target)
        except _ZIP_ERRORS as e:  # a damaged header: a compression method, encryption flag
            raise ValueError(f"{target!r} is truncated or corrupted: {e!r}") from e
    return _rebuild(meta, arrays, target)


# ------------------------------------------------------------------ saving


def _check_path(path) -> str:
    if not isinstance(path, str | os.PathLike):
        raise TypeError(f"path must be a str or os.PathLike, not {type(path).__name__}")
    return os.fsdecode(os.fspath(path))  # (a bytes path as str)


def _estimator_class(name: str) -> type:
    from . import estimators

    return getattr(estimators, name)


def _export(est) -> tuple[dict, dict[str, np.ndarray]]:
    """The JSON document and the arrays of an estimator: under its model lock, so that
    a ``fit`` from another thread is not half-way (its new engine beside the old
    classes: a file of neither model), and under its engine's lock, so that no call
    learns meanwhile."""
    name = type(est).__name__
    if name not in WHITELIST or type(est) is not _estimator_class(name):
        raise TypeError(
            f"save takes a kernelcw estimator ({', '.join(WHITELIST)}), "
            f"not {type(est).__module__}.{type(est).__qualname__}"
        )
    with model_lock(est):
        return _export_locked(est, name)


def _export_locked(est, name: str) -> tuple[dict, dict[str, np.ndarray]]:
    est._check_structure("save")  # not a state paired with parameters it never had
    try:  # (a file load refuses would replace the one at the path)
        checked = check_params(est)
    except (ValueError, TypeError) as e:
        raise ValueError(f"cannot save: {e}") from e
    params = {k: json_param(k, v) for k, v in est.get_params(deep=False).items()}
    began = est.__dict__.get("_began_with")
    if began is not None:  # the values the state was learnt with: set_params may have set
        # equal ones of another type since (np.float32(0.1) == 0.1 to numpy, not as gamma);
        # those it never reads (a linear model's gamma) as they are now
        inert = inert_parameters(began, est.engine_.spec.form)
        params.update({k: json_param(k, began[k]) for k in STRUCTURAL if k not in inert})
    meta = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "kernelcw_version": __version__,
        "estimator": name,
        "params": params,
        "fitted": hasattr(est, "classes_"),
    }
    if not meta["fitted"]:
        meta["arrays"] = []
        return meta, {}
    engine = est.engine_
    with engine.lock:
        state = engine.state_dict()
        arrays = {"classes_": plain_classes(est.classes_)}
        for c in COUNTERS:
            arrays[c] = np.asarray(getattr(est, c), dtype=np.int64)
    if hasattr(est, "feature_names_in_"):
        arrays["feature_names_in_"] = np.asarray(est.feature_names_in_, dtype=str)
    arrays.update({f"engine.{k}": np.asarray(v) for k, v in state.items()})
    spec = engine.spec
    meta.update(
        n_features_in=int(est.n_features_in_),
        n_classes=len(est.classes_),
        classes_object=est.classes_.dtype == object,
        engine={
            "form": spec.form,
            "n_models": int(engine.n_models),
            "seed": int(spec.seed),
            "block_size": None if spec.block_size is None else int(spec.block_size),
            # the parameters that shape the state, as it learnt with them (params holds
            # the same); load refuses a file whose params were edited away from them
            "learnt_with": {k: params[k] for k in STRUCTURAL},
        },
        arrays=sorted(arrays),
    )
    meta["engine"]["rule"] = Rule(checked[0].rule).name.lower()  # (load compares)
    return meta, arrays


# ------------------------------------------------------------------ loading


def _read(fh, target: str) -> tuple[dict, dict[str, np.ndarray]]:
    """The JSON document and the arrays, every member checked against the document."""
    try:
        npz = np.load(fh, allow_pickle=False)
    except (*_ZIP_ERRORS, ValueError) as e:
        raise ValueError(f"{target!r} is truncated or corrupted (not a readable zip): {e}") from e
    with npz:
        names = set(npz.zip.namelist())
        if META not in names:
            raise ValueError(f"{target!r} is not a kernelcw model file (no {META} member)")
        try:
            meta = json.loads(npz.zip.read(META).decode("utf-8"))
        except (*_ZIP_ERRORS, ValueError) as e:
            raise ValueError(f"{target!r}: member {META} is corrupted: {e}") from e
        _check_meta(meta, target)
        listed = meta["arrays"]
        missing = [a for a in listed if a + ".npy" not in names]
        if missing:
            raise ValueError(f"{target!r} is missing member(s) {', '.join(missing)}")
        extra = sorted(names - {META} - {a + ".npy" for a in listed})
        if extra:
            raise ValueError(f"{target!r} holds unexpected member(s) {', '.join(extra)}")
        arrays = {a: _read_array(npz, a, target) for a in listed}
    return meta, arrays


def _read_array(npz, name: str, target: str) -> np.ndarray:
    member = name + ".npy"  # (_check_header: a .npy member, so npz[name] is an array)
    try:
        _check_header(npz.zip, member)
        arr = npz[name]
    except (*_ZIP_ERRORS, ValueError) as e:
        raise ValueError(f"{target!r}: member {member} is truncated or corrupted: {e}") from e
    if arr.dtype.kind not in "biufUS":
        raise ValueError(f"{target!r}: member {member} has dtype {arr.dtype}, not a plain one")
    return arr


def _check_header(zf: zipfile.ZipFile, member: str) -> None:
    """ValueError if the .npy header promises more data than the member holds (before
    any memory is allocated for it). :func:`save` stores members uncompressed: a
    compressed one (whose stated size nothing bounds: a crafted file asked for 512 GiB)
    is refused, and a stored one holds at most its stored bytes."""
    info = zf.getinfo(member)
    if info.compress_type != zipfile.ZIP_STORED or info.file_size != info.compress_size:
        raise ValueError("it is compressed; kernelcw saves its arrays uncompressed")
    if info.compress_size > _archive_size(zf):
        raise ValueError(f"it claims {info.compress_size} bytes, more than the whole file")
    with zf.open(member) as f:
        fmt = np.lib.format
        header = fmt.read_array_header_1_0 if fmt.read_magic(f) == (1, 0) else None
        shape, _, dtype = (header or fmt.read_array_header_2_0)(f)
    if dtype.hasobject:
        raise ValueError("it holds an object array (pickled Python objects): refused")
    need = math.prod(shape) * dtype.itemsize
    if need > zf.getinfo(member).file_size:
        raise ValueError(f"its header promises {need} bytes of data, more than it holds")


def _archive_size(zf: zipfile.ZipFile) -> int:
    """The bytes of the archive ``zf`` reads from."""
    fp = zf.fp
    try:
        return os.fstat(fp.fileno()).st_size
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        at = fp.tell()
        try:
            return fp.seek(0, os.SEEK_END)
        finally:
            fp.seek(at)


def _check_meta(meta, target: str) -> None:
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise ValueError(f"{target!r} is not a kernelcw model file (its {META} is not ours)")
    version = meta.get("format_version")
    if type(version) is not int or version not in READS:
        raise ValueError(
            f"{target!r} has format_version {version!r}; this kernelcw ({__version__}) reads "
            f"format version(s) {', '.join(map(str, READS))}: upgrade kernelcw to load it"
        )
    want = {"estimator": str, "params": dict, "fitted": bool, "arrays": list}
    if meta.get("fitted"):
        want.update(n_features_in=int, n_classes=int, classes_object=bool, engine=dict)
    for key, kind in want.items():
        if type(meta.get(key)) is not kind:
            raise ValueError(
                f"{target!r}: {META} field {key!r} is missing or not a {kind.__name__}"
            )
    if meta["estimator"] not in WHITELIST:
        raise ValueError(
            f"{target!r} names estimator {meta['estimator']!r}, not one of kernelcw's "
            f"({', '.join(WHITELIST)})"
        )
    if not all(isinstance(a, str) and "/" not in a for a in meta["arrays"]):
        raise ValueError(f"{target!r}: {META} field 'arrays' must list member names")


def _param_value(name: str, value, target: str):
    if isinstance(value, dict):
        text = value.get("float") if len(value) == 1 else None
        if text not in ("inf", "-inf", "nan"):
            raise ValueError(f"{target!r}: parameter {name} = {value!r} is not a value")
        return float(text)
    if value is None or isinstance(value, bool | int | float | str):
        return value
    raise ValueError(f"{target!r}: parameter {name} = {value!r} is not a plain value")


def _rebuild(meta: dict, arrays: dict[str, np.ndarray], target: str):
    """The estimator of ``meta`` with the fitted state of ``arrays``."""
    from .spec import check_params

    cls = _estimator_class(meta["estimator"])
    known = set(cls._get_param_names())
    unknown = sorted(set(meta["params"]) - known)
    if unknown:
        raise ValueError(
            f"{target!r}: {meta['estimator']} has no parameter(s) {', '.join(unknown)}"
        )
    params = {k: _param_value(k, v, target) for k, v in meta["params"].items()}
    est = cls(**params)  # parameters the file lacks (added later) keep their defaults
    try:
        checked = check_params(est)
    except (ValueError, TypeError) as e:
        raise ValueError(f"{target!r}: the saved parameters are invalid: {e}") from e
    if not meta["fitted"]:
        if arrays:
            raise ValueError(f"{target!r}: an unfitted model holds arrays")
        return est
    _install(est, meta, arrays, checked, target)
    return est


def _install(est, meta: dict, arrays: dict[str, np.ndarray], checked, target: str) -> None:
    """Check the fitted arrays against the parameters, rebuild the engine, fit ``est``."""
    from .engines import engine_class
    from .estimators._input import with_intercept
    from .spec import COUNT_MAX, engine_spec

    def bad(what: str) -> ValueError:
        return ValueError(f"{target!r}: {what}")

    d, n_classes, eng = meta["n_features_in"], meta["n_classes"], meta["engine"]
    _check_learnt_with(est, eng.get("learnt_with"), bad)
    classes = arrays.get("classes_")
    if classes is None or classes.shape != (n_classes,) or n_classes < 2:
        raise bad(f"classes_ must hold the {n_classes} (>= 2) classes")
    # sorted by fit, in order of first appearance by the river adapter (both learn); a
    # repeated label or a NaN predicts wrongly (checked before labels become objects)
    distinct = np.unique(classes).shape[0] == classes.shape[0]
    if not distinct or (classes.dtype.kind == "f" and not np.all(np.isfinite(classes))):
        raise bad(f"classes_ {classes.tolist()!r} must be distinct, finite labels")
    if meta["classes_object"]:  # (Python objects, saved as an array of their kind)
        if classes.dtype.kind not in "Ubif":
            raise bad("classes_ saved as Python objects must be strings, booleans or numbers")
        classes = classes.astype(object)
    if d < 1:
        raise bad(f"n_features_in = {d} must be >= 1")
    try:
        spec = engine_spec(est, d, n_classes, checked)
    except (ValueError, TypeError) as e:
        raise bad(f"the saved parameters do not fit the data shape: {e}") from e
    rule = Rule(checked[0].rule).name.lower()
    if "rule" not in eng and meta["format_version"] >= 2:
        raise bad("engine field 'rule' is missing")
    if eng.get("rule", rule) != rule:  # (an edited estimator field: Perceptron as SOP)
        raise bad(
            f"its state was learnt by the {eng['rule']!r} rule, but {meta['estimator']} with "
            f"these parameters learns by {rule!r}: the estimator or its parameters were edited"
        )
    if eng.get("form") != spec.form or eng.get("n_models") != spec.n_models:
        raise bad(
            f"engine form {eng.get('form')!r} with {eng.get('n_models')!r} model(s) does not fit "
            f"the parameters (they select {spec.form!r} with {spec.n_models})"
        )
    # the block size the engine learnt with, not a later set_params' (its blocks' rounding)
    block = eng.get("block_size")
    if block is not None and (type(block) is not int or not 1 <= block <= 2**20):
        raise bad(f"the engine's block_size {block!r} must be None or an integer 1 .. 2**20")
    if spec.form == "dual":  # (work buffers are block_size x block_size)
        seed = eng.get("seed")
        if type(seed) is not int or not 0 <= seed < 2**63 or block is None:
            raise bad("the dual engine's seed and block_size must be integers >= 0, >= 1")
        spec.seed = seed
    spec.block_size = block
    K = spec.n_models
    counters = []
    for c in COUNTERS:
        arr = arrays.get(c)
        shape = () if K == 1 else (K,)
        if arr is None or arr.shape != shape or arr.dtype.kind not in "iu" or np.any(arr < 0):
            raise bad(f"{c} must be non-negative integers of shape {shape}")
        if np.any(arr > COUNT_MAX):  # (a stream's counts; more would wrap while learning)
            raise bad(f"{c} must be at most 2**62")
        counters.append(int(arr) if K == 1 else arr.astype(np.int64))
    names = arrays.get("feature_names_in_")
    if names is not None and (names.shape != (d,) or names.dtype.kind != "U"):
        raise bad(f"feature_names_in_ must be {d} strings")
    state = {k[len("engine.") :]: v for k, v in arrays.items() if k.startswith("engine.")}
    check_saved_state(spec, state, bad, meta["format_version"])
    try:
        engine = engine_class(spec.form).from_state(spec, state)
        probe = with_intercept(sp.csr_matrix((1, d)), spec)  # the rebuilt engine predicts
        f = engine.decision(probe)
        # (with kernel="precomputed" no variance without k(x, x) of the probe)
        precomputed = spec.kernel is not None and spec.kernel.precomputed
        v = np.zeros_like(f) if precomputed else engine.margin_variance(probe)
    except (ValueError, TypeError, KeyError, IndexError, FloatingPointError) as e:
        raise bad(f"the {spec.form} engine's arrays are inconsistent: {e!r}") from e
    if f.shape != (1, K) or v.shape != (1, K) or not np.all(np.isfinite(v)):
        raise bad(f"the {spec.form} engine's arrays are inconsistent")
    est.n_features_in_ = d
    if names is not None:
        est.feature_names_in_ = names.astype(object)
    est._import_state(engine, classes, tuple(counters))


def _check_learnt_with(est, learnt, bad) -> None:
    """The parameters that shape the state (``STRUCTURAL``) as the file says the model
    learnt with them (files before session 26 do not say): one edited in the params
    since (an RBF gamma, ``a``, the intercept's scaling: the state's checks cannot see
    these) would pair the state with a kernel or prior it never had."""
    if learnt is None:
        return
    if type(learnt) is not dict:
        raise bad("the engine's learnt_with must be a dict of parameters")
    edited = [
        f"{k}={json_param(k, getattr(est, k))!r} (learnt with {v!r})"
        for k, v in learnt.items()
        if k in STRUCTURAL and json_param(k, getattr(est, k)) != v
    ]
    if edited:
        raise bad(
            f"its parameters {', '.join(edited)} are not those its model learnt with; "
            "they shape the stored state and cannot be edited in the file: set them "
            "after loading and call fit to learn with them"
        )
