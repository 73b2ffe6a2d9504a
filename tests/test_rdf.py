"""RDF graphs (ark.data.rdf): the hand-made art graph under tests/data/rdf_kg/ in Turtle and N-Triples
(and, serialised by rdflib here, in every other format read), classes as nodes, the agent's tools on it,
BM25 and ARK runs through experiments/run.py, one-line errors for bad input, the N-Triples export
round trip, the path resolution, and the Brick ontology that the brickschema package ships."""

from __future__ import annotations

import gzip
import importlib.metadata
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from ark.data.rdf.vocabulary import RdfError
from ark.data.rdf.source import RdfSource
from ark.data.rdf.write import export
from ark.data.tables.source import TablesSource

REPO = Path(__file__).resolve().parents[1]
KG = REPO / "tests" / "data" / "rdf_kg"
TTL, NT = KG / "art.ttl", KG / "art.nt"
EX = "http://example.org/art/"


def source(path, tmp_path, **kw) -> RdfSource:
    return RdfSource(path, root=tmp_path / "data", **kw)


def edges_of(g, iri) -> set[tuple[str, str, bool]]:
    e = g.neighbors(g.node_index(iri))
    return {(g.external_id(int(n)), g.relation_names[r], bool(o)) for n, r, o in zip(e.nodes, e.relations, e.outgoing)}


def content(g) -> tuple:
    """Everything a graph shows: ids, types, names, documents, vocabularies, edges."""
    return ([g.external_id(i) for i in range(g.num_nodes)], g.node_type_names, np.asarray(g.node_types).tolist(),
            g.names(), list(g.texts()), g.relation_names,
            sorted(zip(*(a.tolist() for a in g.stored_edges()))), np.asarray(g.candidate_ids).tolist())


# --- the mapping --------------------------------------------------------------------------------------
def test_turtle_graph_has_iris_types_names_documents_and_relations(tmp_path):
    s = source(TTL, tmp_path)
    g = s.graph()
    assert s.name == "art" and (g.num_nodes, g.num_edges) == (31, 40)
    assert g.node_type_names == ["City", "Country", "Movement", "Museum", "Painter", "Painting", "Resource"]
    assert g.relation_names == ["after", "bornIn", "country", "creator", "depicts", "heldBy", "locatedIn",
                                "movement", "nationality", "sameAs"]
    iris = [g.external_id(i) for i in range(g.num_nodes)]
    assert iris == sorted(iris) and g.node_index(EX + "nightwatch") == iris.index(EX + "nightwatch")
    # classes, properties and the ontology header are not nodes
    for schema in ("Painter", "Person", "Painting", "creator", "heldBy", ""):
        with pytest.raises(KeyError):
            g.node_index(EX + schema)
    # two types: the most specific one (Painter is a subclass of Person), the other listed; English label
    r = g.node_index(EX + "rembrandt")
    assert (g.node_name(r), g.node_type_name(r)) == ("Rembrandt van Rijn", "Painter")
    assert g.node_text(r) == ("- name: Rembrandt van Rijn\n- type: Painter\n- other types: Person\n"
                              "- comment: Dutch Golden Age painter and printmaker, a master of light and shadow "
                              "in portraits.\n- born: 1606-07-15")
    assert "Harmenszoon" not in g.node_text(r)                              # its @nl label is left out
    assert g.node_name(g.node_index(EX + "vangogh")) == "Vincent van Gogh"  # no rdfs:label: skos:prefLabel
    assert g.node_name(g.node_index(EX + "marmottan")) == "Musée Marmottan Monet"   # only a @fr label
    assert g.node_name(g.node_index(EX + "selfportrait1887")) == "selfportrait1887"  # no label: the IRI's
    # a node without rdf:type gets the default type; an IRI only linked to is a node as well
    assert g.node_type_name(g.node_index(EX + "saintremy")) == "Resource"
    assert (EX + "vangogh", "sameAs", False) in edges_of(g, "http://www.wikidata.org/entity/Q5582")
    # blank nodes are folded into the document that refers to them (RDF lists as their items)
    assert g.node_text(g.node_index(EX + "rijksmuseum")).endswith("- address: postalCode: 1071 XJ, street: Museumstraat 1")
    assert g.node_text(g.node_index(EX + "baroque")).endswith("- keywords: drama, contrast, movement")
    assert edges_of(g, EX + "vermeer") == {(EX + "delft", "bornIn", True), (EX + "baroque", "movement", True),
                                           (EX + "netherlands", "nationality", True),
                                           (EX + "milkmaid", "creator", False), (EX + "pearl", "creator", False)}
    assert s.build_stats() == {"format": "turtle", "triples": 163, "nodes": 31, "edges": 40, "classes": 8,
                               "class_nodes": 0, "untyped_nodes": 2, "multi_typed_nodes": 1,
                               "nodes_named_by_iri": 2, "literals_other_language": 5, "blank_nodes_folded": 5,
                               "blank_nodes_dropped": 1, "statements_ignored": 0}
    again = source(TTL, tmp_path)           # a new process: the graph and its statistics from the cache
    assert again.graph().directory == s.cache_dir and again.build_stats() == s.build_stats()


