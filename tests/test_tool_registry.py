"""The tool registry: a third tool registered in one place, or written as one new module of the
`ark.tools` package (the recipe of its docstring), reaches the schema, the prompt, the agent's
messages, the run statistics (metrics.json, per_query.csv, trajectory_stats.csv) and the figure data,
with no other edit; an answer tool is called like the graph tools. Runs the real agent against the
scripted OpenAI-compatible server on the toy graph.
"""

from __future__ import annotations

import asyncio
import csv
import json
import sys
import textwrap
from dataclasses import dataclass

import pytest

import ark.tools
from ark.tools import registry as tool_registry
from ark.agent import Agent, ARKRetriever, AgentConfig
from ark.llm.client import BackboneConfig, LLMClient
from ark.prompts import system_prompt
from ark.run.runner import RunSettings, run_queries
from ark.report import figures
from ark.tools import AnswerState, Param, Tool, ToolConfig, ToolResult, ToolSet
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


def test_paper_tools_are_registered_in_order_and_are_the_default_toolset():
    assert tool_registry.names() == ["search_graph", "explore_neighbors", "find_paths", "select", "finish"]
    assert tool_registry.graph_tool_names() == ["search_graph", "explore_neighbors", "find_paths"]
    assert tool_registry.kinds() == {"search_graph": "text", "explore_neighbors": "relational", "find_paths": "paths"}
    # find_paths is opt-in: a run that sets no switch offers the paper's tools only
    assert ark.tools.default_graph_tool_names() == ["search_graph", "explore_neighbors"]
    assert not ToolConfig().switch("find_paths") and ToolConfig(switches={"find_paths": True}).switch("find_paths")


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


# ------------------------------------------------------------------ a tool added as one module
def recipe() -> str:
    """The tool module that the recipe in ark/tools/__init__.py's docstring tells a reader to write."""
    block = ark.tools.__doc__.split("(no list to edit)::\n", 1)[1].split("\n2. ", 1)[0]
    return textwrap.dedent(block).strip() + "\n"


@pytest.fixture()
def tool_module(tmp_path, monkeypatch):
    """The recipe's count_nodes.py as a new module of the ark.tools package (its folder added to the
    package's path), found by the discovery the registry runs on its first read."""
    (tmp_path / "count_nodes.py").write_text(recipe())
    monkeypatch.setattr(ark.tools, "__path__", [*ark.tools.__path__, str(tmp_path)])
    found = tool_registry.discover("ark.tools")
    yield found
    tool_registry.unregister("count_nodes")
    sys.modules.pop("ark.tools.count_nodes", None)


