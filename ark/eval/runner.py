"""The evaluation runner: one retriever over one query list, resumable, with a run directory as output.

A retriever is anything with ``async aretrieve(query: str, query_id) -> Retrieval`` (ARK's
`ARKRetriever`, the `BM25Retriever` baseline, or a test's tiny stand-in). The runner

* holds ``run.lock`` in the directory while it runs (`run_lock`): a second writer is refused at once;
* runs queries concurrently under one limit (``concurrency``) with a tqdm bar showing running
  metrics, tokens and cost;
* appends each finished query at once to ``predictions.jsonl`` (and its trajectories to
  ``trajectories/<query_id>.json``, written first, atomically), so a kill loses at most the queries
  in flight; a record is appended whole or not at all;
* on restart skips every query recorded ``ok`` whose trajectory file is there, and computes again the
  failed, degraded and missing ones and any ok one whose trajectory file is gone (the LLM cache then
  answers the calls already made, so only the failed calls are paid for);
* stops cleanly when the disk is full (`RunStorageError`, one message naming the directory): the
  queries in flight are cancelled before the HTTP connections close, and every record written stays;
* writes ``metrics.json`` (the summary below), ``per_query.csv``, ``trajectory_stats.csv`` and
  ``attribution.csv`` (`ark.eval.attribution`; the files are named and read in `ark.eval.rundir`).

Record format (one JSON object per line of ``predictions.jsonl``; the last line of a query id wins;
a line that is not such an object is skipped with a warning and its query recomputed):

    query_id, query, gold            the query and its gold node ids
    status                           "ok" | "degraded" | "failed" (`STATUSES`)
    error                            null, or why (for degraded: which agents failed and how)
    ranking                          the fused ranking, cut to ``top`` (kept for degraded/failed too)
    agent_rankings                   each agent's own ordered selections
    agents                           per agent: {agent, status ("ok"|"failed"), stop_reason, error,
                                     selected, steps}; an agent whose trajectory stopped with
                                     stop_reason "error" failed, and its selections so far are kept
    metrics                          scores of ``ranking`` (ok only; {} otherwise)
    partial_metrics                  degraded only: scores of the fused list of the surviving agents
    agent_metrics                    per agent: hit@5, recall@20 of its own list (ok and degraded)
    latency_s, prompt_tokens, completion_tokens, cost_usd, tool_counts (per agent), trajectory_file

Scoring policy: the headline metrics average the ``ok`` queries only. A query with a failed agent is
"degraded" (its fused list comes from fewer than n agents, which is not the method being measured)
and is retried by the next run like a failed one. The summary's ``status`` is "complete" (every
query ok), "degraded" (nothing missing or failed, some degraded) or "incomplete"; ``complete`` is true
only for "complete". ``count_failed_as_miss=true`` scores failed and degraded queries as all-zero
misses and calls the run complete (the summary's ``note`` says how many).

Summary (``metrics.json``): n, n_ok, n_degraded, n_failed, n_missing, complete, status, agents
{ok, failed}, metrics {name: mean, ci_low, ci_high, n}, tool calls and shares, neighbor calls per
trajectory, latency, tokens, cost, failed_queries, degraded_queries, run (the caller's ``extra``),
this_run {computed, skipped, wall_s, bookkeeping_s_per_query, trajectories_rebuilt}, warning/note.

Shards (``shard=(i, n)`` takes every n-th query from i) write their own run directories;
``merge(shard_dirs, out_dir, ...)`` joins them into one (CLI: ``python -m ark.eval.runner merge OUT SHARD...``).
Library code: plain arguments only; Hydra lives in ``experiments/run.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import csv
import errno
import fcntl
import json
import logging
import os
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ark.eval import attribution

from ark.tools import registry as tool_registry
from ark.eval.metrics import (CUTS, DEFAULT_TORCHMETRICS, MODES, TORCHMETRICS, CandidateSet, aggregate, as_candidates,
                         evaluate, parse_metric, scored_list)
# the run directory's files are named, documented and read in ark.eval.rundir
from ark.eval.rundir import METRICS_FILE, PER_QUERY, PREDICTIONS, TRAJ_DIR, TRAJECTORY_STATS, read_predictions
from ark.eval.rundir import key as _key
from ark.eval.rundir import write_json_atomic

log = logging.getLogger(__name__)

LOCK_FILE = "run.lock"
NEIGHBOR_KIND = "relational"  # Figure 5 counts the calls of the tools of this kind per trajectory
RUN_METRICS: tuple[str, ...] = ("hit@1", "hit@5", "hit@10", "recall@10", "recall@20", "mrr")
SUCCESS_METRIC = "hit@5"   # what makes a trajectory "successful" in the paper's Figure 5
AGENT_METRICS = (SUCCESS_METRIC, "recall@20")  # scored per agent, for Figure 5 and trajectory_stats.csv


STATUSES = ("ok", "degraded", "failed")


class RunDirInUse(RuntimeError):
    """Another process is writing the run directory (it holds ``run.lock``)."""


class RunStorageError(OSError):
    """The run directory cannot be written (disk full, quota, read-only); the run stopped cleanly."""


_held_locks: dict[Path, list] = {}   # run dir -> [fd, depth]: this process's locks (re-entrant)


@contextlib.contextmanager
def run_lock(run_dir: Path | str):
    """Hold ``<run_dir>/run.lock`` (creating the directory) for as long as the block runs.

    A second process that asks for the same directory gets `RunDirInUse` at once, naming the holder's
    pid; the lock dies with its process (``flock``), so a kill -9 leaves no stale lock. Re-entrant
    within one process (``experiments/run.py`` takes it before writing ``run.json``, then the runner)."""
    key = Path(run_dir).resolve()
    if key in _held_locks:
        _held_locks[key][1] += 1
        try:
            yield
        finally:
            _held_locks[key][1] -= 1
        return
    key.mkdir(parents=True, exist_ok=True)
    fd = os.open(key / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        raise RunDirInUse(f"{run_dir} is in use by another run (pid {holder}); wait for it to end, or give "
                          "this run its own directory (experiment_name=... or out_dir=...)") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, str(os.getpid()).encode(), 0)
    _held_locks[key] = [fd, 1]
    try:
        yield
    finally:
        del _held_locks[key]
        os.close(fd)          # releases the flock


class Retriever(Protocol):
    async def aretrieve(self, query: str, query_id: Any = "") -> Any: ...


@dataclass
class RunSettings:
    """How to run and score one (retriever, graph, split)."""

    out_dir: Path                               # the run directory (created)
    concurrency: int = 16                       # queries in flight at once
    top: int = 20                               # ranking length scored: ARK 20, baselines 100
    metrics: tuple[str, ...] = RUN_METRICS      # per-query metrics (ark.eval.metrics names)
    metrics_mode: str = "paper"                 # "paper" or "stark_qa" (see ark.eval.metrics)
    torchmetrics: str = DEFAULT_TORCHMETRICS    # stark_qa mode's ranking semantics: "1.7.0" or "1.9"
    cut: str = "top_first"                      # cut to `top` before dropping non-candidates, or after
    count_failed_as_miss: bool = False          # score failed queries as all-zero and call it complete
    n_boot: int = 1000                          # bootstrap resamples for the 95% CIs
    seed: int = 0                               # bootstrap seed
    progress: bool = True                       # show the tqdm bar
    log_every: int = 25                         # push running metrics to the logger every n queries
    extra: dict = field(default_factory=dict)   # written into metrics.json["run"] (split, names, ...)
    external_id: Callable[[int], Any] | None = None  # node id -> the source's own id, recorded beside
                                                # ranking and gold as ranking_external/gold_external

    def __post_init__(self) -> None:
        self.out_dir = Path(self.out_dir)
        if self.concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {self.concurrency}")
        if self.top < 1:
            raise ValueError(f"top must be >= 1, got {self.top}")
        self.metrics = tuple(self.metrics)
        if self.metrics_mode not in MODES:
            raise ValueError(f"unknown metrics_mode {self.metrics_mode!r}; valid modes: {', '.join(MODES)}")
        if self.torchmetrics not in TORCHMETRICS:
            raise ValueError(f"unknown torchmetrics {self.torchmetrics!r}; valid: {', '.join(TORCHMETRICS)}")
        if self.cut not in CUTS:
            raise ValueError(f"unknown cut {self.cut!r}; valid: {', '.join(CUTS)}")
        for name in self.metrics:
            parse_metric(name)  # raises, listing the valid forms


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


def _repair_tail(path: Path) -> None:
    """Cut a partial last line (a kill mid-write) so the next append starts on a fresh line."""
    if not path.exists() or path.stat().st_size == 0:
        return
    with open(path, "rb+") as f:
        f.seek(-1, os.SEEK_END)
        if f.read(1) == b"\n":
            return
        f.seek(0)
        data = f.read()
        f.truncate(data.rfind(b"\n") + 1)


def _is_record(rec: object) -> bool:
    """A line of predictions.jsonl that a reader can use: a dict with a query id and a known status."""
    return isinstance(rec, dict) and "query_id" in rec and rec.get("status") in STATUSES


def load_predictions(run_dir: Path | str) -> dict[str, dict]:
    """query-id key -> latest record in ``predictions.jsonl``.

    A line that is not a record (torn by a kill, or valid JSON such as ``null`` or ``{"status": "ok"}``
    that lacks a query id or a known status) is skipped with a warning; its query counts as missing,
    so a resume computes it again."""
    def skipped(path: Path, n: int, line: str) -> None:
        log.warning("%s line %d is not a query record; skipped (its query is computed again): %.80s",
                    path, n, line)

    records = read_predictions(Path(run_dir) / PREDICTIONS, on_skip=skipped)
    for k in [k for k, r in records.items() if not _is_record(r)]:
        skipped(Path(run_dir) / PREDICTIONS, 0, json.dumps(records.pop(k)))
    return records


class _Running:
    """Running totals for the progress bar and the logger."""

    def __init__(self, names: Sequence[str]):
        self.names = list(names)
        self.sums = dict.fromkeys(self.names, 0.0)
        self.ok = self.failed = self.degraded = 0
        self.prompt_tokens = self.completion_tokens = 0
        self.cost = 0.0

    def add(self, rec: dict) -> None:
        if rec["status"] == "ok":
            self.ok += 1
            for n in self.names:
                self.sums[n] += rec["metrics"].get(n, 0.0)
        else:
            self.failed += 1
            self.degraded += rec["status"] == "degraded"
        self.prompt_tokens += rec.get("prompt_tokens", 0) or 0
        self.completion_tokens += rec.get("completion_tokens", 0) or 0
        self.cost += rec.get("cost_usd", 0.0) or 0.0

    def means(self) -> dict[str, float]:
        return {n: (self.sums[n] / self.ok if self.ok else 0.0) for n in self.names}

    def postfix(self) -> dict[str, str]:
        m = self.means()
        show = {n: f"{m[n]:.3f}" for n in ("hit@1", "recall@20", "mrr") if n in m}
        show.update(fail=str(self.failed - self.degraded), degr=str(self.degraded), tok=f"{self.prompt_tokens + self.completion_tokens:,}",
                    usd=f"{self.cost:.2f}")
        return show


def _score(ranking, gold, cands, metrics, settings: RunSettings) -> dict[str, float]:
    return evaluate(ranking, gold, cands, metrics, settings.metrics_mode, torchmetrics=settings.torchmetrics)


def _agent_entries(trajectories: list, agent_rankings: list[list[int]]) -> list[dict]:
    """One entry per agent: status ("failed" when its trajectory stopped with ``stop_reason ==
    "error"``), stop reason, error, its selections (kept also when it failed) and its step count."""
    out = []
    for i, t in enumerate(trajectories):
        stop = getattr(t, "stop_reason", None)
        selected = getattr(t, "selected", None)
        if selected is None:
            selected = agent_rankings[i] if i < len(agent_rankings) else []
        out.append({"agent": int(getattr(t, "agent_index", i)), "status": "failed" if stop == "error" else "ok",
                    "stop_reason": stop, "error": getattr(t, "error", None),
                    "selected": [int(x) for x in selected], "steps": len(getattr(t, "steps", None) or [])})
    return out


def _record(query, rec_ranking, retrieval, wall_s: float, error: str | None, settings: RunSettings,
            cands: CandidateSet | None) -> dict:
    """The query's line of predictions.jsonl (format in the module docstring)."""
    gold = [int(g) for g in query.answer_ids]
    qid = query.id
    rec: dict[str, Any] = {"query_id": qid, "query": query.text, "status": "failed" if error else "ok",
                           "error": error, "gold": gold}
    if retrieval is None:
        rec.update(ranking=[], agent_rankings=[], agents=[], metrics={}, latency_s=wall_s, prompt_tokens=0,
                   completion_tokens=0, cost_usd=0.0, tool_counts=[], trajectory_file=None)
        return rec
    trajectories = list(getattr(retrieval, "trajectories", None) or [])
    agent_rankings = [[int(i) for i in r] for r in (getattr(retrieval, "agent_rankings", None) or [])]
    agents = _agent_entries(trajectories, agent_rankings)
    failed_agents = [a for a in agents if a["status"] == "failed"]
    if error is None and failed_agents:
        rec["status"] = "degraded" if len(failed_agents) < len(agents) else "failed"
        rec["error"] = f"{len(failed_agents)} of {len(agents)} agents failed: " + " | ".join(
            f"agent {a['agent']}: {a['error']}" for a in failed_agents)
    latency = getattr(retrieval, "latency_s", None)
    scored = _score(rec_ranking, gold, cands, settings.metrics, settings) if rec["status"] != "failed" else {}
    rec.update(
        ranking=rec_ranking,
        agent_rankings=agent_rankings,
        agents=agents,
        metrics=scored if rec["status"] == "ok" else {},
        latency_s=float(latency) if latency else wall_s,
        prompt_tokens=int(getattr(retrieval, "prompt_tokens", 0) or 0),
        completion_tokens=int(getattr(retrieval, "completion_tokens", 0) or 0),
        cost_usd=float(getattr(retrieval, "cost_usd", 0.0) or 0.0),
        tool_counts=[dict(t.tool_counts()) for t in trajectories],
        trajectory_file=f"{TRAJ_DIR}/{qid}.json" if trajectories else None,
    )
    if settings.external_id is not None:  # the ids a person knows the nodes by (tables graphs)
        rec["ranking_external"] = [settings.external_id(i) for i in rec_ranking]
        rec["gold_external"] = [settings.external_id(g) for g in gold]
    if rec["status"] == "degraded":
        rec["partial_metrics"] = scored   # the fused list of fewer agents: kept, never averaged in
    if rec["status"] != "failed":  # each agent's own list, scored like the fused one, while the candidates are at hand
        rec["agent_metrics"] = [
            _score(scored_list(r, settings.top, cands, settings.cut), gold, cands, AGENT_METRICS, settings)
            for r in rec["agent_rankings"]]
    return rec


