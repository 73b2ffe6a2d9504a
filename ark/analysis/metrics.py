"""Retrieval metrics with STaRK's definitions: Hit@k, Recall@k, MRR, and bootstrap confidence intervals.

Owns the numbers in Table 1. Three ways (``mode``, a run's ``metrics_mode``) to score one ranked list,
all documented here:

``mode="paper"`` (default; how the ARK paper scores, appendix "Implementation Details")
    The retriever's ranked list *is* the ranking. ARK's fused list is truncated to the top 20 by the
    runner, baselines keep their top 100 (`scored_list`; ``cut="top_first"`` cuts before dropping
    non-candidates, as the paper's "aggregated ranking is truncated to the top 20 nodes" reads, and
    ``"candidates_first"`` drops them first). Hit@1 and MRR are computed on that same list, so a gold
    node that is not in the list counts as not retrieved (reciprocal rank 0). Like STaRK:
      * gold ids that are not graph candidates are dropped (they leave Recall's denominator);
      * ranked ids that are not candidates are dropped from the list (STaRK's evaluator only keeps
        scores at candidate positions, so later candidates move up);
      * a query whose gold set is empty after dropping scores 0 on every metric (torchmetrics'
        ``empty_target_action="neg"``), and stays in the average;
      * per-query ratios (MRR, Recall) are computed in float32 and returned as Python floats, as
        stark-qa's torchmetrics tensors are, so per-query values equal stark-qa's bit for bit
        (1/3 is 0.3333333432674408, not 0.3333333333333333; differences are < 1e-7).

``mode="stark_qa"`` (to compare with numbers computed the stark-qa way)
    Exactly `stark_evaluate` on the list: stark-qa's ``Evaluator`` writes the score dict into a
    vector over *all* candidates and gives every unscored candidate ``min(score) - 1``, one big tie
    at the bottom that torch orders however its ``argsort``/``topk`` order ties; we make the same
    torch calls on the same tensors, so the tie comes out the same. The list's scores are the
    retriever's own where it has them (``Retrieval.scores`` of the baselines: BM25, cosine, RRF; the
    runner cuts them with the list, `scored_list_and_scores`, and stores them with the query's record),
    else `stark_scores` (``len - position + 1``, all > 0): ARK's fused ranking is made of votes and has
    no scores, and a record written before scores were stored has none. To reproduce a
    stark-qa baseline's numbers the list must be the one stark-qa's model returns, e.g.
    `ark.baselines.BM25Retriever.stark_qa_forward` (its top k with zero scores kept, chosen as bm25s
    chooses them).
    ``torchmetrics`` names the ranking semantics: ``"1.7.0"`` (before PR #3104) or ``"1.9"`` (since
    1.7.4: MRR and Recall's numerator ignore gold with score <= 0; hit rate and Recall's denominator
    do not). With `stark_scores` (all >= 2) the two agree; with a retriever's own scores they differ
    wherever a gold node's score, or the bottom tie's ``min - 1``, is <= 0 (BM25's zeros and scores
    below 1, cosine similarities, log-probabilities, negative ranks), where "1.9" gives MRR and Recall
    0 and "1.7.0" does not: the switch changes a baseline run's numbers and never an ARK run's. The
    default is "1.7.0" (`DEFAULT_TORCHMETRICS`), the behaviour of STaRK's published numbers, which
    the paper's baseline rows are (its BM25 row is STaRK's). On a ranking that scores every
    candidate the two modes agree exactly. On a truncated list they differ wherever the tie matters:
    MRR gets a positive reciprocal rank for a gold node outside the list (somewhere inside the tie,
    1/(len+1) at most), and Hit@k/Recall@k for k > len(list) can count gold nodes from the tie.

``mode="authors"`` (the ARK authors' own evaluation code, as its published copies are described)
    The whole fused list is scored as it is: no cut to 20 and no candidate filter, on either the
    list or the gold ids (a non-candidate an agent selected keeps its position; MRR is 1/rank of the
    first gold anywhere in the list, Hit@k and Recall@k read its first k entries). The fusion is
    `ark.fusion.fuse` with ``tie_break="concat"`` (`authors_fuse`), and `authors_aggregate` averages
    over the queries that did not fail (a failed query is left out, not scored as a miss). A run with
    ``metrics_mode=authors`` records that list (`ark.run.records.scored_ranking`) and averages that way;
    `authors_record_metrics` rescores any run's records by it (Table 1 shows both). What could and
    could not be checked of that description is in README's metrics section.

NaN scores. `stark_evaluate` reproduces stark-qa exactly: its fill value is Python's builtin
``min(pred) - 1`` over the score tensor, which skips a NaN unless it is the first score (then every
unscored candidate gets NaN), and torch orders NaN above every number. `evaluate` (every mode)
refuses a NaN score with `NaNScoreError` (one line naming the node and its position): a NaN means the
retriever's own ranking is undefined, and no mode should turn it into a number.

Ids above ``max(candidate_ids)``: stark-qa's Evaluator raises IndexError on them, and so does
`stark_evaluate`. `evaluate` (every mode) drops them instead, like any other non-candidate: a
retriever's list may hold any graph node (a MAG author, an AMAZON brand), and STaRK's own retrievers
only ever score candidates, so the case never arises on their side.

Usage::

    from ark.analysis.metrics import evaluate, aggregate, stark_evaluate
    m = evaluate([12, 7, 3], gold=[7], candidate_ids=graph.candidate_ids)   # {"hit@1": 0.0, ..., "mrr": 0.5}
    stark_evaluate(candidate_ids, {12: 0.9, 7: 0.4}, [7], ["mrr", "hit@1"], torchmetrics="1.9")  # stark-qa's call
    summary = aggregate([m, ...])       # {"hit@1": {"mean", "ci_low", "ci_high"}, ...}
    authors_aggregate([m, None, ...])   # the authors' average: None (a failed query) left out
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

# The two torchmetrics behaviours stark-qa's numbers can have (its Evaluator calls torchmetrics'
# functional retrieval metrics, unpinned): "1.7.0" before PR #3104, "1.9" since 1.7.4, where MRR and
# Recall ignore every gold node whose score is <= 0. The default is "1.7.0": STaRK's published numbers
# (the STaRK paper and its 2024 leaderboard, whose BM25 row the ARK paper's Table 1 repeats) predate
# torchmetrics 1.7.4 (July 2025); give "1.9" to match a fresh install of stark-qa today. A run's
# identity holds the setting in stark_qa mode only, the one mode it changes, and there only for a
# retriever with scores of its own (ark.config.identity.ranks_own_scores).
TORCHMETRICS: tuple[str, ...] = ("1.7.0", "1.9")
DEFAULT_TORCHMETRICS = "1.7.0"
DEFAULT_METRICS: tuple[str, ...] = ("hit@1", "hit@5", "recall@20", "mrr")
# every mode `evaluate` knows, and what a run's metrics_mode may be ("authors": the runner keeps the whole
# fused list, ark.run.records.scored_ranking, and averages with `authors_aggregate`)
MODES: tuple[str, ...] = ("paper", "stark_qa", "authors")
# How a retriever's list becomes the scored list: cut to `top` and then drop non-candidates (the paper's
# "aggregated ranking is truncated to the top 20", then STaRK's evaluator ignores non-candidates), or drop
# non-candidates first so a selected author/brand does not cost a slot.
CUTS: tuple[str, ...] = ("top_first", "candidates_first")
_KINDS: tuple[str, ...] = ("hit@k", "recall@k", "mrr")


class NaNScoreError(ValueError):
    """A retriever gave a NaN score: its ranking is undefined, so `evaluate` refuses to score it."""


@dataclass(frozen=True)
class MetricSpec:
    """One parsed metric name: kind is "hit", "recall" or "mrr"; k is None for mrr."""

    name: str
    kind: str
    k: int | None


def parse_metric(name: str) -> MetricSpec:
    """Parse ``"hit@5"``, ``"recall@20"`` or ``"mrr"``; ValueError names the valid forms."""
    if name == "mrr":
        return MetricSpec(name, "mrr", None)
    kind, sep, k = name.partition("@")
    if sep and kind in ("hit", "recall") and k.isdigit() and int(k) > 0:
        return MetricSpec(name, kind, int(k))
    raise ValueError(f"unknown metric {name!r}; valid forms: {', '.join(_KINDS)} (k a positive integer)")


class CandidateSet:
    """Membership test for a graph's candidate ids (a bool mask; fast for millions of ids)."""

    def __init__(self, candidate_ids: Iterable[int] | np.ndarray):
        ids = np.asarray(list(candidate_ids) if not isinstance(candidate_ids, np.ndarray) else candidate_ids,
                         dtype=np.int64)
        if ids.size == 0:
            raise ValueError("candidate_ids is empty")
        if ids.min() < 0:
            raise ValueError(f"candidate ids must be >= 0, got {int(ids.min())}")
        self.ids = ids
        self.mask = np.zeros(int(ids.max()) + 1, dtype=bool)
        self.mask[ids] = True

    def __contains__(self, i: int) -> bool:
        return 0 <= i < self.mask.size and bool(self.mask[i])

    def filter(self, ids: Iterable[int]) -> list[int]:
        """Keep the ids that are candidates, in order."""
        size, mask = self.mask.size, self.mask
        return [int(i) for i in ids if 0 <= i < size and mask[i]]


