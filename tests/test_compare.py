"""Paired comparisons (ark/analysis/paired.py): constructed per-query scores against scipy, and run directories
over the same queries."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from ark.analysis import paired as C
from ark.analysis.metrics import aggregate
from ark.report.comparison import compare_runs
from tests.helpers.fixtures_runs import QuerySpec, make_config, write_run


def scores(n_win: int, n_lose: int, n_tie_hit: int, n_tie_miss: int) -> tuple[list[float], list[float]]:
    """Binary per-query scores: run wins n_win queries, loses n_lose, ties the rest."""
    run = [1.0] * n_win + [0.0] * n_lose + [1.0] * n_tie_hit + [0.0] * n_tie_miss
    ref = [0.0] * n_win + [1.0] * n_lose + [1.0] * n_tie_hit + [0.0] * n_tie_miss
    return run, ref


def test_paired_difference_holds_where_per_run_intervals_overlap():
    # 40 queries: the run wins 8, loses none, ties 32 (hit in 14 of them in both)
    run, ref = scores(8, 0, 14, 18)
    per_run = [aggregate([{"hit@1": v} for v in vals], n_boot=2000, seed=0)["hit@1"] for vals in (run, ref)]
    assert per_run[0]["ci_low"] < per_run[1]["ci_high"]          # the runs' own CIs overlap
    d = C.paired_diff(run, ref, "hit@1", n_boot=2000)
    assert d.n == 40 and d.diff == pytest.approx(8 / 40) and (d.wins, d.losses, d.ties) == (8, 0, 32)
    assert d.mean == pytest.approx(22 / 40) and d.mean_reference == pytest.approx(14 / 40)
    assert 0 < d.ci_low < d.diff < d.ci_high                      # the paired interval excludes 0
    expected = stats.wilcoxon(np.subtract(run, ref), zero_method="wilcox").pvalue
    assert d.p_value == pytest.approx(expected) and d.p_value < 0.05 and d.significant


def test_no_difference_is_not_significant():
    run, ref = scores(5, 5, 10, 10)
    d = C.paired_diff(run, ref, "hit@1")
    assert d.diff == 0 and d.ci_low < 0 < d.ci_high and not d.significant
    same = C.paired_diff(ref, ref, "hit@1")
    assert same.p_value == 1.0 and (same.ci_low, same.ci_high) == (0.0, 0.0) and not same.significant


def test_permutation_test_agrees_with_scipy():
    rng = np.random.default_rng(3)
    ref = rng.random(30)
    run = ref + rng.normal(0.05, 0.1, 30)
    d = C.paired_diff(run, ref, "mrr", test="permutation")
    expected = stats.permutation_test((run - ref,), lambda x, axis: np.mean(x, axis=axis),
                                      permutation_type="samples", n_resamples=9999, vectorized=True,
                                      random_state=0).pvalue
    assert d.p_value == pytest.approx(expected) and d.test == "permutation"


def test_bad_settings_name_the_valid_choices():
    with pytest.raises(ValueError, match="valid tests: wilcoxon, permutation"):
        C.paired_diff([1.0], [0.0], test="ttest")
    with pytest.raises(ValueError, match="one length"):
        C.paired_diff([1.0, 0.0], [0.0])




def test_ark_compare_prints_the_paired_table_and_names_a_bad_test(tmp_path, capsys):
    from ark.cli.main import main

    ref = _run(tmp_path, "full", [q % 2 == 0 for q in range(24)])
    run = _run(tmp_path, "better", [True] * 24)
    assert main(["compare", str(run), str(ref), "--metrics", "hit@1", "mrr"]) == 0
    out = capsys.readouterr().out
    assert out == (f"{run}\n  minus {ref}  (wilcoxon; * p < 0.05; values in %)\n"
                   + C.format_table(compare_runs(run, ref, ("hit@1", "mrr"))) + "\n")
    assert main(["compare", str(run), str(ref), "--test", "ttest"]) == 2
    assert capsys.readouterr().err == ("ark compare: error: unknown paired test 'ttest'; valid tests: "
                                       "wilcoxon, permutation\n")


def _run(root, name, hits: list[bool], gold_offset: int = 0, failed=()):
    qs = [QuerySpec(q, [100 + q + gold_offset], [[100 + q, 1, 2] if hit else [1, 2, 3]],
                    [{"search_graph": 1}], status="failed" if q in failed else "ok")
          for q, hit in enumerate(hits)]
    return write_run(root / "ablation" / "mag" / name, make_config("mag", experiment="ablation"), qs)


def test_compare_runs_matches_queries_by_id(tmp_path):
    ref_hits = [q % 2 == 0 for q in range(24)]
    run_hits = [True] * 24
    ref = _run(tmp_path, "full", ref_hits)
    run = _run(tmp_path, "better", run_hits, failed={1})          # query 1 failed: left out
    diffs = {d.metric: d for d in compare_runs(run, ref, ("hit@1", "recall@20"))}
    d = diffs["hit@1"]
    assert d.n == 23 and d.wins == 11 and d.losses == 0 and d.significant
    assert diffs["recall@20"].diff == pytest.approx(d.diff)
    with_failed = compare_runs(run, ref, ("hit@1",), include_failed=True)[0]
    assert with_failed.n == 24 and with_failed.wins == 11
    # a failed query scored 0 against the reference's 0 (query 1 is odd: a reference miss): a tie
    assert with_failed.ties == 13
    out = C.format_table(compare_runs(run, ref, ("hit@1",)))
    assert "hit@1" in out and "*" in out


def test_runs_over_other_queries_are_refused(tmp_path):
    ref = _run(tmp_path, "full", [True] * 4)
    other = _run(tmp_path, "other", [True] * 4, gold_offset=50)
    with pytest.raises(ValueError, match="not over the same queries"):
        compare_runs(other, ref)


def test_a_run_with_compare_to_records_the_paired_differences(tmp_path):
    """experiments/run.py with compare_to: the demo graph, the scripted server, two toolsets on the
    same queries; the paired numbers land in metrics.json and equal ark.analysis.paired on the two dirs."""
    import json
    from pathlib import Path

    from ark.config.compose import compose
    from ark.config.evaluation import run
    from tests.helpers.scripted_server import ScriptedServer
    from tests.helpers.paths import DEMO_ROOT
    from tests.helpers.policies import search_select_finish

    with ScriptedServer(responder=search_select_finish) as server:
        base = ["graph=demo", "backbone=scripted", f"backbone.base_url={server.base_url}", "limit=6",
                "budget=t5_n1", f"paths.data={DEMO_ROOT}", f"paths.runs={tmp_path}",
                f"paths.llm_cache={tmp_path}/llm.sqlite", "progress=false", "n_boot=100"]
        full = compose(base)
        run(full)
        with pytest.raises(SystemExit, match="compare_to: .*nowhere.* is not a run directory"):
            run(compose([*base, "ablation=no_neighbors", f"compare_to={tmp_path}/nowhere"]))
        assert not (tmp_path / "default" / "demo" / "ark-scripted-t5_n1-no_neighbors").exists()
        other = compose([*base, "ablation=no_neighbors", f"compare_to={full.out_dir}"])
        summary = run(other)
    paired = summary["paired"][str(full.out_dir)]
    on_disk = json.loads((Path(other.out_dir) / "metrics.json").read_text())["paired"][str(full.out_dir)]
    assert on_disk == paired and paired["hit@1"]["n"] == 6
    direct = compare_runs(other.out_dir, full.out_dir, n_boot=100)
    assert [paired[d.metric] for d in direct] == [d.to_json() for d in direct]
