"""Benchmark the cost forecast: a 10-query pilot's forecast against the measured cost of the whole run.

    python scripts/bench_forecast.py                    # the demo's test split (480 queries), ARK t20_n3, GPT-4.1 prices
    python scripts/bench_forecast.py --split val --pilot 20

One run of ``ark.config.evaluation.run`` with ``pilot=true`` (the pilot: the run on its first ``--pilot``
queries) and one with ``estimate=true`` (the forecast of the rest), then the real run over the whole split, both with the real
``gpt-4.1`` backbone config sent to the scripted OpenAI-compatible server (tests/helpers/scripted_server.py),
which answers with `tests.helpers.policies.ark_like`: trajectories shaped like GPT-4.1's (a search of the
question, then searches and neighbor explorations, then select and finish; 2 to 12 steps per agent) and
the usage a tokenizer would count (every prompt carries the observations gathered so far), and the
cached tokens OpenAI's prompt cache would report (``prompt_cache=True``: its documented rule on the bytes the
client sends), which the run is billed for at the cached-input rate. Reported:

  - the forecast of what the run still pays (the queries after the pilot) and its 95% interval, against
    what it paid (its ledger), and whether that falls inside;
  - the same for the run's whole cost (the pilot's queries included);
  - every other disjoint slice of ``--pilot`` queries taken as the pilot (forecasts made from the run's
    own per query costs with `ark.cost.forecast.forecast`): how many of their intervals hold the cost of
    the rest of the run (the interval's coverage);
  - the token counts the run measured (LLM calls per agent, first prompt, what each step adds to the
    prompt, completion tokens per call), the ones `ark.cost.forecast.TokenModel.typical` carries, and what
    that model and the run's settings' worst case say per query;
  - the share of input tokens the provider served from its prompt cache, measured and as the token model
    predicts it from the prompt's structure (`TokenModel.cached_tokens`);
  - Table 1's estimate (two ARK rows, three test splits) at the standard price, at the expected price
    with cached input, and at the batch API's price (``backbone.batch=true``) of each.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def token_stats(run_dir: Path) -> dict:
    """Per agent and per step token counts of a run's trajectories."""
    from ark.run.rundir import RunDir

    run = RunDir(run_dir)
    steps, first, growth, completion = [], [], [], []
    for _, trajs in run.iter_trajectories():
        for t in trajs:
            prompts = [s["prompt_tokens"] for s in t["steps"]]
            steps.append(len(prompts))
            if prompts:
                first.append(prompts[0])
            growth += [b - a for a, b in zip(prompts, prompts[1:])]
            completion += [s["completion_tokens"] for s in t["steps"]]
    return {"agents": len(steps), "steps_per_agent": statistics.mean(steps), "first_prompt": statistics.mean(first),
            "prompt_growth_per_step": statistics.mean(growth), "completion_per_call": statistics.mean(completion)}


