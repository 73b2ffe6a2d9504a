"""Shards of a run: ``shard=(i, n)`` takes every n-th query from i into a run directory of its own
(``<run_dir>/shards/<i>-of-<n>``), and the shards are merged back into one run directory.

Shards run at once, on different nodes of a cluster, so:

* each shard writes its LLM replies to ``<run>/shards/<i>-of-<n>/llm_cache.sqlite`` (`own_llm_cache`,
  used by `ark.run.runner.run_queries`): SQLite's locks are not to be trusted across the nodes of a
  shared filesystem, and one writer per file needs none. It reads the run's cache (``paths.llm_cache``)
  for replies made before, read-only (`ark.llm.cache.ResponseCache`'s ``fallback``);
* `merge_run` joins the n shards into ``<run>/`` (predictions, trajectories, metrics.json, per_query.csv,
  ...), the queries in the order an unsharded run has them (read back from each shard's per_query.csv),
  so its metrics, confidence intervals included, equal the unsharded run's. It refuses shards that have
  not finished (no metrics.json); a shard with failed or missing queries is merged, and the merged
  summary says so (never "complete"); `merge` is the same for any list of shard directories;
* `merge_llm_caches` copies the shards' replies into the run's cache and removes the shard caches
  (from one process: the one that launched the sweep, or ``ark merge``).

In a Hydra sweep the merges happen by themselves (`ark.config.callbacks`): a run is merged when the last
of its shards finishes, its caches when the sweep ends. By hand, for shards run any other way:

    ark merge results/runs/default/prime/ark-gpt-4.1-t20_n3-full_test   [--shards 4]
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ark import atomic
from ark.analysis.metrics import DEFAULT_TORCHMETRICS
from ark.llm.cache import ResponseCache
from ark.llm.cache import merge as merge_caches
from ark.run.records import STATUSES, load_predictions
from ark.run.rundir import (METRICS_FILE, PER_QUERY, PREDICTIONS, TRAJ_DIR, RunDir, RunDirInUse, run_lock)
from ark.run.rundir import key as _key
from ark.run.settings import RUN_METRICS, RunSettings
from ark.run.summary import write_summary


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
                               # metrics.json names it where the shard's records had scores of their own;
                               # the run's identity (its "run") wherever it can act
                               torchmetrics=(first.get("torchmetrics") or first.get("run", {}).get("torchmetrics")
                                             or DEFAULT_TORCHMETRICS),
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


SHARD_CACHE = "llm_cache.sqlite"   # a shard's own LLM cache, in its directory
_SHARD_NAME = re.compile(r"^(\d+)-of-(\d+)$")


class ShardsNotReady(RuntimeError):
    """Some shards of the run have not finished (the message names them and how to finish them)."""


@contextlib.contextmanager
def own_llm_cache(retriever, out_dir: Path | str):
    """While the block runs, the retriever's LLM client writes to ``<out_dir>/llm_cache.sqlite`` and
    reads its configured cache only on a miss. A retriever without an LLM cache is left as it is."""
    llm = getattr(retriever, "llm", None)
    shared = getattr(llm, "cache", None)
    own = Path(out_dir) / SHARD_CACHE
    if not isinstance(shared, ResponseCache) or shared.path.resolve() == own.resolve():
        yield
        return
    shared.close()   # its last write checkpointed into the file, where a read-only reader sees it
    llm.cache = ResponseCache(own, timeout_s=shared.timeout_s, fallback=shared.path)
    try:
        yield
    finally:
        llm.cache.close()
        llm.cache = shared


@dataclass(frozen=True)
class Shard:
    index: int
    count: int
    path: Path

    @property
    def name(self) -> str:
        return f"{self.index}/{self.count}"

    def summary(self) -> dict | None:
        """The shard's metrics.json, or None while it has not finished a pass."""
        try:
            return json.loads((self.path / METRICS_FILE).read_text())
        except (OSError, ValueError):
            return None

    def state(self) -> str:
        """"complete", "degraded", "incomplete" (its summary's status), or "unfinished" (no summary)."""
        s = self.summary()
        return "unfinished" if s is None else str(s.get("status", "incomplete"))


def run_shards(run_dir: Path | str, n: int | None = None) -> list[Shard]:
    """The shard directories of a run for ``n`` shards (all n, present or not); with ``n`` None, the
    one shard count found under ``<run_dir>/shards`` (ValueError when there are none or several)."""
    root = Path(run_dir) / "shards"
    if n is None:
        found = {int(m.group(2)) for p in (root.iterdir() if root.is_dir() else ())
                 if p.is_dir() and (m := _SHARD_NAME.match(p.name))}
        if len(found) != 1:
            raise ValueError(f"{run_dir}: " + (f"shards of several counts ({', '.join(map(str, sorted(found)))}); "
                                               "say which with --shards N" if found else "no shard directories (shards/<i>-of-<n>)"))
        n = found.pop()
    return [Shard(i, n, shard_dir(run_dir, (i, n))) for i in range(n)]


