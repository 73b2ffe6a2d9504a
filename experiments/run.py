"""One evaluation run (or a sweep of them) from the Hydra configs in conf/.

    python experiments/run.py graph=demo backbone=local limit=5          # one run
    python experiments/run.py retriever=bm25 graph=prime split=test       # the BM25 baseline
    python experiments/run.py -m experiment=table1                        # the paper's Table 1 sweep
    python experiments/run.py graph=prime shard=0/4                       # a shard; merge with
    python -m ark.eval.runner merge results/runs/default/prime/ark-gpt-4.1-t20_n3-full_test
    python experiments/run.py ablation=no_neighbors compare_to=RUN_DIR   # paired with another run

`main` is a thin ``@hydra.main`` over `run(cfg)`, which tests call with a composed config. The run
directory is ``results/runs/<experiment>/<graph>/<run_name>_<split>[_limit<n>]/`` (``run_name``:
``ark-<backbone>-<budget>-<ablation>[-<search>-<encoder>]``, ``bm25``, or ``dense|hybrid-<encoder>-none-none``);
rerunning the same command resumes it
(finished queries are skipped, failed and degraded ones retried, and the LLM cache answers the calls
already made). The option files build their objects with ``_target_``: ``conf/graph/*.yaml`` a graph
source of `ark.data.sources` (STaRK, demo, tables), ``conf/retriever/*.yaml`` the factories below
(`build_ark`, `build_bm25`, `build_dense`, `build_hybrid`), ``conf/search/*.yaml`` the agent's
global search (`ark.search.modes.SearchSetup`) and ``conf/encoder/*.yaml`` its text encoder.

Before anything is read or written, `check_settings` checks every setting (one line per bad value,
naming the valid choices). ``run.json`` records the run's identity (`run_identity`: every resolved
setting that can change its records or summary, secrets redacted) and its fingerprint; a command
whose identity differs is refused on that directory with one line naming the differing settings,
and ``run.lock`` (`ark.eval.runner.run_lock`) refuses a second writer while one is running. A Hydra sweep
over a setting that is not in the directory name (e.g. ``seed=0,1``) therefore needs
``experiment_name=...`` or ``out_dir=...`` per point.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Any

import hydra
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from ark.eval import compare

from ark.eval import runner
from ark.llm.local_server import serving
from ark.eval.logger import redact
from ark.eval.rundir import RunDir

log = logging.getLogger(__name__)
CONF_DIR = Path(__file__).resolve().parents[1] / "conf"
KEY_PROVIDERS = ("openai", "azure")


def build_ark(graph, backbone, agent, tools, llm_cache: str | None = None, index_cache: str | None = None,
              search=None):
    """ARKRetriever over ``graph``: BM25 index (cached under ``index_cache``, by default inside the graph's
    own cache folder; built in memory for a graph without one), tool set, LLM client (with response cache).
    ``search``: an `ark.search.modes.SearchSetup` (conf/search/); None is the paper's lexical search (node
    embeddings, for dense or hybrid, are cached beside the BM25 index)."""
    from ark.agent import ARKRetriever
    from ark.llm.client import LLMClient
    from ark.search.bm25 import load_index
    from ark.tools import ToolSet

    index_cache = index_cache or graph.directory
    index = load_index(graph, index_cache) if index_cache else None
    if index is None:
        from ark.search.bm25 import BM25Index

        index = BM25Index.build(graph.texts())
    if llm_cache:
        Path(llm_cache).parent.mkdir(parents=True, exist_ok=True)
    llm = LLMClient(backbone, cache=llm_cache)
    global_search = search.build(graph, index, index_cache) if search is not None else None
    toolset = ToolSet(graph, index, tools, search=global_search)
    toolset.warm_up()   # numba's first-call set-up, while the agents wait for their first LLM reply
    return ARKRetriever(llm, toolset, graph, agent)


def build_bm25(graph, index_cache: str | None = None, top: int = 100):
    """The BM25 baseline over the graph's candidates (index cached under ``index_cache``, by default
    inside the graph's own cache folder)."""
    from ark.baselines import BM25Retriever

    return BM25Retriever(graph, cache_dir=index_cache or graph.directory, top=top)


