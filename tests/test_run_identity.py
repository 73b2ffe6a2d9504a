"""A run directory never hands back results made on other data, and never blocks a command for nothing.

The run's identity (run.json) holds the fingerprints of the graph's input files (its cache's
``input_fingerprint``) and of its query files: an edited tables graph, RDF file, STaRK download or demo
build is refused on the old directory with one line naming what changed. A run.json written before
those fingerprints is accepted once, when its records fit the data now, and then records them. A
directory that holds no finished query never blocks; ``count_failed_as_miss`` (a scoring policy) is not
part of what blocks a resume.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from ark.config.compose import compose
from ark.config.evaluation import run
from ark.config.identity import add_data_identity, check_same_run
from tests.helpers.paths import DEMO_ROOT

REPO = Path(__file__).resolve().parents[1]
KG = REPO / "tests" / "data" / "tables_kg"
ART = REPO / "tests" / "data" / "rdf_kg"


def bm25(tmp_path, *extra):
    return compose(["retriever=bm25", f"paths.data={tmp_path / 'data'}", f"paths.runs={tmp_path / 'runs'}",
                    "progress=false", "n_boot=10", *extra])


def tables(kg, tmp_path, *extra):
    return bm25(tmp_path, "graph=tables", f"graph.path={kg}", *extra)


def edit_answer(kg, qid="q1", answers=("P2",)):
    lines = [json.loads(x) for x in (kg / "queries.jsonl").read_text().splitlines()]
    next(q for q in lines if q["id"] == qid)["answers"] = list(answers)
    (kg / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in lines))


def insert_node_first(kg):
    text = (kg / "nodes.csv").read_text().splitlines(keepends=True)
    (kg / "nodes.csv").write_text(text[0] + "P0,paper,An Inserted Paper,About sparse retrieval of papers.,2020,\n"
                                  + "".join(text[1:]))


def snapshot(folder: Path) -> dict:
    """Every file's time, the lock left out (a refusal after claiming the directory writes its pid)."""
    return {p: p.stat().st_mtime_ns for p in folder.rglob("*") if p.name != "run.lock"}


# --- a changed graph is refused on its old directory, for every kind of source ------------------------
@pytest.mark.parametrize("edit,named", [(edit_answer, "its graph and query set changed since (queries.jsonl modified)"),
                                        (insert_node_first, "its graph changed since (nodes.csv modified)")])
def test_an_edited_tables_graph_is_refused_on_its_old_directory(kg, tmp_path, edit, named):
    first = run(tables(kg, tmp_path))
    out = Path(tables(kg, tmp_path).out_dir)
    assert first["complete"] and run(tables(kg, tmp_path))["this_run"]["computed"] == 0   # unchanged: resumes
    edit(kg)
    before = snapshot(out)
    with pytest.raises(SystemExit) as e:
        run(tables(kg, tmp_path))
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"{out} holds results made on other data: {named}"), msg
    assert "give this run its own directory" in msg and snapshot(out) == before
    fresh = run(tables(kg, tmp_path, "experiment_name=after_edit"))      # its own directory: computed anew
    assert fresh["complete"] and fresh["this_run"]["computed"] == 5


def test_an_edited_rdf_file_is_refused(tmp_path):
    folder = tmp_path / "rdf"
    shutil.copytree(ART, folder)
    args = ["graph=rdf", f"graph.path={folder / 'art.ttl'}", "graph.name=art"]
    assert run(bm25(tmp_path, *args))["complete"]
    with open(folder / "art.ttl", "a") as f:
        f.write('\n<http://example.org/art/new> <http://www.w3.org/2000/01/rdf-schema#label> "A new node" .\n')
    with pytest.raises(SystemExit, match=r"holds results made on other data: its graph changed since \(art\.ttl "
                                         r"modified\)"):
        run(bm25(tmp_path, *args))


