"""The evaluation runner: records, failures and resume, kill -9 mid-run, shards, concurrency."""

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ark import atomic
from ark.run import runner
from ark.analysis.metrics import evaluate
from ark.run import shards
from ark.run.records import load_predictions
from ark.run.runner import RunSettings, run_queries
from ark.run.shards import merge, parse_shard, select_queries
from ark.run.summary import summarize
from tests.helpers.paths import DEMO_ROOT, REPO
from tests.helpers.policies import search_select_finish
from tests.helpers.tiny_retriever import Q, Result, TinyRetriever, expected_ranking, make_queries



def settings(tmp_path, **kw):
    kw.setdefault("out_dir", tmp_path / "run")
    kw.setdefault("progress", False)
    kw.setdefault("n_boot", 200)
    return RunSettings(**kw)


def test_run_writes_records_and_summary(tmp_path):
    qs = make_queries(20)
    s = settings(tmp_path, concurrency=4)
    summary = run_queries(TinyRetriever(), qs, s)
    recs = load_predictions(s.out_dir)
    assert len(recs) == 20 and all(r["status"] == "ok" for r in recs.values())
    r3 = recs["3"]
    assert r3["ranking"] == expected_ranking(3)[:20]              # truncated to top 20
    assert r3["metrics"] == evaluate(expected_ranking(3)[:20], [3, 103], metrics=s.metrics)
    assert r3["metrics"]["mrr"] == 0.25 and r3["metrics"]["recall@20"] == 0.5
    assert r3["tool_counts"] == [{"search_graph": 2, "explore_neighbors": 0},
                                 {"search_graph": 1, "explore_neighbors": 0}]
    traj = json.loads((s.out_dir / r3["trajectory_file"]).read_text())
    assert len(traj) == 2
    # summary: means over all 20, tool shares, histogram of neighborhood calls per trajectory
    mrr = [evaluate(expected_ranking(i)[:20], [i % 7, 100 + i])["mrr"] for i in range(20)]
    assert summary["metrics"]["mrr"]["mean"] == pytest.approx(sum(mrr) / 20)
    assert summary["complete"] and summary["n_ok"] == 20 and summary["n_failed"] == 0
    nb = sum(i % 3 for i in range(20))
    assert summary["tool_calls"] == {"search_graph": 60, "explore_neighbors": nb}
    assert summary["tool_share"]["search_graph"] == pytest.approx(60 / (60 + nb))
    hist = summary["neighbor_calls_per_trajectory"]
    assert sum(hist["success"].values()) + sum(hist["failure"].values()) == 40
    assert summary["latency_s"]["max"] == pytest.approx(0.69)
    assert summary["tokens"] == {"prompt": 2000, "completion": 200, "total": 2200}
    assert summary["cost_usd"] == pytest.approx(0.02)
    on_disk = json.loads((s.out_dir / "metrics.json").read_text())
    assert on_disk["metrics"]["mrr"] == summary["metrics"]["mrr"]
    lines = (s.out_dir / "per_query.csv").read_text().splitlines()
    assert len(lines) == 21 and lines[0].startswith("query_id,status,hit@1")
    assert len((s.out_dir / "trajectory_stats.csv").read_text().splitlines()) == 41


def test_failures_are_recorded_then_retried(tmp_path):
    qs = make_queries(12)
    s = settings(tmp_path)
    summary = run_queries(TinyRetriever(fail_ids={2, 5}), qs, s)
    assert summary["n_failed"] == 2 and not summary["complete"] and "INCOMPLETE" in summary["warning"]
    assert summary["metrics"]["hit@1"]["n"] == 10
    assert load_predictions(s.out_dir)["5"]["error"] == "RuntimeError: boom 5"
    # counted as misses: complete, and the two failures average in as zeros
    miss = summarize(s.out_dir, qs, settings(tmp_path, count_failed_as_miss=True))
    assert miss["complete"] and miss["metrics"]["mrr"]["n"] == 12
    assert miss["metrics"]["mrr"]["mean"] == pytest.approx(summary["metrics"]["mrr"]["mean"] * 10 / 12)
    # resume: only the failed ones run again
    again = TinyRetriever()
    summary = run_queries(again, qs, s)
    assert sorted(again.calls) == [2, 5]
    assert summary["complete"] and summary["n_ok"] == 12 and summary["this_run"]["computed"] == 2


