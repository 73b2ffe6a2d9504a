"""A sweep before Hydra launches it: every point composed and checked, a directory for each point, the
forecast and confirmation of its paid points, and the sweep's ledger.

`prepare` runs once, in the process that launches the sweep (``ark run -m``, ``python experiments/run.py
-m``, ``ark table1 --reproduce``), and returns the overrides to launch it with:

- every point is composed first (an unknown key or option is one line before any job starts);
- a sweep over a setting that is not in the run directory's name (``seed=0,1``, ``retriever.top=50,100``,
  ``budget.search_k=5,10``) would send two runs with other settings to one directory, whose second is
  refused; such settings are appended to every point's name instead (``run_dir_suffix='_seed${seed}'``:
  ``..._test_seed0``, ``..._test_seed1``). A sweep whose points already have directories of their own,
  and a plain run, keep today's names;
- with paid points (or ``estimate=true``, ``pilot=true``) each point's settings and prerequisites are
  checked, the forecast printed per point and in total (`ark.config.plan`), and a sweep whose spend at
  risk exceeds ``confirm_usd`` confirmed once, for all its points (``yes=true`` is then handed to them);
  ``estimate=true`` stops there (no LLM call, nothing written, nothing launched), and ``pilot=true`` runs
  the pilots of its paid points here (`ark.config.plan.pilot`: confirmed once, ``max_cost_usd`` across
  them all) and stops (the sweep itself is not launched);
- the sweep's ledger (``<sweep dir>/.sweeps/<digest of its run directories>.jsonl``, beside its plan:
  the points' forecasts) is handed to every point as ``sweep_ledger``: ``max_cost_usd`` then caps the
  sweep's spend across its points, launched in order or in parallel. The same sweep run again (the
  same run directories) finds the same ledger, so a higher cap goes on from what was spent.

    overrides = prepare(["experiment=table1"])        # None for estimate=true and pilot=true
    launch(job, "config", ["-m", *overrides], job_name="run")
    sys.exit(exit_status(overrides))                  # INCOMPLETE_EXIT (3) when a point is not complete

Once the sweep's jobs have returned (every launcher waits for them), `exit_status` reads each point's
run directory and says in one line which runs are not complete (the cap, failed queries), so the
sweep's process exits with ``INCOMPLETE_EXIT`` (`ark.run.summary`) and not 0.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from ark import atomic
from ark.config import plan
from ark.config.compose import compose, sweep_points
from ark.cost.prices import money

SUFFIX_KEY = "run_dir_suffix"


def _values(point: Sequence[str]) -> dict[str, str]:
    """{key: value} of a point's overrides as given (``+``/``~`` aside)."""
    out = {}
    for o in point:
        if "=" in o:
            k, v = o.split("=", 1)
            out[k.lstrip("+~")] = v
    return out


def swept_keys(points: Sequence[Sequence[str]]) -> list[str]:
    """The keys whose value differs between the points of a sweep."""
    values = [_values(p) for p in points]
    keys = sorted({k for v in values for k in v})
    return [k for k in keys if len({v.get(k) for v in values}) > 1]


def clashing_keys(points: Sequence[Sequence[str]], cfgs: Sequence) -> list[str]:
    """The swept keys (values, not config groups) that two points with other settings would share a run
    directory over."""
    from ark.config.identity import run_identity
    from ark.config.location import conf_dir

    values = [_values(p) for p in points]
    by_dir: dict[str, list[int]] = {}
    for i, c in enumerate(cfgs):
        by_dir.setdefault(str(Path(c.out_dir)), []).append(i)
    swept = [k for k in swept_keys(points) if "/" not in k and not (conf_dir() / k).is_dir()]
    clash: set[str] = set()
    for idx in by_dir.values():
        if len(idx) < 2:
            continue
        identities = {json.dumps(run_identity(cfgs[i]), sort_keys=True, default=str) for i in idx}
        if len(identities) > 1:
            clash.update(k for k in swept if len({values[i].get(k) for i in idx}) > 1)
    return sorted(clash)


def suffix_for(keys: Sequence[str]) -> str:
    """The run directory suffix naming ``keys`` by their last part (their whole key where two share it)."""
    last = [k.split(".")[-1] for k in keys]
    names = [k.replace(".", "_") if last.count(k.split(".")[-1]) > 1 else k.split(".")[-1] for k in keys]
    return "".join(f"_{n}${{{k}}}" for n, k in zip(names, keys))


def ledger_path(cfgs: Sequence) -> Path:
    """The sweep's ledger: named by its run directories, in its first point's sweep directory."""
    dirs = sorted(str(Path(c.out_dir).resolve()) for c in cfgs)
    digest = hashlib.sha256("\n".join(dirs).encode()).hexdigest()[:12]
    return Path(cfgs[0].hydra.sweep.dir) / ".sweeps" / f"{digest}.jsonl"


