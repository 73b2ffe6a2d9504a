"""What finished runs cost, read from their run directories: the per query costs a forecast
(`ark.cost.forecast`) rests on.

Each ``ok`` record of a run's ``predictions.jsonl`` is one query's cost (`ark.cost.forecast.QueryCost`);
`same_settings_dirs` finds the run directories (and their shards) whose settings make the same LLM calls.

    costs = measured_costs(same_settings_dirs(Path("results/runs"), "prime", identity))
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from ark.cost.forecast import QueryCost, cost_identity
from ark.run.rundir import PREDICTIONS, RUN_INFO, key, read_predictions


def _run_jsons(runs_root: Path, graph: str) -> Iterable[Path]:
    """run.json of every run directory of ``graph`` under ``runs_root`` (any experiment)."""
    return sorted(Path(runs_root).glob(f"*/{graph}/*/{RUN_INFO}"))


def same_settings_dirs(runs_root: Path | str, graph: str, identity: dict) -> list[Path]:
    """Run directories (and their shards) under ``runs_root`` whose settings make the same LLM calls as
    ``identity`` (equal `cost_identity`)."""
    want = cost_identity(identity)
    out = []
    for path in _run_jsons(Path(runs_root), graph):
        try:
            info = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if "identity" in info and cost_identity(info["identity"]) == want:
            out.append(path.parent)
            out.extend(sorted(d for d in (path.parent / "shards").glob("*-of-*") if d.is_dir()))
    return out


def measured_costs(run_dirs: Iterable[Path]) -> dict[str, QueryCost]:
    """query-id key -> its cost, from the ``ok`` records of ``run_dirs`` (the first directory wins)."""
    out: dict[str, QueryCost] = {}
    for d in run_dirs:
        for k, rec in read_predictions(Path(d) / PREDICTIONS).items():
            if k in out or not isinstance(rec, dict) or rec.get("status") != "ok":
                continue
            calls = sum(int(a.get("steps", 0) or 0) for a in rec.get("agents", []) or [])
            out[k] = QueryCost(k, float(rec.get("cost_usd", 0.0) or 0.0), calls,
                               int(rec.get("prompt_tokens", 0) or 0), int(rec.get("completion_tokens", 0) or 0))
    return out


def selected_keys(queries: Iterable) -> list[str]:
    """The query-id keys of a run's selected queries, in order."""
    return [key(q.id) for q in queries]
