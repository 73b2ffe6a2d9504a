"""Reachability from the question's own words: how far each gold node is from what one chain of calls
built from the whole question text shows, computed without an LLM.

This is *not* a ceiling for agents. It follows one chain per query -- search the whole question, then
explore each hit's neighbors with the whole question as subquery -- and then reports graph distance.
An agent that searches a name the question mentions, filters a neighbor call, or makes a second one
can reach gold nodes this calls unreachable; `ark.analysis.reach_bound` is the upper bound over a stated
family of such chains. For each query and each of its gold nodes, this asks the real tools
(`ark.tools.toolset.ToolSet.call`) and records the first of four nested levels at which the gold node
appears:

1. ``search``    — among the top-k hits of ``search_graph(query=<query text>, k)``;
2. ``neighbors`` — or in the top ``neighbors_k`` (20) of ``explore_neighbors(hit, query=<query text>)``
   for one of those hits (one neighbor call per hit, the query text as subquery);
3. ``hop1``      — or anywhere within one hop of a hit (graph distance: no call shows it);
4. ``hop2``      — or within two hops of a hit (graph distance; on the demo a hop shows about 50 nodes
   per hit, so this level says little);

and ``None`` when it is farther. Each level contains the previous one, so the share of gold nodes
"reached by level L" is cumulative. Levels 1 and 2 are what that one chain shows; levels 3 and 4 say
how close the rest lies in the graph, not that any call would show it.

Each setting is measured with and without type filters (``filters``), which pass the node types of
the query's gold nodes (an oracle: the question usually names the answer type) as ``node_types``:
``none`` passes none; ``neighbors`` passes them to the neighbor calls only (the paper's
``Neighbors(v, q, F)``), so the search still finds the entities the question names; ``all`` passes them
to the search too. The pool size (``pool1``: nodes within one hop of the hits, only those of the gold
types when filtered) says how many candidates a one-hop exploration would have to sift.

Shares are reported per query and averaged over queries (``recall``: a query's share of its gold
nodes, as STaRK's Recall averages; ``any``: at least one gold node reached).

    toolset = ToolSet(graph, index, ToolConfig(search_k_max=20))
    rows, pools = reachability(toolset, queries, ReachSettings(ks=(5, 20)))
    summary = summarize(rows, pools)     # {"k5": {"search": {...}, ...}, "k5_neighbors": {...}, ...}
    print(markdown_table(summary))

`toolset_for` builds the tool set a measurement needs (its k limits raised to cover every measured k).
The command line is ``ark diagnose`` or ``experiments/diagnose.py`` (Hydra: any graph from ``conf/graph``,
`ark.config.jobs.diagnose`); `load_summaries` and `plot_reachability` read the folders it writes back
for notebooks/07_reachability.ipynb.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from ark.tools import NEIGHBORS, SEARCH, ToolSet

LEVELS = ("search", "neighbors", "hop1", "hop2")
FILTERS = ("none", "neighbors", "all")  # where the gold node types go as node_types
LEVEL_TEXT = {
    "search": "in the search hits",
    "neighbors": "in a neighbor call's top {nk} from a hit",
    "hop1": "within 1 hop of a hit, below a neighbor call's top {nk}",
    "hop2": "within 2 hops of a hit",
    None: "beyond 2 hops of the search hits",
}
FILTER_TEXT = {"none": "none", "neighbors": "neighbor calls", "all": "search + neighbor calls"}


@dataclass(frozen=True)
class ReachSettings:
    """What to measure. Every k is a ``search_graph`` k; the toolset must allow it (``search_k_max``)."""

    ks: tuple[int, ...] = (5, 20)  # search depths (paper default k = 5)
    neighbors_k: int = 20  # k of each neighbor call (paper: 20)
    filters: tuple[str, ...] = FILTERS  # type filters to measure, of FILTERS

    def __post_init__(self) -> None:
        ks = tuple(int(k) for k in self.ks)
        if not ks or min(ks) < 1:
            raise ValueError(f"ks must be a non-empty list of integers >= 1, got {list(self.ks)}")
        if self.neighbors_k < 1:
            raise ValueError(f"neighbors_k must be >= 1, got {self.neighbors_k}")
        filters = tuple(dict.fromkeys(str(f) for f in self.filters))
        bad = [f for f in filters if f not in FILTERS]
        if bad or not filters:
            raise ValueError(f"filters {list(self.filters)} are not valid; choose from {list(FILTERS)}")
        object.__setattr__(self, "ks", tuple(sorted(set(ks))))
        object.__setattr__(self, "filters", filters)

    def check(self, toolset: ToolSet) -> None:
        """Raise ValueError, naming the setting to change, when ``toolset`` cannot make these calls."""
        c = toolset.config
        check_call_sizes(toolset, self.ks, self.neighbors_k)
        if any(f != "none" for f in self.filters) and not (c.neighbors and c.type_filter):
            raise ValueError(f"filters {list(self.filters)} need explore_neighbors with its type filter "
                             "(ToolConfig.neighbors and type_filter), which this toolset has off; use filters=[none]")
        if "all" in self.filters and not c.search_type_filter:
            raise ValueError("filter 'all' needs search_graph's node_types (ToolConfig.search_type_filter), "
                             "which this toolset has off; use filters=[none, neighbors]")
        if not c.neighbors:
            raise ValueError("the reachability levels need explore_neighbors; this toolset has it off "
                             "(ToolConfig.neighbors=false)")


def setting_name(k: int, filt: str) -> str:
    return f"k{k}" + ("" if filt == "none" else f"_{filt}")


@dataclass
class GoldReach:
    """How far one gold node of one query is from what the tools show, for one setting."""

    query_id: int | str
    gold: int
    k: int
    filter: str  # of FILTERS
    level: str | None  # first of LEVELS that contains the gold node, None beyond two hops
    search_rank: int | None = None  # 1-based rank in the search hits, when there
    neighbor_rank: int | None = None  # best 1-based rank in a neighbor call of a hit, when there
    via: int | None = None  # the hit whose neighbor call (or neighborhood) holds it


@dataclass
class Pool:
    """Per query and setting: hits shown and nodes within one hop of them."""

    query_id: int | str
    k: int
    filter: str
    hits: int  # nodes search_graph showed
    pool1: int  # distinct nodes within one hop of the hits, hits included (gold types only when filtered)
    search_error: str | None = None  # the tool's error text (e.g. a query of only stopwords)


@dataclass
class _Calls:
    """Tool answers for one query and filter, reused across ks (a top-k is a prefix of a larger top-k)."""

    hits: list[int]
    error: str | None
    neighbor_ids: dict[int, list[int]] = field(default_factory=dict)  # hit -> ids its neighbor call shows
    near: dict[int, set[int]] = field(default_factory=dict)  # hit -> the hit and all its neighbors


def _closed_neighborhood(graph, v: int) -> set[int]:
    """``v`` and all its neighbors (both directions)."""
    return {int(v), *graph.neighbors(int(v)).nodes.tolist()}


def gold_types(graph, gold: Sequence[int]) -> list[str]:
    """Node type names of the gold nodes, in the graph's type order."""
    ids = sorted({int(graph.node_types[int(g)]) for g in gold})
    return [graph.node_type_names[i] for i in ids]