def test_ntriples_and_turtle_give_the_same_graph_and_queries(tmp_path):
    a, b = source(TTL, tmp_path), source(NT, tmp_path)
    assert a.cache_dir != b.cache_dir                                       # two files, two caches
    assert content(a.graph()) == content(b.graph())
    assert a.queries_path == b.queries_path == KG / "art.queries.jsonl"
    qa, qb = a.queries(), b.queries()
    assert qa.split_names() == qb.split_names() == ["test", "val"]
    assert [(q.id, q.answer_ids) for q in qa] == [(q.id, q.answer_ids) for q in qb]
    g = a.graph()
    assert [g.external_id(x) for x in qa["a2"].answer_ids] == [EX + "milkmaid", EX + "pearl"]
    assert {k: v for k, v in b.build_stats().items() if k != "format"} == \
        {k: v for k, v in a.build_stats().items() if k != "format"}


def test_the_cache_is_reused_until_the_file_a_setting_or_the_mapping_changes(tmp_path, monkeypatch):
    import ark.data.rdf.source as rdf

    path = tmp_path / "art.ttl"
    shutil.copy(TTL, path)
    builds = []
    real = RdfSource.build
    monkeypatch.setattr(RdfSource, "build", lambda self: builds.append(self.classes) or real(self))
    first = source(path, tmp_path).graph()
    assert source(path, tmp_path).graph().fingerprint == first.fingerprint and builds == [False]
    source(path, tmp_path, classes=True).graph()                            # another setting
    path.write_text(path.read_text().replace('"Rijksmuseum"', '"Rijksmuseum Amsterdam"'))
    changed = source(path, tmp_path).graph()                                # the file changed
    assert changed.node_name(changed.node_index(EX + "rijksmuseum")) == "Rijksmuseum Amsterdam"
    monkeypatch.setattr(rdf, "MAPPING_VERSION", rdf.MAPPING_VERSION + 1)
    source(path, tmp_path).graph()                                          # this module's mapping changed
    assert builds == [False, True, False, False]


def _serialise(fmt: str, path: Path) -> Path:
    import rdflib

    if fmt in ("nquads", "trig"):                     # quads: the triples in two named graphs
        ds = rdflib.Dataset()
        g = rdflib.Graph().parse(TTL)
        half = sorted(g, key=str)
        for n, t in enumerate(half):
            ds.graph(rdflib.URIRef(f"urn:part:{n % 2}")).add(t)
        data = ds.serialize(format=fmt)
    else:
        data = rdflib.Graph().parse(TTL).serialize(format=fmt)
    if path.suffix == ".gz":
        path.write_bytes(gzip.compress(data.encode()))
    else:
        path.write_text(data)
    return path


@pytest.mark.parametrize("fmt,name", [("xml", "art.rdf"), ("xml", "art.owl"), ("json-ld", "art.jsonld"),
                                      ("n3", "art.n3"), ("nquads", "art.nq"), ("trig", "art.trig"),
                                      ("nt", "art.nt.gz"), ("turtle", "art.ttl.gz")])
def test_every_format_by_suffix_gives_the_same_graph(tmp_path, fmt, name):
    path = _serialise(fmt, tmp_path / name)
    s = source(path, tmp_path)
    assert s.format == fmt and s.name == "art"
    assert content(s.graph()) == content(source(TTL, tmp_path).graph())


