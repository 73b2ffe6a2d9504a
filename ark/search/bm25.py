"""The BM25 text index over node documents: global top-k search and subset (neighborhood) scoring.

This module owns the relevance function ``rel(q, d_V(v))`` of the paper: BM25 over every node's document
text, built with ``bm25s`` once per graph and saved beside the graph cache (``<cache>/bm25/``).

* Tokenizer (`Tokenizer`): lowercase, the scikit-learn token pattern ``\\b\\w\\w+\\b``, bm25s' English
  stopwords, PyStemmer's English (Snowball) stemmer. Documents and queries go through the same steps.
* `BM25Index.search`: top-k over the whole graph (optionally only nodes allowed by a mask); nodes with
  score 0 are never returned. Ties are broken by the lower node id, so rankings are deterministic.
* `BM25Index.score`: BM25 scores of a given subset of nodes with the *global* statistics (idf, average
  document length), read straight from the per-token score matrix bm25s keeps (``scores["data"]``,
  ``["indices"]``, ``["indptr"]``: a CSC matrix with one column per token and doc ids sorted within each
  column). Per query token: a posting list of at most ``SCAN_RATIO`` entries per subset id is scanned,
  each entry looked up in a reusable scratch array of subset positions (``O(df)``); a longer one is
  galloped through (exponential then binary search, always forward) while walking the sorted subset
  (``O(|ids| * log(df / |ids|))``). Either way the cost follows the subset, not the graph; sorted ids
  (as neighbor lists come from the CSR) skip the argsort.
* `load_index(graph, cache_dir)`: reuse ``<cache_dir>/bm25`` when it was built from a graph with the same
  ``graph.fingerprint`` and the same BM25 parameters, else build and save it.

Repeated query tokens count once per occurrence, exactly as in ``bm25s.BM25.retrieve``.

``ark search "some query" --graph <name>`` prints the agent's search over a graph's index.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import Stemmer
from numba import njit

from ark import atomic

TOKEN_PATTERN = r"(?u)\b\w\w+\b"
METHODS = ("lucene", "robertson", "atire")  # bm25s methods without a non-occurrence term
INDEX_VERSION = 1
_META = "ark_index.json"
_VOCAB_HASHES, _VOCAB_IDS = "vocab.hash.npy", "vocab.ids.npy"


def _token_hash(token: str) -> int:
    return int.from_bytes(hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest(), "little")


class HashedVocab:
    """The vocabulary as two memory-mapped arrays (64-bit token hashes, sorted, and their token ids):
    opening it costs nothing at any size, where bm25s' JSON dict is parsed in full (seconds for a
    MAG-size vocabulary, in every sweep job). Written only when no two tokens share a hash; a token
    outside the vocabulary matching a stored hash has odds of about V / 2^64."""

    def __init__(self, hashes: np.ndarray, ids: np.ndarray):
        self._hashes, self._ids = hashes, ids

    @staticmethod
    def arrays(vocab: dict) -> tuple[np.ndarray, np.ndarray] | None:
        hashes = np.fromiter((_token_hash(t) for t in vocab), dtype=np.uint64, count=len(vocab))
        ids = np.fromiter(vocab.values(), dtype=np.int64, count=len(vocab))
        order = np.argsort(hashes, kind="stable")
        hashes, ids = hashes[order], ids[order]
        if len(hashes) > 1 and bool((hashes[1:] == hashes[:-1]).any()):
            return None
        return hashes, ids

    def _find(self, token: str) -> int:
        h = np.uint64(_token_hash(token))
        i = int(np.searchsorted(self._hashes, h))
        return int(self._ids[i]) if i < len(self._hashes) and self._hashes[i] == h else -1

    def ids_of(self, tokens: Sequence[str]) -> np.ndarray:
        """The vocabulary ids of ``tokens``, in their order, those outside the vocabulary dropped: one
        sorted-array search for all of them (a query's tokens), where ``[vocab[t] for t in tokens if t in
        vocab]`` searches twice per token."""
        n = len(self._hashes)
        if not tokens or n == 0:
            return np.empty(0, dtype=np.int64)
        h = np.fromiter((_token_hash(t) for t in tokens), dtype=np.uint64, count=len(tokens))
        at = np.minimum(np.searchsorted(self._hashes, h), n - 1)
        found = np.asarray(self._hashes[at]) == h
        return np.asarray(self._ids[at[found]], dtype=np.int64)

    def __contains__(self, token: str) -> bool:
        return self._find(token) >= 0

    def __getitem__(self, token: str) -> int:
        i = self._find(token)
        if i < 0:
            raise KeyError(token)
        return i

    def __len__(self) -> int:
        return len(self._hashes)


class Tokenizer:
    """Lowercase, split on ``TOKEN_PATTERN``, drop English stopwords, stem with PyStemmer (English).

    One Stemmer per thread (PyStemmer objects keep an unsynchronised cache). ``stop_list``: the stopwords
    as a saved index recorded them (default: bm25s' English list, which imports bm25s and scipy)."""

    def __init__(self, stem: bool = True, stopwords: bool = True, stop_list: Sequence[str] | None = None):
        self.stem = stem
        self.stopwords = stopwords
        self._split = re.compile(TOKEN_PATTERN).findall
        if stopwords and stop_list is None:
            from bm25s.stopwords import STOPWORDS_EN as stop_list
        self._stop = frozenset(stop_list) if stopwords else frozenset()
        self._local = threading.local()

    def _stemmer(self) -> Stemmer.Stemmer | None:
        if not self.stem:
            return None
        s = getattr(self._local, "stemmer", None)
        if s is None:
            s = self._local.stemmer = Stemmer.Stemmer("english")
        return s

    def __call__(self, text: str) -> list[str]:
        """Tokens of one query or document."""
        words = [w for w in self._split(text.lower()) if w not in self._stop]
        stemmer = self._stemmer()
        return stemmer.stemWords(words) if stemmer is not None else words

    def corpus(self, texts: Sequence[str]) -> bm25s.tokenization.Tokenized:
        """Tokenize many documents with bm25s (same steps as `__call__`, vocabulary built once)."""
        import bm25s

        return bm25s.tokenize(list(texts), lower=True, token_pattern=TOKEN_PATTERN,
                              stopwords="en" if self.stopwords else None,
                              stemmer=self._stemmer(), show_progress=False)


@dataclass(frozen=True)
class BM25Params:
    """BM25 hyper-parameters (bm25s names) and tokenizer switch; stored with the index."""

    k1: float = 1.5  # term-frequency saturation
    b: float = 0.75  # document-length normalisation
    method: str = "lucene"  # one of METHODS (bm25s' idf/tf variant)
    stem: bool = True  # PyStemmer English stemming of documents and queries
    stopwords: bool = True  # drop English stopwords (bm25s' list)

    def __post_init__(self):
        if self.method not in METHODS:
            raise ValueError(f"unknown BM25 method {self.method!r}; valid methods: {', '.join(METHODS)}")


# ---------------------------------------------------------------------------------------- kernels
@njit(cache=True, nogil=True, inline="always")
def _better(s1, i1, s2, i2):
    return s1 > s2 or (s1 == s2 and i1 < i2)


@njit(cache=True, nogil=True)
def _heap_push(hs, hi, size, s, i):
    """Keep the best ``len(hs)`` (score, id) pairs in a min-heap whose root is the worst kept pair."""
    k = len(hs)
    if size < k:
        pos = size
        size += 1
        while pos > 0:
            parent = (pos - 1) >> 1
            if _better(hs[parent], hi[parent], s, i):
                hs[pos] = hs[parent]
                hi[pos] = hi[parent]
                pos = parent
            else:
                break
        hs[pos] = s
        hi[pos] = i
        return size
    if not _better(s, i, hs[0], hi[0]):
        return size
    pos = 0
    while True:
        c = 2 * pos + 1
        if c >= size:
            break
        if c + 1 < size and _better(hs[c], hi[c], hs[c + 1], hi[c + 1]):
            c += 1
        if _better(hs[c], hi[c], s, i):  # the worst child is still better than the new pair
            break
        hs[pos] = hs[c]
        hi[pos] = hi[c]
        pos = c
    hs[pos] = s
    hi[pos] = i
    return size


@njit(cache=True, nogil=True)
def _search_kernel(data, indices, indptr, qtok, num_docs, k, mask, use_mask):
    """Top-k (score > 0, allowed by mask) over all documents: unsorted heap arrays, their size, and the
    number of documents with score > 0 allowed by the mask."""
    scores = np.zeros(num_docs, dtype=np.float32)
    total = 0
    for t in qtok:
        total += indptr[t + 1] - indptr[t]
    hs = np.empty(k, dtype=np.float32)
    hi = np.empty(k, dtype=np.int64)
    size = 0
    matched = 0
    thr = np.float32(0.0)  # a document must beat this to enter the heap (the root once it is full)
    if total * 4 < num_docs:  # sparse: visit only documents that contain a query token
        seen = np.zeros(num_docs, dtype=np.bool_)
        cand = np.empty(total, dtype=np.int64)
        n = 0
        for t in qtok:
            for j in range(indptr[t], indptr[t + 1]):
                d = indices[j]
                if not seen[d]:
                    seen[d] = True
                    cand[n] = d
                    n += 1
                scores[d] += data[j]
        for c in range(n):
            d = cand[c]
            s = scores[d]
            if s > 0 and (not use_mask or mask[d]):
                matched += 1
                if s >= thr:  # candidates are not in id order: ties go through the full comparison
                    size = _heap_push(hs, hi, size, s, d)
                    if size == k:
                        thr = hs[0]
    else:
        for t in qtok:
            for j in range(indptr[t], indptr[t + 1]):
                scores[indices[j]] += data[j]
        for d in range(num_docs):  # a tight loop the compiler vectorises
            if scores[d] > 0 and (not use_mask or mask[d]):
                matched += 1
        for d in range(num_docs):  # ascending ids: an equal score never beats the kept one
            s = scores[d]
            if s > thr and (not use_mask or mask[d]):
                size = _heap_push(hs, hi, size, s, d)
                if size == k:
                    thr = hs[0]
    return hs, hi, size, matched


@njit(cache=True, nogil=True, inline="always")
def _gallop(arr, start, end, x):
    """First i in [start, end) with arr[i] >= x (arr ascending), or end; probes 1, 2, 4, ... ahead of
    start, then bisects: O(log distance), and successive searches move forward through memory."""
    if start >= end or arr[start] >= x:
        return start
    lo = start  # arr[lo] < x
    step = 1
    hi = start + 1
    while hi < end and arr[hi] < x:
        lo = hi
        step *= 2
        hi = lo + step
    if hi > end:
        hi = end
    lo += 1
    while lo < hi:
        mid = (lo + hi) >> 1
        if arr[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


SCAN_RATIO = 16  # scan a posting list (instead of galloping in it) up to this many entries per subset id


@njit(cache=True, nogil=True)
def _subset_kernel(data, indices, indptr, qtok, sorted_ids, pos, scan_ratio):
    """Scores of ``sorted_ids`` (ascending, duplicates allowed) with the global score matrix, aligned
    with ``sorted_ids``.

    Per token, the cheaper of two exact intersections: a posting list of at most ``scan_ratio`` entries
    per subset id is scanned front to back, each entry looked up in ``pos`` (a zeroed int32 scratch over
    all documents that holds 1 + the subset position of each subset id during the call, and is zeroed
    again before returning); a longer one is galloped through, walking the subset. Every id gets its
    tokens' scores added in query-token order, so the float32 sums equal the full-index ones."""
    m = len(sorted_ids)
    out = np.zeros(m, dtype=np.float32)
    if m == 0:
        return out
    marked = False
    for t in qtok:
        lo = indptr[t]
        hi = indptr[t + 1]
        if hi - lo <= scan_ratio * m:
            if not marked:
                for p in range(m):  # the first of duplicated ids takes the scores
                    if p == 0 or sorted_ids[p] != sorted_ids[p - 1]:
                        pos[sorted_ids[p]] = p + 1
                marked = True
            for j in range(lo, hi):
                p = pos[indices[j]]
                if p:
                    out[p - 1] += data[j]
        else:
            j = lo
            for p in range(m):
                if p and sorted_ids[p] == sorted_ids[p - 1]:
                    continue
                j = _gallop(indices, j, hi, sorted_ids[p])
                if j == hi:
                    break
                if indices[j] == sorted_ids[p]:
                    out[p] += data[j]
    if marked:
        for p in range(m):
            pos[sorted_ids[p]] = 0
    for p in range(1, m):  # duplicated ids copy the first one's score
        if sorted_ids[p] == sorted_ids[p - 1]:
            out[p] = out[p - 1]
    return out


@njit(cache=True, nogil=True)
def _dense_kernel(data, indices, indptr, qtok, num_docs):
    """Scores of every document, summed per query token in query order (bm25s' own order, so the
    float32 sums are bm25s' ``get_scores_from_ids`` bit for bit)."""
    scores = np.zeros(num_docs, dtype=np.float32)
    for t in qtok:
        for j in range(indptr[t], indptr[t + 1]):
            scores[indices[j]] += data[j]
    return scores


@njit(cache=True, nogil=True)
def _is_sorted(a):
    for i in range(1, len(a)):
        if a[i] < a[i - 1]:
            return False
    return True


# ---------------------------------------------------------------------------------------- index
class BM25Index:
    """BM25 over node documents (node id == document position). Build with `build` or `load_index`."""

    def __init__(self, retriever: bm25s.BM25 | None, params: BM25Params, fingerprint: str = "", *,
                 scores: dict | None = None, vocab=None, stop_list: Sequence[str] | None = None,
                 saved_at: Path | None = None):
        """From a bm25s ``retriever``, or (``retriever=None``) from the ``scores`` arrays and ``vocab`` of the
        index saved at ``saved_at``, whose bm25s object is then loaded only if asked for (`retriever`):
        a job that only searches never imports bm25s or scipy."""
        self._retriever = retriever
        self._saved_at = saved_at
        self.params = params
        self.fingerprint = fingerprint
        self.tokenizer = Tokenizer(stem=params.stem, stopwords=params.stopwords, stop_list=stop_list)
        s = retriever.scores if retriever is not None else scores
        self._data = np.asarray(s["data"], dtype=np.float32)
        self._indices = np.asarray(s["indices"])
        self._indptr = np.asarray(s["indptr"])
        self.num_docs = int(s["num_docs"])
        self._vocab = retriever.vocab_dict if retriever is not None else vocab
        self._no_mask = np.zeros(1, dtype=np.bool_)
        self._scratch: list[np.ndarray] = []  # zeroed int32 [num_docs] arrays for `score`, one per concurrent call

    @property
    def retriever(self) -> bm25s.BM25:
        """The bm25s object (for `full_scores`, `save` and comparisons), loaded on first use."""
        if self._retriever is None:
            import bm25s

            retriever = bm25s.BM25.load(str(self._saved_at), mmap=True, load_vocab=False)
            retriever.backend = "numba"
            retriever.vocab_dict = self._vocab
            self._retriever = retriever
        return self._retriever

    @classmethod
    def build(cls, texts: Iterable[str], k1: float = 1.5, b: float = 0.75, method: str = "lucene",
              stem: bool = True, fingerprint: str = "", stopwords: bool = True) -> "BM25Index":
        """Tokenize ``texts`` (document i = node i) and build the bm25s index with the numba backend."""
        params = BM25Params(k1=k1, b=b, method=method, stem=stem, stopwords=stopwords)
        texts = list(texts)
        if not texts:
            raise ValueError("cannot build a BM25 index over zero documents")
        tokens = Tokenizer(stem=stem, stopwords=stopwords).corpus(texts)
        import bm25s

        retriever = bm25s.BM25(k1=k1, b=b, method=method, backend="numba")
        retriever.index(tokens, show_progress=False)
        return cls(retriever, params, fingerprint)

    # ------------------------------------------------------------------ persistence
    def save(self, d: Path | str, extra: dict | None = None) -> None:
        """Write the bm25s arrays + vocabulary and ``ark_index.json`` (written last, plus ``extra``)."""
        d = Path(d)
        d.mkdir(parents=True, exist_ok=True)
        (d / _META).unlink(missing_ok=True)
        self.retriever.save(str(d))
        arrays = HashedVocab.arrays(self._vocab) if isinstance(self._vocab, dict) else None
        if arrays is not None:
            np.save(d / _VOCAB_HASHES, arrays[0])
            np.save(d / _VOCAB_IDS, arrays[1])
        meta = {"version": INDEX_VERSION, "fingerprint": self.fingerprint, "num_docs": self.num_docs,
                **asdict(self.params), "stop_list": sorted(self.tokenizer._stop), **(extra or {})}
        (d / _META).write_text(json.dumps(meta, indent=1))

    @classmethod
    def load(cls, d: Path | str, mmap: bool = True) -> "BM25Index":
        """Load an index written by `save` (score arrays memory-mapped when ``mmap``)."""
        d = Path(d)
        meta_path = d / _META
        if not meta_path.exists():
            raise FileNotFoundError(f"no BM25 index at {d} (missing {_META})")
        meta = json.loads(meta_path.read_text())
        params = BM25Params(k1=meta["k1"], b=meta["b"], method=meta["method"], stem=meta["stem"],
                            stopwords=meta.get("stopwords", True))
        hashed = (d / _VOCAB_HASHES).exists() and (d / _VOCAB_IDS).exists()
        stop_list = meta.get("stop_list")
        mode = "r" if mmap else None
        if hashed and stop_list is not None:  # bm25s' own arrays, read as bm25s.BM25.load_scores reads them
            scores = {key: np.load(d / f"{key}.csc.index.npy", mmap_mode=mode) for key in ("data", "indices", "indptr")}
            scores["num_docs"] = meta["num_docs"]
            vocab = HashedVocab(np.load(d / _VOCAB_HASHES, mmap_mode=mode), np.load(d / _VOCAB_IDS, mmap_mode=mode))
            return cls(None, params, meta.get("fingerprint", ""), scores=scores, vocab=vocab, stop_list=stop_list,
                       saved_at=d)
        import bm25s  # an index saved before its stopwords were recorded

        retriever = bm25s.BM25.load(str(d), mmap=mmap, load_vocab=not hashed)
        retriever.backend = "numba"
        if hashed:
            mode = "r" if mmap else None
            retriever.vocab_dict = HashedVocab(np.load(d / _VOCAB_HASHES, mmap_mode=mode),
                                               np.load(d / _VOCAB_IDS, mmap_mode=mode))
        return cls(retriever, params, meta.get("fingerprint", ""))

    @staticmethod
    def stored_meta(d: Path | str) -> dict | None:
        """The ``ark_index.json`` of a saved index, or None when there is none (or it is unreadable)."""
        try:
            return json.loads((Path(d) / _META).read_text())
        except (OSError, json.JSONDecodeError):
            return None

    # ------------------------------------------------------------------ queries
    def token_ids(self, query: str) -> np.ndarray:
        """Vocabulary ids of the query's tokens (tokens unseen in the corpus are dropped)."""
        vocab = self._vocab
        if isinstance(vocab, HashedVocab):
            return vocab.ids_of(self.tokenizer(query))
        return np.array([vocab[t] for t in self.tokenizer(query) if t in vocab], dtype=np.int64)

    def search(self, query: str, k: int, mask: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` node ids and scores (descending, ties by lower id), only scores > 0.

        ``mask``: optional bool array over all nodes; only nodes where it is True can be returned."""
        ids, scores, _ = self.search_with_total(query, k, mask)
        return ids, scores

    def search_with_total(self, query: str, k: int, mask: np.ndarray | None = None
                          ) -> tuple[np.ndarray, np.ndarray, int]:
        """`search` plus the number of nodes (allowed by ``mask``) with score > 0."""
        qtok = self.token_ids(query)
        k = int(min(max(k, 0), self.num_docs))
        if len(qtok) == 0 or k == 0:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32), 0
        if mask is not None:
            mask = np.asarray(mask, dtype=np.bool_)
            if mask.shape != (self.num_docs,):
                raise ValueError(f"mask has shape {mask.shape}, expected ({self.num_docs},)")
        hs, hi, size, total = _search_kernel(self._data, self._indices, self._indptr, qtok, self.num_docs,
                                             k, self._no_mask if mask is None else mask, mask is not None)
        hs, hi = hs[:size], hi[:size]
        order = np.lexsort((hi, -hs))
        return hi[order], hs[order], int(total)

    def score(self, query: str, ids: np.ndarray | Sequence[int]) -> np.ndarray:
        """BM25 scores (float32) of ``ids`` in the given order, with the global statistics.

        Equals the full-index score of each id; costs time in ``len(ids)``, not in the graph size."""
        ids = np.asarray(ids, dtype=np.int64)
        if ids.ndim != 1:
            raise ValueError(f"ids must be one-dimensional, got shape {ids.shape}")
        if len(ids) and (ids.min() < 0 or ids.max() >= self.num_docs):
            raise IndexError(f"ids outside 0..{self.num_docs - 1}")
        qtok = self.token_ids(query)
        if len(qtok) == 0 or len(ids) == 0:
            return np.zeros(len(ids), dtype=np.float32)
        try:
            pos = self._scratch.pop()  # atomic: concurrent calls never share a scratch array
        except IndexError:
            pos = np.zeros(self.num_docs, dtype=np.int32)
        try:
            if len(ids) < 2 or _is_sorted(ids):  # neighbor lists come sorted from the CSR
                return _subset_kernel(self._data, self._indices, self._indptr, qtok, ids, pos, SCAN_RATIO)
            order = np.argsort(ids, kind="stable")
            sorted_scores = _subset_kernel(self._data, self._indices, self._indptr, qtok, ids[order], pos, SCAN_RATIO)
            out = np.empty(len(ids), dtype=np.float32)
            out[order] = sorted_scores
            return out
        finally:
            self._scratch.append(pos)

    def warm_up(self) -> None:
        """Load the numba kernels of `search` and `score` for this index's arrays, on empty inputs (no
        scores computed). The first call of any numba kernel in a process initialises numba's compiler
        target (about 0.5 s of imports, even with every kernel in numba's on-disk cache); doing it here
        lets a caller pay that off the critical path, e.g. in a thread while the agent waits for its
        first LLM reply (`ark.tools.toolset.ToolSet.warm_up`)."""
        no_tokens = np.empty(0, dtype=np.int64)
        _search_kernel(self._data, self._indices, self._indptr, no_tokens, self.num_docs, 1, self._no_mask, False)
        pos = np.zeros(1, dtype=np.int32)
        _subset_kernel(self._data, self._indices, self._indptr, no_tokens, no_tokens, pos, SCAN_RATIO)
        _is_sorted(no_tokens)

    def dense_scores(self, query: str) -> np.ndarray:
        """Scores (float32) of every document, zeros included, equal to bm25s' own `full_scores`."""
        qtok = self.token_ids(query)
        return _dense_kernel(self._data, self._indices, self._indptr, qtok, self.num_docs)

    def full_scores(self, query: str) -> np.ndarray:
        """Scores of every document (bm25s' own dense computation); for tests and checks."""
        qtok = self.token_ids(query)
        if len(qtok) == 0:
            return np.zeros(self.num_docs, dtype=np.float32)
        return self.retriever.get_scores_from_ids(qtok.tolist())

    def matched_terms(self, query: str) -> list[str]:
        """The query's stemmed tokens that occur in the corpus (for snippets and empty-query errors)."""
        return [t for t in self.tokenizer(query) if t in self._vocab]


def load_index(graph, cache_dir: Path | str, k1: float = 1.5, b: float = 0.75, method: str = "lucene",
               stem: bool = True, subdir: str = "bm25", doc_ids: np.ndarray | None = None,
               stopwords: bool = True) -> BM25Index:
    """The graph's BM25 index from ``<cache_dir>/<subdir>``, built and saved there on first use.

    ``doc_ids``: index only these nodes (document i = node ``doc_ids[i]``; statistics over them only),
    e.g. STaRK's candidate ids for the BM25 baseline; default all nodes in id order. The stored index is
    reused when it was built from a graph with the same ``graph.fingerprint``, the same ``doc_ids`` and
    the same parameters, and rebuilt otherwise."""
    d = Path(cache_dir) / subdir
    params = BM25Params(k1=k1, b=b, method=method, stem=stem, stopwords=stopwords)
    if doc_ids is None:
        ids_digest, num_docs = "all", graph.num_nodes
    else:
        doc_ids = np.ascontiguousarray(doc_ids, dtype=np.int64)
        ids_digest, num_docs = hashlib.sha1(doc_ids.tobytes()).hexdigest(), len(doc_ids)
    want = {"version": INDEX_VERSION, "fingerprint": graph.fingerprint, "num_docs": num_docs,
            "doc_ids": ids_digest, **asdict(params)}
    have = BM25Index.stored_meta(d)
    if have is not None and all(have.get(key) == val for key, val in want.items()):
        try:
            return BM25Index.load(d)
        except (OSError, ValueError, KeyError):
            pass  # unreadable: rebuild below
    texts = graph.texts() if doc_ids is None else (graph.node_text(int(i)) for i in doc_ids)
    index = BM25Index.build(texts, k1=k1, b=b, method=method, stem=stem, fingerprint=graph.fingerprint,
                            stopwords=stopwords)
    # write beside, then swap in: a concurrent reader never sees a half-written index (if a concurrent
    # builder won, its index is equal to this one)
    with atomic.building_dir(d) as tmp:
        index.save(tmp, extra={"doc_ids": ids_digest})
    return index
