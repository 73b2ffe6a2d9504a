"""scripts/demo.py's per-query report: each gold node's fate in ARK's run (ark.analysis.attribution) and its
distance from what the question's own words show (ark.analysis.reachability) and the bound over chains of its
words (ark.analysis.reach_bound), on the toy graph with the agent
driven by the scripted server; and its refusal of bad arguments."""

from __future__ import annotations

import asyncio
import importlib.util
from pathlib import Path

import pytest

from ark.agent import AgentConfig, ARKRetriever
from ark.analysis.attribution import attribute
from ark.llm.client import BackboneConfig, LLMClient
from ark.analysis.reach_bound import query_bound
from ark.analysis.reachability import query_reach
from ark.data.stark import Query
from ark.search.bm25 import BM25Index
from ark.tools import FINISH, SELECT, ToolConfig, ToolSet
from tests.helpers.scripted_server import ScriptedServer, tool_reply
from tests.helpers.toy_graph import toy_graph

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def demo():
    spec = importlib.util.spec_from_file_location("demo_script", ROOT / "scripts" / "demo.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_report_names_each_gold_nodes_fate_and_reach(demo, capsys):
    graph = toy_graph()
    toolset = ToolSet(graph, BM25Index.build(list(graph.texts())), ToolConfig(neighbors_k=10))
    # the agent searches "hERG" (shows KCNH2, node 5), selects it, and stops
    script = [tool_reply(("search_graph", {"query": "hERG"})), tool_reply((SELECT, {"node_ids": [5]}), (FINISH, {}))]
    q = Query(3, "hERG", (5, 2, 11))
    with ScriptedServer(script) as server:
        llm = LLMClient(BackboneConfig(provider="vllm", base_url=server.base_url, model="scripted", max_retries=0))
        ret = asyncio.run(ARKRetriever(llm, toolset, graph, AgentConfig(n_agents=1)).aretrieve(q.text, q.id))
    qa = attribute(q.answer_ids, ret.trajectories, ret.agent_rankings, ret.ranking, query_id=q.id)
    reach = query_reach(toolset, q.id, q.text, q.answer_ids, demo.REACH)[0]
    bound = query_bound(toolset, q.id, q.text, q.answer_ids, demo.BOUND)
    demo.print_query(0, q, graph, ret, [5], None, reach, qa, bound)
    out = capsys.readouterr().out
    block = {line.split("]")[0].split("[")[1]: i for i, line in enumerate(out.splitlines()) if line.startswith("gold [")}
    lines = out.splitlines()
    assert lines[block["5"] + 1] == "    ARK: retrieved (top 20), first shown at step 0 by search_graph (rank 1)"
    assert lines[block["5"] + 2] == "    the question's words: in the search hits (rank 1)"
    assert lines[block["5"] + 3].startswith("    any chain of its words: shown by a search for words of the question: "
                                            'search_graph("hERG"')
    assert lines[block["2"] + 1] == "    ARK: never surfaced"
    assert lines[block["2"] + 2].startswith("    the question's words: in a neighbor call's top 10 from a hit (rank 1")
    assert lines[block["2"] + 3].startswith("    any chain of its words: shown by a neighbor call of a node such a search shows")
    assert lines[block["11"] + 2] == "    the question's words: beyond 2 hops of the search hits"
    assert lines[block["11"] + 3] == "    any chain of its words: not shown by any chain of three calls with the question's words"


def test_a_bad_query_count_is_refused_before_any_work(demo, capsys):
    with pytest.raises(SystemExit, match=r"--queries must be at least 1 and --show from 0 \(the first query where the student selected nodes\) to --queries, got 3 and 5"):
        demo.main(["--queries", "3", "--show", "5"])
    assert "[1/4]" not in capsys.readouterr().out


def test_the_recorded_tables_remake_command_names_every_student_it_shows(demo):
    rows = ["bm25", "rules", "rules-compact", "smollm2-base", "demo-smollm2-480", "demo-smollm2-48"]
    assert demo.remake_command(rows, "100", "demo-smollm2-480") == (
        "python scripts/compare_students.py --out results/distill --limit 100"
        " --student demo-smollm2-48=results/distill/demo-smollm2-48/adapter.gguf")
    assert demo.remake_command(rows[:5] + ["demo-smollm2-480-final_select"], None, "demo-smollm2-480") == (
        "python scripts/compare_students.py --out results/distill --final-select")
    # a table without the base model's row (its run not done) is remade without it
    assert demo.remake_command(["bm25", "rules", "rules-compact", "demo-smollm2-480"], None, "demo-smollm2-480") == (
        "python scripts/compare_students.py --out results/distill --skip smollm2-base")


def test_a_first_queries_table_is_shown_only_while_it_has_a_row_the_whole_split_lacks(demo, tmp_path, monkeypatch):
    monkeypatch.setattr(demo, "RESULTS", tmp_path)
    head = "retriever,queries,hit@1\n"
    (tmp_path / "demo_test.csv").write_text(head + "bm25,480,0.2\nstudent,480,0.3\n")
    (tmp_path / "demo_test_limit20.csv").write_text(head + "bm25,20,0.1\nslow,20,0.0\n")
    (tmp_path / "demo_test_limit100.csv").write_text(head + "bm25,100,0.2\nslow,100,0.0\n")
    assert demo.recorded() == [tmp_path / "demo_test.csv", tmp_path / "demo_test_limit100.csv"]
    (tmp_path / "demo_test.csv").write_text(head + "bm25,480,0.2\nstudent,480,0.3\nslow,480,0.0\n")
    assert demo.recorded() == [tmp_path / "demo_test.csv"]
    (tmp_path / "demo_test.csv").unlink()
    assert demo.recorded() == [tmp_path / "demo_test_limit100.csv"]
