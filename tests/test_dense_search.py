"""Dense and hybrid search on the toy graph, with OpenAI-style embeddings served by the scripted server.

The server's embedder maps words to concept axes (``CONCEPTS``), so a query can mean the same as a
document without sharing a word with it ("passing out" vs "fainting"): the vocabulary mismatch dense
search is for. Runs in the fast tier (no sentence-transformers or faiss needed: the flat index is
numpy); the local MiniLM encoder and HNSW are tested in tests/dense/ (``-m dense``).
"""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest

from ark.baselines import BM25Retriever, DenseRetriever, HybridRetriever
from ark.search.embeddings import EmbeddingCacheError, OpenAIEncoder, node_embeddings
from ark.llm.client import BackboneConfig, EmbeddingClient, LLMTransportError, MissingCredentialsError
from ark.search.modes import DenseSearch, GlobalSearch, SearchConfig, SearchSetup
from ark.search.rank_fusion import rrf, rrf_scores, weighted
from ark.search.bm25 import BM25Index
from ark.tools import NEIGHBORS, SEARCH, ToolConfig, ToolSet
from ark.search.vectors import VectorIndex
from tests.helpers.scripted_server import ScriptedServer, rate_limited, server_error
from tests.helpers.toy_graph import toy_graph

# word -> concept axis of the scripted embedder (8 axes)
CONCEPTS = {"fainting": 0, "syncope": 0, "consciousness": 0, "passing": 0, "out": 0,
            "heart": 1, "cardiac": 1, "cardiovascular": 1, "aortic": 1, "aorta": 1,
            "collagen": 2, "skin": 2, "stretchy": 2,
            "joints": 3, "hypermobility": 3, "loose": 3,
            "drug": 4, "blocker": 4, "receptor": 4,
            "gene": 5, "protein": 5, "channel": 5,
            "tall": 6, "fingers": 6, "stature": 6}


def concept_embedding(text: str) -> list[float]:
    v = [0.0] * 8
    for w in re.findall(r"[a-z]+", text.lower()):
        if w in CONCEPTS:
            v[CONCEPTS[w]] += 1.0
    v[7] = 0.05  # every text gets a little of a common axis, so none is the zero vector
    n = math.sqrt(sum(x * x for x in v))
    return [x / n for x in v]


@pytest.fixture(scope="module")
def server():
    with ScriptedServer(embedder=concept_embedding) as s:
        yield s


@pytest.fixture(scope="module")
def graph():
    return toy_graph()


@pytest.fixture(scope="module")
def bm25(graph):
    return BM25Index.build(graph.texts())


def encoder(server, **kw) -> OpenAIEncoder:
    kw.setdefault("max_retries", 2)
    kw.setdefault("backoff_base_s", 0.01)
    kw.setdefault("dimensions", 8)
    return OpenAIEncoder("text-embedding-3-small", provider="vllm", base_url=server.base_url, **kw)


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("emb")


@pytest.fixture(scope="module")
def dense(server, graph, cache_dir):
    enc = encoder(server)
    emb = node_embeddings(graph, enc, cache_dir, progress=False)
    return DenseSearch(enc, VectorIndex(emb.vectors, np.asarray(graph.node_types)))


# ---------------------------------------------------------------------------------- the client
def test_embedding_client_batches_caches_and_retries(tmp_path, server):
    cfg = BackboneConfig(name="e", model="text-embedding-3-small", provider="vllm", base_url=server.base_url,
                         max_retries=2, backoff_base_s=0.01)
    client = EmbeddingClient(cfg, cache=tmp_path / "emb.sqlite")
    import asyncio

    before = len(server.embedding_requests)
    server.push_embedding_errors(rate_limited(retry_after=0.01), server_error(502))
    v = asyncio.run(client.embed(["syncope", "heart", "syncope"], dimensions=8))
    assert v.shape == (3, 8) and np.allclose(v[0], concept_embedding("syncope"), atol=1e-6)
    assert client.stats.retries == 2 and len(server.embedding_requests) == before + 3
    assert server.embedding_requests[-1]["encoding_format"] == "base64"
    assert server.embedding_requests[-1]["dimensions"] == 8
    again = asyncio.run(client.embed(["heart", "syncope"], dimensions=8))  # both cached: no request
    assert len(server.embedding_requests) == before + 3 and np.array_equal(again, v[[1, 0]])
    server.push_embedding_errors(*[server_error(500)] * 3)
    with pytest.raises(LLMTransportError, match="gave up after 3 attempts"):
        asyncio.run(client.embed(["tall"], dimensions=8))
    asyncio.run(client.aclose())