def as_candidates(candidate_ids) -> CandidateSet | None:
    """``candidate_ids`` as a `CandidateSet` (None and sets pass through)."""
    if candidate_ids is None or isinstance(candidate_ids, CandidateSet):
        return candidate_ids
    return CandidateSet(candidate_ids)


def scored_list(ranking: Sequence[int], top: int | None, candidate_ids=None, cut: str = "top_first") -> list[int]:
    """The list that gets scored: ``ranking`` cut to ``top`` entries, then stripped of non-candidates
    (``cut="top_first"``, the paper's order), or stripped first and then cut (``"candidates_first"``).
    With ``candidate_ids`` None every id is a candidate and the two orders agree; ``top`` None (the
    authors' protocol) cuts nothing."""
    return scored_list_and_scores(ranking, None, top, candidate_ids, cut)[0]


def scored_list_and_scores(ranking: Sequence[int], scores: Sequence[float] | None, top: int | None,
                           candidate_ids=None, cut: str = "top_first") -> tuple[list[int], list[float] | None]:
    """`scored_list` of ``ranking`` and the same entries of ``scores`` (the retriever's own score of each
    ranked id, e.g. ``Retrieval.scores``; None passes through). ``top`` None keeps every entry."""
    if cut not in CUTS:
        raise ValueError(f"unknown cut {cut!r}; valid: {', '.join(CUTS)}")
    ids = [int(i) for i in ranking]
    if scores is not None and len(scores) != len(ids):
        raise ValueError(f"{len(scores)} scores for a ranking of {len(ids)} ids")
    vals = None if scores is None else [float(s) for s in scores]
    cands = as_candidates(candidate_ids)
    if cut == "candidates_first" and cands is not None:
        keep = [pos for pos, i in enumerate(ids) if i in cands]
        ids = [ids[p] for p in keep]
        vals = None if vals is None else [vals[p] for p in keep]
    end = len(ids) if top is None else top
    return ids[:end], (None if vals is None else vals[:end])


