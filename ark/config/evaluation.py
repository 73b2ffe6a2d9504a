"""One evaluation run from a composed config: check, identity, lock, build, run the queries, compare, summary.

    from ark.config.compose import compose
    from ark.config.evaluation import run
    summary = run(compose(["graph=demo", "retriever=bm25", "limit=5"]))

`run(cfg)` is what ``python experiments/run.py``, ``ark run`` and the tests call. In order: every
setting is checked (`ark.config.checks`), the prerequisites are checked (`ark.config.prerequisites`:
files, keys, the backbone's server), the run's identity (its settings and the data's fingerprints) is
made (`ark.config.identity`) and compared with what the directory holds, the directory is claimed
(``run.lock``, `ark.run.rundir.run_lock`) and compared again, the graph and queries are loaded; only
then are ``config.yaml`` and ``run.json`` written, the retriever built from ``retriever.build`` (a
factory of `ark.config.retrievers`), the queries run
(`ark.run.runner.run_queries`), the run paired with ``compare_to`` (`ark.analysis.paired`) and the summary
printed. The run directory is ``out_dir`` (its shard directory when ``shard`` is set).

`job` is the ``@hydra.main`` task: `run`, and on a stop before the run began, the removal of the
directory Hydra made for it (`remove_unstarted`). A single run that ends not complete (the spending cap,
failed or degraded queries) exits with ``INCOMPLETE_EXIT`` (3, `ark.run.summary`) once its summary is
printed; a sweep's points return, and the process that launched the sweep exits with it when any point is
not complete (`ark.config.sweep.exit_status`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from ark import atomic
from ark.analysis import paired
from ark.config import plan
from ark.config.checks import check_settings
from ark.config.identity import (DATA_FILES, add_data_identity, check_same_run, check_stale_records, fingerprint,
                                 run_identity, run_info)
from ark.config.prerequisites import check_prerequisites
from ark.cost.prices import money
from ark.data.stark import StarkFileError
from ark.llm.local_server import serving
from ark.report import comparison
from ark.run import runner, shards
from ark.run.logger import redact
from ark.run.rundir import BATCH_DIR, RunDir, RunDirInUse, run_lock
from ark.run.settings import RunSettings
from ark.run.summary import INCOMPLETE_EXIT


def finished(result: dict) -> bool:
    """Whether what `run` returned ended as it should: a forecast, pilots that are all complete, or a
    complete run; `job` and ``ark run`` exit with ``INCOMPLETE_EXIT`` otherwise."""
    if "estimate" in result:
        return True
    if "pilot" in result:
        return all(s.get("complete", False) for s in result["pilot"])
    return bool(result.get("complete", False))


def run_dir(cfg: DictConfig) -> Path:
    """The run directory, or its shard directory when ``shard`` is set."""
    out = Path(cfg.out_dir)
    return shards.shard_dir(out, cfg.shard) if cfg.get("shard") else out


def run(cfg: DictConfig) -> dict:
    """Run (or resume) one evaluation run described by a composed config; returns its summary.

    Order: every setting is checked, then the prerequisites, then the directory is claimed (lock)
    and compared with the run it holds; only then is anything written or loaded."""
    check_settings(cfg)
    info = run_info(cfg)
    info["identity"] = run_identity(cfg)
    out = run_dir(cfg)
    source = instantiate(cfg.graph)
    check_prerequisites(cfg, source)
    add_data_identity(info, source)      # the graph's and queries' fingerprints: their files are there now
    info["fingerprint"] = fingerprint(info["identity"])
    check_same_run(Path(cfg.out_dir), info)
    if cfg.get("pilot"):      # the pilot, in a directory of its own, then the forecast; not the run
        return {"pilot": plan.pilot([cfg], run)}
    if cfg.get("estimate"):   # the forecast, no LLM call, and no run
        return {"estimate": [f.as_summary() for f in plan.estimate([cfg])]}
    spend_plan = plan.prepare(cfg, source, info["identity"])   # paid: forecast, confirmation, the cap's ledgers
    reference = _reference_run(cfg)
    try:
        lock = run_lock(out)
        lock.__enter__()
    except RunDirInUse as e:
        raise SystemExit(str(e)) from None
    try:
        return _run_locked(cfg, info, out, source, reference, spend_plan)
    finally:
        lock.__exit__(None, None, None)


def _run_locked(cfg: DictConfig, info: dict[str, Any], out: Path, source, reference, spend_plan=None) -> dict:
    predates_data = check_same_run(Path(cfg.out_dir), info)   # again: a writer may have finished while we waited
    try:
        graph = source.graph()
        queries = shards.select_queries(source.queries().split(cfg.split), cfg.limit, cfg.get("shard"))
    except (ValueError, StarkFileError) as e:   # bad input files (TablesError, RdfError...): one line, nothing written
        raise SystemExit(" ".join(str(e).split())) from None
    if predates_data:   # a run.json without the data's fingerprints: its records must fit the data now
        check_stale_records(Path(cfg.out_dir), graph, queries)
    resolved = redact(OmegaConf.to_container(
        OmegaConf.masked_copy(cfg, [k for k in cfg.keys() if k != "hydra"]), resolve=True))
    atomic.write_text(out / "config.yaml", OmegaConf.to_yaml(OmegaConf.create(resolved)))
    atomic.write_json(Path(cfg.out_dir) / "run.json", info, indent=1)

    budget = spend_plan.budget(out) if spend_plan is not None else None
    batch = info["retriever"] == "ark" and bool(cfg.backbone.get("batch", False))
    kw = {"budget": budget} if budget is not None else {}
    if batch:   # where the pending batch is kept (ark.llm.batch)
        kw["batch_dir"] = str(out / BATCH_DIR)
    retriever = instantiate(cfg.retriever.build)(graph=graph, **kw)
    logger = instantiate(cfg.logger)
    extra = {k: v for k, v in info.items() if k not in ("identity", DATA_FILES)}
    settings = RunSettings(
        # batch mode: every query at once, so that each step of all their agents is one batch
        out_dir=out, concurrency=max(cfg.concurrency, len(queries)) if batch else cfg.concurrency,
        top=cfg.retriever.top,
        metrics_mode=cfg.metrics_mode, torchmetrics=str(cfg.torchmetrics), cut=cfg.cut,
        count_failed_as_miss=cfg.count_failed_as_miss, n_boot=cfg.n_boot,
        seed=cfg.seed, progress=cfg.progress, extra={**extra, "shard": cfg.get("shard"), "limit": cfg.limit},
        external_id=graph.external_id if graph.has_external_ids else None,
        budget=budget, forecast=spend_plan.forecast if spend_plan is not None else None)
    name = f"{info['graph']}/{info['run_name']}" + (f"/shard{cfg.shard}" if cfg.get("shard") else "")
    backbone = instantiate(cfg.backbone) if info["retriever"] == "ark" else None
    logger.start(name, cfg.experiment_name, extra, resolved)
    try:
        with serving(backbone):   # a `local` backbone: llama.cpp started when nothing answers on its port
            summary = runner.run_queries(retriever, queries, settings, graph.candidate_ids, logger)
        if reference is not None:
            _compare_with(out, reference, cfg, summary, logger)
    except runner.RunStorageError as e:
        raise SystemExit(str(e)) from None
    finally:
        logger.finish()
    _print_summary(out, summary)
    return summary


def _reference_run(cfg: DictConfig) -> RunDir | None:
    """The run named by ``compare_to`` (checked before any work), or None."""
    if not cfg.get("compare_to"):
        return None
    try:
        return RunDir(cfg.compare_to)
    except FileNotFoundError as e:
        raise SystemExit(f"compare_to: {e}") from None


def _compare_with(out: Path, reference: RunDir, cfg: DictConfig, summary: dict, logger) -> None:
    """Paired differences of this run against ``reference`` into metrics.json["paired"], W&B and the
    printout; runs over other queries are reported, not fatal (the run itself is kept)."""
    try:
        diffs = comparison.compare_runs(out, reference, n_boot=cfg.n_boot, seed=cfg.seed)
    except ValueError as e:
        print(f"compare_to {reference.path}: {e}")
        return
    summary["paired"] = {str(reference.path): paired.as_summary(diffs)}
    RunDir(out).update_metrics(paired=summary["paired"])
    logger.log_comparison(diffs, reference=str(reference.info.get("run_name") or reference.path.name))
    print(f"paired with {reference.path} (* p < {paired.ALPHA}; values in %):")
    print(paired.format_table(diffs))


def _print_summary(out: Path, summary: dict) -> None:
    state = summary["status"] if summary["complete"] else summary["status"].upper()
    print(f"{out}: {summary['n_ok']}/{summary['n']} ok, {summary['n_degraded']} degraded, "
          f"{summary['n_failed']} failed ({state}); "
          f"tokens {summary['tokens']['total']:,}, ${money(summary['cost_usd'])}")
    for name, v in summary["metrics"].items():
        print(f"  {name:>10} {100 * v['mean']:6.2f}  [{100 * v['ci_low']:.2f}, {100 * v['ci_high']:.2f}]")
    if summary.get("warning"):
        print("  " + summary["warning"])


def remove_unstarted(job_dir: Path, runs_root: Path, made: Path | None = None) -> None:
    """Remove the directory Hydra made for a job that stopped before its run began (it then holds at
    most Hydra's run.log), and its parents while they are empty: up to ``made`` included when it is
    given (the highest directory that did not exist before Hydra's job started, `ark.config.job_dirs.made_by_hydra`),
    else up to ``runs_root`` included, and further up to the working directory when ``runs_root`` lies
    inside it."""
    job_dir, runs_root = Path(job_dir).resolve(), Path(runs_root).resolve()
    if not job_dir.is_dir() or not {p.name for p in job_dir.iterdir()} <= {"run.log"}:
        return
    (job_dir / "run.log").unlink(missing_ok=True)
    cwd = Path.cwd().resolve()
    if made is not None:
        stop = Path(made).resolve().parent
    else:
        stop = cwd if cwd in runs_root.parents else runs_root.parent
    d = job_dir
    while d != stop and stop in d.parents:
        try:
            d.rmdir()
        except OSError:
            break
        d = d.parent


def job(cfg: DictConfig) -> None:
    """The ``@hydra.main`` task of an evaluation run (``python experiments/run.py``, ``ark run -m``):
    `run`, and when it stops before the run began, the directory Hydra made for it removed. Third-party
    log lines are left out unless ``verbose=true`` (`ark.logs.setup`)."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    from ark import logs
    from ark.config.job_dirs import made_by_hydra

    def unstarted() -> None:   # the directories Hydra made for this job go again
        job_dir = Path(HydraConfig.get().runtime.output_dir)
        seen, made = made_by_hydra(job_dir)
        if seen and made is None:   # out_dir was there before the job: not Hydra's to remove
            return
        remove_unstarted(job_dir, Path(cfg.paths.runs), made)

    from ark.run import lifeline

    lifeline.hold()   # a point in a worker of a parallel sweep dies with the process that launched it
    logs.setup(verbose=cfg.get("verbose") is True)
    try:
        result = run(cfg)
    except SystemExit:
        unstarted()
        raise
    if "estimate" in result or "pilot" in result:   # a forecast, or pilots in directories of their own
        unstarted()
    if not finished(result) and HydraConfig.get().mode == RunMode.RUN:
        raise SystemExit(INCOMPLETE_EXIT)
    return result
