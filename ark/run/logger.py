"""Experiment loggers: `NullLogger` (does nothing) and `WandbLogger` (Weights & Biases), same methods.

The runner calls ``log_running`` while a run goes and ``log_final`` at its end; entry points call
``start`` and ``finish``. Code never branches on "is W&B on": it gets a logger and calls it.

W&B runs are grouped by experiment (``group``) and tagged ``graph:<g>``, ``backbone:<b>``,
``budget:<t>``, ``ablation:<a>``, ``retriever:<r>``, ``split:<s>`` so the UI compares them side by
side. What is logged: the resolved config with secrets removed, running metrics (``<split>/<metric>``),
final means and 95% CIs in the summary, the per-query table, and the run directory's trajectories,
predictions and metrics as an artifact (type ``trajectories``).

Mode: ``logger.mode`` wins, then ``WANDB_MODE``; with neither, the mode W&B itself would use: offline
or disabled when its settings say so (a settings file written by ``wandb offline``), else online when
it finds a key (``WANDB_API_KEY``, the ``api_key`` setting, or ``~/.netrc`` for its host, which
``wandb login`` writes; asked through ``wandb.login(prompt=False, verify=False)``), offline otherwise.
At start and finish the run prints where it logs: ``W&B: online <run url>`` or ``W&B: offline <dir>
(upload: wandb sync <dir>)``; offline runs land in ``<dir>/wandb/offline-run-*``. W&B's own info
messages are hidden unless ``verbose`` (its warnings and errors always show). ``read_offline_run(path)``
reads an offline run back (config, history, summary, tags, artifacts) without the network.

Cost beside quality: the summary holds ``cost_usd`` and ``tokens/{prompt,completion,total}`` (what the
run spent, from the runner's summary) and, when a summary carries them, ``forecast_usd`` (the spend
forecast before the run) and ``budget_usd`` (its cap); ``status`` and, for a run the cap stopped,
``stop_reason`` ("budget").

    python experiments/run.py logger=wandb logger.project=ark graph=demo backbone=local
"""

from __future__ import annotations

import json
import os
import re
import struct
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ark.run import rundir

# "token" only as a whole word at the end ("token", "hf_token", "access-token"): "max_tokens" is a setting
SECRET_PATTERN = re.compile(r"api[_-]?key|secret|password|authorization|bearer|(^|[_-])token$", re.IGNORECASE)
SECRET_VALUE = re.compile(r"^(sk-[A-Za-z0-9_\-]{8,}|[A-Fa-f0-9]{40})$")
MODES = ("online", "offline", "disabled")


def redact(obj: Any) -> Any:
    """A copy of ``obj`` without secret-looking keys (``*_env`` keys, which name a variable, stay)
    or secret-looking values (``sk-...`` keys, 40-hex W&B keys)."""
    if isinstance(obj, Mapping):
        out = {}
        for k, v in obj.items():
            if SECRET_PATTERN.search(str(k)) and not str(k).endswith("_env"):
                continue
            out[k] = redact(v)
        return out
    if isinstance(obj, (list, tuple)):
        return [redact(v) for v in obj]
    if isinstance(obj, str) and SECRET_VALUE.match(obj):
        return "<redacted>"
    return obj


def run_tags(run_info: Mapping[str, Any]) -> list[str]:
    """``key:value`` tags for the W&B UI from a run's identity (graph, backbone, budget, ablation...)."""
    keys = ("graph", "retriever", "backbone", "budget", "ablation", "split")
    return [f"{k}:{run_info[k]}" for k in keys if run_info.get(k) not in (None, "")]


class NullLogger:
    """The logger that logs nothing (``logger=none``)."""

    def start(self, name: str, group: str, run_info: Mapping[str, Any], config: Mapping[str, Any]) -> None:
        """Begin a run named ``name`` in ``group`` (the experiment)."""

    def log_running(self, metrics: Mapping[str, float], step: int) -> None:
        """Running metrics while queries finish (``step`` = queries done)."""

    def log_final(self, summary: Mapping[str, Any], rows: Sequence[Mapping[str, Any]], run_dir: Path) -> None:
        """The run's summary (metrics.json), per-query rows and run directory."""

    def log_comparison(self, diffs: Sequence[Any], reference: str) -> None:
        """Paired differences against a reference run (`ark.analysis.paired`)."""

    def finish(self) -> None:
        """End the run."""


