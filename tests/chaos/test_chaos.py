"""Chaos tier (`make test-chaos`): 200 demo queries x 3 real ARK agents against the scripted
OpenAI-compatible server while it injects faults into about 10% of calls (429 + Retry-After, 503, a
hang past the client's timeout, a malformed 200 body, a context-length error, a dropped connection).

Each run is rerun until it says complete; it must then equal a fault-free run of the same queries
(predictions, metrics and trajectories, timings and call ids aside), and the server's log must show no
successful reply paid for twice. Two siblings add a kill -9 at a random moment and a disk that fills
up (a real tmpfs when this process may mount one, else a simulated ENOSPC), where only the calls in
flight at the kill or at the full disk may be paid again. The server runs in a process of its own (so
its threads do not compete with the client for the GIL) and logs every request it answers to a file.

    PYTHONPATH=$PWD .venv/bin/python -m pytest -q -m chaos tests/chaos
"""

from __future__ import annotations

import contextlib
import errno
import json
import multiprocessing as mp
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from ark.run import runner
from tests.helpers.scripted_server import FAULT_KINDS
from tests.helpers.paths import DEMO_ROOT, REPO
from tests.helpers.policies import search_select_finish

pytestmark = pytest.mark.chaos

N_QUERIES, N_AGENTS = 200, 3
AGENT_SLOTS = 96                    # LLM calls in flight at most (the agents' shared semaphore)
TIMEOUT_S, HANG_S = 10.0, 20.0      # client timeout per attempt (generous: the machine may be busy); a hang
VOLATILE = {"latency_s", "llm_latency_s", "tool_latency_s", "overhead_s", "wall_s", "cached", "attempts",
            "id", "tool_call_id"}   # timings, cache flags and the server's call ids differ between runs


def queries():
    from ark.data.sources import DemoSource

    qs = DemoSource(DEMO_ROOT).queries()
    return [q for s in ("train", "val", "test") for q in qs.split(s)][:N_QUERIES]


def make_retriever(base_url: str, cache: Path):
    from ark.agent import AgentConfig
    from ark.llm.client import BackboneConfig
    from ark.data.sources import DemoSource
    from ark.config.retrievers import build_ark
    from ark.tools import ToolConfig

    graph = DemoSource(DEMO_ROOT).graph()
    backbone = BackboneConfig(name="scripted", model="scripted", provider="vllm", base_url=base_url,
                              max_retries=2, timeout_s=TIMEOUT_S, backoff_base_s=0.01, backoff_max_s=0.05)
    # nothing is ever long enough to shorten: a context-length error ends the agent (degraded query)
    agent = AgentConfig(t_max=5, n_agents=N_AGENTS, concurrency=AGENT_SLOTS, shorten_chars=10**9)
    retriever = build_ark(graph, backbone, agent, ToolConfig(), llm_cache=str(cache),
                          index_cache=str(DEMO_ROOT / "cache" / "demo"))
    # compile the BM25 kernels now: a first call inside the run would block the event loop for seconds
    # while replies wait unread, and turn them into client timeouts
    retriever.agent.toolset.call("search_graph", {"query": "heart"})
    retriever.agent.toolset.call("explore_neighbors", {"node_id": 0, "query": "heart"})
    return retriever, graph


def run_once(base_url: str, out: Path, cache: Path) -> dict:
    retriever, graph = make_retriever(base_url, cache)
    settings = runner.RunSettings(out_dir=out, concurrency=32, progress=False, n_boot=200)
    return runner.run_queries(retriever, queries(), settings, graph.candidate_ids)


def run_until_complete(base_url: str, out: Path, cache: Path, max_rounds: int = 8) -> list[dict]:
    rounds = []
    while not rounds or not rounds[-1]["complete"]:
        assert len(rounds) < max_rounds, f"still incomplete after {max_rounds} runs: {rounds[-1]['warning']}"
        rounds.append(run_once(base_url, out, cache))
    return rounds


def normalize(x):
    if isinstance(x, dict):
        return {k: normalize(v) for k, v in x.items() if k not in VOLATILE}
    if isinstance(x, list):
        return [normalize(v) for v in x]
    return x


