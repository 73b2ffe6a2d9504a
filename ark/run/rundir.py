"""The run directory: the files one evaluation run writes, and `RunDir`, the one reader of them.

Every reader of runs (``ark.report.table1``, ``ark.analysis.attribution``, ``ark.analysis.paired``, ``ark.run.logger``,
``ark.report.figures``, ``ark.report.viewer``) goes through this module; ``ark.run.runner`` (with
``.records``, ``.summary``, ``.shards``) and ``ark.config.evaluation`` write the files named here; `run_label` is
how tables and figures name a run. A run directory is

    results/runs/<experiment>/<graph>/<run_name>_<split>[_limit<n>]/    (run_name: ark-<backbone>-<budget>-<ablation> or bm25)
      run.json              the run's identity: experiment, graph, retriever, backbone, budget, ablation,
                            t_max, n_agents, agent_options (the ark.agent.OPTIONS switched on, comma-separated,
                            or "none"), split, run_name, and "identity" (every resolved setting that changes
                            results, flattened, secrets redacted, and "data.graph"/"data.queries": the
                            fingerprints of the graph's input and query files) with its "fingerprint", and
                            "data_files" (each input file's "size:sha256:<16 hex>") (ark.config.identity; absent
                            in bare runner runs)
      run.lock              held (flock) by the process writing the run; refuses a second writer
      config.yaml           the resolved Hydra config, secrets removed (ark.config.evaluation)
      predictions.jsonl     one JSON record per finished query, appended as it finishes; a query may
                            appear several times (a retried failure): the last line wins. Keys:
                            query_id, query, status ("ok" | "degraded": some agents failed | "failed"),
                            error, gold, ranking (the scored list, cut to `top`), agent_rankings (each
                            agent's selected list), agents (per agent: status, stop_reason, error,
                            selected, steps), metrics ({name: value}; ok only), partial_metrics
                            (degraded only), agent_metrics, latency_s, prompt_tokens, completion_tokens,
                            cost_usd, tool_counts (per agent {tool: calls}), trajectory_file
                            (ark/run/records.py details each key and the scoring policy)
      trajectories/<qid>.json   the query's agents: a list of ``Trajectory.to_json()`` (ark/trajectory.py)
      metrics.json          the summary: n, n_ok, n_degraded, n_failed, n_missing, complete, status
                            ("complete" | "degraded" | "incomplete"), agents ({ok, failed}), metrics
                            ({name: {mean, ci_low, ci_high}}), tool calls and shares, latency, tokens, cost,
                            run (the identity again), attribution (ark.analysis.attribution's summary)
      per_query.csv         one row per selected query: status, metrics, tokens, tool calls
      trajectory_stats.csv  one row per (query, agent): tool calls, the agent's own hit@5 and recall@20
      attribution.csv       one row per (query, gold node): where it was found or lost (ark.analysis.attribution)
      shards/<i>-of-<n>/    shard runs, each a run directory itself (``ark merge``)
      batch/pending.json    batch mode only, while a batch is out: its id, input file, custom ids (the
                            requests' LLM cache keys) and its reservation in the ledgers; a rerun
                            re-attaches to it (ark.llm.batch)

Records are read through tolerant accessors (`status`, `gold`, `ranking`, `agent_rankings`,
`query_metrics`): keys added later are optional and missing ones fall back to what older runs wrote.

    run = RunDir("results/runs/ablation/prime/ark-gpt-4.1-t20_n3-full_test-0.1")
    run.info["ablation"], run.complete, run.metric_means()["hit@1"]
    for rec in run.records():
        trajs = run.trajectories(rec)          # list of dicts (Trajectory.to_json())
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterable, Iterator
from functools import cached_property
from pathlib import Path
from typing import Any

from ark import atomic

RUN_INFO = "run.json"
CONFIG = "config.yaml"
PREDICTIONS = "predictions.jsonl"
TRAJ_DIR = "trajectories"
METRICS_FILE = "metrics.json"
PER_QUERY = "per_query.csv"
TRAJECTORY_STATS = "trajectory_stats.csv"
ATTRIBUTION = "attribution.csv"
SHARDS = "shards"
LOCK_FILE = "run.lock"
BATCH_DIR = "batch"   # batch mode: pending.json, the batch the run waits for (ark.llm.batch)
IDENTITY_KEYS = ("experiment", "graph", "retriever", "backbone", "budget", "ablation", "t_max", "n_agents",
                 "agent_options", "split", "run_name")


# ------------------------------------------------------------------------------ record accessors
class RunDirInUse(RuntimeError):
    """Another process is writing the run directory (it holds ``run.lock``)."""


_held_locks: dict[Path, list] = {}   # run dir -> [fd, depth]: this process's locks (re-entrant)


@contextlib.contextmanager
def run_lock(run_dir: Path | str):
    """Hold ``<run_dir>/run.lock`` (creating the directory) for as long as the block runs.

    A second process that asks for the same directory gets `RunDirInUse` at once, naming the holder's
    pid; the lock dies with its process (``flock``), so a kill -9 leaves no stale lock. Re-entrant
    within one process (``ark.config.evaluation`` takes it before writing ``run.json``, then the runner)."""
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



def key(query_id: Any) -> str:
    """The string a query id is matched by (ids are ints for STaRK, may be strings elsewhere)."""
    return str(query_id)


def status(rec: dict | None) -> str:
    """"ok", "degraded", "failed" (or any newer status the runner writes); "missing" for no record."""
    return "missing" if rec is None else str(rec.get("status", "ok"))


def gold(rec: dict) -> list[int]:
    return [int(g) for g in rec.get("gold") or []]


def ranking(rec: dict) -> list[int]:
    return [int(i) for i in rec.get("ranking") or []]


def agent_rankings(rec: dict) -> list[list[int]]:
    return [[int(i) for i in r] for r in rec.get("agent_rankings") or []]


def query_metrics(rec: dict) -> dict[str, float]:
    """The record's per-query metrics ({} for failed queries)."""
    return dict(rec.get("metrics") or {})


