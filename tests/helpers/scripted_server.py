"""Scripted OpenAI-compatible chat server on 127.0.0.1 — for tests and benchmarks only.

It stands in for a paid API: it answers ``POST .../chat/completions`` (any path ending that way, so
OpenAI ``/v1/...`` and Azure ``/openai/deployments/<d>/...?api-version=...`` both work) and
``GET .../models``, with replies you script in advance. Stdlib only (``ThreadingHTTPServer``,
HTTP/1.1 keep-alive, listen backlog 256), so 64+ concurrent clients are fine.

Quick use::

    from tests.helpers.scripted_server import ScriptedServer, tool_reply, text_reply, rate_limited

    with ScriptedServer([
        tool_reply(("search_graph", {"query": "aspirin", "k": 5})),  # 1st request
        rate_limited(retry_after=0.3),                               # 2nd request: 429 + Retry-After
        tool_reply(("select", {"ids": [3, 1]}), ("finish", {})),      # 3rd: two tool calls in one reply
    ]) as server:
        cfg = BackboneConfig(provider="vllm", base_url=server.base_url, model="scripted")
        ...
        assert server.calls == 3                  # HTTP requests received (errors included)
        server.requests[0]["tools"]               # JSON bodies, in arrival order
        server.request_times, server.request_paths, server.request_headers   # same order

Two ways to choose the reply for a request (combine freely; first match wins):

1. ``conversations={key: [reply_step0, reply_step1, ...]}`` — per-conversation scripts for many
   concurrent conversations. The key of a request is ``key_fn(request_json)``; by default the
   content of the FIRST ``user`` message (the question). The step is the number of ``assistant``
   messages already in the request, so the lookup is stateless: n agents asking the same question
   each walk the same script independently, and a retried request gets the same reply again.
   A step past the end of the script repeats the last reply.
2. the sequential ``script`` (a list given to the constructor, extended with ``push``): each
   request not answered by (1) takes the next reply, in arrival order (use it for error sequences:
   429 → success, 500 storms, timeouts).

``responder=callable(request_json) -> Reply | None`` runs before both for full control.
With no reply left, the server answers HTTP 400 ``"scripted server: no reply scripted for
request #n"`` (not retryable, so a test with a short script fails fast and loudly).

Reply builders (all return a ``Reply``):

- ``tool_reply(("name", {args} | "raw json string"), ..., content=None)`` — assistant message with
  tool calls (``finish_reason="tool_calls"``). Raw strings are passed through unchanged (use them
  for malformed arguments).
- ``text_reply("...")`` — plain assistant content, no tool calls.
- ``rate_limited(retry_after=1.0)`` — HTTP 429 with a ``Retry-After`` header (seconds).
- ``server_error(status=500)`` — HTTP 5xx with an OpenAI-style error body.
- ``context_length_error()`` — HTTP 400 with OpenAI's ``context_length_exceeded`` body.
- ``slow(reply, seconds)`` / ``Reply(delay_s=...)`` — wait before answering (client timeouts).
- ``malformed(kind)`` — HTTP 200 whose body is not a chat completion (``MALFORMED`` lists the kinds:
  a string for the message, no choices, text instead of JSON, a tool call that is not an object,
  finish_reason "tool_calls" without any).
- ``nameless_tool_call()`` — HTTP 200, a chat completion with a tool call that names no function (the
  model's mistake: answered by the agent, not retried).
- ``dropped()`` — the connection is closed without any reply.

Fault injection: ``ScriptedServer(faults=FaultPlan(rate=0.1, seed=0))`` answers a seeded random share
of requests with a fault (429 + Retry-After, 5xx, a hang past the client's timeout, a malformed body,
a context-length error, a dropped connection) instead of their reply. ``server.outcomes[i]`` says
what request i got ("ok", or the fault's kind; "error" for other scripted non-200 replies), so a test
can count the successful replies it would have paid for. ``log_path=`` also appends one JSON line per
request ({"n", "t" (time.time()), "outcome", "request" (SHA-256 of the request body), "tokens" (what it
counted against ``tpm_limit``)}) to a file, for a server run in a process of its own.

``ScriptedServer(answer_model="gpt-4.1-2025-04-14")`` names that model in every reply, as a provider
names the snapshot an alias points to (default: the model the request asked for).
``ScriptedServer(latency_s=0.2)`` adds a fixed latency to every response (the agent benchmark).
``ScriptedServer(capacity=k)`` answers at most ``k`` chat requests at once, like a model server whose
batch is full; the others wait their turn (their latency starts when a slot frees), so the server's
throughput is at most ``k / latency_s`` replies per second (the replica benchmark).
``server.max_in_flight`` is the most chat requests the server held at once (concurrency is asserted
on it, never on wall time); ``ScriptedServer(gate=n)`` holds every chat request until ``n`` have
been in flight together once (a client that never sends ``n`` at once waits out ``gate_timeout_s``
and then shows a lower ``max_in_flight``), so a concurrency test does not depend on scheduling luck.

Embeddings: ``POST .../embeddings`` answers OpenAI's embeddings format (``encoding_format`` "float" or
"base64", ``dimensions`` honoured) with ``embedder(text) -> list[float]``, by default `hashed_embedding`
(a normalised bag of hashed words, ``embedding_dim`` wide: texts sharing words get close vectors).
Requests land in ``server.embedding_requests``; ``push_embedding_errors(reply, ...)`` makes the next
embedding requests fail with those (error) replies first (retries, 429s).
Every ``Reply`` may set ``prompt_tokens``/``completion_tokens`` (usage reported back); `with_usage`
sets them from the request and the reply as a tokenizer would count them (`token_count`: words and
punctuation marks), so a prompt grows with the observations a conversation has gathered.

Prompt caching: ``ScriptedServer(prompt_cache=True)`` reports ``usage.prompt_tokens_details.cached_tokens``
by OpenAI's documented rule: a prompt of 1,024 tokens or more (`ark.cost.prices.CACHE_MIN_TOKENS`) has
cached its longest prefix, in steps of 128 tokens (`CACHE_STEP_TOKENS`), that an earlier chat request
sent token for token. The prompt is what a provider renders from the bytes the client sends: the tool
schemas, then each message (4 tokens of chat format before it, as `prompt_tokens` counts), each as the
JSON the request holds, cut into `token_count`'s tokens with the whitespace before each kept, so two
prefixes match only where their bytes do (`prompt_token_list`; its length is `prompt_tokens`). A reply
reports at most its own ``prompt_tokens``. ``server.usages`` lists the usage of every successful chat
reply it sent, so a test can compute the bill a provider would send.

Batch API: ``POST .../files`` (multipart/form-data, ``purpose`` and ``file``: a file object back),
``GET .../files/{id}/content``, ``POST .../batches`` (``input_file_id``, ``endpoint``, ``completion_window``)
and ``GET .../batches/{id}``, at OpenAI's paths (``/v1/...``) and Azure's (``/openai/...?api-version=``).
A batch is ``validating``, then ``in_progress`` until ``batch_delay_s`` after its creation, then
``completed``: at that first look after the delay each of its lines is answered once, by the same rules
as an online request (it is counted in ``calls``, ``requests`` and ``usages`` like one), 200s into its
output file and the others into its error file, as OpenAI's batch output lines
(``{"id", "custom_id", "response": {"status_code", "request_id", "body"}, "error"}``); later looks (a
client that re-attached) bill nothing again. ``server.batches`` holds each batch object by id,
``server.batch_lines`` the lines answered in batches; ``server.expire_batches = n`` makes the next ``n``
batches end ``expired`` with only the first half of their lines answered (the others in the error file,
``batch_expired``, not billed); ``server.batch_paths`` each files or batches request
(``"POST /v1/files"``...).

Rate limits: ``ScriptedServer(rpm_limit=..., tpm_limit=...)`` enforces requests and tokens per minute
over a sliding 60-second window, counting each request as OpenAI does (one request; its prompt tokens,
by `token_count`, plus its ``max_tokens``), and answers a request past a limit with HTTP 429 and a
``Retry-After`` of the seconds until it would fit (outcome "rate_limited"). ``server.request_tokens``
lists what each chat request was counted (0 for the ones refused).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import random
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterable

__all__ = [
    "FAULT_KINDS",
    "FaultPlan",
    "MALFORMED",
    "PromptCache",
    "Reply",
    "hashed_embedding",
    "ScriptedServer",
    "context_length_error",
    "dropped",
    "malformed",
    "nameless_tool_call",
    "first_user_message",
    "rate_limited",
    "server_error",
    "slow",
    "text_reply",
    "tool_reply",
    "prompt_token_list",
    "token_count",
    "with_usage",
]

CONTEXT_LENGTH_MESSAGE = (
    "This model's maximum context length is 128000 tokens. However, your messages resulted in "
    "131072 tokens. Please reduce the length of the messages."
)


@dataclass
class Reply:
    """One scripted HTTP answer."""

    status: int = 200
    content: str | None = None  # assistant content (status 200)
    tool_calls: list[tuple[str, str]] = field(default_factory=list)  # (name, raw JSON arguments)
    headers: dict[str, str] = field(default_factory=dict)  # extra response headers
    error_body: dict | None = None  # JSON body for status != 200
    delay_s: float = 0.0  # wait before answering (on top of the server's latency_s)
    prompt_tokens: int = 10
    completion_tokens: int = 5
    body: Any = None  # status 200: sent instead of a chat completion (bytes as they are, else as JSON)
    drop: bool = False  # close the connection without replying
    kind: str = ""  # what the server log calls this reply ("" : "ok" for 200, "error" otherwise)


def tool_reply(*calls: tuple[str, dict | str], content: str | None = None, **kw: Any) -> Reply:
    """A reply whose assistant message calls ``calls`` = ``(name, arguments)`` in order."""
    parsed = [(n, a if isinstance(a, str) else json.dumps(a)) for n, a in calls]
    return Reply(content=content, tool_calls=parsed, **kw)


def text_reply(content: str, **kw: Any) -> Reply:
    """A reply with plain content and no tool call."""
    return Reply(content=content, **kw)


def rate_limited(retry_after: float = 1.0) -> Reply:
    """HTTP 429 with ``Retry-After: <seconds>``."""
    return Reply(
        status=429,
        headers={"Retry-After": f"{retry_after:g}"},
        error_body={"error": {"message": "Rate limit reached (scripted)", "type": "requests",
                              "param": None, "code": "rate_limit_exceeded"}},
    )


def server_error(status: int = 500) -> Reply:
    """HTTP 5xx with an OpenAI-style error body."""
    return Reply(
        status=status,
        error_body={"error": {"message": "The server had an error (scripted)",
                              "type": "server_error", "param": None, "code": None}},
    )


def context_length_error() -> Reply:
    """HTTP 400 exactly as OpenAI reports a prompt over the context window."""
    return Reply(
        status=400,
        error_body={"error": {"message": CONTEXT_LENGTH_MESSAGE, "type": "invalid_request_error",
                              "param": "messages", "code": "context_length_exceeded"}},
    )


MALFORMED = {  # kind -> a 200 body that is not a chat completion
    "string_message": {"choices": [{"index": 0, "message": "select 1", "finish_reason": "stop"}]},
    "no_choices": {"id": "x", "object": "chat.completion", "choices": []},
    "not_json": b"<html>502 Bad Gateway</html>",
    "tool_call_not_an_object": {"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
        "role": "assistant", "content": None, "tool_calls": ["search_graph"]}}]},
    "tool_calls_without_calls": {"choices": [{"index": 0, "finish_reason": "tool_calls",
                                              "message": {"role": "assistant", "content": None}}]},
}


def malformed(kind: str = "string_message") -> Reply:
    """HTTP 200 with a body of the given ``MALFORMED`` kind."""
    return Reply(body=MALFORMED[kind], kind="malformed")


def nameless_tool_call(arguments: str = "{}") -> Reply:
    """HTTP 200, a chat completion whose one tool call has no function name: the model's mistake (the
    client hands it to the agent), not a malformed body."""
    return Reply(body={"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
        "role": "assistant", "content": None,
        "tool_calls": [{"id": "c", "type": "function", "function": {"arguments": arguments}}]}}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5}})


def dropped() -> Reply:
    """Close the connection without answering."""
    return Reply(drop=True, kind="drop")


def slow(reply: Reply, seconds: float) -> Reply:
    """``reply``, answered after ``seconds`` (use a longer delay than the client timeout)."""
    reply.delay_s = seconds
    return reply


FAULT_KINDS = ("rate_limit", "server_error", "hang", "malformed", "context_length", "drop")


class FaultPlan:
    """A seeded random fault for a ``rate`` share of requests (drawn in arrival order)."""

    def __init__(self, rate: float = 0.1, seed: int = 0, kinds: Iterable[str] = FAULT_KINDS,
                 retry_after_s: float = 0.05, hang_s: float = 2.0):
        self.rate, self.kinds = rate, tuple(kinds)
        unknown = set(self.kinds) - set(FAULT_KINDS)
        if unknown:
            raise ValueError(f"unknown fault kinds {sorted(unknown)}; valid: {FAULT_KINDS}")
        self.retry_after_s, self.hang_s = retry_after_s, hang_s
        self._rng = random.Random(seed)
        self._lock = threading.Lock()

    def draw(self) -> Reply | None:
        with self._lock:
            hit, kind = self._rng.random() < self.rate, self._rng.choice(self.kinds)
            bad_body = self._rng.choice(sorted(MALFORMED))
        if not hit:
            return None
        reply = {"rate_limit": lambda: rate_limited(self.retry_after_s),
                 "server_error": lambda: server_error(503),
                 "hang": lambda: slow(tool_reply(("finish", {})), self.hang_s),
                 "malformed": lambda: malformed(bad_body),
                 "context_length": context_length_error,
                 "drop": dropped}[kind]()
        reply.kind = kind
        return reply


def hashed_embedding(text: str, dim: int = 64) -> list[float]:
    """A deterministic toy embedding: lower-cased words hashed (md5) into ``dim`` buckets, L2-normalised."""
    import hashlib
    import math
    import re

    v = [0.0] * dim
    for w in re.findall(r"\w+", text.lower()):
        h = int.from_bytes(hashlib.md5(w.encode()).digest()[:4], "little")
        v[h % dim] += 1.0 if (h >> 16) & 1 else -1.0
    n = math.sqrt(sum(x * x for x in v)) or 1.0
    return [x / n for x in v]


_TOKEN = None


def token_count(obj: Any) -> int:
    """Tokens of a text (or of the JSON of anything else) as a tokenizer would roughly count them: one
    per word and one per punctuation mark."""
    import re

    global _TOKEN
    if _TOKEN is None:
        _TOKEN = re.compile(r"\w+|[^\w\s]")
    text = obj if isinstance(obj, str) else json.dumps(obj, ensure_ascii=False)
    return len(_TOKEN.findall(text))


def prompt_tokens(request: dict) -> int:
    """A chat request's prompt tokens: its messages (4 more per message, as chat formats add) and tools."""
    msgs = request.get("messages", [])
    return token_count(msgs) + 4 * len(msgs) + (token_count(request["tools"]) if request.get("tools") else 0)


