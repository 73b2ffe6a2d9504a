"""Batch mode (``backbone.batch=true``, `ark.llm.batch`) against the scripted OpenAI-compatible server's
files and batches endpoints, standing in for OpenAI's and Azure's batch APIs: the same predictions and
metrics as online for the same replies, about one batch per step, each request billed once and paid at
the batch price; a run killed while it waits for a batch re-attaches to it when rerun and pays nothing
twice; the cap reserves a batch's worst case before sending it; a provider without a batch API is
refused; the forecast shows the batch price and the wait.

The backbone is the real ``gpt-4.1`` config (provider openai) sent to the scripted server, whose replies
follow `tests.helpers.policies.ark_like` (deterministic per request), so online and batch runs get the
same replies."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from ark.cli.main import main
from ark.config.compose import compose
from ark.config.evaluation import run
from ark.cost.ledger import RUN_LEDGER, Ledger
from ark.cost.prices import PRICES
from ark.llm.batch import PENDING
from ark.run.rundir import BATCH_DIR, RunDir
from tests.helpers.paths import DEMO_ROOT, REPO
from tests.helpers.policies import ark_like
from tests.helpers.scripted_server import ScriptedServer

T_MAX, N_AGENTS = 3, 2
BATCH = ["backbone.batch=true", "backbone.batch_poll_s=0.02"]


@pytest.fixture()
def key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-scripted-" + "0" * 20)
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "az-scripted-" + "0" * 20)


def _overrides(server, tmp: Path, *extra: str, backbone: str = "gpt-4.1") -> list[str]:
    url = server.root_url if backbone.endswith("azure") else server.base_url
    return [f"paths.data={DEMO_ROOT}", "graph=demo", f"backbone={backbone}", f"+backbone.base_url={url}",
            f"paths.runs={tmp}/runs", f"paths.llm_cache={tmp}/llm.sqlite", "budget=t5_n1",
            f"budget.agent.t_max={T_MAX}", f"budget.agent.n_agents={N_AGENTS}", "progress=false", "n_boot=20",
            "yes=true", *extra]


def _rankings(out: Path) -> dict[str, list]:
    return {str(r["query_id"]): r["ranking"] for r in RunDir(out).records()}


def _bill(server) -> float:
    """What the provider bills for the replies it sent: each at the batch price of GPT-4.1."""
    price = PRICES["gpt-4.1"].batch()
    return sum(price.cost(u["prompt_tokens"], u["completion_tokens"]) for u in server.usages)


def _request(body: dict) -> str:
    """A request as text, the ids the server gave its tool calls left out (they count its replies)."""
    return re.sub(r'"call_\d+"', '"call"', json.dumps(body, sort_keys=True))


def _batch_ids(server) -> list[list[str]]:
    """The custom ids of each batch the server received, in creation order."""
    return [[json.loads(x)["custom_id"] for x in server.files[b["input_file_id"]].splitlines() if x.strip()]
            for b in server.batches.values()]


def test_batch_mode_gives_the_online_predictions_with_one_batch_per_step_each_request_billed_once(key, tmp_path):
    """10 queries, n = 2, T_max = 3: the batch run's rankings and metrics equal the online run's for the
    same replies; it sends at most T_max + 1 batches (one per step that had requests the cache could not
    answer), every request once, the same requests as online; its ledger holds the bill at the batch price,
    half of what the online run paid."""
    with ScriptedServer(responder=ark_like) as online_server:
        online = run(compose(_overrides(online_server, tmp_path / "online", "limit=10")))
    with ScriptedServer(responder=ark_like) as server:
        batch = run(compose(_overrides(server, tmp_path / "batch", "limit=10", *BATCH)))
    assert online["complete"] and batch["complete"]
    out_online = Path(compose(_overrides(online_server, tmp_path / "online", "limit=10")).out_dir)
    out_batch = Path(compose(_overrides(server, tmp_path / "batch", "limit=10", *BATCH)).out_dir)
    assert _rankings(out_batch) == _rankings(out_online) and len(_rankings(out_batch)) == 10
    assert batch["metrics"] == online["metrics"]
    ids = _batch_ids(server)
    print(f"{len(ids)} batches of {[len(x) for x in ids]} requests; online {online_server.calls} calls")
    assert 1 <= len(ids) <= T_MAX + 1
    every = [k for batch_ids in ids for k in batch_ids]
    assert len(every) == len(set(every)) == server.batch_lines == len(server.usages)   # each billed once
    digests = Counter(_request(r) for r in server.requests)
    assert max(digests.values()) == 1
    assert sorted(digests) == sorted(_request(r) for r in online_server.requests)   # the same requests
    assert online_server.batches == {} and server.calls == online_server.calls   # online: no batch
    ledger = Ledger(out_batch / RUN_LEDGER)
    assert ledger.calls() == len(server.usages) and ledger.in_flight() == 0
    assert ledger.total() == pytest.approx(_bill(server), rel=1e-9)
    assert ledger.total() == pytest.approx(Ledger(out_online / RUN_LEDGER).total() / 2, rel=1e-9)
    assert batch["cost_usd"] == pytest.approx(online["cost_usd"] / 2, rel=1e-9)
    assert not (out_batch / BATCH_DIR / PENDING).exists()


def test_azure_batch_paths_and_api_version(key, tmp_path):
    """The Azure backbone sends its batches to ``/openai/files`` and ``/openai/batches`` with its
    api-version, its lines naming the chat completions endpoint Azure's batch API takes."""
    with ScriptedServer(responder=ark_like) as server:
        summary = run(compose(_overrides(server, tmp_path, "limit=2", *BATCH, backbone="gpt-4.1-azure")))
    assert summary["complete"] and server.batches
    assert {b["endpoint"] for b in server.batches.values()} == {"/chat/completions"}
    n = len(server.batches)
    assert server.batch_paths[:2] == ["POST /openai/files?api-version=2024-10-21",
                                      "POST /openai/batches?api-version=2024-10-21"]
    assert all("/openai/" in p and p.endswith("?api-version=2024-10-21") for p in server.batch_paths)
    assert sum(p.startswith("POST /openai/batches") for p in server.batch_paths) == n
    assert server.batch_lines == len(server.usages) == server.calls


