"""Nearest-neighbor search over node vectors (inner product of L2-normalised vectors = cosine).

`VectorIndex(vectors, node_types, kind)`:

* ``kind="flat"`` (default): exact. One matrix-vector product over the (memory-mapped) vectors, then
  the top k; a node-type filter masks the other types out first, so the answer is exactly the top k
  of the allowed types. Cost grows with the number of nodes (MAG: see the README's Measured section).
* ``kind="hnsw"``: faiss ``IndexHNSWFlat`` (inner product), one graph per node type, built once and
  cached beside the vectors (``hnsw-M<m>-efc<efc>/type<t>.faiss``). A filtered search asks each
  allowed type's graph for k and merges them, so a filter returns k nodes of the allowed types
  whenever that many exist (approximate within each type, never "top k overall, then filtered").
* ``kind="ivf"``: faiss ``IndexIVFFlat`` (inner product), one per node type with about sqrt(n)
  lists (k-means on a sample of at most 64 vectors per list), ``nprobe`` lists searched; cached as
  ``ivf/type<t>.faiss``. Builds far faster than HNSW on few cores (one k-means and one assignment
  pass), and filters by node type the same way.

``score(q, ids)`` gives exact similarities of given nodes (neighbor ranking).

Memory: one copy of the vectors. The flat index reads the node embeddings as the cache memory-maps
them. An HNSW or IVF index holds the vectors itself (HNSW's flat storage, IVF's inverted lists, in type
order); with a cache folder it is written there once and then memory-mapped from that file
(``IO_FLAG_MMAP_IFC`` / ``IO_FLAG_MMAP``), so its vectors are file-backed pages the OS shares between
processes and can evict, and `score` reads them from the index (a view of HNSW's storage, IVF's
``reconstruct_batch`` through its direct map), never the node-order vectors: a search touches one
copy. (Without a cache folder the index is built and kept in memory.) The disk holds both the
embeddings cache and the index files.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ark import atomic

KINDS = ("flat", "hnsw", "ivf")
SCORE_CHUNK = 65536  # nodes scored per block by `score` (bounds the rows gathered at once)
INSTALL = "pip install -c <(echo torch==2.13.0) -r requirements-dense.txt"


def _faiss():
    try:
        import faiss
    except ImportError as e:
        raise ImportError(f"kind='hnsw' and kind='ivf' need faiss-cpu: {INSTALL}") from e
    return faiss


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Positions of the k highest scores, descending, ties by lower position (finite scores only)."""
    n = len(scores)
    k = min(k, n)
    if k <= 0:
        return np.empty(0, dtype=np.int64)
    part = np.argpartition(-scores, k - 1)[:k] if k < n else np.arange(n)
    order = np.lexsort((part, -scores[part]))
    out = part[order]
    return out[np.isfinite(scores[out])]


