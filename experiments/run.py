"""One evaluation run (or a sweep of them) from the Hydra configs in conf/.

    python experiments/run.py graph=demo backbone=local limit=5          # one run
    python experiments/run.py retriever=bm25 graph=prime split=test       # the BM25 baseline
    python experiments/run.py -m experiment=table1                        # the paper's Table 1 sweep
    python experiments/run.py graph=prime shard=0/4                       # a shard; merge with
    python -m ark.runner merge results/runs/default/prime/ark-gpt-4.1-t20_n3-full
    python experiments/run.py ablation=no_neighbors compare_to=RUN_DIR   # paired with another run

`main` is a thin ``@hydra.main`` over `run(cfg)`, which tests call with a composed config. The run
directory is ``results/runs/<experiment>/<graph>/<retriever>-<backbone>-<budget>-<ablation>/``;
rerunning the same command resumes it (finished queries are skipped, failed ones retried, and the
LLM cache answers the calls already made). The option files build their objects with ``_target_``:
``conf/graph/*.yaml`` a graph source of `ark.sources` (STaRK, demo, tables), ``conf/retriever/*.yaml``
the factories below (`build_ark`, `build_bm25`).
"""

from __future__ import annotations

import itertools
import json
import logging
import os
from pathlib import Path
from typing import Any

import hydra
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from ark import compare, runner
from ark.local_server import serving
from ark.logger import redact
from ark.rundir import RunDir

log = logging.getLogger(__name__)
CONF_DIR = Path(__file__).resolve().parents[1] / "conf"
KEY_PROVIDERS = ("openai", "azure")


def build_ark(graph, backbone, agent, tools, llm_cache: str | None = None, index_cache: str | None = None):
    """ARKRetriever over ``graph``: BM25 index (cached), tool set, LLM client (with response cache)."""
    from ark.agent import ARKRetriever
    from ark.llm import LLMClient
    from ark.text_index import load_index
    from ark.tools import ToolSet

    index = load_index(graph, index_cache) if index_cache else None
    if index is None:
        from ark.text_index import BM25Index

        index = BM25Index.build(graph.texts())
    if llm_cache:
        Path(llm_cache).parent.mkdir(parents=True, exist_ok=True)
    llm = LLMClient(backbone, cache=llm_cache)
    return ARKRetriever(llm, ToolSet(graph, index, tools), graph, agent)


def build_bm25(graph, index_cache: str | None = None, top: int = 100):
    """The BM25 baseline over the graph's candidates (index cached under ``index_cache``)."""
    from ark.baselines import BM25Retriever

    return BM25Retriever(graph, cache_dir=index_cache, top=top)


def agent_options(agent_cfg) -> str:
    """The agent options (`ark.agent.OPTIONS`) switched on, comma-separated, or "none"."""
    from ark.agent import OPTIONS

    return ",".join(k for k in OPTIONS if agent_cfg.get(k, False)) or "none"


def run_info(cfg: DictConfig) -> dict[str, Any]:
    """The run's identity: what the report, the W&B tags and the figures group by."""
    is_ark = cfg.retriever.name == "ark"
    return {"experiment": cfg.experiment_name, "graph": cfg.graph.name, "retriever": cfg.retriever.name,
            "backbone": cfg.backbone.name if is_ark else None,
            "budget": cfg.budget.name if is_ark else None,
            "ablation": cfg.ablation.name if is_ark else None,
            "t_max": cfg.budget.agent.t_max if is_ark else None,
            "n_agents": cfg.budget.agent.n_agents if is_ark else None,
            "agent_options": agent_options(cfg.budget.agent) if is_ark else None,
            "split": cfg.split, "run_name": cfg.retriever.run_name,
            "edges": cfg.graph.get("edges", "stored"), "cut": cfg.cut, "metrics_mode": cfg.metrics_mode,
            "torchmetrics": str(cfg.torchmetrics) if cfg.metrics_mode == "stark_qa" else None}


def run_dir(cfg: DictConfig) -> Path:
    """The run directory, or its shard directory when ``shard`` is set."""
    out = Path(cfg.out_dir)
    return runner.shard_dir(out, cfg.shard) if cfg.get("shard") else out


def prerequisite_problems(cfg: DictConfig, source=None) -> list[str]:
    """What would stop this run before its first query: the input files of the graph source (e.g.
    STaRK's), the key of a paid backbone. Each problem says how to fix it; empty when the run can start."""
    source = instantiate(cfg.graph) if source is None else source
    problems = list(source.problems())
    if cfg.retriever.name == "ark":
        backbone = instantiate(cfg.backbone)
        env = backbone.key_env()
        if backbone.provider in KEY_PROVIDERS and env and not os.environ.get(env):
            problems.append(f"backbone {backbone.name!r} (provider {backbone.provider}) needs an API key: "
                            f"export {env}=...  (or choose another backbone, e.g. backbone=local)")
    return problems


def check_prerequisites(cfg: DictConfig, source=None) -> None:
    """Fail before any work when `prerequisite_problems` finds any (the message names each fix)."""
    problems = prerequisite_problems(cfg, source)
    if problems:
        raise SystemExit("the run cannot start:\n" + "\n".join(f"  - {p}" for p in problems))


# Start ark.local_server for a `local` backbone when nothing answers on its port (shared with `ark ask`).
local_server_for = serving


# settings that change the per-query numbers a run stores (and their values before run.json held them)
_SCORING_KEYS = ("edges", "cut", "metrics_mode", "torchmetrics")
_SCORING_DEFAULTS = {"edges": "stored", "cut": "top_first", "metrics_mode": "paper", "torchmetrics": None}


