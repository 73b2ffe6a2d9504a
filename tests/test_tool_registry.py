"""The tool registry: a third tool registered in one place reaches the schema, the prompt, the agent's
messages, the run statistics (metrics.json, per_query.csv, trajectory_stats.csv) and the figure data,
with no other edit. Runs the real agent against the scripted OpenAI-compatible server on the toy graph.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass

import pytest

from ark.tools import registry as tool_registry
from ark.agent import ARKRetriever, AgentConfig
from ark.llm.client import BackboneConfig, LLMClient
from ark.prompts import system_prompt
from ark.eval.runner import RunSettings, run_queries
from ark.tools.registry import Param, Tool
from ark.tools.toolset import ToolConfig, ToolResult, ToolSet
from ark.eval import figures
from tests.helpers.scripted_server import ScriptedServer, tool_reply
from tests.helpers.toy_graph import graph, index  # graph, index: shared fixtures


def count_nodes(toolset: ToolSet, args: dict) -> ToolResult:
    """The third tool: how many nodes of one type the graph has, and the first two of them."""
    g = toolset.graph
    tid = g.node_type_id(args["node_type"])
    ids = [i for i in range(g.num_nodes) if int(g.node_types[i]) == tid]
    return ToolResult(f"{len(ids)} nodes of type {args['node_type']}: {ids[:2]}", ids[:2])


COUNT = Tool("count_nodes", "Count the nodes of one type.",
             (Param("node_type", {"type": "string"}, "A node type name.", required=True),),
             handler=count_nodes, switch="count_nodes", kind="counting",
             guide="counts the nodes of one node type and shows the first two.")


@pytest.fixture()
def third_tool():
    with tool_registry.registered(COUNT):
        yield COUNT


@dataclass(frozen=True)
class Q:
    id: int
    text: str
    answer_ids: tuple


def test_paper_tools_are_registered_in_order():
    assert tool_registry.names() == ["search_graph", "explore_neighbors", "select", "finish"]
    assert tool_registry.graph_tool_names() == ["search_graph", "explore_neighbors"]
    assert tool_registry.kinds() == {"search_graph": "text", "explore_neighbors": "relational"}


def test_registering_a_name_twice_is_an_error(third_tool):
    with pytest.raises(ValueError, match="already registered"):
        tool_registry.register(Tool("count_nodes", "other", handler=count_nodes))
    with pytest.raises(ValueError, match="needs a handler"):
        Tool("no_handler", "x")


def test_the_switch_offers_or_removes_the_third_tool(graph, index, third_tool):
    assert ToolSet(graph, index).tool_names == ["search_graph", "explore_neighbors", "count_nodes"]
    off = ToolSet(graph, index, ToolConfig(switches={"count_nodes": False}))
    assert off.tool_names == ["search_graph", "explore_neighbors"]
    assert "call one of: search_graph, explore_neighbors" in off.call("count_nodes", {"node_type": "drug"}).error
    with pytest.raises(ValueError, match="unknown tool switch 'cont_nodes'.*valid switches: .*count_nodes"):
        ToolSet(graph, index, ToolConfig(switches={"cont_nodes": True}))


def test_third_tool_flows_into_schema_prompt_stats_and_figures(tmp_path, graph, index, third_tool):
    toolset = ToolSet(graph, index, ToolConfig())
    fn = {t["function"]["name"]: t["function"] for t in toolset.openai_tools()}
    assert fn["count_nodes"]["parameters"]["required"] == ["node_type"]
    assert toolset.call("count_nodes", {"node_type": "drug"}).node_ids == [6, 7]

    prompt = system_prompt(graph, "v1", toolset.tool_names)
    assert "- `count_nodes` — counts the nodes of one node type and shows the first two." in prompt
    assert prompt.index("`explore_neighbors`") < prompt.index("`count_nodes`") < prompt.index("`select`")

    # the model counts drugs, selects one it saw, calls an unknown tool, finishes
    script = [tool_reply(("count_nodes", {"node_type": "drug"}), ("search_graph", {"query": "heart"})),
              tool_reply(("count_nodes", {"node_type": "disease"}), ("select", {"node_ids": [6, 99]}),
                         ("no_such_tool", {})),
              tool_reply(("finish", {}))]
    with ScriptedServer(script) as server:
        llm = LLMClient(BackboneConfig(provider="vllm", base_url=server.base_url, model="scripted",
                                       max_retries=0, timeout_s=5.0))
        retriever = ARKRetriever(llm, toolset, graph, AgentConfig(n_agents=1))
        assert retriever.agent.system == prompt
        out = tmp_path / "run"
        summary = run_queries(retriever, [Q(1, "Which drugs exist?", (6,))],
                              RunSettings(out_dir=out, progress=False, n_boot=10))
    traj = json.loads(next((out / "trajectories").iterdir()).read_text())[0]
    observations = [o for s in traj["steps"] for o in s["observations"]]
    assert observations[0] == "2 nodes of type drug: [6, 7]"
    assert "Select only ids that search_graph or explore_neighbors or count_nodes returned." in observations[3]
    assert "Call one of: search_graph, explore_neighbors, count_nodes, select, finish." in observations[4]

    assert summary["tool_calls"] == {"search_graph": 1, "explore_neighbors": 0, "count_nodes": 2}
    assert summary["tool_share"]["count_nodes"] == pytest.approx(2 / 3)
    row = next(csv.DictReader((out / "per_query.csv").open()))
    assert (row["search_graph"], row["explore_neighbors"], row["count_nodes"]) == ("1", "0", "2")
    stats = next(csv.DictReader((out / "trajectory_stats.csv").open()))
    assert stats["count_nodes"] == "2"

    (out / "run.json").write_text(json.dumps({"graph": "toy", "retriever": "ark", "ablation": "full"}))
    traj_df = figures.load_trajectories([out])
    assert traj_df[["search_calls", "neighbor_calls", "count_nodes"]].iloc[0].tolist() == [1, 0, 2]
    shares = figures.tool_share_data(traj_df).set_index("kind")
    assert shares.loc["counting", "calls"] == 2 and shares.loc["text", "calls"] == 1
    assert shares["share"].sum() == pytest.approx(1.0)
    figures.plot_tool_use(shares.reset_index())  # draws the third kind with a colour of its own


def test_prompt_with_the_default_toolset_keeps_the_paper_tool_section(graph):
    text = system_prompt(graph, "v1")
    bullets = [line.split("`")[1] for line in text.splitlines() if line.startswith("- `")]
    assert bullets == ["search_graph", "explore_neighbors", "select", "finish"]
