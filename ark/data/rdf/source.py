"""`RdfSource`: one RDF file (`ark.data.rdf`) as a graph, its build statistics and its query sets.

    from ark.data.rdf.source import RdfSource
    graph = RdfSource("tests/data/rdf_kg/art.ttl").graph()
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from ark import atomic
from ark.data.graph import KnowledgeGraph
from ark.data.rdf.convert import Converter
from ark.data.rdf.read import collect, rdf_format, rdf_stem, read_triples
from ark.data.rdf.vocabulary import (FORMATS, MAPPING_VERSION, NAMES, PREFIXES, STATS_FILE, RdfError, resolve)
from ark.data.sources import DEFAULT_ROOT, GraphSource, files_fingerprint, short_hash
from ark.data.tables.read import find_table
from ark.data.tables.source import TablesSource


class RdfSource(TablesSource):
    """A graph read from one RDF file (see the module docstring for the mapping and the settings).

    ``name`` (default: the file's stem) names the cache and the run directories. The queries are read
    as a tables graph reads them (`TablesSource.read_queries`: the same file format, answers' ids
    resolved once and cached with the graph), which is all this class takes from it."""

    def __init__(self, path: str | Path, name: str | None = None, root: str | Path | None = DEFAULT_ROOT,
                 format: str | None = None, queries: str | Path | None = None, classes: bool = False,
                 class_type: str = "Class", default_type: str | None = "Resource",
                 type_priority: Sequence[str] | None = None,
                 name_properties: Sequence[str] = ("rdfs:label", "skos:prefLabel"),
                 text_properties: Sequence[str] | None = None, languages: Sequence[str] | str | None = ("en",),
                 names: str = "local", ignore: Sequence[str] = ("sh:",),
                 candidate_types: Sequence[str] | str | None = None, remote_contexts: bool = False):
        self.path = Path(path)
        if self.path.is_dir() or not self.path.exists():
            raise RdfError(f"{self.path}: no such RDF file (the rdf graph reads one file: "
                           f"{', '.join(FORMATS)}, optionally + .gz)")
        self.format = rdf_format(self.path, format)
        if names not in NAMES:
            raise RdfError(f"unknown names {names!r}; valid names: {', '.join(NAMES)}")
        where = f"{self.path} settings"
        self.names = names
        self.classes = _as_bool(classes, "classes")
        self.class_type = str(class_type)
        self.default_type = None if str(default_type).lower() in ("none", "null", "") else str(default_type)
        self.type_priority = _as_list(type_priority, "type_priority")
        self.name_properties = _as_list(name_properties, "name_properties") or []
        self.text_properties = _as_list(text_properties, "text_properties")
        langs = _as_list(languages, "languages")
        self.languages = [x.lower() for x in langs] if langs is not None else None
        self.ignore = _as_list(ignore, "ignore") or []
        self.candidate_types = _as_list(candidate_types, "candidate_types")
        self.remote_contexts = _as_bool(remote_contexts, "remote_contexts")   # JSON-LD: fetch @context URLs
        # settings checked now against the well-known prefixes; the file's own prefixes count at build
        self._resolve_settings(PREFIXES, where, strict=False)
        self.folder = None          # for the inherited tables query reading: no settings file
        self.settings = {}
        self.queries_path = Path(queries) if queries else self._find_queries()
        self.template = None
        GraphSource.__init__(self, str(name or rdf_stem(self.path)), root)   # not the tables' own
        self._build_stats: dict | None = None

    def _find_queries(self) -> Path | None:
        return (find_table(self.path.parent, f"{rdf_stem(self.path)}.queries", required=False)
                or find_table(self.path.parent, "queries", required=False))

    def _resolve_settings(self, prefixes: dict[str, str], where: str, strict: bool = True) -> None:
        def one(term, what):
            try:
                return resolve(term, prefixes, what, where)
            except RdfError:
                if strict:
                    raise
                return None

        self._name_properties = [one(t, "name_properties") for t in self.name_properties]
        self._text_properties = None if self.text_properties is None else \
            [one(t, "text_properties") for t in self.text_properties]
        self._ignore_terms = [one(t, "ignore") for t in self.ignore]

    # ------------------------------------------------------------------ identity and cache
    def _input_files(self) -> list[Path]:
        return [self.path] + ([self.queries_path] if self.queries_path is not None else [])

    def problems(self) -> list[str]:
        return [f"RDF input missing: {p}" for p in self._input_files() if not p.exists()]

    def _settings(self) -> dict:
        return {"format": self.format, "classes": self.classes, "class_type": self.class_type,
                "default_type": self.default_type, "type_priority": self.type_priority,
                "name_properties": self.name_properties, "text_properties": self.text_properties,
                "languages": self.languages, "names": self.names, "ignore": self.ignore,
                "candidate_types": self.candidate_types}

    def input_fingerprint(self) -> str:
        missing = self.problems()
        if missing:
            raise RdfError(missing[0])
        return short_hash(files_fingerprint(self._input_files(), store=self.hash_store), json.dumps(
            [MAPPING_VERSION, self._settings(), [str(p.resolve()) for p in self._input_files()]], sort_keys=True))

    @property
    def cache_dir(self) -> Path:
        """``<root>/cache/<name>-<8 hex digits of the file's path>``: two files never share a cache."""
        return self.root / "cache" / f"{self.name}-{short_hash(str(self.path.resolve()))[:8]}"

    def describe(self) -> dict:
        return {"source": type(self).__name__, "name": self.name, "root": str(self.root),
                "path": str(self.path), "queries": str(self.queries_path) if self.queries_path else None,
                **self._settings()}

    # ------------------------------------------------------------------ graph
    def build(self) -> KnowledgeGraph:
        triples, prefixes = read_triples(self.path, self.format, remote_contexts=self.remote_contexts)
        self._resolve_settings(prefixes, f"{self.path} settings")   # now with the file's own prefixes
        c = collect(triples, self._ignore_terms)
        graph, stats = Converter(self, c, prefixes).convert()
        self._build_stats = {"format": self.format, **stats}
        return graph

    def graph(self, rebuild: bool = False) -> KnowledgeGraph:
        graph = super().graph(rebuild)
        if self._build_stats is not None and graph.directory is not None:
            try:
                atomic.write_json(graph.directory / STATS_FILE, {"graph": graph.fingerprint, **self._build_stats}, indent=1)
            except OSError:
                pass   # a read-only cache: the statistics of this build are not kept
            self._build_stats = None
        return graph

    def build_stats(self) -> dict:
        """What the build did with the triples (counts named in the module docstring): read from the
        graph cache, so a cached graph reports the statistics of the build that made it."""
        graph = self.graph()
        try:
            data = json.loads(((graph.directory or self.cache_dir) / STATS_FILE).read_text())
        except (OSError, ValueError):
            return {}
        return {k: v for k, v in data.items() if k != "graph"} if data.get("graph") == graph.fingerprint else {}


def _as_bool(value, what: str) -> bool:
    """A switch: a bool, or its text as a command line gives it (``--set classes=true``)."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off"):
        return False
    raise RdfError(f"{what} must be true or false, got {value!r}")


def _as_list(value, what: str) -> list[str] | None:
    """A list setting: a list, or names separated by commas; None stays None."""
    if value is None:
        return None
    if isinstance(value, str):
        return [x.strip() for x in value.split(",") if x.strip()]
    items = list(value) if not hasattr(value, "keys") else None
    if items is None or any(hasattr(x, "keys") or isinstance(x, (list, tuple)) for x in items):
        raise RdfError(f"{what} must be a list of names, got {value!r} (in YAML quote a name that ends "
                       'with ":", e.g. ["sh:"])')
    return [str(x) for x in items]
