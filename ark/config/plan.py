"""Paid runs before they start: the forecast, the pilot, the confirmation above ``confirm_usd``, and the
budget a run spends under.

A run is paid when ARK calls a backbone of a paid provider (openai, azure) at a price above zero
(`ark.cost.prices`). For a paid run (or every paid point of a sweep, `ark.config.sweep`):

- the forecast (`ark.cost.forecast`) draws on what is known first: the run's own directory, run
  directories of the same settings (whose replies the LLM cache holds, so their queries cost nothing
  again) and, within a sweep, the queries an earlier point of the same settings pays for;
- ``estimate=true`` prints the forecast per point and in total, then exits: no LLM call, nothing
  written. A paid point nothing is measured for is forecast by its worst case, and the token model of
  typical trajectories (`ark.cost.forecast.TokenModel.typical`) says what it would cost;
- ``pilot=true`` is the step that measures: for each paid point with fewer than ``estimate_queries``
  measured queries, the run itself on its first ``estimate_queries`` queries, in a directory of its own
  (`pilot_config`: ``<paths.runs>/<experiment>/<graph>/<run>_limit10_pilot``, never the run's
  ``out_dir``), forecast, confirmed and capped like any run; its replies stay in the LLM cache, so the
  real run pays for them once, and the forecast printed after it rests on it;
- a run whose spend at risk exceeds ``confirm_usd`` asks on a terminal, and without one (CI, SLURM,
  nohup) refuses in one line unless ``yes=true``. At risk: the forecast's 95% high end, or without a
  measurement the worst case of its settings (`ark.cost.forecast.TokenModel.worst`), and never more
  than ``max_cost_usd`` when a cap is set;
- the run spends under an `ark.cost.cap.Budget`: ``max_cost_usd`` caps the run's own ledger
  (``<run dir>/spend.jsonl``), or in a sweep its sweep's ledger (``sweep_ledger``), each call reserved
  there before it is sent; in a worker of a parallel sweep the budget refuses every call once the
  process that launched the sweep is gone (`ark.run.lifeline.orphaned`).

    from ark.config.plan import estimate, pilot, prepare
    forecasts = estimate([cfg])                # estimate=true: printed, no LLM call
    summaries = pilot([cfg], run)              # pilot=true: the pilots (ark.config.evaluation.run), then the forecast
    plan = prepare(cfg, source, identity)      # ark.config.evaluation.run: None for a free run
    budget = plan.budget(out_dir)              # once the run holds its directory
"""

from __future__ import annotations

import copy
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf, open_dict

from ark.cost import forecast as fc
from ark.cost.cap import Budget
from ark.cost.ledger import RUN_LEDGER, Ledger
from ark.cost.prices import BATCH_DISCOUNT, PRICES_AS_OF, Price, money
from ark.run import measured, shards

PAID_PROVIDERS = ("openai", "azure")


def price_of(cfg: DictConfig) -> Price | None:
    """The price an ARK run's backbone is billed at; None for a baseline."""
    if cfg.retriever.name != "ark":
        return None
    return instantiate(cfg.backbone).billed_price()


def is_paid(cfg: DictConfig) -> bool:
    """Whether the run pays for LLM calls (a paid provider at a price above zero)."""
    if cfg.retriever.name != "ark" or cfg.backbone.provider not in PAID_PROVIDERS:
        return False
    try:
        p = price_of(cfg)
    except ValueError:   # no price known: paid all the same (the settings check says what to set)
        return True
    return p.input_per_m > 0 or p.output_per_m > 0


def point_name(cfg: DictConfig) -> str:
    """How a forecast names a run: ``<experiment>/<graph>/<run directory>``."""
    return f"{cfg.experiment_name}/{cfg.graph.name}/{cfg.run_dir_name}"


def _run_dir(cfg: DictConfig) -> Path:
    out = Path(cfg.out_dir)
    return shards.shard_dir(out, cfg.shard) if cfg.get("shard") else out


