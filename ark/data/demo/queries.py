"""The demo's query set: four templates over the demo graph, gold answers computed exactly, and the
train/val/test splits.

Each template (`TEMPLATES`, wordings in `PHRASES`) draws `QUERIES_PER_TEMPLATE` queries with a fixed
seed, each with 1..`MAX_GOLD` gold answers; `split_queries` gives them ids and splits each template
40/20/40 into train/val/test, plus ``test-0.1``, a seeded tenth of test. The vocabulary-mismatch
queries come after them (`ark.data.demo.mismatch`).

* ``phenotype_by_definition``: the phenotype(s) whose definition contains the question's description.
  The description is a word-for-word piece of the gold definition (the first sentence, or all of it),
  so this template measures finding a document by its own words, not retrieval skill.
* ``diseases_of_defined_phenotype``, ``genes_of_phenotype_and_disease``, ``children_associated_with_gene``:
  gold sets follow HPO's annotation rule, the true-path rule: a disease or gene annotated with a term is
  annotated with every ancestor of that term too (`below`). "Which diseases present with X" counts the
  diseases annotated with X or any more specific term; a gene "associated with P" is one annotated with
  P or a more specific term; the children template asks for the direct child terms of T (the wording
  says so) that are associated with G by that rule. A subject whose gold set is larger than `MAX_GOLD`
  is not asked about (most general terms are left out that way).

    queries, splits = split_queries(generate_queries(build_graph()))
"""

from __future__ import annotations

import bisect
import itertools
import random
import re
from collections import defaultdict
from dataclasses import dataclass

from ark.data.demo.graph import NODE_TYPES, RELATIONS, DemoGraph
from ark.data.demo.hpo import NO_SYMBOL

SEED = 0
SPLITS = ("train", "val", "test")
TEMPLATES = ("phenotype_by_definition", "genes_of_phenotype_and_disease",
             "diseases_of_defined_phenotype", "children_associated_with_gene")
QUERIES_PER_TEMPLATE = 300          # split per template: 40% train, 20% val, 40% test
MAX_GOLD = 20
PHENOTYPIC_ABNORMALITY = "HP:0000118"   # root of aspect P: query subjects are drawn below it


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
        "Which direct child terms of {t} are associated with the gene {g}?",
        "What immediate subtypes (child terms) of the phenotype {t} are linked to {g}?",
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


def below(children: dict[int, list[int]], term: int) -> set[int]:
    """``term`` and every term below it (its descendants over parent-child edges): the terms whose
    annotations count for ``term`` under the true-path rule."""
    out, stack = set(), [term]
    while stack:
        t = stack.pop()
        if t not in out:
            out.add(t)
            stack.extend(children.get(t, ()))
    return out


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

    subtree: dict[int, set[int]] = {}

    def terms_below(term: int) -> set[int]:
        if term not in subtree:
            subtree[term] = below(children, term)
        return subtree[term]

    annotated: dict[tuple[int, int, str], set[int]] = {}

    def true_path(term: int, relation: int, node_type: str) -> set[int]:
        """Nodes of ``node_type`` linked by ``relation`` to ``term`` or a term below it."""
        key = (term, relation, node_type)
        if key not in annotated:
            annotated[key] = {n for h in terms_below(term) for n in adj.get((h, relation), ())
                              if types[n] == typ[node_type]}
        return annotated[key]

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
                if terms_below(p) & adj.get((d, present), set()):
                    continue    # D itself presents with P: the disease condition would not cut
                p_genes = true_path(p, assoc, "gene/protein")
                gold = d_genes & p_genes
                if not (gold < d_genes and gold < p_genes):
                    continue
                emit({"phenotype": p, "disease": d}, gold, p=info[p]["name"], d=info[d]["name"])
            elif template == "diseases_of_defined_phenotype":
                p = rng.choice(described_ids)
                desc = described[p]
                if matching(desc) != (p,):
                    continue
                gold = true_path(p, present, "disease")
                emit({"phenotype": p, "description": desc}, gold, desc=desc, ldesc=_lower_first(desc))
            else:  # children_associated_with_gene
                t = rng.choice(phenos)
                kids = children.get(t, [])
                if len(kids) < 2 or t not in abnormal:
                    continue
                kid_genes = {c: true_path(c, assoc, "gene/protein") for c in kids}
                genes = sorted(set().union(*kid_genes.values()) - unnamed)
                if not genes:
                    continue
                g = rng.choice(genes)
                gold = {c for c in kids if g in kid_genes[c]}
                emit({"term": t, "gene": g}, gold, t=info[t]["name"], g=info[g]["name"])
        out[template] = queries
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