def check_scores(ranking: Sequence[int], scores: Sequence[float] | None) -> list[float] | None:
    """``scores`` as floats, one per ranked id; `NaNScoreError` names the first NaN (node and position)."""
    if scores is None:
        return None
    if len(scores) != len(ranking):
        raise ValueError(f"{len(scores)} scores for a ranking of {len(ranking)} ids")
    vals = [float(s) for s in scores]
    for pos, v in enumerate(vals):
        if v != v:
            raise NaNScoreError(f"score of node {int(ranking[pos])} (position {pos} of the ranking) is NaN; "
                                "scores must be numbers (a NaN leaves the retriever's ranking undefined)")
    return vals


def _ratio(num: int, den: int) -> float:
    """num / den in float32 (IEEE, correctly rounded), like torchmetrics' float32 tensors."""
    return float(np.float32(num) / np.float32(den))


def evaluate(ranking: Sequence[int], gold: Iterable[int], candidate_ids=None,
             metrics: Sequence[str] = DEFAULT_METRICS, mode: str = "paper", scores: Sequence[float] | None = None,
             torchmetrics: str = DEFAULT_TORCHMETRICS) -> dict[str, float]:
    """Score one ranked list of node ids against the gold ids.

    ranking: node ids, best first, already truncated the way the method reports it (the runner cuts
    ARK's fused list to 20 and baselines to 100). candidate_ids: the graph's STaRK candidates (an array,
    or a prepared ``CandidateSet`` when scoring many queries); None means every id is a candidate.
    mode: "paper", "stark_qa" or "authors" (see the module docstring). scores: the retriever's score
    of each listed id (``Retrieval.scores``); stark_qa mode gives them to stark-qa's evaluator instead
    of `stark_scores`, the other modes rank by list order and only check them. A NaN score raises
    `NaNScoreError` in every mode. torchmetrics: which torchmetrics behaviour ranks them (`TORCHMETRICS`).
    """
    if mode not in MODES:
        raise ValueError(f"unknown metrics mode {mode!r}; valid: {', '.join(MODES)}")
    _check_torchmetrics(torchmetrics)
    scores = check_scores(ranking, scores)
    specs = [parse_metric(m) for m in metrics]
    cands = as_candidates(candidate_ids)
    if mode == "stark_qa":
        if cands is None:
            raise ValueError("mode='stark_qa' needs candidate_ids (it spreads scores over all candidates)")
        return _evaluate_stark_qa(ranking, gold, cands, specs, scores, torchmetrics)
    if mode == "authors":
        cands = None   # the authors' code scores the fused list and the gold ids as they are

    if cands is not None:
        ranked = cands.filter(ranking)
        gold_set = set(cands.filter(gold))
    else:
        ranked = [int(i) for i in ranking]
        gold_set = {int(g) for g in gold}
    # A node listed twice keeps its first position (a score dict cannot hold it twice).
    seen: set[int] = set()
    ranked = [i for i in ranked if not (i in seen or seen.add(i))]
    hits = [i in gold_set for i in ranked]
    out: dict[str, float] = {}
    for spec in specs:
        if not gold_set:
            out[spec.name] = 0.0
        elif spec.kind == "mrr":
            first = next((pos for pos, h in enumerate(hits) if h), None)
            out[spec.name] = 0.0 if first is None else _ratio(1, first + 1)
        elif spec.kind == "hit":
            out[spec.name] = float(any(hits[: spec.k]))
        else:
            out[spec.name] = _ratio(sum(hits[: spec.k]), len(gold_set))
    return out


