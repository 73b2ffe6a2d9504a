"""Synthetic run directories for figure/viewer/notebook tests, written by the evaluation runner itself.

Only the retriever is stood in for: each query's agent lists, tool calls and latency are chosen by the
test, so expectations are known; everything in the directory (the files ark/run/rundir.py documents:
predictions.jsonl, trajectories/<qid>.json of real ``ark.trajectory.Trajectory`` records, metrics.json,
per_query.csv) is written by ``ark.run.runner.run_queries``, the fused ranking by ``ark.fusion.fuse``, the
metrics by ``ark.analysis.metrics``, and config.yaml goes through ``ark.run.logger.redact`` as ``ark.config.evaluation``
writes it.

    from tests.helpers.fixtures_runs import QuerySpec, write_run, budget_grid
    run = write_run(tmp / "budget/demo/ark-gpt-4.1-t10n3-full", config, [QuerySpec(...), ...])

Also runnable to make a demo results tree for the notebooks by hand:
    python -m tests.helpers.fixtures_runs results/runs_synthetic
"""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from ark.run import runner
from ark.fusion import fuse
from ark.run.logger import redact

METRICS = ("hit@1", "hit@5", "recall@20", "mrr")
TOP = 20  # the runner's default ranking length for ARK


@dataclass
class QuerySpec:
    """One query of a synthetic run; every value the figures read is set here."""

    query_id: int
    gold: list[int]
    agent_rankings: list[list[int]]          # one selected list per agent
    tool_counts: list[dict[str, int]]        # per agent: {"search_graph": n, "explore_neighbors": m}
    latency_s: float = 1.0
    status: str = "ok"                       # "ok" | "failed"
    text: str = ""
    ranking: list[int] | None = None         # fused ranking; default: ark.fusion.fuse of agent_rankings
    shown: list[list[int]] | None = None     # per agent: the ids its first graph-tool call shows
                                             # (rendered as ark.observation renders them); default 1000+i

    @property
    def question(self) -> str:
        return self.text or f"query {self.query_id}"


def _trajectory(q: QuerySpec, agent: int) -> dict:
    """A Trajectory.to_json()-shaped dict whose tool calls match q.tool_counts[agent]."""
    counts = q.tool_counts[agent]
    names = ["search_graph"] * counts.get("search_graph", 0) + \
        ["explore_neighbors"] * counts.get("explore_neighbors", 0)
    steps, messages = [], [{"role": "system", "content": "You explore a knowledge graph."},
                           {"role": "user", "content": q.question}]
    selected = q.agent_rankings[agent]
    calls = [(n, {"query": f"sub-query {i}", "k": 5} if n == "search_graph" else
              {"node_id": (selected or [0])[0], "query": f"neighbors {i}", "node_types": ["paper"]})
             for i, n in enumerate(names)]
    calls += [("select", {"node_ids": selected}), ("finish", {})]
    for i, (name, args) in enumerate(calls):
        call = {"id": f"call_{agent}_{i}", "name": name, "arguments": json.dumps(args)}
        obs = (f"Selected {len(selected)} nodes." if name == "select" else
               "Finished." if name == "finish" else
               f"Results for {name}: node {1000 + i} (score 3.2), node {1001 + i} (score 2.1)")
        response = {"content": None, "tool_calls": [call], "prompt_tokens": 100 + 10 * i,
                    "completion_tokens": 20, "latency_s": 0.25, "cached": False}
        shown = [] if name in ("select", "finish") else [1000 + i, 1001 + i]
        if q.shown is not None and i == 0 and name not in ("select", "finish"):
            from ark.observation import NodeLine, render

            shown = list(q.shown[agent])
            obs, _ = render(f"{name} query={json.dumps(args.get('query'))}",
                            [NodeLine(n, f"node {n}", "paper", "synthetic text", 1.0) for n in shown],
                            len(shown), "matching nodes")
        steps.append({"index": i, "response": response, "tool_calls": [call], "observations": [obs],
                      "llm_latency_s": 0.25, "tool_latency_s": 0.01, "prompt_tokens": 100 + 10 * i,
                      "completion_tokens": 20, "error": None, "node_ids": [shown], "overhead_s": 0.01})
        messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": call["id"], "type": "function",
             "function": {"name": name, "arguments": call["arguments"]}}]})
        messages.append({"role": "tool", "tool_call_id": call["id"], "content": obs})
    return {"query_id": q.query_id, "agent_index": agent, "query": q.question,
            "prompt_version": "synthetic", "messages": messages, "tools": [], "steps": steps,
            "selected": selected, "stop_reason": "finish", "error": None, "wall_s": 0.26 * len(steps)}


