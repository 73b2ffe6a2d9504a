"""Hydra callbacks of every run sweep (conf/config.yaml ``hydra.callbacks``): a sharded run merges
itself when its last shard finishes, whatever launched the shards.

    python experiments/run.py -m hydra/launcher=slurm graph=prime shard=0/4,1/4,2/4,3/4

- ``on_job_end`` runs in each job (on the node it ran on, for a SLURM job): when the job was shard
  i/n of a run and every one of the n shards is now complete, it merges them into the run directory
  (`ark.run.shards.merge_run`; two shards finishing together take turns on the run's lock, and
  the second finds the merge current). A shard with failed, degraded or missing queries merges
  nothing: rerun the same command, which resumes it, and the merge follows.
- ``on_multirun_end`` runs once, in the process that launched the sweep, after every job returned:
  it copies the LLM cache of each shard of the sweep's merged runs into the run's ``paths.llm_cache``
  and removes it (`ark.run.shards.merge_llm_caches`), one process writing that file.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from hydra.core.utils import JobReturn, JobStatus
from hydra.experimental.callback import Callback
from omegaconf import DictConfig

log = logging.getLogger(__name__)


class MergeShards(Callback):
    """See the module doc."""

    def on_job_end(self, config: DictConfig, job_return: JobReturn, **kwargs: Any) -> None:
        shard = config.get("shard")
        if not shard or job_return.status != JobStatus.COMPLETED:
            return
        from ark.run import shards

        _, n = shards.parse_shard(str(shard))
        out = Path(config.out_dir)
        waiting = shards.pending(out, n)
        if waiting:
            log.info("%s: shards %s are not complete; the last shard to complete merges the run",
                     out, ", ".join(waiting))
            return
        if shards.merged_is_current(out, n):
            return
        summary = shards.merge_run(out, n)
        log.info("%s: merged its %d shards (%d/%d ok, %s)", out, n, summary["n_ok"], summary["n"], summary["status"])

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        from ark.run import shards

        sweep = Path(config.hydra.sweep.dir)
        runs = {(c.parent.parent.parent, int(c.parent.name.split("-of-")[1]))
                for c in sweep.glob(f"**/shards/*-of-*/{shards.SHARD_CACHE}")}
        for run_dir, n in sorted(runs):
            if not shards.merged_is_current(run_dir, n):
                continue   # not merged: a shard is still to finish, and its cache stays with it
            target = shards.shard_llm_cache_target(run_dir, n)
            if target is None:
                continue
            added = shards.merge_llm_caches(run_dir, target, n)
            log.info("%s: %d LLM replies of its shards added to %s", run_dir, added, target)
