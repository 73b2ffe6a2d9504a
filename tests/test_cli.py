"""The ``ark`` command line: what a person sees is what the agent sees, in the same ids; bad values are one
line with the valid choices (the MCP server: tests/test_mcp.py)."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import ark
from ark.cli.main import build_parser, main
from ark.data.tables.source import TablesSource
from ark.search.bm25 import load_index
from ark.tools import NEIGHBORS, SEARCH, ToolConfig, ToolSet

REPO = Path(__file__).resolve().parents[1]
KG = REPO / "tests" / "data" / "tables_kg"


@pytest.fixture()
def root(tmp_path):
    return str(tmp_path / "data")


@pytest.fixture()
def agent_tools(root):
    """The tools exactly as a run builds them for this graph."""
    source = TablesSource(KG, root=root)
    graph = source.graph()
    return ToolSet(graph, load_index(graph, source.cache_dir), ToolConfig())


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_search_prints_the_agents_observation(capsys, root, agent_tools):
    code, out, err = run_cli(capsys, "search", "sparse retrieval BM25", "--graph", str(KG), "--root", root, "-k", "3")
    assert code == 0
    assert out == agent_tools.call(SEARCH, {"query": "sparse retrieval BM25", "k": 3}).observation + "\n"
    assert out.splitlines()[1].startswith("[P1] Sparse Retrieval Revisited (paper)")   # the id column's id
    assert "external ids" not in err
    code, out, err = run_cli(capsys, "search", "sparse retrieval BM25", "--graph", str(KG), "--root", root, "-k", "3",
                             "--no-user-ids")
    assert code == 0 and out.splitlines()[1].startswith("[0] Sparse Retrieval Revisited (paper)")
    assert err.strip().splitlines()[-1].startswith("external ids: [0] P1")


def test_neighbors_by_external_id_with_filters(capsys, root, agent_tools):
    code, out, _ = run_cli(capsys, "neighbors", "A2", "--graph", str(KG), "--root", root, "--type", "paper",
                           "--relation", "writes", "--query", "tools")
    assert code == 0
    want = agent_tools.call(NEIGHBORS, {"node_id": "A2", "query": "tools", "node_types": ["paper"],
                                        "relations": ["writes"]}).observation
    assert out == want + "\n" and "showing 3 of 3 neighbors matching the filters" in out
    assert out.startswith("explore_neighbors node_id=A2 (Tomas Okafor, author)")


def test_a_relation_is_taken_as_shown_or_with_underscores_for_spaces(capsys, root, agent_tools, demo_root):
    """--relation takes the graph's own name, or the same with _ for its spaces and in any case: the
    demo's "associated with" as associated_with (what the help once showed), the tables graph's
    has_topic as "has topic"; each gives the agent's observation for the graph's own name."""
    want = agent_tools.call(NEIGHBORS, {"node_id": "P1", "relations": ["has_topic"]}).observation + "\n"
    for given in ("has_topic", "has topic", "Has Topic"):
        code, out, _ = run_cli(capsys, "neighbors", "P1", "--graph", str(KG), "--root", root, "--relation", given)
        assert code == 0 and out == want
    assert "showing 0 of" not in want and " | -> has_topic | " in want
    shown = []
    for given in ("associated with", "associated_with"):
        code, out, _ = run_cli(capsys, "neighbors", "12", "--graph", "demo", "--root", str(demo_root), "--relation", given)
        assert code == 0
        shown.append(out)
    assert shown[0] == shown[1] and 'relations=["associated with"]' in shown[0]
    lines = [line for line in shown[0].splitlines() if line.startswith("[")]
    assert lines and all(" | associated with | " in line for line in lines)
    code, _, err = run_cli(capsys, "neighbors", "12", "--graph", "demo", "--root", str(demo_root), "--relation", "assoc")
    assert code == 2 and err.strip() == ("ark neighbors: error: unknown relation 'assoc' for graph demo; valid relations: "
                                         "'associated with', 'parent-child', 'phenotype absent', 'phenotype present'")


def test_the_help_shows_relations_the_demo_has(capsys, demo_root):
    """Every --relation value the command's help and docstring show is a relation of the demo graph."""
    from ark.cli import main as main_module, tools as tools_module
    from ark.data.sources import DemoSource

    with pytest.raises(SystemExit):
        main(["neighbors", "--help"])
    texts = [capsys.readouterr().out, main_module.__doc__, tools_module.__doc__]
    shown = {m for text in texts for m in re.findall(r'--relation "([^"]+)"', " ".join(text.split()))}
    assert shown == {"associated with"}
    assert shown <= set(DemoSource(demo_root).graph().relation_names)


