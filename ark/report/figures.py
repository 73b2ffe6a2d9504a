"""The paper's figures and tables, drawn from run directories alone (no LLM calls).

Loaders turn run directories (read through `ark.run.rundir.RunDir`, which documents their files) into
plain DataFrames; tool names come from ark.tools, runs are named by `ark.run.rundir.run_label`,
and the ablations' labels are given by the caller (``ark figures`` passes those of conf/ablation/*.yaml,
`ark.config.options.ablation_labels`; without them a toolset is shown by its name);
one `*_data` function per figure/table turns those into the tidy numbers behind it, and one
`plot_*` / `*_table` function turns the numbers into a matplotlib Figure or md/csv/tex text.
`save_figure` writes <stem>.png, <stem>.pdf and <stem>.csv.

    ark figures results/runs --out results/figures     # or: make figures

Run dirs may be given directly or as any parent folder (searched for predictions.jsonl).

| output stem                     | paper        | built from                                    |
|---------------------------------|--------------|-----------------------------------------------|
| fig2_budget_heatmaps            | Figure 2     | ARK runs, full toolset, one backbone, T_max x n |
| fig3_tool_use                   | Figure 3     | tool_counts of the full toolset's ARK runs + stark_query_shares.csv; a bar of its own per toolset with an opt-in tool (ablation=paths) |
| fig5_neighbor_calls             | Figure 5     | per-agent tool_counts and agent_rankings (full toolset) |
| table2_ablation                 | Table 2      | runs with toolset ablations + results/paper/table2_ablation.csv |
| fig4_backbones, table_backbones | Fig. 4, App. | runs per backbone + results/paper/backbones.csv |
| fig_attribution                 | (ours)       | ark.analysis.attribution per run: where gold nodes were found or lost |

Table 2 and the backbone table mark with `*` the differences from the full toolset / GPT-4.1 that a
paired test over the same queries supports (ark.analysis.paired); their csv carries the paired numbers.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from ark.analysis import attribution
from ark.report import comparison
from ark.run import rundir
from ark.run.rundir import run_label
from ark.run.summary import attribute_run
from ark.tools import NEIGHBORS, SEARCH  # noqa: F401  (figures.SEARCH, figures.NEIGHBORS: the paper's tools)

PAPER_DIR = Path(__file__).resolve().parents[2] / "results" / "paper"   # the paper's numbers, in the checkout
METRICS = ("hit@1", "hit@5", "recall@20", "mrr")
LABELS = {"hit@1": "Hit@1", "hit@5": "Hit@5", "recall@20": "R@20", "mrr": "MRR",
          "latency_s": "Latency (s)"}
GRAPH_ORDER = ("amazon", "mag", "prime", "demo")
FULL = "full"   # the ablation every other toolset is compared with
TEXT, RELATIONAL = "text", "relational"  # Figure 3's kinds of tool (ark.tools.Tool.kind)


def ablation_order(names: Iterable[str], labels: dict[str, str] | None = None) -> dict[str, str]:
    """{ablation name: label} for the names seen (and those ``labels`` knows), the full toolset first,
    then by name; a name without a label is its own label."""
    labels = labels or {}
    names = set(labels) | {str(n) for n in names if isinstance(n, str)}
    return {n: labels.get(n, n) for n in sorted(names, key=lambda n: (n != FULL, n))}


# ----------------------------------------------------------------------------------------- loaders
def find_run_dirs(paths: Iterable[Path | str]) -> list[Path]:
    """Every run dir (a folder with predictions.jsonl) at or below the given paths, sorted."""
    return rundir.find_run_dirs(paths)


def read_predictions(run_dir: Path) -> list[dict]:
    return rundir.RunDir(run_dir).records()


def _added_tools(run: rundir.RunDir) -> str:
    """The opt-in graph tools (outside the default toolset, e.g. find_paths) that the run's toolset turned
    on, comma-separated ("" for none)."""
    from ark.tools import all_tools, default_graph_tool_names

    tools = (run.config.get("ablation") or {}).get("tools") or {}
    switches = tools.get("switches") or {}
    default = set(default_graph_tool_names())
    return ",".join(t.name for t in all_tools("graph")
                    if t.name not in default and t.switch and switches.get(t.switch) is True)


def load_runs(run_dirs: Iterable[Path | str]) -> pd.DataFrame:
    """One row per run: graph, experiment, retriever, backbone, t_max, n_agents, ablation (the names
    in run.json / the config, read through ark.run.rundir.RunDir), added_tools (the opt-in tools its
    toolset offered), n, n_failed, complete, hit@1, hit@5, recall@20, mrr (means in [0, 1]), latency_s
    (mean)."""
    rows = []
    for d in map(Path, run_dirs):
        run = rundir.RunDir(d)
        info, mj = run.info, run.metrics
        preds = run.records()
        row = {"run_dir": str(d), "experiment": info["experiment"], "graph": str(info["graph"]).lower(),
               "retriever": str(info["retriever"]).lower(), "backbone": info.get("backbone"),
               "t_max": info.get("t_max"), "n_agents": info.get("n_agents"),
               "ablation": info.get("ablation") or (FULL if info["retriever"] == "ark" else None),
               "added_tools": _added_tools(run),
               "n": mj.get("n", len(preds)),
               "n_failed": mj.get("n_failed", sum(rundir.status(p) != "ok" for p in preds)),
               "complete": mj.get("complete", True)}
        means = run.metric_means()
        for m in METRICS:
            row[m] = means.get(m, np.nan)
        lat = mj.get("latency_s")
        if isinstance(lat, dict) and "mean" in lat:
            row["latency_s"] = lat["mean"]
        else:
            vals = [p["latency_s"] for p in preds if p.get("latency_s") is not None]
            row["latency_s"] = float(np.mean(vals)) if vals else np.nan
        rows.append(row)
    return pd.DataFrame(rows)


def _tool_counts_from_trajectories(run: rundir.RunDir, pred: dict) -> list[dict]:
    """Fallback when predictions lack tool_counts: count tool calls in the trajectory file."""
    out = []
    for t in run.trajectories(pred):
        c: dict[str, int] = {}
        for step in t.get("steps", []):
            for call in step.get("tool_calls", []):
                name = call.get("name") or call.get("function", {}).get("name")
                c[name] = c.get(name, 0) + 1
        out.append(c)
    return out


_STATS_COLUMNS = {"query_id", "agent_index", "agent_hit@5", "agent_recall@20", "fused_hit@5"}


def load_trajectories(run_dirs: Iterable[Path | str], runs: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per (run, query, agent) of successful queries: graph, run_dir, query_id,
    agent_index, search_calls, neighbor_calls (calls of the "text" and "relational" tools), hit5
    (that agent's own ranking has gold in top 5), then one column of calls per graph tool
    (`ark.run.summary.tool_columns`: the default toolset's graph tools, and any other column a
    run's trajectory_stats.csv has, such as an opt-in tool the run offered)."""
    from ark.run.summary import tool_columns
    from ark.tools import kinds as tool_kinds

    run_dirs = [Path(d) for d in run_dirs]
    runs = load_runs(run_dirs) if runs is None else runs
    graph_of = dict(zip(runs["run_dir"], runs["graph"]))
    kinds = tool_kinds()
    rows = []

    def row(d: Path, query_id, a: int, counts: dict, hit: bool) -> dict:
        by_kind = {TEXT: 0, RELATIONAL: 0}
        for name, c in counts.items():
            if kinds.get(name) in by_kind:
                by_kind[kinds[name]] += int(c)
        return {"graph": graph_of[str(d)], "run_dir": str(d), "query_id": query_id, "agent_index": a,
                "search_calls": by_kind[TEXT], "neighbor_calls": by_kind[RELATIONAL], "hit5": hit,
                **{name: int(c) for name, c in counts.items()}}

    for d in run_dirs:
        stats = d / rundir.TRAJECTORY_STATS
        if stats.is_file() and stats.stat().st_size > 0:
            # the runner's own per-agent scoring (candidate-filtered, as the run's metrics)
            t = pd.read_csv(stats)
            if len(t):
                names = [c for c in t.columns if c not in _STATS_COLUMNS]  # one column per graph tool
                rows += [row(d, r.query_id, int(r.agent_index), {n: int(r[n]) for n in names},
                             bool(r["agent_hit@5"] > 0)) for _, r in t.iterrows()]
            continue
        run = rundir.RunDir(d)
        for p in run.records("ok"):
            counts = rundir.tool_counts(p) or _tool_counts_from_trajectories(run, p)
            rankings = rundir.agent_rankings(p)
            gold = set(rundir.gold(p))
            for a, c in enumerate(counts):
                own = rankings[a] if a < len(rankings) else None
                hit = bool(gold & set(own[:5])) if own is not None else \
                    bool(rundir.query_metrics(p).get("hit@5", 0))
                graph_counts = {n: v for n, v in c.items() if n in kinds}
                rows.append(row(d, p["query_id"], a, graph_counts, hit))
    base = ["graph", "run_dir", "query_id", "agent_index", "search_calls", "neighbor_calls", "hit5"]
    df = pd.DataFrame(rows)
    tools = tool_columns() + [c for c in df.columns if c not in base and c not in tool_columns()]
    return df.reindex(columns=base + tools).fillna({n: 0 for n in tools}).astype({n: int for n in tools}) \
        if len(df) else pd.DataFrame(columns=base + tools)


