"""Your own knowledge graph as RDF (N-Triples, Turtle, RDF/XML, JSON-LD, N3, N-Quads, TriG), read with rdflib.

`RdfSource` turns one RDF file into a `KnowledgeGraph`; the format comes from the suffix (`FORMATS`,
optionally followed by ``.gz``) or the ``format`` setting. N-Triples is streamed line by line; the other
formats are parsed into an rdflib graph first. The mapping:

* **Nodes** are the IRIs that are described or linked to: every IRI subject, and every IRI object of a
  kept relation. The IRI is the node's external id (`KnowledgeGraph.external_id`, what predictions,
  queries and ``ark neighbors`` use). Internal ids are 0..N-1 in the IRIs' sorted order, so every
  serialisation of the same triples gives the same graph. Never nodes: the RDF, RDFS, OWL and XSD
  vocabularies themselves, properties (IRIs used as predicates or typed as properties), other resources
  typed by those vocabularies (ontology headers), anything in an ``ignore`` namespace (SHACL shapes by
  default) and, unless ``classes`` is true, classes.
* **Classes** are the objects of ``rdf:type``, the subjects typed ``rdfs:Class``/``owl:Class``, and the
  IRIs on either side of ``rdfs:subClassOf``/``owl:equivalentClass``/``owl:disjointWith``. With
  ``classes: false`` (default) they give node types only, and an IRI used both as a class and as an
  instance (typed itself by a non-vocabulary class, linked by or linking a relation, or holding a literal
  that is not an annotation such as a label or comment) is an error. With ``classes: true`` they are nodes
  too (type ``Class`` unless typed otherwise), linked to their instances by ``type`` edges and to each
  other by ``subClassOf`` (and the other class axioms); an OWL restriction ``C subClassOf (p some D)``
  becomes the edge ``C -p-> D``.
* **Node type**: the local name of the node's ``rdf:type`` (``names: prefixed`` for prefixed names; two
  IRIs with one local name are told apart by their prefixed names). A node with several types takes the
  first of ``type_priority`` it has, else the most specific (a type that another of its types is a
  subclass of, by the file's ``rdfs:subClassOf``, is dropped), then the first by name; the others are
  listed in its document as ``- other types:``. A node without a type gets ``default_type``
  (``Resource``) and is counted as ``untyped_nodes`` in the build statistics (`RdfSource.build_stats`);
  ``default_type: null`` makes it an error instead.
* **Name**: the first of ``name_properties`` (``rdfs:label``, then ``skos:prefLabel``) that has a value,
  in the preferred language (``languages``, in order; then untagged; then any other language, so a name
  never vanishes); else the IRI's local name (counted as ``nodes_named_by_iri``).
* **Document** (what BM25 indexes; the tables layout)::

      - name: <name>
      - type: <type>
      - <property>: <value>; <value>

  one line per literal property (``text_properties``: exactly these, in this order; default every
  literal property, descriptions first, then by name), values sorted. Literals tagged with a language not
  in ``languages`` are left out (counted as ``literals_other_language``; ``languages: null`` keeps all);
  typed literals (numbers, dates) keep their lexical form. A literal ``urn:ark:document`` (what `export`
  writes) is the document verbatim.
* **Relations**: every triple ``s p o`` between two nodes is an edge ``s -p-> o`` named by ``p``'s local
  name (stored directed, explored both ways).
* **Blank nodes** are never nodes (their labels are not stable between parses, so nothing could refer
  to them): a blank node object is folded into its subject's document as one line
  (``- address: postalCode: 1071 XX, street: Museumstraat 1``; RDF lists as their items; IRIs by
  name; three levels deep). Blank subjects that no node refers to are dropped
  (``blank_nodes_dropped``).

Other settings: ``format`` (instead of the suffix), ``class_type`` (the type of a class node without
one of its own), ``names`` (``local``/``prefixed`` type and relation names), ``ignore`` (namespaces or
properties whose triples are skipped; default SHACL, ``sh:``), ``candidate_types`` (rank only these
types). Properties in settings are prefixed names (the file's prefixes and `PREFIXES`) or full IRIs.

Queries are optional, in the tables format (`ark.data.tables`: ``id``, ``query``, ``answers`` as IRIs,
``split``), in ``<file stem>.queries.<ext>`` or ``queries.<ext>`` beside the RDF file, or named by
``queries``. Bad input raises `RdfError`, one line naming the file, before anything is written: broken
syntax (with the line as the parser reports it), an IRI used as class and instance, a type-less node
under ``default_type: null``, an empty graph, unknown settings.

    python experiments/run.py graph=rdf graph.path=my_kg.ttl graph.name=my_kg
    ark build --graph my_kg.ttl [--set classes=true]    # build and print the statistics
"""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from pathlib import Path
from urllib.parse import quote, unquote

