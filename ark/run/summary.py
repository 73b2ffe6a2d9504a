"""A run's summary: ``metrics.json``, ``per_query.csv`` and ``trajectory_stats.csv``, from its
``predictions.jsonl``, and ``attribution.csv`` (`write_attribution`: `ark.analysis.attribution` of its
records and trajectories).

Summary (``metrics.json``): n, n_ok, n_degraded, n_failed, n_missing, complete, status, agents
{ok, failed}, metrics {name: mean, ci_low, ci_high, n; under metrics_mode=authors also n_left_out}, tool calls and shares, neighbor calls per
trajectory, latency, tokens, cost, answered_models (agent runs: {model: LLM replies}, as the provider
named itself), failed_queries, degraded_queries, run (the caller's ``extra``), attribution, warning/note; the runner adds this_run {computed, skipped, wall_s,
bookkeeping_s_per_query, trajectories_rebuilt}.

The summary's ``status`` is "complete" (every query ok), "degraded" (nothing missing or failed, some
degraded) or "incomplete"; ``complete`` is true only for "complete". ``count_failed_as_miss=true``
scores failed and degraded queries as all-zero misses and calls the run complete (the summary's
``note`` says how many). A run or sweep that ends with a run not complete exits with `INCOMPLETE_EXIT`
(``ark run``, ``python experiments/run.py``, ``ark table1 --reproduce``; `ark.config.evaluation`), so a
script or scheduler can tell it from a finished one (0) and from one refused before it started (2). Tool columns come from `ark.tools.registry` (`tool_columns`).

    summary = write_summary(run_dir, queries, settings)     # re-score a run directory
"""

from __future__ import annotations

import csv
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np

from ark import atomic
from ark.analysis import attribution
from ark.analysis.metrics import aggregate, as_candidates, authors_aggregate
from ark.run import rundir
from ark.run.records import (AGENT_METRICS, SUCCESS_METRIC, agent_list, load_predictions, score)
from ark.run.rundir import METRICS_FILE, PER_QUERY, PREDICTIONS, TRAJECTORY_STATS
from ark.run.rundir import key as _key
from ark.run.settings import RunSettings
from ark.tools import default_graph_tool_names
from ark.tools import registry as tool_registry

INCOMPLETE_EXIT = 3   # exit status of a run or sweep that ended with a run not complete (cap, failed queries)

NEIGHBOR_KIND = "relational"  # Figure 5 counts the calls of the tools of this kind per trajectory


def _scored_records(run_dir: Path, queries: Sequence, settings: RunSettings):
    records = load_predictions(run_dir)
    selected = [(q, records.get(_key(q.id))) for q in queries]
    return selected


def tool_columns(tool_counts: Iterable[dict] = ()) -> list[str]:
    """The graph tools counted in run statistics, in the registry's order: those of the default toolset
    (`ark.tools.default_graph_tool_names`, counted in every run, 0 where a run left one out) and
    every other registered graph tool that one of ``tool_counts`` (per-agent ``{tool: calls}``) called,
    such as an opt-in tool a run offered. Calls of names the registry does not know, such as a tool the
    model made up, are not counted."""
    called = {name for counts in tool_counts for name, n in counts.items() if n}
    default = set(default_graph_tool_names())
    return [n for n in tool_registry.graph_tool_names() if n in default or n in called]


def _neighbor_calls(counts: dict) -> int:
    return int(sum(counts.get(n, 0) for n in tool_registry.names_of_kind(NEIGHBOR_KIND)))


def per_query_rows(run_dir: Path | str, queries: Sequence, settings: RunSettings, pairs=None) -> list[dict]:
    """One flat row per selected query (missing ones included, status "missing"), with one column of
    call counts per graph tool (`tool_columns`). ``pairs``: ``(query, record or None)`` of ``queries``,
    when the caller has read the records already."""
    rows = []
    if pairs is None:
        pairs = _scored_records(Path(run_dir), queries, settings)
    tools = tool_columns(tc for _, rec in pairs if rec is not None for tc in rec.get("tool_counts", []))
    for q, rec in pairs:
        status = "missing" if rec is None else rec["status"]
        m = rec["metrics"] if rec is not None and status == "ok" else {}
        tc = rec.get("tool_counts", []) if rec is not None else []
        row = {"query_id": q.id, "status": status}
        row.update({n: m.get(n, "") for n in settings.metrics})
        row.update(
            latency_s=rec.get("latency_s", "") if rec else "",
            prompt_tokens=rec.get("prompt_tokens", 0) if rec else 0,
            completion_tokens=rec.get("completion_tokens", 0) if rec else 0,
            cost_usd=rec.get("cost_usd", 0.0) if rec else 0.0,
            n_agents=len(tc),
            **{name: sum(t.get(name, 0) for t in tc) for name in tools},
            neighbor_calls_per_agent=";".join(str(_neighbor_calls(t)) for t in tc),
            n_gold=len(q.answer_ids),
            error=(rec.get("error") or "") if rec else "",
        )
        rows.append(row)
    return rows


