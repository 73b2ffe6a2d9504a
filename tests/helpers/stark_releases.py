"""The torchmetrics release stark-qa's numbers do not have here (comparison tier, ``.venv-compare``):
stark-qa's own Evaluator run in a subprocess that imports the other behaviour's torchmetrics release first
(make_env.sh installs it beside the environment, ``<venv>/torchmetrics-<version>``).

    from tests.helpers.stark_releases import stark_under_other_release
    version, results = stark_under_other_release(tmp_path, [{"cand": [...], "scores": [[id, s], ...], "gold": [...]}], metrics)
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


def other_torchmetrics() -> tuple[str, Path]:
    """The torchmetrics release of the other behaviour, installed by make_env.sh beside the venv."""
    import torchmetrics

    from ark.analysis.metrics import torchmetrics_semantics

    want = "1.7.0" if torchmetrics_semantics(torchmetrics.__version__) == "1.9" else "1.9.0"
    target = Path(sys.prefix) / f"torchmetrics-{want}"
    if not (target / "torchmetrics").is_dir():
        pytest.fail(f"{target} is missing: rebuild the environment with bash tests/comparison/make_env.sh")
    return want, target


def stark_under_other_release(tmp_path, cases: list[dict], metrics: list[str]) -> tuple[str, list[dict]]:
    """stark-qa's Evaluator on ``cases`` ({"cand", "scores": [[id, score], ...], "gold"}) in a subprocess
    that imports the torchmetrics release of the other behaviour first; (that release, its results)."""
    version, target = other_torchmetrics()
    (tmp_path / "cases.json").write_text(json.dumps(cases))
    script = f"""
import importlib.util, json, sys
sys.path.insert(0, {str(target)!r})
import torch, torchmetrics
assert torchmetrics.__version__ == {version!r}, torchmetrics.__version__
spec = importlib.util.find_spec("stark_qa")
path = spec.submodule_search_locations[0] + "/evaluator.py"
mspec = importlib.util.spec_from_file_location("ev", path); ev = importlib.util.module_from_spec(mspec)
mspec.loader.exec_module(ev)
out = []
for c in json.load(open({str(tmp_path / "cases.json")!r})):
    e = ev.Evaluator(c["cand"])
    out.append(e({{int(k): float(v) for k, v in c["scores"]}}, torch.LongTensor(c["gold"]), metrics={metrics!r}))
json.dump(out, open({str(tmp_path / "theirs.json")!r}, "w"))
"""
    subprocess.run([sys.executable, "-c", script], check=True, timeout=600)
    return version, json.loads((tmp_path / "theirs.json").read_text())
