"""Tests of ark.search.bm25: tokenizer, global search, subset scoring, persistence and cache reuse."""

from __future__ import annotations

import bm25s
import numpy as np
import pytest

from ark.data.graph import KnowledgeGraph
from ark.search.bm25 import BM25Index, Tokenizer, load_index
from tests.helpers.toy_graph import toy_graph


@pytest.fixture(scope="module")
def toy():
    g = toy_graph()
    return g, BM25Index.build(g.texts())


@pytest.fixture(scope="module")
def random_corpus():
    rng = np.random.default_rng(7)
    vocab = [f"term{i}" for i in range(400)]
    # Zipf-like word frequencies so some tokens are in most documents and some in very few
    p = 1.0 / np.arange(1, len(vocab) + 1)
    p /= p.sum()
    texts = [" ".join(rng.choice(vocab, size=int(rng.integers(3, 60)), p=p)) for _ in range(3000)]
    return texts, BM25Index.build(texts)


def _reference_top(full: np.ndarray, k: int, mask=None) -> tuple[np.ndarray, np.ndarray]:
    ok = full > 0 if mask is None else (full > 0) & mask
    ids = np.flatnonzero(ok)
    order = np.lexsort((ids, -full[ids]))[:k]
    return ids[order], full[ids[order]]


def test_tokenizer_lowercases_drops_stopwords_and_stems():
    assert Tokenizer()("The Running dogs are in THE garden") == ["run", "dog", "garden"]
    assert Tokenizer(stem=False)("The Running dogs") == ["running", "dogs"]
    assert Tokenizer()("the of and a") == []
    assert Tokenizer()("") == []


def test_corpus_tokenization_equals_query_tokenization(toy):
    g, _ = toy
    texts = list(g.texts())
    tok = Tokenizer()
    ids, vocab = tok.corpus(texts)
    inv = {i: t for t, i in vocab.items()}
    for text, doc in zip(texts, ids):
        assert [inv[i] for i in doc] == tok(text)


def test_toy_search_known_rankings(toy):
    g, idx = toy
    # "collagen": COL5A1 (4) has it twice, Ehlers-Danlos (1) once
    assert idx.search("collagen", 5)[0].tolist() == [4, 1]
    # "fainting": once in Syncope (10) and in Long QT (2); Syncope's text is shorter
    assert idx.search("fainting", 5)[0].tolist() == [10, 2]
    # only "rhythm" + "heart" for Long QT; the rest only "heart"
    ids, scores = idx.search("heart rhythm", 12)
    assert ids[0] == 2 and set(ids.tolist()) == {0, 2, 5, 7, 8, 11}
    assert (np.diff(scores) <= 0).all() and (scores > 0).all()


def test_search_excludes_zero_scores_and_words_not_in_corpus(toy):
    _, idx = toy
    ids, scores = idx.search("collagen", 12)
    assert len(ids) == 2
    assert len(idx.search("zzzunseen", 5)[0]) == 0
    assert len(idx.search("the of and", 5)[0]) == 0
    assert len(idx.search("", 5)[0]) == 0


def test_search_type_mask(toy):
    g, idx = toy
    mask = np.asarray(g.node_types) == g.node_type_id("disease")
    assert idx.search("fainting", 5, mask)[0].tolist() == [2]
    with pytest.raises(ValueError, match="mask has shape"):
        idx.search("fainting", 5, np.ones(3, dtype=bool))


@pytest.mark.parametrize("k", [1, 5, 50, 3000])
def test_search_equals_dense_scores_ranking(random_corpus, k):
    _, idx = random_corpus
    rng = np.random.default_rng(k)
    mask = rng.random(idx.num_docs) < 0.3
    for qi in range(30):
        # rare terms (sparse path) and frequent terms (dense path)
        words = rng.choice(400, size=int(rng.integers(1, 5)), replace=True)
        if qi % 2:
            words = words // 40
        query = " ".join(f"term{w}" for w in words)
        full = idx.full_scores(query)
        for m in (None, mask):
            ids, scores, total = idx.search_with_total(query, k, m)
            ref_ids, ref_scores = _reference_top(full, k, m)
            np.testing.assert_array_equal(ids, ref_ids)
            np.testing.assert_allclose(scores, ref_scores, rtol=0, atol=1e-6)
            assert total == int(((full > 0) if m is None else (full > 0) & m).sum())


