"""``ark search``, ``ark neighbors``, ``ark mcp``: the agent's graph tools by hand, and over MCP.

    ark search "marfan syndrome" --graph demo -k 5 [--type disease]
    ark neighbors 12 --graph demo [--query "heart"] [--type gene/protein] [--relation associated_with]
    ark neighbors A2 --graph my_kg                # a graph's own id, as `ark search` shows it
    ark mcp --graph demo                          # MCP server on stdio: search_graph, explore_neighbors

``search`` and ``neighbors`` print exactly the observation the agent reads (they call the agent's
`ark.tools.toolset.ToolSet`), with its ids: the graph's own where it has them, and NODE is read in the
same ids (``--no-user-ids``: the internal ones for both); ``mcp`` serves the same tools (`ark.cli.mcp`).
``--switch find_paths=true`` offers an opt-in tool (`ark.tools`).
"""

from __future__ import annotations

import sys

from ark.cli.common import CLIError, add_tool_args, add_verb, open_tools


def _show(result, tools) -> int:
    """Print an observation exactly as the agent reads it; where it shows internal ids of a graph that has
    ids of its own (``--no-user-ids``), those ids to stderr."""
    if result.error:
        print(result.observation, file=sys.stderr)
        return 2
    print(result.observation)
    graph = tools.graph
    if graph.has_external_ids and not tools.ids.user and result.node_ids:
        print("external ids: " + ", ".join(f"[{i}] {graph.external_id(i)}" for i in result.node_ids),
              file=sys.stderr)
    return 0


def _tool_args(**kw) -> dict:
    return {k: v for k, v in kw.items() if v is not None and v != []}


def cmd_search(args) -> int:
    from ark.tools import SEARCH

    _, _, tools = open_tools(args)
    return _show(tools.call(SEARCH, _tool_args(query=args.query, k=args.k, node_types=args.type)), tools)


def cmd_neighbors(args) -> int:
    from ark.tools import NEIGHBORS

    _, _, tools = open_tools(args)   # NODE is read as the agent's node_id: in the ids the output shows
    return _show(tools.call(NEIGHBORS, _tool_args(node_id=args.node, query=args.query, k=args.k,
                                                  node_types=args.type, relations=args.relation)), tools)


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
    add_tool_args(p)

    p = add_verb(sub, "neighbors", cmd_neighbors, graph=True, help="explore_neighbors, printed as the agent reads it",
                 description="The one-hop neighbors of NODE in both directions: the agent's "
                             "explore_neighbors tool. NODE is an id as `ark search` shows it in brackets: "
                             "the graph's own id where it has them (a tables graph's id column, an RDF "
                             "graph's IRI), else, and with --no-user-ids, the internal id.")
    p.add_argument("node", help="node id, as the output shows it in brackets")
    p.add_argument("--query", "-q", default=None, help="rank the neighbors by BM25 of these keywords")
    p.add_argument("--type", "-t", action="append", default=[], help="only neighbors of this type (repeatable)")
    p.add_argument("--relation", "-r", action="append", default=[], help="only this relation (repeatable)")
    p.add_argument("-k", type=int, default=None, help="number of neighbors (default: the tool's, 20)")
    add_tool_args(p)

    p = add_verb(sub, "mcp", cmd_mcp, graph=True, help="serve search_graph and explore_neighbors over MCP (stdio)",
                 description="A Model Context Protocol server on stdin/stdout exposing the agent's "
                             "two graph tools with the same schemas and observation text.")
    add_tool_args(p)
