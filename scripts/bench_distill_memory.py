"""Benchmark the demo student's CPU training process under glibc's allocator and under jemalloc, side by side.

    python scripts/bench_distill_memory.py              # 10 optimizer steps each (about 14 minutes)
    python scripts/bench_distill_memory.py --steps 4 --rounds 2

Each run is a child process training the trainer of ``make distill-demo`` (`scripts/bench_distill.py`'s
``setup``: the free teacher's train trajectories, LoRA r 16 on every linear layer, bfloat16 autocast, batch 1 x
4 accumulation) for ``--steps`` optimizer steps on the first 4 x steps examples, the same in both; jemalloc is
preloaded (``LD_PRELOAD``, `scripts/jemalloc.sh`) in one of them. Printed per run: seconds per step, the peak
resident memory of the process and its resident memory after the last step; then the ratios. Rounds alternate
which allocator goes first.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

ALLOCATORS = ("glibc", "jemalloc")


def child(steps: int) -> dict:
    """Train `steps` optimizer steps in this process; its step times and memory."""
    import torch
    from transformers import TrainerCallback

    from bench_distill import setup
    from bench_graph import peak_rss_gib, rss_gib

    torch.manual_seed(0)
    times: list[float] = []

    class Clock(TrainerCallback):
        last = 0.0

        def on_step_begin(self, args, state, control, **kwargs):
            self.last = self.last or time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            now = time.perf_counter()
            times.append(now - self.last)
            self.last = now

    with tempfile.TemporaryDirectory() as tmp:
        trainer, _ = setup(4 * steps, Path(tmp))
        trainer.args.max_steps = steps
        trainer.add_callback(Clock())
        trainer.train()
    return {"step_s": times, "peak_rss_gb": peak_rss_gib(),
            "end_rss_gb": rss_gib(), "jemalloc": "libjemalloc" in Path("/proc/self/maps").read_text()}


def run(allocator: str, steps: int, jemalloc: str) -> dict:
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")
    env.pop("LD_PRELOAD", None)
    if allocator == "jemalloc":
        env["LD_PRELOAD"] = jemalloc
    out = subprocess.run([sys.executable, __file__, "--steps", str(steps), "--child"], env=env, check=True,
                         capture_output=True, text=True).stdout.strip().splitlines()[-1]
    result = json.loads(out)
    if result["jemalloc"] != (allocator == "jemalloc"):
        raise SystemExit(f"the {allocator} child ran with{'' if result['jemalloc'] else 'out'} jemalloc")
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=10, help="optimizer steps per run (4 examples each)")
    p.add_argument("--rounds", type=int, default=1, help="runs of each allocator, alternating which goes first")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.steps < 1 or a.rounds < 1:
        raise SystemExit(f"--steps and --rounds must be at least 1, got {a.steps} and {a.rounds}")
    if a.child:
        print(json.dumps(child(a.steps)))
        return 0
    found = subprocess.run(["bash", str(REPO / "scripts" / "jemalloc.sh")], capture_output=True, text=True)
    if found.returncode != 0:
        raise SystemExit(found.stderr.strip())
    jemalloc = found.stdout.strip()
    print(f"{a.steps} optimizer steps per run; jemalloc: {jemalloc}")
    print("round  allocator  s/step (mean)  s/step (each)                         peak GB  after GB")
    mean = {k: [] for k in ALLOCATORS}
    peak = {k: [] for k in ALLOCATORS}
    for r in range(a.rounds):
        for allocator in (ALLOCATORS if r % 2 == 0 else ALLOCATORS[::-1]):
            res = run(allocator, a.steps, jemalloc)
            mean[allocator].append(sum(res["step_s"]) / len(res["step_s"]))
            peak[allocator].append(res["peak_rss_gb"])
            each = " ".join(f"{s:.0f}" for s in res["step_s"])
            print(f"{r:5d}  {allocator:9s}  {mean[allocator][-1]:13.1f}  {each:36s}  {res['peak_rss_gb']:7.2f}  "
                  f"{res['end_rss_gb']:8.2f}", flush=True)
    med = lambda xs: sorted(xs)[len(xs) // 2]   # noqa: E731
    print(f"median glibc/jemalloc: time per step {med(mean['glibc']) / med(mean['jemalloc']):.2f}, "
          f"peak memory {med(peak['glibc']) / med(peak['jemalloc']):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
