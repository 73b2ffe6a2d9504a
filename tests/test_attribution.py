"""Failure attribution (ark/analysis/attribution.py): known trajectories -> known classes, positions and costs;
a run directory -> attribution.csv and metrics.json; the real agent on the toy graph -> the ids its
tools showed."""
from __future__ import annotations

import asyncio
import csv
import json

import pytest

from ark.analysis import attribution as A
from ark.run import runner
from ark.llm.client import ToolCall
from ark.retriever import Retrieval
from ark.run.rundir import RunDir
from ark.run.summary import attribute_run, write_attribution
from ark.trajectory import Step, Trajectory

FILL = list(range(100, 120))  # 20 filler nodes


def step(index: int, calls: list[tuple[str, list[int]]], tokens: tuple[int, int] = (100, 10)) -> Step:
    """One step whose calls showed the given ids (select/finish calls show none)."""
    return Step(index=index, response=None,
                tool_calls=[ToolCall(f"c{index}_{i}", name, "{}") for i, (name, _) in enumerate(calls)],
                observations=["obs"] * len(calls), llm_latency_s=0.0, tool_latency_s=0.0,
                prompt_tokens=tokens[0], completion_tokens=tokens[1], node_ids=[ids for _, ids in calls])


def traj(agent: int, steps: list[Step], selected: list[int]) -> Trajectory:
    return Trajectory(query_id=1, agent_index=agent, messages=[], steps=steps, selected=selected,
                      stop_reason="finish")


def by_gold(qa: A.QueryAttribution) -> dict[int, A.GoldAttribution]:
    return {g.gold: g for g in qa.golds}


def test_every_class_with_first_sighting_and_positions():
    # gold 1: found by agent 0 at step 1 (rank 2 of a neighbors call), selected first by both -> retrieved
    # gold 2: shown to agent 1 at step 0, never selected -> surfaced_not_selected
    # gold 3: never shown -> never_surfaced
    # gold 4: agent 0 selects it first but agent 1's 20 nodes with two votes each push it to 22 -> fused out
    # gold 5: agent 1 selects it only at position 22 -> beyond the top 20
    a0 = traj(0, [step(0, [("search_graph", [7, 8])], (50, 5)),
                  step(1, [("search_graph", [9]), ("explore_neighbors", [6, 1, 4])], (60, 6)),
                  step(2, [("select", []), ("finish", [])])],
              [1, 4, *FILL])
    a1 = traj(1, [step(0, [("search_graph", [2, 1, *FILL, 5])], (70, 7)), step(1, [("select", [])])],
              [1, *FILL, 5])
    qa = A.attribute([1, 2, 3, 4, 5], [a0, a1], query_id=1)
    g = by_gold(qa)
    assert {k: v.cls for k, v in g.items()} == {1: "retrieved", 2: "surfaced_not_selected", 3: "never_surfaced",
                                                4: "selected_fused_out", 5: "beyond_top"}
    # gold 1 was shown at step 0 by agent 1 (rank 2) and at step 1 by agent 0: the earlier step wins
    assert (g[1].first_step, g[1].first_agent, g[1].first_tool, g[1].first_rank) == (0, 1, "search_graph", 2)
    assert g[1].n_agents_surfaced == 2 and g[1].n_agents_selected == 2 and g[1].selected_position == 1
    assert g[1].fused_position == 1 and not g[1].cut_by_truncation
    assert (g[4].first_step, g[4].first_agent, g[4].first_tool, g[4].first_rank) == (1, 0, "explore_neighbors", 3)
    assert (g[4].selected_agent, g[4].selected_position, g[4].fused_position) == (0, 2, 22)
    assert g[4].cut_by_truncation
    assert (g[5].selected_agent, g[5].selected_position, g[5].fused_position) == (1, 22, 23)
    assert g[5].cut_by_truncation and g[5].first_rank == 23
    assert not g[2].selected and g[2].fused_position is None and not g[2].cut_by_truncation
    assert g[3].first_step is None and g[3].n_agents_surfaced == 0
    # the first gold (gold 1 or 2) came with agent 1's first step: 1 step, 77 tokens
    assert (qa.steps_to_first_gold, qa.tokens_to_first_gold) == (1, 77)
    assert qa.total_steps == 5 and qa.total_tokens == 55 + 66 + 110 + 77 + 110
    assert qa.classes == {"retrieved": 1, "surfaced_not_selected": 1, "never_surfaced": 1,
                          "selected_fused_out": 1, "beyond_top": 1}


def test_cost_to_first_gold_counts_through_the_surfacing_step():
    t = traj(0, [step(0, [("search_graph", [7])], (10, 1)), step(1, [("search_graph", [8])], (20, 2)),
                 step(2, [("explore_neighbors", [5, 9])], (30, 3)), step(3, [("finish", [])], (40, 4))], [9])
    qa = A.attribute([9], [t])
    assert qa.steps_to_first_gold == 3 and qa.tokens_to_first_gold == 66
    assert by_gold(qa)[9].first_rank == 2 and by_gold(qa)[9].cls == "retrieved"
    none = A.attribute([42], [t])
    assert none.steps_to_first_gold is None and none.tokens_to_first_gold is None
    assert none.golds[0].cls == "never_surfaced" and none.total_tokens == 110