import numpy as np
import pyarrow as pa

from ark import atomic
from ark.data.graph import KnowledgeGraph
from ark.data.sources import DEFAULT_ROOT, GraphSource, files_fingerprint
from ark.data.tables import TablesSource, find_table

# suffix -> rdflib format name (a trailing .gz is read through gzip)
FORMATS = {".nt": "nt", ".ntriples": "nt", ".ttl": "turtle", ".turtle": "turtle", ".n3": "n3",
           ".rdf": "xml", ".owl": "xml", ".jsonld": "json-ld", ".nq": "nquads", ".trig": "trig"}
DATASET_FORMATS = ("nquads", "trig")   # quads: the named graphs are merged into one

RDF = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
RDFS = "http://www.w3.org/2000/01/rdf-schema#"
OWL = "http://www.w3.org/2002/07/owl#"
XSD = "http://www.w3.org/2001/XMLSchema#"
SKOS = "http://www.w3.org/2004/02/skos/core#"
PREFIXES = {"rdf": RDF, "rdfs": RDFS, "owl": OWL, "xsd": XSD, "skos": SKOS,
            "dc": "http://purl.org/dc/elements/1.1/", "dcterms": "http://purl.org/dc/terms/",
            "foaf": "http://xmlns.com/foaf/0.1/", "schema": "https://schema.org/",
            "sh": "http://www.w3.org/ns/shacl#", "prov": "http://www.w3.org/ns/prov#",
            "obo": "http://purl.obolibrary.org/obo/", "ark": "urn:ark:"}
VOCABULARIES = (RDF, RDFS, OWL, XSD)      # their IRIs describe the graph; they are never nodes
TYPE = RDF + "type"
FIRST, REST, NIL = RDF + "first", RDF + "rest", RDF + "nil"
CLASS_KINDS = {RDFS + "Class", OWL + "Class", RDFS + "Datatype", OWL + "Restriction"}
NO_TYPE = {RDFS + "Resource", OWL + "Thing", OWL + "NamedIndividual"}   # say nothing about the node
CLASS_AXIOMS = {RDFS + "subClassOf", OWL + "equivalentClass", OWL + "disjointWith"}
RESTRICTION_TARGETS = (OWL + "someValuesFrom", OWL + "allValuesFrom", OWL + "hasValue")
ANNOTATIONS = {RDFS + "label", RDFS + "comment", RDFS + "seeAlso", RDFS + "isDefinedBy", OWL + "deprecated",
               OWL + "versionInfo", OWL + "priorVersion", OWL + "backwardCompatibleWith",
               OWL + "incompatibleWith"}
ANNOTATION_NAMESPACES = (SKOS, PREFIXES["dc"], PREFIXES["dcterms"], "http://www.geneontology.org/formats/oboInOwl#")
DESCRIPTIONS = (RDFS + "comment", SKOS + "definition", PREFIXES["dcterms"] + "description",
                PREFIXES["dc"] + "description", PREFIXES["schema"] + "description",
                "http://schema.org/description", "http://purl.obolibrary.org/obo/IAO_0000115")
DOCUMENT = "urn:ark:document"             # a node's whole document, as `export` writes it
EXPORT_BASE = "urn:ark:"                  # export: nodes without IRIs, types and relations under it
STATS_FILE = "rdf_stats.json"
MAPPING_VERSION = 1                       # part of the cache key: a changed mapping rebuilds cached graphs
FOLD_DEPTH = 3
NAMES = ("local", "prefixed")


class RdfError(ValueError):
    """Bad RDF input or settings: one line naming the file (and line, where the parser gives one)."""


# ============================================================================ names
def local_name(iri: str) -> str:
    """The part after the last ``#``, ``/`` or ``:`` (percent-decoded): ``http://x.org/a#Person`` -> ``Person``."""
    head = iri.rstrip("/#")
    cut = max(head.rfind("#"), head.rfind("/"))
    if cut < 0:
        cut = head.rfind(":")
    return unquote(head[cut + 1:]) or iri


