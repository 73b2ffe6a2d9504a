"""Fusion of rankings: one ranking of nodes from a lexical and a dense one (hybrid search).

Not to be confused with `ark.fusion`, which fuses the node lists of ARK's n agents by votes. Hybrid
search (`ark.search.modes`, ``conf/search/hybrid.yaml``) fuses with ``SearchConfig.fusion``:

* ``rrf``: reciprocal-rank fusion, score(d) = sum over the rankings of 1 / (rrf_k + rank(d)), rank from
  1, with rrf_k = 60 as in Cormack, Clarke and Büttcher (SIGIR 2009);
* ``weighted``: each ranking's scores min-max normalised, then ``weight`` x dense + (1 - weight) x
  lexical (0 where a node is absent from a ranking).

Ties go to the lower node id. `rrf_scores` is RRF over one fixed node set (explore_neighbors' hybrid
ranking of a node's neighbors).

    ids, scores = rrf([bm25_ids, dense_ids], k=20)
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

FUSIONS = ("rrf", "weighted")
RRF_K = 60.0  # Cormack, Clarke & Büttcher 2009, "Reciprocal rank fusion outperforms Condorcet ..."


def rrf(rankings: Sequence[np.ndarray], k: int, c: float = RRF_K) -> tuple[np.ndarray, np.ndarray]:
    """Reciprocal-rank fusion of rankings (node ids, best first): top ``k`` (ids, fused scores)."""
    scores: dict[int, float] = {}
    for ranking in rankings:
        for r, i in enumerate(np.asarray(ranking).tolist(), start=1):
            scores[i] = scores.get(i, 0.0) + 1.0 / (c + r)
    return _top(scores, k)


def weighted(lex: tuple[np.ndarray, np.ndarray], dense: tuple[np.ndarray, np.ndarray], k: int,
             weight: float) -> tuple[np.ndarray, np.ndarray]:
    """weight x minmax(dense) + (1 - weight) x minmax(lexical) over the union of the two lists."""
    scores: dict[int, float] = {}
    for (ids, s), w in ((lex, 1.0 - weight), (dense, weight)):
        s = np.asarray(s, dtype=np.float64)
        if len(s) == 0:
            continue
        lo, hi = float(s.min()), float(s.max())
        norm = (s - lo) / (hi - lo) if hi > lo else np.ones_like(s)
        for i, v in zip(np.asarray(ids).tolist(), norm.tolist()):
            scores[i] = scores.get(i, 0.0) + w * v
    return _top(scores, k)


def rrf_scores(lex: np.ndarray, sims: np.ndarray, c: float = RRF_K) -> np.ndarray:
    """RRF scores of one node set from its BM25 scores and dense similarities (position i: node i of
    the set); a zero BM25 score ranks nowhere on the lexical side."""
    n = len(sims)
    out = np.zeros(n, dtype=np.float64)
    lex_order = np.lexsort((np.arange(n), -lex))
    lex_order = lex_order[lex[lex_order] > 0]
    out[lex_order] += 1.0 / (c + np.arange(1, len(lex_order) + 1))
    d_order = np.lexsort((np.arange(n), -sims))
    out[d_order] += 1.0 / (c + np.arange(1, n + 1))
    return out.astype(np.float32)


def _top(scores: dict[int, float], k: int) -> tuple[np.ndarray, np.ndarray]:
    if not scores:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
    ids = np.fromiter(scores.keys(), dtype=np.int64, count=len(scores))
    vals = np.fromiter(scores.values(), dtype=np.float64, count=len(scores))
    order = np.lexsort((ids, -vals))[:k]
    return ids[order], vals[order].astype(np.float32)
