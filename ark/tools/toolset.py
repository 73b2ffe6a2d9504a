"""The ARK tools the LLM calls: ``search_graph`` and ``explore_neighbors`` (run here) and the answer tools
``select`` and ``finish`` (run by `ark.agent`), each declared once as an `ark.tools.registry.Tool`.

* ``search_graph(query, k=5, node_types=None)`` is the paper's ``Search_G(q, k)``: the top-k nodes of the
  whole graph by BM25 of the subquery; k is capped at ``ToolConfig.search_k_max``; nodes scoring 0 are
  never hits.
* ``explore_neighbors(node_id, query=None, node_types=None, relations=None, k=20)`` is the paper's
  ``Neighbors(v, q, F)``: the one-hop neighbors of v over edges in both directions, filtered by neighbor
  node types F_V and relation types F_E, ranked by BM25 of q with the global statistics (neighbors
  without any query term follow with score 0). Without q the order is ascending node id. A neighbor
  linked by several edges appears once with all its relations and directions; the footer always gives
  the number N of distinct neighbors that passed the filters. ``v`` itself (a self-loop) is not listed.

Each tool is one registered `Tool` (name, description, parameters with JSON schemas, handler, switches),
from which `ToolSet.openai_tools` builds the OpenAI ``tools`` list of every enabled graph tool of the
registry (a tool registered elsewhere runs here too). The ablation switches of `ToolConfig`
(``neighbors``, ``neighbor_query``, ``type_filter``, ``neighbor_paging``; ``switches`` for tools added
later) remove a tool or its parameters from the schema, and `ToolSet.call` then rejects them like any
other unknown argument.

`ToolSet.call` never raises on what an LLM may send. What cannot run gets a short error observation
(`ToolResult.error` set): malformed JSON, wrong or missing argument names, ids out of range, unknown
type names (answered with the valid ones), a search query that is empty or only stopwords. What can be
fixed up runs: ids as strings ("12" works); k out of range is clamped, and a neighbor query of only
stopwords lists the neighbors in id order, each with a note in the observation. Empty lists for
``node_types``/``relations`` mean "no filter"; type names are matched exactly, then ignoring case and
surrounding spaces.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np
from numba import njit

from ark.tools import registry as tool_registry
from ark.data.graph import neighbor_runs
from ark.observation import NodeLine, Snippeter, render
from ark.search.modes import GlobalSearch
from ark.search.bm25 import BM25Index, _heap_push
from ark.tools.registry import Param, Tool

SEARCH = "search_graph"
NEIGHBORS = "explore_neighbors"
SELECT, FINISH = "select", "finish"


@dataclass
class ToolConfig:
    """Tool budgets and the toolset ablations of the paper's Table 2."""

    search_k: int = 5  # default k of search_graph (paper: 5)
    search_k_max: int = 50  # largest k the agent may ask search_graph for
    neighbors_k: int = 20  # default k of explore_neighbors (paper: 20)
    neighbors_k_max: int = 100  # largest k the agent may ask explore_neighbors for
    neighbors: bool = True  # False: "w/o Neighbors" (explore_neighbors is not offered)
    neighbor_query: bool = True  # False: "Neighbors w/o q" (no query parameter, id order)
    type_filter: bool = True  # False: "Neighbors w/o F" (no node_types/relations parameters)
    search_type_filter: bool = True  # offer the node_types parameter of search_graph
    neighbor_paging: bool = False  # True: explore_neighbors takes an offset and its footer says how to page
    max_observation_tokens: int = 2000  # observation budget, approx. tokens (ark.observation)
    snippet_chars: int = 160  # length of the text snippet per node
    switches: dict[str, bool] = field(default_factory=dict)  # switches of tools added to the registry later

    def __post_init__(self):
        for name in ("search_k", "search_k_max", "neighbors_k", "neighbors_k_max", "max_observation_tokens"):
            if getattr(self, name) < 1:
                raise ValueError(f"ToolConfig.{name} must be >= 1, got {getattr(self, name)}")
        if self.search_k > self.search_k_max or self.neighbors_k > self.neighbors_k_max:
            raise ValueError("ToolConfig: a default k is above its maximum")
        self.switches = dict(self.switches or {})

    def switch(self, name: str) -> bool:
        """The value of an ablation switch: a boolean field (``neighbors``...) or a key of ``switches``
        (a switch nobody set is on)."""
        if name in self.switches:
            return bool(self.switches[name])
        value = getattr(self, name, True)
        return bool(value)


