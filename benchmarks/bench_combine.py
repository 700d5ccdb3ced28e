"""Model combination (JMLR 2012 sec. 7.10, Fig. 6 in kind): parts, average, KL, one model.

Text (``--only text``). One CW-var-KL diagonal model (``CWClassifier(rule="var",
covariance="diag", diag_method="kl")``, default eta) per part of a training stream,
one pass each; reported: test accuracy of the average single part, of the
"average" combination (uniform mean of mu and of the variances), of the "kl"
combination (precision-weighted mean; ``kernelcw.combine``) and of one model
trained on the whole stream in the same order, for n = 10, 50, 100 parts (the
stream cut contiguously), mean over ``--orders`` (4) random orders. Streams:

* 20 Newsgroups, by-date train split, the paper's three binary tasks (comp, sci,
  talk; ``benchmarks/datasets.py``), binary bag of words (``CountVectorizer(binary=True)``
  fit on the train split), tested on the by-date test split;
* a synthetic hashed stream (``--docs``, default 1,000,000 documents, 2^20
  features) generated reproducibly by :func:`synthetic_chunk`: each document has
  10-30 tokens from a Zipf(1.1) vocabulary of 200,000 words hashed into 2^20
  columns (binary, rows l2-normalised); its label is the sign of a fixed sparse
  linear score (2,000 informative words among the 10,000 most frequent) plus Gaussian
  noise (sd 0.15 against a score sd of 0.38: the noise flips 17 % of the labels and
  13 % of documents hold no informative word, measured on 200,000 documents, so the
  true score's sign is right on about 83 %); test set: 50,000 documents of another
  seed. The parts are folded into the combination one at a time
  (``combine(..., weights=...)``), so memory holds two models.

Kernels (``--only kernel``). RBF SCW-I (C = 1; gamma 0.5 on magic, 10/784 on
Fashion) on magic (standardised, 3,000 training and 3,000 test rows per order) and
the Fashion-MNIST pair pullover (2) vs coat (4) (3,000 / 2,000): 2, 4, 8 parts,
combined ("average", "kl") over the union of their support sets, against one model
on everything; ``--orders`` orders. Twice: without a budget (the union is the exact
combination), and with ``--budget`` 200 and each of ``--policy`` ("oldest,project":
a removal and the default policy; parts pruned by projection combine from their nu
and Pi), the union then pruned back to the budget with that policy.

Scaling (``--only scaling``; timing, for a quiet machine): one pass of
``CombinedClassifier`` over the synthetic stream on a ``LocalCluster`` with 1 and 2
worker processes (one thread each), the data generated on the workers (dask array
of sparse chunks, one part per chunk); the cost of the pairwise tree against the
number of parts (``tree_combine`` in one process: P - 1 combinations, depth
log2 P on a cluster with P / 2 workers); and the bytes a part ships (its fitted
model, pickled; the data a client would scatter instead of generating it there).
``--quick`` shrinks every section (100,000 documents, 1 order). The scaling section
needs ``pip install "kernelcw[dask]"``.
"""

from __future__ import annotations

import pickle
import time

import numpy as np
import scipy.sparse as sp

from kernelcw import CWClassifier, SCWClassifier, combine
from kernelcw.distributed import tree_combine

from ._common import PAPERS, argument_parser, md_table, progress, write_result
from .datasets import NEWSGROUPS_PAIRS, fashion_mnist, magic, newsgroups

N_PARTS = (10, 50, 100)
KERNEL_PARTS = (2, 4, 8)
D_HASH = 2**20
VOCAB = 200_000
INFORMATIVE = 2_000
CHUNK = 50_000


def cw_text() -> CWClassifier:
    return CWClassifier(rule="var", covariance="diag", diag_method="kl", **PAPERS)


# ---------------------------------------------------------------- the synthetic stream


def _truth(seed: int):
    """The hidden word -> column hash and the sparse true weights (fixed by seed)."""
    rng = np.random.default_rng([seed, 0])
    column = rng.integers(0, D_HASH, VOCAB)
    w = np.zeros(VOCAB)
    w[rng.choice(5 * INFORMATIVE, INFORMATIVE, replace=False)] = rng.standard_normal(INFORMATIVE)
    return column, w


