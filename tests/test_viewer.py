"""Trajectory viewer (ark.report.viewer, `ark viewer`): its data and its self-containment. The page itself,
opened in headless Chromium, is tests/browser/test_viewer_in_chromium.py (`make test-browser`)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from ark.report import viewer as V

try:
    from tests.helpers.fixtures_runs import QuerySpec, make_config, write_run
except ImportError:
    from fixtures_runs import QuerySpec, make_config, write_run

EVIL = "</script><img src=x onerror=alert(1)> & <b>bold</b>"


@pytest.fixture
def run(tmp_path) -> Path:
    # query 11: gold 7 shown by agent 0's first search and selected; gold 8 selected by agent 1, shown to
    # neither; gold 44 shown by agent 1's first search, never selected
    qs = [QuerySpec(11, [7, 8, 44], [[7, 1, 2], [3, 8]], [{"search_graph": 2, "explore_neighbors": 1},
                                                          {"search_graph": 1, "explore_neighbors": 0}],
                    latency_s=2.5, text="Which papers by X cite Y?", shown=[[1, 7, 2], [3, 44]]),
          QuerySpec(12, [9], [[1, 2]], [{"search_graph": 1}], text=EVIL),
          QuerySpec(13, [5], [[5]], [{"search_graph": 1}], status="failed")]
    return write_run(tmp_path / "budget" / "mag" / "ark-gpt-4.1-t20-n3-full", make_config("mag"), qs)


def test_build_view_has_steps_metrics_and_gold(run):
    view = V.build_view(run)
    q = {x["query_id"]: x for x in view["queries"]}
    assert list(q) == [11, 12, 13]
    a0, a1 = q[11]["agents"]
    # 2 search + 1 neighbors + select + finish
    assert [c["name"] for s in a0["steps"] for c in s["calls"]] == \
        ["search_graph", "search_graph", "explore_neighbors", "select", "finish"]
    assert a0["steps"][3]["calls"][0]["arguments"] == {"node_ids": [7, 1, 2]}   # parsed JSON arguments
    assert a0["selected"] == [7, 1, 2] and a1["selected"] == [3, 8]
    assert q[11]["gold"] == [7, 8, 44] and q[11]["metrics"]["hit@5"] == 1.0
    attr = {a["gold"]: a for a in q[11]["attribution"]}
    assert {g: a["cls"] for g, a in attr.items()} == {7: "retrieved", 8: "retrieved", 44: "surfaced_not_selected"}
    assert (attr[7]["first_step"], attr[7]["first_agent"], attr[7]["first_rank"]) == (0, 0, 2)
    assert (attr[44]["first_agent"], attr[44]["first_rank"], attr[44]["selected"]) == (1, 2, False)
    assert q[13]["attribution"] == []                                   # failed: nothing to attribute
    assert q[13]["status"] == "failed" and q[13]["error"]
    assert V.build_view(run, limit=1)["queries"][0]["query_id"] == 11


def test_long_observations_are_trimmed(run):
    full = V.build_view(run)["queries"][0]["agents"][0]["steps"][0]["calls"][0]["observation"]
    view = V.build_view(run, max_observation_chars=10)
    obs = view["queries"][0]["agents"][0]["steps"][0]["calls"][0]["observation"]
    assert len(full) > 10 and obs == full[:10] + f"\n… [{len(full) - 10} more characters]"


def test_html_is_self_contained_and_escapes_data(run, tmp_path):
    page = V.write_viewer(run, tmp_path / "v.html").read_text()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert "<link" not in page and "@import" not in page
    # the data block cannot close the script tag early
    data = page.split('<script id="data" type="application/json">')[1].split("</script>")[0]
    assert "<\\/script>" in data


def test_bad_run_dir_names_the_expected_layout(tmp_path):
    with pytest.raises(FileNotFoundError, match="predictions.jsonl"):
        V.build_view(tmp_path)


def test_ark_viewer_writes_the_page_and_names_a_bad_value(run, tmp_path, capsys):
    from ark.cli.main import main

    out = tmp_path / "page" / "v.html"
    assert main(["viewer", str(run), "--out", str(out), "--limit", "2"]) == 0
    assert capsys.readouterr().out.startswith(f"wrote {out} (")
    assert out.read_text() == V.render_html(V.build_view(run, limit=2))
    assert main(["viewer", str(tmp_path / "nothing"), "--out", str(tmp_path / "x.html")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ark viewer: error: ") and "predictions.jsonl" in err and err.count("\n") == 1
    assert not (tmp_path / "x.html").exists()
    with pytest.raises(SystemExit) as e:
        main(["viewer", str(run), "--limit", "0"])
    assert e.value.code == 2 and capsys.readouterr().err == (
        "ark viewer: error: argument --limit: --limit must be a whole number >= 1, got '0' (see --help)\n")


def test_viewer_reads_real_runner_output(tmp_path):
    """Trajectories written by ark.run.runner from real ark.trajectory.Trajectory records."""
    try:
        from tests.helpers.fixtures_runs import real_run
    except ImportError:
        from fixtures_runs import real_run
    qs = [QuerySpec(3, [7], [[7, 1], [2]], [{"search_graph": 1, "explore_neighbors": 2}, {"search_graph": 1}],
                    text="q three"),
          QuerySpec(4, [9], [[1]], [{"search_graph": 1}], text="q four", status="failed")]
    d = real_run(tmp_path / "runs", ["graph=prime"], qs)
    view = V.build_view(d)
    q = {x["query_id"]: x for x in view["queries"]}
    assert [c["name"] for s in q[3]["agents"][0]["steps"] for c in s["calls"]] == \
        ["search_graph", "explore_neighbors", "explore_neighbors", "select", "finish"]
    assert q[3]["agents"][0]["steps"][0]["calls"][0]["node_ids"] == [1000, 1001]
    assert q[4]["status"] == "failed" and q[4]["agents"] == [] and "synthetic failure" in q[4]["error"]
    assert view["summary"]["n"] == 2
    assert "q three" in V.render_html(view)



def tables_run(tmp_path) -> Path:
    """A run by the real runner on the hand-made tables graph (scripted backbone, its first query: gold P1),
    whose observations show the graph's own ids."""
    from ark.config.compose import compose
    from ark.config.evaluation import run as run_config
    from tests.helpers.policies import search_select_finish
    from tests.helpers.scripted_server import ScriptedServer

    kg = Path(__file__).resolve().parent / "data" / "tables_kg"
    with ScriptedServer(responder=search_select_finish) as server:
        cfg = compose(["graph=tables", f"graph.path={kg}", "backbone=scripted", f"backbone.base_url={server.base_url}",
                       "budget=t5_n1", f"paths.data={tmp_path}/data", f"paths.runs={tmp_path}/runs",
                       f"paths.llm_cache={tmp_path}/llm.sqlite", "progress=false", "n_boot=10", "limit=1"])
        run_config(cfg)
    return Path(cfg.out_dir)


def test_the_view_says_which_ids_the_observations_show(tmp_path, run):
    """The page marks gold ids in the form the observations wrote them: a tables graph's own ids (its
    Chromium check: tests/browser/test_viewer_user_ids.py), the internal ones elsewhere."""
    view = V.build_view(tables_run(tmp_path))
    (q,) = view["queries"]
    assert view["ids"] == "user" and q["external"][str(q["gold"][0])] == "P1"     # q1's gold: P1
    assert "[P1] Sparse Retrieval Revisited" in q["agents"][0]["steps"][0]["calls"][0]["observation"]
    assert V.build_view(run)["ids"] == "internal"
