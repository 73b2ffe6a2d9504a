"""Figures and tables (ark.report.figures) on small synthetic run dirs with known values."""
from __future__ import annotations

import json
import math
from pathlib import Path

import matplotlib.image
import numpy as np
import pandas as pd
import pytest

from ark.config.options import ablation_labels
from ark.report import figures as F

try:
    from tests.helpers.fixtures_runs import QuerySpec, budget_grid, make_config, write_run
except ImportError:  # tests/ on sys.path instead of the repo root
    from fixtures_runs import QuerySpec, budget_grid, make_config, write_run

PAPER = F.PAPER_DIR


def _queries(n_hit1: int, n: int = 4, latency: float = 1.0, tools=None) -> list[QuerySpec]:
    """n queries, the first n_hit1 with the gold at rank 1 of the fused ranking, the rest missing."""
    out = []
    for q in range(n):
        gold = [100 + q]
        ranking = [gold[0], 1, 2] if q < n_hit1 else [1, 2, 3]
        tools_ = tools or [{"search_graph": 1, "explore_neighbors": 1}]     # one entry per agent
        out.append(QuerySpec(q, gold, [ranking] * len(tools_), tools_, latency_s=latency, ranking=ranking))
    return out


@pytest.fixture
def grid(tmp_path):
    """mag: T_max in (5, 10) x n in (1, 2); hit@1 = (i+1)/4 for cell i, latency = 2*t + n."""
    expected = {}
    for i, (t, n) in enumerate([(5, 1), (5, 2), (10, 1), (10, 2)]):
        write_run(tmp_path / "budget" / "mag" / f"ark-gpt-4.1-t{t}-n{n}-full", make_config("mag", t, n),
                  _queries(i + 1, latency=2.0 * t + n))
        expected[(t, n)] = ((i + 1) / 4, 2.0 * t + n)
    return tmp_path, expected


def test_load_runs_reads_budget_from_config(grid):
    root, expected = grid
    runs = F.load_runs(F.find_run_dirs([root]))
    assert len(runs) == 4
    assert set(zip(runs.t_max, runs.n_agents)) == set(expected)
    assert (runs.graph == "mag").all() and (runs.ablation == "full").all()
    for _, r in runs.iterrows():
        assert r["hit@1"] == pytest.approx(expected[(r.t_max, r.n_agents)][0])
        assert r["latency_s"] == pytest.approx(expected[(r.t_max, r.n_agents)][1])


def test_load_runs_without_config_uses_path_and_predictions(tmp_path):
    d = write_run(tmp_path / "exp" / "prime" / "ark-x-y-full", {}, _queries(3, n=4))
    (d / "config.yaml").unlink()
    (d / "metrics.json").unlink()
    r = F.load_runs([d]).iloc[0]
    assert r.graph == "prime" and r.experiment == "exp" and r.retriever == "ark"
    assert r["hit@1"] == pytest.approx(0.75)


def test_budget_heatmap_cells_and_annotations(grid, tmp_path):
    root, expected = grid
    cells = F.budget_data(F.load_runs(F.find_run_dirs([root])))
    for (t, n), (hit1, lat) in expected.items():
        c = cells[(cells.t_max == t) & (cells.n_agents == n)].set_index("metric")["value"]
        assert c["hit@1"] == pytest.approx(hit1)
        assert c["recall@20"] == pytest.approx(hit1)     # one gold per query
        assert c["latency_s"] == pytest.approx(lat)
    fig = F.plot_budget_heatmaps(cells)
    hit_ax, r_ax, lat_ax = fig.axes[:3]
    assert "Hit@1" in hit_ax.get_title() and "Latency" in lat_ax.get_title()
    # cell text at (x=n index, y=T_max index) is the value: Hit@1 in %, latency in s
    texts = {(round(t.get_position()[1]), round(t.get_position()[0])): t.get_text() for t in hit_ax.texts}
    lat_texts = {(round(t.get_position()[1]), round(t.get_position()[0])): t.get_text() for t in lat_ax.texts}
    for (t, n), (hit1, lat) in expected.items():
        pos = ((5, 10).index(t), (1, 2).index(n))
        assert texts[pos] == f"{100 * hit1:.1f}"
        assert lat_texts[pos] == f"{lat:.1f}"
    # color scale normalized within the panel: its own min and max
    im = hit_ax.images[0]
    assert (im.norm.vmin, im.norm.vmax) == pytest.approx((25.0, 100.0))
    assert (lat_ax.images[0].norm.vmin, lat_ax.images[0].norm.vmax) == pytest.approx((11.0, 22.0))
    paths = F.save_figure(fig, cells, tmp_path / "out", "fig2")
    assert matplotlib.image.imread(paths["png"]).shape[0] > 100
    assert paths["pdf"].read_bytes()[:4] == b"%PDF"
    assert len(pd.read_csv(paths["csv"])) == len(cells) == 12


