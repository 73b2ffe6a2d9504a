"""What a paid run will cost before it runs: the arithmetic of the forecast from per query costs already
measured, with a bootstrap interval, and a token model for when nothing is measured yet.

Measured costs (`QueryCost`: one query's cost, LLM calls, i.e. steps of its agents, and tokens) are read
from run directories of the same settings by `ark.run.measured` (every identity key equal but those that
cannot change what the agents do, `COST_NEUTRAL`, such as ``limit`` or the bootstrap ``seed``:
`cost_identity`). Their LLM replies are in the LLM cache, so those queries cost nothing more when a run
of the same settings meets them again: a run pays only for its queries that no run of its settings has
finished.

`forecast` turns the measured costs into the expected spend of the queries still to pay for, with a
95% interval from the spread of per query cost: the bootstrap distribution of the mean (``n_boot``
resamples), read at the expanded percentiles that give small samples their due width (Hesterberg 2015:
the percentile interval is too narrow by about sqrt((n-1)/n) and a t quantile; with 10 queries the
2.5%/97.5% points become 0.9%/99.1%), times the queries to pay for. The forecast says how many queries
it rests on. A sweep's total adds the points' bootstrap draws, so its interval is one of the sum.

Prices: a measured query's cost is what its replies were billed, the prompt tokens the provider served
from its prompt cache at the cached-input rate (`ark.cost.prices`), so the measured forecast carries the
cached share the pilot met. Each forecast also says what its queries would cost at the full input rate
(``full_usd``, the price if the provider cached nothing). Before any pilot, `TokenModel.cached_tokens`
models the cached share from the prompt's structure: every prompt begins with the same system prompt and
tool schemas, and each step's prompt begins with the whole prompt of the step before. Runs whose tool
schemas change per step (``constrain_ids``) break that prefix: their forecast assumes no discount.

`TokenModel` is the fallback when nothing is measured: each step's prompt is the system prompt and tool
schemas, the question, and every earlier reply and observation, so a trajectory of ``s`` steps sends
``s * (system + question) + (observation + reply) * s * (s - 1) / 2`` prompt tokens. `TokenModel.worst`
is the worst case of a run's settings (every agent runs ``t_max`` steps, every observation fills the
observation budget, every reply its ``max_tokens``), `TokenModel.typical` the token counts measured on
scripted ARK trajectories (``scripts/bench_forecast.py``).

    costs = measured_costs(same_settings_dirs(Path("results/runs"), "prime", identity))   # ark.run.measured
    f = forecast("table1/prime/ark-gpt-4.1-t20_n3-full_test", list(costs.values()), to_pay=2006, known_usd=3.1)
    print(format_table([f]))
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ark.cost.prices import CACHE_MIN_TOKENS, CACHE_STEP_TOKENS

# identity keys that cannot change what the agents send and receive (so neither the cost)
COST_NEUTRAL = ("limit", "seed", "n_boot", "metrics_mode", "torchmetrics", "cut", "count_failed_as_miss",
                "retriever.top")
N_BOOT = 2000


@dataclass(frozen=True)
class QueryCost:
    """What one finished query cost: US$, LLM calls (its agents' steps), prompt and completion tokens."""

    query_id: str
    usd: float
    calls: int
    prompt_tokens: int
    completion_tokens: int


def cost_identity(identity: dict) -> dict:
    """The identity keys that decide a run's LLM calls (`COST_NEUTRAL` left out)."""
    return {k: v for k, v in identity.items() if k not in COST_NEUTRAL}


@dataclass
class Forecast:
    """The forecast of one run (a sweep point): its queries, what is known, what it will still pay."""

    point: str
    queries: int                     # queries the run selects
    done: int = 0                    # finished in its own directory: nothing to do
    replayed: int = 0                # finished by a run of the same settings: answered by the LLM cache
    to_pay: int = 0                  # still to pay for
    calls: float = 0.0               # expected LLM calls of the queries to pay for
    prompt_tokens: float = 0.0
    completion_tokens: float = 0.0
    usd: float = 0.0                 # expected US$ still to pay
    full_usd: float = 0.0            # the same at the full input rate (no prompt-cache discount)
    low: float = 0.0                 # 95% interval of usd
    high: float = 0.0
    known_usd: float = 0.0           # what the done and replayed queries cost when they were paid for
    rests_on: int = 0                # measured queries the forecast rests on
    basis: str = "measured"          # "measured" | "worst case" | "free"
    typical_usd: float | None = None # a worst case's queries under TokenModel.typical: what a pilot measures
    draws: np.ndarray | None = field(default=None, repr=False)   # bootstrap draws of usd

    @property
    def total_usd(self) -> float:
        """What the run costs in all: the known queries' cost and the expected rest."""
        return self.known_usd + self.usd

    def as_summary(self) -> dict:
        """The forecast as metrics.json and W&B keep it."""
        return {"queries": self.queries, "done": self.done, "replayed": self.replayed, "to_pay": self.to_pay,
                "calls": round(self.calls), "prompt_tokens": round(self.prompt_tokens),
                "completion_tokens": round(self.completion_tokens), "usd": self.usd, "full_usd": self.full_usd,
                "low": self.low, "high": self.high, "rests_on": self.rests_on, "basis": self.basis,
                **({"typical_usd": self.typical_usd} if self.typical_usd is not None else {})}


def _expanded_quantiles(n: int, alpha: float = 0.05) -> tuple[float, float]:
    """Percentiles of the bootstrap distribution of a mean of ``n`` that cover about 1 - alpha
    (Hesterberg's expanded percentile interval)."""
    from scipy import stats

    if n < 2:
        return alpha / 2, 1 - alpha / 2
    z = math.sqrt(n / (n - 1)) * stats.t.ppf(1 - alpha / 2, n - 1)
    lo = float(stats.norm.cdf(-z))
    return lo, 1 - lo


def forecast(point: str, samples: Sequence[QueryCost], to_pay: int, queries: int | None = None, done: int = 0,
             replayed: int = 0, known_usd: float = 0.0, n_boot: int = N_BOOT, seed: int = 0,
             price=None) -> Forecast:
    """The expected spend of ``to_pay`` queries whose costs are like ``samples`` (see the module doc);
    ``price`` (`ark.cost.prices.Price`) prices their tokens at the full input rate too (``full_usd``)."""
    f = Forecast(point, queries if queries is not None else to_pay + done + replayed, done, replayed, to_pay,
                 known_usd=known_usd, rests_on=len(samples))
    if to_pay == 0:
        f.draws = np.zeros(n_boot)
        return f
    if not samples:
        raise ValueError(f"{point}: no measured query to forecast from")
    usd = np.array([s.usd for s in samples], dtype=float)
    f.calls = to_pay * float(np.mean([s.calls for s in samples]))
    f.prompt_tokens = to_pay * float(np.mean([s.prompt_tokens for s in samples]))
    f.completion_tokens = to_pay * float(np.mean([s.completion_tokens for s in samples]))
    f.usd = to_pay * float(usd.mean())
    f.full_usd = f.usd if price is None else max(f.usd, price.cost(f.prompt_tokens, f.completion_tokens))
    rng = np.random.default_rng(seed)
    means = usd[rng.integers(0, len(usd), size=(n_boot, len(usd)))].mean(axis=1)
    f.draws = to_pay * means
    lo, hi = _expanded_quantiles(len(usd))
    f.low, f.high = (float(np.quantile(f.draws, q)) for q in (lo, hi))
    return f


def total(forecasts: Sequence[Forecast], n_boot: int = N_BOOT) -> Forecast:
    """The sum of a sweep's forecasts; its interval from the sum of the points' bootstrap draws."""
    t = Forecast("total", sum(f.queries for f in forecasts), sum(f.done for f in forecasts),
                 sum(f.replayed for f in forecasts), sum(f.to_pay for f in forecasts),
                 sum(f.calls for f in forecasts), sum(f.prompt_tokens for f in forecasts),
                 sum(f.completion_tokens for f in forecasts), sum(f.usd for f in forecasts),
                 sum(f.full_usd for f in forecasts), known_usd=sum(f.known_usd for f in forecasts),
                 rests_on=sum(f.rests_on for f in forecasts))
    measured = [f for f in forecasts if f.basis == "measured" and f.draws is not None]
    worst = [f for f in forecasts if f.basis == "worst case"]
    if measured:
        lo, hi = _expanded_quantiles(min(f.rests_on for f in measured if f.rests_on) if any(
            f.rests_on for f in measured) else 2)
        draws = np.sum([f.draws for f in measured], axis=0)
        t.low, t.high = float(np.quantile(draws, lo)), float(np.quantile(draws, hi))
    t.low += sum(f.usd for f in worst)
    t.high += sum(f.usd for f in worst)
    t.basis = "worst case" if worst and not measured else ("measured" if not worst else "measured + worst case")
    return t


@dataclass(frozen=True)
class TokenModel:
    """Tokens of one agent's trajectory when nothing is measured (see the module doc)."""

    # defaults: what scripts/bench_forecast.py measured on 1,440 scripted GPT-4.1-shaped trajectories over
    # the demo's test split (first prompt 1,893 tokens, +517 per step, 31.8 completion tokens per call)
    system_tokens: float = 1850     # the system prompt (about 4,000 characters) and tool schemas (about 2,600)
    question_tokens: float = 40
    steps: float = 4.7              # LLM calls per agent
    observation_tokens: float = 485 # what a step's observation adds to the prompt
    reply_tokens: float = 32        # completion tokens per step

    def agent(self) -> tuple[float, float]:
        """(prompt, completion) tokens of one agent's trajectory."""
        s = self.steps
        prompt = s * (self.system_tokens + self.question_tokens) + (self.observation_tokens + self.reply_tokens) \
            * s * (s - 1) / 2
        return prompt, s * self.reply_tokens

    def cached_tokens(self, min_tokens: int = CACHE_MIN_TOKENS, step: int = CACHE_STEP_TOKENS) -> float:
        """Prompt tokens of one agent's trajectory that the provider serves from its prompt cache, by its
        rule (`ark.cost.prices.CACHE_MIN_TOKENS`, `CACHE_STEP_TOKENS`): the first prompt's system prompt
        and tool schemas (sent before, by another agent or query), each later prompt the whole prompt of
        the step before (whole steps of 128 tokens, from 1,024 on)."""
        def served(prefix: float) -> float:
            k = math.floor(prefix / step) * step
            return k if k >= min_tokens else 0.0

        s = max(1, math.floor(self.steps))
        first = self.system_tokens + self.question_tokens
        prompts = [first + (self.observation_tokens + self.reply_tokens) * i for i in range(s)]
        cached = served(self.system_tokens) + sum(served(p) for p in prompts[:-1])
        return cached * self.steps / s   # a fractional step count scales the whole trajectory

    def query(self, n_agents: int, price, cached: bool = False) -> QueryCost:
        """One query of ``n_agents`` agents under this model, priced at ``price`` (`ark.cost.prices.Price`):
        at the full input rate, or with ``cached`` the share `cached_tokens` at the cached-input rate."""
        prompt, completion = (n_agents * x for x in self.agent())
        hit = n_agents * self.cached_tokens() if cached else 0.0
        usd = price.cost(prompt, completion, hit)
        return QueryCost("model", usd, round(n_agents * self.steps), round(prompt), round(completion))

    @classmethod
    def typical(cls) -> "TokenModel":
        """The token counts of scripted ARK trajectories on the demo graph (``scripts/bench_forecast.py``)."""
        return cls()

    @classmethod
    def worst(cls, t_max: int, max_observation_tokens: int, max_tokens: int) -> "TokenModel":
        """Every agent runs ``t_max`` steps, each observation fills the observation budget and each reply
        its ``max_tokens`` (one tool call per step)."""
        return cls(steps=float(t_max), observation_tokens=float(max_observation_tokens),
                   reply_tokens=float(max_tokens))


def worst_case(point: str, to_pay: int, queries: int, model: TokenModel, n_agents: int, price, done: int = 0,
               replayed: int = 0, typical: TokenModel | None = None) -> Forecast:
    """The worst case of ``to_pay`` queries under ``model`` (usually `TokenModel.worst`), as a Forecast;
    with ``typical``, also what they cost under that model (``typical_usd``)."""
    q = model.query(n_agents, price)
    f = Forecast(point, queries, done, replayed, to_pay, to_pay * q.calls, to_pay * q.prompt_tokens,
                 to_pay * q.completion_tokens, to_pay * q.usd, to_pay * q.usd, basis="worst case")
    f.low = f.high = f.usd
    if typical is not None:
        f.typical_usd = to_pay * typical.query(n_agents, price).usd
    return f


def _money(x: float) -> str:
    from ark.cost.prices import money

    return money(x)


def format_table(forecasts: Sequence[Forecast], header: str = "") -> str:
    """The forecasts as a table, one row per point and a total row for several."""
    rows = [("point", "queries", "to pay", "LLM calls", "prompt tok", "compl. tok", "US$ to pay [95%]",
             "at full rate", "run total US$", "rests on")]
    shown = list(forecasts) + ([total(forecasts)] if len(forecasts) > 1 else [])
    for f in shown:
        if f.basis == "free":
            money, rests, full = "free", "-", "free"
        else:
            full = _money(f.full_usd)
            money = f"{_money(f.usd)} [{_money(f.low)}, {_money(f.high)}]"
            rests = (f"{f.rests_on} queries" if f.basis == "measured" else f.basis) if f.point != "total" else ""
        rows.append((f.point, f"{f.queries:,}", f"{f.to_pay:,}", f"{f.calls:,.0f}", f"{f.prompt_tokens:,.0f}",
                     f"{f.completion_tokens:,.0f}", money, full, "free" if f.basis == "free" else _money(f.total_usd),
                     rests))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [header] if header else []
    for r in rows:
        lines.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))))
    return "\n".join(lines)