def resolve(term: str, prefixes: dict[str, str], what: str, where: str) -> str:
    """A setting's property or namespace as a full IRI: ``<iri>``, ``http...`` or ``prefix:local``."""
    term = term.strip()
    if term.startswith("<") and term.endswith(">"):
        return term[1:-1]
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", term) or term.startswith("urn:"):
        return term
    prefix, sep, rest = term.partition(":")
    if sep and prefix in prefixes:
        return prefixes[prefix] + rest
    raise RdfError(f"{where}: unknown prefix in {what} {term!r}; write a full IRI or use one of the prefixes "
                   f"{', '.join(sorted(prefixes))}")


class _Namer:
    """Display names for a set of IRIs: local names, or prefixed names where two local names collide
    (or always, with ``names: prefixed``), else the full IRI."""

    def __init__(self, prefixes: dict[str, str], mode: str):
        self.by_ns = sorted(((ns, p) for p, ns in prefixes.items() if ns), key=lambda x: -len(x[0]))
        self.mode = mode

    def prefixed(self, iri: str) -> str:
        for ns, p in self.by_ns:
            if iri.startswith(ns) and len(iri) > len(ns):
                return f"{p}:{unquote(iri[len(ns):])}"
        return iri

    def names(self, iris) -> dict[str, str]:
        iris = sorted(set(iris))
        if self.mode == "prefixed":
            return {i: self.prefixed(i) for i in iris}
        local = {i: local_name(i) for i in iris}
        clash = Counter(local.values())
        return {i: (n if clash[n] == 1 else self.prefixed(i)) for i, n in local.items()}


# ============================================================================ reading triples
def rdf_format(path: Path, fmt: str | None = None) -> str:
    """The rdflib format of ``path``: ``fmt`` if given, else by suffix (a trailing ``.gz`` skipped)."""
    valid = sorted(set(FORMATS.values()))
    if fmt is not None:
        if fmt not in valid:
            raise RdfError(f"unknown RDF format {fmt!r}; valid formats: {', '.join(valid)}")
        return fmt
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes = suffixes[:-1]
    if not suffixes or suffixes[-1] not in FORMATS:
        raise RdfError(f"{path}: unknown RDF file suffix {''.join(path.suffixes)!r}; valid suffixes: "
                       f"{', '.join(FORMATS)} (optionally + .gz), or set format ({', '.join(valid)})")
    return FORMATS[suffixes[-1]]


def is_rdf_path(path: Path | str) -> bool:
    """Whether ``path``'s suffix names an RDF format (`FORMATS`, optionally + ``.gz``)."""
    try:
        rdf_format(Path(path))
        return True
    except RdfError:
        return False


def rdf_stem(path: Path) -> str:
    """The file's name without its RDF suffix (and ``.gz``): ``my.kg.ttl.gz`` -> ``my.kg``."""
    name = path.name[:-3] if path.name.lower().endswith(".gz") else path.name
    suffix = Path(name).suffix
    return (name[:-len(suffix)] if suffix.lower() in FORMATS else name) or name


def _open(path: Path):
    return gzip.open(path, "rb") if path.suffix.lower() == ".gz" else open(path, "rb")


def _syntax_error(path: Path, e: Exception) -> RdfError:
    """rdflib's parse error as one line: file, line (where the parser says), what was wrong."""
    text = str(e).strip()
    line = getattr(e, "lineno", None) or (e.getLineNumber() if hasattr(e, "getLineNumber") else None)
    m = re.search(r"at line (\d+)", text)
    if m:
        line = int(m.group(1))
    bad = re.search(r"Bad syntax \((.*?)\) at \^", text, re.S)
    what = bad.group(1) if bad else (getattr(e, "msg", None) or text.splitlines()[-1] if text else type(e).__name__)
    what = re.sub(r"^.*?:\d+:\d+: ", "", re.sub(r"\s+", " ", str(what)).strip())[:200]   # SAX: "<file>:3:0: ..."
    return RdfError(f"{path}: line {line}: bad RDF syntax ({what})" if line else f"{path}: bad RDF syntax ({what})")


