"""Benchmark the evaluation runner end to end: real ARK agents on the demo graph, scripted LLM server.

    python scripts/bench_runner.py                      # 1,000 queries, 200 ms per LLM call, concurrency 64
    python scripts/bench_runner.py --n 200 --agents 1   # smaller

Every agent makes 2 LLM calls (search the question, then select + finish). ``--concurrency`` is ARK's
global limit on running agents, shared by all queries of the run (so at most that many LLM calls are in
flight), and the concurrency bound on wall time is  n_queries * n_agents * 2 * latency / concurrency.
The runner keeps ``concurrency`` queries in flight, enough to keep every agent slot busy.
The scripted server (tests/scripted_server.py) runs in its own process so that its threads do not
compete with the runner for the GIL. Reported:
  - wall_s vs bound_s (target: ratio <= 1.2),
  - the runner's own bookkeeping per query (record, metrics, JSON + trajectory writes, progress;
    target < 5 ms), measured inside ark.runner,
  - the agent's non-LLM time per query (tools, prompt building) from the trajectories, for context.

``--mode stub`` replaces the agents by a stand-in that waits 2 x latency and returns the warm-up
query's real trajectories, so the runner alone (scheduling, records, files) is measured against the
same bound; ``--mode both`` (default) reports both.
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


def _serve(queue, latency_s: float) -> None:
    from tests.scripted_server import ScriptedServer
    from tests.test_runner import search_select_finish

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
          mode: str = "agent") -> dict:
    from ark.agent import AgentConfig
    from ark.dataset import load_graph, load_queries
    from ark.llm import BackboneConfig
    from ark.runner import RunSettings, arun
    from ark.tools import ToolConfig
    from experiments.run import build_ark

    graph = load_graph("demo", data_root)
    qs = load_queries("demo", data_root)
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
                                  max_retries=0, timeout_s=60)
        retriever = build_ark(graph, backbone, AgentConfig(t_max=5, n_agents=n_agents,
                                                          concurrency=concurrency),
                              ToolConfig(), llm_cache=None, index_cache=str(data_root / "cache" / "demo"))
        # warm-up: index, prompt and HTTP connections (not timed)
        warm = asyncio.run(retriever.aretrieve(queries[0].text, "warmup"))
        if mode == "stub":
            retriever = StubRetriever(warm, 2 * latency_s)
        settings = RunSettings(out_dir=tmp / "run", concurrency=concurrency, progress=progress, n_boot=200)

        async def go():
            try:
                return await arun(retriever, queries, settings, graph.candidate_ids)
            finally:
                if hasattr(retriever, "llm"):
                    await retriever.llm.aclose()

        t0 = time.perf_counter()
        summary = asyncio.run(go())
        wall = time.perf_counter() - t0
    finally:
        proc.terminate()
        proc.join(5)

    calls_per_query = 2 * (n_agents if mode == "agent" else 1)  # the stub holds one slot per query
    bound = n * calls_per_query * latency_s / concurrency
    recs = [json.loads(line) for line in (tmp / "run" / "predictions.jsonl").read_text().splitlines()]
    traj_overhead = []
    for r in recs:
        trajs = json.loads((tmp / "run" / r["trajectory_file"]).read_text())
        traj_overhead.append(max(sum(s.get("tool_latency_s", 0) for s in t["steps"]) for t in trajs))
    return {
        "mode": mode, "n_queries": n, "latency_s_per_call": latency_s, "concurrency": concurrency, "agents_per_query": n_agents,
        "n_ok": summary["n_ok"], "n_failed": summary["n_failed"],
        "wall_s": round(wall, 3), "bound_s": round(bound, 3), "ratio": round(wall / bound, 3),
        "runner_bookkeeping_ms_per_query": round(1000 * summary["this_run"]["bookkeeping_s_per_query"], 3),
        "agent_tool_time_ms_per_query_mean":
            round(1000 * sum(traj_overhead) / len(traj_overhead), 3) if mode == "agent" else None,
        "overhead_ms_per_query_vs_bound": round(1000 * (wall - bound) / n, 3),
        "mean_query_latency_s": round(summary["latency_s"]["mean"], 3),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=1000)
    p.add_argument("--latency", type=float, default=0.2)
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--agents", type=int, default=3)
    p.add_argument("--data", type=Path, default=REPO / "data")
    p.add_argument("--progress", action="store_true")
    p.add_argument("--mode", choices=["agent", "stub", "both"], default="both")
    a = p.parse_args(argv)
    ok = True
    for mode in (["stub", "agent"] if a.mode == "both" else [a.mode]):
        res = bench(a.n, a.latency, a.concurrency, a.agents, a.data, a.progress, mode)
        print(json.dumps(res, indent=1))
        good = res["ratio"] <= 1.2 and res["runner_bookkeeping_ms_per_query"] < 5
        print(mode, "PASS" if good else "FAIL", "(targets: ratio <= 1.2, runner bookkeeping < 5 ms/query)")
        ok = ok and good
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