def test_budget_duplicate_cell_names_both_runs(grid):
    root, _ = grid
    extra = write_run(root / "budget" / "mag" / "ark-qwen3-8b-t5-n1-full",
                      make_config("mag", 5, 1, backbone="qwen3-8b"), _queries(0, n=8))
    runs = F.load_runs(F.find_run_dirs([root]))
    with pytest.raises(ValueError, match="qwen3-8b-t5-n1"):
        F.budget_data(runs)
    cells = F.budget_data(runs, keep_largest=True)  # the larger run (8 queries) wins the cell
    c = cells[(cells.t_max == 5) & (cells.n_agents == 1) & (cells.metric == "hit@1")]
    assert c["run_dir"].item() == str(extra) and c["value"].item() == 0.0


def test_tool_shares_sum_to_one_and_match_counts(tmp_path):
    write_run(tmp_path / "a" / "amazon" / "r", make_config("amazon"),
              _queries(2, n=2, tools=[{"search_graph": 3, "explore_neighbors": 1},
                                      {"search_graph": 4, "explore_neighbors": 0, "select": 1}]))
    write_run(tmp_path / "a" / "mag" / "r", make_config("mag"),
              _queries(2, n=3, tools=[{"search_graph": 1, "explore_neighbors": 2}]))
    stark = pd.DataFrame({"graph": ["amazon", "mag", "prime"], "textual_share": [0.6, np.nan, 0.3],
                          "relational_share": [0.2, np.nan, 0.7]})
    traj = F.load_trajectories(F.find_run_dirs([tmp_path]))
    shares = F.tool_share_data(traj, stark)
    sums = shares.groupby(["graph", "source"])["share"].sum()
    assert np.allclose(sums.to_numpy(), 1.0)
    ark = shares[shares.source == "ARK tool calls"].set_index(["graph", "kind"])
    assert ark.loc[("amazon", "text"), "share"] == pytest.approx(14 / 16)   # 2 queries x (3 + 4)
    assert ark.loc[("mag", "relational"), "share"] == pytest.approx(2 / 3)
    ref = shares[shares.source == "STaRK queries"].set_index(["graph", "kind"])["share"]
    assert ref[("amazon", "text")] == pytest.approx(0.75)                 # renormalized 0.6 / 0.8
    assert "mag" not in ref.index.get_level_values(0)                     # unknown reference: omitted
    assert "prime" not in ref.index.get_level_values(0)                   # no runs on prime
    paths = F.save_figure(F.plot_tool_use(shares), shares, tmp_path / "out", "fig3")
    assert paths["png"].stat().st_size > 1000


def test_neighbor_call_distribution_counts_trajectories(tmp_path):
    gold = 7
    hit, miss, edge = [gold, 1, 2], [1, 2, 3], [1, 2, 3, 4, 5, gold]   # gold at rank 6: a miss
    qs = [QuerySpec(0, [gold], [hit, miss], [{"search_graph": 1, "explore_neighbors": 0},
                                             {"search_graph": 1, "explore_neighbors": 12}]),
          QuerySpec(1, [gold], [hit, edge, hit], [{"explore_neighbors": 1}, {"explore_neighbors": 0},
                                                  {"explore_neighbors": 1}]),
          QuerySpec(2, [gold], [hit], [{"explore_neighbors": 5}], status="failed")]   # not counted
    write_run(tmp_path / "e" / "prime" / "r", make_config("prime"), qs)
    traj = F.load_trajectories([tmp_path / "e" / "prime" / "r"])
    assert len(traj) == 5
    counts = F.neighbor_calls_data(traj).set_index(["outcome", "neighbor_calls"])["trajectories"]
    assert counts.to_dict() == {("hit@5", 0): 1, ("hit@5", 1): 2, ("miss", 0): 1, ("miss", 12): 1}
    fig = F.plot_neighbor_calls(F.neighbor_calls_data(traj))
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert labels == ["hit@5 (n=3)", "miss (n=2)"]
    assert F.save_figure(fig, traj, tmp_path / "o", "fig5")["png"].stat().st_size > 1000


