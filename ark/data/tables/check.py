"""The checks of a tables graph's values, and the lookups that resolve them: ids (one kind, unique, not
empty), texts, node and relation vocabularies, edge endpoints and answers as node positions, candidates
and split names. Each refusal is a `TablesError` of one line naming the file, the row, the column and
the value as written.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa

from ark.data.graph import KnowledgeGraph
from ark.data.tables.format import (CSV_INTEGER, DEFAULT_SPLIT, FORMATS, SETTINGS_FILE, TablesError, located, pc)


def isnull(v) -> bool:
    return v is None or (isinstance(v, (float, np.floating)) and bool(np.isnan(v)))


def shown(v) -> str:
    """A value as the user wrote it, for a message: 7, 'P2', ['a', 'b'] (never np.int64(7))."""
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    return repr(v)


def as_text(v) -> str:
    return v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, default=str)


def kind_of(v) -> str:
    if isinstance(v, (bool, np.bool_)):
        return "boolean"
    if isinstance(v, (int, np.integer)):
        return "integer"
    if isinstance(v, (float, np.floating)):
        return "integer" if float(v).is_integer() else "number"
    if isinstance(v, str):
        return "string"
    return type(v).__name__


def check_one_kind(values: list, path: Path, column: str) -> None:
    first = None
    for row, v in enumerate(values):
        if isnull(v):
            continue
        k = kind_of(v)
        if first is None:
            first = (row, k)
        elif k != first[1]:
            raise TablesError(f"{located(path, row, column)}: mixed id types: {json.dumps(v, default=str)} is "
                              f"a {k}, row {first[0] + 1} is a {first[1]}; use one kind of id")


def first_null(arr) -> int | None:
    mask = pc.is_null(arr, nan_is_null=True)
    if pc.any(mask).as_py():
        return int(pc.index(mask, True).as_py())
    return None


def id_column(table: pa.Table, column: str, path: Path) -> tuple[pa.Array, str]:
    """A column of ids as an Arrow array (int64 or large_string) and its kind ("int" or "str")."""
    arr = table.column(column)
    row = first_null(arr)
    if row is not None:
        raise TablesError(f"{located(path, row, column)}: missing id")
    t = arr.type
    if pa.types.is_dictionary(t):
        return dictionary_column(arr, path, column, "id"), "str"
    arr = arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr
    if pa.types.is_integer(t):
        return arr.cast(pa.int64()), "int"
    if pa.types.is_floating(t):
        values = arr.to_numpy()
        bad = np.flatnonzero(values != np.floor(values))
        if len(bad):
            raise TablesError(f"{located(path, int(bad[0]), column)}: id {shown(values[bad[0]])} is not an integer or string")
        return pa.array(values.astype(np.int64)), "int"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        strings = arr.cast(pa.large_string())
        if FORMATS.get(path.suffix.lower()) == "csv":
            # integers only when every id is written as one (no leading zeros): "007" and "7" stay two ids
            ints = pc.match_substring_regex(strings, CSV_INTEGER)
            if pc.all(ints).as_py() and len(strings):
                return pc.cast(pc.utf8_trim_whitespace(strings), pa.int64()), "int"
        empty = pc.equal(pc.utf8_length(pc.utf8_trim_whitespace(strings)), 0)
        if pc.any(empty).as_py():
            raise TablesError(f"{located(path, int(pc.index(empty, True).as_py()), column)}: empty id")
        return strings, "str"
    raise TablesError(f"{located(path, None, column)}: ids must be strings or integers, not {t}")


def dictionary_column(arr, path: Path, column: str, what: str) -> pa.DictionaryArray:
    """One dictionary array with large_string values, every value used, none empty."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.unify_dictionaries().combine_chunks() if arr.num_chunks else pa.array([], arr.type)
    values = arr.dictionary.cast(pa.large_string())
    indices = arr.indices.to_numpy(zero_copy_only=False)   # as stored (int32 or narrower), no copy
    # the values in use, in dictionary order, and each row's position among them (what np.unique with
    # return_inverse gives, in one counting pass instead of a sort of every row)
    used = np.flatnonzero(np.bincount(indices, minlength=len(values)))
    if len(used) == len(values):
        codes = indices
    else:
        remap = np.zeros(len(values), dtype=np.int32)
        remap[used] = np.arange(len(used), dtype=np.int32)
        codes = remap[indices]
        values = values.take(pa.array(used))
    empty = pc.equal(pc.utf8_length(pc.utf8_trim_whitespace(values)), 0)
    if pc.any(empty).as_py():
        code = int(pc.index(empty, True).as_py())
        raise TablesError(f"{located(path, int(np.flatnonzero(codes == code)[0]), column)}: empty {what}")
    return pa.DictionaryArray.from_arrays(pa.array(codes.astype(np.int32, copy=False)), values)


