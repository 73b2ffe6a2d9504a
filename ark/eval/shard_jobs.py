"""Sharded runs as cluster jobs: each shard's own LLM cache, and the merge of a run's shards into one
run directory once the last of them is complete.

A run given ``shard=i/n`` computes every n-th query from i into ``<run>/shards/<i>-of-<n>/``
(`ark.eval.runner.shard_dir`). Shards run at once, on different nodes, so:

* each shard writes its LLM replies to ``<run>/shards/<i>-of-<n>/llm_cache.sqlite`` (`own_llm_cache`,
  used by `ark.eval.runner.run_queries`): SQLite's locks are not to be trusted across the nodes of a
  shared filesystem, and one writer per file needs none. It reads the run's cache (``paths.llm_cache``)
  for replies made before, read-only (`ark.llm.cache.ResponseCache`'s ``fallback``);
* `merge_run` joins the n shards into ``<run>/`` (predictions, trajectories, metrics.json, per_query.csv,
  ...), the queries in the order an unsharded run has them (read back from each shard's per_query.csv),
  so its metrics, confidence intervals included, equal the unsharded run's. It refuses shards that have
  not finished (no metrics.json); a shard with failed or missing queries is merged, and the merged
  summary says so (never "complete");
* `merge_llm_caches` copies the shards' replies into the run's cache and removes the shard caches
  (from one process: the one that launched the sweep, or this module's command line).

The merges happen by themselves in a Hydra sweep: ``experiments/callbacks.py`` merges a run when the
last of its shards finishes, and its caches when the sweep ends. By hand (one line, for shards run
any other way):

    python -m ark.eval.shard_jobs results/runs/default/prime/ark-gpt-4.1-t20_n3-full_test   [--shards 4]
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import re
import time
from dataclasses import dataclass
from pathlib import Path

from ark.eval import runner
from ark.eval.rundir import METRICS_FILE, PER_QUERY, RunDir
from ark.eval.rundir import key as _key
from ark.llm.cache import ResponseCache
from ark.llm.cache import merge as merge_caches

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


def shards(run_dir: Path | str, n: int | None = None) -> list[Shard]:
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
    return [Shard(i, n, runner.shard_dir(run_dir, (i, n))) for i in range(n)]


def pending(run_dir: Path | str, n: int) -> list[str]:
    """The shards of the run that are not complete, as "i/n (state)"; empty when all are."""
    return [f"{s.name} ({s.state()})" for s in shards(run_dir, n) if s.state() != "complete"]


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
    parts = shards(run_dir, n)
    unfinished = [s.name for s in parts if s.summary() is None or not (s.path / PER_QUERY).exists()]
    if unfinished:
        raise ShardsNotReady(f"{run_dir}: shards {', '.join(unfinished)} have not finished; run them "
                             f"(shard=i/{parts[0].count}) and merge again")
    deadline = time.monotonic() + wait_s
    while True:
        try:
            with runner.run_lock(run_dir):
                records = {}
                for s in parts:
                    records.update(runner.load_predictions(s.path))
                queries = [_Query(q, records.get(_key(q))) for q in _query_order(parts)]
                runner.merge([s.path for s in parts], run_dir, queries=queries)
                first = parts[0].summary()
                extra = {**first.get("run", {}), "shard": None, "merged_from": [s.name for s in parts]}
                return RunDir(run_dir).update_metrics(run=extra)
        except runner.RunDirInUse:
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
               for s in shards(run_dir, n))


def merge_llm_caches(run_dir: Path | str, into: Path | str, n: int | None = None) -> int:
    """Copy the shards' own LLM caches into the cache ``into`` and remove them; returns the replies added.
    Run it from one process, when no shard of the run is running."""
    parts = shards(run_dir, n)
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

    for s in shards(run_dir, n):
        try:
            cfg = yaml.safe_load((s.path / "config.yaml").read_text()) or {}
        except (OSError, yaml.YAMLError):
            continue
        path = (cfg.get("paths") or {}).get("llm_cache")
        if path:
            return Path(path)
    return None


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m ark.eval.shard_jobs",
                                description="Merge a sharded run's shards (and their LLM caches) into the run directory.")
    p.add_argument("run_dir", help="the run directory, holding shards/<i>-of-<n>/")
    p.add_argument("--shards", type=int, default=None, help="the shard count n (default: the one found)")
    p.add_argument("--llm-cache", default=None,
                   help="merge the shards' LLM caches into this file (default: paths.llm_cache of the shards' config)")
    args = p.parse_args(argv)
    try:
        summary = merge_run(args.run_dir, args.shards)
        n = len(summary["run"]["merged_from"])
        target = Path(args.llm_cache) if args.llm_cache else shard_llm_cache_target(args.run_dir, n)
        added = merge_llm_caches(args.run_dir, target, n) if target is not None else 0
    except (ValueError, ShardsNotReady) as e:
        raise SystemExit(str(e)) from None
    print(json.dumps({k: summary[k] for k in ("n", "n_ok", "n_degraded", "n_failed", "n_missing", "complete",
                                              "status")}))
    if target is not None:
        print(f"LLM cache: {added} replies added to {target}")
    for name, v in summary["metrics"].items():
        print(f"{name:>10}: {v['mean']:.4f}  [{v['ci_low']:.4f}, {v['ci_high']:.4f}]")


if __name__ == "__main__":
    main()