def synthetic_chunk(seed: int, chunk: int, n: int, truth_seed: int = 0):
    """``n`` documents (CSR (n, 2^20), labels in {0, 1}) of chunk ``chunk`` of stream
    ``seed``: every chunk is generated on its own, in any order, on any machine."""
    column, w = _truth(truth_seed)
    rng = np.random.default_rng([seed, chunk + 1])
    lengths = rng.integers(10, 31, n)
    words = np.minimum(rng.zipf(1.1, lengths.sum()) - 1, VOCAB - 1)
    rows = np.repeat(np.arange(n), lengths)
    score = np.bincount(rows, weights=w[words], minlength=n) / np.sqrt(lengths)
    y = (score + 0.15 * rng.standard_normal(n) > 0).astype(np.int64)
    X = sp.csr_matrix((np.ones(rows.size), (rows, column[words])), shape=(n, D_HASH))
    X.data[:] = 1.0  # binary (duplicates summed by csr_matrix)
    norms = np.sqrt(np.diff(X.indptr))
    X.data /= np.repeat(norms, np.diff(X.indptr))
    return X, y


def synthetic(seed: int, docs: int):
    """The stream as chunks [(X, y)] of CHUNK documents."""
    sizes = [min(CHUNK, docs - lo) for lo in range(0, docs, CHUNK)]
    return [synthetic_chunk(seed, i, s) for i, s in enumerate(sizes)]


# ---------------------------------------------------------------- text


def _parts_of(n_rows: int, P: int):
    b = np.linspace(0, n_rows, P + 1).astype(int)
    return list(zip(b[:-1], b[1:], strict=True))


def fig6_row(X, y, X_te, y_te, P: int, classes) -> dict[str, float]:
    """Accuracies of one order cut into P parts: single parts (mean), average, kl, all."""
    acc = {"parts": [], "average": None, "kl": None}
    kl = avg = None
    for c, (lo, hi) in enumerate(_parts_of(X.shape[0], P)):
        m = cw_text().partial_fit(X[lo:hi], y[lo:hi], classes=classes)
        acc["parts"].append(m.score(X_te, y_te))
        kl = m if kl is None else combine([kl, m], "kl", weights=[c, 1])
        avg = m if avg is None else combine([avg, m], "average", weights=[c, 1])
    return {
        "part": float(np.mean(acc["parts"])),
        "average": avg.score(X_te, y_te),
        "kl": kl.score(X_te, y_te),
    }


def text_tasks(args):
    """[(name, X_train, y_train, X_test, y_test)]."""
    from sklearn.feature_extraction.text import CountVectorizer

    tasks = []
    for name in ("comp", "sci", "talk"):
        tr, y_tr = newsgroups(NEWSGROUPS_PAIRS[name], "train")
        te, y_te = newsgroups(NEWSGROUPS_PAIRS[name], "test")
        vec = CountVectorizer(binary=True)
        X_tr = vec.fit_transform(tr).astype(np.float64).tocsr()
        tasks.append((name, X_tr, y_tr, vec.transform(te).astype(np.float64).tocsr(), y_te))
    return tasks


def run_text(args) -> str:
    rows = []
    tasks = text_tasks(args)
    stream_docs = args.docs
    bar = progress(total=(len(tasks) + 1) * args.orders, desc="text", unit="order")
    for name, X, y, X_te, y_te in tasks + [("synthetic", None, None, None, None)]:
        res = {P: [] for P in N_PARTS}
        whole = []
        for order in range(args.orders):
            if name == "synthetic":
                chunks = synthetic(order + 1, stream_docs)
                X = sp.vstack([c[0] for c in chunks], format="csr")
                y = np.concatenate([c[1] for c in chunks])
                del chunks
                if X_te is None:
                    X_te, y_te = synthetic_chunk(10_000, 0, 50_000)
                Xo, yo = X, y  # an iid stream: each order is a new stream (seed order + 1)
            else:
                perm = np.random.default_rng([args.seed, order]).permutation(X.shape[0])
                Xo, yo = X[perm], y[perm]
            whole.append(cw_text().fit(Xo, yo).score(X_te, y_te))
            for P in N_PARTS:
                res[P].append(fig6_row(Xo, yo, X_te, y_te, P, np.array([0, 1])))
            bar.update(1)
        shape = f"{X.shape[0]:,} x {X.shape[1]:,}"
        for P in N_PARTS:
            mean = {k: np.mean([r[k] for r in res[P]]) for k in ("part", "average", "kl")}
            rows.append([name, shape, P, *(f"{mean[k]:.4f}" for k in ("part", "average", "kl")),
                         f"{np.mean(whole):.4f}"])  # fmt: skip
    bar.close()
    head = [
        "task",
        "train (docs x features)",
        "parts n",
        "single part",
        "average",
        "kl",
        "one model",
    ]
    return (
        f"## Text: test accuracy, mean over {args.orders} orders\n\n" + md_table(head, rows) + "\n"
    )