def test_top_sets_the_cut_and_dicts_work_like_objects():
    a0 = traj(0, [step(0, [("search_graph", [5, 6, 7])])], [5, 6, 7])
    as_dicts = [a0.to_json()]
    for ts in ([a0], as_dicts):
        assert [g.cls for g in A.attribute([7], ts, top=3).golds] == ["retrieved"]
        assert [g.cls for g in A.attribute([7], ts, top=2).golds] == ["beyond_top"]
    with pytest.raises(ValueError, match="top"):
        A.attribute([7], [a0], top=0)


def test_a_ranking_without_trajectories_is_a_baseline():
    ranking = list(range(200, 230)) + [7]
    g = by_gold(A.attribute([7, 205, 99], [], [], ranking))
    assert g[205].cls == "retrieved" and g[205].fused_position == 6
    assert g[7].cls == "beyond_top" and g[7].fused_position == 31
    assert g[99].cls == "never_surfaced"


def _run(out, plan, limit=None):
    """Run `ark.run.runner` into ``out`` over ``plan`` ({question: (trajectories, gold)}; its first ``limit``)."""
    class Q:
        def __init__(self, id, text, answer_ids):
            self.id, self.text, self.answer_ids = id, text, answer_ids

    class StandIn:
        async def aretrieve(self, query, query_id=""):
            trajs, _ = plan[query]
            rankings = [t.selected for t in trajs]
            return Retrieval(ranking=rankings[0], agent_rankings=rankings, trajectories=trajs)

    queries = [Q(i, text, tuple(gold)) for i, (text, (_, gold)) in enumerate(plan.items())]
    asyncio.run(runner.arun(StandIn(), queries[:limit], runner.RunSettings(out_dir=out, progress=False, n_boot=10)))


@pytest.fixture
def run_dir(tmp_path):
    """A run directory written by ark.run.runner from a retriever returning the trajectories above."""
    a0 = traj(0, [step(0, [("search_graph", [3, 1])]), step(1, [("select", [])])], [1])
    b0 = traj(0, [step(0, [("search_graph", [8])])], [8])
    _run(tmp_path / "run", {"q1": ([a0], [1, 3]), "q2": ([b0], [4])})
    return tmp_path / "run"


def test_write_puts_csv_and_summary_into_the_run(run_dir):
    summary = write_attribution(run_dir)
    assert summary["counts"] == {"retrieved": 1, "never_surfaced": 1, "surfaced_not_selected": 1,
                                 "selected_fused_out": 0, "beyond_top": 0}
    assert summary["miss_share"]["never_surfaced"] == pytest.approx(0.5)
    assert summary["queries_any_gold_surfaced"] == pytest.approx(0.5)
    assert summary["steps_to_first_gold_mean"] == 1
    assert summary["first_tool"] == {"search_graph": 2}
    assert json.loads((run_dir / "metrics.json").read_text())["attribution"] == summary
    with open(run_dir / "attribution.csv") as f:
        rows = list(csv.DictReader(f))
    assert [(r["query_id"], r["gold"], r["cls"]) for r in rows] == [
        ("0", "1", "retrieved"), ("0", "3", "surfaced_not_selected"), ("1", "4", "never_surfaced")]
    assert rows[0]["first_rank"] == "2" and rows[2]["first_rank"] == ""
    assert RunDir(run_dir).metrics["attribution"]["n_gold"] == 3


def test_ark_attribute_writes_and_prints_the_summary(run_dir, capsys):
    from ark.cli.main import main

    (run_dir / "attribution.csv").unlink()
    assert main(["attribute", str(run_dir.parent)]) == 0          # a folder holding the run
    out = capsys.readouterr().out
    summary = RunDir(run_dir).metrics["attribution"]
    assert out == f"{run_dir}\n{A.format_summary(summary)}\n" and summary["n_gold"] == 3
    assert (run_dir / "attribution.csv").is_file()