def make_config(graph: str, t_max: int = 20, n_agents: int = 3, backbone: str = "gpt-4.1",
                ablation: str = "full", retriever: str = "ark", experiment: str = "budget") -> dict:
    """A resolved run config shaped like the config.yaml ark.config.evaluation writes (Hydra groups as nested
    dicts; the ablation's flags as its conf/ablation/<name>.yaml sets them)."""
    flags = {"full": (True, True, True), "no_neighbors": (False, True, True),
             "no_query_rank": (True, False, True), "no_type_filter": (True, True, False)}[ablation]
    return {"experiment_name": experiment, "split": "test",
            "graph": {"name": graph},
            "retriever": {"name": retriever},
            "backbone": {"name": backbone, "model": backbone},
            "budget": {"name": f"t{t_max}_n{n_agents}", "agent": {"t_max": t_max, "n_agents": n_agents}},
            "ablation": {"name": ablation, "tools": {"neighbors": flags[0], "neighbor_query": flags[1],
                                                     "type_filter": flags[2]}}}


def write_run(run_dir: Path, config: dict, queries: list[QuerySpec]) -> Path:
    """Write one run directory with the real runner; returns it. Failed queries count as misses in
    metrics.json (``count_failed_as_miss``), so its means are over all queries."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.yaml").write_text(yaml.safe_dump(redact(config), sort_keys=False))
    _run_stand_in(queries, runner.RunSettings(out_dir=run_dir, concurrency=4, top=TOP, n_boot=20,
                                              progress=False, count_failed_as_miss=True))
    return run_dir


def _run_stand_in(queries: list[QuerySpec], settings, logger=None) -> dict:
    """``ark.run.runner.run_queries`` over a retriever that replays each QuerySpec as real Retrieval and
    Trajectory records (only the LLM and the graph are stood in for)."""
    from ark.retriever import Retrieval
    from ark.trajectory import Trajectory

    by_text = {q.question: q for q in queries}
    assert len(by_text) == len(queries), "QuerySpec texts must be distinct"

    class StandIn:
        async def aretrieve(self, query: str, query_id=""):
            q = by_text[query]
            if q.status != "ok":
                raise RuntimeError("synthetic failure")
            trajs = [Trajectory.from_json(_trajectory(q, a)) for a in range(len(q.agent_rankings))]
            return Retrieval(ranking=q.ranking if q.ranking is not None else fuse(q.agent_rankings, top=TOP),
                             agent_rankings=q.agent_rankings, trajectories=trajs, latency_s=q.latency_s,
                             prompt_tokens=1000, completion_tokens=100, cost_usd=0.001)

    @dataclass(frozen=True)
    class Q:
        id: int
        text: str
        answer_ids: tuple

    qs = [Q(q.query_id, q.question, tuple(q.gold)) for q in queries]
    return runner.run_queries(StandIn(), qs, settings, logger=logger)


def random_queries(rng: np.random.Generator, n_queries: int, n_agents: int, p_hit: float,
                   neighbor_rate: float, latency_s: float) -> list[QuerySpec]:
    """Queries whose agents hit the gold with probability p_hit and call neighbors at neighbor_rate."""
    out = []
    for qid in range(n_queries):
        gold = [int(10_000 + qid)]
        rankings, counts = [], []
        for _ in range(n_agents):
            hit = rng.random() < p_hit
            others = [int(x) for x in rng.choice(5000, size=6, replace=False)]
            rankings.append(([gold[0]] + others[:4]) if hit else others)
            calls = int(rng.integers(1, 8))
            nb = int(rng.binomial(calls, neighbor_rate))
            counts.append({"search_graph": calls - nb, "explore_neighbors": nb})
        out.append(QuerySpec(qid, gold, rankings, counts, latency_s=float(latency_s * (0.8 + 0.4 * rng.random())),
                             text=f"Which node answers synthetic question {qid}?"))
    return out


def budget_grid(root: Path, graphs=("demo",), t_maxes=(5, 10, 20), n_agents=(1, 2, 3),
                n_queries: int = 12, seed: int = 0) -> list[Path]:
    """A budget sweep (experiment 'budget') plus one ablation sweep, like the paper's runs."""
    rng = np.random.default_rng(seed)
    dirs = []
    for g in graphs:
        rate = {"amazon": 0.15, "mag": 0.65, "prime": 0.5}.get(g, 0.4)
        for t in t_maxes:
            for n in n_agents:
                cfg = make_config(g, t, n)
                qs = random_queries(rng, n_queries, n, p_hit=min(0.9, 0.3 + 0.02 * t + 0.1 * n),
                                    neighbor_rate=rate, latency_s=0.5 * t + 0.3 * n)
                dirs.append(write_run(Path(root) / "budget" / g / f"ark-gpt-4.1-t{t}-n{n}-full", cfg, qs))
        for abl in ("full", "no_neighbors", "no_query_rank", "no_type_filter"):
            cfg = make_config(g, 20, 3, ablation=abl, experiment="ablation")
            qs = random_queries(rng, n_queries, 3, p_hit=0.7 if abl == "full" else 0.5,
                                neighbor_rate=0.0 if abl == "no_neighbors" else rate, latency_s=8.0)
            dirs.append(write_run(Path(root) / "ablation" / g / f"ark-gpt-4.1-t20-n3-{abl}", cfg, qs))
        for bb in ("qwen3-8b", "qwen3-8b-600", "gpt-4.1"):
            cfg = make_config(g, 20, 3, backbone=bb, experiment="backbone")
            qs = random_queries(rng, n_queries, 3, p_hit=0.4 if bb == "qwen3-8b" else 0.7,
                                neighbor_rate=rate, latency_s=8.0)
            dirs.append(write_run(Path(root) / "backbone" / g / f"ark-{bb}-t20-n3-full", cfg, qs))
    return dirs


