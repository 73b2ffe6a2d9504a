"""The Makefile and W&B: the test tiers and `make demo` are forced offline, the recipes users run
(reproduce-table1, figures...) log as W&B itself would, so `make reproduce-table1 ARGS=logger=wandb` with
a key goes online. The run's init/finish is answered by `tests.helpers.wandb_stand_in` (W&B's servers
cannot be reached here); the mode is chosen by the repo and W&B's own settings and login, unpatched.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.paths import DEMO_ROOT, REPO
from tests.helpers.wandb_stand_in import ENV, URL, records, site_dir

STAMPS = [f"--assume-old=.venv/.{s}" for s in ("core", "local", "distill", "dense")]   # never (re)install
FORCED = ["test", "test-commands", "test-packaging", "test-demo-data", "test-browser", "test-chaos", "test-integration", "test-distill", "test-dense", "test-comparison", "test-all",
          "demo"]
FREE = ["reproduce-table1", "table1", "table1-demo", "figures", "viewer", "bench-agent"]
KEY = "0123456789abcdef" * 2 + "01234567"


def _env(**extra: str) -> dict[str, str]:
    """The caller's environment without W&B settings or an outer make's flags."""
    drop = ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "NETRC")
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_") and k not in drop}
    return {**env, **extra}


@pytest.fixture(scope="module")
def recipes(tmp_path_factory):
    """{target: [(WANDB_MODE, command)]} for each target, with WANDB_MODE=online in the caller's environment,
    read by a SHELL that records each command make hands it and runs nothing."""
    tmp = tmp_path_factory.mktemp("make")
    log = tmp / "commands.tsv"
    shell = tmp / "record-shell"
    shell.write_text('#!/bin/sh\nprintf "%s\\t%s\\n" "${WANDB_MODE-<unset>}" "$2" >> "$COMMAND_LOG"\n')
    shell.chmod(0o755)

    def commands(target: str, *flags: str, **env: str) -> list[tuple[str, str]]:
        log.write_text("")
        subprocess.run(["make", "-s", "-C", str(REPO), f"SHELL={shell}", "PY=python", *STAMPS, *flags, target],
                       env=_env(COMMAND_LOG=str(log), **env), check=True, capture_output=True, timeout=60)
        return [tuple(line.split("\t", 1)) for line in log.read_text().splitlines()]

    parsed = {c for _, c in commands("help", "-n")}   # the Makefile's own $(shell ...) calls, not a recipe's
    out = {t: [(m, c) for m, c in commands(t, WANDB_MODE="online") if c not in parsed] for t in FORCED + FREE}
    out["reproduce-table1 (no WANDB_MODE)"] = [(m, c) for m, c in commands("reproduce-table1") if c not in parsed]
    return out


@pytest.mark.parametrize("target", FORCED)
def test_test_tiers_and_the_demo_are_offline_whatever_the_caller_says(recipes, target):
    assert recipes[target], target
    assert {mode for mode, _ in recipes[target]} == {"offline"}, recipes[target]


@pytest.mark.parametrize("target", FREE)
def test_user_facing_recipes_leave_the_mode_to_the_user(recipes, target):
    assert recipes[target], target
    assert {mode for mode, _ in recipes[target]} == {"online"}, recipes[target]


def test_a_recipe_sets_no_mode_of_its_own(recipes):
    ((mode, command),) = recipes["reproduce-table1 (no WANDB_MODE)"]
    assert mode == "<unset>" and command.startswith("python -m ark table1 --reproduce")


@pytest.mark.commands
def test_reproduce_table1_with_a_key_logs_online(tmp_path):
    """`make reproduce-table1` shrunk to one BM25 run on the demo graph, logger=wandb, a W&B key in the
    environment and no WANDB_MODE: the run starts online and says where it logs at start and end."""
    record = tmp_path / "wandb.jsonl"
    (tmp_path / "home").mkdir()
    args = " ".join(["graph=demo", "retriever=bm25", "backbone=scripted", "limit=2", "n_boot=20", "progress=false",
                     "logger=wandb", f"paths.data={DEMO_ROOT}", f"paths.wandb={tmp_path}/wb",
                     f"--runs {tmp_path}/runs", f"--out {tmp_path}/table"])
    env = _env(HOME=str(tmp_path / "home"), WANDB_API_KEY=KEY, PYTHONPATH=f"{site_dir(tmp_path)}:{REPO}",
               **{ENV: str(record)},
               WANDB_SILENT="true")   # else W&B asks its server whose key this is, to print "logged in as"
    done = subprocess.run(["make", "-C", str(REPO), f"PY={sys.executable}", *STAMPS, "reproduce-table1",
                           f"ARGS={args}"], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    init, finish = records(record)
    assert init["event"] == "init" and init["mode"] == "online"
    assert (init["group"], init["name"]) == ("table1", "demo/bm25")
    assert init["url"].startswith(URL)
    lines = [line for line in done.stdout.splitlines() if line.startswith("W&B:")]
    assert lines == [f"W&B: online {init['url']}"] * 2                 # at start and at end
    assert finish["event"] == "finish" and finish["summary"]["complete"] is True
    assert {"test/hit@1", "cost_usd", "tokens/total"} <= set(finish["summary"])
    assert (tmp_path / "table" / "table1.md").is_file()                # the recipe went on to build the table
    assert KEY not in done.stdout + done.stderr + record.read_text()
