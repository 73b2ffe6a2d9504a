"""A run's spending as the runner shows and keeps it: the progress bar's forecast and sweep spend, the
queries the spending cap cut short, and the summary's spend fields.

The runner (`ark.run.runner`) gets the run's `ark.cost.cap.Budget` and forecast through
`ark.run.settings.RunSettings` (``budget``, ``forecast``). A query whose agent was refused a call at
the cap (`cut_by_budget`) is not recorded: its paid replies are in the LLM cache and the next run
computes it again from them. Once the budget is exhausted no new query starts, and `apply` marks the
summary: ``complete`` false, ``status`` "incomplete", ``stop_reason`` "budget" and a warning that says
how to go on. With a budget or a forecast the summary also holds (top level, as `ark.run.logger`
sends them to W&B) ``budget_usd`` (the cap, when set), ``forecast_usd`` (what the run was forecast to
pay when it started), ``paid_usd`` (what the run paid over all its attempts, from its ledger),
``paid_this_run_usd``, ``sweep_paid_usd`` in a sweep, and ``forecast`` (the forecast's numbers).

    summary = apply(summary, settings, cut=3)
"""

from __future__ import annotations

from typing import Any

from ark.cost.cap import stopped_by_budget
from ark.cost.prices import money


def cut_by_budget(retrieval: Any, error: str | None) -> bool:
    """Whether a query's result was cut short by the spending cap (one of its agents was refused a call)."""
    if stopped_by_budget(error):
        return True
    return any(stopped_by_budget(getattr(t, "error", None)) for t in getattr(retrieval, "trajectories", None) or [])


def bar_fields(settings) -> dict[str, str]:
    """The progress bar's spend fields beside its ``usd`` (what the finished queries' replies cost, the
    cached ones too): what this run has paid now (``paid``), the forecast of what it pays in all
    (``forecast``, or ``worst`` when the forecast is the worst case of its settings: nothing measured)
    and the sweep's spend so far, over its cap when it has one (``sweep``)."""
    budget, fc = settings.budget, settings.forecast
    out = {}
    if budget is not None:
        out["paid"] = money(budget.paid)
    if fc is not None and fc.get("usd") is not None:
        out["worst" if fc.get("basis") == "worst case" else "forecast"] = money(fc["usd"])
    if budget is not None and budget.sweep is not None:
        out["sweep"] = money(budget.sweep.total()) + (f"/{money(budget.cap_usd)}" if budget.cap_usd is not None else "")
    elif budget is not None and budget.cap_usd is not None:
        out["cap"] = money(budget.cap_usd)
    return out


def apply(summary: dict, settings, cut: int = 0) -> dict:
    """The summary with the run's spend fields and, when the cap stopped it, its stop reason (module doc)."""
    budget, fc = settings.budget, settings.forecast
    if budget is None and fc is None:
        return summary
    if fc is not None:
        summary["forecast_usd"] = fc.get("usd")
        summary["forecast"] = dict(fc)
    if budget is None:
        return summary
    if budget.cap_usd is not None:
        summary["budget_usd"] = budget.cap_usd
    summary["paid_usd"] = budget.run.total() if budget.run is not None else budget.paid
    summary["paid_this_run_usd"] = budget.paid
    if budget.sweep is not None:
        summary["sweep_paid_usd"] = budget.sweep.total()
    if budget.exhausted:
        summary.update(complete=False, status="incomplete", stop_reason="budget")
        left = summary.get("n_missing", 0)
        summary["warning"] = (f"INCOMPLETE (budget): {budget.why()}. {left} of {summary.get('n', 0)} queries are "
                              f"not done ({cut} cut short at the cap); the metrics cover the {summary.get('n_ok', 0)} "
                              "complete ones")
    return summary
