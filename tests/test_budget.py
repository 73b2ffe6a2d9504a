"""The spending cap and its ledgers (`ark.cost.cap`): a call starts only when its worst case fits beside
the calls in flight, waits when finishing calls would make room, and is refused for good at the cap; a
ledger written by several processes at once adds up, and a line torn by a kill is cut off."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from ark.cost.cap import Budget, BudgetExhausted
from ark.cost.ledger import Ledger
from ark.cost.prices import Price
from tests.helpers.scripted_server import ScriptedServer, text_reply

REPO = Path(__file__).resolve().parents[1]

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


@pytest.mark.parametrize("ledger", [False, True], ids=["in-process", "ledger"])
def test_a_call_refused_while_another_was_in_flight_starts_once_that_one_is_paid(tmp_path, ledger):
    """The race of two agents of one ask: b's reservation is refused while a is in flight, and a is paid
    (for less than its worst case) before b looks again. There is room now, so b must start, not end
    the budget: whether a call can never fit depends on what is paid, not on what happens to be in flight."""
    budget = Budget(1.0, run=Ledger(tmp_path / "spend.jsonl") if ledger else None)

    async def go():
        a = await budget.reserve(WORST, [], None, max_tokens=1)                   # 0.6 in flight
        b = asyncio.create_task(budget.reserve(WORST, [], None, max_tokens=1))   # 0.6 + 0.6 > 1: refused for now
        await asyncio.sleep(0)               # b's reservation is asked for in this turn of the loop ...
        budget.settle_soon(a, Reply(0.3))    # ... and a is paid in the same turn, before b looks again
        ticket = await b
        budget.settle(ticket, Reply(0.3))

    asyncio.run(go())
    assert not budget.exhausted and budget.refused == 0 and budget.paid == pytest.approx(0.6)


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



def test_a_ledgers_own_lines_count_as_a_fresh_reader_counts_them(tmp_path):
    path = tmp_path / "ledger.jsonl"
    mine, other = Ledger(path), Ledger(path)
    h1 = mine.hold(1.0, cap=10.0)
    other.add(0.5)                                # another writer's line between this ledger's own
    h2 = mine.hold(2.0, cap=10.0)
    assert mine.hold(100.0, cap=10.0) is None     # refused: nothing written
    mine.settle(h1, 0.25, prompt=10, completion=2)
    mine.settle(h2, 0.0, paid=False)
    mine.hold(4.0)
    with open(path, "ab") as f:
        f.write(b'{"t": 1, "hold": "x", "wor')     # torn by a kill after this ledger's last line
    mine.add(1.0)
    fresh = Ledger(path)
    for ledger in (mine, fresh):
        assert (ledger.total(), ledger.committed(), ledger.calls(), ledger.in_flight()) == \
            (pytest.approx(1.75), pytest.approx(5.75), 3, 1)
    assert len(path.read_text().splitlines()) == 7


PAYING_CHILD = """
import asyncio, sys, time
from ark.cost.cap import Budget
from ark.cost.ledger import Ledger
from ark.llm.client import BackboneConfig, LLMClient

backbone = BackboneConfig(name="paid", model="paid", provider="vllm", base_url=sys.argv[1], prices=(2.0, 8.0),
                          max_tokens=100)
budget = Budget(float(sys.argv[3]) if sys.argv[3] != "none" else None, run=Ledger(sys.argv[2]), label="child")
client = LLMClient(backbone, budget=budget)

async def go():
    await asyncio.gather(*(client.chat([{"role": "user", "content": f"question {i}"}], []) for i in range(4)))

asyncio.run(go())
time.sleep(600)
"""


def _paying_child(server: ScriptedServer, ledger: Path, cap: str = "none") -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", PAYING_CHILD, server.base_url, str(ledger), cap],
                            cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})


def _wait(condition, what: str, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def test_calls_in_flight_at_a_kill_are_counted_as_paid_by_the_next_run(tmp_path):
    """kill -9 with 4 calls in flight: the provider bills all 4; the ledger, read by the next run's budget,
    counts them (at their worst case: what they cost is not known)."""
    ledger = tmp_path / "spend.jsonl"
    with ScriptedServer([text_reply("late")] * 4, latency_s=3.0) as server:
        child = _paying_child(server, ledger)
        try:
            _wait(lambda: server.in_flight == 4, "4 calls in flight")
        finally:
            child.kill()
            child.wait()
        _wait(lambda: server.in_flight == 0, "the server to answer (bill) the calls")
        rerun = Budget(None, run=Ledger(ledger), label="rerun")
        assert Ledger(ledger).calls() == server.calls == 4          # every billed call is in the ledger
        assert Ledger(ledger).in_flight() == 0 and rerun.run_paid_before == pytest.approx(Ledger(ledger).total())
        worst = 4 * 100 * 8.0 / 1e6                                  # 4 x max_tokens at the output price (+ prompts)
        assert worst < Ledger(ledger).total() < 1.1 * worst


def test_another_processs_calls_in_flight_count_against_the_cap(tmp_path):
    """Two processes under one cap: a call that fits only without the other's calls in flight waits for
    them; once the other is killed, its calls count as paid at their worst case and the cap refuses."""
    ledger = tmp_path / "sweep.jsonl"
    with ScriptedServer([text_reply("late")] * 4, latency_s=600.0) as server:
        child = _paying_child(server, ledger, cap="1.0")
        try:
            _wait(lambda: server.in_flight == 4, "the other process's 4 calls in flight")
            budget = Budget(0.01, sweep=Ledger(ledger), run=Ledger(tmp_path / "run.jsonl"))
            others = Ledger(ledger).committed()                      # 4 x (100 tokens at $8/1M + the prompt)
            assert 0.0032 < others < 0.0034

            async def second():                                      # with max_tokens=1: a worst case of $0.008
                return await budget.reserve(Price(0.0, 8_000.0), [], None, max_tokens=1)

            async def go():
                task = asyncio.create_task(second())
                await asyncio.sleep(1.0)
                assert not task.done()                               # $0.0032 in flight + $0.008 > $0.01: it waits
                child.kill()
                child.wait()
                with pytest.raises(BudgetExhausted):
                    await asyncio.wait_for(task, 60)

            asyncio.run(go())
        finally:
            child.kill()
            child.wait()
        assert Ledger(ledger).calls() == server.calls == 4 and Ledger(ledger).in_flight() == 0
        assert Ledger(tmp_path / "run.jsonl").calls() == 0
