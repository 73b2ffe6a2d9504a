"""The ``ark`` command: one family of verbs over the library, the same calls the Hydra entry points make.

    ark download prime --root data               # STaRK's files from the hub into data/stark
    ark build --graph demo                       # build (or reuse) a graph's cache, print statistics
    ark export --graph demo --out demo_tables    # any graph -> the tables format
    ark search "marfan syndrome" --graph demo -k 5 [--type disease]
    ark neighbors 12 --graph demo [--query "heart"] [--type gene/protein] [--relation "associated with"]
    ark ask "Which genes are linked to aortic aneurysm?" --graph demo --backbone local [--n-agents 3 --t-max 20]
    ark mcp --graph demo [--http 127.0.0.1:8765] [--backbone gpt-4.1]   # MCP: the graph tools, ark://graph, ask
    ark serve                                    # the local llama.cpp server, until Ctrl-C
    ark run graph=demo backbone=local limit=5    # an evaluation run; ark run -m ... for a Hydra sweep
    ark merge RUN_DIR                            # join the shards of a run
    ark diagnose graph=demo                      # the reachability ceiling of a query set, no LLM
    ark compare RUN REFERENCE                    # paired differences over the same queries
    ark attribute RUN...                         # where gold nodes were found or lost
    ark table1 [--reproduce ...]                 # the paper's Table 1 (from runs, or run it first)
    ark figures results/runs --out results/figures
    ark viewer RUN --out viewer.html             # an HTML trajectory viewer
    ark --version

One module per group of verbs (`ark.cli.graphs`: download, build, export; `ark.cli.tools`: search,
neighbors, mcp; `ark.cli.llm`: ask, serve; `ark.cli.runs`: run, merge, diagnose; `ark.cli.reports`:
compare, attribute, table1, figures, viewer). One name per setting across them: ``--root`` is the
data root (STaRK under ``<root>/stark``, caches under ``<root>/cache``; default ARK_HOME, `ark.home`), ``--t-max`` and ``--n-agents``
are ``budget.agent.t_max`` and ``budget.agent.n_agents``; ``run`` and ``diagnose`` take Hydra's
``key=value`` overrides. ``--graph`` is the name of a file in ``conf/graph/`` (its ``_target_`` builds
the source) or a folder holding tables. Every verb has ``--help``; a value the user can fix ends in one
line, ``ark <verb>: error: ...``, exit status 2. Written with argparse: the choices come from the
configs and the loaded graph at run time, and a failed parse can be cut to that one line (typer/click
print usage blocks and panels).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence

import ark
from ark import logs
from ark.cli import graphs, llm, reports, runs, tools
from ark.cli.common import CLIError, Parser

GROUPS = (graphs, tools, llm, runs, reports)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="ark", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"ark {ark.__version__}")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="also show third-party libraries' log lines (bm25s, httpx...) on stderr")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for group in GROUPS:
        group.register(sub)
    parser.set_defaults(verbs=sub.choices)
    return parser


def one_line(text: str) -> str:
    """A message on one line: a list of problems ("head:\\n  - a\\n  - b") becomes "head: a; b", Hydra's
    list of choices ("...:\\n\\ta\\n\\tb") "...: a, b"."""
    text = str(text).split("\nConfig search path")[0]   # Hydra's composition errors end with its search path
    text = re.sub(r":\s*\n\t", ": ", text)
    text = re.sub(r"\n\t", ", ", text)
    parts = [re.sub(r"^- ", "", p.strip()) for p in text.splitlines() if p.strip()]
    if len(parts) > 1 and parts[0].endswith(":"):
        return " ".join(f"{parts[0]} {'; '.join(parts[1:])}".split())
    return " ".join("; ".join(parts).split())


def _is_config_error(e: BaseException) -> bool:
    return type(e).__module__.split(".")[0] in ("hydra", "omegaconf")


def _user_error(e: BaseException) -> str | None:
    """The one line for an error that is the user's to fix and not already a ValueError: a file or
    folder the command may not read or write, a key the backbone needs; None for anything else."""
    if isinstance(e, (PermissionError, IsADirectoryError, NotADirectoryError, FileExistsError)):
        return f"{e.filename or ''}{': ' if e.filename else ''}{e.strerror or e}"
    from ark.llm.client import MissingCredentialsError

    return str(e) if isinstance(e, MissingCredentialsError) else None


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra and isinstance(getattr(args, "overrides", None), list):
        # key=value settings after an option (`table1 --reproduce limit=5 --runs R estimate=true`): argparse
        # takes a verb's positional settings in one stretch only; the later ones are settings all the same
        late = [a for a in extra if "=" in a and not a.startswith("-")]
        args.overrides = [*args.overrides, *late]
        extra = [a for a in extra if not ("=" in a and not a.startswith("-"))]
    if extra:   # reported by the verb, in one line (Hydra's settings are key=value, not --key)
        hint = "; settings are key=value, e.g. limit=5" if args.command in ("run", "diagnose", "table1") else ""
        args.verbs[args.command].error(f"unrecognized arguments: {' '.join(extra)}{hint}")
    logs.setup(verbose=args.verbose)

    def fail(msg) -> int:
        print(f"ark {args.command}: error: {one_line(msg)}", file=sys.stderr)
        return 2

    try:
        return args.func(args) or 0
    except CLIError as e:
        return fail(e)
    except (ValueError, FileNotFoundError, KeyError) as e:
        return fail(e.args[0] if isinstance(e, KeyError) and e.args else e)
    except SystemExit as e:   # the library's stop before work: a message, not a status
        if e.code is None or isinstance(e.code, int):
            raise
        return fail(e.code)
    except Exception as e:
        if _is_config_error(e):   # a bad override or option name (Hydra's composition)
            return fail(e)
        if _user_error(e) is not None:
            return fail(_user_error(e))
        raise


def entry() -> None:
    """The console script ``ark``."""
    sys.exit(main())


if __name__ == "__main__":
    entry()