def load_paper_table(name: str, paper_dir: Path = PAPER_DIR) -> pd.DataFrame:
    """results/paper/<name>.csv (long format: graph, setup|backbone, metric, value in %)."""
    f = Path(paper_dir) / f"{name}.csv"
    if not f.exists():
        raise FileNotFoundError(f"paper numbers {f} missing; valid: "
                                f"{sorted(p.stem for p in Path(paper_dir).glob('*.csv'))}")
    return pd.read_csv(f, comment="#")


def _graph_sort(graphs: Iterable[str]) -> list[str]:
    return sorted(set(graphs), key=lambda g: (GRAPH_ORDER.index(g) if g in GRAPH_ORDER else 99, g))


# ------------------------------------------------------------------------------- Figure 2: budget
def budget_data(runs: pd.DataFrame, metrics=("hit@1", "recall@20", "latency_s"),
                keep_largest: bool = False) -> pd.DataFrame:
    """Tidy cells (graph, metric, t_max, n_agents, value, run_dir) from ARK runs with the full
    toolset. Two runs in one cell (same graph, T_max, n) is an error naming both, unless
    keep_largest (then the run with most queries is used)."""
    r = runs[(runs["retriever"] == "ark") & (runs["ablation"] == "full")]
    r = r.dropna(subset=["t_max", "n_agents"])
    dup = r[r.duplicated(["graph", "t_max", "n_agents"], keep=False)]
    if len(dup) and not keep_largest:
        raise ValueError("two runs for one heatmap cell (pass one backbone's budget sweep): "
                         + ", ".join(dup["run_dir"]))
    r = r.sort_values("n").groupby(["graph", "t_max", "n_agents"]).tail(1)
    cells = r.melt(id_vars=["graph", "t_max", "n_agents", "run_dir"], value_vars=list(metrics),
                   var_name="metric", value_name="value")
    cells[["t_max", "n_agents"]] = cells[["t_max", "n_agents"]].astype(int)
    cells["order"] = cells["metric"].map(list(metrics).index)
    return cells.sort_values(["graph", "order", "t_max", "n_agents"])[
        ["graph", "metric", "t_max", "n_agents", "value", "run_dir"]].reset_index(drop=True)


