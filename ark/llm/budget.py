"""The spending cap of paid runs (`Budget`) and the ledgers it counts in (`Ledger`).

A `Ledger` is an append-only file of what was paid: one JSON line per LLM reply that was not answered
from the cache (``{"t", "usd", "prompt", "completion", "run"}``). Several processes may write one at
once (a parallel sweep's points share their sweep's ledger): each line is appended whole under an
exclusive ``flock``, a torn last line left by a kill is cut off before the next append, and `total`
reads only the lines appended since its last call. A run keeps its own ledger in its directory
(`RUN_LEDGER`), so what it paid over every attempt is known on the next one; a sweep keeps one for all
its points (`ark.config.sweep`).

A `Budget` is what the LLM client (`ark.llm.client.LLMClient`) consults before each call that the
cache cannot answer. With a cap (``max_cost_usd``) a call starts only when the spend so far in the
capped ledger (the run's, or the sweep's), plus the worst case of the calls in flight in this process
and of the call itself (its prompt estimated from its characters, its whole ``max_tokens``), stays
within the cap. A call that would fit once calls in flight have finished waits for them; one that
would not fit even then raises `BudgetExhausted`, and the budget stays exhausted, so no new call
starts: the cap is reached. Calls in flight finish, and their replies are paid, cached and kept. Other processes'
calls in flight are not seen: a parallel sweep can pass its cap by the calls its other points have in
flight at that moment. Without a cap a budget only records what is paid.

`BudgetExhausted` is an `ark.llm.client.LLMTransportError`, so the agent ends that trajectory as it
does for a failed call; the runner (`ark.eval.spend`) does not record a query cut short this way, stops
starting queries, and ends the run ``incomplete`` with the stop reason ``budget``. Rerunning with a
higher cap resumes: the run's ledger remembers what was paid, and the cache answers every call already
made, so no reply is paid twice.

    budget = Budget(cap_usd=5.0, run=Ledger(run_dir / RUN_LEDGER), label="prime/ark-gpt-4.1-t20_n3-full")
    ticket = await budget.reserve(client.price, messages, tools, max_tokens=1024)   # BudgetExhausted at the cap
    budget.settle(ticket, response)                                         # into the ledgers
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ark.llm.client import LLMTransportError
from ark.llm.pacing import CHARS_PER_TOKEN

RUN_LEDGER = "spend.jsonl"   # a run directory's own ledger
BUDGET_STOP = "BudgetExhausted"   # how a trajectory cut by the cap names its error
WAIT_S = 0.05   # how often a call that does not fit yet looks again while calls are in flight


class BudgetExhausted(LLMTransportError):
    """A call was refused: it would pass the spending cap (``max_cost_usd``)."""


def stopped_by_budget(error: str | None) -> bool:
    """Whether a trajectory's error says the spending cap refused its call."""
    return bool(error) and error.startswith(BUDGET_STOP)


class Ledger:
    """An append-only file of payments, shared safely by processes (see the module doc)."""

    def __init__(self, path: Path | str):
        self.path = Path(path)
        self._offset = 0
        self._usd = 0.0
        self._calls = 0
        self._lock = threading.Lock()

    def add(self, usd: float, prompt: int = 0, completion: int = 0, run: str = "") -> None:
        """Append one payment."""
        line = json.dumps({"t": round(time.time(), 3), "usd": usd, "prompt": prompt, "completion": completion,
                           "run": run}) + "\n"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":   # a line torn by a kill: cut it off
                data = os.pread(fd, size, 0)
                os.ftruncate(fd, data.rfind(b"\n") + 1)
            os.write(fd, line.encode())
        finally:
            os.close(fd)   # releases the flock

    def _read(self) -> None:
        try:
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                data = f.read()
        except FileNotFoundError:
            return
        if self._offset and not data and self.path.stat().st_size < self._offset:   # cut: read again
            self._offset, self._usd, self._calls = 0, 0.0, 0
            return self._read()
        end = data.rfind(b"\n") + 1   # whole lines only: the last one may still be being written
        for raw in data[:end].splitlines():
            try:
                self._usd += float(json.loads(raw)["usd"])
                self._calls += 1
            except (ValueError, KeyError, TypeError):
                continue   # a line torn by a kill and cut later
        self._offset += end

    def total(self) -> float:
        """US$ paid so far, every writer included."""
        with self._lock:
            self._read()
            return self._usd

    def calls(self) -> int:
        """Payments (LLM replies) recorded so far."""
        with self._lock:
            self._read()
            return self._calls


