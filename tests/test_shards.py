"""Sharded runs without hand-merging (`ark.run.shards`, `ark.config.callbacks`) and the LLM cache
pieces they stand on (`ark.llm.cache.merge`, a cache's read-only ``fallback``), on the demo graph with the
scripted server. The same on a real SLURM cluster: tests/slurm/."""

from __future__ import annotations

import json
import logging
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from ark.run import shards
from ark.llm.cache import ResponseCache, cache_key, merge
from ark.config.compose import compose
from ark.config.evaluation import run
from tests.helpers import golden_runs
from tests.helpers.paths import DEMO_ROOT, REPO


def _key(i: int) -> str:
    return cache_key(model="m", messages=[{"role": "user", "content": str(i)}], tools=None, params={}, agent_index=0)


def test_merge_copies_every_reply_into_the_target_once(tmp_path):
    a, b, target = (ResponseCache(tmp_path / f"{n}.sqlite") for n in ("a", "b", "target"))
    for i in range(5):
        a.put(_key(i), {"i": i, "from": "a"})
    for i in range(3, 8):
        b.put(_key(i), {"i": i, "from": "b"})
    target.put(_key(0), {"i": 0, "from": "target"})
    for c in (a, b, target):
        c.close()
    added = merge([a.path, b.path, tmp_path / "missing.sqlite"], target.path)
    assert added == 7 and len(target) == 8
    assert target.get(_key(0))["from"] == "target"          # what the target held stays (first write wins)
    assert target.get(_key(4))["from"] == "a" and target.get(_key(7))["from"] == "b"
    assert merge([a.path], target.path) == 0                # merging again adds nothing


def test_merge_of_an_unreadable_cache_names_it_and_writes_nothing(tmp_path):
    good = ResponseCache(tmp_path / "good.sqlite")
    good.put(_key(1), {"i": 1})
    good.close()
    bad = tmp_path / "bad.sqlite"
    bad.write_text("not a database")
    with pytest.raises(sqlite3.DatabaseError, match="bad.sqlite"):
        merge([good.path, bad], tmp_path / "target.sqlite")
    assert not (tmp_path / "target.sqlite").exists()


def test_a_cache_reads_its_fallback_and_writes_only_itself(tmp_path, caplog):
    shared = ResponseCache(tmp_path / "shared.sqlite")
    shared.put(_key(1), {"i": 1})
    shared.close()
    own = ResponseCache(tmp_path / "own.sqlite", fallback=shared.path)
    assert own.get(_key(1)) == {"i": 1} and own.get(_key(2)) is None
    own.put(_key(2), {"i": 2})
    assert len(ResponseCache(shared.path)) == 1 and len(own) == 1          # the shared file is never written
    assert ResponseCache(tmp_path / "own.sqlite", fallback=shared.path).get(_key(2)) == {"i": 2}
    # a fallback that cannot be read is a miss with one warning; the file is left where it is
    (tmp_path / "broken.sqlite").write_text("not a database")
    other = ResponseCache(tmp_path / "other.sqlite", fallback=tmp_path / "broken.sqlite")
    with caplog.at_level(logging.WARNING, logger="ark.llm.cache"):
        assert other.get(_key(1)) is None and other.get(_key(3)) is None
    assert sum("cannot be read" in r.message for r in caplog.records) == 1
    assert (tmp_path / "broken.sqlite").read_text() == "not a database"
    with pytest.raises(ValueError, match="fall back on itself"):
        ResponseCache(tmp_path / "own.sqlite", fallback=tmp_path / "own.sqlite")


def test_a_fallback_still_being_created_is_read_once_it_is_written(tmp_path, caplog):
    # another process has just created the shared cache: its schema is in that process's WAL, which a
    # read-only (immutable) reader does not see; the reader misses quietly and sees the file once written
    shared = ResponseCache(tmp_path / "shared.sqlite")
    own = ResponseCache(tmp_path / "own.sqlite", fallback=shared.path)
    with caplog.at_level(logging.WARNING, logger="ark.llm.cache"):
        assert own.get(_key(1)) is None
    shared.put(_key(1), {"i": 1})
    shared.close()   # the last connection checkpoints its WAL into the file
    assert own.get(_key(1)) == {"i": 1}
    assert not [r for r in caplog.records if "cannot be read" in r.message]


def _overrides(tmp, server, *more):
    return [f"paths.data={DEMO_ROOT}", f"paths.runs={tmp}/runs", f"paths.llm_cache={tmp}/llm.sqlite", "graph=demo",
            "backbone=scripted", f"backbone.base_url={server.base_url}", "budget=t5_n1", "limit=10",
            "progress=false", "n_boot=50", *more]


