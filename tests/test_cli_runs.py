"""``ark run`` and ``ark diagnose``: the same composition and library calls as the Hydra scripts
(experiments/run.py, experiments/diagnose.py), ``-m`` through Hydra itself, and a bad value in one line
with nothing left behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ark.cli.main import main
from ark.config import jobs
from ark.config.compose import compose
from ark.config.evaluation import run
from tests.helpers.golden_runs import normalized
from tests.helpers.paths import DEMO_ROOT

REPO = Path(__file__).resolve().parents[1]
KG = REPO / "tests" / "data" / "tables_kg"
BM25 = ["graph=demo", "retriever=bm25", "limit=4", f"paths.data={DEMO_ROOT}", "progress=false", "n_boot=20"]


def _same_run(a: Path, b: Path, tmp_a: Path, tmp_b: Path) -> None:
    """The two run directories hold the same files, byte for byte once times and their roots are out."""
    assert normalized(a, tmp_a, "<no server>") == normalized(b, tmp_b, "<no server>")


@pytest.mark.commands
def test_ark_run_is_the_composed_run(tmp_path, capsys):
    assert main(["run", *BM25, f"paths.runs={tmp_path / 'cli'}"]) == 0
    printed = capsys.readouterr().out
    cfg = compose([*BM25, f"paths.runs={tmp_path / 'lib'}"])
    run(cfg)
    cli_dir = tmp_path / "cli" / "default" / "demo" / "bm25_test_limit4"
    assert printed.startswith(f"{cli_dir}: 4/4 ok, 0 degraded, 0 failed (complete)")
    _same_run(cli_dir, Path(cfg.out_dir), tmp_path / "cli", tmp_path / "lib")


@pytest.mark.parametrize("override,message", [
    ("limit=-1", "ark run: error: bad setting limit=-1: use a whole number >= 0, or null for the whole split"),
    ("backbone=gpt-5", "ark run: error: In 'config': Could not find 'backbone/gpt-5'; Available options in "
                       "'backbone': gpt-4.1, gpt-4.1-azure, gpt-4o, local,"),
    ("seed=0,1", "ark run: error: Ambiguous value for argument 'seed=0,1';"),
])
def test_ark_run_bad_value_is_one_line_and_writes_nothing(tmp_path, capsys, override, message):
    assert main(["run", *BM25, f"paths.runs={tmp_path / 'runs'}", override]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.startswith(message) and captured.err.count("\n") == 1
    assert not (tmp_path / "runs").exists()


def test_ark_run_names_each_missing_prerequisite_in_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert main(["run", "graph=prime", "backbone=gpt-4.1", f"paths.data={tmp_path / 'nodata'}",
                 f"paths.runs={tmp_path / 'runs'}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ark run: error: the run cannot start: ") and err.count("\n") == 1
    assert f"ark download prime --root {tmp_path / 'nodata'}" in err and "; backbone 'gpt-4.1'" in err
    assert not (tmp_path / "runs").exists()


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": str(REPO), "HYDRA_FULL_ERROR": "0"}


@pytest.mark.commands
def test_ark_run_multirun_is_the_scripts_multirun(tmp_path):
    """``ark run -m`` and ``python experiments/run.py -m``: the same sweep, the same directories (each
    with Hydra's run.log) and the same files."""
    sweep = [*BM25, "split=test,val", "limit=3"]
    trees = {}
    for name, command in (("ark", [sys.executable, "-m", "ark", "run", "-m"]),
                          ("script", [sys.executable, str(REPO / "experiments" / "run.py"), "-m"])):
        cwd = tmp_path / name
        cwd.mkdir()
        done = subprocess.run([*command, *sweep, f"paths.runs={cwd / 'runs'}"], cwd=cwd, env=_env(),
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr
        trees[name] = sorted(p.relative_to(cwd).as_posix() for p in cwd.rglob("*"))
    assert trees["ark"] == trees["script"]
    runs = [p for p in trees["ark"] if p.endswith("/metrics.json")]
    assert runs == ["runs/default/demo/bm25_test_limit3/metrics.json", "runs/default/demo/bm25_val_limit3/metrics.json"]
    assert "runs/default/demo/bm25_val_limit3/run.log" in trees["ark"]
    for split in ("test", "val"):
        rel = Path("runs") / "default" / "demo" / f"bm25_{split}_limit3"
        _same_run(tmp_path / "ark" / rel, tmp_path / "script" / rel, tmp_path / "ark", tmp_path / "script")


@pytest.mark.commands
def test_ark_run_multirun_bad_value_leaves_no_directory(tmp_path):
    done = subprocess.run([sys.executable, "-m", "ark", "run", "-m", *BM25, "split=test,nosuch",
                           f"paths.runs={tmp_path / 'runs'}"], cwd=tmp_path, env=_env(),
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("ark run: error: bad setting split='nosuch'")
    assert [p.name for p in (tmp_path / "runs" / "default" / "demo").iterdir()] == ["bm25_test_limit4"]


def _script(tmp_path, *args):
    """experiments/run.py run from a working directory of its own (``tmp_path/work``, paths.runs below it)."""
    cwd = tmp_path / "work"
    cwd.mkdir(exist_ok=True)
    return subprocess.run([sys.executable, str(REPO / "experiments" / "run.py"), *BM25, *args], cwd=cwd,
                          env=_env(), capture_output=True, text=True, timeout=600)


@pytest.mark.commands
def test_a_stop_before_the_run_leaves_no_directory_wherever_out_dir_points(tmp_path):
    """Hydra makes a run's directory (out_dir) before the job starts; a job that stops before its run began
    removes what Hydra made, also outside paths.runs and the working directory, and nothing that was there
    before."""
    outside = tmp_path / "elsewhere"
    done = _script(tmp_path, f"out_dir={outside / 'x' / 'y'}", "split=tset")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("bad setting split='tset': choose one of train, val, test")
    assert not outside.exists()
    # a stop after the settings check (the reference run is missing), below a folder that was there before
    (tmp_path / "kept").mkdir()
    done = _script(tmp_path, f"out_dir={tmp_path / 'kept' / 'a' / 'b'}", f"compare_to={tmp_path / 'nosuch'}")
    assert done.returncode == 1 and "compare_to:" in done.stderr and "Traceback" not in done.stderr
    assert (tmp_path / "kept").is_dir() and list((tmp_path / "kept").iterdir()) == []
    # an out_dir that was there before the job is left as it was
    (tmp_path / "kept" / "mine").mkdir()
    done = _script(tmp_path, f"out_dir={tmp_path / 'kept' / 'mine'}", "split=tset")
    assert done.returncode == 1 and (tmp_path / "kept" / "mine").is_dir()


def test_ark_run_multirun_with_an_unknown_option_stops_before_any_job(tmp_path, capsys):
    assert main(["run", "-m", *BM25, "retriever=bm25,bm26", f"paths.runs={tmp_path / 'runs'}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ark run: error: In 'config': Could not find 'retriever/bm26'; Available options in "
                          "'retriever': ark, bm25, dense, hybrid") and err.count("\n") == 1
    assert not (tmp_path / "runs").exists()


DIAGNOSE = ["graph=tables", f"graph.path={KG}", "progress=false", "reach.ks=[5]", "reach.filters=[none]"]


def test_ark_diagnose_is_the_composed_job(tmp_path, capsys):
    assert main(["diagnose", *DIAGNOSE, f"paths.data={tmp_path}/data", f"out_dir={tmp_path}/cli"]) == 0
    printed = capsys.readouterr().out
    summary = jobs.diagnose(compose([*DIAGNOSE, f"paths.data={tmp_path}/data", f"out_dir={tmp_path}/lib"],
                                    config_name="diagnose"))
    assert json.loads((tmp_path / "cli" / "reach.json").read_text())["summary"] == summary
    for f in ("reach_gold.csv", "reach_queries.csv"):
        assert (tmp_path / "cli" / f).read_text() == (tmp_path / "lib" / f).read_text()
    assert printed.startswith(f"reachability of tables_kg/test: 5 queries -> {tmp_path}/cli")   # graph.json's name


@pytest.mark.commands
def test_ark_diagnose_multirun_and_a_bad_value(tmp_path, capsys):
    done = subprocess.run([sys.executable, "-m", "ark", "diagnose", "-m", *DIAGNOSE, "split=test,val",
                           f"paths.data={tmp_path}/data", f"paths.diagnose={tmp_path}/out"], cwd=tmp_path,
                          env=_env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert sorted(p.parent.name for p in (tmp_path / "out").rglob("reach.json")) == ["test-full", "val-full"]
    assert len(list((tmp_path / "multirun").rglob("diagnose.log"))) == 2      # Hydra's job log, as the script's
    assert main(["diagnose", *DIAGNOSE, "reach.filters=[typed]", f"out_dir={tmp_path}/bad"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ark diagnose: error: filters ['typed'] are not valid; choose from") and err.count("\n") == 1
    assert not (tmp_path / "bad").exists()
