"""Benchmark of the tables format (`ark.tables.TablesSource`) at MAG scale, against STaRK's files.

The synthetic MAG-shaped graph of `scripts/bench_graph.py` (1.9M nodes of 4 types, 40M stored edges of
4 relations, power-law degrees, 12-word texts) is written twice: as tables (``nodes.parquet``,
``edges.parquet`` with string ids such as ``"paper:123"``, ``queries.parquet``) and in STaRK's
processed MAG layout (``node_info.pkl`` with MAG's fields, ``edge_index.pt`` ...). Each phase runs in
a fresh Python process, which reports its own time and peak RSS:

* build from tables: ``TablesSource(...).graph(rebuild=True)`` (read, check, map ids, documents,
  ``KnowledgeGraph.from_edges``, save the cache);
* build from STaRK files: ``StarkSource("mag").graph(rebuild=True)`` (torch.load + pickle, MAG's
  documents, the same build and save);
* the BM25 index of the tables graph, built once (``load_index``);
* cold start of one sweep job from those caches, three times: a new process imports ark, loads the
  graph (memory-mapped) and its BM25 index, reads the queries, builds the agent's `ToolSet` and
  answers one ``search_graph`` call. Target: < 2 s (every Hydra job of a sweep pays it).

    python scripts/bench_tables.py                 # full scale: ~15 min, ~9 GiB peak (use the heavy lock)
    python scripts/bench_tables.py --scale 0.01    # quick run

Files go to ``--dir`` (default ``data/bench_tables``; several GB at full scale), removed afterwards
unless ``--keep``.
"""

from __future__ import annotations

import argparse
import json
import pickle
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_graph import NODE_TYPES, RELATIONS, peak_rss_gib, synthesize  # noqa: E402

MAG_NODE_TYPES = ["author", "institution", "field_of_study", "paper"]  # stark-qa's MagSKB order
N_QUERIES = 1000


