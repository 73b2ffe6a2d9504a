"""The tables format: the hand-made graph under tests/data/tables_kg, the export round trip, one-line
errors naming file, row and column, the cache, and a whole run through ark.config.evaluation (as experiments/run.py runs it)."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ark.data.sources import DemoSource
from ark.data.tables.format import TablesError
from ark.data.tables.source import TablesSource
from ark.data.tables.write import export

REPO = Path(__file__).resolve().parents[1]
KG = REPO / "tests" / "data" / "tables_kg"
from tests.helpers.paths import DEMO_ROOT  # noqa: E402


def source(folder, tmp_path, **kw):
    return TablesSource(folder, root=tmp_path / "data", **kw)


def test_hand_made_graph_loads_with_its_ids_types_and_documents(kg, tmp_path):
    s = source(kg, tmp_path)
    g = s.graph()
    assert s.name == "tables_kg" and g.name == "tables_kg"
    assert (g.num_nodes, g.num_edges) == (37, 63)
    assert g.node_type_names == ["paper", "author", "venue", "topic", "institution"]
    assert g.relation_names == ["writes", "published_in", "has_topic", "cites", "affiliated_with"]
    p1, a2 = g.node_index("P1"), g.node_index("A2")
    assert (p1, g.external_id(p1), g.external_id(a2)) == (0, "P1", "A2")
    # documented layout: name, type, text, then the extra columns in file order, null ones skipped
    assert g.node_text(p1) == ("- name: Sparse Retrieval Revisited\n- type: paper\nWe revisit BM25 sparse retrieval "
                               "for question answering and show that tuned term weighting matches dense retrievers "
                               "on entity-centric questions.\n- year: 2021")
    assert g.node_text(a2).endswith("question answering.\n- country: Nigeria")
    # A2 wrote P2, P6, P11 and is affiliated with I2: both directions, with relation and direction
    e = g.neighbors(a2)
    got = {(g.external_id(int(n)), g.relation_names[r], bool(o)) for n, r, o in zip(e.nodes, e.relations, e.outgoing)}
    assert got == {("P2", "writes", True), ("P6", "writes", True), ("P11", "writes", True),
                   ("I2", "affiliated_with", True)}
    q = s.queries()
    assert q.split_names() == ["test", "train", "val"]
    assert [x.id for x in q.split("test")] == ["q1", "q2", "q3", "q4", "q8"]      # q8: "val,test"
    assert [x.id for x in q.split("val")] == ["q7", "q8"]
    assert [g.external_id(a) for a in q["q7"].answer_ids] == ["A9", "A2"]


def test_candidate_types_and_template(kg, tmp_path):
    s = source(kg, tmp_path, candidate_types=["paper"], template="{name} ({year}): {text}")
    g = s.graph()
    assert sorted(g.external_id(int(i)) for i in g.candidate_ids) == sorted(f"P{i}" for i in range(1, 13))
    assert g.node_text(g.node_index("P12")).startswith("Query Expansion with Pseudo Relevance Feedback (2016): ")
    with pytest.raises(TablesError, match=r"candidate type 'book' is not a node type of .*nodes\.csv; "
                                          r"valid node types: paper, author, venue, topic, institution"):
        source(kg, tmp_path, name="other", candidate_types=["book"]).graph()


def test_integer_ids_in_parquet_are_kept_as_integers(tmp_path):
    folder = tmp_path / "ints"
    folder.mkdir()
    pd.DataFrame({"id": [10, 20, 30], "type": ["a", "b", "a"], "name": ["x", "y", "z"],
                  "text": ["alpha", "beta", "gamma"]}).to_parquet(folder / "nodes.parquet")
    pd.DataFrame({"src": [10, 20], "dst": [20, 30], "relation": ["r", "s"]}).to_parquet(folder / "edges.parquet")
    pd.DataFrame({"id": [1], "query": ["beta"], "answers": [[20, 30]], "split": ["test"]}).to_parquet(
        folder / "queries.parquet")
    s = source(folder, tmp_path)
    g = s.graph()
    assert [g.external_id(i) for i in range(3)] == [10, 20, 30] and g.node_index(30) == 2
    assert s.queries()[1].answer_ids == (1, 2)
    assert set(g.neighbors(1).nodes.tolist()) == {0, 2}


# --- round trip ---------------------------------------------------------------------------------
def _same_graph(a, b):
    assert (a.num_nodes, a.num_edges) == (b.num_nodes, b.num_edges)
    assert a.node_type_names == b.node_type_names and a.relation_names == b.relation_names
    assert np.array_equal(np.asarray(a.node_types), np.asarray(b.node_types))
    assert np.array_equal(np.asarray(a.candidate_ids), np.asarray(b.candidate_ids))
    assert list(a.texts()) == list(b.texts()) and a.names() == b.names()
    for v in range(0, a.num_nodes, max(1, a.num_nodes // 500)):
        ea, eb = a.neighbors(v), b.neighbors(v)
        assert np.array_equal(ea.nodes, eb.nodes) and np.array_equal(ea.relations, eb.relations)
        assert np.array_equal(ea.outgoing, eb.outgoing)


def _same_queries(a, b):
    assert sorted(map(str, a.ids())) == sorted(map(str, b.ids()))
    for q in a:
        assert (b[q.id].text, b[q.id].answer_ids) == (q.text, q.answer_ids)
    for s in a.split_names():
        if s != "human_generated_eval":
            assert {q.id for q in a.split(s)} == {q.id for q in b.split(s)}


def test_demo_round_trip_through_tables(tmp_path):
    demo = DemoSource(DEMO_ROOT)
    out = export(demo.graph(), tmp_path / "demo_tables", demo.queries())
    assert sorted(p.name for p in out.iterdir()) == ["edges.parquet", "graph.json", "nodes.parquet",
                                                       "queries.parquet"]
    back = TablesSource(out, root=tmp_path / "data")
    assert back.name == "demo"
    _same_graph(demo.graph(), back.graph())
    _same_queries(demo.queries(), back.queries())


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_tables_round_trip_in_every_format(kg, tmp_path, fmt):
    first = source(kg, tmp_path, candidate_types=["paper", "author"])
    out = export(first.graph(), tmp_path / f"out_{fmt}", first.queries(), fmt=fmt)
    again = TablesSource(out, root=tmp_path / "data2")
    _same_graph(first.graph(), again.graph())
    _same_queries(first.queries(), again.queries())
    assert [again.graph().external_id(i) for i in range(5)] == ["P1", "P2", "P3", "P4", "P5"]
    assert json.loads((out / "graph.json").read_text())["candidate_types"] == ["paper", "author"]


def test_export_refuses_a_non_empty_folder(kg, tmp_path):
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "x").write_text("keep")
    with pytest.raises(ValueError, match="exists and is not empty"):
        export(source(kg, tmp_path).graph(), tmp_path / "busy")
    assert (tmp_path / "busy" / "x").read_text() == "keep"


# --- errors: one line with file, row and column; nothing left in the cache ---------------------------
def _nodes(folder):
    return pd.read_csv(folder / "nodes.csv", dtype={"id": str})


def _edges(folder):
    return pd.read_json(folder / "edges.jsonl", lines=True)


def _write_edges(folder, df):
    df.to_json(folder / "edges.jsonl", orient="records", lines=True)


def _set_node(folder, row, column, value):
    df = _nodes(folder)
    df.loc[row, column] = value
    df.to_csv(folder / "nodes.csv", index=False)


def _break(kind, folder):
    if kind == "missing column":
        _nodes(folder).drop(columns=["text"]).to_csv(folder / "nodes.csv", index=False)
        return r"nodes\.csv: missing column 'text'; columns present: id, type, name, year, country"
    if kind == "duplicate id":
        _set_node(folder, 5, "id", "P2")
        return r"nodes\.csv: row 6, column 'id': duplicate node id 'P2' \(first at row 2\)"
    if kind == "unknown edge endpoint":
        df = _edges(folder)
        df.loc[3, "dst"] = "P99"
        _write_edges(folder, df)
        return r"edges\.jsonl: row 4, column 'dst': edge endpoint 'P99' is not a node id \(1 such row\)"
    if kind == "mixed ids in one column":
        df = _edges(folder).astype(object)
        df.loc[2, "src"] = 7
        _write_edges(folder, df)
        return r"edges\.jsonl: row 3, column 'src': mixed id types: 7 is a integer, row 1 is a string"
    if kind == "mixed ids across files":
        df = _nodes(folder)
        df["id"] = range(len(df))
        df.to_csv(folder / "nodes.csv", index=False)
        return r"edges\.jsonl: row 1, column 'src': mixed id types: src holds str ids \(e\.g\. 'A1'\) but nodes\.csv has int ids"
    if kind == "unreadable file":
        (folder / "edges.jsonl").unlink()
        (folder / "edges.parquet").write_bytes(b"PAR1 this is not parquet")
        return r"edges\.parquet: unreadable parquet file \("
    if kind == "answer not a node":
        lines = (folder / "queries.jsonl").read_text().splitlines()
        lines[1] = lines[1].replace('"P6"', '"P66"')
        (folder / "queries.jsonl").write_text("\n".join(lines) + "\n")
        return r"queries\.jsonl: row 2, column 'answers': answer 'P66' is not a node id"
    raise AssertionError(kind)


KINDS = ["missing column", "duplicate id", "unknown edge endpoint", "mixed ids in one column",
         "mixed ids across files", "unreadable file", "answer not a node"]


@pytest.mark.parametrize("kind", KINDS)
def test_bad_input_is_one_line_naming_file_row_and_column(kg, tmp_path, kind):
    pattern = _break(kind, kg)
    s = source(kg, tmp_path)
    with pytest.raises(TablesError) as err:
        s.graph()
        s.queries()
    msg = str(err.value)
    assert "\n" not in msg and re.search(pattern, msg), msg
    if kind != "answer not a node":          # the graph itself was fine in that case
        assert not (tmp_path / "data" / "cache").exists() or not any((tmp_path / "data" / "cache").iterdir())


def _parquet_edges(folder, column, values):
    """edges.jsonl rewritten as edges.parquet (plain string ids, as pyarrow writes them) with ``values``
    placed in ``column`` from row 0 on."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    df = _edges(folder)
    for i, v in enumerate(values):
        df.loc[i, column] = v
    (folder / "edges.jsonl").unlink()
    pq.write_table(pa.Table.from_pandas(df, preserve_index=False), folder / "edges.parquet", row_group_size=10)