def tool_counts(rec: dict) -> list[dict[str, int]]:
    return [dict(t) for t in rec.get("tool_counts") or []]


def read_predictions(path: Path | str, on_skip=None) -> dict[str, dict]:
    """query-id key -> the latest record of a ``predictions.jsonl``. Lines that are not records
    (unreadable JSON from a kill mid-write, or JSON without a query id) are skipped; ``on_skip(path,
    line_number, line)`` is told about each."""
    records: dict[str, dict] = {}
    path = Path(path)
    if not path.exists():
        return records
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                rec = None
            if isinstance(rec, dict) and "query_id" in rec:
                records[key(rec["query_id"])] = rec
            elif on_skip is not None:
                on_skip(path, n, line)
    return records


def run_label(info: dict) -> str:
    """How tables and figures name a run, from its identity (run.json, `RunDir.info`): a baseline by its
    retriever in capitals (``BM25``, ``DENSE``, ``HYBRID``); ARK as ``ARK + <backbone> (<budget>,
    <ablation>)``, with ``<search>-<encoder>`` added in the parentheses when the agent's search is not
    the paper's lexical one, e.g. ``ARK + gpt-4.1 (t20_n3, full)``, ``ARK + gpt-4.1 (t20_n3, full,
    hybrid-minilm)``. Two runs of one experiment and graph with different run names get different labels."""
    retriever = info.get("retriever")
    if retriever != "ark":
        return str(retriever if retriever is not None else "?").upper()
    parts = [str(info.get("budget")), str(info.get("ablation"))]
    if info.get("search") not in (None, "lexical"):
        parts.append(f"{info['search']}-{info.get('encoder')}")
    return f"ARK + {info.get('backbone')} ({', '.join(parts)})"


def is_run_dir(path: Path | str) -> bool:
    return (Path(path) / PREDICTIONS).is_file()