@dataclass
class ToolResult:
    """What one tool call returns: the observation text for the LLM, the node ids shown in it, and the
    error message when the call was rejected (then ``node_ids`` is empty)."""

    observation: str
    node_ids: list[int]
    error: str | None = None


@dataclass
class NeighborRanking:
    """The ranked neighbors of one node, before rendering."""

    ids: np.ndarray  # neighbor ids in rank order (at most k)
    scores: np.ndarray | None  # their BM25 scores, None without a query
    links: list[list[tuple[str, bool | None]]]  # per neighbor: (relation, outgoing; None: stored both ways)
    total: int  # distinct neighbors that passed the filters
    matched: int | None  # of those, how many have score > 0 (None without a query)


class ToolInputError(ValueError):
    """An argument the LLM sent cannot be used; the message is shown to the LLM."""


# ------------------------------------------------------------------------------ argument coercion
def _as_int(name: str, value) -> int:
    if isinstance(value, (bool, np.bool_)):
        raise ToolInputError(f"{name} must be an integer, not {json.dumps(value)}; send a number such as 3")
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        s = value.strip()
        try:
            return int(s)
        except ValueError:
            try:
                f = float(s)
            except ValueError:
                f = None
            if f is not None and f.is_integer():
                return int(f)
    raise ToolInputError(f"{name} must be an integer, not {_show(value)}; send a number such as 3")


def _show(value, limit: int = 80) -> str:
    try:
        s = json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        s = repr(value)
    return s if len(s) <= limit else s[:limit] + "…"


def _resolve_names(arg: str, value, valid: Sequence[str], kind: str) -> list[str] | None:
    """A list of canonical names from a string or list of strings; None (no filter) for None or []."""
    if value is None:
        return None
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)) or not all(isinstance(x, str) for x in value):
        raise ToolInputError(f"{arg} must be a list of {kind} names, not {_show(value)}; "
                             f"send for example [{_show(valid[0]) if valid else ''}]")
    if not value:
        return None
    folded = {v.strip().lower(): v for v in valid}
    out, bad = [], []
    for x in value:
        name = x if x in valid else folded.get(x.strip().lower())
        if name is None:
            bad.append(x)
        elif name not in out:
            out.append(name)
    if bad:
        raise ToolInputError(f"{arg} names the unknown {kind} {', '.join(map(_show, bad))}; "
                             f"use only these {kind}s: {', '.join(map(_show, valid))}")
    return out


def _clamp_k(value, default: int, cap: int, notes: list[str]) -> int:
    if value is None:
        return default
    k = _as_int("k", value)
    if k < 1:
        notes.append(f"note: k={k} is below 1; using k=1.")
        return 1
    if k > cap:
        notes.append(f"note: k={k} is above the maximum {cap}; using k={cap}.")
        return cap
    return k


def _as_offset(value) -> int:
    if value is None:
        return 0
    offset = _as_int("offset", value)
    if offset < 0:
        raise ToolInputError(f"offset must be >= 0 (0 starts from the top), got {offset}")
    return offset


def _as_query(value, required: bool) -> str | None:
    if value is None:
        if required:
            raise ToolInputError("query is missing; send a few keywords to search for")
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        raise ToolInputError(f"query must be a string of keywords, not {_show(value)}")
    return value


@njit(cache=True, nogil=True)
def _top_k_kernel(scores, k):
    """One pass over ``scores``: a heap of the best ``k`` (score, position) pairs (unsorted), its size,
    and the number of scores > 0."""
    hs = np.empty(k, dtype=np.float32)
    hi = np.empty(k, dtype=np.int64)
    size = 0
    matched = 0
    for p in range(len(scores)):
        s = scores[p]
        if s > 0:
            matched += 1
        if size < k or s > hs[0]:  # ascending positions: an equal score never beats a kept one
            size = _heap_push(hs, hi, size, s, p)
    return hs[:size], hi[:size], matched


def _top_k_matched(scores: np.ndarray, k: int) -> tuple[np.ndarray, int]:
    """Positions of the ``k`` highest scores (descending, ties by lower position; O(n log k)) and the
    number of scores > 0."""
    if k < 1:
        return np.empty(0, dtype=np.int64), int((scores > 0).sum())
    hs, hi, matched = _top_k_kernel(np.asarray(scores, dtype=np.float32), int(k))
    return hi[np.lexsort((hi, -hs))], int(matched)


