"""HTTP transports for chat completions: POST one JSON body, get back status, headers and JSON.

``ark.llm.client.LLMClient`` decides what to send and what a reply means (retries, typed errors); a
transport only moves bytes. Two implementations share one interface, chosen per backbone by
``BackboneConfig.http``:

- ``aiohttp`` (default): one ``aiohttp.ClientSession``, no connection cap (concurrency is bounded
  by the agents' semaphore), the proxy from ``HTTP(S)_PROXY``/``NO_PROXY``. About 0.2 ms of CPU per call, against
  0.8 ms for the SDK's transport: at hundreds of calls per second the client's CPU, not the server,
  sets the pace (``scripts/bench_runner.py --http both`` measures both side by side).
- ``openai``: the official SDK's low-level ``post`` over httpx, for when you want exactly the SDK's
  routing and HTTP behaviour.

Both are bound to the event loop they were created on; ``LLMClient`` makes one per loop.

    transport = make_transport(Route.for_backbone(...), "aiohttp", timeout_s=60)
    reply = await transport.post(body)   # HTTPReply(status, headers, body); 4xx/5xx are replies
    await transport.aclose()

A chat request's body is encoded once (`encoded_chat_body`): the aiohttp transport sends those bytes,
and the same encoding of its messages and tools gives the LLM cache's key and the prompt's characters
that the spending cap counts (`ark.cost.tokens.canonical`).

Raises ``TransportTimeout`` or ``TransportConnectionError``; HTTP errors are returned, not raised.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode, urlsplit
from urllib.request import getproxies, proxy_bypass

from ark.cost.tokens import canonical

CHAT_PATH = "/chat/completions"
EMBEDDINGS_PATH = "/embeddings"
OPENAI_BASE_URL = "https://api.openai.com/v1"


class EncodedBody(dict):
    """A request body (the dict, for transports and wrappers that read it) with its JSON bytes, encoded
    once (``data``), and its messages' and tools' characters as JSON (``prompt_chars``, what
    `ark.cost.tokens.prompt_chars` counts)."""

    data: bytes = b""
    prompt_chars: int = 0


def encoded_chat_body(body: dict, messages_json: str | None = None, tools_json: str | None = None) -> EncodedBody:
    """``body`` with its JSON encoded once: its messages and tools as `ark.cost.tokens.canonical` encodes
    them (``messages_json``, ``tools_json``: that encoding, when the caller has made it already), so
    that their length is `ark.cost.tokens.prompt_chars`; the other fields around them."""
    msgs = messages_json if messages_json is not None else canonical(body.get("messages", []))
    tools = "" if not body.get("tools") else tools_json if tools_json is not None else canonical(body["tools"])
    rest = json.dumps({k: v for k, v in body.items() if k not in ("messages", "tools")})
    parts = ['{"messages":', msgs]
    if tools:
        parts += [',"tools":', tools]
    parts.append("," + rest[1:] if len(rest) > 2 else "}")
    out = EncodedBody(body)
    out.data = "".join(parts).encode()
    out.prompt_chars = len(msgs) + len(tools)
    return out


RETRYABLE_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504, 520, 522, 524, 529})   # worth a retry


def error_message(reply: "HTTPReply") -> str:
    """What an error reply says: OpenAI's ``error.message``, or the start of its body."""
    body = reply.body
    if isinstance(body, Mapping):
        err = body.get("error", body)
        if isinstance(err, Mapping) and err.get("message"):
            return str(err["message"])
        if isinstance(err, str):
            return err
        return json.dumps(body)[:500]
    return str(body)[:500] or f"HTTP {reply.status}"


def retry_delay_s(attempt: int, base_s: float, max_s: float, retry_after: float | None = None) -> float:
    """How long to wait before retry ``attempt`` (1, 2, ...): the server's ``Retry-After`` when it sent
    one, else exponential backoff from ``base_s`` with jitter; never more than ``max_s``."""
    if retry_after is not None:
        return min(max_s, retry_after)
    return min(max_s, base_s * 2 ** (attempt - 1)) * random.uniform(0.5, 1.0)


class TransportTimeout(Exception):
    """No complete reply within the timeout."""


class TransportConnectionError(Exception):
    """The request could not be sent or its reply could not be read."""


@dataclass(frozen=True)
class HTTPReply:
    status: int
    headers: Mapping[str, str]  # case-insensitive lookup (``.get("retry-after")``)
    body: Any  # the parsed JSON, or the text when the body is not JSON


