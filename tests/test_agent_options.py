"""The agent options for small models (`AgentConfig.first_search`, `constrain_ids`, `stop_on_repeat`,
`final_select`):
what each puts in the requests the scripted OpenAI-compatible server receives, how the loop behaves,
and how the configs switch them on (conf/budget, a backbone's `agent:` block) and record them."""

from __future__ import annotations

import asyncio
import json

import pytest
from hydra.utils import instantiate

from ark.agent import AgentConfig, ARKRetriever
from ark.llm.client import BackboneConfig, LLMClient
from ark.tools import FINISH, SELECT
from tests.helpers.scripted_server import ScriptedServer, text_reply, tool_reply
from tests.helpers.toy_graph import graph, index, toolset  # shared fixtures

Q = "Which gene is associated with Marfan syndrome?"
SEARCH = ("search_graph", {"query": "Marfan syndrome"})
FORCED = {"type": "function", "function": {"name": "search_graph"}}


def run(server, graph, toolset, **agent_kw):
    backbone = agent_kw.pop("backbone", {})
    llm = LLMClient(BackboneConfig(provider="vllm", base_url=server.base_url, model="scripted", max_retries=0,
                                   timeout_s=5.0, **backbone))
    retriever = ARKRetriever(llm, toolset, graph, AgentConfig(n_agents=1, **agent_kw))
    return asyncio.run(retriever.aretrieve(Q, query_id=1)).trajectories[0]


def names(request: dict) -> list[str]:
    return [t["function"]["name"] for t in request["tools"]]


def tool(request: dict, name: str) -> dict:
    return next(t["function"]["parameters"]["properties"] for t in request["tools"] if t["function"]["name"] == name)


# ------------------------------------------------------------------------------------------ first_search
def test_first_search_names_search_graph_in_the_first_request_only(graph, toolset):
    with ScriptedServer([tool_reply(SEARCH), tool_reply((FINISH, {}))]) as server:
        traj = run(server, graph, toolset, first_search=True)
        sent = server.requests
    assert [r["tool_choice"] for r in sent] == [FORCED, "required"]
    assert traj.stop_reason == "finish" and traj.tool_counts() == {"search_graph": 1, "finish": 1}


def test_first_search_passes_through_a_backbone_that_downgrades_required(graph, toolset):
    # llama.cpp's chatml-function-calling: "required" is sent as "auto", a named function as itself
    with ScriptedServer([tool_reply(SEARCH), tool_reply((FINISH, {}))]) as server:
        run(server, graph, toolset, first_search=True, backbone={"required_tool_choice": "auto"})
        assert [r["tool_choice"] for r in server.requests] == [FORCED, "auto"]


def test_options_off_send_the_papers_requests(graph, toolset):
    script = [tool_reply(SEARCH), tool_reply((SELECT, {"node_ids": [0]})), tool_reply((FINISH, {}))]
    with ScriptedServer(script) as server:
        traj = run(server, graph, toolset)
        sent = server.requests
    assert all(r["tool_choice"] == "required" for r in sent)
    assert all(r["tools"] == traj.tools for r in sent)  # the same full tool list at every step
    assert "enum" not in tool(sent[1], SELECT)["node_ids"]["items"]


# ------------------------------------------------------------------------------------------ constrain_ids
def test_constrain_ids_lists_only_ids_shown_so_far(graph, toolset):
    neighbors = ("explore_neighbors", {"node_id": 0})
    script = [tool_reply(SEARCH), tool_reply(neighbors), tool_reply((SELECT, {"node_ids": [3]}), (FINISH, {}))]
    with ScriptedServer(script) as server:
        traj = run(server, graph, toolset, constrain_ids=True)
        sent = server.requests
    shown0 = sorted(toolset.call(*SEARCH).node_ids)
    shown1 = sorted(set(shown0) | set(toolset.call(*neighbors).node_ids))
    # nothing shown yet: no tool that takes an id is offered
    assert names(sent[0]) == ["search_graph", FINISH]
    assert names(sent[1]) == ["search_graph", "explore_neighbors", SELECT, FINISH]
    assert tool(sent[1], SELECT)["node_ids"]["items"] == {"type": "integer", "enum": shown0}
    assert tool(sent[1], SELECT)["node_ids"]["maxItems"] == min(len(shown0), 20)
    assert tool(sent[1], "explore_neighbors")["node_id"]["enum"] == shown0
    assert tool(sent[2], SELECT)["node_ids"]["items"]["enum"] == shown1 and shown1 != shown0
    # the other parameters and the recorded tool list are untouched
    assert tool(sent[1], "search_graph") == tool(sent[2], "search_graph")
    assert names({"tools": traj.tools}) == ["search_graph", "explore_neighbors", SELECT, FINISH]
    assert "enum" not in json.dumps(traj.tools[2]) and traj.selected == [3]


