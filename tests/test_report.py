"""Table 1 from run directories: paper rows, our rows under them, differences, demo columns, files."""

import csv
import json
from pathlib import Path

import pytest

from ark.report.table1 import build_table1, read_paper_table, write_table1
from ark.run.runner import RunSettings, run_queries
from ark.cli.main import main
from tests.helpers.tiny_retriever import TinyRetriever, make_queries

REPO = Path(__file__).resolve().parents[1]
PAPER = REPO / "results" / "paper" / "table1.csv"


def make_run(root: Path, graph: str, retriever: str, backbone=None, fail=(), n=20, split="test", mode="paper"):
    name = "bm25" if retriever == "bm25" else f"ark-{backbone}-t20_n3-full"
    d = root / "table1" / graph / name
    info = {"experiment": "table1", "graph": graph, "retriever": retriever, "backbone": backbone,
            "budget": None if retriever == "bm25" else "t20_n3", "ablation": None if retriever == "bm25" else "full",
            "split": split, "run_name": name}
    d.mkdir(parents=True)
    (d / "run.json").write_text(json.dumps(info))
    return run_queries(TinyRetriever(fail_ids=set(fail)), make_queries(n),
                       RunSettings(out_dir=d, progress=False, n_boot=100, top=100 if retriever == "bm25" else 20,
                                   metrics_mode=mode))


def test_paper_table_has_every_row_and_citation():
    rows, citation = read_paper_table(PAPER)
    assert [r.method for r in rows][:2] == ["BM25", "ada-002"] and len(rows) == 13
    ark = next(r for r in rows if r.method == "ARK")
    assert ark.values[("prime", "hit@1")] == 48.20 and ark.values[("average", "mrr")] == 67.44
    assert "arXiv:2601.13969" in citation
    # the paper's Average column is the mean of the three graphs
    for r in rows:
        for m in ("hit@1", "recall@20", "mrr"):
            mean = sum(r.values[(g, m)] for g in ("amazon", "mag", "prime")) / 3
            assert r.values[("average", m)] == pytest.approx(mean, abs=0.011), (r.method, m)


def test_table1_from_runs(tmp_path):
    runs = tmp_path / "runs"
    s = {g: make_run(runs, g, "ark", "gpt-4.1") for g in ("amazon", "mag", "prime")}
    make_run(runs, "amazon", "bm25")
    make_run(runs, "demo", "ark", "scripted", fail={3})
    t = build_table1(runs, "table1", PAPER)
    assert t.graphs == ["amazon", "mag", "prime", "demo"]
    ark = t.ours["ARK"][0]
    mean = 100 * s["mag"]["metrics"]["mrr"]["mean"]
    assert ark.values[("mag", "mrr")][0] == pytest.approx(mean)
    avg = sum(100 * s[g]["metrics"]["hit@1"]["mean"] for g in s) / 3
    assert ark.values[("average", "hit@1")][0] == pytest.approx(avg)
    assert [r.label for r in t.ours["BM25"]] == ["BM25"]
    assert len(t.other) == 1 and not t.other[0].complete        # the demo run, with a failed query

    paths = write_table1(t, tmp_path / "out")
    md, csv_path, tex = paths
    text = md.read_text()
    assert "| ↳ **ours**: ARK + gpt-4.1 (t20_n3, full) · *paper protocol*" in text
    assert "**ours***: ARK + scripted (t20_n3, full)" in text and "19/20 queries scored" in text
    recs = list(csv.DictReader(open(csv_path)))
    diff = next(r for r in recs if r["method"] == "ARK" and r["source"] == "diff" and r["graph"] == "prime"
                and r["metric"] == "hit@1")
    assert float(diff["value"]) == pytest.approx(100 * s["prime"]["metrics"]["hit@1"]["mean"] - 48.20, abs=1e-3)
    paper_kar = [r for r in recs if r["method"] == "KAR" and r["source"] == "paper"]
    assert len(paper_kar) == 12
    demo = [r for r in recs if r["graph"] == "demo"]
    assert {r["metric"] for r in demo} == {"hit@1", "recall@20", "mrr"}
    # every value names the run it comes from, also in rows that merge the three graphs
    for g in ("amazon", "mag", "prime"):
        ours = {r["run_dir"] for r in recs if r["method"] == "ARK" and r["source"] != "paper" and r["graph"] == g}
        assert ours == {str(runs / "table1" / g / "ark-gpt-4.1-t20_n3-full")}, g
    assert {r["run_dir"] for r in recs if r["method"] == "ARK" and r["graph"] == "average"
            and r["source"] == "ours"} == {str(runs / "table1")}
    assert {r["complete"] for r in demo} == {"False"}
    assert f"19/20 queries scored ({runs / 'table1' / 'demo' / 'ark-scripted-t20_n3-full'})" in text
    assert tex.read_text().count(r"\\") > 20 and r"\begin{tabular}" in tex.read_text()