def test_openai_encoder_needs_its_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    enc = OpenAIEncoder("text-embedding-ada-002")
    assert enc.dim == 1536
    assert "export OPENAI_API_KEY" in enc.problems()[0]
    with pytest.raises(MissingCredentialsError, match="OPENAI_API_KEY"):
        enc.encode(["x"])


def test_unknown_names_are_explained():
    with pytest.raises(ValueError, match="unknown OpenAI embedding model 'text-embedding-4'; valid: text-embedding-3-small"):
        OpenAIEncoder("text-embedding-4")
    from ark.search.embeddings import LocalEncoder, make_encoder

    with pytest.raises(ValueError, match="unknown local encoder model 'MiniLM'; valid: all-MiniLM-L6-v2"):
        LocalEncoder("MiniLM")
    with pytest.raises(ValueError, match="unknown encoder 'bert'; valid: local all-MiniLM-L6-v2; OpenAI"):
        make_encoder("bert")
    with pytest.raises(ValueError, match="unknown search mode 'semantic'; valid: lexical, dense, hybrid"):
        SearchConfig(mode="semantic")
    with pytest.raises(ValueError, match="unknown search fusion 'max'; valid: rrf, weighted"):
        SearchConfig(mode="hybrid", fusion="max")
    with pytest.raises(ValueError, match="unknown vector index kind 'pq'; valid: flat, hnsw, ivf"):
        VectorIndex(np.zeros((2, 4), np.float32), kind="pq")


# ---------------------------------------------------------------------------------- the cache
def test_node_embeddings_are_cached_with_a_manifest_and_rebuilt_when_the_graph_changes(server, graph, tmp_path):
    enc = encoder(server)
    n0 = len(server.embedding_requests)
    emb = node_embeddings(graph, enc, tmp_path, progress=False)
    assert isinstance(emb.vectors, np.memmap) and emb.vectors.shape == (12, 8)
    assert np.allclose(emb.vectors[10], concept_embedding(graph.node_text(10)), atol=1e-6)
    m = json.loads((tmp_path / "embeddings" / enc.name / "manifest.json").read_text())
    assert (m["encoder"], m["dim"], m["graph"], m["fingerprint"], m["text_version"]) == \
        ("text-embedding-3-small-d8", 8, "toy", graph.fingerprint, "node_text-v1")
    n1 = len(server.embedding_requests)
    assert n1 > n0
    again = node_embeddings(graph, enc, tmp_path, build=False)  # read, not encoded again
    assert len(server.embedding_requests) == n1 and np.array_equal(again.vectors, emb.vectors)

    changed = toy_graph()
    changed.meta["fingerprint"] = "another-graph"
    with pytest.raises(EmbeddingCacheError, match=r"was made for fingerprint=.*build it with: python -m "
                                                  r"experiments.embed graph=toy encoder="):
        node_embeddings(changed, enc, tmp_path, build=False)
    rebuilt = node_embeddings(changed, enc, tmp_path, progress=False)
    assert rebuilt.manifest["fingerprint"] == "another-graph" and len(server.embedding_requests) > n1
    assert sorted(p.name for p in (tmp_path / "embeddings").iterdir()) == [enc.name]  # swapped in whole

    with pytest.raises(EmbeddingCacheError, match="is missing; build it with"):
        node_embeddings(graph, encoder(server, dimensions=None), tmp_path / "none", build=False)
    assert not (tmp_path / "none").exists()


def test_dimension_mismatch_between_encoder_and_cache_names_the_fix(server, dense):
    other = OpenAIEncoder("text-embedding-3-small", provider="vllm", base_url=server.base_url)  # 1536 dims
    with pytest.raises(ValueError, match="produces 1536-dimensional vectors but the node embeddings have 8: "
                                         "rebuild them with this encoder"):
        DenseSearch(other, dense.index)


# ---------------------------------------------------------------------------------- index and fusion
def test_flat_index_type_filter_returns_exactly_the_top_k_of_allowed_types():
    vecs = np.eye(4, dtype=np.float32)[[0, 0, 1, 1, 2, 3]] * 0.9 + 0.1
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    types = np.array([0, 1, 1, 1, 0, 1])
    index = VectorIndex(vecs.astype(np.float32), types)
    q = np.array([1, 0, 0, 0], np.float32)
    ids, sims = index.search(q, 3)
    assert ids.tolist() == [0, 1, 2] and sims[0] == sims[1] > sims[2]   # ties by lower id
    ids, _ = index.search(q, 3, types=[0])
    assert ids.tolist() == [0, 4]                        # all nodes of type 0, not fewer
    ids, _ = index.search(q, 3, types=[1])
    assert len(ids) == 3 and set(types[ids]) == {1} and ids[0] == 1
    assert index.score(q, np.array([5, 0])).tolist() == pytest.approx([vecs[5] @ q, vecs[0] @ q])