def write_inputs(d: Path, scale: float, seed: int) -> dict:
    """Both input forms of the same synthetic graph under ``d/tables`` and ``d/stark_root/stark``."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
    import torch

    t = time.perf_counter()
    node_types, names, texts, src, dst, rel = synthesize(scale, seed)
    n = len(node_types)
    out = {"nodes": n, "edges": len(src), "synthesize_s": time.perf_counter() - t}
    words = [x.split("- text: ", 1)[1] for x in texts]
    del texts
    type_names = np.array(NODE_TYPES, dtype=object)[node_types]

    t = time.perf_counter()
    tables = d / "tables"
    tables.mkdir(parents=True, exist_ok=True)
    ids = pc.binary_join_element_wise(pa.array(type_names.tolist(), pa.string()),
                                      pc.cast(pa.array(np.arange(n)), pa.string()), ":")
    pq.write_table(pa.table({"id": ids, "type": pa.array(type_names.tolist()).dictionary_encode(),
                             "name": pa.array(names), "text": pa.array(words)}), tables / "nodes.parquet")
    rel_names = pa.array([r[0] for r in RELATIONS])
    pq.write_table(pa.table({"src": pc.take(ids, pa.array(src)), "dst": pc.take(ids, pa.array(dst)),
                             "relation": pa.DictionaryArray.from_arrays(pa.array(rel.astype(np.int32)), rel_names)}),
                   tables / "edges.parquet")
    rng = np.random.default_rng(seed)
    papers = np.flatnonzero(node_types == NODE_TYPES.index("paper"))
    answers = [pc.take(ids, pa.array(rng.choice(papers, size=int(rng.integers(1, 4)), replace=False))).to_pylist()
               for _ in range(N_QUERIES)]
    pq.write_table(pa.table({"id": np.arange(N_QUERIES), "query": [words[int(papers[i])] for i in range(N_QUERIES)],
                             "answers": answers, "split": ["test"] * N_QUERIES}), tables / "queries.parquet")
    out["write_tables_s"] = time.perf_counter() - t

    t = time.perf_counter()
    processed = d / "stark_root" / "stark" / "skb" / "mag" / "processed"
    processed.mkdir(parents=True, exist_ok=True)
    remap = np.array([MAG_NODE_TYPES.index(x) for x in NODE_TYPES], dtype=np.int64)
    torch.save(torch.from_numpy(np.stack([src, dst])), processed / "edge_index.pt")
    torch.save(torch.from_numpy(rel), processed / "edge_types.pt")
    torch.save(torch.from_numpy(remap[node_types]), processed / "node_types.pt")
    del src, dst, rel
    info = {}
    for i, (tname, name, text) in enumerate(zip(type_names.tolist(), names, words)):
        if tname == "paper":
            info[i] = {"type": "paper", "title": name, "abstract": text, "Date": -1}
        else:
            info[i] = {"type": tname, "DisplayName": f"{name} {text}", "PaperCount": -1, "CitationCount": -1}
    with open(processed / "node_info.pkl", "wb") as f:
        pickle.dump(info, f, protocol=pickle.HIGHEST_PROTOCOL)
    out["write_stark_s"] = time.perf_counter() - t
    out["size_tables_gib"] = sum(p.stat().st_size for p in tables.iterdir()) / 2**30
    out["size_stark_gib"] = sum(p.stat().st_size for p in processed.iterdir()) / 2**30
    out["write_peak_rss_gib"] = peak_rss_gib()
    return out


# --------------------------------------------------------------------------- child phases
def tables_source(d: Path):
    from ark.tables import TablesSource

    return TablesSource(d / "tables", name="bench_tables", root=d / "tables_root", candidate_types=["paper"])


def phase_build_tables(d: Path) -> dict:
    t = time.perf_counter()
    g = tables_source(d).graph(rebuild=True)
    return {"build_s": time.perf_counter() - t, "peak_rss_gib": peak_rss_gib(), "nodes": g.num_nodes,
            "edges": g.num_edges, "candidates": len(g.candidate_ids)}


def phase_build_stark(d: Path) -> dict:
    from ark.sources import StarkSource

    t = time.perf_counter()
    g = StarkSource("mag", root=d / "stark_root").graph(rebuild=True)
    return {"build_s": time.perf_counter() - t, "peak_rss_gib": peak_rss_gib(), "nodes": g.num_nodes,
            "edges": g.num_edges, "candidates": len(g.candidate_ids)}


def phase_index(d: Path) -> dict:
    from ark.text_index import load_index

    source = tables_source(d)
    g = source.graph()
    t = time.perf_counter()
    load_index(g, source.cache_dir)
    return {"index_s": time.perf_counter() - t, "peak_rss_gib": peak_rss_gib()}


def phase_cold(d: Path) -> dict:
    """What one sweep job does before its first query, from warm caches (times since the phase began)."""
    marks = {}
    t0 = time.perf_counter()
    from ark.tables import TablesSource
    from ark.text_index import load_index
    from ark.tools import SEARCH, ToolConfig, ToolSet

    marks["imports"] = time.perf_counter() - t0
    source = TablesSource(d / "tables", name="bench_tables", root=d / "tables_root", candidate_types=["paper"])
    graph = source.graph()
    marks["graph"] = time.perf_counter() - t0
    index = load_index(graph, source.cache_dir)
    marks["bm25"] = time.perf_counter() - t0
    queries = source.queries().split("test")
    marks["queries"] = time.perf_counter() - t0
    tools = ToolSet(graph, index, ToolConfig())
    result = tools.call(SEARCH, {"query": queries[0].text})
    marks["first_search"] = time.perf_counter() - t0
    assert result.error is None and result.node_ids, result.observation
    return {"marks_s": marks, "total_s": marks["first_search"], "peak_rss_gib": peak_rss_gib(),
            "rebuilt": False}


def write_vocab(d: Path, n_tokens: int) -> None:
    """A vocabulary of ``n_tokens`` tokens saved both ways: bm25s' JSON dict and `HashedVocab`'s arrays."""
    from ark.text_index import HashedVocab

    vocab = {f"t{i:07d}x": i for i in range(n_tokens)}
    (d / "vocab").mkdir(parents=True, exist_ok=True)
    (d / "vocab" / "vocab.index.json").write_text(json.dumps(vocab))
    hashes, ids = HashedVocab.arrays(vocab)
    np.save(d / "vocab" / "vocab.hash.npy", hashes)
    np.save(d / "vocab" / "vocab.ids.npy", ids)


def phase_vocab_json(d: Path) -> dict:
    t = time.perf_counter()
    with open(d / "vocab" / "vocab.index.json") as f:
        vocab = json.load(f)   # what bm25s.BM25.load does with load_vocab=True
    found = "t0000042x" in vocab
    return {"load_s": time.perf_counter() - t, "found": found}


def phase_vocab_hash(d: Path) -> dict:
    from ark.text_index import HashedVocab

    t = time.perf_counter()
    vocab = HashedVocab(np.load(d / "vocab" / "vocab.hash.npy", mmap_mode="r"),
                        np.load(d / "vocab" / "vocab.ids.npy", mmap_mode="r"))
    found = "t0000042x" in vocab
    return {"load_s": time.perf_counter() - t, "found": found}


PHASES = {"build-tables": phase_build_tables, "build-stark": phase_build_stark, "index": phase_index,
          "cold": phase_cold, "vocab-json": phase_vocab_json, "vocab-hash": phase_vocab_hash}


def _child(phase: str, d: Path) -> dict:
    t = time.perf_counter()
    res = subprocess.run([sys.executable, __file__, "--phase", phase, "--dir", str(d)], capture_output=True,
                         text=True, check=False)
    if res.returncode != 0:
        raise RuntimeError(f"phase {phase} failed:\n{res.stderr[-4000:]}")
    out = json.loads(res.stdout.strip().splitlines()[-1])
    out["process_wall_s"] = time.perf_counter() - t
    return out


def run(args) -> dict:
    d = args.dir
    out = {"scale": args.scale}
    if args.vocab_only:
        write_vocab(d, int(1_900_000 * args.scale))
        out["vocab"] = {k: [_child(f"vocab-{k}", d) for _ in range(3)] for k in ("json", "hash")}
        return out
    if not (args.reuse and (d / "tables" / "nodes.parquet").exists()):
        shutil.rmtree(d, ignore_errors=True)
        out["write"] = write_inputs(d, args.scale, args.seed)
        print(f"inputs written: {json.dumps(out['write'])}", flush=True)
    out["tables"] = _child("build-tables", d)
    print(f"build from tables: {json.dumps(out['tables'])}", flush=True)
    out["stark"] = _child("build-stark", d)
    print(f"build from STaRK files: {json.dumps(out['stark'])}", flush=True)
    out["index"] = _child("index", d)
    print(f"BM25 index: {json.dumps(out['index'])}", flush=True)
    out["cold"] = [_child("cold", d) for _ in range(3)]
    print(f"cold starts: {json.dumps(out['cold'])}", flush=True)
    return out


def report(r: dict) -> None:
    if "vocab" in r:
        j = np.median([x["load_s"] for x in r["vocab"]["json"]])
        h = np.median([x["load_s"] for x in r["vocab"]["hash"]])
        print(f"vocabulary of {int(1_900_000 * r['scale']):,} tokens, opened and one lookup (median of 3): "
              f"bm25s' JSON {j:.3f} s, hashed arrays {h * 1e3:.1f} ms ({j / h:.0f}x)")
        return
    t, s = r["tables"], r["stark"]
    print()
    print(f"== bench_tables: scale {r['scale']}: {t['nodes']:,} nodes, {t['edges']:,} stored edges "
          f"({t['candidates']:,} candidates)")
    print(f"{'build':<28}{'time':>10}{'peak RSS':>12}")
    print(f"{'from tables (parquet)':<28}{t['build_s']:>9.1f}s{t['peak_rss_gib']:>10.2f} GiB")
    print(f"{'from STaRK files':<28}{s['build_s']:>9.1f}s{s['peak_rss_gib']:>10.2f} GiB")
    print(f"tables / STaRK: time {t['build_s'] / s['build_s']:.2f}x, peak memory "
          f"{t['peak_rss_gib'] / s['peak_rss_gib']:.2f}x")
    print(f"BM25 index build (once): {r['index']['index_s']:.1f} s")
    totals = [c["total_s"] for c in r["cold"]]
    walls = [c["process_wall_s"] for c in r["cold"]]
    print(f"cold start of a sweep job (imports + graph + BM25 + queries + ToolSet + first search): "
          f"median {np.median(totals):.2f} s (runs {', '.join(f'{x:.2f}' for x in totals)}); "
          f"whole process incl. interpreter start {np.median(walls):.2f} s; target < 2 s")
    print("  steps of the median run (cumulative s): " + json.dumps(
        {k: round(v, 3) for k, v in sorted(r["cold"], key=lambda c: c["total_s"])[1]["marks_s"].items()}))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scale", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--dir", type=Path, default=Path("data/bench_tables"))
    p.add_argument("--keep", action="store_true", help="keep the files")
    p.add_argument("--reuse", action="store_true", help="reuse the inputs under --dir")
    p.add_argument("--phase", choices=sorted(PHASES), help=argparse.SUPPRESS)
    p.add_argument("--json", type=Path, help="also write the results here")
    p.add_argument("--vocab-only", action="store_true",
                   help="only time opening a BM25 vocabulary: bm25s' JSON vs the memory-mapped hash arrays")
    args = p.parse_args(argv)
    if args.phase:
        print(json.dumps(PHASES[args.phase](args.dir)))
        return
    try:
        r = run(args)
        report(r)
        if args.json:
            args.json.write_text(json.dumps(r, indent=1))
    finally:
        if not args.keep:
            shutil.rmtree(args.dir, ignore_errors=True)


if __name__ == "__main__":
    main()