class VectorIndex:
    """Top-k search over ``vectors`` (float32 [n, dim], rows L2-normalised), optionally by node type."""

    def __init__(self, vectors: np.ndarray, node_types: np.ndarray | None = None, kind: str = "flat",
                 cache_dir: Path | str | None = None, hnsw_m: int = 32, ef_construction: int = 80,
                 ef_search: int = 128, threads: int | None = None, nprobe: int = 16, mmap: bool = True):
        """``mmap``: memory-map a cached HNSW/IVF index from its files (default); False reads it into
        memory (no page faults on a cold first search, at the price of an anonymous copy)."""
        if kind not in KINDS:
            raise ValueError(f"unknown vector index kind {kind!r}; valid: {', '.join(KINDS)}")
        if vectors.ndim != 2 or vectors.dtype != np.float32:
            raise ValueError(f"vectors must be float32 [n, dim], got {vectors.dtype} {vectors.shape}")
        self.vectors = vectors
        self.kind = kind
        self.node_types = (np.zeros(len(vectors), dtype=np.int64) if node_types is None
                           else np.asarray(node_types, dtype=np.int64))
        if len(self.node_types) != len(vectors):
            raise ValueError(f"{len(self.node_types)} node types for {len(vectors)} vectors")
        self.num_types = int(self.node_types.max()) + 1 if len(vectors) else 0
        self.ef_search = ef_search
        self.nprobe = nprobe
        self._masks: dict[tuple[int, ...], np.ndarray] = {}
        self._parts: list[tuple[np.ndarray, object]] = []  # per type: (node ids, faiss index)
        self._storage: list[np.ndarray] = []  # hnsw: per type, a read-only view of the index's own vectors
        self.mapped = False  # hnsw/ivf: the index's vectors are memory-mapped from its cached files
        self._mmap = mmap
        if kind == "hnsw":
            faiss = _faiss()
            if threads:
                faiss.omp_set_num_threads(threads)
            self._build_hnsw(faiss, cache_dir, hnsw_m, ef_construction)
        elif kind == "ivf":
            faiss = _faiss()
            if threads:
                faiss.omp_set_num_threads(threads)
            self._build_ivf(faiss, cache_dir)
        if self._parts:
            self._row = np.zeros(len(vectors), dtype=np.int64)  # each node's position inside its type's index
            for ids, index in self._parts:
                self._row[ids] = np.arange(len(ids))
                if kind == "hnsw":
                    storage = faiss.downcast_index(index.storage)
                    view = (faiss.rev_swig_ptr(storage.get_xb(), storage.ntotal * self.dim).reshape(-1, self.dim)
                            if storage.ntotal else np.empty((0, self.dim), dtype=np.float32))
                    view.setflags(write=False)
                    self._storage.append(view)

    @property
    def dim(self) -> int:
        return int(self.vectors.shape[1])

    def __len__(self) -> int:
        return int(self.vectors.shape[0])

    # ------------------------------------------------------------------ per-type faiss indexes
    def _build_per_type(self, faiss, folder: Path | None, make, fits, finish=None) -> None:
        """One faiss index per node type (so a type filter searches exactly the allowed nodes), read from
        ``folder/type<t>.faiss`` when ``fits(index, ids)``, else built by ``make(ids)``, filled in chunks,
        completed by ``finish(index)`` and written there atomically. A cached index is memory-mapped
        from its file (the copy built in memory is dropped once written)."""
        order = np.argsort(self.node_types, kind="stable")
        bounds = np.searchsorted(self.node_types[order], np.arange(self.num_types + 1))
        # HNSW: its flat storage (and graph) as views of the file; IVF: its inverted lists mapped
        mmap = ((faiss.IO_FLAG_MMAP_IFC if self.kind == "hnsw" else faiss.IO_FLAG_MMAP) | faiss.IO_FLAG_READ_ONLY
                if self._mmap else 0)
        for t in range(self.num_types):
            ids = order[bounds[t]: bounds[t + 1]]
            f = folder / f"type{t}.faiss" if folder is not None else None
            index = None
            if f is not None and f.is_file():
                index = faiss.read_index(str(f), mmap)
                if index.ntotal != len(ids) or index.d != self.dim or not fits(index, ids):
                    index = None
            if index is None:
                index = make(ids)
                for s in range(0, len(ids), 65536):
                    index.add(np.ascontiguousarray(self.vectors[ids[s: s + 65536]]))
                if finish is not None:
                    finish(index)
                if f is not None:
                    f.parent.mkdir(parents=True, exist_ok=True)
                    with atomic.replacing(f) as tmp:
                        faiss.write_index(index, str(tmp))
                    del index
                    index = faiss.read_index(str(f), mmap)
            self._parts.append((ids, index))
        self.mapped = folder is not None and self._mmap

    def _build_hnsw(self, faiss, cache_dir, m: int, efc: int) -> None:
        folder = Path(cache_dir) / f"hnsw-M{m}-efc{efc}" if cache_dir is not None else None

        def make(ids):
            index = faiss.IndexHNSWFlat(self.dim, m, faiss.METRIC_INNER_PRODUCT)
            index.hnsw.efConstruction = efc
            return index

        self._build_per_type(faiss, folder, make, lambda index, ids: True)
        if folder is not None:
            (folder / "meta.json").write_text(json.dumps({"m": m, "ef_construction": efc, "n": len(self)}))

    @staticmethod
    def _nlist(n: int) -> int:
        return max(1, min(int(np.sqrt(n)), n // 39 or 1))

    def _build_ivf(self, faiss, cache_dir) -> None:
        folder = Path(cache_dir) / "ivf" if cache_dir is not None else None
        rng = np.random.default_rng(0)

        def make(ids):
            nlist = self._nlist(len(ids))
            index = faiss.IndexIVFFlat(faiss.IndexFlatIP(self.dim), self.dim, nlist, faiss.METRIC_INNER_PRODUCT)
            sample = np.sort(rng.choice(len(ids), size=min(len(ids), 64 * nlist), replace=False))
            # a node type without nodes still gets a (one-list) index, so the per-type parts line up
            index.train(np.ascontiguousarray(self.vectors[ids[sample]]) if len(ids) else np.zeros((1, self.dim), np.float32))
            return index

        def fits(index, ids):  # the same lists, and a direct map for `score` (caches written before had none)
            return index.nlist == self._nlist(len(ids)) and index.direct_map.type != faiss.DirectMap.NoMap

        self._build_per_type(faiss, folder, make, fits, finish=lambda index: index.make_direct_map())

    # ------------------------------------------------------------------ search
    def _mask(self, types: Sequence[int]) -> np.ndarray:
        key = tuple(sorted(set(int(t) for t in types)))
        mask = self._masks.get(key)
        if mask is None:
            ok = np.zeros(max(self.num_types, 1), dtype=bool)
            ok[list(key)] = True
            mask = self._masks[key] = ok[self.node_types]
        return mask

    def search(self, query: np.ndarray, k: int, types: Sequence[int] | None = None,
               allowed: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(node ids, similarities) of the k most similar nodes (of ``types`` when given; ``allowed``, a
        boolean array over nodes, restricts a flat search to any subset), best first."""
        q = self._check(query)
        if allowed is not None and self.kind != "flat":
            raise ValueError("a search restricted to an arbitrary node subset needs index kind 'flat' "
                             f"({self.kind} filters by node type only)")
        if self.kind == "flat":
            scores = np.asarray(self.vectors @ q, dtype=np.float32)
            if types is not None:
                scores = np.where(self._mask(types), scores, -np.inf).astype(np.float32)
            if allowed is not None:
                scores = np.where(allowed, scores, -np.inf).astype(np.float32)
            pos = top_k(scores, k)
            return pos.astype(np.int64), scores[pos]
        wanted = range(self.num_types) if types is None else sorted(set(int(t) for t in types))
        ids_all, sims_all = [], []
        q2 = q.reshape(1, -1)
        for t in wanted:
            ids, index = self._parts[t]
            if len(ids) == 0:
                continue
            if self.kind == "hnsw":
                index.hnsw.efSearch = max(self.ef_search, k)
            else:
                index.nprobe = min(self.nprobe, index.nlist)
            sims, pos = index.search(q2, min(k, len(ids)))
            keep = pos[0] >= 0
            ids_all.append(ids[pos[0][keep]])
            sims_all.append(sims[0][keep])
        if not ids_all:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
        ids = np.concatenate(ids_all)
        sims = np.concatenate(sims_all).astype(np.float32)
        order = np.lexsort((ids, -sims))[:k]
        return ids[order].astype(np.int64), sims[order]

    def score(self, query: np.ndarray, ids: np.ndarray) -> np.ndarray:
        """Exact similarities of the nodes ``ids`` to the query, read from the copy searches read."""
        q = self._check(query)
        ids = np.asarray(ids, dtype=np.int64)
        out = np.empty(len(ids), dtype=np.float32)
        for s in range(0, len(ids), SCORE_CHUNK):
            out[s: s + SCORE_CHUNK] = self.rows(ids[s: s + SCORE_CHUNK]) @ q
        return out

    def rows(self, ids: np.ndarray) -> np.ndarray:
        """The vectors of nodes ``ids`` (a copy of those rows): from the node embeddings for the flat
        index, from the index's own vectors for HNSW and IVF."""
        ids = np.asarray(ids, dtype=np.int64)
        if not self._parts:
            return np.asarray(self.vectors[ids], dtype=np.float32)
        out = np.empty((len(ids), self.dim), dtype=np.float32)
        types, rows = self.node_types[ids], self._row[ids]
        for t in np.unique(types).tolist():
            sel = types == t
            if self.kind == "hnsw":
                out[sel] = self._storage[t][rows[sel]]
            else:
                out[sel] = self._parts[t][1].reconstruct_batch(rows[sel])
        return out

    def count(self, types: Sequence[int] | None = None) -> int:
        """Nodes a search can return (of ``types``)."""
        return len(self) if types is None else int(self._mask(types).sum())

    def _check(self, query: np.ndarray) -> np.ndarray:
        q = np.asarray(query, dtype=np.float32).reshape(-1)
        if q.shape[0] != self.dim:
            raise ValueError(f"query vector has {q.shape[0]} dimensions, the index {self.dim}: the encoder "
                             "does not match the cached node embeddings (rebuild them with this encoder)")
        return q

    def memory_bytes(self) -> int:
        """Bytes a search reads: one copy of the vectors (flat: the node embeddings; HNSW/IVF: the
        index's own, memory-mapped when cached, see `mapped`) plus HNSW's level-0 graph links or IVF's
        ids, direct map and centroids."""
        if not self._parts:
            return int(self.vectors.nbytes)
        total = 0
        for _, index in self._parts:
            if self.kind == "hnsw":  # IndexHNSWFlat: its vectors plus 2*M int32 links per node at level 0
                total += int(index.ntotal) * (self.dim * 4 + index.hnsw.nb_neighbors(0) * 4)
            else:  # IndexIVFFlat: its vectors, an int64 id and a direct-map entry each, the centroids
                total += int(index.ntotal) * (self.dim * 4 + 16) + int(index.nlist) * self.dim * 4
        return total
