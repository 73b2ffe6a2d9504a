"""ark.data.string_ids.StringIndex against pyarrow's own index_in: every id found at its row, every other
string missing, duplicates at their first repeat, ids of any length and script, chunked and sliced arrays."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from ark.data.string_ids import StringIndex


def _random_ids(rng, n: int) -> list[str]:
    alphabet = list("abcxyz019:_-") + ["é", "ß", "中", "🙂", " "]
    out = []
    for _ in range(n):
        length = int(rng.choice([0, 1, 7, 8, 9, 15, 16, 17, 40]))
        out.append("".join(rng.choice(alphabet, size=length)))
    return out


@pytest.mark.parametrize("large", [False, True])
def test_lookup_equals_index_in_on_random_ids(large):
    rng = np.random.default_rng(0)
    ids = list(dict.fromkeys(_random_ids(rng, 6000)))           # distinct, first-appearance order
    typ = pa.large_string() if large else pa.string()
    node_ids = pa.array(ids, typ)
    index = StringIndex(node_ids)
    assert index.first_duplicate is None and len(index) == len(ids)
    keys = ids + _random_ids(rng, 3000) + ["", "abc", ids[0] + " "]
    keys = [keys[i] for i in rng.permutation(len(keys))]
    chunked = pa.chunked_array([pa.array(keys[:1000], typ), pa.array(keys[1000:], typ)])
    want = pc.index_in(pa.array(keys, typ), value_set=node_ids).to_numpy(zero_copy_only=False)
    want = np.where(np.isnan(want.astype(float)), -1, want).astype(np.int64)
    got = index.lookup(chunked)
    assert got.tolist() == want.tolist()
    assert (got >= 0).sum() >= len(ids) and (got < 0).sum() > 100
    # a slice (an array with an offset) reads the right bytes
    sliced = pa.array(keys, typ).slice(500, 700)
    assert index.lookup(sliced).tolist() == want[500:1200].tolist()


def test_first_duplicate_is_the_first_repeated_row_like_pandas():
    rng = np.random.default_rng(1)
    for _ in range(50):
        ids = _random_ids(rng, int(rng.integers(1, 60)))
        index = StringIndex(pa.array(ids))
        dup = pd.Series(ids).duplicated(keep="first").to_numpy()
        assert index.first_duplicate == (int(np.flatnonzero(dup)[0]) if dup.any() else None), ids
        if index.first_duplicate is not None:   # a lookup of the repeated id finds its first row
            value = ids[index.first_duplicate]
            assert index.lookup(pa.array([value]))[0] == ids.index(value)


def test_empty_inputs():
    index = StringIndex(pa.array([], pa.string()))
    assert len(index) == 0 and index.lookup(pa.array(["a"])).tolist() == [-1]
    assert StringIndex(pa.array(["a"])).lookup(pa.chunked_array([], pa.string())).tolist() == []
