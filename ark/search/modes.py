"""Global search and neighbor ranking by text: lexical (BM25, the paper's), dense (embeddings) or hybrid.

`SearchConfig` (Hydra group ``conf/search/``) chooses:

* ``mode`` of ``search_graph`` and of the dense/hybrid baselines: ``lexical`` (default; BM25 exactly as
  before), ``dense`` (cosine of the query's and the nodes' embeddings, `ark.search.vectors`) or
  ``hybrid`` (both rankings fused);
* ``neighbor_rank`` of ``explore_neighbors``' query ranking: ``bm25`` (default), ``dense``, ``hybrid``;
* ``fusion`` for hybrid: ``rrf`` (reciprocal-rank fusion, rrf_k = 60) or ``weighted`` (min-max normalised
  scores mixed by ``weight``), `ark.search.rank_fusion`; each ranking contributes its top ``depth``
  (default 100, at least k); a node BM25 does not match (score 0) gets nothing from the lexical side;
* ``name_first`` of lexical ``search_graph``: ``none`` (default, the paper's), ``exact`` (nodes whose
  name has exactly the query's words first) or ``mentioned`` (those, then nodes whose whole name the
  query contains), `ark.search.name_match`; neighbor ranking is not affected.

`GlobalSearch` holds the BM25 index and, for dense or hybrid, a `DenseSearch` (encoder + vector index
over the cached node embeddings); asking for dense or hybrid without one is an error naming the fix. A
hybrid search runs its BM25 side on a worker thread while the calling thread encodes the query and
searches the vectors (both release the GIL), so its latency is the slower side's, not their sum.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from ark.search.name_match import NAME_FIRST, NameIndex, names_first
from ark.search.rank_fusion import FUSIONS, RRF_K, rrf, rrf_scores, weighted
_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def _lexical_pool() -> ThreadPoolExecutor:
    """The worker threads hybrid searches run their BM25 side on (one pool per process, made on first use)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=2 * (os.cpu_count() or 1), thread_name_prefix="ark-bm25")
        return _POOL

MODES = ("lexical", "dense", "hybrid")
NEIGHBOR_RANKS = ("bm25", "dense", "hybrid")


@dataclass
class SearchConfig:
    """How search_graph and neighbor ranking score text (see the module doc)."""

    mode: str = "lexical"  # lexical | dense | hybrid
    neighbor_rank: str = "bm25"  # bm25 | dense | hybrid
    fusion: str = "rrf"  # rrf | weighted (hybrid only)
    rrf_k: float = RRF_K  # RRF's constant
    weight: float = 0.5  # weighted fusion: weight of the dense score; lexical gets 1 - weight
    depth: int = 100  # each ranking's depth fed into the fusion (at least k)
    name_first: str = "none"  # none (paper) | exact | mentioned: name matches before BM25's ranking (lexical only)

    def __post_init__(self) -> None:
        for field_, value, valid in (("mode", self.mode, MODES), ("neighbor_rank", self.neighbor_rank, NEIGHBOR_RANKS),
                                     ("fusion", self.fusion, FUSIONS), ("name_first", self.name_first, NAME_FIRST)):
            if value not in valid:
                raise ValueError(f"unknown search {field_} {value!r}; valid: {', '.join(valid)} "
                                 f"(conf/search/: lexical, dense, hybrid)")
        if not 0.0 <= self.weight <= 1.0:
            raise ValueError(f"search weight must be in [0, 1], got {self.weight}")
        if self.rrf_k <= 0 or self.depth < 1:
            raise ValueError(f"rrf_k must be > 0 and depth >= 1, got {self.rrf_k}, {self.depth}")
        if self.name_first != "none" and self.mode != "lexical":
            raise ValueError(f"search name_first={self.name_first!r} works with mode='lexical' only, not "
                             f"{self.mode!r}; use name_first=none with search=dense or search=hybrid")

    @property
    def needs_dense(self) -> bool:
        return self.mode != "lexical" or self.neighbor_rank != "bm25"