def test_retrieval_error_field_counts_as_failure(tmp_path):
    class ErrRetriever(TinyRetriever):
        async def aretrieve(self, query, query_id=""):
            r = await super().aretrieve(query, query_id)
            r.error = "all agents failed" if query_id == 1 else None
            return r

    summary = run_queries(ErrRetriever(), make_queries(3), settings(tmp_path))
    assert summary["n_failed"] == 1 and summary["failed_queries"][0]["error"] == "all agents failed"


def test_concurrency_limit_is_reached_and_respected(tmp_path):
    r = TinyRetriever(delay=0.02)
    run_queries(r, make_queries(40), settings(tmp_path, concurrency=8))
    assert r.max_in_flight == 8


def test_partial_last_line_is_repaired(tmp_path):
    qs = make_queries(6)
    s = settings(tmp_path)
    run_queries(TinyRetriever(), qs[:3], s)
    with open(s.out_dir / "predictions.jsonl", "a") as f:
        f.write('{"query_id": 3, "status": "o')           # a kill mid-write
    r = TinyRetriever()
    summary = run_queries(r, qs, s)
    assert sorted(r.calls) == [3, 4, 5] and summary["n_ok"] == 6
    for line in (s.out_dir / "predictions.jsonl").read_text().splitlines():
        json.loads(line)


def test_select_queries_and_shard_parsing():
    qs = make_queries(10)
    assert [q.id for q in select_queries(qs, limit=5)] == [0, 1, 2, 3, 4]
    assert [q.id for q in select_queries(qs, limit=7, shard="1/3")] == [1, 4]
    assert parse_shard("2/4") == (2, 4) and parse_shard(None) is None
    with pytest.raises(ValueError, match="0 <= i < n"):
        parse_shard("4/4")
    with pytest.raises(ValueError, match="'i/n'"):
        parse_shard("two")
    with pytest.raises(ValueError, match="concurrency"):
        RunSettings(out_dir="x", concurrency=0)
    with pytest.raises(ValueError, match="valid forms"):
        RunSettings(out_dir="x", metrics=("ndcg@3",))


def test_shard_merge_equals_single_run(tmp_path):
    qs = make_queries(23)
    single = run_queries(TinyRetriever(fail_ids={4}), qs, settings(tmp_path, out_dir=tmp_path / "single"))
    shard_dirs = []
    for i in range(3):
        d = shards.shard_dir(tmp_path / "merged", f"{i}/3")
        run_queries(TinyRetriever(fail_ids={4}), select_queries(qs, shard=(i, 3)), settings(tmp_path, out_dir=d))
        shard_dirs.append(d)
    merged = merge(shard_dirs, tmp_path / "merged")      # queries and settings from the shards
    for key in ("n", "n_ok", "n_failed", "complete", "metrics", "tool_calls", "tool_share", "tokens",
                "neighbor_calls_per_trajectory"):
        assert merged[key] == single[key], key
    assert merged["latency_s"] == pytest.approx(single["latency_s"])
    assert merged["cost_usd"] == pytest.approx(single["cost_usd"])
    a, b = load_predictions(tmp_path / "single"), load_predictions(tmp_path / "merged")
    assert a.keys() == b.keys() and all(a[k]["ranking"] == b[k]["ranking"] for k in a)
    assert (tmp_path / "merged" / "trajectories" / "7.json").exists()
    # ark merge, as a user types it: the shards under <run>/shards/ found by themselves
    out = subprocess.run([sys.executable, "-m", "ark", "merge", str(tmp_path / "merged")],
                         capture_output=True, text=True, cwd=REPO, check=True).stdout
    head = json.loads(out.splitlines()[0])
    assert (head["n"], head["n_ok"], head["n_failed"], head["complete"]) == (23, 22, 1, False)
    assert f"{'mrr':>10}: {single['metrics']['mrr']['mean']:.4f}" in out
    # a run without shards: one line naming where it looked
    bad = subprocess.run([sys.executable, "-m", "ark", "merge", str(tmp_path / "single")],
                         capture_output=True, text=True, cwd=REPO)
    assert bad.returncode == 2 and bad.stderr == (f"ark merge: error: {tmp_path / 'single'}: no shard directories "
                                                  "(shards/<i>-of-<n>)\n")


