"""A deterministic stand-in retriever for runner tests: known rankings, two agents, optional failures,
delays and hangs (a run to be killed mid-way), and the queries it answers.

    from tests.helpers.tiny_retriever import TinyRetriever, make_queries, expected_ranking
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Q:
    id: int
    text: str
    answer_ids: tuple


@dataclass
class Traj:  # stands in for ark.trajectory.Trajectory: the two methods the runner calls
    counts: dict

    def to_json(self):
        return {"tool_counts": self.counts}

    def tool_counts(self):
        return dict(self.counts)


@dataclass
class Result:  # the Retrieval fields the runner reads
    ranking: list
    agent_rankings: list
    trajectories: list = field(default_factory=list)
    latency_s: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    error: str | None = None


def make_queries(n=30):
    return [Q(i, f"question {i}", (i % 7, 100 + i)) for i in range(n)]


def expected_ranking(qid: int) -> list[int]:
    # gold i%7 sits at rank (qid % 4) + 1 for qid % 5 != 0, otherwise absent
    base = [200 + j for j in range(25)]
    if qid % 5:
        base.insert(qid % 4, qid % 7)
    return base


class TinyRetriever:
    """Deterministic rankings, two agents, optional failures and delay; logs what it computed.
    Queries from ``hang_from`` on never finish (a run to be killed mid-way, whatever the machine's speed)."""

    def __init__(self, delay=0.0, fail_ids=(), log_path=None, hang_from=None):
        self.delay, self.fail_ids, self.log_path = delay, set(fail_ids), log_path
        self.hang_from = hang_from
        self.calls: list[int] = []
        self.in_flight = self.max_in_flight = 0

    async def aretrieve(self, query, query_id=""):
        self.calls.append(query_id)
        if self.log_path:
            with open(self.log_path, "a") as f:
                f.write(f"{query_id}\n")
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.delay)
            if self.hang_from is not None and query_id >= self.hang_from:
                await asyncio.Event().wait()
        finally:
            self.in_flight -= 1
        if query_id in self.fail_ids:
            raise RuntimeError(f"boom {query_id}")
        r = expected_ranking(query_id)
        return Result(ranking=r, agent_rankings=[r[:10], r[5:15]],
                      trajectories=[Traj({"search_graph": 2, "explore_neighbors": query_id % 3}),
                                    Traj({"search_graph": 1, "explore_neighbors": 0})],
                      latency_s=0.5 + query_id / 100, prompt_tokens=100, completion_tokens=10, cost_usd=0.001)
