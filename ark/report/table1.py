"""Table 1 from run directories: the paper's layout, its published numbers, ours, and the difference.

Reads only files: ``results/paper/table1.csv`` (the paper's numbers, with the citation in its header)
and, under ``<runs>/<experiment>/<graph>/<run_name>/``, each run's identity and its means and 95% CIs
through `ark.run.rundir.RunDir`. No LLM, no graph. A run becomes an "ours" row under the paper
row it reproduces (BM25 -> BM25; ARK + GPT-4.1 -> "ARK"; ARK + GPT-4o -> "ARK + GPT-4o"; ARK + the
Qwen3-8B student distilled on 6,000 queries -> "ARK distilled"; ARK rows need budget t20_n3 and the
full toolset); any other run (e.g. the demo graph, another backbone) is listed under "Other runs". Rows
are named by `ark.run.rundir.run_label`.
Graphs other than AMAZON/MAG/PRIME (the demo graph) get their own columns, without paper numbers.

Two protocols per run (`ark.analysis.metrics`): each "ours" row holds the run's own numbers, labelled with the
protocol it was scored by (``metrics_mode``: paper, stark_qa with its torchmetrics behaviour, or authors),
and below it the same run under the ARK authors' evaluation, rescored from its ``predictions.jsonl``
(`authors_record_metrics`: the agents' lists fused by votes, ties by first index in their concatenation,
uncut, unfiltered; `authors_aggregate`: failed queries left out; no LLM call); a run made with
``metrics_mode=authors`` has that row already.

    from ark.report.table1 import build_table1, write_table1
    table = build_table1(Path("results/runs"), "table1", Path("results/paper/table1.csv"))
    write_table1(table, Path("results"))          # results/table1.md, table1.csv, table1.tex
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass, field
from pathlib import Path

from ark.analysis.metrics import authors_aggregate, authors_record_metrics
from ark.run import rundir
from ark.run.rundir import run_label

PAPER_GRAPHS = ("amazon", "mag", "prime")
TABLE1_METRICS = ("hit@1", "recall@20", "mrr")
METRIC_LABEL = {"hit@1": "Hit@1", "hit@5": "Hit@5", "recall@20": "R@20", "mrr": "MRR"}
GRAPH_LABEL = {"amazon": "AMAZON", "mag": "MAG", "prime": "PRIME", "average": "Average"}
PAPER_ROW_OF_RUN = {  # (retriever, backbone) -> paper row; ARK rows also need t20_n3 + full
    ("bm25", None): "BM25",
    ("ark", "gpt-4.1"): "ARK",
    ("ark", "gpt-4o"): "ARK + GPT-4o",
    ("ark", "qwen3-8b-6000"): "ARK distilled",
}
PROTOCOL_LABEL = {"paper": "paper protocol", "stark_qa": "stark-qa's evaluator", "authors": "authors' protocol"}
AUTHORS_LABEL = "authors' protocol, rescored"   # the second row of a run (see the module docstring)
CATEGORY_LABEL = {"training-free": "Training-free", "requires-training": "Requires training on target graph"}
KIND_LABEL = {"retrieval": "Retrieval-based", "agent": "Agent-based"}


@dataclass
class PaperRow:
    category: str
    kind: str
    method: str
    values: dict[tuple[str, str], float] = field(default_factory=dict)   # (graph, metric) -> %


@dataclass
class RunResult:
    label: str
    info: dict
    run_dir: Path
    complete: bool
    n: int
    n_ok: int
    values: dict[tuple[str, str], tuple[float, float, float]] = field(default_factory=dict)  # mean, lo, hi (%)
    graph_runs: dict[str, tuple[Path, bool]] = field(default_factory=dict)  # graph -> (its run dir, complete)
    protocol: str = "paper"                 # how `values` were scored: the run's metrics_mode (and torchmetrics)
    # the same runs rescored by the authors' protocol (empty where the run already used it)
    authors: dict[tuple[str, str], tuple[float, float, float]] = field(default_factory=dict)
    n_left_out: int = 0                     # queries the authors' protocol left out (failed), over the graphs

    @property
    def protocol_label(self) -> str:
        mode, _, tm = self.protocol.partition(":")
        return PROTOCOL_LABEL.get(mode, mode) + (f", torchmetrics {tm}" if tm else "")

    def source(self, graph: str) -> tuple[str, bool]:
        """The run directory behind ``graph``'s values and whether it is complete ("average": the
        experiment directory, complete when every graph is)."""
        if graph in self.graph_runs:
            d, complete = self.graph_runs[graph]
            return str(d), complete
        return str(self.run_dir.parent.parent), self.complete


@dataclass
class Table1:
    graphs: list[str]                      # metric column groups, in order (paper graphs, then others)
    metrics: tuple[str, ...]
    paper: list[PaperRow]
    ours: dict[str, list[RunResult]]       # paper method -> our runs reproducing it
    other: list[RunResult]                 # runs without a paper row
    citation: str

    @property
    def columns(self) -> list[tuple[str, str]]:
        groups = list(self.graphs)
        if all(g in groups for g in PAPER_GRAPHS):
            groups.insert(groups.index("prime") + 1, "average")
        return [(g, m) for g in groups for m in self.metrics]


def read_paper_table(path: Path) -> tuple[list[PaperRow], str]:
    """The paper's rows (in paper order) and the citation comment lines of the CSV."""
    text = Path(path).read_text(encoding="utf-8")
    comments = [ln[1:].strip() for ln in text.splitlines() if ln.startswith("#")]
    body = "\n".join(ln for ln in text.splitlines() if not ln.startswith("#"))
    rows: dict[str, PaperRow] = {}
    for r in csv.DictReader(io.StringIO(body)):
        row = rows.setdefault(r["method"], PaperRow(r["category"], r["kind"], r["method"]))
        row.values[(r["graph"], r["metric"])] = float(r["value"])
    return list(rows.values()), " ".join(comments)


