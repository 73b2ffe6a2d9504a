"""`StringIndex`: string node ids -> node positions, one hash table built once over Arrow's buffers.

A tables graph names its edge endpoints by the nodes' own string ids (``"paper:123"``): a MAG-size
graph has 80M of them to resolve against 1.9M node ids. ``pyarrow.compute.index_in`` hashes the node
ids again on every call, and a dictionary-encoded read of the edge columns hashes every row anyway (a
Parquet writer gives up dictionary pages when a row group holds more distinct ids than its page
limit, so the reader rebuilds them). This module keeps one open-addressing table, built once, and
probes it from numba over the offsets and data buffers of each Arrow array, with no Python object per
id.

Each id is reduced to two independent 64-bit hashes of its UTF-8 bytes (8-byte words mixed with
multiply-rotate steps, murmur3's finalizer; different seeds). A slot holds both hashes and the id's
position, so a probe reads one slot and never the node ids' bytes: an edge id that is not a node id
is taken for one only if both hashes collide with a node's (odds about n / 2^128 per such id). Building
the table compares bytes whenever both hashes agree, so duplicate node ids are exact.

    index = StringIndex(node_ids)            # a string Arrow array; index.first_duplicate: None or a row
    positions = index.lookup(edges["src"])   # int64 positions, -1 where an id is not a node id

Used by `ark.data.tables`; no command line of its own (``ark build --graph <tables folder>`` runs it).
"""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
from numba import njit, uint64

_SEEDS = (np.uint64(0x9E3779B97F4A7C15), np.uint64(0xC2B2AE3D27D4EB4F))
_K = np.uint64(0x517CC1B727220A95)


@njit(cache=True, nogil=True, inline="always")
def _fmix(h):
    h ^= h >> uint64(33)
    h *= uint64(0xFF51AFD7ED558CCD)
    h ^= h >> uint64(33)
    h *= uint64(0xC4CEB9FE1A85EC53)
    h ^= h >> uint64(33)
    return h


@njit(cache=True, nogil=True, inline="always")
def _hash2(data, start, end, seed1, seed2):
    """Two 64-bit hashes of data[start:end]: 8-byte little-endian words (the tail zero-padded), each
    mixed in as ``h = rotl(h, 23) ^ word) * K``, the length mixed in last, then murmur3's finalizer."""
    h1, h2 = seed1, seed2
    i = start
    while i < end:
        w = uint64(0)
        stop = min(i + 8, end)
        shift = uint64(0)
        for j in range(i, stop):
            w |= uint64(data[j]) << shift
            shift += uint64(8)
        h1 = (((h1 << uint64(23)) | (h1 >> uint64(41))) ^ w) * _K
        h2 = (((h2 << uint64(29)) | (h2 >> uint64(35))) ^ w) * _K
        i = stop
    n = uint64(end - start)
    return _fmix(h1 ^ n), _fmix(h2 ^ (n * _K))


@njit(cache=True, nogil=True, inline="always")
def _same(data, a0, a1, b0, b1):
    if a1 - a0 != b1 - b0:
        return False
    for i in range(a1 - a0):
        if data[a0 + i] != data[b0 + i]:
            return False
    return True


@njit(cache=True, nogil=True)
def _build(offsets, data, table, seed1, seed2):
    """Insert ids 0..n-1 into ``table`` ([slots, 3]: hash 1, hash 2, position + 1; 0 = empty). Returns the
    first row whose id (same bytes) is already in the table, or -1."""
    mask = uint64(table.shape[0] - 1)
    for i in range(len(offsets) - 1):
        a0, a1 = offsets[i], offsets[i + 1]
        h1, h2 = _hash2(data, a0, a1, seed1, seed2)
        s = h1 & mask
        while True:
            p = table[s, 2]
            if p == 0:
                table[s, 0], table[s, 1], table[s, 2] = h1, h2, uint64(i + 1)
                break
            if table[s, 0] == h1 and table[s, 1] == h2:
                j = np.int64(p) - 1
                if _same(data, a0, a1, offsets[j], offsets[j + 1]):
                    return i
            s = (s + uint64(1)) & mask
    return -1


