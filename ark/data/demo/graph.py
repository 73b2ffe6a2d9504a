"""The demo graph: diseases, genes and phenotypes from the HPO release, with PRIME's vocabularies.

What the annotations become (``phenotype.hpoa``, ``genes_to_phenotype.txt``, read by `ark.data.demo.hpo`):

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

Nodes carry PRIME's ``node_info`` fields (``id``, ``type``, ``name``, ``source``, ``details``); edges are
kept once, in their canonical direction (disease -> phenotype, gene -> phenotype, gene -> disease,
parent term -> child term); `ark.data.demo.writer` stores each in both directions, as PRIME does.

    graph = build_graph()       # about 10 s
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from ark.data.demo.hpo import (Term, exact_synonyms, hpo_data_dir, hpo_version, observed_in_none, parse_obo,
                               read_tsv)

# PRIME's vocabularies, restricted to the types the demo uses, in PRIME's order.
NODE_TYPES = ("disease", "gene/protein", "effect/phenotype")
RELATIONS = ("associated with", "parent-child", "phenotype absent", "phenotype present")
# Annotation aspects (column "aspect" of phenotype.hpoa): only P is a phenotype of the disease; the
# others describe the disease and become readable text in its details, never edges.
PHENOTYPE_ASPECT = "P"
DISEASE_DETAIL_ASPECTS = {"I": "inheritance", "C": "clinical course", "M": "clinical modifier",
                          "H": "past medical history"}


@dataclass
class DemoGraph:
    """The demo graph in memory: PRIME-style ``node_info`` plus typed, canonical-direction edges."""
    node_info: dict[int, dict]
    node_types: list[int]               # index into NODE_TYPES
    edges: list[tuple[int, int, int]]   # (src, dst, relation index), canonical direction, sorted
    hpo_version: str
    # per phenotype node: the synonyms HPO lists with scope EXACT (read by the held-out synonym template;
    # not written to the files, whose documents list every synonym as before)
    exact_synonyms: dict[int, frozenset[str]] = field(default_factory=dict)

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
    for disease, name, qualifier, hpo_id, aspect, frequency in read_tsv(data_dir / "phenotype.hpoa", hpoa):
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
    for gene_id, symbol, hpo_id, disease in read_tsv(data_dir / "genes_to_phenotype.txt", g2p):
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
    exact: dict[int, frozenset[str]] = {}
    for t in live:
        term = terms[t]
        info = {"id": t, "type": "effect/phenotype", "name": term.name, "source": "HPO"}
        details = _phenotype_details(term, terms)
        if details:
            info["details"] = details
        add("phenotype", t, info)
        exact[index["phenotype", t]] = frozenset(exact_synonyms(term))

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
    return DemoGraph(node_info, node_types, ordered, hpo_version(data_dir), exact)