def test_settings_choose_types_names_texts_and_languages(tmp_path):
    g = source(TTL, tmp_path, type_priority=["ex:Person"], name_properties=["skos:prefLabel", "rdfs:label"],
               text_properties=["ex:year", "rdfs:comment"], languages=["nl", "en"], names="prefixed").graph()
    r = g.node_index(EX + "rembrandt")
    assert g.node_type_names == ["Resource", "ex:City", "ex:Country", "ex:Movement", "ex:Museum", "ex:Painter",
                                 "ex:Painting", "ex:Person"]
    assert (g.node_name(r), g.node_type_name(r)) == ("Rembrandt Harmenszoon van Rijn", "ex:Person")
    assert g.node_text(r) == ("- name: Rembrandt Harmenszoon van Rijn\n- type: ex:Person\n- other types: ex:Painter\n"
                              "- rdfs:comment: Dutch Golden Age painter and printmaker, a master of light and shadow "
                              "in portraits.")                  # ex:born is not listed; the @en label is kept out
    m = g.node_index(EX + "milkmaid")
    assert g.node_text(m).splitlines()[2:] == ["- ex:year: 1658", "- rdfs:comment: A kitchen maid pouring milk, "
                                               "lit from a window."]
    assert g.relation_names[-2:] == ["ex:nationality", "owl:sameAs"]
    every = source(TTL, tmp_path, languages=None).graph()
    assert "- label: Rembrandt Harmenszoon van Rijn" in every.node_text(every.node_index(EX + "rembrandt"))
    cands = source(TTL, tmp_path, candidate_types="Painting").graph()
    assert sorted(cands.node_type_name(int(i)) for i in cands.candidate_ids) == ["Painting"] * 8


def test_classes_as_nodes_link_instances_and_restrictions(tmp_path):
    s = source(TTL, tmp_path, classes=True)
    g = s.graph()
    assert g.num_nodes == 31 + 8 and "Class" in g.node_type_names
    p = g.node_index(EX + "Painter")
    assert (g.node_name(p), g.node_type_name(p)) == ("Painter", "Class")
    assert edges_of(g, EX + "Painter") == {(EX + "Person", "subClassOf", True), (EX + "Painting", "creator", False),
                                           *((EX + x, "type", False) for x in ("rembrandt", "vermeer", "vangogh", "monet"))}
    # Painting subClassOf (creator some Painter) is the edge Painting -creator-> Painter, not text
    assert (EX + "Painter", "creator", True) in edges_of(g, EX + "Painting")
    assert g.node_text(g.node_index(EX + "Painting")) == "- name: Painting\n- type: Class\n- comment: A picture made with paint."
    assert {x for x in edges_of(g, EX + "rembrandt") if x[1] == "type"} == {(EX + "Painter", "type", True),
                                                                           (EX + "Person", "type", True)}
    assert s.build_stats()["class_nodes"] == 8 and s.build_stats()["blank_nodes_dropped"] == 0


# --- the agent's tools and whole runs ----------------------------------------------------------------
def test_tools_search_and_explore_the_rdf_graph(tmp_path):
    from ark.search.bm25 import BM25Index
    from ark.tools import NEIGHBORS, SEARCH, ToolConfig, ToolSet

    g = source(TTL, tmp_path).graph()
    tools = ToolSet(g, BM25Index.build(g.texts()))     # the IRIs are the ids the tools show and take
    night, rijks, vermeer = (g.node_index(EX + x) for x in ("nightwatch", "rijksmuseum", "vermeer"))
    found = tools.call(SEARCH, {"query": "militia company portrait light shadow"})
    assert found.node_ids[0] == night
    assert found.observation.splitlines()[1].startswith(f"[{EX}nightwatch] The Night Watch (Painting) score=")
    around = tools.call(NEIGHBORS, {"node_id": EX + "rijksmuseum"})
    assert around.observation.splitlines()[0] == f"explore_neighbors node_id={EX}rijksmuseum (Rijksmuseum, Museum)"
    assert f"[{EX}nightwatch] The Night Watch (Painting) | <- heldBy" in around.observation
    assert f"| -> locatedIn" in around.observation and "Amsterdam (City)" in around.observation
    works = tools.call(NEIGHBORS, {"node_id": EX + "vermeer", "relations": ["creator"], "query": "window"})
    assert works.node_ids == [g.node_index(EX + "milkmaid"), g.node_index(EX + "pearl")]
    bad = tools.call(NEIGHBORS, {"node_id": EX + "vermeer", "relations": ["painted"]})
    assert bad.error is not None and "creator" in bad.error
    assert tools.call(NEIGHBORS, {"node_id": rijks}).error == (
        f"node_id {rijks} is not the id of a node of this graph; use an id shown in brackets in an earlier result.")
    internal = ToolSet(g, tools.index, ToolConfig(user_ids=False))   # the switch: internal ids in and out
    assert internal.call(SEARCH, {"query": "militia company portrait"}).observation.splitlines()[1].startswith(
        f"[{night}] The Night Watch (Painting)")
    assert internal.call(NEIGHBORS, {"node_id": rijks}).observation.splitlines()[0] == \
        f"explore_neighbors node_id={rijks} (Rijksmuseum, Museum)"