def test_search_matches_bm25s_retrieve(random_corpus):
    texts, idx = random_corpus
    ref = bm25s.BM25(backend="numpy")  # reference path (no numba compile in tests)
    ref.index(bm25s.tokenize(texts, stopwords="en", stemmer=idx.tokenizer._stemmer(), show_progress=False),
              show_progress=False)
    for query in ["term3 term17", "term250", "term0 term1 term2 term399"]:
        q = bm25s.tokenize([query], stopwords="en", stemmer=idx.tokenizer._stemmer(), show_progress=False,
                           return_ids=False)
        docs, scores = ref.retrieve(q, k=20, show_progress=False)
        ids, ours = idx.search(query, 20)
        n = len(ids)
        np.testing.assert_allclose(ours, scores[0][:n], atol=1e-5)
        assert set(ids.tolist()) <= set(np.flatnonzero(idx.full_scores(query) >= scores[0][n - 1] - 1e-6))


@pytest.mark.parametrize("size", [0, 1, 7, 200, 2999, 3000])
def test_subset_scores_equal_full_scores(random_corpus, size):
    _, idx = random_corpus
    rng = np.random.default_rng(size)
    for query in ["term1 term2", "term300 term301 term5", "term0 term0", "term7"]:
        full = idx.full_scores(query)
        ids = rng.choice(idx.num_docs, size=size, replace=False)
        np.testing.assert_allclose(idx.score(query, ids), full[ids], rtol=0, atol=1e-6)
    # duplicated and unsorted ids keep their order
    ids = np.array([5, 3, 5, 2999, 0, 3])
    np.testing.assert_allclose(idx.score("term1 term40", ids), idx.full_scores("term1 term40")[ids], atol=1e-6)


