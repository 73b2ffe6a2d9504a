"""`export`: any graph (and its queries) written as a tables folder (`ark.data.tables`), and the check of
the folder it may write (`check_export_target`).

    from ark.data.tables.write import export
    export(graph, "my_kg_tables", queries=source.queries(), fmt="parquet")
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pyarrow as pa

from ark import atomic
from ark.data.graph import KnowledgeGraph
from ark.data.tables.format import EXPORT_FORMAT, SETTINGS_FILE


def export(graph: KnowledgeGraph, out: Path | str, queries=None, fmt: str = "parquet", force: bool = False) -> Path:
    """Write ``graph`` (and its ``queries``, a `QuerySet`) as a tables folder at ``out``: ``nodes``
    (``text`` = the full document, so ``graph.json`` sets the template ``{text}``), ``edges`` (as
    stored), ``queries`` (answers as external ids; each query once, ``split`` listing its splits) and
    ``graph.json`` (vocabulary order, candidates, and ``"format": "ark-tables/1"``, the mark of a folder
    this function wrote). Written beside and renamed into place.

    ``out`` must be new or empty; ``force`` replaces only a folder that an earlier export wrote (its
    ``graph.json`` carries the mark and lists the files written, ``"files"``, and it holds nothing but
    those, each a plain file), never the working directory or one of its parents. Anything else is refused with one line (`check_export_target`)."""
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
        settings["files"] = sorted(p.name for p in tmp.iterdir())     # what force may replace, and only it
        (tmp / SETTINGS_FILE).write_text(json.dumps(settings, indent=1, ensure_ascii=False))
    return out


_EXPORTED = re.compile(r"^(?:nodes|edges|queries)\.(?:parquet|csv|jsonl)$")


def check_export_target(out: Path | str, force: bool = False) -> None:
    """Raise ValueError, one line, unless `export` may write ``out``: a new or empty folder, or with
    ``force`` a folder an earlier export wrote (``graph.json`` with ``"format": "ark-tables/1"`` and
    only the files it lists, each a plain file: a folder or a link of the same name is someone else's). The working directory and its parents are never replaced."""
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
    marker = out / SETTINGS_FILE
    try:
        settings = json.loads(marker.read_text()) if marker.is_file() and not marker.is_symlink() else None
        mark = settings.get("format")
    except (OSError, ValueError, AttributeError):
        settings, mark = None, None
    if mark != EXPORT_FORMAT:
        raise ValueError(f"{out} was not written by an export (no {SETTINGS_FILE} with \"format\": "
                         f"\"{EXPORT_FORMAT}\"); force replaces only such a folder: choose a new folder")
    # the files the export listed in its mark (an export that wrote no list: its own names), plain files only
    listed = settings.get("files")
    ours = {n for n in listed if isinstance(n, str)} if isinstance(listed, list) else None

    def written(p: Path) -> bool:
        return (_EXPORTED.match(p.name) is not None and (ours is None or p.name in ours)
                and p.is_file() and not p.is_symlink())

    foreign = sorted(p.name for p in out.iterdir() if p.name != SETTINGS_FILE and not written(p))
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
