"""Name-first ranking for global search: the nodes a query names come before the rest of BM25's ranking.

BM25 over a node's whole document often ranks the node that *is* the query below nodes that mention it
(on the demo, "myoclonus" puts the phenotype Myoclonus below shorter documents that repeat the word),
and an agent looks for its anchors by name. `SearchConfig.name_first` (``conf/search/*.yaml``,
``search.setup.config.name_first``; lexical search only) puts name matches first:

* ``none`` (default): no name tier, the paper's search;
* ``exact``: nodes whose name has exactly the query's words come first -- the same set of tokens after
  the index's own tokenizer (lower case, stopwords dropped, stemmed), so "myoclonus", "Myoclonus" and
  "syndrome, Marfan" find the nodes named "Myoclonus" and "Marfan syndrome";
* ``mentioned``: those, then nodes whose whole name the query contains as a run of its tokens (the
  question "Which child terms of Myoclonus are associated with the gene SCN1A?" names Myoclonus and
  SCN1A), names of more tokens first.

Within a tier, nodes follow BM25 (score, then lower id); the rest of BM25's top k follows unchanged,
and every node keeps its BM25 score. A name's tokens are in its own document, so a name match is always
among the nodes BM25 matches: the tiers reorder that set, never add to it.

    names = NameIndex.build(graph.names(), index.tokenizer)
    ids, scores, total = names_first(index, names, "myoclonus", k=5, mode="exact")
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable

import numpy as np

NAME_FIRST = ("none", "exact", "mentioned")


def _key(tokens: Iterable[str]) -> tuple[str, ...]:
    return tuple(sorted(set(tokens)))


class NameIndex:
    """Node names by their set of tokens: which nodes a query names exactly, or mentions."""

    def __init__(self, groups: dict[tuple[str, ...], np.ndarray], tokenizer: Callable[[str], list[str]]):
        self._groups = groups
        self._tokenizer = tokenizer
        self._longest = max((len(k) for k in groups), default=0)

    @classmethod
    def build(cls, names: Iterable[str], tokenizer: Callable[[str], list[str]]) -> "NameIndex":
        """Index ``names`` (node i = the i-th name, i.e. document i of the BM25 index) with ``tokenizer``
        (the BM25 index's, so names and queries are tokenized as documents are)."""
        groups: dict[tuple[str, ...], list[int]] = defaultdict(list)
        for i, name in enumerate(names):
            key = _key(tokenizer(name or ""))
            if key:
                groups[key].append(i)
        return cls({k: np.asarray(v, dtype=np.int64) for k, v in groups.items()}, tokenizer)

    def tiers(self, query: str, mode: str) -> dict[int, int]:
        """{node: tier} of the nodes ``query`` names: tier 0 for an exact match of its tokens; with
        ``mentioned``, tier ``1 + (longest name - tokens of this name)`` for a name the query contains
        as a run of its tokens (longer names first)."""
        if mode not in NAME_FIRST:
            raise ValueError(f"unknown name_first {mode!r}; valid: {', '.join(NAME_FIRST)}")
        out: dict[int, int] = {}
        if mode == "none":
            return out
        tokens = self._tokenizer(query)
        for i in self._groups.get(_key(tokens), ()):
            out[int(i)] = 0
        if mode == "mentioned":
            for n in range(min(len(tokens), self._longest), 0, -1):
                for start in range(len(tokens) - n + 1):
                    for i in self._groups.get(_key(tokens[start:start + n]), ()):
                        out.setdefault(int(i), 1 + self._longest - n)
        return out


def names_first(index, names: NameIndex, query: str, k: int, mode: str, mask: np.ndarray | None = None
                ) -> tuple[np.ndarray, np.ndarray, int]:
    """(ids, scores, total) as `ark.search.bm25.BM25Index.search_with_total`, with the nodes that
    ``query`` names (`NameIndex.tiers`, allowed by ``mask``) first."""
    tiers = names.tiers(query, mode)
    if mask is not None:
        tiers = {i: t for i, t in tiers.items() if mask[i]}
    if not tiers:
        return index.search_with_total(query, k, mask)
    named = np.fromiter(tiers, dtype=np.int64, count=len(tiers))
    scores = index.score(query, named)
    keep = scores > 0
    named, scores = named[keep], scores[keep]
    order = np.lexsort((named, -scores, np.array([tiers[int(i)] for i in named], dtype=np.int64)))[:k]
    named, scores = named[order], scores[order]
    ids, bm25_scores, total = index.search_with_total(query, k + len(named), mask)
    rest = ~np.isin(ids, named)
    ids = np.concatenate([named, ids[rest]])[:k]
    out = np.concatenate([scores, bm25_scores[rest]])[:k].astype(np.float32)
    return ids, out, total
