"""The demo's vocabulary-mismatch queries and their split, ``test-mismatch``.

The paper's stated limitation: lexical global search under-retrieves when a query words a node
differently from its document ("paraphrases and domain-specific aliases"). Two templates test it:

* phenotype_by_held_out_synonym: a phenotype asked for by one of its HPO synonyms, and that synonym
  is removed from the node's document (`hold_out_synonyms`, applied to the graph before it is
  written), so the alias is nowhere in the gold document. The synonym is one HPO lists with scope
  EXACT (same meaning as the name; BROAD, NARROW and RELATED ones are never asked), owned by that term
  only (no other phenotype has it as name or synonym of any scope, compared ignoring case and
  punctuation), and it does not name another term better: it occurs, as whole words, in no other
  phenotype's document (e.g. Hyperventilation's "Rapid breathing" is out: Tachypnea is defined as
  "Very rapid breathing"). It also shares no word of 4+ letters (compared by their first five) with the
  node's name or remaining synonyms and contains none of their words.
* phenotype_by_reworded_definition: a phenotype asked for by its definition with common words
  replaced by near-synonyms that hold in medical text (`REWORDINGS`, at least two replaced; a fixed
  table, not a language model; "increased" only before a word such as "level", `ONLY_BEFORE`), so the
  description is not a substring of any document. No size or
  degree word is replaced (small, large, short, low, high: they belong to terms such as "small
  intestine" or "low-density lipoprotein"), nor a word inside a multi-word HPO name or synonym that the
  definition contains ("Absence seizure"), nor one joined to another by a hyphen or slash (`reword`).

They form a split of their own, `MISMATCH_SPLIT`, with ids after the other queries'
(`add_mismatch_split`).

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
# word -> the word that replaces it: near-synonyms in clinical definitions, one word each way
REWORDINGS = {
    "abnormal": "anomalous", "abnormally": "unusually", "abnormality": "anomaly", "abnormalities": "anomalies",
    "increased": "elevated", "decreased": "reduced", "reduced": "diminished", "elevated": "raised",
    "increase": "rise", "decrease": "reduction", "reduction": "decrease",
    "presence": "occurrence", "absence": "lack", "absent": "missing", "inability": "incapacity",
    "affecting": "involving", "involving": "affecting", "characterized": "marked", "due": "owing",
    "narrowing": "constriction", "concentration": "level", "concentrations": "levels", "amount": "quantity",
    "region": "area", "located": "situated", "underdevelopment": "incomplete development",
    "often": "frequently", "usually": "typically",
}
# words replaced only before one of these words: "increased level" is an elevated level, but
# "increased islets" are not elevated islets
ONLY_BEFORE = {"increased": frozenset("level levels concentration concentrations amount activity pressure rate "
                                      "serum plasma blood urinary circulating".split())}
# not a word of a hyphenated or slashed compound ("X-linked", "low-density", "and/or"); with the article
# before it, which follows the replacement ("an increase" -> "a rise")
_REWORD = re.compile(r"(?:\b(an?)(\s+))?(?<![\w/-])(" + "|".join(sorted(map(re.escape, REWORDINGS), key=len, reverse=True))
                     + r")(?![\w/-])", re.IGNORECASE)
_STOP = frozenset("with and the for from that this into than then have has were was are not".split())


def _content_words(text: str) -> set[str]:
    """Words of 4+ letters (not stopwords), cut to their first 5 letters so inflections meet."""
    return {w[:5] for w in re.findall(r"[a-z0-9]+", text.lower()) if len(w) >= 4 and w not in _STOP}


def normal(text: str) -> str:
    """Lower-case words separated by single spaces (punctuation dropped): how labels are compared."""
    return " ".join(re.findall(r"[a-z0-9]+", text.lower()))


def _document_words(info: dict) -> str:
    """A phenotype's document (name and every details value) as `normal` words, padded with spaces;
    " | " between two values, so no phrase runs from one into the next."""
    values = [info["name"]]
    for value in info.get("details", {}).values():
        values += value if isinstance(value, list) else [value]
    return " " + " | ".join(normal(v) for v in values) + " "


def named_elsewhere(node: int, phrase: str, docs: dict[int, str],
                    words: dict[str, set[int]]) -> bool:
    """Whether ``phrase`` occurs, as whole words, in the document of a phenotype other than ``node``
    (``docs``: `_document_words` per phenotype; ``words``: word -> phenotypes whose document has it)."""
    ws = normal(phrase).split()
    if not ws:
        return False
    holders = set.intersection(*(words.get(w, set()) for w in ws)) - {node}
    return any(f" {' '.join(ws)} " in docs[j] for j in holders)


def hold_out_synonyms(graph: DemoGraph, per_template: int = HELD_OUT_PER_TEMPLATE,
                      seed: int = SEED, avoid: frozenset[int] = frozenset()) -> dict[int, str]:
    """Remove one synonym from the documents of ``per_template`` seeded phenotypes (in place) and
    return {node: synonym}. A synonym qualifies when HPO lists it as EXACT (`DemoGraph.exact_synonyms`),
    no other phenotype has it as name or synonym (any scope), no other phenotype's document contains it
    (`named_elsewhere`), it shares no content word with the name or the other synonyms, and the rest of
    its own document does not mention it. Phenotypes in ``avoid`` (those the other templates' queries
    ask about or answer with) keep every synonym."""
    info, types = graph.node_info, graph.node_types
    pheno = NODE_TYPES.index("effect/phenotype")
    owners: dict[str, set[int]] = defaultdict(set)
    docs: dict[int, str] = {}
    words: dict[str, set[int]] = defaultdict(set)
    for i, t in enumerate(types):
        if t == pheno:
            for s in [info[i]["name"], *info[i].get("details", {}).get("synonyms", [])]:
                owners[normal(s)].add(i)
            docs[i] = _document_words(info[i])
            for w in set(docs[i].split()):
                words[w].add(i)
    candidates: list[tuple[int, str]] = []
    abnormal = phenotypic_abnormalities(graph)
    for i, t in enumerate(types):
        if t != pheno or i in avoid or i not in abnormal:
            continue
        synonyms = info[i].get("details", {}).get("synonyms", [])
        exact = graph.exact_synonyms.get(i, frozenset())
        for s in synonyms:
            others = [x for x in synonyms if x != s]
            if s not in exact or owners[normal(s)] != {i} or len(s) < 5:
                continue
            names = " ".join([info[i]["name"], *others]).lower()
            if _content_words(s) & _content_words(names) or any(
                    w in s.lower() for w in re.findall(r"[a-z0-9]{4,}", names) if w not in _STOP) or any(
                    x.lower() in s.lower() for x in [info[i]["name"], *others]):
                continue
            rest = {**info[i], "details": {**info[i]["details"], "synonyms": others}}
            if _mentions(json.dumps(rest), [s]) or named_elsewhere(i, s, docs, words):
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


def _singular(words) -> str:
    """Words joined by spaces, each without a plural "s" (so "absence seizures" meets "Absence seizure")."""
    return " ".join(w[:-1] if len(w) > 3 and w.endswith("s") else w for w in words)


def protected_terms(labels) -> frozenset[str]:
    """The multi-word ``labels`` (HPO names and synonyms) that contain a word of `REWORDINGS`, as
    `normal` text without plural "s": `reword` leaves such a term whole where a text contains it
    ("Absence seizures")."""
    return frozenset(_singular(x.split()) for x in map(normal, labels) if len(x.split()) > 1 and _REWORD.search(x))


def reword(text: str, protected: frozenset[str] = frozenset()) -> tuple[str, int]:
    """``text`` with the words of `REWORDINGS` replaced (case of the first letter kept; an article "a"/"an"
    before one made to fit the new word), and how many.
    A word of a hyphenated or slashed compound is kept, so is every word of a run of words that is one
    of the ``protected`` terms (`protected_terms`; compared as `normal` text, plurals as singulars), and
    a word of `ONLY_BEFORE` not followed by one of its words."""
    spans = []
    if protected:
        longest = max(len(x.split()) for x in protected)
        tokens = [(m.group(0).lower(), m.start(), m.end()) for m in re.finditer(r"[A-Za-z0-9]+", text)]
        for i in range(len(tokens)):
            for j in range(i + 2, min(len(tokens), i + longest) + 1):
                if _singular(w for w, _, _ in tokens[i:j]) in protected:
                    spans.append((tokens[i][1], tokens[j - 1][2]))
    count = 0

    def sub(m: re.Match) -> str:
        nonlocal count
        article, space, word = m.group(1), m.group(2), m.group(3)
        if any(a <= m.start(3) and m.end(3) <= b for a, b in spans):
            return m.group(0)
        before = ONLY_BEFORE.get(word.lower())
        if before is not None:
            following = re.match(r"\s+([A-Za-z0-9]+)", text[m.end():])
            if following is None or following.group(1).lower() not in before:
                return m.group(0)
        count += 1
        new = REWORDINGS[word.lower()]
        new = new[:1].upper() + new[1:] if word[:1].isupper() else new
        if article is None:
            return new
        if article == "A" and re.search(r"\w\s*$", text[:m.start()]):
            return article + space + new        # a capital A after a word is a name ("vitamin A")
        fitting = "an" if new[:1].lower() in "aeiou" else "a"
        return (fitting[:1].upper() + fitting[1:] if article[:1].isupper() else fitting) + space + new

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
    labels = [held_out[i] for i in sorted(held_out)]
    for i, t in enumerate(graph.node_types):
        if t == pheno:
            labels += [info[i]["name"], *info[i].get("details", {}).get("synonyms", [])]
    protected = protected_terms(labels)
    phrases = MISMATCH_PHRASES["phenotype_by_reworded_definition"]
    reworded: list[DemoQuery] = []
    for p in ids:
        desc = _description(info[p])
        new, n = reword(desc, protected)
        if n < 2 or docs.count(desc.lower()) != 1 or new.lower() in docs:   # the original wording must
            continue                                                         # single out the phenotype

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
