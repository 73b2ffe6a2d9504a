"""The ``ark`` command line: build, export and explore a graph, ask ARK a question, serve it over MCP.

    ark build --graph demo                       # build (or reuse) the graph cache, print statistics
    ark build --graph path/to/my_kg              # a folder of tables (nodes, edges, queries)
    ark export --graph demo --out demo_tables    # any graph -> the tables format
    ark search "marfan syndrome" --graph demo -k 5 [--type disease]
    ark neighbors 12 --graph demo [--query "heart"] [--type gene/protein] [--relation associated_with]
    ark ask "Which genes are linked to aortic aneurysm?" --graph demo --backbone local
    ark mcp --graph demo                         # MCP server on stdio: search_graph, explore_neighbors

``--graph`` is the name of a file in ``conf/graph/`` (its ``_target_`` builds the source) or a folder
holding tables. ``search`` and ``neighbors`` print exactly the observation the agent reads (they call
the agent's `ark.tools.toolset.ToolSet`). Every command has ``--help``; a bad value is one line naming it and
the valid choices. Written with argparse: the choices come from the configs and the loaded graph at run
time, and a failed parse can be cut to that one line (typer/click print usage blocks and panels).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from ark import logs

CONF_DIR = Path(__file__).resolve().parents[2] / "conf"


class CLIError(Exception):
    """A bad value given on the command line; printed as one line, exit status 2."""


def graph_choices() -> list[str]:
    """The graphs ``--graph`` accepts by name: the files of ``conf/graph/``."""
    return sorted(p.stem for p in (CONF_DIR / "graph").glob("*.yaml"))


def load_source(graph: str, root: str | Path = "data", overrides: Sequence[str] = ()):
    """The graph source for ``--graph``: a ``conf/graph/<graph>.yaml`` (``_target_`` + settings, with
    ``key=value`` ``overrides``), or a folder of tables (`ark.data.tables.TablesSource`)."""
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    path = Path(graph)
    if graph not in graph_choices() and path.is_dir():
        from ark.data.tables import TablesSource

        settings = dict(o.split("=", 1) for o in overrides)
        return TablesSource(path=path, root=root, **settings)
    choices = graph_choices()
    if graph not in choices:
        raise CLIError(f"unknown graph {graph!r}; valid graphs: {', '.join(choices)}, "
                       "or a folder with nodes and edges tables")
    for o in overrides:
        if "=" not in o:
            raise CLIError(f"bad graph setting {o!r}; write key=value (e.g. path=my_kg)")
    node = OmegaConf.merge({"paths": {"data": str(root)}},
                           {"graph": OmegaConf.load(CONF_DIR / "graph" / f"{graph}.yaml")},
                           OmegaConf.from_dotlist([f"graph.{o}" for o in overrides]))
    try:
        return instantiate(node.graph)
    except Exception as e:  # Hydra wraps the source's own ValueError; show the source's message
        cause = e.__cause__ or e
        raise CLIError(str(cause).splitlines()[0]) from None


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, not the usage block
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def _add_graph_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--graph", "-g", default="demo",
                   help=f"a conf/graph name ({', '.join(graph_choices())}) or a tables folder (default: demo)")
    p.add_argument("--root", default="data", help="data root: STaRK files and caches (default: data)")
    p.add_argument("--set", dest="settings", action="append", default=[], metavar="KEY=VALUE",
                   help="a setting of the graph source, e.g. --set path=my_kg --set name=my_kg (repeatable)")


def cmd_build(args) -> int:
    source = load_source(args.graph, args.root, args.settings)
    problems = source.problems()
    if problems:
        raise CLIError("; ".join(problems))
    graph = source.graph(rebuild=args.rebuild)
    stats = graph.stats()
    stats["cache"] = str(source.cache_dir)
    if not args.no_queries:
        try:
            queries = source.queries()
            stats["queries_per_split"] = {s: len(queries.split(s)) for s in queries.split_names()}
        except FileNotFoundError:
            stats["queries_per_split"] = {}
    if args.index:
        from ark.search.bm25 import load_index

        load_index(graph, source.cache_dir)
        stats["bm25_index"] = str(source.cache_dir / "bm25")
    print(json.dumps(stats, indent=2))
    return 0


def cmd_export(args) -> int:
    from ark.data.tables import export

    source = load_source(args.graph, args.root, args.settings)
    problems = source.problems()
    if problems:
        raise CLIError("; ".join(problems))
    graph = source.graph()
    queries = None if args.no_queries else source.queries()
    out = export(graph, args.out, queries, fmt=args.format, force=args.force)
    print(f"wrote {graph.num_nodes:,} nodes, {graph.num_edges:,} edges"
          + (f", {len(queries):,} queries" if queries is not None else "") + f" to {out}")
    return 0


def open_tools(args, config=None):
    """(source, graph, ToolSet) for a command: the graph, its cached BM25 index, the agent's tools."""
    from ark.search.bm25 import load_index
    from ark.tools import ToolConfig, ToolSet

    source = load_source(args.graph, args.root, args.settings)
    problems = source.problems()
    if problems:
        raise CLIError("; ".join(problems))
    graph = source.graph()
    return source, graph, ToolSet(graph, load_index(graph, source.cache_dir), config or ToolConfig())


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