def test_a_changed_stark_download_is_refused(tmp_path):
    from tests.helpers.stark_fixtures import build

    build(tmp_path / "data" / "stark")
    assert run(bm25(tmp_path, "graph=prime"))["complete"]
    index = tmp_path / "data" / "stark" / "qa" / "prime" / "split" / "test.index"
    index.write_text("\n".join(index.read_text().split()[:-1]) + "\n")      # one query fewer in the test split
    with pytest.raises(SystemExit, match=r"other data: its query set changed since \(test\.index modified\)"):
        run(bm25(tmp_path, "graph=prime"))
    node_info = tmp_path / "data" / "stark" / "skb" / "prime" / "processed" / "node_info.pkl"
    node_info.write_bytes(node_info.read_bytes())                           # rewritten, e.g. downloaded again
    with pytest.raises(SystemExit, match=r"other data: its query set changed since \(test\.index modified\), so"):
        run(bm25(tmp_path, "graph=prime"))                                 # the same bytes: not a change
    data = bytearray(node_info.read_bytes())
    data[-2] ^= 1                                                           # one byte changed, same size
    st = node_info.stat()
    node_info.write_bytes(bytes(data))
    os.utime(node_info, ns=(st.st_atime_ns, st.st_mtime_ns))               # and its old time back (touch -r)
    with pytest.raises(SystemExit, match=r"its graph and query set changed since \(test\.index modified, "
                                         r"node_info\.pkl modified\)"):
        run(bm25(tmp_path, "graph=prime"))


def test_a_rebuilt_demo_is_refused(tmp_path):
    """The demo's files (a copy, so the shared build stays as it is): a directory holding a finished query
    made on them is refused once one of them changes, as after a new builder version."""
    from hydra.utils import instantiate

    from ark.config.identity import run_identity, run_info

    root = tmp_path / "data"
    for part in ("skb", "qa"):
        shutil.copytree(DEMO_ROOT / "stark" / part / "demo", root / "stark" / part / "demo")
    cfg = bm25(tmp_path, "graph=demo", "limit=2")
    out = Path(cfg.out_dir)
    info = {**run_info(cfg), "identity": run_identity(cfg)}
    add_data_identity(info, instantiate(cfg.graph))
    out.mkdir(parents=True)
    (out / "run.json").write_text(json.dumps(info))
    (out / "predictions.jsonl").write_text(json.dumps({"query_id": 5, "status": "ok", "gold": [1]}) + "\n")
    again = {**run_info(cfg), "identity": run_identity(cfg)}
    add_data_identity(again, instantiate(cfg.graph))
    assert check_same_run(out, again) is False                              # the same files: resumes
    (root / "stark" / "qa" / "demo" / "split" / "test.index").write_text("5\n")
    changed = {**run_info(cfg), "identity": run_identity(cfg)}
    add_data_identity(changed, instantiate(cfg.graph))
    with pytest.raises(SystemExit, match=r"other data: its query set changed since \(test\.index modified\)"):
        check_same_run(out, changed)


# --- a run.json written before the data fingerprints ------------------------------------------------
def _strip_data(out: Path) -> None:
    """run.json as this repo wrote it before the data's fingerprints were part of the identity."""
    info = json.loads((out / "run.json").read_text())
    info["identity"] = {k: v for k, v in info["identity"].items() if not k.startswith("data.")}
    info.pop("data_files")
    (out / "run.json").write_text(json.dumps(info, indent=1))


def test_an_old_directory_is_accepted_once_when_its_records_fit_the_data(kg, tmp_path, caplog):
    first = run(tables(kg, tmp_path))
    out = Path(tables(kg, tmp_path).out_dir)
    _strip_data(out)
    again = run(tables(kg, tmp_path))
    assert again["this_run"]["computed"] == 0 and again["metrics"] == first["metrics"]
    assert "run.json predates the data fingerprints" in caplog.text
    assert {"data.graph", "data.queries"} <= set(json.loads((out / "run.json").read_text())["identity"])
    edit_answer(kg)                                                         # recorded now: an edit is refused
    with pytest.raises(SystemExit, match="holds results made on other data"):
        run(tables(kg, tmp_path))


@pytest.mark.parametrize("edit,why", [(edit_answer, r"query q1: gold \[0\] there, \[1\] now"),
                                      (insert_node_first, r"query q1: gold \[0\] there, \[1\] now")])
