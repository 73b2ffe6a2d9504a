"""The tables format: the files and columns of a tables graph, its settings file, and `TablesError`.

The format itself is described in `ark.data.tables` (the package's docstring); the stages that use these
names are `ark.data.tables.read` (files into Arrow tables), `ark.data.tables.check` (the values checked
and resolved), `ark.data.tables.source` (`TablesSource`: tables into a graph and query sets) and
`ark.data.tables.write` (`export`).
"""

from __future__ import annotations

from pathlib import Path


class LazyModule:
    """A module imported on first use: ``pc = LazyModule("pyarrow.compute")``. A sweep job that opens a
    cached graph and its resolved queries never needs ``pyarrow.compute``, and its import costs
    0.1-0.3 s. Each attribute is kept on the object once read, so later uses cost a plain lookup."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attr: str):
        import importlib

        value = getattr(importlib.import_module(self._name), attr)
        setattr(self, attr, value)
        return value


pc = LazyModule("pyarrow.compute")

NODE_COLUMNS = ("id", "type", "name", "text")
CSV_INTEGER = r"^\s*(?:0|-?[1-9][0-9]{0,17})\s*$"   # a CSV id read as an integer: as Python writes one
EDGE_COLUMNS = ("src", "dst", "relation")
QUERY_COLUMNS = ("id", "query", "answers")
FORMATS = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl"}
SETTINGS_FILE = "graph.json"
SETTINGS_KEYS = ("name", "candidate_types", "candidates", "template", "node_types", "relations", "format", "files")
EXPORT_FORMAT = "ark-tables/1"   # graph.json's "format" in a folder `export` wrote: the only kind it replaces
QUERIES_CACHE, QUERIES_CACHE_VERSION = "queries.json", 1   # resolved query sets, beside the graph cache
DEFAULT_SPLIT = "test"
LIST_COLUMNS = ("answers", "split")   # the queries' columns whose cells may be lists


class TablesError(ValueError):
    """Bad tables input: one line naming the file, row and column."""


def located(path: Path, row: int | None = None, column: str | None = None) -> str:
    out = str(path)
    if row is not None:
        out += f": row {row + 1}"
    if column is not None:
        out += f", column {column!r}" if row is not None else f": column {column!r}"
    return out