def paper_row_for(info: dict) -> str | None:
    key = (info.get("retriever"), info.get("backbone"))
    if info.get("retriever") == "ark" and (info.get("budget"), info.get("ablation")) != ("t20_n3", "full"):
        return None
    return PAPER_ROW_OF_RUN.get(key)


def _protocol(metrics: dict) -> str:
    """A run's scoring protocol from its metrics.json: ``paper``, ``authors`` or ``stark_qa:<torchmetrics>``."""
    mode = metrics.get("metrics_mode") or "paper"
    return f"{mode}:{metrics.get('torchmetrics')}" if mode == "stark_qa" and metrics.get("torchmetrics") else mode


def authors_values(run: rundir.RunDir, metrics=TABLE1_METRICS) -> tuple[dict[str, tuple[float, float, float]], int]:
    """A run's ``metrics`` by the authors' protocol, rescored from its records (`authors_record_metrics`,
    `authors_aggregate`; the run's bootstrap settings): ({metric: (mean, ci_low, ci_high)} as fractions,
    the number of queries left out)."""
    per_query = [authors_record_metrics(r, metrics) for r in run.records()]
    agg = authors_aggregate(per_query, n_boot=run.metrics.get("n_boot", 1000), seed=run.metrics.get("seed", 0))
    values = {m: (v["mean"], v["ci_low"], v["ci_high"]) for m, v in agg.items()}
    return values, sum(m is None for m in per_query)


def find_runs(runs_root: Path, experiment: str, metrics=TABLE1_METRICS) -> list[RunResult]:
    """Every run directory of ``experiment`` (``<runs_root>/<experiment>/<graph>/<run>``) with a
    metrics.json, read through `ark.run.rundir.RunDir` (shards are not runs), with its numbers by the
    authors' protocol (`authors_values`) unless it was scored that way."""
    out = []
    base = Path(runs_root) / experiment
    for metrics_path in sorted(base.glob(f"*/*/{rundir.METRICS_FILE}")):
        if not rundir.is_run_dir(metrics_path.parent):
            continue
        run = rundir.RunDir(metrics_path.parent)
        info = dict(run.info)
        if info.get("split") not in (None, "test"):
            info = {**info, "note": f"split {info.get('split')}"}
        m = run.metrics
        rr = RunResult(run_label(info), info, run.path, run.complete, m.get("n", 0), m.get("n_ok", 0),
                       protocol=_protocol(m))
        graph = info.get("graph") or run.path.parent.name
        rr.graph_runs[graph] = (run.path, rr.complete)
        for name, v in run.metric_cis().items():
            rr.values[(graph, name)] = tuple(100 * x for x in v)
        if rr.protocol != "authors":
            values, rr.n_left_out = authors_values(run, metrics)
            rr.authors = {(graph, name): tuple(100 * x for x in v) for name, v in values.items()}
        out.append(rr)
    return out