def plot_budget_heatmaps(cells: pd.DataFrame) -> plt.Figure:
    """Rows = graphs, columns = metrics; each panel a T_max x n grid, color normalized per panel,
    value annotated (metrics in %, latency in s)."""
    graphs = _graph_sort(cells["graph"])
    metrics = list(dict.fromkeys(cells["metric"]))   # budget_data keeps the requested order
    fig, axes = plt.subplots(len(graphs), len(metrics), squeeze=False,
                             figsize=(3.4 * len(metrics), 2.8 * len(graphs)), constrained_layout=True)
    for i, g in enumerate(graphs):
        for j, m in enumerate(metrics):
            ax = axes[i][j]
            grid = cells[(cells.graph == g) & (cells.metric == m)].pivot(
                index="t_max", columns="n_agents", values="value").sort_index().sort_index(axis=1)
            vals = grid.to_numpy(dtype=float)
            shown = vals if m == "latency_s" else 100 * vals
            cmap = "Oranges" if m == "latency_s" else "Greens"
            finite = shown[np.isfinite(shown)]
            vmin, vmax = (finite.min(), finite.max()) if finite.size else (0, 1)
            ax.imshow(shown, cmap=cmap, vmin=vmin, vmax=vmax if vmax > vmin else vmin + 1e-9,
                      aspect="auto")
            for (y, x), v in np.ndenumerate(shown):
                if np.isfinite(v):
                    frac = (v - vmin) / (vmax - vmin) if vmax > vmin else 0.5
                    ax.text(x, y, f"{v:.1f}", ha="center", va="center", fontsize=9,
                            color="white" if frac > 0.6 else "black")
            ax.set_xticks(range(grid.shape[1]), [str(c) for c in grid.columns])
            ax.set_yticks(range(grid.shape[0]), [str(t) for t in grid.index])
            ax.set_xlabel("agents n")
            ax.set_ylabel("T_max")
            ax.set_title(f"{g.upper()} · {LABELS.get(m, m)}", fontsize=10)
    return fig


# --------------------------------------------------------------------------- Figure 3: tool use
def load_stark_shares(paper_dir: Path = PAPER_DIR) -> pd.DataFrame:
    """STaRK's textual vs relational query shares per graph (NaN where the value is unknown)."""
    return load_paper_table("stark_query_shares", paper_dir)


ARK_CALLS = "ARK tool calls"   # Figure 3's source of the full toolset's calls; other toolsets add " (<label>)"


def tool_share_data(traj: pd.DataFrame, stark: pd.DataFrame | None = None, source: str = ARK_CALLS) -> pd.DataFrame:
    """Rows (graph, source, kind, share, calls): ARK's share of calls per tool kind pooled over all
    trajectories (global search is 'text', neighborhood 'relational', as `ark.tools` says;
    a graph tool of another kind gets rows of its own kind, e.g. find_paths' 'paths'), under ``source``,
    beside STaRK's query shares. Shares of each (graph, source) sum to one."""
    from ark.tools import kinds as tool_kinds

    kinds = tool_kinds()
    tools = [c for c in traj.columns if c in kinds]
    rows = []
    for g, t in traj.groupby("graph"):
        if tools:
            per_kind: dict[str, int] = {}
            for name in tools:
                per_kind[kinds[name]] = per_kind.get(kinds[name], 0) + int(t[name].sum())
        else:  # a frame without per-tool columns
            per_kind = {TEXT: int(t["search_calls"].sum()), RELATIONAL: int(t["neighbor_calls"].sum())}
        total = sum(per_kind.values())
        if total == 0:
            continue
        order = [TEXT, RELATIONAL] + sorted(k for k in per_kind if k not in (TEXT, RELATIONAL))
        rows += [{"graph": g, "source": source, "kind": k, "share": per_kind.get(k, 0) / total,
                  "calls": per_kind.get(k, 0)} for k in order]
    if stark is not None:
        for _, r in stark.iterrows():
            if r["graph"] in set(traj["graph"]) and pd.notna(r["textual_share"]) \
                    and pd.notna(r["relational_share"]):
                tot = r["textual_share"] + r["relational_share"]
                rows += [{"graph": r["graph"], "source": "STaRK queries", "kind": TEXT,
                          "share": r["textual_share"] / tot, "calls": np.nan},
                         {"graph": r["graph"], "source": "STaRK queries", "kind": RELATIONAL,
                          "share": r["relational_share"] / tot, "calls": np.nan}]
    return pd.DataFrame(rows, columns=["graph", "source", "kind", "share", "calls"])