def test_ark_build_search_and_neighbors_on_the_rdf_graph(tmp_path, capsys):
    """The ``ark`` command through conf/graph/rdf.yaml: the agent's observations, IRIs named and accepted."""
    from ark.cli.main import main

    graph = ["--graph", "rdf", "--set", f"path={TTL}", "--set", "name=art", "--root", str(tmp_path / "data")]
    assert main(["build", *graph]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert (stats["nodes"], stats["edges"], stats["queries_per_split"]) == (31, 40, {"test": 4, "val": 1})
    assert main(["search", "militia portrait light", *graph, "-k", "3"]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines()[1].startswith(f"[{EX}nightwatch] The Night Watch (Painting)")
    assert main(["neighbors", EX + "vermeer", *graph, "--relation", "creator"]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines()[0] == f'explore_neighbors node_id={EX}vermeer (Johannes Vermeer, Painter) relations=["creator"]'
    assert f"[{EX}milkmaid] The Milkmaid (Painting) | <- creator" in out
    # --no-user-ids: internal ids in the output and on the command line, the IRIs beside them on stderr
    assert main(["search", "militia portrait light", *graph, "-k", "3", "--no-user-ids"]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines()[1].startswith("[13] The Night Watch (Painting)") and f"[13] {EX}nightwatch" in err
    assert main(["neighbors", "28", *graph, "--relation", "creator", "--no-user-ids"]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines()[0] == 'explore_neighbors node_id=28 (Johannes Vermeer, Painter) relations=["creator"]'
    assert "[8] The Milkmaid (Painting) | <- creator" in out and f"[15] {EX}pearl" in err


def _run(tmp_path, *extra, path=TTL, policy=None):
    from ark.config.compose import compose
    from ark.config.evaluation import run
    from tests.helpers.scripted_server import ScriptedServer
    from tests.helpers.policies import search_explore_select

    with ScriptedServer(responder=policy or search_explore_select) as server:
        cfg = compose(["graph=rdf", f"graph.path={path}", "graph.name=art", "backbone=scripted",
                       f"backbone.base_url={server.base_url}", "budget=t5_n1", f"paths.data={tmp_path}/data",
                       f"paths.runs={tmp_path}/runs", f"paths.llm_cache={tmp_path}/llm.sqlite",
                       "progress=false", "n_boot=50", *extra])
        summary = run(cfg)
        calls = server.calls
    out = Path(cfg.out_dir)
    recs = {r["query_id"]: r for r in map(json.loads, (out / "predictions.jsonl").read_text().splitlines())}
    return summary, out, recs, calls


def test_bm25_run_on_the_rdf_graph(tmp_path):
    summary, out, recs, calls = _run(tmp_path, "retriever=bm25")
    assert out == tmp_path / "runs" / "default" / "art" / "bm25_test"
    assert summary["complete"] and summary["n_ok"] == 4 and calls == 0
    assert set(recs) == {"a1", "a2", "a3", "a4"}
    assert recs["a1"]["gold_external"] == [EX + "nightwatch"] and recs["a1"]["ranking_external"][0] == EX + "nightwatch"
    assert recs["a3"]["ranking_external"][0] == EX + "rijksmuseum"         # found by its folded address
    assert summary["metrics"]["hit@1"]["mean"] > 0


def test_ark_run_on_the_rdf_graph_searches_and_explores(tmp_path):
    summary, out, recs, calls = _run(tmp_path)
    assert out == tmp_path / "runs" / "default" / "art" / "ark-scripted-t5_n1-full_test"
    assert summary["complete"] and summary["n_ok"] == 4 and calls == 12      # 3 steps x 4 queries
    assert recs["a1"]["ranking_external"][0] == EX + "nightwatch"
    # a2 takes two hops: the search finds the painter, his neighbors are the paintings (creator edges)
    assert recs["a2"]["tool_counts"] == [{"search_graph": 1, "explore_neighbors": 1, "select": 1, "finish": 1}]
    assert recs["a2"]["ranking_external"][0] == EX + "vermeer"
    assert set(recs["a2"]["ranking_external"][1:3]) == set(recs["a2"]["gold_external"]) == {EX + "milkmaid", EX + "pearl"}
    (traj,) = json.loads((out / "trajectories" / "a2.json").read_text())
    seen = [m["content"] for m in traj["messages"] if m["role"] == "tool"]
    # the agent read and wrote the graph's own ids (IRIs); the records keep the internal ones beside them
    assert seen[1].startswith(f"explore_neighbors node_id={EX}vermeer (Johannes Vermeer, Painter)")
    assert f"[{EX}milkmaid] The Milkmaid (Painting)" in seen[1] and "<- creator" in seen[1]
    assert json.loads(traj["steps"][1]["tool_calls"][0]["arguments"])["node_id"] == EX + "vermeer"
    assert set(traj["steps"][1]["node_ids"][0]) >= set(recs["a2"]["ranking"][1:3])   # internal ids shown
    info = json.loads((out / "run.json").read_text())
    assert info["graph"] == "art" and info["identity"]["ablation.tools.user_ids"] is True


# --- bad input: one line, nothing written --------------------------------------------------------------
PREFIX = "@prefix ex: <http://example.org/> .\n@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .\n"
BAD = {
    "broken turtle": ("kg.ttl", PREFIX + 'ex:a a ex:T ; rdfs:label "a" .\nex:b a ex:T ; rdfs:label "b" \nex:c a ex:T .\n',
                      r"kg\.ttl: line 5: bad RDF syntax \(expected '\.' or '\}' or '\]' at end of statement\)$", {}),
    "broken n-triples": ("kg.nt", '<http://e/a> <http://e/p> <http://e/b> .\n# fine\n<http://e/b> <http://e/q> "x" \n',
                         r"kg\.nt: line 3: bad N-Triples statement '<http://e/b> <http://e/q> \"x\"'", {}),
    "broken rdf/xml": ("kg.rdf", '<?xml version="1.0"?>\n<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">\n<x\n',
                       r"kg\.rdf: line 3: bad RDF syntax \(unclosed token\)$", {}),
    "class holding a literal": ("kg.ttl", PREFIX + "ex:a a ex:T .\nex:T rdfs:label \"T\" ; ex:size 3 .\n",
                                r"kg\.ttl: http://example.org/T is used both as a class \(the type of 1 nodes\) and as "
                                r"an instance \(it holds ex:size '3'\); set classes: true to keep classes as nodes too$", {}),
    "class linked as an instance": ("kg.ttl", PREFIX + "ex:a a ex:T ; ex:likes ex:T .\nex:b a ex:T ; ex:likes ex:U .\nex:c a ex:U .\n",
                                    r"kg\.ttl: http://example.org/T is used both as a class \(the type of 2 nodes\) and as an "
                                    r"instance \(ex:a links to it by ex:likes\); 1 more IRIs like it; set classes: true", {}),
    "class typed as an instance": ("kg.ttl", PREFIX + "ex:rex a ex:Lion .\nex:Lion a ex:Species .\n",
                                   r"kg\.ttl: http://example.org/Lion is used both as a class \(the type of 1 nodes\) "
                                   r"and as an instance \(it is itself of type ex:Species\)", {}),
    "untyped node": ("kg.ttl", PREFIX + "ex:a a ex:T ; ex:p ex:b .\nex:c rdfs:label \"c\" .\n",
                     r"kg\.ttl: node http://example.org/b has no rdf:type \(2 nodes without one\); give each node a "
                     r"type or set default_type", {"default_type": None}),
    "empty file": ("kg.ttl", PREFIX, r"kg\.ttl: no triples \(an empty RDF graph\)$", {}),
    "only a schema": ("kg.ttl", PREFIX + "@prefix owl: <http://www.w3.org/2002/07/owl#> .\nex:T a owl:Class ; "
                      "rdfs:label \"T\" .\nex:p a owl:ObjectProperty .\n",
                      r"kg\.ttl: 3 triples but no nodes \(every subject is a class, a property or part of a vocabulary; "
                      r"set classes: true to keep classes as nodes\)$", {}),
    "unknown prefix in a setting": ("kg.ttl", PREFIX + "ex:a a ex:T .\n", r"kg\.ttl settings: unknown prefix in "
                                    r"name_properties 'foo:name'; write a full IRI or use one of the prefixes ",
                                    {"name_properties": ["foo:name"]}),
}


@pytest.mark.parametrize("kind", list(BAD))
def test_bad_input_is_one_line_and_writes_nothing(tmp_path, kind):
    name, text, pattern, settings = BAD[kind]
    path = tmp_path / name
    path.write_text(text)
    s = source(path, tmp_path, **settings)
    with pytest.raises(RdfError, match=pattern) as e:
        s.graph()
    assert "\n" not in str(e.value) and str(e.value).startswith(str(path))
    assert not (tmp_path / "data").exists()                     # no cache, not even a temporary one


def test_bad_settings_and_paths_fail_at_once(tmp_path):
    with pytest.raises(RdfError, match=r"nowhere\.ttl: no such RDF file"):
        RdfSource(tmp_path / "nowhere.ttl")
    (tmp_path / "kg.txt").write_text("x")
    with pytest.raises(RdfError, match=r"kg\.txt: unknown RDF file suffix '\.txt'; valid suffixes: \.nt, .*\.ttl"):
        RdfSource(tmp_path / "kg.txt")
    with pytest.raises(RdfError, match=r"unknown RDF format 'rdfxml'; valid formats: json-ld, n3, nquads, nt, trig, turtle, xml"):
        RdfSource(TTL, format="rdfxml")
    with pytest.raises(RdfError, match=r"unknown names 'short'; valid names: local, prefixed"):
        RdfSource(TTL, names="short")
    with pytest.raises(RdfError, match=r"classes must be true or false, got 'maybe'"):
        RdfSource(TTL, classes="maybe")
    with pytest.raises(RdfError, match=r"ignore must be a list of names, got \[\{'sh': None\}\] \(in YAML quote"):
        RdfSource(TTL, ignore=[{"sh": None}])
    with pytest.raises(RdfError, match=r"candidate type 'Book' is not a node type of .*art\.ttl; valid node types: City, "):
        RdfSource(TTL, root=tmp_path / "data", candidate_types=["Book"]).graph()


def test_bad_queries_are_named_by_the_tables_reader(tmp_path):
    shutil.copy(TTL, tmp_path / "art.ttl")
    rows = (KG / "art.queries.jsonl").read_text().replace('"http://example.org/art/pearl"', '"ex:pearl"')
    (tmp_path / "art.queries.jsonl").write_text(rows)
    with pytest.raises(ValueError, match=r"art\.queries\.jsonl: row 2, column 'answers': answer 'ex:pearl' is not a node id"):
        source(tmp_path / "art.ttl", tmp_path).queries()


# --- export ---------------------------------------------------------------------------------------
def test_export_round_trip_keeps_the_graph_and_queries(tmp_path):
    for classes in (False, True):
        s = source(TTL, tmp_path, classes=classes)
        out = export(s.graph(), tmp_path / f"out{classes}" / "art.nt", s.queries())
        assert sorted(p.name for p in out.parent.iterdir()) == ["art.nt", "art.queries.jsonl"]
        back = source(out, tmp_path)
        assert content(back.graph()) == content(s.graph())
        assert [(q.id, q.answer_ids) for q in back.queries()] == [(q.id, q.answer_ids) for q in s.queries()]
        assert back.queries().split_names() == ["test", "val"]
    with pytest.raises(RdfError, match=r"art\.nt exists; choose another file or pass force"):
        export(s.graph(), out)
    with pytest.raises(RdfError, match=r"export writes N-Triples; name the file \.nt or \.nt\.gz"):
        export(s.graph(), tmp_path / "art.ttl")


def test_tables_graph_exported_as_rdf_reads_back(tmp_path):
    t = TablesSource(REPO / "tests" / "data" / "tables_kg", root=tmp_path / "data")
    g = t.graph()
    out = export(g, tmp_path / "kg.nt.gz", t.queries())
    back = source(out, tmp_path)
    h = back.graph()
    assert (h.num_nodes, h.num_edges) == (g.num_nodes, g.num_edges)
    assert sorted(h.node_type_names) == sorted(g.node_type_names) and sorted(h.relation_names) == sorted(g.relation_names)
    # external ids that are not IRIs are written under urn:ark:node/; documents and edges are kept
    for i in range(g.num_nodes):
        j = h.node_index(f"urn:ark:node/{g.external_id(i)}")
        assert (h.node_name(j), h.node_text(j), h.node_type_name(j)) == (g.node_name(i), g.node_text(i), g.node_type_name(i))
    a2 = h.node_index("urn:ark:node/A2")
    assert ("urn:ark:node/P11", "writes", True) in edges_of(h, "urn:ark:node/A2") and h.degree(a2) == g.degree(g.node_index("A2"))
    assert [h.external_id(a) for a in back.queries()["q7"].answer_ids] == ["urn:ark:node/A9", "urn:ark:node/A2"]


# --- a graph path, resolved by its kind ------------------------------------------------------------------
def test_source_for_path_picks_tables_or_rdf(tmp_path):
    from ark.data.locate import source_for_path

    assert type(source_for_path(REPO / "tests" / "data" / "tables_kg", root=tmp_path)) is TablesSource
    s = source_for_path(TTL, root=tmp_path, classes="true", default_type="null")   # as a command line gives them
    assert type(s) is RdfSource and s.classes is True and s.default_type is None and s.name == "art"
    assert source_for_path(TTL, root=tmp_path, classes="false").classes is False
    gz = _serialise("nt", tmp_path / "my.kg.nt.gz")
    assert source_for_path(gz, root=tmp_path).name == "my.kg"
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(ValueError, match=r"notes\.txt: unknown file suffix '\.txt'; a graph path is a folder of "
                                         r"tables \(nodes, edges, queries\) or an RDF file \(\.nt, "):
        source_for_path(tmp_path / "notes.txt")
    with pytest.raises(ValueError, match=r"gone\.ttl: no such file or folder"):
        source_for_path(tmp_path / "gone.ttl")


# --- a real public ontology: Brick, as the brickschema package ships it ---------------------------------
@pytest.mark.commands   # a real ontology read whole (seconds)
def test_brick_ontology_from_its_pypi_package(tmp_path):
    """Brick 1.5 (building systems; BSD-3-Clause), the Turtle file inside brickschema 0.8.0 (no import of the
    package, no download): its classes, tags and quantities as nodes, SHACL shapes skipped."""
    brick = Path(importlib.metadata.distribution("brickschema").locate_file("brickschema/ontologies/1.5/Brick.ttl"))
    with pytest.raises(RdfError, match=r"Brick\.ttl: https://brickschema\.org/schema/Brick#\S+ is used both as a class"):
        source(brick, tmp_path).graph()                 # classes with tags and quantities: not a plain graph
    s = source(brick, tmp_path, classes=True)
    g = s.graph()
    stats = s.build_stats()
    assert stats["triples"] == 62083 and g.num_nodes == stats["nodes"] == 2833 and g.num_edges == 18182
    # the instances by their rdf:type (536 brick:Tag, 96 brick:Substance, 45 brick:Quantity in the file), the
    # owl:/rdfs:Class classes, and the QUDT units and quantity kinds that Brick links to without typing them
    assert g.stats()["nodes_per_type"] == {"Class": 1771, "Component": 45, "Quantity": 45, "Relationship": 2,
                                           "Resource": 338, "Substance": 96, "Tag": 536}
    assert stats["untyped_nodes"] == 338 and stats["class_nodes"] == stats["classes"] == 1817
    assert stats["statements_ignored"] > 20000                         # the SHACL shapes and rules
    b = "https://brickschema.org/schema/Brick#"
    sensor = g.node_index(b + "Air_Temperature_Sensor")
    assert g.node_text(sensor) == "- name: Air Temperature Sensor\n- type: Class\n- definition: Measures the temperature of air"
    assert {(b + "Temperature_Sensor", "subClassOf", True), (b + "Air", "hasSubstance", True)} <= edges_of(g, b + "Air_Temperature_Sensor")
    from ark.search.bm25 import BM25Index
    from ark.tools import SEARCH, ToolSet

    hit = ToolSet(g, BM25Index.build(g.texts())).call(SEARCH, {"query": "sensor measuring the temperature of air"})
    assert sensor in hit.node_ids
