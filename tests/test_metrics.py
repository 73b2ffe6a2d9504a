"""Hand-computed cases for ark.analysis.metrics (STaRK definitions, the paper's truncated lists, bootstrap CIs)."""

import numpy as np
import pytest

from ark.analysis.metrics import CandidateSet, NaNScoreError, aggregate, authors_aggregate, authors_fuse, bootstrap_ci, authors_record_metrics, evaluate, parse_metric, scored_list, scored_list_and_scores, stark_evaluate, stark_scores, torchmetrics_semantics

ALL = ("hit@1", "hit@5", "recall@20", "recall@2", "mrr")


def test_hand_computed_ranking():
    # gold {7, 9}; 7 at rank 2, 9 at rank 4.
    m = evaluate([3, 7, 5, 9, 1], gold=[7, 9], metrics=ALL)
    assert m == {"hit@1": 0.0, "hit@5": 1.0, "recall@20": 1.0, "recall@2": 0.5, "mrr": 0.5}


def test_gold_first_and_missing():
    assert evaluate([4, 2], gold=[4], metrics=("hit@1", "mrr")) == {"hit@1": 1.0, "mrr": 1.0}
    # gold outside the (truncated) list: not retrieved, reciprocal rank 0
    assert evaluate(list(range(20)), gold=[99], metrics=ALL) == {k: 0.0 for k in ALL}


def test_gold_outside_candidates_is_dropped():
    cands = [0, 1, 2, 3, 4, 5]
    # 100 is not a candidate: recall denominator is 1, not 2
    m = evaluate([2, 1], gold=[1, 100], candidate_ids=cands, metrics=("recall@20", "mrr"))
    assert m == {"recall@20": 1.0, "mrr": 0.5}
    # every gold outside the candidates: 0 on every metric (STaRK's empty-target rule)
    assert evaluate([1, 2], gold=[100], candidate_ids=cands, metrics=ALL) == {k: 0.0 for k in ALL}


def test_ranked_non_candidates_are_dropped_and_later_nodes_move_up():
    cands = [1, 2, 3]
    # 50 and 60 are not candidates; 3 moves from rank 3 to rank 1
    assert evaluate([50, 60, 3], gold=[3], candidate_ids=cands, metrics=("hit@1", "mrr")) == \
        {"hit@1": 1.0, "mrr": 1.0}


def test_duplicates_keep_first_position():
    m = evaluate([5, 5, 6, 7], gold=[6, 7], metrics=("recall@2", "mrr"))
    assert m == {"recall@2": 0.5, "mrr": 0.5}


def test_stark_qa_mode_equals_paper_on_full_ranking():
    rng = np.random.default_rng(1)
    cands = np.arange(30)
    for _ in range(50):
        ranking = rng.permutation(30).tolist()
        gold = rng.choice(30, size=rng.integers(1, 4), replace=False).tolist()
        a = evaluate(ranking, gold, cands, ALL, mode="paper")
        b = evaluate(ranking, gold, cands, ALL, mode="stark_qa")
        assert a == pytest.approx(b, abs=1e-12)


def test_stark_qa_mode_differs_on_truncated_list():
    cands = np.arange(100)
    ranking = list(range(20))            # ARK's top-20 list
    gold = [50]                          # not in the list: one of 80 tied unscored candidates
    paper = evaluate(ranking, gold, cands, ALL, mode="paper")
    stark = evaluate(ranking, gold, cands, ALL, mode="stark_qa")
    assert paper["mrr"] == 0.0
    assert 0.0 < stark["mrr"] <= 1 / 21 + 1e-7   # somewhere inside the bottom tie (float32)
    # metrics with k <= len(list) do not see the tie
    for k in ("hit@1", "hit@5", "recall@20", "recall@2"):
        assert paper[k] == stark[k] == 0.0


def test_stark_scores_positive_and_decreasing():
    s = stark_scores([9, 4, 9, 1])
    assert s == {9: 5.0, 4: 4.0, 1: 2.0}


def test_bad_metric_and_mode_names_list_choices():
    with pytest.raises(ValueError, match="hit@k"):
        parse_metric("precision@3")
    with pytest.raises(ValueError, match="paper, stark_qa"):
        evaluate([1], [1], mode="torch")


def test_candidate_set_filter():
    c = CandidateSet(np.array([2, 5]))
    assert c.filter([5, 3, 2, 99, -1]) == [5, 2]
    assert 5 in c and 3 not in c and 1000 not in c


