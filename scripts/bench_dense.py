"""Benchmark of dense and hybrid search (not a timed test): encoding throughput and search latency.

Prints, in one run:

1. encoding throughput (node texts/s) of the local encoder on real demo node documents: ark's
   `LocalEncoder.encode` vs sentence-transformers' own ``encode`` on the same texts (the ratio should be
   ~1.0x: ours is that call), and the faster CPU paths measured side by side: a shorter
   ``max_seq_length`` and torch's dynamic int8 quantization of the Linear layers, each with the mean
   cosine of its vectors to the full-length fp32 ones (what the speed costs);
2. search latency at a fraction ``--scale`` of MAG (1.0 = 1.9M nodes) with synthetic 384-dim vectors
   (unit Gaussian, normalised) and node types in MAG's proportions: exact (flat) and HNSW
   (M=32, efConstruction=80, efSearch=128) dense search, unfiltered and filtered to papers, and hybrid
   (BM25 top 100 + dense top 100, RRF) beside lexical BM25 on ``scripts/bench_tools.py``'s synthetic
   MAG graph (``--lexical``); HNSW build time, recall@10 against exact, and the memory of the vectors.
   Query vectors are given (the query-encoding cost is part 1), so search alone is timed.

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


def _pct(times: list[float]) -> tuple[float, float]:
    t = np.asarray(times) * 1000
    return float(np.percentile(t, 50)), float(np.percentile(t, 99))


def _time(fn, args_list) -> list[float]:
    for a in args_list[:3]:  # warm up (numba compilation, page faults)
        fn(a)
    out = []
    for a in args_list:
        t0 = time.perf_counter()
        fn(a)
        out.append(time.perf_counter() - t0)
    return out


def bench_encoding(n_texts: int, data: str) -> None:
    import torch

    from ark.embedding import LocalEncoder, default_model_dir
    from ark.sources import DemoSource

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


def bench_search(scale: float, n_queries: int, lexical: bool, dim: int = 384) -> None:
    from ark.search import DenseSearch, GlobalSearch, SearchConfig
    from ark.vector_index import VectorIndex

    rng = np.random.default_rng(0)
    if lexical:
        from bench_tools import synthetic_mag

        from ark.text_index import BM25Index

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
    for s in range(0, n, 200_000):
        block = rng.standard_normal((min(n, s + 200_000) - s, dim), dtype=np.float32)
        vecs[s: s + len(block)] = block / np.linalg.norm(block, axis=1, keepdims=True)
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

    print(f"\n2. search over {n:,} nodes x {dim} float32 (scale {scale}); vectors {vecs.nbytes / 2**30:.2f} GiB; "
          f"{n_queries} queries, ms per call")
    print(f"   {'':<46} {'p50':>8} {'p99':>8}")

    def row(label, times):
        p50, p99 = _pct(times)
        print(f"   {label:<46} {p50:8.2f} {p99:8.2f}")

    flat = VectorIndex(vecs, types)
    exact = {}
    times = []
    for t, q in zip(texts, qv):
        t0 = time.perf_counter()
        exact[t] = flat.search(q, 10)[0]
        times.append(time.perf_counter() - t0)
    row("dense exact (flat), top 10", times)
    row("dense exact (flat), papers only, top 10", _time(lambda q: flat.search(q, 10, [paper]), qv))
    t0 = time.perf_counter()
    hnsw = VectorIndex(vecs, types, kind="hnsw", hnsw_m=32, ef_construction=80, ef_search=128)
    build = time.perf_counter() - t0
    found = []
    times = []
    for t, q in zip(texts, qv):
        t0 = time.perf_counter()
        ids = hnsw.search(q, 10)[0]
        times.append(time.perf_counter() - t0)
        found.append(len(set(ids.tolist()) & set(exact[t].tolist())) / 10)
    row("dense HNSW, top 10", times)
    row("dense HNSW, papers only, top 10", _time(lambda q: hnsw.search(q, 10, [paper]), qv))
    import faiss

    faiss.omp_set_num_threads(1)  # one query at a time: threads only add overhead
    row("dense HNSW, top 10 (1 thread)", _time(lambda q: hnsw.search(q, 10), qv))
    print(f"   HNSW: build {build:.0f} s ({n / build:,.0f} vectors/s), recall@10 vs exact {np.mean(found):.3f}, "
          f"memory (vectors + HNSW copy and links) {hnsw.memory_bytes() / 2**30:.2f} GiB")
    if lexical:
        lex = GlobalSearch(bm25)
        row("lexical BM25 search_graph core, top 5", _time(lambda t: lex.search(t, 5), texts))
        for label, index in (("exact", flat), ("HNSW", hnsw)):
            dense = DenseSearch(GivenVectors(), index)
            for t in texts[:3]:
                dense.encode_query(t)
            hyb = GlobalSearch(bm25, dense, SearchConfig(mode="hybrid"))
            row(f"hybrid (BM25 + {label} dense, RRF over top 100), top 5", _time(lambda t: hyb.search(t, 5), texts))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=float, default=0.02, help="fraction of MAG's 1.9M nodes")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--texts", type=int, default=512, help="demo documents to encode (part 1)")
    ap.add_argument("--data", default=str(Path(__file__).resolve().parents[1] / "data"))
    ap.add_argument("--lexical", action="store_true", help="also BM25 and hybrid (builds the synthetic graph)")
    ap.add_argument("--skip-encoding", action="store_true")
    a = ap.parse_args(argv)
    if not a.skip_encoding:
        bench_encoding(a.texts, a.data)
    bench_search(a.scale, a.queries, a.lexical)


if __name__ == "__main__":
    main()
