"""Writes of one turn of the event loop done as one (`ark.coalesce`), and what the paid path makes of it:
the reservations, settlements, claims and stored replies of calls that end together are written in one
locked append per ledger and one SQLite transaction each, and every promise of a single write still
holds (written before the caller goes on, an error reaches its caller, a cancelled caller takes nothing)."""

from __future__ import annotations

import asyncio
import json

import pytest

from ark.coalesce import Coalescer
from ark.cost.cap import Budget
from ark.cost.ledger import Ledger
from ark.llm.cache import ResponseCache
from ark.llm.client import BackboneConfig, LLMClient
from tests.helpers.scripted_server import ScriptedServer, text_reply


class Recorder:
    def __init__(self, fail: bool = False):
        self.batches: list[list] = []
        self.undone: list = []
        self.fail = fail

    def write_all(self, items: list) -> list:
        self.batches.append(list(items))
        if self.fail:
            raise OSError("disk full")
        return [f"done {x}" for x in items]


def test_the_writes_of_one_turn_are_one_call_and_each_caller_gets_its_own_result():
    rec = Recorder()
    c = Coalescer(rec.write_all)

    async def go():
        first = await asyncio.gather(*(c.submit(i) for i in range(20)))
        second = await c.submit("late")   # a later turn: a write of its own
        return first, second

    first, second = asyncio.run(go())
    assert rec.batches == [list(range(20)), ["late"]]
    assert first == [f"done {i}" for i in range(20)] and second == "done late"
    assert c.flushes == 2 and c.now("alone") == "done alone" and rec.batches[-1] == ["alone"]


def test_an_error_of_the_write_reaches_every_caller_of_its_turn():
    c = Coalescer(Recorder(fail=True).write_all)

    async def go():
        return await asyncio.gather(*(c.submit(i) for i in range(3)), return_exceptions=True)

    out = asyncio.run(go())
    assert len(out) == 3 and all(isinstance(e, OSError) and "disk full" in str(e) for e in out)


def test_a_cancelled_caller_takes_nothing_but_its_settlement_is_written():
    """With ``undo`` (a reservation, a claim): cancelled before the flush, the item is not written;
    cancelled after it, before the task could take the result, it is undone. Without ``undo`` (a
    settlement, a reply stored): written all the same."""
    rec, undone = Recorder(), []
    takes = Coalescer(rec.write_all, undo=lambda item, result: undone.append((item, result)))
    settles = Coalescer(rec.write_all)

    async def go():
        early = asyncio.create_task(takes.submit("early"))
        late = asyncio.create_task(takes.submit("late"))
        paid = asyncio.create_task(settles.submit("paid"))
        await asyncio.sleep(0)             # the three tasks enqueue; nothing is written yet
        early.cancel()
        paid.cancel()
        loop = asyncio.get_running_loop()
        loop.call_soon(late.cancel)        # runs after the flush wrote "late", before the task resumes
        await asyncio.gather(early, late, paid, return_exceptions=True)

    asyncio.run(go())
    assert ["late"] in rec.batches and ["paid"] in rec.batches
    assert not any("early" in b for b in rec.batches)
    assert undone == [("late", "done late")]


def test_hold_many_reserves_in_order_what_fits_under_the_cap_in_one_append(tmp_path):
    ledger = Ledger(tmp_path / "spend.jsonl")
    ids = ledger.hold_many([0.4, 0.4, 0.4, 0.1], run="r", cap=1.0)
    assert [i is not None for i in ids] == [True, True, False, True]
    lines = [json.loads(x) for x in (tmp_path / "spend.jsonl").read_text().splitlines()]
    assert [x["worst"] for x in lines] == [0.4, 0.4, 0.1]
    assert Ledger(tmp_path / "spend.jsonl").committed() == pytest.approx(0.9)
    assert ledger.hold_many([0.2], cap=1.0) == [None]          # 0.9 + 0.2 > 1: nothing written
    ledger.settle_many([Ledger.settlement(ids[0], 0.1, 10, 1, "r"), Ledger.settlement(ids[1], 0.0, paid=False)])
    fresh = Ledger(tmp_path / "spend.jsonl")
    assert fresh.total() == pytest.approx(0.1) and fresh.in_flight() == 1 and fresh.calls() == 1


def test_calls_that_end_together_share_their_ledger_appends_and_cache_transactions(tmp_path):
    """64 paid calls at once through the LLM client, with a cache and a run and a sweep ledger: every
    reservation is in both ledgers before its request reaches the server, each is settled at its cost,
    every reply is stored, and the reservations and claims took a few writes, not 64 each."""
    run_ledger, sweep_ledger = tmp_path / "run.jsonl", tmp_path / "sweep.jsonl"
    seen_holds: list[int] = []

    def responder(request: dict):
        # what the ledgers hold when the request arrives: at least one open reservation per request so far
        opened = [json.loads(x) for x in run_ledger.read_text().splitlines()]
        seen_holds.append(sum("hold" in x for x in opened))
        return text_reply("ok")

    with ScriptedServer(responder=responder, latency_s=0.2) as server:
        budget = Budget(10.0, run=Ledger(run_ledger), sweep=Ledger(sweep_ledger), label="point")
        cache = ResponseCache(tmp_path / "llm.sqlite")
        client = LLMClient(BackboneConfig(name="s", model="s", provider="vllm", base_url=server.base_url,
                                          max_retries=0, prices=(2.0, 8.0)), cache=cache, budget=budget)

        async def go():
            try:
                return await asyncio.gather(*(client.chat([{"role": "user", "content": f"q{i}"}], [])
                                              for i in range(64)))
            finally:
                await client.aclose()

        replies = asyncio.run(go())
    assert len(replies) == 64 and server.calls == 64
    assert all(n >= i + 1 for i, n in enumerate(seen_holds))   # reserved before sent
    for path in (run_ledger, sweep_ledger):
        ledger = Ledger(path)
        assert ledger.calls() == 64 and ledger.in_flight() == 0
        assert ledger.total() == pytest.approx(sum(r.cost_usd for r in replies))
    assert len(cache) == 64
    # the 64 calls start in one turn (their replies come back as the server's threads send them)
    assert budget._holds.flushes < 8 and cache._claims.flushes < 8


def test_settlements_and_replies_of_one_turn_are_one_append_and_one_transaction(tmp_path):
    budget = Budget(None, run=Ledger(tmp_path / "run.jsonl"), label="point")
    cache = ResponseCache(tmp_path / "llm.sqlite")
    replies = [type("Reply", (), {"cost_usd": 0.01 * i, "prompt_tokens": 10, "completion_tokens": 1,
                                  "cached_tokens": 0, "cached": False})() for i in range(10)]

    async def go():
        tickets = await asyncio.gather(*(budget.reserve_usd(0.5) for _ in replies))
        await asyncio.gather(*(budget.settle_soon(t, r) for t, r in zip(tickets, replies)),
                             *(cache.put_soon(f"k{i}", {"i": i}) for i in range(10)))

    asyncio.run(go())
    assert budget._holds.flushes == 1 and budget._settles.flushes == 1 and cache._stores.flushes == 1
    ledger = Ledger(tmp_path / "run.jsonl")
    assert ledger.calls() == 10 and ledger.in_flight() == 0
    assert ledger.total() == pytest.approx(sum(r.cost_usd for r in replies))
    assert len(cache) == 10 and cache.get("k3") == {"i": 3}