def _nt_triples(path: Path) -> Iterator[tuple]:
    """N-Triples streamed line by line (no rdflib graph in memory); a bad line names its number."""
    from rdflib.exceptions import ParserError
    from rdflib.plugins.parsers.ntriples import W3CNTriplesParser

    out: list[tuple] = []

    class Sink:
        def triple(self, s, p, o):
            out.append((s, p, o))

    class Parser(W3CNTriplesParser):
        lineno, text = 0, ""

        def readline(self):
            line = super().readline()
            if line is not None:
                self.lineno += 1
                self.text = line
            return line

        def parseline(self, bnode_context=None):
            try:
                super().parseline(bnode_context)
            except ParserError as e:
                shown = re.sub(r"\s+", " ", self.text.strip())[:120]
                raise RdfError(f"{path}: line {self.lineno}: bad N-Triples statement {shown!r} "
                               f"({str(e).split(' at ')[0]})") from None

    import codecs

    parser = Parser(Sink())
    with _open(path) as f:
        reader = codecs.getreader("utf-8")(f)
        parser.file = reader
        parser.buffer = ""
        try:
            while True:
                parser.line = parser.readline()
                if parser.line is None:
                    break
                parser.parseline()
                if len(out) >= 65536:
                    yield from out
                    out.clear()
        except UnicodeDecodeError as e:
            raise RdfError(f"{path}: line {parser.lineno + 1}: not UTF-8 ({e.reason})") from None
    yield from out


def read_triples(path: Path, fmt: str) -> tuple[Iterator[tuple], dict[str, str]]:
    """(the file's triples as rdflib terms, its namespace prefixes). Raises `RdfError` on bad syntax."""
    import rdflib

    if fmt == "nt":
        return _nt_triples(path), dict(PREFIXES)
    store = rdflib.Dataset() if fmt in DATASET_FORMATS else rdflib.Graph()
    try:
        with _open(path) as f:
            store.parse(f, format=fmt, publicID=path.resolve().as_uri())
    except RdfError:
        raise
    except Exception as e:  # each rdflib parser raises its own kind (BadSyntax, SAXParseException, ...)
        raise _syntax_error(path, e) from None
    prefixes = dict(PREFIXES)
    prefixes.update({p: str(ns) for p, ns in store.namespaces() if p})
    triples = ((s, p, o) for s, p, o, *_ in (store.quads((None, None, None, None)) if fmt in DATASET_FORMATS
                                              else store.triples((None, None, None))))
    return triples, prefixes


# ============================================================================ triples -> graph
class _Collected:
    """Every triple of the file, grouped by subject (one pass)."""

    def __init__(self):
        self.types: dict = defaultdict(list)      # IRI -> type IRIs
        self.literals: dict = defaultdict(list)   # subject -> (predicate, Literal)
        self.links: dict = defaultdict(list)      # subject -> (predicate, IRI or BNode)
        self.predicates: set[str] = set()
        self.triples = self.ignored = 0


def _collect(triples, ignore: Sequence[str]) -> _Collected:
    from rdflib import BNode, Literal

    c = _Collected()
    ignore = tuple(ignore)
    for s, p, o in triples:
        c.triples += 1
        p = str(p)
        if ignore and (p.startswith(ignore) or (not isinstance(o, (Literal, BNode)) and str(o).startswith(ignore)
                                                and p != TYPE)):
            c.ignored += 1
            continue
        c.predicates.add(p)
        key = s if isinstance(s, BNode) else str(s)
        if isinstance(o, Literal):
            c.literals[key].append((p, o))
        elif p == TYPE and not isinstance(o, BNode):
            c.types[key].append(str(o))
        else:
            c.links[key].append((p, o if isinstance(o, BNode) else str(o)))
    return c


def _is_iri(x) -> bool:
    """IRIs are kept as plain strings; blank nodes and literals stay rdflib terms (str subclasses)."""
    return type(x) is str


def _is_blank(x) -> bool:
    from rdflib import BNode

    return isinstance(x, BNode)


def _is_literal(x) -> bool:
    from rdflib import Literal

    return isinstance(x, Literal)


def _language_ok(lang: str | None, languages: Sequence[str] | None) -> bool:
    if lang is None or languages is None:
        return True
    lang = lang.lower()
    return any(lang == x or lang.startswith(x + "-") for x in languages)


def _language_rank(lang: str | None, languages: Sequence[str] | None) -> tuple:
    """Preferred languages first, then untagged, then any other language by tag."""
    if languages is None:   # no preference: untagged first, then by tag
        return (0 if lang is None else 1, (lang or "").lower())
    if lang is None:
        return (len(languages), "")
    low = lang.lower()
    for i, x in enumerate(languages):
        if low == x or low.startswith(x + "-"):
            return (i, low)
    return (len(languages) + 1, low)