def text_column(table: pa.Table, column: str, path: Path, what: str, allow_empty: bool = False,
           allow_null: bool = False) -> pa.Array:
    arr = table.column(column)
    if allow_null and arr.null_count:
        arr = pc.fill_null(arr.cast(pa.large_string()) if pa.types.is_null(arr.type) else arr, "")
    row = first_null(arr)
    if row is not None:
        raise TablesError(f"{located(path, row, column)}: null {what}")
    if pa.types.is_dictionary(arr.type) and not allow_empty:
        return dictionary_column(arr, path, column, what)
    arr = arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr
    if not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
        try:
            arr = arr.cast(pa.large_string())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            raise TablesError(f"{located(path, None, column)}: {what} must be text, not {arr.type}") from None
    arr = arr.cast(pa.large_string())
    if not allow_empty:
        empty = pc.equal(pc.utf8_length(pc.utf8_trim_whitespace(arr)), 0)
        if pc.any(empty).as_py():
            raise TablesError(f"{located(path, int(pc.index(empty, True).as_py()), column)}: empty {what}")
    return arr


def check_same_kind(kind: str, node_kind: str, path: Path, column: str, values: pa.Array,
                     nodes_path: Path) -> None:
    if kind != node_kind:
        row = 0
        if kind == "str" and FORMATS.get(path.suffix.lower()) == "csv":   # the first id that is not an integer
            row = int(pc.index(pc.invert(pc.match_substring_regex(values, CSV_INTEGER)), True).as_py())
        raise TablesError(f"{located(path, row, column)}: mixed id types: {column} holds {kind} ids "
                          f"(e.g. {shown(values[row].as_py())}) but {nodes_path.name} has {node_kind} ids")


def check_unique(ids: pa.Array, path: Path, what: str) -> None:
    if pc.count_distinct(ids).as_py() == len(ids):
        return
    import pandas as pd

    values = ids.to_pylist()
    series = pd.Series(values)
    row = int(np.flatnonzero(series.duplicated(keep="first").to_numpy())[0])
    first = values.index(values[row])
    raise TablesError(f"{located(path, row, 'id')}: duplicate {what} id {shown(values[row])} (first at row {first + 1})")


def may_have_string_ids(path: Path) -> bool:
    """False only for a Parquet node table whose ``id`` column is stored as integers."""
    if FORMATS.get(path.suffix.lower()) != "parquet":
        return True
    try:
        import pyarrow.parquet as pq

        schema = pq.read_schema(path)
        return "id" not in schema.names or not pa.types.is_integer(schema.field("id").type)
    except Exception:   # an unreadable file is reported by read_table
        return True


def warm_string_ids() -> None:
    """Import `ark.data.string_ids` and run its kernels once on a one-id table (loads numba's cache)."""
    from ark.data.string_ids import StringIndex

    StringIndex(pa.array(["x"])).lookup(pa.array(["x"]), threads=1)


def unique_index(ids: pa.Array, path: Path, what: str):
    """A `StringIndex` of string ids, refusing a duplicate as `check_unique` does (same line)."""
    from ark.data.string_ids import StringIndex

    index = StringIndex(ids)
    row = index.first_duplicate
    if row is not None:
        value = ids[row].as_py()
        first = int(index.lookup(pa.array([value], ids.type))[0])
        raise TablesError(f"{located(path, row, 'id')}: duplicate {what} id {value!r} (first at row {first + 1})")
    return index


def endpoint_positions(values, index, path: Path, column: str) -> np.ndarray:
    """Node positions of a plain string column of edge endpoints (a ChunkedArray, no nulls), resolved
    chunk by chunk through the node ids' `StringIndex`; a miss is refused as `id_column` and `lookup` refuse
    it: the first empty id if there is one, else the first id that is not a node id."""
    pos = index.lookup(values)
    miss = np.flatnonzero(pos < 0)
    if len(miss):
        missed = values.take(pa.array(miss)).cast(pa.large_string())
        empty = pc.equal(pc.utf8_length(pc.utf8_trim_whitespace(missed)), 0)
        if pc.any(empty).as_py():
            raise TablesError(f"{located(path, int(miss[pc.index(empty, True).as_py()]), column)}: empty id")
        row, n = int(miss[0]), len(miss)
        raise TablesError(f"{located(path, row, column)}: edge endpoint {missed[0].as_py()!r} is not a node id "
                          f"({n} such row{'s' if n > 1 else ''})")
    return pos


