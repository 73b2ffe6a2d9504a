"""Retrieval metrics with STaRK's definitions: Hit@k, Recall@k, MRR, and bootstrap confidence intervals.

Owns the numbers in Table 1. Two ways to score one ranked list, both documented here:

``mode="paper"`` (default; how the ARK paper scores, appendix "Implementation Details")
    The retriever's ranked list *is* the ranking. ARK's fused list is truncated to the top 20 by the
    runner, baselines keep their top 100. Hit@1 and MRR are computed on that same list, so a gold node
    that is not in the list counts as not retrieved (reciprocal rank 0). Like STaRK:
      * gold ids that are not graph candidates are dropped (they leave Recall's denominator);
      * ranked ids that are not candidates are dropped from the list (STaRK's evaluator only keeps
        scores at candidate positions, so later candidates move up);
      * a query whose gold set is empty after dropping scores 0 on every metric (torchmetrics'
        ``empty_target_action="neg"``), and stays in the average;
      * a gold id above ``max(candidate_ids)`` is just dropped (stark-qa raises IndexError there);
      * per-query ratios (MRR, Recall) are computed in float32 and returned as Python floats, as
        stark-qa's torchmetrics tensors are, so per-query values equal stark-qa's bit for bit
        (1/3 is 0.3333333432674408, not 0.3333333333333333; differences are < 1e-7).

``mode="stark_qa"`` (to compare with numbers computed the stark-qa way)
    stark-qa's ``Evaluator`` takes a score dict, writes it into a vector over *all* candidates and
    gives every unscored candidate ``min(score) - 1``: one big tie at the bottom, ordered however
    ``torch.topk``/``argsort`` happen to order ties. We reproduce that exactly (the list becomes scores
    ``len(list) - position + 1``, so even the tie is > 0 and the torchmetrics >= 1.7.4 rule "gold with
    score <= 0 is ignored by MRR and Recall" never triggers) and rank with the same torch calls. On a ranking
    that scores every candidate the two modes agree exactly. On a truncated list they differ wherever
    the tie matters: MRR gets a positive reciprocal rank for a gold node outside the list (somewhere
    inside the tie, 1/(len+1) at most), and Hit@k/Recall@k for k > len(list) can count gold nodes
    from the tie. Hit@k and Recall@k for k <= len(list) are identical.

Usage::

    from ark.metrics import evaluate, aggregate
    m = evaluate([12, 7, 3], gold=[7], candidate_ids=graph.candidate_ids)   # {"hit@1": 0.0, ..., "mrr": 0.5}
    summary = aggregate([m, ...])       # {"hit@1": {"mean", "ci_low", "ci_high"}, ...}
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

# torchmetrics version of the comparison environment (.venv-compare) that the tests check against:
# from 1.7.4 on, MRR and Recall ignore gold whose score is <= 0, so stark-qa numbers depend on it.
STARK_COMPARE_TORCHMETRICS = "1.9.0"
DEFAULT_METRICS: tuple[str, ...] = ("hit@1", "hit@5", "recall@20", "mrr")
MODES: tuple[str, ...] = ("paper", "stark_qa")
_KINDS: tuple[str, ...] = ("hit@k", "recall@k", "mrr")


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


def _ratio(num: int, den: int) -> float:
    """num / den in float32 (IEEE, correctly rounded), like torchmetrics' float32 tensors."""
    return float(np.float32(num) / np.float32(den))


def evaluate(ranking: Sequence[int], gold: Iterable[int], candidate_ids=None,
             metrics: Sequence[str] = DEFAULT_METRICS, mode: str = "paper") -> dict[str, float]:
    """Score one ranked list of node ids against the gold ids.

    ranking: node ids, best first, already truncated the way the method reports it (the runner cuts
    ARK's fused list to 20 and baselines to 100). candidate_ids: the graph's STaRK candidates (an array,
    or a prepared ``CandidateSet`` when scoring many queries); None means every id is a candidate.
    mode: "paper" or "stark_qa" (see the module docstring).
    """
    if mode not in MODES:
        raise ValueError(f"unknown metrics mode {mode!r}; valid: {', '.join(MODES)}")
    specs = [parse_metric(m) for m in metrics]
    cands = as_candidates(candidate_ids)
    if mode == "stark_qa":
        if cands is None:
            raise ValueError("mode='stark_qa' needs candidate_ids (it spreads scores over all candidates)")
        return _evaluate_stark_qa(ranking, gold, cands, specs)

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

    All scores are >= 2, so the unscored tie sits at ``min - 1 >= 1 > 0`` and no torchmetrics version
    ignores a gold node for having a score <= 0 (torchmetrics >= 1.7.4 does that for MRR/Recall).
    """
    n = len(ranking)
    scores: dict[int, float] = {}
    for pos, node in enumerate(ranking):
        scores.setdefault(int(node), float(n - pos + 1))
    return scores


def _evaluate_stark_qa(ranking, gold, cands: CandidateSet, specs: list[MetricSpec]) -> dict[str, float]:
    """stark-qa's evaluator semantics re-done with the same torch ranking calls (ties included)."""
    import torch

    scores = stark_scores(ranking)
    size = cands.mask.size
    # stark-qa indexes a vector of size max(candidate)+1 with the predicted ids; ids past it are not
    # candidates, so we drop them instead of raising.
    scores = {i: s for i, s in scores.items() if i < size}
    if not scores:
        return {spec.name: 0.0 for spec in specs}
    values = torch.tensor(list(scores.values()), dtype=torch.float)
    full = torch.full((size,), float(values.min()) - 1.0)
    full[torch.tensor(list(scores.keys()), dtype=torch.long)] = values
    cand_idx = torch.from_numpy(cands.ids)
    preds = full[cand_idx]
    target_full = torch.zeros(size, dtype=torch.bool)
    gold_ids = [int(g) for g in gold if 0 <= int(g) < size]
    if gold_ids:
        target_full[torch.tensor(gold_ids, dtype=torch.long)] = True
    target = target_full[cand_idx]
    n_gold = int(target.sum())
    out: dict[str, float] = {}
    for spec in specs:
        if n_gold == 0:
            out[spec.name] = 0.0
        elif spec.kind == "mrr":
            order = preds.topk(preds.shape[-1], sorted=True)[1]
            positions = torch.nonzero(target[order]).view(-1)
            out[spec.name] = _ratio(1, int(positions[0]) + 1)
        elif spec.kind == "hit":
            order = preds.topk(min(spec.k, preds.shape[-1]), sorted=True)[1]
            out[spec.name] = float(bool(target[order].any()))
        else:
            order = torch.argsort(preds, descending=True)[: spec.k]
            out[spec.name] = _ratio(int(target[order].sum()), n_gold)
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