# ------------------------------------------------------------------------------------------ stop_on_repeat
def test_stop_on_repeat_ends_at_the_first_verbatim_repeat_of_a_rejected_call(graph, toolset):
    script = [tool_reply((SELECT, {"node_ids": [99]})), tool_reply((SELECT, {"node_ids": [98]})),
              tool_reply((SELECT, '{"node_ids":[99]}')), tool_reply((FINISH, {}))]
    with ScriptedServer(list(script)) as server:
        traj = run(server, graph, toolset, t_max=6, stop_on_repeat=True)
    assert traj.stop_reason == "repeat" and len(traj.steps) == 3  # the third repeats the first
    assert all(s.error for s in traj.steps)
    with ScriptedServer(list(script)) as server:
        plain = run(server, graph, toolset, t_max=6)
    assert plain.stop_reason == "finish" and len(plain.steps) == 4


def test_stop_on_repeat_ignores_repeated_calls_that_worked(graph, toolset):
    script = [tool_reply(SEARCH), tool_reply(SEARCH), tool_reply(SEARCH), text_reply("done?"), text_reply("done?")]
    with ScriptedServer(script) as server:
        traj = run(server, graph, toolset, t_max=5, stop_on_repeat=True)
    # three good searches and two replies without a tool call (no call to repeat): T_max ends it
    assert traj.stop_reason == "max_steps" and len(traj.steps) == 5


# ------------------------------------------------------------------------------------------ final_select
FORCED_SELECT = {"type": "function", "function": {"name": SELECT}}


def test_final_select_names_select_in_the_last_request_only(graph, toolset):
    shown = toolset.call(*SEARCH).node_ids
    script = [tool_reply(SEARCH), tool_reply(SEARCH), tool_reply((SELECT, {"node_ids": [shown[1], shown[0]]}))]
    with ScriptedServer(script) as server:
        traj = run(server, graph, toolset, t_max=3, first_search=True, final_select=True)
        sent = server.requests
    assert [r["tool_choice"] for r in sent] == [FORCED, "required", FORCED_SELECT]
    assert traj.stop_reason == "max_steps" and traj.selected == [shown[1], shown[0]]
    # an agent that finishes early is never forced
    with ScriptedServer([tool_reply(SEARCH), tool_reply((FINISH, {}))]) as server:
        run(server, graph, toolset, t_max=3, final_select=True)
        assert [r["tool_choice"] for r in server.requests] == ["required", "required"]


def test_final_select_is_not_forced_when_the_request_does_not_offer_select(graph, toolset):
    # constrain_ids offers select only once a node was shown; a single step: first_search wins
    with ScriptedServer([tool_reply((FINISH, {})), tool_reply((FINISH, {}))]) as server:
        run(server, graph, toolset, t_max=2, constrain_ids=True, final_select=True)
        run(server, graph, toolset, t_max=1, first_search=True, final_select=True)
        sent = server.requests
    assert SELECT not in names(sent[0]) and sent[0]["tool_choice"] == "required"
    assert sent[1]["tool_choice"] == FORCED


# ------------------------------------------------------------------------------------------ configs
def test_configs_switch_options_per_backbone_and_record_them(tmp_path):
    from ark.config.compose import compose
    from ark.config.identity import check_same_run, run_info

    paper = compose(["backbone=gpt-4.1"])
    agent = instantiate(paper.budget.agent)
    assert (agent.first_search, agent.constrain_ids, agent.stop_on_repeat, agent.final_select) == (False,) * 4
    assert run_info(paper)["agent_options"] == "none"
    on = compose(["backbone=scripted", "+backbone.agent={first_search: true, stop_on_repeat: true}"])
    agent = instantiate(on.budget.agent)
    assert (agent.first_search, agent.constrain_ids, agent.stop_on_repeat) == (True, False, True)
    assert run_info(on)["agent_options"] == "first_search,stop_on_repeat"
    assert instantiate(on.backbone).agent == {"first_search": True, "stop_on_repeat": True}
    # the command line wins over the backbone's choice
    off = compose(["backbone=scripted", "+backbone.agent={first_search: true}", "budget.agent.first_search=false"])
    assert instantiate(off.budget.agent).first_search is False
    assert run_info(compose(["retriever=bm25"]))["agent_options"] is None
    # a run directory made with other options (holding a finished query) is not resumed
    (tmp_path / "run.json").write_text(json.dumps(run_info(paper)))
    (tmp_path / "predictions.jsonl").write_text(json.dumps({"query_id": 1, "status": "ok", "gold": [2]}) + "\n")
    with pytest.raises(SystemExit, match="agent_options='none' there, 'first_search,stop_on_repeat' now"):
        check_same_run(tmp_path, {**run_info(paper), "agent_options": "first_search,stop_on_repeat"})
    old = {k: v for k, v in run_info(paper).items() if k != "agent_options"}  # written before the options
    (tmp_path / "run.json").write_text(json.dumps(old))
    check_same_run(tmp_path, run_info(paper))
    # readers of run directories get the options from run.json, else from the saved config
    from ark.run.rundir import RunDir

    (tmp_path / "run.json").write_text(json.dumps(run_info(on)))
    (tmp_path / "predictions.jsonl").write_text("")
    assert RunDir(tmp_path).info["agent_options"] == "first_search,stop_on_repeat"
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "predictions.jsonl").write_text("")
    (bare / "config.yaml").write_text("budget:\n  name: t5_n1\n  agent: {t_max: 5, n_agents: 1, constrain_ids: true}\n")
    assert RunDir(bare).info["agent_options"] == "constrain_ids"