def _write_csv(path: Path, rows: list[dict]) -> None:
    with atomic.open_text(path, newline="") as f:
        if rows:
            w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
            w.writeheader()
            w.writerows(rows)


def _stats(values: Sequence[float]) -> dict[str, float]:
    if not values:
        return {}
    x = np.asarray(values, dtype=float)
    return {"mean": float(x.mean()), "median": float(np.median(x)), "p90": float(np.quantile(x, 0.9)),
            "max": float(x.max()), "sum": float(x.sum())}


def _aggregate(per_query: list[dict], not_ok: int, settings: RunSettings) -> dict:
    """The summary's means and CIs: under ``metrics_mode="authors"`` the authors' average, which leaves the
    queries that did not finish ok out and counts them (``n_left_out``; `authors_aggregate`), unless
    ``count_failed_as_miss`` already scored them as misses."""
    if settings.metrics_mode == "authors" and not settings.count_failed_as_miss:
        return authors_aggregate([*per_query, *[None] * not_ok], n_boot=settings.n_boot, seed=settings.seed)
    return aggregate(per_query, n_boot=settings.n_boot, seed=settings.seed)


def summarize(run_dir: Path | str, queries: Sequence, settings: RunSettings, candidate_ids=None,
              attributed: Mapping[str, attribution.QueryAttribution] | None = None) -> dict:
    """Build the run's summary from predictions.jsonl and write per_query.csv and trajectory_stats.csv.

    Scores only the ``queries`` given (the run's selection). Agent-level success (for the
    neighborhood-call histogram) uses each agent's own list scored like the fused one. ``attributed``:
    the attributions of queries already made (`attribute_record`, by `ark.run.rundir.key` of their id;
    the runner's, of the queries it computed), so their trajectory files are not read again.
    """
    run_dir = Path(run_dir)
    cands = as_candidates(candidate_ids)
    pairs = _scored_records(run_dir, queries, settings)
    ok = [r for _, r in pairs if r is not None and r["status"] == "ok"]
    failed = [r for _, r in pairs if r is not None and r["status"] == "failed"]
    degraded = [r for _, r in pairs if r is not None and r["status"] == "degraded"]
    n_missing = sum(r is None for _, r in pairs)
    per_query = [r["metrics"] for r in ok]
    if settings.count_failed_as_miss:
        per_query += [dict.fromkeys(settings.metrics, 0.0) for _ in failed + degraded]
    complete = n_missing == 0 and (not (failed or degraded) or settings.count_failed_as_miss)
    state = "complete" if complete else ("degraded" if degraded and not failed and not n_missing else "incomplete")
    agent_status = Counter(a.get("status", "ok") for r in ok + degraded + failed for a in r.get("agents", []))

    tools = tool_columns(tc for _, rec in pairs if rec is not None for tc in rec.get("tool_counts", []))
    tool_totals: Counter = Counter()
    hist = {"success": Counter(), "failure": Counter()}
    traj_rows = []
    for rec in ok:
        gold = rec["gold"]
        for a, tc in enumerate(rec.get("tool_counts", [])):
            tool_totals.update(tc)
            stored = rec.get("agent_metrics")
            if stored is not None and a < len(stored):
                am = stored[a]
            else:  # records written before agent metrics were stored
                agent_rank = rec["agent_rankings"][a] if a < len(rec["agent_rankings"]) else []
                am = score(agent_list(agent_rank, settings, cands), gold, cands, AGENT_METRICS, settings)
            nb = _neighbor_calls(tc)
            hist["success" if am[SUCCESS_METRIC] > 0 else "failure"][nb] += 1
            traj_rows.append({"query_id": rec["query_id"], "agent_index": a,
                              **{name: int(tc.get(name, 0)) for name in tools},
                              f"agent_{SUCCESS_METRIC}": am[SUCCESS_METRIC],
                              "agent_recall@20": am["recall@20"],
                              f"fused_{SUCCESS_METRIC}": rec["metrics"].get(SUCCESS_METRIC, "")})
    total_calls = sum(tool_totals[t] for t in tools)
    attempted = ok + degraded + failed
    own_scores = any(r.get("scores") is not None for r in attempted)
    summary = {
        "n": len(pairs), "n_ok": len(ok), "n_degraded": len(degraded), "n_failed": len(failed),
        "n_missing": n_missing, "complete": complete, "status": state,
        "agents": {"ok": agent_status["ok"], "failed": agent_status["failed"]},
        "count_failed_as_miss": settings.count_failed_as_miss,
        "metrics_mode": settings.metrics_mode, "top": settings.top, "cut": settings.cut,
        # the behaviour the records' own scores were ranked by; none where no record has scores of its own
        # (ARK's votes are ranked by stark_scores, on which both behaviours agree: `ranks_own_scores`)
        "torchmetrics": settings.torchmetrics if settings.metrics_mode == "stark_qa" and own_scores else None,
        "n_boot": settings.n_boot,
        "seed": settings.seed,
        "metrics": _aggregate(per_query, len(failed) + len(degraded), settings),
        "tool_calls": {t: int(tool_totals[t]) for t in tools},
        "tool_share": {t: (tool_totals[t] / total_calls if total_calls else 0.0) for t in tools},
        "neighbor_calls_per_trajectory": {k: {str(c): n for c, n in sorted(v.items())} for k, v in hist.items()},
        "latency_s": _stats([r["latency_s"] for r in ok]),
        "tokens": {"prompt": sum(r.get("prompt_tokens", 0) for r in attempted),
                   "completion": sum(r.get("completion_tokens", 0) for r in attempted)},
        "cost_usd": float(sum(r.get("cost_usd", 0.0) for r in attempted)),
        "failed_queries": [{"query_id": r["query_id"], "error": r.get("error")} for r in failed][:100],
        "degraded_queries": [{"query_id": r["query_id"], "error": r.get("error")} for r in degraded][:100],
        "run": dict(settings.extra),
    }
    summary["tokens"]["total"] = summary["tokens"]["prompt"] + summary["tokens"]["completion"]
    models: Counter = Counter()
    for r in attempted:
        models.update(r.get("models") or {})
    if models:   # the models the provider answered with, over every LLM reply of the recorded queries
        summary["answered_models"] = dict(sorted(models.items()))
    if not complete:
        summary["warning"] = (f"{state.upper()}: {len(failed)} failed, {len(degraded)} degraded (some of their "
                              f"agents failed) and {n_missing} missing of {len(pairs)} queries; the metrics "
                              f"cover the {len(ok)} complete ones. Rerun the same command to retry them (the "
                              "LLM cache answers every call already made), or set count_failed_as_miss=true "
                              "to score them as misses")
    elif degraded or failed:
        summary["note"] = (f"{len(failed)} failed and {len(degraded)} degraded queries are scored as misses "
                           "(count_failed_as_miss=true)")
    _write_csv(run_dir / PER_QUERY, per_query_rows(run_dir, queries, settings, pairs))
    _write_csv(run_dir / TRAJECTORY_STATS, traj_rows)
    if (run_dir / PREDICTIONS).exists():
        summary["attribution"] = write_attribution(run_dir, records=ok, update_metrics=False,
                                                   attributed=attributed)
    return summary