def test_ark_table1_builds_from_run_dirs_only(tmp_path, capsys):
    make_run(tmp_path / "runs", "demo", "bm25")
    rc = main(["table1", "--runs", str(tmp_path / "runs"), "--out", str(tmp_path / "res")])
    assert rc == 0
    assert {p.name for p in (tmp_path / "res").iterdir()} == {"table1.md", "table1.csv", "table1.tex"}
    assert "BM25" in (tmp_path / "res" / "table1.md").read_text()
    capsys.readouterr()
    # overrides belong to --reproduce: one line, nothing written
    assert main(["table1", "graph=demo", "--runs", str(tmp_path / "runs"), "--out", str(tmp_path / "res2")]) == 2
    assert capsys.readouterr().err == "ark table1: error: overrides (graph=demo) are only for --reproduce\n"
    assert not (tmp_path / "res2").exists()


def test_reproduce_stops_with_a_clear_message(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    rc = main(["table1", "--reproduce", f"paths.data={tmp_path / 'nodata'}", "--runs", str(tmp_path / "runs")])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and err.startswith("ark table1: error: reproduce-table1 cannot start: ")
    assert "export OPENAI_API_KEY=" in err and "STaRK data for graph 'prime' is missing" in err
    assert not (tmp_path / "runs").exists()                    # nothing ran


@pytest.mark.commands   # a whole shrunk Table 1: its runs end to end
def test_shrunk_table1_on_demo_with_scripted_server(tmp_path, monkeypatch):
    """`ark table1 --reproduce` end to end: the table1 sweep (`ark run -m`, a Hydra multirun) on the demo
    graph, then the tables."""
    from tests.helpers.scripted_server import ScriptedServer
    from tests.helpers.paths import DEMO_ROOT
    from tests.helpers.policies import search_select_finish

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    runs, out = tmp_path / "runs", tmp_path / "results"
    with ScriptedServer(responder=search_select_finish) as server:
        rc = main(["table1", "--reproduce", "graph=demo", "backbone=scripted", f"backbone.base_url={server.base_url}",
                   "limit=4", "budget=t5_n1", "progress=false", "n_boot=100", f"paths.data={DEMO_ROOT}",
                   f"paths.llm_cache={tmp_path}/llm.sqlite", "--runs", str(runs), "--out", str(out)])
        assert rc == 0 and server.calls == 4 * 2                    # ARK: 4 queries x 2 steps, 1 agent
    run_dirs = sorted(p.name for p in (runs / "table1" / "demo").iterdir())
    assert run_dirs == ["ark-scripted-t5_n1-full_test_limit4", "bm25_test_limit4"]
    ark = json.loads((runs / "table1" / "demo" / run_dirs[0] / "metrics.json").read_text())
    assert ark["complete"] and ark["n"] == 4
    md = (out / "table1.md").read_text()
    assert "ARK + scripted (t5_n1, full)" in md and "**ours**: BM25" in md
    recs = list(csv.DictReader(open(out / "table1.csv")))
    mine = next(r for r in recs if r["method"].startswith("ARK + scripted") and r["metric"] == "mrr")
    assert float(mine["value"]) == pytest.approx(100 * ark["metrics"]["mrr"]["mean"], abs=1e-3)
    assert (out / "table1.tex").exists()


def test_a_single_run_stops_before_work_with_each_fix(tmp_path, monkeypatch):
    from ark.config.compose import compose
    from ark.config.evaluation import run

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    cfg = compose([f"paths.data={tmp_path / 'nodata'}", "graph=prime", "backbone=gpt-4.1",
                   f"paths.runs={tmp_path / 'runs'}"])
    with pytest.raises(SystemExit) as ei:
        run(cfg)
    msg = str(ei.value)
    assert f"ark download prime --root {tmp_path / 'nodata'}" in msg
    assert "export OPENAI_API_KEY=" in msg
    assert not (tmp_path / "runs").exists()                    # nothing ran


def test_table1_reports_each_run_under_both_protocols(tmp_path):
    """Every run's row as it was scored, then the authors' protocol rescored from its records (no LLM):
    the agents' lists fused by votes, ties by first index, uncut, failed queries left out."""
    from ark.analysis.metrics import authors_aggregate, authors_record_metrics
    from ark.run.rundir import RunDir

    runs = tmp_path / "runs"
    for g in ("amazon", "mag", "prime"):
        make_run(runs, g, "ark", "gpt-4.1", fail={5} if g == "mag" else ())
    make_run(runs, "demo", "ark", "scripted", mode="authors")
    t = build_table1(runs, "table1", PAPER)
    ark = t.ours["ARK"][0]
    assert ark.protocol_label == "paper protocol" and ark.n_left_out == 1
    mag = RunDir(runs / "table1" / "mag" / "ark-gpt-4.1-t20_n3-full")
    want = authors_aggregate([authors_record_metrics(r, ("hit@1", "recall@20", "mrr")) for r in mag.records()],
                             n_boot=100)
    for m in ("hit@1", "recall@20", "mrr"):
        assert ark.authors[("mag", m)][0] == pytest.approx(100 * want[m]["mean"])
        assert ark.values[("mag", m)][0] == pytest.approx(100 * mag.metrics["metrics"][m]["mean"])
    assert want["mrr"]["n"] == 19 and want["mrr"]["n_left_out"] == 1
    assert ark.authors[("mag", "hit@1")] != ark.values[("mag", "hit@1")]   # the two protocols differ here
    # a run made with metrics_mode=authors is labelled so and needs no rescoring
    demo = t.other[0]
    assert demo.protocol_label == "authors' protocol" and demo.authors == {}

    md, csv_path, tex = write_table1(t, tmp_path / "out")
    text = md.read_text()
    assert "| ↳ **ours***: ARK + gpt-4.1 (t20_n3, full) · *authors' protocol, rescored* |" in text
    assert "| ↳ **Δ** · *authors' protocol, rescored* |" in text
    assert "**ours**: ARK + scripted (t20_n3, full) · *authors' protocol* |" in text
    assert "the authors' protocol leaves 1 failed out" in text
    recs = list(csv.DictReader(open(csv_path)))
    rescored = next(r for r in recs if r["method"] == "ARK" and r["source"] == "ours_authors" and r["graph"] == "mag"
                    and r["metric"] == "mrr")
    assert rescored["protocol"] == "authors' protocol, rescored"
    assert float(rescored["value"]) == pytest.approx(100 * want["mrr"]["mean"], abs=1e-4)
    assert {r["source"] for r in recs if r["method"] == "ARK"} == {"paper", "ours", "diff", "ours_authors", "diff_authors"}
    assert r"\quad ours$^*$ (authors' protocol, rescored) &" in tex.read_text()
