"""Name-first global search (`ark.search.name_match`, `SearchConfig.name_first`): the nodes a query names
come before the rest of BM25's ranking, which is otherwise unchanged.

The documents below are written so that plain BM25 ranks the node named by the query below others:
"Limb myoclonus" (node 1) is a short document that repeats "myoclonus", the node named "Myoclonus"
(node 0) a long one that says it once.
Run: pytest tests/test_name_match.py
"""

from __future__ import annotations

import numpy as np
import pytest

from ark.search.bm25 import BM25Index
from ark.search.modes import GlobalSearch, SearchConfig
from ark.search.name_match import NameIndex, names_first

NAMES = ["Myoclonus", "Limb myoclonus", "SCN1A", "Marfan syndrome", "Epilepsy", "Seizures"]
TEXTS = [
    "Myoclonus. Very brief involuntary random muscular contractions occurring at rest, in response to "
    "sensory stimuli, or accompanying voluntary movements of the arms, the legs and the trunk",
    "Limb myoclonus. Myoclonus of the limbs, myoclonus",
    "SCN1A. Sodium channel gene; variants cause epilepsy with myoclonus",
    "Marfan syndrome. A connective tissue disorder; syndrome of the aorta and the eye",
    "Epilepsy. Recurrent seizures; myoclonus in some forms",
    "Seizures. Attacks of abnormal electrical activity of the brain, with or without myoclonus",
]


@pytest.fixture(scope="module")
def index():
    return BM25Index.build(TEXTS)


@pytest.fixture(scope="module")
def names(index):
    return NameIndex.build(NAMES, index.tokenizer)


def test_plain_bm25_ranks_the_named_node_below_a_document_that_repeats_the_word(index):
    ids, _ = index.search("myoclonus", 6)
    assert ids.tolist().index(0) > 0 and ids[0] == 1


@pytest.mark.parametrize("query", ["myoclonus", "Myoclonus", "MYOCLONUS."])
def test_exact_puts_the_node_named_by_the_query_first_and_keeps_the_rest(index, names, query):
    ids, scores, total = names_first(index, names, query, 4, "exact")
    plain, plain_scores, plain_total = index.search_with_total(query, 6)
    assert ids[0] == 0 and total == plain_total
    assert ids[1:].tolist() == [i for i in plain.tolist() if i != 0][:3]     # BM25's order after it
    assert scores[0] == pytest.approx(float(plain_scores[plain.tolist().index(0)]))   # its own BM25 score


def test_exact_matches_the_same_tokens_in_any_order_and_plurals(index, names):
    assert names.tiers("syndrome, Marfan", "exact") == {3: 0}
    assert names.tiers("seizure", "exact") == {5: 0}            # stems meet: "Seizures"
    assert names.tiers("marfan", "exact") == {}                 # a part of a name is not an exact match


def test_mentioned_ranks_every_name_the_question_contains_first_longer_names_first(index, names):
    q = "Which child terms of Limb myoclonus are associated with the gene SCN1A?"
    tiers = names.tiers(q, "mentioned")
    assert set(tiers) == {0, 1, 2}                               # Myoclonus is in "Limb myoclonus" too
    assert tiers[1] < tiers[0] == tiers[2]                       # two tokens before one
    ids, _, _ = names_first(index, names, q, 5, "mentioned")
    first_two = ids[:3].tolist()
    assert first_two[0] == 1 and set(first_two[1:]) == {0, 2}
    assert names.tiers(q, "exact") == {}                         # the whole question is no node's name


def test_none_is_plain_bm25_and_a_mask_filters_the_named_nodes_too(index, names):
    plain = index.search_with_total("myoclonus", 3)
    got = names_first(index, names, "myoclonus", 3, "none")
    assert all(np.array_equal(a, b) for a, b in zip(got[:2], plain[:2])) and got[2] == plain[2]
    mask = np.array([False, True, True, True, True, True])
    ids, _, _ = names_first(index, names, "myoclonus", 3, "exact", mask)
    assert 0 not in ids.tolist() and ids.tolist() == index.search("myoclonus", 3, mask)[0].tolist()


def test_global_search_uses_the_option_and_needs_the_names(index):
    gs = GlobalSearch(index, config=SearchConfig(name_first="exact"), names=NAMES)
    assert gs.search("myoclonus", 2)[0].tolist()[0] == 0
    assert GlobalSearch(index).search("myoclonus", 2)[0].tolist()[0] == 1        # off by default
    with pytest.raises(ValueError, match=r"needs the 6 node names"):
        GlobalSearch(index, config=SearchConfig(name_first="exact"))


def test_bad_values_name_the_choices():
    with pytest.raises(ValueError, match=r"unknown search name_first 'first'; valid: none, exact, mentioned"):
        SearchConfig(name_first="first")
    with pytest.raises(ValueError, match=r"works with mode='lexical' only"):
        SearchConfig(mode="dense", name_first="exact")


def test_search_graph_tool_and_bm25_baseline_with_names_first():
    from ark.baselines import BM25Retriever
    from ark.tools import ToolConfig, ToolSet
    from tests.helpers.toy_graph import toy_graph

    graph = toy_graph()
    index = BM25Index.build(graph.texts())
    # the question names Syncope (node 10), but plain BM25 ranks Propranolol (7: "heart rate") first
    query = "syncope heart rate"
    plain_tools = ToolSet(graph, index, ToolConfig())
    assert plain_tools.call("search_graph", {"query": query, "k": 3}).node_ids[0] == 7
    search = GlobalSearch(index, config=SearchConfig(name_first="mentioned"), names=graph.names())
    tools = ToolSet(graph, index, ToolConfig(), search=search)
    assert tools.call("search_graph", {"query": query, "k": 3}).node_ids[:2] == [10, 7]
    assert "come first" in tools.openai_tools()[0]["function"]["description"]
    assert "come first" not in plain_tools.openai_tools()[0]["function"]["description"]
    typed = tools.call("search_graph", {"query": query, "k": 3, "node_types": ["drug"]})
    assert typed.node_ids == [7]                                                 # the type filter still holds
    assert BM25Retriever(graph, top=5).retrieve(query)[0] == 7
    assert BM25Retriever(graph, top=5, name_first="mentioned").retrieve(query)[:2] == [10, 7]
    assert BM25Retriever(graph, top=5, name_first="exact").retrieve(query)[0] == 7   # not the whole query
    with pytest.raises(ValueError, match="unknown name_first"):
        BM25Retriever(graph, top=5, name_first="yes")


def test_a_run_with_names_first_has_its_own_directory_and_label():
    from ark.config.compose import compose
    from ark.config.identity import run_info

    plain = compose(["graph=demo", "backbone=scripted"])
    named = compose(["graph=demo", "backbone=scripted", "search.setup.config.name_first=exact"])
    assert plain.search.name == "lexical" and plain.out_dir.endswith("ark-scripted-t20_n3-full_test")
    assert named.out_dir.endswith("ark-scripted-t20_n3-full-names-exact_test")
    assert run_info(named)["search"] == "lexical-names-exact"