def write_summary(run_dir: Path | str, queries: Sequence, settings: RunSettings, candidate_ids=None) -> dict:
    """`summarize` and write metrics.json (for merged or re-scored runs)."""
    summary = summarize(run_dir, queries, settings, candidate_ids)
    atomic.write_json(Path(run_dir) / METRICS_FILE, summary)
    return summary


# ------------------------------------------------------------------------------ attribution.csv
def attribute_record(rec: dict, trajectories: Sequence = (), top: int = attribution.TOP, tie_break: str = "list"
                     ) -> attribution.QueryAttribution:
    """`attribute` for one predictions.jsonl record and its trajectories."""
    return attribution.attribute(rundir.gold(rec), trajectories, rundir.agent_rankings(rec), rundir.ranking(rec),
                     query_id=rec.get("query_id"), top=top, tie_break=tie_break)


def attribute_run(run: rundir.RunDir | Path | str, top: int = attribution.TOP, records: Iterable[dict] | None = None,
                  attributed: Mapping[str, attribution.QueryAttribution] | None = None
                  ) -> list[attribution.QueryAttribution]:
    """Attribution of every query of a run (or of ``records``) that did not fail outright (a query
    whose agents partly failed still has their trajectories and ranking), with the run's fusion
    tie-break; ``attributed``: those already made, by `ark.run.rundir.key` of the query id (made with
    the same ``top`` and tie-break), taken as they are."""
    run = run if isinstance(run, rundir.RunDir) else rundir.RunDir(run)
    _, tie_break = run.fusion_settings()
    recs = [r for r in (run.records() if records is None else records) if rundir.status(r) != "failed"]
    known = attributed or {}
    return [known.get(_key(rec.get("query_id"))) or
            attribute_record(rec, run.trajectories(rec), top=top, tie_break=tie_break) for rec in recs]


def write_attribution_csv(path: Path | str, table: list[dict]) -> None:
    with atomic.open_text(path, newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(attribution.ROW_FIELDS))
        w.writeheader()
        w.writerows({k: ("" if r.get(k) is None else r.get(k)) for k in attribution.ROW_FIELDS} for r in table)


def write_attribution(run: rundir.RunDir | Path | str, top: int = attribution.TOP, records: Iterable[dict] | None = None,
          update_metrics: bool = True, attributed: Mapping[str, attribution.QueryAttribution] | None = None) -> dict:
    """Attribute a run (its queries that did not fail, or those of ``records``; ``attributed``: as in
    `attribute_run`): write ``attribution.csv`` and, when metrics.json exists and ``update_metrics``,
    its "attribution" summary. Returns the summary."""
    run = run if isinstance(run, rundir.RunDir) else rundir.RunDir(run)
    attributions = attribute_run(run, top, records, attributed)
    write_attribution_csv(run.path / rundir.ATTRIBUTION, attribution.rows(attributions))
    summary = attribution.summarize(attributions, top)
    if update_metrics and (run.path / rundir.METRICS_FILE).is_file():
        run.update_metrics(attribution=summary)
    return summary