def _check_same_run(out: Path, info: dict[str, Any]) -> None:
    """Refuse to resume a directory that was made for a different graph/split/method."""
    prev = out / "run.json"
    if not prev.exists():
        return
    old = json.loads(prev.read_text())
    for key in ("graph", "split", "retriever", "backbone", "budget", "ablation", "agent_options", *_SCORING_KEYS):
        if key == "agent_options" and key not in old:  # written before the options existed: all off
            old[key] = "none" if old.get("retriever") == "ark" else None
        if key in _SCORING_KEYS and key not in old:   # written before the key existed: the default then
            old[key] = _SCORING_DEFAULTS[key]
        if old.get(key) != info.get(key):
            raise SystemExit(f"{out} holds a run with {key}={old.get(key)!r}, not {info.get(key)!r}; "
                             "set experiment_name=... or out_dir=... for a new run")


def run(cfg: DictConfig) -> dict:
    """Run (or resume) one evaluation run described by a composed config; returns its summary."""
    info = run_info(cfg)
    out = run_dir(cfg)
    _check_same_run(Path(cfg.out_dir), info)
    source = instantiate(cfg.graph)
    check_prerequisites(cfg, source)
    reference = _reference_run(cfg)
    out.mkdir(parents=True, exist_ok=True)

    job_cfg = OmegaConf.masked_copy(cfg, [k for k in cfg.keys() if k != "hydra"])
    resolved = redact(OmegaConf.to_container(job_cfg, resolve=True))
    (out / "config.yaml").write_text(OmegaConf.to_yaml(OmegaConf.create(resolved)))
    (Path(cfg.out_dir) / "run.json").write_text(json.dumps(info, indent=1))

    graph = source.graph()
    queries = runner.select_queries(source.queries().split(cfg.split), cfg.limit, cfg.get("shard"))
    retriever = instantiate(cfg.retriever.build)(graph=graph)
    logger = instantiate(cfg.logger)
    settings = runner.RunSettings(
        out_dir=out, concurrency=cfg.concurrency, top=cfg.retriever.top,
        metrics_mode=cfg.metrics_mode, torchmetrics=str(cfg.torchmetrics), cut=cfg.cut,
        count_failed_as_miss=cfg.count_failed_as_miss, n_boot=cfg.n_boot,
        seed=cfg.seed, progress=cfg.progress, extra={**info, "shard": cfg.get("shard"), "limit": cfg.limit},
        external_id=graph.external_id if graph.has_external_ids else None)
    name = f"{info['graph']}/{info['run_name']}" + (f"/shard{cfg.shard}" if cfg.get("shard") else "")
    backbone = instantiate(cfg.backbone) if info["retriever"] == "ark" else None
    logger.start(name, cfg.experiment_name, info, resolved)
    try:
        with local_server_for(backbone):
            summary = runner.run_queries(retriever, queries, settings, graph.candidate_ids, logger)
        if reference is not None:
            _compare_with(out, reference, cfg, summary, logger)
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
        diffs = compare.compare_runs(out, reference, n_boot=cfg.n_boot, seed=cfg.seed)
    except ValueError as e:
        print(f"compare_to {reference.path}: {e}")
        return
    summary["paired"] = {str(reference.path): compare.as_summary(diffs)}
    RunDir(out).update_metrics(paired=summary["paired"])
    logger.log_comparison(diffs, reference=str(reference.info.get("run_name") or reference.path.name))
    print(f"paired with {reference.path} (* p < {compare.ALPHA}; values in %):")
    print(compare.format_table(diffs))


def _print_summary(out: Path, summary: dict) -> None:
    state = "complete" if summary["complete"] else "INCOMPLETE"
    print(f"{out}: {summary['n_ok']}/{summary['n']} ok, {summary['n_failed']} failed ({state}); "
          f"tokens {summary['tokens']['total']:,}, ${summary['cost_usd']:.2f}")
    for name, v in summary["metrics"].items():
        print(f"  {name:>10} {100 * v['mean']:6.2f}  [{100 * v['ci_low']:.2f}, {100 * v['ci_high']:.2f}]")
    if summary.get("warning"):
        print("  " + summary["warning"])


def compose(overrides: list[str] | tuple[str, ...] = ()) -> DictConfig:
    """The composed config for ``overrides`` (no sweep expansion), as tests and scripts use it."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return hydra_compose(config_name="config", overrides=list(overrides), return_hydra_config=True)


def sweep_points(overrides: list[str] | tuple[str, ...] = ()) -> list[list[str]]:
    """Expand an experiment's ``hydra.sweeper.params`` grid (command-line values win) into the
    override lists of its runs, in the order the basic launcher runs them."""
    cfg = compose(overrides)
    params = dict(cfg.hydra.sweeper.get("params") or {})
    given = {o.split("=", 1)[0].lstrip("+~"): o.split("=", 1)[1] for o in overrides if "=" in o}
    for key, value in given.items():
        if key in params or "," in value:
            params[key] = value
    base = [o for o in overrides if "=" not in o or o.split("=", 1)[0].lstrip("+~") not in params]
    keys = list(params)
    grids = [str(params[k]).split(",") for k in keys]
    return [base + [f"{k}={v}" for k, v in zip(keys, combo)] for combo in itertools.product(*grids)]


@hydra.main(version_base="1.3", config_path="../conf", config_name="config")
def main(cfg: DictConfig) -> None:
    run(cfg)


if __name__ == "__main__":
    main()
