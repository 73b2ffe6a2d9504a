"""ark.analysis.metrics against stark_qa.evaluator.Evaluator (comparison tier; runs in .venv-compare).

Run: .venv-compare/bin/pytest -m comparison tests/comparison/test_metrics_vs_stark.py
On rankings that score every candidate (no ties) our "paper" mode must equal stark-qa to 1e-9; on
truncated lists the "stark_qa" mode must equal it and the documented differences must hold. Short lists
(1-30 entries) over hundreds of candidates with several score shapes (negative and zero included) must
equal stark-qa exactly, under the installed torchmetrics (1.9.0) and, in a subprocess, under the other
behaviour's release (1.7.0, installed beside the environment by make_env.sh).
"""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch


def _load_stark_evaluator():
    """stark_qa/evaluator.py itself, loaded from the installed stark-qa without running the package's
    __init__ (which imports every SKB loader and their optional dependencies, e.g. PyTDC)."""
    spec = importlib.util.find_spec("stark_qa")  # present: conftest refuses the tier without it
    path = Path(list(spec.submodule_search_locations)[0]) / "evaluator.py"
    mod_spec = importlib.util.spec_from_file_location("stark_qa_evaluator", path)
    module = importlib.util.module_from_spec(mod_spec)
    mod_spec.loader.exec_module(module)
    return module


stark_evaluator = _load_stark_evaluator()

from ark.analysis.metrics import CandidateSet, evaluate, stark_scores  # noqa: E402
from tests.helpers.stark_releases import stark_under_other_release  # noqa: E402

pytestmark = pytest.mark.comparison

METRICS = ["hit@1", "hit@3", "hit@5", "hit@10", "hit@20", "recall@5", "recall@10", "recall@20",
           "recall@100", "mrr"]


def _random_case(rng, n_ids: int):
    """A candidate subset of [0, n_ids), gold ids (some outside the candidates), and non-candidates."""
    cand = np.sort(rng.choice(n_ids, size=rng.integers(5, n_ids), replace=False))
    cand[-1] = n_ids - 1 if rng.random() < 0.5 else cand[-1]
    cand = np.unique(cand)
    non_cand = np.setdiff1d(np.arange(cand.max() + 1), cand)
    kind = rng.integers(0, 4)
    n_gold = int(rng.integers(1, 6))
    if kind == 0 or non_cand.size == 0:          # gold all candidates
        gold = rng.choice(cand, size=min(n_gold, cand.size), replace=False)
    elif kind == 1:                             # gold all outside the candidates
        gold = rng.choice(non_cand, size=min(n_gold, non_cand.size), replace=False)
    else:                                       # mixed
        gold = np.r_[rng.choice(cand, size=1), rng.choice(non_cand, size=min(n_gold, non_cand.size))]
    return cand, non_cand, [int(g) for g in gold]


def _stark(cand, scores: dict[int, float], gold):
    ev = stark_evaluator.Evaluator(cand.tolist())
    return ev(scores, torch.LongTensor(gold), metrics=METRICS)


def test_full_rankings_equal_stark_qa():
    rng = np.random.default_rng(0)
    n_cases = 3000
    n_no_gold_candidates = n_gold_deep = 0
    for _ in range(n_cases):
        cand, non_cand, gold = _random_case(rng, int(rng.integers(10, 400)))
        ranking = rng.permutation(cand).tolist()
        # sprinkle non-candidate ids into the ranking (stark-qa drops them)
        if non_cand.size:
            extra = rng.choice(non_cand, size=min(5, non_cand.size), replace=False)
            for e in extra:
                ranking.insert(int(rng.integers(0, len(ranking) + 1)), int(e))
        cs = CandidateSet(cand)
        ours = evaluate(ranking, gold, cs, METRICS, mode="paper")
        theirs = _stark(cand, stark_scores(ranking), gold)
        for name in METRICS:
            assert ours[name] == pytest.approx(theirs[name], abs=1e-9), (name, ranking, gold)
        # our stark_qa mode is the same calculation
        ours_sq = evaluate(ranking, gold, cs, METRICS, mode="stark_qa")
        assert ours_sq == pytest.approx(theirs, abs=1e-9)
        if not set(gold) & set(cand.tolist()):
            n_no_gold_candidates += 1
        elif ours["hit@20"] == 0.0:
            n_gold_deep += 1
    # the random cases did cover the edge cases
    assert n_no_gold_candidates > 300 and n_gold_deep > 300


def test_random_float_scores_equal_stark_qa():
    rng = np.random.default_rng(1)
    for _ in range(1000):
        cand, _, gold = _random_case(rng, int(rng.integers(10, 300)))
        scores = {int(c): float(s) for c, s in zip(cand, rng.uniform(0.01, 50.0, size=cand.size))}
        ranking = sorted(scores, key=lambda c: -scores[c])
        ours = evaluate(ranking, gold, cand, METRICS, mode="paper")
        theirs = _stark(cand, scores, gold)
        assert ours == pytest.approx(theirs, abs=1e-9)


