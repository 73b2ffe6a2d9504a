"""Sweeps that just work: a sweep over a setting the run directory's name lacks gives each point its own
complete directory (the swept setting appended to the name), a plain run keeps its name, and
``max_cost_usd`` caps a whole sweep across two points launched in parallel (``hydra/launcher=local_parallel``)
with one ledger, which a higher cap resumes from without paying any reply twice."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ark.cli.main import main
from ark.config.compose import compose
from ark.config.sweep import clashing_keys, suffix_for
from ark.cost.ledger import Ledger
from ark.run.rundir import RunDir
from tests.helpers.paths import DEMO_ROOT
from tests.helpers.policies import ark_like
from tests.helpers.processes import children, running, until
from tests.helpers.scripted_server import ScriptedServer

REPO = Path(__file__).resolve().parents[1]
BM25 = ["graph=demo", "retriever=bm25", "limit=3", f"paths.data={DEMO_ROOT}", "progress=false", "n_boot=20"]


def _sweep(tmp: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ark", "run", "-m", *args, f"paths.runs={tmp / 'runs'}"], cwd=tmp,
                          env={**os.environ, "PYTHONPATH": str(REPO), "HYDRA_FULL_ERROR": "0", **(env or {})},
                          capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("sweep,names", [
    ("seed=0,1", ["bm25_test_limit3_seed0", "bm25_test_limit3_seed1"]),
    ("retriever.top=50,100", ["bm25_test_limit3_top100", "bm25_test_limit3_top50"]),
])
@pytest.mark.commands
def test_a_sweep_over_a_setting_the_name_lacks_gives_each_point_its_directory(tmp_path, sweep, names):
    done = _sweep(tmp_path, *BM25, sweep)
    assert done.returncode == 0, done.stderr
    runs = tmp_path / "runs" / "default" / "demo"
    assert sorted(p.name for p in runs.iterdir()) == names
    key, values = sweep.split("=")
    for name in names:
        run = RunDir(runs / name)
        assert run.complete and run.metrics["n"] == 3
        assert str(run.info["identity"][key]) in values.split(",")
    assert len({json.dumps(RunDir(runs / n).info["identity"], sort_keys=True) for n in names}) == 2


@pytest.mark.commands
def test_the_script_prepares_a_sweep_as_ark_run_does(tmp_path):
    """``python experiments/run.py -m seed=0,1``: the same directories as ``ark run -m``."""
    done = subprocess.run([sys.executable, str(REPO / "experiments" / "run.py"), "-m", *BM25, "seed=0,1",
                           f"paths.runs={tmp_path / 'runs'}"], cwd=tmp_path, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO), "HYDRA_FULL_ERROR": "0"}, timeout=600,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    runs = tmp_path / "runs" / "default" / "demo"
    assert sorted(p.name for p in runs.iterdir()) == ["bm25_test_limit3_seed0", "bm25_test_limit3_seed1"]
    assert all(RunDir(runs / n).complete for n in ("bm25_test_limit3_seed0", "bm25_test_limit3_seed1"))


def test_plain_runs_and_sweeps_whose_points_differ_in_name_keep_their_names():
    points = [[*BM25, "split=test"], [*BM25, "split=val"]]
    assert clashing_keys(points, [compose(p) for p in points]) == []
    assert compose([*BM25, "seed=1"]).run_dir_name == "bm25_test_limit3"
    assert suffix_for(["seed", "budget.search_k"]) == "_seed${seed}_search_k${budget.search_k}"
    assert suffix_for(["a.top", "b.top"]) == "_a_top${a.top}_b_top${b.top}"


def _digest(request: dict) -> str:
    return hashlib.sha256(json.dumps(request, sort_keys=True).encode()).hexdigest()


@pytest.mark.commands
def test_max_cost_usd_caps_a_sweep_of_two_parallel_points(tmp_path, monkeypatch):
    cap = 0.25
    with ScriptedServer(responder=ark_like, latency_s=0.3) as server:   # each point spends over a few seconds
        args = [f"paths.data={DEMO_ROOT}", "graph=demo", "backbone=gpt-4.1", f"+backbone.base_url={server.base_url}",
                f"paths.llm_cache={tmp_path}/llm.sqlite", "budget=t5_n1", "budget.agent.n_agents=2", "split=test,val", "limit=8",
                "concurrency=2", "progress=false", "n_boot=20", "hydra/launcher=local_parallel",
                "hydra.launcher.n_jobs=2"]
        env = {"OPENAI_API_KEY": "sk-scripted-" + "0" * 20}
        done = _sweep(tmp_path, *args, f"max_cost_usd={cap}", env=env)
        assert done.returncode == 3, done.stderr           # the cap stopped the sweep: incomplete, not 0
        assert "INCOMPLETE: 2 of the sweep's 2 runs did not finish every query (exit 3)" in done.stderr
        runs = [RunDir(tmp_path / "runs" / "default" / "demo" / f"ark-gpt-4.1-t5_n2-full_{split}_limit8")
                for split in ("test", "val")]
        (ledger_file,) = (tmp_path / "runs" / "default" / ".sweeps").glob("*.jsonl")
        ledger = Ledger(ledger_file)
        lines = [json.loads(line) for line in ledger_file.read_text().splitlines()]
        spans = {}
        for line in lines:
            spans.setdefault(line["run"], []).append(line["t"])
        (a, b) = spans.values()
        assert min(a) < max(b) and min(b) < max(a)            # the two points spent at the same time
        for run in runs:
            m = run.metrics
            assert (m["status"], m["stop_reason"], m["budget_usd"]) == ("incomplete", "budget", cap)
        # one ledger for the sweep: both points' payments, about the cap (passed at most by the calls the other
        # point had in flight when the cap was reached: 2 queries x 2 agents)
        assert ledger.total() == pytest.approx(sum(r.metrics["paid_usd"] for r in runs))
        assert 0.5 * cap < ledger.total() <= 2 * cap
        assert "sweep spend:" in done.stdout and f"capped at ${cap:,.2f} across its 2 runs" in done.stdout

        # the same sweep again (in order, in this process): its ledger goes on from what was spent
        monkeypatch.setenv("OPENAI_API_KEY", env["OPENAI_API_KEY"])
        server.latency_s = 0.0
        sequential = [a for a in args if not a.startswith(("hydra/launcher", "hydra.launcher"))]
        assert main(["run", "-m", *sequential, "max_cost_usd=20", f"paths.runs={tmp_path / 'runs'}"]) == 0
        assert [(RunDir(r.path).metrics["status"], "stop_reason" in RunDir(r.path).metrics) for r in runs] == \
            [("complete", False)] * 2
        digests = [_digest(r) for r in server.requests]
        assert len(digests) == len(set(digests)) and set(server.outcomes) == {"ok"}   # no reply paid twice
        assert len(list((tmp_path / "runs" / "default" / ".sweeps").glob("*.jsonl"))) == 1
        assert ledger.total() == pytest.approx(sum(RunDir(r.path).metrics["paid_usd"] for r in runs))
        assert ledger.total() == pytest.approx(sum(RunDir(r.path).metrics["cost_usd"] for r in runs))


@pytest.mark.commands
def test_kill_9_of_a_parallel_sweep_stops_its_workers_and_their_spending(tmp_path):
    """kill -9 of the process that launched a capped ``local_parallel`` sweep: its workers die with it, the
    provider bills no more than the calls in flight at the kill, and the sweep's ledger counts them all."""
    with ScriptedServer(responder=ark_like, latency_s=0.3) as server:
        args = [f"paths.data={DEMO_ROOT}", "graph=demo", "backbone=gpt-4.1", f"+backbone.base_url={server.base_url}",
                f"paths.llm_cache={tmp_path}/llm.sqlite", "budget=t5_n1", "budget.agent.n_agents=2",
                "split=test,val", "limit=30", "concurrency=2", "progress=false", "n_boot=20", "max_cost_usd=4",
                "hydra/launcher=local_parallel", "hydra.launcher.n_jobs=2", f"paths.runs={tmp_path / 'runs'}"]
        launcher = subprocess.Popen([sys.executable, "-m", "ark", "run", "-m", *args], cwd=tmp_path,
                                    env={**os.environ, "PYTHONPATH": str(REPO), "OPENAI_API_KEY": "sk-scripted-" + "0" * 20},
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        workers: set[int] = set()
        try:
            def spending() -> bool:
                workers.update(children(launcher.pid))
                assert launcher.poll() is None, "the sweep ended before the kill"
                return server.calls >= 24 and server.in_flight > 0
            until(spending, "the sweep's points to spend")
            workers.update(children(launcher.pid))
            os.kill(launcher.pid, signal.SIGKILL)
            launcher.wait()
            billed_at_kill, in_flight_at_kill = server.calls, server.in_flight
            until(lambda: not any(running(w) for w in workers), "the workers to die", timeout_s=30)
            until(lambda: server.in_flight == 0, "the calls in flight to be answered", timeout_s=30)
            time.sleep(1.0)                                          # nothing left that could call
        finally:
            for w in workers:                                        # what the sweep left behind (old code)
                if running(w):
                    os.kill(w, signal.SIGKILL)
        assert len(workers) >= 2
        assert server.calls <= billed_at_kill + in_flight_at_kill   # only the calls in flight were billed after it
        (ledger_file,) = (tmp_path / "runs" / "default" / ".sweeps").glob("*.jsonl")
        ledger = Ledger(ledger_file)
        lost, _ = ledger.reconcile()                                 # the calls the killed points left in flight
        # every billed call is in the ledger (more only by a call reserved and not yet sent at the kill)
        assert ledger.in_flight() == 0 and server.calls <= ledger.calls() <= server.calls + lost


@pytest.mark.commands
def test_a_parallel_sweep_pays_for_the_replies_its_points_share_once(tmp_path):
    """Points sharing prompts (n=1 and n=2 agents share agent 0's calls), launched in parallel on one LLM
    cache: the provider bills as many calls as for the same sweep launched in order."""
    billed = {}
    with ScriptedServer(responder=ark_like, latency_s=0.3) as server:
        for launcher in ("basic", "local_parallel"):
            tmp = tmp_path / launcher
            tmp.mkdir()
            before = server.calls
            done = _sweep(tmp, f"paths.data={DEMO_ROOT}", "graph=demo", "backbone=gpt-4.1",
                          f"+backbone.base_url={server.base_url}", f"paths.llm_cache={tmp}/llm.sqlite",
                          "budget=t5_n1", "budget.agent.n_agents=1,2", "limit=6", "concurrency=3", "progress=false",
                          "n_boot=20", "max_cost_usd=4", f"hydra/launcher={launcher}",
                          *(["hydra.launcher.n_jobs=2"] if launcher != "basic" else []),
                          env={"OPENAI_API_KEY": "sk-scripted-" + "0" * 20})
            assert done.returncode == 0, done.stderr
            billed[launcher] = server.calls - before
            runs = sorted((tmp / "runs" / "default" / "demo").iterdir())
            assert len(runs) == 2 and all(RunDir(r).complete for r in runs)
    assert billed["local_parallel"] == billed["basic"] > 0
