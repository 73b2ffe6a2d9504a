"""``ark search``, ``ark neighbors``, ``ark mcp``: the agent's graph tools by hand, and over MCP.

    ark search "marfan syndrome" --graph demo -k 5 [--type disease]
    ark neighbors 12 --graph demo [--query "heart"] [--type gene/protein] [--relation "associated with"]
    ark neighbors A2 --graph my_kg                # a graph's own id, as `ark search` shows it
    ark mcp --graph demo                          # MCP server on stdio: search_graph, explore_neighbors, ark://graph
    ark mcp --graph my_kg --http 127.0.0.1:8765 [--backbone gpt-4.1]   # streamable HTTP at /mcp; + ask

``search`` and ``neighbors`` print exactly the observation the agent reads (they call the agent's
`ark.tools.toolset.ToolSet`), with its ids: the graph's own where it has them, and NODE is read in the
same ids (``--no-user-ids``: the internal ones for both); ``mcp`` serves the same tools (`ark.cli.mcp`).
``--switch find_paths=true`` offers an opt-in tool (`ark.tools`). ``--relation`` takes a relation as the
output shows it (``"associated with"``), or with ``_`` for its spaces (``associated_with``) in any case; an
unknown one is one line listing the graph's relations.
"""

from __future__ import annotations

import sys

from ark.cli.common import CLIError, add_agent_args, add_tool_args, add_verb, open_tools


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


def relation_names(given: list[str], graph) -> list[str]:
    """The graph's names of the ``--relation`` values: a name as the graph has it, or the same with ``_``
    for spaces and in any case (``associated_with`` for ``associated with``); a value that names none, or
    more than one, is a CLIError listing the graph's relations."""
    names = list(graph.relation_names)

    def key(name: str) -> str:
        return " ".join(name.replace("_", " ").lower().split())

    out = []
    for value in given:
        if value in names:
            out.append(value)
            continue
        found = [n for n in names if key(n) == key(value)]
        if len(found) != 1:
            what = "unknown" if not found else "ambiguous"
            raise CLIError(f"{what} relation {value!r} for graph {graph.name}; valid relations: "
                           + ", ".join(repr(n) for n in names))
        out.append(found[0])
    return out


def cmd_neighbors(args) -> int:
    from ark.tools import NEIGHBORS

    _, graph, tools = open_tools(args)   # NODE is read as the agent's node_id: in the ids the output shows
    relations = relation_names(args.relation, graph)
    return _show(tools.call(NEIGHBORS, _tool_args(node_id=args.node, query=args.query, k=args.k,
                                                  node_types=args.type, relations=relations)), tools)


def cmd_mcp(args) -> int:
    from pathlib import Path

    from ark.cli.common import say
    from ark.cli.mcp import ASK_CAP_USD, HTTP_PATH, TOKEN_ENV, Asker, bearer_token, build_server, check_listen, parse_http, serve
    from ark.cost.prices import money
    from ark.llm.local_server import serving

    http = parse_http(args.http) if args.http else None
    token, made = None, False
    if http:
        check_listen(*http)                       # before the graph is loaded
        token, made = bearer_token(http[0])
    if args.allow_origin and token is None:
        raise CLIError("--allow-origin is for a server that asks for a token (bound beyond loopback, or with "
                       f"{TOKEN_ENV} set); on loopback only local origins are accepted")
    ask_cap = ASK_CAP_USD if args.ask_max_usd is None else args.ask_max_usd
    if not ask_cap >= 0:
        raise CLIError(f"--ask-max-usd takes US$ >= 0, got {ask_cap:g}")
    backbone = None
    if args.backbone:
        from ark.config.options import backbone_config

        backbone = backbone_config(args.backbone, args.base_url, args.model)
    elif args.base_url or args.model:
        raise CLIError("--base-url and --model set the ask tool's backbone; give it with --backbone NAME")
    _, graph, tools = open_tools(args)
    tools.warm_up()   # numba's kernels and the id lookup, while the first client connects
    asker = None
    if backbone is not None:
        cache = None if args.no_cache else str(Path(args.root) / "cache" / "llm" / f"{backbone.name}.sqlite")
        if cache:
            Path(cache).parent.mkdir(parents=True, exist_ok=True)
        asker = Asker(tools, backbone, n_agents=args.n_agents, t_max=args.t_max, llm_cache=cache,
                      cap_usd=ask_cap)
    server = build_server(tools, name=f"ark-{graph.name}", asker=asker, verbose=getattr(args, "verbose", False))
    served = ", ".join(tools.tool_names + (["ask"] if asker else []))
    where = f"http://{http[0]}:{http[1]}{HTTP_PATH} (streamable HTTP; Ctrl-C stops)" if http else "stdio"
    say(f"ark mcp: {graph.name} ({graph.num_nodes:,} nodes, {tools.ids.space} ids): {served} and the "
        f"ark://graph resource on {where}")
    if asker is not None:
        say(f"ark mcp: ask may spend up to ${money(ask_cap)} in this server's life (--ask-max-usd); "
            "each answer says what it has paid")
    if token is not None:
        say(f"ark mcp: every request needs 'Authorization: Bearer <token>'; browser origins allowed: "
            f"{', '.join(args.allow_origin) or 'none'} (--allow-origin)")
        if made:   # printed here once, written nowhere else
            say(f"ark mcp: the token (set {TOKEN_ENV} to choose it): {token}")
    with serving(backbone):   # backbone=local: llama.cpp for as long as the server runs
        try:
            serve(server, http, token=token, origins=args.allow_origin)
        except KeyboardInterrupt:
            pass
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
    p.add_argument("--relation", "-r", action="append", default=[],
                   help='only neighbors linked by this relation, as the output names it (e.g. --relation '
                        '"associated with"; _ for a space also works: associated_with); a name the graph '
                        'lacks is answered with the list of its relations (repeatable)')
    p.add_argument("-k", type=int, default=None, help="number of neighbors (default: the tool's, 20)")
    add_tool_args(p)

    p = add_verb(sub, "mcp", cmd_mcp, graph=True,
                 help="serve the graph tools, the graph's description and optionally ask over MCP",
                 description="A Model Context Protocol server exposing the agent's graph tools with the same "
                             "schemas and observation text, the resource ark://graph (node types, relations, "
                             "counts, id format) and, with --backbone, the tool ask (ARK on one question). "
                             "stdio by default; --http HOST:PORT serves streamable HTTP at "
                             "http://HOST:PORT/mcp, one graph for every client.")
    add_tool_args(p)
    p.add_argument("--http", default=None, metavar="HOST:PORT",
                   help="serve streamable HTTP at http://HOST:PORT/mcp instead of stdio (e.g. 127.0.0.1:8765); "
                        "beyond loopback every request needs a bearer token: $ARK_MCP_TOKEN, else one printed "
                        "once at start")
    p.add_argument("--allow-origin", action="append", default=[], metavar="ORIGIN",
                   help="a browser origin allowed to call a server that asks for a token, e.g. "
                        "https://app.example.org (repeatable; default none: requests with an Origin header "
                        "are refused)")
    p.add_argument("--ask-max-usd", type=float, default=None, metavar="USD",
                   help="what ask may spend in this server's life (default 1 US$, ark.cli.mcp.ASK_CAP_USD); "
                        "once reached, ask is refused in one line")
    add_agent_args(p, backbone_default=None, whose="ask's")