def test_truncated_lists_documented_difference():
    rng = np.random.default_rng(2)
    n_mrr_diff = 0
    for _ in range(1000):
        cand, _, gold = _random_case(rng, int(rng.integers(60, 400)))
        ranking = rng.permutation(cand)[:20].tolist()           # ARK-style top-20 list
        theirs = _stark(cand, stark_scores(ranking), gold)
        assert evaluate(ranking, gold, cand, METRICS, mode="stark_qa") == pytest.approx(theirs, abs=1e-9)
        paper = evaluate(ranking, gold, cand, METRICS, mode="paper")
        for name in ("hit@1", "hit@3", "hit@5", "hit@10", "hit@20", "recall@5", "recall@10", "recall@20"):
            assert paper[name] == pytest.approx(theirs[name], abs=1e-9)     # k <= len(list): no tie seen
        assert paper["recall@100"] <= theirs["recall@100"] + 1e-12
        if paper["mrr"] > 0:
            assert paper["mrr"] == pytest.approx(theirs["mrr"], abs=1e-9)
        elif theirs["mrr"] > 0:
            # gold outside the list: stark-qa finds it inside the bottom tie
            assert theirs["mrr"] <= 1 / 21 + 1e-7   # (float32)
            n_mrr_diff += 1
    assert n_mrr_diff > 100


SCHEMES = ("stark_scores", "positive", "cosine", "log_prob", "neg_rank", "ties_and_zeros")


def _scores(rng, ranking: list[int], scheme: str) -> list[float]:
    """Scores for a ranked list, best first, in one of several shapes a retriever produces."""
    n = len(ranking)
    if scheme == "stark_scores":
        return [float(n - i + 1) for i in range(n)]
    if scheme == "positive":
        return sorted(rng.uniform(0.01, 30.0, n).tolist(), reverse=True)
    if scheme == "cosine":                       # some positive, some negative
        return sorted(rng.uniform(-0.6, 0.9, n).tolist(), reverse=True)
    if scheme == "log_prob":                     # all negative
        return sorted(np.log(rng.uniform(1e-6, 1.0, n)).tolist(), reverse=True)
    if scheme == "neg_rank":
        return [-float(i + 1) for i in range(n)]
    return sorted(rng.choice([-1.0, 0.0, 0.0, 1.0, 2.0], n).tolist(), reverse=True)   # ties, zeros


def _short_list_case(rng):
    """Hundreds of candidates (a random subset of the ids), a short list of 1-30 candidates, and gold
    inside the list, outside it, or not among the candidates at all."""
    n_ids = int(rng.integers(200, 700))
    cand = np.sort(rng.choice(n_ids, size=int(rng.integers(150, n_ids)), replace=False))
    non_cand = np.setdiff1d(np.arange(cand.max() + 1), cand)
    ranking = rng.choice(cand, size=int(rng.integers(1, 31)), replace=False).tolist()
    outside = np.setdiff1d(cand, ranking)
    where = rng.integers(0, 4)
    if where == 0:                                             # gold inside the list
        gold = rng.choice(ranking, size=min(len(ranking), int(rng.integers(1, 4))), replace=False).tolist()
    elif where == 1:                                           # gold outside the list
        gold = rng.choice(outside, size=int(rng.integers(1, 4)), replace=False).tolist()
    elif where == 2 and non_cand.size:                         # gold missing from the candidates
        gold = rng.choice(non_cand, size=min(non_cand.size, 2), replace=False).tolist()
    else:                                                      # mixed
        gold = [int(rng.choice(ranking)), int(rng.choice(outside))]
    return cand, ranking, [int(g) for g in gold]


SHORT_METRICS = ["hit@1", "hit@3", "hit@5", "hit@10", "hit@20", "hit@50", "hit@100", "recall@5", "recall@20",
                 "recall@50", "recall@100", "mrr"]


def test_short_lists_and_score_schemes_equal_stark_qa():
    """stark_evaluate (and evaluate in stark_qa mode with the retriever's scores) equal stark-qa's
    Evaluator, with the torchmetrics behaviour of the torchmetrics installed here."""
    import torchmetrics

    from ark.analysis.metrics import stark_evaluate, torchmetrics_semantics

    semantics = torchmetrics_semantics(torchmetrics.__version__)
    rng = np.random.default_rng(3)
    seen = {"k_beyond_list_hit": 0, "masked_differs": 0}
    for case in range(1800):
        cand, ranking, gold = _short_list_case(rng)
        scheme = SCHEMES[case % len(SCHEMES)]
        scores = dict(zip(ranking, _scores(rng, ranking, scheme)))
        ev = stark_evaluator.Evaluator(cand.tolist())
        theirs = ev(scores, torch.LongTensor(gold), metrics=SHORT_METRICS)
        ours = stark_evaluate(cand, scores, gold, SHORT_METRICS, torchmetrics=semantics)
        assert ours == theirs, (scheme, ranking, gold)
        listed = evaluate(ranking, gold, cand, SHORT_METRICS, mode="stark_qa", scores=list(scores.values()),
                          torchmetrics=semantics)
        assert listed == theirs
        other = stark_evaluate(cand, scores, gold, SHORT_METRICS,
                               torchmetrics="1.7.0" if semantics == "1.9" else "1.9")
        seen["masked_differs"] += other != ours
        if any(theirs[f"hit@{k}"] > 0 and k > len(ranking) and not set(gold) & set(ranking)
               for k in (50, 100)):
            seen["k_beyond_list_hit"] += 1
    # the cases reached what they are for: gold found inside the bottom tie, and the two behaviours apart
    assert seen["k_beyond_list_hit"] > 20 and seen["masked_differs"] > 100, seen


