"""Tables as people write them: nodes with a name and no text, list cells as pandas' ``to_csv`` writes
them, mixed JSONL cells, a 10 MB field, a header-only edges file, ids such as "007"; and, for input that
is wrong, one line naming the file, the row, the column and the value as it was written."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from ark.data.tables.format import TablesError
from ark.data.tables.source import TablesSource

REPO = Path(__file__).resolve().parents[1]
KG = REPO / "tests" / "data" / "tables_kg"


def source(folder, tmp_path, **kw):
    return TablesSource(folder, root=tmp_path / "data", **kw)


def queries_lines(folder):
    return [json.loads(x) for x in (folder / "queries.jsonl").read_text().splitlines()]


def write_queries(folder, lines):
    (folder / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in lines))


def one_line_error(call) -> str:
    with pytest.raises(TablesError) as err:
        call()
    msg = str(err.value)
    assert "\n" not in msg and "np." not in msg, msg
    return msg


# --- accepted -------------------------------------------------------------------------------------
def test_a_node_without_text_gets_a_document_of_its_name_and_type(kg, tmp_path):
    nodes = pd.read_csv(kg / "nodes.csv", dtype={"id": str})
    nodes["text"] = nodes["text"].astype(object)
    nodes.loc[12, "text"] = ""                     # A1, in CSV: an empty field
    nodes.loc[13, "text"] = "   "                  # A2: only blanks
    nodes.to_csv(kg / "nodes.csv", index=False)
    g = source(kg, tmp_path).graph()
    assert g.node_text(g.node_index("A1")) == "- name: Maria Keller\n- type: author\n- country: Germany"
    assert g.node_text(g.node_index("A2")) == "- name: Tomas Okafor\n- type: author\n- country: Nigeria"
    nodes.loc[12, "text"] = None                   # JSONL has real nulls
    (kg / "nodes.csv").unlink()
    nodes.to_json(kg / "nodes.jsonl", orient="records", lines=True)
    g = source(kg, tmp_path).graph()
    assert g.node_text(g.node_index("A1")) == "- name: Maria Keller\n- type: author\n- country: Germany"
    assert g.node_text(g.node_index("P1")).startswith("- name: Sparse Retrieval Revisited\n- type: paper\nWe revisit")


@pytest.mark.parametrize("writer", ["pandas to_csv (Python lists)", "JSON lists"])
def test_list_cells_in_csv_as_pandas_or_json_write_them(kg, tmp_path, writer):
    df = pd.DataFrame(queries_lines(kg))
    df["split"] = [["val", "test"] if q == "q8" else [s] for q, s in zip(df["id"], df["split"])]
    if writer.startswith("JSON"):
        df["answers"] = [json.dumps(a) for a in df["answers"]]
        df["split"] = [json.dumps(a) for a in df["split"]]
    (kg / "queries.jsonl").unlink()
    df.to_csv(kg / "queries.csv", index=False)
    if writer.startswith("pandas"):
        assert "\"['P2', 'P6', 'P11']\"" in (kg / "queries.csv").read_text()   # what pandas really wrote
    s = source(kg, tmp_path)
    g, q = s.graph(), s.queries()
    assert [g.external_id(a) for a in q["q2"].answer_ids] == ["P2", "P6", "P11"]
    assert [x.id for x in q.split("val")] == ["q7", "q8"] and "q8" in {x.id for x in q.split("test")}


def test_jsonl_answers_mixing_a_string_and_lists_are_read_as_written(kg, tmp_path):
    lines = queries_lines(kg)
    lines[3]["answers"] = "P9"                     # one id as a string, the other rows lists
    write_queries(kg, lines)
    s = source(kg, tmp_path)
    g, q = s.graph(), s.queries()
    assert [g.external_id(a) for a in q["q4"].answer_ids] == ["P9"]
    assert [g.external_id(a) for a in q["q2"].answer_ids] == ["P2", "P6", "P11"]   # row 2 is not blamed


def test_a_10_mb_text_field_in_csv(kg, tmp_path):
    nodes = pd.read_csv(kg / "nodes.csv", dtype={"id": str})
    long = " ".join(["aardvark"] * 1_200_000)       # about 10.8 MB in one field
    nodes.loc[3, "text"] = long
    nodes.to_csv(kg / "nodes.csv", index=False)
    g = source(kg, tmp_path).graph()
    assert g.node_text(3).endswith(long + "\n- year: 2019") and g.num_nodes == 37


def test_a_header_only_edges_file_with_integer_ids(tmp_path):
    folder = tmp_path / "ints"
    folder.mkdir()
    (folder / "nodes.csv").write_text("id,type,name,text\n1,a,x,alpha\n2,b,y,beta\n")
    (folder / "edges.csv").write_text("src,dst,relation\n")
    g = source(folder, tmp_path).graph()
    assert (g.num_nodes, g.num_edges, g.external_id(1)) == (2, 0, 2)


def test_csv_ids_007_and_7_are_two_nodes(tmp_path):
    folder = tmp_path / "zeros"
    folder.mkdir()
    (folder / "nodes.csv").write_text("id,type,name,text\n007,agent,Bond,spy\n7,number,Seven,a number\n8,number,Eight,"
                                      "another number\n")
    (folder / "edges.csv").write_text("src,dst,relation\n007,7,knows\n7,8,next\n")
    (folder / "queries.csv").write_text('id,query,answers\n1,who is the spy,"[""007""]"\n2,which number,[7]\n')
    s = source(folder, tmp_path)
    g, q = s.graph(), s.queries()
    assert [g.external_id(i) for i in range(3)] == ["007", "7", "8"]
    n = g.neighbors(g.node_index("7"))
    assert sorted(g.external_id(int(x)) for x in n.nodes) == ["007", "8"]
    assert [g.external_id(a) for a in q[1].answer_ids] == ["007"] and [g.external_id(a) for a in q[2].answer_ids] == ["7"]


# --- refused, in one line naming file, row, column and value ------------------------------------------
def test_a_number_as_split_in_jsonl(kg, tmp_path):
    lines = queries_lines(kg)
    lines[4]["split"] = 1
    write_queries(kg, lines)
    s = source(kg, tmp_path)
    msg = one_line_error(lambda: s.queries())
    assert re.search(r"queries\.jsonl: row 5, column 'split': split 1 is a integer; write a split name", msg), msg
    assert one_line_error(lambda: s.splits()) == msg          # the settings check reads the same


def test_an_answer_that_is_no_list_or_id(kg, tmp_path):
    lines = queries_lines(kg)
    lines[5]["answers"] = {"id": "P10"}
    write_queries(kg, lines)
    msg = one_line_error(lambda: source(kg, tmp_path).queries())
    assert re.search(r"queries\.jsonl: row 6, column 'answers': answers \{'id': 'P10'\} is a dict; write a list", msg)


def test_an_unreadable_list_in_csv(kg, tmp_path):
    df = pd.DataFrame(queries_lines(kg))
    df["answers"] = [json.dumps(a) for a in df["answers"]]
    df.loc[2, "answers"] = '["P4", "P5"'
    (kg / "queries.jsonl").unlink()
    df.to_csv(kg / "queries.csv", index=False)
    msg = one_line_error(lambda: source(kg, tmp_path).queries())
    assert re.search(r"""queries\.csv: row 3, column 'answers': unreadable list '\["P4", "P5"'; write a JSON list""", msg)


def test_integer_ids_are_shown_as_written(tmp_path):
    folder = tmp_path / "ints"
    folder.mkdir()
    pd.DataFrame({"id": [5, 7, 7], "type": ["a"] * 3, "name": ["x", "y", "z"], "text": ["t"] * 3}).to_parquet(
        folder / "nodes.parquet")
    pd.DataFrame({"src": [5], "dst": [7], "relation": ["r"]}).to_parquet(folder / "edges.parquet")
    msg = one_line_error(lambda: source(folder, tmp_path).graph())
    assert msg.endswith("nodes.parquet: row 3, column 'id': duplicate node id 7 (first at row 2)"), msg


def test_a_string_id_among_integer_node_ids_names_its_row(tmp_path):
    folder = tmp_path / "ints"
    folder.mkdir()
    (folder / "nodes.csv").write_text("id,type,name,text\n1,a,x,alpha\n2,b,y,beta\n")
    (folder / "edges.csv").write_text("src,dst,relation\n1,2,r\n2,02,r\n")
    msg = one_line_error(lambda: source(folder, tmp_path).graph())
    assert re.search(r"edges\.csv: row 2, column 'dst': mixed id types: dst holds str ids \(e\.g\. '02'\) but "
                     r"nodes\.csv has int ids", msg), msg


def test_a_header_only_nodes_file(tmp_path):
    folder = tmp_path / "empty"
    folder.mkdir()
    (folder / "nodes.csv").write_text("id,type,name,text\n")
    (folder / "edges.csv").write_text("src,dst,relation\n")
    msg = one_line_error(lambda: source(folder, tmp_path).graph())
    assert msg.endswith("nodes.csv: no nodes (the table has a header and no rows)")


def test_answers_outside_the_candidates_are_a_build_error(kg, tmp_path, capsys):
    """graph.json's candidate_types [author] and paper answers: every such query would score 0 without
    a word; the build says which row, which answer and what the candidates are."""
    (kg / "graph.json").write_text(json.dumps({"name": "tables_kg", "candidate_types": ["author"]}))
    s = source(kg, tmp_path)
    assert s.graph().num_nodes == 37               # the graph itself is fine
    msg = one_line_error(lambda: s.queries())
    assert re.search(r"queries\.jsonl: row 1, column 'answers': answer 'P1' is a paper, not a candidate \(the nodes "
                     r"ranked and scored: author; 7 such queries\); widen candidate_types", msg), msg
    from ark.cli.main import main

    assert main(["build", "--graph", str(kg), "--root", str(tmp_path / "data")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ark build: error: ") and "not a candidate" in err and err.count("\n") == 1
    ok = source(kg, tmp_path, candidate_types=["author", "paper"])
    assert len(ok.queries()) == 8


# --- the graph's name ---------------------------------------------------------------------------------
def test_graph_json_names_the_runs_unless_the_command_line_does(kg, tmp_path):
    """`graph=tables graph.path=F` names the graph as `ark build --graph F` does: graph.json's name, else
    the folder's; graph.name=... on the command line wins over both."""
    from ark.config.compose import compose
    from ark.data.locate import source_for_path

    def named(*extra):
        cfg = compose(["graph=tables", f"graph.path={kg}", f"paths.data={tmp_path / 'data'}", *extra])
        return cfg.graph.name, cfg.out_dir.split("/")[-2]

    (kg / "graph.json").write_text(json.dumps({"name": "my_lab_kg"}))
    assert named() == ("my_lab_kg", "my_lab_kg")
    assert source_for_path(kg, tmp_path / "data").name == "my_lab_kg"
    assert named("graph.name=other") == ("other", "other")
    (kg / "graph.json").unlink()
    assert named() == ("kg", "kg") and source_for_path(kg, tmp_path / "data").name == "kg"