@pytest.mark.parametrize("values, pattern", [
    ([None], r"edges\.parquet: row 1, column 'src': missing id"),
    (["A1", "P99", "  "], r"edges\.parquet: row 3, column 'src': empty id"),            # empty beats unknown
    (["A1", "P99", "P98"], r"edges\.parquet: row 2, column 'src': edge endpoint 'P99' is not a node id \(2 such rows\)"),
])
def test_parquet_edge_endpoints_are_checked_as_before(kg, tmp_path, values, pattern):
    """String endpoint ids read from Parquet (several row groups) go through the node ids' hash table;
    a bad one is the same one line as from any other file."""
    _parquet_edges(kg, "src", values)
    with pytest.raises(TablesError, match=pattern) as err:
        source(kg, tmp_path).graph()
    assert "\n" not in str(err.value)


def test_parquet_edges_give_the_same_graph_as_jsonl(kg, tmp_path):
    want = source(kg, tmp_path).graph(rebuild=True)
    _parquet_edges(kg, "src", [])
    got = source(kg, tmp_path).graph(rebuild=True)
    assert (got.relation_names, got.num_edges, list(got.texts())) == (want.relation_names, want.num_edges, list(want.texts()))
    for v in range(want.num_nodes):
        a, b = want.neighbors(v), got.neighbors(v)
        assert (a.nodes.tolist(), a.relations.tolist(), a.outgoing.tolist()) == \
            (b.nodes.tolist(), b.relations.tolist(), b.outgoing.tolist())


