"""The forecast of a paid run (`ark.cost.forecast`): its interval covers what the rest of a run costs about
as often as it says, it rests on run directories of the same settings only, and the token model adds up."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ark.cost.forecast import QueryCost, TokenModel, forecast, total
from ark.run.measured import measured_costs, same_settings_dirs
from ark.cost.prices import Price


def _costs(values) -> list[QueryCost]:
    return [QueryCost(str(i), float(v), 10, 1000, 50) for i, v in enumerate(values)]


def test_the_interval_of_a_ten_query_pilot_covers_the_rest_of_the_run_as_often_as_it_says():
    """Per query costs as skewed as an agent's (lognormal, a few long trajectories): a pilot of 10, the
    forecast of the next 470, checked against what those 470 cost, over 300 simulated runs."""
    rng = np.random.default_rng(7)
    inside = 0
    for trial in range(300):
        pilot, rest = rng.lognormal(-2.5, 0.6, 10), rng.lognormal(-2.5, 0.6, 470)
        f = forecast("p", _costs(pilot), to_pay=470, seed=trial, n_boot=1000)
        inside += f.low <= rest.sum() <= f.high
    assert 0.88 <= inside / 300 <= 0.995      # a 95% interval, on 10 queries: not much below 95%


def test_the_small_sample_interval_is_wider_than_the_plain_percentiles():
    samples = _costs(np.linspace(0.05, 0.15, 10))
    f = forecast("p", samples, to_pay=100, seed=0)
    plain = np.quantile(f.draws, [0.025, 0.975])
    assert f.low < plain[0] and f.high > plain[1]
    assert f.usd == pytest.approx(100 * 0.10) and f.rests_on == 10
    assert (f.calls, f.prompt_tokens, f.completion_tokens) == (1000, 100_000, 5_000)


def test_a_sweeps_total_adds_its_points():
    a = forecast("a", _costs([0.1, 0.2, 0.3]), to_pay=10, seed=1)
    b = forecast("b", _costs([1.0, 1.0, 2.0]), to_pay=5, seed=2)
    t = total([a, b])
    assert t.usd == pytest.approx(a.usd + b.usd) and t.to_pay == 15
    assert a.low + b.low <= t.low + 1e-9 and t.high <= a.high + b.high + 1e-9   # a sum's spread is narrower


def test_the_token_model_adds_each_steps_growing_prompt():
    m = TokenModel(system_tokens=100, question_tokens=0, steps=3, observation_tokens=50, reply_tokens=10)
    # steps' prompts: 100, 100 + 60, 100 + 120
    assert m.agent() == (480, 30)
    q = m.query(2, Price(1.0, 10.0))
    assert (q.prompt_tokens, q.completion_tokens, q.calls) == (960, 60, 6)
    assert q.usd == pytest.approx((960 * 1.0 + 60 * 10.0) / 1e6)
    worst = TokenModel.worst(t_max=20, max_observation_tokens=2000, max_tokens=1024)
    assert worst.steps == 20 and worst.agent()[0] > TokenModel.typical().agent()[0] * 10


def _run_dir(root, name, identity, costs):
    d = root / "exp" / "demo" / name
    d.mkdir(parents=True)
    (d / "run.json").write_text(json.dumps({"identity": identity}))
    lines = [{"query_id": i, "status": "ok", "cost_usd": c, "prompt_tokens": 10, "completion_tokens": 1,
              "agents": [{"steps": 2}, {"steps": 3}]} for i, c in enumerate(costs)]
    lines.append({"query_id": 99, "status": "failed", "cost_usd": 5.0})
    (d / "predictions.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return d


def test_only_runs_of_the_same_settings_are_drawn_on(tmp_path):
    base = {"backbone.model": "gpt-4.1-2025-04-14", "limit": None, "seed": 0, "split": "test"}
    same = _run_dir(tmp_path, "a_limit10", {**base, "limit": 10, "seed": 3}, [0.1, 0.2])   # limit, seed: no matter
    _run_dir(tmp_path, "b", {**base, "backbone.model": "gpt-4o-2024-08-06"}, [9.0])        # another model
    _run_dir(tmp_path, "c", {**base, "split": "val"}, [9.0])                                # other queries
    assert same_settings_dirs(tmp_path, "demo", base) == [same]
    costs = measured_costs([same])
    assert sorted(costs) == ["0", "1"]                    # ok records only
    assert costs["1"] == QueryCost("1", 0.2, 5, 10, 1)    # calls: its agents' steps


def test_amounts_are_printed_with_the_digits_that_tell_them_apart():
    """Every US$ amount ARK prints goes through `money`: amounts below a cent keep two significant digits
    (a cap of $0.0001 is not $0.00), larger ones are cents with thousands separated."""
    from ark.cost.prices import money

    amounts = [0.0001, 0.00012, 0.0002, 0.001, 0.012, 0.05, 0.41, 1234.5]
    shown = [money(a) for a in amounts]
    assert len(set(shown)) == len(amounts)
    assert [float(s.replace(",", "")) for s in shown] == pytest.approx(amounts, rel=0.05)
    assert (money(0), money(1234.5)) == ("0.00", "1,234.50")


def test_the_token_model_caches_what_each_prompt_repeats_by_the_providers_rule():
    """First prompt 1,100 tokens (the system prompt and schemas: 1,024 of them served, in whole 128-token
    steps), then 1,600 and 2,100: each later prompt is served the whole prompt before it, cut to a step
    (1,024 of 1,100; 1,536 of 1,600): 3,584 of 4,800 prompt tokens."""
    from ark.cost.forecast import TokenModel
    from ark.cost.prices import PRICES

    model = TokenModel(system_tokens=1100, question_tokens=0, steps=3, observation_tokens=400, reply_tokens=100)
    assert model.agent() == (4800, 300)
    assert model.cached_tokens() == 3584
    g41 = PRICES["gpt-4.1"]
    full, cached = model.query(2, g41), model.query(2, g41, cached=True)
    assert full.usd == pytest.approx((2 * 4800 * 2.00 + 2 * 300 * 8.00) / 1e6)
    assert cached.usd == pytest.approx((2 * (4800 - 3584) * 2.00 + 2 * 3584 * 0.50 + 2 * 300 * 8.00) / 1e6)
    # a system prompt under 1,024 tokens is never served on its own
    assert TokenModel(system_tokens=900, question_tokens=0, steps=1).cached_tokens() == 0


def test_a_forecast_states_the_full_rate_beside_the_expected_price():
    """Measured queries billed with cached input: the forecast's expected price is theirs, and its
    full-rate price is their tokens at the full input rate."""
    from ark.cost.forecast import QueryCost, format_table, forecast
    from ark.cost.prices import PRICES

    g41 = PRICES["gpt-4.1"]
    samples = [QueryCost(str(i), g41.cost(10_000 + 1000 * i, 100, cached_tokens=8192), 5, 10_000 + 1000 * i, 100)
               for i in range(4)]
    f = forecast("p", samples, to_pay=10, price=g41, n_boot=200)
    assert f.usd == pytest.approx(10 * sum(s.usd for s in samples) / 4)
    assert f.full_usd == pytest.approx(10 * ((11_500 * 2.00 + 100 * 8.00) / 1e6))
    assert f.low <= f.usd <= f.high < f.full_usd
    table = format_table([f])
    assert "at full rate" in table.splitlines()[0] and f"{f.full_usd:,.2f}" in table.splitlines()[1]
