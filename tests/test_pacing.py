"""Pacing under a provider's rate limits (`ark.llm.pacing`): the slots the pacer booked for the requests of
clients with ``rpm``/``tpm`` set are checked against the rate over windows, and the scripted server's log
shows that no request arrived before its slot. Only lower bounds are put on real time (a request is never
early); how late a loaded machine runs a request is not the pacer's to promise."""

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
    slots = sorted(start for start, _ in a.pacer.booked())
    arrived = sorted(server.request_times)
    rate = 600 * HEADROOM / 60
    assert len(slots) == len(arrived) == 24
    # the i-th slot is i / rate after the first, so no second holds more than the rate allows
    assert all(later - earlier >= 1 / rate - 1e-9 for earlier, later in zip(slots, slots[1:]))
    assert _most_in_a_window(slots, [1] * len(slots), 1.0) <= rate + 1
    # and no request reached the server before its slot (the server's clock is time.monotonic() too)
    assert all(t >= s - 0.005 for s, t in zip(slots, arrived))


def test_tokens_are_paced_under_tpm_as_the_provider_counts_them():
    words = " ".join(f"word{i}" for i in range(200))
    with ScriptedServer(responder=lambda r: with_usage(r, text_reply("ok")), tpm_limit=10**9) as server:
        client = _client(server, tpm=60_000)
        _chat_all([(client, f"{i} {words}") for i in range(12)])
    booked = sorted(client.pacer.booked())   # (slot, tokens as the provider counted them)
    counted = server.request_tokens          # prompt tokens + max_tokens, per request, as the server counted
    rate = 60_000 * HEADROOM / 60
    assert min(counted) > 200 and server.outcomes == ["ok"] * 12 and len(booked) == 12
    assert sorted(t for _, t in booked) == sorted(counted)    # settled to the provider's own count
    start = booked[0][0]
    for k in range(1, 12):   # what was let go before slot k had to fit the time up to it
        sent_before = sum(t for _, t in booked[:k])
        assert booked[k][0] - start >= sent_before / rate * 0.9
    slots, tokens = [s for s, _ in booked], [t for _, t in booked]
    assert _most_in_a_window(slots, tokens, 1.0) <= rate + max(tokens)
    assert all(t >= s - 0.005 for s, t in zip(slots, sorted(server.request_times)))


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
