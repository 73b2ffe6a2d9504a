"""The retriever factories that ``conf/retriever/*.yaml`` name with ``_target_``.

Each option file builds a partial of one of these (``_partial_: true``); the run calls it with the
loaded graph. They take plain objects (a graph, dataclass configs), so they work without Hydra too:

    from ark.config.retrievers import build_bm25
    retriever = build_bm25(graph)                       # STaRK's BM25 baseline, top 100

- `build_ark`: ARK (`ark.agent.ARKRetriever`) over the graph's BM25 index, the tool set and an LLM client;
- `build_bm25`, `build_dense`, `build_hybrid`: the baselines of `ark.baselines`.
"""

from __future__ import annotations

from pathlib import Path


def build_ark(graph, backbone, agent, tools, llm_cache: str | None = None, index_cache: str | None = None,
              search=None, budget=None, batch_dir: str | None = None):
    """ARKRetriever over ``graph``: BM25 index (cached under ``index_cache``, by default inside the graph's
    own cache folder; built in memory for a graph without one), tool set, LLM client (with response cache).
    ``search``: an `ark.search.modes.SearchSetup` (conf/search/); None is the paper's lexical search (node
    embeddings, for dense or hybrid, are cached beside the BM25 index). ``budget``: the
    `ark.cost.cap.Budget` the LLM client spends under (a paid run's cap and ledgers). ``batch_dir``: where a
    backbone in batch mode keeps the batch it waits for (`ark.llm.batch`; the run directory's ``batch/``)."""
    from ark.agent import ARKRetriever
    from ark.llm.client import LLMClient
    from ark.search.bm25 import load_index
    from ark.tools import ToolSet

    index_cache = index_cache or graph.directory
    index = load_index(graph, index_cache) if index_cache else None
    if index is None:
        from ark.search.bm25 import BM25Index

        index = BM25Index.build(graph.texts())
    if llm_cache:
        Path(llm_cache).parent.mkdir(parents=True, exist_ok=True)
    llm = LLMClient(backbone, cache=llm_cache, budget=budget, batch_dir=batch_dir)
    global_search = search.build(graph, index, index_cache) if search is not None else None
    toolset = ToolSet(graph, index, tools, search=global_search)
    toolset.warm_up()   # numba's first-call set-up, while the agents wait for their first LLM reply
    return ARKRetriever(llm, toolset, graph, agent)


def build_bm25(graph, index_cache: str | None = None, top: int = 100):
    """The BM25 baseline over the graph's candidates (index cached under ``index_cache``, by default
    inside the graph's own cache folder)."""
    from ark.baselines import BM25Retriever

    return BM25Retriever(graph, cache_dir=index_cache or graph.directory, top=top)


def build_dense(graph, encoder, index_cache: str | None = None, top: int = 100, index_kind: str = "flat",
                build_embeddings: bool = True):
    """The dense baseline: candidates ranked by embedding similarity (embeddings cached under ``index_cache``)."""
    from ark.baselines import DenseRetriever
    from ark.search.modes import SearchConfig, SearchSetup

    setup = SearchSetup(SearchConfig(mode="dense"), encoder, index_kind, build_embeddings)
    return DenseRetriever(graph, setup.dense(graph, index_cache or graph.directory), top=top)


def build_hybrid(graph, encoder, index_cache: str | None = None, top: int = 100, index_kind: str = "flat",
                 build_embeddings: bool = True, rrf_k: float = 60.0, depth: int = 100):
    """The hybrid baseline: RRF of the BM25 and dense baselines' top ``depth``."""
    from ark.baselines import HybridRetriever

    return HybridRetriever(build_bm25(graph, index_cache, top),
                           build_dense(graph, encoder, index_cache, top, index_kind, build_embeddings),
                           top=top, rrf_k=rrf_k, depth=depth)
