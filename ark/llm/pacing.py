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
sent: an agent's request repeats its previous request's prompt, whose count the previous reply gave
(`prefix_digests` finds it), and only what was added since is estimated by characters
(`estimate_tokens`, 1 token per 3 characters, on the high side), times the ratio of reported to
estimated tokens that the replies so far have shown (a moving mean). The charge is settled to the
``prompt_tokens`` the reply reports. Each limit is a virtual clock (the generic cell rate algorithm,
without a burst): a request may start when both clocks have caught up with the time, and it moves each
clock on by its share of a minute at ``HEADROOM`` of the limit. Such a client sends at most its pace plus one request
in any minute, so a request also waits while the 60 seconds up to it would hold more than
``WINDOW_SHARE`` of a limit (the requests booked in them, at what their replies counted once known):
no sliding minute passes that share, but for the errors of the estimates still in flight.

One pacer per backbone and process (`for_backbone`: same provider, endpoint, model and limits), shared
by every client, agent and event loop of the process. Sweep points launched in parallel are separate
processes, each pacing to the whole limit: give each ``rpm/n_jobs`` and ``tpm/n_jobs`` there.

    pacer = for_backbone(BackboneConfig(name="gpt-4.1", model="gpt-4.1-2025-04-14", provider="openai",
                                        rpm=500, tpm=30_000))
    ticket = await pacer.acquire_request(body)             # waits for the request's slot
    reply = await transport.post(body)
    pacer.settle(ticket, reported_prompt_tokens(reply.body))
    paced(transport, pacer)                               # the same, around every post of a transport

Run ``scripts/bench_pacing.py`` for the use of a TPM limit against the scripted server enforcing it.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ark.cost.tokens import CHARS_PER_TOKEN, prompt_tokens_upper

HEADROOM = 0.98        # the pace: this share of each limit per minute, spread evenly
WINDOW_SHARE = 0.99    # what no 60 seconds may hold more of (the provider counts a sliding minute)
RATIO_WEIGHT = 0.1     # how fast the learnt ratio of reported to estimated prompt tokens follows the replies
REMEMBERED = 20_000    # prompt counts kept (of the latest requests) for the next step of each conversation


def estimate_tokens(body: Mapping[str, Any]) -> tuple[int, int]:
    """What a chat request counts against a TPM limit before its reply is known: (its prompt, from its
    messages and tools at `ark.cost.tokens.CHARS_PER_TOKEN`; its ``max_tokens``)."""
    chars = getattr(body, "prompt_chars", None)   # a body encoded once (`ark.llm.transport.EncodedBody`)
    prompt = int(chars / CHARS_PER_TOKEN) + 1 if chars else prompt_tokens_upper(body.get("messages", []), body.get("tools"))
    return prompt, int(body.get("max_tokens") or 0)


def reported_prompt_tokens(reply_body: Any) -> int | None:
    """The prompt tokens a reply reports; None when it reports no usage."""
    usage = reply_body.get("usage") if isinstance(reply_body, Mapping) else None
    try:
        return int(usage["prompt_tokens"])
    except (TypeError, KeyError, ValueError):
        return None


@dataclass
class Ticket:
    """One paced request: what it was charged before it was sent."""

    prompt_estimate: int   # the part of its prompt estimated by characters
    charged: float         # the tokens its slot was booked for
    reserve: int           # its max_tokens
    start: float           # time.monotonic() at which it was let go
    known: int = 0         # the part of its prompt a reply already counted (an earlier step's prompt)
    key: str = ""          # its prompt's digest, to remember the count its reply gives
    entry: list | None = field(default=None, repr=False)   # its [start, tokens] in the pacer's window


