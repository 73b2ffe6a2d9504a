"""Non-agent baselines with the agent's interface. `BM25Retriever`: the first row of the paper's Table 1;
`DenseRetriever` (node embeddings, `ark.search.embeddings`) and `HybridRetriever` (RRF of the two) beside it.

STaRK's own BM25 baseline (``stark_qa.models.BM25``) indexes ``get_doc_info`` of the graph's candidate
ids with bm25s and returns the top 100 for the full query. `BM25Retriever` does the same with this
repo's index: documents are ``graph.node_text(i)`` (== ``get_doc_info(i, add_rel=False,
compact=False)``) of ``graph.candidate_ids`` only, so idf and average length are over the candidates as
in STaRK. Tokens are STaRK's by default: ``bm25s.tokenize`` with its defaults, English stopwords and no
stemming (``stem=True`` gives the agent's stemmed tokenizer instead).

Every baseline's `Retrieval` carries its own scores (``Retrieval.scores``: BM25, cosine, RRF), which
``ark.analysis.metrics.evaluate``'s stark_qa mode ranks by. ``ranking`` picks the list:

* ``"paper"`` (default): the top ``top`` with score > 0, ties by the lower node id.
* ``"stark_qa"``: the list stark-qa's own model returns, so stark_qa-mode numbers are stark-qa's.
  BM25 (`BM25Retriever.stark_qa_forward`): ``stark_qa.models.BM25.forward(query, k=top)``, i.e. the
  top k of *all* candidates, zero scores kept, chosen among equal scores the way bm25s' numpy top-k
  chooses them (``np.argpartition`` over the candidates' float32 scores, which we compute bit for bit
  as bm25s does); stark-qa's default k, and its eval.py's, is 100. Dense
  (`DenseRetriever.stark_qa_forward`): every candidate with its cosine, as ``stark_qa.models.VSS``
  scores every candidate (nothing is cut, so no tie at the bottom).

``name_first`` (``none`` by default; ``exact`` or ``mentioned``, `ark.search.name_match`) ranks the
candidates the query names before the rest, with the baseline's own tokens.

The candidate index is cached in ``<cache_dir>/bm25_candidates_unstemmed`` (``bm25_unstemmed`` when
every node is a candidate; with ``stem=True`` the names lose the suffix, and the latter is the tools'
global index). Runs build them from ``conf/retriever/`` (`ark.config.retrievers`).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import numpy as np

from ark.retriever import Retrieval
from ark.search.bm25 import BM25Index, load_index

RANKINGS = ("paper", "stark_qa")  # which list a baseline returns (module docstring)


def _check_ranking(ranking: str) -> str:
    if ranking not in RANKINGS:
        raise ValueError(f"unknown baseline ranking {ranking!r}; valid: {', '.join(RANKINGS)}")
    return ranking


class BM25Retriever:
    """Ranks the graph's candidate nodes by BM25 of the whole query (top ``top``, default 100)."""

    def __init__(self, graph, cache_dir: Path | str | None = None, top: int = 100, k1: float = 1.5,
                 b: float = 0.75, method: str = "lucene", stem: bool = False, stopwords: bool = True,
                 index: BM25Index | None = None, ranking: str = "paper", name_first: str = "none"):
        """``index``: a ready index over the candidates (document i = ``graph.candidate_ids[i]``); else it
        is loaded from / built into ``cache_dir`` (built in memory when ``cache_dir`` is None).
        ``ranking``: "paper" or "stark_qa" (module docstring). ``name_first`` (paper ranking only): the
        candidates the query names first (`ark.search.name_match`)."""
        from ark.search.name_match import NAME_FIRST

        if top < 1:
            raise ValueError(f"top must be >= 1, got {top}")
        self.ranking = _check_ranking(ranking)
        if name_first not in NAME_FIRST:
            raise ValueError(f"unknown name_first {name_first!r}; valid: {', '.join(NAME_FIRST)}")
        if name_first != "none" and ranking == "stark_qa":
            raise ValueError("name_first applies to ranking='paper' only; stark_qa is stark-qa's own BM25 list")
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
        """Candidate node ids ranked by BM25 of ``query`` (the ``ranking`` list: "paper", score > 0 only,
        at most ``top``, the named candidates first with ``name_first``)."""
        return self.retrieve_scored(query)[0]

    def retrieve_scored(self, query: str) -> tuple[list[int], list[float]]:
        """The ``ranking`` list and each entry's BM25 score."""
        if self.ranking == "stark_qa":
            return self.stark_qa_forward(query, self.top)
        if self.names is not None:
            from ark.search.name_match import names_first

            pos, scores = names_first(self.index, self.names, query, self.top, self.name_first)[:2]
        else:
            pos, scores = self.index.search(query, self.top)
        return self.candidate_ids[pos].tolist(), np.asarray(scores).tolist()

    def stark_qa_forward(self, query: str, k: int = 100) -> tuple[list[int], list[float]]:
        """What ``stark_qa.models.BM25(skb).forward(query, k=k)`` returns, as (candidate ids, scores), best
        first: the k highest of all candidates' scores, zeros included, the k picked among equal scores as
        bm25s' numpy top-k picks them (``np.argpartition(scores, -k)``, its last k). Like bm25s, a k above
        the number of candidates raises ValueError."""
        n = len(self.candidate_ids)
        if not 1 <= k <= n:
            raise ValueError(f"k={k} must be between 1 and the number of candidates, {n} "
                             "(stark-qa's bm25s raises on a larger k too)")
        scores = self.index.dense_scores(query)
        chosen = np.argpartition(scores, -k)[-k:]
        chosen = chosen[np.lexsort((chosen, -scores[chosen]))]  # best first (the order scores nothing)
        return self.candidate_ids[chosen].tolist(), scores[chosen].tolist()

    async def aretrieve(self, query: str, query_id: int | str = "") -> Retrieval:
        """`retrieve_scored` off the event loop, wrapped as a `Retrieval` with its scores (no trajectories,
        no tokens, no cost)."""
        t0 = time.perf_counter()
        ranking, scores = await asyncio.to_thread(self.retrieve_scored, query)
        return Retrieval(ranking=ranking, agent_rankings=[ranking], trajectories=[],
                         latency_s=time.perf_counter() - t0, scores=scores)