def slices_coverage(run_dir: Path, pilot: int) -> tuple[int, int]:
    """Of the disjoint slices of ``pilot`` queries taken as the pilot, how many forecasts hold the cost of
    the rest of the run."""
    from ark.cost.forecast import QueryCost, forecast
    from ark.run.measured import measured_costs

    costs = list(measured_costs([run_dir]).values())
    total = sum(c.usd for c in costs)
    inside = n = 0
    for start in range(0, len(costs) - pilot + 1, pilot):
        sample: list[QueryCost] = costs[start:start + pilot]
        f = forecast("slice", sample, to_pay=len(costs) - pilot, seed=start)
        rest = total - sum(c.usd for c in sample)
        inside += f.low <= rest <= f.high
        n += 1
    return inside, n


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--split", default="test")
    p.add_argument("--pilot", type=int, default=10, help="estimate_queries: the pilot's queries")
    p.add_argument("--limit", type=int, default=None, help="the run's queries (default: the whole split)")
    a = p.parse_args(argv)

    from ark.config.compose import compose
    from ark.config.evaluation import run
    from ark.cost.forecast import TokenModel
    from ark.cost.prices import PRICES
    from tests.helpers.paths import DEMO_ROOT
    from tests.helpers.policies import ark_like
    from tests.helpers.scripted_server import ScriptedServer

    os.environ.setdefault("OPENAI_API_KEY", "sk-scripted-" + "0" * 20)
    tmp = Path(tempfile.mkdtemp(prefix="bench_forecast_"))
    with ScriptedServer(responder=ark_like, prompt_cache=True) as server:
        overrides = [f"paths.data={DEMO_ROOT}", "graph=demo", "backbone=gpt-4.1", f"+backbone.base_url={server.base_url}",
                     f"paths.runs={tmp}/runs", f"paths.llm_cache={tmp}/llm.sqlite", f"split={a.split}",
                     "progress=false", "n_boot=200", "yes=true", *([f"limit={a.limit}"] if a.limit else [])]
        t0 = time.perf_counter()
        run(compose([*overrides, "pilot=true", f"estimate_queries={a.pilot}"]))
        (fc,) = run(compose([*overrides, "estimate=true"]))["estimate"]
        t1 = time.perf_counter()
        summary = run(compose(overrides))
        t2 = time.perf_counter()
        calls = server.calls
        usages = server.usages
    run_dir = Path(compose(overrides).out_dir)
    paid, whole = summary["paid_usd"], summary["cost_usd"]
    pilot_cost = whole - paid
    print(f"\nrun: {summary['n']} queries of demo/{a.split}, ARK t20_n3 on gpt-4.1 prices; {calls:,} LLM calls; "
          f"pilot + forecast {t1 - t0:.0f} s, run {t2 - t1:.0f} s")
    print(f"pilot: {fc['rests_on']} queries, ${pilot_cost:.2f}")
    rows = [("still to pay", fc["usd"], fc["low"], fc["high"], paid),
            ("whole run", fc["usd"] + pilot_cost, fc["low"] + pilot_cost, fc["high"] + pilot_cost, whole)]
    print(f"{'':14} {'forecast':>9} {'95% interval':>19} {'measured':>9}  inside  measured/forecast")
    for name, mid, lo, hi, got in rows:
        print(f"{name:14} {mid:9.2f} [{lo:7.2f}, {hi:7.2f}] {got:9.2f}  {'yes' if lo <= got <= hi else 'NO':>6}  "
              f"{got / mid:.3f}")
    inside, n = slices_coverage(run_dir, a.pilot)
    print(f"other {a.pilot}-query pilots (disjoint slices of this run): {inside} of {n} intervals hold the rest "
          f"({100 * inside / n:.0f}%)")
    stats = token_stats(run_dir)
    print("measured tokens: " + ", ".join(f"{k} {v:,.1f}" for k, v in stats.items()))
    price = PRICES["gpt-4.1"]
    per_query = summary["cost_usd"] / summary["n"]
    typical = TokenModel.typical()
    worst = TokenModel.worst(20, 2000, 1024)
    print(f"per query (3 agents): measured ${per_query:.4f}; TokenModel.typical ${typical.query(3, price).usd:.4f} "
          f"({json.dumps(typical.__dict__)}); worst case ${worst.query(3, price).usd:.4f}")
    share = sum(u["prompt_tokens_details"]["cached_tokens"] for u in usages) / sum(u["prompt_tokens"] for u in usages)
    model = measured_model(stats)
    print(f"input served from the provider's prompt cache: measured {share:.1%} of {len(usages):,} calls' prompt "
          f"tokens; the token model's prompt structure {model.cached_tokens() / model.agent()[0]:.1%}")
    # every query's calls reached the server once (the run replayed the pilot's from the LLM cache)
    full_per_query = sum(price.cost(u["prompt_tokens"], u["completion_tokens"]) for u in usages) / summary["n"]
    print(f"per query at the full input rate: ${full_per_query:.4f} (billed, cached input included: ${per_query:.4f})")
    table1(full_per_query, stats)
    return 0


