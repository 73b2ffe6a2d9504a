"""Several servers of one model (`ark.llm.replicas`): ``backbone.base_url`` as a list, against scripted
OpenAI-compatible servers; one of two killed in the middle of an ARK run loses nothing and has only the
calls it was answering paid again.

    .venv/bin/pytest tests/test_replicas.py -q
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from ark.llm.client import BackboneConfig, LLMClient, LLMTransportError
from ark.llm.replicas import ReplicaSet
from ark.llm.transport import Route, make_transport
from ark.config.compose import compose
from ark.config.evaluation import run
from tests.helpers import golden_runs
from tests.helpers.paths import DEMO_ROOT
from tests.helpers.scripted_server import ScriptedServer, rate_limited, server_error, text_reply
from tests.helpers.server_process import server_log, server_process

MESSAGES = [{"role": "user", "content": "Which genes are linked to aortic aneurysm?"}]


def _client(urls, cache=None, **kw) -> LLMClient:
    cfg = dict(name="scripted", model="scripted", provider="vllm", base_url=list(urls), max_retries=0,
               timeout_s=5.0, backoff_base_s=0.01)
    return LLMClient(BackboneConfig(**{**cfg, **kw}), cache=cache)


async def _chats(client: LLMClient, n: int, at_once: int):
    gate = asyncio.Semaphore(at_once)

    async def one(i):
        async with gate:
            return await client.chat([{"role": "user", "content": f"q{i}"}], [], tool_choice=None)

    try:
        return await asyncio.gather(*(one(i) for i in range(n)))
    finally:
        await client.aclose()


def _answer(_request):
    return text_reply("ok")


def test_requests_go_to_the_replica_with_the_fewest_outstanding():
    with ScriptedServer(responder=_answer, latency_s=0.05) as a, ScriptedServer(responder=_answer, latency_s=0.05) as b:
        replies = asyncio.run(_chats(_client([a.base_url, b.base_url]), 40, at_once=8))
    assert len(replies) == 40 and a.calls == b.calls == 20           # equal servers share equally
    assert max(a.max_in_flight, b.max_in_flight) == 4
    with ScriptedServer(responder=_answer, latency_s=0.01) as fast, \
            ScriptedServer(responder=_answer, latency_s=0.2) as slow:
        asyncio.run(_chats(_client([slow.base_url, fast.base_url]), 60, at_once=4))
    assert fast.calls + slow.calls == 60 and fast.calls > 4 * slow.calls  # the busy one is asked less


def test_a_failing_replica_is_left_out_and_its_requests_go_to_the_others():
    with ScriptedServer(responder=lambda r: server_error(503)) as sick, ScriptedServer(responder=_answer) as well:
        client = _client([sick.base_url, well.base_url])
        replies = asyncio.run(_chats(client, 10, at_once=1))
    assert all(r.content == "ok" for r in replies)                   # no retry of the client's was used (max 0)
    assert sick.calls == 1 and well.calls == 10                      # asked once, then left out
    # a dead replica (nothing listening) is the same
    with ScriptedServer(responder=_answer) as well:
        with socket.socket() as probe:   # a port that was free a moment ago: nothing listens there
            probe.bind(("127.0.0.1", 0))
            dead_url = f"http://127.0.0.1:{probe.getsockname()[1]}/v1"
        replies = asyncio.run(_chats(_client([dead_url, well.base_url]), 5, at_once=1))
        assert [r.content for r in replies] == ["ok"] * 5 and well.calls == 5


def test_a_replica_left_out_is_tried_again_after_its_cooldown():
    now = [0.0]
    with ScriptedServer([server_error(503), text_reply("back")]) as flaky, ScriptedServer(responder=_answer) as well:
        route = Route("vllm", flaky.base_url, "EMPTY")

        async def go():
            ts = [make_transport(route, "aiohttp", 5.0), make_transport(Route("vllm", well.base_url, "EMPTY"), "aiohttp", 5.0)]
            rs = ReplicaSet(ts, [flaky.base_url, well.base_url], cooldown_s=10.0, clock=lambda: now[0])
            body = {"model": "scripted", "messages": MESSAGES}
            try:
                first = await rs.post(body)             # flaky answers 503: the request goes on to `well`
                out_now = rs.stats()[0]["out"]
                second = await rs.post(body)            # flaky is out: `well` again
                now[0] = 11.0
                third = await rs.post(body)             # the cooldown is over: flaky is asked again
                return first, out_now, second, third, rs.stats()
            finally:
                await rs.aclose()

        first, out_now, second, third, stats = asyncio.run(go())
    assert first.status == second.status == third.status == 200 and out_now
    assert third.body["choices"][0]["message"]["content"] == "back"
    assert [(s["sent"], s["ok"], s["failed"]) for s in stats] == [(2, 1, 1), (2, 2, 0)]


def test_when_every_replica_fails_the_clients_retries_apply():
    with ScriptedServer(responder=lambda r: server_error(503)) as a, \
            ScriptedServer([rate_limited(0.01)] * 3 + [text_reply("late")]) as b:
        with pytest.raises(LLMTransportError, match="HTTP 429"):
            asyncio.run(_chats(_client([a.base_url, b.base_url]), 1, at_once=1))
        assert a.calls == 1 and b.calls == 1                        # each once, then back to the client
        reply = asyncio.run(_chats(_client([a.base_url, b.base_url], max_retries=3), 1, at_once=1))
    assert reply[0].content == "late"


def test_which_replica_answered_does_not_reach_the_cache(tmp_path):
    """The cache key has no URL: a reply one replica gave is replayed by a client of another."""
    with ScriptedServer(responder=_answer) as a, ScriptedServer(responder=_answer) as b:
        first = asyncio.run(_chats(_client([a.base_url, b.base_url], cache=tmp_path / "c.sqlite"), 6, at_once=6))
        calls = a.calls + b.calls
        again = asyncio.run(_chats(_client([b.base_url], cache=tmp_path / "c.sqlite"), 6, at_once=6))
    assert calls == 6 and a.calls + b.calls == 6 and all(r.cached for r in again)
    assert [r.content for r in first] == [r.content for r in again]


def test_one_url_or_a_list_and_what_is_refused():
    one = BackboneConfig(provider="vllm", base_url="http://h:8000/v1")
    many = BackboneConfig(provider="vllm", base_url=("http://h:8000/v1", "http://h:8001/v1"))
    assert one.base_url == "http://h:8000/v1" and many.base_url == ["http://h:8000/v1", "http://h:8001/v1"]
    assert BackboneConfig(provider="local", base_url=["http://127.0.0.1:8080/v1"]).base_url == "http://127.0.0.1:8080/v1"
    with pytest.raises(ValueError, match="provider 'local' starts one server"):
        BackboneConfig(provider="local", base_url=["http://a/v1", "http://b/v1"])
    with pytest.raises(ValueError, match="empty list"):
        BackboneConfig(provider="vllm", base_url=[])
    cfg = compose(["backbone=qwen3-8b", "backbone.base_url=[http://gpu01:8000/v1,http://gpu02:8000/v1]"])
    from hydra.utils import instantiate

    assert instantiate(cfg.backbone).base_url == ["http://gpu01:8000/v1", "http://gpu02:8000/v1"]
    from ark.config.identity import run_identity

    assert run_identity(cfg) == run_identity(compose(["backbone=qwen3-8b"]))   # where it is served is no setting


N_QUERIES = 40


def _overrides(tmp: Path, urls: list[str], name: str) -> list[str]:
    return [f"paths.data={DEMO_ROOT}", f"paths.runs={tmp}/{name}", f"paths.llm_cache={tmp}/{name}.sqlite",
            "graph=demo", "split=train", f"limit={N_QUERIES}", "backbone=scripted", f"backbone.base_url=[{','.join(urls)}]",
            "budget=t5_n1", "concurrency=8", "progress=false", "n_boot=50"]


def _results(tmp: Path, name: str, urls: list[str]) -> tuple[str, dict]:
    out = Path(compose(_overrides(tmp, urls, name)).out_dir)
    files = golden_runs.normalized(out, tmp, "<none>")
    metrics = json.loads(files["metrics.json"])
    return files["predictions.jsonl"], {k: metrics[k] for k in ("n", "n_ok", "complete", "metrics", "tool_calls")}


def test_one_of_two_servers_killed_mid_run_loses_nothing(tmp_path):
    with server_process(tmp_path, latency_s=0.05, name="a") as a, server_process(tmp_path, latency_s=0.05, name="b") as b:
        reference = run(compose(_overrides(tmp_path, [a.base_url], "reference")))
        start_a = len(server_log(a.log))

        def kill_b_midway():
            while len(server_log(b.log)) < N_QUERIES // 2:
                time.sleep(0.01)
            b.kill()

        killer = threading.Thread(target=kill_b_midway, daemon=True)
        killer.start()
        summary = run(compose(_overrides(tmp_path, [a.base_url, b.base_url], "two")))
        killer.join(5)
        assert not b.process.is_alive()
        on_a = server_log(a.log)[start_a:]
    on_b = server_log(b.log)
    assert summary["complete"] and summary["n_ok"] == N_QUERIES == reference["n_ok"]      # nothing lost
    assert len(on_b) >= N_QUERIES // 2 and len(on_a) >= N_QUERIES                       # both served, A the rest
    counts = Counter(e["request"] for e in on_a + on_b if e["outcome"] == "ok")
    assert len(counts) == N_QUERIES * 2                                   # every call answered
    twice = sum(counts.values()) - len(counts)
    print(f"\nB answered {len(on_b)} requests before it was killed, A {len(on_a)}; paid twice: {twice}")
    assert twice <= 8, twice            # at most the calls B held when it died (8 queries x 1 agent in flight)
    assert _results(tmp_path, "two", [a.base_url, b.base_url]) == _results(tmp_path, "reference", [a.base_url])
