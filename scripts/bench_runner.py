"""Benchmark the evaluation runner end to end: real ARK agents on the demo graph, scripted LLM server.

    python scripts/bench_runner.py                      # 1,000 queries x 3 agents, 200 ms per call, concurrency 64
    python scripts/bench_runner.py --http both          # also the openai-SDK transport, side by side
    python scripts/bench_runner.py --n 200 --n-agents 1   # smaller

``--concurrency`` is the runner's limit: that many queries in flight, each running its n agents at
once (ARK's agent limit is set to concurrency x agents, so at most that many LLM calls are in flight:
192 by default). Every agent makes 2 LLM calls (search the question, then select + finish), so a
query takes at least 2 x latency and the concurrency bound on wall time is
n_queries * 2 * latency / concurrency (6.25 s by default; 960 calls/s).
The scripted server (tests/helpers/scripted_server.py) runs in its own process so that its threads do not
compete with the runner for the GIL. Reported per run:
  - wall_s vs bound_s (target: ratio <= 1.2),
  - the runner's own bookkeeping per query (record, metrics, JSON + trajectory writes, progress;
    target < 5 ms), measured inside ark.run.runner,
  - the agent's non-LLM time per query (tools, prompt building) from the trajectories, for context,
  - the client process's CPU time per LLM call.

``--paid yes`` runs the agents as a capped point of a paid sweep does: an LLM cache (each call claimed,
its reply stored), a budget under a cap that reserves each call in a run ledger and a sweep ledger before
it is sent and settles it after; ``--paid both`` runs without, then with, side by side.

``--mode stub`` replaces the agents by a stand-in that waits 2 x latency and returns the warm-up
query's real trajectories, so the runner alone (scheduling, records, files) is measured against the
same bound; ``--mode both`` (default) reports both. ``--http`` picks the LLM client's transport
(``ark.llm.transport``); ``both`` runs the agents over each, one after the other, and prints the ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from ark.home import ark_home  # noqa: E402


def _serve(queue, latency_s: float) -> None:
    from tests.helpers.scripted_server import ScriptedServer
    from tests.helpers.policies import search_select_finish

    server = ScriptedServer(responder=search_select_finish, latency_s=latency_s).start()
    queue.put(server.base_url)
    while True:
        time.sleep(3600)


class StubRetriever:
    """Waits like the agents would (calls x latency) and returns a fixed, real-shaped Retrieval."""

    def __init__(self, template, wait_s: float):
        self.template, self.wait_s = template, wait_s

    async def aretrieve(self, query: str, query_id=""):
        from dataclasses import replace

        await asyncio.sleep(self.wait_s)
        return replace(self.template, latency_s=0.0)     # 0: the runner times the query itself


def bench(n: int, latency_s: float, concurrency: int, n_agents: int, data_root: Path, progress: bool,
          mode: str = "agent", http: str = "aiohttp", paid: bool = False) -> dict:
    from ark.agent import AgentConfig
    from ark.data.sources import DemoSource
    from ark.llm.client import BackboneConfig
    from ark.run.runner import RunSettings, run_queries
    from ark.config.retrievers import build_ark
    from ark.tools import ToolConfig

    source = DemoSource(data_root)
    graph = source.graph()
    qs = source.queries()
    queries = [q for s in ("train", "val", "test") for q in qs.split(s)][:n]
    if len(queries) < n:
        raise SystemExit(f"the demo graph has only {len(queries)} queries in train+val+test")

    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_serve, args=(queue, latency_s), daemon=True)
    proc.start()
    try:
        base_url = queue.get(timeout=120)
        tmp = Path(tempfile.mkdtemp(prefix="bench_runner_"))
        backbone = BackboneConfig(name="scripted", model="scripted", provider="vllm", base_url=base_url,
                                  max_retries=0, timeout_s=60, http=http, prices=(2.0, 8.0) if paid else None)
        budget = None
        if paid:   # what a capped point of a sweep does per call: cache claim and reply, two ledgers
            from ark.cost.cap import Budget
            from ark.cost.ledger import Ledger

            budget = Budget(1e6, run=Ledger(tmp / "run" / "spend.jsonl"), sweep=Ledger(tmp / "sweep.jsonl"),
                            label="bench")
        retriever = build_ark(graph, backbone, AgentConfig(t_max=5, n_agents=n_agents,
                                                          concurrency=concurrency * n_agents),
                              ToolConfig(), llm_cache=str(tmp / "llm.sqlite") if paid else None,
                              index_cache=str(data_root / "cache" / "demo"), budget=budget)
        async def warm_up():  # index, prompt, numba (not timed); its HTTP pool dies with its loop
            try:
                return await retriever.aretrieve(queries[0].text, "warmup")
            finally:
                await retriever.aclose()

        warm = asyncio.run(warm_up())
        if mode == "stub":
            retriever = StubRetriever(warm, 2 * latency_s)
        settings = RunSettings(out_dir=tmp / "run", concurrency=concurrency, progress=progress, n_boot=200)

        t0, cpu0 = time.perf_counter(), time.process_time()
        summary = run_queries(retriever, queries, settings, graph.candidate_ids)  # closes the retriever
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    finally:
        proc.terminate()
        proc.join(5)

    bound = n * 2 * latency_s / concurrency
    llm_calls = n * 2 * n_agents if mode == "agent" else 0
    recs = [json.loads(line) for line in (tmp / "run" / "predictions.jsonl").read_text().splitlines()]
    traj_overhead = []
    for r in recs:
        trajs = json.loads((tmp / "run" / r["trajectory_file"]).read_text())
        traj_overhead.append(max(sum(s.get("tool_latency_s", 0) for s in t["steps"]) for t in trajs))
    return {
        "mode": mode, "http": http if mode == "agent" else None, "paid": paid, "n_queries": n, "latency_s_per_call": latency_s, "concurrency": concurrency, "agents_per_query": n_agents,
        "n_ok": summary["n_ok"], "n_failed": summary["n_failed"],
        "wall_s": round(wall, 3), "bound_s": round(bound, 3), "ratio": round(wall / bound, 3),
        "runner_bookkeeping_ms_per_query": round(1000 * summary["this_run"]["bookkeeping_s_per_query"], 3),
        "agent_tool_time_ms_per_query_mean":
            round(1000 * sum(traj_overhead) / len(traj_overhead), 3) if mode == "agent" else None,
        "overhead_ms_per_query_vs_bound": round(1000 * (wall - bound) / n, 3),
        "mean_query_latency_s": round(summary["latency_s"]["mean"], 3),
        "client_cpu_ms_per_llm_call": round(1000 * cpu / llm_calls, 3) if llm_calls else None,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=1000)
    p.add_argument("--latency", type=float, default=0.2)
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--n-agents", type=int, default=3, help="n, agents per query (budget.agent.n_agents)")
    p.add_argument("--root", type=Path, default=ark_home(),
                   help="data root: the demo graph under <root>/stark, caches under <root>/cache")
    p.add_argument("--progress", action="store_true")
    p.add_argument("--mode", choices=["agent", "stub", "both"], default="both")
    p.add_argument("--http", choices=["aiohttp", "openai", "both"], default="aiohttp",
                   help="the LLM client's transport for the agent runs (targets apply to aiohttp, the default)")
    p.add_argument("--paid", choices=["no", "yes", "both"], default="no",
                   help="yes: the agents run as a capped point of a sweep does (LLM cache with its claims, a budget "
                        "reserving and settling each call in a run and a sweep ledger); both: without, then with")
    a = p.parse_args(argv)
    runs = [("stub", "aiohttp", False)] if a.mode in ("stub", "both") else []
    if a.mode in ("agent", "both"):
        paid = {"no": [False], "yes": [True], "both": [False, True]}[a.paid]
        runs += [("agent", h, m) for h in (["aiohttp", "openai"] if a.http == "both" else [a.http]) for m in paid]
    ok, walls = True, {}
    for mode, http, paid in runs:
        res = bench(a.n, a.latency, a.concurrency, a.n_agents, a.root, a.progress, mode, http, paid)
        print(json.dumps(res, indent=1))
        good = res["ratio"] <= 1.2 and res["runner_bookkeeping_ms_per_query"] < 5
        label = f"{mode} ({http})" if mode == "agent" else mode
        print(label, "PASS" if good else "FAIL", "(targets: ratio <= 1.2, runner bookkeeping < 5 ms/query)")
        if mode == "agent" and not paid:
            walls[http] = res["wall_s"]
        ok = ok and (good or (mode == "agent" and http != "aiohttp"))
    if len(walls) == 2:
        print(f"wall time, openai-SDK transport / aiohttp transport: {walls['openai'] / walls['aiohttp']:.2f}x")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
