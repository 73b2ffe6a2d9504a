"""Integration tier: ``ark ask`` with the real local model (SmolLM2-135M via llama.cpp), started and
stopped by the command itself as ``make demo`` does, on the hand-made tables graph.

    .venv/bin/pytest -m integration tests/integration/test_ask_local.py -s

It checks the live view and the fused answer table appear, not answer quality (a 135M model).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ark.cli.main import main

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def test_ark_ask_with_the_local_backbone(capsys, tmp_path, monkeypatch):
    from ark.llm.local_server import free_port

    monkeypatch.setenv("ARK_LOCAL_URL", f"http://127.0.0.1:{free_port()}/v1")   # nothing answers there yet
    code = main(["ask", "Which SIGIR paper revisits BM25 sparse retrieval?", "--graph",
                 str(ROOT / "tests" / "data" / "tables_kg"), "--root", str(tmp_path), "--backbone", "local",
                 "--n-agents", "2", "--t-max", "3", "--no-cache"])
    out = capsys.readouterr().out
    assert "agent 1 step 1:" in out and "agent 2 step 1:" in out          # live tool calls of both agents
    assert "stop reasons:" in out and "backbone local (SmolLM2-135M-Instruct.Q4_1)" in out
    assert code == 0                                                       # not every agent failed
