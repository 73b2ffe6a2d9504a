"""Checks that used to come too late: each graph source names its splits and the up-front check asks it;
a malformed ``base_url`` is a bad setting; an unreachable server stops the run before anything is
written, in one line naming the URL; ``ark ask`` without its key or server is one line too."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from ark.config.checks import setting_problems
from ark.config.compose import compose
from tests.helpers.paths import DEMO_ROOT

REPO = Path(__file__).resolve().parents[1]
KG = REPO / "tests" / "data" / "tables_kg"


def closed_port() -> int:
    """A local port where nothing listens (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def problems(*overrides):
    return setting_problems(compose(["retriever=bm25", *overrides]))


# --- splits: the source says which it has ---------------------------------------------------------
def test_the_demo_has_its_own_splits(tmp_path):
    from ark.data.sources import DemoSource

    assert problems("graph=demo", f"paths.data={DEMO_ROOT}", "split=test-mismatch") == []
    assert problems("graph=demo", f"paths.data={DEMO_ROOT}", "split=human_generated_eval") == [
        "bad setting split='human_generated_eval': choose one of train, val, test, test-0.1, test-mismatch "
        "(the splits of graph 'demo')"]
    assert DemoSource(DEMO_ROOT).splits() == DemoSource(DEMO_ROOT).queries().split_names()   # what it wrote


def test_stark_graphs_have_starks_splits(tmp_path):
    assert problems("graph=prime", f"paths.data={tmp_path}", "split=human_generated_eval") == []
    assert problems("graph=mag", f"paths.data={tmp_path}", "split=tset") == [
        "bad setting split='tset': choose one of train, val, test, test-0.1, human_generated_eval "
        "(the splits of graph 'mag')"]


def test_a_tables_graph_has_the_splits_its_queries_name(tmp_path):
    args = ["graph=tables", f"graph.path={KG}", f"paths.data={tmp_path}"]
    assert problems(*args, "split=val") == []
    assert problems(*args, "split=dev") == [
        "bad setting split='dev': choose one of test, train, val (the splits of graph 'tables_kg')"]
    bare = tmp_path / "bare"
    bare.mkdir()
    for f in ("nodes.csv", "edges.jsonl"):
        (bare / f).write_text((KG / f).read_text())
    assert problems("graph=tables", f"graph.path={bare}", f"paths.data={tmp_path}") == [
        "bad setting split='test': graph 'bare' has no queries (a tables or RDF graph reads them from a queries "
        "table beside its files)"]
    assert problems("graph=rdf", f"paths.data={tmp_path}", "split=train") == [
        "bad setting split='train': choose one of test, val (the splits of graph 'rdf')"]


@pytest.mark.commands
def test_a_bad_split_stops_an_entry_point_in_one_line_with_nothing_written(tmp_path):
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, str(REPO / "experiments" / "run.py"), "graph=tables", f"graph.path={KG}",
                           "retriever=bm25", f"paths.data={tmp_path / 'data'}", "split=dev"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={**__import__("os").environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.strip() == ("bad setting split='dev': choose one of test, train, val (the splits of graph "
                                   "'tables_kg')")
    assert sorted(p.name for p in tmp_path.iterdir()) == []


# --- the backbone's URL and server --------------------------------------------------------------
def test_a_malformed_base_url_is_a_bad_setting():
    assert setting_problems(compose(["graph=tables", "backbone=scripted", "backbone.base_url=notaurl"])) == [
        "bad setting in backbone: base_url 'notaurl' is not an http(s) URL with a host; write it like "
        "http://127.0.0.1:8000/v1"]


def test_an_unreachable_server_stops_the_run_before_anything_is_written(tmp_path):
    from ark.config.evaluation import run

    url = f"http://127.0.0.1:{closed_port()}/v1"
    cfg = compose(["graph=tables", f"graph.path={KG}", "backbone=scripted", f"backbone.base_url={url}",
                   f"paths.data={tmp_path / 'data'}", f"paths.runs={tmp_path / 'runs'}", "progress=false"])
    with pytest.raises(SystemExit) as e:
        run(cfg)
    assert str(e.value) == (f"the run cannot start:\n  - backbone 'scripted': cannot connect to {url} (Connection "
                            "refused); start its server, or fix backbone.base_url")
    assert not (tmp_path / "runs").exists()


def test_ask_without_a_key_or_a_server_is_one_line(capsys, tmp_path, monkeypatch):
    from ark.cli.main import main

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert main(["ask", "Which paper revisits BM25?", "--graph", str(KG), "--root", str(tmp_path),
                 "--backbone", "gpt-4.1"]) == 2
    err = capsys.readouterr().err
    assert err == ("ark ask: error: backbone 'gpt-4.1' (provider openai) needs an API key: export OPENAI_API_KEY=... "
                   "(or choose another backbone, e.g. backbone=local)\n")
    url = f"http://127.0.0.1:{closed_port()}/v1"
    assert main(["ask", "Which paper revisits BM25?", "--graph", str(KG), "--root", str(tmp_path),
                 "--backbone", "scripted", "--base-url", url]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"ark ask: error: backbone 'scripted': cannot connect to {url} (Connection refused)")
    assert err.count("\n") == 1


def test_replicas_are_refused_only_when_none_accepts_a_connection():
    from ark.config.prerequisites import server_problems
    from ark.llm.client import BackboneConfig
    from tests.helpers.scripted_server import ScriptedServer

    dead = [f"http://127.0.0.1:{closed_port()}/v1" for _ in range(2)]
    with ScriptedServer() as server:
        assert server_problems(BackboneConfig(name="r", provider="vllm", base_url=[dead[0], server.base_url])) == []
        assert server.calls == 0                                   # a connection, no request
    assert server_problems(BackboneConfig(name="r", provider="vllm", base_url=dead)) == [
        f"backbone 'r': cannot connect to {u} (Connection refused); start its server, or fix backbone.base_url"
        for u in dead]
    with pytest.raises(ValueError, match="base_url 'notaurl' is not an http"):
        BackboneConfig(provider="vllm", base_url=[dead[0], "notaurl"])