def prepare(overrides: Sequence[str], config_name: str = "config", run=None) -> list[str] | None:
    """The overrides to launch the sweep ``overrides`` with (see the module doc); None when nothing is to
    be launched (``estimate=true``, ``pilot=true``). ``run``: the run of a pilot (`ark.config.evaluation.run`)."""
    from ark.run import lifeline

    lifeline.mark_launcher()   # a worker running a point dies with this process (local_parallel)
    overrides = list(overrides)
    points = sweep_points(overrides, config_name)
    cfgs = [compose(p, config_name) for p in points]
    if config_name != "config" or "estimate" not in cfgs[0]:
        return overrides
    extra: list[str] = []
    clash = clashing_keys(points, cfgs) if not any(SUFFIX_KEY in _values(p) for p in points) else []
    if clash:
        extra.append(f"{SUFFIX_KEY}='{suffix_for(clash)}'")
        cfgs = [compose([*p, *extra], config_name) for p in points]
    estimate = any(c.estimate for c in cfgs)
    pilots = any(c.pilot for c in cfgs)
    paid = [c for c in cfgs if plan.is_paid(c)]
    if not estimate and not pilots and not paid:
        return [*overrides, *extra]
    _check(cfgs)
    if pilots:
        if run is None:
            from ark.config.evaluation import run
        done = plan.pilot(cfgs, run, ledger=ledger_path([plan.pilot_config(c, int(c.estimate_queries)) for c in paid]
                                                        or cfgs))
        if not all(s.get("complete", False) for s in done):
            from ark.run.summary import INCOMPLETE_EXIT

            print(f"INCOMPLETE: a pilot did not finish every query (exit {INCOMPLETE_EXIT}); the same command "
                  "resumes it", file=sys.stderr, flush=True)
            raise SystemExit(INCOMPLETE_EXIT)
        return None
    if estimate:
        plan.estimate(cfgs)
        return None
    forecasts = plan.forecasts([plan.point(c) for c in cfgs])
    from ark.cost.forecast import format_table

    print(format_table(forecasts, plan.header(cfgs[0])), flush=True)
    cap = cfgs[0].max_cost_usd
    plan.confirm(plan.at_risk(forecasts, cap), cfgs[0], f"this sweep ({len(cfgs)} runs)")
    ledger = ledger_path(cfgs)
    sweep_plan = {"points": [plan.point_name(c) for c in cfgs], "max_cost_usd": cap,
            "forecasts": {str(Path(c.out_dir)): f.as_summary() for c, f in zip(cfgs, forecasts)}}
    ledger.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_json(ledger.with_suffix(".plan.json"), sweep_plan, indent=1)
    print(f"sweep spend: {ledger}" + (f" (capped at ${money(cap)} across its {len(cfgs)} runs)" if cap is not None
                                      else ""), flush=True)
    extra.append(f"sweep_ledger={ledger}")
    if not any(_values(p).get("yes") in ("true", "True") for p in points):
        extra.append("yes=true")   # confirmed for every point, here and now
    return [*overrides, *extra]


def unfinished(overrides: Sequence[str], config_name: str = "config") -> tuple[int, list[Path]]:
    """(the sweep's points, the run directories of those not complete) of the prepared sweep ``overrides``."""
    from ark.config.evaluation import run_dir
    from ark.run.rundir import RunDir

    cfgs = [compose(p, config_name) for p in sweep_points(overrides, config_name)]
    left = []
    for c in cfgs:
        d = run_dir(c)
        try:
            done = RunDir(d).complete
        except (OSError, ValueError):
            done = False
        if not done:
            left.append(d)
    return len(cfgs), left


def exit_status(overrides: Sequence[str], config_name: str = "config") -> int:
    """0 when every run of the finished sweep ``overrides`` is complete; else one line on stderr naming
    those that are not, and ``INCOMPLETE_EXIT``."""
    from ark.run.summary import INCOMPLETE_EXIT

    if config_name != "config":
        return 0
    n, left = unfinished(overrides, config_name)
    if not left:
        return 0
    print(f"INCOMPLETE: {len(left)} of the sweep's {n} runs did not finish every query (exit {INCOMPLETE_EXIT}): "
          + ", ".join(map(str, left)) + "; the same command resumes them", file=sys.stderr, flush=True)
    return INCOMPLETE_EXIT


def _check(cfgs: Sequence) -> None:
    """Every point's settings and prerequisites, before anything is forecast or launched."""
    from ark.config.checks import setting_problems
    from ark.config.prerequisites import prerequisite_problems

    problems = sorted({p for c in cfgs for p in setting_problems(c)})
    if problems:
        raise SystemExit("\n".join(problems))
    problems = sorted({p for c in cfgs for p in prerequisite_problems(c)})
    if problems:
        raise SystemExit("the sweep cannot start:\n" + "\n".join(f"  - {p}" for p in problems))