def real_run(runs_root: Path, overrides: list[str], queries: list[QuerySpec]) -> Path:
    """A run dir written by the real code path: the Hydra config composed from conf/ (written as
    ark.config.evaluation writes it, with run.json) and ark.run.runner.run_queries over a stand-in retriever
    that returns ark.retriever.Retrieval objects holding real ark.trajectory.Trajectory records.
    Only the LLM and the graph are stood in for."""
    from omegaconf import OmegaConf, open_dict

    from ark.config.compose import compose
    from ark.config.identity import run_info

    cfg = compose([*overrides, f"paths.runs={runs_root}", "progress=false", "n_boot=20"])
    info = run_info(cfg)
    out = Path(cfg.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with open_dict(cfg):
        cfg.pop("hydra")
    resolved = redact(OmegaConf.to_container(cfg, resolve=True))
    (out / "config.yaml").write_text(OmegaConf.to_yaml(OmegaConf.create(resolved)))
    (out / "run.json").write_text(json.dumps(info, indent=1))
    settings = runner.RunSettings(out_dir=out, concurrency=4, top=cfg.retriever.top, n_boot=20,
                                  progress=False, extra=info)
    _run_stand_in(queries, settings)
    return out


if __name__ == "__main__":
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "results/runs_synthetic")
    made = budget_grid(target, graphs=("amazon", "mag", "prime"))
    print(f"wrote {len(made)} synthetic run dirs under {target}")
