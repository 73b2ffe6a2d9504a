"""The ``explore_neighbors`` tool: its schema, its texts, the neighbor ranking and its handler.

``explore_neighbors(node_id, query=None, node_types=None, relations=None, k=20)`` is the paper's
``Neighbors(v, q, F)``: the one-hop neighbors of v over edges in both directions, filtered by neighbor
node types F_V and relation types F_E, ranked by BM25 of q with the global statistics (neighbors
without any query term follow with score 0). Without q the order is ascending node id. A neighbor
linked by several edges appears once with all its relations and directions; the footer always gives
the number N of distinct neighbors that passed the filters. ``v`` itself (a self-loop) is not listed. Ids, in the header and the node lines as in ``node_id``, are the
tool set's (`ark.tools.ids`: the graph's own where it has them).

Switches (`ark.tools.toolset.ToolConfig`): ``neighbors`` offers the tool ("w/o Neighbors" turns it off),
``neighbor_query`` its query, ``type_filter`` its two filters, ``neighbor_paging`` an ``offset`` and a
footer saying how to page.

    ToolSet(graph, index).call("explore_neighbors", {"node_id": 0, "query": "heart"}).observation
    rank_neighbors(toolset, 0, "heart", None, None, k=20).ids
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ark.data.graph import neighbor_runs
from ark.observation import render
from ark.tools.registry import Param, Tool
from ark.tools.toolset import (ToolResult, ToolSet, _as_offset, _as_query, _clamp_k, _resolve_names, _show,
                               _top_k_matched, node_id_schema, node_types_schema)

NAME = "explore_neighbors"


@dataclass
class NeighborRanking:
    """The ranked neighbors of one node, before rendering."""

    ids: np.ndarray  # neighbor ids in rank order (at most k)
    scores: np.ndarray | None  # their BM25 scores, None without a query
    links: list[list[tuple[str, bool | None]]]  # per neighbor: (relation, outgoing; None: stored both ways)
    total: int  # distinct neighbors that passed the filters
    matched: int | None  # of those, how many have score > 0 (None without a query)


def explore_neighbors(ts: ToolSet, args: dict) -> ToolResult:
    """The handler: the ranked, filtered neighbors of ``args["node_id"]``, rendered."""
    c, g = ts.config, ts.graph
    notes: list[str] = []
    v = ts.as_node_id(args.get("node_id"))
    query = _as_query(args.get("query"), required=False)
    types = _resolve_names("node_types", args.get("node_types"), g.node_type_names, "node type")
    rels = _resolve_names("relations", args.get("relations"), g.relation_names, "relation")
    k = _clamp_k(args.get("k"), c.neighbors_k, c.neighbors_k_max, notes)
    offset = _as_offset(args.get("offset"))

    searchable = query is not None and ts.searchable(query)
    if query is not None and query.strip() and not searchable:
        notes.append(f"note: query {_show(query)} has no searchable words (only stopwords); "
                     "neighbors are listed in id order.")
    ranking = rank_neighbors(ts, v, query if searchable else None, types, rels, k, offset)
    scores, total = ranking.scores, ranking.total
    if scores is not None and ts.search.config.neighbor_rank == "bm25":
        notes.append(f"ranked by match to the query; {ranking.matched} of {total} contain query terms.")
    elif scores is not None:
        notes.append(f"ranked by {ts.search.config.neighbor_rank} similarity to the query.")
    terms = ts.index.matched_terms(query) if scores is not None else []

    shown = ts.ids.text(v)
    header = f"explore_neighbors node_id={shown} ({g.node_name(v)}, {g.node_type_name(v)})"
    if scores is not None:
        header += f" query={_show(query)}"
    if types:
        header += f" node_types={_show(types)}"
    if rels:
        header += f" relations={_show(rels)}"
    if offset:
        header += f" offset={offset}"
        if offset >= total > 0:
            notes.append(f"note: offset={offset} is past the last of the {total} neighbors; "
                         "use a smaller offset (0 starts from the top).")
    if total == 0:
        notes.append(_no_neighbors_note(ts, v, types, rels))
    shown_scores = scores.tolist() if scores is not None else [None] * len(ranking.ids)
    lines = [ts.node_line(i, sc, terms, links)
             for i, sc, links in zip(ranking.ids.tolist(), shown_scores, ranking.links)]
    what = "neighbors" + (" matching the filters" if (types or rels) else "")
    if any(o is not None for links in ranking.links for _, o in links):
        notes.append(f"(-> r: edge {shown} -r-> neighbor; <- r: edge neighbor -r-> {shown})")
    text, shown = render(header, lines, total, what, notes, c.max_observation_tokens)
    if c.neighbor_paging:
        text += _paging_note(offset, len(shown), total)
    return ToolResult(text, shown)


def _paging_note(offset: int, shown: int, total: int) -> str:
    """The footer's paging line: where this page sits and, when more remain, the call for the next."""
    if shown == 0:
        return ""
    first, last = offset + 1, offset + shown
    remaining = total - last
    if remaining <= 0:
        return f"\n(neighbors {first}-{last} of {total}: none remain)"
    return (f"\n(neighbors {first}-{last} of {total}: {remaining} more; call explore_neighbors again with "
            f"the same node_id, query and filters and offset={last} for the next ones)")


