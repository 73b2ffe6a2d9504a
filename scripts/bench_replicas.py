"""Benchmark several model servers behind one client (`ark.llm.replicas`): ARK's throughput with one and
with two scripted replicas, side by side in one run.

    python scripts/bench_replicas.py                    # 300 demo queries x 1 agent, 200 ms per reply, 8 slots per replica
    python scripts/bench_replicas.py --replicas 1,2,4   # more points

Each replica is the scripted OpenAI-compatible server (tests/helpers/scripted_server.py) in a process of
its own, answering after a fixed latency and at most ``--capacity`` requests at once (the rest wait, as
at a model server whose batch is full), so one replica serves at most capacity / latency replies per
second. Real ARK agents (the runner, tools on the demo graph, the LLM client over aiohttp) send enough
requests at once to fill every replica (``--concurrency`` queries in flight). Reported per point: wall
time, LLM calls per second, the bound n_calls x latency / (replicas x capacity), and how many calls each
replica answered; then the throughput of the last point over the first (target: 2 replicas >= 1.8x 1).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from ark.home import ark_home  # noqa: E402


def bench(n_replicas: int, n: int, latency_s: float, capacity: int, concurrency: int, data_root: Path) -> dict:
    import asyncio

    from ark.agent import AgentConfig
    from ark.data.sources import DemoSource
    from ark.run.runner import RunSettings, run_queries
    from ark.llm.client import BackboneConfig
    from ark.tools.toolset import ToolConfig
    from ark.config.retrievers import build_ark
    from tests.helpers.server_process import server_log, server_process

    source = DemoSource(data_root)
    graph = source.graph()
    qs = source.queries()
    queries = [q for s in ("train", "val", "test") for q in qs.split(s)][:n]
    tmp = Path(tempfile.mkdtemp(prefix="bench_replicas_"))
    with ExitStack() as stack:
        servers = [stack.enter_context(server_process(tmp, latency_s=latency_s, capacity=capacity, name=f"replica{i}"))
                   for i in range(n_replicas)]
        backbone = BackboneConfig(name="scripted", model="scripted", provider="vllm", max_retries=0, timeout_s=120,
                                  base_url=[s.base_url for s in servers])
        retriever = build_ark(graph, backbone, AgentConfig(t_max=5, n_agents=1, concurrency=concurrency), ToolConfig(),
                              llm_cache=None, index_cache=str(data_root / "cache" / "demo"))

        async def warm_up():   # index, prompt, numba (not timed)
            try:
                return await retriever.aretrieve(queries[0].text, "warmup")
            finally:
                await retriever.aclose()

        asyncio.run(warm_up())
        warm = [len(server_log(s.log)) for s in servers]
        settings = RunSettings(out_dir=tmp / "run", concurrency=concurrency, progress=False, n_boot=50)
        t0 = time.perf_counter()
        summary = run_queries(retriever, queries, settings, graph.candidate_ids)
        wall = time.perf_counter() - t0
        per_replica = [len(server_log(s.log)) - w for s, w in zip(servers, warm)]
    calls = sum(per_replica)
    return {"replicas": n_replicas, "n_queries": n, "n_ok": summary["n_ok"], "llm_calls": calls,
            "latency_s_per_reply": latency_s, "capacity_per_replica": capacity, "concurrency": concurrency,
            "wall_s": round(wall, 3), "calls_per_s": round(calls / wall, 1),
            "bound_s": round(calls * latency_s / (n_replicas * capacity), 3),
            "calls_per_replica": per_replica}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--replicas", default="1,2", help="comma-separated replica counts, measured in this order")
    p.add_argument("--n", type=int, default=300)
    p.add_argument("--latency", type=float, default=0.2)
    p.add_argument("--capacity", type=int, default=8)
    p.add_argument("--concurrency", type=int, default=48, help="queries in flight (one agent each)")
    p.add_argument("--data", type=Path, default=ark_home(), help="data root (default: ARK_HOME, ark/home.py)")
    a = p.parse_args(argv)
    counts = [int(x) for x in a.replicas.split(",")]
    results = []
    for k in counts:
        res = bench(k, a.n, a.latency, a.capacity, a.concurrency, a.data)
        print(json.dumps(res, indent=1), flush=True)
        results.append(res)
    first, last = results[0], results[-1]
    ratio = last["calls_per_s"] / first["calls_per_s"]
    print(f"throughput, {last['replicas']} replicas / {first['replicas']}: {ratio:.2f}x")
    if (first["replicas"], last["replicas"]) == (1, 2):
        print("PASS" if ratio >= 1.8 else "FAIL", "(target: 2 replicas >= 1.8x the throughput of 1)")
        return 0 if ratio >= 1.8 else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
