"""The run-directory reader (ark/run/rundir.py) on directories the runner writes: identity, records,
trajectories, shards, a torn last line."""
from __future__ import annotations

import json

import pytest

from ark import atomic
from ark.run import runner, shards
from ark.run.rundir import RunDir, find_run_dirs
from tests.helpers.tiny_retriever import TinyRetriever, make_queries


def _run(out, queries, **kw):
    return runner.run_queries(TinyRetriever(**kw), queries, runner.RunSettings(out_dir=out, progress=False, n_boot=10))


def test_records_metrics_and_identity_from_the_path(tmp_path):
    out = tmp_path / "exp" / "demo" / "bm25_test"
    summary = _run(out, make_queries(5), fail_ids={2})
    run = RunDir(out)
    assert [r["query_id"] for r in run.records()] == [q.id for q in make_queries(5)]
    assert [r["query_id"] for r in run.records("ok")] == [q.id for q in make_queries(5) if q.id != 2]
    assert run.metric_means()["hit@1"] == pytest.approx(summary["metrics"]["hit@1"]["mean"])
    assert run.metric_cis()["mrr"][1] == pytest.approx(summary["metrics"]["mrr"]["ci_low"])
    assert not run.complete                                   # a failed query
    assert (run.info["experiment"], run.info["graph"], run.info["retriever"]) == ("exp", "demo", "bm25")
    assert run.per_query_metric("hit@1", include_failed=True)["2"] == 0.0 and "2" not in run.per_query_metric("hit@1")
    (out / "run.json").write_text(json.dumps({"graph": "prime", "retriever": "ark", "ablation": "no_neighbors"}))
    again = RunDir(out)
    assert (again.info["graph"], again.info["ablation"], again.info["experiment"]) == ("prime", "no_neighbors", "exp")


def test_a_torn_last_line_is_skipped_and_the_latest_record_wins(tmp_path):
    out = tmp_path / "r"
    _run(out, make_queries(3), fail_ids={1})
    _run(out, make_queries(3))                                 # retries query 1: a second line for it
    with open(out / "predictions.jsonl", "a") as f:
        f.write('{"query_id": 9, "sta')
    run = RunDir(out)
    assert len(run.records()) == 3 and run.record(1)["status"] == "ok"


def test_shards_are_left_out_once_merged(tmp_path):
    out = tmp_path / "exp" / "demo" / "run"
    qs = make_queries(6)
    for i in range(2):
        _run(shards.shard_dir(out, (i, 2)), shards.select_queries(qs, shard=(i, 2)))
    assert len(find_run_dirs([tmp_path])) == 2                 # shards only: each is a run
    shards.merge(sorted((out / "shards").iterdir()), out)
    assert find_run_dirs([tmp_path]) == [out]
    assert len(RunDir(out).records()) == 6


def test_not_a_run_directory(tmp_path):
    with pytest.raises(FileNotFoundError, match="predictions.jsonl"):
        RunDir(tmp_path)
    with pytest.raises(FileNotFoundError, match="nope"):
        find_run_dirs([tmp_path / "nope"])


def _write_many(path: str, writer: int) -> None:
    for k in range(200):
        atomic.write_json(path, {"writer": writer, "k": k})


def test_several_processes_write_one_json_file_at_once(tmp_path):
    """The shards of a run (SLURM array tasks) all write the run's run.json when they start."""
    import multiprocessing as mp

    path = tmp_path / "run.json"
    procs = [mp.get_context("fork").Process(target=_write_many, args=(str(path), i)) for i in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    assert json.loads(path.read_text())["k"] == 199 and [p.name for p in tmp_path.iterdir()] == ["run.json"]