def rank_neighbors(ts: ToolSet, v: int, query: str | None, node_types: Sequence[str] | None,
                   relations: Sequence[str] | None, k: int, offset: int = 0) -> NeighborRanking:
    """The top-``k`` distinct neighbors of ``v`` (not ``v`` itself) passing the filters, after the
    first ``offset`` of the ranking: by BM25 of ``query`` (descending, ties by lower id) or, without
    a query, in ascending id order."""
    g = ts.graph
    edges = g.neighbors(v, node_types, relations)
    nodes, rel, out = edges.nodes, edges.relations, edges.outgoing
    # rows are sorted by neighbor id: one run of rows per distinct neighbor (v's own run left out)
    starts, ends = neighbor_runs(nodes, exclude=v)
    uniq = nodes[starts]
    scores = matched = None
    if query is not None:
        all_scores, _ = ts.search.score_neighbors(query, uniq)
        order, matched = _top_k_matched(all_scores, offset + k)
        order = order[offset:]
        scores = all_scores[order]
    else:
        order = np.arange(min(offset, len(uniq)), min(offset + k, len(uniq)))
    names = g.relation_names
    both_ways = ts.cached("both_ways_relations", lambda: _both_ways(g))
    links = []
    for p in order.tolist():
        a, b = int(starts[p]), int(ends[p])
        # direction only where it tells something: not for relations stored both ways everywhere
        links.append(list(dict.fromkeys((names[r], None if both_ways[r] else o)
                                        for r, o in zip(rel[a:b].tolist(), out[a:b].tolist()))))
    return NeighborRanking(uniq[order], scores, links, len(uniq), matched)


def _both_ways(g) -> np.ndarray:
    """Per relation id: is every edge of it stored in both directions (`KnowledgeGraph.both_ways_relations`)."""
    both = set(g.both_ways_relations)
    return np.array([r in both for r in g.relation_names] or [False], dtype=bool)


def _no_neighbors_note(ts: ToolSet, v: int, types, rels) -> str:
    g = ts.graph
    shown = ts.ids.text(v)
    if g.degree(v) == 0:
        return f"Node {shown} has no neighbors."
    if not types and not rels:
        return f"Node {shown} has no neighbors other than itself."
    e = g.neighbors(v)
    keep = e.nodes != v
    tcount = np.bincount(np.asarray(g.node_types)[np.unique(e.nodes[keep])], minlength=len(g.node_type_names))
    rcount = np.bincount(e.relations[keep], minlength=len(g.relation_names))
    t = ", ".join(f"{n} ({int(x)})" for n, x in zip(g.node_type_names, tcount) if x)
    r = ", ".join(f"{n} ({int(x)})" for n, x in zip(g.relation_names, rcount) if x)
    return (f"No neighbor matches these filters. Node {shown}'s neighbors by node type: {t}; "
            f"edges by relation: {r}.")


def _relations_schema(ts: ToolSet) -> dict:
    return {"type": "array", "items": {"type": "string", "enum": list(ts.graph.relation_names)}}


TOOL = Tool(
    NAME,
    "List the nodes directly connected to a node (edges in both directions), with each relation and its direction",
    (Param("node_id", node_id_schema, "Id of the node whose neighbors to list.", required=True,
           shown_ids=True),
     Param("query", {"type": "string"}, "Optional keywords; neighbors are ranked by BM25 match to them.",
           switch="neighbor_query", clause=", optionally ranked by how well their text matches a query"),
     Param("node_types", node_types_schema, "Only neighbors of these node types.", switch="type_filter",
           clause=", optionally filtered by node type and relation type"),
     Param("relations", _relations_schema, "Only neighbors linked by these relation types.", switch="type_filter"),
     Param("k", lambda ts: {"type": "integer", "minimum": 1, "maximum": ts.config.neighbors_k_max},
           lambda ts: f"Number of neighbors to return (default {ts.config.neighbors_k}, "
                      f"at most {ts.config.neighbors_k_max})."),
     Param("offset", {"type": "integer", "minimum": 0},
           "Skip this many neighbors of the ranking (default 0): to page through a long neighbor list.",
           switch="neighbor_paging", clause="; pages through long lists with offset")),
    handler=explore_neighbors, switch="neighbors", kind="relational", order=20,
    description_end=". Reports how many neighbors matched in total. Use it to follow relations (multi-hop).",
    guide="depth. Lists the nodes directly connected to one node id, with the relation type\n"
          "  and direction of each edge. You may filter by neighbor node types and by relation types, and you may\n"
          "  pass a short query to rank the neighbors by how well their documents match it. Calling it on a node you\n"
          "  reached through it is how you walk two or more hops.")