def find_run_dirs(paths: Iterable[Path | str]) -> list[Path]:
    """Every run directory at or below ``paths``, sorted; shard directories are left out when their
    merged parent is there. A path that does not exist is an error naming it."""
    found: set[Path] = set()
    for p in map(Path, paths):
        if not p.exists():
            raise FileNotFoundError(f"run dir or folder {str(p)!r} does not exist")
        if is_run_dir(p):
            found.add(p)
        found.update(f.parent for f in p.rglob(PREDICTIONS))
    return sorted(d for d in found if not (d.parent.name == SHARDS and is_run_dir(d.parent.parent)))


class RunDir:
    """Read access to one run directory. Files are read on first use and kept."""

    def __init__(self, path: Path | str):
        self.path = Path(path)
        if not is_run_dir(self.path):
            raise FileNotFoundError(f"{self.path} is not a run directory: no {PREDICTIONS} "
                                    f"(expected results/runs/<experiment>/<graph>/<run>/)")

    def __repr__(self) -> str:
        return f"RunDir({str(self.path)!r})"

    # ---------------------------------------------------------------- files
    @cached_property
    def config(self) -> dict:
        """config.yaml as plain data ({} when absent)."""
        f = self.path / CONFIG
        if not f.is_file():
            return {}
        import yaml

        return yaml.safe_load(f.read_text(encoding="utf-8")) or {}

    @cached_property
    def metrics(self) -> dict:
        """metrics.json ({} when absent or unreadable)."""
        f = self.path / METRICS_FILE
        try:
            return json.loads(f.read_text(encoding="utf-8")) if f.is_file() else {}
        except json.JSONDecodeError:
            return {}

    @cached_property
    def info(self) -> dict:
        """The run's identity (`IDENTITY_KEYS`): run.json, else metrics.json["run"], else the config's
        group names, else the path (<experiment>/<graph>/<retriever>-... or <retriever>_<split>). Values may be None."""
        info: dict = {}
        f = self.path / RUN_INFO
        if f.is_file():
            info = json.loads(f.read_text(encoding="utf-8"))
        elif self.path.parent.name == SHARDS and (self.path.parent.parent / RUN_INFO).is_file():
            info = json.loads((self.path.parent.parent / RUN_INFO).read_text(encoding="utf-8"))
        info = {**(self.metrics.get("run") or {}), **info}
        cfg = self.config

        def group(name: str):
            v = cfg.get(name)
            return v.get("name") if isinstance(v, dict) else v

        from ark.agent import OPTIONS as AGENT_OPTIONS

        agent = (cfg.get("budget") or {}).get("agent") or {} if isinstance(cfg.get("budget"), dict) else {}
        fallback = {
            "experiment": cfg.get("experiment_name") or self.path.parent.parent.name,
            "graph": group("graph") or self.path.parent.name,
            "retriever": group("retriever") or self.path.name.split("-")[0].split("_")[0],   # bm25_test, ark-...
            "backbone": group("backbone"), "budget": group("budget"), "ablation": group("ablation"),
            "t_max": agent.get("t_max"), "n_agents": agent.get("n_agents"),
            "agent_options": (",".join(k for k in AGENT_OPTIONS if agent.get(k)) or "none") if agent else None,
            "split": cfg.get("split"), "run_name": self.path.name,
        }
        for k, v in fallback.items():
            if info.get(k) is None:
                info[k] = v
        return info

    def _records_map(self) -> dict[str, dict]:
        if "_recs" not in self.__dict__:
            self.__dict__["_recs"] = read_predictions(self.path / PREDICTIONS)
        return self.__dict__["_recs"]

    def records(self, status_filter: str | None = None) -> list[dict]:
        """The latest record per query, in first-written order; ``status_filter="ok"`` keeps those."""
        recs = list(self._records_map().values())
        return recs if status_filter is None else [r for r in recs if status(r) == status_filter]

    def record(self, query_id) -> dict | None:
        return self._records_map().get(key(query_id))

    def trajectory_path(self, rec: dict) -> Path:
        return self.path / (rec.get("trajectory_file") or f"{TRAJ_DIR}/{rec['query_id']}.json")

    def trajectories(self, rec_or_id) -> list[dict]:
        """The query's trajectories as ``Trajectory.to_json()`` dicts ([] when none were written)."""
        rec = rec_or_id if isinstance(rec_or_id, dict) else self.record(rec_or_id)
        if rec is None:
            return []
        f = self.trajectory_path(rec)
        if not f.is_file():
            return []
        data = json.loads(f.read_text(encoding="utf-8"))
        return data if isinstance(data, list) else [data]

    def iter_trajectories(self, status_filter: str | None = "ok") -> Iterator[tuple[dict, list[dict]]]:
        """(record, trajectories) for every query (ok ones by default)."""
        for rec in self.records(status_filter):
            yield rec, self.trajectories(rec)

    def agent_trajectories(self, agent_index: int = 0) -> dict[str, dict]:
        """{query key: that agent's trajectory} over the ok queries that hold one (`ark.analysis.imitation`)."""
        out = {}
        for rec, trajs in self.iter_trajectories("ok"):
            mine = [t for t in trajs if int(t.get("agent_index", 0)) == agent_index]
            if mine:
                out[key(rec["query_id"])] = mine[0]
        return out

    # ---------------------------------------------------------------- summary values
    @property
    def complete(self) -> bool:
        """What metrics.json says; a run without one is not complete."""
        return bool(self.metrics.get("complete", False))

    @property
    def split(self) -> str | None:
        return self.info.get("split")

    def metric_means(self) -> dict[str, float]:
        """{metric: mean} from metrics.json (keys like ``test/hit@1`` lose the split prefix); without
        metrics.json, the mean over the ok records."""
        out = {}
        for k, v in (self.metrics.get("metrics") or {}).items():
            out[k.split("/")[-1]] = v.get("mean") if isinstance(v, dict) else v
        if not out:
            ok = self.records("ok")
            names = {n for r in ok for n in query_metrics(r)}
            out = {n: sum(query_metrics(r).get(n, 0.0) or 0.0 for r in ok) / len(ok) for n in sorted(names)} \
                if ok else {}
        return out

    def metric_cis(self) -> dict[str, tuple[float, float, float]]:
        """{metric: (mean, ci_low, ci_high)} from metrics.json (NaN bounds where not given)."""
        out = {}
        for k, v in (self.metrics.get("metrics") or {}).items():
            if isinstance(v, dict):
                out[k.split("/")[-1]] = (v.get("mean", float("nan")), v.get("ci_low", float("nan")),
                                         v.get("ci_high", float("nan")))
        return out

    def per_query_metric(self, name: str, include_failed: bool = False) -> dict[str, float]:
        """query key -> the metric of each ok query (failed ones as 0.0 with ``include_failed``)."""
        out = {}
        for r in self.records():
            if status(r) == "ok":
                out[key(r["query_id"])] = float(query_metrics(r).get(name, 0.0) or 0.0)
            elif include_failed:
                out[key(r["query_id"])] = 0.0
        return out

    def fusion_settings(self) -> tuple[int | None, str]:
        """(fuse_top, tie_break) of the run's agent config (defaults of ark.agent.AgentConfig)."""
        budget = self.config.get("budget")
        agent = budget.get("agent") if isinstance(budget, dict) else None
        agent = agent if isinstance(agent, dict) else {}
        return agent.get("fuse_top"), agent.get("tie_break", "list")

    def update_metrics(self, **fields: Any) -> dict:
        """Merge ``fields`` into metrics.json (written atomically) and return the new summary."""
        m = dict(self.metrics)
        m.update(fields)
        atomic.write_json(self.path / METRICS_FILE, m)
        self.__dict__["metrics"] = m
        return m
