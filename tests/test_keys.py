"""No silent typos: an override whose key is not part of the configuration, with or without ``+``, is refused
in one line naming the closest valid key, before anything is read or written, by ``ark run``, ``ark run -m``
and ``python experiments/run.py``; the ``+`` keys the configured objects take pass (`ark.config.keys`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ark.cli.main import main
from ark.config.compose import compose
from tests.helpers.paths import DEMO_ROOT

REPO = Path(__file__).resolve().parents[1]
BM25 = ["graph=demo", "retriever=bm25", "limit=2", f"paths.data={DEMO_ROOT}", "progress=false", "n_boot=20"]
LMIT = "unknown setting 'lmit' in {o}: not a key of the configuration; the closest is limit (limit=3)"


@pytest.mark.parametrize("override", ["lmit=3", "+lmit=3", "++lmit=3"])
def test_an_unknown_key_is_one_line_naming_the_closest_and_nothing_is_written(tmp_path, capsys, override):
    assert main(["run", *BM25, f"paths.runs={tmp_path / 'runs'}", override]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == f"ark run: error: {LMIT.format(o=override)}\n"
    assert not (tmp_path / "runs").exists()


def test_a_sweep_with_an_unknown_key_stops_before_any_job(tmp_path, capsys):
    assert main(["run", "-m", *BM25, "+lmit=3,4", f"paths.runs={tmp_path / 'runs'}"]) == 2
    assert capsys.readouterr().err == f"ark run: error: {LMIT.format(o='+lmit=3')}\n"
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("multirun", [[], ["-m"]])
def test_the_script_refuses_it_before_hydra_starts(tmp_path, multirun):
    done = subprocess.run([sys.executable, str(REPO / "experiments" / "run.py"), *multirun, *BM25, "+lmit=3",
                           f"paths.runs={tmp_path / 'runs'}"], cwd=tmp_path, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=300)
    assert done.returncode == 2 and done.stderr == f"error: {LMIT.format(o='+lmit=3')}\n"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("override,closest", [
    ("budget.agent.tmax=3", "budget.agent.t_max"),      # the rest of the key under its valid prefix
    ("backbone.rmp=3", "backbone.rpm"),
    ("+rpm=3", "backbone.rpm"),                          # a key given without its group
    ("+max_cost=3", "max_cost_usd"),
])
def test_the_closest_key_is_named(override, closest):
    with pytest.raises(ValueError, match=rf"the closest is {closest} \({closest}=3\)$"):
        compose([*BM25, override])


@pytest.mark.parametrize("overrides", [
    ["+backbone.http=openai"],                                       # a field of BackboneConfig
    ["backbone=scripted", "+backbone.agent={first_search: true}"],    # a mapping field, whole
    ["+backbone.extra_body.chat_template_kwargs.enable_thinking=false"],   # below an empty mapping
    ["+ablation.tools.switches.count_nodes=false"],                  # below a mapping field
    ["encoder=openai-3-small", "+encoder.encoder.base_url=http://x/v1"],   # an argument of its class
    ["backbone.rpm=500", "backbone.price.input_per_m=2", "backbone.price.output_per_m=8"],
])
def test_keys_the_configured_objects_take_pass(overrides):
    compose(overrides)


def test_a_key_no_object_takes_is_refused_even_under_a_configured_object():
    with pytest.raises(ValueError, match=r"unknown setting 'retriever.build.rrf_k' in \+retriever.build.rrf_k=3"):
        compose(["+retriever.build.rrf_k=3"])       # ARK's factory takes no rrf_k (the hybrid baseline's does)
    compose(["retriever=hybrid", "retriever.build.rrf_k=3"])
