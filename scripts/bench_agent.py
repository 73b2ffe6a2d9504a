"""Agent-loop throughput and per-step overhead against a scripted server with a fixed 200 ms latency.

Runs Q queries x n agents x S steps (default 200 x 3 x 5) at a global concurrency of C (default 64)
through the real `ark.llm.client.LLMClient` and `ark.agent.ARKRetriever`, with the scripted OpenAI-compatible
server (tests/helpers/scripted_server.py) in a separate process so its threads do not share our GIL.
Each agent's script: search_graph -> explore_neighbors(top hit) -> search_graph -> select -> finish,
so the tools do real work on the graph. Prints

* wall time vs the ideal `calls x latency / C` (target: within 1.2x);
* per-step overhead outside the LLM call (tools + bookkeeping, `Step.overhead_s`): p50 / p99 / max
  (target p99 < 10 ms on the demo graph).

    python scripts/bench_agent.py                      # demo graph (built on first use under data/)
    python scripts/bench_agent.py --graph toy --queries 50
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for tests.helpers.scripted_server / tests.helpers.toy_graph

from ark.agent import AgentConfig, ARKRetriever  # noqa: E402
from ark.home import ark_home  # noqa: E402
from ark.llm.client import BackboneConfig, LLMClient  # noqa: E402
from ark.search.bm25 import BM25Index, load_index  # noqa: E402
from ark.tools import FINISH, SELECT, ToolConfig, ToolSet  # noqa: E402


def load(graph_name: str, root: str):
    """(graph, index, query texts) for the demo graph or the toy graph."""
    if graph_name == "toy":
        from tests.helpers.toy_graph import toy_graph
        g = toy_graph()
        names = g.names()
        return g, BM25Index.build(list(g.texts())), [f"{n} related" for n in names]
    from ark.data.sources import DemoSource
    source = DemoSource(root)
    g = source.graph()
    index = load_index(g, source.cache_dir)
    qs = source.queries()
    texts = [q.text for split in ("test", "val", "train") for q in qs.split(split)]
    return g, index, texts


def scripts_for(queries: list[str], toolset: ToolSet, steps: int) -> dict[str, list]:
    """One 5-step script per query (the same for its n agents), using real ids from the graph."""
    from tests.helpers.scripted_server import tool_reply

    convo = {}
    for q in queries:
        words = " ".join(q.split()[:6])
        hits = toolset.call("search_graph", {"query": words}).node_ids or [0]
        plan = [tool_reply(("search_graph", {"query": words})),
                tool_reply(("explore_neighbors", {"node_id": int(hits[0]), "query": words})),
                tool_reply(("search_graph", {"query": " ".join(q.split()[-4:]), "k": 10})),
                tool_reply((SELECT, {"node_ids": [int(h) for h in hits[:3]]})),
                tool_reply((FINISH, {}))]
        convo[q] = plan[: steps - 1] + [plan[-1]] if steps < len(plan) else plan
    return convo


def _serve(convo, latency_s, conn) -> None:
    from tests.helpers.scripted_server import ScriptedServer

    server = ScriptedServer(conversations=convo, latency_s=latency_s).start()
    conn.send(server.base_url)
    conn.recv()  # parent says stop
    conn.send(server.calls)
    server.stop()


async def run_all(retriever: ARKRetriever, queries: list[str]):
    return await asyncio.gather(*(retriever.aretrieve(q, i) for i, q in enumerate(queries)))


async def bench(retriever: ARKRetriever, queries: list[str]):
    """Warm up (numba, connection pool) then time all queries, in one event loop."""
    await run_all(retriever, queries[:2])
    start, cpu0 = time.perf_counter(), time.process_time()
    results = await run_all(retriever, queries)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu0
    await retriever.aclose()
    return results, wall, cpu


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--graph", default="demo", choices=["demo", "toy"])
    p.add_argument("--root", default=str(ark_home()),
                   help="data root: the demo graph under <root>/stark, caches under <root>/cache (default: ARK_HOME)")
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--n-agents", type=int, default=3, help="n, agents per query (budget.agent.n_agents)")
    p.add_argument("--t-max", type=int, default=5, help="T_max, steps per agent (budget.agent.t_max)")
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--latency", type=float, default=0.2)
    args = p.parse_args(argv)

    t0 = time.perf_counter()
    graph, index, texts = load(args.graph, args.root)
    toolset = ToolSet(graph, index, ToolConfig())
    queries = list(dict.fromkeys(texts))[: args.queries]
    while len(queries) < args.queries:  # small graphs: make distinct keys
        queries.append(f"{texts[len(queries) % len(texts)]} #{len(queries)}")
    convo = scripts_for(queries, toolset, args.t_max)
    print(f"graph {graph.name}: {graph.num_nodes} nodes, {graph.num_edges} edges; setup {time.perf_counter() - t0:.1f}s")

    ctx = mp.get_context("fork")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_serve, args=(convo, args.latency, child), daemon=True)
    proc.start()
    base_url = parent.recv()
    try:
        llm = LLMClient(BackboneConfig(provider="vllm", base_url=base_url, model="scripted", timeout_s=60))
        cfg = AgentConfig(n_agents=args.n_agents, t_max=args.t_max, concurrency=args.concurrency)
        retriever = ARKRetriever(llm, toolset, graph, cfg)
        results, wall, cpu = asyncio.run(bench(retriever, queries))
    finally:
        parent.send("stop")
        server_calls = parent.recv()
        proc.join(timeout=10)

    steps = [s for r in results for t in r.trajectories for s in t.steps]
    calls = len(steps)
    ideal = calls * args.latency / args.concurrency
    over = np.array([s.overhead_s for s in steps]) * 1e3
    tools = np.array([s.tool_latency_s for s in steps]) * 1e3
    stops = {}
    for r in results:
        for t in r.trajectories:
            stops[t.stop_reason] = stops.get(t.stop_reason, 0) + 1
    print(f"{args.queries} queries x {args.n_agents} agents x {args.t_max} steps at concurrency {args.concurrency}, "
          f"server latency {args.latency * 1e3:.0f} ms (server saw {server_calls} requests incl. warm-up)")
    print(f"LLM calls: {calls}   stop reasons: {stops}")
    print(f"wall time: {wall:.2f} s   ideal: {ideal:.2f} s   ratio: {wall / ideal:.3f}x (target <= 1.2x)")
    print(f"per-step overhead outside the LLM call (ms): p50 {np.percentile(over, 50):.3f}  "
          f"p99 {np.percentile(over, 99):.3f}  max {over.max():.3f}  (target p99 < 10 ms)")
    print(f"  of which tool time (ms): p50 {np.percentile(tools, 50):.3f}  p99 {np.percentile(tools, 99):.3f}")
    by_tool: dict[str, list[float]] = {}
    for s in steps:
        by_tool.setdefault("+".join(tc.name for tc in s.tool_calls), []).append(s.overhead_s * 1e3)
    for name, v in sorted(by_tool.items()):
        print(f"  step kind {name:18s} n={len(v):5d}  p50 {np.percentile(v, 50):.3f}  p99 {np.percentile(v, 99):.3f} ms")
    llm_ms = np.array([s.llm_latency_s for s in steps]) * 1e3
    print(f"LLM call latency seen by the client (ms; the server waits {args.latency * 1e3:.0f}): "
          f"p50 {np.percentile(llm_ms, 50):.1f}  p99 {np.percentile(llm_ms, 99):.1f}")
    packed = -(-args.queries * args.n_agents // args.concurrency) * args.t_max * args.latency
    print(f"floor with one slot per running agent: {packed:.2f} s ({packed / ideal:.3f}x ideal: the last "
          f"wave of agents does not fill all {args.concurrency} slots)")
    budget = 1e3 / (args.concurrency / args.latency)
    print(f"client process CPU: {cpu:.2f} s = {cpu / calls * 1e3:.2f} ms per LLM call (one event loop can keep "
          f"{args.concurrency} calls in flight only below {budget:.2f} ms per call)")
    print(f"cpu count: {os.cpu_count()}, load average: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
