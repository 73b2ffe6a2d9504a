"""What every verb of the ``ark`` command shares: the one-line error, the parser, the graph options, the
tool options (``--user-ids``, ``--switch``), and opening a graph with the agent's tools.

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
    from ark.home import ENV, ark_home

    p.add_argument("--root", default=str(ark_home()),
                   help=f"data root: STaRK's files under <root>/stark, caches under <root>/cache (default: "
                        f"{ENV}, here %(default)s)")


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


def add_tool_args(p: argparse.ArgumentParser) -> None:
    """The options of the agent's tools: which ids they show and take, and the tool switches."""
    p.add_argument("--user-ids", action=argparse.BooleanOptionalAction, default=None,
                   help="show and take the graph's own node ids (the default where it has them: tables, RDF); "
                        "--no-user-ids: the internal ids 0..N-1 (ablation.tools.user_ids)")
    p.add_argument("--switch", dest="switches", action="append", default=[], metavar="NAME=true|false",
                   help="a tool switch, e.g. --switch find_paths=true offers find_paths (repeatable; "
                        "ablation.tools.switches)")


def tool_config(args):
    """The `ToolConfig` of ``--user-ids`` and ``--switch`` (a bad switch is one line naming the valid ones)."""
    from dataclasses import fields

    from ark.tools import ToolConfig, switch_names

    valid = switch_names()
    flags = {f.name for f in fields(ToolConfig) if f.type in (bool, "bool")}
    values: dict[str, bool] = {}
    for text in getattr(args, "switches", []) or []:
        name, sep, value = text.partition("=")
        if name not in valid:
            raise CLIError(f"unknown tool switch {name!r}; valid switches: {', '.join(valid)}")
        if not sep or value.strip().lower() not in ("true", "false"):
            raise CLIError(f"--switch {text!r}: write {name}=true or {name}=false")
        values[name] = value.strip().lower() == "true"
    kw = {k: v for k, v in values.items() if k in flags}
    switches = {k: v for k, v in values.items() if k not in flags}
    return ToolConfig(user_ids=getattr(args, "user_ids", None), switches=switches, **kw)


def open_tools(args, config=None):
    """(source, graph, ToolSet) for a verb: the graph, its cached BM25 index, the agent's tools (as
    ``config``, else as the verb's ``--user-ids``/``--switch`` say)."""
    from ark.search.bm25 import load_index
    from ark.tools import ToolSet

    config = config or tool_config(args)   # checked before the graph is loaded
    source = open_source(args)
    graph = source.graph()
    return source, graph, ToolSet(graph, load_index(graph, source.cache_dir), config)


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


def add_agent_args(p: argparse.ArgumentParser, backbone_default: str | None, whose: str = "") -> None:
    """The options of ARK on one question (`ark ask`, the MCP server's ask tool): the backbone, its
    endpoint and model, n and T_max, the LLM cache. ``whose`` prefixes their help (e.g. "ask's")."""
    lead = f"{whose} " if whose else ""
    p.add_argument("--backbone", "-b", default=backbone_default,
                   help="a conf/backbone name" + (" (default: local, llama.cpp started for the call)"
                                                  if backbone_default == "local" else
                                                  ": adds the ask tool, ARK with this backbone (default: no ask)"))
    p.add_argument("--base-url", default=None, help=f"{lead or 'an '}OpenAI-compatible endpoint, e.g. http://host:8000/v1")
    p.add_argument("--model", default=None, help="the model name to request from that endpoint")
    p.add_argument("--n-agents", "-n", type=positive("--n-agents"), default=3,
                   help=f"{lead}n, parallel agents (budget.agent.n_agents; default: 3)")
    p.add_argument("--t-max", type=positive("--t-max"), default=20,
                   help=f"{lead}T_max, steps per agent (budget.agent.t_max; default: 20)")
    p.add_argument("--no-cache", action="store_true", help=f"{lead}do not answer from or write the LLM cache")


def say(*lines: str) -> None:
    """Progress for the person at the terminal (stderr, so stdout stays the verb's result)."""
    print(*lines, sep="\n", file=sys.stderr)
