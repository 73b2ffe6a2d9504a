"""Every ``ark`` flag documented for a backbone (``--base-url``, ``--model``) works with every file in
conf/backbone/: ``ark ask`` reaches the scripted server given by ``--base-url`` asking for the model given
by ``--model`` (the rule-based ``rules`` backbone, which calls no server, takes the flags and sends nothing); and a bad value of a backbone's number settings names its key and valid range."""

from __future__ import annotations

from pathlib import Path

import pytest

from ark.cli.main import main
from ark.config.location import option_names
from ark.config.options import backbone_config
from ark.llm.client import BackboneConfig
from tests.helpers.policies import search_select_finish
from tests.helpers.scripted_server import ScriptedServer

REPO = Path(__file__).resolve().parents[1]
KG = REPO / "tests" / "data" / "tables_kg"
BACKBONES = sorted(p.stem for p in (REPO / "conf" / "backbone").glob("*.yaml"))


def test_every_backbone_file_is_an_option():
    assert BACKBONES == sorted(option_names("backbone"))


@pytest.fixture(scope="module")
def server():
    # it serves the flag's model: a local backbone uses a server on its port only when it does
    with ScriptedServer(responder=search_select_finish, models=("scripted", "flag-model")) as s:
        yield s


@pytest.mark.parametrize("name", BACKBONES)
def test_base_url_and_model_reach_the_endpoint_for_every_backbone(name, server, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "az-test")
    # a paid provider's model must have a price (ark.cost.prices): one it knows, other than the file's own
    model = "gpt-4.1-mini" if backbone_config(name).provider in ("openai", "azure") else "flag-model"
    backbone = backbone_config(name, server.base_url, model)
    assert (backbone.base_url, backbone.model) == (server.base_url, model)
    before = len(server.requests)
    code = main(["ask", "Which SIGIR paper revisits BM25?", "--graph", str(KG), "--root", str(tmp_path / "data"),
                 "--backbone", name, "--base-url", server.base_url, "--model", model, "--n-agents", "1",
                 "--t-max", "4", "--no-cache"])
    err = capsys.readouterr().err
    assert code == 0, err
    sent = server.requests[before:]
    if backbone.provider == "rules":      # no model and no server: the flags are taken and nothing is sent
        assert sent == []
        return
    assert sent and {r["model"] for r in sent} == {model}


@pytest.mark.parametrize("key,value,message", [
    ("temperature", "abc", "temperature must be a number from 0 to 2, got 'abc'"),
    ("temperature", -0.5, "temperature must be a number from 0 to 2, got -0.5"),
    ("top_p", 0, "top_p must be a number from 0 (excluded) to 1 or null, got 0"),
    ("max_tokens", 1.5, "max_tokens must be a whole number >= 1, got 1.5"),
    ("max_tokens", True, "max_tokens must be a whole number >= 1, got True"),
    ("seed", "x", "seed must be a whole number or null, got 'x'"),
    ("timeout_s", 0, "timeout_s must be a number > 0, got 0"),
    ("max_retries", -1, "max_retries must be a whole number >= 0, got -1"),
    ("backoff_max_s", "1m", "backoff_max_s must be a number >= 0, got '1m'"),
    ("supports_tool_choice", "yes", "supports_tool_choice must be true or false, got 'yes'"),
])
def test_a_bad_number_names_its_key_and_range(key, value, message):
    with pytest.raises(ValueError) as e:
        BackboneConfig(name="x", model="x", provider="vllm", base_url="http://127.0.0.1:8000/v1", **{key: value})
    assert str(e.value) == message


@pytest.mark.parametrize("setting,message", [
    ("backbone.temperature=abc", "bad setting in backbone: temperature must be a number from 0 to 2, got 'abc'"),
    ("backbone.max_retries=lots", "bad setting in backbone: max_retries must be a whole number >= 0, got 'lots'"),
])
def test_ark_run_names_the_bad_backbone_value_in_one_line(setting, message, tmp_path, capsys):
    code = main(["run", "graph=tables", f"graph.path={KG}", "backbone=scripted", setting, f"paths.data={tmp_path}"])
    err = capsys.readouterr().err
    assert code != 0 and err.strip().splitlines() == [f"ark run: error: {message}"]