def plot_tool_use(shares: pd.DataFrame) -> plt.Figure:
    """Per graph: a thick stacked bar of ARK's call shares (one per toolset source: the full toolset's,
    then any toolset with an opt-in tool), a thin one of STaRK's query shares."""
    graphs = _graph_sort(shares["graph"])
    ark_sources = sorted({s for s in shares["source"] if s.startswith("ARK")}, key=lambda s: (s != ARK_CALLS, s))
    width = 0.45 / max(len(ark_sources), 1)
    bars = [(src, -0.345 + width * (j + 0.5), width, 1.0) for j, src in enumerate(ark_sources)]
    fig, ax = plt.subplots(figsize=(1.8 + 1.6 * len(graphs) * max(1, len(ark_sources) * 0.6), 3.2),
                           constrained_layout=True)
    colors = {"text": "#4C72B0", "relational": "#DD8452"}
    kinds = list(dict.fromkeys(["text", "relational", *shares["kind"]]))
    extra = iter(["#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3", "#8C8C8C"])
    colors.update({k: next(extra, "#8C8C8C") for k in kinds if k not in colors})
    labels = {"text": "search", "relational": "neighbors"}
    for i, g in enumerate(graphs):
        for source, dx, width, alpha in (*bars, ("STaRK queries", 0.28, 0.14, 0.55)):
            s = shares[(shares.graph == g) & (shares.source == source)].set_index("kind")["share"]
            if s.empty:
                continue
            bottom = 0.0
            for kind in kinds:
                v = float(s.get(kind, 0.0))
                ax.bar(i + dx, v, width, bottom=bottom, color=colors[kind], alpha=alpha,
                       label=f"{labels.get(kind, kind)} calls (ARK)"
                       if source.startswith("ARK") else f"{kind} queries (STaRK)")
                if source.startswith("ARK") and v > 0.06:
                    ax.text(i + dx, bottom + v / 2, f"{100 * v:.1f}%", ha="center", va="center",
                            color="white", fontsize=8)
                bottom += v
    handles, labels = ax.get_legend_handles_labels()
    uniq = dict(zip(labels, handles))
    ax.legend(uniq.values(), uniq.keys(), fontsize=7, loc="upper left", bbox_to_anchor=(1, 1))
    ax.set_xticks(range(len(graphs)), [g.upper() for g in graphs])
    ax.set_ylim(0, 1)
    ax.set_ylabel("share")
    if len(ark_sources) > 1:   # which thick bar is which toolset
        for i in range(len(graphs)):
            for src, dx, _, _ in bars:
                name = "full" if src == ARK_CALLS else src[len(ARK_CALLS) + 2:-1]
                ax.text(i + dx, 1.01, name, ha="center", va="bottom", fontsize=6, rotation=90)
    ax.set_title("Tool calls (thick) vs STaRK query type (thin)", fontsize=10, pad=28 if len(ark_sources) > 1 else 6)
    return fig


# ------------------------------------------------------------------ Figure 5: neighbors vs success
def neighbor_calls_data(traj: pd.DataFrame) -> pd.DataFrame:
    """Counts of trajectories per (graph, outcome hit@5|miss, neighbor_calls)."""
    t = traj.assign(outcome=np.where(traj["hit5"], "hit@5", "miss"))
    out = t.groupby(["graph", "outcome", "neighbor_calls"]).size().rename("trajectories").reset_index()
    return out.sort_values(["graph", "outcome", "neighbor_calls"]).reset_index(drop=True)


def plot_neighbor_calls(counts: pd.DataFrame) -> plt.Figure:
    """One panel per graph: share of hit@5 and of missed trajectories per number of neighbor calls."""
    graphs = _graph_sort(counts["graph"])
    fig, axes = plt.subplots(1, len(graphs), squeeze=False, figsize=(3.6 * len(graphs), 3.0),
                             constrained_layout=True)
    for ax, g in zip(axes[0], graphs):
        c = counts[counts.graph == g]
        xs = np.arange(0, int(c["neighbor_calls"].max()) + 1)
        for outcome, dx, color in (("hit@5", -0.2, "#55A868"), ("miss", 0.2, "#C44E52")):
            s = c[c.outcome == outcome].set_index("neighbor_calls")["trajectories"].reindex(xs, fill_value=0)
            n = int(s.sum())
            ax.bar(xs + dx, s / max(n, 1), 0.4, color=color, label=f"{outcome} (n={n})")
        ax.set_title(g.upper(), fontsize=10)
        ax.set_xlabel("neighborhood calls per trajectory")
        ax.set_ylabel("share of trajectories")
        ax.legend(fontsize=8)
    return fig