@dataclass
class Point:
    """What is known of one run before it starts."""

    cfg: DictConfig
    name: str
    paid: bool
    keys: list[str]                                   # its selected queries
    done: set[str] = field(default_factory=set)       # finished in its own directory
    samples: dict[str, fc.QueryCost] = field(default_factory=dict)   # measured by runs of its settings
    cost_key: str = ""


def point(cfg: DictConfig, source=None, identity: dict | None = None) -> Point:
    """The known costs of the run ``cfg`` (graph queries read; nothing written). ``identity``: the run's,
    with its data's fingerprints (as run.json holds it); made here when not given."""
    from ark.config.identity import add_data_identity, run_identity

    source = instantiate(cfg.graph) if source is None else source
    queries = shards.select_queries(source.queries().split(cfg.split), cfg.limit, cfg.get("shard"))
    p = Point(cfg, point_name(cfg), is_paid(cfg), measured.selected_keys(queries))
    if not p.paid:
        return p
    if identity is None:   # as run.json records it: the settings and the data's fingerprints
        info = {"identity": run_identity(cfg)}
        add_data_identity(info, source)
        identity = info["identity"]
    p.cost_key = json.dumps(fc.cost_identity(identity), sort_keys=True, default=str)
    p.done = set(measured.measured_costs([_run_dir(cfg)]))
    p.samples = measured.measured_costs([_run_dir(cfg), *measured.same_settings_dirs(cfg.paths.runs, cfg.graph.name, identity)])
    return p


def _worst_model(cfg: DictConfig) -> fc.TokenModel:
    tools = instantiate(cfg.ablation.tools)
    return fc.TokenModel.worst(cfg.budget.agent.t_max, tools.max_observation_tokens, cfg.backbone.get("max_tokens", 1024))


def forecasts(points: Sequence[Point]) -> list[fc.Forecast]:
    """One forecast per point; a query that an earlier point of the same settings pays for is free for
    the later ones (their calls are the same, so the LLM cache answers them)."""
    paying: dict[str, set[str]] = {}
    out = []
    for i, p in enumerate(points):
        if not p.paid:
            out.append(fc.Forecast(p.name, len(p.keys), basis="free"))
            continue
        earlier = paying.setdefault(p.cost_key, set())
        done = [k for k in p.keys if k in p.done]
        replayed = [k for k in p.keys if k not in p.done and (k in p.samples or k in earlier)]
        to_pay = [k for k in p.keys if k not in p.done and k not in p.samples and k not in earlier]
        earlier.update(to_pay)
        samples = list(p.samples.values())
        mean = sum(s.usd for s in samples) / len(samples) if samples else 0.0
        known = sum(p.samples[k].usd if k in p.samples else mean for k in done + replayed)
        if samples:
            f = fc.forecast(p.name, samples, len(to_pay), len(p.keys), len(done), len(replayed), known, seed=i,
                            price=price_of(p.cfg))
        else:
            n_agents = p.cfg.budget.agent.n_agents
            f = fc.worst_case(p.name, len(to_pay), len(p.keys), _worst_model(p.cfg), n_agents, price_of(p.cfg),
                              len(done), len(replayed), typical=fc.TokenModel.typical())
        out.append(f)
    return out


def at_risk(forecast: Sequence[fc.Forecast], cap: float | None) -> float:
    """What the runs may spend: the paid forecasts' 95% high ends (worst cases without a measurement),
    never more than the cap."""
    amount = sum(f.high for f in forecast if f.basis != "free")
    return min(amount, cap) if cap is not None else amount


def batch_note(cfg: DictConfig) -> str:
    """What batch mode changes in a forecast (empty when it is off)."""
    if not OmegaConf.select(cfg, "backbone.batch", default=False):
        return ""
    return (f"; batch mode: the batch price, {BATCH_DISCOUNT:.0%} of every standard rate (ark/cost/prices.py, "
            "Price.batch), and each of the run's steps is one batch that may take up to "
            f"{str(OmegaConf.select(cfg, 'backbone.batch_window', default='24h')).replace('h', ' h')} to come back, "
            "so the run may take hours (a killed run re-attaches to its batch when rerun)")