def snapshot(out: Path) -> dict:
    """What must not depend on faults: records, summary metrics and every trajectory."""
    recs = runner.load_predictions(out)
    summary = json.loads((out / runner.METRICS_FILE).read_text())
    trajs = {k: normalize(json.loads((out / r["trajectory_file"]).read_text())) for k, r in recs.items()}
    return {"records": {k: normalize(r) for k, r in recs.items()}, "trajectories": trajs,
            "summary": {k: summary[k] for k in ("n", "n_ok", "complete", "status", "metrics", "tool_calls",
                                                "tokens", "neighbor_calls_per_trajectory")}}


def _serve(queue, fault_seed: int | None, log_path: str) -> None:
    from tests.helpers.scripted_server import FaultPlan, ScriptedServer

    faults = None if fault_seed is None else FaultPlan(rate=0.1, seed=fault_seed, hang_s=HANG_S)
    server = ScriptedServer(responder=search_select_finish, faults=faults, log_path=log_path).start()
    queue.put(server.base_url)
    while True:
        time.sleep(3600)


@contextlib.contextmanager
def server_process(tmp: Path, fault_seed: int | None):
    """The scripted server in a process of its own; yields (base_url, log path)."""
    ctx = mp.get_context("spawn")
    queue, log = ctx.Queue(), tmp / f"server-{fault_seed}.jsonl"
    proc = ctx.Process(target=_serve, args=(queue, fault_seed, str(log)), daemon=True)
    proc.start()
    try:
        yield queue.get(timeout=120), log
    finally:
        proc.terminate()
        proc.join(10)