def test_an_old_directory_whose_records_do_not_fit_is_refused(kg, tmp_path, edit, why):
    run(tables(kg, tmp_path))
    out = Path(tables(kg, tmp_path).out_dir)
    _strip_data(out)
    edit(kg)
    before = snapshot(out)
    with pytest.raises(SystemExit, match=rf"holds results made before run\.json recorded the data's fingerprints, "
                                         rf"and they do not fit the data now \({why}\)"):
        run(tables(kg, tmp_path))
    assert snapshot(out) == before                                          # run.json not rewritten


def test_the_query_named_is_the_selections_first_misfit_whatever_order_the_records_were_written_in(kg, tmp_path):
    """Workers finish in any order, so predictions.jsonl holds the queries in any order: the refusal names
    the first query of the run's selection whose record does not fit, the same line on every machine."""
    run(tables(kg, tmp_path))
    out = Path(tables(kg, tmp_path).out_dir)
    _strip_data(out)
    preds = out / "predictions.jsonl"
    lines = preds.read_text().splitlines(keepends=True)
    assert len(lines) > 1
    preds.write_text("".join(reversed(lines)))                              # the last finished written first
    insert_node_first(kg)                                                   # every query's gold moves
    with pytest.raises(SystemExit, match=r"do not fit the data now \(query q1: gold \[0\] there, \[1\] now\)"):
        run(tables(kg, tmp_path))


def test_an_old_directory_whose_node_ids_moved_is_refused(kg, tmp_path):
    """A node appended before the others' gold moves only the ranked nodes' ids: the graph's own ids that
    the records keep tell."""
    run(tables(kg, tmp_path, "limit=1"))
    out = Path(tables(kg, tmp_path, "limit=1").out_dir)
    _strip_data(out)
    text = (kg / "nodes.csv").read_text().splitlines(keepends=True)
    p1_row = next(i for i, line in enumerate(text) if line.startswith("P1,"))
    (kg / "nodes.csv").write_text("".join(text[:p1_row + 1]) + "PX,paper,Inserted,Sparse retrieval notes.,2020,\n"
                                  + "".join(text[p1_row + 1:]))
    with pytest.raises(SystemExit, match=r"query q1: its node ids name other nodes now \(ranking_external\)"):
        run(tables(kg, tmp_path, "limit=1"))


# --- what never blocks ----------------------------------------------------------------------------
def test_a_bad_scoring_setting_is_refused_before_anything_is_written(tmp_path, kg):
    for bad, message in (("cut=candidate_first", "bad setting cut='candidate_first': choose one of top_first, "
                                                  "candidates_first"),
                         ("torchmetrics=9.9", "bad setting torchmetrics=9.9: choose one of 1.7.0, 1.9")):
        with pytest.raises(SystemExit) as e:
            run(tables(kg, tmp_path, bad))
        assert str(e.value).startswith(message), str(e.value)
        assert not (tmp_path / "runs").exists()


def test_a_directory_without_a_finished_query_never_blocks(kg, tmp_path):
    """A run stopped before its first query (run.json written, no record) or whose every query failed
    holds nothing to lose: the corrected, or any other, command may use the directory."""
    cfg = tables(kg, tmp_path)
    out = Path(cfg.out_dir)
    run(cfg)
    info = json.loads((out / "run.json").read_text())
    info["identity"]["seed"] = 7                     # a run with other settings ...
    (out / "run.json").write_text(json.dumps(info))
    (out / "predictions.jsonl").write_text(json.dumps({"query_id": "q1", "status": "failed", "gold": [0]}) + "\n")
    again = run(cfg)                                 # ... that finished no query
    assert again["complete"] and again["this_run"]["computed"] == 5
    assert json.loads((out / "run.json").read_text())["identity"]["seed"] == 0


