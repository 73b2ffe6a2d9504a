"""Writing the demo in STaRK's PRIME format, and building it once (`build_demo`, `ensure_demo`).

Under a STaRK data root ``<root>``:

* ``<root>/skb/demo/processed/``: ``node_info.pkl``, ``edge_index.pt``, ``edge_types.pt``,
  ``node_types.pt``, ``edge_type_dict.pkl``, ``node_type_dict.pkl`` -- the files and formats
  stark-qa's ``PrimeSKB`` reads, with PRIME's node-type names (``disease``, ``gene/protein``,
  ``effect/phenotype``), relation names (``associated with``, ``parent-child``,
  ``phenotype absent``, ``phenotype present``) and ``node_info`` fields (``id``, ``type``,
  ``name``, ``source``, ``details``). Every edge is stored in both directions, as in PRIME: stored
  edge ``2k`` is the canonical direction (disease -> phenotype, gene -> phenotype,
  gene -> disease, parent term -> child term) and edge ``2k + 1`` its reverse.
* ``<root>/qa/demo/stark_qa/stark_qa.csv`` (``id,query,answer_ids``) and
  ``<root>/qa/demo/split/{train,val,test,test-0.1}.index``: a query set in STaRK's QA format,
  generated with a fixed seed, gold answers computed exactly from the graph. One extra file,
  ``<root>/qa/demo/query_templates.csv`` (``id,template,params``), says which template made each query,
  and one extra split, ``split/test-mismatch.index``: the vocabulary-mismatch queries
  (`ark.data.demo.mismatch`), kept out of the other splits.
* ``<root>/skb/demo/build_info.json``: the builder version, the seed and the statistics.

Every file is written atomically (`ark.atomic`); the same input gives the same bytes.

Builder versions (``build_info.json``'s ``builder_version``; a build of another version is rebuilt):

* 2: the four templates and train/val/test/test-0.1.
* 3: the vocabulary-mismatch split ``test-mismatch``; the other splits unchanged.
* 4: gold sets that mean what the questions say: ids and split sizes kept, the queries at them changed. The three
  relational templates follow HPO's true-path rule (a disease or gene annotated with a term counts for
  every ancestor of it; the children template asks for direct child terms), where version 3 counted
  direct annotations only; the held-out synonyms are EXACT synonyms that no other phenotype has or
  mentions, where version 3 took any scope; the reworded definitions use a smaller table that keeps
  medical meaning (no size words, nothing inside a multi-word HPO term or a hyphenated compound).

    ark build --graph demo --root data         # build (or reuse) it and print statistics
"""

from __future__ import annotations

import csv
import io
import json
import pickle
from pathlib import Path

import torch

from ark import atomic
from ark.data import stark
from ark.data.demo.graph import NODE_TYPES, RELATIONS, DemoGraph, build_graph
from ark.data.demo.mismatch import (ALL_TEMPLATES, MISMATCH_SPLIT, add_mismatch_split, asked_about,
                                    generate_mismatch_queries, hold_out_synonyms)
from ark.data.demo.queries import SEED, DemoQuery, generate_queries, split_queries

NAME = "demo"
BUILDER_VERSION = 4  # history in the module docstring
PROCESSED_FILES = ("node_info.pkl", "edge_index.pt", "edge_types.pt", "node_types.pt",
                   "edge_type_dict.pkl", "node_type_dict.pkl")


def _tensor_bytes(t: torch.Tensor) -> bytes:
    buf = io.BytesIO()
    torch.save(t, buf)
    return buf.getvalue()


def write_skb(graph: DemoGraph, processed: Path) -> None:
    """Write the six PRIME processed files into ``processed`` (and nothing else: stark-qa's loader
    reads every file in that folder)."""
    processed.mkdir(parents=True, exist_ok=True)
    n_edges = len(graph.edges)
    index = torch.empty((2, 2 * n_edges), dtype=torch.long)
    etypes = torch.empty(2 * n_edges, dtype=torch.long)
    if n_edges:
        e = torch.tensor(graph.edges, dtype=torch.long)
        index[0, 0::2], index[1, 0::2] = e[:, 0], e[:, 1]
        index[0, 1::2], index[1, 1::2] = e[:, 1], e[:, 0]
        etypes[0::2] = etypes[1::2] = e[:, 2]
    files = {
        "node_info.pkl": pickle.dumps(graph.node_info, protocol=4),
        "edge_index.pt": _tensor_bytes(index),
        "edge_types.pt": _tensor_bytes(etypes),
        "node_types.pt": _tensor_bytes(torch.tensor(graph.node_types, dtype=torch.long)),
        "edge_type_dict.pkl": pickle.dumps(dict(enumerate(RELATIONS)), protocol=4),
        "node_type_dict.pkl": pickle.dumps(dict(enumerate(NODE_TYPES)), protocol=4),
    }
    for name, data in files.items():
        atomic.write_bytes(processed / name, data)