def _top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Positions of the ``k`` highest scores, descending, ties by lower position."""
    return _top_k_matched(scores, k)[0]


# ------------------------------------------------------------------------------ the tool set
class ToolSet:
    """The tools over one graph and its BM25 index, as configured."""

    def __init__(self, graph, index: BM25Index, config: ToolConfig | None = None, search: GlobalSearch | None = None):
        """``search``: how search_graph and the neighbor ranking score text (`ark.search.modes`); default
        lexical BM25 over ``index``, the paper's."""
        self.graph = graph
        self.index = index
        self.config = config or ToolConfig()
        if index.num_docs != graph.num_nodes:
            raise ValueError(f"index has {index.num_docs} documents but the graph has {graph.num_nodes} nodes")
        self.search = search if search is not None else GlobalSearch(index)
        if self.search.bm25 is not index:
            raise ValueError("the GlobalSearch must use the tool set's BM25 index")
        self.snippet = Snippeter(index.tokenizer, self.config.snippet_chars)
        self._type_masks: dict[tuple[str, ...], np.ndarray] = {}
        self._both_ways_mask: np.ndarray | None = None
        self._check_switches()
        # each enabled registered graph tool, reduced to the parameters this config offers
        self.specs: dict[str, Tool] = {t.name: replace(t, params=t.offered_params(self.config))
                                       for t in tool_registry.all_tools("graph") if t.enabled(self.config)}

    def _check_switches(self) -> None:
        valid = tool_registry.switch_names()
        bad = [k for k in self.config.switches if k not in valid]
        if bad:
            raise ValueError(f"unknown tool switch {', '.join(map(repr, bad))} in ToolConfig.switches; "
                             f"valid switches: {', '.join(valid)}")

    def warm_up(self) -> threading.Thread:
        """Start loading the tools' numba kernels in a daemon thread (`BM25Index.warm_up`, the top-k
        kernel) and return it. A sweep job starts it once its tools are built: the ~0.5 s of numba's
        first-call set-up then overlaps the agent's first LLM round trip instead of delaying the first
        ``search_graph`` answer. A tool call made meanwhile waits for numba's compiler lock: it is never
        slower than without the warm-up, and its results are the same."""
        def run() -> None:
            self.index.warm_up()
            _top_k_kernel(np.zeros(1, dtype=np.float32), 1)

        thread = threading.Thread(target=run, name="ark-tools-warm-up", daemon=True)
        thread.start()
        return thread

    # ------------------------------------------------------------------ schema
    def openai_tools(self) -> list[dict]:
        """The OpenAI ``tools`` list of the configured graph tools."""
        return [t.openai(self) for t in self.specs.values()]

    @property
    def tool_names(self) -> list[str]:
        return list(self.specs)

    # ------------------------------------------------------------------ dispatch
    def call(self, name: str, arguments: dict | str | None) -> ToolResult:
        """Run tool ``name``; bad arguments give an error observation, never an exception."""
        try:
            spec = self.specs.get(name) if isinstance(name, str) else None
            if spec is None:
                raise ToolInputError(f"there is no tool named {_show(name)}; call one of: {', '.join(self.specs)}")
            return spec.handler(self, self._parse(spec, arguments))
        except ToolInputError as e:
            sentence = str(e).rstrip(".") + "."
            return ToolResult(f"Error: {sentence}", [], sentence)

    @staticmethod
    def _parse(spec: Tool, arguments) -> dict:
        if arguments is None:
            arguments = {}
        if isinstance(arguments, (bytes, bytearray)):
            arguments = arguments.decode("utf-8", errors="replace")
        if isinstance(arguments, str):
            text = arguments.strip()
            try:
                arguments = json.loads(text) if text else {}
            except json.JSONDecodeError as e:
                raise ToolInputError(f"the arguments of {spec.name} are not valid JSON ({e.msg} at character "
                                     f"{e.pos}); send one JSON object with the keys "
                                     f"{', '.join(p.name for p in spec.params)}. You sent {_show(text)}") from None
        valid = [p.name for p in spec.params]
        if not isinstance(arguments, dict):
            raise ToolInputError(f"the arguments of {spec.name} must be one JSON object with the keys "
                                 f"{', '.join(valid)}, not {_show(arguments)}")
        unknown = [k for k in arguments if k not in valid]
        if unknown:
            raise ToolInputError(f"{spec.name} has no argument {', '.join(map(_show, unknown))}; "
                                 f"its arguments are: {', '.join(valid)}")
        missing = [p.name for p in spec.params if p.required and arguments.get(p.name) is None]
        if missing:
            raise ToolInputError(f"{spec.name} needs the argument {', '.join(missing)}; "
                                 f"its arguments are: {', '.join(valid)}")
        return arguments

    # ------------------------------------------------------------------ helpers
    def _node_id(self, value) -> int:
        v = _as_int("node_id", value)
        if not 0 <= v < self.graph.num_nodes:
            raise ToolInputError(f"node_id {v} does not exist; use an id shown in an earlier result "
                                 f"(ids run from 0 to {self.graph.num_nodes - 1})")
        return v

    def _type_mask(self, types: list[str]) -> np.ndarray:
        key = tuple(sorted(types))
        mask = self._type_masks.get(key)
        if mask is None:
            ok = np.zeros(len(self.graph.node_type_names), dtype=bool)
            ok[[self.graph.node_type_id(t) for t in types]] = True
            mask = self._type_masks[key] = ok[np.asarray(self.graph.node_types)]
        return mask

    def _line(self, i: int, score: float | None, terms: Sequence[str], links=()) -> NodeLine:
        g = self.graph
        name, type_name = g.node_name(i), g.node_type_name(i)
        return NodeLine(i, name, type_name, self.snippet(g.node_text(i), terms, drop=(name, type_name)),
                        score, list(links))

    def _searchable(self, query: str) -> bool:
        return bool(self.index.tokenizer(query))

    # ------------------------------------------------------------------ search_graph
    def _search(self, args: dict) -> ToolResult:
        c = self.config
        notes: list[str] = []
        query = _as_query(args.get("query"), required=True)
        k = _clamp_k(args.get("k"), c.search_k, c.search_k_max, notes)
        types = _resolve_names("node_types", args.get("node_types"), self.graph.node_type_names, "node type")
        mode = self.search.mode
        if not self._searchable(query) and (mode == "lexical" or not query.strip()):
            raise ToolInputError(f"query {_show(query)} has no searchable words (it is empty or only stopwords); "
                                 "use content words such as names or key terms")
        mask = self._type_mask(types) if types else None
        type_ids = [self.graph.node_type_id(t) for t in types] if types else None
        ids, scores, total = self.search.search(query, k, type_ids, mask)
        header = f"search_graph query={_show(query)}" + (f" node_types={_show(types)}" if types else "")
        if mode == "lexical":
            what = "matching nodes" + (" of these types" if types else "")
        else:
            header += f" mode={mode}"
            what = ("nodes" + (" of these types" if types else "") if mode == "dense"
                    else "candidate nodes (keyword or meaning)")
        if total == 0:
            notes.append("No node matches these words; try other or fewer words.")
        terms = self.index.matched_terms(query)
        lines = [self._line(i, s, terms) for i, s in zip(ids.tolist(), scores.tolist())]
        text, shown = render(header, lines, total, what, notes, c.max_observation_tokens)
        return ToolResult(text, shown)

    # ------------------------------------------------------------------ explore_neighbors
    def _neighbors(self, args: dict) -> ToolResult:
        c, g = self.config, self.graph
        notes: list[str] = []
        v = self._node_id(args.get("node_id"))
        query = _as_query(args.get("query"), required=False)
        types = _resolve_names("node_types", args.get("node_types"), g.node_type_names, "node type")
        rels = _resolve_names("relations", args.get("relations"), g.relation_names, "relation")
        k = _clamp_k(args.get("k"), c.neighbors_k, c.neighbors_k_max, notes)
        offset = _as_offset(args.get("offset"))

        searchable = query is not None and self._searchable(query)
        if query is not None and query.strip() and not searchable:
            notes.append(f"note: query {_show(query)} has no searchable words (only stopwords); "
                         "neighbors are listed in id order.")
        ranking = self.rank_neighbors(v, query if searchable else None, types, rels, k, offset)
        scores, total = ranking.scores, ranking.total
        if scores is not None and self.search.config.neighbor_rank == "bm25":
            notes.append(f"ranked by match to the query; {ranking.matched} of {total} contain query terms.")
        elif scores is not None:
            notes.append(f"ranked by {self.search.config.neighbor_rank} similarity to the query.")
        terms = self.index.matched_terms(query) if scores is not None else []

        header = f"explore_neighbors node_id={v} ({g.node_name(v)}, {g.node_type_name(v)})"
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
            notes.append(self._no_neighbors_note(v, types, rels))
        shown_scores = scores.tolist() if scores is not None else [None] * len(ranking.ids)
        lines = [self._line(i, sc, terms, links)
                 for i, sc, links in zip(ranking.ids.tolist(), shown_scores, ranking.links)]
        what = "neighbors" + (" matching the filters" if (types or rels) else "")
        if any(o is not None for links in ranking.links for _, o in links):
            notes.append(f"(-> r: edge {v} -r-> neighbor; <- r: edge neighbor -r-> {v})")
        text, shown = render(header, lines, total, what, notes, c.max_observation_tokens)
        if c.neighbor_paging:
            text += self._paging_note(offset, len(shown), total)
        return ToolResult(text, shown)

    @staticmethod
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

    def rank_neighbors(self, v: int, query: str | None, node_types: Sequence[str] | None,
                       relations: Sequence[str] | None, k: int, offset: int = 0) -> "NeighborRanking":
        """The top-``k`` distinct neighbors of ``v`` (not ``v`` itself) passing the filters, after the
        first ``offset`` of the ranking: by BM25 of ``query`` (descending, ties by lower id) or, without
        a query, in ascending id order."""
        g = self.graph
        edges = g.neighbors(v, node_types, relations)
        nodes, rel, out = edges.nodes, edges.relations, edges.outgoing
        # rows are sorted by neighbor id: one run of rows per distinct neighbor (v's own run left out)
        starts, ends = neighbor_runs(nodes, exclude=v)
        uniq = nodes[starts]
        scores = matched = None
        if query is not None:
            all_scores, _ = self.search.score_neighbors(query, uniq)
            order, matched = _top_k_matched(all_scores, offset + k)
            order = order[offset:]
            scores = all_scores[order]
        else:
            order = np.arange(min(offset, len(uniq)), min(offset + k, len(uniq)))
        names = g.relation_names
        both_ways = self._both_ways()
        links = []
        for p in order.tolist():
            a, b = int(starts[p]), int(ends[p])
            # direction only where it tells something: not for relations stored both ways everywhere
            links.append(list(dict.fromkeys((names[r], None if both_ways[r] else o)
                                            for r, o in zip(rel[a:b].tolist(), out[a:b].tolist()))))
        return NeighborRanking(uniq[order], scores, links, len(uniq), matched)

    def _both_ways(self) -> np.ndarray:
        """Per relation id: is every edge of it stored in both directions (`KnowledgeGraph.both_ways_relations`)."""
        if self._both_ways_mask is None:
            g = self.graph
            both = set(g.both_ways_relations)
            self._both_ways_mask = np.array([r in both for r in g.relation_names] or [False], dtype=bool)
        return self._both_ways_mask

    def _no_neighbors_note(self, v: int, types, rels) -> str:
        g = self.graph
        if g.degree(v) == 0:
            return f"Node {v} has no neighbors."
        if not types and not rels:
            return f"Node {v} has no neighbors other than itself."
        e = g.neighbors(v)
        keep = e.nodes != v
        tcount = np.bincount(np.asarray(g.node_types)[np.unique(e.nodes[keep])], minlength=len(g.node_type_names))
        rcount = np.bincount(e.relations[keep], minlength=len(g.relation_names))
        t = ", ".join(f"{n} ({int(x)})" for n, x in zip(g.node_type_names, tcount) if x)
        r = ", ".join(f"{n} ({int(x)})" for n, x in zip(g.relation_names, rcount) if x)
        return (f"No neighbor matches these filters. Node {v}'s neighbors by node type: {t}; "
                f"edges by relation: {r}.")


