"""Pacing under a provider's rate limits (`ark.llm.pacing`): the scripted server logs when each request
arrived and what it counted, and the requests of clients with ``rpm``/``tpm`` set are checked against
the rate over windows of the server's clock (generous margins; never a bound on the test's own time)."""

from __future__ import annotations

import asyncio

import pytest

from ark.llm.client import BackboneConfig, LLMClient
from ark.llm.pacing import HEADROOM, Pacer, estimate_tokens
from tests.helpers.scripted_server import ScriptedServer, text_reply, with_usage


def _client(server: ScriptedServer, **limits) -> LLMClient:
    return LLMClient(BackboneConfig(name="paced", model="paced-model", provider="vllm", base_url=server.base_url,
                                    max_tokens=50, max_retries=0, **limits))


def _chat_all(calls) -> None:
    async def go():
        await asyncio.gather(*(client.chat([{"role": "user", "content": text}], []) for client, text in calls))
        for client in {c for c, _ in calls}:
            await client.aclose()
    asyncio.run(go())


def _most_in_a_window(times, weights, width: float) -> float:
    return max(sum(w for t, w in zip(times, weights) if s <= t < s + width) for s in times)


def test_requests_of_every_client_of_a_backbone_are_paced_under_rpm():
    with ScriptedServer(responder=lambda r: with_usage(r, text_reply("ok"))) as server:
        a, b = _client(server, rpm=600), _client(server, rpm=600)
        assert a.pacer is b.pacer                       # one pacer per backbone and process
        _chat_all([(c, f"question {i}") for i, c in enumerate([a, b] * 12)])   # 24 at once
    times = sorted(server.request_times)
    per_s = 600 * HEADROOM / 60
    assert len(times) == 24
    # the i-th request waited for its slot, i / rate after the first (a little scheduling slack)
    assert all(t - times[0] >= i / per_s - 0.05 for i, t in enumerate(times))
    assert _most_in_a_window(times, [1] * len(times), 1.0) <= per_s + 1


def test_tokens_are_paced_under_tpm_as_the_provider_counts_them():
    words = " ".join(f"word{i}" for i in range(200))
    with ScriptedServer(responder=lambda r: with_usage(r, text_reply("ok")), tpm_limit=10**9) as server:
        client = _client(server, tpm=60_000)
        _chat_all([(client, f"{i} {words}") for i in range(12)])
    times, counted = server.request_times, server.request_tokens   # prompt tokens + max_tokens, per request
    per_s = 60_000 * HEADROOM / 60
    assert min(counted) > 200 and server.outcomes == ["ok"] * 12
    order = sorted(range(12), key=times.__getitem__)
    start = times[order[0]]
    for k in range(1, 12):   # what was sent before request k had to fit the time up to it
        sent_before = sum(counted[i] for i in order[:k])
        assert times[order[k]] - start >= sent_before / per_s * 0.9
    assert _most_in_a_window(times, counted, 1.0) <= per_s + max(counted)


def test_the_estimate_is_settled_to_what_the_provider_counted_and_learnt_from():
    pacer = Pacer(tpm=60_000)   # under 1,000 tokens per second
    body = {"messages": [{"role": "user", "content": "x" * 3000}], "max_tokens": 50}
    prompt, reserve = estimate_tokens(body)
    assert prompt >= 3000 // 3 and reserve == 50      # by characters, on the high side, before the reply

    async def two(reported: int | None) -> tuple[float, float]:
        first = await pacer.acquire(prompt, reserve)
        pacer.settle(first, reported)
        second = await pacer.acquire(0, 10)
        return second.start - first.start, first.charged

    waited, charged = asyncio.run(two(None))
    assert charged == prompt + reserve and waited >= charged / 1000    # no faster than the limit itself
    half, _ = asyncio.run(two(prompt // 2))   # the reply said half: the next request went that much sooner
    assert half / waited == pytest.approx((prompt // 2 + reserve) / (prompt + reserve), rel=0.02)
    assert pacer.ratio < 1.0                   # and the next estimates are charged lower
    assert asyncio.run(pacer.acquire(prompt, reserve)).charged < prompt + reserve


def test_limits_are_checked_when_the_backbone_is_made():
    with pytest.raises(ValueError, match="rpm must be a number > 0"):
        BackboneConfig(provider="vllm", base_url="http://x/v1", rpm=0)
    assert BackboneConfig(provider="vllm", base_url="http://x/v1").rpm is None
