"""Tests of ark.tools.toolset / ark.observation on the toy graph: rankings, filters, schemas, bad input, golden text.

Regenerate the golden observations with ``ARK_REGEN_GOLDEN=1 pytest tests/test_tools.py``.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ark.data.graph import KnowledgeGraph
from ark.observation import approx_tokens
from ark.search.bm25 import BM25Index
from ark.tools import NEIGHBORS, SEARCH, ToolConfig, ToolResult, ToolSet
from tests.helpers.toy_graph import NODE_TYPES, RELATIONS, graph, index  # graph, index: shared fixtures

GOLDEN = Path(__file__).parent / "golden"


@pytest.fixture(scope="module")
def tools(graph, index):
    return ToolSet(graph, index, ToolConfig())


def ok(result: ToolResult) -> ToolResult:
    assert result.error is None, result.observation
    return result


def err(result: ToolResult) -> str:
    assert result.error is not None and result.node_ids == [], result.observation
    assert result.observation.startswith("Error: ")
    return result.error


def footer(result: ToolResult) -> tuple[int, int]:
    m = re.search(r"^showing (\d+) of (\d+) ", result.observation, re.M)
    assert m, result.observation
    return int(m.group(1)), int(m.group(2))


def line_of(result: ToolResult, node: int) -> str:
    return next(line for line in result.observation.splitlines() if line.startswith(f"[{node}] "))


# ------------------------------------------------------------------------------ search_graph
def test_search_known_ranking_and_default_k(tools):
    r = ok(tools.call(SEARCH, {"query": "collagen"}))
    assert r.node_ids == [4, 1]
    assert footer(r) == (2, 2)
    # "heart" is in 6 nodes; default k = 5; ties (same score) by lower id
    r = ok(tools.call(SEARCH, {"query": "heart rhythm"}))
    assert r.node_ids[0] == 2 and len(r.node_ids) == 5
    assert footer(r) == (5, 6)


def test_search_type_filter_and_k(tools):
    assert ok(tools.call(SEARCH, {"query": "fainting"})).node_ids == [10, 2]
    assert ok(tools.call(SEARCH, {"query": "fainting", "node_types": ["disease"]})).node_ids == [2]
    assert ok(tools.call(SEARCH, {"query": "fainting", "node_types": "effect/phenotype"})).node_ids == [10]
    assert ok(tools.call(SEARCH, {"query": "heart", "k": 2})).node_ids == tools.call(SEARCH, {"query": "heart"}).node_ids[:2]


def test_search_line_shows_id_name_type_score_snippet(tools):
    r = ok(tools.call(SEARCH, {"query": "collagen"}))
    line = line_of(r, 4)
    assert line.startswith("[4] COL5A1 (gene/protein) score=")
    assert "Collagen type V" in line


def test_search_no_match_is_not_an_error(tools):
    r = ok(tools.call(SEARCH, {"query": "zzzunseen"}))
    assert r.node_ids == [] and footer(r) == (0, 0) and "No node matches" in r.observation


# ------------------------------------------------------------------------------ explore_neighbors
def test_neighbors_without_query_in_id_order_with_all_relations(tools):
    r = ok(tools.call(NEIGHBORS, {"node_id": 0}))
    assert r.node_ids == [3, 6, 7, 8, 9]
    assert footer(r) == (5, 5)
    # FBN1 is linked both ways by "associated with": listed once, with both directions
    assert "| -> associated with, <- associated with |" in line_of(r, 3)
    assert "| <- indication |" in line_of(r, 6)
    assert "| -> phenotype present |" in line_of(r, 8)
    assert "score=" not in r.observation


@pytest.mark.parametrize("args, expected", [
    ({"node_id": 0, "node_types": ["drug"]}, [6, 7]),
    ({"node_id": 0, "relations": ["phenotype present"]}, [8, 9]),
    ({"node_id": 0, "node_types": ["gene/protein"], "relations": ["associated with"]}, [3]),
    ({"node_id": 3, "node_types": ["effect/phenotype"], "relations": ["associated with"]}, [8]),
    ({"node_id": 8, "relations": ["associated with", "phenotype present"]}, [0, 3]),
    ({"node_id": 0, "node_types": ["drug"], "relations": ["target"]}, []),
    ({"node_id": 7, "query": "heart rhythm"}, [2, 5, 0]),
    ({"node_id": 7, "query": "heart rhythm", "node_types": ["disease"]}, [2, 0]),
    ({"node_id": 7, "query": "heart rhythm", "relations": ["target"]}, [5]),
    ({"node_id": 7, "query": "heart rhythm", "node_types": ["disease"], "relations": ["indication"]}, [2, 0]),
    ({"node_id": 11, "query": "fainting"}, [10, 8]),
    ({"node_id": 0, "query": "loose joints", "k": 1}, [9]),
])
def test_neighbors_known_rankings(tools, args, expected):
    r = ok(tools.call(NEIGHBORS, args))
    assert r.node_ids == expected


def test_neighbors_query_ranking_uses_global_scores(tools, index):
    r = ok(tools.call(NEIGHBORS, {"node_id": 0, "query": "heart"}))
    scores = index.score("heart", np.array(r.node_ids))
    full = index.full_scores("heart")
    np.testing.assert_allclose(scores, full[r.node_ids], atol=1e-6)
    assert (np.diff(scores) <= 0).all()
    for i, s in zip(r.node_ids, scores):
        assert f"score={s:.3f}" in line_of(r, i)
    assert "2 of 5 contain query terms" in r.observation


def test_neighbors_total_counts_all_matches_when_k_is_smaller(tools):
    r = ok(tools.call(NEIGHBORS, {"node_id": 0, "k": 2}))
    assert r.node_ids == [3, 6] and footer(r) == (2, 5)


def test_neighbors_no_match_lists_what_is_there(tools):
    r = ok(tools.call(NEIGHBORS, {"node_id": 0, "node_types": ["drug"], "relations": ["target"]}))
    assert footer(r) == (0, 0)
    assert "drug (2)" in r.observation and "indication (2)" in r.observation


def test_neighbors_self_loop_and_multi_relations():
    g = KnowledgeGraph.from_edges(
        "loops", ["a", "b"], [0, 1, 1], ["zero", "one", "two"], ["x alpha", "y beta", "z gamma"],
        ["r", "s"], src=[0, 0, 1, 0, 2], dst=[0, 1, 0, 1, 0], rel=[0, 0, 0, 1, 1])
    t = ToolSet(g, BM25Index.build(g.texts()))
    r = ok(t.call(NEIGHBORS, {"node_id": 0}))
    assert r.node_ids == [1, 2] and footer(r) == (2, 2)
    # every r edge is stored both ways (0-0, 0-1 and 1-0): its direction says nothing and is left out;
    # s is stored one way, so its arrows stay, and so does the legend
    assert g.both_ways_relations == ["r"]
    assert "| r, -> s |" in line_of(r, 1)
    assert "| <- s |" in line_of(r, 2)
    assert "(-> r: edge 0 -r-> neighbor" in r.observation


def test_neighbors_of_a_graph_stored_both_ways_show_no_arrows():
    # PRIME and the demo store every edge in both directions: "-> r, <- r" on every line would carry
    # no information, so lines name the relation only and the arrow legend is left out
    g = KnowledgeGraph.from_edges(
        "sym", ["a", "b"], [0, 1, 1], ["zero", "one", "two"], ["x alpha", "y beta", "z gamma"],
        ["r", "s"], src=[0, 1, 0, 2, 0, 1], dst=[1, 0, 2, 0, 1, 0], rel=[0, 0, 1, 1, 1, 1])
    assert g.both_ways_relations == ["r", "s"]
    r = ok(ToolSet(g, BM25Index.build(g.texts())).call(NEIGHBORS, {"node_id": 0}))
    assert "| r, s |" in line_of(r, 1) and "| s |" in line_of(r, 2)
    assert "->" not in r.observation and "<-" not in r.observation


def test_stark_edges_read_a_nodes_neighbors_from_its_own_stored_edges():
    """edges="stark": 0 -r1-> 7, 0 -r1-> 9, 7 -r0-> 0, 9 -r0-> 0 is symmetric, so stark-qa keeps it as
    stored, and its get_neighbor_nodes(0, "r0") reads node 0's row of the r0 adjacency: empty. The
    tool answers alike (7 and 9 are r1 neighbors of 0; 0 is an r0 neighbor of 7), with no arrows;
    edges="stored" keeps both directions, arrows included."""
    from ark.data.stark import graph_with_edges

    def make(edges):
        return graph_with_edges("mixed", ["n"], [0] * 10, [f"n{i}" for i in range(10)], [f"doc {i}" for i in range(10)],
                                ["r0", "r1"], [0, 0, 7, 9], [7, 9, 0, 0], [1, 1, 0, 0], edges=edges)

    g, stored = make("stark"), make("stored")
    assert g.outgoing_only and not stored.outgoing_only
    assert g.neighbors(0, relations=["r0"]).nodes.tolist() == []
    assert g.neighbors(0, relations=["r1"]).nodes.tolist() == [7, 9]
    assert g.neighbors(7, relations=["r0"]).nodes.tolist() == [0] and g.neighbors(7, relations=["r1"]).nodes.tolist() == []
    assert g.neighbors(0).nodes.tolist() == [7, 9] and g.neighbors(0).outgoing.all()
    assert stored.neighbors(0, relations=["r0"]).nodes.tolist() == [7, 9]
    t = ToolSet(g, BM25Index.build(g.texts()))
    r = ok(t.call(NEIGHBORS, {"node_id": 0}))
    assert r.node_ids == [7, 9] and "| r1 |" in line_of(r, 7) and "->" not in r.observation
    assert ok(t.call(NEIGHBORS, {"node_id": 0, "relations": ["r0"]})).node_ids == []
    assert "| r0 |" in line_of(ok(t.call(NEIGHBORS, {"node_id": 7})), 0)
    r = ok(ToolSet(stored, BM25Index.build(stored.texts())).call(NEIGHBORS, {"node_id": 0}))
    assert "-> r1, <- r0" in line_of(r, 7)


def test_neighbors_stopword_query_falls_back_to_id_order(tools):
    r = ok(tools.call(NEIGHBORS, {"node_id": 0, "query": "the of"}))
    assert r.node_ids == [3, 6, 7, 8, 9] and "no searchable words" in r.observation
    assert ok(tools.call(NEIGHBORS, {"node_id": 0, "query": ""})).node_ids == [3, 6, 7, 8, 9]


# ------------------------------------------------------------------------------ schemas / ablations
def _params(tools: ToolSet) -> dict[str, tuple[set, list]]:
    out = {}
    for t in tools.openai_tools():
        assert t["type"] == "function"
        p = t["function"]["parameters"]
        assert p["type"] == "object" and p["additionalProperties"] is False
        out[t["function"]["name"]] = (set(p["properties"]), p["required"])
    return out


@pytest.mark.parametrize("config, expected", [
    (ToolConfig(), {SEARCH: ({"query", "k", "node_types"}, ["query"]),
                    NEIGHBORS: ({"node_id", "query", "node_types", "relations", "k"}, ["node_id"])}),
    (ToolConfig(neighbors=False), {SEARCH: ({"query", "k", "node_types"}, ["query"])}),
    (ToolConfig(neighbor_query=False), {SEARCH: ({"query", "k", "node_types"}, ["query"]),
                                        NEIGHBORS: ({"node_id", "node_types", "relations", "k"}, ["node_id"])}),
    (ToolConfig(type_filter=False), {SEARCH: ({"query", "k", "node_types"}, ["query"]),
                                     NEIGHBORS: ({"node_id", "query", "k"}, ["node_id"])}),
])
def test_ablation_schemas(graph, index, config, expected):
    t = ToolSet(graph, index, config)
    assert _params(t) == expected
    assert t.tool_names == list(expected)


def test_schema_enums_come_from_the_graph(tools):
    fn = {t["function"]["name"]: t["function"]["parameters"]["properties"] for t in tools.openai_tools()}
    assert fn[NEIGHBORS]["node_types"]["items"]["enum"] == NODE_TYPES
    assert fn[NEIGHBORS]["relations"]["items"]["enum"] == RELATIONS
    assert fn[SEARCH]["k"]["maximum"] == 50
    json.dumps(tools.openai_tools())  # serialisable as sent to the API


def test_ablated_parameters_and_tools_are_rejected(graph, index):
    t = ToolSet(graph, index, ToolConfig(neighbor_query=False, type_filter=False))
    assert "its arguments are: node_id, k" in err(t.call(NEIGHBORS, {"node_id": 0, "query": "heart"}))
    assert "has no argument \"relations\"" in err(t.call(NEIGHBORS, {"node_id": 0, "relations": ["target"]}))
    t = ToolSet(graph, index, ToolConfig(neighbors=False))
    assert "call one of: search_graph" in err(t.call(NEIGHBORS, {"node_id": 0}))


# ------------------------------------------------------------------------------ bad input
def test_node_id_as_string_works(tools):
    assert ok(tools.call(NEIGHBORS, {"node_id": "7"})).node_ids == ok(tools.call(NEIGHBORS, {"node_id": 7})).node_ids
    assert ok(tools.call(NEIGHBORS, '{"node_id": " 7 "}')).node_ids == [0, 2, 5]
    assert ok(tools.call(NEIGHBORS, {"node_id": 7.0})).node_ids == [0, 2, 5]


@pytest.mark.parametrize("name, args, expected", [
    (NEIGHBORS, {"node_id": "abc"}, 'node_id must be an integer, not "abc"; send a number such as 3'),
    (NEIGHBORS, {"node_id": True}, "node_id must be an integer"),
    (NEIGHBORS, {"node_id": 12}, "node_id 12 does not exist; use an id shown in an earlier result (ids run from 0 to 11)"),
    (NEIGHBORS, {"node_id": -1}, "node_id -1 does not exist"),
    (NEIGHBORS, {"node_id": 0, "node_types": ["planet"]},
     "node_types names the unknown node type \"planet\"; use only these node types: \"disease\", "
     "\"gene/protein\", \"drug\", \"effect/phenotype\""),
    (NEIGHBORS, {"node_id": 0, "relations": ["likes"]}, 'use only these relations: "associated with", "indication"'),
    (NEIGHBORS, {"node_id": 0, "relations": 5}, "relations must be a list of relation names"),
    (NEIGHBORS, {"node": 0}, "explore_neighbors has no argument \"node\"; its arguments are: node_id, query"),
    (NEIGHBORS, {}, "explore_neighbors needs the argument node_id; its arguments are"),
    (NEIGHBORS, {"node_id": 0, "k": "many"}, 'k must be an integer, not "many"'),
    (SEARCH, {"query": ""}, "has no searchable words"),
    (SEARCH, {"query": "the and of"}, "has no searchable words"),
    (SEARCH, {"query": ["heart"]}, "query must be a string of keywords"),
    (SEARCH, {"q": "heart"}, "its arguments are: query, k, node_types"),
    (SEARCH, {"query": "heart", "node_types": ["tissue"]}, "use only these node types"),
    (SEARCH, '{"query": "heart"', "the arguments of search_graph are not valid JSON (Expecting ',' delimiter "
                                  "at character 17); send one JSON object with the keys query, k, node_types"),
    (SEARCH, "[1, 2]", "must be one JSON object with the keys query, k, node_types, not [1, 2]"),
    ("find", {"query": "heart"}, "there is no tool named \"find\"; call one of: search_graph, explore_neighbors"),
])
def test_bad_input_gives_error_observation(tools, name, args, expected):
    assert expected in err(tools.call(name, args))


@pytest.mark.parametrize("k, used, note", [(0, 1, "k=0 is below 1; using k=1"),
                                           (-3, 1, "k=-3 is below 1; using k=1"),
                                           (10**12, 50, "k=1000000000000 is above the maximum 50; using k=50"),
                                           ("3", 3, None)])
def test_k_is_clamped_with_a_note(tools, k, used, note):
    r = ok(tools.call(SEARCH, {"query": "heart", "k": k}))
    assert len(r.node_ids) == min(used, 6)
    if note:
        assert note in r.observation


def test_type_names_tolerate_case_and_empty_lists(tools):
    assert ok(tools.call(NEIGHBORS, {"node_id": 0, "node_types": [" Drug "]})).node_ids == [6, 7]
    assert ok(tools.call(NEIGHBORS, {"node_id": 0, "node_types": [], "relations": []})).node_ids == [3, 6, 7, 8, 9]


# ------------------------------------------------------------------------------ token budget
def test_observation_budget_cuts_lines_and_says_so(graph, index):
    full = ok(ToolSet(graph, index).call(NEIGHBORS, {"node_id": 0}))
    budget = 120
    small = ToolSet(graph, index, ToolConfig(max_observation_tokens=budget))
    r = ok(small.call(NEIGHBORS, {"node_id": 0}))
    assert 0 < len(r.node_ids) < 5 and r.node_ids == full.node_ids[:len(r.node_ids)]
    assert approx_tokens(r.observation) <= budget
    assert f"showing {len(r.node_ids)} of 5 neighbors (cut to the {budget}-token observation budget)" in r.observation
    assert all(f"[{i}] " in r.observation for i in r.node_ids)


# ------------------------------------------------------------------------------ property tests
json_scalars = st.one_of(st.none(), st.booleans(), st.integers(min_value=-10**20, max_value=10**20),
                         st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=30),
                         st.sampled_from(["0", "7", "11", "12", "-1", " 3 ", "abc", "1e3", "2.0", "the", "heart"]),
                         st.sampled_from(NODE_TYPES + RELATIONS))
json_values = st.recursive(json_scalars, lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=3),
                           max_leaves=8)
arg_names = st.sampled_from(["query", "k", "node_id", "node_types", "relations", "q", "id", ""]) | st.text(max_size=10)
arguments = st.one_of(st.dictionaries(arg_names, json_values, max_size=5),
                      st.dictionaries(arg_names, json_values, max_size=5).map(json.dumps),
                      st.text(max_size=40), json_values)
tool_names = st.sampled_from([SEARCH, NEIGHBORS]) | st.text(max_size=12) | st.none() | st.integers()


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=tool_names, args=arguments)
def test_no_input_crashes_a_tool(tools, name, args):
    r = tools.call(name, args)
    assert isinstance(r, ToolResult) and isinstance(r.observation, str) and r.observation
    if r.error is None:
        assert all(0 <= i < 12 for i in r.node_ids)
        assert re.search(r"^showing \d+ of \d+ ", r.observation, re.M)
    else:
        assert r.node_ids == [] and r.observation == f"Error: {r.error}"


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(node=st.integers(min_value=0, max_value=11), query=st.none() | st.text(max_size=30),
       types=st.none() | st.lists(st.sampled_from(NODE_TYPES), max_size=3),
       rels=st.none() | st.lists(st.sampled_from(RELATIONS), max_size=3), k=st.integers(-5, 200))
def test_valid_neighbor_calls_return_filtered_neighbors(tools, graph, node, query, types, rels, k):
    args = {"node_id": node, "query": query, "node_types": types, "relations": rels, "k": k}
    r = ok(tools.call(NEIGHBORS, {a: v for a, v in args.items() if v is not None}))
    edges = graph.neighbors(node, types or None, rels or None)
    allowed = set(edges.nodes.tolist()) - {node}
    assert set(r.node_ids) <= allowed and len(set(r.node_ids)) == len(r.node_ids)
    assert footer(r) == (len(r.node_ids), len(allowed))
    assert len(r.node_ids) == min(max(k, 1), 100, len(allowed))


# ------------------------------------------------------------------------------ golden observations
GOLDEN_CALLS = [
    (SEARCH, {"query": "heart rhythm disorder"}),
    (SEARCH, {"query": "loose joints", "k": 3, "node_types": ["disease", "effect/phenotype"]}),
    (SEARCH, {"query": "heart", "k": 0}),
    (SEARCH, {"query": "zzzunseen"}),
    (NEIGHBORS, {"node_id": 0}),
    (NEIGHBORS, {"node_id": "0", "query": "heart blood pressure"}),
    (NEIGHBORS, {"node_id": 7, "query": "heart rhythm", "node_types": ["disease"], "relations": ["indication"]}),
    (NEIGHBORS, {"node_id": 11, "relations": ["parent-child"], "k": 1}),
    (NEIGHBORS, {"node_id": 0, "node_types": ["drug"], "relations": ["target"]}),
    (NEIGHBORS, {"node_id": 99}),
    (NEIGHBORS, {"node_id": 0, "relations": ["treats"]}),
    (SEARCH, "{not json"),
]


def _render_golden(tools: ToolSet) -> str:
    parts = []
    for name, args in GOLDEN_CALLS:
        r = tools.call(name, args)
        parts.append(f"### {name} {json.dumps(args)}\n{r.observation}\nnode_ids={r.node_ids}\n")
    return "\n".join(parts)


def test_golden_observations(tools):
    path = GOLDEN / "toy_observations.txt"
    text = _render_golden(tools)
    if os.environ.get("ARK_REGEN_GOLDEN"):
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    assert path.exists(), "golden file missing: run ARK_REGEN_GOLDEN=1 pytest tests/test_tools.py"
    assert text == path.read_text()


def test_snippet_centres_on_matched_terms(index):
    from ark.observation import ELLIPSIS, Snippeter

    snip = Snippeter(index.tokenizer, width=60)
    text = "- name: X\n- details: " + " ".join(f"filler{i}" for i in range(60)) + " the running dog barks " + \
        " ".join(f"tail{i}" for i in range(40))
    s = snip(text, index.tokenizer("runs dogs"), drop=("X",))
    assert "running dog" in s and s.startswith(ELLIPSIS) and s.endswith(ELLIPSIS)
    assert len(s) <= 60 + 30
    assert snip(text, drop=("X",)).startswith("details: filler0")  # no terms: text start, name line dropped


@settings(max_examples=200, deadline=None)
@given(scores=st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.5, 3.0]), max_size=40), k=st.integers(1, 45))
def test_top_k_equals_stable_sort(scores, k):
    from ark.tools.toolset import _top_k

    s = np.array(scores, dtype=np.float32)
    assert _top_k(s, k).tolist() == np.argsort(-s, kind="stable")[:k].tolist()


def test_snippet_of_text_without_spaces_stays_short(index):
    from ark.observation import Snippeter

    s = Snippeter(index.tokenizer, width=50)("x" * 5000 + " heart " + "y" * 5000, index.tokenizer("heart"))
    assert "heart" in s and len(s) <= 50 + 2 * 20 + 2


def test_config_and_index_are_checked_at_setup(graph, index):
    with pytest.raises(ValueError, match="search_k must be >= 1"):
        ToolConfig(search_k=0)
    with pytest.raises(ValueError, match="above its maximum"):
        ToolConfig(neighbors_k=30, neighbors_k_max=20)
    with pytest.raises(ValueError, match="12 nodes"):
        ToolSet(graph, BM25Index.build(["a bb", "cc dd"]))


def test_a_repeated_call_gets_the_first_result_and_the_cache_keeps_the_last_calls(graph, index, monkeypatch):
    plain = ToolSet(graph, index, ToolConfig(), result_cache=0)
    ts = ToolSet(graph, index, ToolConfig(), result_cache=2)
    runs = []
    real = ts._run
    monkeypatch.setattr(ts, "_run", lambda name, args: runs.append((name, args)) or real(name, args))
    a = {"query": "kinase", "k": 3}
    b = {"node_id": 0, "query": "heart"}
    first = ts.call(SEARCH, a)
    assert ts.call(SEARCH, {"k": 3, "query": "kinase"}) is first and len(runs) == 1   # key order does not matter
    assert first == plain.call(SEARCH, a)
    assert ts.call(SEARCH, json.dumps(a)) == first and len(runs) == 2      # a JSON text is its own key
    assert ts.call(NEIGHBORS, b) == plain.call(NEIGHBORS, b) and len(runs) == 3
    assert ts.call(SEARCH, a) == first and len(runs) == 4                  # pushed out by the last two calls
    bad = ts.call(SEARCH, {"k": 3})
    assert bad.error and ts.call(SEARCH, {"k": 3}) is bad                  # rejected calls are results too
    odd = {"query": "kinase", "k": object()}                                # not JSON: run every time
    assert ts.call(SEARCH, odd).error and ts.call(SEARCH, odd).error and runs[-2:] == [(SEARCH, odd)] * 2
    with pytest.raises(ValueError, match="result_cache"):
        ToolSet(graph, index, ToolConfig(), result_cache=-1)
