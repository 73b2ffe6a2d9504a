"""scripts/plan_reproduction.py: the plan of the full reproduction prices a trajectory as a run's forecast
does (`ark.cost.forecast.TokenModel`, `ark.cost.prices`), its Table 1 row adds up by hand for a simple
token profile, and its token profile is measured from ARK's own requests to the scripted server."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from ark.cost.forecast import TokenModel
from ark.cost.prices import PRICES
from tests.helpers.paths import DEMO_ROOT, REPO


@pytest.fixture(scope="module")
def plan():
    spec = importlib.util.spec_from_file_location("plan_reproduction", REPO / "scripts" / "plan_reproduction.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod      # its dataclasses look their module up while it loads
    spec.loader.exec_module(mod)
    yield mod
    sys.modules.pop(spec.name, None)


def _profile(plan):
    # every step adds 500 tokens (its observation 400 and the assistant's call 100), on every graph
    return plan.Profile(p0=1000, search_step=500, neighbor_step=500, neighbor_step_full=500, assistant=100,
                        line_full=60)


def test_an_agent_is_priced_as_the_forecasts_token_model_prices_it(plan):
    prof = _profile(plan)
    billed, new, out = plan.agent_tokens(prof, "prime", 3)
    # the conversation at each of 3 calls: 1000, 1500, 2000; each token computed once: 1000 + 2 x 500
    assert (billed, new, out) == (4500, 2000, 300)
    model = plan.token_model(prof, "prime", 3)
    assert model.agent() == (billed, out)
    assert model == TokenModel(system_tokens=1000, question_tokens=0, steps=3, observation_tokens=400,
                               reply_tokens=100)


def test_the_table1_row_adds_up_by_hand(plan):
    table = plan.plan(_profile(plan), steps_typical=2, steps_max=20, tpm=2e6, rpm=1e4, prefill_per_s=1e4,
                      decode_per_s=1500)
    row = next(line for line in table.splitlines() if line.startswith("| Table 1"))
    agents = 3 * (2016 + 2664 + 1638)          # n = 3 on the three test splits, per backbone
    g41, g4o = PRICES["gpt-4.1"], PRICES["gpt-4o"]

    def per_agent(prompt, completion):
        return sum((prompt * p.input_per_m + completion * p.output_per_m) / 1e6 for p in (g41, g4o))

    typical = agents * per_agent(2 * 1000 + 500, 2 * 100)           # 2 steps: 1000 + 1500 prompt tokens
    bound = agents * per_agent(20 * 1000 + 500 * 190, 20 * 100)     # 20 steps: sum of t x 500 for t < 20
    assert f"| ${typical:,.0f} / ${bound:,.0f} |" in row            # $281 / $10,491
    assert f"| {2 * agents * 2 / 1e3:,.0f}k / {2 * agents * 20 / 1e3:,.0f}k |" in row   # LLM calls, both backbones
    assert f"| {2 * agents:,} |" in row


def test_the_profile_is_measured_from_arks_own_requests(plan):
    prof = plan.measure(n_queries=3, steps=4, data_root=DEMO_ROOT)
    # the first request carries the system prompt and the tool schemas: well over a thousand tokens
    assert prof.p0 > 1000
    assert prof.search_step > prof.assistant > 0 and prof.neighbor_step > prof.assistant
    # a STaRK neighborhood: 20 full-width lines within the 2,000-token observation budget
    assert prof.neighbor_step_full <= 2000 + prof.neighbor_step
    assert prof.neighbor_step_full >= 20 * prof.line_full