def stark_scores(ranking: Sequence[int]) -> dict[int, float]:
    """The score dict stark-qa's Evaluator is given for a ranked list: ``len - position + 1``.

    All scores are >= 2, so the unscored tie sits at ``min - 1 >= 1 > 0`` and neither torchmetrics
    behaviour ignores a gold node for having a score <= 0 ("1.9" does that for MRR/Recall).
    """
    n = len(ranking)
    scores: dict[int, float] = {}
    for pos, node in enumerate(ranking):
        scores.setdefault(int(node), float(n - pos + 1))
    return scores


def torchmetrics_semantics(version: str) -> str:
    """Which of `TORCHMETRICS` an installed torchmetrics ``version`` behaves like: releases before 1.7.4
    rank like "1.7.0", 1.7.4 and later (PR #3104) like "1.9"."""
    parts = [int(x) for x in re.findall(r"\d+", version)[:3]] + [0, 0, 0]
    return "1.7.0" if tuple(parts[:3]) < (1, 7, 4) else "1.9"


def _check_torchmetrics(torchmetrics: str) -> str:
    if torchmetrics not in TORCHMETRICS:
        raise ValueError(f"unknown torchmetrics behaviour {torchmetrics!r}; valid: {', '.join(TORCHMETRICS)} "
                         "(1.7.0: before the score <= 0 mask, 1.9: since torchmetrics 1.7.4)")
    return torchmetrics