def test_count_failed_as_miss_rescores_instead_of_blocking(kg, tmp_path):
    first = run(tables(kg, tmp_path))
    again = run(tables(kg, tmp_path, "count_failed_as_miss=true"))
    assert again["this_run"]["computed"] == 0 and again["metrics"] == first["metrics"]
    out = Path(tables(kg, tmp_path).out_dir)
    info = json.loads((out / "run.json").read_text())
    info["identity"]["count_failed_as_miss"] = False   # as a run.json written while it was part of the identity
    (out / "run.json").write_text(json.dumps(info))
    assert run(tables(kg, tmp_path, "count_failed_as_miss=true"))["this_run"]["computed"] == 0


def test_torchmetrics_is_part_of_the_identity_in_stark_qa_mode_only(kg, tmp_path):
    """The torchmetrics behaviour ranks in stark_qa mode only: a paper-mode run.json does not hold it, one
    written when it held it ("1.9", the earlier default) still resumes under today's default, and a
    stark_qa-mode run made with the other behaviour is refused, naming it."""
    cfg = tables(kg, tmp_path)
    out = Path(cfg.out_dir)
    run(cfg)
    info = json.loads((out / "run.json").read_text())
    assert "torchmetrics" not in info["identity"] and info["torchmetrics"] is None
    info["identity"]["torchmetrics"] = "1.9"            # as a run.json written while every mode held it
    (out / "run.json").write_text(json.dumps(info))
    assert run(tables(kg, tmp_path))["this_run"]["computed"] == 0
    stark = tables(kg, tmp_path, "metrics_mode=stark_qa", "torchmetrics=1.9", f"out_dir={tmp_path / 'stark'}")
    run(stark)
    assert json.loads((tmp_path / "stark" / "run.json").read_text())["identity"]["torchmetrics"] == "1.9"
    assert run(tables(kg, tmp_path, "metrics_mode=stark_qa", "torchmetrics='1.9'",
                      f"out_dir={tmp_path / 'stark'}"))["this_run"]["computed"] == 0   # the same setting quoted
    with pytest.raises(SystemExit) as e:
        run(tables(kg, tmp_path, "metrics_mode=stark_qa", f"out_dir={tmp_path / 'stark'}"))   # the default, 1.7.0
    assert "torchmetrics='1.9' there, '1.7.0' now" in str(e.value)


def test_index_settings_are_part_of_the_identity_only_for_their_index_kind():
    """HNSW's M/efConstruction/efSearch and IVF's nprobe change nothing in a run over the exact index: its
    identity leaves them out (a run.json that held them, with the earlier defaults, still matches), and an
    HNSW run holds the values it builds and searches with, the agent's and a baseline's alike."""
    from ark.config.identity import differing_settings, run_identity

    def identity(*extra):
        return run_identity(compose(["graph=demo", "search=hybrid", "encoder=minilm", *extra]))

    flat = identity()
    assert flat["search.setup.index_kind"] == "flat"
    assert not [k for k in flat if k.split(".")[-1] in ("hnsw_m", "ef_construction", "ef_search", "nprobe")]
    old = {**flat, "search.setup.hnsw_m": 32, "search.setup.ef_construction": 80, "search.setup.ef_search": 128,
           "search.setup.nprobe": 16}                       # as a run.json written before held them
    assert differing_settings({"identity": old}, {"identity": flat})[2] == []
    hnsw = identity("search.setup.index_kind=hnsw")
    assert (hnsw["search.setup.hnsw_m"], hnsw["search.setup.ef_construction"], hnsw["search.setup.ef_search"]) == \
        (32, 100, 256) and "search.setup.nprobe" not in hnsw
    older = {**hnsw, "search.setup.ef_construction": 80, "search.setup.ef_search": 128}
    assert differing_settings({"identity": older}, {"identity": hnsw})[2] == ["search.setup.ef_construction",
                                                                               "search.setup.ef_search"]
    assert identity("search.setup.index_kind=ivf")["search.setup.nprobe"] == 16
    baseline = run_identity(compose(["graph=demo", "retriever=dense", "encoder=minilm", "retriever.build.index_kind=hnsw"]))
    assert (baseline["retriever.hnsw_m"], baseline["retriever.ef_construction"], baseline["retriever.ef_search"]) == \
        (32, 100, 256)
    assert "retriever.ef_search" not in run_identity(compose(["graph=demo", "retriever=dense", "encoder=minilm"]))
