"""Your own knowledge graph as tables: nodes, edges and (optionally) queries, in Parquet, CSV or JSONL.

A graph folder holds ``nodes.<ext>``, ``edges.<ext>`` and optionally ``queries.<ext>`` and ``graph.json``
(``<ext>``: ``parquet``, ``csv`` or ``jsonl``; the three tables may use different formats):

* ``nodes``: ``id`` (string or integer, unique), ``type``, ``name``, ``text`` (may be empty or null: a
  node with a name only). Further columns are appended to the node's document, one ``- <column>:
  <value>`` line each, in the file's column order, skipping null or empty values. The document (what
  BM25 indexes and observations cut snippets from) is::

      - name: <name>
      - type: <type>
      <text>                 (left out when the text is empty)
      - <column>: <value>

  or, when a ``template`` is set, ``template.format(**row)`` over all columns (e.g. ``"{text}"``).
* ``edges``: ``src``, ``dst``, ``relation`` (node ids as in ``nodes``; stored directed, explored in both
  directions; a header without rows is a graph without edges).
* ``queries``: ``id``, ``query``, ``answers`` (a list of node ids; in CSV a JSON list such as
  ``["P1", "P7"]`` or a Python one as pandas' ``to_csv`` writes it, ``['P1', 'P7']``; one id alone is
  a list of one), optional ``split`` (a name, names separated by commas, or a list; default ``test``).
  A split lists its queries in file order. Every answer must be a candidate (see ``candidate_types``):
  an answer the run never ranks is a build error, not a silent 0.
* ``graph.json`` (optional settings; arguments of `TablesSource` win): ``name``, ``candidate_types``
  (the node types ranked and scored, as STaRK ranks only MAG papers; default all nodes), ``candidates``
  (explicit external ids), ``template``, ``node_types`` and ``relations`` (vocabulary order), and
  ``format`` (``"ark-tables/1"``, written by `export`: the mark of a folder it may replace).

Ids keep their type: integer ids stay integers (in CSV, a column whose values are all integers written
as Python writes them is read as integers, so ``007`` and ``7`` are two string ids), everything else is
a string; one graph uses one kind. Internal node ids are 0..N-1 in the order of ``nodes``; the external
ids are kept in the graph (`KnowledgeGraph.external_id`). A CSV field may be larger than pyarrow's
block (it is read again with larger blocks).

Bad input raises `TablesError`, one line naming the file, the row (1 = first data row), the column and
the value as written: missing columns, a table without nodes, duplicate ids, edges to unknown nodes,
answers that are not nodes or not candidates, answers or splits that are no list or name, mixed id
types, unreadable files. `export` writes any graph (and its queries) in this format.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa

from ark import atomic
from ark.data.graph import KnowledgeGraph
from ark.data.sources import DEFAULT_ROOT, GraphSource, files_fingerprint


class _Compute:
    """``pyarrow.compute``, imported on first use (then bound as the module's ``pc``): a sweep job that
    opens a cached graph and its resolved queries never needs it, and its import costs 0.1-0.3 s."""

    def __getattr__(self, name: str):
        import pyarrow.compute as module

        globals()["pc"] = module
        return getattr(module, name)


pc = _Compute()

NODE_COLUMNS = ("id", "type", "name", "text")
CSV_INTEGER = r"^\s*(?:0|-?[1-9][0-9]{0,17})\s*$"   # a CSV id read as an integer: as Python writes one
EDGE_COLUMNS = ("src", "dst", "relation")
QUERY_COLUMNS = ("id", "query", "answers")
FORMATS = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl"}
SETTINGS_FILE = "graph.json"
SETTINGS_KEYS = ("name", "candidate_types", "candidates", "template", "node_types", "relations", "format")
EXPORT_FORMAT = "ark-tables/1"   # graph.json's "format" in a folder `export` wrote: the only kind it replaces
QUERIES_CACHE, QUERIES_CACHE_VERSION = "queries.json", 1   # resolved query sets, beside the graph cache
DEFAULT_SPLIT = "test"


class TablesError(ValueError):
    """Bad tables input: one line naming the file, row and column."""


def _where(path: Path, row: int | None = None, column: str | None = None) -> str:
    out = str(path)
    if row is not None:
        out += f": row {row + 1}"
    if column is not None:
        out += f", column {column!r}" if row is not None else f": column {column!r}"
    return out


# ============================================================================ reading one table
def find_table(folder: Path, stem: str, required: bool = True) -> Path | None:
    """``folder/<stem>.<ext>`` for the one supported extension present."""
    found = [folder / f"{stem}{ext}" for ext in FORMATS if (folder / f"{stem}{ext}").exists()]
    if len(found) > 1:
        raise TablesError(f"{folder}: several {stem} tables ({', '.join(p.name for p in found)}); keep one")
    if not found:
        if required:
            raise TablesError(f"{folder}: no {stem} table; expected one of "
                              f"{', '.join(stem + e for e in FORMATS)}")
        return None
    return found[0]


def read_table(path: Path | str, required: Sequence[str], id_columns: Sequence[str] = (),
               dictionary: Sequence[str] = (), list_columns: Sequence[str] = ()) -> pa.Table:
    """Read a Parquet, CSV or JSONL file into an Arrow table and check its required columns. In CSV the
    ``id_columns`` are read as text (`_ids` then decides whether they are integers). Parquet string
    columns named in ``dictionary`` are read dictionary-encoded (as stored): an edge table's 40M ids
    then cost one lookup per distinct id, not one per row. A JSONL column of ``list_columns`` whose
    cells mix kinds (a string among lists) keeps each cell as JSON text, named in the table's
    metadata (`json_cells`), so its reader sees every cell as it was written."""
    path = Path(path)
    fmt = FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise TablesError(f"{path}: unknown table format {path.suffix!r}; valid formats: {', '.join(FORMATS)}")
    if not path.is_file():
        raise TablesError(f"{path}: no such file")
    try:
        if fmt == "parquet":
            import pyarrow.parquet as pq

            schema = pq.read_schema(path)
            as_dict = [c for c in dictionary if c in schema.names
                       and (pa.types.is_string(schema.field(c).type) or pa.types.is_large_string(schema.field(c).type))]
            table = pq.read_table(path, read_dictionary=as_dict, memory_map=True)
        elif fmt == "csv":
            import pyarrow.csv as pacsv

            names = _csv_header(path)
            types = {c: pa.large_string() for c in (*id_columns, "answers", "split") if c in names}
            table = _read_csv(path, pacsv.ConvertOptions(
                column_types=types, strings_can_be_null=False, quoted_strings_can_be_null=False))
        else:
            table = _read_jsonl(path, id_columns, list_columns)
    except TablesError:
        raise
    except Exception as e:  # pyarrow/pandas raise many kinds of errors for a bad file
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise TablesError(f"{path}: unreadable {fmt} file ({msg})") from None
    missing = [c for c in required if c not in table.column_names]
    if missing:
        raise TablesError(f"{path}: missing column{'s' if len(missing) > 1 else ''} "
                          f"{', '.join(map(repr, missing))}; columns present: {', '.join(table.column_names)}")
    return table


def _csv_header(path: Path) -> list[str]:
    import csv

    with open(path, newline="", encoding="utf-8") as f:
        return next(csv.reader(f), [])


def _read_csv(path: Path, convert) -> pa.Table:
    """pyarrow's CSV reader; a field longer than its block (1 MiB) is read again with larger blocks
    (up to the whole file) instead of failing with "straddling object"."""
    import pyarrow.csv as pacsv

    block = None
    while True:
        try:
            return pacsv.read_csv(path, read_options=pacsv.ReadOptions(block_size=block) if block else None,
                                  convert_options=convert)
        except pa.ArrowInvalid as e:
            size = path.stat().st_size
            if "straddling" not in str(e) or (block or 0) > size:
                raise
            block = min(max(8 << 20, 8 * (block or 0)), size + 1, 2**31 - 1)


JSON_CELLS = b"ark_json_cells"   # table metadata: the columns whose cells are JSON text (`_read_jsonl`)


def json_cells(table: pa.Table) -> set[str]:
    """The columns of ``table`` whose cells `read_table` kept as JSON text (mixed kinds in a JSONL list column)."""
    meta = table.schema.metadata or {}
    return {c for c in meta.get(JSON_CELLS, b"").decode().split(",") if c}


def _read_jsonl(path: Path, id_columns: Sequence[str], list_columns: Sequence[str] = ()) -> pa.Table:
    import pandas as pd  # here: a job that only loads a cached graph never pays its import

    df = pd.read_json(path, lines=True, dtype=False, convert_dates=False)
    columns, as_json = {}, []
    for c in df.columns:
        values = df[c]
        if c in id_columns and values.dtype == object:
            _check_one_kind(values.tolist(), path, str(c))
        try:
            columns[str(c)] = pa.array(values.tolist() if values.dtype == object else values.to_numpy(),
                                       from_pandas=True)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            if c in list_columns:   # e.g. one string answer among lists: each cell kept as written, as JSON
                columns[str(c)] = pa.array([None if _isnull(v) else json.dumps(v, ensure_ascii=False, default=str)
                                            for v in values], pa.large_string())
                as_json.append(str(c))
            else:                   # mixed values in a free column: keep them as text
                columns[str(c)] = pa.array([None if _isnull(v) else _as_text(v) for v in values], pa.large_string())
    table = pa.table(columns) if columns else pa.table({})
    return table.replace_schema_metadata({JSON_CELLS: ",".join(as_json).encode()}) if as_json else table


def _isnull(v) -> bool:
    return v is None or (isinstance(v, (float, np.floating)) and bool(np.isnan(v)))


def _shown(v) -> str:
    """A value as the user wrote it, for a message: 7, 'P2', ['a', 'b'] (never np.int64(7))."""
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    return repr(v)


def _as_text(v) -> str:
    return v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, default=str)


def _kind(v) -> str:
    if isinstance(v, (bool, np.bool_)):
        return "boolean"
    if isinstance(v, (int, np.integer)):
        return "integer"
    if isinstance(v, (float, np.floating)):
        return "integer" if float(v).is_integer() else "number"
    if isinstance(v, str):
        return "string"
    return type(v).__name__


def _check_one_kind(values: list, path: Path, column: str) -> None:
    first = None
    for row, v in enumerate(values):
        if _isnull(v):
            continue
        k = _kind(v)
        if first is None:
            first = (row, k)
        elif k != first[1]:
            raise TablesError(f"{_where(path, row, column)}: mixed id types: {json.dumps(v, default=str)} is "
                              f"a {k}, row {first[0] + 1} is a {first[1]}; use one kind of id")


def _first_null(arr) -> int | None:
    mask = pc.is_null(arr, nan_is_null=True)
    if pc.any(mask).as_py():
        return int(pc.index(mask, True).as_py())
    return None


def _ids(table: pa.Table, column: str, path: Path) -> tuple[pa.Array, str]:
    """A column of ids as an Arrow array (int64 or large_string) and its kind ("int" or "str")."""
    arr = table.column(column)
    row = _first_null(arr)
    if row is not None:
        raise TablesError(f"{_where(path, row, column)}: missing id")
    t = arr.type
    if pa.types.is_dictionary(t):
        return _dictionary(arr, path, column, "id"), "str"
    arr = arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr
    if pa.types.is_integer(t):
        return arr.cast(pa.int64()), "int"
    if pa.types.is_floating(t):
        values = arr.to_numpy()
        bad = np.flatnonzero(values != np.floor(values))
        if len(bad):
            raise TablesError(f"{_where(path, int(bad[0]), column)}: id {_shown(values[bad[0]])} is not an integer or string")
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
            raise TablesError(f"{_where(path, int(pc.index(empty, True).as_py()), column)}: empty id")
        return strings, "str"
    raise TablesError(f"{_where(path, None, column)}: ids must be strings or integers, not {t}")


def _dictionary(arr, path: Path, column: str, what: str) -> pa.DictionaryArray:
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
        raise TablesError(f"{_where(path, int(np.flatnonzero(codes == code)[0]), column)}: empty {what}")
    return pa.DictionaryArray.from_arrays(pa.array(codes.astype(np.int32, copy=False)), values)


def _texts(table: pa.Table, column: str, path: Path, what: str, allow_empty: bool = False,
           allow_null: bool = False) -> pa.Array:
    arr = table.column(column)
    if allow_null and arr.null_count:
        arr = pc.fill_null(arr.cast(pa.large_string()) if pa.types.is_null(arr.type) else arr, "")
    row = _first_null(arr)
    if row is not None:
        raise TablesError(f"{_where(path, row, column)}: null {what}")
    if pa.types.is_dictionary(arr.type) and not allow_empty:
        return _dictionary(arr, path, column, what)
    arr = arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr
    if not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
        try:
            arr = arr.cast(pa.large_string())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            raise TablesError(f"{_where(path, None, column)}: {what} must be text, not {arr.type}") from None
    arr = arr.cast(pa.large_string())
    if not allow_empty:
        empty = pc.equal(pc.utf8_length(pc.utf8_trim_whitespace(arr)), 0)
        if pc.any(empty).as_py():
            raise TablesError(f"{_where(path, int(pc.index(empty, True).as_py()), column)}: empty {what}")
    return arr


def _check_same_kind(kind: str, node_kind: str, path: Path, column: str, values: pa.Array,
                     nodes_path: Path) -> None:
    if kind != node_kind:
        row = 0
        if kind == "str" and FORMATS.get(path.suffix.lower()) == "csv":   # the first id that is not an integer
            row = int(pc.index(pc.invert(pc.match_substring_regex(values, CSV_INTEGER)), True).as_py())
        raise TablesError(f"{_where(path, row, column)}: mixed id types: {column} holds {kind} ids "
                          f"(e.g. {_shown(values[row].as_py())}) but {nodes_path.name} has {node_kind} ids")


def _check_unique(ids: pa.Array, path: Path, what: str) -> None:
    if pc.count_distinct(ids).as_py() == len(ids):
        return
    import pandas as pd

    values = ids.to_pylist()
    series = pd.Series(values)
    row = int(np.flatnonzero(series.duplicated(keep="first").to_numpy())[0])
    first = values.index(values[row])
    raise TablesError(f"{_where(path, row, 'id')}: duplicate {what} id {_shown(values[row])} (first at row {first + 1})")


def _may_have_string_ids(path: Path) -> bool:
    """False only for a Parquet node table whose ``id`` column is stored as integers."""
    if FORMATS.get(path.suffix.lower()) != "parquet":
        return True
    try:
        import pyarrow.parquet as pq

        schema = pq.read_schema(path)
        return "id" not in schema.names or not pa.types.is_integer(schema.field("id").type)
    except Exception:   # an unreadable file is reported by read_table
        return True


def _warm_string_ids() -> None:
    """Import `ark.data.string_ids` and run its kernels once on a one-id table (loads numba's cache)."""
    from ark.data.string_ids import StringIndex

    StringIndex(pa.array(["x"])).lookup(pa.array(["x"]), threads=1)


def _unique_index(ids: pa.Array, path: Path, what: str):
    """A `StringIndex` of string ids, refusing a duplicate as `_check_unique` does (same line)."""
    from ark.data.string_ids import StringIndex

    index = StringIndex(ids)
    row = index.first_duplicate
    if row is not None:
        value = ids[row].as_py()
        first = int(index.lookup(pa.array([value], ids.type))[0])
        raise TablesError(f"{_where(path, row, 'id')}: duplicate {what} id {value!r} (first at row {first + 1})")
    return index


def _endpoints(values, index, path: Path, column: str) -> np.ndarray:
    """Node positions of a plain string column of edge endpoints (a ChunkedArray, no nulls), resolved
    chunk by chunk through the node ids' `StringIndex`; a miss is refused as `_ids` and `_lookup` refuse
    it: the first empty id if there is one, else the first id that is not a node id."""
    pos = index.lookup(values)
    miss = np.flatnonzero(pos < 0)
    if len(miss):
        missed = values.take(pa.array(miss)).cast(pa.large_string())
        empty = pc.equal(pc.utf8_length(pc.utf8_trim_whitespace(missed)), 0)
        if pc.any(empty).as_py():
            raise TablesError(f"{_where(path, int(miss[pc.index(empty, True).as_py()]), column)}: empty id")
        row, n = int(miss[0]), len(miss)
        raise TablesError(f"{_where(path, row, column)}: edge endpoint {missed[0].as_py()!r} is not a node id "
                          f"({n} such row{'s' if n > 1 else ''})")
    return pos


def _lookup(node_ids: pa.Array, values: pa.Array, path: Path, column: str, what: str) -> np.ndarray:
    """Position in ``node_ids`` of each of ``values`` (hash lookup in Arrow, no Python objects)."""
    if pa.types.is_dictionary(values.type):
        found = pc.index_in(values.dictionary, value_set=node_ids)
        if pc.any(pc.is_null(found)).as_py():
            bad = pc.is_null(pc.take(found, values.indices))
            row = int(pc.index(bad, True).as_py())
            n = int(pc.sum(bad).as_py())
            raise TablesError(f"{_where(path, row, column)}: {what} {values[row].as_py()!r} is not a node id "
                              f"({n} such row{'s' if n > 1 else ''})")
        return found.to_numpy().astype(np.int64)[values.indices.to_numpy()]
    pos = pc.index_in(values, value_set=node_ids)
    missing = pc.is_null(pos)
    if pc.any(missing).as_py():
        row = int(pc.index(missing, True).as_py())
        n = int(pc.sum(missing).as_py())
        raise TablesError(f"{_where(path, row, column)}: {what} {values[row].as_py()!r} is not a node id "
                          f"({n} such row{'s' if n > 1 else ''})")
    return pos.to_numpy().astype(np.int64)


def _vocabulary(values: pa.Array, order: Sequence[str] | None, path: Path, column: str, kind: str
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
        raise TablesError(f"{_where(path, row, column)}: {kind} {unknown[0]!r} is not in {SETTINGS_FILE}'s "
                          f"list; valid {kind}s: {', '.join(order)}")
    remap = np.array([pos[n] for n in names], dtype=np.int64)
    return order, remap[codes] if len(codes) else codes


# ============================================================================ documents
def _decoded(arr: pa.Array) -> pa.Array:
    """A dictionary-encoded text column (as Parquet stores a repeated ``type``) as plain large strings."""
    if pa.types.is_dictionary(arr.type):
        return arr.dictionary.cast(pa.large_string()).take(arr.indices)
    return arr


def documents(table: pa.Table, names: pa.Array, types: pa.Array, texts: pa.Array,
              template: str | None, path: Path) -> pa.Array:
    """The node documents (see the module docstring for the layout)."""
    if template is not None:
        rows = table.to_pylist()
        out = []
        for i, row in enumerate(rows):
            try:
                out.append(template.format(**{k: ("" if v is None else v) for k, v in row.items()}))
            except (KeyError, IndexError, ValueError) as e:
                raise TablesError(f"{_where(path, i, None)}: template {template!r} failed ({type(e).__name__}: "
                                  f"{e}); columns: {', '.join(table.column_names)}") from None
        return pa.array(out, pa.large_string())
    names, types, texts = (_decoded(a) for a in (names, types, texts))
    # a node without text (a name only) keeps the name and type lines: no empty line after them
    text_line = pc.if_else(pc.equal(pc.utf8_length(pc.utf8_trim_whitespace(texts)), 0), pa.scalar("", pa.large_string()),
                           pc.binary_join_element_wise(pa.scalar("\n", pa.large_string()), texts, pa.scalar("", pa.large_string())))
    parts = [pa.scalar("- name: ", pa.large_string()), names, pa.scalar("\n- type: ", pa.large_string()),
             types, text_line]
    for column in table.column_names:
        if column in NODE_COLUMNS:
            continue
        values = table.column(column).combine_chunks()
        if pa.types.is_string(values.type) or pa.types.is_large_string(values.type):
            text = values.cast(pa.large_string())
        else:
            try:
                text = values.cast(pa.large_string())
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                text = pa.array([None if v is None else _as_text(v) for v in values.to_pylist()], pa.large_string())
        keep = pc.and_(pc.invert(pc.is_null(text)), pc.greater(pc.utf8_length(pc.utf8_trim_whitespace(
            pc.fill_null(text, ""))), 0))
        line = pc.binary_join_element_wise(pa.scalar(f"\n- {column}: ", pa.large_string()), pc.fill_null(text, ""), pa.scalar("", pa.large_string()))
        parts.append(pc.if_else(keep, line, pa.scalar("", pa.large_string())))
    return pc.binary_join_element_wise(*parts, pa.scalar("", pa.large_string()))


# ============================================================================ the source
def default_name(path: str | Path | None) -> str:
    """The name a tables graph goes by when none is given: ``graph.json``'s ``name``, else the folder's
    name ("tables" without a folder). ``conf/graph/tables.yaml`` names its graph this way, so a run, its
    cache and ``ark build --graph <folder>`` agree; a name given on the command line wins."""
    if path is None:
        return "tables"
    folder = Path(path)
    try:
        name = json.loads((folder / SETTINGS_FILE).read_text()).get("name")
    except (OSError, ValueError, AttributeError):
        name = None   # no or a broken graph.json: the source names the problem when it is built
    return name if isinstance(name, str) and name else (folder.resolve().name or "tables")


class TablesSource(GraphSource):
    """A graph read from a folder of tables (or from explicit ``nodes``/``edges``/``queries`` files).

    ``name`` (default: ``graph.json``'s, else the folder's name, `default_name`; a given one wins) names
    the cache and the run directories; ``candidate_types`` restricts the ranked candidates to these node types;
    ``template`` replaces the default document layout."""

    external_ids = True   # the id column: what the tools show and take by default (ark.tools.ids)

    def __init__(self, path: str | Path | None = None, name: str | None = None, root: str | Path | None = DEFAULT_ROOT,
                 nodes: str | Path | None = None, edges: str | Path | None = None,
                 queries: str | Path | None = None, candidate_types: Sequence[str] | str | None = None,
                 template: str | None = None):
        folder = Path(path) if path is not None else None
        if folder is not None and not folder.is_dir():
            raise TablesError(f"{folder}: no such folder (the tables graph needs nodes and edges tables in it)")
        self.folder = folder
        self.settings = self._read_settings()
        self.nodes_path = Path(nodes) if nodes else find_table(self._need_folder("nodes"), "nodes")
        self.edges_path = Path(edges) if edges else find_table(self._need_folder("edges"), "edges")
        self.queries_path = Path(queries) if queries else (
            find_table(folder, "queries", required=False) if folder is not None else None)
        if isinstance(candidate_types, str):
            candidate_types = [t.strip() for t in candidate_types.split(",") if t.strip()]
        self.candidate_types = list(candidate_types) if candidate_types is not None else self.settings.get("candidate_types")
        self.template = template if template is not None else self.settings.get("template")
        name = name or (default_name(folder) if folder is not None else self.nodes_path.parent.name)
        super().__init__(str(name), root)

    def _need_folder(self, what: str) -> Path:
        if self.folder is None:
            raise TablesError(f"the tables graph needs a folder (path=...) or an explicit {what} file ({what}=...)")
        return self.folder

    def _read_settings(self) -> dict:
        if self.folder is None or not (self.folder / SETTINGS_FILE).exists():
            return {}
        p = self.folder / SETTINGS_FILE
        try:
            settings = json.loads(p.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise TablesError(f"{p}: unreadable json file ({e})") from None
        if not isinstance(settings, dict):
            raise TablesError(f"{p}: expected a JSON object with keys {', '.join(SETTINGS_KEYS)}")
        unknown = [k for k in settings if k not in SETTINGS_KEYS]
        if unknown:
            raise TablesError(f"{p}: unknown setting {unknown[0]!r}; valid settings: {', '.join(SETTINGS_KEYS)}")
        if settings.get("format", EXPORT_FORMAT) != EXPORT_FORMAT:
            raise TablesError(f"{p}: unknown format {settings['format']!r}; the only format is {EXPORT_FORMAT!r} "
                              "(what an export writes; leave it out otherwise)")
        return settings

    def _input_files(self) -> list[Path]:
        files = [self.nodes_path, self.edges_path]
        if self.queries_path is not None:
            files.append(self.queries_path)
        if self.folder is not None and (self.folder / SETTINGS_FILE).exists():
            files.append(self.folder / SETTINGS_FILE)
        return files

    def problems(self) -> list[str]:
        return [f"tables file missing: {p}" for p in self._input_files() if not p.exists()]

    def data_files(self) -> dict[str, list[Path]]:
        return {"graph": self._input_files(), "queries": [self.queries_path] if self.queries_path is not None else []}

    def input_fingerprint(self) -> str:
        missing = self.problems()
        if missing:
            raise TablesError(missing[0])
        h = files_fingerprint(self._input_files())
        return files_fingerprint([], None) if False else _hash(h, json.dumps(
            [self.candidate_types, self.template, [str(p.resolve()) for p in self._input_files()]]))

    @property
    def cache_dir(self) -> Path:
        """``<root>/cache/<name>-<8 hex digits of where the tables are>``: two graphs under one name (e.g.
        both left at ``graph.name=tables``) never share a cache, and a folder keeps its own when renamed
        by ``name``."""
        where = [self.folder] if self.folder is not None else [self.nodes_path, self.edges_path]
        return self.root / "cache" / f"{self.name}-{_hash(*(str(Path(p).resolve()) for p in where))[:8]}"

    def describe(self) -> dict:
        return {**super().describe(), "nodes": str(self.nodes_path), "edges": str(self.edges_path),
                "queries": str(self.queries_path) if self.queries_path else None,
                "candidate_types": self.candidate_types, "template": self.template}

    # ------------------------------------------------------------------ graph
    def build(self) -> KnowledgeGraph:
        from concurrent.futures import ThreadPoolExecutor

        npath, epath = self.nodes_path, self.edges_path
        # the edge table is read on a second thread while the nodes are checked and their documents made
        # (pyarrow reads without the GIL), and the string-id kernels are loaded on a third (numba's import and
        # first call cost about a second); a bad node table is still reported first
        pool = ThreadPoolExecutor(2)
        try:
            edges_read = pool.submit(read_table, epath, EDGE_COLUMNS, ("src", "dst"), dictionary=("relation",))
            if _may_have_string_ids(npath):
                pool.submit(_warm_string_ids)
            return self._build(npath, epath, edges_read)
        finally:
            pool.shutdown(wait=False, cancel_futures=True)

    def _build(self, npath: Path, epath: Path, edges_read) -> KnowledgeGraph:
        nodes = read_table(npath, NODE_COLUMNS, ("id",))
        if nodes.num_rows == 0:
            raise TablesError(f"{npath}: no nodes (the table has a header and no rows)")
        node_ids, kind = _ids(nodes, "id", npath)
        if kind == "str":  # one hash table of the node ids: the duplicate check, then every endpoint lookup
            index = _unique_index(node_ids, npath, "node")
        else:
            _check_unique(node_ids, npath, "node")
        types = _texts(nodes, "type", npath, "type")
        names = _texts(nodes, "name", npath, "name", allow_empty=True, allow_null=True)
        texts = _texts(nodes, "text", npath, "text", allow_empty=True, allow_null=True)   # a name is enough
        type_names, type_codes = _vocabulary(types, self.settings.get("node_types"), npath, "type", "node type")
        docs = documents(nodes, names, types, texts, self.template, npath)
        del nodes, texts

        # endpoint ids read as plain strings: a dictionary read rebuilds a dictionary for every row group
        # (a MAG-size edge table has more distinct ids per row group than Parquet's dictionary page holds)
        edges = edges_read.result()
        plain = FORMATS.get(epath.suffix.lower()) != "csv"   # CSV decides integer ids by their text (`_ids`)
        endpoints, identity = [], None
        for column in ("src", "dst"):
            values = edges.column(column)
            if kind == "str" and plain and (pa.types.is_string(values.type) or pa.types.is_large_string(values.type)):
                row = _first_null(values)
                if row is not None:
                    raise TablesError(f"{_where(epath, row, column)}: missing id")
                endpoints.append(_endpoints(values, index, epath, column))
                continue
            values, ekind = _ids(edges, column, epath)
            if not len(values):     # a header and no rows: no edges, whatever the column's type
                values, ekind = pa.array([], pa.int64() if kind == "int" else pa.large_string()), kind
            if (ekind, kind) == ("int", "str") and FORMATS.get(epath.suffix.lower()) == "csv":
                values, ekind = pc.cast(values, pa.large_string()), "str"   # CSV text such as 7, as written
            if len(values):
                _check_same_kind(ekind, kind, epath, column, values, npath)
            if kind == "int" and identity is None:  # ids 0..N-1 in order: an id is its row
                identity = bool(np.array_equal(node_ids.to_numpy(), np.arange(len(node_ids))))
            v = values.to_numpy() if kind == "int" else None
            if identity and len(values) and v.min() >= 0 and v.max() < len(node_ids):
                endpoints.append(v.astype(np.int64))
            else:
                endpoints.append(_lookup(node_ids, values, epath, column, "edge endpoint"))
        relations = _texts(edges, "relation", epath, "relation")
        rel_names, rel_codes = _vocabulary(relations, self.settings.get("relations"), epath, "relation", "relation")
        del edges, relations
        cands = self._candidates(type_names, type_codes, node_ids, kind, npath)
        ext = node_ids.to_numpy() if kind == "int" else node_ids
        return KnowledgeGraph.from_edges(self.name, type_names, type_codes, names, docs, rel_names,
                                         endpoints[0], endpoints[1], rel_codes, candidate_ids=cands,
                                         external_ids=ext)

    def _candidates(self, type_names: list[str], type_codes: np.ndarray, node_ids: pa.Array, kind: str, npath: Path):
        if self.candidate_types is not None:
            unknown = [t for t in self.candidate_types if t not in type_names]
            if unknown:
                raise TablesError(f"candidate type {unknown[0]!r} is not a node type of {npath}; "
                                  f"valid node types: {', '.join(type_names)}")
            wanted = np.array([type_names.index(t) for t in self.candidate_types], dtype=np.int64)
            return np.flatnonzero(np.isin(type_codes, wanted)).astype(np.int64)
        if "candidates" in self.settings:
            values = pa.array(self.settings["candidates"], pa.int64() if kind == "int" else pa.large_string())
            return np.sort(_lookup(node_ids, values, self.folder / SETTINGS_FILE, "candidates", "candidate"))
        return None

    # ------------------------------------------------------------------ queries
    def read_queries(self):
        """The query sets, resolved once per graph cache: the answers' external ids are looked up in the
        graph (a hash table over every node id, seconds at MAG scale) on first use and the result is kept
        in ``<cache>/queries.json``, which a rebuilt graph (any input file changed) invalidates."""
        from ark.data.stark import QuerySet

        if self.queries_path is None:
            return QuerySet(self.name, {}, {})
        graph = self.graph()
        cached = self._cached_queries(graph)
        if cached is not None:
            return cached
        queries = self._resolve_queries(graph)
        self._save_queries(graph, queries)
        return queries

    def _queries_file(self, graph: KnowledgeGraph) -> Path:
        return (graph.directory or self.cache_dir) / QUERIES_CACHE

    def _cached_queries(self, graph: KnowledgeGraph):
        from ark.data.stark import Query, QuerySet

        try:
            data = json.loads(self._queries_file(graph).read_text())
        except (OSError, ValueError):
            return None
        if data.get("graph") != graph.fingerprint or data.get("version") != QUERIES_CACHE_VERSION:
            return None
        queries = {q[0]: Query(q[0], q[1], tuple(q[2])) for q in data["queries"]}
        return QuerySet(self.name, queries, data["splits"])

    def _save_queries(self, graph: KnowledgeGraph, queries) -> None:
        path = self._queries_file(graph)
        data = {"version": QUERIES_CACHE_VERSION, "graph": graph.fingerprint,
                "queries": [[q.id, q.text, list(q.answer_ids)] for q in queries.queries.values()],
                "splits": queries.splits}
        try:   # a concurrent job reads the old file or the whole new one (in the locale's encoding, as read)
            atomic.write_text(path, json.dumps(data, ensure_ascii=False), encoding=None)
        except OSError:
            pass   # a read-only cache: resolved again next time

    def _resolve_queries(self, graph: KnowledgeGraph):
        from ark.data.stark import Query, QuerySet

        path = self.queries_path
        table = read_table(path, QUERY_COLUMNS, ("id",), list_columns=LIST_COLUMNS)
        qid_array, qkind = _ids(table, "id", path)
        _check_unique(qid_array, path, "query")
        qids = np.array(qid_array.to_pylist(), dtype=object)
        if qkind == "str":
            bad = [i for i, q in enumerate(qids) if "/" in q or "\\" in q or q.startswith(".")]
            if bad:
                raise TablesError(f"{_where(path, bad[0], 'id')}: query id {qids[bad[0]]!r} cannot name a file "
                                  "(no '/', '\\' or leading '.')")
        texts = _texts(table, "query", path, "query").to_pylist()
        ext = _external_ids(graph)
        node_kind = "str" if graph.has_external_ids and graph.meta.get("external_id_type") == "str" else "int"
        is_csv = FORMATS.get(path.suffix.lower()) == "csv"
        answers_col = _cells(table, "answers")
        splits_col = _cells(table, "split") if "split" in table.column_names else [None] * len(qids)
        answers = [self._answers(a, row, path, is_csv, node_kind) for row, a in enumerate(answers_col)]
        flat = pa.array([a for row in answers for a in row], pa.int64() if node_kind == "int" else pa.large_string())
        pos = pc.index_in(flat, value_set=ext)
        missing = pc.is_null(pos)
        if pc.any(missing).as_py():
            k = int(pc.index(missing, True).as_py())
            row = int(np.searchsorted(np.cumsum([len(a) for a in answers]), k, side="right"))
            raise TablesError(f"{_where(path, row, 'answers')}: answer {_shown(flat[k].as_py())} is not a node id")
        pos = pos.to_numpy().astype(np.int64)
        _check_candidates(graph, pos, answers, path)
        queries, splits, at = {}, {}, 0
        for row, (qid, text, ids, split) in enumerate(zip(qids.tolist(), texts, answers, splits_col)):
            queries[qid] = Query(qid, text, tuple(int(p) for p in pos[at:at + len(ids)]))
            at += len(ids)
            for s in _split_names(split, row, path):
                splits.setdefault(s, []).append(qid)
        return QuerySet(self.name, queries, splits)

    def splits(self) -> list[str]:
        """The split names of the queries file, in order of first appearance (no graph is built); none
        without a queries file."""
        if self.queries_path is None:
            return []
        if not self.queries_path.is_file():
            raise TablesError(f"{self.queries_path}: no such file")
        table = read_table(self.queries_path, QUERY_COLUMNS, ("id",), list_columns=LIST_COLUMNS)
        cells = _cells(table, "split") if "split" in table.column_names else [None] * table.num_rows
        return list(dict.fromkeys(s for row, v in enumerate(cells) for s in _split_names(v, row, self.queries_path)))

    @staticmethod
    def _answers(value, row: int, path: Path, is_csv: bool, node_kind: str) -> list:
        where = _where(path, row, "answers")
        if isinstance(value, str):
            text = value.strip()
            if is_csv and text.startswith("["):
                value = _parse_list(text, where)
            else:
                value = [text] if text else []
        if _isnull(value):
            raise TablesError(f"{where}: null answers")
        if isinstance(value, np.ndarray):
            value = value.tolist()
        if isinstance(value, (bool, dict, float)) and not (isinstance(value, float) and value.is_integer()):
            raise TablesError(f"{where}: answers {_shown(value)} is a {_kind(value)}; write a list of node ids, "
                              'e.g. ["P1", "P7"]')
        if not isinstance(value, (list, tuple)):
            value = [value]
        out = []
        for v in value:
            if node_kind == "int":
                if is_csv and isinstance(v, str) and v.strip().lstrip("-").isdigit():
                    v = int(v)
                if _kind(v) != "integer":
                    raise TablesError(f"{where}: mixed id types: answer {_shown(v)} is a {_kind(v)}, node ids are integers")
                out.append(int(v))
            else:
                if is_csv and _kind(v) == "integer":
                    v = str(int(v))
                if not isinstance(v, str):
                    raise TablesError(f"{where}: mixed id types: answer {_shown(v)} is a {_kind(v)}, node ids are strings")
                out.append(v)
        if not out:
            raise TablesError(f"{where}: no answers (a query needs at least one answer node)")
        return out


LIST_COLUMNS = ("answers", "split")   # the queries' columns whose cells may be lists


def _cells(table: pa.Table, column: str) -> list:
    """A column's cells as Python values (cells `read_table` kept as JSON text decoded back)."""
    values = table.column(column).to_pylist()
    if column in json_cells(table):
        values = [None if v is None else json.loads(v) for v in values]
    return values


def _parse_list(text: str, where: str) -> list:
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


def _check_candidates(graph: KnowledgeGraph, pos: np.ndarray, answers: list[list], path: Path) -> None:
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
    raise TablesError(f"{_where(path, row, 'answers')}: answer {_shown(answers[row][k - sum(map(len, answers[:row]))])} "
                      f"is a {graph.node_type_names[int(graph.node_types[pos[k]])]}, not a candidate (the nodes ranked "
                      f"and scored: {', '.join(types)}; {n_rows} such quer{'ies' if n_rows > 1 else 'y'}); widen "
                      "candidate_types or candidates, or drop the answer")


def _split_names(value, row: int, path: Path) -> list[str]:
    where = _where(path, row, "split")
    if _isnull(value):
        return [DEFAULT_SPLIT]
    if isinstance(value, str):
        text = value.strip()
        value = _parse_list(text, where) if text.startswith("[") else [x.strip() for x in text.split(",")]
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if not isinstance(value, (list, tuple)):
        raise TablesError(f"{where}: split {_shown(value)} is a {_kind(value)}; write a split name (e.g. \"test\"), "
                          'names separated by commas, or a list of names')
    bad = [v for v in value if not isinstance(v, str)]
    if bad:
        raise TablesError(f"{where}: split {_shown(bad[0])} is a {_kind(bad[0])}; split names are text, "
                          'e.g. ["val", "test"]')
    names = [v.strip() for v in value if v.strip()]
    return names or [DEFAULT_SPLIT]


def _external_ids(graph: KnowledgeGraph) -> pa.Array:
    """The graph's external ids as an Arrow array (int64 or large_string), in node order."""
    if not graph.has_external_ids:
        return pa.array(np.arange(graph.num_nodes, dtype=np.int64))
    col = graph._texts.column("external_id").combine_chunks()
    return pc.cast(col, pa.int64()) if graph.meta.get("external_id_type") == "int" else col


def _hash(*parts: str) -> str:
    import hashlib

    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


# ============================================================================ export
def export(graph: KnowledgeGraph, out: Path | str, queries=None, fmt: str = "parquet", force: bool = False) -> Path:
    """Write ``graph`` (and its ``queries``, a `QuerySet`) as a tables folder at ``out``: ``nodes``
    (``text`` = the full document, so ``graph.json`` sets the template ``{text}``), ``edges`` (as
    stored), ``queries`` (answers as external ids; each query once, ``split`` listing its splits) and
    ``graph.json`` (vocabulary order, candidates, and ``"format": "ark-tables/1"``, the mark of a folder
    this function wrote). Written beside and renamed into place.

    ``out`` must be new or empty; ``force`` replaces only a folder that an earlier export wrote (its
    ``graph.json`` carries the mark, and it holds nothing but the export's own files), never the working
    directory or one of its parents. Anything else is refused with one line (`check_export_target`)."""
    fmts = {"parquet": ".parquet", "csv": ".csv", "jsonl": ".jsonl"}
    if fmt not in fmts:
        raise ValueError(f"unknown format {fmt!r}; valid formats: {', '.join(fmts)}")
    out = Path(out)
    check_export_target(out, force)
    ext = np.array([graph.external_id(i) for i in range(graph.num_nodes)], dtype=object) \
        if graph.has_external_ids else np.arange(graph.num_nodes, dtype=np.int64)
    if graph.has_external_ids and graph.meta.get("external_id_type") == "int":
        ext = ext.astype(np.int64)
    nodes = pa.table({"id": ext, "type": [graph.node_type_names[t] for t in np.asarray(graph.node_types)],
                      "name": graph._name_col, "text": graph._text_col})
    src, dst, rel = graph.stored_edges()
    edges = pa.table({"src": ext[src], "dst": ext[dst],
                      "relation": pa.DictionaryArray.from_arrays(rel.astype(np.int32), graph.relation_names)
                      .cast(pa.string())})
    settings: dict = {"format": EXPORT_FORMAT, "name": graph.name, "template": "{text}",
                      "node_types": graph.node_type_names, "relations": graph.relation_names}
    cands = np.asarray(graph.candidate_ids)
    types = np.asarray(graph.node_types)
    if len(cands) != graph.num_nodes or not np.array_equal(cands, np.arange(graph.num_nodes)):
        cand_types = sorted(set(types[cands].tolist()))
        if np.array_equal(cands, np.flatnonzero(np.isin(types, cand_types))):
            settings["candidate_types"] = [graph.node_type_names[t] for t in cand_types]
        else:
            settings["candidates"] = [_plain(x) for x in ext[cands]]
    with atomic.building_dir(out) as tmp:
        _write(nodes, tmp / f"nodes{fmts[fmt]}", fmt)
        _write(edges, tmp / f"edges{fmts[fmt]}", fmt)
        if queries is not None and len(queries):
            _write(_query_table(queries, ext, fmt), tmp / f"queries{fmts[fmt]}", fmt)
        (tmp / SETTINGS_FILE).write_text(json.dumps(settings, indent=1, ensure_ascii=False))
    return out


_EXPORTED = re.compile(r"^(?:nodes|edges|queries)\.(?:parquet|csv|jsonl)$")


def check_export_target(out: Path | str, force: bool = False) -> None:
    """Raise ValueError, one line, unless `export` may write ``out``: a new or empty folder, or with
    ``force`` a folder an earlier export wrote (``graph.json`` with ``"format": "ark-tables/1"`` and
    only the export's own files). The working directory and its parents are never replaced."""
    out = Path(out)
    where, cwd = out.resolve(), Path.cwd().resolve()
    if where == cwd or where in cwd.parents:
        raise ValueError(f"{out} is the working directory or one of its parents ({where}); export never "
                         "replaces it: choose a new folder")
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise ValueError(f"{out} is {'a link' if out.is_symlink() else 'a file'}, not a folder; choose a new "
                         "folder for the export")
    if not out.exists() or not any(out.iterdir()):
        return
    if not force:
        raise ValueError(f"{out} exists and is not empty; choose another folder (force replaces only a "
                         "folder an earlier export wrote)")
    try:
        mark = json.loads((out / SETTINGS_FILE).read_text()).get("format")
    except (OSError, ValueError, AttributeError):
        mark = None
    if mark != EXPORT_FORMAT:
        raise ValueError(f"{out} was not written by an export (no {SETTINGS_FILE} with \"format\": "
                         f"\"{EXPORT_FORMAT}\"); force replaces only such a folder: choose a new folder")
    foreign = sorted(p.name for p in out.iterdir() if p.name != SETTINGS_FILE and not _EXPORTED.match(p.name))
    if foreign:
        raise ValueError(f"{out} holds {foreign[0]!r}" + (f" and {len(foreign) - 1} more" if len(foreign) > 1 else "")
                         + ", which no export wrote; force does not replace it: move it out or choose a new folder")


def _plain(x):
    return int(x) if isinstance(x, (np.integer,)) else x


def _query_table(queries, ext: np.ndarray, fmt: str) -> pa.Table:
    from ark.data.stark import HUMAN_SPLIT

    order, split_of = [], {}
    for s in queries.split_names():
        if s == HUMAN_SPLIT:
            continue  # its own id space; not representable next to the main set
        for q in queries.split(s):
            if q.id not in split_of:
                split_of[q.id] = []
                order.append(q)
            split_of[q.id].append(s)
    listed = {q.id for q in order}
    order += [q for q in queries if q.id not in listed]
    answers = [[_plain(ext[a]) for a in q.answer_ids] for q in order]
    splits = [split_of.get(q.id, []) for q in order]
    if fmt == "csv":
        answers = [json.dumps(a, ensure_ascii=False) for a in answers]
        splits = [",".join(s) for s in splits]
    return pa.table({"id": [q.id for q in order], "query": [q.text for q in order], "answers": answers,
                     "split": splits})


def _write(table: pa.Table, path: Path, fmt: str) -> None:
    if fmt == "parquet":
        import pyarrow.parquet as pq

        pq.write_table(table, path)
    elif fmt == "csv":
        import pyarrow.csv as pacsv

        pacsv.write_csv(table, path)
    else:
        with open(path, "w", encoding="utf-8") as f:
            for batch in table.to_batches(65536):
                for row in batch.to_pylist():
                    f.write(json.dumps(row, ensure_ascii=False) + "\n")
