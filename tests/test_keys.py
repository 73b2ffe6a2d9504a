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
@pytest.mark.commands
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
    ["backbone=rules-compact", "+backbone.extra_body.rules.max_anchors=1"],   # two levels below one
    ["encoder=openai-3-small", "+encoder.encoder.base_url=http://x/v1"],   # an argument of its class
    ["backbone.rpm=500", "backbone.price.input_per_m=2", "backbone.price.output_per_m=8"],
])
def test_keys_the_configured_objects_take_pass(overrides):
    compose(overrides)


def test_a_key_no_object_takes_is_refused_even_under_a_configured_object():
    with pytest.raises(ValueError, match=r"unknown setting 'retriever.build.rrf_k' in \+retriever.build.rrf_k=3"):
        compose(["+retriever.build.rrf_k=3"])       # ARK's factory takes no rrf_k (the hybrid baseline's does)
    compose(["retriever=hybrid", "retriever.build.rrf_k=3"])


def test_a_short_key_names_every_key_of_that_name_and_each_works():
    """``build_embeddings=false`` is not a key: the line names the keys that are (the one this composition
    has, and the baseline retrievers' that another option has), and each named key composes as named."""
    with pytest.raises(ValueError) as e:
        compose(["build_embeddings=false"])
    assert str(e.value) == ("unknown setting 'build_embeddings' in build_embeddings=false: not a key of the "
                            "configuration; the closest is search.setup.build_embeddings "
                            "(search.setup.build_embeddings=false); with another option: "
                            "retriever.build.build_embeddings (retriever=dense or hybrid)")
    with pytest.raises(ValueError, match=r"the keys named build_embeddings are retriever\.build\.build_embeddings "
                                         r"and search\.setup\.build_embeddings \(search\.setup\.build_embeddings=false\)$"):
        compose(["retriever=dense", "build_embeddings=false"])
    assert compose(["search=dense", "search.setup.build_embeddings=false"]).search.setup.build_embeddings is False
    for option in ("dense", "hybrid"):
        cfg = compose([f"retriever={option}", "retriever.build.build_embeddings=false"])
        assert cfg.retriever.build.build_embeddings is False


@pytest.mark.parametrize("search", ["dense", "hybrid"])
def test_the_vector_index_settings_are_keys_without_plus(search):
    """search.setup.nprobe (and the HNSW settings) are written in the option files, so a plain override
    sets them; the written values are SearchSetup's own defaults, so a run that leaves them alone keeps
    the identity it had when they were not written."""
    import dataclasses

    from hydra.utils import instantiate

    from ark.search.modes import SearchSetup

    cfg = compose([f"search={search}", "search.setup.index_kind=ivf", "search.setup.nprobe=4",
                   "search.setup.hnsw_m=16", "search.setup.ef_search=64", "search.setup.ef_construction=40"])
    setup = instantiate(cfg.search.setup)
    assert (setup.index_kind, setup.nprobe, setup.hnsw_m, setup.ef_search, setup.ef_construction) == ("ivf", 4, 16, 64, 40)
    written = compose([f"search={search}"]).search.setup
    defaults = {f.name: f.default for f in dataclasses.fields(SearchSetup)}
    for key in ("index_kind", "hnsw_m", "ef_construction", "ef_search", "nprobe", "build_embeddings"):
        assert written[key] == defaults[key], key
