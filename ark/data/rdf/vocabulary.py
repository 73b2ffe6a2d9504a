"""The names an RDF graph is read with: formats by suffix, the RDF/RDFS/OWL/SKOS vocabularies and the
well-known prefixes, the terms the mapping (`ark.data.rdf`) treats specially, `RdfError`, and display names
for IRIs (`local_name`, `Namer`).
"""

from __future__ import annotations

import re
from collections import Counter
from urllib.parse import unquote

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


class Namer:
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
