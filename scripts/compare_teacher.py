"""The rule-based teacher (``backbone=rules``, `ark.llm.rules`) beside the BM25 baseline: the runs its gate
reads, each through `experiments/run.py` like any run.

    python scripts/compare_teacher.py                              # demo, tables graph, STaRK-format test graphs
    python scripts/compare_teacher.py --out results/teacher        # also write teacher.csv there

No LLM and no cost. Graphs: the demo (val, test, test-mismatch; built under ARK_HOME on first use, with
a row per template too), the hand-made tables graph `tests/data/tables_kg` (its three splits), and
the three small STaRK-format graphs of `tests/helpers/stark_fixtures.py` (PRIME, MAG, AMAZON layouts;
test split; written to a temporary data root). Runs go to a temporary folder, so each call measures
afresh. The gate (issue 33): the teacher's Hit@1 on demo val is BM25's + 0.25 or more, and on the
tables and STaRK-format graphs at least BM25's.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

METRICS = ("hit@1", "hit@5", "recall@20", "mrr")
RETRIEVERS = {"bm25": ["retriever=bm25"], "rules": ["backbone=rules"]}


def run(overrides: list[str], runs: Path) -> Path:
    """One run of experiments/run.py; its run directory."""
    name = "-".join(o.split("=", 1)[1].replace("/", "_") for o in overrides)
    out = runs / name
    cmd = [sys.executable, str(ROOT / "experiments" / "run.py"), *overrides, f"out_dir={out}", "n_boot=0"]
    subprocess.run(cmd, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    return out


def means(run_dir: Path, keep=None) -> dict:
    with open(run_dir / "per_query.csv", newline="") as f:
        rows = [r for r in csv.DictReader(f) if keep is None or keep(r["query_id"])]
    if not rows:
        return {"queries": 0}
    return {"queries": len(rows), **{m: round(statistics.fmean(float(r[m]) for r in rows), 4) for m in METRICS}}


def demo_templates() -> dict[str, str]:
    from ark.home import ark_home

    with open(ark_home() / "stark" / "qa" / "demo" / "query_templates.csv", newline="") as f:
        return {r["id"]: r["template"] for r in csv.DictReader(f)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=None, help="folder for teacher.csv (default: print only)")
    a = p.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        runs, stark = Path(tmp) / "runs", Path(tmp) / "data"
        from tests.helpers.stark_fixtures import build

        build(stark / "stark")
        tables = ["graph=tables", f"graph.path={ROOT / 'tests' / 'data' / 'tables_kg'}"]
        points = [("demo", s, ["graph=demo", f"split={s}"]) for s in ("val", "test", "test-mismatch")]
        points += [("tables_kg", s, tables + [f"split={s}"]) for s in ("train", "val", "test")]
        points += [(g, "test", [f"graph={g}", f"paths.data={stark}", "split=test"]) for g in ("prime", "mag", "amazon")]
        for graph, split, overrides in points:
            for retriever, extra in RETRIEVERS.items():
                d = run(overrides + extra, runs)
                rows.append({"graph": graph, "split": split, "template": "all", "retriever": retriever, **means(d)})
                if graph == "demo":
                    templates = demo_templates()
                    groups = defaultdict(set)
                    for qid, t in templates.items():
                        groups[t].add(qid)
                    for t, ids in sorted(groups.items()):
                        m = means(d, lambda q, ids=ids: q in ids)
                        if m["queries"]:
                            rows.append({"graph": graph, "split": split, "template": t, "retriever": retriever, **m})
    header = ["graph", "split", "template", "retriever", "queries", *METRICS]
    print(" | ".join(header))
    for r in rows:
        print(" | ".join(str(r[k]) for k in header))
    gate = {(r["graph"], r["split"], r["retriever"]): r["hit@1"] for r in rows if r["template"] == "all"}
    checks = [("demo val: rules >= bm25 + 0.25", gate["demo", "val", "rules"] >= gate["demo", "val", "bm25"] + 0.25)]
    checks += [(f"{g} {s}: rules >= bm25", gate[g, s, "rules"] >= gate[g, s, "bm25"])
               for g, s, r in gate if r == "bm25" and g != "demo"]
    for what, ok in checks:
        print(f"gate {what}: {'met' if ok else 'NOT met'}")
    if a.out:
        a.out.mkdir(parents=True, exist_ok=True)
        with open(a.out / "teacher.csv", "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=header)
            w.writeheader()
            w.writerows(rows)
        (a.out / "gate.json").write_text(json.dumps(dict(checks), indent=1) + "\n")
    return 0 if all(ok for _, ok in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
