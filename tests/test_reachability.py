"""The reachability ceiling (`ark.analysis.reachability`; the job `ark.config.jobs.diagnose` behind `ark diagnose`
and experiments/diagnose.py) on the hand-written toy graph.

Expected levels are worked out by hand from tests/helpers/toy_graph.py: "hERG" occurs only in KCNH2's text
(node 5), so search_graph("hERG", k=1) shows [5]; 5's neighbors are 2 (Long QT syndrome) and 7
(Propranolol); 2's are 5, 7, 10 (Syncope); 7's are 0, 2, 5; 11's are 8 and 10; 9's are 0 and 1.
"""

from __future__ import annotations

import json

import pytest

from ark.config import jobs
from ark.config.compose import compose
from ark.config.location import option_names
from ark.analysis import reachability as R
from ark.data.sources import GraphSource
from ark.data.stark import Query, QuerySet
from ark.tools import ToolConfig, ToolSet
from tests.helpers.toy_graph import toy_graph, graph, index  # graph, index: shared fixtures


@pytest.fixture(scope="module")
def toolset(graph, index):
    return ToolSet(graph, index, ToolConfig(search_k_max=10))


def levels(rows, **match):
    return {r.gold: r.level for r in rows if all(getattr(r, k) == v for k, v in match.items())}


def test_each_level_is_the_first_that_holds_the_gold(toolset):
    s = R.ReachSettings(ks=(1,), neighbors_k=1, filters=("none",))
    rows, pools = R.query_reach(toolset, 7, "hERG", [2, 7, 10, 11], s)
    by_gold = {r.gold: r for r in rows}
    assert levels(rows) == {2: "neighbors", 7: "hop1", 10: "hop2", 11: None}
    # no neighbor matches "hERG": ties in id order, so 2 is the one neighbor shown (k=1)
    assert (by_gold[2].neighbor_rank, by_gold[2].via) == (1, 5)
    assert by_gold[7].via == 5 and by_gold[10].via == 5 and by_gold[11].via is None
    assert [(p.hits, p.pool1) for p in pools] == [(1, 3)]  # {5, 2, 7}


def test_search_level_records_the_rank(toolset):
    rows, _ = R.query_reach(toolset, 1, "fibrillin microfibrils", [3], R.ReachSettings(ks=(1,), filters=("none",)))
    assert (rows[0].level, rows[0].search_rank) == ("search", 1)


def test_type_filters_on_neighbor_calls_and_on_search(toolset):
    s = R.ReachSettings(ks=(1,), neighbors_k=1, filters=("none", "neighbors", "all"))
    rows, pools = R.query_reach(toolset, 0, "hERG", [7], s)
    # the drug filter lets the one neighbor shown be Propranolol; filtering the search to drugs loses KCNH2
    assert {r.filter: r.level for r in rows} == {"none": "hop1", "neighbors": "neighbors", "all": None}
    assert {p.filter: (p.hits, p.pool1) for p in pools} == {"none": (1, 3), "neighbors": (1, 1), "all": (0, 0)}


def test_a_smaller_k_equals_its_own_measurement(toolset):
    """Hits of a small k are reused from the largest k's call: same result as measuring that k alone."""
    text, gold = "heart disorder fainting", [0, 5, 9, 10]
    both, _ = R.query_reach(toolset, 0, text, gold, R.ReachSettings(ks=(1, 3)))
    alone, _ = R.query_reach(toolset, 0, text, gold, R.ReachSettings(ks=(1,)))
    assert [r for r in both if r.k == 1] == alone


def test_summary_averages_shares_per_query(toolset):
    queries = [Query(1, "hERG", (2, 7, 10, 11)), Query(2, "fibrillin microfibrils", (3,))]
    s = R.ReachSettings(ks=(1,), neighbors_k=1, filters=("none",))
    rows, pools = R.reachability(toolset, queries, s)
    e = R.summarize(rows, pools)["k1"]
    assert (e["queries"], e["gold"]) == (2, 5)
    # query 1 reaches 0, 1, 2, 3 of its 4 gold by level; query 2 has its one gold in the search hits
    assert [e[lv]["recall"] for lv in R.LEVELS] == [0.5, (0.25 + 1) / 2, (0.5 + 1) / 2, (0.75 + 1) / 2]
    assert [e[lv]["any"] for lv in R.LEVELS] == [0.5, 1.0, 1.0, 1.0]
    assert e["mean_hits"] == 1.0
    table = R.markdown_table(R.summarize(rows, pools), 1)
    assert "| 1 | none | 2 | 50.0% (50.0%) | 62.5% (100.0%) | 75.0% (100.0%) | 87.5% (100.0%) |" in table


def test_describe_names_the_level_and_where(toolset):
    rows, _ = R.query_reach(toolset, 7, "hERG", [2, 11], R.ReachSettings(ks=(1,), neighbors_k=1, filters=("none",)))
    text = {r.gold: R.describe(r, 1) for r in rows}
    assert text[2] == "in a neighbor call's top 1 from a hit (rank 1 among the neighbors of 5)"
    assert text[11] == "beyond 2 hops of the search hits"


