"""Benchmark of dense and hybrid search (not a timed test): encoding throughput and search latency.

Prints, in one run:

1. encoding throughput (node texts/s) of the local encoder on real demo node documents: ark's
   `LocalEncoder.encode` vs sentence-transformers' own ``encode`` on the same texts (the ratio should be
   ~1.0x: ours is that call), and the faster CPU paths measured side by side: a shorter
   ``max_seq_length`` and torch's dynamic int8 quantization of the Linear layers, each with the mean
   cosine of its vectors to the full-length fp32 ones (what the speed costs);
2. search latency at a fraction ``--scale`` of MAG (1.0 = 1.9M nodes) with synthetic 384-dim vectors
   (``--clusters`` Gaussian topic clusters, normalised; 0 for uniform) and node types in MAG's proportions: exact (flat) and HNSW
   (``--hnsw-m/--ef-construction/--ef-search``) dense search, unfiltered and filtered to papers, and hybrid
   (BM25 top 100 + dense top 100, RRF) beside lexical BM25 on ``scripts/bench_tools.py``'s synthetic
   MAG graph (``--lexical``); IVF (``--nprobe``) beside HNSW; build time, recall@10 against exact
   (computed in blocks), and the memory of the vectors. Query vectors are given (the query-encoding
   cost is part 1), so search alone is timed; the exact index is timed on ``--flat-queries`` queries.

    python scripts/bench_dense.py --scale 0.02 --lexical            # a minute
    flock /work/heavy.lock nice -n 10 python scripts/bench_dense.py --scale 0.25 --lexical
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

MAG_SIZES = {"paper": 700_244, "author": 1_134_649, "institution": 8_740, "field_of_study": 59_965}


def _pct(times) -> tuple[float, float, float, float]:
    """p50/p99 of wall time and of the calling thread's CPU time (immune to preemption on a busy machine;
    faiss and numpy run single-threaded for searches here, so the thread's CPU time is the work)."""
    t = np.asarray(times, dtype=np.float64).reshape(-1, 2) * 1000
    return (float(np.percentile(t[:, 0], 50)), float(np.percentile(t[:, 0], 99)),
            float(np.percentile(t[:, 1], 50)), float(np.percentile(t[:, 1], 99)))


def _timed(fn, a) -> tuple[float, float]:
    w0, c0 = time.perf_counter(), time.thread_time()
    fn(a)
    return time.perf_counter() - w0, time.thread_time() - c0


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