KILL_SCRIPT = """
import sys
from pathlib import Path
from tests.helpers.tiny_retriever import TinyRetriever, make_queries
from ark.run.runner import RunSettings, run_queries
out, log = sys.argv[1], sys.argv[2]
run_queries(TinyRetriever(delay=0.01, log_path=log, hang_from=40), make_queries(80),
            RunSettings(out_dir=Path(out), concurrency=4, progress=False, n_boot=50))
"""


def test_resume_after_kill_9(tmp_path):
    out, log = tmp_path / "run", tmp_path / "calls.log"
    proc = subprocess.Popen([sys.executable, "-c", KILL_SCRIPT, str(out), str(log)], cwd=REPO)
    pred = out / "predictions.jsonl"
    # queries 0-39 finish, 40-43 (concurrency 4) hang: wait for the 40 records (the loop only
    # guards against a run that never writes them), then kill it with four queries in flight
    for _ in range(6000):
        if pred.exists() and pred.read_text().count("\n") >= 40 or proc.poll() is not None:
            break
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    before_text = pred.read_text()
    before = {k for k, r in load_predictions(out).items() if r["status"] == "ok"}
    assert before == {str(i) for i in range(40)}
    started_before = set(log.read_text().split())
    assert started_before - before == {"40", "41", "42", "43"}  # in flight when killed

    r = TinyRetriever()
    summary = run_queries(r, make_queries(80), RunSettings(out_dir=out, progress=False, n_boot=50))
    recomputed = {str(q) for q in r.calls}
    assert not recomputed & before                         # completed queries are not recomputed
    assert recomputed | before == {str(i) for i in range(80)}
    assert started_before - before <= recomputed           # the in-flight ones were redone
    assert summary["complete"] and summary["n_ok"] == 80   # nothing lost
    complete_lines = before_text[: before_text.rfind("\n") + 1]
    assert pred.read_text().startswith(complete_lines)     # earlier records kept byte for byte


# --- the real pieces: demo graph, ARK agent, scripted OpenAI-compatible server -------------------
def test_run_resumes_without_repeating_llm_calls(tmp_path, scripted, demo_root):
    from ark.config.compose import compose
    from ark.config.evaluation import run

    server = scripted
    overrides = ["graph=demo", "backbone=scripted", f"backbone.base_url={server.base_url}", "limit=6",
                 "budget=t5_n1", f"paths.data={demo_root}", f"paths.runs={tmp_path}",
                 f"paths.llm_cache={tmp_path}/llm.sqlite", "progress=false", "n_boot=100"]
    cfg = compose(overrides)
    first = run(cfg)
    out = Path(cfg.out_dir)
    assert out == tmp_path / "default" / "demo" / "ark-scripted-t5_n1-full_test_limit6"
    assert first["complete"] and first["n_ok"] == 6 and server.calls == 12     # 6 queries x 2 steps
    rec = next(iter(load_predictions(out).values()))
    assert len(rec["ranking"]) == 5 and rec["tool_counts"][0]["search_graph"] == 1
    assert json.loads((out / rec["trajectory_file"]).read_text())[0]["stop_reason"] == "finish"
    assert (out / "config.yaml").exists() and "sk-" not in (out / "config.yaml").read_text()

    # a rerun skips everything; a run that lost two records recomputes them from the LLM cache
    assert run(cfg)["this_run"]["computed"] == 0
    lines = (out / "predictions.jsonl").read_text().splitlines()
    (out / "predictions.jsonl").write_text("\n".join(lines[:4]) + "\n")
    again = run(cfg)
    assert again["this_run"]["computed"] == 2 and again["complete"]
    assert server.calls == 12                                                   # no LLM call repeated
    assert again["metrics"] == first["metrics"]