class DenseRetriever:
    """Ranks the graph's candidate nodes by cosine of the query's and their embeddings (top ``top``):
    the dense rows of the paper's Table 1 (ada-002 with encoder=ada-002). ``dense``: an
    `ark.search.modes.DenseSearch` over all nodes; candidates restrict it exactly (by node type when the
    candidates are whole node types, else by a mask, which needs the flat index)."""

    def __init__(self, graph, dense, top: int = 100, ranking: str = "paper"):
        if top < 1:
            raise ValueError(f"top must be >= 1, got {top}")
        self.ranking = _check_ranking(ranking)
        self.graph, self.dense, self.top = graph, dense, top
        cands = np.asarray(graph.candidate_ids, dtype=np.int64)
        self.candidate_ids = cands
        node_types = np.asarray(graph.node_types)
        types = np.unique(node_types[cands])
        whole_types = len(cands) == int(np.isin(node_types, types).sum())
        self.types = None if len(cands) == graph.num_nodes else (types.tolist() if whole_types else None)
        self.allowed = None
        if self.types is None and len(cands) != graph.num_nodes:
            self.allowed = np.zeros(graph.num_nodes, dtype=bool)
            self.allowed[cands] = True

    def retrieve(self, query: str) -> list[int]:
        return self.retrieve_scored(query)[0]

    def retrieve_scored(self, query: str) -> tuple[list[int], list[float]]:
        """The ``ranking`` list and each entry's cosine similarity to the query."""
        if self.ranking == "stark_qa":
            return self.stark_qa_forward(query)
        q = self.dense.encode_query(query)
        ids, sims = self.dense.index.search(q, self.top, self.types, self.allowed)
        return ids.tolist(), sims.tolist()

    def stark_qa_forward(self, query: str) -> tuple[list[int], list[float]]:
        """Every candidate with its exact cosine, best first (ties by lower id), as ``stark_qa.models.VSS``
        scores every candidate; exact with any index kind (`VectorIndex.score`)."""
        sims = self.dense.index.score(self.dense.encode_query(query), self.candidate_ids)
        order = np.lexsort((self.candidate_ids, -sims))
        return self.candidate_ids[order].tolist(), sims[order].tolist()

    aretrieve = BM25Retriever.aretrieve


class HybridRetriever:
    """Reciprocal-rank fusion (`ark.search.rank_fusion.rrf`, constant ``rrf_k``) of the BM25 baseline's and the dense
    baseline's top ``depth`` candidates; top ``top``."""

    def __init__(self, bm25: BM25Retriever, dense: DenseRetriever, top: int = 100, rrf_k: float = 60.0,
                 depth: int = 100):
        if top < 1:
            raise ValueError(f"top must be >= 1, got {top}")
        if bm25.ranking != "paper" or dense.ranking != "paper":
            raise ValueError("the hybrid baseline fuses the two paper-ranking lists; build its BM25 and dense "
                             "retrievers with ranking='paper'")
        self.bm25, self.dense, self.top, self.rrf_k = bm25, dense, top, rrf_k
        self.depth = max(depth, top)
        bm25.top = dense.top = self.depth

    def retrieve(self, query: str) -> list[int]:
        return self.retrieve_scored(query)[0]

    def retrieve_scored(self, query: str) -> tuple[list[int], list[float]]:
        """The fused top ``top`` and each entry's RRF score."""
        from ark.search.rank_fusion import rrf

        ids, scores = rrf([np.asarray(self.bm25.retrieve(query)), np.asarray(self.dense.retrieve(query))],
                          self.top, self.rrf_k)
        return ids.tolist(), np.asarray(scores, dtype=np.float64).tolist()

    aretrieve = BM25Retriever.aretrieve
