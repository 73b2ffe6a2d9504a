"""Reachability per demo template: the question's own words (`ark.analysis.reachability`) beside the bound
over chains built from the question's words (`ark.analysis.reach_bound`), for each name-first option of
search_graph (`ark.search.name_match`), and how often searching a named node's name finds it;
optionally, what a scripted agent's runs surface.

    python scripts/compare_reach.py                        # test + test-mismatch, k 5 and 20, name_first none/exact/mentioned
    python scripts/compare_reach.py --splits test --ks 5 --name-first none
    python scripts/compare_reach.py --scripted --out results/reach    # also the scripted-server runs

No LLM. Shares are means over queries of the share of a query's gold nodes reached by a level
(cumulative, in %). The question-text measure uses no type filter (`experiments/diagnose.py`'s
``reach.filters=[none]`` setting). With ``--scripted`` each name-first option also gets one run per split
(`ark.run.runner.run_queries`, one ARK agent, T_max 5) against the scripted OpenAI-compatible server
(`tests/helpers/scripted_server.py`), whose agent searches the question (k 5), explores the first two
hits' neighbors with the question as subquery (k 20), selects everything shown and finishes; the table
gives that run's metrics and the share of gold nodes its calls showed (`ark.analysis.attribution`: not
"never surfaced").
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from ark.home import ark_home  # noqa: E402

METRICS = ("hit@1", "hit@5", "recall@20", "mrr")


def templates_of(source) -> dict[int, str]:
    return {i: t for i, (t, _) in params_of(source).items()}


def params_of(source) -> dict[int, tuple[str, dict]]:
    with open(source.raw_root / "qa" / "demo" / "query_templates.csv", newline="") as f:
        return {int(r["id"]): (r["template"], json.loads(r["params"])) for r in csv.DictReader(f)}


def reach_rows(graph, index, queries, templates, ks, name_first: str) -> list[dict]:
    """Per template and k: the question-text levels and the bound's levels (% of gold, mean per query)."""
    from ark.analysis import reach_bound as B
    from ark.analysis import reachability as R
    from ark.search.modes import GlobalSearch, SearchConfig
    from ark.tools import ToolConfig, ToolSet

    search = GlobalSearch(index, config=SearchConfig(name_first=name_first),
                          names=graph.names() if name_first != "none" else None)
    toolset = ToolSet(graph, index, ToolConfig(search_k_max=max(max(ks), 50)), search=search)
    old_rows, pools = R.reachability(toolset, queries, R.ReachSettings(ks=ks, filters=("none",)))
    new_rows = B.bound(toolset, queries, B.BoundSettings(ks=ks))
    by_template = defaultdict(lambda: (set(), [], [], []))
    for q in queries:
        by_template[templates[q.id]][0].add(q.id)
    out = []
    for template, (ids, *_ ) in sorted(by_template.items(), key=lambda kv: kv[0]):
        old = R.summarize([r for r in old_rows if r.query_id in ids], [p for p in pools if p.query_id in ids])
        new = B.summarize([r for r in new_rows if r.query_id in ids])
        for k in ks:
            o, n = old[f"k{k}"], new[f"k{k}"]
            out.append({"template": template, "k": k, "name_first": name_first, "queries": o["queries"],
                        "gold": o["gold"], "mean_pool1": round(o["mean_pool1"], 1),
                        **{f"text_{lv}": round(100 * o[lv]["recall"], 1) for lv in R.LEVELS},
                        **{f"bound_{lv}": round(100 * n[lv]["recall"], 1) for lv in B.LEVELS}})
    return out


def anchor_rows(graph, index, queries, params, name_first: str) -> list[dict]:
    """Per template: for each node a question names (its parameters: phenotype, disease, term, gene),
    the share found at rank 1 and within the top 5 of search_graph(<that node's name>)."""
    from ark.search.modes import GlobalSearch, SearchConfig
    from ark.tools import ToolConfig, ToolSet

    search = GlobalSearch(index, config=SearchConfig(name_first=name_first),
                          names=graph.names() if name_first != "none" else None)
    toolset = ToolSet(graph, index, ToolConfig(), search=search)
    found = defaultdict(list)
    for q in queries:
        template, p = params[q.id]
        for key in ("phenotype", "disease", "term", "gene"):
            if isinstance(p.get(key), int) and p[key] not in q.answer_ids and graph.node_name(p[key]) in q.text:
                node = p[key]
                shown = toolset.call("search_graph", {"query": graph.node_name(node), "k": 5}).node_ids
                found[template].append((shown[:1] == [node], node in shown))
    return [{"template": t, "name_first": name_first, "anchors": len(v),
             "rank1": round(100 * statistics.fmean(a for a, _ in v), 1),
             "top5": round(100 * statistics.fmean(b for _, b in v), 1)} for t, v in sorted(found.items())]


