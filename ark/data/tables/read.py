"""Reading a tables graph's files: one Parquet, CSV or JSONL table into Arrow, cells as Python values,
``graph.json`` and the name a folder goes by. The values are checked by `ark.data.tables.check`.

    from ark.data.tables.read import find_table, read_table
    nodes = read_table(find_table(folder, "nodes"), NODE_COLUMNS, ("id",))
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa

from ark.data.tables.check import as_text, check_one_kind, isnull
from ark.data.tables.format import FORMATS, SETTINGS_FILE, TablesError


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
    ``id_columns`` are read as text (`id_column` then decides whether they are integers). Parquet string
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
            check_one_kind(values.tolist(), path, str(c))
        try:
            columns[str(c)] = pa.array(values.tolist() if values.dtype == object else values.to_numpy(),
                                       from_pandas=True)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            if c in list_columns:   # e.g. one string answer among lists: each cell kept as written, as JSON
                columns[str(c)] = pa.array([None if isnull(v) else json.dumps(v, ensure_ascii=False, default=str)
                                            for v in values], pa.large_string())
                as_json.append(str(c))
            else:                   # mixed values in a free column: keep them as text
                columns[str(c)] = pa.array([None if isnull(v) else as_text(v) for v in values], pa.large_string())
    table = pa.table(columns) if columns else pa.table({})
    return table.replace_schema_metadata({JSON_CELLS: ",".join(as_json).encode()}) if as_json else table


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


def column_cells(table: pa.Table, column: str) -> list:
    """A column's cells as Python values (cells `read_table` kept as JSON text decoded back)."""
    values = table.column(column).to_pylist()
    if column in json_cells(table):
        values = [None if v is None else json.loads(v) for v in values]
    return values