class WandbLogger(NullLogger):
    """Weights & Biases logger (``logger=wandb``): online when W&B itself would be, else offline."""

    def __init__(self, project: str = "ark", entity: str | None = None, mode: str | None = None,
                 dir: str | Path = "results/wandb", log_trajectories: bool = True, split: str = "test",
                 verbose: bool = False):
        if mode is not None and mode not in MODES:
            raise ValueError(f"unknown wandb mode {mode!r}; valid: {', '.join(MODES)} (or null for auto)")
        self.project, self.entity, self.mode = project, entity, mode
        self.dir = Path(dir)
        self.log_trajectories = log_trajectories
        self.split = split
        self.verbose = verbose
        self.run = None
        self._where: str | None = None

    def chosen_mode(self) -> str | None:
        """The mode chosen for W&B: ``mode``, else ``WANDB_MODE``; None leaves it to W&B (`wandb_mode`)."""
        env = os.environ.get("WANDB_MODE")
        return self.mode or (env if env in MODES else None)

    def resolved_mode(self) -> str:
        """The mode this logger's runs use: `chosen_mode`, else the one W&B itself would use."""
        return self.chosen_mode() or wandb_mode(self._wandb())

    def _wandb(self):
        try:
            import wandb
        except ImportError as e:  # pragma: no cover - wandb is in requirements.txt
            raise ImportError("logger=wandb needs wandb: pip install 'wandb>=0.30'") from e
        return wandb

    def start(self, name: str, group: str, run_info: Mapping[str, Any], config: Mapping[str, Any]) -> None:
        """Start the W&B run and print where it logs (`where`)."""
        wandb = self._wandb()
        mode = self.chosen_mode()
        if mode != "disabled" and not self.verbose:
            wandb.setup(wandb.Settings(show_info=False))   # W&B's info messages: `where` says where it logs
        mode = mode or wandb_mode(wandb)
        self.split = run_info.get("split", self.split)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.run = wandb.init(project=self.project, entity=self.entity, group=group, name=name,
                              job_type=str(run_info.get("retriever", "eval")), tags=run_tags(run_info),
                              config=redact(dict(config)), dir=str(self.dir), mode=mode,
                              reinit="finish_previous")
        self._where = where(mode, self.run)
        print(self._where, flush=True)

    def log_running(self, metrics: Mapping[str, float], step: int) -> None:
        if self.run is not None:
            self.run.log({f"{self.split}/running/{k}": v for k, v in metrics.items()}, step=step)

    def log_final(self, summary: Mapping[str, Any], rows: Sequence[Mapping[str, Any]], run_dir: Path) -> None:
        if self.run is None:
            return
        wandb = self._wandb()
        final = {}
        for name, v in summary.get("metrics", {}).items():
            final[f"{self.split}/{name}"] = v["mean"]
            final[f"{self.split}/{name}_ci_low"] = v["ci_low"]
            final[f"{self.split}/{name}_ci_high"] = v["ci_high"]
        for t, share in summary.get("tool_share", {}).items():
            final[f"tool_share/{t}"] = share
        for k, v in summary.get("latency_s", {}).items():
            final[f"latency_s/{k}"] = v
        attr = summary.get("attribution") or {}
        for c, share in (attr.get("share") or {}).items():
            final[f"attribution/{c}"] = share
        for k in ("queries_any_gold_surfaced", "steps_to_first_gold_mean", "tokens_to_first_gold_mean"):
            if attr.get(k) is not None:
                final[f"attribution/{k}"] = attr[k]
        final.update({k: summary.get(k) for k in ("n", "n_failed", "complete", "status")})
        if summary.get("stop_reason"):   # e.g. "budget": the spending cap stopped the run
            final["stop_reason"] = summary["stop_reason"]
        final.update(cost_summary(summary))
        self.run.summary.update(final)
        if rows:
            cols = list(rows[0].keys())
            table = wandb.Table(columns=cols, data=[[r.get(c) for c in cols] for r in rows])
            self.run.log({"per_query": table})
        run_dir = Path(run_dir)
        attr_rows = _read_csv(run_dir / rundir.ATTRIBUTION)
        if attr_rows:
            cols = list(attr_rows[0])
            table = wandb.Table(columns=cols, data=[[r[c] for c in cols] for r in attr_rows])
            self.run.log({"attribution_table": table})
        if self.log_trajectories:
            name = re.sub(r"[^A-Za-z0-9_.-]", "_", f"run-{self.run.name}")
            art = wandb.Artifact(name, type="trajectories", metadata={"n": summary.get("n")})
            for f in (rundir.PREDICTIONS, rundir.METRICS_FILE, rundir.PER_QUERY, rundir.TRAJECTORY_STATS,
                      rundir.ATTRIBUTION):
                if (run_dir / f).exists():
                    art.add_file(str(run_dir / f), name=f)
            if (run_dir / rundir.TRAJ_DIR).is_dir() and any((run_dir / rundir.TRAJ_DIR).iterdir()):
                art.add_dir(str(run_dir / rundir.TRAJ_DIR), name=rundir.TRAJ_DIR)
            self.run.log_artifact(art)

    def log_comparison(self, diffs: Sequence[Any], reference: str) -> None:
        """Paired differences of this run against ``reference`` (`ark.analysis.paired.PairedDiff` list) into the
        summary: ``paired/<reference>/<metric>/{diff,ci_low,ci_high,p_value,significant}``."""
        if self.run is None:
            return
        for d in diffs:
            base = f"paired/{reference}/{d.metric}"
            for k in ("diff", "ci_low", "ci_high", "p_value", "significant", "n"):
                self.run.summary[f"{base}/{k}"] = getattr(d, k)

    def finish(self) -> None:
        """Finish the W&B run and print again where it logged."""
        if self.run is not None:
            self.run.finish()
            self.run = None
            print(self._where, flush=True)

    @property
    def run_dir(self) -> Path | None:
        """The local W&B run directory (``.../offline-run-*`` offline)."""
        return None if self.run is None else Path(self.run.dir).parent