@pytest.mark.parametrize("size", [1, 30, 400, 3000])
def test_subset_scan_and_gallop_paths_agree(random_corpus, size, monkeypatch):
    """Scanning posting lists (through the scratch positions) and galloping in them give the same float32
    scores, with sorted, unsorted and duplicated ids; the scratch is clean after every call."""
    import ark.search.bm25 as ti

    _, idx = random_corpus
    rng = np.random.default_rng(size + 1)
    base = np.sort(rng.choice(idx.num_docs, size=size, replace=False))
    cases = [base, rng.permutation(base), np.sort(np.r_[base, base[: size // 3]])]
    default = ti.SCAN_RATIO
    for query in ["term0 term1", "term2 term399 term2", "term150"]:
        full = idx.full_scores(query)
        for ids in cases:
            got = {}
            for ratio in (0, 10**9, default):  # always gallop, always scan, the default mix
                monkeypatch.setattr(ti, "SCAN_RATIO", ratio)
                got[ratio] = idx.score(query, ids)
            assert np.array_equal(got[0], got[10**9]) and np.array_equal(got[0], got[default])
            np.testing.assert_allclose(got[0], full[ids], rtol=0, atol=1e-6)
    assert idx._scratch and not any(pos.any() for pos in idx._scratch)


def test_subset_score_rejects_bad_ids(random_corpus):
    _, idx = random_corpus
    with pytest.raises(IndexError):
        idx.score("term1", [idx.num_docs])
    with pytest.raises(IndexError):
        idx.score("term1", [-1])
    assert idx.score("the", [1, 2]).tolist() == [0.0, 0.0]


def test_bm25_parameters_change_scores(toy):
    g, idx = toy
    other = BM25Index.build(g.texts(), k1=0.9, b=0.4, method="robertson")
    assert not np.allclose(other.full_scores("heart"), idx.full_scores("heart"))
    with pytest.raises(ValueError, match="valid methods: lucene, robertson, atire"):
        BM25Index.build(g.texts(), method="bm26")


def test_save_load_roundtrip(toy, tmp_path):
    g, idx = toy
    idx.save(tmp_path / "ix")
    loaded = BM25Index.load(tmp_path / "ix")
    assert loaded.params == idx.params
    for q in ["heart rhythm", "collagen joints"]:
        np.testing.assert_array_equal(loaded.search(q, 5)[0], idx.search(q, 5)[0])
        np.testing.assert_allclose(loaded.score(q, [0, 4, 9]), idx.score(q, [0, 4, 9]))


def test_load_index_reuses_then_rebuilds_on_change(tmp_path, monkeypatch):
    g = toy_graph()
    first = load_index(g, tmp_path)
    assert (tmp_path / "bm25" / "ark_index.json").exists()

    def no_build(*a, **k):
        raise AssertionError("index was rebuilt although the graph did not change")

    monkeypatch.setattr(BM25Index, "build", no_build)
    again = load_index(toy_graph(), tmp_path)
    np.testing.assert_array_equal(again.search("heart", 12)[0], first.search("heart", 12)[0])
    monkeypatch.undo()

    # a graph with other texts has another fingerprint: rebuilt
    texts = list(g.texts())
    texts[0] = texts[0] + " aardvark"
    changed = KnowledgeGraph.from_edges("toy", g.node_type_names, g.node_types, g.names(), texts,
                                        g.relation_names, [0], [1], [0], source_fingerprint="toy-v2")
    assert changed.fingerprint != g.fingerprint
    rebuilt = load_index(changed, tmp_path)
    assert rebuilt.search("aardvark", 3)[0].tolist() == [0]
    # other BM25 parameters: rebuilt too
    assert load_index(changed, tmp_path, k1=0.9).params.k1 == 0.9


def test_saved_vocabulary_is_memory_mapped_and_looks_up_like_the_dict(random_corpus, tmp_path):
    """A loaded index reads its vocabulary from hash arrays, not bm25s' JSON: same ids for every
    token, misses for tokens outside it, same searches."""
    from ark.search.bm25 import HashedVocab

    texts = random_corpus if isinstance(random_corpus, list) else random_corpus[0]
    idx = BM25Index.build(texts)
    idx.save(tmp_path / "ix")
    assert (tmp_path / "ix" / "vocab.hash.npy").exists()
    loaded = BM25Index.load(tmp_path / "ix")
    vocab = loaded.retriever.vocab_dict
    assert isinstance(vocab, HashedVocab) and len(vocab) == len(idx._vocab)
    assert all(vocab[t] == i for t, i in idx._vocab.items())
    assert "zzzz-not-a-token" not in vocab
    with pytest.raises(KeyError):
        vocab["zzzz-not-a-token"]
    for q in texts[:20]:
        np.testing.assert_array_equal(loaded.token_ids(q), idx.token_ids(q))
        np.testing.assert_array_equal(loaded.search(q, 10)[0], idx.search(q, 10)[0])


def test_a_saved_index_searches_without_importing_bm25s(random_corpus, tmp_path):
    """A sweep job opens the saved arrays itself: neither bm25s nor scipy.sparse is imported to search
    (their import is a tenth of a second of every job's start), and the results are the built index's."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    texts = random_corpus if isinstance(random_corpus, list) else random_corpus[0]
    idx = BM25Index.build(texts)
    idx.save(tmp_path / "ix")
    code = ("import json, sys; from ark.search.bm25 import BM25Index; ix = BM25Index.load(sys.argv[1]); "
            "hits = [ix.search(q, 5)[0].tolist() for q in json.loads(sys.argv[2])]; "
            "print(json.dumps([hits, 'bm25s' in sys.modules, 'scipy.sparse' in sys.modules]))")
    queries = texts[:10]
    repo = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "ix"), json.dumps(queries)], capture_output=True,
                          text=True, cwd=repo, check=True)
    hits, bm25s_loaded, sparse_loaded = json.loads(done.stdout)
    assert hits == [idx.search(q, 5)[0].tolist() for q in queries]
    assert not bm25s_loaded and not sparse_loaded
    loaded = BM25Index.load(tmp_path / "ix")          # bm25s' own object, when asked for, is the same index
    np.testing.assert_array_equal(loaded.full_scores(queries[0]), idx.full_scores(queries[0]))
