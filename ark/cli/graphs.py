"""``ark download``, ``ark build``, ``ark export``: get a graph's files, build its cache, write it as tables.

    ark download prime --root data               # STaRK's files from the hub into data/stark (or: all)
    ark download prime --root data --check       # which of them are missing (offline; exit 1 if any)
    ark build --graph demo                       # build (or reuse) the graph cache under ARK_HOME, print statistics
    ark build --graph path/to/my_kg --index      # a folder of tables, and its BM25 index
    ark export --graph demo --out demo_tables    # any graph -> the tables format
"""

from __future__ import annotations

import json
from pathlib import Path

from ark.cli.common import CLIError, add_root_arg, add_verb, open_source, say
from ark.home import ENV, ark_home, home_origin


def cmd_download(args) -> int:
    from ark.data import stark

    if args.name not in (*stark.STARK_GRAPHS, "all"):
        raise CLIError(f"unknown STaRK graph {args.name!r}; valid: {', '.join(stark.STARK_GRAPHS)}, all")
    root = Path(args.root) / "stark"
    names = stark.STARK_GRAPHS if args.name == "all" else (args.name,)
    status = 0
    for name in names:
        if args.check:
            missing = stark.missing_files(name, root)
            print(json.dumps({"graph": name, "root": str(root), "missing": missing}))
            status |= bool(missing)
            continue
        try:
            stark.download(name, root, progress=not args.no_progress)
        except (stark.StarkDownloadError, stark.StarkFileError) as e:
            raise CLIError(str(e)) from None
        print(f"{name}: all files present under {root}")
    return status


def cmd_build(args) -> int:
    source = open_source(args)
    graph = source.graph(rebuild=args.rebuild)
    stats = graph.stats()
    stats["root"] = str(source.root.absolute())
    stats["cache"] = str(source.cache_dir.absolute())
    stats.update(source.build_stats())
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
    say(f"data root {stats['root']}: {_root_origin(args.root)}; caches under {stats['root']}/cache "
        f"(move them with {ENV}=/other/dir or --root)")
    return 0


def _root_origin(root: str) -> str:
    """Why the data root is ``root``: ARK_HOME (and where that comes from), or ``--root``."""
    return home_origin() if Path(root).absolute() == ark_home() else "--root"


def cmd_export(args) -> int:
    from ark.data.tables.write import check_export_target, export

    check_export_target(args.out, args.force)   # before the graph is loaded: a bad --out costs nothing
    source = open_source(args)
    graph = source.graph()
    queries = None if args.no_queries else source.queries()
    try:
        out = export(graph, args.out, queries, fmt=args.format, force=args.force)
    except OSError as e:   # e.g. a folder the user may not write
        raise CLIError(f"cannot write {args.out}: {e.strerror or e}") from None
    print(f"wrote {graph.num_nodes:,} nodes, {graph.num_edges:,} edges"
          + (f", {len(queries):,} queries" if queries is not None else "") + f" to {out}")
    return 0


def register(sub) -> None:
    p = add_verb(sub, "download", cmd_download, help="fetch STaRK's files from the Hugging Face hub",
                 description="Fetch exactly the files stark-qa fetches for a STaRK graph (only the missing "
                             "ones) from the hub (HF_ENDPOINT for a mirror) into <root>/stark; without a "
                             "reachable hub, one line names the missing files and the ways out.")
    p.add_argument("name", help="a STaRK graph (prime, mag, amazon), or all")
    add_root_arg(p)
    p.add_argument("--check", action="store_true",
                   help="only list the missing files, offline (exit status 1 when some are missing)")
    p.add_argument("--no-progress", action="store_true", help="hide the download progress bars")

    p = add_verb(sub, "build", cmd_build, graph=True, help="build (or reuse) a graph's cache and print its statistics",
                 description="Build the graph cache under <root>/cache/<name> (a tables graph: "
                             "<name>-<hash of its folder's absolute path>; rebuilt when the input files "
                             "change) and print node, edge and query counts and the data root (ARK_HOME "
                             "unless --root is given).")
    p.add_argument("--rebuild", action="store_true", help="rebuild even when the cache is valid")
    p.add_argument("--index", action="store_true", help="also build the BM25 index the tools use")
    p.add_argument("--no-queries", action="store_true", help="do not read the query sets")

    p = add_verb(sub, "export", cmd_export, graph=True, help="write a graph (and its queries) in the tables format",
                 description="Write nodes, edges, queries and graph.json to a new folder; "
                             "loading it back gives the same documents, neighbors and queries.")
    p.add_argument("--out", "-o", required=True, help="the folder to write (must be new or empty)")
    p.add_argument("--format", "-f", default="parquet", choices=["parquet", "csv", "jsonl"],
                   help="table format (default: parquet)")
    p.add_argument("--no-queries", action="store_true", help="leave the queries out")
    p.add_argument("--force", action="store_true",
                   help="replace an --out folder that an earlier export wrote (nothing else is ever replaced)")
