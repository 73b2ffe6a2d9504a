"""The spending cap of paid runs: `Budget`, which counts in the ledgers of `ark.cost.ledger`.

A `Budget` is what the LLM client (`ark.llm.client.LLMClient`) consults before each call that the
cache cannot answer. Every such call is reserved in the run's ledger (and its sweep's) before it is sent,
at its worst case (its prompt estimated from its characters, its whole ``max_tokens``), and settled
after at what it cost (`ark.cost.ledger`): every process of a sweep sees the others' calls in flight,
and a process killed with calls in flight leaves their reservations behind, counted as paid at their
worst case by the next run (`Ledger.reconcile`, at the budget's start and whenever room runs out).
With a cap (``max_cost_usd``) a call starts only when the capped ledger's spend (the run's, or the
sweep's) plus the worst case of every call in flight, any process's, and of the call itself stays within
the cap; the check and the reservation are one step under the ledger's lock. A call that would fit once
calls in flight have finished waits for them; one that would not fit even then raises
`BudgetExhausted`, and the budget stays exhausted, so no new call starts: the cap is reached. Calls in
flight finish, and their replies are paid, cached and kept. Without a cap a budget reserves and records
what is paid the same way.

The calls that one turn of the event loop starts are reserved together, in one locked append per ledger
(`Ledger.hold_many`, `ark.coalesce`), each before its request is sent; the replies that one turn receives
are settled together the same way (`settle_soon`). Hundreds of calls ending at once cost a few appends,
not hundreds, and each caller still goes on only once its own line is written.

The agent ends a trajectory whose call raised `BudgetExhausted` as it does one whose call failed
(`ark.agent`); the runner (`ark.run.spending`) does not record a query cut short this way, stops
starting queries, and ends the run ``incomplete`` with the stop reason ``budget``. Rerunning with a
higher cap resumes: the run's ledger remembers what was paid, and the cache answers every call already
made, so no reply is paid twice.

    budget = Budget(cap_usd=5.0, run=Ledger(run_dir / RUN_LEDGER), label="prime/ark-gpt-4.1-t20_n3-full")
    ticket = await budget.reserve(client.price, messages, tools, max_tokens=1024)   # BudgetExhausted at the cap
    await budget.settle_soon(ticket, response)                              # into the ledgers

A batch (`ark.llm.batch`) is reserved whole, its worst case in one reservation held by its pending file
(`reserve_usd` with ``by``), and settled with each of its replies (`settle_each`); a run that re-attaches
to a batch a killed process submitted settles that process's reservation (`adopt`).
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field
from collections.abc import Callable
from typing import Any

from ark.coalesce import Coalescer
from ark.cost.ledger import Ledger
from ark.cost.prices import money
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
    holds: list = field(default_factory=list)   # (ledger, reservation id) to settle


def worst_case_usd(price: Any, messages: list[dict], tools: list[dict] | None, max_tokens: int,
                   chars: int | None = None) -> float:
    """The most one chat call can cost: its prompt at `ark.cost.tokens.CHARS_PER_TOKEN` characters per
    token, its whole ``max_tokens`` completion. ``chars``: the prompt's characters
    (`ark.cost.tokens.prompt_chars`) when the caller has counted them already (its encoded body)."""
    if chars is None:
        chars = prompt_chars(messages, tools)
    return (chars / CHARS_PER_TOKEN * price.input_per_m + max_tokens * price.output_per_m) / 1e6


class Budget:
    """The cap one run (or one sweep) spends under, and the ledgers its payments go to."""

    def __init__(self, cap_usd: float | None = None, run: Ledger | None = None, sweep: Ledger | None = None,
                 label: str = "", guard: Callable[[], bool] | None = None):
        if cap_usd is not None and cap_usd < 0:
            raise ValueError(f"max_cost_usd must be >= 0 or null, got {cap_usd}")
        self.cap_usd, self.run, self.sweep, self.label = cap_usd, run, sweep, label
        self.guard = guard   # asked before each call: True when this process must spend no more
        self.capped = sweep if sweep is not None else run   # a sweep's cap counts every point's spend
        self.ledgers = [x for x in (sweep, run) if x is not None]   # the capped one first
        self.exhausted = False
        self.reserved = 0.0
        self.paid = 0.0          # paid by this process
        self.refused = 0         # calls refused at the cap
        self._lock = threading.Lock()
        # the calls of one turn of the event loop are reserved, and settled, in one append per ledger
        self._holds = Coalescer(self._hold_all, undo=self._release)
        self._settles = Coalescer(self._settle_all)
        for ledger in self.ledgers:   # calls a killed attempt left in flight: paid at their worst case
            ledger.reconcile()
        self.run_paid_before = run.total() if run is not None else 0.0

    def spent(self) -> float:
        """What the capped ledger holds as paid (the run's spend over its attempts, or the sweep's)."""
        return self.capped.total() if self.capped is not None else self.paid

    def why(self) -> str:
        whose = "the sweep's" if self.sweep is not None else "this run's"
        return (f"the spending cap max_cost_usd={money(self.cap_usd)} is reached ({whose} spend: "
                f"${money(self.spent())}); no new LLM call starts. Rerun with a higher max_cost_usd to go on "
                "(the LLM cache answers every call already paid for)")

    def _hold_all(self, asks: list[tuple[float, str | None]]) -> list[Ticket | None]:
        """Reservations for the calls ``(worst case, holder)`` in every ledger, one locked append per
        ledger, the capped one checked against the cap; None for a call that does not fit there (or when
        the budget is exhausted)."""
        with self._lock:
            if self.exhausted:
                return [None] * len(asks)
            if self.capped is None:
                out = []
                for worst, _ in asks:
                    fits = self.cap_usd is None or self.paid + self.reserved + worst <= self.cap_usd
                    self.reserved += worst if fits else 0.0
                    out.append(Ticket(worst) if fits else None)
                return out
            by = [b for _, b in asks]
            first = self.capped.hold_many([w for w, _ in asks], self.label, self.cap_usd, by)
            took = [i for i, hid in enumerate(first) if hid is not None]
            tickets: list[Ticket | None] = [None] * len(asks)
            for i in took:
                tickets[i] = Ticket(asks[i][0], [(self.capped, first[i])])
            for ledger in self.ledgers[1:]:
                for i, hid in zip(took, ledger.hold_many([asks[i][0] for i in took], self.label, by=[by[i] for i in took])):
                    tickets[i].holds.append((ledger, hid))
            self.reserved += sum(asks[i][0] for i in took)
            return tickets

    def _release(self, ask: tuple[float, str | None], ticket: Ticket | None) -> None:
        """Undo a reservation its caller never took (its task was cancelled): settled as failed."""
        if ticket is not None:
            self.settle(ticket, None)

    def _could_fit(self, worst: float) -> bool:
        """Whether a call whose worst case is ``worst`` fits under the cap once every call in flight has
        finished (at no cost). What is paid only grows, so a call for which this is False never fits; the
        answer does not depend on which calls happen to be in flight when it is asked (one may have been
        paid between a refused reservation and this question). Reservations dead processes left are
        settled as paid at their worst case on the way."""
        if self.capped is None:
            return self.paid + worst <= self.cap_usd + 1e-12
        self.capped.reconcile()
        return self.capped.total() + worst <= self.cap_usd + 1e-12

    async def reserve(self, price: Any, messages: list[dict], tools: list[dict] | None, max_tokens: int,
                      chars: int | None = None) -> Ticket:
        """Room for one call: at once when its worst case fits under the cap beside the calls in flight,
        after some of them have finished when it would fit without them, else `BudgetExhausted` (and the
        budget stays exhausted: no call starts after it). ``chars``: as in `worst_case_usd`."""
        return await self.reserve_usd(worst_case_usd(price, messages, tools, max_tokens, chars))

    async def reserve_usd(self, worst: float, by: str | None = None) -> Ticket:
        """Room for calls whose worst case is ``worst`` US$ in all (a batch's), as `reserve`; ``by``: who
        holds the reservation (`ark.cost.holder`; default this process)."""
        if self.guard is not None and self.guard():
            raise BudgetExhausted("this process may spend no more: the sweep that started it has ended")
        while True:
            with self._lock:
                if self.exhausted:
                    self.refused += 1
                    raise BudgetExhausted(self.why())
            ticket = await self._holds.submit((worst, by))   # with the other calls of this turn of the loop
            if ticket is not None:
                return ticket
            with self._lock:
                if not self.exhausted and not self._could_fit(worst):
                    self.exhausted = True
                if self.exhausted:
                    self.refused += 1
                    raise BudgetExhausted(self.why())
            await asyncio.sleep(WAIT_S)

    def settle(self, ticket: Ticket, response: Any | None) -> None:
        """Close a reservation: a reply (not from the cache) goes to the ledgers at its cost, a call that
        failed at nothing."""
        self._settles.now((ticket, response))

    def settle_soon(self, ticket: Ticket, response: Any | None) -> asyncio.Future:
        """`settle` at the end of this turn of the event loop, with the turn's other settlements (one append
        per ledger); the future is done once it is written, and it is written even if no one awaits it."""
        return self._settles.enqueue((ticket, response))

    def _settle_all(self, done: list[tuple[Ticket, Any | None]]) -> list[None]:
        """Settlements of several calls, one locked append per ledger."""
        lines: dict[int, tuple[Ledger, list[dict]]] = {}
        paid_each = [response is not None and not getattr(response, "cached", False) for _, response in done]
        with self._lock:
            self.reserved -= sum(ticket.worst_usd for ticket, _ in done)
            self.paid += sum(response.cost_usd for (_, response), paid in zip(done, paid_each) if paid)
        for (ticket, response), paid in zip(done, paid_each):
            usd = response.cost_usd if paid else 0.0
            pt, ct = (response.prompt_tokens, response.completion_tokens) if paid else (0, 0)
            cached = getattr(response, "cached_tokens", 0) if paid else 0
            for ledger, hid in ticket.holds:
                lines.setdefault(id(ledger), (ledger, []))[1].append(
                    ledger.settlement(hid, usd, pt, ct, self.label, paid=paid, cached=cached))
        for ledger, todo in lines.values():
            ledger.settle_many(todo)
        return [None] * len(done)

    def settle_each(self, ticket: Ticket, responses: list) -> None:
        """Close a batch's reservation with its replies (each at its cost; none: it failed)."""
        replies = [(r.cost_usd, r.prompt_tokens, r.completion_tokens, r.cached_tokens) for r in responses]
        with self._lock:
            self.reserved -= ticket.worst_usd
            self.paid += sum(r[0] for r in replies)
        for ledger, hid in ticket.holds:
            ledger.settle_each(hid, replies, self.label)

    def settle_lost(self, ticket: Ticket) -> None:
        """Close a reservation as paid at its worst case: whether the provider billed its calls cannot be
        known (a batch that may have been made just before a kill, or that the provider no longer knows)."""
        with self._lock:
            self.reserved -= ticket.worst_usd
            self.paid += ticket.worst_usd
        for ledger, hid in ticket.holds:
            ledger.settle(hid, ticket.worst_usd, run=self.label)

    def adopt(self, worst_usd: float, holds: list[tuple[str, str]]) -> Ticket:
        """The ticket of reservations another process made, ``(ledger path, reservation id)`` each (a
        batch it submitted and was killed waiting for), for this budget to settle."""
        from pathlib import Path

        mine = {Path(x.path).resolve(): x for x in self.ledgers}
        with self._lock:
            self.reserved += worst_usd
        return Ticket(worst_usd, [(mine.get(Path(path).resolve()) or Ledger(path), hid) for path, hid in holds])