def pending(run_dir: Path | str, n: int) -> list[str]:
    """The shards of the run that are not complete, as "i/n (state)"; empty when all are."""
    return [f"{s.name} ({s.state()})" for s in run_shards(run_dir, n) if s.state() != "complete"]


def _query_order(parts: list[Shard]) -> list[str]:
    """Query ids in the unsharded order: shard i holds queries i, i+n, i+2n, ... of the selection, in
    order (each shard's per_query.csv lists them so)."""
    columns = []
    for s in parts:
        with open(s.path / PER_QUERY, newline="", encoding="utf-8") as f:
            columns.append([row["query_id"] for row in csv.DictReader(f)])
    order = []
    for j in range(max(map(len, columns), default=0)):
        order += [c[j] for c in columns if j < len(c)]
    return order


class _Query:
    """A query as the merge knows it: its record (gold, text), or only its id when it has none."""

    def __init__(self, qid: str, rec: dict | None):
        self.id = rec["query_id"] if rec else qid
        self.text = rec.get("query", "") if rec else ""
        self.answer_ids = tuple(rec.get("gold", ())) if rec else ()


def merge_run(run_dir: Path | str, n: int | None = None, wait_s: float = 600.0) -> dict:
    """Merge the ``n`` shards of a run into ``run_dir`` (see the module doc) and return its summary.

    Holds the run directory's lock while writing (waiting up to ``wait_s`` for another merge of it).
    Raises `ShardsNotReady` when a shard has not finished a pass."""
    run_dir = Path(run_dir)
    parts = run_shards(run_dir, n)
    unfinished = [s.name for s in parts if s.summary() is None or not (s.path / PER_QUERY).exists()]
    if unfinished:
        raise ShardsNotReady(f"{run_dir}: shards {', '.join(unfinished)} have not finished; run them "
                             f"(shard=i/{parts[0].count}) and merge again")
    deadline = time.monotonic() + wait_s
    while True:
        try:
            with run_lock(run_dir):
                records = {}
                for s in parts:
                    records.update(load_predictions(s.path))
                queries = [_Query(q, records.get(_key(q))) for q in _query_order(parts)]
                merge([s.path for s in parts], run_dir, queries=queries)
                first = parts[0].summary()
                extra = {**first.get("run", {}), "shard": None, "merged_from": [s.name for s in parts]}
                return RunDir(run_dir).update_metrics(run=extra)
        except RunDirInUse:
            if time.monotonic() > deadline:
                raise
            time.sleep(1.0)


def merged_is_current(run_dir: Path | str, n: int) -> bool:
    """The run directory holds a merge of its n shards newer than every shard's last summary."""
    run_dir = Path(run_dir)
    try:
        merged = (run_dir / METRICS_FILE).stat().st_mtime
        info = json.loads((run_dir / METRICS_FILE).read_text()).get("run", {})
    except (OSError, ValueError):
        return False
    if len(info.get("merged_from") or ()) != n:
        return False
    return all((s.path / METRICS_FILE).exists() and (s.path / METRICS_FILE).stat().st_mtime <= merged
               for s in run_shards(run_dir, n))


def merge_llm_caches(run_dir: Path | str, into: Path | str, n: int | None = None) -> int:
    """Copy the shards' own LLM caches into the cache ``into`` and remove them; returns the replies added.
    Run it from one process, when no shard of the run is running."""
    parts = run_shards(run_dir, n)
    files = [s.path / SHARD_CACHE for s in parts if (s.path / SHARD_CACHE).exists()]
    if not files:
        return 0
    added = merge_caches(files, into)
    for f in files:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{f}{suffix}").unlink(missing_ok=True)
    return added


def shard_llm_cache_target(run_dir: Path | str, n: int | None = None) -> Path | None:
    """The run's LLM cache as its shards were configured (``paths.llm_cache`` in a shard's config.yaml)."""
    import yaml

    for s in run_shards(run_dir, n):
        try:
            cfg = yaml.safe_load((s.path / "config.yaml").read_text()) or {}
        except (OSError, yaml.YAMLError):
            continue
        path = (cfg.get("paths") or {}).get("llm_cache")
        if path:
            return Path(path)
    return None