def bench_search(scale: float, n_queries: int, lexical: bool, dim: int = 384, kinds=("hnsw", "ivf"),
                 hnsw_m: int = 32, efc: int = 80, ef_search: int = 128, nprobe: int = 16,
                 build_threads: int = 2, flat_queries: int = 30, clusters: int = 2000, spread: float = 0.6) -> None:
    from ark.search.modes import DenseSearch, GlobalSearch, SearchConfig
    from ark.search.vectors import VectorIndex

    rng = np.random.default_rng(0)
    if lexical:
        from bench_tools import synthetic_mag

        from ark.search.bm25 import BM25Index

        t0 = time.perf_counter()
        graph = synthetic_mag(scale)
        types = np.asarray(graph.node_types, dtype=np.int64)
        bm25 = BM25Index.build(graph.texts())
        print(f"\n   synthetic MAG graph + BM25 index: {graph.num_nodes:,} nodes in {time.perf_counter() - t0:.0f} s")
        paper = graph.node_type_id("paper")
        words = [graph.node_text(int(i)).split()[3:7] for i in rng.integers(0, int((types == paper).sum()), n_queries)]
        texts = [" ".join(w) for w in words]
    else:
        counts = {t: max(10, int(c * scale)) for t, c in MAG_SIZES.items()}
        types = np.repeat(np.arange(len(counts)), list(counts.values()))
        paper = 0
        texts = [f"q{i}" for i in range(n_queries)]
    n = len(types)
    vecs = np.empty((n, dim), dtype=np.float32)
    centers = rng.standard_normal((max(clusters, 1), dim), dtype=np.float32) / np.sqrt(dim)
    for s in range(0, n, 200_000):
        m = min(n, s + 200_000) - s
        block = rng.standard_normal((m, dim), dtype=np.float32) / np.sqrt(dim)
        if clusters:  # topic structure, as sentence embeddings have: a cluster center plus noise
            block = centers[rng.integers(0, clusters, m)] + spread * block
        vecs[s: s + m] = block / np.linalg.norm(block, axis=1, keepdims=True)
    # a query is a noisy copy of a random node's vector (its nearest neighbors are meaningful)
    targets = rng.integers(0, n, n_queries)
    qv = vecs[targets] + 0.5 * rng.standard_normal((n_queries, dim), dtype=np.float32) / np.sqrt(dim)
    qv /= np.linalg.norm(qv, axis=1, keepdims=True)
    by_text = dict(zip(texts, qv))

    query_dim = dim

    class GivenVectors:  # the query's vector is given: search alone is timed
        name, dim = "synthetic", query_dim

        def encode(self, batch):
            return np.stack([by_text[t] for t in batch])

    print(f"\n2. search over {n:,} nodes x {dim} float32 (scale {scale}; "
          + (f"{clusters} Gaussian clusters, spread {spread}" if clusters else "uniform on the sphere")
          + f"); vectors {vecs.nbytes / 2**30:.2f} GiB; {n_queries} queries, ms per call")
    print(f"   {'':<60} {'wall p50':>9} {'p99':>8} {'CPU p50':>9} {'p99':>8}")

    def row(label, times):
        p50, p99, c50, c99 = _pct(times)
        print(f"   {label:<60} {p50:9.2f} {p99:8.2f} {c50:9.2f} {c99:8.2f}", flush=True)

    flat = VectorIndex(vecs, types)
    # exact top 10 of every query in blocks of nodes (the reference for recall), then per-call timings
    best = np.full((n_queries, 10), -np.inf, dtype=np.float32)
    best_ids = np.zeros((n_queries, 10), dtype=np.int64)
    for s in range(0, n, 262_144):
        sims = qv @ vecs[s: s + 262_144].T
        cat = np.concatenate([best, sims], axis=1)
        cat_ids = np.concatenate([best_ids, np.arange(s, s + sims.shape[1])[None, :].repeat(n_queries, 0)], axis=1)
        top = np.argpartition(-cat, 9, axis=1)[:, :10]
        best, best_ids = np.take_along_axis(cat, top, 1), np.take_along_axis(cat_ids, top, 1)
    exact = {t: set(ids.tolist()) for t, ids in zip(texts, best_ids)}
    few = qv[:flat_queries]
    row(f"dense exact (flat), top 10 [{len(few)} queries]", _time(lambda q: flat.search(q, 10), few))
    row(f"dense exact (flat), papers only, top 10 [{len(few)}]", _time(lambda q: flat.search(q, 10, [paper]), few))
    import faiss

    lex = None
    if lexical:
        lex = GlobalSearch(bm25)
        row("lexical BM25 search_graph core, top 5", _time(lambda t: lex.search(t, 5), texts))

    def hybrid_row(label, index, qs):
        if lex is not None:
            hyb = GlobalSearch(bm25, DenseSearch(GivenVectors(), index), SearchConfig(mode="hybrid"))
            row(f"hybrid (BM25 + {label} dense, RRF top 100), top 5", _time(lambda t: hyb.search(t, 5), qs))

    hybrid_row("exact", flat, texts[:flat_queries])
    for kind in kinds:  # one at a time, freed after its rows: the peak memory holds one index
        faiss.omp_set_num_threads(build_threads)
        t0 = time.perf_counter()
        index = VectorIndex(vecs, types, kind=kind, hnsw_m=hnsw_m, ef_construction=efc, ef_search=ef_search,
                            nprobe=nprobe)
        build = time.perf_counter() - t0
        faiss.omp_set_num_threads(1)  # one query at a time: threads only add overhead
        label = (f"HNSW M={hnsw_m} efC={efc} efS={ef_search}" if kind == "hnsw" else f"IVF nprobe={nprobe}")
        found, times = [], []
        for t, q in zip(texts, qv):
            box = []
            times.append(_timed(lambda v: box.append(index.search(v, 10)[0]), q))
            found.append(len(set(box[0].tolist()) & exact[t]) / 10)
        print(f"   {kind}: build {build:.0f} s ({n / build:,.0f} vectors/s, {build_threads} threads), recall@10 vs "
              f"exact {np.mean(found):.3f}, memory (vectors + index) {index.memory_bytes() / 2**30:.2f} GiB", flush=True)
        row(f"dense {label}, top 10", times)
        row(f"dense {label}, papers only, top 10", _time(lambda q: index.search(q, 10, [paper]), qv))
        hybrid_row(label, index, texts)
        del index


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=float, default=0.02, help="fraction of MAG's 1.9M nodes")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--texts", type=int, default=512, help="demo documents to encode (part 1)")
    ap.add_argument("--root", default=str(Path(__file__).resolve().parents[1] / "data"),
                    help="data root: the demo graph under <root>/stark, caches under <root>/cache")
    ap.add_argument("--lexical", action="store_true", help="also BM25 and hybrid (builds the synthetic graph)")
    ap.add_argument("--skip-encoding", action="store_true")
    ap.add_argument("--skip-search", action="store_true")
    ap.add_argument("--kinds", default="hnsw,ivf", help="approximate indexes to build and time")
    ap.add_argument("--hnsw-m", type=int, default=32)
    ap.add_argument("--ef-construction", type=int, default=80)
    ap.add_argument("--ef-search", type=int, default=128)
    ap.add_argument("--nprobe", type=int, default=16)
    ap.add_argument("--build-threads", type=int, default=2)
    ap.add_argument("--flat-queries", type=int, default=30, help="queries timed on the exact index (slow at scale)")
    ap.add_argument("--clusters", type=int, default=2000,
                    help="synthetic vectors around this many topic centers (0: uniform on the sphere, where no "
                         "vector has near neighbors and every ANN index has low recall)")
    ap.add_argument("--spread", type=float, default=0.6, help="noise around a cluster center, relative to it")
    a = ap.parse_args(argv)
    if not a.skip_encoding:
        bench_encoding(a.texts, a.root)
    if not a.skip_search:
        bench_search(a.scale, a.queries, a.lexical, kinds=tuple(k for k in a.kinds.split(",") if k),
                     hnsw_m=a.hnsw_m, efc=a.ef_construction, ef_search=a.ef_search, nprobe=a.nprobe,
                     build_threads=a.build_threads, flat_queries=a.flat_queries, clusters=a.clusters,
                     spread=a.spread)


if __name__ == "__main__":
    main()
