"""Which graph source reads a path: a folder of tables (`ark.data.tables.source.TablesSource`) or one RDF file,
by its suffix (`ark.data.rdf.source.RdfSource`: ``.nt``, ``.ttl``, ``.rdf``, ``.owl``, ``.jsonld``, ``.n3``,
``.nq``, ``.trig``, each optionally + ``.gz``).

    from ark.data.locate import source_for_path
    source = source_for_path("my_kg.ttl")                   # RdfSource(name="my_kg"), cached under ARK_HOME
    source = source_for_path("my_kg/", name="kg")           # TablesSource
"""

from __future__ import annotations

from pathlib import Path

from ark.data.sources import DEFAULT_ROOT, GraphSource

KINDS = "a folder of tables (nodes, edges, queries) or an RDF file"


def source_for_path(path: str | Path, root: str | Path | None = DEFAULT_ROOT, **settings) -> GraphSource:
    """The graph source for ``path`` (``settings`` are the source's own keyword arguments). Raises
    ValueError, one line naming the path and what it may be, for anything else."""
    from ark.data.rdf.read import is_rdf_path
    from ark.data.rdf.vocabulary import FORMATS

    p = Path(path)
    if p.is_dir():
        from ark.data.tables.source import TablesSource

        return TablesSource(path=p, root=root, **settings)
    if p.is_file() and is_rdf_path(p):
        from ark.data.rdf.source import RdfSource

        return RdfSource(path=p, root=root, **settings)
    what = "no such file or folder" if not p.exists() else f"unknown file suffix {''.join(p.suffixes)!r}"
    raise ValueError(f"{p}: {what}; a graph path is {KINDS} ({', '.join(FORMATS)}, optionally + .gz)")