def test_rrf_and_weighted_fusion():
    ids, scores = rrf([np.array([1, 2, 3]), np.array([3, 1])], 3, c=60)
    assert ids.tolist() == [1, 3, 2]
    assert scores.tolist() == pytest.approx([1 / 61 + 1 / 62, 1 / 63 + 1 / 61, 1 / 62])
    ids, scores = weighted((np.array([1, 2]), np.array([4.0, 2.0])), (np.array([2, 3]), np.array([0.9, 0.5])), 3, 0.6)
    # min-max per list: lexical 1 -> 1, 2 -> 0; dense 2 -> 1, 3 -> 0
    assert ids.tolist() == [2, 1, 3] and scores.tolist() == pytest.approx([0.6, 0.4, 0.0])


def test_rrf_scores_of_a_neighbor_set():
    # lexical ranks: node 1 first, node 2 second, node 0 (BM25 score 0) nowhere; dense ranks: 0, 1, 2
    scores = rrf_scores(np.array([0.0, 2.0, 1.0]), np.array([0.9, 0.5, 0.1]), c=60)
    assert scores.tolist() == pytest.approx([1 / 61, 1 / 61 + 1 / 62, 1 / 62 + 1 / 63])
    tied = rrf_scores(np.array([1.0, 1.0]), np.array([0.3, 0.3]), c=60)   # ties rank by position
    assert tied.tolist() == pytest.approx([2 / 61, 2 / 62])


# ---------------------------------------------------------------------------------- search_graph
def test_dense_search_finds_what_bm25_misses(graph, bm25, dense):
    lexical = ToolSet(graph, bm25)
    assert lexical.call(SEARCH, {"query": "passing out"}).node_ids == []
    tools = ToolSet(graph, bm25, search=GlobalSearch(bm25, dense, SearchConfig(mode="dense")))
    r = tools.call(SEARCH, {"query": "passing out"})
    assert r.error is None and r.node_ids[:2] == [10, 2]      # Syncope, Long QT syndrome (fainting)
    assert "mode=dense" in r.observation.splitlines()[0] and "showing 5 of 12 nodes" in r.observation
    r = tools.call(SEARCH, {"query": "passing out", "node_types": ["disease"], "k": 3})
    assert len(r.node_ids) == 3 and {graph.node_type_name(i) for i in r.node_ids} == {"disease"}
    assert r.node_ids[0] == 2
    spec = {t["function"]["name"]: t["function"] for t in tools.openai_tools()}[SEARCH]
    assert "closest in meaning" in spec["description"]


def test_hybrid_search_fuses_both_rankings(graph, bm25, dense):
    g = GlobalSearch(bm25, dense, SearchConfig(mode="hybrid", depth=12))
    ids, scores, total = g.search("fainting heart", 4)
    lex, _ = bm25.search("fainting heart", 12)
    den, _ = dense.search("fainting heart", 12)
    want, _ = rrf([lex, den], 4)
    assert ids.tolist() == want.tolist() and total == len(np.union1d(lex, den))
    tools = ToolSet(graph, bm25, search=g)
    assert tools.call(SEARCH, {"query": "fainting heart", "k": 4}).node_ids == want.tolist()


class _ThreadNoting:
    """The real BM25 index, noting which thread ran each of its searches."""

    def __init__(self, bm25):
        self.bm25, self.threads = bm25, set()

    def __getattr__(self, name):
        return getattr(self.bm25, name)

    def search_with_total(self, *args):
        import threading

        self.threads.add(threading.current_thread().name)
        return self.bm25.search_with_total(*args)


@pytest.mark.parametrize("fusion", ["rrf", "weighted"])
def test_hybrid_search_runs_its_two_sides_concurrently_with_the_sequential_result(graph, bm25, dense, fusion):
    """Hybrid search runs BM25 on the shared worker pool while the caller searches the vectors; from 8
    threads at once it gives, for every query, type filter and k, exactly what the two sides one after
    the other give (ids, scores, total)."""
    from concurrent.futures import ThreadPoolExecutor

    config = SearchConfig(mode="hybrid", depth=12, fusion=fusion)
    spy = _ThreadNoting(bm25)
    concurrent = GlobalSearch(spy, dense, config)
    sequential = GlobalSearch(bm25, dense, config, concurrent=False)
    calls = [(q, k, types) for q in ("fainting heart", "loose joints collagen", "passing out", "tall fingers drug")
             for k in (1, 3, 8) for types in (None, [graph.node_type_id("disease")])]
    mask = np.asarray(graph.node_types) == graph.node_type_id("disease")

    def run(call):
        q, k, types = call
        return concurrent.search(q, k, types, None if types is None else mask)

    want = [sequential.search(q, k, types, None if types is None else mask) for q, k, types in calls]
    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(run, calls * 8))
    for (ids, scores, total), (w_ids, w_scores, w_total) in zip(got, want * 8):
        assert ids.tolist() == w_ids.tolist() and scores.tolist() == w_scores.tolist() and total == w_total
    assert spy.threads and all(t.startswith("ark-bm25") for t in spy.threads)   # BM25 ran on the pool


