"""find_paths, the third graph tool: one module and one switch (opt-in), the shortest typed paths between
two nodes (bounded, ranked, paged) on the hand-made toy graph, and a run with ``ablation=paths`` against
the scripted OpenAI-compatible server whose calls reach the trajectories, the run statistics and Figure
3's tool shares (``ark figures``)."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

from ark.prompts import system_prompt
from ark.tools import NEIGHBORS, SEARCH, ToolConfig, ToolSet
from ark.tools import find_paths as fp
from tests.helpers.toy_graph import graph, index  # noqa: F401  (fixtures)

REPO = Path(__file__).resolve().parents[1]
KG = REPO / "tests" / "data" / "tables_kg"
ON = ToolConfig(switches={"find_paths": True})


def paths_of(observation: str) -> list[list[int]]:
    """The node ids of each numbered path line, in order."""
    return [[int(x) for x in re.findall(r"\[(\d+)\]", line)]
            for line in observation.splitlines() if re.match(r"\d+\. ", line)]


def test_off_by_default_on_with_its_switch(graph, index):
    assert ToolSet(graph, index).tool_names == [SEARCH, NEIGHBORS]
    assert "find_paths" not in system_prompt(graph, "v1", [SEARCH, NEIGHBORS])
    tools = ToolSet(graph, index, ON)
    assert tools.tool_names == [SEARCH, NEIGHBORS, "find_paths"]
    spec = {t["function"]["name"]: t["function"] for t in tools.openai_tools()}["find_paths"]
    assert spec["parameters"]["required"] == ["source", "target"]
    assert spec["parameters"]["properties"]["source"]["type"] == "integer"
    assert spec["parameters"]["properties"]["max_hops"]["maximum"] == 3
    prompt = system_prompt(graph, "v1", tools.tool_names, tools)
    assert "- `find_paths` — links. Lists the shortest paths" in prompt and "is not available" not in prompt
    assert ToolSet(graph, index).call("find_paths", {"source": 0, "target": 3}).error.startswith(
        "there is no tool named \"find_paths\"")


# The toy graph's edges (tests/helpers/toy_graph.py), by hand: Propranolol (7) and "Abnormality of the
# cardiovascular system" (11) share no neighbor; two 3-edge paths link them: 7 -indication-> 2 (Long QT)
# -phenotype present-> 10 (Syncope) <-parent-child- 11, and 7 -indication-> 0 (Marfan) -phenotype present->
# 8 (Aortic root aneurysm) <-parent-child- 11. Degrees: Long QT 3, Syncope 2 (log 6) against Marfan 6,
# aneurysm 3 (log 18): the path through Long QT and Syncope is the more specific one.
def test_shortest_paths_ranked_by_their_intermediate_nodes(graph, index):
    tools = ToolSet(graph, index, ON)
    out = tools.call("find_paths", {"source": 7, "target": 11})
    assert out.error is None
    lines = out.observation.splitlines()
    assert lines[0] == ("find_paths source=7 (Propranolol, drug) target=11 (Abnormality of the cardiovascular system, "
                        "effect/phenotype) max_hops=3")
    assert lines[1].startswith("shortest paths have 3 hop(s); ranked by how specific")
    assert lines[2] == ("1. [7] Propranolol (drug) -indication-> [2] Long QT syndrome (disease) -phenotype present-> "
                        "[10] Syncope (effect/phenotype) <-parent-child- [11] Abnormality of the cardiovascular "
                        "system (effect/phenotype)")
    assert paths_of(out.observation) == [[7, 2, 10, 11], [7, 0, 8, 11]]
    assert lines[-1] == "showing paths 1-2 of 2 shortest paths"
    assert out.node_ids == [7, 2, 10, 11, 0, 8]          # every node of a shown path may be selected


def test_a_shorter_path_hides_longer_ones_and_both_directions_count(graph, index):
    tools = ToolSet(graph, index, ON)
    # Losartan (6) -indication-> Marfan (0), FBN1 (3) -associated with-> Marfan and back: one 2-edge path
    out = tools.call("find_paths", {"source": 6, "target": 3})
    assert paths_of(out.observation) == [[6, 0, 3]]
    assert "-indication-> [0] Marfan syndrome (disease) -associated with-> / <-associated with- [3] FBN1" in out.observation
    direct = tools.call("find_paths", {"source": 3, "target": 0})
    assert "the two nodes are linked directly." in direct.observation and paths_of(direct.observation) == [[3, 0]]


def test_filters_bounds_and_pages(graph, index, monkeypatch):
    tools = ToolSet(graph, index, ON, result_cache=0)   # the limits below change between calls of the same arguments
    assert paths_of(tools.call("find_paths", {"source": 7, "target": 11,
                                              "relations": ["indication", "phenotype present", "parent-child"]})
                    .observation) == [[7, 2, 10, 11], [7, 0, 8, 11]]
    none = tools.call("find_paths", {"source": 7, "target": 11, "relations": ["indication", "phenotype present"]})
    assert none.node_ids == [] and none.observation.endswith(
        "No path of at most 3 hop(s) over the relations indication, phenotype present links these two nodes.")
    assert "No path of at most 2 hop(s) over any relation" in tools.call(
        "find_paths", {"source": 7, "target": 11, "max_hops": 2}).observation
    first = tools.call("find_paths", {"source": 7, "target": 11, "k": 1})
    assert paths_of(first.observation) == [[7, 2, 10, 11]]
    assert first.observation.splitlines()[-1] == ("showing paths 1-1 of 2 shortest paths; call find_paths again with "
                                                  "the same source, target and filters and offset=1 for the next ones")
    second = tools.call("find_paths", {"source": 7, "target": 11, "k": 1, "offset": 1})
    assert second.observation.splitlines()[2].startswith("2. [7] Propranolol") and paths_of(second.observation) == [[7, 0, 8, 11]]
    monkeypatch.setattr(fp, "MAX_PATHS", 1)                  # enumerate one, count both
    capped = tools.call("find_paths", {"source": 7, "target": 11})
    assert "note: the search found more than 1 paths; paths may be missing" in capped.observation
    assert capped.observation.splitlines()[-1] == "showing paths 1-1 of at least 2 shortest paths"
    monkeypatch.setattr(fp, "MAX_ROWS", 0)                   # the endpoints' rows already exceed it
    stopped = tools.call("find_paths", {"source": 7, "target": 11})
    assert "note: the search stopped after reading 0 adjacency rows; paths may be missing" in stopped.observation
    assert "No path of at most 3 hop(s)" in stopped.observation and stopped.node_ids == []


@pytest.mark.parametrize("args,error", [
    ({"source": 7, "target": 7}, "source and target are the same node (7); give two different nodes."),
    ({"source": 7, "target": 11, "max_hops": 4}, "max_hops must be 1, 2 or 3, got 4."),
    ({"source": 7, "target": 99}, "target 99 does not exist; use an id shown in an earlier result (ids run from 0 to 11)."),
    ({"source": 7}, "find_paths needs the argument target; its arguments are: source, target, max_hops, relations, k, offset."),
    ({"source": 7, "target": 11, "relations": ["treats"]}, 'relations names the unknown relation "treats"; use only'),
])
def test_bad_calls_are_one_line(graph, index, args, error):
    out = ToolSet(graph, index, ON).call("find_paths", args)
    assert out.error.startswith(error) and "\n" not in out.observation


def test_the_graphs_own_ids_in_and_out(tmp_path):
    from ark.data.tables.source import TablesSource
    from ark.search.bm25 import load_index

    source = TablesSource(KG, root=tmp_path / "data")
    g = source.graph()
    tools = ToolSet(g, load_index(g, source.cache_dir), ON)
    out = tools.call("find_paths", {"source": "P1", "target": "A2", "max_hops": 2})
    assert out.observation.splitlines()[2] == ("1. [P1] Sparse Retrieval Revisited (paper) <-cites- [P2] Graph Agents "
                                               "for Multi-hop Questions (paper) <-writes- [A2] Tomas Okafor (author)")
    assert out.node_ids == [g.node_index(x) for x in ("P1", "P2", "A2")]


# --- a run that offers it ------------------------------------------------------------------------------
def search_paths_select(request: dict):
    """Scripted policy: search the question, ask for the paths between the first two hits, select the
    nodes of the shown paths, finish."""
    from tests.helpers.scripted_server import first_user_message, shown_ids, tool_reply

    msgs = request["messages"]
    step = sum(m["role"] == "assistant" for m in msgs)
    tools = [m["content"] for m in msgs if m["role"] == "tool"]
    if step == 0:
        return tool_reply((SEARCH, {"query": first_user_message(request), "k": 5}))
    if step == 1:
        hits = shown_ids(tools[-1])
        return tool_reply(("find_paths", {"source": hits[0], "target": hits[1]}))
    on_paths = [x for line in tools[-1].splitlines() if re.match(r"\d+\. ", line)
                for x in re.findall(r"\[([^\]]+)\]", line)]
    return tool_reply(("select", {"node_ids": list(dict.fromkeys(on_paths))}), ("finish", {}))


@pytest.mark.commands
def test_a_run_offering_find_paths_records_its_calls_and_figure_3_shows_them(tmp_path, capsys):
    from ark.cli.main import main
    from ark.config.compose import compose
    from ark.config.evaluation import run
    from tests.helpers.policies import search_explore_select
    from tests.helpers.scripted_server import ScriptedServer

    def one(policy, *extra):
        with ScriptedServer(responder=policy) as server:
            cfg = compose(["graph=tables", f"graph.path={KG}", "graph.name=kg", "backbone=scripted",
                           f"backbone.base_url={server.base_url}", "budget=t5_n1", f"paths.data={tmp_path}/data",
                           f"paths.runs={tmp_path}/runs", f"paths.llm_cache={tmp_path}/llm.sqlite",
                           "progress=false", "n_boot=20", *extra])
            summary = run(cfg)
            return summary, Path(cfg.out_dir), server.requests

    full, _, _ = one(search_explore_select)
    summary, out, requests = one(search_paths_select, "ablation=paths")
    assert out.name == "ark-scripted-t5_n1-paths_test" and summary["complete"] and summary["n_ok"] == 5
    assert [t["function"]["name"] for t in requests[0]["tools"]] == [SEARCH, NEIGHBORS, "find_paths", "select", "finish"]
    assert "- `find_paths` — links." in requests[0]["messages"][0]["content"]
    assert json.loads((out / "run.json").read_text())["identity"]["ablation.tools.switches.find_paths"] is True
    # one search and one find_paths per query
    assert summary["tool_calls"] == {SEARCH: 5, NEIGHBORS: 0, "find_paths": 5}
    assert summary["tool_share"]["find_paths"] == 0.5
    assert "find_paths" not in full["tool_calls"]                      # the paper's toolset: its own columns
    row = next(csv.DictReader((out / "per_query.csv").open()))
    assert (row[SEARCH], row["find_paths"]) == ("1", "1")
    traj = json.loads(next((out / "trajectories").iterdir()).read_text())[0]
    step = traj["steps"][1]
    assert step["tool_calls"][0]["name"] == "find_paths" and step["observations"][0].startswith("find_paths source=")
    assert set(traj["selected"]) == set(step["node_ids"][0])           # the path nodes, selected by their ids

    assert main(["figures", str(tmp_path / "runs"), "--out", str(tmp_path / "fig")]) == 0
    capsys.readouterr()
    rows = list(csv.DictReader((tmp_path / "fig" / "fig3_tool_use.csv").open()))
    paths = {r["kind"]: r for r in rows if r["source"] == "ARK tool calls (With find_paths)"}
    assert set(paths) == {"text", "relational", "paths"}
    assert (paths["paths"]["calls"], float(paths["paths"]["share"])) == ("5", 0.5)
    assert float(paths["relational"]["share"]) == 0.0
    plain = {r["kind"]: r for r in rows if r["source"] == "ARK tool calls"}
    assert set(plain) == {"text", "relational"} and float(plain["relational"]["share"]) == 0.5
    assert (tmp_path / "fig" / "fig3_tool_use.png").stat().st_size > 0
