"""Benchmark of dense and hybrid search (not a timed test): encoding throughput and search latency.

Prints, in one run:

1. encoding throughput (node texts/s) of the local encoder on real demo node documents: ark's
   `LocalEncoder.encode` vs sentence-transformers' own ``encode`` on the same texts (the ratio should be
   ~1.0x: ours is that call), and the faster CPU paths measured side by side: a shorter
   ``max_seq_length`` and torch's dynamic int8 quantization of the Linear layers, each with the mean
   cosine of its vectors to the full-length fp32 ones (what the speed costs);
2. search latency at a fraction ``--scale`` of MAG (1.0 = 1.9M nodes), node types in MAG's proportions,
   384-dim vectors written once to ``--cache`` and memory-mapped from there, as node embeddings are:
   ``--vectors clustered`` (Gaussian topic centers, the earlier runs) or ``--vectors fitted``: sampled
   from a Gaussian mixture fitted to real MiniLM node embeddings (``--real``, default the demo graph's
   cache), each node type from its own clusters, and queried with held-out real vectors; the fit is
   first checked against the real vectors at their own size (nearest-neighbor cosines and HNSW recall
   at each efSearch: real, sampled, clustered side by side). Then exact (flat) search, unfiltered and
   filtered to papers; HNSW for each ``--hnsw-m`` over the efSearch values of ``--ef-curve`` (the
   recall-latency curve: recall@10 against exact, computed in blocks) and IVF (``--nprobe``); hybrid
   (BM25 top 100 + dense top 100, RRF) beside lexical BM25 on ``scripts/bench_tools.py``'s synthetic MAG
   graph (``--lexical``; its index built once in a child process and memory-mapped here): for each index
   setting the hybrid search, the same with its two sides one after the other, and each side alone,
   interleaved query by query, with the ratios of their p99s; each index's
   build time, and the memory of a search process, read into memory against memory-mapped (anonymous
   and file-backed resident MiB after the queries). Query vectors are given (the query-encoding cost is
   part 1), so search alone is timed; the exact index is timed on ``--flat-queries`` queries.

    python scripts/bench_dense.py --scale 0.02 --lexical            # a minute
    flock /work/heavy.lock nice -n 19 python scripts/bench_dense.py --skip-encoding --lexical --scale 1.0 \
        --vectors fitted --kinds hnsw,ivf --hnsw-m 16,32 --ef-construction 100 --ef-curve 32,64,128,256,512
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from ark.home import ark_home  # noqa: E402

MAG_SIZES = {"paper": 700_244, "author": 1_134_649, "institution": 8_740, "field_of_study": 59_965}


def _pct(times) -> tuple[float, float, float, float]:
    """p50/p99 of wall time and of the process's CPU time over the call (immune to preemption on a busy
    machine; one call runs at a time here, so it is the call's work, a hybrid search's BM25 thread
    included)."""
    t = np.asarray(times, dtype=np.float64).reshape(-1, 2) * 1000
    return (float(np.percentile(t[:, 0], 50)), float(np.percentile(t[:, 0], 99)),
            float(np.percentile(t[:, 1], 50)), float(np.percentile(t[:, 1], 99)))


def _timed(fn, a) -> tuple[float, float]:
    w0, c0 = time.perf_counter(), time.process_time()
    fn(a)
    return time.perf_counter() - w0, time.process_time() - c0


def _time(fn, args_list) -> list[tuple[float, float]]:
    for a in args_list[:3]:  # warm up (numba compilation, page faults)
        fn(a)
    return [_timed(fn, a) for a in args_list]


def bench_encoding(n_texts: int, data: str) -> None:
    import torch

    from ark.search.embeddings import LocalEncoder, default_model_dir
    from ark.data.sources import DemoSource

    graph = DemoSource(root=data).graph()
    rng = np.random.default_rng(0)
    ids = rng.choice(graph.num_nodes, size=n_texts, replace=False)
    texts = [graph.node_text(int(i)) for i in ids]
    print(f"\n1. encoding {n_texts} demo node documents (mean {np.mean([len(t) for t in texts]):.0f} chars), "
          f"torch threads {torch.get_num_threads()}")
    enc = LocalEncoder("all-MiniLM-L6-v2", models_dir=default_model_dir(data))
    model = enc.model()
    model.encode(texts[:32], batch_size=64)  # warm up

    def rate(fn) -> tuple[float, np.ndarray]:
        t0 = time.perf_counter()
        v = fn()
        return n_texts / (time.perf_counter() - t0), np.asarray(v, dtype=np.float32)

    own_rate, ref = rate(lambda: model.encode(texts, batch_size=64, normalize_embeddings=True))
    ours_rate, ours = rate(lambda: enc.encode(texts))
    print(f"   {'sentence-transformers encode (max_seq_length 256)':<52} {own_rate:7.1f} texts/s")
    print(f"   {'ark LocalEncoder.encode (same settings)':<52} {ours_rate:7.1f} texts/s  "
          f"({ours_rate / own_rate:.2f}x; max |diff| {np.abs(ours - ref).max():.1e})")
    for length in (128, 64):
        short = LocalEncoder("all-MiniLM-L6-v2", max_seq_length=length, models_dir=default_model_dir(data))
        r, v = rate(lambda: short.encode(texts))
        print(f"   {f'max_seq_length {length}':<52} {r:7.1f} texts/s  ({r / own_rate:.2f}x; "
              f"cosine to 256: mean {np.mean(np.sum(v * ref, 1)):.3f}, min {np.min(np.sum(v * ref, 1)):.3f})")
    qmodel = torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
    r, v = rate(lambda: qmodel.encode(texts, batch_size=64, normalize_embeddings=True))
    print(f"   {'dynamic int8 (torch quantize_dynamic, length 256)':<52} {r:7.1f} texts/s  ({r / own_rate:.2f}x; "
          f"cosine to fp32: mean {np.mean(np.sum(v * ref, 1)):.3f}, min {np.min(np.sum(v * ref, 1)):.3f})")


# ------------------------------------------------------------------------------------ vectors
def rss_mib() -> dict[str, float]:
    """This process's resident memory by kind (Linux): anonymous (its own) and file-backed (memory-mapped
    files, shared through the page cache and evictable)."""
    out = {"anon": float("nan"), "file": float("nan")}
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("RssAnon:"):
                out["anon"] = int(line.split()[1]) / 1024
            elif line.startswith("RssFile:"):
                out["file"] = int(line.split()[1]) / 1024
    except OSError:
        pass
    return out


class FittedModel:
    """A Gaussian mixture fitted to real sentence embeddings, to sample "real-looking" vectors at any
    size: k-means clusters of the real vectors, and per cluster its mean, its top ``rank`` principal
    directions with their spreads and an isotropic remainder (so a sample has the real clusters'
    low-dimensional shape, not the full-dimensional noise of the clustered synthetic vectors)."""

    def __init__(self, real: np.ndarray, clusters: int = 256, rank: int = 24, seed: int = 0):
        import faiss

        n, d = real.shape
        km = faiss.Kmeans(d, clusters, niter=20, seed=seed, spherical=True)
        km.train(np.ascontiguousarray(real))
        _, assign = km.index.search(np.ascontiguousarray(real), 1)
        assign = assign.reshape(-1)
        self.dim, self.parts = d, []
        for c in range(clusters):
            x = real[assign == c]
            if len(x) < 3:
                continue
            mu = x.mean(0)
            _, sv, vt = np.linalg.svd(x - mu, full_matrices=False)
            r = min(rank, len(x) - 1)
            var = sv ** 2 / (len(x) - 1)
            rest = max(float(var[r:].sum()) / max(d - r, 1), 1e-8)
            self.parts.append((len(x), mu.astype(np.float32), (vt[:r].T * np.sqrt(var[:r])).astype(np.float32),
                               np.float32(np.sqrt(rest))))

    def sample_into(self, out: np.ndarray, parts: list[int], rng: np.random.Generator, block: int = 200_000) -> None:
        """Fill ``out`` (rows, dim) with normalised samples from the clusters ``parts`` (by their sizes)."""
        w = np.array([self.parts[p][0] for p in parts], dtype=np.float64)
        for s in range(0, len(out), block):
            m = min(len(out), s + block) - s
            which = rng.choice(len(parts), size=m, p=w / w.sum())
            x = np.empty((m, self.dim), dtype=np.float32)
            for j in np.unique(which):
                rows = np.flatnonzero(which == j)
                _, mu, basis, rest = self.parts[parts[j]]
                z = rng.standard_normal((len(rows), basis.shape[1]), dtype=np.float32)
                x[rows] = mu + z @ basis.T + rest * rng.standard_normal((len(rows), self.dim), dtype=np.float32)
            out[s: s + m] = x / np.linalg.norm(x, axis=1, keepdims=True)


def clustered_into(out: np.ndarray, rng: np.random.Generator, clusters: int, spread: float) -> None:
    """The earlier synthetic vectors: ``clusters`` Gaussian centers plus isotropic noise (0: uniform)."""
    dim = out.shape[1]
    centers = rng.standard_normal((max(clusters, 1), dim), dtype=np.float32) / np.sqrt(dim)
    for s in range(0, len(out), 200_000):
        m = min(len(out), s + 200_000) - s
        block = rng.standard_normal((m, dim), dtype=np.float32) / np.sqrt(dim)
        if clusters:
            block = centers[rng.integers(0, clusters, m)] + spread * block
        out[s: s + m] = block / np.linalg.norm(block, axis=1, keepdims=True)


def exact_top(qv: np.ndarray, vecs: np.ndarray, k: int = 10, types=None, allowed=None) -> np.ndarray:
    """Exact top-k ids of every query, in blocks of nodes (the reference for recall)."""
    best = np.full((len(qv), k), -np.inf, dtype=np.float32)
    best_ids = np.zeros((len(qv), k), dtype=np.int64)
    for s in range(0, len(vecs), 262_144):
        sims = qv @ np.asarray(vecs[s: s + 262_144]).T
        if allowed is not None:
            sims[:, ~allowed[s: s + 262_144]] = -np.inf
        ids = np.arange(s, s + sims.shape[1])
        cat = np.concatenate([best, sims], axis=1)
        cat_ids = np.concatenate([best_ids, np.broadcast_to(ids, sims.shape)], axis=1)
        top = np.argpartition(-cat, k - 1, axis=1)[:, :k]
        best, best_ids = np.take_along_axis(cat, top, 1), np.take_along_axis(cat_ids, top, 1)
    return best_ids


def recall_at(found: list[np.ndarray], exact: np.ndarray) -> float:
    return float(np.mean([len(set(f.tolist()) & set(e.tolist())) / exact.shape[1] for f, e in zip(found, exact)]))


def hnsw_recall(base: np.ndarray, qv: np.ndarray, m: int, efc: int, efs: list[int]) -> list[float]:
    """recall@10 of one HNSW graph over ``base`` at each efSearch (in memory, no node types)."""
    from ark.search.vectors import VectorIndex

    exact = exact_top(qv, base)
    index = VectorIndex(np.ascontiguousarray(base), kind="hnsw", hnsw_m=m, ef_construction=efc)
    out = []
    for ef in efs:
        index.ef_search = ef
        out.append(recall_at([index.search(q, 10)[0] for q in qv], exact))
    return out


def nn_profile(base: np.ndarray, qv: np.ndarray) -> tuple[float, float]:
    """Mean cosine of each query to its 1st and 10th nearest neighbor (how tight neighborhoods are)."""
    sims = np.sort(qv @ base.T, axis=1)[:, ::-1]
    return float(sims[:, 0].mean()), float(sims[:, 9].mean())


def validate_model(model: FittedModel, fit: np.ndarray, queries: np.ndarray, m: int, efc: int, efs: list[int],
                   clusters: int, spread: float) -> None:
    """The fitted model against the real vectors it came from, at the real sample's size: the same
    held-out real queries, the same HNSW parameters. If the sampled vectors are as hard for HNSW as the
    real ones (recall at each efSearch) and as tight around a query, a MAG-size sample stands in for
    MAG-size real embeddings; the clustered synthetic vectors are shown beside them."""
    rng = np.random.default_rng(1)
    sampled = np.empty_like(fit)
    model.sample_into(sampled, list(range(len(model.parts))), rng)
    clustered = np.empty_like(fit)
    clustered_into(clustered, rng, clusters, spread)
    print(f"\n   vectors at the real sample's size ({len(fit):,} x {fit.shape[1]}), {len(queries)} held-out real "
          f"queries, HNSW M={m} efC={efc}:")
    print(f"   {'':<34} {'NN1 cos':>8} {'NN10 cos':>9}   recall@10 at efSearch " + " ".join(f"{e:>5}" for e in efs))
    for label, base in (("real MiniLM node embeddings", fit), ("sampled from the fitted model", sampled),
                        (f"clustered synthetic ({clusters})", clustered)):
        nn1, nn10 = nn_profile(base, queries)
        rec = hnsw_recall(base, queries, m, efc, efs)
        print(f"   {label:<34} {nn1:8.3f} {nn10:9.3f}   {'':<22}" + " ".join(f"{r:5.3f}" for r in rec), flush=True)


def make_vectors(cache: Path, types: np.ndarray, dim: int, mode: str, real_path: Path | None, clusters: int,
                 spread: float, n_queries: int, seed: int, validate: tuple | None) -> tuple:
    """Node vectors for nodes of ``types`` (ids grouped by type; memory-mapped from ``cache/vectors.npy``,
    written once) and the query vectors."""
    import json

    counts = dict(enumerate(np.bincount(types).tolist()))
    n = len(types)
    rng = np.random.default_rng(seed)
    model = queries = None
    if mode == "fitted":
        real = np.asarray(np.load(real_path, mmap_mode="r"), dtype=np.float32)
        real = real / np.linalg.norm(real, axis=1, keepdims=True)
        order = rng.permutation(len(real))
        queries = np.ascontiguousarray(real[order[:n_queries]])          # held out of the fit
        fit = np.ascontiguousarray(real[order[n_queries:]])
        model = FittedModel(fit, seed=seed)
        print(f"   fitted a {len(model.parts)}-cluster mixture (rank 24 per cluster) to {len(fit):,} real vectors "
              f"of {real_path}")
        if validate:
            validate_model(model, fit, queries, *validate, clusters=clusters, spread=spread)
    key = {"n": n, "counts": list(counts.values()), "dim": dim, "mode": mode, "real": str(real_path) if mode == "fitted" else None, "seed": seed,
           "clusters": clusters, "spread": spread, "version": 1}
    meta = cache / "vectors.json"
    if not (meta.exists() and json.loads(meta.read_text()) == key and (cache / "vectors.npy").exists()):
        cache.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        out = np.lib.format.open_memmap(cache / "vectors.npy", mode="w+", dtype=np.float32, shape=(n, dim))
        if mode == "fitted":  # each node type from its own share of the clusters (papers look like papers)
            parts = np.array_split(rng.permutation(len(model.parts)), len(counts))
            bounds = np.r_[0, np.cumsum(list(counts.values()))]
            for t in range(len(counts)):
                model.sample_into(out[bounds[t]: bounds[t + 1]], parts[t].tolist(), rng)
        else:
            clustered_into(out, rng, clusters, spread)
        out.flush()
        del out
        meta.write_text(json.dumps(key))
        print(f"   wrote {n:,} vectors to {cache / 'vectors.npy'} in {time.perf_counter() - t0:.0f} s")
    vecs = np.load(cache / "vectors.npy", mmap_mode="r")
    if queries is None:  # a query is a noisy copy of a random node's vector
        qv = vecs[rng.integers(0, n, n_queries)] + 0.5 * rng.standard_normal((n_queries, dim), dtype=np.float32) / np.sqrt(dim)
        queries = (qv / np.linalg.norm(qv, axis=1, keepdims=True)).astype(np.float32)
    return vecs, queries


def lexical_phase(scale: float, cache: Path, n_queries: int) -> None:
    """Child process: the synthetic MAG graph's BM25 index saved under ``cache/bm25`` and query texts
    (words of random papers), so the search process maps the index instead of holding the graph."""
    import json

    from bench_graph import peak_rss_gib
    from bench_tools import synthetic_mag

    from ark.search.bm25 import BM25Index

    t0 = time.perf_counter()
    graph = synthetic_mag(scale)
    rng = np.random.default_rng(0)
    types = np.asarray(graph.node_types, dtype=np.int64)
    papers = np.flatnonzero(types == graph.node_type_id("paper"))
    texts = [" ".join(graph.node_text(int(i)).split()[3:7]) for i in rng.choice(papers, n_queries)]
    docs = list(graph.texts())
    n_nodes = graph.num_nodes
    del graph   # the edges are not needed for BM25: the index is built with only the documents held
    index = BM25Index.build(docs)
    del docs
    index.save(cache / "bm25")
    np.save(cache / "bm25" / "node_types.npy", types)
    (cache / "bm25" / "queries.json").write_text(json.dumps({"scale": scale, "texts": texts}))
    print(json.dumps({"nodes": n_nodes, "build_s": time.perf_counter() - t0, "peak_rss_gib": peak_rss_gib()}))


def lexical_index(scale: float, cache: Path, n_queries: int):
    import json
    import subprocess

    from ark.search.bm25 import BM25Index

    q = cache / "bm25" / "queries.json"
    if not (q.exists() and json.loads(q.read_text())["scale"] == scale and len(json.loads(q.read_text())["texts"]) >= n_queries):
        cache.mkdir(parents=True, exist_ok=True)
        res = subprocess.run([sys.executable, __file__, "--phase", "lexical", "--scale", str(scale), "--cache", str(cache),
                              "--queries", str(n_queries)], capture_output=True, text=True, check=True)
        print(f"   synthetic MAG graph + BM25 index (child process): {res.stdout.strip().splitlines()[-1]}")
    return (BM25Index.load(cache / "bm25"), json.loads(q.read_text())["texts"][:n_queries],
            np.load(cache / "bm25" / "node_types.npy"))


# ------------------------------------------------------------------------------------ search
def bench_search(scale: float, n_queries: int, lexical: bool, cache: Path, dim: int = 384, kinds=("hnsw", "ivf"),
                 hnsw_ms=(32,), efc: int = 80, ef_curve=(128,), nprobe: int = 16, build_threads: int = 2,
                 flat_queries: int = 30, vectors: str = "clustered", real: Path | None = None, clusters: int = 2000,
                 spread: float = 0.6, validate: bool = True) -> None:
    import faiss

    from ark.search.modes import DenseSearch, GlobalSearch, SearchConfig
    from ark.search.vectors import VectorIndex

    print(f"\n2. search at scale {scale} of MAG, {dim}-dim vectors: "
          + ("sampled from a mixture fitted to real MiniLM node embeddings" if vectors == "fitted" else
             f"{clusters} Gaussian clusters, spread {spread}" if clusters else "uniform on the sphere"))
    faiss.omp_set_num_threads(build_threads)
    bm25, texts = None, [f"q{i}" for i in range(n_queries)]
    if lexical:   # the synthetic MAG graph's node types (paper, author, institution, field of study)
        bm25, texts, types = lexical_index(scale, cache, n_queries)
    else:
        types = np.repeat(np.arange(len(MAG_SIZES)), [max(10, int(c * scale)) for c in MAG_SIZES.values()])
    vecs, qv = make_vectors(cache, types, dim, vectors, real, clusters, spread, n_queries, 0,
                            (hnsw_ms[0], efc, list(ef_curve)) if validate else None)
    n, paper = len(types), 0
    by_text = dict(zip(texts, qv))

    class GivenVectors:  # the query's vector is given: search alone is timed
        name = "synthetic"

        def __init__(self):
            self.dim = dim

        def encode(self, batch):
            return np.stack([by_text[t] for t in batch])

    print(f"\n   {n:,} nodes x {dim} float32 ({vecs.nbytes / 2**30:.2f} GiB, memory-mapped from {cache}); "
          f"{len(qv)} queries, ms per call")
    print(f"   {'':<64} {'wall p50':>9} {'p99':>8} {'CPU p50':>9} {'p99':>8}")

    def row(label, times, extra=""):
        p50, p99, c50, c99 = _pct(times)
        print(f"   {label:<64} {p50:9.2f} {p99:8.2f} {c50:9.2f} {c99:8.2f}{extra}", flush=True)

    exact = exact_top(qv, vecs)
    flat = VectorIndex(vecs, types)
    few = qv[:flat_queries]
    faiss.omp_set_num_threads(1)  # one query at a time: threads only add overhead
    row(f"dense exact (flat), top 10 [{len(few)} queries]", _time(lambda q: flat.search(q, 10), few))
    row(f"dense exact (flat), papers only, top 10 [{len(few)}]", _time(lambda q: flat.search(q, 10, [paper]), few))
    lex = GlobalSearch(bm25) if bm25 is not None else None
    if lex is not None:
        row("lexical BM25 search_graph core, top 5", _time(lambda t: lex.search(t, 5), texts))

    def hybrid_times(index, qs):
        hyb = GlobalSearch(bm25, DenseSearch(GivenVectors(), index), SearchConfig(mode="hybrid"))
        return _time(lambda t: hyb.search(t, 5), qs)

    def hybrid_sides(index, qs, indent="  "):
        """Hybrid search (its BM25 side on the worker pool while this thread searches the vectors) beside
        the same search with the two sides one after the other and each side alone, interleaved query by
        query so that the machine's load falls on all four alike."""
        depth = SearchConfig().depth
        dense = DenseSearch(GivenVectors(), index)
        both = GlobalSearch(bm25, dense, SearchConfig(mode="hybrid"))
        one_by_one = GlobalSearch(bm25, dense, SearchConfig(mode="hybrid"), concurrent=False)
        fns = {f"BM25 side alone, top {depth}": lambda t: bm25.search_with_total(t, depth),
               f"dense side alone, top {depth}": lambda t: dense.search(t, depth),
               "hybrid, top 5 (the two sides at once)": lambda t: both.search(t, 5),
               "hybrid, top 5, the two sides one after the other": lambda t: one_by_one.search(t, 5)}
        for t in qs[:3]:   # warm up
            for fn in fns.values():
                fn(t)
        times = {name: [] for name in fns}
        for i, t in enumerate(qs):
            names = list(fns)
            for name in names[i % len(names):] + names[:i % len(names)]:   # a rotating order
                times[name].append(_timed(fns[name], t))
        for name, ts in times.items():
            row(indent + name, ts)
        p99 = {name: _pct(ts)[1] for name, ts in times.items()}
        sides = list(p99.values())
        print(f"   {indent}hybrid p99 / slower side's p99: {sides[2] / max(sides[:2]):.2f}x; one after the other / "
              f"at once: {sides[3] / sides[2]:.2f}x", flush=True)

    if lex is not None:
        row("hybrid (BM25 + exact dense, RRF of each top 100), top 5", hybrid_times(flat, texts[:flat_queries]))
    del flat

    configs = [("hnsw", m) for m in hnsw_ms if "hnsw" in kinds] + ([("ivf", None)] if "ivf" in kinds else [])
    for kind, m in configs:  # one at a time, freed after its rows: the peak memory holds one index
        faiss.omp_set_num_threads(build_threads)
        kw = dict(hnsw_m=m or 32, ef_construction=efc, nprobe=nprobe)
        t0 = time.perf_counter()
        VectorIndex(vecs, types, kind=kind, cache_dir=cache, **kw)  # built into the cache (or found there)
        build = time.perf_counter() - t0
        faiss.omp_set_num_threads(1)
        label = f"HNSW M={m} efC={efc}" if kind == "hnsw" else "IVF (sqrt(n) lists per type)"
        print(f"\n   {label}: built or read in {build:.0f} s ({n / build:,.0f} vectors/s, {build_threads} threads)")
        mem = {}
        for mmap in (False, True):  # memory of a search process: the index read into memory, or mapped
            before = rss_mib()
            index = VectorIndex(vecs, types, kind=kind, cache_dir=cache, mmap=mmap, **kw)
            for q in qv:
                index.search(q, 10)
                index.score(q, np.arange(0, n, max(1, n // 200)))   # neighbor ranking: exact scores of 200 nodes
            after = rss_mib()
            mem[mmap] = (after["anon"] - before["anon"], after["file"] - before["file"], index.memory_bytes())
            if not mmap:
                del index
        print(f"   memory after {len(qv)} searches + scores: read into memory: +{mem[False][0]:,.0f} MiB anonymous, "
              f"+{mem[False][1]:,.0f} MiB file-backed; memory-mapped: +{mem[True][0]:,.0f} MiB anonymous, "
              f"+{mem[True][1]:,.0f} MiB file-backed (one copy: {mem[True][2] / 2**30:.2f} GiB incl. "
              f"{'links' if kind == 'hnsw' else 'ids and centroids'}; vectors {vecs.nbytes / 2**30:.2f} GiB)")
        settings = [("efSearch", e) for e in ef_curve] if kind == "hnsw" else [("nprobe", nprobe)]
        for name, value in settings:
            if kind == "hnsw":
                index.ef_search = value
            found, times = [], []
            for q in qv:
                box = []
                times.append(_timed(lambda v: box.append(index.search(v, 10)[0]), q))
                found.append(box[0])
            rec = recall_at(found, exact)
            row(f"dense {label} {name}={value}, top 10", times, f"   recall@10 {rec:.3f}")
            row(f"  papers only", _time(lambda q: index.search(q, 10, [paper]), qv))
            if lex is not None:
                hybrid_sides(index, texts, f"  [efSearch {max(value, 100)}] " if kind == "hnsw" else "  ")
        del index


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    root = Path(__file__).resolve().parents[1]
    ap.add_argument("--scale", type=float, default=0.02, help="fraction of MAG's 1.9M nodes")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--texts", type=int, default=512, help="demo documents to encode (part 1)")
    ap.add_argument("--data", default=str(ark_home()), help="data root (default: ARK_HOME, ark/home.py)")
    ap.add_argument("--cache", type=Path, default=None,
                    help="vectors, indexes and the BM25 index live here between runs (default <data>/bench_dense)")
    ap.add_argument("--lexical", action="store_true", help="also BM25 and hybrid (builds the synthetic graph)")
    ap.add_argument("--skip-encoding", action="store_true")
    ap.add_argument("--skip-search", action="store_true")
    ap.add_argument("--kinds", default="hnsw,ivf", help="approximate indexes to build and time")
    ap.add_argument("--hnsw-m", default="32", help="HNSW M, one or more (comma-separated): one graph each")
    ap.add_argument("--ef-construction", type=int, default=80)
    ap.add_argument("--ef-curve", default="128", help="HNSW efSearch values to time (comma-separated)")
    ap.add_argument("--nprobe", type=int, default=16)
    ap.add_argument("--build-threads", type=int, default=2)
    ap.add_argument("--flat-queries", type=int, default=30, help="queries timed on the exact index (slow at scale)")
    ap.add_argument("--vectors", choices=("clustered", "fitted"), default="clustered",
                    help="clustered: Gaussian topic centers; fitted: sampled from a mixture fitted to --real")
    ap.add_argument("--real", type=Path, default=None,
                    help="real node embeddings (a vectors.npy) for --vectors fitted; default the demo graph's "
                         "MiniLM cache under --data (python -m experiments.embed graph=demo encoder=minilm)")
    ap.add_argument("--no-validate", action="store_true", help="skip the fitted model's check against the real vectors")
    ap.add_argument("--clusters", type=int, default=2000,
                    help="synthetic vectors around this many topic centers (0: uniform on the sphere, where no "
                         "vector has near neighbors and every ANN index has low recall)")
    ap.add_argument("--spread", type=float, default=0.6, help="noise around a cluster center, relative to it")
    ap.add_argument("--phase", choices=("lexical",), help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    cache = a.cache or Path(a.data) / "bench_dense"
    if a.phase == "lexical":
        lexical_phase(a.scale, cache, a.queries)
        return
    real = a.real or Path(a.data) / "cache" / "demo" / "embeddings" / "all-MiniLM-L6-v2" / "vectors.npy"
    if a.vectors == "fitted" and not real.is_file():
        raise SystemExit(f"--vectors fitted needs real node embeddings: {real} is missing (build them with "
                         "python -m experiments.embed graph=demo encoder=minilm, or give --real PATH)")
    if not a.skip_encoding:
        bench_encoding(a.texts, a.root)
    if not a.skip_search:
        bench_search(a.scale, a.queries, a.lexical, cache, kinds=tuple(k for k in a.kinds.split(",") if k),
                     hnsw_ms=tuple(int(m) for m in a.hnsw_m.split(",")), efc=a.ef_construction,
                     ef_curve=tuple(int(e) for e in a.ef_curve.split(",")), nprobe=a.nprobe,
                     build_threads=a.build_threads, flat_queries=a.flat_queries, vectors=a.vectors, real=real,
                     clusters=a.clusters, spread=a.spread, validate=not a.no_validate)


if __name__ == "__main__":
    main()