def _merge_by_label(runs: list[RunResult]) -> list[RunResult]:
    """One row per method label and protocol: graphs of the same method side by side."""
    merged: dict[tuple[str, str], RunResult] = {}
    for r in runs:
        k = (r.label, r.protocol)
        if k not in merged:
            merged[k] = RunResult(r.label, dict(r.info), r.run_dir, r.complete, r.n, r.n_ok, dict(r.values),
                                  dict(r.graph_runs), r.protocol, dict(r.authors), r.n_left_out)
        else:
            m = merged[k]
            m.values.update(r.values)
            m.authors.update(r.authors)
            m.graph_runs.update(r.graph_runs)
            m.complete = m.complete and r.complete
            m.n += r.n
            m.n_ok += r.n_ok
            m.n_left_out += r.n_left_out
    return list(merged.values())


def build_table1(runs_root: Path, experiment: str = "table1",
                 paper_csv: Path = Path("results/paper/table1.csv"), metrics=TABLE1_METRICS) -> Table1:
    """Collect the paper's Table 1 and our runs of ``experiment`` into one table."""
    paper, citation = read_paper_table(paper_csv)
    runs = find_runs(runs_root, experiment, metrics)
    graphs = list(PAPER_GRAPHS) + sorted({r.info.get("graph") for r in runs} - set(PAPER_GRAPHS) - {None})
    ours: dict[str, list[RunResult]] = {}
    other: list[RunResult] = []
    for r in runs:
        row = paper_row_for(r.info) if r.info.get("split") == "test" else None
        if row is not None and r.info.get("graph") in PAPER_GRAPHS:
            ours.setdefault(row, []).append(r)
        else:
            other.append(r)
    ours = {k: _merge_by_label(v) for k, v in ours.items()}
    for rows in ours.values():
        for r in rows:
            _add_average(r)
    return Table1(graphs, tuple(metrics), paper, ours, _merge_by_label(other), citation)


def _add_average(r: RunResult) -> None:
    for values in (r.values, r.authors):
        for m in TABLE1_METRICS:
            vals = [values.get((g, m)) for g in PAPER_GRAPHS]
            if all(v is not None for v in vals):
                values[("average", m)] = (sum(v[0] for v in vals) / 3, math.nan, math.nan)


# --- rendering ------------------------------------------------------------------------------------
def _fmt(v: float | None, digits: int = 2) -> str:
    return "" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.{digits}f}"


def _diff(ours: tuple | None, paper: float | None) -> str:
    if ours is None or paper is None:
        return ""
    return f"{ours[0] - paper:+.2f}"


def _protocol_rows(r: RunResult) -> list[tuple[str, str, dict]]:
    """(source suffix, protocol label, values) of a run's rows: its own numbers, then the authors' rescoring."""
    rows = [("", r.protocol_label, r.values)]
    if r.authors:
        rows.append(("_authors", AUTHORS_LABEL, r.authors))
    return rows