def write_qa(queries: list[DemoQuery], splits: dict[str, list[int]], qa_dir: Path) -> None:
    """Write ``stark_qa/stark_qa.csv``, ``split/*.index`` and ``query_templates.csv``."""
    (qa_dir / "stark_qa").mkdir(parents=True, exist_ok=True)
    (qa_dir / "split").mkdir(parents=True, exist_ok=True)
    qa, meta = io.StringIO(), io.StringIO()
    w = csv.writer(qa, lineterminator="\n")
    w.writerow(["id", "query", "answer_ids"])
    m = csv.writer(meta, lineterminator="\n")
    m.writerow(["id", "template", "params"])
    for i, q in enumerate(queries):
        w.writerow([i, q.text, str(list(q.answer_ids))])
        m.writerow([i, q.template, json.dumps(dict(q.params), sort_keys=True)])
    atomic.write_bytes(qa_dir / "stark_qa" / "stark_qa.csv", qa.getvalue().encode("utf-8"))
    atomic.write_bytes(qa_dir / "query_templates.csv", meta.getvalue().encode("utf-8"))
    for name, ids in splits.items():
        atomic.write_bytes(qa_dir / "split" / f"{name}.index", ("\n".join(map(str, ids)) + "\n").encode())


def build_info_path(root: Path) -> Path:
    return Path(root) / "skb" / NAME / "build_info.json"


def build_demo(root: Path, data_dir: Path | None = None) -> Path:
    """Build the demo graph and its queries under ``root`` (STaRK hub layout); return the
    processed folder ``<root>/skb/demo/processed``. Deterministic: same input, same bytes.

    The four original templates' queries are drawn from the full documents first; then the held-out
    synonyms leave the documents of phenotypes no such query is about, and the mismatch queries go
    into split `MISMATCH_SPLIT`."""
    root = Path(root)
    graph = build_graph(data_dir)
    queries, splits = split_queries(generate_queries(graph))
    held_out = hold_out_synonyms(graph, avoid=asked_about(queries))
    queries, splits = add_mismatch_split(queries, splits, generate_mismatch_queries(graph, held_out))
    processed = stark.graph_dir(NAME, root)
    write_skb(graph, processed)
    write_qa(queries, splits, stark.qa_dir(NAME, root))
    stats = statistics(graph, queries, splits)
    atomic.write_bytes(build_info_path(root), json.dumps(
        {"builder_version": BUILDER_VERSION, "seed": SEED, **stats}, indent=1).encode())
    return processed


def is_built(root: Path) -> bool:
    """True when every demo file exists and was written by this builder version."""
    root = Path(root)
    qa = stark.qa_files(NAME, root)
    needed = [stark.graph_dir(NAME, root) / f for f in PROCESSED_FILES]
    needed += [qa["queries"]] + [qa[s] for s in stark.SPLITS] + [qa["test"].with_name(f"{MISMATCH_SPLIT}.index")]
    if not all(p.is_file() for p in needed) or not build_info_path(root).is_file():
        return False
    try:
        info = json.loads(build_info_path(root).read_text())
    except (OSError, ValueError):
        return False
    return info.get("builder_version") == BUILDER_VERSION


def ensure_demo(root: Path) -> Path:
    """Build the demo files unless an up-to-date build is already under ``root``."""
    return stark.graph_dir(NAME, root) if is_built(root) else build_demo(root)


def statistics(graph: DemoGraph, queries: list[DemoQuery], splits: dict[str, list[int]]) -> dict:
    """Counts: nodes per type, stored edges per relation, queries per split/template, gold sizes."""
    nodes = {t: 0 for t in NODE_TYPES}
    for t in graph.node_types:
        nodes[NODE_TYPES[t]] += 1
    edges = {r: 0 for r in RELATIONS}
    for _, _, r in graph.edges:
        edges[RELATIONS[r]] += 2
    templates = {t: sum(q.template == t for q in queries) for t in ALL_TEMPLATES}
    gold = [len(q.answer_ids) for q in queries]
    return {
        "hpo_version": graph.hpo_version,
        "nodes": nodes, "num_nodes": len(graph.node_types),
        "stored_edges": edges, "num_stored_edges": 2 * len(graph.edges),
        "queries": {s: len(ids) for s, ids in splits.items()}, "templates": templates,
        "avg_gold": round(sum(gold) / max(1, len(gold)), 3), "max_gold": max(gold, default=0),
    }