def _results(run_dir, tmp, server):
    files = golden_runs.normalized(run_dir, tmp, server.base_url)
    metrics = json.loads(files["metrics.json"])
    return files["predictions.jsonl"], {k: v for k, v in metrics.items() if k not in ("run", "this_run")}


def test_shards_write_their_own_caches_and_merge_into_the_unsharded_run(tmp_path, scripted):
    single = run(compose(_overrides(tmp_path / "single", scripted)))
    calls = scripted.calls
    shard_dirs = []
    for i in range(3):
        cfg = compose(_overrides(tmp_path / "sharded", scripted, f"shard={i}/3"))
        run(cfg)
        shard_dirs.append(shards.run_shards(cfg.out_dir, 3)[i].path)
        if i < 2:
            assert shards.pending(cfg.out_dir, 3) == [f"{j}/3 (unfinished)" for j in range(i + 1, 3)]
    out = Path(compose(_overrides(tmp_path / "sharded", scripted)).out_dir)
    assert scripted.calls - calls == calls == 10 * 2
    assert len(ResponseCache(tmp_path / "sharded" / "llm.sqlite")) == 0   # no shard wrote the run's cache
    assert sum(len(ResponseCache(d / shards.SHARD_CACHE)) for d in shard_dirs) == 20

    summary = shards.merge_run(out, 3)
    assert summary["complete"] and summary["run"]["merged_from"] == ["0/3", "1/3", "2/3"]
    assert summary["run"]["shard"] is None
    assert summary["metrics"] == single["metrics"]                      # the same queries in the same order: same CIs
    assert _results(out, tmp_path / "sharded", scripted) == _results(
        Path(compose(_overrides(tmp_path / "single", scripted)).out_dir), tmp_path / "single", scripted)
    assert shards.merged_is_current(out, 3)

    target = shards.shard_llm_cache_target(out, 3)
    assert target == tmp_path / "sharded" / "llm.sqlite"
    assert shards.merge_llm_caches(out, target, 3) == 20
    assert not list((out / "shards").glob("*/llm_cache.sqlite*"))
    # the run's cache now answers every call: a shard run again from scratch pays for nothing
    calls = scripted.calls
    for d in shard_dirs:
        (d / "predictions.jsonl").unlink()
    run(compose(_overrides(tmp_path / "sharded", scripted, "shard=1/3")))
    assert scripted.calls == calls


def test_merge_refuses_shards_that_have_not_finished(tmp_path, scripted):
    run(compose(_overrides(tmp_path, scripted, "shard=0/2")))
    out = Path(compose(_overrides(tmp_path, scripted)).out_dir)
    with pytest.raises(shards.ShardsNotReady, match=r"shards 1/2 have not finished"):
        shards.merge_run(out)
    done = subprocess.run([sys.executable, "-m", "ark", "merge", str(out)], capture_output=True, text=True,
                          cwd=REPO)
    assert done.returncode == 2 and done.stderr.strip().endswith("(shard=i/2) and merge again")
    assert not (out / "metrics.json").exists()
    done = subprocess.run([sys.executable, "-m", "ark", "merge", str(tmp_path)], capture_output=True, text=True,
                          cwd=REPO)
    assert done.returncode == 2 and "no shard directories" in done.stderr


@pytest.mark.commands
def test_a_sharded_sweep_merges_itself_when_its_last_shard_ends(tmp_path):
    """Hydra's basic launcher runs the shards one after another: the last one merges, and the sweep's end
    would move the shards' LLM caches (BM25 has none) into the run's cache."""
    cmd = [sys.executable, "experiments/run.py", "-m", f"paths.data={DEMO_ROOT}", f"paths.runs={tmp_path}/runs",
           "graph=demo", "retriever=bm25", "limit=12", "progress=false", "n_boot=50", "shard=0/3,1/3,2/3"]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    out = tmp_path / "runs" / "default" / "demo" / "bm25_test_limit12"
    summary = json.loads((out / "metrics.json").read_text())
    assert summary["complete"] and summary["n"] == 12 and len(summary["run"]["merged_from"]) == 3
    assert "merged its 3 shards (12/12 ok, complete)" in done.stderr   # the repo's own log line
    single = run(compose([f"paths.data={DEMO_ROOT}", f"paths.runs={tmp_path}/single", "graph=demo", "retriever=bm25",
                          "limit=12", "progress=false", "n_boot=50"]))
    assert summary["metrics"] == single["metrics"]