COST_KEYS = ("forecast_usd", "budget_usd")


def cost_summary(summary: Mapping[str, Any]) -> dict[str, Any]:
    """The W&B summary's cost fields from a run summary (`ark.run.runner`): ``cost_usd`` and
    ``tokens/{prompt,completion,total}`` always, ``forecast_usd`` and ``budget_usd`` when present."""
    tokens = summary.get("tokens") or {}
    out = {"cost_usd": summary.get("cost_usd")}
    out.update({f"tokens/{k}": tokens.get(k) for k in ("prompt", "completion", "total")})
    out.update({k: summary[k] for k in COST_KEYS if summary.get(k) is not None})
    return out


def wandb_mode(wandb) -> str:
    """The mode W&B itself would log in, asked of its own settings and credentials: ``disabled`` or
    ``offline`` when its settings say so (environment, settings files), else ``online`` when
    ``wandb.login(prompt=False, verify=False)`` finds a key (``WANDB_API_KEY``, the ``api_key``
    setting, ``~/.netrc`` for its host), else ``offline``. Nothing is prompted for or verified."""
    settings = wandb.setup().settings
    if settings.mode == "disabled":
        return "disabled"
    if settings.mode in ("offline", "dryrun"):
        return "offline"
    return "online" if wandb.login(prompt=False, verify=False) else "offline"


def where(mode: str, run) -> str:
    """The line saying where a W&B run logs: ``W&B: online <run url>``, ``W&B: offline <dir> (upload:
    wandb sync <dir>)`` or ``W&B: disabled (nothing logged)``."""
    if mode == "disabled":
        return "W&B: disabled (nothing logged)"
    if mode == "offline":
        sync_dir = Path(run.dir).parent
        return f"W&B: offline {sync_dir} (upload: wandb sync {sync_dir})"
    return f"W&B: online {run.url}"


def _read_csv(path: Path) -> list[dict]:
    import csv

    if not path.is_file():
        return []
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


# --- reading an offline run back ---------------------------------------------------------------
_BLOCK, _HEADER = 32768, 7


def _records(path: Path):
    """Yield the protobuf records of a W&B ``run-*.wandb`` transaction log (leveldb-log framing)."""
    from wandb.proto import wandb_internal_pb2 as pb

    data = Path(path).read_bytes()
    ident, _magic, _version = struct.unpack("<4sHB", data[:_HEADER])
    if ident != b":W&B":
        raise ValueError(f"{path} is not a W&B run log")
    pos, buf = _HEADER, b""
    while pos + _HEADER <= len(data):
        left = _BLOCK - pos % _BLOCK
        if left < _HEADER:
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos:pos + _HEADER])
        pos += _HEADER
        if kind == 0 and length == 0 or pos + length > len(data):
            break  # the end, or a record W&B is still writing (read while the run flushes)
        chunk = data[pos:pos + length]
        pos += length
        buf = chunk if kind in (1, 2) else buf + chunk
        if kind in (1, 4):
            rec = pb.Record()
            rec.ParseFromString(buf)
            yield rec


def _item_key(item) -> str:
    return "/".join(item.nested_key) if item.nested_key else item.key


def read_offline_run(run_dir: Path | str) -> dict[str, Any]:
    """Read an offline W&B run directory (``.../offline-run-*``) back into plain data:
    {"name", "group", "tags", "config", "history": [ {...}, ...], "summary", "artifacts": [(name, type)],
    "finished"}; ``finished`` says the log ends with the run's exit record (W&B has written all of it)."""
    run_dir = Path(run_dir)
    logs = sorted(run_dir.glob("run-*.wandb"))
    if not logs:
        raise FileNotFoundError(f"no run-*.wandb file in {run_dir}")
    out: dict[str, Any] = {"name": None, "group": None, "tags": [], "config": {}, "history": [],
                           "summary": {}, "artifacts": [], "finished": False}
    for rec in _records(logs[0]):
        kind = rec.WhichOneof("record_type")
        if kind == "run":
            out.update(name=rec.run.display_name, group=rec.run.run_group, tags=list(rec.run.tags))
            for u in rec.run.config.update:
                out["config"][u.key] = json.loads(u.value_json)
        elif kind == "config":
            for u in rec.config.update:
                out["config"][u.key] = json.loads(u.value_json)
        elif kind == "history":
            out["history"].append({_item_key(i): json.loads(i.value_json) for i in rec.history.item})
        elif kind == "summary":
            for u in rec.summary.update:
                out["summary"][_item_key(u)] = json.loads(u.value_json)
        elif kind == "artifact":
            out["artifacts"].append((rec.artifact.name, rec.artifact.type))
        elif kind == "exit":
            out["finished"] = True
    out["config"].pop("_wandb", None)
    return out
