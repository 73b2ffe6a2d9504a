"""Neighbor paging (ToolConfig.neighbor_paging, conf/ablation/paging.yaml): explore_neighbors' offset,
the footer's paging line, and the default toolset left exactly as the paper's."""

from __future__ import annotations

import re

import pytest

from ark.tools import NEIGHBORS, ToolConfig, ToolSet
from tests.helpers.toy_graph import graph, index  # graph, index: shared fixtures


@pytest.fixture(scope="module")
def paging(graph, index):
    return ToolSet(graph, index, ToolConfig(neighbor_paging=True))


def pages(tools: ToolSet, args: dict) -> list[list[int]]:
    """Follow the footer's "offset=" instructions from the top until none remain."""
    out, offset = [], 0
    for _ in range(50):
        r = tools.call(NEIGHBORS, {**args, "offset": offset})
        assert r.error is None, r.observation
        out.append(r.node_ids)
        m = re.search(r"offset=(\d+) for the next ones\)$", r.observation)
        if m is None:
            assert r.observation.endswith("none remain)"), r.observation
            return out
        offset = int(m.group(1))
    raise AssertionError("paging did not end")


def test_default_toolset_has_no_offset_and_rejects_it(graph, index):
    tools = ToolSet(graph, index)
    fn = {t["function"]["name"]: t["function"] for t in tools.openai_tools()}
    assert "offset" not in fn[NEIGHBORS]["parameters"]["properties"]
    assert "offset" not in fn[NEIGHBORS]["description"]
    r = tools.call(NEIGHBORS, {"node_id": 0, "offset": 2})
    assert 'explore_neighbors has no argument "offset"' in r.error
    assert "more; call" not in tools.call(NEIGHBORS, {"node_id": 0, "k": 2}).observation


def test_offset_is_offered_when_paging_is_on(paging):
    fn = {t["function"]["name"]: t["function"] for t in paging.openai_tools()}
    assert fn[NEIGHBORS]["parameters"]["properties"]["offset"]["minimum"] == 0
    assert "pages through long lists with offset" in fn[NEIGHBORS]["description"]


def test_footer_says_how_many_remain_and_how_to_ask(paging):
    r = paging.call(NEIGHBORS, {"node_id": 0, "k": 2})
    assert r.node_ids == [3, 6]
    assert r.observation.endswith("(neighbors 1-2 of 5: 3 more; call explore_neighbors again with the same "
                                  "node_id, query and filters and offset=2 for the next ones)")
    r = paging.call(NEIGHBORS, {"node_id": 0, "k": 2, "offset": 4})
    assert r.node_ids == [9] and " offset=4" in r.observation.splitlines()[0]
    assert r.observation.endswith("(neighbors 5-5 of 5: none remain)")


@pytest.mark.parametrize("args", [
    {"node_id": 0, "k": 2},                                 # id order
    {"node_id": 0, "k": 2, "query": "heart rhythm"},        # BM25 order, ties by id
    {"node_id": 7, "k": 1, "relations": ["indication"]},   # filtered
])
def test_pages_concatenate_to_the_whole_ranking(paging, args):
    whole = paging.call(NEIGHBORS, {**args, "k": 100}).node_ids
    got = pages(paging, args)
    assert [i for p in got for i in p] == whole
    assert all(len(p) == args["k"] for p in got[:-1])


def test_pages_cut_by_the_token_budget_lose_nothing(graph, index):
    tight = ToolSet(graph, index, ToolConfig(neighbor_paging=True, max_observation_tokens=110))
    whole = ToolSet(graph, index).call(NEIGHBORS, {"node_id": 0, "k": 100}).node_ids
    first = tight.call(NEIGHBORS, {"node_id": 0, "k": 5})
    assert "observation budget" in first.observation and len(first.node_ids) < 5
    assert [i for p in pages(tight, {"node_id": 0, "k": 5}) for i in p] == whole


def test_bad_offsets(paging):
    assert "offset must be >= 0" in paging.call(NEIGHBORS, {"node_id": 0, "offset": -1}).error
    assert "offset must be an integer" in paging.call(NEIGHBORS, {"node_id": 0, "offset": "x"}).error
    r = paging.call(NEIGHBORS, {"node_id": 0, "offset": 9})
    assert r.error is None and r.node_ids == []
    assert "offset=9 is past the last of the 5 neighbors" in r.observation


def test_paging_config_composes():
    from hydra.utils import instantiate

    from ark.config.compose import compose

    cfg = compose(["ablation=paging"])
    tools = instantiate(cfg.ablation.tools)
    assert tools.neighbor_paging and tools.neighbors and tools.neighbor_query
    assert not instantiate(compose([]).ablation.tools).neighbor_paging
    assert cfg.retriever.run_name.endswith("-paging")