def table1_records(t: Table1) -> list[dict]:
    """Long-format rows: method, source (paper | ours | diff, and ours_authors | diff_authors for the
    authors' protocol rescored), protocol, graph, metric, value, CI, run."""
    recs = []
    for row in t.paper:
        for (g, m), v in row.values.items():
            if m in t.metrics:
                recs.append({"category": row.category, "kind": row.kind, "method": row.method, "source": "paper",
                             "protocol": "", "graph": g, "metric": m, "value": v, "ci_low": "", "ci_high": "",
                             "run_dir": "", "complete": ""})
        for r in t.ours.get(row.method, []):
            for suffix, label, values in _protocol_rows(r):
                for (g, m), (mean, lo, hi) in values.items():
                    if m not in t.metrics:
                        continue
                    run_dir, complete = r.source(g)
                    base = {"category": row.category, "kind": row.kind, "method": row.method, "protocol": label,
                            "graph": g, "metric": m, "run_dir": run_dir, "complete": complete}
                    recs.append({**base, "source": "ours" + suffix, "value": round(mean, 4), "ci_low": _fmt(lo, 4),
                                 "ci_high": _fmt(hi, 4)})
                    p = row.values.get((g, m))
                    if p is not None:
                        recs.append({**base, "source": "diff" + suffix, "value": round(mean - p, 4), "ci_low": "",
                                     "ci_high": ""})
    for r in t.other:
        for suffix, label, values in _protocol_rows(r):
            for (g, m), (mean, lo, hi) in values.items():
                if m in t.metrics:
                    run_dir, complete = r.source(g)
                    recs.append({"category": "ours", "kind": "", "method": r.label, "source": "ours" + suffix,
                                 "protocol": label, "graph": g, "metric": m, "value": round(mean, 4),
                                 "ci_low": _fmt(lo, 4), "ci_high": _fmt(hi, 4), "run_dir": run_dir,
                                 "complete": complete})
    return recs


def _ours_cells(t: Table1, values: dict, ci: bool) -> list[str]:
    cells = []
    for g, m in t.columns:
        v = values.get((g, m))
        if v is None:
            cells.append("")
        elif ci and not math.isnan(v[1]):
            cells.append(f"{v[0]:.2f} [{v[1]:.1f}, {v[2]:.1f}]")
        else:
            cells.append(f"{v[0]:.2f}")
    return cells


