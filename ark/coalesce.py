"""Writes that the tasks of one event loop ask for in the same turn of the loop, done as one.

A `Coalescer` wraps a function that writes many items at once (``write_all(items) -> results``, one per
item, in order). A task awaits ``submit(item)``; the first submit of a turn schedules one flush for the
end of that turn (``loop.call_soon``), which hands every item submitted meanwhile to ``write_all`` in one
call and wakes each task with its own result, or with the exception ``write_all`` raised. When hundreds
of LLM replies arrive together, their ledger lines and cache rows are written in a handful of locked
appends and transactions instead of one each: what every caller is promised (its write is done when its
await returns) is unchanged, only the cost is shared.

A task cancelled while it waits: a write that takes something for the task (a reservation, a claim)
names its ``undo(item, result)``; such an item is left out of the flush, or, when it was written before the task could
take the result, undone. Writes without ``undo`` (a settlement, a stored reply) are made all the same.

    stores = Coalescer(cache.put_many)          # write_all: a list of items -> a list of results
    await stores.submit((key, reply, model))    # in a task; written when it returns
    done = stores.enqueue((key, reply, model))  # the same, awaited later (or with other writes)
    stores.now((key, reply, model))             # outside a loop: written at once, alone
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any


class Coalescer:
    """Items submitted in one turn of an event loop, written by one call of ``write_all`` (module doc)."""

    def __init__(self, write_all: Callable[[list[Any]], list[Any]], undo: Callable[[Any, Any], None] | None = None):
        self.write_all, self.undo = write_all, undo
        self._pending: dict[asyncio.AbstractEventLoop, list[tuple[Any, asyncio.Future]]] = {}
        self._lock = threading.Lock()   # loops of several threads may share one coalescer
        self.flushes = 0                 # calls of write_all so far (for benchmarks and tests)

    def enqueue(self, item: Any) -> asyncio.Future:
        """``item`` to be written at the end of this turn of the running loop; the future of its result.
        For writes without ``undo``: the item is written even when the future is cancelled."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        with self._lock:
            batch = self._pending.get(loop)
            if batch is None:
                batch = self._pending[loop] = []
                loop.call_soon(self._flush, loop)
            batch.append((item, future))
        return future

    async def submit(self, item: Any) -> Any:
        """``item`` written with the others of this turn; its result (or ``write_all``'s exception)."""
        future = self.enqueue(item)
        try:
            return await future
        except asyncio.CancelledError:
            if self.undo is not None and future.done() and not future.cancelled() and future.exception() is None:
                self.undo(item, future.result())   # written for a task that is gone before it could take it
            raise

    def now(self, item: Any) -> Any:
        """``item`` written at once, alone."""
        self.flushes += 1
        return self.write_all([item])[0]

    def _flush(self, loop: asyncio.AbstractEventLoop) -> None:
        with self._lock:
            batch = self._pending.pop(loop, [])
        # a cancelled task's reservation or claim is not taken; its settlement or reply is written all the same
        live = [(item, f) for item, f in batch if self.undo is None or not f.cancelled()]
        if not live:
            return
        self.flushes += 1
        try:
            results = self.write_all([item for item, _ in live])
        except BaseException as e:   # every caller of this turn learns that its write failed
            for _, f in live:
                if not f.done():
                    f.set_exception(e)
            return
        for (_, f), result in zip(live, results):
            if not f.done():
                f.set_result(result)
