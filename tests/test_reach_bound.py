"""The bound over tool-call chains built from the question's words (`ark.analysis.reach_bound`) on the
hand-written toy graph.

Worked out by hand from tests/helpers/toy_graph.py: "hERG" occurs only in KCNH2's text (node 5), so every
search for it shows [5] (with the gene/protein filter, or none). 5's neighbors are Long QT syndrome (2,
"associated with") and Propranolol (7, "target"); 2's are 5, 7 and Syncope (10, "phenotype present");
Abnormality of the cardiovascular system (11) is next to 8 and 10 only. With neighbor calls of k=1 the
unfiltered call on 5 shows 2 alone (no neighbor text has "hERG": id order), but the filter
node_types=[drug], relations=[target] shows 7.
"""

from __future__ import annotations

import pytest

from ark.analysis import reach_bound as B
from ark.analysis import reachability as R
from ark.data.stark import Query
from ark.tools import ToolConfig, ToolSet
from tests.helpers.toy_graph import graph, index  # noqa: F401  (shared fixtures)

ONE = B.BoundSettings(ks=(1,), neighbors_k=1)


@pytest.fixture(scope="module")
def toolset(graph, index):  # noqa: F811
    return ToolSet(graph, index, ToolConfig(search_k_max=10))


def levels(rows):
    return {r.gold: r.level for r in rows}


def test_question_spans_are_the_whole_question_and_its_runs_of_words_once_per_token_sequence(toolset):
    spans = B.question_spans(toolset, "Which drug targets hERG?")
    assert spans[0] == "Which drug targets hERG?"
    assert "hERG?" in spans and "drug targets" in spans
    short = B.question_spans(toolset, "the hERG channel")
    assert short == ["the hERG channel", "the hERG", "channel"]   # "hERG channel", "hERG": tokens seen already
    assert len({tuple(toolset.index.tokenizer(s)) for s in spans}) == len(spans)
    assert B.question_spans(toolset, "aa bb cc dd", max_words=2) == ["aa bb cc dd", "aa bb", "bb cc", "cc dd",
                                                                     "aa", "bb", "cc", "dd"]


def test_each_level_is_the_first_chain_that_shows_the_gold(toolset):
    rows = B.query_bound(toolset, 7, "hERG", [2, 7, 10, 11], ONE)
    assert levels(rows) == {2: "neighbors1", 7: "neighbors1", 10: "neighbors2", 11: None}
    chain = {r.gold: r.chain for r in rows}
    assert chain[7] == ('search_graph("hERG", node_types=[\'gene/protein\']) -> '
                        'explore_neighbors(5, node_types=["drug"], relations=["target"])')
    assert chain[10].endswith('-> explore_neighbors(2, node_types=["effect/phenotype"], relations=["phenotype present"])')


def test_the_chain_it_names_shows_the_gold_when_the_tools_run_it(toolset):
    """Replay the witness chain for Propranolol with the real tools: the last call shows it."""
    first = toolset.call("search_graph", {"query": "hERG", "k": 1, "node_types": ["gene/protein"]})
    assert first.node_ids == [5]
    second = toolset.call("explore_neighbors", {"node_id": 5, "k": 1, "node_types": ["drug"], "relations": ["target"]})
    assert second.node_ids == [7]
    plain = toolset.call("explore_neighbors", {"node_id": 5, "k": 1, "query": "hERG"})
    assert plain.node_ids == [2]                 # what the question-text measure sees instead


def test_the_bound_is_at_least_the_question_text_measure(toolset):
    order = {"search": 0, "neighbors": 1, "neighbors1": 1, "hop1": 2, "neighbors2": 2, "hop2": 3, None: 4}
    for text, gold in (("hERG", [2, 7, 10, 11]), ("heart", [7, 2, 11]), ("heart disorder fainting", [0, 5, 9, 10])):
        old = {r.gold: r.level for r in R.query_reach(toolset, 0, text, gold,
                                                      R.ReachSettings(ks=(1,), neighbors_k=1, filters=("none",)))[0]}
        new = levels(B.query_bound(toolset, 0, text, gold, ONE))
        for g in gold:
            # a gold the question text shows by search or one neighbor call is shown as early by the bound
            if old[g] in ("search", "neighbors"):
                assert order[new[g]] <= order[old[g]], (text, g)
    # "heart": the question text's top hit is 11, but a search filtered to drugs shows Propranolol
    assert levels(B.query_bound(toolset, 0, "heart", [7], ONE)) == {7: "search"}


def test_the_toolset_switches_hold(graph, index):  # noqa: F811
    bare = ToolSet(graph, index, ToolConfig(search_k_max=10, type_filter=False, search_type_filter=False))
    assert levels(B.query_bound(bare, 0, "hERG", [2, 7, 10], ONE)) == {2: "neighbors1", 7: None, 10: None}
    no_neighbors = ToolSet(graph, index, ToolConfig(search_k_max=10, neighbors=False))
    assert levels(B.query_bound(no_neighbors, 0, "hERG", [5, 2], ONE)) == {5: "search", 2: None}


def test_a_smaller_k_equals_its_own_measurement(toolset):
    text, gold = "heart disorder fainting", [0, 5, 9, 10]
    both = B.query_bound(toolset, 0, text, gold, B.BoundSettings(ks=(1, 3), neighbors_k=1))
    alone = B.query_bound(toolset, 0, text, gold, B.BoundSettings(ks=(1,), neighbors_k=1))
    assert [r for r in both if r.k == 1] == alone


def test_summary_and_table(toolset):
    queries = [Query(1, "hERG", (2, 7, 10, 11)), Query(2, "fibrillin microfibrils", (3,))]
    rows = B.bound(toolset, queries, ONE)
    e = B.summarize(rows)["k1"]
    assert (e["queries"], e["gold"]) == (2, 5)
    # query 1: 0, 2, 3 of its 4 gold by level; query 2: its one gold in the search hits
    assert [e[lv]["recall"] for lv in B.LEVELS] == [0.5, (0.5 + 1) / 2, (0.75 + 1) / 2]
    assert "| 1 | 2 | 50.0% (50.0%) | 75.0% (100.0%) | 87.5% (100.0%) |" in B.markdown_table(B.summarize(rows))
    assert B.describe(rows[0]).startswith("shown by a neighbor call of a node such a search shows: search_graph(")


def test_bad_settings_name_the_fix(toolset):
    with pytest.raises(ValueError, match="ks must be"):
        B.BoundSettings(ks=(0,))
    with pytest.raises(ValueError, match="search_k_max=10"):
        B.bound(toolset, [], B.BoundSettings(ks=(20,)))
    with pytest.raises(ValueError, match="max_words must be >= 1"):
        B.BoundSettings(max_words=0)