class DenseSearch:
    """An encoder and the vector index over the graph's cached node embeddings."""

    def __init__(self, encoder, index, query_cache: int = 4096):
        if int(encoder.dim) != index.dim:
            raise ValueError(f"encoder {encoder.name} produces {encoder.dim}-dimensional vectors but the node "
                             f"embeddings have {index.dim}: rebuild them with this encoder "
                             f"(python -m experiments.embed graph=<graph> encoder=<encoder>)")
        self.encoder = encoder
        self.index = index
        self.encode_query = functools.lru_cache(maxsize=query_cache)(self._encode)

    def _encode(self, query: str) -> np.ndarray:
        v = np.asarray(self.encoder.encode([query]), dtype=np.float32).reshape(-1)
        v.setflags(write=False)
        return v

    def search(self, query: str, k: int, types: Sequence[int] | None = None) -> tuple[np.ndarray, np.ndarray]:
        return self.index.search(self.encode_query(query), k, types)

    def score(self, query: str, ids: np.ndarray) -> np.ndarray:
        return self.index.score(self.encode_query(query), ids)


class GlobalSearch:
    """search_graph's and the baselines' ranking, and the neighbor ranking, as configured."""

    def __init__(self, bm25, dense: DenseSearch | None = None, config: SearchConfig | None = None,
                 names: Sequence[str] | None = None, concurrent: bool = True):
        """``names``: the node names in id order (``graph.names()``), needed by ``name_first``.
        ``concurrent``: a hybrid search runs its BM25 side on the shared worker pool while this thread
        searches the vectors (default); False runs the two one after the other, with the same result
        (scripts/bench_dense.py times both)."""
        self.bm25 = bm25
        self.concurrent = concurrent
        self.dense = dense
        self.config = config or SearchConfig()
        self._names = names
        self._name_index: NameIndex | None = None
        if self.config.name_first != "none" and (names is None or len(names) != bm25.num_docs):
            raise ValueError(f"search name_first={self.config.name_first!r} needs the {bm25.num_docs} node names "
                             "(GlobalSearch(..., names=graph.names()))")
        if self.config.needs_dense and dense is None:
            raise ValueError(f"search mode={self.config.mode!r} / neighbor_rank={self.config.neighbor_rank!r} "
                             "needs node embeddings and an encoder: choose search=dense or search=hybrid "
                             "(conf/search/), which build them, or pass a DenseSearch")
        if dense is not None and len(dense.index) != bm25.num_docs:
            raise ValueError(f"the vector index has {len(dense.index)} nodes but the BM25 index {bm25.num_docs}: "
                             "the embeddings belong to another graph; rebuild them for this one")

    @property
    def mode(self) -> str:
        return self.config.mode

    def search(self, query: str, k: int, types: Sequence[int] | None = None, mask: np.ndarray | None = None
               ) -> tuple[np.ndarray, np.ndarray, int]:
        """(ids, scores, total) of the top ``k`` nodes (of ``types``; ``mask`` is the same filter as a
        boolean array over nodes). ``total``: lexical, nodes matching any query term; dense, nodes
        that could be returned; hybrid, nodes in the union of the two fused rankings."""
        c = self.config
        if c.mode == "lexical" and c.name_first != "none":
            if self._name_index is None:
                self._name_index = NameIndex.build(self._names, self.bm25.tokenizer)
            return names_first(self.bm25, self._name_index, query, k, c.name_first, mask)
        if c.mode == "lexical":
            return self.bm25.search_with_total(query, k, mask)
        if c.mode == "dense":
            ids, sims = self.dense.search(query, k, types)
            return ids, sims, self.dense.index.count(types)
        depth = max(k, c.depth)
        if self.concurrent:
            lexical = _lexical_pool().submit(self.bm25.search_with_total, query, depth, mask)
            d_ids, d_sims = self.dense.search(query, depth, types)
            lex_ids, lex_scores, _ = lexical.result()
        else:
            lex_ids, lex_scores, _ = self.bm25.search_with_total(query, depth, mask)
            d_ids, d_sims = self.dense.search(query, depth, types)
        keep = lex_scores > 0
        lex_ids, lex_scores = lex_ids[keep], lex_scores[keep]
        if c.fusion == "rrf":
            ids, scores = rrf([lex_ids, d_ids], k, c.rrf_k)
        else:
            ids, scores = weighted((lex_ids, lex_scores), (d_ids, d_sims), k, c.weight)
        total = len(np.union1d(lex_ids, d_ids))
        return ids, scores, total

    def score_neighbors(self, query: str, ids: np.ndarray) -> tuple[np.ndarray, int | None]:
        """Scores of the nodes ``ids`` for neighbor ranking, and (BM25 only) how many match a term."""
        c = self.config
        lex = self.bm25.score(query, ids) if c.neighbor_rank != "dense" else None
        if c.neighbor_rank == "bm25":
            return lex, None
        sims = self.dense.score(query, ids)
        if c.neighbor_rank == "dense":
            return sims, None
        return rrf_scores(lex, sims, c.rrf_k), None   # hybrid: RRF of the two rankings of this neighbor set


