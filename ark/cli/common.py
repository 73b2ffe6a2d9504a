"""What every verb of the ``ark`` command shares: the one-line error, the parser, the graph options,
and opening a graph with the agent's tools.

A verb raises `CLIError` (or ValueError, FileNotFoundError, KeyError from the library) for a value the
user can fix; `ark.cli.main` prints it as one line, ``ark <verb>: error: ...``, and exits with 2.
"""

from __future__ import annotations

import argparse
import sys

from ark.config.location import option_names


class CLIError(Exception):
    """A bad value given on the command line; printed as one line, exit status 2."""


class Parser(argparse.ArgumentParser):
    """argparse, with a failed parse cut to one line (not the usage block)."""

    def error(self, message: str) -> None:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def add_verb(sub, name: str, func, graph: bool = False, **texts) -> argparse.ArgumentParser:
    """The parser of one verb (``help``/``description`` in ``texts``; the graph options when ``graph``);
    running it calls ``func(args)``."""
    p = sub.add_parser(name, **texts)
    p.set_defaults(func=func)
    if graph:
        add_graph_args(p)
    return p


def add_root_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--root", default="data",
                   help="data root: STaRK's files under <root>/stark, caches under <root>/cache (default: data)")


def add_graph_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--graph", "-g", default="demo",
                   help=f"a conf/graph name ({', '.join(option_names('graph'))}) or a tables folder (default: demo)")
    add_root_arg(p)
    p.add_argument("--set", dest="settings", action="append", default=[], metavar="KEY=VALUE",
                   help="a setting of the graph source, e.g. --set path=my_kg --set name=my_kg (repeatable)")


def open_source(args):
    """The graph source of ``--graph``/``--root``/``--set``, its input files checked."""
    from ark.config.options import graph_source

    source = graph_source(args.graph, args.root, args.settings)
    problems = source.problems()
    if problems:
        raise CLIError("; ".join(problems))
    return source


def open_tools(args, config=None):
    """(source, graph, ToolSet) for a verb: the graph, its cached BM25 index, the agent's tools."""
    from ark.search.bm25 import load_index
    from ark.tools import ToolConfig, ToolSet

    source = open_source(args)
    graph = source.graph()
    return source, graph, ToolSet(graph, load_index(graph, source.cache_dir), config or ToolConfig())


def positive(name: str):
    """An argparse type: a whole number >= 1 (a bad one fails the parse in one line naming ``name``)."""
    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            v = 0
        if v < 1:
            raise argparse.ArgumentTypeError(f"{name} must be a whole number >= 1, got {text!r}")
        return v
    return parse


def say(*lines: str) -> None:
    """Progress for the person at the terminal (stderr, so stdout stays the verb's result)."""
    print(*lines, sep="\n", file=sys.stderr)
