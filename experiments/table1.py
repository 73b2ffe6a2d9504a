"""Paper Table 1: build it from run directories, or reproduce it (runs, then build).

    python -m experiments.table1                       # `make table1`: tables from results/runs/table1 only
    python -m experiments.table1 reproduce             # `make reproduce-table1`: check, run the sweep, build
    python -m experiments.table1 reproduce graph=demo backbone=local limit=5     # shrunk, on the demo graph

``reproduce`` first checks what the sweep needs and stops with a clear message when something is
missing: the STaRK files of each graph under data/stark (``python -m ark.data.stark download <graph>`` fetches
them) and the API key of each paid backbone (OPENAI_API_KEY for GPT-4.1 and GPT-4o). Then it
runs ``experiments/run.py -m experiment=table1`` (rerunning resumes) and writes results/table1.md,
.csv and .tex with the paper's published numbers (results/paper/table1.csv) beside ours and the
difference.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from ark.eval.table1 import build_table1, write_table1

REPO = Path(__file__).resolve().parents[1]


def missing_prerequisites(overrides: list[str]) -> list[str]:
    """Problems that would stop the table1 sweep (empty when it can run)."""
    from experiments.run import compose, prerequisite_problems, sweep_points

    return sorted({p for point in sweep_points(["experiment=table1", *overrides])
                   for p in prerequisite_problems(compose(point))})


def build(runs: Path, experiment: str, paper: Path, out: Path) -> list[Path]:
    table = build_table1(runs, experiment, paper)
    paths = write_table1(table, out)
    n = sum(len(v) for v in table.ours.values()) + len(table.other)
    print(f"table 1 from {n} run(s) under {runs / experiment}: " + ", ".join(str(p) for p in paths))
    return paths


def reproduce(overrides: list[str], runs: Path, paper: Path, out: Path) -> int:
    problems = missing_prerequisites(overrides)
    if problems:
        print("reproduce-table1 cannot start:", *("  - " + p for p in problems), sep="\n", file=sys.stderr)
        return 2
    cmd = [sys.executable, str(REPO / "experiments" / "run.py"), "-m", "experiment=table1",
           f"paths.runs={runs}", *overrides]
    print("running:", " ".join(cmd))
    rc = subprocess.call(cmd, cwd=REPO)
    if rc != 0:
        print(f"the table1 sweep exited with {rc}; rerun the same command to resume", file=sys.stderr)
        return rc
    build(runs, "table1", paper, out)
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("command", nargs="?", default="build", choices=["build", "reproduce"])
    p.add_argument("overrides", nargs="*", help="Hydra overrides for the sweep (reproduce only)")
    p.add_argument("--runs", type=Path, default=Path("results/runs"))
    p.add_argument("--experiment", default="table1")
    p.add_argument("--paper", type=Path, default=REPO / "results" / "paper" / "table1.csv")
    p.add_argument("--out", type=Path, default=Path("results"))
    args = p.parse_args(argv)
    if args.command == "reproduce":
        return reproduce(args.overrides, args.runs, args.paper, args.out)
    if args.overrides:
        p.error("overrides are only for `reproduce`")
    build(args.runs, args.experiment, args.paper, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
