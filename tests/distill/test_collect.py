"""Teacher collection on the demo graph with the real local backbone: label-free, resumable, summarised."""

from __future__ import annotations

import json
import shutil

import pytest

from ark.distill.collect import SETTINGS_FILE, CollectConfig, check_resume, export, recall, subsample

pytestmark = pytest.mark.distill


def test_collection_writes_every_trajectory_without_reading_labels(collected):
    s = collected.summary
    assert (s["queries"], s["queries_ok"], s["trajectories"]) == (3, 3, 6)   # 3 queries x 2 agents
    assert s["uses_labels"] is False and s["select"] == "all"
    assert sum(s["stop_reasons"].values()) == 6
    assert s["steps"] <= 6 * 3                                              # T_max = 3
    assert s["prompt_tokens"] > 0 and s["cost_usd"] == 0.0                  # local model: free
    lines = (collected.train_dir / "trajectories.jsonl").read_text().splitlines()
    assert len(lines) == 6
    trajs = [json.loads(line) for line in lines]
    assert {t["agent_index"] for t in trajs} == {0, 1}
    # The queries are the seeded subsample of the train split, and the runner never saw their answers.
    expected = [q.id for q in subsample(collected.train_queries, 3, seed=0)]
    records = [json.loads(line) for line in (collected.train_dir / "predictions.jsonl").read_text().splitlines()]
    assert sorted(r["query_id"] for r in records) == sorted(expected)
    assert all(r["gold"] == [] for r in records)
    assert any(q.answer_ids for q in collected.train_queries)             # though the split has them


def test_collection_resumes_without_new_llm_calls(collected):
    r = collected.resumed
    assert r["trajectories"] == collected.summary["trajectories"]
    assert r["prompt_tokens"] == collected.summary["prompt_tokens"]
    records = (collected.train_dir / "predictions.jsonl").read_text().splitlines()
    assert len(records) == 3                                                # nothing recomputed or duplicated
    assert collected.resumed_llm_requests == 0                              # not one request to the model


def test_subsample_is_seeded_and_nested():
    items = list(range(100))
    small, large = subsample(items, 6, seed=0), subsample(items, 60, seed=0)
    assert large[:6] == small                                               # "600" inside "6000"
    assert subsample(items, 6, seed=0) == small and subsample(items, 6, seed=1) != small
    assert sorted(subsample(items, None)) == items and len(set(large)) == 60


def test_rejection_sampling_is_opt_in_and_labelled(collected, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(collected.train_dir, run)
    cfg = CollectConfig(n_queries=3, trajectories_per_query=2, select="best_recall")
    with pytest.raises(ValueError, match="gold"):
        export(run, [], cfg, gold=None)
    trajs = [json.loads(line) for line in (run / "trajectories.jsonl").read_text().splitlines()]
    queries = [q for q in collected.train_queries if any(str(t["query_id"]) == str(q.id) for t in trajs)]
    # Make agent 1's selection of the first query the gold answer, so it must win there.
    first = next(t for t in trajs if str(t["query_id"]) == str(queries[0].id) and t["agent_index"] == 1)
    gold = {str(q.id): list(q.answer_ids) for q in queries}
    if first["selected"]:
        gold[str(queries[0].id)] = first["selected"]
    summary = export(run, queries, cfg, gold)
    assert summary["uses_labels"] is True and summary["trajectories"] == len(queries)
    kept = [json.loads(line) for line in (run / "trajectories.jsonl").read_text().splitlines()]
    assert len({str(t["query_id"]) for t in kept}) == len(kept) == len(queries)
    for t in kept:
        rivals = [u for u in trajs if str(u["query_id"]) == str(t["query_id"])]
        best = max(recall(u["selected"], gold[str(t["query_id"])]) for u in rivals)
        assert recall(t["selected"], gold[str(t["query_id"])]) == best


def test_recall_and_config_errors():
    assert recall([1, 2, 9], [1, 2, 3, 4]) == 0.5 and recall([1], []) == 0.0
    with pytest.raises(ValueError, match=r"select='best'.*\['all', 'best_recall'\]"):
        CollectConfig(select="best")


def test_resuming_under_other_settings_is_refused(collected, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(collected.train_dir, run)
    recorded = json.loads((run / SETTINGS_FILE).read_text())
    assert (recorded["t_max"], recorded["temperature"], recorded["trajectories_per_query"]) == (3, 0.7, 2)
    same = CollectConfig(split="train", n_queries=30, trajectories_per_query=2, t_max=3)  # more queries: fine
    check_resume(run, same, recorded["teacher"])
    with pytest.raises(ValueError, match=r"t_max=3.*this one has t_max=5"):
        check_resume(run, CollectConfig(split="train", trajectories_per_query=2, t_max=5), recorded["teacher"])
    with pytest.raises(ValueError, match=r"teacher='other-model'"):
        check_resume(run, same, "other-model")
    assert json.loads((run / SETTINGS_FILE).read_text()) == recorded  # a refused resume writes nothing