# ------------------------------------------------------------------- Table 2 and Figure 4 (tables)
def _fmt(v) -> str:
    return "–" if v is None or not np.isfinite(v) else f"{v:.1f}"


def _compare(ours: pd.DataFrame, paper: pd.DataFrame, key: str) -> pd.DataFrame:
    """Outer-join ours (key, graph, metric, ours in %) with the paper's (key, graph, metric, value)."""
    p = paper.rename(columns={"value": "paper"})[[key, "graph", "metric", "paper"]]
    out = ours.merge(p, on=[key, "graph", "metric"], how="outer")
    out["delta"] = out["ours"] - out["paper"]
    return out


PAIRED_COLUMNS = ["reference", "paired_diff", "paired_ci_low", "paired_ci_high", "p_value", "significant"]


def paired_data(r: pd.DataFrame, key: str, reference: str, metrics: Sequence[str], test: str = "wilcoxon"
                ) -> pd.DataFrame:
    """Rows (key, graph, metric, reference, paired_diff, paired_ci_low, paired_ci_high [in %], p_value,
    significant) for every run of ``r`` against the run whose ``key`` is ``reference`` on the same
    graph (ark.analysis.paired: paired bootstrap interval, paired test over their common queries). Runs over
    other queries than the reference get no row."""
    rows = []
    for g, runs_g in r.groupby("graph"):
        ref = runs_g[runs_g[key] == reference]
        if ref.empty:
            continue
        ref_dir = ref["run_dir"].iloc[0]
        for _, x in runs_g[runs_g[key] != reference].iterrows():
            try:
                diffs = comparison.compare_runs(x["run_dir"], ref_dir, metrics, test=test)
            except ValueError:
                continue
            rows += [{key: x[key], "graph": g, "metric": d.metric, "reference": reference,
                      "paired_diff": 100 * d.diff, "paired_ci_low": 100 * d.ci_low,
                      "paired_ci_high": 100 * d.ci_high, "p_value": d.p_value, "significant": d.significant}
                     for d in diffs if d.n]
    return pd.DataFrame(rows, columns=[key, "graph", "metric", *PAIRED_COLUMNS])


def _with_paired(out: pd.DataFrame, paired: pd.DataFrame, key: str) -> pd.DataFrame:
    out = out.merge(paired, on=[key, "graph", "metric"], how="left")
    out["significant"] = out["significant"].astype("boolean").fillna(False).astype(bool)
    return out


def ablation_data(runs: pd.DataFrame, paper: pd.DataFrame | None = None, reference: str = FULL) -> pd.DataFrame:
    """Rows (setup, graph, metric, ours, paper, delta, and the paired comparison with the
    ``reference`` setup's run on the same graph: see `paired_data`) for Hit@1 and R@20, in %, one per
    toolset setup; with several runs of one setup on a graph, the one with most queries."""
    metrics = ["hit@1", "recall@20"]
    r = runs[(runs["retriever"] == "ark") & runs["ablation"].notna()]
    if "experiment" in r and (r["experiment"] == "ablation").any():
        r = r[r["experiment"] == "ablation"]
    r = r.sort_values("n").groupby(["ablation", "graph"]).tail(1)
    ours = r.melt(id_vars=["ablation", "graph"], value_vars=metrics,
                  var_name="metric", value_name="ours").rename(columns={"ablation": "setup"})
    ours["ours"] = 100 * ours["ours"]
    out = ours.assign(paper=np.nan, delta=np.nan) if paper is None else _compare(ours, paper, "setup")
    paired = paired_data(r.rename(columns={"ablation": "setup"}), "setup", reference, metrics)
    return _with_paired(out, paired, "setup")


_BACKBONE_NOISE = {"distilled", "distill", "sft", "instruct", "lora", "ark", "student"}


def backbone_key(name: str) -> str:
    """'Qwen3-8B-600', 'qwen3-8b-distilled-600', 'qwen3-8b-ark-600' -> 'qwen38b600'; 'gpt-4.1' -> 'gpt41'."""
    tokens = re.split(r"[^a-z0-9]+", str(name).lower())
    return "".join(t for t in tokens if t not in _BACKBONE_NOISE)


