"""Benchmark rate-limit pacing: an ARK run against a server enforcing a tokens-per-minute limit, paced and not.

    python scripts/bench_pacing.py                      # TPM 400,000, about 3 minutes per run, both runs
    python scripts/bench_pacing.py --tpm 200000 --minutes 2 --only paced

The scripted OpenAI-compatible server (tests/helpers/scripted_server.py) enforces ``--tpm`` over a sliding
60-second window, counting each request as OpenAI does (its prompt tokens plus its ``max_tokens``) and
answering a request past the limit with HTTP 429 and Retry-After; its replies follow
`tests.helpers.policies.ark_like` (GPT-4.1-shaped ARK trajectories, realistic token counts), after
``--latency`` seconds; the server runs in a process of its own. The same run is made twice, each
against a fresh server: once with
``backbone.tpm`` set to the limit (`ark.llm.pacing`), once without (the client's 429 + Retry-After
handling alone), both at ``concurrency=16`` (48 agents asking at once, far more than the limit allows).
Reported per run, from the server's own log: the share of the limit used in each full minute, its
mean over the full minutes after the first, the busiest 60-second window, and the 429s in the first
minute and after it.
Targets: paced, at least 95% of the limit used and no 429 after the first minute.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

TOKENS_PER_QUERY = 57_000   # what a query counts against TPM here (prompts + 1,024 max_tokens per call), measured


def _serve(queue, tpm: int, latency: float, log_path: str) -> None:
    from tests.helpers.policies import ark_like
    from tests.helpers.scripted_server import ScriptedServer

    server = ScriptedServer(responder=ark_like, tpm_limit=tpm, latency_s=latency, log_path=log_path).start()
    queue.put(server.base_url)
    while True:
        time.sleep(3600)


def one_run(paced: bool, tpm: int, queries: int, latency: float, tmp: Path) -> dict:
    """One run against a fresh server in a process of its own (its threads do not compete with the
    client's for the GIL), read back from the server's log."""
    from ark.config.compose import compose
    from ark.config.evaluation import run
    from tests.helpers.paths import DEMO_ROOT

    name = "paced" if paced else "unpaced"
    log = tmp / f"{name}.log"
    queue = mp.Queue()
    proc = mp.Process(target=_serve, args=(queue, tpm, latency, str(log)), daemon=True)
    proc.start()
    try:
        base_url = queue.get(timeout=60)
        overrides = [f"paths.data={DEMO_ROOT}", "graph=demo", "backbone=gpt-4.1", f"+backbone.base_url={base_url}",
                     f"paths.runs={tmp}/{name}", f"paths.llm_cache={tmp}/{name}.sqlite", f"limit={queries}",
                     "concurrency=16", "progress=false", "n_boot=20", "yes=true",
                     *([f"backbone.tpm={tpm}"] if paced else [])]
        t0 = time.perf_counter()
        summary = run(compose(overrides))
        wall = time.perf_counter() - t0
    finally:
        proc.terminate()
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    times, tokens, outcomes = [x["t"] for x in lines], [x["tokens"] for x in lines], [x["outcome"] for x in lines]
    start = times[0]
    minutes = int((times[-1] - start) // 60)
    used, limited = [], []
    for m in range(minutes + 1):
        lo, hi = start + 60 * m, start + 60 * (m + 1)
        used.append(sum(k for t, k in zip(times, tokens) if lo <= t < hi) / tpm)
        limited.append(sum(o == "rate_limited" for t, o in zip(times, outcomes) if lo <= t < hi))
    window = max(sum(k for t, k in zip(times, tokens) if s <= t < s + 60) for s in times if s <= times[-1] - 60) / tpm \
        if times[-1] - start > 60 else float("nan")
    full = used[1:minutes]    # the full minutes after the first
    return {"name": name, "status": summary["status"], "wall_s": wall, "requests": len(times),
            "per_minute": used[:minutes], "mean_after_first": sum(full) / len(full) if full else float("nan"),
            "busiest_window": window, "429_first_minute": limited[0], "429_after": sum(limited[1:])}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tpm", type=int, default=400_000)
    p.add_argument("--minutes", type=float, default=3.0, help="about how long each run is kept busy")
    p.add_argument("--latency", type=float, default=0.4, help="seconds before each reply")
    p.add_argument("--only", choices=("paced", "unpaced"), default=None)
    a = p.parse_args(argv)
    os.environ.setdefault("OPENAI_API_KEY", "sk-scripted-" + "0" * 20)
    queries = math.ceil(a.minutes * a.tpm / TOKENS_PER_QUERY) + 16   # + concurrency: busy to the last minute
    tmp = Path(tempfile.mkdtemp(prefix="bench_pacing_"))
    results = [one_run(mode == "paced", a.tpm, queries, a.latency, tmp)
               for mode in ("paced", "unpaced") if a.only in (None, mode)]
    print(f"\nTPM limit {a.tpm:,} (prompt + max_tokens per request, sliding 60 s window), {queries} demo queries "
          f"x 3 agents, concurrency 16, {a.latency:g} s per reply")
    print(f"{'':8} {'status':>9} {'wall s':>7} {'requests':>9} {'429 1st min':>11} {'429 after':>9} "
          f"{'used after 1st min':>18} {'busiest 60 s':>12}  per full minute")
    for r in results:
        print(f"{r['name']:8} {r['status']:>9} {r['wall_s']:7.0f} {r['requests']:9,} {r['429_first_minute']:11} "
              f"{r['429_after']:9} {100 * r['mean_after_first']:17.1f}% {100 * r['busiest_window']:11.1f}%  "
              + " ".join(f"{100 * u:.1f}%" for u in r["per_minute"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