def server_log(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def paid(log: Path) -> Counter:
    """Successful replies per distinct request body."""
    return Counter(e["request"] for e in server_log(log) if e["outcome"] == "ok")


def first_paid_order(log: Path) -> dict[str, int]:
    """For each request body, how many successful replies the server had sent before its first one."""
    seen: dict[str, int] = {}
    n = 0
    for e in server_log(log):
        if e["outcome"] == "ok":
            seen.setdefault(e["request"], n)
            n += 1
    return seen


def lost_only_in_flight(log: Path, paid_before_stop: int, twice: list[str]) -> bool:
    """Every reply paid twice was among the last replies sent before the run stopped.

    At most AGENT_SLOTS calls are in flight, and a reply is cached before its agent sends another
    request, so a reply the stopped run never stored was one of the last few sent; twice the slots
    leaves room for replies that sat unread while other agents went on.
    """
    order = first_paid_order(log)
    return all(order[k] >= paid_before_stop - 2 * AGENT_SLOTS for k in twice)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The fault-free run: what every chaotic run must end up equal to."""
    tmp = tmp_path_factory.mktemp("reference")
    with server_process(tmp, None) as (url, log):
        summary = run_once(url, tmp / "run", tmp / "llm.sqlite")
    calls = sum(paid(log).values())
    assert summary["complete"] and summary["n_ok"] == N_QUERIES
    assert calls == N_QUERIES * N_AGENTS * 2 and max(paid(log).values()) == 1
    return {"dir": tmp / "run", "snapshot": snapshot(tmp / "run"), "calls": calls}


def test_faults_in_ten_percent_of_calls_end_in_the_same_run(reference, tmp_path):
    with server_process(tmp_path, 11) as (url, log):
        rounds = run_until_complete(url, tmp_path / "run", tmp_path / "llm.sqlite")
    counts, outcomes = paid(log), Counter(e["outcome"] for e in server_log(log))
    print(f"\nfaults: {dict(outcomes)}; runs until complete: {len(rounds)}; per run (ok, degraded, failed): "
          f"{[(r['n_ok'], r['n_degraded'], r['n_failed']) for r in rounds]}")
    assert set(FAULT_KINDS) <= set(outcomes), outcomes                     # every kind of fault happened
    faults = sum(v for k, v in outcomes.items() if k != "ok")
    assert 0.05 <= faults / sum(outcomes.values()) <= 0.15, outcomes
    first = rounds[0]
    assert len(rounds) >= 2 and first["n_degraded"] + first["n_failed"] > 0 and first["status"] != "complete"
    assert snapshot(tmp_path / "run") == reference["snapshot"]
    assert max(counts.values()) == 1 and sum(counts.values()) == reference["calls"]   # none paid twice


KILL_CHILD = """
import sys
from pathlib import Path
from tests.chaos.test_chaos import run_once
run_once(sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]))
"""


def test_kill_9_at_a_random_moment(reference, tmp_path):
    out, cache = tmp_path / "run", tmp_path / "llm.sqlite"
    kill_after = random.Random(7).randrange(20, N_QUERIES - 40)    # finished records before the kill
    with server_process(tmp_path, 12) as (url, log):
        child = subprocess.Popen([sys.executable, "-c", KILL_CHILD, url, str(out), str(cache)],
                                 cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
        pred = out / runner.PREDICTIONS
        deadline = time.monotonic() + 600
        while not (pred.exists() and pred.read_bytes().count(b"\n") >= kill_after):
            assert child.poll() is None and time.monotonic() < deadline, "the child ended before the kill"
            time.sleep(0.005)
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        paid_before_kill = sum(paid(log).values())
        saved = {k for k, r in runner.load_predictions(out).items() if r["status"] == "ok"}
        assert kill_after <= len(runner.load_predictions(out)) < N_QUERIES
        rounds = run_until_complete(url, out, cache)
    counts = paid(log)
    assert snapshot(out) == reference["snapshot"]
    assert rounds[0]["this_run"]["skipped"] == len(saved)                  # no finished query lost
    twice = [k for k, n in counts.items() if n > 1]
    print(f"\nkilled after {kill_after} records; {len(saved)} ok kept; replies paid twice: {len(twice)}")
    assert len(twice) <= AGENT_SLOTS and max(counts.values()) <= 2       # only calls in flight at the kill
    assert lost_only_in_flight(log, paid_before_kill, twice)


def _mount_small_disk(path: Path, size_kb: int) -> bool:
    path.mkdir()
    if os.geteuid() != 0:
        return False
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kb}k", "tmpfs", str(path)],
                          capture_output=True)
    return done.returncode == 0


def test_a_disk_that_fills_up(reference, tmp_path, monkeypatch):
    ref_bytes = sum(p.stat().st_size for p in reference["dir"].rglob("*") if p.is_file())
    disk = tmp_path / "disk"
    real = _mount_small_disk(disk, max(64, ref_bytes // 1024 // 3))     # room for about a third of the run
    # the run directory fills the disk; the LLM cache lives beside it (its write-ahead log, up to SQLite's
    # 1,000-page checkpoint, would take the small disk before the first record, as the simulated disk,
    # which fails only the run's own writes, never lets it)
    out, cache = disk / "run", tmp_path / "llm.sqlite"
    try:
        with server_process(tmp_path, 13) as (url, log):
            if not real:       # no mount here: the disk "fills" after 60 records
                writes = {"n": 0}

                def filling(fd, data):
                    writes["n"] += 1
                    if writes["n"] > 60:
                        raise OSError(errno.ENOSPC, "No space left on device")
                    return os.write(fd, data)

                monkeypatch.setattr(runner, "_write", filling)
            with pytest.raises(runner.RunStorageError, match=r"No space left on device.*rerun the same command"):
                run_until_complete(url, out, cache)
            paid_before_stop = sum(paid(log).values())
            text = (out / runner.PREDICTIONS).read_text()
            assert text == "" or text.endswith("\n")                           # no partial record
            saved = len(runner.load_predictions(out))
            assert 0 < saved < N_QUERIES
            if real:
                subprocess.run(["mount", "-o", "remount,size=256m", str(disk)], check=True)
            else:
                monkeypatch.setattr(runner, "_write", os.write)
            run_until_complete(url, out, cache)
        counts = paid(log)
        assert snapshot(out) == reference["snapshot"]
        twice = [k for k, n in counts.items() if n > 1]
        print(f"\n{'tmpfs' if real else 'simulated'} disk full after {saved} records; replies paid twice: {len(twice)}")
        assert len(twice) <= AGENT_SLOTS and lost_only_in_flight(log, paid_before_stop, twice)
    finally:
        if real:
            subprocess.run(["umount", "-l", str(disk)], check=False)   # lazy: the cache may still hold a file


SWEEP_QUERIES = 30    # per point; two points (n=1 and n=2 agents, sharing agent 0's calls), 0.3 s per reply


def _sweep(server, tmp: Path, wait: bool = True):
    """A capped ``local_parallel`` sweep against ``server``: the process (running, or done)."""
    args = [f"paths.data={DEMO_ROOT}", "graph=demo", "backbone=gpt-4.1", f"+backbone.base_url={server.base_url}",
            f"paths.llm_cache={tmp}/llm.sqlite", "budget=t5_n1", "budget.agent.n_agents=1,2",
            f"limit={SWEEP_QUERIES}", "concurrency=4", "progress=false", "n_boot=20", "max_cost_usd=20", "yes=true",
            "hydra/launcher=local_parallel", "hydra.launcher.n_jobs=2", f"paths.runs={tmp / 'runs'}"]
    proc = subprocess.Popen([sys.executable, "-m", "ark", "run", "-m", *args], cwd=tmp,
                            env={**os.environ, "PYTHONPATH": str(REPO), "OPENAI_API_KEY": "sk-scripted-" + "0" * 20},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    if wait:
        _, err = proc.communicate(timeout=900)
        assert proc.returncode == 0, err
    return proc


def _digests(requests) -> Counter:
    """Requests by their body, the server's call ids aside (they differ between runs)."""
    import hashlib

    return Counter(hashlib.sha256(json.dumps(normalize(r), sort_keys=True).encode()).hexdigest() for r in requests)