def is_storage_error(e: BaseException) -> bool:
    """A write failed because the disk is full, over quota or read-only: the run cannot go on."""
    return isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EROFS)


_write = os.write   # the one system call that appends records (a test fills the disk here)


def _append(fd: int, data: bytes) -> None:
    """Append ``data`` whole or not at all: a failed write (disk full) is cut off again, so the file
    never ends in a partial record."""
    start = os.lseek(fd, 0, os.SEEK_END)
    try:
        view = memoryview(data)
        while view:
            view = view[_write(fd, view):]
    except BaseException:
        os.ftruncate(fd, start)
        raise


def trajectory_intact(run_dir: Path, rec: dict) -> bool:
    """A record's trajectory file (when it names one) exists and is not empty."""
    tf = rec.get("trajectory_file")
    if not tf:
        return True
    try:
        return (Path(run_dir) / tf).stat().st_size > 0
    except OSError:
        return False


async def arun(retriever: Retriever, queries: Sequence, settings: RunSettings, candidate_ids=None,
               logger=None) -> dict:
    """Run ``retriever`` over ``queries`` (objects with .id, .text, .answer_ids) into settings.out_dir.

    Holds the directory's `run_lock` throughout. Queries already recorded ``ok`` there (with their
    trajectory file) are skipped; failed, degraded and missing ones (or ok ones whose trajectory
    file is gone) are computed again. Returns the summary written to metrics.json.
    ``candidate_ids``: the graph's STaRK candidates (None: every id). A full disk stops the run with
    `RunStorageError` after cancelling the queries in flight; every record already written stays.
    """
    out = settings.out_dir
    with run_lock(out):
        try:
            return await _arun(retriever, queries, settings, candidate_ids, logger)
        except OSError as e:
            if not is_storage_error(e) or isinstance(e, RunStorageError):
                raise
            saved = sum(r["status"] == "ok" for r in load_predictions(out).values())
            raise RunStorageError(e.errno, f"cannot write to {out} ({os.strerror(e.errno)}: {e}); the run "
                                  f"stopped with {saved} queries saved. Free some space and rerun the same "
                                  "command to resume") from e


