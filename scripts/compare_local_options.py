"""Which agent options help a small local model: the plain loop vs each option alone vs all of them.

    python scripts/compare_local_options.py --limit 20          # SmolLM2-135M, demo test split
    python scripts/compare_local_options.py --limit 20 --variants plain,all --t-max 5 --n-agents 1
    python scripts/compare_local_options.py --variants plain,first_search+stop_on_repeat   # options joined by +
    python scripts/compare_local_options.py --variants first_search+stop_on_repeat+final_select --name-first none,exact
    python scripts/compare_local_options.py --split test-mismatch --limit 20

Each variant is one `experiments/run.py` run (``backbone=local`` on the demo graph, the demo's small
observations, temperature 0, so variants differ only in the options), written to
``results/runs/local-options-<variant>/demo/...``: a rerun resumes from those directories and the LLM
cache. The BM25 baseline on the same queries is the reference row. A local server already answering at
``ARK_LOCAL_URL`` (default http://127.0.0.1:8089/v1) is used; otherwise each run starts its own.
Prints one markdown table (the README's) with the answer metrics and what the agents did: steps per
agent, steps with a model mistake, select calls naming an id never shown, agents that selected
nothing, and the wall time of the run.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from ark.agent import OPTIONS
from ark.analysis.attribution import CLASS_LABEL, CLASSES
from ark.run.rundir import RunDir
from ark.trajectory import Trajectory

VARIANTS = {"plain": (), "all": OPTIONS, **{o: (o,) for o in OPTIONS}}
METRICS = ("hit@1", "hit@5", "recall@20", "mrr")


def options_of(variant: str) -> tuple[str, ...]:
    """The agent options a variant switches on: a name of VARIANTS, or options joined by "+"."""
    if variant in VARIANTS:
        return VARIANTS[variant]
    opts = tuple(variant.split("+"))
    if not all(o in OPTIONS for o in opts):
        raise ValueError(variant)
    return opts


def overrides(variant: str, args, name_first: str = "none") -> list[str]:
    on = options_of(variant)
    return ["graph=demo", "backbone=local", f"split={getattr(args, 'split', 'test')}", f"limit={args.limit}", "budget=t5_n1",
            f"budget.agent.t_max={args.t_max}", f"budget.agent.n_agents={args.n_agents}",
            f"experiment_name=local-options-{variant}", "concurrency=1", "progress=false",
            # the demo's toolset: small observations keep SmolLM2's prompts short
            "budget.neighbors_k=10", "+ablation.tools.max_observation_tokens=600", "ablation.tools.snippet_chars=100",
            *[f"budget.agent.{o}={str(o in on).lower()}" for o in OPTIONS],
            f"search.setup.config.name_first={name_first}"]


def trajectories(run: RunDir) -> list[Trajectory]:
    return [Trajectory.from_json(d) for _, trajs in run.iter_trajectories() for d in trajs]


def fates(run: RunDir) -> dict[str, float]:
    """Share of gold nodes per attribution class (metrics.json's "attribution", ark.analysis.attribution)."""
    return dict((run.metrics.get("attribution") or {}).get("share") or {})


def behaviour(trajs: list[Trajectory]) -> dict:
    steps = [s for t in trajs for s in t.steps]
    selects = [(tc, s) for s in steps for tc in s.tool_calls if tc.name == "select"]
    unseen = sum(1 for tc, s in selects if s.error and "not shown" in s.error)
    first = [t.steps[0].tool_calls[0].name if t.steps and t.steps[0].tool_calls else "(none)" for t in trajs]
    return {"agents": len(trajs),
            "steps_per_agent": len(steps) / max(1, len(trajs)),
            "mistake_steps": sum(1 for s in steps if s.error) / max(1, len(steps)),
            "select_calls": len(selects),
            "unseen_selects": unseen / max(1, len(selects)),
            "empty_agents": sum(1 for t in trajs if not t.selected) / max(1, len(trajs)),
            "first_search": sum(n == "search_graph" for n in first) / max(1, len(trajs)),
            "stops": {r: sum(t.stop_reason == r for t in trajs) for r in sorted({t.stop_reason for t in trajs})}}


def table(rows: list[dict]) -> str:
    head = ["variant", "Hit@1", "Hit@5", "R@20", "MRR", "steps/agent", "steps with a mistake",
            "selects of unseen ids", "agents with empty R", "1st call is a search", "stop reasons",
            *[f"gold {CLASS_LABEL[c]}" for c in CLASSES[:3]], "wall"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        m, b = r["metrics"], r.get("behaviour")
        cells = [r["variant"] + ("" if r.get("complete", True) else " (incomplete)")]
        cells += [f"{100 * m[k]:.1f}" for k in METRICS]
        if b:
            cells += [f"{b['steps_per_agent']:.1f}", f"{100 * b['mistake_steps']:.0f}%",
                      f"{100 * b['unseen_selects']:.0f}% of {b['select_calls']}", f"{100 * b['empty_agents']:.0f}%",
                      f"{100 * b['first_search']:.0f}%", ", ".join(f"{k} {v}" for k, v in b["stops"].items())]
        else:
            cells += ["–"] * 6
        cells += [f"{100 * r['fates'][c]:.0f}%" if c in r.get("fates", {}) else "–" for c in CLASSES[:3]]
        cells.append(f"{r['wall_s'] / 60:.1f} min")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def per_template(run: RunDir) -> dict[str, dict[str, float]]:
    """Mean answer metrics per demo query template (per_query.csv joined with query_templates.csv)."""
    import csv
    from collections import defaultdict

    from ark.data.sources import DemoSource

    source = DemoSource(root=(run.config.get("paths") or {}).get("data", "data"))
    with open(source.raw_root / "qa" / "demo" / "query_templates.csv", newline="") as f:
        template = {r["id"]: r["template"] for r in csv.DictReader(f)}
    groups = defaultdict(list)
    with open(run.path / "per_query.csv", newline="") as f:
        for r in csv.DictReader(f):
            groups[template[r["query_id"]]].append({m: float(r[m]) for m in METRICS})
    return {t: {"n": len(v), **{m: sum(x[m] for x in v) / len(v) for m in METRICS}} for t, v in sorted(groups.items())}


def template_table(rows: list[dict]) -> str:
    lines = ["| variant | template | n | Hit@1 / Hit@5 / R@20 / MRR |", "|---|---|---:|---|"]
    for r in rows:
        for t, m in (r.get("templates") or {}).items():
            lines.append(f"| {r['variant']} | {t} | {m['n']} | " + " / ".join(f"{100 * m[k]:.1f}" for k in METRICS) + " |")
    return "\n".join(lines)


def report(rows: list[dict], args) -> None:
    text = table(rows)
    print(f"\n{args.limit} demo {getattr(args, 'split', 'test')} queries, SmolLM2-135M-Instruct Q4_1, n={args.n_agents}, "
          f"T_max={args.t_max}, temperature 0\n" + text + "\n\n" + template_table(rows), flush=True)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "local_options.md").write_text(text + "\n\n" + template_table(rows) + "\n")
        (out / "local_options.json").write_text(json.dumps(rows, indent=1))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--limit", type=int, default=20, help="first N demo test queries")
    p.add_argument("--t-max", type=int, default=5, help="steps per agent")
    p.add_argument("--n-agents", type=int, default=1, help="n, agents per query (budget.agent.n_agents)")
    p.add_argument("--variants", default=",".join(VARIANTS),
                   help=f"comma list of {', '.join(VARIANTS)}, or options joined by + (first_search+stop_on_repeat)")
    p.add_argument("--split", default="test", help="demo split (test, test-mismatch, ...)")
    p.add_argument("--name-first", default="none",
                   help="comma list of search_graph's name-first options to run each variant with: none, exact, mentioned")
    p.add_argument("--out", default=None, help="also write the table (markdown) and the numbers (json) here")
    args = p.parse_args(argv)
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    bad = []
    for v in variants:
        try:
            options_of(v)
        except ValueError:
            bad.append(v)
    if bad:
        raise SystemExit(f"--variants: unknown {', '.join(bad)}; choose from {', '.join(VARIANTS)}, "
                         f"or options of {', '.join(OPTIONS)} joined by +")
    from ark.search.name_match import NAME_FIRST

    firsts = [x.strip() for x in args.name_first.split(",") if x.strip()]
    if not firsts or [x for x in firsts if x not in NAME_FIRST]:
        raise SystemExit(f"--name-first: {args.name_first!r}; choose from {', '.join(NAME_FIRST)} (comma list)")

    from ark.config.compose import compose
    from ark.config.evaluation import run

    rows = []
    t0 = time.perf_counter()
    bm25_cfg = compose(["graph=demo", "retriever=bm25", f"split={args.split}", f"limit={args.limit}",
                        "experiment_name=local-options-bm25", "progress=false"])
    base = run(bm25_cfg)
    rows.append({"variant": "BM25 (no LLM)", "metrics": {k: base["metrics"][k]["mean"] for k in METRICS},
                 "wall_s": time.perf_counter() - t0, "fates": fates(RunDir(bm25_cfg.out_dir)),
                 "templates": per_template(RunDir(bm25_cfg.out_dir))})
    for v in variants:
        for first in firsts:
            cfg = compose(overrides(v, args, first))
            t0 = time.perf_counter()
            summary = run(cfg)
            rows.append({"variant": v + ("" if first == "none" else f" (names first: {first})"),
                         "overrides": overrides(v, args, first), "complete": summary["complete"],
                         "metrics": {k: summary["metrics"].get(k, {}).get("mean", float("nan")) for k in METRICS},
                         "behaviour": behaviour(trajectories(RunDir(cfg.out_dir))), "fates": fates(RunDir(cfg.out_dir)),
                         "templates": per_template(RunDir(cfg.out_dir)), "wall_s": time.perf_counter() - t0})
            report(rows, args)  # after every variant: a long comparison can be read while it runs
    return 0 if all(r.get("complete", True) for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
