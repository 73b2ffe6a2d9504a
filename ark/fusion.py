"""Rank fusion of the n parallel agents' answer lists (paper §3.2 "Parallel Exploration", App. A.2).

The paper concatenates the agents' lists in agent order, L = R^(1) || R^(2) || ... || R^(n), ranks the
unique nodes of L by decreasing frequency in L (the vote count), and breaks ties by "the earliest position
at which a node appears in any trajectory" (§3.2) / "in any agent's list" (appendix), "favoring nodes
discovered earlier during exploration".

Decision (documented here, tested in tests/test_fusion.py): the tie-break position is the node's rank
*within an agent's own list*, minimised over agents (tie_break="list", the default). Both passages speak of
a position in a trajectory / in an agent's list, and the stated intent — favour nodes discovered early in
exploration — is a property of a node's place in its own trajectory; a position in the concatenation L
would instead favour anything agent 1 found over everything agent 2 found, whatever its rank. Remaining
ties (same votes, same best in-list rank) go to the node that comes first in L, i.e. to the lower agent
index, which makes the result deterministic. tie_break="concat" uses the first index in L instead: the
rule the authors' own evaluation code is reported to use (`ark.analysis.metrics.authors_fuse`, the
``authors`` metrics protocol), and an ablation of the tie-break.

Within one agent's list a node counts once (the agent loop already skips duplicate selections; fusion
ignores repeats defensively so one agent cannot vote twice).

    >>> fuse([[1, 2, 3], [3, 4]])
    [3, 1, 2, 4]
"""

from __future__ import annotations

from collections.abc import Sequence

TIE_BREAKS = ("list", "concat")


def fuse(rankings: Sequence[Sequence[int]], top: int | None = None, tie_break: str = "list") -> list[int]:
    """Fuse per-agent ordered lists into one ranking by vote count, then earliest position.

    Args:
        rankings: one ordered node-id list per agent, in agent order (empty lists allowed).
        top: keep only the first ``top`` fused nodes (None keeps all; the evaluation uses 20).
        tie_break: "list" (earliest rank inside any agent's own list, then first index in the
            concatenation) or "concat" (first index in the concatenation only).
    """
    if tie_break not in TIE_BREAKS:
        raise ValueError(f"tie_break={tie_break!r} is not valid; choose one of {list(TIE_BREAKS)}")
    if top is not None and top < 0:
        raise ValueError(f"top={top!r} must be None or >= 0")
    votes: dict[int, int] = {}
    best_rank: dict[int, int] = {}
    first_in_concat: dict[int, int] = {}
    offset = 0
    for ranking in rankings:
        seen_here: set[int] = set()
        for rank, node in enumerate(ranking):
            node = int(node)
            if node in seen_here:
                continue
            seen_here.add(node)
            votes[node] = votes.get(node, 0) + 1
            if node not in best_rank or rank < best_rank[node]:
                best_rank[node] = rank
            first_in_concat.setdefault(node, offset + rank)
        offset += len(ranking)
    if tie_break == "list":
        key = lambda n: (-votes[n], best_rank[n], first_in_concat[n])  # noqa: E731
    else:
        key = lambda n: (-votes[n], first_in_concat[n])  # noqa: E731
    fused = sorted(votes, key=key)
    return fused if top is None else fused[:top]
