"""``ark run``, ``ark merge``, ``ark diagnose``: evaluation runs and reachability from the Hydra configs.

    ark run graph=demo backbone=local limit=5            # one run (= python experiments/run.py ...)
    ark run -m experiment=ablation graph=demo limit=5    # a Hydra sweep (= python experiments/run.py -m ...)
    ark merge results/runs/default/prime/ark-gpt-4.1-t20_n3-full_test      # its shards/*, after shard=i/n runs
    ark diagnose graph=demo limit=100                    # the reachability ceiling, no LLM

``run`` and ``diagnose`` take the overrides of ``conf/config.yaml`` and ``conf/diagnose.yaml``: composed
with `ark.config.compose.compose` and run by the same library calls as the Hydra scripts
(`ark.config.evaluation.run`, `ark.config.jobs.diagnose`); with ``-m`` every point of the sweep is composed
first (a bad option is one line before any job starts), then the arguments go to Hydra itself
(`ark.config.app.launch`: sweeps, launchers), as ``python experiments/run.py -m`` would take them.
``ark run`` exits with 0 when its run (every run of its sweep) is complete, 2 when it was refused before it
started, and 3 (`ark.run.summary.INCOMPLETE_EXIT`) when it ended with queries not done: the spending cap
reached, failed or degraded queries.
"""

from __future__ import annotations

import json
from pathlib import Path

from ark.cli.common import add_verb


def _compose(overrides, config_name: str = "config"):
    from ark.config.compose import compose

    return compose(overrides, config_name)


def _sweep(task, config_name: str, overrides, job_name: str) -> int:
    """A Hydra multirun of ``task``, once the sweep is prepared (`ark.config.sweep.prepare`: every point
    composed, so a bad option or override is one line before any job starts; directories, forecast,
    confirmation and ledger of a paid sweep; ``estimate=true`` stops after the forecast, ``pilot=true`` after the pilots); its exit
    status (`ark.config.sweep.exit_status`: 3 when a run is not complete)."""
    from ark.config.app import launch
    from ark.config.sweep import exit_status, prepare

    prepared = prepare(overrides, config_name)
    if prepared is None:
        return 0
    launch(task, config_name, ["-m", *prepared], job_name=job_name)
    return exit_status(prepared, config_name)


def cmd_run(args) -> int:
    from ark.config import evaluation

    from ark.run.summary import INCOMPLETE_EXIT

    if args.multirun:
        return _sweep(evaluation.job, "config", args.overrides, "run")
    result = evaluation.run(_compose(args.overrides))
    return 0 if evaluation.finished(result) else INCOMPLETE_EXIT   # the summary said which queries and why


def cmd_diagnose(args) -> int:
    from ark.config import jobs

    if args.multirun:
        return _sweep(jobs.diagnose, "diagnose", args.overrides, "diagnose")
    else:
        jobs.diagnose(_compose(args.overrides, "diagnose"))
    return 0


def cmd_merge(args) -> int:
    from ark.run import shards

    try:
        summary = shards.merge_run(args.run_dir, args.shards)
    except shards.ShardsNotReady as e:
        raise ValueError(str(e)) from None
    n = len(summary["run"]["merged_from"])
    target = Path(args.llm_cache) if args.llm_cache else shards.shard_llm_cache_target(args.run_dir, n)
    added = shards.merge_llm_caches(args.run_dir, target, n) if target is not None else 0
    print(json.dumps({k: summary[k] for k in ("n", "n_ok", "n_degraded", "n_failed", "n_missing", "complete",
                                              "status")}))
    if target is not None:
        print(f"LLM cache: {added} replies added to {target}")
    for name, v in summary["metrics"].items():
        print(f"{name:>10}: {v['mean']:.4f}  [{v['ci_low']:.4f}, {v['ci_high']:.4f}]")
    return 0


def _hydra_args(p) -> None:
    p.add_argument("-m", "--multirun", action="store_true",
                   help="a Hydra sweep: comma lists and the experiment's sweep run one job each, through "
                        "the chosen hydra/launcher")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="Hydra overrides, e.g. graph=demo limit=5")


def register(sub) -> None:
    p = add_verb(sub, "run", cmd_run, help="one evaluation run (or a sweep) from the Hydra configs",
                 description="Compose conf/config.yaml with the overrides and run (or resume) it: the "
                             "settings are checked, the run directory claimed, the queries run, the "
                             "summary printed. The same as python experiments/run.py with these overrides.")
    _hydra_args(p)

    p = add_verb(sub, "merge", cmd_merge, help="merge a sharded run's shards into its run directory",
                 description="Join the shards of a run (shard=i/n, under RUN_DIR/shards/<i>-of-<n>) into "
                             "RUN_DIR, queries in the unsharded order: predictions, trajectories, metrics "
                             "(complete only when every query is); then move the shards' own LLM caches "
                             "into the run's. Refused while a shard has not finished. A Hydra sweep of "
                             "shards does this by itself when its last shard ends (ark.config.callbacks).")
    p.add_argument("run_dir", help="the run directory (its shards are under RUN_DIR/shards/)")
    p.add_argument("--shards", type=int, default=None, help="the shard count n (default: the one found)")
    p.add_argument("--llm-cache", default=None,
                   help="merge the shards' LLM caches into this file (default: paths.llm_cache of the shards' config)")

    p = add_verb(sub, "diagnose", cmd_diagnose, help="the reachability ceiling of a query set, no LLM",
                 description="Compose conf/diagnose.yaml with the overrides and measure what the tools "
                             "show for the queries' own words (search hits, one neighbor call, 1 and 2 "
                             "hops); written to out_dir. The same as python experiments/diagnose.py.")
    _hydra_args(p)
