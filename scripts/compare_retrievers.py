"""BM25 vs dense vs hybrid baselines per demo query template (Hit@1, Hit@5, R@20, MRR), as a markdown table.

    python scripts/compare_retrievers.py          # demo test + test-mismatch splits, MiniLM, every template
    python scripts/compare_retrievers.py --splits test --max-seq-length 128
    python scripts/compare_retrievers.py --retrievers bm25,bm25-exact,bm25-mentioned   # name-first BM25, no encoder

``bm25-exact`` and ``bm25-mentioned`` are the BM25 baseline with ``name_first`` (`ark.search.name_match`):
the candidates whose name has exactly the question's tokens, or whose whole name the question contains,
ranked first.

The first run encodes every demo node with the local encoder (tens of minutes on 2 busy cores; run it
under ``flock /work/heavy.lock nice -n 10`` on a shared machine); later runs read the cached node
embeddings (``data/cache/demo/embeddings/``). The retrievers are `ark.baselines`' BM25Retriever
(STaRK's BM25), DenseRetriever and HybridRetriever (RRF, constant 60, over each side's top 100), scored
with ark.analysis.metrics exactly as runs are. Needs requirements-dense.txt.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from ark.home import ark_home  # noqa: E402

METRICS = ("hit@1", "hit@5", "recall@20", "mrr")
LABELS = {"hit@1": "Hit@1", "hit@5": "Hit@5", "recall@20": "R@20", "mrr": "MRR"}
RETRIEVERS = ("bm25", "bm25-exact", "bm25-mentioned", "dense", "hybrid")
NAMES = {"bm25": "BM25", "bm25-exact": "BM25, names first (exact)", "bm25-mentioned": "BM25, names first (mentioned)",
         "dense": "dense (MiniLM)", "hybrid": "hybrid (RRF)"}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--root", default=str(ark_home()),
                   help="data root: the demo graph under <root>/stark, caches under <root>/cache")
    p.add_argument("--splits", default="test,test-mismatch",
                   help="comma-separated demo splits (test-mismatch: the vocabulary-mismatch templates)")
    p.add_argument("--max-seq-length", type=int, default=None)
    p.add_argument("--retrievers", default=",".join(RETRIEVERS), help=f"comma list of {', '.join(RETRIEVERS)}")
    p.add_argument("--out", default=None, help="also write the per-template numbers as CSV here")
    a = p.parse_args(argv)

    from ark.baselines import BM25Retriever, DenseRetriever, HybridRetriever
    from ark.search.embeddings import LocalEncoder, default_model_dir
    from ark.analysis.metrics import as_candidates, evaluate
    from ark.search.modes import SearchConfig, SearchSetup
    from ark.data.sources import DemoSource

    source = DemoSource(root=a.root)
    splits = [x for x in a.splits.split(",") if x]
    graph, queries = source.graph(), [q for x in splits for q in source.queries().split(x)]
    templates = {}
    with open(source.raw_root / "qa" / "demo" / "query_templates.csv", newline="") as f:
        for row in csv.DictReader(f):
            templates[int(row["id"])] = row["template"]
    chosen = [x for x in a.retrievers.split(",") if x]
    bad = [x for x in chosen if x not in RETRIEVERS]
    if bad:
        raise SystemExit(f"--retrievers: unknown {', '.join(bad)}; choose from {', '.join(RETRIEVERS)}")
    retrievers = {}
    for name in chosen:
        if name.startswith("bm25"):
            first = name.split("-", 1)[1] if "-" in name else "none"
            retrievers[NAMES[name]] = BM25Retriever(graph, cache_dir=source.cache_dir, top=100, name_first=first)
    if {"dense", "hybrid"} & set(chosen):
        enc = LocalEncoder("all-MiniLM-L6-v2", max_seq_length=a.max_seq_length, models_dir=default_model_dir(a.root))
        t0 = time.perf_counter()
        dense = SearchSetup(SearchConfig(mode="dense"), enc).dense(graph, source.cache_dir)
        print(f"node embeddings ready in {time.perf_counter() - t0:.0f} s: {dense.index.vectors.shape}", flush=True)
        if "dense" in chosen:
            retrievers[NAMES["dense"]] = DenseRetriever(graph, dense, top=100)
        if "hybrid" in chosen:
            retrievers[NAMES["hybrid"]] = HybridRetriever(BM25Retriever(graph, cache_dir=source.cache_dir),
                                                          DenseRetriever(graph, dense), top=100)
    cands = as_candidates(graph.candidate_ids)
    scores: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for name, r in retrievers.items():
        t0 = time.perf_counter()
        for q in queries:
            m = evaluate(r.retrieve(q.text), q.answer_ids, cands, METRICS)
            scores[name, templates[q.id]].append(m)
        print(f"{name}: {len(queries)} queries in {time.perf_counter() - t0:.1f} s", flush=True)

    from ark.data.demo import ALL_TEMPLATES, MISMATCH_TEMPLATES

    present = {templates[q.id] for q in queries}
    order = [t for t in ALL_TEMPLATES if t in present]
    for group, members in (("all", [t for t in order if t not in MISMATCH_TEMPLATES]),
                           ("all mismatch", [t for t in order if t in MISMATCH_TEMPLATES])):
        if members:
            order.append(group)
            for name in retrievers:
                scores[name, group] = [m for t in members for m in scores[name, t]]
    rows = []
    print(f"\n{' + '.join(splits)} split(s), {len(queries)} queries; values in %\n")
    print("| template | n | " + " | ".join(f"{r}: Hit@1 / Hit@5 / R@20 / MRR" for r in retrievers) + " |")
    print("|---|---:|" + "---|" * len(retrievers))
    for t in order:
        n = len(scores[next(iter(retrievers)), t])
        cells = []
        for r in retrievers:
            means = {m: 100 * statistics.fmean(x[m] for x in scores[r, t]) for m in METRICS}
            rows.append({"template": t, "retriever": r, "n": n, **{m: round(v, 2) for m, v in means.items()}})
            cells.append(" / ".join(f"{means[m]:.1f}" for m in METRICS))
        print(f"| {t} | {n} | " + " | ".join(cells) + " |")
    if a.out:
        with open(a.out, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
