"""The knowledge-graph store: typed nodes with text, typed edges, CSR adjacency, and an on-disk cache.

Every other part of ARK sees a graph only through `KnowledgeGraph`:

* nodes ``0..N-1``, each with a type, a name and a document text (for STaRK graphs the text equals
  stark-qa's ``get_doc_info(i, add_rel=False, compact=False)``);
* a node-type vocabulary and a relation-type vocabulary;
* stored (directed) edges with a relation type. The CSR adjacency holds every stored edge twice, at its
  source as *outgoing* and at its target as *incoming*, so one node's neighbors in both directions,
  filtered by node types and relation types, come back in time proportional to its degree. Which
  edges are stored is the loader's choice (`ark.data.stark.read_graph`'s ``edges``: as in the files, or
  stark-qa's undirected merge); `both_ways_relations` names the relations stored in both directions.
  A graph read with ``edges="stark"`` (`outgoing_only`) answers `neighbors` as stark-qa's
  ``get_neighbor_nodes`` does: from the node's own stored edges only (its row of the adjacency), so a
  pair stored ``a -r1-> b`` and ``b -r0-> a`` is an ``r1`` neighbor of ``a`` and an ``r0`` neighbor of ``b``.

Cache layout (``save``/``load``): ``indptr.npy``, ``nbr.npy``, ``rel.npy``, ``out.npy``,
``nbr_type.npy`` (the neighbor's node type per CSR row, int8/int16, so a type filter reads the row's
slice sequentially instead of gathering ``node_types`` at random), ``node_types.npy``,
``candidate_ids.npy`` (memory-mapped on load), ``texts.arrow`` (Arrow IPC file
with columns ``name``, ``text`` and, when the source has ids of its own, ``external_id``; memory-mapped)
and ``meta.json``, written last, with the
vocabularies, the sizes and a checksum per file. A truncated or corrupted cache raises
`CacheError`; a graph source (`ark.data.sources`) then rebuilds it.

``ark build --graph <name>`` prints a graph's statistics (`KnowledgeGraph.stats`).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
from numba import njit

from ark import atomic

CACHE_VERSION = 2
_ARRAYS = ("indptr", "nbr", "rel", "out", "nbr_type", "node_types", "candidate_ids")


class CacheError(RuntimeError):
    """A graph cache on disk is missing, truncated or corrupted."""


@dataclass(frozen=True)
class NeighborEdges:
    """The (edge, direction) rows incident to one node that passed the filters, in CSR order."""

    nodes: np.ndarray  # int64 neighbor ids
    relations: np.ndarray  # int32 relation-type ids
    outgoing: np.ndarray  # bool: True if the stored edge is v -> u, False if u -> v

    def __len__(self) -> int:
        return len(self.nodes)


@njit(cache=True, nogil=True)
def _filter_rows(nbr, rel, out, nbr_type, rel_ok, type_ok, outgoing_only):
    """The rows of one CSR slice whose relation and neighbor type are allowed (and, with
    ``outgoing_only``, that are the node's own stored edges), in one pass."""
    n = len(nbr)
    nodes = np.empty(n, dtype=np.int64)
    rels = np.empty(n, dtype=np.int32)
    outs = np.empty(n, dtype=np.bool_)
    c = 0
    for i in range(n):
        if rel_ok[rel[i]] and type_ok[nbr_type[i]] and (out[i] or not outgoing_only):
            nodes[c] = nbr[i]
            rels[c] = rel[i]
            outs[c] = out[i]
            c += 1
    return nodes[:c].copy(), rels[:c].copy(), outs[:c].copy()


@njit(cache=True, nogil=True)
def _one_way_relations(indptr, nbr, rel, out, num_relations):
    """Relations with at least one stored edge whose reverse (same relation) is not stored.

    In the CSR a stored edge v -r-> u is the row (u, out, r) at v, and its reverse u -r-> v is the row
    (u, in, r) at v; a relation is stored both ways when every such row has its partner."""
    one_way = np.zeros(num_relations, dtype=np.bool_)
    for v in range(len(indptr) - 1):
        i, hi = indptr[v], indptr[v + 1]
        while i < hi:
            j = i
            while j < hi and nbr[j] == nbr[i]:
                j += 1
            for a in range(i, j):
                if one_way[rel[a]]:
                    continue
                partner = False
                for b in range(i, j):
                    if rel[b] == rel[a] and out[b] != out[a]:
                        partner = True
                        break
                if not partner:
                    one_way[rel[a]] = True
            i = j
    return one_way


def _nbr_type_array(node_types: np.ndarray, nbr: np.ndarray, num_types: int) -> np.ndarray:
    dtype = np.int8 if num_types <= 127 else np.int16 if num_types <= 32767 else np.int32
    return np.asarray(node_types)[np.asarray(nbr)].astype(dtype)


def _choice_error(kind: str, bad: object, valid: Sequence[str]) -> ValueError:
    return ValueError(f"unknown {kind} {bad!r}; valid {kind}s: {', '.join(map(repr, valid))}")


class KnowledgeGraph:
    """A typed, text-rich graph with CSR adjacency. Build with `from_edges`, persist with `save`/`load`."""

    def __init__(
        self,
        name: str,
        node_type_names: list[str],
        relation_names: list[str],
        node_types: np.ndarray,
        indptr: np.ndarray,
        nbr: np.ndarray,
        rel: np.ndarray,
        out: np.ndarray,
        texts: pa.Table,
        candidate_ids: np.ndarray,
        meta: dict | None = None,
        nbr_type: np.ndarray | None = None,
    ):
        self.name = name
        self.node_type_names = list(node_type_names)
        self.relation_names = list(relation_names)
        self.node_types = node_types
        self.candidate_ids = candidate_ids
        self._indptr, self._nbr, self._rel, self._out = indptr, nbr, rel, out
        # neighbor's node type per CSR row (derived from node_types and nbr; saved in the cache)
        self._nbr_type = _nbr_type_array(node_types, nbr, len(self.node_type_names)) if nbr_type is None else nbr_type
        self._all_rels = np.ones(max(len(self.relation_names), 1), dtype=np.bool_)
        self._all_types = np.ones(max(len(self.node_type_names), 1), dtype=np.bool_)
        self._texts = texts
        # A single chunk is used as is: combining would copy a memory-mapped column into RAM.
        self._name_col = _one_chunk(texts.column("name"))
        self._text_col = _one_chunk(texts.column("text"))
        self._type_index = {t: i for i, t in enumerate(self.node_type_names)}
        self._rel_index = {r: i for i, r in enumerate(self.relation_names)}
        self.meta = meta or {}
        self._external_index: dict[str, int] | None = None
        self.directory: Path | None = None  # the cache folder it was loaded from (`load`); None when built

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_edges(
        cls,
        name: str,
        node_type_names: Sequence[str],
        node_types: Sequence[int] | np.ndarray,
        names: Sequence[str],
        texts: Sequence[str],
        relation_names: Sequence[str],
        src: Sequence[int] | np.ndarray,
        dst: Sequence[int] | np.ndarray,
        rel: Sequence[int] | np.ndarray,
        candidate_ids: Sequence[int] | np.ndarray | None = None,
        source_fingerprint: str = "",
        external_ids: Sequence[str] | Sequence[int] | np.ndarray | None = None,
    ) -> "KnowledgeGraph":
        """Build a graph from stored directed edges ``src[i] -(rel[i])-> dst[i]``.

        ``candidate_ids`` defaults to every node. ``source_fingerprint`` identifies the raw data the
        graph was built from, so a cache can tell when it is stale. ``external_ids`` are the ids the
        nodes have in the source (all strings or all integers, unique); without them a node's
        external id is its internal id.
        """
        node_types = np.asarray(node_types, dtype=np.int32)
        n = len(node_types)
        if len(names) != n or len(texts) != n:
            raise ValueError(f"{n} node types but {len(names)} names and {len(texts)} texts")
        src = np.asarray(src, dtype=np.int64)
        dst = np.asarray(dst, dtype=np.int64)
        rel = np.asarray(rel, dtype=np.int64)
        if not (len(src) == len(dst) == len(rel)):
            raise ValueError(f"edge arrays differ in length: {len(src)}, {len(dst)}, {len(rel)}")
        if len(src) and (min(src.min(), dst.min()) < 0 or max(src.max(), dst.max()) >= n):
            raise ValueError(f"edge endpoint outside 0..{n - 1}")
        if len(rel) and (rel.min() < 0 or rel.max() >= len(relation_names)):
            raise ValueError(f"relation id outside 0..{len(relation_names) - 1}")
        if n and (node_types.min() < 0 or node_types.max() >= len(node_type_names)):
            raise ValueError(f"node type id outside 0..{len(node_type_names) - 1}")

        e = len(src)
        r = max(len(relation_names), 1)
        nbr_dtype = np.int32 if n < 2**31 else np.int64
        if n * n * 2 * r < 2**62:
            # One int64 key per (owner, neighbor, incoming, relation) row: a single sort, then decode.
            key = np.concatenate([((src * n + dst) * 2) * r + rel, ((dst * n + src) * 2 + 1) * r + rel])
            key.sort()
            rel_arr = (key % r).astype(np.int16)
            key //= r
            out_arr = (key % 2) == 0
            key //= 2
            nbr_arr = (key % n).astype(nbr_dtype)
            key //= n
            owner_sorted = key
        else:  # graphs too large for one key: lexicographic sort over the four columns
            owner = np.concatenate([src, dst])
            order = np.lexsort((np.concatenate([rel, rel]), np.r_[np.zeros(e, np.int8), np.ones(e, np.int8)],
                                np.concatenate([dst, src]), owner))
            owner_sorted = owner[order]
            nbr_arr = np.where(order < e, dst[order % e], src[order % e]).astype(nbr_dtype)
            rel_arr = rel[order % e].astype(np.int16)
            out_arr = order < e
        # CSR pointers from the sorted owners (numpy: torch_geometric's index2ptr did the same but its
        # import, with torch's, cost every build 5-15 s)
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(owner_sorted, minlength=n), out=indptr[1:])
        del owner_sorted
        cand = np.arange(n, dtype=np.int64) if candidate_ids is None else np.asarray(candidate_ids, dtype=np.int64)
        columns = {"name": _string_array(names), "text": _string_array(texts)}
        meta = {"num_stored_edges": int(e), "source_fingerprint": source_fingerprint}
        if external_ids is not None:
            ext = np.asarray(external_ids) if not isinstance(external_ids, pa.Array) else external_ids
            if len(ext) != n:
                raise ValueError(f"{n} nodes but {len(ext)} external ids")
            is_int = isinstance(ext, np.ndarray) and np.issubdtype(ext.dtype, np.integer)
            columns["external_id"] = pa.array(ext.astype(str) if is_int else ext, pa.large_string())
            meta["external_id_type"] = "int" if is_int else "str"
        table = pa.table(columns)
        return cls(name, list(node_type_names), list(relation_names), node_types, indptr, nbr_arr, rel_arr, out_arr, table, cand, meta)

    # ------------------------------------------------------------------ sizes and vocabularies
    @property
    def num_nodes(self) -> int:
        return len(self.node_types)

    @property
    def num_edges(self) -> int:
        """Number of stored directed edges (each appears twice in the CSR)."""
        return len(self._nbr) // 2

    @property
    def fingerprint(self) -> str:
        """A short hash that changes whenever the graph's content changes (used to key derived caches)."""
        if "fingerprint" not in self.meta:
            h = hashlib.sha256()
            h.update(json.dumps([self.name, self.node_type_names, self.relation_names, self.num_nodes,
                                 self.num_edges, self.meta.get("source_fingerprint", "")]).encode())
            for arr in (self.node_types, self._indptr, self._nbr, self._rel):
                h.update(_sample_digest(np.ascontiguousarray(arr)).encode())
            h.update(_sample_digest(np.frombuffer(self._text_col.buffers()[2] or b"", dtype=np.uint8)).encode())
            self.meta["fingerprint"] = h.hexdigest()[:16]
        return self.meta["fingerprint"]

    @property
    def outgoing_only(self) -> bool:
        """True for a graph read with ``edges="stark"``: stark-qa's ``SKB`` reads a node's neighbors,
        per relation too, from its own row of the adjacency, i.e. the targets of the stored edges *from*
        it, and `neighbors` does the same. Its stored pairs are symmetric (stark-qa's ``is_undirected``
        holds, or its merge made it so), so the neighbor *set* of a node is the same either way; per
        relation it is not where a pair is stored with one relation each way."""
        return self.meta.get("edges") == "stark"

    @property
    def both_ways_relations(self) -> list[str]:
        """Relations every edge of which is also stored in the reverse direction (PRIME and the demo
        store every edge both ways): for these a neighbor's direction carries no information, and tool
        observations leave it out. On an `outgoing_only` graph (``edges="stark"``) every relation: it is
        undirected as stark-qa reads it, and every row `neighbors` gives is the node's own edge.
        Computed once (one pass over the CSR) and kept in the cache's meta.json."""
        if self.outgoing_only:
            return list(self.relation_names)
        if "both_ways_relations" not in self.meta:
            one_way = _one_way_relations(np.asarray(self._indptr), np.asarray(self._nbr), np.asarray(self._rel),
                                         np.asarray(self._out), max(len(self.relation_names), 1))
            self.meta["both_ways_relations"] = [r for i, r in enumerate(self.relation_names) if not one_way[i]]
        return list(self.meta["both_ways_relations"])

    def node_type_id(self, name: str) -> int:
        try:
            return self._type_index[name]
        except (KeyError, TypeError):
            raise _choice_error("node type", name, self.node_type_names) from None

    def relation_id(self, name: str) -> int:
        try:
            return self._rel_index[name]
        except (KeyError, TypeError):
            raise _choice_error("relation", name, self.relation_names) from None

    # ------------------------------------------------------------------ node attributes
    def _check(self, i: int) -> int:
        if isinstance(i, (bool, np.bool_)) or not isinstance(i, (int, np.integer)):
            raise TypeError(f"node id must be an int, got {i!r}")
        if not 0 <= i < self.num_nodes:
            raise IndexError(f"node id {i} outside 0..{self.num_nodes - 1}")
        return int(i)

    def node_name(self, i: int) -> str:
        return self._name_col[self._check(i)].as_py()

    def node_text(self, i: int) -> str:
        return self._text_col[self._check(i)].as_py()

    def node_type_name(self, i: int) -> str:
        return self.node_type_names[self.node_types[self._check(i)]]

    def names(self) -> list[str]:
        return self._name_col.to_pylist()

    def texts(self) -> Iterable[str]:
        """All documents in id order, streamed in batches (does not hold a second copy in memory)."""
        batch = 65536
        for start in range(0, self.num_nodes, batch):
            yield from self._text_col.slice(start, batch).to_pylist()

    # ------------------------------------------------------------------ external ids
    @property
    def has_external_ids(self) -> bool:
        """True when the nodes carry ids of their own source (e.g. a tables graph's ``id`` column)."""
        return "external_id" in self._texts.column_names

    def external_id(self, i: int) -> str | int:
        """The id node ``i`` has in its source (its internal id when the source had none)."""
        i = self._check(i)
        if not self.has_external_ids:
            return i
        value = self._texts.column("external_id")[i].as_py()
        return int(value) if self.meta.get("external_id_type") == "int" else value

    def node_index(self, external) -> int:
        """The internal id of the node whose external id is ``external`` (KeyError if none)."""
        if not self.has_external_ids:
            try:
                return self._check(int(external))
            except (TypeError, ValueError, IndexError):
                raise KeyError(f"no node with id {external!r}") from None
        if self._external_index is None:
            col = self._texts.column("external_id").to_pylist()
            self._external_index = {v: i for i, v in enumerate(col)}
        key = str(external)
        if key not in self._external_index:
            raise KeyError(f"no node with id {external!r}")
        return self._external_index[key]

    # ------------------------------------------------------------------ adjacency
    def degree(self, v: int) -> int:
        v = self._check(v)
        return int(self._indptr[v + 1] - self._indptr[v])

    def neighbors(
        self,
        v: int,
        node_types: Sequence[str] | None = None,
        relations: Sequence[str] | None = None,
    ) -> NeighborEdges:
        """Edges incident to ``v`` in both directions, optionally filtered by neighbor node types and
        relation types (names; an unknown name raises ValueError listing the valid ones).

        Rows are ordered by neighbor id, outgoing before incoming, then relation id. A neighbor linked
        by several edges appears once per edge; `group_neighbors` folds them per node. On an
        `outgoing_only` graph (``edges="stark"``) only the rows of ``v``'s own stored edges come back,
        as stark-qa's ``get_neighbor_nodes(v, r)`` reads them.
        """
        v = self._check(v)
        lo, hi = int(self._indptr[v]), int(self._indptr[v + 1])
        nbr = self._nbr[lo:hi]
        rel = self._rel[lo:hi]
        out = self._out[lo:hi]
        outgoing_only = self.outgoing_only
        rel_ok = type_ok = None
        if relations is not None:
            rel_ok = np.zeros(len(self.relation_names), dtype=bool)
            rel_ok[[self.relation_id(r) for r in relations]] = True
        if node_types is not None:
            type_ok = np.zeros(len(self.node_type_names), dtype=bool)
            type_ok[[self.node_type_id(t) for t in node_types]] = True
        if rel_ok is None and type_ok is None and not outgoing_only or hi == lo:
            return NeighborEdges(np.asarray(nbr, dtype=np.int64), np.asarray(rel, dtype=np.int32),
                                 np.asarray(out, dtype=bool))
        nodes, rels, outs = _filter_rows(np.asarray(nbr), np.asarray(rel), np.asarray(out),
                                         np.asarray(self._nbr_type[lo:hi]),
                                         self._all_rels if rel_ok is None else rel_ok,
                                         self._all_types if type_ok is None else type_ok, outgoing_only)
        return NeighborEdges(nodes, rels, outs)

    # ------------------------------------------------------------------ cache
    def save(self, directory: Path | str) -> None:
        """Write the cache; ``meta.json`` is written last (atomically), so a half-written cache is never valid."""
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        meta_path = d / "meta.json"
        if meta_path.exists():
            meta_path.unlink()
        arrays = {"indptr": self._indptr, "nbr": self._nbr, "rel": self._rel, "out": self._out,
                  "nbr_type": self._nbr_type, "node_types": self.node_types, "candidate_ids": self.candidate_ids}
        checks = {}
        for key, arr in arrays.items():
            np.save(d / f"{key}.npy", np.ascontiguousarray(arr))
            checks[f"{key}.npy"] = _file_check(d / f"{key}.npy")
        with pa.OSFile(str(d / "texts.arrow"), "wb") as sink:
            with pa.ipc.new_file(sink, self._texts.schema) as writer:
                writer.write_table(self._texts.combine_chunks())
        checks["texts.arrow"] = _file_check(d / "texts.arrow")
        meta = {
            "cache_version": CACHE_VERSION,
            "name": self.name,
            "node_type_names": self.node_type_names,
            "relation_names": self.relation_names,
            "num_nodes": self.num_nodes,
            "num_edges": self.num_edges,
            "source_fingerprint": self.meta.get("source_fingerprint", ""),
            "fingerprint": self.fingerprint,
            "external_id_type": self.meta.get("external_id_type"),
            "edges": self.meta.get("edges", "stored"),
            "both_ways_relations": self.both_ways_relations,
            "files": checks,
        }
        atomic.write_json(meta_path, meta, indent=1)

    @classmethod
    def load(cls, directory: Path | str, mmap: bool = True) -> "KnowledgeGraph":
        """Load a cache written by `save`; arrays and texts are memory-mapped when ``mmap`` is true.

        Raises `CacheError` naming the bad file when the cache is incomplete, truncated or corrupted.
        """
        d = Path(directory)
        meta_path = d / "meta.json"
        if not meta_path.exists():
            raise CacheError(f"no graph cache at {d} (missing {meta_path.name})")
        try:
            meta = json.loads(meta_path.read_text())
        except json.JSONDecodeError as e:
            raise CacheError(f"corrupted {meta_path}: {e}") from None
        if meta.get("cache_version") != CACHE_VERSION:
            raise CacheError(f"cache {d} has version {meta.get('cache_version')}, expected {CACHE_VERSION}")
        for fname, expected in meta["files"].items():
            path = d / fname
            if not path.exists():
                raise CacheError(f"graph cache file missing: {path}")
            if _file_check(path) != expected:
                raise CacheError(f"graph cache file truncated or corrupted: {path}")
        arrays = {}
        for key in _ARRAYS:
            try:
                arrays[key] = np.load(d / f"{key}.npy", mmap_mode="r" if mmap else None)
            except ValueError as e:
                raise CacheError(f"graph cache file unreadable: {d / (key + '.npy')}: {e}") from None
        source = pa.memory_map(str(d / "texts.arrow")) if mmap else pa.OSFile(str(d / "texts.arrow"))
        table = pa.ipc.open_file(source).read_all()
        n = meta["num_nodes"]
        if (len(arrays["node_types"]) != n or len(arrays["indptr"]) != n + 1 or table.num_rows != n
                or len(arrays["nbr_type"]) != len(arrays["nbr"])):
            raise CacheError(f"graph cache {d} is inconsistent: sizes do not match meta.json")
        keep = {k: meta[k] for k in ("source_fingerprint", "fingerprint", "edges", "both_ways_relations") if k in meta}
        if meta.get("external_id_type"):
            keep["external_id_type"] = meta["external_id_type"]
        keep["num_stored_edges"] = meta["num_edges"]
        graph = cls(meta["name"], meta["node_type_names"], meta["relation_names"], arrays["node_types"],
                    arrays["indptr"], arrays["nbr"], arrays["rel"], arrays["out"], table,
                    arrays["candidate_ids"], keep, nbr_type=arrays["nbr_type"])
        graph.directory = d
        return graph

    def stored_edges(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The stored directed edges as ``(src, dst, relation id)`` arrays, grouped by source node."""
        out = np.asarray(self._out)
        owner = np.repeat(np.arange(self.num_nodes, dtype=np.int64), np.diff(np.asarray(self._indptr)))
        return owner[out], np.asarray(self._nbr)[out].astype(np.int64), np.asarray(self._rel)[out].astype(np.int64)

    def to_pyg(self):
        """The graph as a torch-geometric ``HeteroData`` for GNN baselines: one node store per node
        type (``num_nodes``, ``node_id``: the global ids of its nodes, in id order) and one edge store per
        ``(src_type, relation, dst_type)`` with ``edge_index`` in the node stores' local ids, edges as
        stored (directed). Documents stay in the graph (``graph.node_text(data[t].node_id[i])``)."""
        import torch
        from torch_geometric.data import HeteroData

        types = np.asarray(self.node_types)
        local = np.empty(self.num_nodes, dtype=np.int64)
        data = HeteroData()
        for t, tname in enumerate(self.node_type_names):
            ids = np.flatnonzero(types == t)
            local[ids] = np.arange(len(ids))
            data[tname].node_id = torch.from_numpy(ids.astype(np.int64))
            data[tname].num_nodes = len(ids)
        src, dst, rel = self.stored_edges()
        st, dt = types[src].astype(np.int64), types[dst].astype(np.int64)
        nt, nr = len(self.node_type_names), max(len(self.relation_names), 1)
        key = (st * nr + rel) * nt + dt
        order = np.argsort(key, kind="stable")
        key_sorted = key[order]
        bounds = np.flatnonzero(np.r_[True, key_sorted[1:] != key_sorted[:-1], True]) if len(key) else [0]
        for a, b in zip(bounds[:-1], bounds[1:]):
            k = int(key_sorted[a])
            s_t, r, d_t = k // (nr * nt), (k // nt) % nr, k % nt
            sel = order[a:b]
            index = np.stack([local[src[sel]], local[dst[sel]]])
            data[self.node_type_names[s_t], self.relation_names[r], self.node_type_names[d_t]].edge_index = \
                torch.from_numpy(index)
        return data

    def __repr__(self) -> str:
        return (f"KnowledgeGraph({self.name!r}, nodes={self.num_nodes}, edges={self.num_edges}, "
                f"node_types={self.node_type_names}, relations={self.relation_names})")

    def stats(self) -> dict:
        """Counts of nodes per type and stored edges per relation."""
        types = np.bincount(np.asarray(self.node_types), minlength=len(self.node_type_names))
        rels = np.bincount(np.asarray(self._rel)[np.asarray(self._out)], minlength=len(self.relation_names))
        return {
            "name": self.name,
            "nodes": self.num_nodes,
            "edges": self.num_edges,
            "candidates": len(self.candidate_ids),
            "nodes_per_type": {t: int(c) for t, c in zip(self.node_type_names, types)},
            "edges_per_relation": {r: int(c) for r, c in zip(self.relation_names, rels)},
        }


def neighbor_runs(nodes: np.ndarray, exclude: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Start and end row of each run of equal ids in ``nodes`` (a `NeighborEdges.nodes`, sorted by
    id), so one run per distinct neighbor; the run of ``exclude`` (e.g. the explored node's
    self-loops) left out."""
    if len(nodes) == 0:
        empty = np.empty(0, dtype=np.int64)
        return empty, empty
    starts = np.flatnonzero(np.r_[True, nodes[1:] != nodes[:-1]])
    ends = np.r_[starts[1:], len(nodes)]
    if exclude is not None:
        keep = nodes[starts] != exclude
        starts, ends = starts[keep], ends[keep]
    return starts, ends


def group_neighbors(edges: NeighborEdges) -> tuple[np.ndarray, list[list[tuple[int, bool]]]]:
    """Fold edge rows per neighbor: unique neighbor ids (ascending) and, per neighbor, its
    ``(relation id, outgoing)`` pairs in CSR order."""
    starts, ends = neighbor_runs(edges.nodes)
    rels = edges.relations.tolist()
    outs = edges.outgoing.tolist()
    links = [list(zip(rels[a:b], outs[a:b])) for a, b in zip(starts.tolist(), ends.tolist())]
    return edges.nodes[starts], links


def _string_array(values) -> pa.Array:
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        values = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
        return values.cast(pa.large_string())
    return pa.array(list(values), pa.large_string())


def _one_chunk(col: pa.ChunkedArray) -> pa.Array:
    return col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()


def _sample_digest(arr: np.ndarray, blocks: int = 64, block_bytes: int = 65536) -> str:
    """Hash of the size and of ``blocks`` evenly spaced slices: cheap at any size, catches truncation
    and most corruption without reading gigabytes."""
    buf = memoryview(arr).cast("B") if arr.size else memoryview(b"")
    n = len(buf)
    h = hashlib.blake2b(str(n).encode(), digest_size=16)
    if n <= blocks * block_bytes:
        h.update(buf)
    else:
        step = (n - block_bytes) // (blocks - 1)
        for k in range(blocks):
            h.update(buf[k * step: k * step + block_bytes])
    return h.hexdigest()


def _file_check(path: Path) -> str:
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            return "0"
        import mmap

        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            return f"{size}:{_sample_digest(np.frombuffer(m, dtype=np.uint8))}"