BLOCK = 2048  # keys hashed, then their slots touched, then resolved, per block (the slots stay in cache)


@njit(cache=True, nogil=True)
def _probe(table, key_offsets, key_data, out, seed1, seed2):
    """Position of each key in the table, -1 when absent (matched on both hashes). Per block of keys the
    hashes come first, then one load of each key's home slot with no branch between the loads (so the
    processor has many cache misses in flight instead of one), then the probe proper."""
    mask = uint64(table.shape[0] - 1)
    m = len(key_offsets) - 1
    h1s = np.empty(BLOCK, dtype=np.uint64)
    h2s = np.empty(BLOCK, dtype=np.uint64)
    touched = uint64(0)
    for b in range(0, m, BLOCK):
        e = min(m, b + BLOCK)
        for i in range(b, e):
            h1s[i - b], h2s[i - b] = _hash2(key_data, key_offsets[i], key_offsets[i + 1], seed1, seed2)
        for i in range(e - b):
            touched += table[h1s[i] & mask, 2]
        for i in range(b, e):
            h1, h2 = h1s[i - b], h2s[i - b]
            s = h1 & mask
            found = -1
            while True:
                p = table[s, 2]
                if p == 0:
                    break
                if table[s, 0] == h1 and table[s, 1] == h2:
                    found = np.int64(p) - 1
                    break
                s = (s + uint64(1)) & mask
            out[i] = found
    return touched


def _buffers(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(offsets, uint8 data) views of a string or large_string array's buffers (int32 or int64 offsets
    as stored; nothing is copied)."""
    if pa.types.is_string(arr.type):
        width = np.dtype(np.int32)
    elif pa.types.is_large_string(arr.type):
        width = np.dtype(np.int64)
    else:
        raise TypeError(f"expected a string array, got {arr.type}")
    _, off_buf, data_buf = arr.buffers()
    offsets = np.frombuffer(off_buf, dtype=width, count=len(arr) + 1, offset=arr.offset * width.itemsize)
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None and data_buf.size else np.zeros(1, np.uint8)
    return offsets, data


class StringIndex:
    """The positions of ``ids`` (a string Arrow array, no nulls) by value; ``first_duplicate`` is the first
    row repeating an earlier id (None when all are distinct; lookups then return the earlier row)."""

    def __init__(self, ids: pa.Array | pa.ChunkedArray):
        if isinstance(ids, pa.ChunkedArray):
            ids = ids.combine_chunks() if ids.num_chunks else pa.array([], ids.type)
        offsets, data = _buffers(ids)
        size = 1 << max(4, int(2 * max(len(ids), 1) - 1).bit_length())   # load factor <= 1/2
        self._table = np.zeros((size, 3), dtype=np.uint64)
        dup = _build(offsets, data, self._table, *_SEEDS)
        self.first_duplicate = None if dup < 0 else int(dup)
        self._n = len(ids)

    def __len__(self) -> int:
        return self._n

    def lookup(self, values: pa.Array | pa.ChunkedArray, threads: int | None = None) -> np.ndarray:
        """int64 position of each value (-1 where it is not one of the ids), chunk by chunk, on up to
        ``threads`` threads (default: the CPUs this process may use; the probes release the GIL)."""
        chunks = [c for c in (values.chunks if isinstance(values, pa.ChunkedArray) else [values])]
        out = np.empty(sum(len(c) for c in chunks), dtype=np.int64)
        starts = np.cumsum([0] + [len(c) for c in chunks])

        def one(i: int) -> None:
            if len(chunks[i]):
                key_offsets, key_data = _buffers(chunks[i])
                _probe(self._table, key_offsets, key_data, out[starts[i]: starts[i + 1]], *_SEEDS)

        if threads is None:
            threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        workers = min(len(chunks), threads)
        if workers <= 1:
            for i in range(len(chunks)):
                one(i)
        else:
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(workers) as pool:
                list(pool.map(one, range(len(chunks))))
        return out