@dataclass
class SearchSetup:
    """What a ``conf/search/*.yaml`` option builds: the `SearchConfig`, the encoder (None for lexical)
    and how to index the node embeddings. `build` turns it into a `GlobalSearch` over one graph."""

    config: SearchConfig
    encoder: object | None = None  # ark.search.embeddings.LocalEncoder / OpenAIEncoder
    index_kind: str = "flat"  # flat (exact) | hnsw | ivf (ark.search.vectors)
    build_embeddings: bool = True  # False: a missing embedding cache is an error naming the command
    # hnsw: at MAG scale (1.9M MiniLM-like vectors) M 32 / efConstruction 100 / efSearch 256 reach recall@10
    # 0.955 against exact search, with a hybrid search's p99 at 7.8 ms (efSearch 192: 0.948); results/dense/,
    # scripts/bench_dense.py
    hnsw_m: int = 32  # hnsw: links per node
    ef_construction: int = 100  # hnsw: candidate list while building
    ef_search: int = 256  # hnsw: candidate list while searching (at least k)
    nprobe: int = 16  # ivf: inverted lists searched per query

    def __post_init__(self) -> None:
        from ark.search.vectors import KINDS

        if self.index_kind not in KINDS:
            raise ValueError(f"unknown vector index kind {self.index_kind!r}; valid: {', '.join(KINDS)}")
        if self.config.needs_dense and self.encoder is None:
            raise ValueError(f"search mode={self.config.mode!r} / neighbor_rank={self.config.neighbor_rank!r} "
                             "needs an encoder (conf/encoder/: minilm, openai-3-small, ada-002)")

    def problems(self) -> list[str]:
        """What would stop the search before its first query (e.g. an API key), each with its fix."""
        check = getattr(self.encoder, "problems", None) if self.config.needs_dense else None
        return list(check()) if check else []

    def dense(self, graph, cache_dir) -> DenseSearch:
        """The encoder and a vector index over the graph's node embeddings (built once, cached)."""
        from ark.search.embeddings import node_embeddings
        from ark.search.vectors import VectorIndex

        emb = node_embeddings(graph, self.encoder, cache_dir, build=self.build_embeddings)
        index = VectorIndex(emb.vectors, np.asarray(graph.node_types), self.index_kind, cache_dir=emb.path,
                            hnsw_m=self.hnsw_m, ef_construction=self.ef_construction, ef_search=self.ef_search,
                            nprobe=self.nprobe)
        return DenseSearch(self.encoder, index)

    def build(self, graph, bm25, cache_dir) -> GlobalSearch:
        dense = self.dense(graph, cache_dir) if self.config.needs_dense else None
        names = graph.names() if self.config.name_first != "none" else None
        return GlobalSearch(bm25, dense, self.config, names)