def toolset_for(graph, tools, settings: ReachSettings, index_cache: str | Path | None = None) -> ToolSet:
    """The tool set over ``graph`` with the tool config ``tools`` (`ark.tools.toolset.ToolConfig`, changed
    in place), its ``search_k_max`` and ``neighbors_k_max`` raised to cover every measured k; the BM25
    index is cached under ``index_cache`` (default: inside the graph's own cache folder)."""
    from ark.search.bm25 import BM25Index, load_index

    tools.search_k_max = max(tools.search_k_max, *settings.ks)
    tools.neighbors_k_max = max(tools.neighbors_k_max, settings.neighbors_k)
    index_cache = index_cache or graph.directory
    index = load_index(graph, index_cache) if index_cache else BM25Index.build(graph.texts())
    return ToolSet(graph, index, tools)


def query_reach(toolset: ToolSet, query_id, text: str, gold: Sequence[int], settings: ReachSettings
                ) -> tuple[list[GoldReach], list[Pool]]:
    """The reach of each gold node of one query for every setting (see the module doc)."""
    graph = toolset.graph
    gold = [int(g) for g in dict.fromkeys(int(g) for g in gold)]
    types = gold_types(graph, gold)
    type_ids = {graph.node_type_id(t) for t in types}
    ball = {g: _closed_neighborhood(graph, g) for g in gold}
    kmax = max(settings.ks)
    rows: list[GoldReach] = []
    pools: list[Pool] = []
    near: dict[int, set[int]] = {}
    for mode in settings.filters:
        filt = {"node_types": types} if mode != "none" else {}
        search_filt = {"node_types": types} if mode == "all" else {}
        res = toolset.call(SEARCH, {"query": text, "k": kmax, **search_filt})
        calls = _Calls([int(i) for i in res.node_ids], res.error, near=near)  # neighborhoods shared
        for k in settings.ks:
            hits = calls.hits[:k]
            for v in hits:
                if v not in calls.neighbor_ids:
                    nres = toolset.call(NEIGHBORS, {"node_id": toolset.ids.show(v), "query": text,   # its ids
                                                    "k": settings.neighbors_k, **filt})
                    calls.neighbor_ids[v] = [int(i) for i in nres.node_ids]
                if v not in near:
                    near[v] = _closed_neighborhood(graph, v)
            one_hop = set().union(*(calls.near[v] for v in hits))
            if mode != "none":
                one_hop_pool = sum(1 for u in one_hop if int(graph.node_types[u]) in type_ids)
            else:
                one_hop_pool = len(one_hop)
            pools.append(Pool(query_id, k, mode, len(hits), one_hop_pool, calls.error))
            for g in gold:
                rows.append(_reach_one(query_id, g, k, mode, hits, calls, ball[g]))
    return rows, pools


