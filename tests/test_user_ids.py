"""The ids the tools show and take (`ark.tools.ids`): a graph with ids of its own (tables, RDF) speaks them in
every observation and argument, the agent's included; STaRK-like graphs keep the paper's integer ids and
schemas; the switch (``ablation.tools.user_ids``) is part of a run's identity where it changes what the
agent reads. Runs the real agent against the scripted OpenAI-compatible server."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest

from ark.agent import Agent, AgentConfig, ARKRetriever
from ark.data.tables.source import TablesSource
from ark.llm.client import BackboneConfig, LLMClient
from ark.search.bm25 import load_index
from ark.tools import NEIGHBORS, SEARCH, NodeIds, ToolConfig, ToolSet
from tests.helpers.scripted_server import ScriptedServer, tool_reply
from tests.helpers.toy_graph import graph, index  # noqa: F401  (fixtures)

REPO = Path(__file__).resolve().parents[1]
KG = REPO / "tests" / "data" / "tables_kg"


@pytest.fixture(scope="module")
def kg(tmp_path_factory):
    source = TablesSource(KG, root=tmp_path_factory.mktemp("data"))
    g = source.graph()
    return g, load_index(g, source.cache_dir)


def schemas(tools: ToolSet) -> dict:
    agent = Agent(None, tools, "system")
    return {t["function"]["name"]: t["function"]["parameters"]["properties"] for t in agent.tools}


def test_a_graph_with_ids_of_its_own_shows_and_takes_them(kg):
    g, index = kg
    tools = ToolSet(g, index)                                   # the default: the id column's ids
    assert tools.ids.space == "user" and tools.ids.show(0) == "P1"
    props = schemas(tools)
    assert props[NEIGHBORS]["node_id"]["type"] == "string" and props["select"]["node_ids"]["items"] == {"type": "string"}
    hits = tools.call(SEARCH, {"query": "sparse retrieval BM25", "k": 2})
    assert hits.observation.splitlines()[1].startswith("[P1] Sparse Retrieval Revisited (paper)")
    assert hits.node_ids[0] == g.node_index("P1") == 0          # what the records keep: internal ids
    around = tools.call(NEIGHBORS, {"node_id": " A2 ", "relations": ["writes"]})
    assert around.observation.startswith("explore_neighbors node_id=A2 (Tomas Okafor, author) relations=")
    assert "[P2] Graph Agents for Multi-hop Questions (paper) | -> writes" in around.observation
    assert tools.call(NEIGHBORS, {"node_id": 13}).error == (
        "node_id 13 is not the id of a node of this graph; use an id shown in brackets in an earlier result.")
    assert tools.call(NEIGHBORS, {"node_id": ["A2"]}).error.startswith("node_id must be a node id (a string")

    internal = ToolSet(g, index, ToolConfig(user_ids=False))    # the switch off: the internal ids
    assert internal.ids.space == "internal"
    assert schemas(internal)[NEIGHBORS]["node_id"]["type"] == "integer"
    assert internal.call(SEARCH, {"query": "sparse retrieval BM25", "k": 2}).observation.splitlines()[1].startswith(
        "[0] Sparse Retrieval Revisited (paper)")
    # the same observation, every id written as the internal one (A2 is node 13)
    as_internal = re.sub(r"\[([A-Z]\d+)\]", lambda m: f"[{g.node_index(m.group(1))}]", around.observation)
    assert g.node_index("A2") == 13
    assert internal.call(NEIGHBORS, {"node_id": 13, "relations": ["writes"]}).observation == as_internal.replace("A2", "13")


def test_graphs_without_ids_of_their_own_keep_the_papers_ids_and_schemas(graph, index):
    """STaRK and the demo: every setting of the switch gives the paper's integer ids, schemas and text."""
    runs = [ToolSet(graph, index, ToolConfig(user_ids=v)) for v in (None, True, False)]
    assert {t.ids.space for t in runs} == {"internal"}
    assert schemas(runs[0]) == schemas(runs[1]) == schemas(runs[2])
    assert schemas(runs[0])[NEIGHBORS]["node_id"] == {"type": "integer", "description": "Id of the node whose neighbors to list."}
    calls = [(SEARCH, {"query": "heart"}), (NEIGHBORS, {"node_id": "0", "query": "heart"}), (NEIGHBORS, {"node_id": 99})]
    for name, args in calls:
        assert len({t.call(name, args).observation for t in runs}) == 1
    assert runs[0].call(NEIGHBORS, {"node_id": 99}).error == \
        "node_id 99 does not exist; use an id shown in an earlier result (ids run from 0 to 11)."
    with pytest.raises(ValueError, match=r"ToolConfig.user_ids must be true, false or null .* got 'yes'"):
        ToolConfig(user_ids="yes")


