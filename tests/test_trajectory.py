"""Trajectory records: JSON round trip, chat format for distillation, tool counts (ark/trajectory.py)."""

import json

import pytest

from ark.llm.client import ChatResponse, ToolCall
from ark.trajectory import Step, Trajectory, tool_message


def _trajectory() -> Trajectory:
    calls1 = [ToolCall(id="c1", name="search_graph", arguments='{"query": "marfan"}'),
              ToolCall(id="c2", name="explore_neighbors", arguments='{"node_id": 0}')]
    r1 = ChatResponse(content=None, tool_calls=calls1, prompt_tokens=100, completion_tokens=20,
                      latency_s=0.5, cached=False)
    calls2 = [ToolCall(id="c3", name="select", arguments='{"node_ids": [3, 0]}'),
              ToolCall(id="c4", name="finish", arguments="{}")]
    r2 = ChatResponse(content="done", tool_calls=calls2, prompt_tokens=150, completion_tokens=10,
                      latency_s=0.25, cached=True)
    messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": "q?"},
                r1.to_message(), tool_message("c1", "obs search"), tool_message("c2", "obs nbrs"),
                r2.to_message(), tool_message("c3", "Selected"), tool_message("c4", "Finished")]
    steps = [
        Step(index=0, response=r1, tool_calls=calls1, observations=["obs search", "obs nbrs"],
             llm_latency_s=0.5, tool_latency_s=0.002, prompt_tokens=100, completion_tokens=20,
             node_ids=[[0, 3], [3, 6, 7]], overhead_s=0.003),
        Step(index=1, response=r2, tool_calls=calls2, observations=["Selected", "Finished"],
             llm_latency_s=0.25, tool_latency_s=0.0, prompt_tokens=150, completion_tokens=10,
             error="select: ids [99] were not shown", node_ids=[[], []], overhead_s=0.001),
    ]
    return Trajectory(query_id=17, agent_index=2, messages=messages, steps=steps, selected=[3, 0],
                      stop_reason="finish", tools=[{"type": "function", "function": {"name": "finish"}}],
                      query="q?", prompt_version="v1", wall_s=0.8)


def test_json_round_trip_is_exact():
    traj = _trajectory()
    d = json.loads(json.dumps(traj.to_json()))  # must be plain JSON
    back = Trajectory.from_json(d)
    assert back == traj
    assert back.steps[1].response.cached is True
    assert back.steps[0].tool_calls[1].name == "explore_neighbors"
    assert back.to_json() == traj.to_json()


def test_aggregates_and_tool_counts():
    traj = _trajectory()
    assert traj.prompt_tokens == 250 and traj.completion_tokens == 30
    assert traj.latency_s == pytest.approx(0.5 + 0.003 + 0.25 + 0.001)
    assert traj.tool_counts() == {"search_graph": 1, "explore_neighbors": 1, "select": 1, "finish": 1}


def test_to_chat_is_openai_format():
    chat = _trajectory().to_chat()
    assert set(chat) == {"messages", "tools"}
    msgs = chat["messages"]
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "tool", "tool", "assistant", "tool", "tool"]
    a = msgs[2]
    assert a["tool_calls"][0] == {"id": "c1", "type": "function",
                                  "function": {"name": "search_graph", "arguments": '{"query": "marfan"}'}}
    # every tool message answers a tool call of the preceding assistant turn, in order
    assert [m["tool_call_id"] for m in msgs[3:5]] == ["c1", "c2"]
    assert msgs[5]["content"] == "done"
    assert chat["tools"][0]["function"]["name"] == "finish"
    # to_chat returns copies: editing them leaves the record intact
    msgs[0]["content"] = "changed"
    assert _trajectory().messages[0]["content"] == "sys"


def test_bad_stop_reason_lists_choices():
    with pytest.raises(ValueError, match="'finish', 'max_steps', 'error'"):
        Trajectory(query_id=1, agent_index=0, messages=[], steps=[], selected=[], stop_reason="done")