class _Converter:
    """The mapping described in the module docstring, from collected triples to graph arrays."""

    def __init__(self, src: RdfSource, c: _Collected, prefixes: dict[str, str]):
        self.s, self.c, self.prefixes = src, c, prefixes
        self.path = src.path
        self.namer = _Namer(prefixes, src.names)
        self.ignore = tuple(x for x in src._ignore_terms if x)
        self.stats = Counter()
        self.folded: set = set()   # blank nodes that went into a document or an edge
        self.as_edges: set = set()  # blank nodes (OWL restrictions) that became edges, not text

    def vocabulary(self, iri: str) -> bool:
        return iri.startswith(VOCABULARIES) or (bool(self.ignore) and iri.startswith(self.ignore))

    # ------------------------------------------------------------------ who is what
    def classify(self) -> None:
        c = self.c
        classes = {t for ts in c.types.values() for t in ts}
        classes |= {s for s, ts in c.types.items() if CLASS_KINDS & set(ts)}
        for s, links in c.links.items():
            for p, o in links:
                if p in CLASS_AXIOMS:
                    classes |= {x for x in (s, o) if _is_iri(x)}
        self.classes = {x for x in classes if _is_iri(x) and not self.vocabulary(x)}
        annotation = {s for s, ts in c.types.items() if OWL + "AnnotationProperty" in ts}
        self.annotations = ANNOTATIONS | annotation | set(self.s._name_properties)
        # properties and other resources described by the vocabularies (ontology headers, shapes)
        schema = set(c.predicates)
        schema |= {s for s, ts in c.types.items() if _is_iri(s)
                   and any(self.vocabulary(t) and t not in CLASS_KINDS and t not in NO_TYPE for t in ts)}
        self.schema = schema - self.classes

    def is_annotation(self, p: str) -> bool:
        return p in self.annotations or p.startswith(ANNOTATION_NAMESPACES)

    def can_be_node(self, iri) -> bool:
        return (_is_iri(iri) and not self.vocabulary(iri) and iri not in self.schema
                and (self.s.classes or iri not in self.classes))

    def check_classes(self) -> None:
        """With classes off, an IRI used as a class must not also be used as an instance."""
        if self.s.classes:
            return
        c, classes = self.c, self.classes
        bad: dict[str, str] = {}
        for k in sorted(classes & (set(c.types) | set(c.literals) | set(c.links))):
            inst = [t for t in c.types.get(k, ()) if not self.vocabulary(t) and t not in NO_TYPE]
            lit = [(p, o) for p, o in c.literals.get(k, ()) if not self.is_annotation(p)]
            rel = [(p, o) for p, o in c.links.get(k, ()) if p not in CLASS_AXIOMS and not self.is_annotation(p)
                   and not (_is_iri(o) and self.vocabulary(o))]
            if inst:
                bad[k] = f"it is itself of type {self.namer.prefixed(inst[0])}"
            elif lit:
                bad[k] = f"it holds {self.namer.prefixed(lit[0][0])} {str(lit[0][1])[:40]!r}"
            elif rel:
                bad[k] = f"it links to {self.namer.prefixed(str(rel[0][1]))} by {self.namer.prefixed(rel[0][0])}"
        for s, links in c.links.items():
            if _is_iri(s) and s not in classes and self.can_be_node(s):
                for p, o in links:
                    if _is_iri(o) and o in classes and o not in bad and p not in CLASS_AXIOMS \
                            and not self.is_annotation(p):
                        bad[o] = f"{self.namer.prefixed(s)} links to it by {self.namer.prefixed(p)}"
        if bad:
            first = min(bad)
            n_inst = sum(first in ts for ts in c.types.values())
            kind = next((t for t in c.types.get(first, ()) if t in CLASS_KINDS), None)
            why = (f"the type of {n_inst} nodes" if n_inst else f"typed {self.namer.prefixed(kind)}" if kind
                   else "in a class axiom such as rdfs:subClassOf")
            more = f"; {len(bad) - 1} more IRIs like it" if len(bad) > 1 else ""
            raise RdfError(f"{self.path}: {first} is used both as a class ({why}) and as an instance "
                           f"({bad[first]}){more}; set classes: true to keep classes as nodes too")

    # ------------------------------------------------------------------ nodes
    def nodes(self) -> list[str]:
        c = self.c
        subjects = {s for part in (c.types, c.literals, c.links) for s in part if self.can_be_node(s)}
        objects = {o for s in subjects for p, o in c.links.get(s, ()) if self.can_be_node(o)}
        if self.s.classes:
            objects |= {t for s in subjects for t in c.types.get(s, ()) if self.can_be_node(t)}
            objects |= self.classes
        nodes = sorted(subjects | objects)
        if not nodes:
            if not c.triples:
                raise RdfError(f"{self.path}: no triples (an empty RDF graph)")
            why = ("every subject is a class, a property or part of a vocabulary"
                   + ("" if self.s.classes else "; set classes: true to keep classes as nodes"))
            raise RdfError(f"{self.path}: {c.triples} triples but no nodes ({why})")
        return nodes

    def superclasses(self) -> dict[str, set[str]]:
        """Each class's superclasses by the file's rdfs:subClassOf (transitively)."""
        up = defaultdict(set)
        for s, links in self.c.links.items():
            for p, o in links:
                if p == RDFS + "subClassOf" and _is_iri(s) and _is_iri(o):
                    up[s].add(o)
        closed: dict[str, set[str]] = {}
        for start in up:
            seen, todo = set(), list(up[start])
            while todo:
                x = todo.pop()
                if x not in seen:
                    seen.add(x)
                    todo.extend(up.get(x, ()))
            closed[start] = seen
        return closed

    def node_types(self, nodes: list[str]) -> tuple[list[str], list[int], list[list[str]]]:
        """(type names, each node's type code, each node's other type names)."""
        s, c = self.s, self.c
        up = self.superclasses()
        typed = []   # per node: (all its type keys, the most specific ones)
        for v in nodes:
            types = sorted({t for t in c.types.get(v, ()) if not self.vocabulary(t) and t not in NO_TYPE})
            if not types and v in self.classes:
                types = ["<class>"]
            if not types:
                if s.default_type is None:
                    untyped = sum(1 for x in nodes if x not in self.classes and not any(
                        not self.vocabulary(t) and t not in NO_TYPE for t in c.types.get(x, ())))
                    raise RdfError(f"{self.path}: node {v} has no rdf:type ({untyped} nodes without one); "
                                   "give each node a type or set default_type (e.g. Resource)")
                self.stats["untyped_nodes"] += 1
                types = ["<default>"]
            if len(types) > 1:
                self.stats["multi_typed_nodes"] += 1
            specific = [t for t in types if not any(t in up.get(u, ()) for u in types if u != t)] or types
            typed.append((types, specific))
        shown = self.namer.names({t for ts, _ in typed for t in ts if not t.startswith("<")})
        shown["<class>"], shown["<default>"] = s.class_type, s.default_type
        priority = list(s.type_priority or ())
        primary, other_types = [], []
        for types, specific in typed:
            named = [shown[t] for t in types]
            first = next((n for n in priority if n in named), None) or min(shown[t] for t in specific)
            primary.append(first)
            other_types.append(sorted(set(named) - {first}))
        names = sorted(set(primary))
        code = {n: i for i, n in enumerate(names)}
        return names, [code[n] for n in primary], other_types

    # ------------------------------------------------------------------ names and documents
    def name_literal(self, v: str):
        """(property, literal) that names node ``v``: the first name property with a value, in the
        preferred language; None if it has none."""
        langs = self.s.languages
        for prop in self.s._name_properties:
            values = [o for p, o in self.c.literals.get(v, ()) if p == prop and str(o).strip()]
            if values:
                return prop, min(values, key=lambda o: (_language_rank(o.language, langs), str(o)))
        return None

    def name_and_lines(self, v: str, names_by_iri: dict[str, str],
                       prop_names: dict[str, str]) -> tuple[str, list[tuple[str, str]], str | None]:
        """(name, [(property name, values)], verbatim document or None) of node ``v``."""
        s = self.s
        literals = self.c.literals.get(v, ())
        document = next((str(o) for p, o in literals if p == DOCUMENT), None)
        kept = [(p, o, _language_ok(o.language, s.languages)) for p, o in literals if p != DOCUMENT]
        used = self.name_literal(v)
        name = names_by_iri[v]
        if used is None:
            self.stats["nodes_named_by_iri"] += 1
        self.stats["literals_other_language"] += sum(1 for p, o, ok in kept if not ok and (p, o) != used)
        by_prop: dict[str, list[str]] = defaultdict(list)
        for p, o, ok in kept:
            if ok and (p, o) != used and str(o).strip():
                by_prop[p].append(str(o).strip())
        for p, o in self.c.links.get(v, ()):
            if not _is_iri(o) and o not in self.as_edges:   # a blank node: folded into this line
                text = self.fold(o, names_by_iri, prop_names, FOLD_DEPTH, set())
                if text:
                    by_prop[p].append(text)
        return name, self.ordered(by_prop, prop_names), document

    def ordered(self, by_prop: dict[str, list[str]], prop_names: dict[str, str]) -> list[tuple[str, str]]:
        wanted = self.s._text_properties
        if wanted is not None:
            order = [p for p in wanted if p in by_prop]
        else:
            first = [p for p in DESCRIPTIONS if p in by_prop]
            order = first + sorted((p for p in by_prop if p not in first), key=lambda p: (prop_names[p], p))
        return [(prop_names[p], "; ".join(sorted(set(by_prop[p])))) for p in order]

    def fold(self, b, names_by_iri, prop_names, depth: int, seen: set) -> str:
        """A blank node as one line of text: its literals and links (IRIs by name), lists as their items."""
        if depth == 0 or b in seen:
            return ""
        seen = seen | {b}
        self.folded.add(b)
        items = self.list_items(b, mark=True)
        if items is not None:
            return ", ".join(x for x in (self.value(o, names_by_iri, prop_names, depth, seen) for o in items) if x)
        parts = []
        for p, o in self.c.literals.get(b, ()):
            if _language_ok(o.language, self.s.languages) and str(o).strip():
                parts.append((prop_names.get(p) or local_name(p), str(o).strip()))
        for p, o in self.c.links.get(b, ()):
            text = self.value(o, names_by_iri, prop_names, depth, seen)
            if text:
                parts.append((prop_names.get(p) or local_name(p), text))
        return ", ".join(f"{k}: {x}" for k, x in sorted(parts))

    def value(self, o, names_by_iri, prop_names, depth, seen) -> str:
        if _is_iri(o):
            return "" if o == NIL else names_by_iri.get(o) or local_name(o)
        if _is_literal(o):
            return str(o).strip()
        return self.fold(o, names_by_iri, prop_names, depth - 1, seen)

    def list_items(self, b, mark: bool = False) -> list | None:
        """The members of an RDF list starting at blank node ``b``, or None if ``b`` is no list; with
        ``mark``, its cells count as folded."""
        items, seen = [], set()
        while not (_is_iri(b) and b == NIL):
            if b in seen or _is_iri(b):
                return None
            seen.add(b)
            first = [o for p, o in self.c.links.get(b, ()) if p == FIRST] + \
                    [o for p, o in self.c.literals.get(b, ()) if p == FIRST]
            rest = [o for p, o in self.c.links.get(b, ()) if p == REST]
            if len(first) != 1 or len(rest) != 1:
                return None
            items.append(first[0])
            b = rest[0]
        if mark:
            self.folded |= seen
        return items

    # ------------------------------------------------------------------ edges
    def restriction_edges(self, v: str, o, index) -> Iterator[tuple[str, str]]:
        """``v subClassOf/equivalentClass (p some D)``, also inside an intersection: (p, D) for node D."""
        if not _is_blank(o):
            return
        members = [o]
        for p, x in self.c.links.get(o, ()):
            if p == OWL + "intersectionOf" and _is_blank(x):
                members += [m for m in (self.list_items(x, mark=True) or ()) if _is_blank(m)]
        for m in members:
            links = dict(self.c.links.get(m, ()))
            prop, target = links.get(OWL + "onProperty"), next(
                (links[t] for t in RESTRICTION_TARGETS if t in links), None)
            if _is_iri(prop) and _is_iri(target) and target in index:
                self.folded.add(m)
                self.as_edges.add(o)
                yield prop, target

    def convert(self) -> tuple[KnowledgeGraph, dict]:
        s, c = self.s, self.c
        self.classify()
        self.check_classes()
        nodes = self.nodes()
        index = {v: i for i, v in enumerate(nodes)}
        type_names, type_codes, other_types = self.node_types(nodes)
        src, dst, rels = [], [], []
        for v in nodes:
            i = index[v]
            for p, o in c.links.get(v, ()):
                if _is_iri(o) and o in index:
                    src.append(i), dst.append(index[o]), rels.append(p)
                elif s.classes and p in CLASS_AXIOMS:
                    for rp, target in self.restriction_edges(v, o, index):
                        src.append(i), dst.append(index[target]), rels.append(rp)
            if s.classes:
                for t in c.types.get(v, ()):
                    if t in index:
                        src.append(i), dst.append(index[t]), rels.append(TYPE)
        rel_shown = self.namer.names(rels)
        prop_names = self.namer.names({p for part in (c.literals, c.links) for pairs in part.values() for p, _ in pairs})
        names, docs = [], []
        names_by_iri = {}   # every node's name first: folded blank nodes name the IRIs they link to
        for v in nodes:
            named = self.name_literal(v)
            names_by_iri[v] = str(named[1]).strip() if named else local_name(v)
        for k, v in enumerate(nodes):
            name, lines, document = self.name_and_lines(v, names_by_iri, prop_names)
            names.append(name)
            if document is not None:
                docs.append(document)
                continue
            head = [f"- name: {name}", f"- type: {type_names[type_codes[k]]}"]
            if other_types[k]:
                head.append(f"- other types: {', '.join(other_types[k])}")
            docs.append("\n".join(head + [f"- {p}: {x}" for p, x in lines]))
        blank_subjects = {b for part in (c.types, c.literals, c.links) for b in part if not _is_iri(b)}
        self.stats["blank_nodes_folded"] = len(self.folded)
        self.stats["blank_nodes_dropped"] = len(blank_subjects - self.folded)
        rel_names = sorted(set(rel_shown.values()))
        rel_code = {p: rel_names.index(name) for p, name in rel_shown.items()}
        pairs = sorted(set(zip(src, dst, (rel_code[p] for p in rels))))   # RDF holds each triple once
        e = np.array(pairs, dtype=np.int64).reshape(-1, 3)
        cands = None
        if s.candidate_types is not None:
            unknown = [t for t in s.candidate_types if t not in type_names]
            if unknown:
                raise RdfError(f"candidate type {unknown[0]!r} is not a node type of {self.path}; "
                               f"valid node types: {', '.join(type_names)}")
            wanted = [type_names.index(t) for t in s.candidate_types]
            cands = np.flatnonzero(np.isin(np.array(type_codes), wanted)).astype(np.int64)
        graph = KnowledgeGraph.from_edges(s.name, type_names, type_codes, names, docs, rel_names,
                                          e[:, 0], e[:, 1], e[:, 2], candidate_ids=cands,
                                          external_ids=pa.array(nodes, pa.large_string()))
        stats = {"triples": c.triples, "nodes": len(nodes), "edges": len(pairs),
                 "classes": len(self.classes), "class_nodes": len(self.classes) if s.classes else 0,
                 **{k: int(self.stats.get(k, 0)) for k in (
                     "untyped_nodes", "multi_typed_nodes", "nodes_named_by_iri", "literals_other_language",
                     "blank_nodes_folded", "blank_nodes_dropped")},
                 "statements_ignored": c.ignored}
        return graph, stats


# ============================================================================ the source
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
                 candidate_types: Sequence[str] | str | None = None):
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
        return _hash(files_fingerprint(self._input_files()), json.dumps(
            [MAPPING_VERSION, self._settings(), [str(p.resolve()) for p in self._input_files()]], sort_keys=True))

    @property
    def cache_dir(self) -> Path:
        """``<root>/cache/<name>-<8 hex digits of the file's path>``: two files never share a cache."""
        return self.root / "cache" / f"{self.name}-{_hash(str(self.path.resolve()))[:8]}"

    def describe(self) -> dict:
        return {"source": type(self).__name__, "name": self.name, "root": str(self.root),
                "path": str(self.path), "queries": str(self.queries_path) if self.queries_path else None,
                **self._settings()}

    # ------------------------------------------------------------------ graph
    def build(self) -> KnowledgeGraph:
        triples, prefixes = read_triples(self.path, self.format)
        self._resolve_settings(prefixes, f"{self.path} settings")   # now with the file's own prefixes
        c = _collect(triples, self._ignore_terms)
        graph, stats = _Converter(self, c, prefixes).convert()
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


def _hash(*parts: str) -> str:
    import hashlib

    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


# ============================================================================ export
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