def test_bootstrap_ci_brackets_mean_and_is_seeded():
    x = np.r_[np.ones(30), np.zeros(70)]
    mean, lo, hi = bootstrap_ci(x, n_boot=2000, seed=3)
    assert mean == pytest.approx(0.3)
    assert lo < 0.3 < hi
    # normal approximation: 1.96 * sqrt(.3*.7/100) ~= 0.09
    assert hi - lo == pytest.approx(2 * 0.0898, abs=0.03)
    assert bootstrap_ci(x, n_boot=2000, seed=3) == (mean, lo, hi)
    assert bootstrap_ci([0.4]) == (0.4, 0.4, 0.4)
    assert all(np.isnan(v) for v in bootstrap_ci([]))


def test_aggregate():
    per = [{"hit@1": 1.0, "mrr": 1.0}, {"hit@1": 0.0, "mrr": 0.5}]
    agg = aggregate(per, n_boot=200)
    assert agg["hit@1"]["mean"] == 0.5 and agg["mrr"]["mean"] == 0.75 and agg["mrr"]["n"] == 2
    assert 0.5 <= agg["mrr"]["ci_low"] <= 0.75 <= agg["mrr"]["ci_high"] <= 1.0


# ---------------------------------------------------------------------- stark-qa's call shape
def test_stark_evaluate_torchmetrics_mask_on_non_positive_scores():
    # scores are negative ranks: every gold has a score <= 0
    cands = list(range(10))
    scores = {3: -1.0, 7: -2.0, 1: -3.0}
    metrics = ["hit@1", "hit@2", "recall@2", "mrr"]
    before = stark_evaluate(cands, scores, [7], metrics, torchmetrics="1.7.0")
    after = stark_evaluate(cands, scores, [7], metrics, torchmetrics="1.9")
    assert before == {"hit@1": 0.0, "hit@2": 1.0, "recall@2": 1.0, "mrr": 0.5}
    # since torchmetrics 1.7.4: MRR and recall's numerator ignore gold with score <= 0, hit rate does not
    assert after == {"hit@1": 0.0, "hit@2": 1.0, "recall@2": 0.0, "mrr": 0.0}
    # recall's denominator is not masked: one positive gold of two gives 1/2, not 1/1
    mixed = stark_evaluate(cands, {3: 2.0, 7: -1.0}, [3, 7], ["recall@5"], torchmetrics="1.9")
    assert mixed == {"recall@5": 0.5}
    # positive scores: both behaviours agree
    pos = {3: 3.0, 7: 2.0, 1: 1.0}
    assert stark_evaluate(cands, pos, [7], metrics, "1.7.0") == stark_evaluate(cands, pos, [7], metrics, "1.9")


def test_stark_evaluate_accepts_a_tensor_of_answers_and_keeps_candidate_order():
    import torch

    m = stark_evaluate([4, 2, 0], {2: 1.0}, torch.LongTensor([2]), ["hit@1", "mrr"])
    assert m == {"hit@1": 1.0, "mrr": 1.0}


def test_stark_evaluate_ids_above_max_candidate_raise_like_stark_qa():
    with pytest.raises(IndexError, match="scored id 12 is above the largest candidate id 9"):
        stark_evaluate(range(10), {12: 1.0, 3: 0.5}, [3], ["mrr"])
    with pytest.raises(IndexError, match="answer id 10 is above the largest candidate id 9"):
        stark_evaluate(range(10), {3: 0.5}, [10], ["mrr"])
    with pytest.raises(ValueError, match="negative"):
        stark_evaluate(range(10), {3: 0.5}, [-1], ["mrr"])
    with pytest.raises(ValueError, match="scores is empty"):
        stark_evaluate(range(10), {}, [1], ["mrr"])
    with pytest.raises(ValueError, match="1.7.0, 1.9"):
        stark_evaluate(range(10), {3: 0.5}, [3], ["mrr"], torchmetrics="1.8")


def test_evaluate_drops_ids_above_max_candidate_where_stark_evaluate_raises():
    cands = [0, 1, 2, 3]
    for mode in ("paper", "stark_qa"):
        assert evaluate([99, 2], [2, 77], cands, ("hit@1", "recall@5"), mode=mode) == {"hit@1": 1.0, "recall@5": 1.0}