def _int_id_graph(tmp_path) -> Path:
    """A tables graph whose ids are integers that are not its internal ids: nodes 100, 7, 0, 55."""
    kg = tmp_path / "int_kg"
    kg.mkdir()
    (kg / "nodes.csv").write_text("id,type,name,text\n100,gene,KCNH2,potassium channel long QT\n"
                                  "7,disease,long QT syndrome,arrhythmia of the heart\n0,drug,dofetilide,blocks KCNH2\n"
                                  "55,disease,short QT syndrome,arrhythmia\n")
    (kg / "edges.csv").write_text("src,dst,relation\n100,7,associated_with\n0,100,targets\n100,55,associated_with\n")
    return kg


def test_one_id_space_on_the_command_line_the_one_the_output_shows(capsys, root, tmp_path):
    """A graph with integer ids: `ark search` shows the graph's ids, and `ark neighbors` reads NODE as one of
    them; with --no-user-ids both speak the internal ids. 0 is a graph id (dofetilide) and an internal
    id (KCNH2): each command line reaches the node its own output named 0."""
    kg = str(_int_id_graph(tmp_path))
    code, out, _ = run_cli(capsys, "search", "KCNH2", "--graph", kg, "--root", root, "-k", "2")
    assert code == 0 and {line.split(" score=")[0] for line in out.splitlines()[1:3]} == {
        "[100] KCNH2 (gene)", "[0] dofetilide (drug)"}
    code, out, _ = run_cli(capsys, "neighbors", "0", "--graph", kg, "--root", root)
    assert code == 0 and out.splitlines()[:3] == ["explore_neighbors node_id=0 (dofetilide, drug)",
                                                  "(-> r: edge 0 -r-> neighbor; <- r: edge neighbor -r-> 0)",
                                                  "[100] KCNH2 (gene) | -> targets | potassium channel long QT"]
    code, out, _ = run_cli(capsys, "search", "KCNH2", "--graph", kg, "--root", root, "-k", "2", "--no-user-ids")
    assert code == 0 and {line.split(" score=")[0] for line in out.splitlines()[1:3]} == {
        "[0] KCNH2 (gene)", "[2] dofetilide (drug)"}
    code, out, err = run_cli(capsys, "neighbors", "0", "--graph", kg, "--root", root, "--no-user-ids")
    assert code == 0 and out.splitlines()[0] == "explore_neighbors node_id=0 (KCNH2, gene)"
    assert {line.split(" (")[0] for line in out.splitlines()[2:5]} == {"[1] long QT syndrome", "[2] dofetilide",
                                                                        "[3] short QT syndrome"}
    assert err.strip().endswith("external ids: [1] 7, [2] 0, [3] 55")
    code, _, err = run_cli(capsys, "neighbors", "8", "--graph", kg, "--root", root)
    assert code == 2 and err.strip() == ("Error: node_id 8 is not the id of a node of this graph; use an id shown "
                                         "in brackets in an earlier result.")


@pytest.mark.parametrize("argv,pattern", [
    (["search", "x", "--type", "book"], r"node_types names the unknown node type \"book\"; use only these node types: \"paper\", \"author\""),
    (["neighbors", "Z9"], r'node_id "Z9" is not the id of a node of this graph; use an id shown in brackets'),
    (["search", "x", "--switch", "neighbour=true"], r"unknown tool switch 'neighbour'; valid switches: neighbors, "),
    (["search", "x", "--switch", "neighbors=yes"], r"--switch 'neighbors=yes': write neighbors=true or neighbors=false"),
    (["neighbors", "A2", "--relation", "knows"], r"^ark neighbors: error: unknown relation 'knows' for graph tables_kg; "
                                                 r"valid relations: 'writes', 'published_in', 'has_topic', 'cites', 'affiliated_with'$"),
])
def test_bad_values_are_one_line_with_the_choices(capsys, root, argv, pattern):
    code, out, err = run_cli(capsys, *argv, "--graph", str(KG), "--root", root)
    assert code == 2 and out == ""
    lines = [line for line in err.splitlines() if line.strip() and "index" not in line.lower()]
    assert len(lines) == 1 and re.search(pattern, lines[0]), err


