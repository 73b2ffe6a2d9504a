"""The ``search_graph`` tool: its schema, its texts per search mode and its handler.

``search_graph(query, k=5, node_types=None)`` is the paper's ``Search_G(q, k)``: the top-k nodes of the
whole graph by BM25 of the subquery (`ark.search.modes.GlobalSearch`: dense or hybrid where the run says
so; with ``name_first``, the nodes the query names come first, `ark.search.name_match`); k is capped at ``ToolConfig.search_k_max``; nodes scoring 0 are never hits. The ``node_types``
parameter is the ``search_type_filter`` switch's.

    ToolSet(graph, index).call("search_graph", {"query": "KCNH2", "k": 3}).observation
"""

from __future__ import annotations

from ark.observation import render
from ark.tools.registry import Param, Tool
from ark.tools.toolset import (ToolInputError, ToolResult, ToolSet, _as_query, _clamp_k, _resolve_names, _show,
                               node_types_schema)

NAME = "search_graph"

# the tool's texts per search mode (ark.search.modes): (description, query's description, prompt guide);
# lexical is the paper's
TEXTS = {
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


# added to the description when search.setup.config.name_first is on (ark.search.name_match)
NAME_FIRST_TEXT = {"exact": " Nodes whose name is exactly the query come first.",
                   "mentioned": " Nodes whose name is the query, or is contained in it, come first."}


def _text(ts: ToolSet | None, part: int) -> str:
    mode = ts.search.mode if ts is not None else "lexical"
    text = TEXTS[mode][part]
    if part == 0 and ts is not None:
        text += NAME_FIRST_TEXT.get(ts.search.config.name_first, "")
    return text


def search_graph(ts: ToolSet, args: dict) -> ToolResult:
    """The handler: the top-k nodes of the graph for ``args["query"]``, rendered."""
    c = ts.config
    notes: list[str] = []
    query = _as_query(args.get("query"), required=True)
    k = _clamp_k(args.get("k"), c.search_k, c.search_k_max, notes)
    types = _resolve_names("node_types", args.get("node_types"), ts.graph.node_type_names, "node type")
    mode = ts.search.mode
    if not ts.searchable(query) and (mode == "lexical" or not query.strip()):
        raise ToolInputError(f"query {_show(query)} has no searchable words (it is empty or only stopwords); "
                             "use content words such as names or key terms")
    mask = ts.type_mask(types) if types else None
    type_ids = [ts.graph.node_type_id(t) for t in types] if types else None
    ids, scores, total = ts.search.search(query, k, type_ids, mask)
    header = f"search_graph query={_show(query)}" + (f" node_types={_show(types)}" if types else "")
    if mode == "lexical":
        what = "matching nodes" + (" of these types" if types else "")
    else:
        header += f" mode={mode}"
        what = ("nodes" + (" of these types" if types else "") if mode == "dense"
                else "candidate nodes (keyword or meaning)")
    if total == 0:
        notes.append("No node matches these words; try other or fewer words.")
    terms = ts.index.matched_terms(query)
    lines = [ts.node_line(i, s, terms) for i, s in zip(ids.tolist(), scores.tolist())]
    text, shown = render(header, lines, total, what, notes, c.max_observation_tokens)
    return ToolResult(text, shown)


TOOL = Tool(
    NAME,
    lambda ts: _text(ts, 0),
    (Param("query", {"type": "string"}, lambda ts: _text(ts, 1), required=True),
     Param("k", lambda ts: {"type": "integer", "minimum": 1, "maximum": ts.config.search_k_max},
           lambda ts: f"Number of nodes to return (default {ts.config.search_k}, at most {ts.config.search_k_max})."),
     Param("node_types", node_types_schema, "Only return nodes of these types.", switch="search_type_filter")),
    handler=search_graph, kind="text", guide=lambda ts: _text(ts, 2), order=10)
