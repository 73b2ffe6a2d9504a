"""The evaluation runner: one retriever over one query list, resumable, with a run directory as output.

A retriever is anything with ``async aretrieve(query: str, query_id) -> Retrieval`` (`ark.retriever`:
ARK's `ARKRetriever`, the `BM25Retriever` baseline, or a test's tiny stand-in). The runner

* holds ``run.lock`` in the directory while it runs (`run_lock`): a second writer is refused at once;
* runs queries concurrently under one limit (``concurrency``) with a tqdm bar showing running
  metrics, tokens and cost;
* appends each finished query at once to ``predictions.jsonl`` (and its trajectories to
  ``trajectories/<query_id>.json``, written first, atomically), so a kill loses at most the queries
  in flight; a record is appended whole or not at all;
* on restart skips every query recorded ``ok`` whose trajectory file is there, and computes again the
  failed, degraded and missing ones and any ok one whose trajectory file is gone (the LLM cache then
  answers the calls already made, so only the failed calls are paid for);
* keeps the objects alive when it starts (graph, indexes, models) out of the garbage collector's full
  passes while it runs (`gc.freeze`): a pass over them all would stall every query in flight;
* stops cleanly when the disk is full (`RunStorageError`, one message naming the directory): the
  queries in flight are cancelled before the HTTP connections close, and every record written stays;
* writes ``metrics.json``, ``per_query.csv``, ``trajectory_stats.csv`` (`ark.run.summary`) and
  ``attribution.csv`` (`ark.analysis.attribution`, made for each query as it finishes, from its
  trajectories in memory; the files are named and read in `ark.run.rundir`).

The modules beside this one: `ark.run.settings` (`RunSettings`), `ark.run.records` (a query's record
in ``predictions.jsonl``: its format and the scoring policy), `ark.run.summary` (metrics.json and the
CSVs) and `ark.run.shards` (``shard=(i, n)`` and the merge of shard run directories).
Library code: plain arguments only; Hydra lives in ``ark.config`` (`ark.config.evaluation`).

    summary = run_queries(retriever, queries, RunSettings(out_dir="results/runs/x"))
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import gc
import json
import logging
import os
import time
from collections.abc import Sequence
from pathlib import Path

from ark import atomic
from ark.analysis.metrics import as_candidates
from ark.cost.prices import money
from ark.retriever import Retriever
from ark.run import spending
from ark.run.records import (build_record, load_predictions, scored_ranking, trajectory_intact)

# the run directory's files are named, documented and read in ark.run.rundir
from ark.run.rundir import METRICS_FILE, PREDICTIONS, TRAJ_DIR, RunDir, run_lock
from ark.run.rundir import key as _key
from ark.run.settings import RunSettings
from ark.run.summary import attribute_record, per_query_rows, summarize

log = logging.getLogger(__name__)

class RunStorageError(OSError):
    """The run directory cannot be written (disk full, quota, read-only); the run stopped cleanly."""


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
                    usd=money(self.cost))
        return show


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
    cut = [0]   # queries the spending cap cut short: not recorded, computed again by the next run
    # each computed query's attribution, made from its trajectories while they are in memory: the summary
    # reads back only the trajectory files of queries an earlier run computed
    attributed: dict = {}

    fd = os.open(pred_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    _, tie_break = RunDir(out).fusion_settings()   # (a run directory from here on: its predictions file is there)
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
            if settings.budget is not None and spending.cut_by_budget(retrieval, error):
                cut[0] += 1
                return
            ranking, scores = scored_ranking(retrieval, settings, cands)   # with the retriever's own scores
            rec = build_record(q, ranking, retrieval, t1 - t0, error, settings, cands, scores)
            trajs = getattr(retrieval, "trajectories", None) if retrieval is not None else None
            trajs = [t.to_json() for t in trajs] if trajs else []
            if trajs:
                atomic.write_json(out / TRAJ_DIR / f"{q.id}.json", trajs)
            _append(fd, (json.dumps(rec) + "\n").encode("utf-8"))
            if rec["status"] == "ok":
                attributed[_key(q.id)] = attribute_record(rec, trajs, tie_break=tie_break)
            running.add(rec)
            bar.update(1)
            bar.set_postfix({**running.postfix(), **spending.bar_fields(settings)}, refresh=False)
            n = running.ok + running.failed
            if logger is not None and settings.log_every and n % settings.log_every == 0:
                logger.log_running({"done": n, **running.means(), "failed": running.failed,
                                    "tokens": running.prompt_tokens + running.completion_tokens,
                                    "cost_usd": running.cost}, step=n)
            overhead[0] += time.perf_counter() - t1

        async def worker() -> None:
            while settings.budget is None or not settings.budget.exhausted:   # at the cap no query starts
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
    summary = summarize(out, queries, settings, cands, attributed)
    summary["this_run"] = {"computed": len(todo), "skipped": len(queries) - len(todo), "wall_s": wall,
                           "bookkeeping_s_per_query": overhead[0] / len(todo) if todo else 0.0,
                           "trajectories_rebuilt": len(lost)}
    summary = spending.apply(summary, settings, cut[0])
    atomic.write_json(out / METRICS_FILE, summary)
    if logger is not None:
        logger.log_final(summary, per_query_rows(out, queries, settings), out)
    return summary


def run_queries(retriever: Retriever, queries: Sequence, settings: RunSettings, candidate_ids=None,
                logger=None) -> dict:
    """Synchronous wrapper around `arun` (in an event loop of its own, whose HTTP connections the
    retriever releases at the end through its ``aclose``, when it has one). A shard (``shard`` in
    ``settings.extra``) writes its LLM replies to a cache in its own directory (`ark.run.shards.own_llm_cache`)."""
    from ark.run import shards

    async def once() -> dict:
        try:
            return await arun(retriever, queries, settings, candidate_ids, logger)
        finally:
            aclose = getattr(retriever, "aclose", None)
            if aclose is not None:
                await aclose()

    own_cache = shards.own_llm_cache(retriever, settings.out_dir) if settings.extra.get("shard") \
        else contextlib.nullcontext()
    with own_cache, _frozen_heap():
        return asyncio.run(once())


@contextlib.contextmanager
def _frozen_heap():
    """The objects alive when the run starts (graph, indexes, models: hundreds of thousands) kept out of
    the garbage collector's full passes while it runs (`gc.freeze`): each pass would walk them all,
    a pause of a tenth of a second on the event loop that every call in flight waits out. The run's own
    objects are collected as usual; at its end the frozen ones are collected again."""
    frozen = gc.get_freeze_count() == 0   # a run inside another leaves the outer one's freeze alone
    if frozen:
        gc.freeze()
    try:
        yield
    finally:
        if frozen:
            gc.unfreeze()