def header(cfg: DictConfig) -> str:
    no_discount = ("; constrain_ids changes the tool schemas at every step, which breaks the prompt's shared "
                   "prefix: these runs are billed without the cached-input discount"
                   if OmegaConf.select(cfg, "budget.agent.constrain_ids", default=False) else "")
    return (f"forecast (US$ at ark/cost/prices.py's prices of {PRICES_AS_OF}; 95% intervals from the "
            "bootstrap of per query cost, cached input billed as the measured queries were; 'at full rate': "
            f"every input token at the full price; worst case where nothing is measured{no_discount}"
            f"{batch_note(cfg)}):")


def one_line(f: fc.Forecast) -> str:
    """A forecast in one line."""
    head = f"{f.to_pay:,} of {f.queries:,} queries to pay for"
    if f.basis == "measured":
        return (f"{head}, about ${money(f.usd)} [95%: {money(f.low)}, {money(f.high)}] (rests on {f.rests_on} "
                f"measured queries)")
    typical = f"; about ${money(f.typical_usd)} by the token model" if f.typical_usd is not None else ""
    return f"{head}, at most ${money(f.usd)} (the worst case of its settings: nothing measured yet{typical})"


def confirm(amount: float, cfg: DictConfig, what: str) -> None:
    """Go on when ``amount`` is within ``confirm_usd`` or ``yes=true``; else ask on a terminal, and
    without one stop with one line."""
    limit = float(cfg.confirm_usd)
    if amount <= limit or cfg.yes:
        return
    said = f"{what} may spend up to ${money(amount)}, above confirm_usd={limit:g}"
    if not sys.stdin.isatty():
        raise SystemExit(f"{said}, and there is no terminal to confirm on: rerun with yes=true to start it, "
                         "max_cost_usd=... to cap it, estimate=true to see the forecast first (free) or "
                         "pilot=true to measure it on a few queries first")
    try:
        answer = input(f"{said}. Start? [y/N] ")
    except EOFError:
        answer = ""
    if answer.strip().lower() not in ("y", "yes"):
        raise SystemExit(f"not started: {what} was not confirmed (yes=true starts it without asking)")


@dataclass
class Plan:
    """What a paid run starts with: its forecast and the ledgers of its budget."""

    cap_usd: float | None
    forecast: dict | None
    sweep_ledger: str | None
    label: str

    def budget(self, out_dir: Path) -> Budget:
        """The run's budget: its own ledger in ``out_dir``, the sweep's when it belongs to one (the cap
        then counts the sweep's spend)."""
        from ark.run.lifeline import orphaned

        sweep = Ledger(self.sweep_ledger) if self.sweep_ledger else None
        return Budget(self.cap_usd, run=Ledger(Path(out_dir) / RUN_LEDGER), sweep=sweep, label=self.label,
                      guard=orphaned)


def _sweep_forecast(cfg: DictConfig) -> dict | None:
    """This point's forecast as its sweep wrote it before launching (`ark.config.sweep`)."""
    try:
        plan = json.loads(Path(cfg.sweep_ledger).with_suffix(".plan.json").read_text())
    except (OSError, ValueError):
        return None
    return plan.get("forecasts", {}).get(str(Path(cfg.out_dir)))


def prepare(cfg: DictConfig, source=None, identity: dict | None = None) -> Plan | None:
    """Before a run claims its directory: None for a free run; for a paid one its forecast (printed),
    the confirmation above ``confirm_usd`` and its plan."""
    if not is_paid(cfg):
        return None
    forecast = _sweep_forecast(cfg) if cfg.get("sweep_ledger") else None
    if forecast is None:
        (f,) = forecasts([point(cfg, source, identity)])
        print(f"{point_name(cfg)}: {one_line(f)}" + (f"; capped at ${money(cfg.max_cost_usd)}"
                                                      if cfg.max_cost_usd is not None else "") + batch_note(cfg),
              flush=True)
        confirm(at_risk([f], cfg.max_cost_usd), cfg, f"this run ({point_name(cfg)})")
        forecast = f.as_summary()
    return Plan(cfg.max_cost_usd, forecast, cfg.get("sweep_ledger"), f"{cfg.graph.name}/{cfg.run_dir_name}")


