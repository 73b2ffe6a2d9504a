"""The demo's distilled SmolLM2 students beside their teacher, the base model and BM25, on one demo split: the
runs behind results/distill/demo_test.csv, each through `experiments/run.py` like any run.

    python scripts/compare_students.py --out results/distill                 # the whole test split (480)
    python scripts/compare_students.py --limit 100                           # its first 100 queries
    python scripts/compare_students.py --student demo-smollm2-48=results/distill/demo-smollm2-48/adapter.gguf
    python scripts/compare_students.py --limit 100 --final-select             # also the student's final_select row
    python scripts/compare_students.py --skip smollm2-base                      # without a row (repeatable)

Rows: BM25; the full rule-based teacher (``backbone=rules``, budget t20_n3); the compact teacher the students
learn from (``backbone=rules-compact``, ``budget=t4_n1_compact``); SmolLM2-135M without an adapter
(``backbone=smollm2-base``) and each student, named by its folder under results/distill (the shipped one,
which ``backbone=smollm2-distilled`` serves, and those of --student: that backbone with their adapter), all
with one agent, T_max 4, temperature 0 and the compact prompt, served by llama.cpp in the format the
students were trained on; with --final-select, the shipped student with the agent option ``final_select``
(its last step must call ``select``, decoded under the tool's schema). Per row: Hit@1, Hit@5, Recall@20, MRR, model mistakes per step (bad JSON, unknown tool, no tool
call, unseen ids) and, for a model, its retention: Hit@1 / the compact teacher's Hit@1, with a 95% interval
from a paired bootstrap over the queries (1,000 resamples, seed 0). Below, each row's Hit@1 misses by where
the gold nodes were lost (`miss_causes`: never shown, shown but not selected, selected but not first), and each
model's trajectories against the teacher's on the same queries (`ark.analysis.imitation`: the first call where
they part, the shapes of each, argument values the teacher never gives, the Hit@1 each makes on the queries of
each of the teacher's shapes). Run directories go under --runs (they
resume: an interrupted student run goes on where it stopped). No paid API; a student takes about 8 s per
query on 2 cores.
"""

from __future__ import annotations

import argparse
import csv
import random
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

METRICS = ("hit@1", "hit@5", "recall@20", "mrr")
COMPACT = ["budget=t4_n1_compact"]


