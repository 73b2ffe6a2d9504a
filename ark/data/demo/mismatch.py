"""The demo's vocabulary-mismatch queries and their split, ``test-mismatch``.

The paper's stated limitation: lexical global search under-retrieves when a query words a node
differently from its document ("paraphrases and domain-specific aliases"). Two templates test it:

* phenotype_by_held_out_synonym: a phenotype asked for by one of its HPO synonyms, and that synonym
  is removed from the node's document (`hold_out_synonyms`, applied to the graph before it is
  written), so the alias is nowhere in the gold document; it shares no word of 4+ letters (compared by
  their first five) with the node's name or remaining synonyms, contains none of their words, and no
  other phenotype has it as name or synonym.
* phenotype_by_reworded_definition: a phenotype asked for by its definition with common words
  replaced by near-synonyms (`REWORDINGS`, at least two replaced; a fixed table, not a language
  model), so the description is not a substring of any document.

They form a split of their own, `MISMATCH_SPLIT`, with ids after the other queries'
(`add_mismatch_split`): train/val/test/test-0.1 stay as they were.

    held_out = hold_out_synonyms(graph, avoid=asked_about(queries))
    queries, splits = add_mismatch_split(queries, splits, generate_mismatch_queries(graph, held_out))
"""

from __future__ import annotations

import json
import random
import re
from collections import defaultdict

from ark.data.demo.graph import NODE_TYPES, DemoGraph
from ark.data.demo.queries import (QUERIES_PER_TEMPLATE, SEED, TEMPLATES, DemoQuery, _description, _lower_first,
                                   _mentions, phenotypic_abnormalities, reads_as_noun_phrase)

MISMATCH_TEMPLATES = ("phenotype_by_held_out_synonym", "phenotype_by_reworded_definition")
ALL_TEMPLATES = TEMPLATES + MISMATCH_TEMPLATES
MISMATCH_SPLIT = "test-mismatch"
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


def add_mismatch_split(queries: list[DemoQuery], splits: dict[str, list[int]],
                       per_template: dict[str, list[DemoQuery]], seed: int = SEED):
    """Append the vocabulary-mismatch queries after ``queries`` (ids n, n+1, ..., shuffled across the
    templates) as split `MISMATCH_SPLIT`; every other query and split keeps its id and contents."""
    extra = [q for t in MISMATCH_TEMPLATES for q in per_template[t]]
    random.Random(seed * 1000 + 93).shuffle(extra)
    n = len(queries)
    return [*queries, *extra], {**splits, MISMATCH_SPLIT: list(range(n, n + len(extra)))}


def asked_about(queries: list[DemoQuery]) -> frozenset[int]:
    """Every node a query names in its parameters or has as a gold answer."""
    nodes = {a for q in queries for a in q.answer_ids}
    for q in queries:
        for _, v in q.params:
            nodes.update(v if isinstance(v, (list, tuple)) else [v] if isinstance(v, int) else [])
    return frozenset(nodes)