def _reach_one(query_id, g: int, k: int, mode: str, hits: list[int], calls: _Calls, ball: set[int]
               ) -> GoldReach:
    r = GoldReach(query_id, g, k, mode, None)
    if g in hits:
        r.level, r.search_rank = "search", hits.index(g) + 1
        return r
    ranked = [(calls.neighbor_ids[v].index(g) + 1, v) for v in hits if g in calls.neighbor_ids[v]]
    if ranked:
        r.level, (r.neighbor_rank, r.via) = "neighbors", min(ranked)
        return r
    for level, test in (("hop1", lambda v: g in calls.near[v]), ("hop2", lambda v: bool(ball & calls.near[v]))):
        via = next((v for v in hits if test(v)), None)
        if via is not None:
            r.level, r.via = level, via
            return r
    return r


def reachability(toolset: ToolSet, queries: Sequence, settings: ReachSettings | None = None,
                 progress: bool = False) -> tuple[list[GoldReach], list[Pool]]:
    """`query_reach` over ``queries`` (objects with ``id``, ``text``, ``answer_ids``)."""
    settings = settings or ReachSettings()
    settings.check(toolset)
    rows: list[GoldReach] = []
    pools: list[Pool] = []
    it = queries
    if progress:
        from tqdm.auto import tqdm

        it = tqdm(queries, desc="reachability", unit="query")
    for q in it:
        r, p = query_reach(toolset, q.id, q.text, q.answer_ids, settings)
        rows += r
        pools += p
    return rows, pools


def summarize(rows: Sequence[GoldReach], pools: Sequence[Pool]) -> dict[str, dict]:
    """Per setting (``k5``, ``k5_neighbors``, ``k5_all``, ...): for each level, the mean over queries of the share of its
    gold nodes reached by that level (``recall``) and the share of queries with at least one reached
    (``any``); plus the number of queries and gold nodes and the mean hits and one-hop pool size."""
    out: dict[str, dict] = {}
    by_setting: dict[tuple[int, int], dict] = {}
    for r in rows:
        by_setting.setdefault((r.k, FILTERS.index(r.filter)), {}).setdefault(r.query_id, []).append(r)
    pool_by: dict[tuple[int, int], list[Pool]] = {}
    for p in pools:
        pool_by.setdefault((p.k, FILTERS.index(p.filter)), []).append(p)
    for (k, f), per_query in sorted(by_setting.items()):
        n = len(per_query)
        entry: dict = {"k": k, "filter": FILTERS[f], "queries": n,
                       "gold": sum(len(v) for v in per_query.values())}
        for i, level in enumerate(LEVELS):
            allowed = set(LEVELS[: i + 1])
            shares = [sum(r.level in allowed for r in v) / len(v) for v in per_query.values()]
            entry[level] = {"recall": float(np.mean(shares)), "any": float(np.mean([s > 0 for s in shares]))}
        ps = pool_by.get((k, f), [])
        entry["mean_hits"] = float(np.mean([p.hits for p in ps])) if ps else 0.0
        entry["mean_pool1"] = float(np.mean([p.pool1 for p in ps])) if ps else 0.0
        entry["search_errors"] = sum(p.search_error is not None for p in ps)
        out[setting_name(k, FILTERS[f])] = entry
    return out