async def _arun(retriever: Retriever, queries: Sequence, settings: RunSettings, candidate_ids, logger) -> dict:
    from tqdm.auto import tqdm

    out = settings.out_dir
    (out / TRAJ_DIR).mkdir(parents=True, exist_ok=True)
    pred_path = out / PREDICTIONS
    _repair_tail(pred_path)
    records = load_predictions(out)
    done = {k for k, r in records.items() if r["status"] == "ok"}
    lost = sorted(k for k in done if not trajectory_intact(out, records[k]))
    if lost:
        log.warning("%s: %d finished queries lack their trajectory file (e.g. %s); computing them again "
                    "(their LLM replies come from the cache)", out, len(lost), ", ".join(lost[:5]))
        done -= set(lost)
    todo = [q for q in queries if _key(q.id) not in done]
    cands = as_candidates(candidate_ids)
    running = _Running(settings.metrics)
    bar = tqdm(total=len(queries), initial=len(queries) - len(todo), disable=not settings.progress,
               desc=out.name, dynamic_ncols=True, mininterval=0.5)
    queue: asyncio.Queue = asyncio.Queue()
    for q in todo:
        queue.put_nowait(q)
    t_start = time.perf_counter()
    overhead = [0.0]

    fd = os.open(pred_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        async def one(q) -> None:
            t0 = time.perf_counter()
            retrieval, error = None, None
            try:
                retrieval = await retriever.aretrieve(q.text, q.id)
                error = getattr(retrieval, "error", None)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # one query's failure is recorded; the run goes on
                if is_storage_error(e):
                    raise                   # ...unless the disk is full (the LLM cache's, say)
                error = f"{type(e).__name__}: {e}"
            t1 = time.perf_counter()
            ranking = scored_list(getattr(retrieval, "ranking", None) or [], settings.top, cands, settings.cut)
            rec = _record(q, ranking, retrieval, t1 - t0, error, settings, cands)
            trajs = getattr(retrieval, "trajectories", None) if retrieval is not None else None
            if trajs:
                write_json_atomic(out / TRAJ_DIR / f"{q.id}.json", [t.to_json() for t in trajs])
            _append(fd, (json.dumps(rec) + "\n").encode("utf-8"))
            running.add(rec)
            bar.update(1)
            bar.set_postfix(running.postfix(), refresh=False)
            n = running.ok + running.failed
            if logger is not None and settings.log_every and n % settings.log_every == 0:
                logger.log_running({"done": n, **running.means(), "failed": running.failed,
                                    "tokens": running.prompt_tokens + running.completion_tokens,
                                    "cost_usd": running.cost}, step=n)
            overhead[0] += time.perf_counter() - t1

        async def worker() -> None:
            while True:
                try:
                    q = queue.get_nowait()
                except asyncio.QueueEmpty:
                    return
                await one(q)

        tasks = [asyncio.create_task(worker()) for _ in range(min(settings.concurrency, max(1, len(todo))))]
        try:
            finished, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
            for t in finished:
                if t.exception() is not None:
                    raise t.exception()
        finally:  # a fatal error (disk full) or a cancel: stop the queries in flight before anything closes
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
    finally:
        os.close(fd)
        bar.close()
    wall = time.perf_counter() - t_start
    summary = summarize(out, queries, settings, cands)
    summary["this_run"] = {"computed": len(todo), "skipped": len(queries) - len(todo), "wall_s": wall,
                           "bookkeeping_s_per_query": overhead[0] / len(todo) if todo else 0.0,
                           "trajectories_rebuilt": len(lost)}
    write_json_atomic(out / METRICS_FILE, summary)
    if logger is not None:
        logger.log_final(summary, per_query_rows(out, queries, settings), out)
    return summary


def run_queries(retriever: Retriever, queries: Sequence, settings: RunSettings, candidate_ids=None,
                logger=None) -> dict:
    """Synchronous wrapper around `arun` (in an event loop of its own, whose HTTP connections the
    retriever releases at the end through its ``aclose``, when it has one). A shard (``shard`` in
    ``settings.extra``) writes its LLM replies to a cache in its own directory (`ark.eval.shard_jobs`)."""
    from ark.eval import shard_jobs

    async def once() -> dict:
        try:
            return await arun(retriever, queries, settings, candidate_ids, logger)
        finally:
            aclose = getattr(retriever, "aclose", None)
            if aclose is not None:
                await aclose()

    own_cache = shard_jobs.own_llm_cache(retriever, settings.out_dir) if settings.extra.get("shard") \
        else contextlib.nullcontext()
    with own_cache:
        return asyncio.run(once())


def _scored_records(run_dir: Path, queries: Sequence, settings: RunSettings):
    records = load_predictions(run_dir)
    selected = [(q, records.get(_key(q.id))) for q in queries]
    return selected


def tool_columns() -> list[str]:
    """The graph tools counted in run statistics: every graph tool registered in `ark.tools.registry`
    (calls of names the registry does not know, such as a tool the model made up, are not counted)."""
    return tool_registry.graph_tool_names()


def _neighbor_calls(counts: dict) -> int:
    return int(sum(counts.get(n, 0) for n in tool_registry.names_of_kind(NEIGHBOR_KIND)))


def per_query_rows(run_dir: Path | str, queries: Sequence, settings: RunSettings) -> list[dict]:
    """One flat row per selected query (missing ones included, status "missing"), with one column of
    call counts per graph tool (`tool_columns`)."""
    rows = []
    pairs = _scored_records(Path(run_dir), queries, settings)
    tools = tool_columns()
    for q, rec in pairs:
        status = "missing" if rec is None else rec["status"]
        m = rec["metrics"] if rec is not None and status == "ok" else {}
        tc = rec.get("tool_counts", []) if rec is not None else []
        row = {"query_id": q.id, "status": status}
        row.update({n: m.get(n, "") for n in settings.metrics})
        row.update(
            latency_s=rec.get("latency_s", "") if rec else "",
            prompt_tokens=rec.get("prompt_tokens", 0) if rec else 0,
            completion_tokens=rec.get("completion_tokens", 0) if rec else 0,
            cost_usd=rec.get("cost_usd", 0.0) if rec else 0.0,
            n_agents=len(tc),
            **{name: sum(t.get(name, 0) for t in tc) for name in tools},
            neighbor_calls_per_agent=";".join(str(_neighbor_calls(t)) for t in tc),
            n_gold=len(q.answer_ids),
            error=(rec.get("error") or "") if rec else "",
        )
        rows.append(row)
    return rows


def _write_csv(path: Path, rows: list[dict]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "w", newline="", encoding="utf-8") as f:
            if rows:
                w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
                w.writeheader()
                w.writerows(rows)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _stats(values: Sequence[float]) -> dict[str, float]:
    if not values:
        return {}
    x = np.asarray(values, dtype=float)
    return {"mean": float(x.mean()), "median": float(np.median(x)), "p90": float(np.quantile(x, 0.9)),
            "max": float(x.max()), "sum": float(x.sum())}


def summarize(run_dir: Path | str, queries: Sequence, settings: RunSettings, candidate_ids=None) -> dict:
    """Build the run's summary from predictions.jsonl and write per_query.csv and trajectory_stats.csv.

    Scores only the ``queries`` given (the run's selection). Agent-level success (for the
    neighborhood-call histogram) uses each agent's own list scored like the fused one.
    """
    run_dir = Path(run_dir)
    cands = as_candidates(candidate_ids)
    pairs = _scored_records(run_dir, queries, settings)
    ok = [r for _, r in pairs if r is not None and r["status"] == "ok"]
    failed = [r for _, r in pairs if r is not None and r["status"] == "failed"]
    degraded = [r for _, r in pairs if r is not None and r["status"] == "degraded"]
    n_missing = sum(r is None for _, r in pairs)
    per_query = [r["metrics"] for r in ok]
    if settings.count_failed_as_miss:
        per_query += [dict.fromkeys(settings.metrics, 0.0) for _ in failed + degraded]
    complete = n_missing == 0 and (not (failed or degraded) or settings.count_failed_as_miss)
    state = "complete" if complete else ("degraded" if degraded and not failed and not n_missing else "incomplete")
    agent_status = Counter(a.get("status", "ok") for r in ok + degraded + failed for a in r.get("agents", []))

    tools = tool_columns()
    tool_totals: Counter = Counter()
    hist = {"success": Counter(), "failure": Counter()}
    traj_rows = []
    for rec in ok:
        gold = rec["gold"]
        for a, tc in enumerate(rec.get("tool_counts", [])):
            tool_totals.update(tc)
            stored = rec.get("agent_metrics")
            if stored is not None and a < len(stored):
                am = stored[a]
            else:  # records written before agent metrics were stored
                agent_rank = rec["agent_rankings"][a] if a < len(rec["agent_rankings"]) else []
                am = _score(scored_list(agent_rank, settings.top, cands, settings.cut), gold, cands,
                            AGENT_METRICS, settings)
            nb = _neighbor_calls(tc)
            hist["success" if am[SUCCESS_METRIC] > 0 else "failure"][nb] += 1
            traj_rows.append({"query_id": rec["query_id"], "agent_index": a,
                              **{name: int(tc.get(name, 0)) for name in tools},
                              f"agent_{SUCCESS_METRIC}": am[SUCCESS_METRIC],
                              "agent_recall@20": am["recall@20"],
                              f"fused_{SUCCESS_METRIC}": rec["metrics"].get(SUCCESS_METRIC, "")})
    total_calls = sum(tool_totals[t] for t in tools)
    attempted = ok + degraded + failed
    summary = {
        "n": len(pairs), "n_ok": len(ok), "n_degraded": len(degraded), "n_failed": len(failed),
        "n_missing": n_missing, "complete": complete, "status": state,
        "agents": {"ok": agent_status["ok"], "failed": agent_status["failed"]},
        "count_failed_as_miss": settings.count_failed_as_miss,
        "metrics_mode": settings.metrics_mode, "top": settings.top, "cut": settings.cut,
        "torchmetrics": settings.torchmetrics if settings.metrics_mode == "stark_qa" else None,
        "n_boot": settings.n_boot,
        "seed": settings.seed,
        "metrics": aggregate(per_query, n_boot=settings.n_boot, seed=settings.seed),
        "tool_calls": {t: int(tool_totals[t]) for t in tools},
        "tool_share": {t: (tool_totals[t] / total_calls if total_calls else 0.0) for t in tools},
        "neighbor_calls_per_trajectory": {k: {str(c): n for c, n in sorted(v.items())} for k, v in hist.items()},
        "latency_s": _stats([r["latency_s"] for r in ok]),
        "tokens": {"prompt": sum(r.get("prompt_tokens", 0) for r in attempted),
                   "completion": sum(r.get("completion_tokens", 0) for r in attempted)},
        "cost_usd": float(sum(r.get("cost_usd", 0.0) for r in attempted)),
        "failed_queries": [{"query_id": r["query_id"], "error": r.get("error")} for r in failed][:100],
        "degraded_queries": [{"query_id": r["query_id"], "error": r.get("error")} for r in degraded][:100],
        "run": dict(settings.extra),
    }
    summary["tokens"]["total"] = summary["tokens"]["prompt"] + summary["tokens"]["completion"]
    if not complete:
        summary["warning"] = (f"{state.upper()}: {len(failed)} failed, {len(degraded)} degraded (some of their "
                              f"agents failed) and {n_missing} missing of {len(pairs)} queries; the metrics "
                              f"cover the {len(ok)} complete ones. Rerun the same command to retry them (the "
                              "LLM cache answers every call already made), or set count_failed_as_miss=true "
                              "to score them as misses")
    elif degraded or failed:
        summary["note"] = (f"{len(failed)} failed and {len(degraded)} degraded queries are scored as misses "
                           "(count_failed_as_miss=true)")
    _write_csv(run_dir / PER_QUERY, per_query_rows(run_dir, queries, settings))
    _write_csv(run_dir / TRAJECTORY_STATS, traj_rows)
    if (run_dir / PREDICTIONS).exists():
        summary["attribution"] = attribution.write(run_dir, records=ok, update_metrics=False)
    return summary


def write_summary(run_dir: Path | str, queries: Sequence, settings: RunSettings, candidate_ids=None) -> dict:
    """`summarize` and write metrics.json (for merged or re-scored runs)."""
    summary = summarize(run_dir, queries, settings, candidate_ids)
    write_json_atomic(Path(run_dir) / METRICS_FILE, summary)
    return summary


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
    tmp = out_dir / (PREDICTIONS + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        for rec in merged.values():
            f.write(json.dumps(rec) + "\n")
    os.replace(tmp, out_dir / PREDICTIONS)
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


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description="Merge shard run directories into one run directory.")
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("merge", help="merge shards: python -m ark.eval.runner merge OUT_DIR SHARD_DIR...")
    m.add_argument("out_dir")
    m.add_argument("shard_dirs", nargs="*", help="default: OUT_DIR/shards/*")
    args = p.parse_args(argv)
    shards = args.shard_dirs or sorted(str(d) for d in (Path(args.out_dir) / "shards").glob("*-of-*"))
    if not shards:
        raise SystemExit(f"no shard directories given or found under {args.out_dir}/shards")
    summary = merge(shards, args.out_dir)
    print(json.dumps({k: summary[k] for k in ("n", "n_ok", "n_degraded", "n_failed", "n_missing", "complete",
                                              "status")}))
    for name, v in summary["metrics"].items():
        print(f"{name:>10}: {v['mean']:.4f}  [{v['ci_low']:.4f}, {v['ci_high']:.4f}]")


if __name__ == "__main__":
    main()