def anchor_policy(request: dict):
    """The scripted agent: search the question, explore the first two hits with the question, select
    every id shown, finish."""
    from tests.helpers.scripted_server import first_user_message, tool_reply

    msgs = request["messages"]
    step = sum(m["role"] == "assistant" for m in msgs)
    question = first_user_message(request)
    tool_texts = [m["content"] for m in msgs if m["role"] == "tool"]
    hits = [int(x) for x in re.findall(r"^\[(\d+)\]", tool_texts[0], re.M)] if tool_texts else []
    shown = [int(x) for t in tool_texts for x in re.findall(r"^\[(\d+)\]", t, re.M)]
    if step == 0:
        return tool_reply(("search_graph", {"query": question, "k": 5}))
    if step in (1, 2) and len(hits) >= step:
        return tool_reply(("explore_neighbors", {"node_id": hits[step - 1], "query": question, "k": 20}))
    if step <= 3 and shown:
        return tool_reply(("select", {"node_ids": list(dict.fromkeys(shown))}), ("finish", {}))
    return tool_reply(("finish", {}))


def scripted_rows(graph, index, queries_by_split: dict, templates: dict[int, str], name_first: str, tmp: Path
                  ) -> list[dict]:
    """One scripted-server ARK run per split (one agent, T_max 5, the runner's own files); per template
    its metrics and the share of gold its calls showed."""
    import asyncio

    from ark.agent import AgentConfig, ARKRetriever
    from ark.llm.client import BackboneConfig, LLMClient
    from ark.run.runner import run_queries
    from ark.run.settings import RunSettings
    from ark.search.modes import GlobalSearch, SearchConfig
    from ark.tools import ToolConfig, ToolSet
    from tests.helpers.scripted_server import ScriptedServer

    search = GlobalSearch(index, config=SearchConfig(name_first=name_first),
                          names=graph.names() if name_first != "none" else None)
    toolset = ToolSet(graph, index, ToolConfig(), search=search)
    out = []
    with ScriptedServer(responder=anchor_policy) as server:
        for split, queries in queries_by_split.items():
            llm = LLMClient(BackboneConfig(name="scripted", provider="vllm", base_url=server.base_url,
                                           model="scripted", max_retries=0))
            retriever = ARKRetriever(llm, toolset, graph, AgentConfig(n_agents=1, t_max=5))
            run_dir = tmp / f"{split}-{name_first}"
            run_queries(retriever, queries, RunSettings(out_dir=run_dir, n_boot=0, progress=False),
                        candidate_ids=graph.candidate_ids)
            asyncio.run(retriever.aclose())
            per_query = {}
            with open(run_dir / "per_query.csv", newline="") as f:
                for r in csv.DictReader(f):
                    assert r["status"] == "ok", r
                    per_query[int(r["query_id"])] = {m: float(r[m]) for m in METRICS}
            shown = defaultdict(list)
            with open(run_dir / "attribution.csv", newline="") as f:
                for r in csv.DictReader(f):
                    shown[int(r["query_id"])].append(r["cls"] != "never_surfaced")
            groups = defaultdict(list)
            for qid in per_query:
                groups[templates[qid]].append(qid)
            for template, ids in sorted(groups.items()):
                out.append({"template": template, "name_first": name_first, "queries": len(ids),
                            **{m: round(100 * statistics.fmean(per_query[i][m] for i in ids), 1) for m in METRICS},
                            "gold_shown": round(100 * statistics.fmean(statistics.fmean(shown[i]) for i in ids), 1)})
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default=str(ark_home()), help="data root (default: ARK_HOME, ark/home.py)")
    p.add_argument("--splits", default="test,test-mismatch")
    p.add_argument("--ks", default="5,20", help="search_graph k values")
    p.add_argument("--name-first", default="none,exact,mentioned", help="comma list of none, exact, mentioned")
    p.add_argument("--scripted", action="store_true", help="also run the scripted agent for each name-first option")
    p.add_argument("--limit", type=int, default=None, help="only the first N queries of each split")
    p.add_argument("--out", default=None, help="also write the rows as CSV and JSON here")
    a = p.parse_args(argv)

    from ark.data.sources import DemoSource
    from ark.search.bm25 import load_index
    from ark.search.name_match import NAME_FIRST

    options = [x for x in a.name_first.split(",") if x]
    bad = [x for x in options if x not in NAME_FIRST]
    if bad:
        raise SystemExit(f"--name-first: unknown {', '.join(bad)}; choose from {', '.join(NAME_FIRST)}")
    ks = tuple(int(k) for k in a.ks.split(","))
    splits = [x for x in a.splits.split(",") if x]
    source = DemoSource(root=a.data)
    graph = source.graph()
    index = load_index(graph, source.cache_dir)
    queries = [q for s in splits for q in source.queries().split(s)[: a.limit]]
    templates = templates_of(source)
    rows, scripted, anchors = [], [], []
    for nf in options:
        anchors += anchor_rows(graph, index, queries, params_of(source), nf)
        t0 = time.perf_counter()
        rows += reach_rows(graph, index, queries, templates, ks, nf)
        print(f"reachability, name_first={nf}: {len(queries)} queries in {time.perf_counter() - t0:.0f} s", flush=True)
    if a.scripted:
        with tempfile.TemporaryDirectory() as tmp:
            for nf in options:
                t0 = time.perf_counter()
                by_split = {s: source.queries().split(s)[: a.limit] for s in splits}
                scripted += scripted_rows(graph, index, by_split, templates, nf, Path(tmp))
                print(f"scripted runs, name_first={nf}: {time.perf_counter() - t0:.0f} s", flush=True)

    print(f"\n{' + '.join(splits)}: question text (search / + one neighbor call / within 1 hop / within 2 hops) "
          "vs the bound (a search / + one neighbor call / + two), % of gold\n")
    print("| template | n | k | name_first | question text | bound | 1-hop pool |")
    print("|---|---:|---:|---|---|---|---:|")
    for r in rows:
        text = " / ".join(f"{r[f'text_{lv}']:.1f}" for lv in ("search", "neighbors", "hop1", "hop2"))
        bound = " / ".join(f"{r[f'bound_{lv}']:.1f}" for lv in ("search", "neighbors1", "neighbors2"))
        print(f"| {r['template']} | {r['queries']} | {r['k']} | {r['name_first']} | {text} | {bound} | {r['mean_pool1']:.0f} |")
    print("\nthe nodes a question names, found by searching their name (search_graph top 5), %\n")
    print("| template | anchors | name_first | rank 1 | top 5 |")
    print("|---|---:|---|---:|---:|")
    for r in anchors:
        print(f"| {r['template']} | {r['anchors']} | {r['name_first']} | {r['rank1']:.1f} | {r['top5']:.1f} |")
    if scripted:
        print("\nscripted agent (search the question, explore the first two hits, select all shown), %\n")
        print("| template | n | name_first | Hit@1 / Hit@5 / R@20 / MRR | gold shown |")
        print("|---|---:|---|---|---:|")
        for r in scripted:
            print(f"| {r['template']} | {r['queries']} | {r['name_first']} | "
                  + " / ".join(f"{r[m]:.1f}" for m in METRICS) + f" | {r['gold_shown']:.1f} |")
    if a.out:
        out = Path(a.out)
        out.mkdir(parents=True, exist_ok=True)
        for name, table in (("reach", rows), ("scripted", scripted), ("anchors", anchors)):
            if table:
                with open(out / f"{name}.csv", "w", newline="") as f:
                    w = csv.DictWriter(f, fieldnames=list(table[0]))
                    w.writeheader()
                    w.writerows(table)
        (out / "reach.json").write_text(json.dumps({"reach": rows, "scripted": scripted, "anchors": anchors}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
