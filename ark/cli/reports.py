"""``ark compare``, ``ark attribute``, ``ark table1``, ``ark figures``, ``ark viewer``: read run directories.

    ark compare RUN REFERENCE [--test permutation]        # paired differences over the same queries
    ark attribute results/runs/<experiment>/<graph>/<run>  # where gold nodes were found or lost
    ark table1                                            # results/table1.{md,csv,tex} from results/runs/table1
                                                          # (each run as scored, and by the authors' protocol)
    ark table1 --reproduce [graph=demo backbone=local limit=5]   # check, run the sweep, then build
    ark figures results/runs --out results/figures        # the paper's figures and tables
    ark viewer results/runs/<experiment>/<graph>/<run> --out viewer.html

None of them calls an LLM but ``table1 --reproduce``, which first checks what the sweep needs (the
STaRK files of each graph, the API key of each paid backbone; `ark.config.prerequisites.sweep_problems`)
and stops with each fix when something is missing, then runs ``ark run -m experiment=table1`` in a
process of its own (rerunning resumes; the sweep is forecast, confirmed above ``confirm_usd`` and capped
by ``max_cost_usd`` there, `ark.config.sweep`; with ``estimate=true`` only the forecast is printed, with
``pilot=true`` only the pilots run). It exits with the sweep's status: 3 when a run ended not complete,
and then builds no table.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ark.cli.common import CLIError, add_verb, positive, say

PAPER = Path(__file__).resolve().parents[2] / "results" / "paper"   # the paper's published numbers


def cmd_compare(args) -> int:
    from ark.analysis import paired
    from ark.report import comparison

    diffs = comparison.compare_runs(args.run, args.reference, args.metrics or paired.METRICS, args.include_failed,
                                 args.n_boot, test=args.test, alpha=args.alpha)
    print(f"{args.run}\n  minus {args.reference}  ({args.test}; * p < {args.alpha}; values in %)")
    print(paired.format_table(diffs))
    return 0


def cmd_attribute(args) -> int:
    from ark.analysis import attribution
    from ark.run import rundir
    from ark.run.summary import write_attribution

    dirs = rundir.find_run_dirs(args.runs)
    if not dirs:
        raise FileNotFoundError(f"no run directories (folders with {rundir.PREDICTIONS}) under "
                                f"{', '.join(str(p) for p in args.runs)}")
    for d in dirs:
        print(d)
        print(attribution.format_summary(write_attribution(d, args.top)))
    return 0


def build_table1(runs: Path, experiment: str, paper: Path, out: Path) -> list[Path]:
    """Write Table 1 of ``runs/experiment`` to ``out``; returns the paths."""
    from ark.report.table1 import build_table1 as build, write_table1

    table = build(runs, experiment, paper)
    paths = write_table1(table, out)
    n = sum(len(v) for v in table.ours.values()) + len(table.other)
    print(f"table 1 from {n} run(s) under {runs / experiment}: " + ", ".join(str(p) for p in paths))
    return paths


def cmd_table1(args) -> int:
    if not args.reproduce:
        if args.overrides:
            raise CLIError(f"overrides ({' '.join(args.overrides)}) are only for --reproduce")
        build_table1(args.runs, args.experiment, args.paper, args.out)
        return 0
    from ark.config.prerequisites import sweep_problems

    overrides = ["experiment=table1", *args.overrides]
    problems = sweep_problems(overrides)
    if problems:
        raise CLIError("reproduce-table1 cannot start: " + "; ".join(problems))
    cmd = [sys.executable, "-m", "ark", "run", "-m", "experiment=table1", f"paths.runs={args.runs}", *args.overrides]
    say("running: " + " ".join(cmd))
    rc = subprocess.call(cmd)
    if rc == 2:   # refused before it started (a setting, a confirmation) or stopped on a setting: the line above
        say("the table1 sweep stopped on the error above; rerun once it is fixed (finished runs are kept)")
        return rc
    from ark.run.summary import INCOMPLETE_EXIT

    if rc == INCOMPLETE_EXIT:   # the sweep ran, and a run is not complete (the line above names it)
        say("the table1 sweep ended incomplete (see above); no table is built: rerun the same command, with a "
            "higher max_cost_usd when the cap stopped it, to resume")
        return rc
    if rc != 0:
        say(f"the table1 sweep exited with {rc}; rerun the same command to resume")
        return rc
    if any(o.replace(" ", "").lower() in ("estimate=true", "pilot=true") for o in args.overrides):
        return 0   # a forecast, or pilots: the table's runs were not run, so no table to build
    build_table1(args.runs, "table1", args.paper, args.out)
    return 0


def cmd_figures(args) -> int:
    import matplotlib

    matplotlib.use("Agg")
    from ark.config.options import ablation_labels
    from ark.report.figures import make_all

    make_all(args.run_dirs, args.out, args.paper_dir, ablations=ablation_labels())
    return 0


def cmd_viewer(args) -> int:
    from ark.report.viewer import write_viewer

    path = write_viewer(args.run_dir, args.out, args.limit, args.max_observation_chars)
    print(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB)")
    return 0


def register(sub) -> None:
    p = add_verb(sub, "compare", cmd_compare, help="paired comparison of two runs over the same queries",
                 description="Per metric, RUN minus REFERENCE over their common queries: the mean "
                             "difference, a paired bootstrap 95% interval and a paired test "
                             "(ark.analysis.paired).")
    p.add_argument("run", type=Path)
    p.add_argument("reference", type=Path)
    p.add_argument("--metrics", nargs="+", default=None, help="metrics (default: hit@1 hit@5 recall@20 mrr)")
    p.add_argument("--test", default="wilcoxon", help="wilcoxon (default) or permutation")
    p.add_argument("--n-boot", type=int, default=1000, help="bootstrap resamples (default: 1000)")
    p.add_argument("--alpha", type=float, default=0.05, help="significance level (default: 0.05)")
    p.add_argument("--include-failed", action="store_true", help="score failed queries as 0")

    p = add_verb(sub, "attribute", cmd_attribute, help="failure attribution of run directories, no LLM",
                 description="Per query and gold node: where it was first shown, whether an agent "
                             "selected it, its fused position and whether the cut lost it; written to "
                             "attribution.csv and metrics.json['attribution'] (ark.analysis.attribution).")
    p.add_argument("runs", nargs="+", type=Path, help="run directories or folders holding them")
    p.add_argument("--top", type=positive("--top"), default=20, help="the cut (default: 20, as R@20)")

    p = add_verb(sub, "table1", cmd_table1, help="the paper's Table 1 from run directories (or reproduce it)",
                 description="Write <out>/table1.md, .csv and .tex: the paper's numbers (results/paper/"
                             "table1.csv) beside ours and the difference. With --reproduce, first check "
                             "what the sweep needs, then run `ark run -m experiment=table1` with the "
                             "overrides.")
    p.add_argument("--reproduce", action="store_true", help="run the Table 1 sweep first (LLM calls)")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="Hydra overrides of the sweep (--reproduce)")
    p.add_argument("--runs", type=Path, default=Path("results/runs"), help="runs root (default: results/runs)")
    p.add_argument("--experiment", default="table1", help="the experiment read (default: table1)")
    p.add_argument("--paper", type=Path, default=PAPER / "table1.csv", help="the paper's numbers")
    p.add_argument("--out", type=Path, default=Path("results"), help="output folder (default: results)")

    p = add_verb(sub, "figures", cmd_figures, help="the paper's figures and tables from run directories",
                 description="Figures 2-5, Table 2, the backbone table and the failure attribution, from "
                             "run directories alone (ark.report.figures); those the runs cannot support are "
                             "skipped with the reason.")
    p.add_argument("run_dirs", nargs="+", type=Path, help="run dirs or folders holding them")
    p.add_argument("--out", type=Path, default=Path("results/figures"), help="output folder (default: results/figures)")
    p.add_argument("--paper-dir", type=Path, default=PAPER, help="the paper's numbers (default: results/paper)")

    p = add_verb(sub, "viewer", cmd_viewer, help="a self-contained HTML trajectory viewer for one run",
                 description="Every query with status, metrics and where each gold node was found or "
                             "lost; each agent's steps with gold ids highlighted (ark.report.viewer).")
    p.add_argument("run_dir", type=Path)
    p.add_argument("--out", type=Path, default=Path("viewer.html"), help="the page to write (default: viewer.html)")
    p.add_argument("--limit", type=positive("--limit"), default=None, help="first N queries only")
    p.add_argument("--max-observation-chars", type=positive("--max-observation-chars"), default=4000,
                   help="trim each observation to this many characters (default: 4000)")