def test_stark_qa_mode_hit_at_k_beyond_list_uses_argsort_order():
    # hit@k for k > len(list) reaches into the bottom tie; the tie is ordered by torch.argsort(descending)
    import torch

    cands = np.arange(50)
    ranking = [0, 1]
    scores = torch.full((50,), 1.0)
    scores[0], scores[1] = 3.0, 2.0
    order = torch.argsort(scores, descending=True).tolist()
    for k in (3, 10, 40):
        inside = set(order[:k]) - {0, 1}
        gold_in, gold_out = min(inside), max(set(range(2, 50)) - inside)
        assert evaluate(ranking, [gold_in], cands, (f"hit@{k}",), mode="stark_qa") == {f"hit@{k}": 1.0}
        assert evaluate(ranking, [gold_out], cands, (f"hit@{k}",), mode="stark_qa") == {f"hit@{k}": 0.0}
        assert evaluate(ranking, [gold_in], cands, (f"hit@{k}",), mode="paper") == {f"hit@{k}": 0.0}


def test_stark_qa_mode_with_the_retrievers_own_scores():
    cands = np.arange(10)
    m17 = evaluate([5, 6], [6], cands, ("mrr",), mode="stark_qa", scores=[-0.1, -0.2], torchmetrics="1.7.0")
    m19 = evaluate([5, 6], [6], cands, ("mrr",), mode="stark_qa", scores=[-0.1, -0.2], torchmetrics="1.9")
    assert (m17, m19) == ({"mrr": 0.5}, {"mrr": 0.0})
    # paper mode ranks by the list's order; scores that disagree with it change nothing
    assert evaluate([5, 6], [6], cands, ("mrr",), scores=[0.1, 0.9]) == evaluate([5, 6], [6], cands, ("mrr",)) \
        == {"mrr": 0.5}
    with pytest.raises(ValueError, match="1 scores for a ranking of 2 ids"):
        evaluate([5, 6], [5], cands, ("mrr",), scores=[1.0])


def test_torchmetrics_semantics_of_installed_versions():
    assert [torchmetrics_semantics(v) for v in ("1.3.2", "1.7.0", "1.7.3", "1.7.4", "1.9.0", "2.0")] == \
        ["1.7.0", "1.7.0", "1.7.0", "1.9", "1.9", "1.9"]


# ---------------------------------------------------------------------- cut order
def test_cut_top_first_lets_non_candidates_cost_slots_candidates_first_does_not():
    cands = [1, 2, 3, 4]
    fused = [100, 101, 1, 2, 3]          # two non-candidates (say MAG authors) lead the fused list
    top_first = scored_list(fused, 3, cands, "top_first")
    cand_first = scored_list(fused, 3, cands, "candidates_first")
    assert top_first == [100, 101, 1] and cand_first == [1, 2, 3]
    assert evaluate(top_first, [3], cands, ("recall@20",)) == {"recall@20": 0.0}
    assert evaluate(cand_first, [3], cands, ("recall@20",)) == {"recall@20": 1.0}
    # every id a candidate: the two orders agree
    assert scored_list(fused, 3, None, "top_first") == scored_list(fused, 3, None, "candidates_first")
    with pytest.raises(ValueError, match="top_first, candidates_first"):
        scored_list(fused, 3, cands, "after")


def test_scored_list_and_scores_cut_both_alike():
    cands = [1, 2, 3, 4]
    ids, scores = scored_list_and_scores([100, 1, 101, 2, 3], [9.0, 8.0, 7.0, 6.0, 5.0], 3, cands, "candidates_first")
    assert (ids, scores) == ([1, 2, 3], [8.0, 6.0, 5.0])
    ids, scores = scored_list_and_scores([100, 1, 101, 2, 3], [9.0, 8.0, 7.0, 6.0, 5.0], 3, cands, "top_first")
    assert (ids, scores) == ([100, 1, 101], [9.0, 8.0, 7.0])
    assert scored_list_and_scores([5, 6], None, 1) == ([5], None)
    assert scored_list([5, 6, 7], None) == [5, 6, 7]   # top None cuts nothing
    with pytest.raises(ValueError, match="2 scores for a ranking of 3 ids"):
        scored_list_and_scores([5, 6, 7], [1.0, 2.0], 2)


# ---------------------------------------------------------------------- NaN scores
def test_evaluate_refuses_nan_scores_in_every_mode():
    cands = np.arange(10)
    for mode in ("paper", "stark_qa", "authors"):
        with pytest.raises(NaNScoreError, match=r"score of node 6 \(position 1 of the ranking\) is NaN"):
            evaluate([5, 6, 7], [6], cands, ("mrr",), mode=mode, scores=[0.9, float("nan"), 0.1])