class AuthorsFirst:
    """A fused list that leads with 20 non-candidates (ids >= 200, say MAG authors), then the gold."""

    async def aretrieve(self, query, query_id=""):
        r = [200 + j for j in range(20)] + [query_id % 7, 50]
        return Result(ranking=r, agent_rankings=[r])


@pytest.mark.parametrize("cut", ["top_first", "candidates_first"])
def test_cut_order_decides_whether_non_candidates_cost_slots(tmp_path, cut):
    qs = [Q(i, f"question {i}", (i % 7,)) for i in range(5)]
    s = settings(tmp_path, cut=cut, top=20)
    summary = run_queries(AuthorsFirst(), qs, s, candidate_ids=list(range(100)))
    rec = load_predictions(s.out_dir)["1"]
    if cut == "top_first":   # the paper's order: the 20 slots go to the non-candidates, the gold is cut
        assert rec["ranking"] == [200 + j for j in range(20)]
        assert rec["metrics"]["hit@1"] == rec["metrics"]["recall@20"] == rec["agent_metrics"][0]["hit@5"] == 0.0
    else:                    # non-candidates dropped first: the gold leads
        assert rec["ranking"] == [1, 50]
        assert rec["metrics"]["hit@1"] == rec["metrics"]["recall@20"] == rec["agent_metrics"][0]["hit@5"] == 1.0
    assert summary["cut"] == cut
    with pytest.raises(ValueError, match="top_first, candidates_first"):
        settings(tmp_path, cut="sideways")


def test_lines_that_are_not_records_are_skipped_and_recomputed(tmp_path, caplog):
    qs = make_queries(6)
    s = settings(tmp_path)
    run_queries(TinyRetriever(), qs, s)
    pred = s.out_dir / "predictions.jsonl"
    lines = pred.read_text().splitlines()
    keep = [ln for ln in lines if json.loads(ln)["query_id"] not in (2, 4)]
    pred.write_text("\n".join(["null", *keep, '{"status": "ok"}', '[1, 2]', '{"query_id": 4, "status": 7}']) + "\n")
    r = TinyRetriever()
    with caplog.at_level("WARNING", logger="ark.run.records"):
        summary = run_queries(r, qs, s)
    assert sorted(r.calls) == [2, 4] and summary["complete"] and summary["n_ok"] == 6
    assert sum("is not a query record" in m for m in caplog.messages) >= 4