def backbone_data(runs: pd.DataFrame, paper: pd.DataFrame | None = None, reference: str = "gpt-4.1"
                  ) -> pd.DataFrame:
    """Rows (backbone, graph, metric, ours, paper, delta, and the paired comparison with the
    ``reference`` backbone's run on the same graph: see `paired_data`) in %, for Hit@1, Hit@5, R@20,
    MRR of ARK runs with the full toolset; runs of the same backbone/graph: the one with most queries."""
    r = runs[(runs["retriever"] == "ark") & (runs["ablation"] == FULL)].dropna(subset=["backbone"])
    r = r.assign(key=r["backbone"].map(backbone_key))
    if "t_max" in r and r["t_max"].notna().any():   # the paper's operating point when present
        pref = r[(r["t_max"] == 20) & (r["n_agents"] == 3)]
        r = pd.concat([pref, r[~r["key"].isin(pref["key"])]])
    r = r.sort_values("n").groupby(["key", "graph"]).tail(1)
    ours = r.melt(id_vars=["key", "graph"], value_vars=list(METRICS), var_name="metric", value_name="ours")
    ours["ours"] = 100 * ours["ours"]
    if paper is None:
        out = ours.assign(paper=np.nan, delta=np.nan)
    else:
        p = paper.assign(key=paper["backbone"].map(backbone_key))
        out = _compare(ours, p.drop(columns=["backbone"]), "key")
        labels = dict(zip(p["key"], p["backbone"]))
    names = dict(zip(r["key"], r["backbone"]))
    order = list(dict.fromkeys(list(labels) + list(names))) if paper is not None else list(names)
    if paper is not None:
        names = {**names, **labels}
    out["backbone"] = out["key"].map(names)
    out["order"] = out["key"].map(order.index)
    out = out.sort_values(["order", "graph", "metric"], kind="stable")
    ref_key = backbone_key(reference)
    out = _with_paired(out, paired_data(r, "key", ref_key, list(METRICS)), "key")
    out["reference"] = out["reference"].map(lambda k: names.get(k, reference) if isinstance(k, str) else k)
    return out[["backbone", "graph", "metric", "ours", "paper", "delta", *PAIRED_COLUMNS]].reset_index(drop=True)


def comparison_table(data: pd.DataFrame, row: str, metrics: Sequence[str],
                     row_order: Sequence[str] | None = None,
                     row_labels: dict | None = None) -> dict[str, str]:
    """md / csv / tex text of a comparison: one row per `row`, one column per (graph, metric),
    cells 'ours (paper)'. The csv is the tidy data itself."""
    graphs = _graph_sort(data["graph"])
    rows = list(row_order or dict.fromkeys(data[row]))
    rows = [x for x in rows if x in set(data[row])]
    cell = {(r[row], r["graph"], r["metric"]): (r["ours"], r["paper"]) for _, r in data.iterrows()}
    sig = {(r[row], r["graph"], r["metric"]) for _, r in data.iterrows()
           if "significant" in data and bool(r["significant"])}
    refs = sorted({str((row_labels or {}).get(x, x)) for x in data.get("reference", pd.Series(dtype=object)).dropna()})
    head = [row.capitalize()] + [f"{g.upper()} {LABELS[m]}" for g in graphs for m in metrics]
    body = []
    for x in rows:
        cells = []
        for g in graphs:
            for m in metrics:
                o, p = cell.get((x, g, m), (np.nan, np.nan))
                mark = "*" if (x, g, m) in sig else ""
                cells.append(f"{_fmt(o)}{mark} ({_fmt(p)})")
        body.append([(row_labels or {}).get(x, x)] + cells)
    md = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    md += ["| " + " | ".join(b) + " |" for b in body]
    md.append("\nCells: ours (paper), in %. – = not run / not reported.")
    if refs:
        md.append(f"`*`: differs from {', '.join(refs)} on the same queries (paired Wilcoxon signed-rank test, "
                  "p < 0.05); the paired differences, their 95% bootstrap intervals and p-values are in the csv.")
    ncol = len(metrics)
    tex = ["\\begin{tabular}{l" + "c" * (len(head) - 1) + "}", "\\toprule",
           " & " + " & ".join(f"\\multicolumn{{{ncol}}}{{c}}{{{g.upper()}}}" for g in graphs) + " \\\\",
           row.capitalize() + " & " + " & ".join(LABELS[m] for _ in graphs for m in metrics) + " \\\\",
           "\\midrule"]
    tex += [" & ".join(b).replace("%", "\\%").replace("_", "\\_") + " \\\\" for b in body]
    tex += ["\\bottomrule", "\\end{tabular}", "% cells: ours (paper), in %"
            + (f"; * paired Wilcoxon p < 0.05 against {', '.join(refs)}" if refs else "")]
    return {"md": "\n".join(md) + "\n", "csv": data.to_csv(index=False), "tex": "\n".join(tex) + "\n"}


