"""Teacher trajectories for distillation: run the ARK teacher on a graph's train split (paper §4.3).

Label-free by default: up to N training queries (6,000 in the paper) drawn with a fixed seed, three
trajectories per query (three agents) at temperature 0.7, T_max 20, no filtering, and the gold answers
are never read (the runner receives the queries without them). The collection is a run directory like
every evaluation run, so it resumes (finished queries are skipped) and every LLM call goes through the
response cache; on top it writes

- `trajectories.jsonl`: one `Trajectory.to_json()` per line, what `ark.distill.sft_data` reads;
- `collect_summary.json`: queries, trajectories, stop reasons, steps, tool calls, tokens, cost;
- `collect.json`: the settings that shape the trajectories (split, seed, agents, temperature, T_max,
  teacher model); resuming under other settings is refused (a larger `n_queries` extends it).

`select="best_recall"` is the opt-in rejection-sampling extension: it keeps, per query, the trajectory
whose selected nodes have the highest recall of the gold answers. It USES LABELS and says so in the
summary (`"uses_labels": true`) and in the model card of a student trained on it.

    python experiments/collect.py experiment=collect graph=prime backbone=gpt-4.1 collect.n_queries=6000
    python experiments/collect.py experiment=collect graph=demo backbone=local collect.n_queries=5 collect.t_max=4

`collect(...)` takes plain objects and is what tests call; the entry point (`ark.config.jobs.collect`,
called by experiments/collect.py) builds them from conf/experiment/collect.yaml (a `collect:` block
with the fields of `CollectConfig`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ark.run import runner

log = logging.getLogger(__name__)

SELECT_MODES = ("all", "best_recall")  # "best_recall" uses gold labels (rejection sampling)
TRAJECTORIES_FILE = "trajectories.jsonl"
SUMMARY_FILE = "collect_summary.json"
SETTINGS_FILE = "collect.json"  # what shaped the trajectories, checked when a collection resumes
SHAPING_FIELDS = ("split", "seed", "trajectories_per_query", "temperature", "t_max")


@dataclass
class CollectConfig:
    """What to collect; defaults are the paper's."""

    split: str = "train"  # queries come from this split (paper: train; val for early stopping)
    n_queries: int | None = 6000  # seeded subsample size; None: the whole split (paper: up to 6,000)
    seed: int = 0  # subsample seed: the first n of one fixed permutation, so 600 is inside 6,000
    trajectories_per_query: int = 3  # agents per query, each one trajectory (paper: 3)
    temperature: float = 0.7  # teacher sampling temperature (paper: 0.7)
    t_max: int = 20  # steps per trajectory (paper: 20)
    concurrency: int = 16  # queries in flight
    select: str = "all"  # "all" (label-free, the paper) or "best_recall" (rejection sampling, USES LABELS)
    progress: bool = True

    def __post_init__(self) -> None:
        if self.select not in SELECT_MODES:
            raise ValueError(f"select={self.select!r} is not valid; choose one of {list(SELECT_MODES)}")
        if self.n_queries is not None and self.n_queries < 1:
            raise ValueError(f"n_queries must be >= 1 or None, got {self.n_queries}")
        if self.trajectories_per_query < 1 or self.t_max < 1:
            raise ValueError("trajectories_per_query and t_max must be >= 1")

    @property
    def uses_labels(self) -> bool:
        return self.select != "all"


@dataclass(frozen=True)
class UnlabelledQuery:
    """A query as the teacher sees it: id and text, no answers (what the runner receives)."""

    id: Any
    text: str
    answer_ids: tuple[int, ...] = field(default=())


def subsample(queries: Sequence, n: int | None, seed: int = 0) -> list:
    """The first n queries of a seeded permutation (all when n is None or >= len); nested across n."""
    order = list(range(len(queries)))
    random.Random(seed).shuffle(order)
    keep = order if n is None else order[:n]
    return [queries[i] for i in keep]


def recall(selected: Sequence[int], gold: Sequence[int]) -> float:
    gold_set = set(int(g) for g in gold)
    return len(gold_set & {int(s) for s in selected}) / len(gold_set) if gold_set else 0.0


