"""The batch collector: a backbone's chat requests sent through the provider's batch API (OpenAI's and
Azure OpenAI's), one batch per step of all the agents of a run, at the batch price.

With ``BackboneConfig.batch`` on, `ark.llm.client.LLMClient.chat` answers from the LLM cache as always,
and hands every other request to its `BatchCollector` instead of posting it. The collector holds the
requests until every agent still running waits on one (the retriever tells it how many run: `register`,
`unregister`), then sends them all as one batch:

1. each distinct request (its LLM cache key is its ``custom_id``; agents asking the same request share
   its reply) is claimed in the LLM cache, as an online call is;
2. the spending cap reserves the batch's worst case at the batch price (`ark.cost.cap.Budget.reserve_usd`;
   `BudgetExhausted` for every request of a batch that does not fit: nothing is sent), a reservation
   held by the pending file, not by the process (`ark.cost.holder.file_mark`);
3. the requests are written as JSONL (``{"custom_id", "method": "POST", "url", "body"}``), uploaded
   (``POST /files``, purpose ``batch``) and the batch created (``POST /batches``, the chat completions
   endpoint, ``completion_window`` 24h); its id is written to ``<batch_dir>/pending.json`` before the wait;
4. the batch is polled (``GET /batches/{id}``, every ``batch_poll_s``, growing 1.5x per look up to 20x),
   its status and counts logged; once it has ended its output (and error) file is downloaded
   (``GET /files/{id}/content``) and each line becomes the `ChatResponse` an online call makes (priced at
   the batch price), or the error an online call raises (`LLMTransportError`, `ContextLengthError`):
   the agent then ends that trajectory, as online;
5. each reply goes into the LLM cache, the reservation is settled with what the replies cost
   (`ark.cost.ledger.Ledger.settle_each`), ``pending.json`` is removed, and the agents go on.

A run killed while it waits leaves ``pending.json`` behind, and its reservation open (held while the file
exists). The same command run again re-attaches before it sends anything: it polls the stored batch
instead of paying again, downloads it, caches its replies and settles the reservation; the requests it
asks then come from the cache. A stored batch that expired, failed or was cancelled is reported, its
replies that came back are kept, and the requests without one are sent again in a new batch.

    client = LLMClient(BackboneConfig(name="gpt-4.1", model="gpt-4.1", provider="openai", batch=True),
                       cache="data/cache/llm.sqlite", budget=budget, batch_dir=run_dir / "batch")
    client.batch.register(3)                       # three agents start (ark.agent.ARKRetriever does this)
    resp = await client.chat(messages, tools)      # waits for the step's batch
    client.batch.unregister()                      # an agent ended
    client.batch.batches                           # batches sent (created) by this process
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ark import atomic
from ark.cost.cap import worst_case_usd
from ark.cost.holder import file_mark
from ark.llm.transport import (RETRYABLE_STATUS, HTTPReply, env_proxy, error_message, parse_body, retry_after_s,
                               retry_delay_s)

log = logging.getLogger(__name__)

PENDING = "pending.json"   # in the batch directory: the batch being waited for (ark.run.rundir.BATCH_DIR);
                           # a step too large for one batch sends several: pending-1.json, pending-2.json, ...
MAX_LINES = 50_000         # requests one batch may hold (OpenAI's limit)
MAX_BYTES = 190 * 2**20    # bytes of one batch's input file (OpenAI's limit: 200 MB)
SETTLE_S = 0.01            # a last look for agents about to ask before a batch is sent
CLAIM_WAIT_S = 0.05        # how often requests another process is buying are looked for in the cache
POLL_GROWTH, POLL_MAX = 1.5, 20   # the wait between looks grows by this factor, up to this many batch_poll_s
DONE = ("completed", "expired", "cancelled", "failed")   # a batch's final statuses


@dataclass
class _Request:
    body: Any                                     # the chat request (ark.llm.transport.EncodedBody)
    waiters: list = field(default_factory=list)   # futures of the chat() calls that asked it


class BatchCollector:
    """Collects one client's requests into batches (module doc)."""

    def __init__(self, client, directory: str | Path | None = None):
        self.client = client
        self.directory = Path(directory) if directory is not None else None
        self.live = 0                  # agents running (register/unregister)
        self.batches = 0               # batches created by this process
        self.attached = 0              # stored batches re-attached to
        self._pending: dict[str, _Request] = {}
        self._flushing: asyncio.Task | None = None

    # -- agents ---------------------------------------------------------------------------------
    def register(self, n: int = 1) -> None:
        """``n`` agents start: a batch waits for their requests too."""
        self.live += n

    def unregister(self, n: int = 1) -> None:
        """``n`` agents ended: the batch no longer waits for them."""
        self.live = max(0, self.live - n)
        self._maybe_flush()

    async def ask(self, key: str, body: Any):
        """The reply to the chat request ``body`` (named ``key``), once its batch has come back."""
        fut = asyncio.get_running_loop().create_future()
        req = self._pending.setdefault(key, _Request(body))
        req.waiters.append(fut)
        self._maybe_flush()
        try:
            return await fut
        except asyncio.CancelledError:   # the agent was cancelled: a request nobody waits for is not sent
            if fut in req.waiters:
                req.waiters.remove(fut)
            if not req.waiters and self._pending.get(key) is req:
                del self._pending[key]
            raise

    def _waiting(self) -> int:
        return sum(len(r.waiters) for r in self._pending.values())

    def _maybe_flush(self) -> None:
        if self._flushing is None and self._pending and self._waiting() >= self.live:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                return
            self._flushing = loop.create_task(self._flush())

    async def _flush(self) -> None:
        batch: dict[str, _Request] = {}
        try:
            await asyncio.sleep(SETTLE_S)
            if self._waiting() < self.live:   # an agent is still working: its request will flush
                return
            batch, self._pending = self._pending, {}
            results = await self._send(batch)
            for key, req in batch.items():
                if key in results:
                    _resolve(req.waiters, results[key])
                else:   # bought by another process at this moment: asked again
                    self._pending.setdefault(key, _Request(req.body)).waiters.extend(req.waiters)
            if all(k in self._pending for k in batch):
                await asyncio.sleep(CLAIM_WAIT_S)
        except BaseException as e:   # noqa: BLE001 - every request of the batch gets the error (the cap's too)
            for req in batch.values():
                _resolve(req.waiters, e if isinstance(e, Exception) else self.client._failure(f"batch stopped: {e!r}"))
            if not isinstance(e, Exception):
                raise
        finally:
            self._flushing = None
            self._maybe_flush()

    # -- one batch ------------------------------------------------------------------------------
    async def _send(self, batch: dict[str, _Request]) -> dict[str, Any]:
        """{key: ChatResponse or exception} for the requests of ``batch`` this process could buy or find."""
        import aiohttp

        results: dict[str, Any] = {}
        t = self.client.config.timeout_s   # per connection and read: a large output file takes longer in all
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None, sock_connect=t, sock_read=t),
                                         trust_env=False) as session:
            api = _BatchAPI(session, self.client)
            for path, stored in self._stored():   # batches a killed run was waiting for: finished, not paid again
                done = await self._reattach(api, path, stored)
                results.update({k: v for k, v in done.items() if k in batch})
            cache = self.client.cache
            todo: dict[str, _Request] = {}
            for key, req in batch.items():
                if key in results:
                    continue
                hit = cache.get(key) if cache is not None else None
                if hit is None and (cache is None or cache.claim(key)):
                    todo[key] = req
                elif hit is not None or (hit := cache.get(key)) is not None:
                    results[key] = self.client._from_cache(hit)
            if todo:
                chunks = _chunks(todo)
                names = [PENDING] + [PENDING.replace(".json", f"-{i}.json") for i in range(1, len(chunks))]
                outcomes = await asyncio.gather(*(self._submit(api, chunk, name) for chunk, name in zip(chunks, names)),
                                                return_exceptions=True)
                for chunk, done in zip(chunks, outcomes):
                    if isinstance(done, Exception):   # that batch's requests get its error (the cap's, say)
                        results.update(dict.fromkeys(chunk, done))
                    elif isinstance(done, BaseException):
                        raise done
                    else:
                        results.update(done)
        return results

    def _stored(self) -> list[tuple[Path, dict]]:
        """The pending files a killed run left, read (an unreadable one set aside)."""
        if self.directory is None or not self.directory.is_dir():
            return []
        out = []
        for path in sorted(self.directory.glob("pending*.json")):
            try:
                out.append((path, json.loads(path.read_text())))
            except ValueError:
                log.warning("%s is not readable JSON; it is set aside", path)
                path.replace(path.with_name(path.name + ".bad"))
        return out

    async def _reattach(self, api: "_BatchAPI", path: Path, stored: dict) -> dict[str, Any]:
        """Finish the batch ``stored`` describes (a killed run's): its replies cached, its reservation
        settled, the file removed. Returns {key: reply} for the requests it answered."""
        budget = self.client.budget
        ticket = budget.adopt(stored.get("worst_usd", 0.0), stored.get("holds", [])) \
            if budget is not None and stored.get("holds") else None
        if not stored.get("batch_id"):   # killed before the batch was made
            if stored.get("input_file_id"):
                log.warning("a batch of %d requests may have been created just before this run was killed; "
                            "its reservation is kept as paid at its worst case and its requests are sent again",
                            len(stored.get("custom_ids", [])))
                if ticket is not None:
                    budget.settle_lost(ticket)
            elif ticket is not None:
                budget.settle_each(ticket, [])
            path.unlink(missing_ok=True)
            return {}
        self.attached += 1
        log.warning("re-attaching to batch %s of %d requests, submitted by an earlier attempt of this run "
                    "(not paid again)", stored["batch_id"], len(stored.get("custom_ids", [])))
        try:
            results, status = await self._collect(api, stored["batch_id"], stored.get("created", time.time()))
        except Exception as e:   # noqa: BLE001 - only a batch the provider does not know is dropped
            if getattr(e, "status_code", None) != 404:
                raise
            log.warning("batch %s is unknown to %s (%s): its reservation is kept as paid at its worst case and "
                        "its requests are sent again", stored["batch_id"], api.route.base_url, e)
            if ticket is not None:
                budget.settle_lost(ticket)
            path.unlink(missing_ok=True)
            return {}
        replies = {k: v for k, v in results.items() if not isinstance(v, Exception)}
        self._keep(replies)
        if ticket is not None:
            budget.settle_each(ticket, list(replies.values()))
        path.unlink(missing_ok=True)
        missing = [k for k in stored.get("custom_ids", []) if k not in results]
        if status != "completed":   # expired, cancelled, failed: what came back is kept, the rest sent again
            log.warning("batch %s ended %s: %d of its requests came back; the other %d are sent again",
                        stored["batch_id"], status, len(replies), len(missing) + len(results) - len(replies))
            return replies
        return results

    async def _submit(self, api: "_BatchAPI", todo: dict[str, _Request], name: str = PENDING) -> dict[str, Any]:
        """One new batch of the claimed requests ``todo``: reserved, sent, waited for, cached, paid; its
        pending file is ``name`` in the batch directory."""
        client, cache, budget = self.client, self.client.cache, self.client.budget
        keys = list(todo)
        worst = sum(worst_case_usd(client.price, [], None, client.config.max_tokens, chars=r.body.prompt_chars)
                    for r in todo.values())
        pending = self.directory / name if self.directory is not None else None
        record: dict[str, Any] = {"custom_ids": keys, "worst_usd": worst, "created": time.time(),
                                  "batch_id": None, "input_file_id": None, "holds": []}
        ticket = None
        try:
            if pending is not None:   # first: the reservation is held by this file
                pending.parent.mkdir(parents=True, exist_ok=True)
                atomic.write_json(pending, record)
            if budget is not None:
                ticket = await budget.reserve_usd(worst, by=file_mark(pending) if pending is not None else None)
                record["holds"] = [[str(Path(ledger.path).resolve()), hid] for ledger, hid in ticket.holds]
                if pending is not None:
                    atomic.write_json(pending, record)
            endpoint = api.route.batch_endpoint
            lines = b"".join(b'{"custom_id": ' + json.dumps(k).encode() + b', "method": "POST", "url": '
                             + json.dumps(endpoint).encode() + b', "body": ' + todo[k].body.data + b"}\n"
                             for k in keys)
            record["input_file_id"] = await api.upload(lines)
            if pending is not None:
                atomic.write_json(pending, record)
            record["batch_id"] = await api.create(record["input_file_id"], endpoint, client.config.batch_window)
            self.batches += 1
            if pending is not None:
                atomic.write_json(pending, record)
            log.info("batch %s: %d requests sent (worst case $%.4f at the batch price); waiting up to %s",
                     record["batch_id"], len(keys), worst, client.config.batch_window)
        except BaseException:
            for k in keys:
                if cache is not None:
                    cache.release(k)
            if ticket is not None:
                budget.settle_each(ticket, [])
            if pending is not None:
                pending.unlink(missing_ok=True)
            raise
        try:
            results, status = await self._collect(api, record["batch_id"], record["created"])
        except BaseException:
            for k in keys:   # the batch stays pending (pending.json): a rerun re-attaches to it
                if cache is not None:
                    cache.release(k)
            raise
        replies = {k: v for k, v in results.items() if not isinstance(v, Exception)}
        self._keep(replies)
        for k in keys:
            if k not in replies and cache is not None:
                cache.release(k)
            if k not in results:
                results[k] = client._failure(f"batch {record['batch_id']} ended {status} without this "
                                             "request's reply")
        if ticket is not None:
            budget.settle_each(ticket, list(replies.values()))
        if pending is not None:
            pending.unlink(missing_ok=True)
        return results

    def _keep(self, replies: dict) -> None:
        if self.client.cache is not None:
            for k, resp in replies.items():
                self.client.cache.put(k, resp.to_json(), model=self.client.config.model)

    async def _collect(self, api: "_BatchAPI", batch_id: str, created: float) -> tuple[dict[str, Any], str]:
        """Wait for the batch to end; its lines as {custom_id: ChatResponse or error}, and its status (with
        the provider's reasons when it did not complete)."""
        c = self.client.config
        delay = c.batch_poll_s
        while True:
            b = await api.get(f"/batches/{batch_id}")
            status = str(b.get("status"))
            counts = b.get("request_counts") or {}
            log.info("batch %s: %s (%s of %s done, %s failed)", batch_id, status, counts.get("completed", "?"),
                     counts.get("total", "?"), counts.get("failed", "?"))
            if status in DONE:
                break
            await asyncio.sleep(delay)
            delay = min(delay * POLL_GROWTH, c.batch_poll_s * POLL_MAX)
        latency = max(0.0, time.time() - float(created))
        results: dict[str, Any] = {}
        for file_key in ("output_file_id", "error_file_id"):
            if b.get(file_key):
                for raw in (await api.content(b[file_key])).splitlines():
                    if raw.strip():
                        self._line(json.loads(raw), latency, results)
        if status != "completed":
            errors = (b.get("errors") or {}).get("data") or []
            why = "; ".join(str(e.get("message", e)) for e in errors[:3])
            status += f" ({why})" if why else ""
        return results, status

    def _line(self, line: dict, latency: float, results: dict[str, Any]) -> None:
        response = line.get("response") or {}
        body = response.get("body")
        if body is None:   # no reply at all: the line's error says why (expired, ...)
            body = {"error": line.get("error") or {"message": "no reply"}}
        results[line.get("custom_id")] = self.client._line_reply(int(response.get("status_code") or 0), body, latency)


