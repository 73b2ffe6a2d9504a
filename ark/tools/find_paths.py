"""The ``find_paths`` tool (beyond the paper, opt-in): the shortest typed paths between two nodes.

``find_paths(source, target, max_hops=3, relations=None, k=10, offset=0)`` lists the shortest paths of at
most ``max_hops`` (1 to 3) edges between two nodes, each edge followed in either direction and, with
``relations``, only along those relations. A path is a sequence of distinct nodes; each hop shows every
relation linking its two nodes with its direction (``-r->`` for a stored edge from the left node,
``<-r-`` for one into it, ``-r-`` for a relation stored both ways everywhere, as `explore_neighbors`
shows them). Only paths of the shortest length are listed, ranked by how specific their intermediate
nodes are (the sum of the logarithms of their degrees, smallest first: a path through a hub says
little), ties by node ids; ``k`` per page from ``offset``, with the count of all shortest paths and the
call for the next page in the footer. The observation budget (``ToolConfig.max_observation_tokens``)
cuts a page like any other observation.

Bounded: the search meets in the middle (each endpoint's neighbors, the smaller side expanded for three
hops) and reads at most ``MAX_ROWS`` adjacency rows and enumerates at most ``MAX_PATHS`` paths; beyond
either it says so and ranks what it found. Ids are the tool set's (`ark.tools.ids`); every node of a
shown path counts as shown (``select`` takes it).

Off by default: ``ToolConfig.switches["find_paths"] = True`` offers it (``ablation=paths``,
``ark mcp --switch find_paths=true``). Figure 3 shows its calls as their own kind, "paths".

    ToolSet(graph, index, ToolConfig(switches={"find_paths": True})).call(
        "find_paths", {"source": 3, "target": 12, "max_hops": 2}).observation
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ark.data.graph import neighbor_runs
from ark.tools.registry import Param, Tool
from ark.tools.toolset import (ToolInputError, ToolResult, ToolSet, _as_int, _as_offset, _clamp_k, _resolve_names,
                               _show, node_id_schema)

NAME = "find_paths"
MAX_HOPS = 3        # the longest path the tool looks for
K, K_MAX = 10, 50   # paths per page: default, most
MAX_ROWS = 2_000_000   # adjacency rows read per call, at most (three hops through hubs)
MAX_PATHS = 10_000     # shortest paths enumerated and ranked per call, at most


@dataclass
class Paths:
    """The shortest paths found between two nodes, before ranking."""

    length: int | None                                   # edges per path; None: no path within max_hops
    paths: list[tuple[int, ...]] = field(default_factory=list)   # node sequences, source first
    total: int = 0                                       # shortest paths that exist (counted past MAX_PATHS)
    cut: str | None = None                               # why the search stopped early, if it did


class _Graph:
    """Distinct neighbors of nodes under a relation filter, with the adjacency rows read counted."""

    def __init__(self, g, relations):
        self.g, self.relations, self.rows = g, relations, 0

    def neighbors(self, v: int) -> np.ndarray:
        nodes = self.g.neighbors(v, None, self.relations).nodes
        self.rows += len(nodes)
        starts, _ = neighbor_runs(nodes, exclude=v)
        return nodes[starts]


def shortest_paths(g, s: int, t: int, max_hops: int = MAX_HOPS, relations=None) -> Paths:
    """All shortest paths of at most ``max_hops`` edges between ``s`` and ``t`` (s != t), edges in either
    direction (only ``relations``, when given), bounded by `MAX_ROWS` and `MAX_PATHS`."""
    adj = _Graph(g, relations)
    ns = adj.neighbors(s)
    if np.any(ns == t):
        return Paths(1, [(s, t)], 1)
    if max_hops < 2:
        return Paths(None)
    nt = adj.neighbors(t)
    mids = np.intersect1d(ns, nt, assume_unique=True)
    mids = mids[(mids != s) & (mids != t)]
    if len(mids):
        return Paths(2, [(s, int(m), t) for m in mids[:MAX_PATHS].tolist()], len(mids),
                     f"found more than {MAX_PATHS:,} paths" if len(mids) > MAX_PATHS else None)
    if max_hops < 3:
        return Paths(None)
    # three hops s - a - b - t: expand the smaller end's neighbors, look for the other end's neighbors
    flip = len(ns) > len(nt)
    near, far = (nt, ns) if flip else (ns, nt)
    is_far = np.zeros(g.num_nodes, dtype=bool)
    is_far[far] = True
    out = Paths(3)
    for a in near.tolist():
        if adj.rows > MAX_ROWS:
            out.cut = f"stopped after reading {MAX_ROWS:,} adjacency rows"
            break
        hits = adj.neighbors(a)
        hits = hits[is_far[hits]]
        out.total += len(hits)
        room = MAX_PATHS - len(out.paths)
        for b in hits[:max(room, 0)].tolist():
            out.paths.append((t, a, b, s) if flip else (s, a, b, t))
    if out.total > MAX_PATHS and out.cut is None:
        out.cut = f"found more than {MAX_PATHS:,} paths"
    if flip:
        out.paths = [p[::-1] for p in out.paths]
    if not out.total:
        return Paths(None, cut=out.cut)
    return out


def rank(g, paths: list[tuple[int, ...]]) -> list[tuple[int, ...]]:
    """Paths by the sum of log-degrees of their intermediate nodes (specific paths first), ties by ids."""
    degree: dict[int, float] = {}

    def weight(v: int) -> float:
        if v not in degree:
            degree[v] = math.log(max(g.degree(v), 1))
        return degree[v]

    return sorted(paths, key=lambda p: (sum(weight(v) for v in p[1:-1]), p))


def _hop(ts: ToolSet, u: int, w: int, relations) -> str:
    """The relations linking ``u`` to the next node ``w``, with directions: ``-r->``, ``<-r-``, ``-r-``."""
    g = ts.graph
    both = ts.cached("find_paths.both_ways", lambda: set(g.both_ways_relations))
    e = g.neighbors(u, None, relations)
    sel = e.nodes == w
    links = dict.fromkeys((g.relation_names[r], o) for r, o in zip(e.relations[sel].tolist(), e.outgoing[sel].tolist()))
    parts = [f"-{r}-" if r in both else (f"-{r}->" if o else f"<-{r}-") for r, o in links]
    return " / ".join(dict.fromkeys(parts))


def _node(ts: ToolSet, v: int) -> str:
    g = ts.graph
    return f"[{ts.ids.text(v)}] {g.node_name(v)} ({g.node_type_name(v)})"


def _line(ts: ToolSet, n: int, path: tuple[int, ...], relations) -> str:
    text = _node(ts, path[0])
    for u, w in zip(path, path[1:]):
        text += f" {_hop(ts, u, w, relations)} {_node(ts, w)}"
    return f"{n}. {text}"


def _as_hops(value) -> int:
    if value is None:
        return MAX_HOPS
    hops = _as_int("max_hops", value)
    if not 1 <= hops <= MAX_HOPS:
        raise ToolInputError(f"max_hops must be 1, 2 or 3, got {hops}")
    return hops


def find_paths(ts: ToolSet, args: dict) -> ToolResult:
    """The handler: a page of the ranked shortest paths from ``source`` to ``target``, rendered."""
    g = ts.graph
    s = ts.as_node_id(args.get("source"), "source")
    t = ts.as_node_id(args.get("target"), "target")
    if s == t:
        raise ToolInputError(f"source and target are the same node ({_show(ts.ids.show(s))}); give two different nodes")
    hops = _as_hops(args.get("max_hops"))
    rels = _resolve_names("relations", args.get("relations"), g.relation_names, "relation")
    notes: list[str] = []
    k = _clamp_k(args.get("k"), K, K_MAX, notes)
    offset = _as_offset(args.get("offset"))
    found = shortest_paths(g, s, t, hops, rels)

    header = f"find_paths source={ts.ids.text(s)} ({g.node_name(s)}, {g.node_type_name(s)}) " \
             f"target={ts.ids.text(t)} ({g.node_name(t)}, {g.node_type_name(t)}) max_hops={hops}"
    if rels:
        header += f" relations={_show(rels)}"
    if offset:
        header += f" offset={offset}"
    if found.cut:
        notes.append(f"note: the search {found.cut}; paths may be missing and the ranking covers those found. "
                     "Filter by relations or lower max_hops for a complete answer.")
    if found.length is None:
        within = "the relations " + ", ".join(rels) if rels else "any relation"
        notes.append(f"No path of at most {hops} hop(s) over {within} links these two nodes.")
        return ToolResult("\n".join([header, *notes]), [])
    notes.append(f"shortest paths have {found.length} hop(s); ranked by how specific their intermediate nodes "
                 "are (fewest edges first)." if found.length > 1 else "the two nodes are linked directly.")
    ranked = rank(g, found.paths)
    page = ranked[offset:offset + k]
    if offset and not page:
        notes.append(f"note: offset={offset} is past the last of the {len(ranked)} paths; use a smaller offset.")
    lines, shown = [], []
    budget = ts.config.max_observation_tokens * 4 - sum(len(x) + 1 for x in (header, *notes)) - 160
    for n, path in enumerate(page, offset + 1):
        line = _line(ts, n, path, rels)
        if budget - (len(line) + 1) < 0:
            break
        budget -= len(line) + 1
        lines.append(line)
        shown.extend(v for v in path if v not in shown)
    count = f"{found.total:,}" if not found.cut else f"at least {found.total:,}"
    footer = (f"showing paths {offset + 1}-{offset + len(lines)} of {count} shortest paths" if lines
              else f"showing no path of {count} shortest paths")
    if len(lines) < len(page):
        footer += f" (cut to the {ts.config.max_observation_tokens}-token observation budget)"
    nxt = offset + len(lines)
    if lines and nxt < len(ranked):
        footer += f"; call find_paths again with the same source, target and filters and offset={nxt} for the next ones"
    return ToolResult("\n".join([header, *notes, *lines, footer]), shown)


def _relations_schema(ts: ToolSet) -> dict:
    return {"type": "array", "items": {"type": "string", "enum": list(ts.graph.relation_names)}}


TOOL = Tool(
    NAME,
    "Find the shortest paths (at most 3 edges, followed in either direction) between two nodes, with the "
    "relation and direction of every edge, ranked so that paths through specific nodes come before paths "
    "through hubs; optionally only along some relation types. Reports how many shortest paths exist and "
    "pages through them with offset. Use it to see how two nodes you found are connected",
    (Param("source", node_id_schema, "Id of the node the paths start from.", required=True, shown_ids=True),
     Param("target", node_id_schema, "Id of the node the paths end at.", required=True, shown_ids=True),
     Param("max_hops", {"type": "integer", "minimum": 1, "maximum": MAX_HOPS},
           f"Longest path to look for, in edges (default {MAX_HOPS}, at most {MAX_HOPS})."),
     Param("relations", _relations_schema, "Only paths whose every edge has one of these relation types."),
     Param("k", {"type": "integer", "minimum": 1, "maximum": K_MAX},
           f"Number of paths to return (default {K}, at most {K_MAX})."),
     Param("offset", {"type": "integer", "minimum": 0},
           "Skip this many paths of the ranking (default 0): to page through many paths.")),
    handler=find_paths, switch=NAME, default_on=False, kind="paths", order=25,
    description_end=".",
    guide="links. Lists the shortest paths (at most 3 edges, in either direction) between two node\n"
          "  ids you have seen, with the relation and direction of each edge, paths through specific nodes\n"
          "  first. Use it to check or explain how two candidates are connected; the nodes on the paths can be\n"
          "  selected.")
