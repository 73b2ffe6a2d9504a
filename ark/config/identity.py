"""Run identity: what names a run, every setting and the data that can change its results, and the
same-run check.

    from ark.config.identity import run_info, run_identity, add_data_identity, fingerprint, check_same_run
    info = run_info(cfg)                     # experiment, graph, retriever, backbone, budget, ... (run.json)
    info["identity"] = run_identity(cfg)     # {dotted key: value}: every setting that changes results
    add_data_identity(info, source)          # + "data.graph", "data.queries": the data's fingerprints
    info["fingerprint"] = fingerprint(info["identity"])
    check_same_run(Path(cfg.out_dir), info)  # SystemExit when the directory holds a run with other
                                             # settings or made on other data

The identity leaves out what cannot change a run's records (`NOT_IDENTITY`: where it writes, how fast,
how it reaches the server, and ``count_failed_as_miss``, a scoring policy that changes no prediction: a
rerun with it re-scores), secrets, the groups a retriever does not use (`ARK_ONLY`, search and encoder
when unused), and the import paths of configured classes (``_target_``: where a class lives says nothing
about how the run behaves). `check_same_run` compares identities the same way, so a directory whose
run.json still holds ``_target_`` keys (written before they were left out, e.g.
``"backbone._target_": "ark.llm.BackboneConfig"``) or a key now in `NOT_IDENTITY` resumes; a run.json
written before identities were recorded is compared on its named settings, with the defaults of the time
filled in.

The data: ``data.graph`` is the graph source's `input_fingerprint` (what keys its cache: the files' names,
sizes and contents, `ark.data.sources.files_fingerprint`, and for tables and RDF the settings that shape
the graph), ``data.queries`` the same of its query files; ``data_files`` beside the identity lists each
file's size and content hash, so a refusal names the file that changed (a run.json that lists size
and time alone, written before contents were hashed, is taken as the same data while those agree). A directory is only checked when it holds a finished query (`holds_results`): one
that holds none blocks no command. A run.json written before the data fingerprints is accepted once, if
every finished record fits the data now (its gold, and the graph's own ids of its nodes:
`stale_records`); the run then writes the fingerprints.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
from pathlib import Path
from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from ark.config.checks import agent_options, uses_encoder, uses_search
from ark.run.logger import redact

log = logging.getLogger(__name__)

# what cannot change a run's records: where it writes, how fast, how it reaches the server, and the
# scoring policy that changes no prediction (count_failed_as_miss: a rerun re-scores the stored records)
NOT_IDENTITY = ("hydra", "paths", "out_dir", "_no_limit", "run_dir_name", "progress", "verbose", "concurrency",
                "compare_to", "logger", "shard", "count_failed_as_miss", "retriever.build", "backbone.base_url", "backbone.http",
                "backbone.timeout_s", "backbone.max_retries", "backbone.backoff_base_s",
                "backbone.backoff_max_s", "backbone.api_key_env", "backbone.endpoint_env",
                "budget.agent.concurrency", "search.run_suffix", "search.setup.encoder",
                "search.setup.build_embeddings", "encoder.encoder.models_dir", "encoder.encoder.cache",
                "encoder.encoder.batch_size", "encoder.encoder.threads",
                # spending: how much may be spent and how fast, never what a reply says (ark.config.plan)
                "estimate", "pilot", "estimate_queries", "confirm_usd", "yes", "max_cost_usd", "sweep_ledger",
                "run_dir_suffix", "backbone.rpm", "backbone.tpm", "backbone.price",
                # batch mode: the same requests, replies and records, sent another way at another price
                "backbone.batch", "backbone.batch_poll_s", "backbone.batch_window",
                # what a local server loads, from where: its chat format and adapter digest are in
                # backbone.serving and its model's name in backbone.model, which the identity keeps
                "backbone.local")
ARK_ONLY = ("backbone", "budget", "ablation")
TARGET = "_target_"   # Hydra's class import path: not a setting
DATA_KEYS = ("data.graph", "data.queries")   # the identity's data fingerprints (`data_identity`)
DATA_FILES = "data_files"                   # run.json: each input file's "size:sha256:<16 hex>", for the refusal's line

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
            "torchmetrics": str(cfg.torchmetrics) if ranks_own_scores(cfg.metrics_mode, cfg.retriever.name) else None}


def ranks_own_scores(metrics_mode: str, retriever: str) -> bool:
    """Whether ``torchmetrics`` can change a run's numbers: in ``metrics_mode=stark_qa`` only, and there only
    for a retriever whose lists carry scores of their own (a baseline's BM25, cosine or RRF scores). ARK's
    fused list is made of votes and is ranked by `ark.analysis.metrics.stark_scores` (all >= 2), on which
    both behaviours agree, so an ARK run is the same run under either."""
    return metrics_mode == "stark_qa" and retriever != "ark"


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
    if cfg.retriever.name == "ark":
        _id_space(cfg, flat)
    for key in ("index_kind", "rrf_k", "depth", "hnsw_m", "ef_construction", "ef_search", "nprobe"):
        if key in cfg.retriever.build:   # how a dense or hybrid baseline ranks
            flat[f"retriever.{key}"] = cfg.retriever.build[key]
    skip = (NOT_IDENTITY + (ARK_ONLY if cfg.retriever.name != "ark" else ())
            + (() if uses_search(cfg) else ("search",)) + (() if uses_encoder(cfg) else ("encoder",)))
    kept = {k: v for k, v in sorted(flat.items())
            if not _is_target(k) and not any(k == s or k.startswith(s + ".") for s in skip)}
    if OmegaConf.select(cfg, "retriever.build.index_kind", default=None) == "hnsw":   # a baseline's HNSW graph
        kept.update({f"retriever.{k}": v for k, v in _hnsw_defaults().items()})
    _only_where_used(kept)
    return json.loads(json.dumps(kept, default=str))   # as run.json stores it (tuples become lists)


def _id_space(cfg: DictConfig, flat: dict[str, Any]) -> None:
    """``ablation.tools.user_ids`` where it changes what the agent reads: on a graph whose source has ids
    of its own (tables, RDF) the ids the tools show, True (the default, the source's) or False (internal);
    elsewhere left out, since STaRK's and the demo's observations show the internal ids either way."""
    from hydra.utils import get_class

    key = "ablation.tools.user_ids"
    target = cfg.graph.get(TARGET)
    if target and getattr(get_class(target), "external_ids", False):
        flat[key] = flat.get(key) is not False
    else:
        flat.pop(key, None)


def fingerprint(identity: dict[str, Any]) -> str:
    """A short digest of an identity (recorded in run.json beside it)."""
    return hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()[:16]


# the vector index settings that act only on an index of their kind (ark.search.vectors)
_INDEX_PARAMS = {"hnsw": ("hnsw_m", "ef_construction", "ef_search"), "ivf": ("nprobe",)}


def _hnsw_defaults() -> dict[str, Any]:
    """The HNSW settings a baseline's index is built and searched with (`ark.search.modes.SearchSetup`'s)."""
    from ark.search.modes import SearchSetup

    return {f.name: f.default for f in dataclasses.fields(SearchSetup) if f.name in _INDEX_PARAMS["hnsw"]}


def _only_where_used(identity: dict[str, Any]) -> dict[str, Any]:
    """An identity without the settings that change nothing in its run: `_scoring_only_where_used`, and
    the HNSW settings (``hnsw_m``, ``ef_construction``, ``ef_search``) and IVF's ``nprobe`` only where the
    agent's search (``search.setup.*``) or a baseline (``retriever.*``) uses an index of that kind, so
    their defaults can change without refusing a directory made with the exact index."""
    for prefix in ("search.setup.", "retriever."):
        kind = identity.get(prefix + "index_kind")
        for index_kind, params in _INDEX_PARAMS.items():
            if kind != index_kind:
                for name in params:
                    identity.pop(prefix + name, None)
    return _scoring_only_where_used(identity)


def _scoring_only_where_used(identity: dict[str, Any]) -> dict[str, Any]:
    """``torchmetrics`` left out of an identity where it changes nothing (`ranks_own_scores`: outside
    ``metrics_mode=stark_qa``, the one mode it ranks in, and for ARK's vote lists), so its default can
    change without refusing any such run's directory, and as a string elsewhere (``torchmetrics=1.9`` on
    a command line is the float 1.9, the same setting as "1.9" quoted)."""
    if not ranks_own_scores(identity.get("metrics_mode", "paper"), identity.get("retriever.name")):
        identity.pop("torchmetrics", None)
    elif "torchmetrics" in identity:
        identity["torchmetrics"] = str(identity["torchmetrics"])
    return identity


def _setting_keys(identity: dict[str, Any]) -> dict[str, Any]:
    """An identity's settings, compared as they are today: no ``_target_``, nothing `NOT_IDENTITY` names
    (a run.json written before a key moved there still held it), no data fingerprints (`DATA_KEYS`), and
    the settings that change nothing in the run left out (`_only_where_used`; a run.json written before
    held ``torchmetrics`` in every mode and the HNSW settings with every index kind)."""
    return _only_where_used({k: v for k, v in identity.items() if not _is_target(k) and k not in DATA_KEYS
                             and not any(k == s or k.startswith(s + ".") for s in NOT_IDENTITY)})


def differing_settings(old: dict[str, Any], info: dict[str, Any]) -> tuple[dict, dict, list[str]]:
    """(old settings, new settings, the keys where they differ) of a stored run.json ``old`` and this
    run's ``info``, compared as `check_same_run` does (the data fingerprints apart: `data_changes`)."""
    if "identity" in old:
        a, b = _setting_keys(old["identity"]), _setting_keys(info["identity"])
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


def data_identity(source) -> tuple[dict[str, str], dict[str, str]]:
    """The run's data: ``({"data.graph": ..., "data.queries": ...}, {file: "size:mtime_ns"})``, the
    fingerprints of the graph's input files (its cache's `input_fingerprint`) and of its query files for
    the identity, and each file's size and time, so that a refusal can say which file changed. The source's
    files are made first where it makes them itself (the demo)."""
    from ark.data.sources import file_digest

    source.prepare()
    files = source.data_files()
    signatures = {}
    store = getattr(source, "hash_store", None)
    for p in [*files["graph"], *files["queries"]]:
        st = Path(p).stat()
        signatures[str(p)] = f"{st.st_size}:sha256:{file_digest(Path(p), store)[:16]}"
    return {"data.graph": source.input_fingerprint(), "data.queries": source.queries_fingerprint()}, signatures


def add_data_identity(info: dict[str, Any], source) -> None:
    """Put `data_identity` into ``info``: the fingerprints into its identity, the file signatures beside it."""
    data, files = data_identity(source)
    info["identity"] = dict(sorted({**info["identity"], **data}.items()))
    info[DATA_FILES] = files


def data_changes(old: dict[str, Any], info: dict[str, Any]) -> str | None:
    """What changed in the data between a stored run.json ``old`` and this run's ``info`` (e.g. "its graph
    and query set changed: queries.jsonl modified"), or None when the fingerprints agree."""
    a, b = old.get("identity", {}), info.get("identity", {})
    what = [name for key, name in (("data.graph", "graph"), ("data.queries", "query set")) if a.get(key) != b.get(key)]
    if not what:
        return None
    fa, fb = old.get(DATA_FILES) or {}, info.get(DATA_FILES) or {}
    if fa and set(fa) == set(fb) and all(v.count(":") == 1 and v == _size_and_time(f) for f, v in fa.items()):
        # fingerprinted by size and time alone (before contents were hashed), and those agree: the same
        # files as far as that run.json can tell; this run records the content hashes from now on
        return None
    files = [f"{Path(f).name} {'added' if f not in fa else 'removed' if f not in fb else 'modified'}"
             for f in sorted(set(fa) | set(fb)) if fa.get(f) != fb.get(f)] if fa else []
    shown = ", ".join(files[:3]) + (f" and {len(files) - 3} more" if len(files) > 3 else "")
    return f"its {' and '.join(what)} changed since" + (f" ({shown})" if shown else "")


def _size_and_time(path: str) -> str | None:
    """A file's "size:mtime_ns", as run.json listed it before contents were hashed; None if it is gone."""
    try:
        st = Path(path).stat()
    except OSError:
        return None
    return f"{st.st_size}:{st.st_mtime_ns}"


def holds_results(out: Path) -> bool:
    """Whether the run directory ``out`` (or one of its shards) holds a finished query: a record "ok" or
    "degraded". A directory without one (a run that stopped before its first query, or whose every
    query failed) holds nothing a command could lose, and never blocks one."""
    from ark.run.rundir import PREDICTIONS, SHARDS, read_predictions

    out = Path(out)
    for d in [out, *sorted((out / SHARDS).glob("*"))]:
        if any(r.get("status") in ("ok", "degraded") for r in read_predictions(d / PREDICTIONS).values()):
            return True
    return False


def check_same_run(out: Path, info: dict[str, Any]) -> bool:
    """Refuse to resume a directory made with other settings (compares `run_identity`) or on other data
    (the graph's and queries' fingerprints, `data_changes`), when it holds finished queries
    (`holds_results`). Returns True when its run.json predates the data fingerprints: the run may
    resume only if its records fit the data now (`stale_records`), and then records them."""
    prev = Path(out) / "run.json"
    if not prev.exists() or not holds_results(out):
        return False
    old = json.loads(prev.read_text())
    a, b, diff = differing_settings(old, info)
    if diff:
        shown = ", ".join(f"{k}={a.get(k, '<unset>')!r} there, {b.get(k, '<unset>')!r} now" for k in diff[:4])
        more = f" (and {len(diff) - 4} more)" if len(diff) > 4 else ""
        raise SystemExit(f"{out} holds a run made with other settings: {shown}{more}; rerun with its settings "
                         "to resume it, or give this run its own directory (experiment_name=... or out_dir=...)")
    if not all(k in old.get("identity", {}) for k in DATA_KEYS):
        return True
    changed = data_changes(old, info)
    if changed:
        raise SystemExit(f"{out} holds results made on other data: {changed}, so they would be stale; give this "
                         "run its own directory (experiment_name=... or out_dir=...), or remove that one to "
                         "compute it again")
    return False


def stale_records(out: Path, graph, queries) -> str | None:
    """For a run directory whose run.json predates the data fingerprints: why its finished records do not
    fit ``graph`` and ``queries`` (the run's selection) now, or None when they do: every record's gold
    equals its query's gold, and where it names nodes by the graph's own ids (``ranking_external``,
    ``gold_external``) the node ids still name those nodes."""
    from ark.run.rundir import PREDICTIONS, SHARDS, key, read_predictions

    ext = graph.external_id if graph.has_external_ids else None
    out = Path(out)
    found = [read_predictions(d / PREDICTIONS) for d in [out, *sorted((out / SHARDS).glob("*"))]]
    for q in queries:                       # in the selection's order: the same query is named however the
        for records in found:               # records were written (workers finish in any order)
            rec = records.get(key(q.id))
            if rec is None or rec.get("status") not in ("ok", "degraded"):
                continue
            gold = [int(g) for g in rec.get("gold") or []]
            if gold != [int(a) for a in q.answer_ids]:
                return f"query {q.id}: gold {gold} there, {list(q.answer_ids)} now"
            for ids_key, named in (("ranking", "ranking_external"), ("gold", "gold_external")):
                if ext is not None and named in rec:
                    ids = [int(i) for i in rec.get(ids_key) or []]
                    if any(not 0 <= i < graph.num_nodes or ext(i) != e for i, e in zip(ids, rec[named])):
                        return f"query {q.id}: its node ids name other nodes now ({named})"
    return None


def check_stale_records(out: Path, graph, queries) -> None:
    """Stop when `stale_records` finds a record that does not fit the data; else say that the directory's
    run.json, written before data fingerprints, now records them."""
    why = stale_records(out, graph, queries)
    if why:
        raise SystemExit(f"{out} holds results made before run.json recorded the data's fingerprints, and they do "
                         f"not fit the data now ({why}): give this run its own directory (experiment_name=... or "
                         "out_dir=...), or remove that one to compute it again")
    log.warning("%s: run.json predates the data fingerprints; its finished queries fit the graph and queries "
                "now (gold and node ids), so the run resumes and run.json records the data from now on", out)