def run(label: str, overrides: list[str], runs: Path) -> Path:
    """One run of experiments/run.py (resumed when its directory holds part of it); its run directory."""
    out = runs / label
    cmd = [sys.executable, str(ROOT / "experiments" / "run.py"), *overrides, f"out_dir={out}", "n_boot=0",
           "progress=false"]
    print(f"{label}: {' '.join(cmd[1:])}", flush=True)
    subprocess.run(cmd, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    return out


def per_query(run_dir: Path) -> dict[str, dict[str, float]]:
    from ark.run.rundir import RunDir

    rd = RunDir(run_dir)
    return {m: rd.per_query_metric(m, include_failed=True) for m in METRICS}


def mistakes_per_step(run_dir: Path) -> float | None:
    from ark.run.rundir import RunDir

    steps = bad = 0
    for _, trajs in RunDir(run_dir).iter_trajectories(None):
        for t in trajs:
            steps += len(t.get("steps") or [])
            bad += sum(1 for s in t.get("steps") or [] if s.get("error"))
    return bad / steps if steps else None


MISS_CAUSES = ("never shown", "shown, not selected", "selected, not first")


def miss_causes(run_dir: Path) -> dict[str, int]:
    """Of the queries whose Hit@1 is 0, how many had no gold node shown to the agent at all, one shown but
    none selected, or one selected but below the first place (`ark.analysis.attribution`: never_surfaced;
    surfaced_not_selected; selected, whatever its place). A failed query counts as never shown."""
    from ark.run.rundir import RunDir, key
    from ark.run.summary import attribute_run

    rd = RunDir(run_dir)
    hits = rd.per_query_metric("hit@1", include_failed=True)
    by_query = {key(qa.query_id): {g.cls for g in qa.golds} for qa in attribute_run(rd)}
    out = dict.fromkeys(MISS_CAUSES, 0)
    for q, hit in hits.items():
        if hit:
            continue
        classes = by_query.get(q, set())
        cause = ("selected, not first" if classes - {"never_surfaced", "surfaced_not_selected"} else
                 "shown, not selected" if "surfaced_not_selected" in classes else "never shown")
        out[cause] += 1
    return out


def shipped_student() -> tuple[str, Path]:
    """The student ``backbone=smollm2-distilled`` serves: its folder's name under results/distill, its adapter."""
    from ark.config.compose import compose

    adapter = Path(compose(["graph=demo", "backbone=smollm2-distilled"]).backbone.local.lora_path)
    return adapter.parent.name, adapter


def parse_student(spec: str) -> tuple[str, Path]:
    """``NAME=ADAPTER`` of --student: the student's name and its adapter.gguf, which must exist."""
    name, sep, path = spec.partition("=")
    if not sep or not name or not path:
        raise SystemExit(f"--student takes NAME=ADAPTER.gguf, got {spec!r}")
    if not Path(path).is_file():
        raise SystemExit(f"--student {spec}: no adapter file {path!r}")
    return name, Path(path)


def retention(model: dict[str, float], teacher: dict[str, float], n_boot: int = 1000, seed: int = 0):
    """Model Hit@1 / teacher Hit@1 over the same queries, with a paired bootstrap 95% interval."""
    ids = sorted(set(model) & set(teacher))
    a, b = [model[i] for i in ids], [teacher[i] for i in ids]
    point = sum(a) / sum(b) if sum(b) else float("nan")
    rng = random.Random(seed)
    draws = []
    for _ in range(n_boot):
        idx = [rng.randrange(len(ids)) for _ in ids]
        tb = sum(b[i] for i in idx)
        if tb:
            draws.append(sum(a[i] for i in idx) / tb)
    draws.sort()
    lo, hi = (draws[int(0.025 * len(draws))], draws[int(0.975 * len(draws)) - 1]) if draws else (float("nan"),) * 2
    return point, lo, hi


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--split", default="test")
    p.add_argument("--limit", type=int, default=None, help="the first n queries of the split (default: all)")
    p.add_argument("--student", action="append", default=[], metavar="NAME=ADAPTER",
                   help="a student besides the shipped one: its name and adapter.gguf (repeatable)")
    p.add_argument("--runs", type=Path, default=ROOT / "results" / "runs" / "students")
    p.add_argument("--out", type=Path, default=None, help="folder for demo_<split>.csv (default: print only)")
    p.add_argument("--final-select", action="store_true",
                   help="also the shipped student with the agent option final_select (its last step a select)")
    p.add_argument("--skip", action="append", default=[], metavar="ROW",
                   help="leave this row out (repeatable), e.g. smollm2-base while its run is not done")
    a = p.parse_args(argv)
    shipped, adapter = shipped_student()
    students = {shipped: adapter}
    students.update(map(parse_student, a.student))
    base = ["graph=demo", f"split={a.split}"] + ([f"limit={a.limit}"] if a.limit else [])
    suffix = f"_{a.split}" + (f"_limit{a.limit}" if a.limit else "")
    points = {"bm25": base + ["retriever=bm25"], "rules": base + ["backbone=rules"],
              "rules-compact": base + ["backbone=rules-compact"] + COMPACT,
              "smollm2-base": base + ["backbone=smollm2-base"] + COMPACT}
    for name, path in students.items():   # each student: the shipped backbone with its own adapter
        points[name] = base + ["backbone=smollm2-distilled", f"backbone.name={name}",
                               f"backbone.model=SmolLM2-135M-Instruct.Q4_1+{name}",
                               f"backbone.local.lora_path={path.resolve()}"] + COMPACT
    models = {"smollm2-base", *students}
    if a.final_select:   # the shipped student with the agent option that makes its last step a select
        points[f"{shipped}-final_select"] = points[shipped] + ["budget.agent.final_select=true"]
        models.add(f"{shipped}-final_select")
    unknown = [r for r in a.skip if r not in points or r == "rules-compact"]
    if unknown:
        raise SystemExit(f"--skip {unknown[0]!r}: not a row that can be left out; valid: "
                         f"{', '.join(r for r in points if r != 'rules-compact')} (rules-compact is the teacher "
                         f"of the retention column)")
    dirs = {label: run(label + suffix, overrides, a.runs) for label, overrides in points.items()
            if label not in a.skip}
    scores = {label: per_query(d) for label, d in dirs.items()}
    teacher = scores["rules-compact"]["hit@1"]
    rows = []
    for label, d in dirs.items():
        s = scores[label]
        row = {"retriever": label, "queries": len(s["hit@1"]),
               **{m: round(sum(s[m].values()) / len(s[m]), 4) for m in METRICS}}
        mps = mistakes_per_step(d) if label in models else None
        row["mistakes_per_step"] = "" if mps is None else round(mps, 4)
        if label in models:
            point, lo, hi = retention(s["hit@1"], teacher)
            row["retention"] = f"{point:.3f} [{lo:.3f}, {hi:.3f}]"
        else:
            row["retention"] = ""
        rows.append(row)
    cols = ["retriever", "queries", *METRICS, "mistakes_per_step", "retention"]
    print(",".join(cols))
    for r in rows:
        print(",".join(str(r[c]) for c in cols))
    print("\nqueries with Hit@1 0, by where the gold nodes were lost (ark.analysis.attribution)")
    print(",".join(["retriever", *MISS_CAUSES]))
    for label, d in dirs.items():
        causes = miss_causes(d)
        print(",".join([label, *(str(causes[c]) for c in MISS_CAUSES)]))
    from ark.analysis.imitation import compare, format_imitation
    from ark.run.rundir import RunDir

    for label in (r for r in dirs if r in models):
        print(f"\n{label} against its teacher rules-compact, query by query (ark.analysis.imitation)")
        print(format_imitation(compare(RunDir(dirs[label]).agent_trajectories(),
                                       RunDir(dirs["rules-compact"]).agent_trajectories(),
                                       scores[label]["hit@1"], teacher)))
    if a.out:
        a.out.mkdir(parents=True, exist_ok=True)
        with open(a.out / f"demo_{a.split}{'_limit' + str(a.limit) if a.limit else ''}.csv", "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=cols)
            w.writeheader()
            w.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
