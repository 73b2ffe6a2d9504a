"""The spending cap and its ledgers (`ark.cost.cap`): a call starts only when its worst case fits beside
the calls in flight, waits when finishing calls would make room, and is refused for good at the cap; a
ledger written by several processes at once adds up, and a line torn by a kill is cut off."""

from __future__ import annotations

import asyncio
import multiprocessing
from dataclasses import dataclass

import pytest

from ark.cost.cap import Budget, BudgetExhausted
from ark.cost.ledger import Ledger
from ark.cost.prices import Price

WORST = Price(0.0, 600_000.0)   # with max_tokens=1 a call's worst case is $0.60 (no prompt price)


@dataclass
class Reply:
    cost_usd: float
    prompt_tokens: int = 0
    completion_tokens: int = 1
    cached: bool = False


def test_calls_wait_for_room_and_the_cap_refuses_them_for_good(tmp_path):
    budget = Budget(1.0, run=Ledger(tmp_path / "spend.jsonl"))
    order = []

    async def call(name: str, cost: float, hold: float) -> None:
        ticket = await budget.reserve(WORST, [], None, max_tokens=1)
        order.append(f"{name} starts")
        await asyncio.sleep(hold)
        budget.settle(ticket, Reply(cost))
        order.append(f"{name} paid")

    async def go():
        first = asyncio.create_task(call("a", 0.3, 0.2))
        await asyncio.sleep(0.05)
        second = asyncio.create_task(call("b", 0.3, 0.05))   # 0.6 + 0.6 > 1: waits for a to be paid
        await asyncio.gather(first, second)
        with pytest.raises(BudgetExhausted, match=r"max_cost_usd=1.00 is reached \(this run's spend: \$0.60\)"):
            await call("c", 0.3, 0)                          # 0.6 + 0.6 > 1 with nothing in flight
        with pytest.raises(BudgetExhausted):
            await budget.reserve(Price(0.0, 0.0), [], None, max_tokens=1)   # even a free call: it stays exhausted

    asyncio.run(go())
    assert order == ["a starts", "a paid", "b starts", "b paid"]
    assert budget.exhausted and budget.refused == 2
    assert Ledger(tmp_path / "spend.jsonl").total() == pytest.approx(0.6) and budget.paid == pytest.approx(0.6)


def test_a_cached_reply_costs_nothing_and_a_sweep_cap_counts_every_point(tmp_path):
    sweep = tmp_path / "sweep.jsonl"
    Ledger(sweep).add(0.9, run="another point")
    budget = Budget(1.0, run=Ledger(tmp_path / "run.jsonl"), sweep=Ledger(sweep))
    ticket = asyncio.run(budget.reserve(Price(0.0, 0.0), [], None, max_tokens=1))
    budget.settle(ticket, Reply(0.5, cached=True))
    assert budget.paid == 0 and Ledger(tmp_path / "run.jsonl").total() == 0
    with pytest.raises(BudgetExhausted, match="the sweep's spend: \\$0.90"):
        asyncio.run(budget.reserve(Price(0.0, 200_000.0), [], None, max_tokens=1))   # 0.9 + 0.2 > 1


def _pay(path: str, n: int) -> None:
    ledger = Ledger(path)
    for _ in range(n):
        ledger.add(0.25, 10, 1, "worker")


def test_a_ledger_written_by_processes_at_once_adds_up(tmp_path):
    path = str(tmp_path / "ledger.jsonl")
    ctx = multiprocessing.get_context("fork")
    workers = [ctx.Process(target=_pay, args=(path, 200)) for _ in range(3)]
    for w in workers:
        w.start()
    reader = Ledger(path)
    while any(w.is_alive() for w in workers):
        assert reader.total() <= 150.0            # read while it is written: never a partial line
    for w in workers:
        w.join()
    assert reader.total() == pytest.approx(150.0) and reader.calls() == 600


def test_a_line_torn_by_a_kill_is_cut_before_the_next(tmp_path):
    path = tmp_path / "ledger.jsonl"
    Ledger(path).add(1.0)
    with open(path, "ab") as f:
        f.write(b'{"t": 1, "usd": 100')          # a kill in the middle of a write
    assert Ledger(path).total() == 1.0            # the torn line is not counted
    Ledger(path).add(2.0)
    assert Ledger(path).total() == 3.0 and len(path.read_text().splitlines()) == 2
