"""SLURM tier (`make test-slurm`): the repo's own sweeps run on a real single-node SLURM cluster
(`tests/slurm/cluster.py`) through ``hydra/launcher=slurm`` (hydra-submitit-launcher), driven by the
command line ``python experiments/run.py -m ...`` exactly as on a cluster's login node.

- a two-point sweep (``split=test,val``) on the demo graph with BM25, and with ARK against the scripted
  server (a process of the test's own that the jobs reach on 127.0.0.1): two complete run directories,
  equal to what Hydra's basic launcher makes (predictions, trajectories, metrics);
- a sharded run (``shard=0/4,...,3/4``) as one job array, merged by its last shard into one run
  directory equal to the unsharded run, and its shards' LLM caches merged into the run's cache;
- a shard cancelled with ``scancel`` mid-run: the sweep fails, the same command resubmitted resumes it,
  and the scripted server's log shows that only the calls in flight at the cancel were paid again;
- a shard preempted (SLURM's USR2 signal): submitit requeues it, the job resumes its run directory, and
  the sweep finishes in one go;
- the launcher's cluster settings (partition, time, CPUs, memory, GPUs, ``setup`` lines) from the
  command line reach the job, as ``sacct`` and the job itself see them.

    bash tests/slurm/run.sh          # installs SLURM if needed, starts the cluster, runs this, stops it
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.helpers import golden_runs
from tests.helpers.paths import DEMO_ROOT, REPO
from tests.helpers.server_process import server_log, server_process

pytestmark = pytest.mark.slurm

JOB = ["hydra.launcher.cpus_per_task=1", "hydra.launcher.mem_gb=1", "hydra.launcher.timeout_min=15"]
ARK = ["backbone=scripted", "budget=t5_n1"]   # one agent: search the question, select what it showed, finish
SHARDS = "shard=0/4,1/4,2/4,3/4"


def sweep(tmp: Path, name: str, *overrides: str, launcher: str | None = "slurm", check: bool = True,
          wait: bool = True, timeout: float = 600):
    """``python experiments/run.py -m ...`` into ``tmp/name``; the finished process, or the running one."""
    cmd = [sys.executable, "experiments/run.py", "-m", f"paths.data={DEMO_ROOT}", f"paths.runs={tmp / name}",
           f"paths.llm_cache={tmp / name}/llm.sqlite", "graph=demo", "progress=false", "n_boot=50", *overrides]
    if launcher:
        cmd[3:3] = [f"hydra/launcher={launcher}", *JOB]
    if not wait:
        return subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=timeout)
    if check:
        assert done.returncode == 0, f"sweep failed:\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}"
    return done


def _uncached(x):
    """A trajectory without its replies' ``cached`` flags: a resumed query replays from the LLM cache
    what it was answered before the stop."""
    if isinstance(x, dict):
        return {k: _uncached(v) for k, v in x.items() if k != "cached"}
    return [_uncached(v) for v in x] if isinstance(x, list) else x


def results(run_dir: Path, tmp: Path, base_url: str = "<no server>") -> dict:
    """What two ways of making the same run must agree on: the records, every trajectory and the summary
    (measured times, the paths the runs were made under, cache flags and the merge's bookkeeping aside)."""
    files = golden_runs.normalized(run_dir, tmp, base_url)
    metrics = json.loads(files.pop("metrics.json"))
    for k in ("run", "this_run"):
        metrics.pop(k, None)
    trajectories = {k: _uncached(json.loads(v)) for k, v in files.items() if k.startswith("trajectories/")}
    return {"metrics": metrics, "predictions": files["predictions.jsonl"], "trajectories": trajectories}


def run_dirs(root: Path) -> dict[str, Path]:
    return {p.parent.name: p.parent for p in sorted(root.glob("*/demo/*/run.json"))}


def array_tasks(cluster, runs: Path) -> dict[str, str]:
    """``{"<array id>_<task>": state}`` of the jobs submitit submitted for the sweep under ``runs``, as
    sacct has them once they ended (submitit returns when a job's result is written, a moment before
    the job ends)."""
    ids = sorted({p.name.split("_")[0] for p in runs.glob("*/.submitit/*") if p.is_dir() and p.name[0].isdigit()})

    def states() -> dict[str, str]:
        out = {}
        for job in ids:
            rows = cluster.run("sacct", "-n", "-P", "-X", "-j", job, "-o", "JobID,State").stdout.split()
            out.update(dict(r.split("|") for r in rows))
        return out

    _wait_for(lambda: not {"PENDING", "RUNNING", "COMPLETING"} & set(states().values()), "the jobs to end", timeout=60)
    return states()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with server_process(tmp_path_factory.mktemp("server")) as s:
        yield s


def test_two_point_bm25_sweep_equals_the_basic_launcher(cluster, tmp_path):
    sweep(tmp_path, "slurm", "retriever=bm25", "split=test,val", "limit=30")
    sweep(tmp_path, "basic", "retriever=bm25", "split=test,val", "limit=30", launcher=None)
    got, want = run_dirs(tmp_path / "slurm"), run_dirs(tmp_path / "basic")
    assert sorted(got) == sorted(want) == ["bm25_test_limit30", "bm25_val_limit30"]
    for name in want:
        assert json.loads((got[name] / "metrics.json").read_text())["complete"]
        assert results(got[name], tmp_path / "slurm") == results(want[name], tmp_path / "basic"), name
    tasks = array_tasks(cluster, tmp_path / "slurm")
    assert len(tasks) == 2 and set(tasks.values()) == {"COMPLETED"}, tasks      # one array of two jobs


def test_two_point_ark_sweep_equals_the_basic_launcher(cluster, server, tmp_path):
    common = [*ARK, f"backbone.base_url={server.base_url}", "split=test,val", "limit=12"]
    before = len(server_log(server.log))
    sweep(tmp_path, "slurm", *common)
    on_slurm = len(server_log(server.log)) - before
    sweep(tmp_path, "basic", *common, launcher=None)
    got, want = run_dirs(tmp_path / "slurm"), run_dirs(tmp_path / "basic")
    assert sorted(got) == ["ark-scripted-t5_n1-full_test_limit12", "ark-scripted-t5_n1-full_val_limit12"]
    assert sorted(got) == sorted(want)
    for name in want:
        summary = json.loads((got[name] / "metrics.json").read_text())
        assert summary["complete"] and summary["n_ok"] == 12 and summary["tool_calls"]["search_graph"] == 12
        assert results(got[name], tmp_path / "slurm", server.base_url) == \
            results(want[name], tmp_path / "basic", server.base_url), name
    assert on_slurm == 2 * 12 * 2     # the jobs asked the server: two runs x 12 queries x (search, select + finish)


def test_sharded_array_merges_into_the_unsharded_run(cluster, server, tmp_path):
    common = [*ARK, f"backbone.base_url={server.base_url}", "limit=22"]
    sweep(tmp_path, "sharded", *common, SHARDS)
    sweep(tmp_path, "single", *common, launcher=None)
    merged, single = run_dirs(tmp_path / "sharded"), run_dirs(tmp_path / "single")
    name = "ark-scripted-t5_n1-full_test_limit22"
    assert list(merged) == list(single) == [name]
    run = merged[name]
    summary = json.loads((run / "metrics.json").read_text())
    assert summary["complete"] and summary["n"] == 22 and summary["run"]["merged_from"] == ["0/4", "1/4", "2/4", "3/4"]
    assert results(run, tmp_path / "sharded", server.base_url) == results(single[name], tmp_path / "single", server.base_url)
    tasks = array_tasks(cluster, tmp_path / "sharded")
    assert sorted(t.split("_")[1] for t in tasks) == ["0", "1", "2", "3"] and len({t.split("_")[0] for t in tasks}) == 1
    assert set(tasks.values()) == {"COMPLETED"}
    # each shard wrote its own LLM cache; the sweep's end moved them into the run's cache
    from ark.llm.cache import ResponseCache

    assert not list(run.glob("shards/*/llm_cache.sqlite*"))
    assert len(ResponseCache(tmp_path / "sharded" / "llm.sqlite")) == 22 * 2


def _wait_for(pred, what: str, timeout: float = 300, proc=None):
    deadline = time.monotonic() + timeout
    while not pred():
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the sweep ended before {what}:\n{proc.stdout.read()[-4000:]}")
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def _records(shard_dir: Path) -> int:
    p = shard_dir / "predictions.jsonl"
    return p.read_bytes().count(b"\n") if p.exists() else 0


def _running_task(cluster, task: int) -> str | None:
    """The job id ``<array>_<task>`` of a running array task of this cluster, or None."""
    for line in cluster.run("squeue", "-h", "-t", "RUNNING", "-o", "%i").stdout.split():
        if line.endswith(f"_{task}"):
            return line
    return None


@pytest.fixture(scope="module")
def slow_server(tmp_path_factory):
    """Replies after 0.4 s: with one query in flight a shard of 12 queries takes about 10 s, long enough
    to stop it mid-run."""
    with server_process(tmp_path_factory.mktemp("slow"), latency_s=0.4, name="slow") as s:
        yield s


SLOW = ["limit=48", "concurrency=1"]   # one query (one agent, one LLM call) in flight per shard
PER_SHARD = 12


def _unsharded(tmp_path: Path, base_url: str, *overrides: str) -> dict:
    """The same run unsharded, with the basic launcher (its own LLM cache; many queries at once)."""
    sweep(tmp_path, "single", *overrides, "limit=48", "concurrency=16", launcher=None)
    (d,) = run_dirs(tmp_path / "single").values()
    return results(d, tmp_path / "single", base_url)


def _paid_once_but(entries: list[dict], at_most: int) -> None:
    """Every call of the run answered, and at most ``at_most`` answered twice (those in flight at a stop)."""
    counts = Counter(e["request"] for e in entries if e["outcome"] == "ok")
    assert len(counts) == 48 * 2, len(counts)
    assert sum(counts.values()) - len(counts) <= at_most, sorted(counts.values())[-5:]


def test_a_cancelled_shard_resubmitted_resumes_without_paying_twice(cluster, slow_server, tmp_path):
    common = [*ARK, f"backbone.base_url={slow_server.base_url}"]
    start = len(server_log(slow_server.log))
    proc = sweep(tmp_path, "sharded", *common, *SLOW, SHARDS, wait=False)
    run = tmp_path / "sharded" / "default" / "demo" / "ark-scripted-t5_n1-full_test_limit48"
    shard1 = run / "shards" / "1-of-4"
    _wait_for(lambda: _records(shard1) >= 2 and _running_task(cluster, 1), "shard 1 to be under way", proc=proc)
    job = _running_task(cluster, 1)
    cluster.run("scancel", job)
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode != 0 and "UncompletedJobError" in out, out[-3000:]   # the sweep reports the lost job
    _wait_for(lambda: not cluster.run("squeue", "-h", "-o", "%i").stdout.split(), "the other shards to end")
    kept = _records(shard1)
    assert 2 <= kept < PER_SHARD, kept                                  # it was cancelled mid-run
    state = cluster.run("sacct", "-n", "-P", "-X", "-j", job, "-o", "State").stdout.split()
    assert state[0].startswith("CANCELLED"), state
    assert not (run / "metrics.json").exists()                         # nothing merged while a shard is missing

    sweep(tmp_path, "sharded", *common, *SLOW, SHARDS)                 # the same command, resubmitted
    summary = json.loads((run / "metrics.json").read_text())
    assert summary["complete"] and summary["n_ok"] == 48
    resumed = json.loads((shard1 / "metrics.json").read_text())["this_run"]
    assert (resumed["skipped"], resumed["computed"]) == (kept, PER_SHARD - kept)
    _paid_once_but(server_log(slow_server.log)[start:], at_most=1)     # the one call in flight at the cancel
    assert results(run, tmp_path / "sharded", slow_server.base_url) == _unsharded(tmp_path, slow_server.base_url, *common)


def test_a_preempted_shard_is_requeued_and_resumes(cluster, slow_server, tmp_path):
    common = [*ARK, f"backbone.base_url={slow_server.base_url}", "experiment_name=preempt"]
    start = len(server_log(slow_server.log))
    proc = sweep(tmp_path, "sharded", *common, *SLOW, SHARDS, wait=False)
    run = tmp_path / "sharded" / "preempt" / "demo" / "ark-scripted-t5_n1-full_test_limit48"
    shard2 = run / "shards" / "2-of-4"
    _wait_for(lambda: _records(shard2) >= 2 and _running_task(cluster, 2), "shard 2 to be under way", proc=proc)
    job = _running_task(cluster, 2)
    cluster.run("scancel", "--signal=USR2", job)     # SLURM's notice before a preemption (submitit's signal)
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, out[-3000:]         # one sweep, no resubmission
    summary = json.loads((run / "metrics.json").read_text())
    assert summary["complete"] and summary["n_ok"] == 48
    def states() -> list[str]:   # the job's records in accounting, the requeued one first
        return cluster.run("sacct", "-n", "-P", "-D", "-X", "-j", job, "-o", "State").stdout.split()

    _wait_for(lambda: states()[-1:] == ["COMPLETED"], "the requeued job's end in accounting", timeout=60)
    assert states() == ["REQUEUED", "COMPLETED"]
    this_run = json.loads((shard2 / "metrics.json").read_text())["this_run"]
    assert this_run["skipped"] >= 2 and this_run["skipped"] + this_run["computed"] == PER_SHARD   # it resumed
    _paid_once_but(server_log(slow_server.log)[start:], at_most=1)


def test_cluster_settings_from_the_command_line_reach_the_job(cluster, tmp_path):
    mark = tmp_path / "setup-ran"
    sweep(tmp_path, "gpu", "retriever=bm25", "limit=3", "hydra.launcher.partition=gpu",
          "hydra.launcher.gpus_per_node=1", "hydra.launcher.cpus_per_task=2", "hydra.launcher.mem_gb=2",
          "hydra.launcher.timeout_min=7", "hydra.launcher.name=ark-gpu-check",
          f"hydra.launcher.setup=['echo gpus=$CUDA_VISIBLE_DEVICES job=$SLURM_JOB_NAME > {mark}']")
    (task,) = array_tasks(cluster, tmp_path / "gpu")   # a sweep of one point is a job of its own
    row = cluster.run("sacct", "-n", "-P", "-X", "-j", task, "-o",
                      "Partition,Timelimit,ReqCPUS,ReqMem,AllocTRES,JobName,State").stdout.strip()
    partition, limit, cpus, mem, tres, name, state = row.split("|")
    assert (partition, limit, cpus, mem, name, state) == ("gpu", "00:07:00", "2", "2G", "ark-gpu-check", "COMPLETED")
    assert "gres/gpu=1" in tres
    assert mark.read_text().split() == ["gpus=0", "job=ark-gpu-check"]   # the setup line ran in the job, before it
    (d,) = run_dirs(tmp_path / "gpu").values()
    assert json.loads((d / "metrics.json").read_text())["complete"]