def agent_options(agent_cfg) -> str:
    """The agent options (`ark.agent.OPTIONS`) switched on, comma-separated, or "none"."""
    from ark.agent import OPTIONS

    return ",".join(k for k in OPTIONS if agent_cfg.get(k, False)) or "none"


def build_dense(graph, encoder, index_cache: str | None = None, top: int = 100, index_kind: str = "flat",
                build_embeddings: bool = True):
    """The dense baseline: candidates ranked by embedding similarity (embeddings cached under ``index_cache``)."""
    from ark.baselines import DenseRetriever
    from ark.search.modes import SearchConfig, SearchSetup

    setup = SearchSetup(SearchConfig(mode="dense"), encoder, index_kind, build_embeddings)
    return DenseRetriever(graph, setup.dense(graph, index_cache or graph.directory), top=top)


def build_hybrid(graph, encoder, index_cache: str | None = None, top: int = 100, index_kind: str = "flat",
                 build_embeddings: bool = True, rrf_k: float = 60.0, depth: int = 100):
    """The hybrid baseline: RRF of the BM25 and dense baselines' top ``depth``."""
    from ark.baselines import HybridRetriever

    return HybridRetriever(build_bm25(graph, index_cache, top),
                           build_dense(graph, encoder, index_cache, top, index_kind, build_embeddings),
                           top=top, rrf_k=rrf_k, depth=depth)


def uses_search(cfg: DictConfig) -> bool:
    """Whether the run's search group (conf/search/) differs from the paper's lexical search: only the
    agent searches, and lexical search with BM25 neighbor ranking is what every run did before."""
    if cfg.retriever.name != "ark":
        return False
    c = cfg.search.setup.config
    return (c.get("mode", "lexical"), c.get("neighbor_rank", "bm25")) != ("lexical", "bm25")


def uses_encoder(cfg: DictConfig) -> bool:
    """Whether the run encodes text (conf/encoder/): a baseline built with an encoder (dense, hybrid),
    or the agent with a dense or hybrid search or neighbor ranking."""
    return "encoder" in cfg.retriever.build or uses_search(cfg)