# ------------------------------------------------------------------------------ the registered tools
def _types_schema(ts: ToolSet) -> dict:
    return {"type": "array", "items": {"type": "string", "enum": list(ts.graph.node_type_names)}}


def _relations_schema(ts: ToolSet) -> dict:
    return {"type": "array", "items": {"type": "string", "enum": list(ts.graph.relation_names)}}


# search_graph's texts per search mode (ark.search.modes); lexical is the paper's
_SEARCH_TEXT = {
    "lexical": ("Search the whole knowledge graph for nodes whose text best matches the query (BM25 keyword "
                "match). Returns node ids, names, types, scores and text snippets. Use it to find entry points.",
                "Keywords to match against node text (BM25).",
                "breadth. A BM25 keyword search over the documents of all nodes in the graph. Give it a\n"
                "  short query made of the distinctive words you expect in a matching document (names, rare terms,\n"
                "  attributes). You may restrict it to node types and ask for more results than the default."),
    "dense": ("Search the whole knowledge graph for nodes whose text is closest in meaning to the query "
              "(dense embedding similarity, so synonyms and paraphrases match). Returns node ids, names, "
              "types, scores and text snippets. Use it to find entry points.",
              "What to look for, in words or a short description (matched by meaning).",
              "breadth. A semantic search over the documents of all nodes in the graph: it matches by\n"
              "  meaning, so synonyms and paraphrases work. Give it a short description of what a matching document\n"
              "  is about. You may restrict it to node types and ask for more results than the default."),
    "hybrid": ("Search the whole knowledge graph for nodes whose text best matches the query, by BM25 keyword "
               "match and by meaning (dense embeddings), fused. Returns node ids, names, types, scores and "
               "text snippets. Use it to find entry points.",
               "Keywords or a short description to match against node text (keywords and meaning).",
               "breadth. A search over the documents of all nodes in the graph that combines keyword\n"
               "  (BM25) and meaning (embedding) matches. Give it a short query made of the distinctive words or a\n"
               "  short description of a matching document. You may restrict it to node types and ask for more\n"
               "  results than the default."),
}