def test_dense_mode_without_embeddings_is_an_error_naming_the_fix(bm25):
    with pytest.raises(ValueError, match="needs node embeddings and an encoder: choose search=dense or search=hybrid"):
        GlobalSearch(bm25, None, SearchConfig(mode="dense"))
    with pytest.raises(ValueError, match="needs an encoder"):
        SearchSetup(SearchConfig(mode="hybrid"))


def test_dense_neighbor_ranking(graph, bm25, dense):
    tools = ToolSet(graph, bm25, search=GlobalSearch(bm25, dense, SearchConfig(neighbor_rank="dense")))
    r = tools.call(NEIGHBORS, {"node_id": 0, "query": "passing out"})
    # neighbors of Marfan syndrome: 3 FBN1, 6 Losartan, 7 Propranolol, 8 Aortic root aneurysm, 9 Joint hypermobility
    sims = dense.score("passing out", np.array([3, 6, 7, 8, 9]))
    assert r.node_ids == np.array([3, 6, 7, 8, 9])[np.lexsort((np.arange(5), -sims))].tolist()
    assert "ranked by dense similarity to the query." in r.observation
    assert tools.call(SEARCH, {"query": "fainting"}).node_ids == ToolSet(graph, bm25).call(SEARCH, {"query": "fainting"}).node_ids


# ---------------------------------------------------------------------------------- baselines
def test_dense_and_hybrid_baselines_rank_candidates(graph, bm25, dense):
    d = DenseRetriever(graph, dense, top=3)
    assert d.retrieve("passing out")[:2] == [10, 2]
    b = BM25Retriever(graph, top=100)
    h = HybridRetriever(b, DenseRetriever(graph, dense, top=100), top=5)
    want, _ = rrf([np.asarray(b.retrieve("loose joints collagen")), np.asarray(d.dense.search("loose joints collagen", 100)[0])], 5)
    assert h.retrieve("loose joints collagen") == want.tolist()


def test_baseline_retrievals_carry_their_own_scores(graph, dense):
    import asyncio

    d = DenseRetriever(graph, dense, top=4)
    got = asyncio.run(d.aretrieve("passing out"))
    ids, sims = dense.search("passing out", 4)
    assert got.ranking == ids.tolist() and got.scores == pytest.approx(sims.tolist())
    h = HybridRetriever(BM25Retriever(graph), DenseRetriever(graph, dense), top=5)
    fused = asyncio.run(h.aretrieve("loose joints collagen"))
    assert fused.scores == pytest.approx(rrf([np.asarray(h.bm25.retrieve("loose joints collagen")),
                                              np.asarray(h.dense.retrieve("loose joints collagen"))], 5)[1].tolist())
    assert fused.scores == sorted(fused.scores, reverse=True)
    with pytest.raises(ValueError, match="ranking='paper'"):
        HybridRetriever(BM25Retriever(graph, ranking="stark_qa"), DenseRetriever(graph, dense))


def test_dense_stark_qa_ranking_scores_every_candidate_like_vss(graph, dense):
    """stark-qa's VSS scores every candidate; the stark_qa ranking does too, so nothing is left to the
    bottom tie and a gold ranked below ``top`` keeps its true rank."""
    d = DenseRetriever(graph, dense, top=2, ranking="stark_qa")
    ids, sims = d.retrieve_scored("passing out")
    assert sorted(ids) == graph.candidate_ids.tolist() and len(ids) == graph.num_nodes
    assert sims == pytest.approx(dense.score("passing out", np.asarray(ids)).tolist())
    assert ids[:2] == DenseRetriever(graph, dense, top=2).retrieve("passing out")
    with pytest.raises(ValueError, match="valid: paper, stark_qa"):
        DenseRetriever(graph, dense, ranking="all")


def test_the_onnx_backend_names_its_packages_when_they_are_missing(monkeypatch):
    import importlib.util

    from ark.search.embeddings import LocalEncoder

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda m, *a: None if m in ("onnxruntime", "optimum") else real(m, *a))
    problems = LocalEncoder("all-MiniLM-L6-v2", backend="onnx").problems()
    assert problems[-1] == ("encoder backend 'onnx' needs onnxruntime, optimum-onnx: pip install onnxruntime "
                            "optimum-onnx (or backend=torch, the default)")
    assert not any("onnx" in p for p in LocalEncoder("all-MiniLM-L6-v2").problems())