# --- settings, run identity, one writer per directory (ark.config.evaluation; experiments/run.py) ---------
def _entry(args: list[str], cwd: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO), "HYDRA_FULL_ERROR": "0"}
    return subprocess.Popen([sys.executable, str(REPO / "experiments" / "run.py"), *args], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


BAD_SETTINGS = [  # (override, what the one line must say)
    ("split=nosuch", "bad setting split='nosuch': choose one of train, val, test, test-0.1, test-mismatch"),
    ("split=tset", "bad setting split='tset': choose one of train, val, test"),
    ("limit=-1", "bad setting limit=-1: use a whole number >= 0, or null for the whole split"),
    ("limit=abc", "bad setting limit='abc': use a whole number >= 0"),
    ("concurrency=0", "bad setting concurrency=0: use a whole number >= 1"),
    ("shard=3/2", "bad setting shard='3/2': use i/n with 0 <= i < n"),
    ("shard=abc", "bad setting shard='abc': use i/n with 0 <= i < n"),
    ("budget.agent.t_max=0", "bad setting in budget.agent: t_max=0 must be >= 1"),
    ("metrics_mode=exact", "bad setting metrics_mode='exact': choose one of paper, stark_qa"),
    ("verbose=yes", "bad setting verbose='yes': use true or false"),
]


@pytest.mark.commands
def test_bad_settings_stop_with_one_line_and_leave_no_directory(tmp_path):
    procs = []
    for i, (override, _) in enumerate(BAD_SETTINGS):
        cwd = tmp_path / f"case{i}"
        cwd.mkdir()
        procs.append((cwd, _entry(["graph=demo", "backbone=scripted", f"paths.data={DEMO_ROOT}", override], cwd)))
    for (cwd, proc), (override, message) in zip(procs, BAD_SETTINGS):
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 1, (override, err)
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1, (override, err)
        assert err.strip().startswith(message), (override, err)
        assert list(cwd.iterdir()) == [], (override, list(cwd.rglob("*")))   # no directory left behind


@pytest.mark.commands
def test_corrected_command_runs_after_a_bad_one(tmp_path):
    args = ["graph=demo", "retriever=bm25", "limit=3", f"paths.data={DEMO_ROOT}", "progress=false", "n_boot=50"]
    bad = _entry([*args, "split=tset"], tmp_path)
    assert bad.wait(timeout=300) == 1
    good = _entry([*args, "split=test"], tmp_path)
    out, err = good.communicate(timeout=300)
    assert good.returncode == 0, err
    run_dir = tmp_path / "results" / "runs" / "default" / "demo" / "bm25_test_limit3"
    assert json.loads((run_dir / "metrics.json").read_text())["complete"]
    assert json.loads((run_dir / "run.json").read_text())["split"] == "test"


def _bm25_cfg(tmp_path, *extra):
    from ark.config.compose import compose

    return compose(["graph=demo", "retriever=bm25", "limit=3", f"paths.data={DEMO_ROOT}",
                    f"paths.runs={tmp_path}", "progress=false", "n_boot=50", *extra])


def test_run_identity_covers_every_setting_that_changes_results(tmp_path):
    from ark.config.identity import run_identity

    ark = run_identity(_bm25_cfg(tmp_path, "retriever=ark", "backbone=scripted"))
    for key in ("split", "limit", "seed", "metrics_mode", "n_boot", "budget.search_k", "budget.neighbors_k",
                "budget.agent.t_max", "backbone.temperature", "backbone.model", "backbone.seed",
                "ablation.tools.neighbors", "retriever.top", "graph.name"):
        assert key in ark, key
    for key in ("concurrency", "progress", "verbose", "paths.runs", "backbone.base_url", "backbone.timeout_s",
                "out_dir"):
        assert key not in ark, key
    bm25 = run_identity(_bm25_cfg(tmp_path))
    assert not any(k.startswith(("backbone.", "budget.", "ablation.")) for k in bm25)
    # where a configured class lives is not a setting: no _target_ in any identity
    hybrid = run_identity(_bm25_cfg(tmp_path, "retriever=ark", "backbone=scripted", "search=hybrid"))
    assert [k for k in (*ark, *bm25, *hybrid) if "_target_" in k] == []
    assert "graph.root" in ark and "search.setup.config.mode" in hybrid      # their settings stay


def test_a_run_made_before_the_library_layout_resumes(tmp_path):
    """run.json of a directory made when the identity still held class import paths (e.g.
    "backbone._target_": "ark.llm.BackboneConfig", before ark/ had subpackages): the same command
    resumes it; a changed setting is still refused, and the refusal never names a _target_."""
    from ark.config.compose import compose
    from ark.config.evaluation import run
    from tests.helpers.scripted_server import ScriptedServer

    with ScriptedServer(responder=search_select_finish) as server:
        args = ["graph=demo", "backbone=scripted", f"backbone.base_url={server.base_url}", "limit=2",
                "budget=t5_n1", f"paths.data={DEMO_ROOT}", f"paths.runs={tmp_path}",
                f"paths.llm_cache={tmp_path}/llm.sqlite", "progress=false", "n_boot=20"]
        first = run(compose(args))
        out = Path(compose(args).out_dir)
        info = json.loads((out / "run.json").read_text())
        old = {"graph._target_": "ark.sources.DemoSource", "backbone._target_": "ark.llm.BackboneConfig",
               "budget.agent._target_": "ark.agent.AgentConfig", "ablation.tools._target_": "ark.tools.ToolConfig"}
        info["identity"] = {**info["identity"], **old}
        info["fingerprint"] = "0123456789abcdef"
        (out / "run.json").write_text(json.dumps(info, indent=1))
        calls = server.calls
        again = run(compose(args))
        assert again["complete"] and again["this_run"]["computed"] == 0 and server.calls == calls
        assert again["metrics"] == first["metrics"]
        assert "_target_" not in json.dumps(json.loads((out / "run.json").read_text())["identity"])   # rewritten
        (out / "run.json").write_text(json.dumps(info, indent=1))                 # the old file again
        with pytest.raises(SystemExit, match=r"other settings: seed=0 there, 1 now; rerun") as e:
            run(compose([*args, "seed=1"]))
        assert "_target_" not in str(e.value)


def test_a_directory_holds_one_identity_and_one_writer(tmp_path):
    from ark.config.evaluation import run

    first = run(_bm25_cfg(tmp_path))
    out = tmp_path / "default" / "demo" / "bm25_test_limit3"
    assert first["complete"] and json.loads((out / "run.json").read_text())["fingerprint"]
    assert run(_bm25_cfg(tmp_path, "concurrency=2"))["this_run"]["computed"] == 0    # same identity: resumes
    # a setting outside the name that changes results: refused, naming it, nothing written
    before = {p: p.stat().st_mtime_ns for p in out.rglob("*")}
    with pytest.raises(SystemExit, match=r"holds a run made with other settings: seed=0 there, 1 now"):
        run(_bm25_cfg(tmp_path, "seed=1"))
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*")} == before
    # a second writer while the first holds the directory
    holder = subprocess.Popen([sys.executable, "-c", "import sys; from ark.run.rundir import run_lock\n"
                               f"with run_lock({str(out)!r}):\n print('held', flush=True); sys.stdin.read()"],
                              cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(SystemExit, match=rf"is in use by another run \(pid {holder.pid}\)"):
            run(_bm25_cfg(tmp_path))
    finally:
        holder.communicate("")
    assert run(_bm25_cfg(tmp_path))["complete"]                                     # released


@pytest.mark.commands
def test_hydra_multirun_with_submitit_local_gives_each_point_its_directory(tmp_path):
    """The real sweep: Hydra's multirun through hydra-submitit-launcher's local executor."""
    from ark.data.sources import DemoSource

    proc = _entry(["-m", "hydra/launcher=submitit_local", "graph=demo", "retriever=bm25", "split=test,val",
                   "limit=5", f"paths.data={DEMO_ROOT}", f"paths.runs={tmp_path / 'runs'}", "progress=false",
                   "n_boot=50"], tmp_path)
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    demo = tmp_path / "runs" / "default" / "demo"
    assert sorted(p.name for p in demo.iterdir()) == ["bm25_test_limit5", "bm25_val_limit5"]
    queries = DemoSource(DEMO_ROOT).queries()
    for split in ("test", "val"):
        d = demo / f"bm25_{split}_limit5"
        recs = [json.loads(line) for line in (d / "predictions.jsonl").read_text().splitlines()]
        assert sorted(r["query_id"] for r in recs) == sorted(q.id for q in queries.split(split)[:5])
        metrics, info = json.loads((d / "metrics.json").read_text()), json.loads((d / "run.json").read_text())
        assert metrics["complete"] and metrics["n"] == 5
        assert metrics["run"]["split"] == info["split"] == info["identity"]["split"] == split
        assert metrics["run"]["limit"] == info["identity"]["limit"] == 5


# --- partial failures: one agent, a lost trajectory file, a full disk ----------------------------
def search_select_then_finish(request: dict):
    """Like search_select_finish, but select and finish are separate steps (0 search, 1 select, 2 finish)."""
    from tests.helpers.scripted_server import tool_reply

    step = sum(m["role"] == "assistant" for m in request["messages"])
    if step == 1:
        select, _finish = search_select_finish(request).tool_calls
        return tool_reply(select)
    return search_select_finish(request)


def _ark_cfg(tmp_path, server, *extra):
    from ark.config.compose import compose

    return compose(["graph=demo", "backbone=scripted", f"backbone.base_url={server.base_url}", "limit=4",
                    "budget=t5_n1", "budget.agent.n_agents=3", f"paths.data={DEMO_ROOT}",
                    f"paths.runs={tmp_path}", f"paths.llm_cache={tmp_path}/llm.sqlite", "progress=false",
                    "n_boot=50", *extra])


def test_one_failed_agent_degrades_its_query_and_the_rerun_retries_only_it(tmp_path):
    """Agent 1 of every query selects nodes, then its last call fails (HTTP 500, no retries left)."""
    from ark.config.evaluation import run
    from tests.helpers.scripted_server import ScriptedServer, server_error

    broken = {"on": True}

    def responder(request):
        step = sum(m["role"] == "assistant" for m in request["messages"])
        if broken["on"] and request["seed"] == 1 and step == 2:     # the backbone's seed + agent index
            return server_error(500)
        return search_select_then_finish(request)

    with ScriptedServer(responder=responder) as server:
        cfg = _ark_cfg(tmp_path, server)
        first = run(cfg)
        out = Path(cfg.out_dir)
        assert first["n_degraded"] == 4 and first["n_ok"] == 0 and not first["complete"]
        assert first["status"] == "degraded" and "DEGRADED" in first["warning"] and first["metrics"] == {}
        assert first["agents"] == {"ok": 8, "failed": 4}
        rec = load_predictions(out)[str(first["degraded_queries"][0]["query_id"])]
        assert rec["status"] == "degraded" and "1 of 3 agents failed: agent 1: LLMTransportError" in rec["error"]
        a1 = rec["agents"][1]
        assert a1["status"] == "failed" and a1["stop_reason"] == "error" and "HTTP 500" in a1["error"]
        assert a1["selected"] and a1["selected"] == rec["agent_rankings"][1] == rec["agents"][0]["selected"]
        assert [a["status"] for a in rec["agents"]] == ["ok", "failed", "ok"]
        assert rec["partial_metrics"] and rec["metrics"] == {}
        traj = json.loads((out / rec["trajectory_file"]).read_text())
        assert traj[1]["stop_reason"] == "error" and traj[1]["selected"] == a1["selected"]
        paid = server.outcomes.count("ok")
        assert paid == 4 * (3 + 3 + 2)                     # agents 0 and 2: three calls each; agent 1: two

        broken["on"] = False                              # the rerun: only agent 1's last call is made
        again = run(cfg)
        assert again["complete"] and again["status"] == "complete" and again["n_ok"] == 4
        assert server.outcomes.count("ok") == paid + 4
        assert all(r["seed"] == 1 for r in server.requests[-4:])
        rec = load_predictions(out)[str(rec["query_id"])]
        assert rec["status"] == "ok" and rec["error"] is None and [a["status"] for a in rec["agents"]] == ["ok"] * 3


def test_a_deleted_trajectory_file_is_rebuilt_from_the_cache(tmp_path, caplog):
    from ark.config.evaluation import run
    from tests.helpers.scripted_server import ScriptedServer

    with ScriptedServer(responder=search_select_then_finish) as server:
        cfg = _ark_cfg(tmp_path, server, "budget.agent.n_agents=1")
        first = run(cfg)
        out = Path(cfg.out_dir)
        calls = server.calls
        victim = next(iter(load_predictions(out).values()))
        path = out / victim["trajectory_file"]
        before = json.loads(path.read_text())
        path.unlink()
        with caplog.at_level("WARNING", logger="ark.run.runner"):
            again = run(cfg)
        assert "1 finished queries lack their trajectory file" in " ".join(caplog.messages)
        assert again["this_run"]["computed"] == 1 and again["this_run"]["trajectories_rebuilt"] == 1
        assert again["complete"] and again["metrics"] == first["metrics"]
        assert server.calls == calls                                   # every reply came from the cache
        after = json.loads(path.read_text())
        assert [t["selected"] for t in after] == [t["selected"] for t in before]
        assert [t["messages"] for t in after] == [t["messages"] for t in before]


def test_a_full_disk_stops_the_run_cleanly_and_a_rerun_completes_it(tmp_path, monkeypatch):
    import errno

    events: list[str] = []

    class Watched(TinyRetriever):
        async def aretrieve(self, query, query_id=""):
            events.append(f"start {query_id}")
            try:
                return await super().aretrieve(query, query_id)
            except asyncio.CancelledError:
                events.append(f"cancelled {query_id}")
                raise

        async def aclose(self):
            events.append(f"closed with {self.in_flight} in flight")

    writes = []

    def filling_write(fd, data):
        if len(writes) >= 7:
            if not writes[-1].startswith(b"partial"):
                writes.append(b"partial")
                return os.write(fd, bytes(data[:10]))   # the disk takes a few bytes of the record...
            raise OSError(errno.ENOSPC, "No space left on device")      # ...then is full
        writes.append(bytes(data))
        return os.write(fd, data)

    monkeypatch.setattr(runner, "_write", filling_write)
    qs = make_queries(40)
    s = settings(tmp_path, concurrency=4)
    with pytest.raises(runner.RunStorageError, match=rf"cannot write to {re.escape(str(s.out_dir))} \(No space left"
                       r".*stopped with 7 queries saved\. Free some space and rerun"):
        run_queries(Watched(delay=0.02), qs, s)
    assert events[-1] == "closed with 0 in flight"                  # in-flight queries cancelled first
    assert sum(e.startswith("cancelled") for e in events) >= 1
    text = (s.out_dir / "predictions.jsonl").read_text()
    assert text.endswith("\n") and len(text.splitlines()) == 7       # no partial record left behind
    assert not [p for p in s.out_dir.rglob("*") if atomic.writer_pid(p) is not None]   # no temporary file left
    monkeypatch.setattr(runner, "_write", os.write)
    r = TinyRetriever()
    summary = run_queries(r, qs, s)
    assert summary["complete"] and summary["n_ok"] == 40 and len(r.calls) == 33


def _collected(obj) -> bool:
    """Whether the garbage collector's passes walk ``obj`` (it is in one of its generations, not frozen)."""
    import gc

    return any(o is obj for g in range(3) for o in gc.get_objects(generation=g))


class HeapWatcher(TinyRetriever):
    """Looks, from inside the run, whether an object made before the run is still walked by the collector."""

    def __init__(self, marker):
        super().__init__()
        self.marker, self.seen = marker, []

    async def aretrieve(self, query, query_id=""):
        self.seen.append(_collected(self.marker))
        return await super().aretrieve(query, query_id)


def test_objects_alive_at_the_start_are_left_out_of_collections_during_the_run(tmp_path):
    marker = {"graph": ["a big index made before the run"]}   # a container the collector tracks
    assert _collected(marker)
    retriever = HeapWatcher(marker)
    summary = run_queries(retriever, make_queries(3), settings(tmp_path, concurrency=1))
    assert summary["n_ok"] == 3
    assert retriever.seen == [False, False, False]   # frozen while the queries ran
    assert _collected(marker)                        # and walked again once the run ended