def load_backbone(name: str, base_url: str | None = None, model: str | None = None):
    """A `BackboneConfig` from ``conf/backbone/<name>.yaml``, with ``base_url``/``model`` replaced when
    given (any OpenAI-compatible endpoint)."""
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    choices = sorted(p.stem for p in (CONF_DIR / "backbone").glob("*.yaml"))
    if name not in choices:
        raise CLIError(f"unknown backbone {name!r}; valid backbones: {', '.join(choices)}")
    node = OmegaConf.load(CONF_DIR / "backbone" / f"{name}.yaml")
    if base_url:
        node.base_url = base_url
    if model:
        node.model = model
    return instantiate(node)


def cmd_ask(args) -> int:
    from ark.cli.ask import ask

    source, graph, tools = open_tools(args)
    backbone = load_backbone(args.backbone, args.base_url, args.model)
    cache = None if args.no_cache else str(Path(args.root) / "cache" / "llm" / f"{backbone.name}.sqlite")
    return ask(args.question, graph, tools, backbone, n_agents=args.agents, t_max=args.steps, top=args.top,
               llm_cache=cache, full=args.full)


def cmd_mcp(args) -> int:
    from ark.cli.mcp import build_server

    _, graph, tools = open_tools(args)
    build_server(tools, name=f"ark-{graph.name}").run("stdio")
    return 0


def _command(sub, name: str, func, **texts) -> argparse.ArgumentParser:
    """The parser of one subcommand (``help``/``description`` in ``texts``): the graph options, then
    the command's own, which the caller adds; running it calls ``func(args)``."""
    p = sub.add_parser(name, **texts)
    p.set_defaults(func=func)
    _add_graph_args(p)
    return p


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="ark", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="also show third-party libraries' log lines (bm25s, httpx...) on stderr")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = _command(sub, "build", cmd_build, help="build (or reuse) a graph's cache and print its statistics",
                 description="Build the graph cache under <root>/cache/<name> (a tables graph: "
                             "<name>-<hash of its folder>; rebuilt when the input files change) and "
                             "print node, edge and query counts.")
    p.add_argument("--rebuild", action="store_true", help="rebuild even when the cache is valid")
    p.add_argument("--index", action="store_true", help="also build the BM25 index the tools use")
    p.add_argument("--no-queries", action="store_true", help="do not read the query sets")

    p = _command(sub, "export", cmd_export, help="write a graph (and its queries) in the tables format",
                 description="Write nodes, edges, queries and graph.json to a new folder; "
                             "loading it back gives the same documents, neighbors and queries.")
    p.add_argument("--out", "-o", required=True, help="the folder to write (must be new or empty)")
    p.add_argument("--format", "-f", default="parquet", choices=["parquet", "csv", "jsonl"],
                   help="table format (default: parquet)")
    p.add_argument("--no-queries", action="store_true", help="leave the queries out")
    p.add_argument("--force", action="store_true", help="replace a non-empty --out folder")

    p = _command(sub, "search", cmd_search, help="search_graph, printed as the agent reads it",
                 description="BM25 search over every node's document: the agent's search_graph tool.")
    p.add_argument("query", help="keywords")
    p.add_argument("-k", type=int, default=None, help="number of nodes (default: the tool's, 5)")
    p.add_argument("--type", "-t", action="append", default=[], help="only nodes of this type (repeatable)")

    p = _command(sub, "neighbors", cmd_neighbors, help="explore_neighbors, printed as the agent reads it",
                 description="The one-hop neighbors of NODE in both directions: the agent's "
                             "explore_neighbors tool. NODE is the graph's own id (a tables graph's "
                             "id column) or the internal id shown in brackets.")
    p.add_argument("node", help="node id")
    p.add_argument("--query", "-q", default=None, help="rank the neighbors by BM25 of these keywords")
    p.add_argument("--type", "-t", action="append", default=[], help="only neighbors of this type (repeatable)")
    p.add_argument("--relation", "-r", action="append", default=[], help="only this relation (repeatable)")
    p.add_argument("-k", type=int, default=None, help="number of neighbors (default: the tool's, 20)")

    p = _command(sub, "ask", cmd_ask, help="run ARK on one question, live",
                 description="Run n ARK agents on one question and show each tool call and "
                             "observation as it happens, then the fused ranked answer.")
    p.add_argument("question")
    p.add_argument("--backbone", "-b", default="local",
                   help="a conf/backbone name (default: local, llama.cpp started for the call)")
    p.add_argument("--base-url", default=None, help="any OpenAI-compatible endpoint, e.g. http://host:8000/v1")
    p.add_argument("--model", default=None, help="the model name to request from that endpoint")
    p.add_argument("--agents", "-n", type=int, default=3, help="parallel agents (default: 3)")
    p.add_argument("--steps", type=int, default=20, help="T_max, steps per agent (default: 20)")
    p.add_argument("--top", type=int, default=10, help="answers shown (default: 10)")
    p.add_argument("--full", action="store_true", help="show whole observations, not their first lines")
    p.add_argument("--no-cache", action="store_true", help="do not answer from or write the LLM cache")

    _command(sub, "mcp", cmd_mcp, help="serve search_graph and explore_neighbors over MCP (stdio)",
             description="A Model Context Protocol server on stdin/stdout exposing the agent's "
                         "two graph tools with the same schemas and observation text.")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logs.setup(verbose=args.verbose)
    try:
        return args.func(args) or 0
    except CLIError as e:
        print(f"ark {args.command}: error: {e}", file=sys.stderr)
        return 2
    except (ValueError, FileNotFoundError, KeyError) as e:
        msg = e.args[0] if isinstance(e, KeyError) and e.args else e
        print(f"ark {args.command}: error: {msg}", file=sys.stderr)
        return 2


def entry() -> None:
    """The console script ``ark``."""
    sys.exit(main())


if __name__ == "__main__":
    entry()
