"""ark.analysis.imitation: a student's trajectories laid beside its teacher's, query by query, from two run
directories the runner wrote (where they first part, their shapes, argument values the teacher never gives,
answer lists)."""

from __future__ import annotations

import asyncio
import json

from ark.analysis.imitation import NO_CALL, compare, divergence, calls, format_imitation
from ark.llm.client import ToolCall
from ark.retriever import Retrieval
from ark.run import runner
from ark.run.rundir import RunDir
from ark.trajectory import Step, Trajectory

SEARCH = ("search_graph", {"query": "q", "k": 8})


def _traj(qid, agent, plan, selected):
    """A trajectory of one call per step: each entry (tool, arguments) or None for a reply with no tool call."""
    steps = []
    for i, call in enumerate(plan):
        tcs = [] if call is None else [ToolCall(f"c{i}", call[0], json.dumps(call[1]))]
        steps.append(Step(index=i, response=None, tool_calls=tcs, observations=["obs"], llm_latency_s=0.0,
                          tool_latency_s=0.0, prompt_tokens=1, completion_tokens=1, node_ids=[[1, 2, 3]]))
    return Trajectory(query_id=qid, agent_index=agent, messages=[], steps=steps, selected=selected,
                      stop_reason="finish")


class Q:
    def __init__(self, id, text):
        self.id, self.text, self.answer_ids = id, text, (1,)


def _run(tmp_path, name, plans):
    """A run directory whose query i answers with plans[i]: a list of (agent plan, selected) per agent."""
    class StandIn:
        async def aretrieve(self, query, query_id=""):
            agents = plans[int(query)]
            trajs = [_traj(int(query), a, plan, sel) for a, (plan, sel) in enumerate(agents)]
            return Retrieval(ranking=agents[0][1], agent_rankings=[s for _, s in agents], trajectories=trajs)

    out = tmp_path / name
    asyncio.run(runner.arun(StandIn(), [Q(i, str(i)) for i in range(len(plans))],
                            runner.RunSettings(out_dir=out, progress=False, n_boot=0)))
    return RunDir(out)


def test_the_student_is_laid_beside_its_teacher_query_by_query(tmp_path):
    explore10 = ("explore_neighbors", {"node_id": 1, "k": 10})
    explore3 = ("explore_neighbors", {"node_id": 2, "k": 3})
    select, finish = ("select", {"node_ids": [1, 2]}), ("finish", {})
    teacher = _run(tmp_path, "teacher", [
        [([SEARCH, explore10, select, finish], [1, 2])],
        [([SEARCH, explore3, select, finish], [2, 1])],
        [([SEARCH, select, finish], [1, 2])],
        [([SEARCH, select, finish], [3])],
    ])
    student = _run(tmp_path, "student", [
        [([SEARCH, explore10, select, finish], [1, 2]),           # agent 0 copies the teacher ...
         ([SEARCH, select, finish], [9])],                         # ... agent 1 is not compared
        [([SEARCH, ("explore_neighbors", {"node_id": 2, "k": 5}), select, finish], [1, 2])],  # k 5: never the teacher's
        [([SEARCH, explore10, select, finish], [1])],              # explores where the teacher selects
        [([SEARCH, None, None], [])],                              # answers in prose, selects nothing
    ])
    im = compare(student.agent_trajectories(), teacher.agent_trajectories())
    assert im.queries == 4 and im.identical == 1
    assert im.divergences == {(1, "explore_neighbors", "explore_neighbors", ("k",)): 1,
                              (1, "explore_neighbors", "select", ()): 1, (1, NO_CALL, "select", ()): 1}
    assert im.unseen_values == {("explore_neighbors", "k", 5): 1}   # k 10 and 3 are the teacher's own
    assert im.student_shapes["search_graph > explore_neighbors > select > finish"] == 3   # one call per step here
    assert im.student_shapes[f"search_graph > {NO_CALL} > {NO_CALL}"] == 1
    assert im.teacher_shapes["search_graph > select > finish"] == 2
    assert (im.student_parallel, im.teacher_parallel) == (0, 0)     # select then finish: one call a step
    assert im.same_first == 2                                      # queries 0 and 2 start with id 1
    assert (im.student_selected, im.teacher_selected) == (5 / 4, 7 / 4)
    text = format_imitation(im)
    assert "identical trajectories 1" in text and "explore_neighbors(k=5)" in text
    assert im.by_teacher_shape == {} and "Hit@1 on the queries" not in text   # no Hit@1 given: no such lines

    # with each run's Hit@1 (gold: node 1): where the student loses or gains what its teacher finds
    hits = compare(student.agent_trajectories(), teacher.agent_trajectories(),
                   student.per_query_metric("hit@1", include_failed=True),
                   teacher.per_query_metric("hit@1", include_failed=True))
    assert hits.by_teacher_shape == {"search_graph > explore_neighbors > select > finish": [2, 1.0, 2.0],
                                     "search_graph > select > finish": [2, 1.0, 1.0]}
    lines = format_imitation(hits).splitlines()
    table = lines[lines.index(next(x for x in lines if x.startswith("Hit@1 on the queries"))) + 1:]
    assert [x.split()[:4] for x in table] == [["2", "1", "1", "0"], ["2", "1", "2", "-1"]]  # most lost first


def test_a_trajectory_that_stops_early_parts_at_its_end_and_bad_arguments_part_by_tool():
    t = _traj(0, 0, [SEARCH, ("select", {"node_ids": [1]}), ("finish", {})], [1])
    s = _traj(0, 0, [SEARCH, ("select", {"node_ids": [1]})], [1])
    assert divergence(calls(s), calls(t)) == (2, "end", "finish", ())
    assert divergence(calls(t), calls(t)) is None
    bad = Trajectory(query_id=0, agent_index=0, messages=[], selected=[], stop_reason="finish", steps=[
        Step(index=0, response=None, tool_calls=[ToolCall("c", "search_graph", "{not json")], observations=["e"],
             llm_latency_s=0.0, tool_latency_s=0.0, prompt_tokens=1, completion_tokens=1)])
    assert calls(bad)[0].args is None
    raw_newline = Trajectory(query_id=0, agent_index=0, messages=[], selected=[], stop_reason="finish", steps=[
        Step(index=0, response=None, tool_calls=[ToolCall("c", "search_graph", '{"query": "gout\nrisk"}')],
             observations=["o"], llm_latency_s=0.0, tool_latency_s=0.0, prompt_tokens=1, completion_tokens=1)])
    assert calls(raw_newline)[0].args == {"query": "gout\nrisk"}      # read as the agent reads it
    assert divergence(calls(bad), calls(t)) == (0, "search_graph", "search_graph", ())


def test_a_step_of_several_calls_is_counted_finish_aside():
    def traj(steps):
        return Trajectory(query_id=0, agent_index=0, messages=[], selected=[], stop_reason="finish", steps=[
            Step(index=i, response=None, tool_calls=[ToolCall(f"c{i}{j}", name, "{}") for j, name in enumerate(names)],
                 observations=[], llm_latency_s=0.0, tool_latency_s=0.0, prompt_tokens=1, completion_tokens=1)
            for i, names in enumerate(steps)])
    plain = traj([["search_graph"], ["select", "finish"]])
    two = traj([["search_graph", "search_graph"], ["select", "finish"]])
    im = compare({"a": plain, "b": two}, {"a": two, "b": two})
    assert (im.student_parallel, im.teacher_parallel) == (1, 2)
    assert im.student_shapes == {"search_graph > select+finish": 1, "search_graph+search_graph > select+finish": 1}
