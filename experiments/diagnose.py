"""The reachability ceiling of a graph's query set, without an LLM (`ark.eval.reachability`).

    python experiments/diagnose.py graph=demo                         # the demo's 480 test queries
    python experiments/diagnose.py graph=demo limit=100 'reach.ks=[5,20,50]'
    python experiments/diagnose.py graph=prime split=test-0.1 ablation=no_type_filter 'reach.filters=[none]'

Writes ``reach.json`` (summary per setting), ``reach_gold.csv`` (level of every gold node per setting)
and ``reach_queries.csv`` (hits and one-hop pool per query) to ``out_dir``
(``results/diagnose/<graph>/<split>-<ablation>``) and prints the table. `main` is a thin
``@hydra.main`` over `run(cfg)`, which tests call with a composed config (conf/diagnose.yaml).
`load_summaries` and `plot_reachability` read those folders back for notebooks/07_reachability.ipynb.
"""

from __future__ import annotations

from pathlib import Path

import hydra
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from ark.eval import reachability as R

CONF_DIR = Path(__file__).resolve().parents[1] / "conf"


def settings_from(cfg: DictConfig) -> R.ReachSettings:
    r = cfg.reach
    return R.ReachSettings(ks=tuple(r.ks), neighbors_k=int(r.neighbors_k), filters=tuple(r.filters))


def build_toolset(graph, tools_cfg: DictConfig, settings: R.ReachSettings, index_cache: str | None):
    """The configured ToolSet over ``graph``, with ``search_k_max`` raised to cover every measured k."""
    from ark.search.bm25 import BM25Index, load_index
    from ark.tools import ToolSet

    tools = instantiate(tools_cfg)
    tools.search_k_max = max(tools.search_k_max, *settings.ks)
    tools.neighbors_k_max = max(tools.neighbors_k_max, settings.neighbors_k)
    index_cache = index_cache or graph.directory   # default: inside the graph's own cache folder
    index = load_index(graph, index_cache) if index_cache else BM25Index.build(graph.texts())
    return ToolSet(graph, index, tools)


def run(cfg: DictConfig) -> dict:
    """Measure the ceiling for the composed config; returns the summary (also written to ``out_dir``)."""
    from ark.eval.runner import select_queries

    settings = settings_from(cfg)  # bad values fail here, before the graph loads
    source = instantiate(cfg.graph)
    problems = list(source.problems())
    if problems:
        raise SystemExit(f"graph {cfg.graph.name!r} cannot load:\n" + "\n".join(f"  - {p}" for p in problems))
    graph = source.graph()
    queries = select_queries(source.queries().split(cfg.split), cfg.limit)
    toolset = build_toolset(graph, cfg.ablation.tools, settings, cfg.paths.index_cache)
    settings.check(toolset)
    rows, pools = R.reachability(toolset, queries, settings, progress=cfg.progress)
    info = {"graph": cfg.graph.name, "split": cfg.split, "limit": cfg.limit, "ablation": cfg.ablation.name,
            "tools": OmegaConf.to_container(cfg.ablation.tools, resolve=True)}
    summary = R.write(cfg.out_dir, rows, pools, settings, info)
    print(f"reachability of {cfg.graph.name}/{cfg.split}: {len(queries)} queries -> {cfg.out_dir}")
    print(R.markdown_table(summary, settings.neighbors_k))
    return summary


def find_reach_dirs(paths) -> list[Path]:
    """Folders holding a ``reach.json``: the given ones and any below them."""
    found = []
    for p in map(Path, [paths] if isinstance(paths, (str, Path)) else paths):
        found += [f.parent for f in sorted(p.rglob("reach.json"))] if p.is_dir() else []
    return list(dict.fromkeys(found))


def load_summaries(paths):
    """One row per folder, setting and level: graph, split, ablation, k, filter, level, recall, any,
    queries (a pandas DataFrame; the shares are cumulative over `ark.eval.reachability.LEVELS`)."""
    import pandas as pd

    rows = []
    for d in find_reach_dirs(paths):
        doc = R.read(d)
        for name, e in doc["summary"].items():
            for level in R.LEVELS:
                rows.append({"graph": doc.get("graph"), "split": doc.get("split"), "ablation": doc.get("ablation"),
                             "setting": name, "k": e["k"], "filter": e["filter"], "level": level,
                             "recall": e[level]["recall"], "any": e[level]["any"], "queries": e["queries"],
                             "mean_pool1": e["mean_pool1"], "dir": str(d)})
    return pd.DataFrame(rows, columns=["graph", "split", "ablation", "setting", "k", "filter", "level", "recall",
                                       "any", "queries", "mean_pool1", "dir"])


def plot_reachability(df):
    """Stacked bars per graph: for each setting, the share of gold nodes first reached at each level."""
    import matplotlib.pyplot as plt

    groups = list(df.groupby(["graph", "split", "ablation"], sort=False))
    fig, axes = plt.subplots(1, max(1, len(groups)), figsize=(4.5 * max(1, len(groups)), 3.6), squeeze=False)
    colors = {"search": "#1b9e77", "neighbors": "#7570b3", "hop1": "#d95f02", "hop2": "#e6ab02"}
    labels = {"search": "search hits", "neighbors": "+ neighbor call", "hop1": "+ within 1 hop",
              "hop2": "+ within 2 hops"}
    for ax, ((graph, split, ablation), g) in zip(axes[0], groups):
        settings = list(dict.fromkeys(g["setting"]))
        bottom = [0.0] * len(settings)
        for level in R.LEVELS:
            cum = [float(g[(g.setting == s) & (g.level == level)]["recall"].iloc[0]) for s in settings]
            part = [c - b for c, b in zip(cum, bottom)]
            ax.bar(range(len(settings)), part, bottom=bottom, color=colors[level], label=labels[level])
            bottom = cum
        ax.set_xticks(range(len(settings)), settings, rotation=30, ha="right")
        ax.set_ylim(0, 1)
        n = int(g["queries"].iloc[0])
        ax.set_title(f"{graph} / {split} ({ablation}, {n} queries)", fontsize=9)
        ax.set_ylabel("share of gold nodes (mean per query)")
    axes[0][0].legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    return fig


def compose(overrides: list[str] | tuple[str, ...] = ()) -> DictConfig:
    """conf/diagnose.yaml composed with ``overrides`` (as tests use it)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return hydra_compose(config_name="diagnose", overrides=list(overrides))


@hydra.main(version_base="1.3", config_path="../conf", config_name="diagnose")
def main(cfg: DictConfig) -> None:
    run(cfg)


if __name__ == "__main__":
    main()
