"""Pacing requests under a provider's rate limits: requests per minute (rpm) and tokens per minute (tpm).

A provider counts every request against its per-minute limits and answers HTTP 429 past them. A run at
``concurrency=16`` with 3 agents per query keeps up to 48 requests in flight, so without pacing it meets
the limit only through 429s and Retry-After waits. `Pacer` spaces the requests instead, before they are
sent, so that a run at the provider's limit sees no 429 once under way; the client's 429 + Retry-After
handling (`ark.llm.client`) stays for what pacing cannot know (another process on the same key, a
limit lower than configured).

How it counts, per request, as OpenAI documents for its limits: one request against ``rpm``, and its
prompt tokens plus its ``max_tokens`` against ``tpm`` (the provider reserves the whole completion
budget when the request arrives). The prompt is estimated from the request's characters before it is
sent (`estimate_tokens`, 1 token per 3 characters, on the high side) and settled to the
``prompt_tokens`` the reply reports. Each limit is a virtual clock (the generic cell rate algorithm,
without a burst): a request may start when both clocks have caught up with the time, and it moves
each clock on by its share of a minute at ``HEADROOM`` of the limit. Over any minute, a paced client
therefore sends at most ``HEADROOM`` of a limit plus one request.

One pacer per backbone and process (`for_backbone`: same provider, endpoint, model and limits), shared
by every client, agent and event loop of the process. Sweep points launched in parallel are separate
processes, each pacing to the whole limit: give each ``rpm/n_jobs`` and ``tpm/n_jobs`` there.

    pacer = for_backbone(BackboneConfig(name="gpt-4.1", model="gpt-4.1-2025-04-14", provider="openai",
                                        rpm=500, tpm=30_000))
    ticket = await pacer.acquire(estimate_tokens(body))   # waits for the request's slot
    reply = await transport.post(body)
    pacer.settle(ticket, reported_tokens(reply.body, body))
    paced(transport, pacer)                               # the same, around every post of a transport

Run ``scripts/bench_pacing.py`` for the use of a TPM limit against the scripted server enforcing it.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

HEADROOM = 0.97        # the share of each limit a pacer uses: room for the prompt estimate's error
CHARS_PER_TOKEN = 3.0  # characters per prompt token before the reply says: on the high side (English runs
                       # about 4 per token, JSON tool schemas about 3)


def estimate_tokens(body: Mapping[str, Any]) -> int:
    """The tokens a chat request counts against a TPM limit before its reply is known: its messages
    and tools at `CHARS_PER_TOKEN`, plus its ``max_tokens``."""
    chars = len(json.dumps(body.get("messages", []), ensure_ascii=False))
    chars += len(json.dumps(body.get("tools", []), ensure_ascii=False)) if body.get("tools") else 0
    return int(chars / CHARS_PER_TOKEN) + 1 + int(body.get("max_tokens") or 0)


def reported_tokens(reply_body: Any, body: Mapping[str, Any]) -> int | None:
    """What the provider counted for a request once its reply is in: the reported prompt tokens plus
    the request's ``max_tokens``; None when the reply reports no usage."""
    usage = reply_body.get("usage") if isinstance(reply_body, Mapping) else None
    try:
        prompt = int(usage["prompt_tokens"])
    except (TypeError, KeyError, ValueError):
        return None
    return prompt + int(body.get("max_tokens") or 0)


@dataclass
class Ticket:
    """One paced request: the tokens it was charged before it was sent."""

    tokens: int
    start: float   # time.monotonic() at which it was let go


class Pacer:
    """Spaces requests under ``rpm`` and ``tpm`` (either may be None: no limit of that kind)."""

    def __init__(self, rpm: float | None = None, tpm: float | None = None, headroom: float = HEADROOM):
        if not 0 < headroom <= 1:
            raise ValueError(f"headroom must be in (0, 1], got {headroom}")
        self.rpm, self.tpm, self.headroom = rpm, tpm, headroom
        self._req_per_s = rpm * headroom / 60 if rpm else None
        self._tok_per_s = tpm * headroom / 60 if tpm else None
        self._lock = threading.Lock()
        self._next_request = 0.0   # the request clock: when the next request may start
        self._next_token = 0.0     # the token clock
        self.requests = 0          # requests let go
        self.waited_s = 0.0        # seconds requests spent waiting for their slot, summed

    def _slot(self, tokens: int) -> float:
        """Book the next slot for a request of ``tokens``; returns its start time."""
        with self._lock:
            now = time.monotonic()
            start = max(now, self._next_request, self._next_token)
            if self._req_per_s:
                self._next_request = start + 1 / self._req_per_s
            if self._tok_per_s:
                self._next_token = start + tokens / self._tok_per_s
            self.requests += 1
            self.waited_s += start - now
            return start

    async def acquire(self, tokens: int) -> Ticket:
        """Wait until a request charged ``tokens`` may be sent (see the module doc)."""
        start = self._slot(max(0, int(tokens)))
        delay = start - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        return Ticket(int(tokens), start)

    def settle(self, ticket: Ticket, tokens: int | None) -> None:
        """Correct the token clock once the provider's count of the request is known (None: keep the
        estimate, e.g. for a failed request)."""
        if tokens is None or not self._tok_per_s:
            return
        with self._lock:
            self._next_token += (int(tokens) - ticket.tokens) / self._tok_per_s


class PacedTransport:
    """A transport (`ark.llm.transport`) whose every ``post`` waits for its slot under a `Pacer`."""

    def __init__(self, inner: Any, pacer: Pacer):
        self.inner, self.pacer = inner, pacer

    async def post(self, body: dict):
        ticket = await self.pacer.acquire(estimate_tokens(body))
        reply = await self.inner.post(body)
        self.pacer.settle(ticket, reported_tokens(reply.body, body) if 200 <= reply.status < 300 else None)
        return reply

    async def aclose(self) -> None:
        await self.inner.aclose()


def paced(transport: Any, pacer: Pacer | None) -> Any:
    """``transport`` under ``pacer`` (itself when there is no pacer)."""
    return transport if pacer is None else PacedTransport(transport, pacer)


_PACERS: dict[tuple, Pacer] = {}
_PACERS_LOCK = threading.Lock()


def for_backbone(config: Any) -> Pacer | None:
    """The process's pacer of a backbone (`ark.llm.client.BackboneConfig`) with ``rpm`` or ``tpm`` set,
    shared by every client of the same provider, endpoint, model and limits; None without limits."""
    rpm, tpm = getattr(config, "rpm", None), getattr(config, "tpm", None)
    if not rpm and not tpm:
        return None
    key = (config.provider, config.base_url or "", config.model, rpm, tpm)
    with _PACERS_LOCK:
        if key not in _PACERS:
            _PACERS[key] = Pacer(rpm, tpm)
        return _PACERS[key]
