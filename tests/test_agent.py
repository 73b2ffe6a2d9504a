"""The agent loop and ARKRetriever, driven through the real LLM client by the scripted loopback server.

Each test scripts the model's replies, runs `ark.agent` on the toy graph with the real tools, and asserts
the recorded trajectory (messages, steps, errors, stop reason) and the answer list R.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from ark.agent import AgentConfig, ARKRetriever, shorten_observations
from ark.fusion import fuse
from ark.llm.client import BackboneConfig, LLMClient
from ark.llm.cache import ResponseCache
from ark.prompts import load_template, prompt_versions, system_prompt
from ark.tools import FINISH, SELECT
from ark.trajectory import Trajectory
from tests.helpers.scripted_server import (ScriptedServer, context_length_error, nameless_tool_call, rate_limited,
                                           server_error, slow, text_reply, tool_reply)
from tests.helpers.toy_graph import graph, index, toolset  # shared fixtures

Q = "Which gene is associated with Marfan syndrome?"
SEARCH = ("search_graph", {"query": "Marfan syndrome"})
NEIGHBORS = ("explore_neighbors", {"node_id": 0})


def client(server: ScriptedServer, cache=None, **kw) -> LLMClient:
    cfg = dict(provider="vllm", base_url=server.base_url, model="scripted", max_retries=2,
               backoff_base_s=0.01, timeout_s=5.0)
    cfg.update(kw)
    return LLMClient(BackboneConfig(**cfg), cache=cache)


def run(server, graph, toolset, config=None, query=Q, cache=None, **client_kw):
    retriever = ARKRetriever(client(server, cache, **client_kw), toolset, graph, config or AgentConfig(n_agents=1))
    return asyncio.run(retriever.aretrieve(query, query_id=7))


def roles(traj: Trajectory) -> list[str]:
    return [m["role"] for m in traj.messages]


# ---------------------------------------------------------------------------------------- happy path
def test_search_neighbors_select_finish(graph, toolset):
    script = [tool_reply(SEARCH, prompt_tokens=100, completion_tokens=7), tool_reply(NEIGHBORS),
              tool_reply((SELECT, {"node_ids": [3, 6]}), (FINISH, {}))]
    with ScriptedServer(script) as server:
        ret = run(server, graph, toolset)
        sent = server.requests
    traj = ret.trajectories[0]
    assert traj.stop_reason == "finish" and traj.error is None
    assert traj.selected == [3, 6] and ret.agent_rankings == [[3, 6]] and ret.ranking == [3, 6]
    assert roles(traj) == ["system", "user", "assistant", "tool", "assistant", "tool", "assistant", "tool", "tool"]
    assert [s.index for s in traj.steps] == [0, 1, 2]
    # observations are exactly what the tools return, and go back as tool messages answering each call id
    assert traj.steps[0].observations == [toolset.call(*SEARCH).observation]
    assert traj.steps[1].observations == [toolset.call(*NEIGHBORS).observation]
    assert traj.steps[0].node_ids == [toolset.call(*SEARCH).node_ids] and 0 in traj.steps[0].node_ids[0]
    assert traj.messages[3] == {"role": "tool", "tool_call_id": traj.steps[0].tool_calls[0].id,
                                "content": traj.steps[0].observations[0]}
    assert json.loads(traj.steps[1].tool_calls[0].arguments) == {"node_id": 0}
    assert all(s.error is None for s in traj.steps)
    assert traj.tool_counts() == {"search_graph": 1, "explore_neighbors": 1, "select": 1, "finish": 1}
    # per-step accounting
    assert traj.steps[0].prompt_tokens == 100 and traj.steps[0].completion_tokens == 7
    assert ret.prompt_tokens == 100 + 10 + 10 and ret.completion_tokens == 7 + 5 + 5
    assert all(s.llm_latency_s > 0 and s.tool_latency_s >= 0 for s in traj.steps)
    assert traj.steps[0].tool_latency_s > 0 and ret.latency_s >= sum(s.llm_latency_s for s in traj.steps)
    assert ret.cost_usd == 0.0 and ret.error is None
    # what the model was sent: the system prompt for this graph, tools incl. select/finish, tool_choice
    assert sent[0]["messages"][0]["content"] == system_prompt(graph, "v1", toolset.tool_names)
    assert [t["function"]["name"] for t in sent[0]["tools"]] == ["search_graph", "explore_neighbors", SELECT, FINISH]
    assert sent[0]["tool_choice"] == "required"
    assert sent[2]["messages"] == traj.messages[:6]


def test_several_calls_in_one_step_run_in_order(graph, toolset):
    # select comes after the search in the same reply, so the ids it picks are already seen
    with ScriptedServer([tool_reply(SEARCH, (SELECT, {"node_ids": [0]}), (FINISH, {}))]) as server:
        ret = run(server, graph, toolset)
    traj = ret.trajectories[0]
    assert len(traj.steps) == 1 and traj.selected == [0] and traj.stop_reason == "finish"
    assert roles(traj)[-3:] == ["tool", "tool", "tool"]


def test_select_rules(graph, toolset):
    script = [tool_reply(NEIGHBORS),
              tool_reply((SELECT, {"node_ids": ["3", 6, 99, "x"]})),
              tool_reply((SELECT, {"node_ids": [6, 7]}), (FINISH, {}))]
    with ScriptedServer(script) as server:
        traj = run(server, graph, toolset).trajectories[0]
    assert traj.selected == [3, 6, 7]
    s1, s2 = traj.steps[1], traj.steps[2]
    assert "[99]" in s1.error and "'x'" in s1.error
    assert s1.observations[0].startswith("Selected 2 node(s): [3, 6].") and "Error:" in s1.observations[0]
    assert "Already selected, skipped: [6]" in s2.observations[0] and s2.error is None


# ---------------------------------------------------------------------------------------- model mistakes
def test_a_raw_newline_inside_an_argument_string_is_taken_as_written(graph, toolset):
    """Small models write a newline into a query as a raw control character (invalid in strict JSON; seen
    from SmolLM2 through llama.cpp's grammar): the call goes through with the newline in the query."""
    raw = '{"query": "Marfan syndrome\n- aorta"}'
    with pytest.raises(json.JSONDecodeError):
        json.loads(raw)                                    # what a strict parser does with it
    script = [tool_reply(("search_graph", raw)), tool_reply((FINISH, {}))]
    with ScriptedServer(script) as server:
        traj = run(server, graph, toolset).trajectories[0]
    step = traj.steps[0]
    assert step.error is None and step.tool_calls[0].arguments == raw
    assert step.observations[0].startswith('search_graph query="Marfan syndrome')
    assert traj.stop_reason == "finish"


def test_malformed_arguments_become_error_observation(graph, toolset):
    script = [tool_reply(("search_graph", '{"query": "Marf')), tool_reply((FINISH, {}))]
    with ScriptedServer(script) as server:
        traj = run(server, graph, toolset).trajectories[0]
    assert len(traj.steps) == 2 and traj.stop_reason == "finish" and traj.selected == []
    assert traj.steps[0].tool_calls[0].arguments == '{"query": "Marf'  # raw string kept in the record
    assert "not valid JSON" in traj.steps[0].error
    assert traj.steps[0].observations[0].startswith("Error: the arguments of search_graph are not valid JSON")
    assert traj.messages[3]["role"] == "tool" and traj.messages[3]["content"] == traj.steps[0].observations[0]


def test_arguments_that_are_not_an_object_are_named_in_plain_english(graph, toolset):
    script = [tool_reply((SELECT, "[1, 2]"), (SELECT, '"7"')), tool_reply((FINISH, {}))]
    with ScriptedServer(script) as server:
        traj = run(server, graph, toolset).trajectories[0]
    assert traj.steps[0].observations == [
        "Error: the arguments of select are an array, not a JSON object. Send one JSON object with the "
        "tool's parameters.",
        "Error: the arguments of select are a string, not a JSON object. Send one JSON object with the "
        "tool's parameters."]


def test_unknown_tool(graph, toolset):
    with ScriptedServer([tool_reply(("delete_node", {"node_id": 1})), tool_reply((FINISH, {}))]) as server:
        traj = run(server, graph, toolset).trajectories[0]
    obs = traj.steps[0].observations[0]
    assert obs == "Error: there is no tool named 'delete_node'. Call one of: search_graph, explore_neighbors, select, finish."
    assert traj.steps[0].error.startswith("delete_node: unknown tool") and len(traj.steps) == 2


def test_tool_call_without_a_name_is_the_models_mistake_not_a_retry(graph, toolset):
    """A temperature-0 reply whose tool call names no function would be the same on every retry: the agent
    answers it with an error message at once (one request), and the model goes on."""
    script = [nameless_tool_call('{"query": "Marfan"}'), tool_reply(SEARCH, (SELECT, {"node_ids": [0]}), (FINISH, {}))]
    with ScriptedServer(script) as server:
        traj = run(server, graph, toolset).trajectories[0]
        calls = server.calls
    assert calls == 2 and traj.stop_reason == "finish" and traj.selected == [0]
    assert traj.steps[0].observations == ["Error: your tool call has no function name. Call one of: search_graph, "
                                          "explore_neighbors, select, finish."]
    assert traj.steps[0].error == ": tool call without a name" and traj.steps[0].response.attempts == 1
    assert traj.messages[3] == {"role": "tool", "tool_call_id": "c", "content": traj.steps[0].observations[0]}


def test_reply_without_tool_call(graph, toolset):
    script = [text_reply("The answer is FBN1."), tool_reply(SEARCH, (SELECT, {"node_ids": [0]}), (FINISH, {}))]
    with ScriptedServer(script) as server:
        traj = run(server, graph, toolset).trajectories[0]
    assert roles(traj)[:4] == ["system", "user", "assistant", "user"]
    assert traj.messages[2] == {"role": "assistant", "content": "The answer is FBN1."}
    assert traj.steps[0].error == "no tool call" and traj.steps[0].tool_calls == []
    assert traj.messages[3]["content"] == traj.steps[0].observations[0] and "called no tool" in traj.messages[3]["content"]
    assert traj.selected == [0] and len(traj.steps) == 2


def test_tool_side_error_is_recorded(graph, toolset):
    with ScriptedServer([tool_reply(("explore_neighbors", {"node_id": 999})), tool_reply((FINISH, {}))]) as server:
        traj = run(server, graph, toolset).trajectories[0]
    expected = toolset.call("explore_neighbors", {"node_id": 999})
    assert expected.error is not None
    assert traj.steps[0].observations == [expected.observation]
    assert traj.steps[0].error == f"explore_neighbors: {expected.error}"


def test_max_steps(graph, toolset):
    with ScriptedServer(conversations={Q: [tool_reply(SEARCH)]}) as server:
        ret = run(server, graph, toolset, AgentConfig(n_agents=1, t_max=3))
        assert server.calls == 3
    traj = ret.trajectories[0]
    assert traj.stop_reason == "max_steps" and len(traj.steps) == 3 and traj.selected == []


# ---------------------------------------------------------------------------------------- transport
def test_429_with_retry_after_then_success(graph, toolset):
    script = [rate_limited(retry_after=0.3), tool_reply(SEARCH, (SELECT, {"node_ids": [0]}), (FINISH, {}))]
    with ScriptedServer(script) as server:
        traj = run(server, graph, toolset).trajectories[0]
        assert server.calls == 2
        gap = server.request_times[1] - server.request_times[0]
    assert gap >= 0.29  # Retry-After honoured (backoff alone would be ~0.01 s); a lower bound only
    assert traj.stop_reason == "finish" and traj.selected == [0] and len(traj.steps) == 1
    assert traj.steps[0].response.attempts == 2 and traj.steps[0].llm_latency_s >= 0.29


def test_500_storm_ends_trajectory_and_keeps_partial_answer(graph, toolset):
    script = [tool_reply(SEARCH, (SELECT, {"node_ids": [0]})), server_error(500), server_error(502), server_error(500)]
    with ScriptedServer(script) as server:
        ret = run(server, graph, toolset)
        assert server.calls == 4  # 1 success + 1 attempt + 2 retries
    traj = ret.trajectories[0]
    assert traj.stop_reason == "error" and "HTTP 500" in traj.error and "3 attempts" in traj.error
    assert len(traj.steps) == 1 and traj.selected == [0] and ret.ranking == [0]
    assert ret.error is not None and ret.error.startswith("all 1 agents failed")


def test_one_failing_agent_does_not_fail_the_query(graph, toolset):
    # concurrency 1: agent 0 runs to its end before agent 1 starts, so the sequential script is ordered
    script = [tool_reply(NEIGHBORS, (SELECT, {"node_ids": [3]}), (FINISH, {})),
              server_error(503), server_error(503), server_error(503)]
    with ScriptedServer(script) as server:
        ret = run(server, graph, toolset, AgentConfig(n_agents=2, concurrency=1))
    ok, failed = ret.trajectories
    assert ok.stop_reason == "finish" and failed.stop_reason == "error" and "HTTP 503" in failed.error
    assert ret.agent_rankings == [[3], []] and ret.ranking == [3] and ret.error is None


def test_timeout(graph, toolset):
    script = [slow(tool_reply(SEARCH), 3.0), slow(tool_reply(SEARCH), 3.0)]
    with ScriptedServer(script) as server:
        traj = run(server, graph, toolset, timeout_s=0.3, max_retries=1).trajectories[0]
        assert server.calls == 2  # both answers would have been a search: only a timeout ends it here
    assert traj.stop_reason == "error" and "timeout" in traj.error and traj.steps == []
    assert roles(traj) == ["system", "user"]


def test_context_length_shortens_oldest_observations_and_retries_once(graph, toolset):
    script = [tool_reply(SEARCH, NEIGHBORS), context_length_error(), tool_reply((SELECT, {"node_ids": [3]}), (FINISH, {}))]
    with ScriptedServer(script) as server:
        traj = run(server, graph, toolset, AgentConfig(n_agents=1, shorten_chars=40)).trajectories[0]
        sent = server.requests
    assert len(sent) == 3 and traj.stop_reason == "finish" and traj.selected == [3]
    full_search = toolset.call(*SEARCH).observation
    assert sent[1]["messages"][3]["content"] == full_search  # first try: full text
    retried = sent[2]["messages"][3]["content"]
    assert retried == full_search[:40] + " ...[shortened]"  # the oldest observation was cut
    assert sent[2]["messages"][4]["content"] == toolset.call(*NEIGHBORS).observation  # the newest was not
    assert traj.messages[3]["content"] == retried  # the record shows what the model saw
    assert traj.steps[0].observations[0] == full_search  # the step keeps the full observation
    assert "context too long" in traj.steps[1].error


def test_context_length_twice_ends_with_error(graph, toolset):
    script = [tool_reply(SEARCH, NEIGHBORS), context_length_error(), context_length_error()]
    with ScriptedServer(script) as server:
        traj = run(server, graph, toolset, AgentConfig(n_agents=1, shorten_chars=40)).trajectories[0]
        assert server.calls == 3
    assert traj.stop_reason == "error" and traj.error.startswith("ContextLengthError") and len(traj.steps) == 1


def test_shorten_observations_never_cuts_question_or_newest():
    msgs = [{"role": "system", "content": "s" * 100}, {"role": "user", "content": "q" * 100},
            {"role": "assistant", "content": None}, {"role": "tool", "content": "a" * 100},
            {"role": "tool", "content": "b" * 100}, {"role": "tool", "content": "c" * 100},
            {"role": "user", "content": "d" * 100}]
    assert shorten_observations(msgs, 10) == 2  # oldest half of the 3 cuttable ones, rounded up
    assert [len(m["content"]) for m in msgs[:2]] == [100, 100]
    assert msgs[3]["content"] == "a" * 10 + " ...[shortened]" and msgs[4]["content"].startswith("b" * 10 + " ")
    assert msgs[5]["content"] == "c" * 100 and msgs[6]["content"] == "d" * 100


# ---------------------------------------------------------------------------------------- parallel + fusion
def test_parallel_agents_fuse(graph, toolset):
    script = [tool_reply(NEIGHBORS, (SELECT, {"node_ids": [3, 6]}), (FINISH, {})),
              tool_reply(NEIGHBORS, (SELECT, {"node_ids": [8, 6]}), (FINISH, {})),
              tool_reply(NEIGHBORS, (SELECT, {"node_ids": [9]}), (FINISH, {}))]
    with ScriptedServer(script) as server:
        ret = run(server, graph, toolset, AgentConfig(n_agents=3, concurrency=1, fuse_top=3))
    assert ret.agent_rankings == [[3, 6], [8, 6], [9]]
    assert ret.ranking == fuse(ret.agent_rankings, top=3) == [6, 3, 8]
    assert [t.agent_index for t in ret.trajectories] == [0, 1, 2]
    assert ret.latency_s == max(t.latency_s for t in ret.trajectories)


def test_shared_semaphore_bounds_running_agents(graph, toolset):
    convo = {f"q{i}": [tool_reply((FINISH, {}))] for i in range(4)}

    async def go(limit):
        # the server holds requests until `limit` are out together, so both bounds are exercised
        with ScriptedServer(conversations=convo, gate=limit) as server:
            r = ARKRetriever(client(server), toolset, graph, AgentConfig(n_agents=2),
                             semaphore=asyncio.Semaphore(limit))
            rets = await asyncio.gather(*(r.aretrieve(f"q{i}", i) for i in range(4)))
            return server.max_in_flight, server.calls, rets

    wide, wide_calls, rets = asyncio.run(go(8))
    narrow, narrow_calls, _ = asyncio.run(go(2))
    assert all(t.stop_reason == "finish" for ret in rets for t in ret.trajectories)
    assert wide_calls == narrow_calls == 8
    assert wide == 8 and narrow == 2  # 4 queries x 2 agents all at once; at most 2 under the narrow one


def test_sync_retrieve_twice(graph, toolset):
    with ScriptedServer(conversations={Q: [tool_reply(SEARCH, (SELECT, {"node_ids": [0]}), (FINISH, {}))]}) as server:
        r = ARKRetriever(client(server), toolset, graph, AgentConfig(n_agents=2))
        assert r.retrieve(Q) == [0]
        assert r.retrieve(Q) == [0]  # a second event loop works (semaphore and HTTP pool rebound)


# ---------------------------------------------------------------------------------------- cache
def _untimed(traj: Trajectory) -> dict:
    d = traj.to_json()
    d.pop("wall_s")
    for s in d["steps"]:
        for k in ("tool_latency_s", "overhead_s"):
            s.pop(k)
        s["response"].pop("cached")
    return d


def test_cache_replay_makes_no_http_call(graph, toolset, tmp_path):
    convo = {Q: [tool_reply(SEARCH), tool_reply(NEIGHBORS), tool_reply((SELECT, {"node_ids": [3]}), (FINISH, {}))]}
    cache = ResponseCache(tmp_path / "llm.sqlite")
    with ScriptedServer(conversations=convo) as server:
        first = run(server, graph, toolset, AgentConfig(n_agents=2), cache=cache)
        assert server.calls == 6
        second = run(server, graph, toolset, AgentConfig(n_agents=2), cache=ResponseCache(tmp_path / "llm.sqlite"))
        assert server.calls == 6  # zero HTTP calls on the rerun
    assert second.ranking == first.ranking == [3]
    assert [_untimed(t) for t in second.trajectories] == [_untimed(t) for t in first.trajectories]
    assert all(s.response.cached for t in second.trajectories for s in t.steps)
    assert second.prompt_tokens == first.prompt_tokens


# ---------------------------------------------------------------------------------------- prompts + config
def test_system_prompt_names_graph_vocabulary(graph):
    text = system_prompt(graph, "v1")
    assert "disease, gene/protein, drug, effect/phenotype" in text
    assert "associated with, indication, phenotype present, parent-child, target" in text
    assert "$" not in text and '"toy"' in text
    for word in ("search_graph", "explore_neighbors", "select", "finish", "Text-heavy", "Relation-heavy", "Multi-hop"):
        assert word in text
    assert "v1" in prompt_versions() and load_template("v1").startswith("You are")
    note = system_prompt(graph, "v1", tool_names=["search_graph"])
    assert note.endswith("explore_neighbors is not available; use only: search_graph.\n")


def test_bad_config_values_are_explained(graph, toolset):
    with pytest.raises(ValueError, match=r"prompt version 'v9' not found; choose one of \[.*'v1'"):
        system_prompt(graph, "v9")
    with pytest.raises(ValueError, match="t_max"):
        AgentConfig(t_max=0)
    with ScriptedServer() as server:
        with pytest.raises(ValueError, match="temperature"):
            ARKRetriever(client(server, temperature=0.0), toolset, graph, AgentConfig(temperature=0.7))


def test_select_ids_that_only_look_numeric_are_reported_not_raised():
    from ark.tools.select import _as_node_ids

    assert _as_node_ids(["--5", "\u00b2", " 7 ", "3.0", True, None, 4]) == ([7, 3, 4], ["--5", "\u00b2", True, None])


def test_agent_config_rejects_bad_choices_before_any_call():
    from ark.agent import AgentConfig

    with pytest.raises(ValueError, match=r"tie_break='votes'.*\['list', 'concat'\]"):
        AgentConfig(tie_break="votes")
    with pytest.raises(ValueError, match=r"tool_choice='always'.*'required'"):
        AgentConfig(tool_choice="always")