def test_bad_input_leaves_the_previous_cache_intact(kg, tmp_path):
    good = source(kg, tmp_path).graph()
    _break("duplicate id", kg)
    with pytest.raises(TablesError):
        source(kg, tmp_path).graph()
    cache = tmp_path / "data" / "cache"
    name = source(kg, tmp_path).cache_dir.name
    assert sorted(p.name for p in cache.iterdir()) == [name]          # no half-written folder beside it
    from ark.data.graph import KnowledgeGraph

    assert KnowledgeGraph.load(cache / name).fingerprint == good.fingerprint


def test_a_changed_input_file_rebuilds_the_cache(kg, tmp_path, monkeypatch):
    builds = []
    real = TablesSource.build
    monkeypatch.setattr(TablesSource, "build", lambda self: builds.append(1) or real(self))
    source(kg, tmp_path).graph()
    source(kg, tmp_path).graph()
    assert len(builds) == 1
    _set_node(kg, 0, "text", "A completely new abstract about lexical search.")
    g = source(kg, tmp_path).graph()
    assert len(builds) == 2 and "completely new abstract" in g.node_text(0)
    source(kg, tmp_path, candidate_types=["paper"]).graph()      # other settings: another graph
    assert len(builds) == 3


def test_two_folders_under_the_default_name_never_share_a_cache(kg, tmp_path, monkeypatch):
    """Two folders whose graph.json give one name (a copy): each folder still gets its own graph, BM25
    index and resolved queries, and neither rebuilds the other's."""
    from hydra.utils import instantiate

    from ark.config.compose import compose
    from ark.config.retrievers import build_bm25

    other = tmp_path / "other"
    shutil.copytree(kg, other)
    _set_node(other, 0, "text", "Lexical matching of rare words beats embeddings on tail entities.")
    builds = []
    real = TablesSource.build
    monkeypatch.setattr(TablesSource, "build", lambda self: builds.append(self.folder) or real(self))

    def job(folder):
        cfg = compose(["graph=tables", f"graph.path={folder}", f"paths.data={tmp_path / 'data'}", "retriever=bm25"])
        assert cfg.graph.name == "tables_kg"          # graph.json's name, in both
        s = instantiate(cfg.graph)
        g = s.graph()
        ranking = instantiate(cfg.retriever.build)(graph=g).retrieve("lexical matching rare words tail entities")
        return s, g, ranking

    (s1, g1, r1), (s2, g2, r2) = job(kg), job(other)
    assert s1.cache_dir != s2.cache_dir and s1.cache_dir.parent == s2.cache_dir.parent
    assert s1.cache_dir.name.startswith("tables_kg-") and s2.cache_dir.name.startswith("tables_kg-")
    assert "Lexical matching" in g2.node_text(0) and "Lexical matching" not in g1.node_text(0)
    assert r2[0] == 0 and r1[0] != 0                  # each BM25 index is its own graph's
    assert (s1.cache_dir / "bm25_unstemmed").is_dir() and (s2.cache_dir / "bm25_unstemmed").is_dir()
    assert len(builds) == 2
    (t1, h1, q1), (t2, h2, q2) = job(kg), job(other)   # again, in either order: nothing is rebuilt
    assert len(builds) == 2 and (h1.fingerprint, h2.fingerprint) == (g1.fingerprint, g2.fingerprint)
    assert (q1, q2) == (r1, r2)