def _search_text(ts: ToolSet | None, part: int) -> str:
    mode = ts.search.mode if ts is not None else "lexical"
    return _SEARCH_TEXT[mode][part]


SEARCH_TOOL = tool_registry.register(Tool(
    SEARCH,
    lambda ts: _search_text(ts, 0),
    (Param("query", {"type": "string"}, lambda ts: _search_text(ts, 1), required=True),
     Param("k", lambda ts: {"type": "integer", "minimum": 1, "maximum": ts.config.search_k_max},
           lambda ts: f"Number of nodes to return (default {ts.config.search_k}, at most {ts.config.search_k_max})."),
     Param("node_types", _types_schema, "Only return nodes of these types.", switch="search_type_filter")),
    handler=ToolSet._search, kind="text", guide=lambda ts: _search_text(ts, 2)))

NEIGHBORS_TOOL = tool_registry.register(Tool(
    NEIGHBORS,
    "List the nodes directly connected to a node (edges in both directions), with each relation and its direction",
    (Param("node_id", {"type": "integer"}, "Id of the node whose neighbors to list.", required=True),
     Param("query", {"type": "string"}, "Optional keywords; neighbors are ranked by BM25 match to them.",
           switch="neighbor_query", clause=", optionally ranked by how well their text matches a query"),
     Param("node_types", _types_schema, "Only neighbors of these node types.", switch="type_filter",
           clause=", optionally filtered by node type and relation type"),
     Param("relations", _relations_schema, "Only neighbors linked by these relation types.", switch="type_filter"),
     Param("k", lambda ts: {"type": "integer", "minimum": 1, "maximum": ts.config.neighbors_k_max},
           lambda ts: f"Number of neighbors to return (default {ts.config.neighbors_k}, "
                      f"at most {ts.config.neighbors_k_max})."),
     Param("offset", {"type": "integer", "minimum": 0},
           "Skip this many neighbors of the ranking (default 0): to page through a long neighbor list.",
           switch="neighbor_paging", clause="; pages through long lists with offset")),
    handler=ToolSet._neighbors, switch="neighbors", kind="relational",
    description_end=". Reports how many neighbors matched in total. Use it to follow relations (multi-hop).",
    guide="depth. Lists the nodes directly connected to one node id, with the relation type\n"
          "  and direction of each edge. You may filter by neighbor node types and by relation types, and you may\n"
          "  pass a short query to rank the neighbors by how well their documents match it. Calling it on a node you\n"
          "  reached through it is how you walk two or more hops."))

# The answer tools: the agent runs them (it holds the answer list), see ark.agent.
SELECT_TOOL = tool_registry.register(Tool(
    SELECT,
    "Append node ids to your ranked answer list, best first. Only ids shown in an earlier "
    "observation of this run are accepted; ids already selected are skipped.",
    (Param("node_ids", {"type": "array", "items": {"type": "integer"}}, "Node ids to append, in rank order.",
           required=True),),
    role="answer", kind="answer", closed=False,
    guide="put node ids on your answer list. Only ids that appeared in an observation of this run are\n"
          "  accepted. The list is ranked in the order you select: select the best candidates first. Selecting an id\n"
          "  twice has no effect."))

FINISH_TOOL = tool_registry.register(Tool(
    FINISH, "Stop exploring; your selected list is the answer.", (), role="answer", kind="answer", closed=False,
    guide="stop. Call it once you have selected what you found, or when more searching will not help."))
