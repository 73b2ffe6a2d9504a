"""Run identity: what names a run, every setting that can change its results, and the same-run check.

    from ark.config.identity import run_info, run_identity, fingerprint, check_same_run
    info = run_info(cfg)                     # experiment, graph, retriever, backbone, budget, ... (run.json)
    info["identity"] = run_identity(cfg)     # {dotted key: value}: every setting that changes results
    info["fingerprint"] = fingerprint(info["identity"])
    check_same_run(Path(cfg.out_dir), info)  # SystemExit when the directory holds a run with other settings

The identity leaves out what cannot change a run's records or summary (`NOT_IDENTITY`: where it
writes, how fast, how it reaches the server), secrets, the groups a retriever does not use (`ARK_ONLY`,
search and encoder when unused), and the import paths of configured classes (``_target_``: where a
class lives says nothing about how the run behaves). `check_same_run` compares identities the same way,
so a directory whose run.json still holds ``_target_`` keys (written before they were left out, e.g.
``"backbone._target_": "ark.llm.BackboneConfig"``) resumes; a run.json written before identities were
recorded is compared on its named settings, with the defaults of the time filled in.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from ark.config.settings import agent_options, uses_encoder, uses_search
from ark.eval.logger import redact

# what cannot change a run's records or summary: where it writes, how fast, how it reaches the server
NOT_IDENTITY = ("hydra", "paths", "out_dir", "_no_limit", "run_dir_name", "progress", "verbose", "concurrency",
                "compare_to", "logger", "shard", "retriever.build", "backbone.base_url", "backbone.http",
                "backbone.timeout_s", "backbone.max_retries", "backbone.backoff_base_s",
                "backbone.backoff_max_s", "backbone.api_key_env", "backbone.endpoint_env",
                "budget.agent.concurrency", "search.run_suffix", "search.setup.encoder",
                "search.setup.build_embeddings", "encoder.encoder.models_dir", "encoder.encoder.cache",
                "encoder.encoder.batch_size", "encoder.encoder.threads",
                # spending: how much may be spent and how fast, never what a reply says (ark.config.spend)
                "estimate", "estimate_queries", "confirm_usd", "yes", "max_cost_usd", "sweep_ledger",
                "run_dir_suffix", "backbone.rpm", "backbone.tpm", "backbone.price")
ARK_ONLY = ("backbone", "budget", "ablation")
TARGET = "_target_"   # Hydra's class import path: not a setting

# settings that change the per-query numbers a run stores (and their values before run.json held them)
_SCORING_KEYS = ("edges", "cut", "metrics_mode", "torchmetrics")
_SCORING_DEFAULTS = {"edges": "stored", "cut": "top_first", "metrics_mode": "paper", "torchmetrics": None}


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


def _flatten(obj: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(obj, dict):
        out: dict[str, Any] = {}
        for k, v in obj.items():
            out.update(_flatten(v, f"{prefix}{k}."))
        return out
    return {prefix[:-1]: obj}


def _is_target(key: str) -> bool:
    return key == TARGET or key.endswith("." + TARGET)


def run_identity(cfg: DictConfig) -> dict[str, Any]:
    """Every resolved setting that can change this run's records or summary, as ``{dotted key: value}``
    (secrets redacted; the backbone, budget and toolset only where the retriever uses them; no
    ``_target_``). Two commands with the same identity may share a run directory; others may not."""
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
    kept = {k: v for k, v in sorted(flat.items())
            if not _is_target(k) and not any(k == s or k.startswith(s + ".") for s in skip)}
    return json.loads(json.dumps(kept, default=str))   # as run.json stores it (tuples become lists)


def fingerprint(identity: dict[str, Any]) -> str:
    """A short digest of an identity (recorded in run.json beside it)."""
    return hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()[:16]


def differing_settings(old: dict[str, Any], info: dict[str, Any]) -> tuple[dict, dict, list[str]]:
    """(old settings, new settings, the keys where they differ) of a stored run.json ``old`` and this
    run's ``info``, compared as `check_same_run` does."""
    if "identity" in old:
        a = {k: v for k, v in old["identity"].items() if not _is_target(k)}
        b = {k: v for k, v in info["identity"].items() if not _is_target(k)}
        return a, b, [k for k in sorted(set(a) | set(b)) if a.get(k, "<unset>") != b.get(k, "<unset>")]
    a, b = dict(old), info   # a run.json written before identities were recorded
    if "agent_options" not in a:  # written before the options existed: all off
        a["agent_options"] = "none" if a.get("retriever") == "ark" else None
    if "search" not in a:         # written before dense search existed: lexical, no encoder
        a["search"] = "lexical" if a.get("retriever") == "ark" else None
    a.setdefault("encoder", None)
    for key in _SCORING_KEYS:     # written before the key existed: the default then
        a.setdefault(key, _SCORING_DEFAULTS[key])
    return a, b, [k for k in ("graph", "split", "retriever", "backbone", "budget", "ablation", "agent_options",
                              "search", "encoder", *_SCORING_KEYS) if a.get(k) != b.get(k)]


def check_same_run(out: Path, info: dict[str, Any]) -> None:
    """Refuse to resume a directory made with other settings (compares `run_identity`)."""
    prev = Path(out) / "run.json"
    if not prev.exists():
        return
    a, b, diff = differing_settings(json.loads(prev.read_text()), info)
    if diff:
        shown = ", ".join(f"{k}={a.get(k, '<unset>')!r} there, {b.get(k, '<unset>')!r} now" for k in diff[:4])
        more = f" (and {len(diff) - 4} more)" if len(diff) > 4 else ""
        raise SystemExit(f"{out} holds a run made with other settings: {shown}{more}; rerun with its settings "
                         "to resume it, or give this run its own directory (experiment_name=... or out_dir=...)")
