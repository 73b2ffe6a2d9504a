"""What every retriever is and returns: the `Retriever` protocol and its result, `Retrieval`.

A retriever (ARK's `ark.agent.ARKRetriever`, the baselines of `ark.baselines`, a test's stand-in) is
anything with ``async aretrieve(query, query_id) -> Retrieval``; `ark.run.runner` runs one over a
query list. Defined on its own so that `ark.agent` and `ark.baselines` share it without importing
each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ark.trajectory import Trajectory


@dataclass
class Retrieval:
    """One query's result: the final ranking, per-agent rankings, trajectories and costs."""

    ranking: list[int]  # final ranked node ids (ARK: fused top 20; baselines: top 100)
    agent_rankings: list[list[int]] = field(default_factory=list)  # one selected list per agent
    trajectories: list["Trajectory"] = field(default_factory=list)  # one per agent; [] for baselines
    latency_s: float = 0.0  # wall-clock seconds for the query
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    error: str | None = None  # set when the query failed
    # the retriever's own score of each ranked id (BM25, cosine, RRF: the baselines), what
    # ark.analysis.metrics.evaluate's stark_qa mode ranks by; None where the ranking has no scores (ARK's votes)
    scores: list[float] | None = None


class Retriever(Protocol):
    """Anything the runner can run: one query's text (and id) in, its `Retrieval` out."""

    async def aretrieve(self, query: str, query_id: Any = "") -> Any: ...
