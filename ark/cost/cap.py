"""The spending cap of paid runs: `Budget`, which counts in the ledgers of `ark.cost.ledger`.

A `Budget` is what the LLM client (`ark.llm.client.LLMClient`) consults before each call that the
cache cannot answer. With a cap (``max_cost_usd``) a call starts only when the spend so far in the
capped ledger (the run's, or the sweep's), plus the worst case of the calls in flight in this process
and of the call itself (its prompt estimated from its characters, its whole ``max_tokens``), stays
within the cap. A call that would fit once calls in flight have finished waits for them; one that
would not fit even then raises `BudgetExhausted`, and the budget stays exhausted, so no new call
starts: the cap is reached. Calls in flight finish, and their replies are paid, cached and kept. Other processes'
calls in flight are not seen: a parallel sweep can pass its cap by the calls its other points have in
flight at that moment. Without a cap a budget only records what is paid.

The agent ends a trajectory whose call raised `BudgetExhausted` as it does one whose call failed
(`ark.agent`); the runner (`ark.run.spending`) does not record a query cut short this way, stops
starting queries, and ends the run ``incomplete`` with the stop reason ``budget``. Rerunning with a
higher cap resumes: the run's ledger remembers what was paid, and the cache answers every call already
made, so no reply is paid twice.

    budget = Budget(cap_usd=5.0, run=Ledger(run_dir / RUN_LEDGER), label="prime/ark-gpt-4.1-t20_n3-full")
    ticket = await budget.reserve(client.price, messages, tools, max_tokens=1024)   # BudgetExhausted at the cap
    budget.settle(ticket, response)                                         # into the ledgers
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass
from typing import Any

from ark.cost.ledger import Ledger
from ark.cost.tokens import CHARS_PER_TOKEN, prompt_chars

BUDGET_STOP = "BudgetExhausted"   # how a trajectory cut by the cap names its error
WAIT_S = 0.05   # how often a call that does not fit yet looks again while calls are in flight


class BudgetExhausted(RuntimeError):
    """A call was refused: it would pass the spending cap (``max_cost_usd``)."""


def stopped_by_budget(error: str | None) -> bool:
    """Whether a trajectory's error says the spending cap refused its call."""
    return bool(error) and error.startswith(BUDGET_STOP)


@dataclass
class Ticket:
    worst_usd: float


def worst_case_usd(price: Any, messages: list[dict], tools: list[dict] | None, max_tokens: int) -> float:
    """The most one chat call can cost: its prompt at `ark.cost.tokens.CHARS_PER_TOKEN` characters per
    token, its whole ``max_tokens`` completion."""
    chars = prompt_chars(messages, tools)
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
                    ledger.add(response.cost_usd, response.prompt_tokens, response.completion_tokens, self.label,
                               cached=getattr(response, "cached_tokens", 0))