def export(run_dir: Path, queries: Sequence, cfg: CollectConfig, gold: dict[str, Sequence[int]] | None = None) -> dict:
    """Write trajectories.jsonl and collect_summary.json from the run directory's trajectories/.

    `gold` (query id -> answer ids) is read only when cfg.select == "best_recall".
    """
    from ark.trajectory import Trajectory

    if cfg.uses_labels and gold is None:
        raise ValueError(f"select={cfg.select!r} needs the gold answers (it uses labels)")
    records = runner.load_predictions(run_dir)
    stops: Counter = Counter()
    tools: Counter = Counter()
    n_traj = n_steps = 0
    kept_recall: list[float] = []
    with open(run_dir / TRAJECTORIES_FILE, "w", encoding="utf-8") as out:
        for q in queries:
            path = run_dir / runner.TRAJ_DIR / f"{q.id}.json"
            if not path.is_file():
                continue
            trajs = [Trajectory.from_json(d) for d in json.loads(path.read_text(encoding="utf-8"))]
            if cfg.uses_labels and trajs:
                g = gold[str(q.id)]
                best = max(trajs, key=lambda t: (recall(t.selected, g), -len(t.steps)))
                kept_recall.append(recall(best.selected, g))
                trajs = [best]
            for t in trajs:
                out.write(json.dumps(t.to_json()) + "\n")
                n_traj += 1
                n_steps += len(t.steps)
                stops[t.stop_reason] += 1
                tools.update(t.tool_counts())
    recs = [records[str(q.id)] for q in queries if str(q.id) in records]
    summary = {
        "queries": len(queries),
        "queries_ok": sum(r["status"] == "ok" for r in recs),
        "queries_degraded": sum(r["status"] == "degraded" for r in recs),   # some agents failed
        "queries_failed": sum(r["status"] == "failed" for r in recs),
        "queries_missing": len(queries) - len(recs),
        "trajectories": n_traj,
        "steps": n_steps,
        "stop_reasons": dict(stops),
        "tool_calls": dict(tools),
        "prompt_tokens": sum(int(r.get("prompt_tokens") or 0) for r in recs),
        "completion_tokens": sum(int(r.get("completion_tokens") or 0) for r in recs),
        "cost_usd": sum(float(r.get("cost_usd") or 0.0) for r in recs),
        "select": cfg.select,
        "uses_labels": cfg.uses_labels,
        "config": asdict(cfg),
    }
    if kept_recall:
        summary["kept_mean_recall"] = sum(kept_recall) / len(kept_recall)
    (run_dir / SUMMARY_FILE).write_text(json.dumps(summary, indent=2), encoding="utf-8")
    return summary


def check_resume(out_dir: Path, cfg: CollectConfig, teacher: str | None) -> None:
    """Record what shapes this collection's trajectories in ``out_dir/collect.json``, or, when the
    directory already holds a collection, refuse to add to it under other settings (a mix of
    temperatures or step budgets would be silently distilled as one). ``n_queries`` may differ: the
    subsample is nested, so a larger collection extends a smaller one."""
    settings = {**{k: getattr(cfg, k) for k in SHAPING_FIELDS}, "teacher": teacher}
    path = Path(out_dir) / SETTINGS_FILE
    if path.is_file():
        old = json.loads(path.read_text(encoding="utf-8"))
        diff = [k for k in settings if old.get(k) != settings[k]]
        if diff:
            raise ValueError(
                f"{out_dir} holds a collection made with "
                + ", ".join(f"{k}={old.get(k)!r}" for k in diff) + "; this one has "
                + ", ".join(f"{k}={settings[k]!r}" for k in diff)
                + ". Collect into another directory (out_dir=...) or use the same settings.")
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(settings, indent=2), encoding="utf-8")


async def acollect(retriever, queries: Sequence, out_dir: Path, cfg: CollectConfig) -> dict:
    """Run `retriever` (an ARKRetriever with cfg's agents/temperature/T_max) on the subsampled queries.

    `queries`: objects with .id, .text and .answer_ids (the split). The runner gets `UnlabelledQuery`
    copies; gold answers are read again only by the opt-in best_recall selection. Returns the summary.
    """
    out_dir = Path(out_dir)
    llm_config = getattr(getattr(retriever, "llm", None), "config", None)
    check_resume(out_dir, cfg, getattr(llm_config, "model", None))
    chosen = subsample(list(queries), cfg.n_queries, cfg.seed)
    blind = [UnlabelledQuery(q.id, q.text) for q in chosen]
    settings = runner.RunSettings(out_dir=out_dir, concurrency=cfg.concurrency, progress=cfg.progress,
                                  extra={"collect": asdict(cfg)})
    await runner.arun(retriever, blind, settings)
    gold = {str(q.id): list(q.answer_ids) for q in chosen} if cfg.uses_labels else None
    return export(out_dir, blind, cfg, gold)


def collect(retriever, queries: Sequence, out_dir: Path, cfg: CollectConfig) -> dict:
    """Synchronous `acollect`."""
    return asyncio.run(acollect(retriever, queries, out_dir, cfg))


def teacher_settings(agent_config, backbone, cfg: CollectConfig):
    """Copies of the agent and backbone configs with the collection's agents, T_max and temperature."""
    from dataclasses import replace

    return (replace(agent_config, n_agents=cfg.trajectories_per_query, t_max=cfg.t_max, temperature=cfg.temperature),
            replace(backbone, temperature=cfg.temperature))
