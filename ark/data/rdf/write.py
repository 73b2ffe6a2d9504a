"""`export`: any graph written as N-Triples that `RdfSource` reads back as the same graph, its queries
beside it.

    from ark.data.rdf.write import export
    export(graph, "my_kg.nt.gz", queries=source.queries())
"""

from __future__ import annotations

import gzip
import json
import re
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import numpy as np

from ark import atomic
from ark.data.graph import KnowledgeGraph
from ark.data.rdf.read import rdf_format, rdf_stem
from ark.data.rdf.vocabulary import DOCUMENT, EXPORT_BASE, RDFS, TYPE, RdfError


def _iri(value: str) -> str:
    return "<" + value + ">"


def _literal(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r") + '"'


def _looks_like_iri(value) -> bool:
    return isinstance(value, str) and re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:[^\s<>\"{}|^`\\]*$", value) is not None


def export(graph: KnowledgeGraph, out: Path | str, queries=None, base: str = EXPORT_BASE, force: bool = False) -> Path:
    """Write ``graph`` as N-Triples at ``out`` (``.nt``, or ``.nt.gz`` compressed) so that `RdfSource`
    reads the same graph back: a node is its external id when that is an IRI, else ``<base>node/<id>``;
    ``rdf:type <base>type/<type>``, ``rdfs:label`` its name, ``urn:ark:document`` its whole document,
    and one triple per stored edge (``<base>relation/<relation>``). ``queries`` (a `QuerySet`) go to
    ``<stem>.queries.jsonl`` beside it, answers as the node IRIs. Written beside and renamed into place."""
    out = Path(out)
    if rdf_format(out) != "nt":
        raise RdfError(f"{out}: export writes N-Triples; name the file .nt or .nt.gz")
    if out.exists() and not force:
        raise RdfError(f"{out} exists; choose another file or pass force")
    iris = [graph.external_id(i) if graph.has_external_ids else i for i in range(graph.num_nodes)]
    iris = [_iri(x) if _looks_like_iri(x) else _iri(f"{base}node/{quote(str(x), safe='')}") for x in iris]
    types = [_iri(f"{base}type/{quote(t, safe='')}") for t in graph.node_type_names]
    rels = [_iri(f"{base}relation/{quote(r, safe='')}") for r in graph.relation_names]
    a, label, doc = _iri(TYPE), _iri(RDFS + "label"), _iri(DOCUMENT)
    node_types = np.asarray(graph.node_types)
    out.parent.mkdir(parents=True, exist_ok=True)
    with atomic.replacing(out) as tmp:
        with (gzip.open(tmp, "wt", encoding="utf-8") if out.suffix == ".gz" else open(tmp, "w", encoding="utf-8")) as f:
            for i, (name, text) in enumerate(zip(graph.names(), graph.texts())):
                f.write(f"{iris[i]} {a} {types[node_types[i]]} .\n{iris[i]} {label} {_literal(name)} .\n"
                        f"{iris[i]} {doc} {_literal(text)} .\n")
            src, dst, rel = graph.stored_edges()
            for s_, d_, r_ in zip(src.tolist(), dst.tolist(), rel.tolist()):
                f.write(f"{iris[s_]} {rels[r_]} {iris[d_]} .\n")
        if queries is not None and len(queries):   # before the graph file appears: a reader never sees it alone
            with atomic.open_text(out.with_name(f"{rdf_stem(out)}.queries.jsonl")) as f:
                for row in _query_rows(queries, [x[1:-1] for x in iris]):
                    f.write(json.dumps(row, ensure_ascii=False) + "\n")
    return out


def _query_rows(queries, iris: list[str]) -> Iterator[dict]:
    from ark.data.stark import HUMAN_SPLIT

    splits: dict = defaultdict(list)
    for s in queries.split_names():
        if s != HUMAN_SPLIT:   # its own id space; not representable beside the main set
            for q in queries.split(s):
                splits[q.id].append(s)
    for q in queries:
        if q.id in splits:
            yield {"id": q.id, "query": q.text, "answers": [iris[a] for a in q.answer_ids], "split": splits[q.id]}