def test_resolved_queries_are_cached_with_the_graph(kg, tmp_path, monkeypatch):
    first = source(kg, tmp_path)
    want = first.queries()
    assert (first.cache_dir / "queries.json").exists()
    resolved = []
    real = TablesSource._resolve_queries
    monkeypatch.setattr(TablesSource, "_resolve_queries", lambda self, g: resolved.append(1) or real(self, g))
    again = source(kg, tmp_path).queries()               # a new job: read from the cache
    assert resolved == []
    _same_queries(want, again)
    assert [q.id for q in again.split("test")] == [q.id for q in want.split("test")]
    assert again["q7"].answer_ids == want["q7"].answer_ids
    lines = [json.loads(x) for x in (kg / "queries.jsonl").read_text().splitlines()]
    next(q for q in lines if q["id"] == "q7")["answers"] = ["A3"]
    (kg / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in lines))
    s = source(kg, tmp_path)                              # a changed input: graph and queries anew
    changed = s.queries()
    assert resolved == [1]
    assert [s.graph().external_id(a) for a in changed["q7"].answer_ids] == ["A3"]


def test_missing_tables_and_settings_are_named(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(TablesError, match=r"empty: no nodes table; expected one of nodes\.parquet, "):
        TablesSource(tmp_path / "empty")
    with pytest.raises(TablesError, match="no such folder"):
        TablesSource(tmp_path / "nowhere")


# --- torch-geometric ------------------------------------------------------------------------------
def test_to_pyg_has_typed_node_and_edge_stores(kg, tmp_path):
    g = source(kg, tmp_path).graph()
    data = g.to_pyg()
    assert set(data.node_types) == set(g.node_type_names)
    assert data["paper"].num_nodes == 12 and data["author"].num_nodes == 10
    assert ("author", "writes", "paper") in data.edge_types and ("paper", "cites", "paper") in data.edge_types
    assert sum(data[et].edge_index.shape[1] for et in data.edge_types) == g.num_edges
    ei = data["author", "writes", "paper"].edge_index
    authors, papers = data["author"].node_id, data["paper"].node_id
    pairs = {(g.external_id(int(authors[a])), g.external_id(int(papers[p]))) for a, p in ei.t().tolist()}
    assert ("A2", "P11") in pairs and ("A9", "P11") in pairs and len(pairs) == 17


# --- a whole run on the tables graph -------------------------------------------------------------
def test_run_on_the_tables_graph_end_to_end(tmp_path):
    from ark.config.compose import compose
    from ark.config.evaluation import run
    from tests.helpers.scripted_server import ScriptedServer
    from tests.helpers.policies import search_select_finish

    with ScriptedServer(responder=search_select_finish) as server:
        cfg = compose(["graph=tables", f"graph.path={KG}", "graph.name=tables_kg", "backbone=scripted",
                       f"backbone.base_url={server.base_url}", "budget=t5_n1", f"paths.data={tmp_path}/data",
                       f"paths.runs={tmp_path}/runs", f"paths.llm_cache={tmp_path}/llm.sqlite",
                       "progress=false", "n_boot=50"])
        summary = run(cfg)
    out = Path(cfg.out_dir)
    assert out == tmp_path / "runs" / "default" / "tables_kg" / "ark-scripted-t5_n1-full_test"
    assert summary["complete"] and summary["n_ok"] == 5 and server.calls == 10
    recs = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert [r["query_id"] for r in sorted(recs, key=lambda r: r["query_id"])] == ["q1", "q2", "q3", "q4", "q8"]
    q1 = next(r for r in recs if r["query_id"] == "q1")
    assert q1["gold_external"] == ["P1"] and q1["ranking_external"][0] == "P1"    # BM25 finds it first
    assert summary["metrics"]["hit@1"]["mean"] > 0
    assert (out / "trajectories" / "q1.json").exists()
    from ark.report.viewer import build_view, render_html

    view = {q["query_id"]: q for q in build_view(out)["queries"]}       # the viewer names the external ids
    assert set(view) == {"q1", "q2", "q3", "q4", "q8"}
    assert view["q1"]["external"]["0"] == "P1"
    assert {view["q2"]["external"][str(g)] for g in view["q2"]["gold"]} == {"P2", "P6", "P11"}
    assert "EXT[i] ? i + ' ' + EXT[i]" in render_html(build_view(out))


def test_parquet_edges_are_looked_up_once_per_distinct_id(kg, tmp_path):
    """Parquet string ids are read dictionary-encoded; the result and the errors are the same."""
    edges = _edges(kg)
    (kg / "edges.jsonl").unlink()
    edges.to_parquet(kg / "edges.parquet")
    g = source(kg, tmp_path).graph()
    a2 = g.node_index("A2")
    assert sorted(g.external_id(int(n)) for n in g.neighbors(a2).nodes) == ["I2", "P11", "P2", "P6"]
    assert sorted(g.relation_names) == sorted(edges["relation"].unique())
    edges.loc[[5, 9], "src"] = "A99"
    edges.to_parquet(kg / "edges.parquet")
    with pytest.raises(TablesError, match=r"edges\.parquet: row 6, column 'src': edge endpoint 'A99' is not a "
                                          r"node id \(2 such rows\)"):
        source(kg, tmp_path, name="other").graph()
    edges.loc[[5, 9], "src"] = "A1"
    edges.loc[7, "relation"] = " "
    edges.to_parquet(kg / "edges.parquet")
    with pytest.raises(TablesError, match=r"edges\.parquet: row 8, column 'relation': empty relation"):
        source(kg, tmp_path, name="other2").graph()


def test_parquet_nodes_with_dictionary_encoded_columns_give_the_same_documents(kg, tmp_path):
    """A Parquet file written from categorical columns reads back dictionary-encoded: the documents,
    types and names are those of the plain file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    plain = source(kg, tmp_path).graph()
    nodes = pd.read_csv(kg / "nodes.csv", dtype={"id": str})
    (kg / "nodes.csv").unlink()
    table = pa.Table.from_pandas(nodes, preserve_index=False)
    for column in ("type", "name"):
        table = table.set_column(table.column_names.index(column), column, pc_encode(table.column(column)))
    pq.write_table(table, kg / "nodes.parquet")
    assert pa.types.is_dictionary(pq.read_table(kg / "nodes.parquet").schema.field("type").type)
    g = source(kg, tmp_path, name="dict").graph()
    assert g.node_type_names == plain.node_type_names
    assert [g.node_text(i) for i in range(g.num_nodes)] == [plain.node_text(i) for i in range(plain.num_nodes)]
    assert g.names() == plain.names()


def pc_encode(column):
    import pyarrow.compute as pc

    return pc.dictionary_encode(column)
