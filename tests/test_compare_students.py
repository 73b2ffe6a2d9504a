"""scripts/compare_students.py's account of the Hit@1 misses: for a run directory the runner wrote, how many
missed queries never showed a gold node to the agent, showed one that was not selected, or selected one
below the first place."""

from __future__ import annotations

import asyncio
import importlib.util
from pathlib import Path

from ark.llm.client import ToolCall
from ark.retriever import Retrieval
from ark.run import runner
from ark.trajectory import Step, Trajectory

ROOT = Path(__file__).resolve().parents[1]


def _script():
    spec = importlib.util.spec_from_file_location("compare_students", ROOT / "scripts" / "compare_students.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _agent(shown: list[int], selected: list[int]) -> Trajectory:
    search = Step(index=0, response=None, tool_calls=[ToolCall("c0", "search_graph", "{}")], observations=["obs"],
                  llm_latency_s=0.0, tool_latency_s=0.0, prompt_tokens=1, completion_tokens=1, node_ids=[shown])
    return Trajectory(query_id=0, agent_index=0, messages=[], steps=[search], selected=selected, stop_reason="finish")


class Q:
    def __init__(self, id, text, answer_ids):
        self.id, self.text, self.answer_ids = id, text, answer_ids


def test_each_missed_query_is_counted_where_its_gold_was_lost(tmp_path):
    plan = {"hit": ([1, 2], [1], [1]), "shown, not selected": ([3, 4], [3], [4]),
            "selected, not first": ([5, 6], [5, 6], [6]), "never shown": ([7], [7], [9]),
            "also never shown": ([8], [], [2])}

    class StandIn:
        async def aretrieve(self, query, query_id=""):
            shown, selected, _ = plan[query]
            return Retrieval(ranking=selected, agent_rankings=[selected], trajectories=[_agent(shown, selected)])

    queries = [Q(i, text, tuple(gold)) for i, (text, (_, _, gold)) in enumerate(plan.items())]
    asyncio.run(runner.arun(StandIn(), queries, runner.RunSettings(out_dir=tmp_path / "run", progress=False, n_boot=0)))
    causes = _script().miss_causes(tmp_path / "run")
    assert causes == {"never shown": 2, "shown, not selected": 1, "selected, not first": 1}


def test_a_skipped_row_is_not_run_and_a_bad_one_stops_before_any_run(tmp_path, monkeypatch, capsys):
    mod = _script()
    ran = []

    def run(label, overrides, runs):
        ran.append(label)
        raise RuntimeError("stop here")   # before experiments/run.py would start

    monkeypatch.setattr(mod, "run", run)
    for bad in ("nope", "rules-compact"):
        try:
            mod.main(["--skip", bad, "--runs", str(tmp_path)])
        except SystemExit as e:
            assert repr(bad) in str(e) and "valid: bm25, rules, smollm2-base" in str(e)
        else:
            raise AssertionError(f"--skip {bad} was accepted")
    assert ran == [] and list(tmp_path.iterdir()) == []
    try:
        mod.main(["--skip", "bm25", "--runs", str(tmp_path)])
    except RuntimeError:
        pass
    assert ran == ["rules_test"]