# --- docs/own-graph.md's pandas snippet ------------------------------------------------------------------
def readme_block(start: str) -> str:
    """The fenced Python block of docs/own-graph.md whose code starts with ``start``."""
    text = (REPO / "docs" / "own-graph.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    found = [b for b in blocks if b.startswith(start)]
    assert len(found) == 1, f"docs/own-graph.md has {len(found)} python blocks starting with {start!r}"
    return found[0]


def test_the_readme_builds_a_graph_from_pandas(tmp_path, monkeypatch, capsys):
    from ark.cli.main import main
    from ark.config.compose import compose
    from ark.config.evaluation import run

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ARK_HOME", str(tmp_path / "data"))   # the run's default data root: here, not the checkout's
    exec(compile(readme_block("from pathlib import Path\n\nimport pandas as pd\n"), "docs/own-graph.md", "exec"), {})
    assert main(["build", "--graph", "my_kg", "--root", "data"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert (stats["name"], stats["nodes"], stats["edges"], stats["queries_per_split"]) == ("my_kg", 3, 2, {"test": 1})
    s = TablesSource("my_kg", root="data")
    g, q = s.graph(), s.queries()
    assert g.node_text(g.node_index("g1")) == "- name: FBN1\n- type: gene"
    assert [g.external_id(a) for a in q["q1"].answer_ids] == ["d1", "d2"]
    summary = run(compose(["graph=tables", "graph.path=my_kg", "retriever=bm25", "progress=false", "n_boot=10"]))
    assert summary["complete"] and Path("results/runs/default/my_kg/bm25_test/predictions.jsonl").is_file()