def test_ark_attribute_names_a_bad_path_in_one_line(tmp_path, capsys):
    from ark.cli.main import main

    assert main(["attribute", str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ark attribute: error: ") and "nowhere" in err and err.count("\n") == 1
    assert main(["attribute", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (f"ark attribute: error: no run directories (folders with predictions.jsonl) "
                                       f"under {tmp_path}\n")
    with pytest.raises(SystemExit) as e:
        main(["attribute", str(tmp_path), "--top", "0"])
    assert e.value.code == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "ark attribute: error: argument --top: --top must be a whole number >= 1, got '0' (see --help)"]


def test_the_runner_writes_attribution_with_its_summary(run_dir):
    m = json.loads((run_dir / "metrics.json").read_text())
    assert m["attribution"]["counts"]["never_surfaced"] == 1 and m["attribution"]["n_queries"] == 2
    assert (run_dir / "attribution.csv").is_file()


def test_real_agent_on_the_toy_graph():
    """The ids the agent's real tools recorded decide the classes: Marfan syndrome (0) is shown by the
    search and selected, Losartan (6) is shown by Marfan's drug neighbors and not selected, KCNH2 (5) is
    never shown."""
    from ark.agent import ARKRetriever, AgentConfig
    from ark.llm.client import BackboneConfig, LLMClient
    from ark.search.bm25 import BM25Index
    from ark.tools import ToolConfig, ToolSet
    from tests.helpers.scripted_server import ScriptedServer, tool_reply
    from tests.helpers.toy_graph import toy_graph

    graph = toy_graph()
    tools = ToolSet(graph, BM25Index.build(list(graph.texts())), ToolConfig())
    search = ("search_graph", {"query": "Marfan syndrome"})
    neighbors = ("explore_neighbors", {"node_id": 0, "node_types": ["drug"]})
    script = [tool_reply(search, prompt_tokens=40, completion_tokens=4), tool_reply(neighbors),
              tool_reply(("select", {"node_ids": [0]}), ("finish", {}))]
    shown_search = tools.call(*search).node_ids
    shown_neighbors = tools.call(*neighbors).node_ids
    assert 0 in shown_search and 6 in shown_neighbors and 6 not in shown_search
    assert 5 not in shown_search + shown_neighbors
    with ScriptedServer(script) as server:
        llm = LLMClient(BackboneConfig(provider="vllm", base_url=server.base_url, model="scripted", max_retries=0,
                                       timeout_s=5.0))
        ret = asyncio.run(ARKRetriever(llm, tools, graph, AgentConfig(n_agents=1)).aretrieve("Marfan?", 1))
    qa = A.attribute([0, 6, 5], ret.trajectories, ret.agent_rankings, ret.ranking)
    g = by_gold(qa)
    assert g[0].cls == "retrieved" and g[0].selected_position == 1 and g[0].first_rank == shown_search.index(0) + 1
    assert g[6].cls == "surfaced_not_selected" and (g[6].first_step, g[6].first_tool) == (1, "explore_neighbors")
    assert g[5].cls == "never_surfaced"
    assert qa.steps_to_first_gold == 1 and qa.tokens_to_first_gold == 44


def test_partly_failed_queries_are_attributed_failed_ones_not(run_dir):
    run = RunDir(run_dir)
    first, second = run.records()
    got = attribute_run(run, records=[{**first, "status": "degraded"}, {**second, "status": "failed"}])
    assert [qa.query_id for qa in got] == [first["query_id"]]
    assert [g.cls for g in got[0].golds] == ["retrieved", "surfaced_not_selected"]


def _two_agent_plan():
    """Queries whose two agents' lists fuse differently under tie_break "list" and "concat"."""
    a = traj(0, [step(0, [("search_graph", [5, 1, 2])]), step(1, [("select", [])])], [5, 1, 2])
    b = traj(1, [step(0, [("search_graph", [2, 1])]), step(1, [("explore_neighbors", [7, 5])])], [2, 1, 7])
    return {f"q{i}": ([a, b], gold) for i, gold in enumerate([[1, 2], [7], [2, 9], [5]])}


@pytest.mark.parametrize("tie_break", ["list", "concat"])
def test_the_runner_attributes_each_query_as_it_ends_as_the_files_would(tmp_path, monkeypatch, tie_break):
    """The runner attributes the queries it computes from their trajectories in memory (the run's
    tie-break from its config.yaml) and reads back only the trajectory files of queries an earlier run
    computed; attribution.csv and metrics.json equal what the run directory gives when attributed again
    from its files."""
    out = tmp_path / "run"
    out.mkdir()
    (out / "config.yaml").write_text(f"budget:\n  agent:\n    tie_break: {tie_break}\n")
    plan = _two_agent_plan()
    _run(out, plan, limit=2)                    # the first two queries, then all four: a resumed run
    read = []
    real = RunDir.trajectories
    monkeypatch.setattr(RunDir, "trajectories", lambda self, rec: read.append(rec["query_id"]) or real(self, rec))
    _run(out, plan)
    assert sorted(read) == [0, 1]               # the earlier run's queries only
    monkeypatch.undo()
    written = (out / "attribution.csv").read_text()
    summary = json.loads((out / "metrics.json").read_text())["attribution"]
    again = write_attribution(out, update_metrics=False)
    assert (out / "attribution.csv").read_text() == written and again == summary
    fused = {r["query_id"]: r["fused_position"] for r in csv.DictReader(written.splitlines())}
    assert len(fused) == 4 and summary["n_queries"] == 4
