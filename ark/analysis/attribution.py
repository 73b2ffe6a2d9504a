"""Failure attribution: where each gold node of a query was found or lost, from trajectories alone.

No LLM calls and no graph: every observation in a trajectory records the node ids it showed
(`Step.node_ids`, written at tool-call time), each agent's answer list is its selection, and the fused
ranking is recomputed with `ark.fusion.fuse` without truncation. For every query and gold node:

* the first step, agent and tool whose observation showed it, and its rank there (1-based; the
  earliest step index over agents, ties to the lower agent, then the earlier call in the step);
* whether an agent selected it, and its best position in an agent's list (1-based);
* its position after fusion (1-based, before truncation) and whether truncation to ``top`` cut it.

Each gold falls in one class (`CLASSES`):

| class                 | meaning                                                                      |
|-----------------------|------------------------------------------------------------------------------|
| retrieved             | in the fused top ``top`` (not a miss)                                        |
| never_surfaced        | no observation of any agent showed it                                        |
| surfaced_not_selected | shown, but no agent selected it                                              |
| selected_fused_out    | some agent had it within its own top ``top``; fusion pushed it below ``top`` |
| beyond_top            | selected, but only below position ``top`` of every agent's list              |

Per query: the steps and tokens spent before the first gold was surfaced, counted on the agent that
surfaced it first, up to and including the step whose tool call showed it (the model's tokens for that
call were spent before the observation came back). A retriever without trajectories (the BM25
baseline) shows its ranking: surfaced means ranked at all, and ``top`` cuts the rest.

    from ark.analysis.attribution import attribute
    qa = attribute(query.answer_ids, retrieval.trajectories, retrieval.agent_rankings, retrieval.ranking)
    [(g.gold, g.cls) for g in qa.golds]

A run directory's ``attribution.csv`` (`rows`) and metrics.json summary (`summarize`) are written by
`ark.run.summary.write_attribution`:

    ark attribute results/runs/<experiment>/<graph>/<run>   # attribution.csv + metrics.json
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from ark.fusion import fuse

TOP = 20  # the cut the paper's R@20 applies
RETRIEVED = "retrieved"
CLASSES = (RETRIEVED, "never_surfaced", "surfaced_not_selected", "selected_fused_out", "beyond_top")
MISS_CLASSES = CLASSES[1:]
CLASS_LABEL = {RETRIEVED: "retrieved (top 20)", "never_surfaced": "never surfaced",
               "surfaced_not_selected": "surfaced, not selected", "selected_fused_out": "selected, fused out",
               "beyond_top": "beyond the top 20"}


@dataclass
class GoldAttribution:
    """Where one gold node of one query was shown, selected and ranked (positions 1-based)."""

    query_id: Any
    gold: int
    cls: str                                 # one of CLASSES
    first_step: int | None = None            # step index (0-based) of the first observation showing it
    first_agent: int | None = None
    first_tool: str | None = None
    first_rank: int | None = None            # its rank in that observation
    n_agents_surfaced: int = 0               # agents that were shown it at least once
    selected: bool = False
    selected_agent: int | None = None        # the agent with the best position
    selected_position: int | None = None     # best position in an agent's list
    n_agents_selected: int = 0
    fused_position: int | None = None        # position in the untruncated fused ranking
    cut_by_truncation: bool = False          # selected, but fused below `top`


@dataclass
class QueryAttribution:
    """All gold nodes of one query, and the cost of reaching the first of them."""

    query_id: Any
    golds: list[GoldAttribution]
    steps_to_first_gold: int | None = None   # steps of the first-surfacing agent, through that step
    tokens_to_first_gold: int | None = None  # prompt + completion tokens of those steps
    total_steps: int = 0                     # steps of all agents
    total_tokens: int = 0                    # tokens of all agents
    n_agents: int = 0
    classes: Counter = field(default_factory=Counter)

    def __post_init__(self) -> None:
        self.classes = Counter(g.cls for g in self.golds)


# ------------------------------------------------------------------------------ one query
def _get(obj, name: str, default=None):
    return obj.get(name, default) if isinstance(obj, dict) else getattr(obj, name, default)


def _tokens(step) -> int:
    return int(_get(step, "prompt_tokens", 0) or 0) + int(_get(step, "completion_tokens", 0) or 0)


def _call_name(call) -> str | None:
    name = _get(call, "name")
    if name is None and isinstance(call, dict):
        name = (call.get("function") or {}).get("name")
    return name


def attribute(gold: Sequence[int], trajectories: Sequence = (), agent_rankings: Sequence[Sequence[int]] | None = None,
              ranking: Sequence[int] | None = None, *, query_id: Any = None, top: int = TOP,
              tie_break: str = "list") -> QueryAttribution:
    """Attribute every gold node of one query.

    ``trajectories``: `ark.trajectory.Trajectory` objects or their ``to_json()`` dicts (one per agent).
    ``agent_rankings``: each agent's answer list (default: the trajectories' ``selected``).
    ``ranking``: the retriever's own ranking, used as its one list when there are neither trajectories
    nor agent lists (a baseline). The agents' lists are fused again, untruncated, with ``tie_break``.
    """
    if top < 1:
        raise ValueError(f"top={top} must be >= 1")
    trajectories = list(trajectories or [])
    if agent_rankings is None or (not agent_rankings and trajectories):
        agent_rankings = [list(_get(t, "selected") or []) for t in trajectories]
    lists = [[int(i) for i in r] for r in agent_rankings]
    if not trajectories and not any(lists) and ranking:  # a retriever that only returns a ranking
        lists = [[int(i) for i in ranking]]
    fused = fuse(lists, top=None, tie_break=tie_break)
    fused_pos = {n: p for p, n in enumerate(fused, 1)}
    gold = list(dict.fromkeys(int(g) for g in gold))
    gold_set = set(gold)

    # first sighting per gold: (step index, agent, call index) is the order; plus agents that saw it
    first: dict[int, tuple[int, int, int, str | None, int]] = {}
    seen_by: dict[int, set[int]] = {g: set() for g in gold}
    total_steps = total_tokens = 0
    agent_steps: dict[int, list] = {}
    for a, t in enumerate(trajectories):
        agent = _get(t, "agent_index")
        agent = a if agent is None else int(agent)
        steps = agent_steps[agent] = list(_get(t, "steps") or [])
        total_steps += len(steps)
        for s in steps:
            total_tokens += _tokens(s)
            shown = _get(s, "node_ids") or []
            calls = _get(s, "tool_calls") or []
            index = int(_get(s, "index", 0) or 0)
            for c, ids in enumerate(shown):
                for r, node in enumerate(ids or [], 1):
                    node = int(node)
                    if node not in gold_set:
                        continue
                    seen_by[node].add(agent)
                    cand = (index, agent, c, _call_name(calls[c]) if c < len(calls) else None, r)
                    if node not in first or cand[:3] < first[node][:3]:
                        first[node] = cand

    golds = []
    for g in gold:
        positions = [(p, a) for a, lst in enumerate(lists) for p, n in enumerate(lst, 1) if n == g]
        best = min(positions) if positions else None
        fp = fused_pos.get(g)
        surfaced = g in first or (not trajectories and best is not None)
        if fp is not None and fp <= top:
            cls = RETRIEVED
        elif best is not None:
            cls = "selected_fused_out" if best[0] <= top else "beyond_top"
        elif surfaced:
            cls = "surfaced_not_selected"
        else:
            cls = "never_surfaced"
        f = first.get(g)
        golds.append(GoldAttribution(
            query_id=query_id, gold=g, cls=cls,
            first_step=f[0] if f else None, first_agent=f[1] if f else None,
            first_tool=f[3] if f else None, first_rank=f[4] if f else None,
            n_agents_surfaced=len(seen_by[g]),
            selected=best is not None, selected_agent=best[1] if best else None,
            selected_position=best[0] if best else None, n_agents_selected=len({a for _, a in positions}),
            fused_position=fp, cut_by_truncation=best is not None and (fp is None or fp > top)))

    qa = QueryAttribution(query_id=query_id, golds=golds, total_steps=total_steps, total_tokens=total_tokens,
                          n_agents=len(trajectories))
    if first:
        step_index, agent, *_ = min(first.values(), key=lambda v: v[:3])
        upto = [s for s in agent_steps[agent] if int(_get(s, "index", 0) or 0) <= step_index]
        qa.steps_to_first_gold = len(upto)
        qa.tokens_to_first_gold = sum(_tokens(s) for s in upto)
    return qa


# ------------------------------------------------------------------------------ a whole run
ROW_FIELDS = ("query_id", "gold", "cls", "first_step", "first_agent", "first_tool", "first_rank",
              "n_agents_surfaced", "selected", "selected_agent", "selected_position", "n_agents_selected",
              "fused_position", "cut_by_truncation", "steps_to_first_gold", "tokens_to_first_gold",
              "total_steps", "total_tokens")


_GOLD_FIELDS = tuple(f.name for f in fields(GoldAttribution))   # plain values: a row needs no deep copy


def rows(attributions: Iterable[QueryAttribution]) -> list[dict]:
    """One flat row per (query, gold node), query-level columns repeated."""
    out = []
    for qa in attributions:
        for g in qa.golds:
            out.append({**{f: getattr(g, f) for f in _GOLD_FIELDS}, "steps_to_first_gold": qa.steps_to_first_gold,
                        "tokens_to_first_gold": qa.tokens_to_first_gold, "total_steps": qa.total_steps,
                        "total_tokens": qa.total_tokens})
    return out


def _mean(xs: list) -> float | None:
    return sum(xs) / len(xs) if xs else None


def summarize(attributions: Sequence[QueryAttribution], top: int = TOP) -> dict:
    """Counts and shares of each class over all gold nodes; shares of the misses alone; which tool
    first showed the gold nodes that were shown; per-query costs of reaching the first gold. What
    metrics.json["attribution"] holds."""
    counts = Counter(g.cls for qa in attributions for g in qa.golds)
    n_gold = sum(counts.values())
    n_miss = sum(counts[c] for c in MISS_CLASSES)
    reached = [qa for qa in attributions if qa.steps_to_first_gold is not None]
    return {
        "top": top, "n_queries": len(attributions), "n_gold": n_gold, "n_missed": n_miss,
        "counts": {c: counts[c] for c in CLASSES},
        "share": {c: (counts[c] / n_gold if n_gold else 0.0) for c in CLASSES},
        "miss_share": {c: (counts[c] / n_miss if n_miss else 0.0) for c in MISS_CLASSES},
        "first_tool": dict(Counter(g.first_tool for qa in attributions for g in qa.golds if g.first_tool)),
        "queries_any_gold_surfaced": len(reached) / len(attributions) if attributions else 0.0,
        "steps_to_first_gold_mean": _mean([qa.steps_to_first_gold for qa in reached]),
        "tokens_to_first_gold_mean": _mean([qa.tokens_to_first_gold for qa in reached]),
        "tokens_without_gold_mean": _mean([qa.total_tokens for qa in attributions
                                           if qa.steps_to_first_gold is None and qa.n_agents]),
    }


def format_summary(summary: dict) -> str:
    lines = [f"{summary['n_gold']} gold nodes over {summary['n_queries']} queries, {summary['n_missed']} missed"]
    for c in CLASSES:
        lines.append(f"  {CLASS_LABEL[c]:<24} {summary['counts'][c]:>6}  {100 * summary['share'][c]:5.1f}%")
    if summary["steps_to_first_gold_mean"] is not None:
        lines.append(f"  first gold surfaced after {summary['steps_to_first_gold_mean']:.1f} steps, "
                     f"{summary['tokens_to_first_gold_mean']:,.0f} tokens (mean over "
                     f"{100 * summary['queries_any_gold_surfaced']:.0f}% of queries)")
    return "\n".join(lines)