def run_info(cfg: DictConfig) -> dict[str, Any]:
    """The run's identity: what the report, the W&B tags and the figures group by."""
    is_ark = cfg.retriever.name == "ark"
    return {"experiment": cfg.experiment_name, "graph": cfg.graph.name, "retriever": cfg.retriever.name,
            "search": cfg.search.name if is_ark else None,
            "encoder": cfg.encoder.name if uses_encoder(cfg) else None,
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
    if uses_encoder(cfg):
        from ark.search.embeddings import cache_problems

        encoder = instantiate(cfg.encoder.encoder)
        problems += encoder.problems()
        build = cfg.search.setup if uses_search(cfg) else cfg.retriever.build
        if not build.get("build_embeddings", True):
            from experiments.embed import command

            problems += cache_problems(cfg.paths.index_cache or source.cache_dir, encoder, cfg.graph.name,
                                       command(cfg))
    return problems


def check_prerequisites(cfg: DictConfig, source=None) -> None:
    """Fail before any work when `prerequisite_problems` finds any (the message names each fix)."""
    problems = prerequisite_problems(cfg, source)
    if problems:
        raise SystemExit("the run cannot start:\n" + "\n".join(f"  - {p}" for p in problems))


# Start ark.llm.local_server for a `local` backbone when nothing answers on its port (shared with `ark ask`).
local_server_for = serving


# settings that change the per-query numbers a run stores (and their values before run.json held them)
_SCORING_KEYS = ("edges", "cut", "metrics_mode", "torchmetrics")
_SCORING_DEFAULTS = {"edges": "stored", "cut": "top_first", "metrics_mode": "paper", "torchmetrics": None}


def _one_line(e: BaseException) -> str:
    """The innermost message of ``e`` (Hydra wraps a constructor's ValueError), on one line."""
    while e.__cause__ is not None:
        e = e.__cause__
    return " ".join(str(e).split())


def setting_problems(cfg: DictConfig) -> list[str]:
    """Every bad setting of ``cfg``, one line each naming the value and the valid choices; empty when
    all are valid. Reads no file and builds nothing heavier than the small config objects."""
    from ark.eval.metrics import MODES
    from ark.data.stark import HUMAN_SPLIT, SPLITS

    problems = []

    def bad(key: str, want: str) -> None:
        problems.append(f"bad setting {key}={OmegaConf.select(cfg, key)!r}: {want}")

    def is_int(v) -> bool:
        return isinstance(v, int) and not isinstance(v, bool)

    try:
        source = instantiate(cfg.graph)
    except Exception as e:  # noqa: BLE001 - reported as a setting problem
        problems.append(f"bad setting in graph: {_one_line(e)}")
        source = None
    from ark.data.sources import StarkSource

    splits = (*SPLITS, HUMAN_SPLIT, *getattr(source, "extra_splits", ()))   # STaRK's split names (and a source's own); other sources check theirs when queries load
    if isinstance(source, StarkSource) and cfg.split not in splits:
        bad("split", f"choose one of {', '.join(splits)}")
    if cfg.limit is not None and not (is_int(cfg.limit) and cfg.limit >= 0):
        bad("limit", "use a whole number >= 0, or null for the whole split")
    if cfg.get("shard") not in (None, ""):
        try:
            runner.parse_shard(str(cfg.shard))
        except ValueError:
            bad("shard", "use i/n with 0 <= i < n, e.g. shard=0/4")
    for key, low in (("concurrency", 1), ("n_boot", 0), ("retriever.top", 1)):
        v = OmegaConf.select(cfg, key)
        if not (is_int(v) and v >= low):
            bad(key, f"use a whole number >= {low}")
    if not is_int(cfg.seed):
        bad("seed", "use a whole number")
    if cfg.metrics_mode not in MODES:
        bad("metrics_mode", f"choose one of {', '.join(MODES)}")
    for key in ("count_failed_as_miss", "progress"):
        if not isinstance(OmegaConf.select(cfg, key), bool):
            bad(key, "use true or false")
    keys = []
    if cfg.retriever.name == "ark":  # the agent's own checks, before any graph is loaded
        keys += ["backbone", "budget.agent", "ablation.tools", "search.setup.config"]
    if uses_encoder(cfg):
        keys.append("encoder.encoder")
    for key in keys:
        try:
            instantiate(OmegaConf.select(cfg, key))
        except Exception as e:  # noqa: BLE001 - reported as a setting problem
            problems.append(f"bad setting in {key}: {_one_line(e)}")
    for key in ("search.setup.index_kind", "retriever.build.index_kind"):
        from ark.search.vectors import KINDS

        v = OmegaConf.select(cfg, key, default=None)
        if v is not None and v not in KINDS and (key.startswith("retriever") or uses_search(cfg)):
            bad(key, f"choose one of {', '.join(KINDS)}")
    return problems


def check_settings(cfg: DictConfig) -> None:
    """Stop with one line per bad setting before anything is read, loaded or written."""
    problems = setting_problems(cfg)
    if problems:
        raise SystemExit("\n".join(problems))


# what cannot change a run's records or summary: where it writes, how fast, how it reaches the server
NOT_IDENTITY = ("hydra", "paths", "out_dir", "_no_limit", "run_dir_name", "progress", "concurrency",
                "compare_to", "logger", "shard", "retriever.build", "backbone.base_url", "backbone.http",
                "backbone.timeout_s", "backbone.max_retries", "backbone.backoff_base_s",
                "backbone.backoff_max_s", "backbone.api_key_env", "backbone.endpoint_env",
                "budget.agent.concurrency", "search.run_suffix", "search.setup.encoder",
                "search.setup.build_embeddings", "encoder.encoder.models_dir", "encoder.encoder.cache",
                "encoder.encoder.batch_size", "encoder.encoder.threads")
ARK_ONLY = ("backbone", "budget", "ablation")


def _flatten(obj: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(obj, dict):
        out: dict[str, Any] = {}
        for k, v in obj.items():
            out.update(_flatten(v, f"{prefix}{k}."))
        return out
    return {prefix[:-1]: obj}


def run_identity(cfg: DictConfig) -> dict[str, Any]:
    """Every resolved setting that can change this run's records or summary, as ``{dotted key: value}``
    (secrets redacted; the backbone, budget and toolset only where the retriever uses them).
    Two commands with the same identity may share a run directory; others may not."""
    job = OmegaConf.to_container(OmegaConf.masked_copy(cfg, [k for k in cfg.keys() if k != "hydra"]), resolve=True)
    flat = _flatten(redact(job))
    if cfg.retriever.name == "ark":  # with the defaults the objects fill in (e.g. backbone.seed, agent.tie_break)
        for key in ("backbone", "budget.agent", "ablation.tools"):
            built = instantiate(OmegaConf.select(cfg, key))
            if dataclasses.is_dataclass(built):
                flat.update(_flatten(redact(dataclasses.asdict(built)), f"{key}."))
    if uses_search(cfg):  # with SearchSetup's and SearchConfig's defaults; the encoder is the encoder group's
        setup = instantiate(cfg.search.setup)
        flat.update(_flatten(dataclasses.asdict(setup.config), "search.setup.config."))
        flat.update({f"search.setup.{k}": getattr(setup, k)
                     for k in ("index_kind", "hnsw_m", "ef_construction", "ef_search", "nprobe")})
    for key in ("index_kind", "rrf_k", "depth", "hnsw_m", "ef_construction", "ef_search", "nprobe"):
        if key in cfg.retriever.build:   # how a dense or hybrid baseline ranks
            flat[f"retriever.{key}"] = cfg.retriever.build[key]
    skip = (NOT_IDENTITY + (ARK_ONLY if cfg.retriever.name != "ark" else ())
            + (() if uses_search(cfg) else ("search",)) + (() if uses_encoder(cfg) else ("encoder",)))
    kept = {k: v for k, v in sorted(flat.items()) if not any(k == s or k.startswith(s + ".") for s in skip)}
    return json.loads(json.dumps(kept, default=str))   # as run.json stores it (tuples become lists)


def fingerprint(identity: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _check_same_run(out: Path, info: dict[str, Any]) -> None:
    """Refuse to resume a directory made with other settings (compares `run_identity`)."""
    prev = out / "run.json"
    if not prev.exists():
        return
    old = json.loads(prev.read_text())
    if "identity" in old:
        a, b = old["identity"], info["identity"]
        diff = [k for k in sorted(set(a) | set(b)) if a.get(k, "<unset>") != b.get(k, "<unset>")]
    else:  # a run.json written before identities were recorded
        a, b = old, info
        if "agent_options" not in a:  # written before the options existed: all off
            a["agent_options"] = "none" if a.get("retriever") == "ark" else None
        if "search" not in a:         # written before dense search existed: lexical, no encoder
            a["search"] = "lexical" if a.get("retriever") == "ark" else None
        a.setdefault("encoder", None)
        for key in _SCORING_KEYS:     # written before the key existed: the default then
            a.setdefault(key, _SCORING_DEFAULTS[key])
        diff = [k for k in ("graph", "split", "retriever", "backbone", "budget", "ablation", "agent_options",
                            "search", "encoder", *_SCORING_KEYS) if a.get(k) != b.get(k)]
    if diff:
        shown = ", ".join(f"{k}={a.get(k, '<unset>')!r} there, {b.get(k, '<unset>')!r} now" for k in diff[:4])
        more = f" (and {len(diff) - 4} more)" if len(diff) > 4 else ""
        raise SystemExit(f"{out} holds a run made with other settings: {shown}{more}; rerun with its settings "
                         "to resume it, or give this run its own directory (experiment_name=... or out_dir=...)")


def run(cfg: DictConfig) -> dict:
    """Run (or resume) one evaluation run described by a composed config; returns its summary.

    Order: every setting is checked, then the prerequisites, then the directory is claimed (lock)
    and compared with the run it holds; only then is anything written or loaded."""
    check_settings(cfg)
    info = run_info(cfg)
    info["identity"] = run_identity(cfg)
    info["fingerprint"] = fingerprint(info["identity"])
    out = run_dir(cfg)
    _check_same_run(Path(cfg.out_dir), info)
    source = instantiate(cfg.graph)
    check_prerequisites(cfg, source)
    reference = _reference_run(cfg)
    try:
        lock = runner.run_lock(out)
        lock.__enter__()
    except runner.RunDirInUse as e:
        raise SystemExit(str(e)) from None
    try:
        return _run_locked(cfg, info, out, source, reference)
    finally:
        lock.__exit__(None, None, None)


def _run_locked(cfg: DictConfig, info: dict[str, Any], out: Path, source, reference) -> dict:
    _check_same_run(Path(cfg.out_dir), info)   # again: a writer may have finished while we waited
    resolved = redact(OmegaConf.to_container(
        OmegaConf.masked_copy(cfg, [k for k in cfg.keys() if k != "hydra"]), resolve=True))
    tmp = out / "config.yaml.tmp"
    tmp.write_text(OmegaConf.to_yaml(OmegaConf.create(resolved)))
    os.replace(tmp, out / "config.yaml")
    runner.write_json_atomic(Path(cfg.out_dir) / "run.json", info, indent=1)

    graph = source.graph()
    queries = runner.select_queries(source.queries().split(cfg.split), cfg.limit, cfg.get("shard"))
    retriever = instantiate(cfg.retriever.build)(graph=graph)
    logger = instantiate(cfg.logger)
    extra = {k: v for k, v in info.items() if k != "identity"}
    settings = runner.RunSettings(
        out_dir=out, concurrency=cfg.concurrency, top=cfg.retriever.top,
        metrics_mode=cfg.metrics_mode, torchmetrics=str(cfg.torchmetrics), cut=cfg.cut,
        count_failed_as_miss=cfg.count_failed_as_miss, n_boot=cfg.n_boot,
        seed=cfg.seed, progress=cfg.progress, extra={**extra, "shard": cfg.get("shard"), "limit": cfg.limit},
        external_id=graph.external_id if graph.has_external_ids else None)
    name = f"{info['graph']}/{info['run_name']}" + (f"/shard{cfg.shard}" if cfg.get("shard") else "")
    backbone = instantiate(cfg.backbone) if info["retriever"] == "ark" else None
    logger.start(name, cfg.experiment_name, extra, resolved)
    try:
        with local_server_for(backbone):
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
    state = summary["status"] if summary["complete"] else summary["status"].upper()
    print(f"{out}: {summary['n_ok']}/{summary['n']} ok, {summary['n_degraded']} degraded, "
          f"{summary['n_failed']} failed ({state}); "
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
    """The override lists of an experiment's runs, expanded by Hydra's own basic sweeper: its
    ``hydra.sweeper.params`` first, then the command line's overrides, which win on the same key."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    cfg = compose(overrides)
    params = [f"{k}={v}" for k, v in (cfg.hydra.sweeper.get("params") or {}).items()]
    parsed = OverridesParser.create().parse_overrides([*params, *overrides])
    return BasicSweeper.split_arguments(parsed, None)[0]


def remove_unstarted(job_dir: Path, runs_root: Path) -> None:
    """Remove the directory Hydra made for a job that stopped before its run began (it then holds at
    most Hydra's run.log), and its parents while they are empty: up to ``runs_root`` included, and
    further up to the working directory when ``runs_root`` lies inside it."""
    job_dir, runs_root = Path(job_dir).resolve(), Path(runs_root).resolve()
    if not job_dir.is_dir() or not {p.name for p in job_dir.iterdir()} <= {"run.log"}:
        return
    (job_dir / "run.log").unlink(missing_ok=True)
    cwd = Path.cwd().resolve()
    stop = cwd if cwd in runs_root.parents else runs_root.parent
    d = job_dir
    while d != stop and stop in d.parents:
        try:
            d.rmdir()
        except OSError:
            break
        d = d.parent


@hydra.main(version_base="1.3", config_path="../conf", config_name="config")
def main(cfg: DictConfig) -> None:
    try:
        run(cfg)
    except SystemExit:
        from hydra.core.hydra_config import HydraConfig

        remove_unstarted(Path(HydraConfig.get().runtime.output_dir), Path(cfg.paths.runs))
        raise


if __name__ == "__main__":
    main()
