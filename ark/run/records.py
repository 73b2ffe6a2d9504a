"""A query's record: the line of ``predictions.jsonl`` the runner appends when the query finishes,
how it is built and scored, and how the records are read back.

Record format (one JSON object per line of ``predictions.jsonl``; the last line of a query id wins;
a line that is not such an object is skipped with a warning and its query recomputed):

    query_id, query, gold            the query and its gold node ids
    status                           "ok" | "degraded" | "failed" (`STATUSES`)
    error                            null, or why (for degraded: which agents failed and how)
    ranking                          the scored list: the fused ranking (ARK) or the retriever's list
                                     (baselines), cut to ``top`` (kept for degraded/failed too); under
                                     ``metrics_mode="authors"`` the authors' whole fused list (`scored_ranking`)
    scores                           the retriever's own score of each entry of ``ranking``
                                     (``Retrieval.scores``: BM25, cosine, RRF), what stark_qa mode ranks by;
                                     absent where the ranking has no scores (ARK's votes, which stark_qa
                                     mode scores with `ark.analysis.metrics.stark_scores`) and in records
                                     written before scores were stored (scored the same way)
    agent_rankings                   each agent's own ordered selections
    agents                           per agent: {agent, status ("ok"|"failed"), stop_reason, error,
                                     selected, steps}; an agent whose trajectory stopped with
                                     stop_reason "error" failed, and its selections so far are kept
    metrics                          scores of ``ranking`` (ok only; {} otherwise)
    partial_metrics                  degraded only: scores of the fused list of the surviving agents
    agent_metrics                    per agent: hit@5, recall@20 of its own list (ok and degraded)
    latency_s, prompt_tokens, completion_tokens, cost_usd, tool_counts (per agent), trajectory_file
    models                           {model: calls}: the model each LLM reply names (what the provider
                                     answered with, e.g. gpt-4.1-2025-04-14); agent runs only

A retriever's NaN score fails its query (the error names the node; `ark.analysis.metrics.NaNScoreError`),
and the run goes on.

Scoring policy: the headline metrics average the ``ok`` queries only. A query with a failed agent is
"degraded" (its fused list comes from fewer than n agents, which is not the method being measured)
and is retried by the next run like a failed one (`ark.run.summary` says how a run with such
queries is reported).

    ranking, scores = scored_ranking(retrieval, settings, candidates)
    rec = build_record(query, ranking, retrieval, wall_s, error, settings, candidates, scores)
    records = load_predictions(run_dir)          # query-id key -> latest record
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from ark.analysis.metrics import (CandidateSet, NaNScoreError, authors_fuse, evaluate, scored_list,
                                  scored_list_and_scores)
from ark.run.rundir import PREDICTIONS, TRAJ_DIR, read_predictions
from ark.run.settings import RunSettings

log = logging.getLogger(__name__)

STATUSES = ("ok", "degraded", "failed")
SUCCESS_METRIC = "hit@5"   # what makes a trajectory "successful" in the paper's Figure 5
AGENT_METRICS = (SUCCESS_METRIC, "recall@20")  # scored per agent, for Figure 5 and trajectory_stats.csv


def _is_record(rec: object) -> bool:
    """A line of predictions.jsonl that a reader can use: a dict with a query id and a known status."""
    return isinstance(rec, dict) and "query_id" in rec and rec.get("status") in STATUSES


def load_predictions(run_dir: Path | str) -> dict[str, dict]:
    """query-id key -> latest record in ``predictions.jsonl``.

    A line that is not a record (torn by a kill, or valid JSON such as ``null`` or ``{"status": "ok"}``
    that lacks a query id or a known status) is skipped with a warning; its query counts as missing,
    so a resume computes it again."""
    def skipped(path: Path, n: int, line: str) -> None:
        log.warning("%s line %d is not a query record; skipped (its query is computed again): %.80s",
                    path, n, line)

    records = read_predictions(Path(run_dir) / PREDICTIONS, on_skip=skipped)
    for k in [k for k, r in records.items() if not _is_record(r)]:
        skipped(Path(run_dir) / PREDICTIONS, 0, json.dumps(records.pop(k)))
    return records


def score(ranking, gold, cands, metrics, settings: RunSettings, scores=None) -> dict[str, float]:
    """``metrics`` of one ranking against ``gold``, as the run scores (metrics mode, torchmetrics semantics).
    ``scores``: the retriever's own score of each ranked id, which stark_qa mode ranks by (None: the
    list's `ark.analysis.metrics.stark_scores`, as for ARK's votes and records that stored none)."""
    return evaluate(ranking, gold, cands, metrics, settings.metrics_mode, scores=scores,
                    torchmetrics=settings.torchmetrics)


def scored_ranking(retrieval, settings: RunSettings, cands: CandidateSet | None) -> tuple[list[int], list[float] | None]:
    """The list a query's record holds and scores, with the retriever's own score of each entry (None
    where it has none): the retriever's ranking cut to ``top`` (stripped of non-candidates first with
    ``cut="candidates_first"``; `ark.analysis.metrics.scored_list_and_scores`), or, under ``metrics_mode="authors"``, the whole list
    the authors' evaluation scores (the agents' lists fused by `ark.analysis.metrics.authors_fuse`, uncut; a
    baseline's own list as it is; no scores, the authors' protocol ranks by list order)."""
    if retrieval is None:
        return [], None
    if settings.metrics_mode == "authors":
        agents = getattr(retrieval, "agent_rankings", None) or []
        return (authors_fuse(agents) if agents else [int(i) for i in getattr(retrieval, "ranking", None) or []]), None
    return scored_list_and_scores(getattr(retrieval, "ranking", None) or [], getattr(retrieval, "scores", None),
                                  settings.top, cands, settings.cut)


def agent_list(ranking, settings: RunSettings, cands: CandidateSet | None) -> list[int]:
    """An agent's own list as the run scores it: cut like the fused one (`scored_list`), or whole under
    ``metrics_mode="authors"``."""
    if settings.metrics_mode == "authors":
        return [int(i) for i in ranking]
    return scored_list(ranking, settings.top, cands, settings.cut)


def _agent_entries(trajectories: list, agent_rankings: list[list[int]]) -> list[dict]:
    """One entry per agent: status ("failed" when its trajectory stopped with ``stop_reason ==
    "error"``), stop reason, error, its selections (kept also when it failed) and its step count."""
    out = []
    for i, t in enumerate(trajectories):
        stop = getattr(t, "stop_reason", None)
        selected = getattr(t, "selected", None)
        if selected is None:
            selected = agent_rankings[i] if i < len(agent_rankings) else []
        out.append({"agent": int(getattr(t, "agent_index", i)), "status": "failed" if stop == "error" else "ok",
                    "stop_reason": stop, "error": getattr(t, "error", None),
                    "selected": [int(x) for x in selected], "steps": len(getattr(t, "steps", None) or [])})
    return out


def build_record(query, rec_ranking, retrieval, wall_s: float, error: str | None, settings: RunSettings,
                 cands: CandidateSet | None, scores: list[float] | None = None) -> dict:
    """The query's line of predictions.jsonl (format in the module docstring). ``scores``: the
    retriever's own score of each entry of ``rec_ranking`` (`scored_ranking`), stored and scored with it."""
    gold = [int(g) for g in query.answer_ids]
    qid = query.id
    rec: dict[str, Any] = {"query_id": qid, "query": query.text, "status": "failed" if error else "ok",
                           "error": error, "gold": gold}
    if retrieval is None:
        rec.update(ranking=[], agent_rankings=[], agents=[], metrics={}, latency_s=wall_s, prompt_tokens=0,
                   completion_tokens=0, cost_usd=0.0, tool_counts=[], trajectory_file=None)
        return rec
    trajectories = list(getattr(retrieval, "trajectories", None) or [])
    agent_rankings = [[int(i) for i in r] for r in (getattr(retrieval, "agent_rankings", None) or [])]
    agents = _agent_entries(trajectories, agent_rankings)
    failed_agents = [a for a in agents if a["status"] == "failed"]
    if error is None and failed_agents:
        rec["status"] = "degraded" if len(failed_agents) < len(agents) else "failed"
        rec["error"] = f"{len(failed_agents)} of {len(agents)} agents failed: " + " | ".join(
            f"agent {a['agent']}: {a['error']}" for a in failed_agents)
    latency = getattr(retrieval, "latency_s", None)
    scored = {}
    if rec["status"] != "failed":
        try:
            scored = score(rec_ranking, gold, cands, settings.metrics, settings, scores)
        except NaNScoreError as e:   # the retriever's ranking is undefined: this query failed, the run goes on
            rec["status"], rec["error"] = "failed", f"{type(e).__name__}: {e}"
    rec.update(
        ranking=rec_ranking,
        **({"scores": [float(x) for x in scores]} if scores is not None else {}),
        agent_rankings=agent_rankings,
        agents=agents,
        metrics=scored if rec["status"] == "ok" else {},
        latency_s=float(latency) if latency else wall_s,
        prompt_tokens=int(getattr(retrieval, "prompt_tokens", 0) or 0),
        completion_tokens=int(getattr(retrieval, "completion_tokens", 0) or 0),
        cost_usd=float(getattr(retrieval, "cost_usd", 0.0) or 0.0),
        tool_counts=[dict(t.tool_counts()) for t in trajectories],
        trajectory_file=f"{TRAJ_DIR}/{qid}.json" if trajectories else None,
    )
    if trajectories:
        rec["models"] = answered_models(trajectories)
    if settings.external_id is not None:  # the ids a person knows the nodes by (tables graphs)
        rec["ranking_external"] = [settings.external_id(i) for i in rec_ranking]
        rec["gold_external"] = [settings.external_id(g) for g in gold]
    if rec["status"] == "degraded":
        rec["partial_metrics"] = scored   # the fused list of fewer agents: kept, never averaged in
    if rec["status"] != "failed":  # each agent's own list, scored like the fused one, while the candidates are at hand
        rec["agent_metrics"] = [
            score(agent_list(r, settings, cands), gold, cands, AGENT_METRICS, settings)
            for r in rec["agent_rankings"]]
    return rec


def answered_models(trajectories: list) -> dict[str, int]:
    """{model: LLM replies}: the ``model`` field of every reply of the trajectories (cached ones too)."""
    counts: dict[str, int] = {}
    for t in trajectories:
        for step in getattr(t, "steps", None) or []:
            model = getattr(getattr(step, "response", None), "model", None)
            if model:
                counts[model] = counts.get(model, 0) + 1
    return dict(sorted(counts.items()))


def trajectory_intact(run_dir: Path, rec: dict) -> bool:
    """A record's trajectory file (when it names one) exists and is not empty."""
    tf = rec.get("trajectory_file")
    if not tf:
        return True
    try:
        return (Path(run_dir) / tf).stat().st_size > 0
    except OSError:
        return False