def test_ids_above_the_largest_candidate_raise_index_error_in_both():
    from ark.analysis.metrics import stark_evaluate

    cand = list(range(0, 40, 2))
    ev = stark_evaluator.Evaluator(cand)
    for scores, gold in (({50: 1.0, 2: 0.5}, [2]), ({2: 0.5}, [41])):
        with pytest.raises(IndexError):
            ev(scores, torch.LongTensor(gold), metrics=["mrr"])
        with pytest.raises(IndexError, match="above the largest candidate id 38"):
            stark_evaluate(cand, scores, gold, ["mrr"])


def test_other_torchmetrics_behaviour_equals_that_release(tmp_path):
    """The behaviour the installed torchmetrics does not have, checked against that release itself:
    stark-qa's Evaluator runs in a subprocess that imports the other torchmetrics first."""
    from ark.analysis.metrics import stark_evaluate, torchmetrics_semantics

    rng = np.random.default_rng(4)
    cases = []
    for case in range(600):
        cand, ranking, gold = _short_list_case(rng)
        scores = dict(zip(ranking, _scores(rng, ranking, SCHEMES[case % len(SCHEMES)])))
        cases.append({"cand": cand.tolist(), "scores": [[k, v] for k, v in scores.items()], "gold": gold})
    version, theirs = stark_under_other_release(tmp_path, cases, SHORT_METRICS)
    semantics = torchmetrics_semantics(version)
    n_negative_gold = 0
    for c, t in zip(cases, theirs):
        scores = {int(k): float(v) for k, v in c["scores"]}
        assert stark_evaluate(c["cand"], scores, c["gold"], SHORT_METRICS, torchmetrics=semantics) == t, c
        n_negative_gold += any(scores.get(g, 1.0) <= 0 for g in c["gold"])
    assert n_negative_gold > 50


def _nan_cases(rng, n: int) -> list[dict]:
    """Short lists whose scores hold NaN: first in the dict, later in it, or on a gold node."""
    cases = []
    for case in range(n):
        cand, ranking, gold = _short_list_case(rng)
        if len(ranking) < 2:
            ranking = rng.choice(cand, size=3, replace=False).tolist()
        values = _scores(rng, ranking, SCHEMES[case % len(SCHEMES)])
        where = case % 3
        if where == 0:
            values[0] = float("nan")
        else:
            pos = rng.choice(np.arange(1, len(values)), size=int(rng.integers(1, len(values))), replace=False)
            for i in pos:
                values[int(i)] = float("nan")
        if where == 2:                               # a gold node is one of the NaN-scored ones
            gold = [int(ranking[i]) for i, v in enumerate(values) if v != v][:1] + gold[:1]
        cases.append({"cand": cand.tolist(), "scores": [[int(k), v] for k, v in zip(ranking, values)],
                      "gold": gold})
    return cases


def test_nan_scores_equal_stark_qa_under_both_torchmetrics(tmp_path):
    """NaN scores: stark_evaluate equals stark-qa's Evaluator (builtin min() over the scores skips a NaN
    unless it is the first), under the installed torchmetrics and, in a subprocess, the other release."""
    import torchmetrics

    from ark.analysis.metrics import (NaNScoreError, stark_evaluate, torchmetrics_semantics)

    cases = _nan_cases(np.random.default_rng(5), 600)
    here = torchmetrics_semantics(torchmetrics.__version__)
    version, other = stark_under_other_release(tmp_path, cases, SHORT_METRICS)
    n_first = n_later = 0
    for c, t_other in zip(cases, other):
        scores = {int(k): float(v) for k, v in c["scores"]}
        theirs = stark_evaluator.Evaluator(c["cand"])(scores, torch.LongTensor(c["gold"]), metrics=SHORT_METRICS)
        assert stark_evaluate(c["cand"], scores, c["gold"], SHORT_METRICS, torchmetrics=here) == theirs, c
        assert stark_evaluate(c["cand"], scores, c["gold"], SHORT_METRICS,
                              torchmetrics=torchmetrics_semantics(version)) == t_other, c
        first = c["scores"][0][1] != c["scores"][0][1]
        n_first += first
        n_later += not first
        # a run never scores them: evaluate refuses the list
        with pytest.raises(NaNScoreError):
            evaluate([k for k, _ in c["scores"]], c["gold"], c["cand"], SHORT_METRICS, mode="stark_qa",
                     scores=[v for _, v in c["scores"]], torchmetrics=here)
    assert n_first > 150 and n_later > 300
