"""Tests of ark.baselines.BM25Retriever: candidates only, statistics over candidates, interface, cache."""

from __future__ import annotations

import asyncio

import bm25s
import numpy as np
import pytest

from ark.baselines import BM25Retriever
from ark.data.graph import KnowledgeGraph
from ark.retriever import Retrieval
from ark.search.bm25 import BM25Index, Tokenizer
from tests.helpers.toy_graph import toy_graph


def _with_candidates(ids):
    g = toy_graph()
    return KnowledgeGraph.from_edges("toy-cand", g.node_type_names, g.node_types, g.names(), list(g.texts()),
                                     g.relation_names, [0], [3], [0], candidate_ids=ids)


def test_ranks_only_candidates_by_full_query():
    g = _with_candidates([0, 1, 2])  # the three diseases
    r = BM25Retriever(g)
    ranking = r.retrieve("heart rhythm disorder")
    # STaRK's tokens are not stemmed: Ehlers-Danlos' "disorders" does not match "disorder"
    assert ranking[0] == 2 and set(ranking) == {0, 2}
    assert set(BM25Retriever(g, stem=True).retrieve("heart rhythm disorder")) == {0, 1, 2}
    # "fainting" is in Long QT (2) and Syncope (10); Syncope is not a candidate
    assert r.retrieve("fainting") == [2]
    assert r.retrieve("the of") == []


def test_scores_use_statistics_over_candidates_like_stark():
    cands = np.array([1, 4, 5, 9, 10, 11])
    g = _with_candidates(cands)
    texts = [g.node_text(int(i)) for i in cands]
    # exactly stark_qa.models.BM25: bm25s.tokenize with its defaults, bm25s.BM25 with its defaults
    ref = bm25s.BM25()
    ref.index(bm25s.tokenize(texts, show_progress=False), show_progress=False)
    ours = BM25Retriever(g, top=100)
    for query in ["loose joints collagen", "heart", "blood flow to the brain"]:
        docs, scores = ref.retrieve(bm25s.tokenize(query, show_progress=False), k=len(cands), show_progress=False)
        expected = [int(cands[d]) for d, s in zip(docs[0], scores[0]) if s > 0]
        got = ours.retrieve(query)
        assert sorted(got) == sorted(expected)
        # same scores in the same order (ties may be ordered differently by bm25s)
        exp_scores = dict(zip((int(cands[d]) for d in docs[0]), scores[0]))
        np.testing.assert_allclose([exp_scores[i] for i in got], sorted(exp_scores[i] for i in got)[::-1], atol=1e-6)
        _, our_scores = ours.index.search(query, 100)
        np.testing.assert_allclose(our_scores, [exp_scores[i] for i in got], atol=1e-6)


def test_top_limits_ranking_length():
    g = toy_graph()
    assert len(BM25Retriever(g, top=2).retrieve("heart")) == 2
    assert len(BM25Retriever(g).retrieve("heart")) == 6
    with pytest.raises(ValueError, match="top must be >= 1"):
        BM25Retriever(g, top=0)


def test_aretrieve_returns_retrieval():
    g = toy_graph()
    r = BM25Retriever(g)
    out = asyncio.run(r.aretrieve("collagen", 7))
    assert isinstance(out, Retrieval)
    assert out.ranking == r.retrieve("collagen") == [4, 1]
    assert out.trajectories == [] and out.error is None and out.cost_usd == 0.0 and out.latency_s >= 0


def test_candidate_index_is_cached(tmp_path, monkeypatch):
    g = _with_candidates([0, 1, 2])
    first = BM25Retriever(g, tmp_path).retrieve("heart")
    assert (tmp_path / "bm25_candidates_unstemmed" / "ark_index.json").exists()
    monkeypatch.setattr(BM25Index, "build", lambda *a, **k: (_ for _ in ()).throw(AssertionError("rebuilt")))
    assert BM25Retriever(g, tmp_path).retrieve("heart") == first
    # all nodes are candidates: STaRK's unstemmed index has its own folder; a stemmed one is the tools' index
    monkeypatch.undo()
    full = toy_graph()
    BM25Retriever(full, tmp_path)
    assert (tmp_path / "bm25_unstemmed" / "ark_index.json").exists()
    BM25Retriever(full, tmp_path, stem=True)
    assert (tmp_path / "bm25" / "ark_index.json").exists()


def test_index_must_match_candidates():
    g = _with_candidates([0, 1])
    with pytest.raises(ValueError, match="2 candidates"):
        BM25Retriever(g, index=BM25Index.build(g.texts()))


def test_retrieval_carries_the_bm25_scores():
    g = toy_graph()
    r = BM25Retriever(g)
    out = asyncio.run(r.aretrieve("heart"))
    _, scores = r.index.search("heart", 100)
    assert out.ranking == r.retrieve("heart") and out.scores == scores.tolist()


def test_dense_scores_equal_bm25s_own_full_scores():
    r = BM25Retriever(toy_graph())
    for query in ("heart rhythm", "collagen collagen skin", "the of", "zzz"):
        assert r.index.dense_scores(query).tobytes() == np.asarray(r.index.full_scores(query), np.float32).tobytes()


def test_stark_qa_ranking_keeps_zero_scores_and_fills_k():
    """stark-qa's BM25.forward(query, k) returns k candidates whatever their scores: those matching the
    query, then k - matches with score 0 (the paper ranking drops them, and stops at the matches)."""
    g = toy_graph()
    paper = BM25Retriever(g)
    sq = BM25Retriever(g, top=8, ranking="stark_qa")
    ids, scores = sq.retrieve_scored("fainting")
    matched = paper.retrieve("fainting")
    assert len(ids) == 8 and ids[:len(matched)] == matched and len(set(ids)) == 8
    assert all(s > 0 for s in scores[:len(matched)]) and scores[len(matched):] == [0.0] * (8 - len(matched))
    assert asyncio.run(sq.aretrieve("fainting")).scores == scores
    # a query with no known word: k zero-scored candidates, as bm25s' top-k of all zeros
    ids, scores = sq.stark_qa_forward("zzz", 3)
    assert len(ids) == 3 and scores == [0.0, 0.0, 0.0]
    with pytest.raises(ValueError, match="between 1 and the number of candidates, 12"):
        sq.stark_qa_forward("heart", 13)
    with pytest.raises(ValueError, match="valid: paper, stark_qa"):
        BM25Retriever(g, ranking="stark")
