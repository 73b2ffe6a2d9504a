"""Loggers: the no-op logger, secret redaction, the W&B mode chosen as W&B itself would (a key in
~/.netrc, a settings file, WANDB_MODE, logger.mode), the lines saying where a run logs, and a real offline
W&B run read back from disk."""

import json
import os
import subprocess
import sys
import time

import pytest
import wandb

from ark.analysis import attribution

from ark.analysis import paired
from ark.llm.client import ToolCall
from ark.run.logger import NullLogger, WandbLogger, read_offline_run, redact, run_tags, wandb_mode
from ark.run.summary import write_attribution_csv
from ark.trajectory import Step, Trajectory


def test_redact_drops_secret_keys_and_values():
    cfg = {"backbone": {"api_key": "sk-abcdefghijklmnop", "api_key_env": "OPENAI_API_KEY", "model": "gpt-4.1"},
           "token": "x", "note": "sk-1234567890abcdef", "list": [{"password": 1, "k": 2}]}
    assert redact(cfg) == {"backbone": {"api_key_env": "OPENAI_API_KEY", "model": "gpt-4.1"},
                           "note": "<redacted>", "list": [{"k": 2}]}


def test_tags_and_bad_mode():
    assert run_tags({"graph": "prime", "backbone": "gpt-4.1", "budget": "t20_n3", "ablation": None}) == \
        ["graph:prime", "backbone:gpt-4.1", "budget:t20_n3"]
    with pytest.raises(ValueError, match="online, offline, disabled"):
        WandbLogger(mode="cloud")


def test_null_logger_has_the_same_methods():
    public = {m for m in dir(WandbLogger) if not m.startswith("_")} - {"chosen_mode", "resolved_mode", "run_dir"}
    assert public <= set(dir(NullLogger))
    NullLogger().log_running({"hit@1": 1.0}, step=1)


def test_null_logger_prints_nothing(capsys, tmp_path):
    log = NullLogger()
    log.start("demo/bm25", "default", {"graph": "demo"}, {})
    log.log_final({"n": 1}, [], tmp_path)
    log.finish()
    assert capsys.readouterr() == ("", "")


KEY = "0123456789abcdef" * 2 + "01234567"   # 40 characters, the shape of a W&B API key


@pytest.fixture
def wandb_home(tmp_path, monkeypatch):
    """A fresh W&B session in a temporary HOME and working directory: no key in the environment and no
    W&B setting from outside (W&B's settings are read once per process, so the session is torn down
    before and after)."""
    wandb.teardown()
    for var in [k for k in os.environ if k.startswith("WANDB_") and k != "WANDB_SERVICE"] + ["NETRC"]:
        monkeypatch.delenv(var, raising=False)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(tmp_path)
    # W&B asks its server who the key belongs to just to print "logged in as"; silent, it does not ask
    monkeypatch.setenv("WANDB_SILENT", "true")
    yield home
    wandb.teardown()


def _netrc(home, host: str = "api.wandb.ai") -> None:
    """What `wandb login` leaves behind: the key in ~/.netrc for the W&B host."""
    (home / ".netrc").write_text(f"machine {host}\n  login user\n  password {KEY}\n")
    (home / ".netrc").chmod(0o600)


def test_a_key_from_wandb_login_in_netrc_means_online(wandb_home):
    assert WandbLogger().resolved_mode() == "offline"           # no key anywhere
    wandb.teardown()
    _netrc(wandb_home)
    assert "WANDB_API_KEY" not in os.environ
    assert WandbLogger().resolved_mode() == "online"
    assert wandb_mode(wandb) == "online"


def test_a_netrc_entry_for_another_host_is_not_a_wandb_key(wandb_home):
    _netrc(wandb_home, host="example.org")
    assert WandbLogger().resolved_mode() == "offline"


def test_a_key_in_the_environment_means_online(wandb_home, monkeypatch):
    monkeypatch.setenv("WANDB_API_KEY", KEY)
    assert WandbLogger().resolved_mode() == "online"


def test_wandb_mode_and_logger_mode_win_over_the_key(wandb_home, monkeypatch):
    _netrc(wandb_home)
    assert WandbLogger(mode="disabled").resolved_mode() == "disabled"
    assert WandbLogger(mode="offline").resolved_mode() == "offline"
    monkeypatch.setenv("WANDB_MODE", "offline")
    assert WandbLogger().resolved_mode() == "offline"
    assert WandbLogger(mode="online").resolved_mode() == "online"   # logger.mode wins over WANDB_MODE