def test_ablation_table_puts_paper_numbers_beside_ours(tmp_path):
    for abl, k in (("full", 3), ("no_neighbors", 1)):
        write_run(tmp_path / "ablation" / "mag" / f"ark-gpt-4.1-t20-n3-{abl}",
                  make_config("mag", ablation=abl, experiment="ablation"), _queries(k, n=4))
    paper = F.load_paper_table("table2_ablation", PAPER)
    data = F.ablation_data(F.load_runs(F.find_run_dirs([tmp_path])), paper)
    row = data[(data.setup == "no_neighbors") & (data.graph == "mag") & (data.metric == "hit@1")].iloc[0]
    assert row.ours == pytest.approx(25.0) and row.paper == pytest.approx(30.5)
    assert row.delta == pytest.approx(25.0 - 30.5)
    labels = ablation_labels()
    texts = F.comparison_table(data, "setup", ("hit@1", "recall@20"), list(labels), labels)
    assert "| w/o Neighbors |" in texts["md"] and "25.0 (30.5)" in texts["md"]
    assert "75.0 (79.2)" in texts["md"]                                  # full, MAG Hit@1
    assert "– (58.5)" in texts["md"]                                     # AMAZON not run
    assert "\\toprule" in texts["tex"] and "25.0 (30.5)" in texts["tex"]
    assert len(pd.read_csv(pd.io.common.StringIO(texts["csv"]))) == len(data)


def test_tables_mark_paired_differences_that_hold(tmp_path):
    # 24 queries: full hits all, no_neighbors 12 (a loss on 12 queries, no win), no_query_rank 23
    for abl, k in (("full", 24), ("no_neighbors", 12), ("no_query_rank", 23)):
        write_run(tmp_path / "ablation" / "mag" / f"ark-gpt-4.1-t20_n3-{abl}",
                  make_config("mag", ablation=abl, experiment="ablation"), _queries(k, n=24))
    data = F.ablation_data(F.load_runs(F.find_run_dirs([tmp_path])), F.load_paper_table("table2_ablation", PAPER))
    row = data[(data.graph == "mag") & (data.metric == "hit@1")].set_index("setup")
    assert row.loc["no_neighbors", "significant"] and not row.loc["no_query_rank", "significant"]
    assert row.loc["no_neighbors", "paired_diff"] == pytest.approx(-50.0)
    assert row.loc["no_neighbors", "paired_ci_high"] < 0 and row.loc["no_neighbors", "reference"] == "full"
    assert row.loc["no_neighbors", "p_value"] < 0.05 < row.loc["no_query_rank", "p_value"]
    assert pd.isna(row.loc["full", "p_value"]) and not row.loc["full", "significant"]
    labels = ablation_labels()
    texts = F.comparison_table(data, "setup", ("hit@1", "recall@20"), list(labels), labels)
    assert "| w/o Neighbors | – (54.5) | – (55.4) | 50.0* (30.5) | 50.0* (39.4) |" in texts["md"]
    assert "95.8 (72.1)" in texts["md"] and "differs from Full" in texts["md"]
    assert {"paired_diff", "p_value", "significant"} <= set(pd.read_csv(pd.io.common.StringIO(texts["csv"])))


def test_attribution_figure_counts_each_class(tmp_path):
    qs = [QuerySpec(0, [7], [[7, 1]], [{"search_graph": 1}], shown=[[7, 1]]),           # retrieved
          QuerySpec(1, [8], [[1, 2]], [{"search_graph": 1}], shown=[[1, 2, 8]]),        # surfaced, not selected
          QuerySpec(2, [9], [[1, 2]], [{"search_graph": 1}], shown=[[1, 2]]),           # never surfaced
          QuerySpec(3, [5], [list(range(100, 120)) + [5]], [{"search_graph": 1}])]      # beyond the top 20
    for abl in ("full", "no_neighbors"):
        write_run(tmp_path / "ablation" / "mag" / f"ark-gpt-4.1-t20_n3-{abl}",
                  make_config("mag", ablation=abl, experiment="ablation"), qs)
    data = F.attribution_data(F.load_runs(F.find_run_dirs([tmp_path])))
    full = data[data.ablation == "full"].set_index("class")
    assert full["count"].to_dict() == {"retrieved": 1, "never_surfaced": 1, "surfaced_not_selected": 1,
                                       "selected_fused_out": 0, "beyond_top": 1}
    assert full["share"].sum() == pytest.approx(1.0)
    assert set(data.run) == {"ARK + gpt-4.1 (t20_n3, full)", "ARK + gpt-4.1 (t20_n3, no_neighbors)"}   # run_label
    fig = F.plot_attribution(data)
    ax = fig.axes[0]
    heights = [p.get_height() for p in ax.patches]
    assert len(heights) == 2 * 5 and sum(heights) == pytest.approx(2.0)        # two bars stacked to 1
    assert ax.get_legend_handles_labels()[1][0] == "retrieved (top 20)"


