"""Benchmark failure attribution against loading the trajectories it reads, side by side in one run.

    python scripts/bench_attribution.py                 # 1,000 queries x 3 agents x 10 steps
    python scripts/bench_attribution.py --n 200 --t-max 20

A run directory is written through the runner's own code path (`ark.run.runner.run_queries` with a
stand-in retriever returning real `ark.trajectory.Trajectory` records): per agent ``--t-max`` steps,
each one graph-tool call whose observation is rendered by `ark.observation.render` (5 nodes for a
search, 20 for a neighbor call, 160-character snippets, as the tools render them) with the shown ids
recorded, then select + finish; the chat messages hold the observations again, as the agent's do.
1-3 gold nodes per query, some shown, some selected. Then, best of three passes over the queries, one
query at a time (nothing kept, so neither side pays for a large heap):

  - load: `RunDir.trajectories` (read + JSON parse of trajectories/<qid>.json);
  - attribute: `ark.run.summary.attribute_record` on what was just loaded;
and, best of three, write: `ark.run.summary.write_attribution` end to end (load + attribute + attribution.csv +
metrics.json).

Printed: seconds and ms per query for each, and attribute / load (target: well under 1).
Files are warm in the page cache after the first pass, which makes the load side the fast one.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from ark.analysis import attribution  # noqa: E402
from ark.run import runner  # noqa: E402
from ark.llm.client import ChatResponse, ToolCall  # noqa: E402
from ark.observation import NodeLine, render  # noqa: E402
from ark.retriever import Retrieval  # noqa: E402
from ark.run.rundir import RunDir  # noqa: E402
from ark.run.summary import attribute_record, write_attribution  # noqa: E402
from ark.tools import NEIGHBORS, SEARCH  # noqa: E402
from ark.trajectory import Step, Trajectory  # noqa: E402

SYSTEM = "You explore a knowledge graph with tools. " * 40   # about the system prompt's length
WORDS = ("protein kinase receptor binding membrane transport disease syndrome gene expression "
         "phenotype abnormality tissue cell signalling pathway drug target inhibitor").split()


@dataclass(frozen=True)
class Query:
    id: int
    text: str
    answer_ids: tuple


def make_trajectories(rng: np.random.Generator, qid: int, gold: list[int], agents: int, steps: int,
                      n_nodes: int) -> list[Trajectory]:
    out = []
    for a in range(agents):
        recorded = []
        shown_all: list[int] = []
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": f"q{qid}"}]
        for t in range(steps - 1):
            name = SEARCH if t % 3 == 0 else NEIGHBORS
            k = 5 if name == SEARCH else 20
            ids = [int(x) for x in rng.integers(0, n_nodes, k)]
            if gold and rng.random() < 0.15:
                ids[int(rng.integers(0, k))] = gold[int(rng.integers(0, len(gold)))]
            lines = [NodeLine(i, f"node {i}", "gene/protein", " ".join(rng.choice(WORDS, 24)), float(rng.random()),
                              [("associated with", True)] if name == NEIGHBORS else []) for i in ids]
            text, shown = render(f"{name} query=\"q{qid}\"", lines, k * 3, "matching nodes")
            shown_all += shown
            call = ToolCall(f"c{a}_{t}", name, '{"query": "q"}')
            resp = ChatResponse(None, [call], 1500 + 400 * t, 40, 0.5, False)
            recorded.append(Step(t, resp, [call], [text], 0.5, 0.001, resp.prompt_tokens, 40, node_ids=[shown]))
            messages += [resp.to_message(), {"role": "tool", "tool_call_id": call.id, "content": text}]
        pool = list(dict.fromkeys(shown_all))
        selected = [pool[int(i)] for i in rng.choice(len(pool), min(len(pool), 8), replace=False)]
        calls = [ToolCall(f"c{a}_s", "select", '{"node_ids": []}'), ToolCall(f"c{a}_f", "finish", "{}")]
        resp = ChatResponse(None, calls, 6000, 30, 0.5, False)
        recorded.append(Step(steps - 1, resp, calls, ["Selected.", "Finished."], 0.5, 0.0, 6000, 30,
                             node_ids=[[], []]))
        messages += [resp.to_message(), {"role": "tool", "tool_call_id": calls[0].id, "content": "Selected."},
                     {"role": "tool", "tool_call_id": calls[1].id, "content": "Finished."}]
        out.append(Trajectory(qid, a, messages, recorded, selected, "finish", query=f"q{qid}"))
    return out


def write_run(out: Path, n: int, agents: int, steps: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    n_nodes = 100_000
    queries = [Query(q, f"q{q}", tuple(int(x) for x in rng.integers(0, n_nodes, int(rng.integers(1, 4)))))
               for q in range(n)]
    plan = {q.text: make_trajectories(rng, q.id, list(q.answer_ids), agents, steps, n_nodes) for q in queries}

    class StandIn:
        async def aretrieve(self, query: str, query_id=""):
            trajs = plan[query]
            from ark.fusion import fuse

            rankings = [t.selected for t in trajs]
            return Retrieval(ranking=fuse(rankings, top=20), agent_rankings=rankings, trajectories=trajs)

    runner.run_queries(StandIn(), queries, runner.RunSettings(out_dir=out, progress=False, n_boot=10,
                                                              concurrency=64))


def best_of(fn, repeats: int = 3) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=1000, help="queries")
    ap.add_argument("--n-agents", type=int, default=3, help="n, agents per query (budget.agent.n_agents)")
    ap.add_argument("--t-max", type=int, default=10, help="T_max, steps per agent (budget.agent.t_max)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    for name in ("n", "n_agents", "t_max"):
        if getattr(args, name) < 1 + (name == "t_max"):
            flag = "--" + name.replace("_", "-")
            raise SystemExit(f"{flag} must be >= {1 + (name == 't_max')}, got {getattr(args, name)}")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run"
        t0 = time.perf_counter()
        write_run(out, args.n, args.n_agents, args.t_max, args.seed)
        size = sum(f.stat().st_size for f in (out / "trajectories").iterdir())
        print(f"wrote {args.n} queries x {args.n_agents} agents x {args.t_max} steps "
              f"({size / 1e6:.1f} MB of trajectories) in {time.perf_counter() - t0:.1f} s")
        run = RunDir(out)
        records = run.records("ok")

        def one_pass() -> tuple[float, float]:
            """One query at a time: its load and its attribution timed separately, nothing kept."""
            t_load = t_attr = 0.0
            for r in records:
                t0 = time.perf_counter()
                trajs = run.trajectories(r)
                t1 = time.perf_counter()
                attribute_record(r, trajs)
                t_load += t1 - t0
                t_attr += time.perf_counter() - t1
            return t_load, t_attr

        passes = [one_pass() for _ in range(3)]
        t_load = min(p[0] for p in passes)
        t_attr = min(p[1] for p in passes)
        t_write = best_of(lambda: write_attribution(RunDir(out)))
        summary = RunDir(out).metrics["attribution"]
        n = len(records)
        print(f"load (read + JSON parse)   {t_load:7.3f} s  {1000 * t_load / n:6.2f} ms/query")
        print(f"attribute (loaded)         {t_attr:7.3f} s  {1000 * t_attr / n:6.2f} ms/query")
        print(f"write (load + attribute + files) {t_write:7.3f} s  {1000 * t_write / n:6.2f} ms/query")
        print(f"attribute / load = {t_attr / t_load:.3f}   (target: well under 1)")
        print("classes: " + ", ".join(f"{c} {summary['counts'][c]}" for c in attribution.CLASSES))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