# ---------------------------------------------------------------- kernels


def kernel_data(name: str, order: int, seed: int):
    if name == "magic":
        X, y = magic()
        rng = np.random.default_rng([seed, 1, order])
        idx = rng.permutation(X.shape[0])
        tr, te = idx[:3000], idx[3000:6000]
        mu, sd = X[tr].mean(0), X[tr].std(0)
        return (X[tr] - mu) / sd, y[tr], (X[te] - mu) / sd, y[te], 0.5
    X, y = fashion_mnist((2, 4), "train")
    X_te, y_te = fashion_mnist((2, 4), "test")
    rng = np.random.default_rng([seed, 2, order])
    tr = rng.permutation(X.shape[0])[:3000]
    te = rng.permutation(X_te.shape[0])[:2000]
    return X[tr], y[tr], X_te[te], y_te[te], 1.0 / 784 * 10


def _kernel_rows(name, args, budget, policy) -> list:
    acc = {P: {"part": [], "average": [], "kl": [], "n_sv": []} for P in KERNEL_PARTS}
    whole, whole_sv = [], []
    for order in range(args.orders):
        X, y, X_te, y_te, gamma = kernel_data(name.split()[0], order, args.seed)

        def make(gamma=gamma):
            return SCWClassifier(kernel="rbf", gamma=gamma, budget=budget, budget_policy=policy)

        one = make().fit(X, y)
        whole.append(one.score(X_te, y_te))
        whole_sv.append(one.n_support_)
        for P in KERNEL_PARTS:
            parts = [make().partial_fit(X[lo:hi], y[lo:hi], classes=[0, 1])
                     for lo, hi in _parts_of(X.shape[0], P)]  # fmt: skip
            acc[P]["part"].append(np.mean([m.score(X_te, y_te) for m in parts]))
            for method in ("average", "kl"):
                c = combine(parts, method)
                acc[P][method].append(c.score(X_te, y_te))
            acc[P]["n_sv"].append(c.n_support_)
    label = "none" if budget is None else f"{budget} ({policy})"
    rows = []
    for P in KERNEL_PARTS:
        a = acc[P]
        accs = [f"{np.mean(a[k]):.4f}" for k in ("part", "average", "kl")]
        sizes = [int(np.max(a["n_sv"])), int(np.max(whole_sv))]
        rows.append([name, label, P, *accs, f"{np.mean(whole):.4f}", *sizes])
    return rows


def run_kernel(args) -> str:
    rows = []
    settings = [(None, "oldest")] + [(args.budget, p) for p in args.policy.split(",")]
    bar = progress(total=2 * len(settings), desc="kernel", unit="setting")
    for name in ("magic", "fashion 2 vs 4"):
        for budget, policy in settings:
            rows += _kernel_rows(name, args, budget, policy)
            bar.update(1)
    bar.close()
    head = ["data", "budget", "parts", "single part", "average", "kl", "one model",
            "support (combined)", "support (one model)"]  # fmt: skip
    return (
        f"## Kernels: RBF SCW-I, test accuracy, mean over {args.orders} orders\n\n"
        + md_table(head, rows)
        + "\n"
    )


# ---------------------------------------------------------------- scaling (timing)


