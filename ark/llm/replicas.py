"""Several servers of one model behind one client: which replica answers each request.

``backbone.base_url`` may be a list (e.g. one vLLM server per GPU, ``scripts/serve_vllm.sh --replicas N``):

    python experiments/run.py backbone=qwen3-8b \\
        'backbone.base_url=[http://gpu01:8000/v1,http://gpu01:8001/v1,http://gpu02:8000/v1]'

`ReplicaSet` has the interface of one transport (``ark.llm.transport``: ``post(body) -> HTTPReply``,
``aclose()``) over one transport per replica:

* each request goes to the healthy replica with the fewest requests outstanding (ties: the one sent
  fewest so far), so a slow or busy replica gets less;
* a replica that fails (connection refused or dropped, a timeout, HTTP 500/502/503/504, or a 429) is
  taken out for ``cooldown_s`` (a 429's ``Retry-After`` when it gives one) and the request is sent at
  once to another replica, without using up a retry of the client's; when every replica has failed
  it, the last failure goes back to the client, whose retries and backoff (``max_retries``) apply.
  When all replicas are out, the one that comes back first is tried;
* which replica answered changes nothing downstream: the LLM cache key has no URL in it
  (``ark.llm.cache.cache_key``), so a reply replays whichever server gave it.

A request a replica was working on when it died is sent again to another one: those calls, and only
those, are paid twice (``tests/test_replicas.py`` kills one of two scripted servers mid-run).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

from ark.llm.transport import (HTTPReply, Route, TransportConnectionError, TransportTimeout, make_transport,
                               retry_after_s)

log = logging.getLogger(__name__)

COOLDOWN_S = 30.0                                   # how long a failed replica is left out
FAILOVER_STATUS = frozenset({429, 500, 502, 503, 504})   # replies that mean "this server, not this request"


@dataclass
class Replica:
    """One server and what this client has seen of it."""

    url: str
    transport: object
    outstanding: int = 0      # requests sent and not yet answered
    sent: int = 0
    ok: int = 0               # replies that were not a failover status
    failed: int = 0           # connection errors, timeouts and failover statuses
    down_until: float = 0.0   # time.monotonic() until which it is left out


class ReplicaSet:
    """One transport over several replicas (see the module doc)."""

    def __init__(self, transports: Sequence, urls: Sequence[str], cooldown_s: float = COOLDOWN_S, clock=time.monotonic):
        if len(transports) != len(urls) or not urls:
            raise ValueError("ReplicaSet needs one transport per URL, and at least one")
        self.replicas = [Replica(u, t) for u, t in zip(urls, transports)]
        self.cooldown_s = cooldown_s
        self._clock = clock

    def _pick(self, tried: set[int]) -> int | None:
        now = self._clock()
        left = [i for i in range(len(self.replicas)) if i not in tried]
        if not left:
            return None
        up = [i for i in left if self.replicas[i].down_until <= now]
        if not up:   # every replica not yet tried is out: the one that comes back first
            return min(left, key=lambda i: self.replicas[i].down_until)
        return min(up, key=lambda i: (self.replicas[i].outstanding, self.replicas[i].sent))

    def _take_out(self, r: Replica, why: str, seconds: float | None = None) -> None:
        r.failed += 1
        r.down_until = self._clock() + (self.cooldown_s if seconds is None else seconds)
        others = sum(1 for x in self.replicas if x is not r and x.down_until <= self._clock())
        log.warning("replica %s: %s; left out for %.0fs (%d other replicas up)", r.url, why,
                    r.down_until - self._clock(), others)

    async def post(self, body: dict) -> HTTPReply:
        tried: set[int] = set()
        last: HTTPReply | BaseException | None = None
        while (i := self._pick(tried)) is not None:
            tried.add(i)
            r = self.replicas[i]
            r.outstanding += 1
            r.sent += 1
            try:
                reply = await r.transport.post(body)
            except (TransportConnectionError, TransportTimeout) as e:
                self._take_out(r, f"{type(e).__name__}: {e}")
                last = e
                continue
            finally:
                r.outstanding -= 1
            if reply.status in FAILOVER_STATUS:
                wait = _retry_after(reply) if reply.status == 429 else None
                self._take_out(r, f"HTTP {reply.status}", wait)
                last = reply
                continue
            r.ok += 1
            r.down_until = 0.0
            return reply
        if isinstance(last, BaseException):
            raise last
        return last

    async def aclose(self) -> None:
        await asyncio.gather(*(r.transport.aclose() for r in self.replicas), return_exceptions=True)

    def stats(self) -> list[dict]:
        """Per replica: url, sent, ok, failed, outstanding, and whether it is left out now."""
        now = self._clock()
        return [{"url": r.url, "sent": r.sent, "ok": r.ok, "failed": r.failed, "outstanding": r.outstanding,
                 "out": r.down_until > now} for r in self.replicas]


def _retry_after(reply: HTTPReply) -> float | None:

    return retry_after_s(reply.headers)


def urls_of(base_url: str | Sequence[str] | None) -> list[str]:
    """The replica URLs of a ``base_url`` setting: a list as it is, one URL as a list of one."""
    if base_url is None:
        return []
    return [base_url] if isinstance(base_url, str) else [str(u) for u in base_url]


def transport_for(route: Route, base_url, http: str, timeout_s: float, make=make_transport):
    """The transport of ``route`` (``make``: ``ark.llm.transport.make_transport``), or, when ``base_url``
    lists several replicas, a `ReplicaSet` of one such transport per URL (the route's key, path and kind kept)."""
    urls = urls_of(base_url)
    if len(urls) <= 1:
        return make(route, http, timeout_s)
    return ReplicaSet([make(replace(route, base_url=u), http, timeout_s) for u in urls], urls)