def test_wandb_offline_in_this_directory_means_offline(wandb_home):
    _netrc(wandb_home)
    env = {**os.environ, "HOME": str(wandb_home)}
    done = subprocess.run([sys.executable, "-m", "wandb", "offline"], env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr                    # W&B's own command wrote ./wandb/settings
    assert WandbLogger().resolved_mode() == "offline"


def test_a_run_says_where_it_logs_at_start_and_finish(wandb_home, monkeypatch, capsys, tmp_path):
    _netrc(wandb_home)
    monkeypatch.setenv("WANDB_MODE", "offline")                 # W&B's offline machinery: no network
    log = WandbLogger(project="ark-test", dir=tmp_path / "wb")
    log.start("demo/bm25", "default", {"graph": "demo", "retriever": "bm25"}, {})
    wb_dir = log.run_dir
    log.finish()
    lines = capsys.readouterr().out.splitlines()
    assert wb_dir.name.startswith("offline-run-") and (wb_dir / f"run-{wb_dir.name.split('-')[-1]}.wandb").is_file()
    assert lines == [f"W&B: offline {wb_dir} (upload: wandb sync {wb_dir})"] * 2
    log = WandbLogger(project="ark-test", dir=tmp_path / "off", mode="disabled")
    log.start("demo/bm25", "default", {"graph": "demo"}, {})
    log.log_final({"n": 1, "metrics": {}}, [], tmp_path)
    log.finish()
    assert capsys.readouterr().out.splitlines() == ["W&B: disabled (nothing logged)"] * 2
    assert not (tmp_path / "off" / "wandb").exists()


def test_offline_wandb_run_reads_back(tmp_path, monkeypatch):
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    run_dir = tmp_path / "run"
    (run_dir / "trajectories").mkdir(parents=True)
    (run_dir / "trajectories" / "1.json").write_text("[]")
    (run_dir / "predictions.jsonl").write_text(json.dumps({"query_id": 1}) + "\n")
    # the spend a run records, and the forecast and cap of a paid run when its summary carries them
    summary = {"n": 2, "n_failed": 0, "complete": True, "cost_usd": 0.5,
               "tokens": {"prompt": 7, "completion": 3, "total": 10}, "forecast_usd": 0.6, "budget_usd": 2.0,
               "metrics": {"hit@1": {"mean": 0.5, "ci_low": 0.0, "ci_high": 1.0}},
               "tool_share": {"search_graph": 0.75, "explore_neighbors": 0.25}, "latency_s": {"max": 2.0}}
    rows = [{"query_id": 1, "hit@1": 1.0}, {"query_id": 2, "hit@1": 0.0}]
    # failure attribution and a paired comparison, from the modules that compute them
    traj = Trajectory(1, 0, [], [Step(0, None, [ToolCall("c", "search_graph", "{}")], ["obs"], 0.0, 0.0, 5, 1,
                                      node_ids=[[4, 9]])], [9], "finish")
    summary["attribution"] = attribution.summarize([attribution.attribute([9, 4, 3], [traj])])
    write_attribution_csv(run_dir / "attribution.csv", attribution.rows([attribution.attribute([9], [traj])]))
    diffs = paired.paired_diff([1.0] * 8 + [0.0] * 2, [0.0] * 10, "hit@1")

    log = WandbLogger(project="ark-test", dir=tmp_path / "wb")
    info = {"graph": "demo", "backbone": "scripted", "budget": "t20_n3", "ablation": "full", "split": "test"}
    log.start("demo/ark-scripted", "table1", info,
              {"graph": {"name": "demo"}, "backbone": {"api_key": "sk-secretsecretsecret", "model": "m"}})
    log.log_running({"hit@1": 0.5}, step=1)
    log.log_final(summary, rows, run_dir)
    log.log_comparison([diffs], reference="ark-gpt-4.1-t20_n3-full")
    wb_dir = log.run_dir
    log.finish()

    for _ in range(50):  # the W&B service may still be flushing the run's records after finish()
        back = read_offline_run(wb_dir)
        if back["finished"]:
            break
        time.sleep(0.2)
    assert back["finished"]
    assert back["name"] == "demo/ark-scripted" and back["group"] == "table1"
    assert set(back["tags"]) == {"graph:demo", "backbone:scripted", "budget:t20_n3", "ablation:full", "split:test"}
    assert back["config"]["backbone"] == {"model": "m"}           # the key never reached W&B
    assert back["summary"]["test/hit@1"] == 0.5 and back["summary"]["tool_share/search_graph"] == 0.75
    assert {k: back["summary"][k] for k in ("cost_usd", "tokens/prompt", "tokens/completion", "tokens/total",
                                            "forecast_usd", "budget_usd")} == \
        {"cost_usd": 0.5, "tokens/prompt": 7, "tokens/completion": 3, "tokens/total": 10, "forecast_usd": 0.6,
         "budget_usd": 2.0}
    assert any(h.get("test/running/hit@1") == 0.5 for h in back["history"])
    assert ("run-demo_ark-scripted", "trajectories") in back["artifacts"]
    assert any(t == "run_table" for _, t in back["artifacts"])    # the per-query table
    assert back["summary"]["attribution/retrieved"] == pytest.approx(1 / 3)
    assert back["summary"]["attribution/surfaced_not_selected"] == pytest.approx(1 / 3)
    assert back["summary"]["attribution/steps_to_first_gold_mean"] == 1
    assert back["summary"]["attribution_table/nrows"] == 1          # attribution.csv as a table
    key = "paired/ark-gpt-4.1-t20_n3-full/hit@1"
    assert back["summary"][f"{key}/diff"] == pytest.approx(0.8) and back["summary"][f"{key}/significant"]
    raw = b"".join(p.read_bytes() for p in wb_dir.rglob("*") if p.is_file())
    assert b"sk-secretsecretsecret" not in raw
    # a log read while W&B is still writing it ends in a torn record: read up to it, never raise
    log_file = next(wb_dir.glob("run-*.wandb"))
    whole = log_file.read_bytes()
    torn = tmp_path / "torn" / wb_dir.name
    torn.mkdir(parents=True)
    for cut in (len(whole) // 3, len(whole) // 2, len(whole) - 5):
        (torn / log_file.name).write_bytes(whole[:cut])
        partial = read_offline_run(torn)
        assert partial["name"] == back["name"] and len(partial["history"]) <= len(back["history"])
        assert not partial["finished"]                              # the exit record is the last one


def test_redaction_keeps_settings_that_only_mention_tokens():
    out = redact({"max_tokens": 256, "prompt_tokens": 3, "api_key": "sk-x", "hf_token": "h", "token": "t",
                  "secret_key": "s", "api_key_env": "OPENAI_API_KEY"})
    assert out == {"max_tokens": 256, "prompt_tokens": 3, "api_key_env": "OPENAI_API_KEY"}