def test_backbone_names_match_paper_rows(tmp_path):
    for bb, k in (("qwen3-8b-distilled-600", 2), ("gpt-4.1", 4)):
        write_run(tmp_path / "backbone" / "amazon" / f"ark-{bb}", make_config("amazon", backbone=bb),
                  _queries(k, n=4))
    paper = F.load_paper_table("backbones", PAPER)
    data = F.backbone_data(F.load_runs(F.find_run_dirs([tmp_path])), paper)
    r = data[(data.backbone == "Qwen3-8B-600") & (data.graph == "amazon")].set_index("metric")
    assert r.loc["hit@1", "ours"] == pytest.approx(50.0) and r.loc["hit@1", "paper"] == pytest.approx(50.06)
    assert r.loc["mrr", "paper"] == pytest.approx(59.13)
    assert data.backbone.iloc[0] == "GPT-4o"                             # the paper's row order
    g = data[(data.backbone == "GPT-4.1") & (data.graph == "prime")]
    assert g["ours"].isna().all() and g["paper"].notna().all()           # paper-only cells kept
    fig = F.plot_backbones(data)
    assert len(fig.axes) == 3 * 4


@pytest.mark.commands
def test_ark_figures_writes_every_output(tmp_path, capsys):
    from ark.cli.main import main

    budget_grid(tmp_path / "runs", graphs=("amazon", "mag"), t_maxes=(5, 10), n_agents=(1, 3), n_queries=4)
    assert main(["figures", str(tmp_path / "runs"), "--out", str(tmp_path / "figs")]) == 0
    out = tmp_path / "figs"
    for stem in ("fig2_budget_heatmaps", "fig3_tool_use", "fig5_neighbor_calls", "fig4_backbones",
                 "fig_attribution"):
        assert (out / f"{stem}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert (out / f"{stem}.pdf").read_bytes()[:4] == b"%PDF"
        assert len(pd.read_csv(out / f"{stem}.csv")) > 0
    for stem in ("table2_ablation", "table_backbones"):
        for ext in ("md", "csv", "tex"):
            assert (out / f"{stem}.{ext}").stat().st_size > 100
    cells = pd.read_csv(out / "fig2_budget_heatmaps.csv")
    assert len(cells) == 2 * 3 * 4                                       # graphs x metrics x cells
    assert "several backbones" not in capsys.readouterr().out
    assert (out / "table2_ablation.md").read_text().splitlines()[2].startswith("| Full |")   # the configs' labels


def test_ark_figures_without_run_dirs_is_one_line(tmp_path, capsys):
    from ark.cli.main import main

    assert main(["figures", str(tmp_path), "--out", str(tmp_path / "figs")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ark figures: error: no run dirs (folders with predictions.jsonl) under") and err.count("\n") == 1
    assert not (tmp_path / "figs").exists()


def test_find_run_dirs_rejects_missing_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope"):
        F.find_run_dirs([tmp_path / "nope"])
    with pytest.raises(ValueError, match="no run dirs"):
        F.make_all([tmp_path], tmp_path / "out")


def test_ablation_names_and_labels_come_from_the_configs():
    from ark.config.compose import compose
    from ark.config.location import conf_dir

    labels = ablation_labels()
    names = [p.stem for p in sorted((conf_dir() / "ablation").glob("*.yaml"))]
    assert list(labels)[0] == "full" and sorted(labels) == sorted(names)
    for name in names:   # what a run records as its ablation is the key the tables look up
        cfg = compose([f"ablation={name}"])
        assert cfg.ablation.name == name and labels[name] == cfg.ablation.label
    paper = F.load_paper_table("table2_ablation", PAPER)
    assert set(paper.setup) <= set(labels)   # every paper toolset has its config (paging is ours)
    # without the configs' labels a toolset is shown by its name, the full toolset first
    assert F.ablation_order(["no_neighbors", "full"]) == {"full": "full", "no_neighbors": "no_neighbors"}
    assert list(F.ablation_order(["paging"], labels)) == list(labels)


def test_stark_shares_file_is_cited():
    s = F.load_stark_shares(PAPER)
    assert list(s.graph) == ["amazon", "mag", "prime"]
    assert s["source"].str.contains("2404.13207").all()
    known = s.dropna(subset=["textual_share"])
    assert np.allclose(known.textual_share + known.relational_share, 1.0, atol=0.02)


def test_fixture_trajectories_match_real_trajectory_format(tmp_path):
    from ark import trajectory

    d = write_run(tmp_path / "e" / "mag" / "r", make_config("mag"),
                  [QuerySpec(0, [7], [[7, 1]], [{"search_graph": 2, "explore_neighbors": 3}])])
    raw = json.loads((d / "trajectories" / "0.json").read_text())[0]
    t = trajectory.Trajectory.from_json(raw)
    assert t.to_json().keys() == raw.keys()
    assert {k: v for k, v in t.tool_counts().items() if k in (F.SEARCH, F.NEIGHBORS)} == \
        {"search_graph": 2, "explore_neighbors": 3}
    assert math.isclose(t.latency_s, sum(s["llm_latency_s"] + s["overhead_s"] for s in raw["steps"]))


@pytest.mark.commands
def test_figures_on_real_runner_output(tmp_path):
    """Run dirs written by ark.run.runner with configs composed from conf/: the figures read the same
    numbers the runner summarized (metrics, tool calls, neighbor-call histogram)."""
    try:
        from tests.helpers.fixtures_runs import random_queries, real_run
    except ImportError:
        from fixtures_runs import random_queries, real_run
    rng = np.random.default_rng(1)
    root = tmp_path / "runs"
    for t, n in ((5, 1), (5, 2), (10, 1), (10, 2)):
        real_run(root, ["experiment=budget_heatmap", "graph=mag", f"budget.agent.t_max={t}",
                        f"budget.agent.n_agents={n}"], random_queries(rng, 6, n, 0.5, 0.6, 2.0 * t))
    real_run(root, ["experiment=ablation", "graph=mag", "ablation=no_type_filter"],
             random_queries(rng, 6, 3, 0.5, 0.6, 8.0))
    real_run(root, ["experiment=backbones", "graph=mag", "backbone=student-8b-600"],
             random_queries(rng, 6, 3, 0.5, 0.6, 8.0))
    dirs = F.find_run_dirs([root])
    assert len(dirs) == 6 and all((d / "trajectory_stats.csv").exists() for d in dirs)
    runs = F.load_runs(dirs)
    budget = runs[runs.experiment == "budget_heatmap"]
    assert set(zip(budget.t_max, budget.n_agents)) == {(5, 1), (5, 2), (10, 1), (10, 2)}
    assert runs.set_index("experiment").loc["ablation", "ablation"] == "no_type_filter"
    assert F.backbone_key(runs.set_index("experiment").loc["backbones", "backbone"]) == F.backbone_key("Qwen3-8B-600")
    cells = F.budget_data(F.select_budget_runs(runs))
    for d in budget.run_dir:
        summary = json.loads((Path(d) / "metrics.json").read_text())
        cell = cells[(cells.run_dir == d)].set_index("metric")["value"]
        assert cell["hit@1"] == pytest.approx(summary["metrics"]["hit@1"]["mean"])
        assert cell["latency_s"] == pytest.approx(summary["latency_s"]["mean"])
        traj = F.load_trajectories([d], runs)
        counts = F.neighbor_calls_data(traj)
        for outcome, key in (("hit@5", "success"), ("miss", "failure")):
            ours = counts[counts.outcome == outcome].set_index("neighbor_calls")["trajectories"].to_dict()
            assert ours == {int(k): v for k, v in summary["neighbor_calls_per_trajectory"][key].items()}
        shares = F.tool_share_data(traj).set_index("kind")["calls"]
        assert shares["text"] == summary["tool_calls"]["search_graph"]
        assert shares["relational"] == summary["tool_calls"]["explore_neighbors"]
    written = F.make_all([root], tmp_path / "figs", PAPER)
    assert set(written) == {"fig2_budget_heatmaps", "fig3_tool_use", "fig5_neighbor_calls",
                            "table2_ablation", "table_backbones", "fig4_backbones", "fig_attribution"}
    table = (tmp_path / "figs" / "table_backbones.md").read_text()
    assert "| Qwen3-8B-600 |" in table and "(50.1)" in table