def stark_evaluate(candidate_ids: Sequence[int], scores: Mapping[int, float], answer_ids,
                   metrics: Sequence[str] = ("mrr", "hit@3", "recall@20"),
                   torchmetrics: str = DEFAULT_TORCHMETRICS) -> dict[str, float]:
    """stark-qa's ``Evaluator(candidate_ids)(scores, answer_ids, metrics)``, with the ranking semantics of
    the named torchmetrics behaviour (``"1.7.0"``: before the mask; ``"1.9"``: since 1.7.4, where MRR
    and Recall ignore gold whose score is <= 0).

    scores: node id -> score, as a retriever's ``forward`` returns it; every candidate it leaves out
    gets ``min(score) - 1`` (one tie at the bottom, ordered the way torch orders ties; NaN scores as
    stark-qa treats them, see `_stark_fill`). answer_ids: the
    gold ids (a list or a LongTensor). Metrics: ``mrr``, ``hit@k``, ``recall@k``. Like stark-qa, an id
    (scored or gold) above ``max(candidate_ids)`` raises IndexError, here with a message naming it; a
    negative id, which stark-qa's tensor indexing would silently read from the end, raises ValueError.
    """
    import torch

    _check_torchmetrics(torchmetrics)
    specs = [parse_metric(m) for m in metrics]
    cand = np.asarray(candidate_ids.ids if isinstance(candidate_ids, CandidateSet) else candidate_ids,
                      dtype=np.int64).reshape(-1)
    if cand.size == 0:
        raise ValueError("candidate_ids is empty")
    if not scores:
        raise ValueError("scores is empty (stark-qa's Evaluator fails on min() of no scores)")
    gold = np.asarray(answer_ids.view(-1).tolist() if hasattr(answer_ids, "view") else list(answer_ids),
                      dtype=np.int64).reshape(-1)
    ids = np.fromiter((int(i) for i in scores), dtype=np.int64, count=len(scores))
    size = int(cand.max()) + 1
    for what, group in (("candidate id", cand), ("scored id", ids), ("answer id", gold)):
        if group.size and group.min() < 0:
            raise ValueError(f"{what} {int(group.min())} is negative; ids are node ids >= 0")
        if group.size and group.max() >= size:
            raise IndexError(f"{what} {int(group.max())} is above the largest candidate id {size - 1}; "
                             "stark-qa's Evaluator raises IndexError here too (drop non-candidate ids first)")
    pred = torch.tensor([float(v) for v in scores.values()], dtype=torch.float)
    all_pred = torch.full((size,), _stark_fill(pred), dtype=torch.float)
    all_pred[torch.from_numpy(ids)] = pred
    with warnings.catch_warnings():   # a read-only (memory-mapped) id array: the tensor only indexes, never written
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        cand_t = torch.from_numpy(cand)
    target = torch.zeros(size, dtype=torch.bool)
    target[torch.from_numpy(gold)] = True
    return _ranked_metrics(all_pred[cand_t], target[cand_t], specs, torchmetrics)


def _stark_fill(pred) -> float:
    """stark-qa's value for unscored candidates: ``min(pred) - 1`` with Python's builtin ``min`` over the
    float32 score tensor. Builtin ``min`` keeps its first element unless a later one compares smaller, and
    nothing compares smaller than NaN nor is NaN smaller than anything: a NaN first score makes the fill
    NaN, a NaN later one is skipped. (``pred.min()`` would propagate any NaN.)"""
    import torch

    if bool(torch.isnan(pred[0])):
        return float("nan")
    return float(pred[~torch.isnan(pred)].min() - 1)


def _ranked_metrics(preds, target, specs: list[MetricSpec], torchmetrics: str) -> dict[str, float]:
    """torchmetrics' retrieval_hit_rate / retrieval_reciprocal_rank / retrieval_recall on one query.

    Same torch calls as torchmetrics (``argsort(descending=True)`` for hit rate and recall, ``topk``
    for MRR), so ties come out in the same order. ``torchmetrics="1.9"`` applies PR #3104's mask
    ``where(preds > 0, target, 0)`` to MRR and to Recall's numerator (not to hit rate, not to Recall's
    denominator)."""
    import torch

    target = target.long()
    masked = torch.where(preds > 0, target, torch.zeros_like(target)) if torchmetrics == "1.9" else target
    n_gold = int(target.sum())
    order = None
    out: dict[str, float] = {}
    for spec in specs:
        if spec.kind == "mrr":
            ranked = masked[preds.topk(preds.shape[-1], sorted=True, dim=-1)[1]]
            positions = torch.nonzero(ranked).view(-1)
            out[spec.name] = 0.0 if positions.numel() == 0 else _ratio(1, int(positions[0]) + 1)
            continue
        if order is None:
            order = torch.argsort(preds, dim=-1, descending=True)
        if spec.kind == "hit":
            out[spec.name] = float(int(target[order][: spec.k].sum()) > 0)
        else:
            out[spec.name] = 0.0 if n_gold == 0 else _ratio(int(masked[order][: spec.k].sum()), n_gold)
    return out


