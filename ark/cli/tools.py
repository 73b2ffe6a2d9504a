"""``ark search``, ``ark neighbors``, ``ark mcp``: the agent's graph tools by hand, and over MCP.

    ark search "marfan syndrome" --graph demo -k 5 [--type disease]
    ark neighbors 12 --graph demo [--query "heart"] [--type gene/protein] [--relation associated_with]
    ark mcp --graph demo                         # MCP server on stdio: search_graph, explore_neighbors

``search`` and ``neighbors`` print exactly the observation the agent reads (they call the agent's
`ark.tools.toolset.ToolSet`); ``mcp`` serves the same tools (`ark.cli.mcp`).
"""

from __future__ import annotations

import sys

from ark.cli.common import CLIError, add_verb, open_tools


def _show(result, graph) -> int:
    """Print an observation exactly as the agent reads it; the external ids of its nodes to stderr."""
    if result.error:
        print(result.observation, file=sys.stderr)
        return 2
    print(result.observation)
    if graph.has_external_ids and result.node_ids:
        print("external ids: " + ", ".join(f"[{i}] {graph.external_id(i)}" for i in result.node_ids),
              file=sys.stderr)
    return 0


def resolve_node(graph, node: str) -> int:
    """An internal node id from what a person typed: the source's own id, or the internal id."""
    if graph.has_external_ids:
        key = node
        if graph.meta.get("external_id_type") == "int":
            try:
                key = int(node)
            except ValueError:
                raise CLIError(f"unknown node {node!r}; node ids of {graph.name} are integers") from None
        try:
            return graph.node_index(key)
        except KeyError:
            raise CLIError(f"unknown node {node!r}: no node of {graph.name} has this id") from None
    try:
        v = int(node)
    except ValueError:
        raise CLIError(f"unknown node {node!r}; node ids of {graph.name} run from 0 to {graph.num_nodes - 1}") from None
    if not 0 <= v < graph.num_nodes:
        raise CLIError(f"unknown node {node!r}; node ids of {graph.name} run from 0 to {graph.num_nodes - 1}")
    return v


def _tool_args(**kw) -> dict:
    return {k: v for k, v in kw.items() if v is not None and v != []}


def cmd_search(args) -> int:
    from ark.tools import SEARCH

    _, graph, tools = open_tools(args)
    return _show(tools.call(SEARCH, _tool_args(query=args.query, k=args.k, node_types=args.type)), graph)


def cmd_neighbors(args) -> int:
    from ark.tools import NEIGHBORS

    _, graph, tools = open_tools(args)
    v = resolve_node(graph, args.node)
    return _show(tools.call(NEIGHBORS, _tool_args(node_id=v, query=args.query, k=args.k, node_types=args.type,
                                                  relations=args.relation)), graph)


def cmd_mcp(args) -> int:
    from ark.cli.mcp import build_server

    _, graph, tools = open_tools(args)
    build_server(tools, name=f"ark-{graph.name}").run("stdio")
    return 0


def register(sub) -> None:
    p = add_verb(sub, "search", cmd_search, graph=True, help="search_graph, printed as the agent reads it",
                 description="BM25 search over every node's document: the agent's search_graph tool.")
    p.add_argument("query", help="keywords")
    p.add_argument("-k", type=int, default=None, help="number of nodes (default: the tool's, 5)")
    p.add_argument("--type", "-t", action="append", default=[], help="only nodes of this type (repeatable)")

    p = add_verb(sub, "neighbors", cmd_neighbors, graph=True, help="explore_neighbors, printed as the agent reads it",
                 description="The one-hop neighbors of NODE in both directions: the agent's "
                             "explore_neighbors tool. NODE is the graph's own id (a tables graph's "
                             "id column) or the internal id shown in brackets.")
    p.add_argument("node", help="node id")
    p.add_argument("--query", "-q", default=None, help="rank the neighbors by BM25 of these keywords")
    p.add_argument("--type", "-t", action="append", default=[], help="only neighbors of this type (repeatable)")
    p.add_argument("--relation", "-r", action="append", default=[], help="only this relation (repeatable)")
    p.add_argument("-k", type=int, default=None, help="number of neighbors (default: the tool's, 20)")

    add_verb(sub, "mcp", cmd_mcp, graph=True, help="serve search_graph and explore_neighbors over MCP (stdio)",
             description="A Model Context Protocol server on stdin/stdout exposing the agent's "
                         "two graph tools with the same schemas and observation text.")
