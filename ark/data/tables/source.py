"""`TablesSource`: a folder of tables (`ark.data.tables`) as a graph and its query sets.

The build reads the tables (`ark.data.tables.read`), checks and resolves their values
(`ark.data.tables.check`) and makes the node documents; the queries' answers are resolved to node
positions once per graph cache (``<cache>/queries.json``).

    from ark.data.tables.source import TablesSource
    graph = TablesSource("tests/data/tables_kg").graph()
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa

from ark import atomic
from ark.data.graph import KnowledgeGraph
from ark.data.sources import DEFAULT_ROOT, GraphSource, files_fingerprint, short_hash
from ark.data.tables.check import (as_text, check_candidates, check_same_kind, check_unique, endpoint_positions,
                                   first_null, id_column, isnull, kind_of, lookup, may_have_string_ids, parse_list,
                                   shown, split_names, text_column, unique_index, vocabulary, warm_string_ids)
from ark.data.tables.format import (EDGE_COLUMNS, EXPORT_FORMAT, FORMATS, LIST_COLUMNS, NODE_COLUMNS, QUERIES_CACHE,
                                    QUERIES_CACHE_VERSION, QUERY_COLUMNS, SETTINGS_FILE, SETTINGS_KEYS, TablesError,
                                    located, pc)
from ark.data.tables.read import column_cells, default_name, find_table, read_table


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
                raise TablesError(f"{located(path, i, None)}: template {template!r} failed ({type(e).__name__}: "
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
                text = pa.array([None if v is None else as_text(v) for v in values.to_pylist()], pa.large_string())
        keep = pc.and_(pc.invert(pc.is_null(text)), pc.greater(pc.utf8_length(pc.utf8_trim_whitespace(
            pc.fill_null(text, ""))), 0))
        line = pc.binary_join_element_wise(pa.scalar(f"\n- {column}: ", pa.large_string()), pc.fill_null(text, ""), pa.scalar("", pa.large_string()))
        parts.append(pc.if_else(keep, line, pa.scalar("", pa.large_string())))
    return pc.binary_join_element_wise(*parts, pa.scalar("", pa.large_string()))


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
        h = files_fingerprint(self._input_files(), store=self.hash_store)
        return short_hash(h, json.dumps(
            [self.candidate_types, self.template, [str(p.resolve()) for p in self._input_files()]]))

    @property
    def cache_dir(self) -> Path:
        """``<root>/cache/<name>-<8 hex digits of where the tables are>``: two graphs under one name (e.g.
        both left at ``graph.name=tables``) never share a cache, and a folder keeps its own when renamed
        by ``name``."""
        where = [self.folder] if self.folder is not None else [self.nodes_path, self.edges_path]
        return self.root / "cache" / f"{self.name}-{short_hash(*(str(Path(p).resolve()) for p in where))[:8]}"

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
            if may_have_string_ids(npath):
                pool.submit(warm_string_ids)
            return self._build(npath, epath, edges_read)
        finally:
            pool.shutdown(wait=False, cancel_futures=True)

    def _build(self, npath: Path, epath: Path, edges_read) -> KnowledgeGraph:
        nodes = read_table(npath, NODE_COLUMNS, ("id",))
        if nodes.num_rows == 0:
            raise TablesError(f"{npath}: no nodes (the table has a header and no rows)")
        node_ids, kind = id_column(nodes, "id", npath)
        if kind == "str":  # one hash table of the node ids: the duplicate check, then every endpoint lookup
            index = unique_index(node_ids, npath, "node")
        else:
            check_unique(node_ids, npath, "node")
        types = text_column(nodes, "type", npath, "type")
        names = text_column(nodes, "name", npath, "name", allow_empty=True, allow_null=True)
        texts = text_column(nodes, "text", npath, "text", allow_empty=True, allow_null=True)   # a name is enough
        type_names, type_codes = vocabulary(types, self.settings.get("node_types"), npath, "type", "node type")
        docs = documents(nodes, names, types, texts, self.template, npath)
        del nodes, texts

        # endpoint ids read as plain strings: a dictionary read rebuilds a dictionary for every row group
        # (a MAG-size edge table has more distinct ids per row group than Parquet's dictionary page holds)
        edges = edges_read.result()
        plain = FORMATS.get(epath.suffix.lower()) != "csv"   # CSV decides integer ids by their text (`id_column`)
        endpoints, identity = [], None
        for column in ("src", "dst"):
            values = edges.column(column)
            if kind == "str" and plain and (pa.types.is_string(values.type) or pa.types.is_large_string(values.type)):
                row = first_null(values)
                if row is not None:
                    raise TablesError(f"{located(epath, row, column)}: missing id")
                endpoints.append(endpoint_positions(values, index, epath, column))
                continue
            values, ekind = id_column(edges, column, epath)
            if not len(values):     # a header and no rows: no edges, whatever the column's type
                values, ekind = pa.array([], pa.int64() if kind == "int" else pa.large_string()), kind
            if (ekind, kind) == ("int", "str") and FORMATS.get(epath.suffix.lower()) == "csv":
                values, ekind = pc.cast(values, pa.large_string()), "str"   # CSV text such as 7, as written
            if len(values):
                check_same_kind(ekind, kind, epath, column, values, npath)
            if kind == "int" and identity is None:  # ids 0..N-1 in order: an id is its row
                identity = bool(np.array_equal(node_ids.to_numpy(), np.arange(len(node_ids))))
            v = values.to_numpy() if kind == "int" else None
            if identity and len(values) and v.min() >= 0 and v.max() < len(node_ids):
                endpoints.append(v.astype(np.int64))
            else:
                endpoints.append(lookup(node_ids, values, epath, column, "edge endpoint"))
        relations = text_column(edges, "relation", epath, "relation")
        rel_names, rel_codes = vocabulary(relations, self.settings.get("relations"), epath, "relation", "relation")
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
            return np.sort(lookup(node_ids, values, self.folder / SETTINGS_FILE, "candidates", "candidate"))
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
        qid_array, qkind = id_column(table, "id", path)
        check_unique(qid_array, path, "query")
        qids = np.array(qid_array.to_pylist(), dtype=object)
        if qkind == "str":
            bad = [i for i, q in enumerate(qids) if "/" in q or "\\" in q or q.startswith(".")]
            if bad:
                raise TablesError(f"{located(path, bad[0], 'id')}: query id {qids[bad[0]]!r} cannot name a file "
                                  "(no '/', '\\' or leading '.')")
        texts = text_column(table, "query", path, "query").to_pylist()
        ext = _external_ids(graph)
        node_kind = "str" if graph.has_external_ids and graph.meta.get("external_id_type") == "str" else "int"
        is_csv = FORMATS.get(path.suffix.lower()) == "csv"
        answers_col = column_cells(table, "answers")
        splits_col = column_cells(table, "split") if "split" in table.column_names else [None] * len(qids)
        answers = [self._answers(a, row, path, is_csv, node_kind) for row, a in enumerate(answers_col)]
        flat = pa.array([a for row in answers for a in row], pa.int64() if node_kind == "int" else pa.large_string())
        pos = pc.index_in(flat, value_set=ext)
        missing = pc.is_null(pos)
        if pc.any(missing).as_py():
            k = int(pc.index(missing, True).as_py())
            row = int(np.searchsorted(np.cumsum([len(a) for a in answers]), k, side="right"))
            raise TablesError(f"{located(path, row, 'answers')}: answer {shown(flat[k].as_py())} is not a node id")
        pos = pos.to_numpy().astype(np.int64)
        check_candidates(graph, pos, answers, path)
        queries, splits, at = {}, {}, 0
        for row, (qid, text, ids, split) in enumerate(zip(qids.tolist(), texts, answers, splits_col)):
            queries[qid] = Query(qid, text, tuple(int(p) for p in pos[at:at + len(ids)]))
            at += len(ids)
            for s in split_names(split, row, path):
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
        cells = column_cells(table, "split") if "split" in table.column_names else [None] * table.num_rows
        return list(dict.fromkeys(s for row, v in enumerate(cells) for s in split_names(v, row, self.queries_path)))

    @staticmethod
    def _answers(value, row: int, path: Path, is_csv: bool, node_kind: str) -> list:
        where = located(path, row, "answers")
        if isinstance(value, str):
            text = value.strip()
            if is_csv and text.startswith("["):
                value = parse_list(text, where)
            else:
                value = [text] if text else []
        if isnull(value):
            raise TablesError(f"{where}: null answers")
        if isinstance(value, np.ndarray):
            value = value.tolist()
        if isinstance(value, (bool, dict, float)) and not (isinstance(value, float) and value.is_integer()):
            raise TablesError(f"{where}: answers {shown(value)} is a {kind_of(value)}; write a list of node ids, "
                              'e.g. ["P1", "P7"]')
        if not isinstance(value, (list, tuple)):
            value = [value]
        out = []
        for v in value:
            if node_kind == "int":
                if is_csv and isinstance(v, str) and v.strip().lstrip("-").isdigit():
                    v = int(v)
                if kind_of(v) != "integer":
                    raise TablesError(f"{where}: mixed id types: answer {shown(v)} is a {kind_of(v)}, node ids are integers")
                out.append(int(v))
            else:
                if is_csv and kind_of(v) == "integer":
                    v = str(int(v))
                if not isinstance(v, str):
                    raise TablesError(f"{where}: mixed id types: answer {shown(v)} is a {kind_of(v)}, node ids are strings")
                out.append(v)
        if not out:
            raise TablesError(f"{where}: no answers (a query needs at least one answer node)")
        return out


def _external_ids(graph: KnowledgeGraph) -> pa.Array:
    """The graph's external ids as an Arrow array (int64 or large_string), in node order."""
    if not graph.has_external_ids:
        return pa.array(np.arange(graph.num_nodes, dtype=np.int64))
    col = graph._texts.column("external_id").combine_chunks()
    return pc.cast(col, pa.int64()) if graph.meta.get("external_id_type") == "int" else col
