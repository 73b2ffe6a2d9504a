"""Non-agent baselines with the agent's interface. `BM25Retriever`: the first row of the paper's Table 1;
`DenseRetriever` (node embeddings, `ark.search.embeddings`) and `HybridRetriever` (RRF of the two) beside it.

STaRK's own BM25 baseline (``stark_qa.models.BM25``) indexes ``get_doc_info`` of the graph's candidate
ids with bm25s and returns the top 100 for the full query. `BM25Retriever` does the same with this
repo's index: documents are ``graph.node_text(i)`` (== ``get_doc_info(i, add_rel=False,
compact=False)``) of ``graph.candidate_ids`` only, so idf and average length are over the candidates as
in STaRK. Tokens are STaRK's by default: ``bm25s.tokenize`` with its defaults, English stopwords and no
stemming (``stem=True`` gives the agent's stemmed tokenizer instead). Nodes with score 0 are not
ranked (STaRK's evaluator puts unscored candidates in one tie at the bottom anyway).

``name_first`` (``none`` by default; ``exact`` or ``mentioned``, `ark.search.name_match`) ranks the
candidates the query names before the rest, with the baseline's own tokens.

The candidate index is cached in ``<cache_dir>/bm25_candidates_unstemmed`` (``bm25_unstemmed`` when
every node is a candidate; with ``stem=True`` the names lose the suffix, and the latter is the tools'
global index). ``python -m ark.baselines <graph> "query"`` prints a top 10.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import numpy as np

from ark.retriever import Retrieval
from ark.search.bm25 import BM25Index, load_index


class BM25Retriever:
    """Ranks the graph's candidate nodes by BM25 of the whole query (top ``top``, default 100)."""

    def __init__(self, graph, cache_dir: Path | str | None = None, top: int = 100, k1: float = 1.5,
                 b: float = 0.75, method: str = "lucene", stem: bool = False, stopwords: bool = True,
                 index: BM25Index | None = None, name_first: str = "none"):
        """``index``: a ready index over the candidates (document i = ``graph.candidate_ids[i]``); else it
        is loaded from / built into ``cache_dir`` (built in memory when ``cache_dir`` is None)."""
        from ark.search.name_match import NAME_FIRST

        if top < 1:
            raise ValueError(f"top must be >= 1, got {top}")
        if name_first not in NAME_FIRST:
            raise ValueError(f"unknown name_first {name_first!r}; valid: {', '.join(NAME_FIRST)}")
        self.name_first = name_first
        self.graph = graph
        self.top = top
        self.candidate_ids = np.asarray(graph.candidate_ids, dtype=np.int64)
        all_nodes = len(self.candidate_ids) == graph.num_nodes and bool(
            (self.candidate_ids == np.arange(graph.num_nodes)).all())
        if index is None:
            if cache_dir is None:
                texts = graph.texts() if all_nodes else (graph.node_text(int(i)) for i in self.candidate_ids)
                index = BM25Index.build(texts, k1=k1, b=b, method=method, stem=stem, stopwords=stopwords)
            elif all_nodes:
                index = load_index(graph, cache_dir, k1=k1, b=b, method=method, stem=stem,
                                   stopwords=stopwords, subdir="bm25" if stem else "bm25_unstemmed")
            else:
                index = load_index(graph, cache_dir, k1=k1, b=b, method=method, stem=stem,
                                   stopwords=stopwords, doc_ids=self.candidate_ids,
                                   subdir="bm25_candidates" if stem else "bm25_candidates_unstemmed")
        if index.num_docs != len(self.candidate_ids):
            raise ValueError(f"index has {index.num_docs} documents but the graph has "
                             f"{len(self.candidate_ids)} candidates")
        self.index = index
        self.names = None
        if name_first != "none":
            from ark.search.name_match import NameIndex

            self.names = NameIndex.build((graph.node_name(int(i)) for i in self.candidate_ids), index.tokenizer)

    def retrieve(self, query: str) -> list[int]:
        """Candidate node ids ranked by BM25 of ``query`` (score > 0 only, at most ``top``; the named
        candidates first with ``name_first``)."""
        if self.names is not None:
            from ark.search.name_match import names_first

            pos = names_first(self.index, self.names, query, self.top, self.name_first)[0]
        else:
            pos, _ = self.index.search(query, self.top)
        return self.candidate_ids[pos].tolist()

    async def aretrieve(self, query: str, query_id: int | str = "") -> Retrieval:
        """`retrieve` off the event loop, wrapped as a `Retrieval` (no trajectories, no tokens, no cost)."""
        t0 = time.perf_counter()
        ranking = await asyncio.to_thread(self.retrieve, query)
        return Retrieval(ranking=ranking, agent_rankings=[ranking], trajectories=[],
                         latency_s=time.perf_counter() - t0)


class DenseRetriever:
    """Ranks the graph's candidate nodes by cosine of the query's and their embeddings (top ``top``):
    the dense rows of the paper's Table 1 (ada-002 with encoder=ada-002). ``dense``: an
    `ark.search.modes.DenseSearch` over all nodes; candidates restrict it exactly (by node type when the
    candidates are whole node types, else by a mask, which needs the flat index)."""

    def __init__(self, graph, dense, top: int = 100):
        if top < 1:
            raise ValueError(f"top must be >= 1, got {top}")
        self.graph, self.dense, self.top = graph, dense, top
        cands = np.asarray(graph.candidate_ids, dtype=np.int64)
        node_types = np.asarray(graph.node_types)
        types = np.unique(node_types[cands])
        whole_types = len(cands) == int(np.isin(node_types, types).sum())
        self.types = None if len(cands) == graph.num_nodes else (types.tolist() if whole_types else None)
        self.allowed = None
        if self.types is None and len(cands) != graph.num_nodes:
            self.allowed = np.zeros(graph.num_nodes, dtype=bool)
            self.allowed[cands] = True

    def retrieve(self, query: str) -> list[int]:
        q = self.dense.encode_query(query)
        ids, _ = self.dense.index.search(q, self.top, self.types, self.allowed)
        return ids.tolist()

    aretrieve = BM25Retriever.aretrieve


class HybridRetriever:
    """Reciprocal-rank fusion (`ark.search.rank_fusion.rrf`, constant ``rrf_k``) of the BM25 baseline's and the dense
    baseline's top ``depth`` candidates; top ``top``."""

    def __init__(self, bm25: BM25Retriever, dense: DenseRetriever, top: int = 100, rrf_k: float = 60.0,
                 depth: int = 100):
        if top < 1:
            raise ValueError(f"top must be >= 1, got {top}")
        self.bm25, self.dense, self.top, self.rrf_k = bm25, dense, top, rrf_k
        self.depth = max(depth, top)
        bm25.top = dense.top = self.depth

    def retrieve(self, query: str) -> list[int]:
        from ark.search.rank_fusion import rrf

        ids, _ = rrf([np.asarray(self.bm25.retrieve(query)), np.asarray(self.dense.retrieve(query))],
                     self.top, self.rrf_k)
        return ids.tolist()

    aretrieve = BM25Retriever.aretrieve


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        raise SystemExit('usage: python -m ark.baselines <graph name or tables folder> "query"')
    from ark.cli.main import load_source

    source = load_source(args[0])
    graph = source.graph()
    retriever = BM25Retriever(graph, source.cache_dir)
    for i in retriever.retrieve(args[1])[:10]:
        print(f"{i:>8}  [{graph.node_type_name(i)}] {graph.node_name(i)}")


if __name__ == "__main__":
    main()