def _chunks(todo: dict[str, _Request]) -> list[dict[str, _Request]]:
    """``todo`` cut into batches within `MAX_LINES` lines and `MAX_BYTES` bytes each."""
    out: list[dict[str, _Request]] = [{}]
    size = 0
    for key, req in todo.items():
        n = len(req.body.data) + 200   # the line around the body
        if out[-1] and (len(out[-1]) >= MAX_LINES or size + n > MAX_BYTES):
            out.append({})
            size = 0
        out[-1][key] = req
        size += n
    return out


def _resolve(waiters: list, result: Any) -> None:
    """Every waiter gets the result (its own copy of a reply) or the error."""
    for i, fut in enumerate(waiters):
        if fut.done():
            continue
        if isinstance(result, BaseException):
            fut.set_exception(result)
        else:
            fut.set_result(result if i == 0 else type(result).from_json(result.to_json()))


class _BatchAPI:
    """The files and batches endpoints of the backbone's account, with the client's retries."""

    def __init__(self, session, client):
        self.session, self.client, self.config = session, client, client.config
        self.route = client._route

    async def upload(self, jsonl: bytes) -> str:
        import aiohttp

        def form():
            f = aiohttp.FormData()
            f.add_field("purpose", "batch")
            f.add_field("file", jsonl, filename="ark-batch.jsonl", content_type="application/jsonl")
            return f

        return str((await self._call("POST", "/files", form=form))["id"])

    async def create(self, input_file_id: str, endpoint: str, window: str) -> str:
        body = {"input_file_id": input_file_id, "endpoint": endpoint, "completion_window": window}
        return str((await self._call("POST", "/batches", json_body=body))["id"])

    async def get(self, path: str) -> dict:
        return await self._call("GET", path)

    async def content(self, file_id: str) -> bytes:
        return await self._call("GET", f"/files/{file_id}/content", raw=True)

    async def _call(self, method: str, path: str, json_body: Any = None, form=None, raw: bool = False) -> Any:
        import aiohttp

        c = self.config
        url = self.route.url_for(path)
        headers = {k: v for k, v in self.route.headers().items() if k != "Content-Type"}
        for attempt in range(1, c.max_retries + 2):
            wait = None
            try:
                async with self.session.request(method, url, headers=headers, json=json_body,
                                                data=form() if form is not None else None,
                                                proxy=env_proxy(url)) as resp:
                    data = await resp.read()
                    if 200 <= resp.status < 300:
                        return data if raw else parse_body(data)
                    reply = HTTPReply(resp.status, resp.headers, parse_body(data))
                    reason = f"HTTP {resp.status}: {error_message(reply)}"
                    if resp.status not in RETRYABLE_STATUS:
                        raise self.client._failure(f"{method} {path}: {reason}", resp.status)
                    wait = retry_after_s(resp.headers)
            except (aiohttp.ClientError, asyncio.TimeoutError) as e:
                reason = f"{type(e).__name__}: {e}"
            if attempt > c.max_retries:
                raise self.client._failure(f"{method} {path}: {reason} (gave up after {attempt} attempts)")
            delay = retry_delay_s(attempt, c.backoff_base_s, c.backoff_max_s, wait)
            log.warning("%s: %s %s: %s; retry %d/%d in %.2fs", c.name, method, path, reason, attempt,
                        c.max_retries, delay)
            await asyncio.sleep(delay)
        raise AssertionError("unreachable")
