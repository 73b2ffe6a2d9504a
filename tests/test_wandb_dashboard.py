"""scripts/wandb_dashboard.py: every panel plots a key that a real run logs, and the view selects runs the
way the logger files them. The runs come from the real runner and ark.run.logger writing an offline W&B run
(no network); only `Workspace.save`, the call to W&B's servers, is scripted here.
"""
from __future__ import annotations

import importlib.util
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import wandb_workspaces.reports.v2 as wr
import wandb_workspaces.workspaces as ws
from omegaconf import OmegaConf

from ark.run import runner
from ark.run.logger import WandbLogger, read_offline_run
from ark.config.compose import compose
from ark.config.identity import run_info
from ark.cost.ledger import RUN_LEDGER, Ledger
from ark.cost.cap import Budget
from tests.helpers.fixtures_runs import QuerySpec, _run_stand_in

REPO = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("wandb_dashboard", REPO / "scripts" / "wandb_dashboard.py")
dash = importlib.util.module_from_spec(spec)
spec.loader.exec_module(dash)


def _plotted(workspace) -> set[str]:
    keys: set[str] = set()
    for section in workspace.sections:
        for panel in section.panels:
            # a list of keys or one; a scatter plot's x is a key too, a line plot's is W&B's own step axis
            for field in ("metrics", "metric", "y", *(("x",) if isinstance(panel, wr.ScatterPlot) else ())):
                value = getattr(panel, field, None) or []
                keys.update([value] if isinstance(value, str) else value)
    return keys


@pytest.fixture(scope="module")
def logged(tmp_path_factory) -> dict:
    """An offline W&B run written by the runner through ark.run.logger, as experiments/run.py starts it."""
    tmp = tmp_path_factory.mktemp("wb")
    mp = pytest.MonkeyPatch()
    mp.delenv("WANDB_API_KEY", raising=False)
    mp.setenv("WANDB_MODE", "offline")
    mp.setenv("WANDB_SILENT", "true")
    cfg = compose(["graph=demo", "backbone=scripted", "experiment=table1"])
    info = run_info(cfg)
    resolved = OmegaConf.to_container(OmegaConf.masked_copy(cfg, [k for k in cfg if k != "hydra"]), resolve=True)
    log = WandbLogger(project="ark-test", dir=tmp / "wandb")
    log.start(f"{info['graph']}/{info['run_name']}", cfg.experiment_name, info, resolved)
    # agent 0's first search shows the gold and selects it: every summary field has a value
    queries = [QuerySpec(i, [10 + i], [[10 + i, 1], [2]], [{"search_graph": 2, "explore_neighbors": 1}] * 2,
                         shown=[[1, 10 + i], [2, 3]]) for i in range(4)]
    # a paid run's spend fields: its cap (a budget with its ledger) and the forecast it started with
    settings = runner.RunSettings(out_dir=tmp / "run", concurrency=2, n_boot=20, progress=False, log_every=1,
                                  extra=info, budget=Budget(2.5, run=Ledger(tmp / "run" / RUN_LEDGER)),
                                  forecast={"usd": 1.25, "low": 1.0, "high": 1.5, "rests_on": 10})
    _run_stand_in(queries, settings, logger=log)
    wb_dir = log.run_dir
    log.finish()
    for _ in range(50):  # the W&B service may still be flushing the run's records after finish()
        back = read_offline_run(wb_dir)
        if back["finished"]:
            break
        time.sleep(0.2)
    mp.undo()
    return {"back": back, "experiment": cfg.experiment_name, "split": cfg.split}


def test_every_panel_plots_a_logged_key(logged):
    back = logged["back"]
    keys = set(back["summary"]) | {k for h in back["history"] for k in h}
    plotted = _plotted(dash.build_workspace("me", "ark", logged["experiment"], logged["split"]))
    assert plotted and plotted <= keys, sorted(plotted - keys)
    assert {f"{logged['split']}/{m}" for m in dash.METRICS} <= plotted
    assert {"cost_usd", "forecast_usd", "budget_usd"} <= plotted
    assert (back["summary"]["forecast_usd"], back["summary"]["budget_usd"]) == (1.25, 2.5)


def test_cost_is_plotted_against_quality_per_run(logged):
    workspace = dash.build_workspace("me", "ark", logged["experiment"], logged["split"])
    (scatter,) = [p for s in workspace.sections for p in s.panels if isinstance(p, wr.ScatterPlot)]
    assert (scatter.x, scatter.y) == ("cost_usd", f"{logged['split']}/hit@1")
    assert {scatter.x, scatter.y} <= set(logged["back"]["summary"])     # both are summary keys of a run
    assert scatter._to_model().config.x_axis == "summary:cost_usd"       # what W&B's view will read


def test_the_view_selects_the_experiment_and_groups_by_graph(logged):
    back = logged["back"]
    workspace = dash.build_workspace("me", "ark", logged["experiment"])
    assert back["group"] == logged["experiment"] == "table1"
    assert f"== '{back['group']}'" in str(workspace.runset_settings.filters)
    (group,) = workspace.runset_settings.groupby
    node = back["config"]
    for part in group.name.split("."):
        node = node[part]
    assert node == "demo"


def test_main_saves_the_view_and_prints_its_url(monkeypatch, capsys):
    saved = []

    @dataclass
    class Saved:  # what Workspace.save returns from W&B's servers
        url: str

    monkeypatch.setattr(ws.Workspace, "save", lambda self: saved.append(self) or Saved("https://wandb.ai/me/ark/v"))
    assert dash.main(["--entity", "me", "--experiment", "ablation"]) == 0
    assert capsys.readouterr().out.strip() == "saved workspace view: https://wandb.ai/me/ark/v"
    assert [w.name for w in saved] == ["ARK ablation: side by side"] and saved[0].entity == "me"
    assert dash.main(["--entity", "me", "--dry-run"]) == 0 and len(saved) == 1
    assert "ARK table1: side by side" in capsys.readouterr().out


def test_the_install_hint_agrees_with_pyproject_and_requirements(monkeypatch):
    """The one line the script stops with when wandb-workspaces is missing names an install that has it:
    pyproject's `wandb` extra (and `dev`) and requirements.txt pin the version the line gives."""
    import builtins
    import re
    import tomllib

    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert dash.REQUIREMENT in extras["wandb"] and dash.REQUIREMENT in extras["dev"]
    pins = [line.split("#")[0].strip() for line in (REPO / "requirements.txt").read_text().splitlines()]
    assert dash.REQUIREMENT in pins
    real_import = builtins.__import__

    def without_workspaces(name, *args, **kw):
        if name.startswith("wandb_workspaces"):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kw)

    monkeypatch.setattr(builtins, "__import__", without_workspaces)
    with pytest.raises(SystemExit) as e:
        dash.build_workspace("me", "ark", "table1")
    message = str(e.value.code)
    assert re.search(r"pip install -e '\.\[(\w+)\]'", message).group(1) == "wandb"
    assert message.endswith(f"pip install {dash.REQUIREMENT}") and "\n" not in message
