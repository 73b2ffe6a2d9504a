"""Paid runs under control, against the scripted OpenAI-compatible server standing in for OpenAI: the
forecast (no call), the pilot (a step of its own, whose replies the real run does not pay for again), the confirmation refused
without a terminal, the spending cap (a run stopped at the cap, resumed with a higher one, no reply paid
twice, the totals adding up), and the recorded model the provider answered with.

The backbone is the real ``gpt-4.1`` config (provider openai, priced by ark/cost/prices.py) sent to the
scripted server; its replies follow `tests.helpers.policies.ark_like` with realistic token counts."""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path

import pytest

from ark.cli.main import main
from ark.config.compose import compose
from ark.config.evaluation import run
from ark.cost.ledger import RUN_LEDGER, Ledger
from ark.cost.prices import PRICES
from ark.run.rundir import RunDir
from tests.helpers.paths import DEMO_ROOT
from tests.helpers.policies import ark_like
from tests.helpers.scripted_server import ScriptedServer

SNAPSHOT = "gpt-4.1-2025-04-14"


@pytest.fixture()
def server(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-scripted-" + "0" * 20)
    # asked for the alias, the provider answers with the snapshot it points to
    with ScriptedServer(responder=ark_like, answer_model=SNAPSHOT) as s:
        yield s


def _overrides(server, tmp: Path, *extra: str) -> list[str]:
    return [f"paths.data={DEMO_ROOT}", "graph=demo", "backbone=gpt-4.1", "backbone.model=gpt-4.1",
            f"+backbone.base_url={server.base_url}", f"paths.runs={tmp}/runs", f"paths.llm_cache={tmp}/llm.sqlite",
            "budget=t5_n1", "budget.agent.n_agents=2", "progress=false", "n_boot=20", *extra]


def _digest(request: dict) -> str:
    return hashlib.sha256(json.dumps(request, sort_keys=True).encode()).hexdigest()


def _price(prompt: int, completion: int) -> float:
    p = PRICES["gpt-4.1"]
    return (prompt * p.input_per_m + completion * p.output_per_m) / 1e6


def test_estimate_makes_no_call_and_writes_nothing(server, tmp_path, capsys):
    """``estimate=true`` on a paid run nothing is measured for: the worst case and the token model's
    figure, printed; no LLM call, no directory (``out_dir=`` given or not)."""
    for extra in ([], [f"out_dir={tmp_path}/mine"]):
        est = run(compose(_overrides(server, tmp_path, "limit=12", "estimate=true", "estimate_queries=4", *extra)))
        printed = capsys.readouterr().out
        (f,) = est["estimate"]
        assert (f["queries"], f["to_pay"], f["basis"]) == (12, 12, "worst case")
        assert 0 < f["typical_usd"] < f["usd"]
        assert "nothing is measured for 1 point(s)" in printed and "pilot=true runs a pilot of their first 4" in printed
        assert server.calls == 0 and not (tmp_path / "runs").exists() and not (tmp_path / "mine").exists()


def test_the_pilot_is_a_step_of_its_own_asked_for_and_the_run_after_it_pays_no_call_twice(server, tmp_path, capsys,
                                                                                           monkeypatch):
    """``pilot=true``: forecast and confirmed like a run (refused without a terminal above confirm_usd), run
    in a directory of its own (not the run's ``out_dir``), and the forecast after it rests on it; the run
    with the same ``out_dir`` then starts, and pays for no reply of the pilot again."""
    monkeypatch.setattr("sys.stdin", io.StringIO(""))     # no terminal
    mine = tmp_path / "mine"
    args = _overrides(server, tmp_path, "limit=12", f"out_dir={mine}")
    assert main(["run", *args, "pilot=true", "estimate_queries=4", "confirm_usd=0.0001"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ark run: error: the pilot (default/demo/ark-gpt-4.1-t5_n2-full_test_limit4_pilot) may "
                          "spend up to $") and "confirm_usd=0.0001" in err
    assert server.calls == 0 and not mine.exists()

    assert main(["run", *args, "pilot=true", "estimate_queries=4", "confirm_usd=0.0001", "yes=true"]) == 0
    printed = capsys.readouterr().out
    pilot_dir = tmp_path / "runs" / "default" / "demo" / "ark-gpt-4.1-t5_n2-full_test_limit4_pilot"
    assert RunDir(pilot_dir).complete and not mine.exists()
    # its price was stated before it started; the forecast after it rests on its 4 queries
    assert printed.index("the pilot, forecast (US$") < printed.index(f"{pilot_dir}: 4/4 ok")
    assert "pilot default/demo/ark-gpt-4.1-t5_n2-full_test_limit4_pilot: paid $" in printed
    assert "4 queries" in printed.split("4/4 ok")[1]
    pilot_requests = {_digest(r) for r in server.requests}
    assert pilot_requests

    est = run(compose([*args, "estimate=true"]))
    (f,) = est["estimate"]
    assert (f["queries"], f["replayed"], f["to_pay"], f["rests_on"], f["basis"]) == (12, 4, 8, 4, "measured")
    assert 0 < f["low"] <= f["usd"] <= f["high"]
    before = len(server.requests)
    summary = run(compose([*args, "yes=true"]))
    assert summary["status"] == "complete" and summary["forecast_usd"] == pytest.approx(f["usd"])
    real = [_digest(r) for r in server.requests[before:]]
    assert real and not set(real) & pilot_requests          # the pilot's 4 queries came from the LLM cache
    assert len(set(real)) == len(real)                       # and no call of the run was made twice
    # the recorded model is the one the provider answered with, for every reply (cached ones too)
    steps = sum(a["steps"] for r in RunDir(mine).records() for a in r["agents"])
    assert summary["answered_models"] == {SNAPSHOT: steps}
    # what is measured now answers the forecast, and a pilot has nothing to do
    again = run(compose([*args, "estimate=true"]))
    assert (again["estimate"][0]["done"], again["estimate"][0]["to_pay"]) == (12, 0)
    assert run(compose([*args, "pilot=true", "estimate_queries=4"]))["pilot"] == []


def test_a_paid_run_above_confirm_usd_is_refused_without_a_terminal(server, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO(""))     # CI, SLURM, nohup: no terminal
    args = ["run", *_overrides(server, tmp_path, "limit=12", "confirm_usd=0.01")]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("ark run: error: this run (default/demo/ark-gpt-4.1-t5_n2-full_test_"
                                                   "limit12) may spend up to $")
    assert "above confirm_usd=0.01, and there is no terminal to confirm on: rerun with yes=true" in err
    assert server.calls == 0 and not (tmp_path / "runs").exists()

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr("sys.stdin", Terminal("n\n"))     # asked, and the answer is no
    assert main(args) == 2
    assert "not started: this run (default/demo/ark-gpt-4.1-t5_n2-full_test_limit12) was not confirmed" in \
        capsys.readouterr().err
    assert server.calls == 0 and not (tmp_path / "runs").exists()
    # a cap within confirm_usd needs no confirmation
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    status = main(["run", *_overrides(server, tmp_path, "limit=2", "confirm_usd=0.05", "max_cost_usd=0.05")])
    assert status in (0, 3) and server.calls > 0   # started without asking (3: the cap then stopped it)


def test_the_cap_stops_a_run_a_higher_cap_resumes_it_and_nothing_is_paid_twice(server, tmp_path, capsys):
    cap = 0.12
    first = run(compose(_overrides(server, tmp_path, "limit=12", "concurrency=3", f"max_cost_usd={cap}", "yes=true")))
    out = Path(tmp_path / "runs" / "default" / "demo" / "ark-gpt-4.1-t5_n2-full_test_limit12")
    assert (first["complete"], first["status"], first["stop_reason"], first["budget_usd"]) == \
        (False, "incomplete", "budget", cap)
    assert 0 < first["paid_usd"] <= cap                      # the cap is never passed
    assert first["n_missing"] > 0 and first["n_ok"] + first["n_missing"] == 12   # cut queries are not recorded
    assert json.loads((out / "metrics.json").read_text())["stop_reason"] == "budget"
    assert "INCOMPLETE (budget): the spending cap max_cost_usd=0.12 is reached" in capsys.readouterr().out
    paid_first = Ledger(out / RUN_LEDGER).total()
    assert paid_first == pytest.approx(first["paid_usd"])

    second = run(compose(_overrides(server, tmp_path, "limit=12", "concurrency=3", "max_cost_usd=5", "yes=true")))
    assert second["status"] == "complete" and "stop_reason" not in second
    digests = [_digest(r) for r in server.requests]
    assert len(digests) == len(set(digests)) and set(server.outcomes) == {"ok"}   # no reply paid twice
    # the totals add up: both attempts' payments = every reply the server sent = the run's cost
    sent = sum(_price(r.prompt_tokens, r.completion_tokens) for r in map(ark_like, server.requests))
    assert second["paid_usd"] == pytest.approx(sent) == pytest.approx(second["cost_usd"])
    assert second["paid_usd"] == pytest.approx(paid_first + second["paid_this_run_usd"])


def test_a_paid_model_without_a_price_is_refused_unless_its_price_is_set(tmp_path, capsys, monkeypatch):
    from ark.config.checks import setting_problems

    monkeypatch.setenv("OPENAI_API_KEY", "sk-scripted-" + "0" * 20)
    unpriced = ["graph=demo", f"paths.data={DEMO_ROOT}", "backbone=gpt-4.1", "backbone.model=gpt-5-2025-08-07"]
    assert main(["run", *unpriced, f"paths.runs={tmp_path / 'runs'}"]) == 2
    err = capsys.readouterr().err
    assert err == ("ark run: error: bad setting backbone.model='gpt-5-2025-08-07': ark/cost/prices.py (prices of "
                   "2025-04-14) has no price for it, and a paid run needs one: set backbone.price.input_per_m=... "
                   "backbone.price.output_per_m=... (US$ per 1M tokens)\n")
    assert not (tmp_path / "runs").exists()
    priced = compose([*unpriced, "backbone.price.input_per_m=1.25", "backbone.price.output_per_m=10"])
    assert setting_problems(priced) == []
    half = setting_problems(compose([*unpriced, "backbone.price.input_per_m=1.25"]))
    assert len(half) == 1 and "set both input_per_m and output_per_m" in half[0]


def _last_bar(err: str) -> str:
    """The progress bar as it was drawn last (tqdm redraws it in place with carriage returns)."""
    return [line for line in err.replace("\r", "\n").splitlines() if "paid=" in line][-1]


def test_the_progress_bar_shows_what_is_paid_beside_the_forecast(server, tmp_path, capsys):
    run(compose(_overrides(server, tmp_path, "limit=3", "yes=true")))     # 3 queries measured
    capsys.readouterr()
    summary = run(compose(_overrides(server, tmp_path, "limit=6", "yes=true", "progress=true")))
    bar = _last_bar(capsys.readouterr().err)
    f = summary["forecast"]
    assert (f["basis"], f["to_pay"], f["rests_on"]) == ("measured", 3, 3)
    assert f"paid={summary['paid_this_run_usd']:.2f}" in bar and f"forecast={f['usd']:.2f}" in bar
    assert summary["paid_this_run_usd"] > 0 and "worst=" not in bar and "sweep=" not in bar


def test_without_a_measurement_the_bar_names_the_worst_case(server, tmp_path, capsys):
    summary = run(compose(_overrides(server, tmp_path, "limit=2", "yes=true", "progress=true")))
    bar = _last_bar(capsys.readouterr().err)
    assert summary["forecast"]["basis"] == "worst case"
    assert f"worst={summary['forecast']['usd']:.2f}" in bar and "forecast=" not in bar


def test_a_sweep_points_bar_shows_the_sweeps_spend_so_far_over_its_cap(tmp_path):
    from ark.cost.cap import Budget
    from ark.run.settings import RunSettings
    from ark.run.spending import bar_fields

    sweep = Ledger(tmp_path / "sweep.jsonl")
    sweep.add(1.25, run="demo/other-point")                  # what another point of the sweep paid
    budget = Budget(3.0, run=Ledger(tmp_path / "run" / RUN_LEDGER), sweep=Ledger(sweep.path), label="demo/this")
    settings = RunSettings(out_dir=tmp_path / "run", budget=budget, forecast={"usd": 0.8, "basis": "measured"})
    assert bar_fields(settings) == {"paid": "0.00", "forecast": "0.80", "sweep": "1.25/3.00"}
    sweep.add(0.5, run="demo/other-point")                   # read again at each redraw
    assert bar_fields(settings)["sweep"] == "1.75/3.00"


@pytest.mark.commands
def test_the_pilot_first_recipe_through_make(server, tmp_path):
    """``make reproduce-table1 ARGS="... limit=6 estimate=true"`` (the forecast: no call, no directory),
    ``... pilot=true`` (a pilot of 3 queries in its own directory, then the forecast; no table), then the
    same without either: the run pays for no reply of the pilot again, and the table is built."""
    import subprocess
    import sys

    from tests.helpers.paths import REPO

    args = " ".join(["graph=demo", "backbone=gpt-4.1", f"+backbone.base_url={server.base_url}", f"paths.data={DEMO_ROOT}",
                     f"paths.llm_cache={tmp_path}/llm.sqlite", "budget=t5_n1", "budget.agent.n_agents=2", "limit=6",
                     "n_boot=20", "progress=false", f"--runs {tmp_path}/runs", f"--out {tmp_path}/table"])
    stamps = [f"--assume-old=.venv/.{s}" for s in ("core", "local", "distill", "dense")]   # never (re)install

    def make(extra: str) -> subprocess.CompletedProcess:
        return subprocess.run(["make", "-s", "-C", str(REPO), f"PY={sys.executable}", *stamps, "reproduce-table1",
                               f"ARGS={args} {extra}"], capture_output=True, text=True, timeout=600,
                              stdin=subprocess.DEVNULL, env={**__import__("os").environ, "PYTHONPATH": str(REPO)})

    est = make("estimate=true estimate_queries=3")
    assert est.returncode == 0, est.stdout + est.stderr
    assert server.calls == 0 and not list((tmp_path / "runs").rglob("predictions.jsonl"))
    assert "worst case" in est.stdout and "pilot=true runs a pilot of their first 3" in est.stdout
    est = make("pilot=true estimate_queries=3 yes=true")
    assert est.returncode == 0, est.stdout + est.stderr
    runs = tmp_path / "runs" / "table1" / "demo"
    assert sorted(p.name for p in runs.iterdir()) == ["ark-gpt-4.1-t5_n2-full_test_limit3_pilot"]   # the pilot only
    assert "pilot table1/demo/ark-gpt-4.1-t5_n2-full_test_limit3_pilot: paid $" in est.stdout
    assert "3 queries" in est.stdout.split("paid $")[-1] and not (tmp_path / "table").exists()
    pilot = {_digest(r) for r in server.requests}
    assert pilot

    done = make("")
    assert done.returncode == 0, done.stdout + done.stderr
    real = [_digest(r) for r in server.requests[len(pilot):]]
    assert real and not set(real) & pilot and len(set(real)) == len(real)   # nothing paid twice
    assert RunDir(runs / "ark-gpt-4.1-t5_n2-full_test_limit6").complete and RunDir(runs / "bm25_test_limit6").complete
    assert (tmp_path / "table" / "table1.md").is_file()


@pytest.mark.commands
def test_reproduce_table1_without_a_terminal_is_refused_before_any_call(server, tmp_path):
    """``ark table1 --reproduce`` of a sweep that may spend more than ``confirm_usd``, no terminal: one line
    saying why and how to go on, then what to do about the sweep; no request, no run directory."""
    import subprocess
    import sys

    from tests.helpers.paths import REPO

    args = ["graph=demo", "backbone=gpt-4.1", f"+backbone.base_url={server.base_url}", f"paths.data={DEMO_ROOT}",
            f"paths.llm_cache={tmp_path}/llm.sqlite", "limit=4", "progress=false", "--runs", str(tmp_path / "runs"),
            "--out", str(tmp_path / "table")]
    done = subprocess.run([sys.executable, "-m", "ark", "table1", "--reproduce", *args], capture_output=True,
                          text=True, timeout=600, stdin=subprocess.DEVNULL,
                          env={**__import__("os").environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 2
    refusal, after = done.stderr.strip().splitlines()[-2:]
    assert refusal.startswith("ark run: error: this sweep (2 runs) may spend up to $")
    assert "above confirm_usd=5, and there is no terminal to confirm on: rerun with yes=true" in refusal
    assert after.endswith("the table1 sweep stopped on the error above; rerun once it is fixed (finished runs are kept)")
    assert server.calls == 0 and not list((tmp_path / "runs").rglob("predictions.jsonl"))


@pytest.mark.commands
def test_a_run_or_sweep_the_cap_stopped_exits_with_3_and_says_its_cap_in_full(server, tmp_path, capsys):
    """Scripts and schedulers tell a run the cap stopped from a complete one: ``ark run`` (one run and a
    sweep) exits with INCOMPLETE_EXIT; a cap below a cent is printed as given, not as $0.00."""
    INCOMPLETE_EXIT = 3   # the documented status (docs/configuration.md), not 0, 1 (Python) or 2 (refused)
    assert main(["run", *_overrides(server, tmp_path, "limit=4", "max_cost_usd=0.0001")]) == INCOMPLETE_EXIT
    out = capsys.readouterr().out
    assert "INCOMPLETE (budget): the spending cap max_cost_usd=0.0001 is reached" in out
    assert "capped at $0.0001" in out and server.calls == 0   # no call fits under a hundredth of a cent
    # a sweep with one point stopped by the cap: the launching process exits 3 and names the run
    assert main(["run", "-m", *_overrides(server, tmp_path, "limit=3,4", "max_cost_usd=0.05", "concurrency=1",
                                          f"hydra.sweep.dir={tmp_path}/runs/default")]) == INCOMPLETE_EXIT
    err = capsys.readouterr().err
    assert "INCOMPLETE:" in err and "ark-gpt-4.1-t5_n2-full_test_limit4" in err and "(exit 3)" in err
    # once complete (a higher cap, the same command), 0
    assert main(["run", "-m", *_overrides(server, tmp_path, "limit=3,4", "max_cost_usd=5", "concurrency=1",
                                          f"hydra.sweep.dir={tmp_path}/runs/default")]) == 0
    assert main(["run", *_overrides(server, tmp_path, "limit=4", "max_cost_usd=5")]) == 0


@pytest.mark.commands
def test_python_experiments_run_exits_3_when_the_cap_stops_the_run(server, tmp_path):
    """``python experiments/run.py`` (Hydra's own entry point) exits with 3 for a run the cap stopped."""
    import subprocess
    import sys

    from tests.helpers.paths import REPO

    done = subprocess.run([sys.executable, str(REPO / "experiments" / "run.py"),
                           *_overrides(server, tmp_path, "limit=3", "max_cost_usd=0.001")],
                          capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL,
                          env={**__import__("os").environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 3, done.stdout + done.stderr
    assert "INCOMPLETE (budget): the spending cap max_cost_usd=0.001 is reached" in done.stdout


def test_the_ledger_bills_cached_input_as_the_provider_does_and_most_input_is_cached(monkeypatch, tmp_path):
    """The demo with ARK at T_max = 10, n = 3 on GPT-4.1 prices, the provider caching prompts by its
    documented rule (the scripted server's accounting, on the bytes the client sends): at least 70% of the
    input tokens are cached (every prompt begins with the same system prompt and tool schemas, and each
    step's with the step before), and the run's ledger holds, to the cent's billionth, the bill the
    provider's usage reports come to at the price table's rates, cached tokens at the cached-input rate."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-scripted-" + "0" * 20)
    with ScriptedServer(responder=ark_like, prompt_cache=True) as server:
        overrides = [*_overrides(server, tmp_path, "limit=30", "concurrency=4", "yes=true"),
                     "budget.agent.t_max=10", "budget.agent.n_agents=3"]
        summary = run(compose(overrides))
    assert summary["status"] == "complete"
    # what does not change within a run comes first, byte for byte the same in every request
    heads = {json.dumps(r["tools"]) + json.dumps(r["messages"][0]) for r in server.requests}
    assert len(heads) == 1 and all(r["messages"][0]["role"] == "system" for r in server.requests)
    usages = server.usages
    assert len(usages) >= 200   # a sweep of a few hundred calls
    prompt = sum(u["prompt_tokens"] for u in usages)
    cached = sum(u["prompt_tokens_details"]["cached_tokens"] for u in usages)
    print(f"cached share {cached / prompt:.3f} of {prompt:,} prompt tokens over {len(usages)} calls")
    assert cached >= 0.70 * prompt
    price = PRICES["gpt-4.1"]
    bill = sum(price.cost(u["prompt_tokens"], u["completion_tokens"], u["prompt_tokens_details"]["cached_tokens"])
               for u in usages)
    ledger_path = Path(compose(overrides).out_dir) / RUN_LEDGER
    ledger = Ledger(ledger_path)
    assert ledger.calls() == len(usages)
    assert ledger.total() == pytest.approx(bill, rel=1e-9)
    lines = [json.loads(x) for x in ledger_path.read_text().splitlines()]
    assert sum(x["cached"] for x in lines if "usd" in x) == cached   # settlements and payments; holds bill nothing
    # the discount is real: at the full input rate the same calls cost more than twice as much
    full = sum(_price(u["prompt_tokens"], u["completion_tokens"]) for u in usages)
    assert ledger.total() < full / 2


def test_a_pilots_forecast_with_cached_input_holds_what_the_run_then_pays(monkeypatch, tmp_path):
    """A 10-query pilot, billed with cached input, forecasts the other 30 queries: what the run then pays
    (its ledger, the pilot's replies coming from the LLM cache) lies in the forecast's 95% interval, below
    the same calls at the full input rate, which the forecast states too."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-scripted-" + "0" * 20)
    with ScriptedServer(responder=ark_like, prompt_cache=True) as server:
        overrides = [*_overrides(server, tmp_path, "limit=40", "yes=true"), "budget.agent.t_max=10",
                     "budget.agent.n_agents=3"]
        run(compose([*overrides, "pilot=true", "estimate_queries=10"]))
        (f,) = run(compose([*overrides, "estimate=true", "estimate_queries=10"]))["estimate"]
        before = len(server.usages)
        summary = run(compose(overrides))
        usages = server.usages[before:]
    assert (f["rests_on"], f["to_pay"]) == (10, 30) and summary["status"] == "complete"
    paid = Ledger(Path(compose(overrides).out_dir) / RUN_LEDGER).total()
    assert paid == pytest.approx(summary["paid_usd"])
    assert f["low"] <= paid <= f["high"]
    full = sum(_price(u["prompt_tokens"], u["completion_tokens"]) for u in usages)
    assert f["full_usd"] > f["high"] and paid < full / 2


def test_runs_whose_schemas_change_each_step_lose_the_discount_and_the_forecast_says_so(monkeypatch, tmp_path):
    """constrain_ids writes the ids shown so far into the tool schemas, which come before the messages: each
    step's prompt no longer begins with the step before's, and most input is billed at the full rate."""
    from ark.config.plan import header

    monkeypatch.setenv("OPENAI_API_KEY", "sk-scripted-" + "0" * 20)
    shares = {}
    for constrain in ("false", "true"):
        with ScriptedServer(responder=ark_like, prompt_cache=True) as server:
            overrides = [*_overrides(server, tmp_path / constrain, "limit=10", "yes=true"), "budget.agent.t_max=10",
                         "budget.agent.n_agents=3", f"budget.agent.constrain_ids={constrain}"]
            run(compose(overrides))
        shares[constrain] = (sum(u["prompt_tokens_details"]["cached_tokens"] for u in server.usages)
                             / sum(u["prompt_tokens"] for u in server.usages))
        said = "billed without the cached-input discount" in header(compose(overrides))
        assert said == (constrain == "true")
    assert shares["true"] < 0.5 < 0.7 <= shares["false"]
