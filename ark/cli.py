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
the agent's `ark.tools.ToolSet`). Every command has ``--help``; a bad value is one line naming it and
the valid choices. Written with argparse: the choices come from the configs and the loaded graph at run
time, and a failed parse can be cut to that one line (typer/click print usage blocks and panels).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

CONF_DIR = Path(__file__).resolve().parents[1] / "conf"


class CLIError(Exception):
    """A bad value given on the command line; printed as one line, exit status 2."""


def graph_choices() -> list[str]:
    """The graphs ``--graph`` accepts by name: the files of ``conf/graph/``."""
    return sorted(p.stem for p in (CONF_DIR / "graph").glob("*.yaml"))


def load_source(graph: str, root: str | Path = "data", overrides: Sequence[str] = ()):
    """The graph source for ``--graph``: a ``conf/graph/<graph>.yaml`` (``_target_`` + settings, with
    ``key=value`` ``overrides``), or a folder of tables (`ark.tables.TablesSource`)."""
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    path = Path(graph)
    if graph not in graph_choices() and path.is_dir():
        from ark.tables import TablesSource

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
        from ark.text_index import load_index

        load_index(graph, source.cache_dir)
        stats["bm25_index"] = str(source.cache_dir / "bm25")
    print(json.dumps(stats, indent=2))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="ark", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress to stderr")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = sub.add_parser("build", help="build (or reuse) a graph's cache and print its statistics",
                       description="Build the graph cache under <root>/cache/<name> (rebuilt when the input "
                                   "files change) and print node, edge and query counts.")
    _add_graph_args(p)
    p.add_argument("--rebuild", action="store_true", help="rebuild even when the cache is valid")
    p.add_argument("--index", action="store_true", help="also build the BM25 index the tools use")
    p.add_argument("--no-queries", action="store_true", help="do not read the query sets")
    p.set_defaults(func=cmd_build)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(message)s",
                        stream=sys.stderr)
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