def _dask_stream(docs: int, seed: int):
    import dask
    import dask.array as da

    sizes = [min(CHUNK, docs - lo) for lo in range(0, docs, CHUNK)]
    xs, ys = [], []
    for i, s in enumerate(sizes):
        pair = dask.delayed(synthetic_chunk, nout=2)(seed, i, s)
        meta = sp.csr_matrix((0, D_HASH))
        xs.append(da.from_delayed(pair[0], shape=(s, D_HASH), dtype=np.float64, meta=meta))
        ys.append(da.from_delayed(pair[1], shape=(s,), dtype=np.int64))
    return da.concatenate(xs), da.concatenate(ys)


def run_scaling(args) -> str:
    from kernelcw.distributed import CombinedClassifier, _distributed

    distributed = _distributed()  # an ImportError naming pip install "kernelcw[dask]"

    X_te, y_te = synthetic_chunk(10_000, 0, 20_000)
    rows = []
    for workers in (1, 2):
        with distributed.LocalCluster(n_workers=workers, threads_per_worker=1,
                                      dashboard_address=None) as cluster:  # fmt: skip
            with distributed.Client(cluster) as client:
                dX, dy = _dask_stream(args.docs, 1)
                CombinedClassifier(cw_text()).fit(*_dask_stream(2 * CHUNK, 2))  # warm up
                t0 = time.perf_counter()
                clf = CombinedClassifier(cw_text(), client=client).fit(dX, dy)
                dt = time.perf_counter() - t0
        rows.append([workers, clf.n_parts_, f"{dt:.1f}", f"{clf.score(X_te, y_te):.4f}"])
    speed = float(rows[0][2]) / float(rows[1][2])
    out = [f"## Scaling: one pass over {args.docs:,} synthetic documents on a LocalCluster\n",
           md_table(["workers", "parts", "wall s", "test accuracy"], rows),
           f"\nSpeed-up 2 workers / 1 worker: {speed:.2f}x (goal >= 1.7x).\n"]  # fmt: skip
    X, y = synthetic_chunk(3, 0, 5_000)
    part = cw_text().fit(X, y)
    model_bytes = len(pickle.dumps(part, protocol=pickle.HIGHEST_PROTOCOL))
    Xc, _ = synthetic_chunk(3, 0, CHUNK)
    data_bytes = Xc.data.nbytes + Xc.indices.nbytes + Xc.indptr.nbytes
    cost = []
    for P in (2, 4, 8, 16, 32):
        models = [part] * P
        t0 = time.perf_counter()
        tree_combine(models, "kl")
        cost.append([P, P - 1, int(np.ceil(np.log2(P))), f"{time.perf_counter() - t0:.2f}"])
    out += ["\n## Combination cost (diagonal models, 2^20 features, one process)\n",
            md_table(["parts P", "combinations", "tree depth", "wall s"], cost),
            f"\nBytes shipped per part: its model {model_bytes:,} bytes (pickled); a "
            f"{CHUNK:,}-document chunk scattered from the client would add {data_bytes:,} "
            "bytes (here the workers generate their chunks).\n"]  # fmt: skip
    return "\n".join(out)


def main(argv: list[str] | None = None) -> None:
    ap = argument_parser(__doc__)
    ap.add_argument("--only", choices=["text", "kernel", "scaling"], action="append")
    ap.add_argument("--orders", type=int, default=4)
    ap.add_argument("--docs", type=int, default=1_000_000)
    ap.add_argument("--budget", type=int, default=200)
    ap.add_argument(
        "--policy",
        default="oldest,project",
        help="budget policies of the kernel part, comma-separated (oldest, random, "
        "smallest, project)",
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="100,000 documents, one order")
    args = ap.parse_args(argv)
    bad = set(args.policy.split(",")) - {"oldest", "random", "smallest", "project"}
    if bad:
        ap.error(f"--policy: unknown {', '.join(sorted(bad))}")
    if args.quick:
        args.docs, args.orders = min(args.docs, 100_000), 1
    only = args.only or ["text", "kernel"]
    for section, fn in (("text", run_text), ("kernel", run_kernel), ("scaling", run_scaling)):
        if section in only:
            body = fn(args)
            print(body)
            name = "combine" if section == "text" else f"combine_{section}"
            path = write_result(name, f"Model combination: {section}", body)
            print(f"wrote {path}")


if __name__ == "__main__":
    main()
