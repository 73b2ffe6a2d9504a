"""Chaos tier: your own graph edited between two runs. ARK (real agents, the scripted server) runs on a
tables graph and is killed with -9 part way; then a node is inserted at the top of ``nodes.csv`` (every
internal id shifts) and an answer is changed in ``queries.jsonl``. The same command must refuse the old
directory in one line naming both files (its records point at other nodes now), and the run in a
directory of its own must be complete with every record true to the edited graph: its gold is the new
gold, and its node ids name the nodes its graph's own ids say.

    PYTHONPATH=$PWD .venv/bin/python -m pytest -q -m chaos tests/chaos/test_graph_edits.py
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.paths import REPO
from tests.helpers.policies import search_select_finish
from tests.helpers.scripted_server import ScriptedServer

pytestmark = pytest.mark.chaos

KG = REPO / "tests" / "data" / "tables_kg"

CHILD = """
import sys
from ark.config.compose import compose
from ark.config.evaluation import run
run(compose(sys.argv[1:]))
"""


def args(tmp: Path, kg: Path, url: str, *extra: str) -> list[str]:
    return ["graph=tables", f"graph.path={kg}", "backbone=scripted", f"backbone.base_url={url}", "budget=t5_n1",
            "budget.agent.n_agents=2", "concurrency=1", f"paths.data={tmp / 'data'}", f"paths.runs={tmp / 'runs'}",
            f"paths.llm_cache={tmp / 'llm.sqlite'}", "progress=false", "n_boot=20", *extra]


def records(out: Path) -> dict[str, dict]:
    from ark.run.records import load_predictions

    return load_predictions(out)


def test_an_edited_tables_graph_is_refused_or_recomputed_never_stale(tmp_path):
    from ark.config.compose import compose
    from ark.config.evaluation import run
    from ark.data.tables.source import TablesSource

    kg = tmp_path / "kg"
    shutil.copytree(KG, kg)
    with ScriptedServer(responder=search_select_finish, latency_s=0.3) as server:
        out = Path(compose(args(tmp_path, kg, server.base_url)).out_dir)
        child = subprocess.Popen([sys.executable, "-c", CHILD, *args(tmp_path, kg, server.base_url)], cwd=REPO,
                                 env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=subprocess.DEVNULL)
        pred = out / "predictions.jsonl"
        deadline = time.monotonic() + 300
        while not (pred.exists() and pred.read_bytes().count(b"\n") >= 2):
            assert child.poll() is None and time.monotonic() < deadline, "the run ended before the kill"
            time.sleep(0.01)
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        kept = records(out)
        assert 2 <= len(kept) < 5

        # the edit: a node before all others (every internal id moves by one) and another answer for q2
        lines = (kg / "nodes.csv").read_text().splitlines(keepends=True)
        (kg / "nodes.csv").write_text(lines[0] + "P0,paper,Tool-Using Language Agents Survey,A survey of language "
                                      "agents that call tools.,2025,\n" + "".join(lines[1:]))
        queries = [json.loads(x) for x in (kg / "queries.jsonl").read_text().splitlines()]
        next(q for q in queries if q["id"] == "q2")["answers"] = ["P0", "P6"]
        (kg / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))

        before = {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.name != "run.lock"}
        with pytest.raises(SystemExit) as e:
            run(compose(args(tmp_path, kg, server.base_url)))
        msg = str(e.value)
        assert "\n" not in msg and "holds results made on other data: its graph and query set changed since " \
               "(nodes.csv modified, queries.jsonl modified)" in msg, msg
        assert {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.name != "run.lock"} == before
        assert records(out) == kept                                   # refused, and nothing of it lost

        summary = run(compose(args(tmp_path, kg, server.base_url, "experiment_name=edited")))
        fresh = Path(compose(args(tmp_path, kg, server.base_url, "experiment_name=edited")).out_dir)
    assert summary["complete"] and summary["this_run"]["computed"] == 5
    source = TablesSource(kg, root=tmp_path / "data")
    graph, qs = source.graph(), source.queries()
    for qid, rec in records(fresh).items():
        assert rec["gold"] == list(qs[qid].answer_ids)
        assert rec["gold_external"] == [graph.external_id(g) for g in rec["gold"]]
        assert rec["ranking_external"] == [graph.external_id(i) for i in rec["ranking"]]
    assert records(fresh)["q2"]["gold_external"] == ["P0", "P6"]
    assert graph.external_id(0) == "P0" and graph.node_index("P1") == 1