def test_stark_evaluate_fills_like_builtin_min_over_nan_scores():
    """stark-qa's fill for unscored candidates is builtin ``min(pred) - 1``: a NaN that is not the first
    score is skipped (the fill is 1.0 here, so node 1 at 2.0 ranks right after the NaN-scored node 0),
    a NaN first score makes every unscored candidate NaN, which torch ranks above 2.0."""
    cands = list(range(6))
    nan = float("nan")
    later = stark_evaluate(cands, {1: 2.0, 0: nan}, [1], ["mrr", "hit@1", "hit@2"], torchmetrics="1.7.0")
    assert later == {"mrr": 0.5, "hit@1": 0.0, "hit@2": 1.0}
    first = stark_evaluate(cands, {0: nan, 1: 2.0}, [1], ["mrr", "hit@5"], torchmetrics="1.7.0")
    assert first == {"mrr": pytest.approx(1 / 6), "hit@5": 0.0}
    # since torchmetrics 1.7.4 a NaN-scored gold is masked like one scored <= 0 (nan > 0 is False)
    assert stark_evaluate(cands, {1: 2.0, 0: nan}, [0], ["mrr", "hit@1"], torchmetrics="1.9") == \
        {"mrr": 0.0, "hit@1": 1.0}


# ---------------------------------------------------------------------- the authors' protocol
def test_authors_mode_scores_the_whole_list_without_candidate_filter():
    cands = [1, 2, 3, 4]
    fused = [100, 101] + list(range(200, 220)) + [3]   # gold 3 at rank 23, behind two non-candidates
    authors = evaluate(fused, [3], cands, ("hit@1", "recall@20", "mrr"), mode="authors")
    assert authors == {"hit@1": 0.0, "recall@20": 0.0, "mrr": pytest.approx(1 / 23)}
    paper = evaluate(scored_list(fused, 20, cands), [3], cands, ("hit@1", "recall@20", "mrr"))
    assert paper == {"hit@1": 0.0, "recall@20": 0.0, "mrr": 0.0}
    # a non-candidate keeps its slot: gold 3 at rank 3 is MRR 1/3 (paper mode's filter gives 1)
    assert evaluate([100, 101, 3], [3], cands, ("mrr",), mode="authors") == {"mrr": pytest.approx(1 / 3)}
    assert evaluate([100, 101, 3], [3], cands, ("mrr",)) == {"mrr": 1.0}
    # gold ids are not filtered either: a non-candidate gold stays in Recall's denominator
    assert evaluate([3], [3, 100], cands, ("recall@20",), mode="authors") == {"recall@20": 0.5}
    assert evaluate([3], [3, 100], cands, ("recall@20",)) == {"recall@20": 1.0}


def test_authors_fuse_breaks_vote_ties_by_first_index_in_the_concatenation():
    # votes: 1 and 3 have two each, 2 and 4 one each. By first index in L = [2,1,3] + [3,4,1]: 1 (1) before 3
    # (2), 2 (0) before 4 (4); tie_break="list" puts 3 first (rank 0 in agent 2's list)
    assert authors_fuse([[2, 1, 3], [3, 4, 1]]) == [1, 3, 2, 4]
    from ark.fusion import fuse

    assert fuse([[2, 1, 3], [3, 4, 1]]) == [3, 1, 2, 4]


def test_authors_aggregate_leaves_failed_queries_out():
    per = [{"hit@1": 1.0}, None, {"hit@1": 0.0}, None]
    agg = authors_aggregate(per, n_boot=100)
    assert agg["hit@1"]["mean"] == 0.5 and agg["hit@1"]["n"] == 2 and agg["hit@1"]["n_left_out"] == 2
    # the runner's default counts them out of the mean too but calls the run incomplete; as misses: 0.25
    assert aggregate([m or {"hit@1": 0.0} for m in per], n_boot=100)["hit@1"]["mean"] == 0.25


def test_authors_record_metrics_rescore_a_run_record_without_the_cut():
    # two agents; fused by votes then first index in the concatenation: 7 (2 votes), 1, 2, 3, ..., gold 40 last
    rec = {"status": "ok", "gold": [40], "ranking": [7, 1, 2],
           "agent_rankings": [[1, 7] + list(range(100, 120)), [7, 2, 40]]}
    m = authors_record_metrics(rec, ("hit@1", "recall@20", "mrr"))
    assert m == {"hit@1": 0.0, "recall@20": 0.0, "mrr": pytest.approx(1 / 24)}   # 7, 1, 100..119, 2, 40
    assert authors_record_metrics({**rec, "status": "failed"}) is None
    # a baseline's record: its one list as it is
    assert authors_record_metrics({"status": "ok", "gold": [5], "ranking": [4, 5], "agent_rankings": [[4, 5]]},
                                  ("mrr",)) == {"mrr": 0.5}
