"""Collected triples into graph arrays: who is a node, a class or schema; node types, names and
documents; relations; blank nodes folded into documents. The mapping is the one `ark.data.rdf` describes.

    graph, stats = Converter(source, collect(triples, ignore), prefixes).convert()
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence

import numpy as np
import pyarrow as pa

from ark.data.graph import KnowledgeGraph
from ark.data.rdf.read import Collected
from ark.data.rdf.vocabulary import (ANNOTATION_NAMESPACES, ANNOTATIONS, CLASS_AXIOMS, CLASS_KINDS, DESCRIPTIONS,
                                     DOCUMENT, FIRST, FOLD_DEPTH, NIL, NO_TYPE, OWL, RDFS, REST, RESTRICTION_TARGETS,
                                     TYPE, VOCABULARIES, Namer, RdfError, local_name)


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


class Converter:
    """The mapping described in the module docstring, from collected triples to graph arrays."""

    def __init__(self, src, c: Collected, prefixes: dict[str, str]):   # src: the RdfSource and its settings
        self.s, self.c, self.prefixes = src, c, prefixes
        self.path = src.path
        self.namer = Namer(prefixes, src.names)
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