def test_bad_settings_name_the_valid_choices(graph, index, toolset):
    with pytest.raises(ValueError, match=r"choose from \['none', 'neighbors', 'all'\]"):
        R.ReachSettings(filters=("typed",))
    with pytest.raises(ValueError, match="ks must be"):
        R.ReachSettings(ks=(0,))
    with pytest.raises(ValueError, match="search_k_max=10"):
        R.reachability(toolset, [], R.ReachSettings(ks=(20,)))
    no_filter = ToolSet(graph, index, ToolConfig(type_filter=False))
    with pytest.raises(ValueError, match="filters=\\[none\\]"):
        R.reachability(no_filter, [], R.ReachSettings(ks=(5,)))
    assert R.reachability(no_filter, [Query(1, "hERG", (2,))], R.ReachSettings(ks=(1,), filters=("none",)))[0]


class ToySource(GraphSource):
    """The toy graph and two queries as a graph source (what a conf/graph option builds)."""

    def input_fingerprint(self) -> str:
        return "toy-v1"

    def build(self):
        return toy_graph()

    def read_queries(self):
        qs = {1: Query(1, "hERG", (2, 7, 10, 11)), 2: Query(2, "fibrillin microfibrils", (3,))}
        return QuerySet("toy", qs, {"test": [1, 2]})


class MissingSource(ToySource):
    def problems(self) -> list[str]:
        return ["toy files are missing (fetch them with: nothing)"]


def test_diagnose_writes_summary_and_rows(tmp_path, capsys):
    cfg = compose(["graph._target_=tests.test_reachability.ToySource", "graph.name=toy",
                   f"paths.data={tmp_path}/data", f"out_dir={tmp_path}/out", "progress=false",
                   "reach.ks=[1]", "reach.neighbors_k=1", "reach.filters=[none]"], config_name="diagnose")
    summary = jobs.diagnose(cfg)
    doc = json.loads((tmp_path / "out" / "reach.json").read_text())
    assert doc["summary"] == summary and doc["graph"] == "toy" and doc["settings"]["ks"] == [1]
    assert summary["k1"]["hop2"]["recall"] == 0.875
    lines = (tmp_path / "out" / "reach_gold.csv").read_text().splitlines()
    assert lines[0] == "query_id,gold,k,filter,level,search_rank,neighbor_rank,via" and len(lines) == 6
    assert "1,11,1,none,,,," in lines
    assert "87.5% (100.0%)" in capsys.readouterr().out


def test_diagnose_rejects_bad_settings_before_loading(tmp_path):
    cfg = compose(["graph._target_=tests.test_reachability.Unloadable", f"out_dir={tmp_path}/o",
                   "reach.filters=[typed]"], config_name="diagnose")
    with pytest.raises(ValueError, match="choose from"):
        jobs.diagnose(cfg)
    cfg = compose(["graph._target_=tests.test_reachability.MissingSource", "graph.name=toy",
                   f"paths.data={tmp_path}/data", f"out_dir={tmp_path}/o"], config_name="diagnose")
    with pytest.raises(SystemExit, match="toy files are missing"):
        jobs.diagnose(cfg)
    assert not (tmp_path / "o").exists() and not (tmp_path / "data").exists()


def test_diagnose_config_composes_for_every_graph():
    for g in option_names("graph"):
        cfg = compose([f"graph={g}"], config_name="diagnose")
        name = "tables_kg" if g == "tables" else g      # the tables graph: its graph.json's name
        assert cfg.out_dir == f"results/diagnose/{name}/test-full"
        assert jobs.reach_settings(cfg).neighbors_k == 20


def test_diagnose_runs_on_a_tables_graph(tmp_path):
    """The hand-made tables graph (tests/data/tables_kg, ark.data.tables.source.TablesSource) through the same entry."""
    from hydra.utils import instantiate

    cfg = compose(["graph=tables", f"paths.data={tmp_path}/data", f"out_dir={tmp_path}/out",
                   "progress=false", "reach.ks=[5]", "reach.filters=[none]"], config_name="diagnose")
    summary = jobs.diagnose(cfg)
    queries = instantiate(cfg.graph).queries().split("test")
    e = summary["k5"]
    assert e["queries"] == len(queries) > 0 and e["gold"] == sum(len(set(q.answer_ids)) for q in queries)
    levels = [e[lv]["recall"] for lv in ("search", "neighbors", "hop1", "hop2")]
    assert levels == sorted(levels) and 0 < levels[0] and levels[-1] <= 1


def test_a_graph_shown_in_its_own_ids_reaches_what_its_internal_ids_reach(tmp_path):
    """The neighbor calls name the hits in the tool set's ids: a tables graph measured with its own ids
    (the tools' default) and with internal ids gives the same rows, the one-call level included."""
    from pathlib import Path

    from ark.data.tables.source import TablesSource
    from ark.search.bm25 import load_index

    source = TablesSource(Path(__file__).resolve().parent / "data" / "tables_kg", root=tmp_path / "data")
    g = source.graph()
    index = load_index(g, source.cache_dir)
    queries = source.queries().split("test")
    settings = R.ReachSettings(ks=(5,), filters=("none",))
    own, _ = R.reachability(ToolSet(g, index, ToolConfig()), queries, settings)
    internal, _ = R.reachability(ToolSet(g, index, ToolConfig(user_ids=False)), queries, settings)
    assert own == internal and any(r.level == "neighbors" for r in own)