def prefix_digests(body: Mapping[str, Any]) -> list[str]:
    """Digests of a request's prompt up to each of its messages (its tools included): request k of an
    agent starts with request k - 1's whole prompt, whose count a reply has given already."""
    h = hashlib.sha1(json.dumps(body.get("tools") or [], sort_keys=True).encode())
    out = []
    for m in body.get("messages", []):
        h.update(json.dumps(m, sort_keys=True, ensure_ascii=False).encode())
        out.append(h.hexdigest())
    return out


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
        self._sent: deque[list] = deque()   # [start, tokens] of the requests of the last minutes, by booking
        self.ratio = 1.0           # reported / estimated prompt tokens, learnt from the replies (moving mean)
        self._counted: OrderedDict[str, int] = OrderedDict()   # prompt digest -> tokens its reply reported
        self.requests = 0          # requests let go
        self.waited_s = 0.0        # seconds requests spent waiting for their slot, summed

    def booked(self) -> list[tuple[float, float]]:
        """(start, tokens) of the requests of the last two minutes, in booking order: when each was let
        go (``time.monotonic()``) and what it counts against ``tpm`` (the provider's count once settled)."""
        with self._lock:
            return [(start, tokens) for start, tokens in self._sent]

    def _fits(self, start: float, tokens: float) -> float:
        """The first time from ``start`` at which a request of ``tokens`` keeps the 60 seconds up to it
        within `WINDOW_SHARE` of the limits (its own tokens and its own request counted)."""
        while True:
            inside = [e for e in self._sent if start - 60.0 < e[0] <= start]
            over_t = self.tpm and inside and sum(e[1] for e in inside) + tokens > WINDOW_SHARE * self.tpm
            over_r = self.rpm and inside and len(inside) + 1 > WINDOW_SHARE * self.rpm
            if not (over_t or over_r):
                return start
            start = min(e[0] for e in inside) + 60.0 + 1e-6   # when the oldest of them leaves the window

    def _slot(self, tokens: float) -> tuple[float, list]:
        """Book the next slot for a request of ``tokens``; returns its start time and its window entry."""
        with self._lock:
            now = time.monotonic()
            while self._sent and self._sent[0][0] <= now - 120.0:
                self._sent.popleft()
            start = self._fits(max(now, self._next_request, self._next_token), tokens)
            if self._req_per_s:
                self._next_request = start + 1 / self._req_per_s
            if self._tok_per_s:
                self._next_token = start + tokens / self._tok_per_s
            entry = [start, tokens]
            self._sent.append(entry)
            self.requests += 1
            self.waited_s += start - now
            return start, entry

    async def acquire(self, prompt_estimate: int, reserve: int = 0) -> Ticket:
        """Wait until a request may be sent whose prompt is estimated at ``prompt_estimate`` tokens and
        which reserves ``reserve`` completion tokens (see the module doc)."""
        charged = max(0, int(prompt_estimate)) * self.ratio + max(0, int(reserve))
        start, entry = self._slot(charged)
        delay = start - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        return Ticket(int(prompt_estimate), charged, int(reserve), start, entry=entry)

    async def acquire_request(self, body: Mapping[str, Any]) -> Ticket:
        """`acquire` for a chat request: the part of its prompt an earlier reply counted (the conversation
        so far) is charged at that count, only the rest is estimated by characters."""
        digests = prefix_digests(body)
        msgs = body.get("messages", [])
        known, upto = 0, 0
        with self._lock:
            for i in range(len(digests) - 1, -1, -1):
                if digests[i] in self._counted:
                    known, upto = self._counted[digests[i]], i + 1
                    break
        rest = {"messages": msgs[upto:], "tools": [] if upto else body.get("tools")}
        prompt, reserve = estimate_tokens({**rest, "max_tokens": body.get("max_tokens")})
        charged = known + prompt * self.ratio + reserve
        start, entry = self._slot(charged)
        delay = start - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        return Ticket(prompt, charged, reserve, start, known, digests[-1] if digests else "", entry)

    def settle(self, ticket: Ticket, prompt_tokens: int | None) -> None:
        """Correct the token clock once the provider's count of the request's prompt is known (None: keep
        the estimate, e.g. for a failed request), and learn how the estimates compare with the counts."""
        if prompt_tokens is None or not self._tok_per_s:
            return
        with self._lock:
            counted = int(prompt_tokens) + ticket.reserve
            self._next_token += (counted - ticket.charged) / self._tok_per_s
            if ticket.entry is not None:
                ticket.entry[1] = counted   # the window holds what the provider counted
            if ticket.prompt_estimate > 0:
                seen = min(2.0, max(0.25, (prompt_tokens - ticket.known) / ticket.prompt_estimate))
                self.ratio += RATIO_WEIGHT * (seen - self.ratio)
            if ticket.key:
                self._counted[ticket.key] = int(prompt_tokens)
                if len(self._counted) > REMEMBERED:
                    self._counted.popitem(last=False)


class PacedTransport:
    """A transport (`ark.llm.transport`) whose every ``post`` waits for its slot under a `Pacer`."""

    def __init__(self, inner: Any, pacer: Pacer):
        self.inner, self.pacer = inner, pacer

    async def post(self, body: dict):
        ticket = await self.pacer.acquire_request(body)
        reply = await self.inner.post(body)
        self.pacer.settle(ticket, reported_prompt_tokens(reply.body) if 200 <= reply.status < 300 else None)
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
