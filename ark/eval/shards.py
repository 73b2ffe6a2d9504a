"""Shards of a run and their merge: ``shard=(i, n)`` takes every n-th query from i into a run
directory of its own (``<run_dir>/shards/<i>-of-<n>``); `merge` joins the shards into one run directory
and writes its summary.

    ark merge OUT_DIR [SHARD_DIR...]     # default: OUT_DIR/shards/*
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ark import atomic
from ark.eval.metrics import DEFAULT_TORCHMETRICS
from ark.eval.records import STATUSES, load_predictions
from ark.eval.rundir import METRICS_FILE, PREDICTIONS, TRAJ_DIR
from ark.eval.settings import RUN_METRICS, RunSettings
from ark.eval.summary import write_summary


def parse_shard(shard: str | Sequence[int] | None) -> tuple[int, int] | None:
    """``"i/n"`` or ``(i, n)`` -> (i, n) with 0 <= i < n; None stays None."""
    if shard is None or shard == "":
        return None
    try:
        i, n = (int(x) for x in (shard.split("/") if isinstance(shard, str) else shard))
    except (ValueError, TypeError):
        raise ValueError(f"shard must look like 'i/n' (e.g. '0/4'), got {shard!r}") from None
    if not 0 <= i < n:
        raise ValueError(f"shard {i}/{n}: need 0 <= i < n")
    return i, n


def select_queries(queries: Sequence, limit: int | None = None, shard=None) -> list:
    """The first ``limit`` queries (all if None), then shard ``i/n`` of them (every n-th from i)."""
    out = list(queries)
    if limit is not None:
        if limit < 0:
            raise ValueError(f"limit must be >= 0 or None, got {limit}")
        out = out[:limit]
    s = parse_shard(shard)
    if s is not None:
        out = out[s[0]::s[1]]
    return out


def shard_dir(run_dir: Path | str, shard) -> Path:
    """Where shard ``i/n`` of a run writes: ``<run_dir>/shards/<i>-of-<n>``."""
    i, n = parse_shard(shard)
    return Path(run_dir) / "shards" / f"{i}-of-{n}"


def merge_predictions(shard_dirs: Iterable[Path | str], out_dir: Path | str) -> int:
    """Join shard run directories into ``out_dir``: predictions (latest per query; ok beats degraded beats failed)
    and trajectories (hard-linked when possible). Returns the number of queries merged."""
    out_dir = Path(out_dir)
    (out_dir / TRAJ_DIR).mkdir(parents=True, exist_ok=True)
    merged: dict[str, dict] = load_predictions(out_dir)
    sources: dict[str, Path] = {}
    for d in shard_dirs:
        d = Path(d)
        if not (d / PREDICTIONS).exists():
            raise FileNotFoundError(f"no {PREDICTIONS} in shard directory {d}")
        for k, rec in load_predictions(d).items():
            if k in merged and STATUSES.index(merged[k]["status"]) < STATUSES.index(rec["status"]):
                continue   # ok beats degraded beats failed
            merged[k] = rec
            sources[k] = d
    for k, d in sources.items():
        tf = merged[k].get("trajectory_file")
        if tf:
            src, dst = d / tf, out_dir / tf
            if src.resolve() != dst.resolve():
                dst.unlink(missing_ok=True)
                try:
                    os.link(src, dst)
                except OSError:
                    dst.write_bytes(src.read_bytes())
    with atomic.open_text(out_dir / PREDICTIONS) as f:
        for rec in merged.values():
            f.write(json.dumps(rec) + "\n")
    return len(merged)


def merge(shard_dirs: Sequence[Path | str], out_dir: Path | str, queries: Sequence | None = None,
          settings: RunSettings | None = None, candidate_ids=None) -> dict:
    """Merge shards into ``out_dir`` and write its metrics.json.

    ``queries``: the full selection (default: every query found in the shards, gold from the records);
    ``settings``: scoring settings (default: from the first shard's metrics.json).
    """
    out_dir = Path(out_dir)
    merge_predictions(shard_dirs, out_dir)
    if settings is None:
        first = json.loads((Path(shard_dirs[0]) / METRICS_FILE).read_text()) \
            if (Path(shard_dirs[0]) / METRICS_FILE).exists() else {}
        names = tuple(first.get("metrics", {}).keys()) or RUN_METRICS
        settings = RunSettings(out_dir=out_dir, metrics=names, top=first.get("top", 20),
                               n_boot=first.get("n_boot", 1000), seed=first.get("seed", 0),
                               metrics_mode=first.get("metrics_mode", "paper"),
                               torchmetrics=first.get("torchmetrics") or DEFAULT_TORCHMETRICS,
                               cut=first.get("cut", "top_first"),
                               count_failed_as_miss=first.get("count_failed_as_miss", False),
                               progress=False, extra={**first.get("run", {}), "merged_from": len(shard_dirs)})
    if queries is None:
        queries = [_RecordQuery(r) for r in load_predictions(out_dir).values()]
        queries.sort(key=lambda q: (str(type(q.id)), q.id))
    return write_summary(out_dir, queries, settings, candidate_ids)


@dataclass
class _RecordQuery:
    rec: dict

    @property
    def id(self):
        return self.rec["query_id"]

    @property
    def text(self):
        return self.rec.get("query", "")

    @property
    def answer_ids(self):
        return tuple(self.rec.get("gold", ()))