def plot_backbones(data: pd.DataFrame) -> plt.Figure:
    """Graphs x metrics grid of bars per backbone: ours solid, the paper's hatched beside it; `*` over
    ours where the paired difference with the reference backbone is significant."""
    graphs = _graph_sort(data["graph"])
    metrics = [m for m in METRICS if m in set(data["metric"])]
    backbones = list(dict.fromkeys(data["backbone"]))
    fig, axes = plt.subplots(len(graphs), len(metrics), squeeze=False, sharey="row",
                             figsize=(2.2 + 1.0 * len(backbones) * len(metrics) * 0.5, 2.8 * len(graphs)),
                             constrained_layout=True)
    xs = np.arange(len(backbones))
    for i, g in enumerate(graphs):
        for j, m in enumerate(metrics):
            ax = axes[i][j]
            d = data[(data.graph == g) & (data.metric == m)].set_index("backbone").reindex(backbones)
            ax.bar(xs - 0.2, d["ours"].fillna(0), 0.4, color="#4C72B0", label="ours")
            if "significant" in d:   # paired difference with the reference backbone holds
                for x, (o, flag) in enumerate(zip(d["ours"].fillna(0), d["significant"].fillna(False))):
                    if flag:
                        ax.text(x - 0.2, o, "*", ha="center", va="bottom", fontsize=10)
            ax.bar(xs + 0.2, d["paper"].fillna(0), 0.4, color="#BBBBBB", hatch="//", label="paper")
            ax.set_xticks(xs, backbones, rotation=60, ha="right", fontsize=7)
            ax.set_title(f"{g.upper()} · {LABELS[m]}", fontsize=9)
            if i == 0 and j == 0:
                ax.legend(fontsize=7)
    return fig


# ------------------------------------------------------------------ failure attribution (ours)
def attribution_data(runs: pd.DataFrame) -> pd.DataFrame:
    """Rows (graph, experiment, retriever, backbone, ablation, run, class, count, share, run_dir): for
    each run, how many of its gold nodes fall in each class of ark.analysis.attribution (share of all gold;
    metrics.json["attribution"] when the runner wrote it, else computed from the trajectories)."""
    rows = []
    for _, r in runs.iterrows():
        run = rundir.RunDir(r["run_dir"])
        summary = run.metrics.get("attribution") or attribution.summarize(attribute_run(run))
        for c in attribution.CLASSES:
            rows.append({"graph": r["graph"], "experiment": r["experiment"], "retriever": r["retriever"],
                         "backbone": r["backbone"], "ablation": r["ablation"], "run": run_label(run.info),
                         "class": c, "count": summary["counts"].get(c, 0),
                         "share": summary["share"].get(c, 0.0), "run_dir": r["run_dir"]})
    cols = ["graph", "experiment", "retriever", "backbone", "ablation", "run", "class", "count", "share", "run_dir"]
    out = pd.DataFrame(rows, columns=cols)
    # two runs with one label on a graph (the same setting in two experiments): name the experiment too
    dup = out.groupby(["graph", "run"])["run_dir"].transform("nunique") > 1
    out.loc[dup, "run"] = out.loc[dup, "run"] + " (" + out.loc[dup, "experiment"].astype(str) + ")"
    return out


ATTRIBUTION_COLORS = {"retrieved": "#55A868", "beyond_top": "#8172B2", "selected_fused_out": "#C8A2C8",
                      "surfaced_not_selected": "#DD8452", "never_surfaced": "#C44E52"}


def plot_attribution(data: pd.DataFrame) -> plt.Figure:
    """One panel per graph: a stacked bar per run (ablation, backbone, budget), the share of its gold
    nodes in each attribution class, retrieved at the bottom."""
    graphs = _graph_sort(data["graph"])
    n_runs = max(data[data.graph == g]["run"].nunique() for g in graphs)
    fig, axes = plt.subplots(1, len(graphs), squeeze=False, sharey=True,
                             figsize=(1.5 + (0.5 * n_runs + 0.8) * len(graphs), 4.2), constrained_layout=True)
    for ax, g in zip(axes[0], graphs):
        d = data[data.graph == g]
        names = list(dict.fromkeys(d["run"]))
        bottom = np.zeros(len(names))
        for c in attribution.CLASSES:
            v = d[d["class"] == c].set_index("run")["share"].reindex(names).fillna(0).to_numpy()
            ax.bar(range(len(names)), v, 0.7, bottom=bottom, color=ATTRIBUTION_COLORS[c],
                   label=attribution.CLASS_LABEL[c])
            bottom += v
        ax.set_xticks(range(len(names)), names, rotation=60, ha="right", fontsize=7)
        ax.set_title(g.upper(), fontsize=10)
        ax.set_ylim(0, 1)
    axes[0][0].set_ylabel("share of gold nodes")
    handles, labels = axes[0][0].get_legend_handles_labels()
    axes[0][-1].legend(handles[::-1], labels[::-1], fontsize=7, loc="upper left", bbox_to_anchor=(1, 1))
    return fig