def pilot_config(cfg: DictConfig, n: int) -> DictConfig:
    """The pilot of the run ``cfg``: the run itself on its first ``n`` queries, in a directory of its own
    under ``paths.runs`` (``<experiment>/<graph>/<run>_limit<n>_pilot``, wherever the run's ``out_dir``
    points), where forecasts of the run's settings find what it measured."""
    p = copy.deepcopy(cfg)
    with open_dict(p):
        p.limit, p.shard, p.estimate, p.pilot, p.sweep_ledger = n, None, False, False, None
        p.run_dir_suffix = f"{cfg.get('run_dir_suffix') or ''}_pilot"
        p.out_dir = str(Path(p.paths.runs) / str(p.experiment_name) / str(p.graph.name) / str(p.run_dir_name))
    return p


def _note_unmeasured(forecast: Sequence[fc.Forecast], cfgs: Sequence[DictConfig]) -> None:
    """Under the table: the points nothing is measured for, what the token model expects them to cost, and
    the step that measures them (``pilot=true``)."""
    worst = [(f, c) for f, c in zip(forecast, cfgs) if f.basis == "worst case" and f.to_pay]
    if not worst:
        return
    typical = sum(f.typical_usd or 0.0 for f, _ in worst)
    n = int(cfgs[0].estimate_queries)
    print(f"nothing is measured for {len(worst)} point(s): their figures are the worst case of their settings; "
          f"by the token model of typical trajectories (ark.cost.forecast.TokenModel.typical) they cost about "
          f"${money(typical)}. pilot=true runs a pilot of their first {n} queries (estimate_queries) in "
          "directories of their own, forecast and confirmed like a run, and the forecast then rests on it",
          flush=True)


def estimate(cfgs: Sequence[DictConfig]) -> list[fc.Forecast]:
    """``estimate=true``: the forecast of the runs ``cfgs`` (a run, or a sweep's points), printed per
    point and in total, from what is measured and, where nothing is, the token model. No LLM call is made
    and nothing is written."""
    result = forecasts([point(c) for c in cfgs])
    print(fc.format_table(result, header(cfgs[0])), flush=True)
    _note_unmeasured(result, cfgs)
    return result


def pilot(cfgs: Sequence[DictConfig], run, ledger: Path | None = None) -> list[dict]:
    """``pilot=true``: a pilot run (`pilot_config`, ``estimate_queries`` queries) for each paid point of
    ``cfgs`` with fewer measured queries than that, forecast (printed), confirmed above ``confirm_usd``
    once for all of them and capped by ``max_cost_usd`` (across them all, counted in ``ledger``, when there
    are several); then the forecast of ``cfgs`` resting on them. ``run``: `ark.config.evaluation.run`.
    Returns the pilots' summaries."""
    chosen, seen = [], set()
    for p in (point(c) for c in cfgs):
        n = min(int(p.cfg.estimate_queries), len(p.keys))
        if not p.paid or len(p.samples) >= n or p.cost_key in seen:
            continue
        seen.add(p.cost_key)
        chosen.append(pilot_config(p.cfg, n))
    if not chosen:
        print("no pilot to run: every paid point has its estimate_queries measured (estimate=true forecasts "
              "from them)", flush=True)
        return []
    first = forecasts([point(c) for c in chosen])
    print(fc.format_table(first, "the pilot" + ("s" if len(chosen) > 1 else "") + ", " + header(cfgs[0])), flush=True)
    cap = cfgs[0].max_cost_usd
    confirm(at_risk(first, cap), cfgs[0], f"the pilot ({point_name(chosen[0])})" if len(chosen) == 1
            else f"the {len(chosen)} pilots")
    summaries = []
    for c, f in zip(chosen, first):
        with open_dict(c):
            c.yes = True   # confirmed for every pilot, here and now
            if ledger is not None and len(chosen) > 1:
                c.sweep_ledger = str(ledger)
        summary = run(c)
        print(f"pilot {point_name(c)}: paid ${money(summary.get('paid_this_run_usd', 0.0))} "
              f"({summary['n_ok']} of {summary['n']} queries measured)", flush=True)
        summaries.append(summary)
    estimate(cfgs)
    return summaries