def test_unknown_graph_and_backbone_name_the_choices(capsys, root):
    code, _, err = run_cli(capsys, "build", "--graph", "wikidata", "--root", root)
    assert code == 2 and err.strip() == ("ark build: error: unknown graph 'wikidata'; valid graphs: amazon, demo, "
                                         "mag, prime, rdf, tables, or a folder of tables (nodes, edges, queries) or an RDF file")
    code, _, err = run_cli(capsys, "ask", "q", "--graph", str(KG), "--root", root, "--backbone", "gpt-5")
    assert code == 2 and re.fullmatch(r"ark ask: error: unknown backbone 'gpt-5'; valid backbones: .*gpt-4\.1.*local.*\n", err)
    with pytest.raises(SystemExit) as e:
        main(["export", "--graph", str(KG), "--out", "x", "--format", "xml"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "invalid choice: 'xml'" in err and "'parquet', 'csv', 'jsonl'" in err


VERBS = ("download", "build", "export", "search", "neighbors", "ask", "mcp", "serve", "run", "merge", "diagnose",
         "compare", "attribute", "table1", "figures", "viewer")
GRAPH_VERBS = ("build", "export", "search", "neighbors", "ask", "mcp")


def test_every_verb_is_there_and_has_help(capsys):
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert sorted(sub.choices) == sorted(VERBS)
    for verb in VERBS:
        with pytest.raises(SystemExit) as e:
            main([verb, "--help"])
        out = capsys.readouterr().out
        assert e.value.code == 0 and out.startswith(f"usage: ark {verb}")
        assert ("--graph" in out) == (verb in GRAPH_VERBS)
        if "--root" in out:   # one meaning everywhere: the data root
            assert "data root: STaRK's files under <root>/stark, caches under <root>/cache" in " ".join(out.split())


def test_version(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out == f"ark {ark.__version__}\n"


@pytest.mark.parametrize("argv,message", [
    (["ask", "q", "--t-max", "0"], "argument --t-max: --t-max must be a whole number >= 1, got '0' (see --help)"),
    (["ask", "q", "--n-agents", "x"], "argument --n-agents/-n: --n-agents must be a whole number >= 1, got 'x' (see --help)"),
    (["run", "--limit", "3"], "unrecognized arguments: --limit; settings are key=value, e.g. limit=5 (see --help)"),
    (["search", "x", "--kk", "3"], "unrecognized arguments: --kk 3 (see --help)"),
])
def test_bad_arguments_end_in_one_line(capsys, argv, message):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    assert capsys.readouterr().err == f"ark {argv[0]}: error: {message}\n"


def test_mcp_and_serve_name_a_bad_value_in_one_line(capsys, root, tmp_path):
    assert main(["mcp", "--graph", "nope", "--root", root]) == 2
    assert capsys.readouterr().err.startswith("ark mcp: error: unknown graph 'nope'; valid graphs: amazon, demo,")
    assert main(["serve", "--model", str(tmp_path / "none.gguf")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ark serve: error: ") and err.count("\n") == 1


def test_build_and_export_commands(capsys, root, tmp_path):
    code, out, _ = run_cli(capsys, "build", "--graph", "tables", "--set", f"path={KG}", "--set", "name=kg2",
                           "--root", root, "--index")
    stats = json.loads(out)
    assert code == 0 and stats["name"] == "kg2" and stats["nodes"] == 37
    assert stats["queries_per_split"] == {"test": 5, "train": 2, "val": 2}
    cache = Path(stats["cache"])                       # the folder's own cache under the name it was given
    assert cache.parent == Path(root) / "cache" and cache.name.startswith("kg2-")
    assert Path(stats["bm25_index"]) == cache / "bm25" and (cache / "bm25").is_dir()
    code, out, _ = run_cli(capsys, "export", "--graph", str(KG), "--root", root, "--out", str(tmp_path / "o"),
                           "--format", "csv")
    assert code == 0 and out.strip().endswith(f"to {tmp_path / 'o'}")
    assert TablesSource(tmp_path / "o", root=root).graph().num_edges == 63


def test_the_console_script_is_declared():
    text = (REPO / "pyproject.toml").read_text()
    assert re.search(r'^\[project\.scripts\]\nark = "ark\.cli\.main:entry"$', text, re.M)


# --- ark ask ----------------------------------------------------------------------------------------
def test_ask_shows_tool_calls_observations_and_the_named_answer(capsys, root):
    from tests.helpers.scripted_server import ScriptedServer
    from tests.helpers.policies import search_select_finish

    with ScriptedServer(responder=search_select_finish) as server:
        code, out, _ = run_cli(capsys, "ask", "sparse retrieval BM25 question answering", "--graph", str(KG),
                               "--root", root, "--backbone", "scripted", "--base-url", server.base_url,
                               "--n-agents", "2", "--t-max", "5", "--no-cache")
    assert code == 0 and server.calls == 4
    assert 'agent 1 step 1: search_graph {"query": "sparse retrieval BM25 question answering", "k": 5}' in out
    assert "agent 2 step 2: select" in out
    assert "[P1] Sparse Retrieval Revisited (paper) score=" in out          # the observation, live
    assert 'agent 1 step 2: select {"node_ids": ["P1",' in out                # the graph's ids, as shown
    row = next(line for line in out.splitlines() if "P1 (0)" in line)
    assert "Sparse Retrieval Revisited" in row and "paper" in row and "2/2" in row
    assert "stop reasons: finish, finish" in out


def test_python_dash_m_ark_runs_the_cli():
    done = subprocess.run([sys.executable, "-m", "ark", "--help"], capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0 and all(v in done.stdout for v in VERBS)
    done = subprocess.run([sys.executable, "-m", "ark", "--version"], capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0 and done.stdout == f"ark {ark.__version__}\n"