def test_kill_9_of_a_capped_parallel_sweep(tmp_path):
    """kill -9 of the process that launched a capped parallel sweep: no worker is left, the provider bills
    at most the calls in flight after it, the sweep's ledger equals the provider's bill, and the resumed
    sweep asks for exactly the replies an uninterrupted one does (only those in flight at the kill twice)."""
    from ark.cost.ledger import Ledger
    from ark.run.rundir import RunDir
    from tests.helpers.policies import ark_like
    from tests.helpers.processes import children, running, until
    from tests.helpers.scripted_server import ScriptedServer

    with ScriptedServer(responder=ark_like, latency_s=0.3) as server:
        (tmp_path / "whole").mkdir()
        _sweep(server, tmp_path / "whole")
        whole = _digests(server.requests)
        assert max(whole.values()) == 1                              # the points' shared replies bought once

        tmp, first = tmp_path / "killed", len(server.requests)
        tmp.mkdir()
        launcher = _sweep(server, tmp, wait=False)
        workers: set[int] = set()
        try:
            def spending() -> bool:
                workers.update(children(launcher.pid))
                assert launcher.poll() is None, "the sweep ended before the kill"
                return server.calls - first >= random.Random(5).randrange(60, 160) and server.in_flight > 0
            until(spending, "the sweep to spend")
            os.kill(launcher.pid, signal.SIGKILL)
            launcher.wait()
            billed_at_kill, in_flight = server.calls, server.in_flight
            until(lambda: not any(running(w) for w in workers), "the workers to die", timeout_s=30)
            until(lambda: server.in_flight == 0, "the calls in flight to be answered", timeout_s=60)
            time.sleep(2.0)
        finally:
            for w in workers:
                if running(w):
                    os.kill(w, signal.SIGKILL)
        assert len(workers) >= 2
        assert server.calls <= billed_at_kill + in_flight              # no spending after the kill but in flight
        (ledger_file,) = (tmp / "runs" / "default" / ".sweeps").glob("*.jsonl")
        ledger = Ledger(ledger_file)
        lost, _ = ledger.reconcile()                                   # the calls the kill left in flight
        # the ledger holds the provider's bill; it can hold more only by a call reserved and not yet sent at
        # the kill (counted at its worst case: nothing can tell it was not sent)
        assert server.calls - first <= ledger.calls() <= server.calls - first + lost

        _sweep(server, tmp)                                            # resumed
        resumed = _digests(server.requests[first:])
        print(f"\nkilled with {lost} calls in flight ({in_flight} at the server) after {billed_at_kill - first} billed; "
              f"paid twice: {sum(n - 1 for n in resumed.values())}")
        assert set(resumed) == set(whole)                              # the calls of an uninterrupted sweep
        assert sum(n - 1 for n in resumed.values()) <= lost            # only those in flight at the kill twice
        assert server.calls - first <= Ledger(ledger_file).calls() <= server.calls - first + lost
        runs = sorted((tmp / "runs" / "default" / "demo").iterdir())
        assert len(runs) == 2 and all(RunDir(r).complete for r in runs)