def prompt_token_list(request: dict) -> list[str]:
    """A chat request's prompt as a provider's cache sees it: the tool schemas, then each message (4
    chat-format tokens before it), as the JSON the request holds, cut into `token_count`'s tokens with the
    whitespace before each kept. Its length is `prompt_tokens` (see the module doc)."""
    piece = re.compile(r"\s*(?:\w+|[^\w\s])")
    out: list[str] = []
    if request.get("tools"):
        out += piece.findall(json.dumps(request["tools"], ensure_ascii=False))
    msgs = request.get("messages", [])
    for i, m in enumerate(msgs):   # json.dumps(msgs) is "[" + ", ".join(each message) + "]"
        out += ["<|msg|>"] * 4 + (["["] if i == 0 else [", "]) + piece.findall(json.dumps(m, ensure_ascii=False))
    if msgs:
        out.append("]")
    return out


class PromptCache:
    """The prefixes a provider's prompt cache holds, and how many tokens of a prompt it serves (see the
    module doc): every prefix of a multiple of ``step`` tokens of every prompt seen, as a SHA-256."""

    def __init__(self, min_tokens: int | None = None, step: int | None = None):
        from ark.cost.prices import CACHE_MIN_TOKENS, CACHE_STEP_TOKENS

        self.min_tokens = CACHE_MIN_TOKENS if min_tokens is None else min_tokens
        self.step = CACHE_STEP_TOKENS if step is None else step
        self._seen: set[bytes] = set()

    def serve(self, tokens: list[str]) -> int:
        """The cached tokens of ``tokens`` (before it is remembered), then remember its prefixes."""
        h = hashlib.sha256()
        cached, digests, matching = 0, [], True
        for k in range(self.step, len(tokens) + 1, self.step):
            for t in tokens[k - self.step:k]:
                h.update(t.encode() + b"\x00")
            d = h.digest()
            digests.append(d)
            matching = matching and d in self._seen   # a longer prefix matches only if every shorter one does
            if matching:
                cached = k
        self._seen.update(digests)
        return cached if len(tokens) >= self.min_tokens and cached >= self.min_tokens else 0