@dataclass
class Ticket:
    worst_usd: float


def worst_case_usd(price: Any, messages: list[dict], tools: list[dict] | None, max_tokens: int) -> float:
    """The most one chat call can cost: its prompt at `ark.llm.pacing.CHARS_PER_TOKEN` characters per
    token, its whole ``max_tokens`` completion."""
    chars = len(json.dumps(messages, ensure_ascii=False)) + (len(json.dumps(tools, ensure_ascii=False)) if tools else 0)
    return (chars / CHARS_PER_TOKEN * price.input_per_m + max_tokens * price.output_per_m) / 1e6


class Budget:
    """The cap one run (or one sweep) spends under, and the ledgers its payments go to."""

    def __init__(self, cap_usd: float | None = None, run: Ledger | None = None, sweep: Ledger | None = None,
                 label: str = ""):
        if cap_usd is not None and cap_usd < 0:
            raise ValueError(f"max_cost_usd must be >= 0 or null, got {cap_usd}")
        self.cap_usd, self.run, self.sweep, self.label = cap_usd, run, sweep, label
        self.capped = sweep if sweep is not None else run   # a sweep's cap counts every point's spend
        self.exhausted = False
        self.reserved = 0.0
        self.paid = 0.0          # paid by this process
        self.refused = 0         # calls refused at the cap
        self._lock = threading.Lock()
        self.run_paid_before = run.total() if run is not None else 0.0

    def spent(self) -> float:
        """What the capped ledger holds (the run's spend over its attempts, or the sweep's)."""
        return self.capped.total() if self.capped is not None else self.paid

    def why(self) -> str:
        whose = "the sweep's" if self.sweep is not None else "this run's"
        return (f"the spending cap max_cost_usd={self.cap_usd:.2f} is reached ({whose} spend: "
                f"${self.spent():.2f}); no new LLM call starts. Rerun with a higher max_cost_usd to go on "
                "(the LLM cache answers every call already paid for)")

    async def reserve(self, price: Any, messages: list[dict], tools: list[dict] | None, max_tokens: int) -> Ticket:
        """Room for one call: at once when its worst case fits under the cap beside the calls in flight,
        after some of them have finished when it would fit without them, else `BudgetExhausted` (and the
        budget stays exhausted: no call starts after it)."""
        worst = worst_case_usd(price, messages, tools, max_tokens)
        while True:
            with self._lock:
                if self.cap_usd is None:
                    self.reserved += worst
                    return Ticket(worst)
                fits = not self.exhausted and self.spent() + self.reserved + worst <= self.cap_usd
                if fits:
                    self.reserved += worst
                    return Ticket(worst)
                if self.exhausted or self.reserved <= 1e-12:   # nothing in flight here would free room
                    self.exhausted = True
                    self.refused += 1
                    raise BudgetExhausted(self.why())
            await asyncio.sleep(WAIT_S)

    def settle(self, ticket: Ticket, response: Any | None) -> None:
        """Release a reservation; a reply (not from the cache) goes to the ledgers at its cost."""
        paid = response is not None and not getattr(response, "cached", False)
        with self._lock:
            self.reserved -= ticket.worst_usd
            if paid:
                self.paid += response.cost_usd
        if paid:
            for ledger in (self.run, self.sweep):
                if ledger is not None:
                    ledger.add(response.cost_usd, response.prompt_tokens, response.completion_tokens, self.label)