def markdown_table(summary: dict[str, dict], neighbors_k: int = 20) -> str:
    """One row per setting: cumulative recall (any-gold share in brackets) at each level."""
    head = ["search k", "gold-type filter on", "queries", "search hits", f"+ neighbor call top {neighbors_k}",
            "within 1 hop", "within 2 hops", "1-hop pool"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for e in summary.values():
        cells = [str(e["k"]), FILTER_TEXT[e["filter"]], str(e["queries"])]
        cells += [f"{100 * e[lv]['recall']:.1f}% ({100 * e[lv]['any']:.1f}%)" for lv in LEVELS]
        cells.append(f"{e['mean_pool1']:.0f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def describe(r: GoldReach, neighbors_k: int = 20) -> str:
    """One line for a gold node's reach, e.g. for the demo's per-query printout."""
    text = LEVEL_TEXT[r.level].format(nk=neighbors_k)
    if r.search_rank:
        text += f" (rank {r.search_rank})"
    elif r.neighbor_rank:
        text += f" (rank {r.neighbor_rank} among the neighbors of {r.via})"
    elif r.via is not None:
        text += f" (hit {r.via})"
    return text


ROW_FIELDS = [f.name for f in GoldReach.__dataclass_fields__.values()]
POOL_FIELDS = [f.name for f in Pool.__dataclass_fields__.values()]


def write(out_dir: Path | str, rows: Sequence[GoldReach], pools: Sequence[Pool], settings: ReachSettings,
          info: dict | None = None) -> dict:
    """Write ``reach_gold.csv`` (one row per gold node and setting), ``reach_queries.csv`` (hits and pool
    per query and setting) and ``reach.json`` (settings, ``info`` and `summarize`); returns the summary."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for name, fields_, items in (("reach_gold.csv", ROW_FIELDS, rows), ("reach_queries.csv", POOL_FIELDS, pools)):
        with open(out / name, "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=fields_)
            w.writeheader()
            for item in items:
                w.writerow({k: ("" if v is None else v) for k, v in asdict(item).items()})
    summary = summarize(rows, pools)
    doc = {"settings": {"ks": list(settings.ks), "neighbors_k": settings.neighbors_k,
                        "filters": list(settings.filters)},
           "levels": list(LEVELS), **(info or {}), "summary": summary}
    (out / "reach.json").write_text(json.dumps(doc, indent=1))
    return summary


def read(out_dir: Path | str) -> dict:
    """The ``reach.json`` written by `write`."""
    return json.loads((Path(out_dir) / "reach.json").read_text())


def find_reach_dirs(paths) -> list[Path]:
    """Folders holding a ``reach.json``: the given ones and any below them."""
    found = []
    for p in map(Path, [paths] if isinstance(paths, (str, Path)) else paths):
        found += [f.parent for f in sorted(p.rglob("reach.json"))] if p.is_dir() else []
    return list(dict.fromkeys(found))


def load_summaries(paths):
    """One row per folder, setting and level: graph, split, ablation, k, filter, level, recall, any,
    queries (a pandas DataFrame; the shares are cumulative over `LEVELS`)."""
    import pandas as pd

    rows = []
    for d in find_reach_dirs(paths):
        doc = read(d)
        for name, e in doc["summary"].items():
            for level in LEVELS:
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
        for level in LEVELS:
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


def check_call_sizes(toolset: ToolSet, ks: Sequence[int], neighbors_k: int) -> None:
    """Raise ValueError, naming the setting to change, when ``toolset`` does not allow searches of
    ``max(ks)`` hits or neighbor calls of ``neighbors_k`` (shared with `ark.analysis.reach_bound`)."""
    c = toolset.config
    if max(ks) > c.search_k_max:
        raise ValueError(f"k={max(ks)} is above the toolset's search_k_max={c.search_k_max}; "
                         f"raise search_k_max or choose ks <= {c.search_k_max}")
    if neighbors_k > c.neighbors_k_max:
        raise ValueError(f"neighbors_k={neighbors_k} is above the toolset's neighbors_k_max="
                         f"{c.neighbors_k_max}")