def test_a_tool_module_reaches_schema_prompt_switch_stats_and_figures(tmp_path, graph, index, tool_module):
    assert [t.name for t in tool_module] == ["count_nodes", "explore_neighbors", "find_paths", "finish", "search_graph",
                                             "select"]
    assert tool_registry.graph_tool_names() == ["search_graph", "explore_neighbors", "find_paths", "count_nodes"]
    toolset = ToolSet(graph, index)
    assert toolset.openai_tools()[2] == {"type": "function", "function": {
        "name": "count_nodes", "description": "Count the nodes of one type.",
        "parameters": {"type": "object", "properties": {"node_type": {"type": "string", "description": "A node type."}},
                       "required": ["node_type"], "additionalProperties": False}}}
    drugs = toolset.call("count_nodes", {"node_type": "drug"})
    assert (drugs.observation, drugs.node_ids) == ("2 nodes of type drug", [6, 7])
    rock = toolset.call("count_nodes", {"node_type": "rock"})
    assert rock.observation.startswith("Error: unknown node type 'rock'; use one of disease, gene/protein")
    assert toolset.call("count_nodes", {"type": "drug"}).error.startswith("count_nodes has no argument \"type\"")

    prompt = system_prompt(graph, "v1", toolset.tool_names)
    assert "- `count_nodes` — counts the nodes of one node type." in prompt
    off = ToolSet(graph, index, ToolConfig(switches={"count_nodes": False}))
    assert off.tool_names == ["search_graph", "explore_neighbors"]
    assert system_prompt(graph, "v1", off.tool_names).endswith(
        "in this run count_nodes is not available; use only: search_graph, explore_neighbors.\n")

    script = [tool_reply(("count_nodes", {"node_type": "drug"})), tool_reply(("select", {"node_ids": [7]})),
              tool_reply(("count_nodes", {"node_type": "disease"}), ("finish", {}))]
    with ScriptedServer(script) as server:
        llm = LLMClient(BackboneConfig(provider="vllm", base_url=server.base_url, model="scripted",
                                       max_retries=0, timeout_s=5.0))
        retriever = ARKRetriever(llm, toolset, graph, AgentConfig(n_agents=1))
        out = tmp_path / "run"
        summary = run_queries(retriever, [Q(1, "Which drugs exist?", (7,))],
                              RunSettings(out_dir=out, progress=False, n_boot=10))
        sent = server.requests
    assert [t["function"]["name"] for t in sent[0]["tools"]] == \
        ["search_graph", "explore_neighbors", "count_nodes", "select", "finish"]
    assert summary["tool_calls"] == {"search_graph": 0, "explore_neighbors": 0, "count_nodes": 2}
    assert summary["metrics"]["hit@1"]["mean"] == 1.0  # 7 was shown by count_nodes, so select took it
    row = next(csv.DictReader((out / "per_query.csv").open()))
    assert (row["search_graph"], row["count_nodes"]) == ("0", "2")

    (out / "run.json").write_text(json.dumps({"graph": "toy", "retriever": "ark", "ablation": "full"}))
    shares = figures.tool_share_data(figures.load_trajectories([out])).set_index("kind")
    assert shares.loc["counting", "calls"] == 2 and shares.loc["counting", "share"] == 1.0


# ------------------------------------------------------------------ answer tools and shown ids
def clear(answer: AnswerState, args: dict) -> ToolResult:
    """An answer tool: empty the answer list."""
    answer.selected.clear()
    answer.chosen.clear()
    return ToolResult("Your list is empty.", [])


def test_an_answer_tool_is_called_like_any_other(graph, index):
    toolset = ToolSet(graph, index)
    with tool_registry.registered(Tool("clear", "Empty your answer list.", handler=clear, role="answer",
                                       kind="answer", guide="empty your answer list.")):
        script = [tool_reply(("search_graph", {"query": "Marfan syndrome"})),
                  tool_reply(("select", {"node_ids": [0, 1]}), ("clear", {}), ("select", {"node_ids": [2]})),
                  tool_reply(("finish", {}))]
        with ScriptedServer(script) as server:
            llm = LLMClient(BackboneConfig(provider="vllm", base_url=server.base_url, model="scripted",
                                           max_retries=0, timeout_s=5.0))
            ret = asyncio.run(ARKRetriever(llm, toolset, graph, AgentConfig(n_agents=1)).aretrieve("Marfan?"))
    traj = ret.trajectories[0]
    assert traj.steps[1].observations[1:] == ["Your list is empty.",
                                              "Selected 1 node(s): [2]. Your list now has 1 node(s)."]
    assert traj.selected == [2] and traj.stop_reason == "finish"
    assert "- `clear` — empty your answer list." in traj.messages[0]["content"]


def test_constrain_ids_reads_which_parameters_take_shown_ids(graph, index):
    def degree(toolset, args):
        return ToolResult(f"degree {toolset.graph.degree(toolset.as_node_id(args['node_id']))}", [])

    tool = Tool("node_degree", "The number of edges of a node.",
                (Param("node_id", {"type": "integer"}, "A node id.", required=True, shown_ids=True),),
                handler=degree)
    with tool_registry.registered(tool):
        agent = Agent(None, ToolSet(graph, index), "system", AgentConfig(constrain_ids=True))
        assert [t["function"]["name"] for t in agent.request_tools(set())] == ["search_graph", "finish"]
        offered = {t["function"]["name"]: t["function"]["parameters"] for t in agent.request_tools({3, 0})}
    assert offered["node_degree"]["properties"]["node_id"] == {"type": "integer", "description": "A node id.",
                                                                "enum": [0, 3]}
    assert offered["select"]["properties"]["node_ids"]["items"] == {"type": "integer", "enum": [0, 3]}