def test_integer_ids_of_a_graph_are_shown_as_numbers(tmp_path):
    from tests.test_cli import _int_id_graph

    source = TablesSource(_int_id_graph(tmp_path), root=tmp_path / "data")
    g = source.graph()
    ids = NodeIds.for_graph(g)
    assert (ids.space, ids.json_type, ids.schema()) == ("user", "integer", {"type": "integer"})
    assert [ids.show(i) for i in range(4)] == [100, 7, 0, 55] and ids.listing([0, 2]) == "[100, 0]"
    assert ids.parse("node_id", "55") == 3 and ids.parse("node_id", 100.0) == 0 and ids.find(8) is None


def _agent_run(tools, graph, script, **config):
    with ScriptedServer(script) as server:
        llm = LLMClient(BackboneConfig(provider="vllm", base_url=server.base_url, model="scripted",
                                       max_retries=0, timeout_s=5.0))
        retriever = ARKRetriever(llm, tools, graph, AgentConfig(n_agents=1, **config))
        retrieval = asyncio.run(retriever.aretrieve("Which papers did Tomas Okafor write?"))
        return retrieval, server.requests


def test_the_agent_reads_explores_and_selects_in_the_graphs_ids(kg):
    g, index = kg
    tools = ToolSet(g, index)
    script = [tool_reply((SEARCH, {"query": "Tomas Okafor", "k": 2})),
              tool_reply((NEIGHBORS, {"node_id": "A2", "relations": ["writes"]})),
              tool_reply(("select", {"node_ids": ["P2", "A2", "P6", "ZZ", "P1", "P2"]})),
              tool_reply(("finish", {}))]
    retrieval, _ = _agent_run(tools, g, script)
    traj = retrieval.trajectories[0]
    obs = [s.observations[0] for s in traj.steps]
    assert obs[0].splitlines()[1].startswith("[A2] Tomas Okafor (author)")
    assert obs[1].startswith("explore_neighbors node_id=A2 (Tomas Okafor, author)")
    # P1 was never shown, ZZ is no node, P2 twice: skipped; the answer list holds internal ids
    assert obs[2] == ('Selected 3 node(s): ["P2", "A2", "P6"]. Error: ids ["P1"] were not shown in any observation '
                      'of this run; ["ZZ"] are not ids of nodes of this graph. Select only ids that search_graph or '
                      'explore_neighbors returned. Your list now has 3 node(s).')
    assert traj.selected == [g.node_index("P2"), g.node_index("A2"), g.node_index("P6")] == retrieval.ranking
    papers = g.neighbors(g.node_index("A2"), None, ["writes"]).nodes.tolist()   # the graph store's own answer
    assert sorted(traj.steps[1].node_ids[0]) == sorted(set(papers))


def test_constrain_ids_lists_the_shown_ids_as_the_graph_writes_them(kg):
    g, index = kg
    agent = Agent(None, ToolSet(g, index), "system", AgentConfig(constrain_ids=True))
    offered = {t["function"]["name"]: t["function"]["parameters"]["properties"] for t in agent.request_tools({13, 0})}
    assert offered[NEIGHBORS]["node_id"]["enum"] == ["P1", "A2"] and offered[NEIGHBORS]["node_id"]["type"] == "string"
    assert offered["select"]["node_ids"]["items"] == {"type": "string", "enum": ["P1", "A2"]}


def test_the_switch_is_part_of_a_runs_identity_where_it_changes_what_the_agent_reads(tmp_path):
    from ark.config.checks import setting_problems
    from ark.config.compose import compose
    from ark.config.identity import check_same_run, fingerprint, run_identity, run_info

    def info(*overrides):
        cfg = compose(list(overrides))
        out = run_info(cfg)
        out["identity"] = run_identity(cfg)
        out["fingerprint"] = fingerprint(out["identity"])
        return out

    tables = info("graph=tables")
    assert tables["identity"]["ablation.tools.user_ids"] is True            # the default, spelled out
    assert info("graph=rdf")["identity"]["ablation.tools.user_ids"] is True
    off = info("graph=tables", "+ablation.tools.user_ids=false")
    assert off["identity"]["ablation.tools.user_ids"] is False
    (tmp_path / "run.json").write_text(json.dumps(off))
    (tmp_path / "predictions.jsonl").write_text(json.dumps({"query_id": "q1", "status": "ok", "gold": [0]}) + "\n")
    with pytest.raises(SystemExit, match=r"ablation.tools.user_ids=False there, True now"):   # it holds a result
        check_same_run(tmp_path, tables)
    # STaRK and the demo show internal ids either way: the switch is no part of their identity
    demo = info("graph=demo")
    assert "ablation.tools.user_ids" not in demo["identity"]
    assert info("graph=demo", "+ablation.tools.user_ids=false")["fingerprint"] == demo["fingerprint"]
    assert "ablation.tools.user_ids" not in info("graph=tables", "retriever=bm25")["identity"]
    problems = setting_problems(compose(["graph=tables", "+ablation.tools.user_ids=maybe"]))
    assert any("bad setting in ablation.tools: ToolConfig.user_ids must be true, false or null" in p for p in problems)