def parse_body(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode("utf-8", "replace")


def env_proxy(url: str) -> str | None:
    """The proxy that ``HTTP_PROXY``/``HTTPS_PROXY``/``NO_PROXY`` (any case) choose for ``url``."""
    parts = urlsplit(url)
    if parts.hostname and proxy_bypass(parts.hostname):
        return None
    return getproxies().get(parts.scheme)


def connect_problem(url: str, timeout_s: float = 5.0) -> str | None:
    """Why no TCP connection to ``url``'s host (or to the proxy `env_proxy` picks for it) opens within
    ``timeout_s`` ("Connection refused", "Name or service not known", "timed out"), or None when one
    does. No request is sent: a run asks this once before its first query, instead of learning it from
    every agent's retries."""
    import socket

    proxy = env_proxy(url)
    target = urlsplit(proxy or url)
    port = target.port or (443 if target.scheme == "https" else 80)
    try:
        socket.create_connection((target.hostname, port), timeout=timeout_s).close()
        return None
    except OSError as e:
        why = e.strerror or str(e) or type(e).__name__
        return why + (f", through the proxy {proxy}" if proxy else "")


@dataclass(frozen=True)
class Route:
    """Where a backbone's chat completions go and how they authenticate. ``key`` is a secret: it
    is left out of ``repr`` and only ever placed in a request header."""

    provider: str  # "azure" routes by deployment and sends ``api-key``; others send a bearer token
    base_url: str  # OpenAI-style ``.../v1``; Azure: the resource endpoint
    key: str = field(repr=False)
    deployment: str = ""  # Azure only: the deployment name (``BackboneConfig.model``)
    api_version: str = ""  # Azure only
    path: str = CHAT_PATH  # the endpoint: chat completions, or EMBEDDINGS_PATH

    @property
    def url(self) -> str:
        base = self.base_url.rstrip("/")
        if self.provider == "azure":
            query = urlencode({"api-version": self.api_version})
            return f"{base}/openai/deployments/{self.deployment}{self.path}?{query}"
        return base + self.path

    def url_for(self, path: str) -> str:
        """The URL of another endpoint of the same account (the batch API's ``/files``, ``/batches``):
        ``<base>/v1<path>`` for OpenAI, ``<endpoint>/openai<path>?api-version=...`` for Azure."""
        base = self.base_url.rstrip("/")
        if self.provider == "azure":
            return f"{base}/openai{path}?{urlencode({'api-version': self.api_version})}"
        return base + path

    @property
    def batch_endpoint(self) -> str:
        """The endpoint a batch's lines name (``url``) and the batch is created for: OpenAI's
        ``/v1/chat/completions``, Azure's ``/chat/completions`` (its lines name the deployment as model)."""
        return CHAT_PATH if self.provider == "azure" else "/v1" + CHAT_PATH

    def headers(self) -> dict[str, str]:
        auth = {"api-key": self.key} if self.provider == "azure" else {"Authorization": f"Bearer {self.key}"}
        return {"Content-Type": "application/json", "Accept": "application/json", **auth}


class AiohttpTransport:
    def __init__(self, route: Route, timeout_s: float):
        import aiohttp

        self._aiohttp = aiohttp
        self._url, self._headers = route.url, route.headers()
        self._proxy = env_proxy(self._url)
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0),
            timeout=aiohttp.ClientTimeout(total=timeout_s),
            cookie_jar=aiohttp.DummyCookieJar(),  # API replies need no cookies; skip the jar's work
            # trust_env=True would re-read ~/.netrc in a worker thread on every request; the proxy
            # is looked up once instead (env_proxy)
            trust_env=False,
        )

    async def post(self, body: dict) -> HTTPReply:
        data = body.data if isinstance(body, EncodedBody) else json.dumps(body).encode()
        try:
            async with self._session.post(self._url, data=data, headers=self._headers,
                                          proxy=self._proxy) as resp:
                return HTTPReply(resp.status, resp.headers, parse_body(await resp.read()))
        except asyncio.TimeoutError as e:
            raise TransportTimeout(str(e) or "timed out") from e
        except self._aiohttp.ClientError as e:
            raise TransportConnectionError(f"{type(e).__name__}: {e}") from e

    async def aclose(self) -> None:
        await self._session.close()


class OpenAISDKTransport:
    def __init__(self, route: Route, timeout_s: float):
        import httpx
        import openai

        self._httpx, self._openai = httpx, openai
        self._path = route.path
        common = {"api_key": route.key, "max_retries": 0, "timeout": timeout_s,
                  # our own httpx client: the SDK's default one closes itself in __del__ on the
                  # *current* loop, which fails noisily for a pool left behind by an earlier loop
                  "http_client": openai.DefaultAsyncHttpxClient(timeout=timeout_s)}
        if route.provider == "azure":
            self._client = openai.AsyncAzureOpenAI(azure_endpoint=route.base_url,
                                                   api_version=route.api_version, **common)
        else:
            self._client = openai.AsyncOpenAI(base_url=route.base_url, **common)

    async def post(self, body: dict) -> HTTPReply:
        openai = self._openai
        try:
            # the low-level post with a plain dict body and a raw reply: the SDK's routing and
            # transport without its per-call request transform and pydantic parsing
            raw = await self._client.post(self._path, body=body, cast_to=self._httpx.Response)
            return HTTPReply(raw.status_code, raw.headers, parse_body(raw.content))
        except openai.APIStatusError as e:
            return HTTPReply(e.status_code, e.response.headers, parse_body(e.response.content))
        except openai.APITimeoutError as e:
            raise TransportTimeout(str(e)) from e
        except openai.APIConnectionError as e:
            raise TransportConnectionError(str(e)) from e

    async def aclose(self) -> None:
        await self._client.close()


TRANSPORTS = {"aiohttp": AiohttpTransport, "openai": OpenAISDKTransport}


def make_transport(route: Route, http: str, timeout_s: float):
    """A new transport of kind ``http`` (a key of ``TRANSPORTS``); call it inside the event loop
    that will use it."""
    if http not in TRANSPORTS:
        raise ValueError(f"unknown http transport {http!r}; valid: {list(TRANSPORTS)}")
    return TRANSPORTS[http](route, timeout_s)


def retry_after_s(headers: Mapping[str, str]) -> float | None:
    """Seconds asked for by ``retry-after-ms`` / ``Retry-After`` (seconds or HTTP date)."""
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    ra = headers.get("retry-after")
    if not ra:
        return None
    try:
        return max(0.0, float(ra))
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(ra)
            return max(0.0, when.timestamp() - time.time())
        except (TypeError, ValueError):
            return None