def _job(server, tmp: Path) -> list[str]:
    return [sys.executable, str(REPO / "experiments" / "run.py"), *_overrides(server, tmp, "limit=6", *BATCH)]


@pytest.mark.commands   # whole experiments/run.py processes, one killed with -9 (about 10 s each)
@pytest.mark.parametrize("outcome", ["completed", "expired"])
def test_a_run_killed_while_it_waits_for_a_batch_reattaches_and_pays_nothing_twice(key, tmp_path, outcome):
    """kill -9 while the run waits for its first batch; the same command again re-attaches to that
    batch instead of sending its requests again: the server bills each distinct request exactly once,
    the predictions equal an uninterrupted run's, and the ledger ends holding the server's bill at the
    batch price. A batch that completed shares no request with a later one; one that expired with half
    its requests done is reported, its replies kept, and only the other half sent again."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with ScriptedServer(responder=ark_like) as reference_server:
        run(compose(_overrides(reference_server, tmp_path / "reference", "limit=6")))
    reference = _rankings(Path(compose(_overrides(reference_server, tmp_path / "reference", "limit=6")).out_dir))
    with ScriptedServer(responder=ark_like, batch_delay_s=3600) as server:
        out = Path(compose(_overrides(server, tmp_path, "limit=6", *BATCH)).out_dir)
        pending = out / BATCH_DIR / PENDING
        job = subprocess.Popen(_job(server, tmp_path), env=env, stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            deadline = time.monotonic() + 300   # hang guard
            while not (pending.exists() and json.loads(pending.read_text()).get("batch_id")):
                assert job.poll() is None, job.stdout.read()
                assert time.monotonic() < deadline, "the run never sent its first batch"
                time.sleep(0.05)
        finally:
            job.send_signal(signal.SIGKILL)
            job.wait(60)
        first = json.loads(pending.read_text())
        assert len(server.batches) == 1 and server.batch_lines == 0   # sent, not yet answered
        ledger = Ledger(out / RUN_LEDGER)
        assert ledger.in_flight() == 1   # the batch's reservation, held by its pending file
        server.batch_delay_s = 0.0       # the provider finishes the batch while nobody waits
        server.expire_batches = int(outcome == "expired")
        again = subprocess.run(_job(server, tmp_path), env=env, stdin=subprocess.DEVNULL, capture_output=True,
                               text=True, timeout=600)
        assert again.returncode == 0, again.stdout + again.stderr
        said = again.stdout + again.stderr
        assert "re-attaching to batch " + first["batch_id"] in said
    ids = _batch_ids(server)
    assert ids[0] == first["custom_ids"]
    every = [k for batch_ids in ids for k in batch_ids]
    if outcome == "expired":   # its undone half sent again in the next batch, and nothing else twice
        half = first["custom_ids"][len(first["custom_ids"]) // 2:]
        assert f"batch {first['batch_id']} ended expired" in said and set(half) <= set(ids[1])
        assert sorted(k for k, n in Counter(every).items() if n > 1) == sorted(half)
    else:
        assert len(every) == len(set(every))
    assert server.batch_lines == len(server.usages) == server.calls == len(set(every))
    assert max(Counter(_request(r) for r in server.requests).values()) == 1
    assert _rankings(out) == reference
    ledger = Ledger(out / RUN_LEDGER)
    assert ledger.in_flight() == 0 and ledger.calls() == len(server.usages)
    assert ledger.total() == pytest.approx(_bill(server), rel=1e-9)
    assert not pending.exists()


def test_the_cap_reserves_a_batchs_worst_case_before_sending_it(key, tmp_path, capsys):
    """A cap below the worst case of the first batch (every request's prompt and whole max_tokens at the
    batch price): the batch is refused whole, the server receives no file and no batch, and the run ends
    incomplete with the documented exit status."""
    INCOMPLETE_EXIT = 3   # docs/configuration.md
    with ScriptedServer(responder=ark_like) as server:
        args = _overrides(server, tmp_path, "limit=4", "max_cost_usd=0.01", *BATCH)
        assert main(["run", *args]) == INCOMPLETE_EXIT
        printed = capsys.readouterr().out
    assert "INCOMPLETE (budget): the spending cap max_cost_usd=0.01 is reached" in printed
    assert server.files == {} and server.batches == {} and server.calls == 0
    out = Path(compose(args).out_dir)
    ledger = Ledger(out / RUN_LEDGER)
    assert ledger.total() == 0 and ledger.in_flight() == 0
    assert not (out / BATCH_DIR / PENDING).exists()


@pytest.mark.parametrize("backbone", ["scripted", "local", "rules"])
def test_batch_mode_for_a_provider_without_a_batch_api_is_one_line_before_any_work(tmp_path, capsys, backbone):
    """``backbone.batch=true`` with a self-hosted or in-process backbone: one line naming the key and the
    providers that have a batch API, exit 2, nothing written."""
    args = [f"paths.data={DEMO_ROOT}", "graph=demo", f"backbone={backbone}", "backbone.batch=true",
            f"paths.runs={tmp_path}/runs", f"paths.llm_cache={tmp_path}/llm.sqlite", "limit=2", "progress=false"]
    assert main(["run", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert "backbone.batch=true" in err and "valid providers openai, azure" in err
    assert list(tmp_path.iterdir()) == []


def test_the_forecast_in_batch_mode_shows_the_batch_price_and_the_wait(key, tmp_path, capsys):
    """``estimate=true`` with batch mode on: half the standard forecast (the worst case and the token
    model's figure alike), and the warning that a step's batch may take up to 24 h; no call."""
    with ScriptedServer(responder=ark_like) as server:
        (standard,) = run(compose(_overrides(server, tmp_path, "limit=12", "estimate=true")))["estimate"]
        assert "batch" not in capsys.readouterr().out
        (batch,) = run(compose(_overrides(server, tmp_path, "limit=12", "estimate=true", *BATCH)))["estimate"]
        printed = capsys.readouterr().out
        assert server.calls == 0 and server.files == {}
    assert batch["usd"] == pytest.approx(standard["usd"] / 2, rel=1e-9)
    assert batch["typical_usd"] == pytest.approx(standard["typical_usd"] / 2, rel=1e-9)
    assert "batch price, 50% of every standard rate" in printed and "may take up to 24 h" in printed


def test_a_step_larger_than_one_batch_goes_as_several(key, tmp_path, monkeypatch):
    """A step with more requests than a batch may hold (`ark.llm.batch.MAX_LINES`, 50,000 at OpenAI; 5
    here) is cut into several batches, each within the limit; each request is still billed once and the
    predictions are the online ones."""
    import ark.llm.batch as batch_module

    monkeypatch.setattr(batch_module, "MAX_LINES", 5)
    with ScriptedServer(responder=ark_like) as online_server:
        run(compose(_overrides(online_server, tmp_path / "online", "limit=4")))
    with ScriptedServer(responder=ark_like) as server:
        summary = run(compose(_overrides(server, tmp_path / "batch", "limit=4", *BATCH)))
    assert summary["complete"]
    ids = _batch_ids(server)
    assert max(len(x) for x in ids) <= 5 and len(ids) > T_MAX   # 8 requests a step: two batches each
    every = [k for batch_ids in ids for k in batch_ids]
    assert len(every) == len(set(every)) == len(server.usages)
    assert _rankings(Path(compose(_overrides(server, tmp_path / "batch", "limit=4", *BATCH)).out_dir)) == \
        _rankings(Path(compose(_overrides(online_server, tmp_path / "online", "limit=4")).out_dir))


def _fails_second_step_of_agent_1(request: dict):
    """`ark_like`, but the second step of the agents with seed 1 is refused with HTTP 400."""
    from tests.helpers.scripted_server import server_error

    step = sum(m["role"] == "assistant" for m in request["messages"])
    return server_error(400) if request.get("seed") == 1 and step == 1 else ark_like(request)


def test_a_failed_batch_line_ends_that_trajectory_as_a_failed_online_call_does(key, tmp_path):
    """A batch line answered with an error ends that agent's trajectory with the error an online call
    raises (LLMTransportError); the other agent goes on and the query is recorded degraded, as online."""
    records = {}
    for mode, extra in (("online", []), ("batch", BATCH)):
        with ScriptedServer(responder=_fails_second_step_of_agent_1) as server:
            args = _overrides(server, tmp_path / mode, "limit=3", *extra)
            run(compose(args))
            records[mode] = sorted(RunDir(Path(compose(args).out_dir)).records(), key=lambda r: str(r["query_id"]))
    for mode in records:
        assert [r["status"] for r in records[mode]] == ["degraded"] * 3
        errors = [a["error"] for r in records[mode] for a in r["agents"] if a["error"]]
        assert len(errors) == 3 and all(e.startswith("LLMTransportError") and "HTTP 400" in e for e in errors)
    assert [r["ranking"] for r in records["batch"]] == [r["ranking"] for r in records["online"]]


def test_one_batch_for_the_agents_waiting_one_line_per_distinct_request_none_for_the_cache(key, tmp_path):
    """The client in batch mode: three registered agents ask, two of them the same request; one batch of
    two lines goes out once all three wait, and the two get the same reply; asked again, the cache answers
    and no batch is sent."""
    import asyncio

    from ark.llm.client import BackboneConfig, LLMClient
    from tests.helpers.scripted_server import text_reply

    def echo(request: dict):
        return text_reply("re: " + request["messages"][-1]["content"])

    with ScriptedServer(responder=echo) as server:
        config = BackboneConfig(name="gpt-4.1", model="gpt-4.1", provider="openai", base_url=server.base_url,
                                batch=True, batch_poll_s=0.01)
        client = LLMClient(config, cache=tmp_path / "llm.sqlite", batch_dir=tmp_path / "batch")
        ask = [{"role": "user", "content": "a"}]
        other = [{"role": "user", "content": "b"}]

        async def step():
            client.batch.register(3)
            return await asyncio.gather(client.chat(ask, []), client.chat(ask, []),
                                        client.chat(other, [], agent_index=1))

        first, same, second = asyncio.run(step())
        assert len(server.batches) == 1 and [len(x) for x in _batch_ids(server)] == [2]
        assert first.content == same.content == "re: a" and second.content == "re: b"
        assert not first.cached and first.cost_usd == pytest.approx(PRICES["gpt-4.1"].batch().cost(10, 5))
        client.batch.unregister(3)
        again = asyncio.run(client.chat(ask, []))
        assert again.cached and again.content == "re: a" and len(server.batches) == 1 and server.calls == 2