def measured_model(stats: dict):
    """The forecast's token model with the run's measured token counts."""
    from ark.cost.forecast import TokenModel

    return TokenModel(system_tokens=stats["first_prompt"] - 40, question_tokens=40, steps=stats["steps_per_agent"],
                      observation_tokens=stats["prompt_growth_per_step"] - stats["completion_per_call"],
                      reply_tokens=stats["completion_per_call"])


# test queries per graph, from the paper's appendix table (STaRK's split files decide at run time)
PAPER_TEST_QUERIES = {"amazon": 1638, "mag": 2664, "prime": 2016}


def table1(per_query_gpt41: float, stats: dict) -> None:
    """What Table 1's ARK rows (GPT-4.1 and GPT-4o, n = 3, T_max = 20, on the three test splits) would cost,
    per graph and backbone: at this run's measured cost per query at the full input rate
    (``per_query_gpt41``); with observations twice as long as the demo's (STaRK's longer documents fill the
    160-character snippets); and in the worst case of those settings. Each at the standard price, at
    the expected price with the cached share of the prompt's structure (`TokenModel.cached_tokens`) at the
    cached-input rate, and at the batch API's price of both (`ark.cost.prices.Price.batch`). The token
    model is the same for every graph (the demo's trajectories), so a graph's cost is its query count
    times the cost of a query."""
    from ark.cost.forecast import TokenModel
    from ark.cost.prices import BATCH_DISCOUNT, BATCH_PRICES_AS_OF, CACHED_PRICES_AS_OF, PRICES, PRICES_AS_OF

    measured = measured_model(stats)
    longer = TokenModel(**{**measured.__dict__, "observation_tokens": 2 * measured.observation_tokens})
    worst = TokenModel.worst(20, 2000, 1024)
    g41, g4o = PRICES["gpt-4.1"], PRICES["gpt-4o"]
    # per query (3 agents): the run's own cost for GPT-4.1, the token model's ratio for the others
    scale = per_query_gpt41 / measured.query(3, g41).usd
    cases = (("measured cost per query", measured, scale), ("observations twice as long", longer, scale),
             ("worst case (20 steps, full budgets)", worst, 1.0))
    n = sum(PAPER_TEST_QUERIES.values())
    bases = ((False, False, f"{PRICES_AS_OF} (standard: every input token at the full rate):"),
             (True, False, f"{CACHED_PRICES_AS_OF} with cached input (expected: the prompt structure's cached share "
                           "at the cached-input rate):"),
             (False, True, f"{BATCH_PRICES_AS_OF}, batch API (backbone.batch=true: every rate at "
                           f"{BATCH_DISCOUNT:.0%}, every input token at the full batch rate):"),
             (True, True, f"{BATCH_PRICES_AS_OF}, batch API with cached input (the cached share at the batch "
                          "cached-input rate):"))
    for cached, batch, said in bases:
        p41, p4o = (g41.batch(), g4o.batch()) if batch else (g41, g4o)
        print("\nTable 1 estimate, ARK t20_n3 on the paper's test splits, US$ at ark/cost/prices.py's prices of "
              + said)
        print(f"{'':36} {'graph':>7} {'queries':>8} {'GPT-4.1':>10} {'GPT-4o':>10} {'both':>10}")
        for name, model, k in cases:
            q41, q4o = k * model.query(3, p41, cached).usd, k * model.query(3, p4o, cached).usd
            for graph, q in (*PAPER_TEST_QUERIES.items(), ("total", n)):
                a, b = q * q41, q * q4o
                print(f"{name if graph == 'amazon' else '':36} {graph:>7} {q:8,} {a:10,.0f} {b:10,.0f} "
                      f"{a + b:10,.0f}" + (f"   (${q41:.4f} / ${q4o:.4f} per query)" if graph == "total" else ""))

if __name__ == "__main__":
    sys.exit(main())