# ------------------------------------------------------------------------------------- writing
def save_figure(fig: plt.Figure, data: pd.DataFrame, out_dir: Path | str, stem: str) -> dict[str, Path]:
    """Write <stem>.png, <stem>.pdf and the data as <stem>.csv; close the figure."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {ext: out / f"{stem}.{ext}" for ext in ("png", "pdf", "csv")}
    fig.savefig(paths["png"], dpi=200, bbox_inches="tight")
    fig.savefig(paths["pdf"], bbox_inches="tight")
    plt.close(fig)
    data.to_csv(paths["csv"], index=False)
    return paths


def save_table(texts: dict[str, str], out_dir: Path | str, stem: str) -> dict[str, Path]:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {}
    for ext, text in texts.items():
        paths[ext] = out / f"{stem}.{ext}"
        paths[ext].write_text(text)
    return paths


def full_toolset(runs: pd.DataFrame) -> pd.DataFrame:
    """ARK runs with every tool enabled."""
    return runs[(runs["retriever"] == "ark") & (runs["ablation"] == "full")]


def select_budget_runs(runs: pd.DataFrame, log=print) -> pd.DataFrame:
    """The budget sweep among `runs`: full-toolset ARK runs, those of an experiment named
    '*budget*' if any, and of one backbone (the one with most runs) if several."""
    full = full_toolset(runs)
    is_budget = full["experiment"].astype(str).str.contains("budget")
    sweep = full[is_budget] if is_budget.any() else full
    if sweep["backbone"].nunique() > 1:
        top = sweep["backbone"].value_counts().index[0]
        log(f"fig2_budget_heatmaps: several backbones, using {top!r}")
        sweep = sweep[sweep["backbone"] == top]
    return sweep


def _added_tool_shares(runs: pd.DataFrame, ablations: dict[str, str] | None) -> list[pd.DataFrame]:
    """Figure 3's shares of each toolset that offers an opt-in tool (e.g. ``ablation=paths``), one source
    per toolset, beside the full toolset's: such a toolset adds tools, so its bar shows how much the added
    tool took over from the paper's two."""
    extended = runs[(runs["retriever"] == "ark") & (runs["ablation"] != FULL) & (runs["added_tools"] != "")]
    out = []
    for name, group in extended.groupby("ablation"):
        traj = load_trajectories(group["run_dir"], runs)
        if not traj.empty:
            label = (ablations or {}).get(name, name)
            out.append(tool_share_data(traj, source=f"{ARK_CALLS} ({label})"))
    return out


def make_all(run_dirs: Sequence[Path | str], out_dir: Path | str, paper_dir: Path = PAPER_DIR, log=print,
             ablations: dict[str, str] | None = None) -> dict[str, dict[str, Path]]:
    """Every figure/table the given runs support; the others are skipped with the reason logged.
    ``ablations``: {toolset name: label} for Table 2's rows (`ablation_order`)."""
    dirs = find_run_dirs(run_dirs)
    if not dirs:
        raise ValueError(f"no run dirs (folders with predictions.jsonl) under {list(map(str, run_dirs))}")
    runs = load_runs(dirs)
    ark = runs[runs["retriever"] == "ark"]
    # Figures 3 and 5 describe the full toolset's behaviour: ablated runs would skew the shares.
    traj = load_trajectories(full_toolset(runs)["run_dir"], runs)
    written: dict[str, dict[str, Path]] = {}
    try:
        cells = budget_data(select_budget_runs(runs, log), keep_largest=True)
        if cells.empty:
            log("fig2_budget_heatmaps: skipped (no ARK run with T_max and n in its config)")
        else:
            written["fig2_budget_heatmaps"] = save_figure(plot_budget_heatmaps(cells), cells, out_dir,
                                                          "fig2_budget_heatmaps")
    except ValueError as e:
        log(f"fig2_budget_heatmaps: skipped ({e})")
    added = _added_tool_shares(runs, ablations)
    if traj.empty and not added:
        log("fig3_tool_use, fig5_neighbor_calls: skipped (no ARK trajectories)")
    else:
        full = [tool_share_data(traj, load_stark_shares(paper_dir))] if not traj.empty else []
        shares = pd.concat([*full, *added], ignore_index=True)
        written["fig3_tool_use"] = save_figure(plot_tool_use(shares), shares, out_dir, "fig3_tool_use")
    if traj.empty:
        log("fig5_neighbor_calls: skipped (no trajectories of the full toolset)")
    else:
        counts = neighbor_calls_data(traj)
        written["fig5_neighbor_calls"] = save_figure(plot_neighbor_calls(counts), counts, out_dir,
                                                     "fig5_neighbor_calls")
    abl = ablation_data(ark, load_paper_table("table2_ablation", paper_dir))
    if abl["ours"].notna().any():
        order = ablation_order(abl["setup"], ablations)
        written["table2_ablation"] = save_table(
            comparison_table(abl, "setup", ("hit@1", "recall@20"), list(order), order),
            out_dir, "table2_ablation")
    else:
        log("table2_ablation: skipped (no ARK run with a toolset setup)")
    bb = backbone_data(ark, load_paper_table("backbones", paper_dir))
    if bb["ours"].notna().any():
        written["table_backbones"] = save_table(comparison_table(bb, "backbone", METRICS),
                                                out_dir, "table_backbones")
        written["fig4_backbones"] = save_figure(plot_backbones(bb), bb, out_dir, "fig4_backbones")
    else:
        log("fig4_backbones: skipped (no ARK run with a backbone in its config)")
    attr = attribution_data(runs)
    if attr["count"].sum() > 0:
        written["fig_attribution"] = save_figure(plot_attribution(attr), attr, out_dir, "fig_attribution")
    else:
        log("fig_attribution: skipped (no scored gold nodes)")
    for name, paths in written.items():
        log(f"{name}: " + ", ".join(str(p) for p in paths.values()))
    return written