def with_usage(request: dict, reply: Reply) -> Reply:
    """``reply`` reporting the usage a real model would: the request's prompt tokens (`prompt_tokens`)
    and its own tool calls and content as completion tokens."""
    reply.prompt_tokens = prompt_tokens(request)
    reply.completion_tokens = 3 + token_count(reply.content or "") + sum(
        token_count(name) + token_count(args) + 4 for name, args in reply.tool_calls)
    return reply


def first_user_message(request: dict) -> str | None:
    """Default conversation key: the content of the first ``user`` message."""
    for m in request.get("messages", []):
        if m.get("role") == "user":
            c = m.get("content")
            return c if isinstance(c, str) else json.dumps(c, sort_keys=True)
    return None


def shown_ids(observation: str) -> list[int | str]:
    """The node ids an observation shows at the start of its node lines (``[3] ...``, ``[P4] ...``), as a
    model copies them into its next call: integers as numbers, the graph's own string ids as strings."""
    return [int(x) if re.fullmatch(r"\d+", x) else x for x in re.findall(r"^\[([^\]\n]+)\] ", observation, re.M)]


class ScriptedServer:
    """Threaded loopback server replaying scripted chat-completion replies (see module doc)."""

    def __init__(
        self,
        script: Iterable[Reply] = (),
        *,
        conversations: dict[str, list[Reply]] | None = None,
        key_fn: Callable[[dict], str | None] = first_user_message,
        responder: Callable[[dict], Reply | None] | None = None,
        faults: FaultPlan | None = None,
        log_path: str | None = None,
        latency_s: float = 0.0,
        capacity: int | None = None,
        gate: int | None = None,
        gate_timeout_s: float = 30.0,
        host: str = "127.0.0.1",
        port: int = 0,
        embedder: Callable[[str], list[float]] | None = None,
        embedding_dim: int = 64,
        rpm_limit: float | None = None,
        tpm_limit: float | None = None,
        answer_model: str | None = None,
        prompt_cache: bool = False,
        batch_delay_s: float = 0.0,
        models: Iterable[str] = ("scripted",),
    ):
        self._script: list[Reply] = list(script)
        self.models = list(models)   # what GET /models lists (a local backbone reuses a server of its model)
        self._pos = 0
        self.conversations: dict[str, list[Reply]] = dict(conversations or {})
        self.key_fn = key_fn
        self.responder = responder
        self.faults = faults
        self.log_path = log_path
        self.latency_s = latency_s
        self._slots = threading.BoundedSemaphore(capacity) if capacity else None
        self.outcomes: list[str] = []  # per request, arrival order: "ok" or what went wrong
        self.requests: list[dict] = []  # JSON bodies of chat requests, arrival order
        self.request_times: list[float] = []  # time.monotonic() at arrival, same order
        self.request_headers: list[dict[str, str]] = []  # lower-case names
        self.request_paths: list[str] = []  # URL path + query, same order
        self.calls = 0  # chat requests received (all statuses)
        self.rpm_limit, self.tpm_limit = rpm_limit, tpm_limit
        self.answer_model = answer_model  # the ``model`` replies name (default: the one asked for)
        self.prompt_cache = PromptCache() if prompt_cache else None   # reports cached_tokens when set
        self.usages: list[dict] = []  # the usage of every successful chat reply sent, in sending order
        self.request_tokens: list[int] = []  # what each chat request counted against tpm_limit (0: refused)
        self._window: list[tuple[float, int]] = []  # (arrival, tokens) of the requests of the last minute
        self.in_flight = 0  # chat requests received and not yet answered
        self.max_in_flight = 0  # the most chat requests held at once
        self.gate, self.gate_timeout_s = gate, gate_timeout_s
        self.embedder = embedder or (lambda text: hashed_embedding(text, embedding_dim))
        self.embedding_requests: list[dict] = []  # JSON bodies of embeddings requests, arrival order
        self._embedding_errors: list[Reply] = []
        self.batch_delay_s = batch_delay_s
        self.files: dict[str, bytes] = {}      # uploaded and produced files by id
        self.batches: dict[str, dict] = {}     # batch objects by id
        self.batch_lines = 0                   # batch lines answered (each once)
        self.batch_paths: list[str] = []       # "METHOD path?query" of each files or batches request
        self.expire_batches = 0                # the next this many batches expire with half their lines done
        self._batch_started: dict[str, float] = {}
        self._lock = threading.Lock()
        self._flight = threading.Condition()
        self._stop = threading.Event()
        self._ids = itertools.count(1)
        self._httpd = _Server((host, port), _make_handler(self))
        self._thread: threading.Thread | None = None

    # -- lifecycle -----------------------------------------------------------------------------
    @property
    def port(self) -> int:
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        """OpenAI-style base URL, e.g. ``http://127.0.0.1:5321/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def root_url(self) -> str:
        """Server root without ``/v1`` (for an Azure endpoint)."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "ScriptedServer":
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True,
                                        kwargs={"poll_interval": 0.05})
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()  # wakes handlers sleeping in a delay
        with self._flight:
            self._flight.notify_all()  # and those held at the gate
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> "ScriptedServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- concurrency accounting ------------------------------------------------------------------
    def _enter(self) -> None:
        with self._flight:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self._flight.notify_all()
            if self.gate is not None:
                self._flight.wait_for(lambda: self.max_in_flight >= self.gate or self._stop.is_set(),
                                      timeout=self.gate_timeout_s)

    def _leave(self) -> None:
        with self._flight:
            self.in_flight -= 1

    # -- scripting -----------------------------------------------------------------------------
    def push(self, *replies: Reply) -> None:
        """Append replies to the sequential script."""
        with self._lock:
            self._script.extend(replies)

    def push_embedding_errors(self, *replies: Reply) -> None:
        """The next embeddings requests get these (error) replies, in order, before any vectors."""
        with self._lock:
            self._embedding_errors.extend(replies)

    def _answer_embeddings(self, request: dict) -> tuple[int, dict[str, str], dict, float]:
        import base64
        import struct

        with self._lock:
            self.embedding_requests.append(request)
            err = self._embedding_errors.pop(0) if self._embedding_errors else None
        if err is not None:
            body = err.error_body or {"error": {"message": f"scripted HTTP {err.status}"}}
            return err.status, dict(err.headers), body, self.latency_s + err.delay_s
        inputs = request.get("input")
        inputs = [inputs] if isinstance(inputs, str) else list(inputs or [])
        dims = request.get("dimensions")
        data = []
        for i, text in enumerate(inputs):
            v = list(self.embedder(text))
            if dims:
                v = v[:dims]
            emb: Any = v
            if request.get("encoding_format") == "base64":
                emb = base64.b64encode(struct.pack(f"<{len(v)}f", *v)).decode()
            data.append({"object": "embedding", "index": i, "embedding": emb})
        tokens = sum(len(t.split()) for t in inputs)
        body = {"object": "list", "data": data, "model": request.get("model", "scripted"),
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}
        return 200, {}, body, self.latency_s

    @property
    def remaining(self) -> int:
        """Sequential replies not yet used."""
        with self._lock:
            return len(self._script) - self._pos

    def _choose(self, request: dict) -> Reply | None:
        if self.faults is not None:
            fault = self.faults.draw()
            if fault is not None:
                return fault
        if self.responder is not None:
            r = self.responder(request)
            if r is not None:
                return r
        if self.conversations:
            key = self.key_fn(request)
            steps = self.conversations.get(key) if key is not None else None
            if steps:
                step = sum(1 for m in request.get("messages", []) if m.get("role") == "assistant")
                return steps[min(step, len(steps) - 1)]
        with self._lock:
            if self._pos < len(self._script):
                self._pos += 1
                return self._script[self._pos - 1]
        return None

    def _over_limit(self, request: dict, n: int) -> Reply | None:
        """A 429 for request ``n`` when it does not fit the rate limits of the last minute, else None
        (the request is then counted)."""
        if self.rpm_limit is None and self.tpm_limit is None:
            return None
        tokens = prompt_tokens(request) + int(request.get("max_tokens") or 0)
        with self._lock:
            now = time.monotonic()
            self._window = [(t, k) for t, k in self._window if t > now - 60.0]
            wait = 0.0
            if self.rpm_limit is not None and len(self._window) + 1 > self.rpm_limit:
                wait = max(wait, self._window[0][0] + 60.0 - now)
            if self.tpm_limit is not None:
                excess = sum(k for _, k in self._window) + tokens - self.tpm_limit
                if excess > 0:
                    freed = 0
                    for t, k in self._window:   # the time until enough of the window has expired
                        freed += k
                        if freed >= excess:
                            wait = max(wait, t + 60.0 - now)
                            break
                    else:
                        wait = 60.0
            if wait > 0:
                reply = rate_limited(retry_after=round(wait + 0.05, 2))
                reply.kind = "rate_limited"
                return reply
            self._window.append((now, tokens))
            self.request_tokens[n - 1] = tokens
        return None

    # -- batch API -----------------------------------------------------------------------------
    def _upload(self, content_type: str, raw: bytes) -> tuple[int, dict]:
        from email.parser import BytesParser
        from email.policy import HTTP

        msg = BytesParser(policy=HTTP).parsebytes(b"Content-Type: " + content_type.encode() + b"\r\n\r\n" + raw)
        if not msg.is_multipart():
            return 400, {"error": {"message": "upload a file as multipart/form-data"}}
        parts = {p.get_param("name", header="content-disposition"): p for p in msg.iter_parts()}
        if "file" not in parts or parts.get("purpose") is None:
            return 400, {"error": {"message": "a file upload needs the fields purpose and file"}}
        purpose = parts["purpose"].get_payload(decode=True).decode()
        data = parts["file"].get_payload(decode=True)
        with self._lock:
            fid = f"file-{next(self._ids)}"
            self.files[fid] = data
        return 200, {"id": fid, "object": "file", "bytes": len(data), "created_at": int(time.time()),
                     "filename": parts["file"].get_filename(), "purpose": purpose}

    def _create_batch(self, request: dict) -> tuple[int, dict]:
        fid = request.get("input_file_id")
        if fid not in self.files:
            return 404, {"error": {"message": f"no file {fid!r}"}}
        endpoint = str(request.get("endpoint", ""))
        if request.get("completion_window") != "24h" or not endpoint.endswith("/chat/completions"):
            return 400, {"error": {"message": "endpoint must be chat completions and completion_window 24h"}}
        lines = [json.loads(x) for x in self.files[fid].splitlines() if x.strip()]
        with self._lock:
            bid = f"batch_{next(self._ids)}"
            self.batches[bid] = {"id": bid, "object": "batch", "endpoint": request["endpoint"], "errors": None,
                                 "input_file_id": fid, "completion_window": "24h", "status": "validating",
                                 "output_file_id": None, "error_file_id": None, "created_at": int(time.time()),
                                 "request_counts": {"total": len(lines), "completed": 0, "failed": 0}}
            self._batch_started[bid] = time.monotonic()
            return 200, dict(self.batches[bid])

    def _look_at_batch(self, bid: str) -> tuple[int, dict]:
        with self._lock:
            b = self.batches.get(bid)
            if b is None:
                return 404, {"error": {"message": f"no batch {bid!r}"}}
            age = time.monotonic() - self._batch_started[bid]
            if b["status"] in ("completed", "expired", "finalizing"):
                return 200, dict(b)
            if age < self.batch_delay_s:
                b["status"] = "validating" if age < self.batch_delay_s / 2 else "in_progress"
                return 200, dict(b)
            b["status"] = "finalizing"   # answered once, here, by whichever look comes first
            lines = [json.loads(x) for x in self.files[b["input_file_id"]].splitlines() if x.strip()]
            expire = self.expire_batches > 0
            self.expire_batches -= expire
        out, errors = [], []
        done = lines[:len(lines) // 2] if expire else lines
        for i, line in enumerate(lines[len(done):]):   # not reached before the window ended: not billed
            errors.append(json.dumps({"id": f"batch_req_{bid}_x{i}", "custom_id": line["custom_id"], "response": None,
                                      "error": {"code": "batch_expired", "message": "This request could not be "
                                                "executed before the completion window expired."}}))
        for i, line in enumerate(done):
            status, _headers, body, _delay = self._answer(line["body"], {}, line.get("url", ""))
            entry = {"id": f"batch_req_{bid}_{i}", "custom_id": line["custom_id"],
                     "response": {"status_code": status or 500, "request_id": f"req_{bid}_{i}", "body": body},
                     "error": None}
            (out if status == 200 else errors).append(json.dumps(entry))
        with self._lock:
            self.batch_lines += len(done)
            for kind, rows in (("output_file_id", out), ("error_file_id", errors)):
                if rows:
                    fid = f"file-{next(self._ids)}"
                    self.files[fid] = ("\n".join(rows) + "\n").encode()
                    b[kind] = fid
            b["status"] = "expired" if expire else "completed"
            b["request_counts"] = {"total": len(lines), "completed": len(out), "failed": len(errors)}
            return 200, dict(b)

    def _answer(self, request: dict, headers: dict[str, str],
                path: str) -> tuple[int, dict[str, str], Any, float]:
        with self._lock:
            self.request_paths.append(path)
            self.calls += 1
            n = self.calls
            self.requests.append(request)
            self.request_times.append(time.monotonic())
            self.request_headers.append(headers)
            self.outcomes.append("")
            self.request_tokens.append(0)
        limited = self._over_limit(request, n)
        reply = limited or self._choose(request)
        if reply is None:
            self.outcomes[n - 1] = "error"
            body = {"error": {"message": f"scripted server: no reply scripted for request #{n}",
                              "type": "invalid_request_error", "param": None, "code": None}}
            return 400, {}, body, self.latency_s
        self.outcomes[n - 1] = reply.kind or ("ok" if reply.status == 200 else "error")
        if self.log_path:
            digest = hashlib.sha256(json.dumps(request, sort_keys=True).encode()).hexdigest()
            line = json.dumps({"n": n, "t": time.time(), "outcome": self.outcomes[n - 1], "request": digest,
                               "tokens": self.request_tokens[n - 1]})
            with self._lock, open(self.log_path, "a", encoding="utf-8") as f:
                f.write(line + "\n")
        delay = self.latency_s + reply.delay_s
        if reply.drop:
            return 0, {}, None, delay
        if reply.status != 200:
            body = reply.error_body or {"error": {"message": f"scripted HTTP {reply.status}"}}
            return reply.status, dict(reply.headers), body, delay
        if reply.body is not None:
            return 200, dict(reply.headers), reply.body, delay
        calls = [
            {"id": f"call_{next(self._ids)}", "type": "function",
             "function": {"name": name, "arguments": args}}
            for name, args in reply.tool_calls
        ]
        message: dict[str, Any] = {"role": "assistant", "content": reply.content}
        if calls:
            message["tool_calls"] = calls
        body = {
            "id": f"chatcmpl-scripted-{n}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.answer_model or request.get("model", "scripted"),
            "choices": [{"index": 0, "message": message,
                         "finish_reason": "tool_calls" if calls else "stop"}],
            "usage": {"prompt_tokens": reply.prompt_tokens,
                      "completion_tokens": reply.completion_tokens,
                      "total_tokens": reply.prompt_tokens + reply.completion_tokens},
        }
        with self._lock:
            if self.prompt_cache is not None:
                cached = min(self.prompt_cache.serve(prompt_token_list(request)), reply.prompt_tokens)
                body["usage"]["prompt_tokens_details"] = {"cached_tokens": cached}
            self.usages.append(body["usage"])
        return 200, dict(reply.headers), body, delay


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256
    allow_reuse_address = True


def _make_handler(server: ScriptedServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # else Nagle + delayed ACK add ~40 ms per reply

        def log_message(self, *args: object) -> None:  # keep test output clean
            pass

        def _send(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True  # client gave up (timeout test)

        def do_GET(self) -> None:
            route = self.path.split("?")[0].rstrip("/")
            parts = route.split("/")
            if route.endswith("/models"):
                self._send(200, {"object": "list", "data": [{"id": m, "object": "model"} for m in server.models]})
            elif len(parts) >= 3 and parts[-3] == "files" and parts[-1] == "content":
                server.batch_paths.append(f"GET {self.path}")
                data = server.files.get(parts[-2])
                self._send(200, data) if data is not None else self._send(404, {"error": {"message": "no file"}})
            elif len(parts) >= 2 and parts[-2] == "batches":
                server.batch_paths.append(f"GET {self.path}")
                self._send(*server._look_at_batch(parts[-1]))
            else:
                self._send(404, {"error": {"message": f"no route {self.path}"}})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            route = self.path.split("?")[0].rstrip("/")
            if route.endswith(("/files", "/batches")):
                server.batch_paths.append(f"POST {self.path}")
            if route.endswith("/files"):
                self._send(*server._upload(self.headers.get("Content-Type", ""), raw))
                return
            if route.endswith("/batches"):
                try:
                    self._send(*server._create_batch(json.loads(raw or b"{}")))
                except json.JSONDecodeError as e:
                    self._send(400, {"error": {"message": f"bad JSON: {e}"}})
                return
            if not route.endswith(("/chat/completions", "/embeddings")):
                self._send(404, {"error": {"message": f"no route {self.path}"}})
                return
            try:
                request = json.loads(raw or b"{}")
            except json.JSONDecodeError as e:
                self._send(400, {"error": {"message": f"bad JSON: {e}"}})
                return
            if route.endswith("/embeddings"):  # not gated: the gate counts chat requests
                status, headers, body, delay = server._answer_embeddings(request)
                if delay > 0 and server._stop.wait(delay):
                    self.close_connection = True
                    return
                self._send(status, body, headers)
                return
            server._enter()
            try:
                self._answer_post(request)
            finally:
                server._leave()

        def _answer_post(self, request: dict) -> None:
            if server._slots is None:
                self._answer_now(request)
                return
            with server._slots:   # capacity: wait for a free slot, then take the full latency
                self._answer_now(request)

        def _answer_now(self, request: dict) -> None:
            status, headers, body, delay = server._answer(request, {k.lower(): v for k, v in self.headers.items()}, self.path)
            if delay > 0 and server._stop.wait(delay):
                self.close_connection = True
                return
            if status == 0:  # dropped: close without a word
                self.close_connection = True
                return
            self._send(status, body, headers)

    return Handler
