"""An upper bound on what the tools can show for a question: the best of a stated family of tool-call
chains, computed without an LLM (`ark.analysis.reachability` measures a single chain, the question's own words).

The family: chains of at most three calls whose every argument comes from the question --

1. ``search_graph(q, k)`` where q is the whole question or any run of at most ``max_words`` (12)
   consecutive words of it (runs with the same tokens count once), with any ``node_types`` filter;
2. then ``explore_neighbors(v, query, node_types, relations, k=neighbors_k)`` on a node v the search
   showed, with any node-type and relation filter and as query any such run of words, or none;
3. then one more ``explore_neighbors`` call of the same kind on a node the first one showed.

A node counts as shown by a call only if it is within that call's k (``search_graph``'s ranking with the
search mode and name-first option of the toolset; ``explore_neighbors``' ranking, ties by lower id, zero
scores after the others), never because it is merely one or two hops away. Filters are taken at their
narrowest: a node is shown by some filter exactly when it is shown by the filter of its own node type
and of one relation linking it (a narrower filter only removes competitors), so the bound is exact
over the family. Within the tools' k, observation budgets are ignored (they can only show fewer).

Each gold node gets the first level that shows it -- ``search``, ``neighbors1`` (a search, then one
neighbor call), ``neighbors2`` (then a second) -- or None. It is an upper bound for an agent whose tool
arguments are words of the question, reaching the gold node by at most three calls; an agent that types
other words (read in observations, or its own), asks for a larger k, or chains more calls can do better.
The toolset's switches hold: without ``search_type_filter`` only unfiltered searches, without
``type_filter`` only unfiltered neighbor calls, without ``neighbor_query`` id order only.

    toolset = ToolSet(graph, index, ToolConfig(search_k_max=20))
    rows = bound(toolset, queries, BoundSettings(ks=(5, 20)))
    print(markdown_table(summarize(rows)))

`scripts/compare_reach.py` prints it per demo template beside `ark.analysis.reachability`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ark.tools import SEARCH, ToolSet

LEVELS = ("search", "neighbors1", "neighbors2")
LEVEL_TEXT = {"search": "shown by a search for words of the question",
              "neighbors1": "shown by a neighbor call of a node such a search shows",
              "neighbors2": "shown by a second neighbor call",
              None: "not shown by any chain of three calls with the question's words"}


@dataclass(frozen=True)
class BoundSettings:
    """The family's budgets: search depths measured (each a separate bound) and the neighbor calls' k."""

    ks: tuple[int, ...] = (5, 20)
    neighbors_k: int = 20
    max_words: int = 12     # the longest run of the question's words used as a query (besides the whole question)

    def __post_init__(self) -> None:
        if self.max_words < 1:
            raise ValueError(f"max_words must be >= 1, got {self.max_words}")
        ks = tuple(sorted({int(k) for k in self.ks}))
        if not ks or ks[0] < 1:
            raise ValueError(f"ks must be a non-empty list of integers >= 1, got {list(self.ks)}")
        if self.neighbors_k < 1:
            raise ValueError(f"neighbors_k must be >= 1, got {self.neighbors_k}")
        object.__setattr__(self, "ks", ks)

    def check(self, toolset: ToolSet) -> None:
        """Raise ValueError, naming the setting to change, when ``toolset`` cannot make these calls."""
        from ark.analysis.reachability import check_call_sizes

        check_call_sizes(toolset, self.ks, self.neighbors_k)


@dataclass
class GoldBound:
    """The first level of the family that shows one gold node of one query, for one search k."""

    query_id: int | str
    gold: int
    k: int
    level: str | None
    chain: str = ""     # one chain that shows it, e.g. 'search_graph("myoclonus") -> explore_neighbors(18823, ...)'


def question_spans(toolset: ToolSet, text: str, max_words: int = 12) -> list[str]:
    """The whole of ``text`` and every run of at most ``max_words`` consecutive words of it that keeps a
    token, one per distinct token sequence (the whole text first, then the longest runs)."""
    words = text.split()
    seen: set[tuple[str, ...]] = set()
    out: list[str] = []
    lengths = [len(words)] + list(range(min(max_words, len(words) - 1), 0, -1))
    for n in lengths:
        for start in range(len(words) - n + 1):
            span = " ".join(words[start:start + n])
            tokens = tuple(toolset.index.tokenizer(span))
            if tokens and tokens not in seen:
                seen.add(tokens)
                out.append(span)
    return out


class _Calls:
    """The neighbor calls of one query's family, with each (node, node type, relation) group's ranking
    scores computed once: the distinct neighbors of the node of that type linked by that relation (its
    narrowest filter), scored by every query of the family."""

    def __init__(self, toolset: ToolSet, spans: Sequence[str], k: int):
        self.ts, self.k = toolset, k
        self.queries = list(spans) if toolset.config.neighbor_query else []
        self._groups: dict[tuple[int, int | None, int | None], tuple[np.ndarray, np.ndarray]] = {}

    def _group(self, v: int, t: int | None, r: int | None) -> tuple[np.ndarray, np.ndarray]:
        key = (v, t, r)
        if key not in self._groups:
            g = self.ts.graph
            e = g.neighbors(v, None if t is None else [g.node_type_names[t]],
                            None if r is None else [g.relation_names[r]])
            ids = np.unique(e.nodes[e.nodes != v])
            scores = (np.stack([self.ts.search.score_neighbors(q, ids)[0] for q in self.queries])
                      if self.queries and len(ids) else np.zeros((0, len(ids)), dtype=np.float32))
            self._groups[key] = (ids, scores)
        return self._groups[key]

    def shows(self, v: int, u: int) -> str | None:
        """The arguments of a neighbor call on ``v`` of the family that shows ``u`` within k, or None."""
        g = self.ts.graph
        e = g.neighbors(v)
        rels = sorted(set(e.relations[e.nodes == u].tolist())) if u != v else []
        if not rels:
            return None
        keys = ([(int(g.node_types[u]), r) for r in rels] if self.ts.config.type_filter else [(None, None)])
        for t, r in keys:
            ids, scores = self._group(v, t, r)
            j = int(np.searchsorted(ids, u))
            filt = "" if t is None else (f'node_types=["{g.node_type_names[t]}"], '
                                         f'relations=["{g.relation_names[r]}"]')
            if j < self.k:                                   # in id order, i.e. without a query
                return filt or "no filter"
            if len(scores):
                mine = scores[:, j][:, None]
                ahead = (scores > mine).sum(axis=1) + (scores[:, :j] == mine).sum(axis=1)  # ties: lower id first
                best = int(np.argmin(ahead))
                if ahead[best] < self.k:
                    return f'query="{self.queries[best]}"' + (f", {filt}" if filt else "")
        return None


def query_bound(toolset: ToolSet, query_id, text: str, gold: Sequence[int], settings: BoundSettings
                ) -> list[GoldBound]:
    """The level of each gold node of one query, for each k of ``settings`` (see the module doc)."""
    graph = toolset.graph
    c = toolset.config
    gold = list(dict.fromkeys(int(x) for x in gold))
    spans = question_spans(toolset, text, settings.max_words)
    kmax = max(settings.ks)
    filters = [[t] for t in graph.node_type_names] if c.search_type_filter else [None]
    # what each search shows at the largest k, in rank order (a smaller k shows a prefix)
    searches: list[tuple[str, list[str] | None, list[int]]] = []
    for q in spans:
        for f in filters:
            args = {"query": q, "k": kmax, **({"node_types": f} if f else {})}
            searches.append((q, f, [int(i) for i in toolset.call(SEARCH, args).node_ids]))
    calls = _Calls(toolset, spans, settings.neighbors_k)
    near: dict[int, np.ndarray] = {}

    def neighbors_of(v: int) -> np.ndarray:
        if v not in near:
            ids = np.unique(graph.neighbors(v).nodes)
            near[v] = ids[ids != v]
        return near[v]

    rows: list[GoldBound] = []
    for k in settings.ks:
        first: dict[int, str] = {}                   # node -> the first search that shows it
        for q, f, ids in searches:
            for i in ids[:k]:
                first.setdefault(i, f'search_graph("{q}"' + (f", node_types={f}" if f else "") + ")")
        hits = np.fromiter(first, dtype=np.int64, count=len(first))
        for g in gold:
            row = GoldBound(query_id, g, k, None)
            rows.append(row)
            if g in first:
                row.level, row.chain = "search", first[g]
                continue
            if not c.neighbors:
                continue
            around = neighbors_of(g)
            for v in around[np.isin(around, hits)].tolist():            # a search hit next to g
                w = calls.shows(v, g)
                if w is not None:
                    row.level, row.chain = "neighbors1", f"{first[v]} -> explore_neighbors({v}, {w})"
                    break
            if row.level is not None:
                continue
            for u in around.tolist():                                     # a node next to g ...
                nu = neighbors_of(u)
                vs = nu[np.isin(nu, hits)].tolist()                       # ... and next to a search hit
                if not vs:
                    continue
                w2 = calls.shows(u, g)
                if w2 is None:
                    continue
                for v in vs:
                    w1 = calls.shows(v, u)
                    if w1 is not None:
                        row.level = "neighbors2"
                        row.chain = (f"{first[v]} -> explore_neighbors({v}, {w1}) -> explore_neighbors({u}, {w2})")
                        break
                if row.level is not None:
                    break
    return rows


def bound(toolset: ToolSet, queries: Sequence, settings: BoundSettings | None = None,
          progress: bool = False) -> list[GoldBound]:
    """`query_bound` over ``queries`` (objects with ``id``, ``text``, ``answer_ids``)."""
    settings = settings or BoundSettings()
    settings.check(toolset)
    it = queries
    if progress:
        from tqdm.auto import tqdm

        it = tqdm(queries, desc="reach bound", unit="query")
    return [r for q in it for r in query_bound(toolset, q.id, q.text, q.answer_ids, settings)]


def summarize(rows: Sequence[GoldBound]) -> dict[str, dict]:
    """Per k (``k5``, ``k20``): for each level, the mean over queries of the share of its gold nodes shown
    by that level or an earlier one (``recall``), and the share of queries with one shown (``any``)."""
    out: dict[str, dict] = {}
    by_k: dict[int, dict] = {}
    for r in rows:
        by_k.setdefault(r.k, {}).setdefault(r.query_id, []).append(r)
    for k, per_query in sorted(by_k.items()):
        entry: dict = {"k": k, "queries": len(per_query), "gold": sum(len(v) for v in per_query.values())}
        for i, level in enumerate(LEVELS):
            allowed = set(LEVELS[: i + 1])
            shares = [sum(r.level in allowed for r in v) / len(v) for v in per_query.values()]
            entry[level] = {"recall": float(np.mean(shares)), "any": float(np.mean([s > 0 for s in shares]))}
        out[f"k{k}"] = entry
    return out


def markdown_table(summary: dict[str, dict]) -> str:
    """One row per k: cumulative recall (any-gold share in brackets) at each level."""
    head = ["search k", "queries", "a search", "+ one neighbor call", "+ two neighbor calls"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for e in summary.values():
        cells = [str(e["k"]), str(e["queries"])]
        cells += [f"{100 * e[lv]['recall']:.1f}% ({100 * e[lv]['any']:.1f}%)" for lv in LEVELS]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def describe(r: GoldBound) -> str:
    """One line for a gold node's level and the chain that shows it."""
    return LEVEL_TEXT[r.level] + (f": {r.chain}" if r.chain else "")

