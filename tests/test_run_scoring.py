"""How a run scores its lists: a baseline's own scores in stark_qa mode (so the torchmetrics switch acts on a
run), ARK's votes scored with stark_scores, records without scores, NaN scores, and the authors' protocol
as a run's metrics_mode."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ark.config.compose import compose
from ark.config.evaluation import run
from ark.config.checks import setting_problems
from ark.analysis.metrics import authors_fuse, authors_record_metrics, stark_evaluate, stark_scores
from ark.run.records import load_predictions
from ark.run.runner import RunSettings, run_queries
from ark.retriever import Retrieval
from tests.helpers.paths import DEMO_ROOT
from tests.helpers.tiny_retriever import Q, TinyRetriever, make_queries

KG = Path(__file__).resolve().parent / "data" / "tables_kg"
CANDIDATES = list(range(50))
METRICS = ("hit@1", "recall@20", "mrr")


class ScoredRetriever:
    """Query 0: a baseline's list with its own scores, the gold node (7) scored 0.0 and a non-candidate
    (999) inside; query 1: the same list without scores (as ARK's votes); query 2: a NaN score."""

    LIST = [3, 999, 9, 7]
    SCORES = [2.5, 2.0, 1.2, 0.0]

    async def aretrieve(self, query, query_id=""):
        if query_id == 0:
            return Retrieval(ranking=list(self.LIST), scores=list(self.SCORES))
        if query_id == 1:
            return Retrieval(ranking=list(self.LIST), agent_rankings=[list(self.LIST)])
        return Retrieval(ranking=[3, 9, 7], scores=[2.5, float("nan"), 1.0])


QUERIES = [Q(0, "scored", (7,)), Q(1, "votes", (7,)), Q(2, "nan", (7,))]


def _run(tmp_path, name, **kw):
    s = RunSettings(out_dir=tmp_path / name, progress=False, n_boot=10, metrics=METRICS, **kw)
    summary = run_queries(ScoredRetriever(), QUERIES, s, candidate_ids=CANDIDATES)
    return summary, load_predictions(s.out_dir)


def test_stark_qa_mode_ranks_a_baselines_own_scores_so_torchmetrics_switches(tmp_path):
    recs = {}
    for tm in ("1.7.0", "1.9"):
        _, recs[tm] = _run(tmp_path, tm, metrics_mode="stark_qa", torchmetrics=tm)
    for tm, r in recs.items():
        # the record holds the list with the retriever's own scores (the non-candidate is left out of the
        # scoring, as stark-qa's evaluator reads candidates only)
        assert r["0"]["ranking"] == [3, 999, 9, 7] and r["0"]["scores"] == [2.5, 2.0, 1.2, 0.0]
        assert r["0"]["metrics"] == stark_evaluate(CANDIDATES, {3: 2.5, 9: 1.2, 7: 0.0}, [7], METRICS, torchmetrics=tm)
    # the gold node's own score is 0: since torchmetrics 1.7.4 MRR and Recall ignore it, before they did not
    assert recs["1.7.0"]["0"]["metrics"]["mrr"] == pytest.approx(1 / 3)
    assert recs["1.7.0"]["0"]["metrics"]["recall@20"] == 1.0
    assert recs["1.9"]["0"]["metrics"]["mrr"] == 0.0 and recs["1.9"]["0"]["metrics"]["recall@20"] == 0.0


def test_a_ranking_without_scores_keeps_stark_scores_and_ignores_the_switch(tmp_path):
    recs = {tm: _run(tmp_path, tm, metrics_mode="stark_qa", torchmetrics=tm)[1] for tm in ("1.7.0", "1.9")}
    for r in recs.values():
        assert "scores" not in r["1"]
        in_range = {k: v for k, v in stark_scores([3, 999, 9, 7]).items() if k in CANDIDATES}
        assert r["1"]["metrics"] == stark_evaluate(CANDIDATES, in_range, [7], METRICS)
    assert recs["1.7.0"]["1"]["metrics"] == recs["1.9"]["1"]["metrics"]


def test_a_nan_score_fails_its_query_and_the_run_goes_on(tmp_path):
    summary, recs = _run(tmp_path, "nan", metrics_mode="stark_qa")
    assert recs["2"]["status"] == "failed" and recs["2"]["metrics"] == {}
    assert recs["2"]["error"].startswith("NaNScoreError: score of node 9 (position 1 of the ranking) is NaN")
    assert recs["0"]["status"] == recs["1"]["status"] == "ok"
    assert not summary["complete"] and summary["n_failed"] == 1 and summary["metrics"]["mrr"]["n"] == 2


def test_records_written_before_scores_were_stored_load_and_resume(tmp_path):
    first, _ = _run(tmp_path, "old", metrics_mode="stark_qa")
    pred = tmp_path / "old" / "predictions.jsonl"
    lines = [json.loads(x) for x in pred.read_text().splitlines()]
    assert any("scores" in rec for rec in lines)
    for rec in lines:
        rec.pop("scores", None)
    pred.write_text("".join(json.dumps(rec) + "\n" for rec in lines))
    again, recs = _run(tmp_path, "old", metrics_mode="stark_qa")
    assert again["this_run"]["computed"] == 1          # only the failed (NaN) query is computed again
    assert "scores" not in recs["0"] and again["metrics"] == first["metrics"]


@pytest.mark.commands
def test_bm25_baseline_run_in_stark_qa_mode_scores_its_own_scores(tmp_path):
    """A real BM25 run on the demo graph (experiments/run.py's library call) in stark_qa mode: every record
    holds the scores BM25 gave its list, and is scored by stark-qa's evaluator with them."""
    from ark.data.sources import DemoSource

    cands = DemoSource(root=str(DEMO_ROOT)).graph().candidate_ids
    out = tmp_path / "bm25"
    run(compose(["graph=demo", "retriever=bm25", "limit=20", f"paths.data={DEMO_ROOT}", "progress=false",
                 "n_boot=10", "metrics_mode=stark_qa", "torchmetrics=1.9", f"out_dir={out}"]))
    recs = load_predictions(out)
    assert len(recs) == 20
    for rec in recs.values():
        assert len(rec["scores"]) == len(rec["ranking"]) and rec["scores"] == sorted(rec["scores"], reverse=True)
        want = stark_evaluate(cands, dict(zip(rec["ranking"], rec["scores"])), rec["gold"], list(rec["metrics"]),
                              torchmetrics="1.9")
        assert rec["metrics"] == want, rec["query_id"]


def test_torchmetrics_changes_a_dense_baseline_run(tmp_path, monkeypatch):
    """The dense baseline (OpenAI-style embeddings from the scripted server) run in stark_qa mode with its
    top 2: a gold node below the list sits in the bottom tie at min(cosine) - 1 < 0, which "1.9" ignores
    for MRR and Recall and "1.7.0" does not, so the switch changes the run's numbers, each query's as
    stark-qa's evaluator gives them with the same scores."""
    from hydra.utils import instantiate

    from tests.helpers.policies import search_select_finish
    from tests.helpers.scripted_server import ScriptedServer

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-run-scoring")
    means, cands = {}, None
    with ScriptedServer(responder=search_select_finish) as server:
        for tm in ("1.7.0", "1.9"):
            out = tmp_path / tm
            cfg = compose([
                "graph=tables", f"graph.path={KG}", "graph.name=tables_kg", "retriever=dense", "retriever.top=2",
                f"paths.data={tmp_path}/data", "progress=false", "n_boot=10", "encoder=openai-3-small",
                f"+encoder.encoder.base_url={server.base_url}", "+encoder.encoder.dimensions=64",
                "+encoder.encoder.max_retries=0", "metrics_mode=stark_qa", f"torchmetrics={tm}", f"out_dir={out}"])
            summary = run(cfg)
            means[tm] = {k: v["mean"] for k, v in summary["metrics"].items()}
            cands = cands if cands is not None else instantiate(cfg.graph).graph().candidate_ids
            for rec in load_predictions(out).values():
                assert len(rec["ranking"]) == len(rec["scores"]) == 2
                assert rec["metrics"] == stark_evaluate(cands, dict(zip(rec["ranking"], rec["scores"])), rec["gold"],
                                                        list(rec["metrics"]), torchmetrics=tm), rec["query_id"]
    assert means["1.7.0"]["mrr"] > means["1.9"]["mrr"]
    assert means["1.7.0"]["hit@1"] == means["1.9"]["hit@1"]   # hit rate is not masked in either


def test_authors_is_a_run_protocol(tmp_path):
    assert not [p for p in setting_problems(compose(["metrics_mode=authors", "retriever=bm25"])) if "metrics_mode" in p]
    assert "bad setting metrics_mode='exact': choose one of paper, stark_qa, authors" in \
        setting_problems(compose(["metrics_mode=exact", "retriever=bm25"]))
    qs = make_queries(12)
    s = RunSettings(out_dir=tmp_path / "authors", progress=False, n_boot=10, metrics_mode="authors")
    summary = run_queries(TinyRetriever(fail_ids={4}), qs, s)
    paper = run_queries(TinyRetriever(fail_ids={4}), qs, RunSettings(out_dir=tmp_path / "paper", progress=False,
                                                                        n_boot=10))
    recs = load_predictions(s.out_dir)
    ok = [r for r in recs.values() if r["status"] == "ok"]
    for r in ok:   # the whole fused list, by votes and first index in the concatenation, scored as it is
        assert r["ranking"] == authors_fuse(r["agent_rankings"])
        assert r["metrics"] == authors_record_metrics(r, s.metrics)
    assert summary["metrics"]["mrr"]["mean"] == pytest.approx(sum(r["metrics"]["mrr"] for r in ok) / len(ok))
    assert summary["metrics"]["mrr"]["n_left_out"] == 1 and summary["metrics"]["mrr"]["n"] == 11
    assert summary["metrics_mode"] == "authors" and not summary["complete"]   # a failed query: never complete
    assert summary["metrics"]["mrr"]["mean"] != paper["metrics"]["mrr"]["mean"]


class OwnScores:
    """Query 0's list with scores of its own (``with_scores``), all >= 2 so neither torchmetrics
    behaviour changes a value, or the same list without scores, as ARK's votes come."""

    def __init__(self, with_scores: bool):
        self.with_scores = with_scores

    async def aretrieve(self, query, query_id=""):
        ranking = [3, 9, 7, 12]
        return Retrieval(ranking=ranking, scores=[9.0, 5.0, 4.0, 2.5] if self.with_scores else None,
                         agent_rankings=[ranking])


def _metrics_json(tmp_path, name, retriever, tm):
    s = RunSettings(out_dir=tmp_path / name, progress=False, n_boot=10, metrics=METRICS, metrics_mode="stark_qa",
                    torchmetrics=tm)
    run_queries(retriever, [Q(0, "q", (7,)), Q(1, "q", (12, 40))], s, candidate_ids=CANDIDATES)
    summary = json.loads((s.out_dir / "metrics.json").read_text())
    timing = {k: summary.pop(k) for k in ("latency_s", "this_run")}   # how long it took: never equal
    assert timing
    return summary, {q: (r["metrics"], r["agent_metrics"]) for q, r in load_predictions(s.out_dir).items()}


def test_metrics_json_is_the_same_under_both_torchmetrics_where_the_switch_cannot_act(tmp_path):
    """stark_qa mode on lists without scores of their own (ARK's votes, ranked by stark_scores >= 2):
    metrics.json is the same under torchmetrics 1.7.0 and 1.9, field for field (it recorded the setting,
    which could not act). A baseline's own scores are ranked by the setting: its metrics.json names it,
    and differs there only, even where these scores give the same per-query values."""
    votes = {tm: _metrics_json(tmp_path, f"votes{tm}", OwnScores(False), tm) for tm in ("1.7.0", "1.9")}
    assert votes["1.7.0"] == votes["1.9"] and votes["1.9"][0]["torchmetrics"] is None
    scored = {tm: _metrics_json(tmp_path, f"scored{tm}", OwnScores(True), tm) for tm in ("1.7.0", "1.9")}
    (a, recs_a), (b, recs_b) = scored["1.7.0"], scored["1.9"]
    assert recs_a == recs_b                                         # no per-query value changes
    assert (a["torchmetrics"], b["torchmetrics"]) == ("1.7.0", "1.9")
    assert {k: v for k, v in a.items() if k != "torchmetrics"} == {k: v for k, v in b.items() if k != "torchmetrics"}


def test_torchmetrics_is_no_part_of_an_ark_runs_identity():
    """An ARK run in stark_qa mode is the same run under either torchmetrics (its votes cannot be ranked
    differently): same run.json identity and fingerprint, so metrics.json["run"] is the same too; a
    baseline's differs (its own scores are ranked by the setting)."""
    from ark.config.identity import fingerprint, run_identity, run_info

    def info(retriever, tm):
        cfg = compose([f"retriever={retriever}", "graph=demo", "metrics_mode=stark_qa", f"torchmetrics={tm}"])
        return run_info(cfg), fingerprint(run_identity(cfg))

    assert info("ark", "1.7.0") == info("ark", "1.9") and info("ark", "1.9")[0]["torchmetrics"] is None
    assert info("bm25", "1.7.0") != info("bm25", "1.9") and info("bm25", "1.9")[0]["torchmetrics"] == "1.9"