def lookup(node_ids: pa.Array, values: pa.Array, path: Path, column: str, what: str) -> np.ndarray:
    """Position in ``node_ids`` of each of ``values`` (hash lookup in Arrow, no Python objects)."""
    if pa.types.is_dictionary(values.type):
        found = pc.index_in(values.dictionary, value_set=node_ids)
        if pc.any(pc.is_null(found)).as_py():
            bad = pc.is_null(pc.take(found, values.indices))
            row = int(pc.index(bad, True).as_py())
            n = int(pc.sum(bad).as_py())
            raise TablesError(f"{located(path, row, column)}: {what} {values[row].as_py()!r} is not a node id "
                              f"({n} such row{'s' if n > 1 else ''})")
        return found.to_numpy().astype(np.int64)[values.indices.to_numpy()]
    pos = pc.index_in(values, value_set=node_ids)
    missing = pc.is_null(pos)
    if pc.any(missing).as_py():
        row = int(pc.index(missing, True).as_py())
        n = int(pc.sum(missing).as_py())
        raise TablesError(f"{located(path, row, column)}: {what} {values[row].as_py()!r} is not a node id "
                          f"({n} such row{'s' if n > 1 else ''})")
    return pos.to_numpy().astype(np.int64)


def vocabulary(values: pa.Array, order: Sequence[str] | None, path: Path, column: str, kind: str
                ) -> tuple[list[str], np.ndarray]:
    """Names in first-appearance order (or ``order``) and each row's code."""
    if pa.types.is_dictionary(values.type):
        enc = values
    else:
        enc = pc.dictionary_encode(values).combine_chunks() if isinstance(values, pa.ChunkedArray) \
            else pc.dictionary_encode(values)
    names = enc.dictionary.to_pylist()
    codes = enc.indices.to_numpy().astype(np.int64)
    if order is None:
        return names, codes
    order = list(order)
    pos = {n: i for i, n in enumerate(order)}
    unknown = [n for n in names if n not in pos]
    if unknown:
        row = int(np.flatnonzero(codes == names.index(unknown[0]))[0])
        raise TablesError(f"{located(path, row, column)}: {kind} {unknown[0]!r} is not in {SETTINGS_FILE}'s "
                          f"list; valid {kind}s: {', '.join(order)}")
    remap = np.array([pos[n] for n in names], dtype=np.int64)
    return order, remap[codes] if len(codes) else codes


def check_candidates(graph: KnowledgeGraph, pos: np.ndarray, answers: list[list], path: Path) -> None:
    """Every answer is a candidate (a node the run ranks and scores): an answer outside them could never
    be retrieved, and its query would score 0 without a word."""
    cands = np.asarray(graph.candidate_ids)
    if len(cands) == graph.num_nodes:
        return
    is_cand = np.zeros(graph.num_nodes, dtype=bool)
    is_cand[cands] = True
    outside = np.flatnonzero(~is_cand[pos])
    if not len(outside):
        return
    k = int(outside[0])
    row = int(np.searchsorted(np.cumsum([len(a) for a in answers]), k, side="right"))
    types = sorted({graph.node_type_names[t] for t in np.asarray(graph.node_types)[cands].tolist()})
    n_rows = len({int(np.searchsorted(np.cumsum([len(a) for a in answers]), j, side="right")) for j in outside})
    raise TablesError(f"{located(path, row, 'answers')}: answer {shown(answers[row][k - sum(map(len, answers[:row]))])} "
                      f"is a {graph.node_type_names[int(graph.node_types[pos[k]])]}, not a candidate (the nodes ranked "
                      f"and scored: {', '.join(types)}; {n_rows} such quer{'ies' if n_rows > 1 else 'y'}); widen "
                      "candidate_types or candidates, or drop the answer")


def parse_list(text: str, where: str) -> list:
    """A list written into one cell: JSON (``["P1", "P7"]``) or Python, as pandas' ``to_csv`` writes a
    list (``['P1', 'P7']``)."""
    import ast

    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            raise TablesError(f"{where}: unreadable list {text[:200]!r}; write a JSON list such as "
                              '["P1", "P7"] (or a Python one, as pandas writes it: [\'P1\', \'P7\'])') from None
    if not isinstance(value, (list, tuple)):
        raise TablesError(f"{where}: {text[:200]!r} is not a list; write a JSON list such as [\"P1\", \"P7\"]")
    return list(value)


def split_names(value, row: int, path: Path) -> list[str]:
    where = located(path, row, "split")
    if isnull(value):
        return [DEFAULT_SPLIT]
    if isinstance(value, str):
        text = value.strip()
        value = parse_list(text, where) if text.startswith("[") else [x.strip() for x in text.split(",")]
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if not isinstance(value, (list, tuple)):
        raise TablesError(f"{where}: split {shown(value)} is a {kind_of(value)}; write a split name (e.g. \"test\"), "
                          'names separated by commas, or a list of names')
    bad = [v for v in value if not isinstance(v, str)]
    if bad:
        raise TablesError(f"{where}: split {shown(bad[0])} is a {kind_of(bad[0])}; split names are text, "
                          'e.g. ["val", "test"]')
    names = [v.strip() for v in value if v.strip()]
    return names or [DEFAULT_SPLIT]