def render_markdown(t: Table1) -> str:
    cols = t.columns
    head = ["Category", "Method"] + [f"{GRAPH_LABEL.get(g, g.upper())} {METRIC_LABEL.get(m, m)}" for g, m in cols]
    lines = ["# Table 1: retrieval on the STaRK synthetic test sets (%)", "",
             "Paper rows are the published numbers; **ours** rows are our runs (mean [95% bootstrap CI]); "
             "**Δ** = ours − paper. `*` marks an incomplete run (failed or missing queries). Each run shows "
             "two protocols: first as it was scored (*paper protocol*: the fused list cut to 20, "
             "non-candidates dropped, as the paper's appendix describes), then *authors' protocol, "
             f"rescored* (`{AUTHORS_LABEL}`: its stored records scored as the ARK authors' evaluation code is "
             "described, the agents' lists fused with ties broken by first index, uncut, unfiltered, failed "
             "queries left out of the mean; no LLM call).", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    last_cat = last_kind = None
    for row in t.paper:
        cat = CATEGORY_LABEL.get(row.category, row.category) if row.category != last_cat else ""
        if row.kind != last_kind or row.category != last_cat:
            lines.append(f"| {cat} | *{KIND_LABEL.get(row.kind, row.kind)}* |" + " |" * len(cols))
            cat = ""
        last_cat, last_kind = row.category, row.kind
        lines.append(f"| {cat} | {row.method} | " + " | ".join(_fmt(row.values.get(c)) for c in cols) + " |")
        for r in t.ours.get(row.method, []):
            star = "" if r.complete else "*"
            for _, label, values in _protocol_rows(r):
                lines.append(f"|  | ↳ **ours**{star}: {r.label} · *{label}* | "
                             + " | ".join(_ours_cells(t, values, True)) + " |")
                lines.append(f"|  | ↳ **Δ** · *{label}* | "
                             + " | ".join(_diff(values.get(c), row.values.get(c)) for c in cols) + " |")
    if t.other:
        lines.append("| Other runs |  |" + " |" * len(cols))
        for r in t.other:
            star = "" if r.complete else "*"
            note = f" [{r.info['note']}]" if r.info.get("note") else ""
            for _, label, values in _protocol_rows(r):
                lines.append(f"|  | **ours**{star}: {r.label}{note} · *{label}* | "
                             + " | ".join(_ours_cells(t, values, True)) + " |")
    lines += ["", f"Paper numbers: {t.citation}"]
    incomplete = [r for rs in list(t.ours.values()) + [t.other] for r in rs if not r.complete]
    for r in incomplete:
        where = [str(d) for d, complete in r.graph_runs.values() if not complete] or [str(r.run_dir)]
        left = f"; the authors' protocol leaves {r.n_left_out} failed out" if r.n_left_out else ""
        lines.append(f"`*` {r.label}: {r.n_ok}/{r.n} queries scored ({', '.join(where)}){left}")
    return "\n".join(lines) + "\n"


def render_latex(t: Table1) -> str:
    cols = t.columns
    groups = []
    for g, _ in cols:
        if not groups or groups[-1][0] != g:
            groups.append([g, 0])
        groups[-1][1] += 1
    out = [r"\begin{table*}[!ht]", r"\centering", r"\resizebox{\textwidth}{!}{",
           r"\begin{tabular}{ll" + "c" * len(cols) + "}", r"\toprule",
           " & & " + " & ".join(rf"\multicolumn{{{n}}}{{c}}{{{GRAPH_LABEL.get(g, g.upper())}}}" for g, n in groups)
           + r" \\",
           "Category & Method & " + " & ".join(METRIC_LABEL.get(m, m) for _, m in cols) + r" \\", r"\midrule"]
    last = None
    for row in t.paper:
        if (row.category, row.kind) != last:
            cat = CATEGORY_LABEL.get(row.category, row.category) if (last or (None,))[0] != row.category else ""
            out.append(rf"\textit{{{cat}}} & \multicolumn{{{len(cols) + 1}}}{{l}}{{\textit{{{KIND_LABEL.get(row.kind, row.kind)}}}}} \\")
            last = (row.category, row.kind)
        out.append(f" & {_tex(row.method)} & " + " & ".join(_fmt(row.values.get(c)) for c in cols) + r" \\")
        for r in t.ours.get(row.method, []):
            star = "" if r.complete else "$^*$"
            for _, label, values in _protocol_rows(r):
                out.append(rf" & \quad ours{star} ({_tex(label)}) & " + " & ".join(_ours_cells(t, values, False))
                           + r" \\")
                out.append(rf" & \quad $\Delta$ ({_tex(label)}) & "
                           + " & ".join(_diff(values.get(c), row.values.get(c)) for c in cols) + r" \\")
    if t.other:
        out.append(r"\midrule")
        for r in t.other:
            star = "" if r.complete else "$^*$"
            for _, label, values in _protocol_rows(r):
                out.append(rf"Ours & {_tex(r.label)}{star} ({_tex(label)}) & "
                           + " & ".join(_ours_cells(t, values, False)) + r" \\")
    out += [r"\bottomrule", r"\end{tabular}}",
            r"\caption{Retrieval performance (\%) on STaRK synthetic test sets: published numbers "
            r"(arXiv:2601.13969, Table 1), our runs as scored and rescored by the authors' protocol, and "
            r"$\Delta$ = ours $-$ paper.}",
            r"\label{tab:stark-results-repro}", r"\end{table*}"]
    return "\n".join(out) + "\n"


def _tex(s: str) -> str:
    return s.replace("&", r"\&").replace("_", r"\_").replace("%", r"\%").replace("#", r"\#")


def write_table1(t: Table1, out_dir: Path, stem: str = "table1") -> list[Path]:
    """Write ``<out_dir>/<stem>.md``, ``.csv`` and ``.tex``; returns the paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / f"{stem}.md", out_dir / f"{stem}.csv", out_dir / f"{stem}.tex"]
    paths[0].write_text(render_markdown(t), encoding="utf-8")
    recs = table1_records(t)
    with open(paths[1], "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=["category", "kind", "method", "source", "protocol", "graph", "metric", "value",
                                          "ci_low", "ci_high", "complete", "run_dir"])
        w.writeheader()
        w.writerows(recs)
    paths[2].write_text(render_latex(t), encoding="utf-8")
    return paths