def _evaluate_stark_qa(ranking, gold, cands: CandidateSet, specs: list[MetricSpec], scores=None,
                       torchmetrics: str = DEFAULT_TORCHMETRICS) -> dict[str, float]:
    """`stark_evaluate` on a ranked list; ids above the largest candidate id are dropped, not raised on."""
    if scores is None:
        scored = stark_scores(ranking)
    else:
        scored = {}
        for node, s in zip(ranking, scores):
            scored.setdefault(int(node), float(s))
    size = cands.mask.size
    scored = {i: s for i, s in scored.items() if 0 <= i < size}
    gold_ids = [int(g) for g in gold if 0 <= int(g) < size]
    if not scored:  # an empty list (stark-qa fails on min() of no scores): not retrieved, 0 everywhere
        return {spec.name: 0.0 for spec in specs}
    return stark_evaluate(cands.ids, scored, gold_ids, [s.name for s in specs], torchmetrics)


def authors_fuse(agent_rankings: Sequence[Sequence[int]]) -> list[int]:
    """The fused list the authors' evaluation scores: `ark.fusion.fuse` by votes, ties broken by the first
    index in the concatenated agent lists (``tie_break="concat"``), nothing cut."""
    from ark.fusion import fuse

    return fuse(agent_rankings, top=None, tie_break="concat")


def authors_record_metrics(record: Mapping, metrics: Sequence[str] = DEFAULT_METRICS) -> dict[str, float] | None:
    """The authors' protocol on one query's record as the runner writes it (``predictions.jsonl``:
    ``status``, ``gold``, ``agent_rankings``, ``ranking``): the agents' own lists fused again with
    `authors_fuse`, uncut (a baseline's one list is its ranking), scored with ``mode="authors"``; None
    for a failed query, which `authors_aggregate` leaves out. No LLM call: any finished run can be
    rescored this way."""
    if record.get("status") == "failed":
        return None
    lists = record.get("agent_rankings") or ([record["ranking"]] if record.get("ranking") else [])
    return evaluate(authors_fuse(lists), record.get("gold", []), None, metrics, mode="authors")


def authors_aggregate(per_query: Sequence[Mapping[str, float] | None], n_boot: int = 1000, seed: int = 0,
                      alpha: float = 0.05) -> dict[str, dict[str, float]]:
    """`aggregate` the authors' way: a failed query (None) is left out of the average instead of being
    retried or scored as a miss. Each metric also carries ``n_left_out``, the number of queries left out."""
    kept = [m for m in per_query if m is not None]
    out = aggregate(kept, n_boot=n_boot, seed=seed, alpha=alpha)
    for entry in out.values():
        entry["n_left_out"] = len(per_query) - len(kept)
    return out


def bootstrap_ci(values: Sequence[float] | np.ndarray, n_boot: int = 1000, alpha: float = 0.05,
                 seed: int = 0) -> tuple[float, float, float]:
    """Mean and percentile bootstrap (1 - alpha) CI of a per-query metric: (mean, low, high).

    Resamples queries with replacement ``n_boot`` times (seeded, and on the sorted values, so the same
    per-query values in any order -- a single run or merged shards -- give the same interval).
    One value gives a zero-width interval; no values give NaNs.
    """
    x = np.sort(np.asarray(values, dtype=np.float64))   # sorted: the CI ignores query order
    if x.size == 0:
        return float("nan"), float("nan"), float("nan")
    mean = float(x.mean())
    if x.size == 1 or n_boot <= 0:
        return mean, mean, mean
    rng = np.random.default_rng(seed)
    means = np.empty(n_boot)
    chunk = max(1, 2_000_000 // x.size)   # bound memory to ~16 MB per chunk of resamples
    for start in range(0, n_boot, chunk):
        stop = min(n_boot, start + chunk)
        idx = rng.integers(0, x.size, size=(stop - start, x.size))
        means[start:stop] = x[idx].mean(axis=1)
    low, high = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    return mean, float(low), float(high)


def aggregate(per_query: Sequence[Mapping[str, float]], n_boot: int = 1000, seed: int = 0,
              alpha: float = 0.05) -> dict[str, dict[str, float]]:
    """Means and bootstrap CIs of per-query metric dicts: {name: {"mean", "ci_low", "ci_high", "n"}}."""
    if not per_query:
        return {}
    names = list(per_query[0].keys())
    out = {}
    for name in names:
        mean, low, high = bootstrap_ci([m[name] for m in per_query], n_boot=n_boot, seed=seed, alpha=alpha)
        out[name] = {"mean": mean, "ci_low": low, "ci_high": high, "n": len(per_query)}
    return out
