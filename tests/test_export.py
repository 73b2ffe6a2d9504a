"""`ark export` never destroys a folder it did not write: ``--force`` replaces only an earlier export
(its graph.json carries ``"format": "ark-tables/1"`` and it holds only the export's files), never the
working directory or a parent of it; everything else is one line, exit status 2, with every file kept."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ark.cli.main import main
from ark.data.tables.format import EXPORT_FORMAT
from ark.data.tables.source import TablesSource
from ark.data.tables.write import export

REPO = Path(__file__).resolve().parents[1]
KG = REPO / "tests" / "data" / "tables_kg"


def files(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` with its text: what must survive a refused export."""
    return {p.relative_to(folder).as_posix(): p.read_text() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture()
def decoys(tmp_path):
    """A parent folder holding a file, and in it a folder of someone's work (a file and a subfolder)."""
    parent = tmp_path / "parent"
    (parent / "thesis").mkdir(parents=True)
    (parent / "notes.txt").write_text("the decoy parent's own file")
    (parent / "thesis" / "thesis.tex").write_text("\\documentclass{article}")
    (parent / "thesis" / "sub").mkdir()
    (parent / "thesis" / "sub" / "figure.pdf").write_text("%PDF")
    return parent


def export_cli(capsys, root, *args):
    code = main(["export", "--graph", str(KG), "--root", str(root), *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_force_refuses_a_folder_it_did_not_write(capsys, tmp_path, decoys):
    before = files(decoys)
    code, out, err = export_cli(capsys, tmp_path / "data", "--out", str(decoys / "thesis"), "--force")
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert err.startswith("ark export: error: ") and "was not written by an export" in err
    assert files(decoys) == before


def test_force_never_replaces_the_working_directory_or_a_parent(capsys, tmp_path, decoys, monkeypatch):
    before = files(decoys)
    monkeypatch.chdir(decoys / "thesis" / "sub")
    for out in ("..", ".", str(decoys), "../.."):
        code, _, err = export_cli(capsys, tmp_path / "data", "--out", out, "--force")
        assert code == 2 and err.count("\n") == 1 and "the working directory or one of its parents" in err, (out, err)
    assert files(decoys) == before


def test_a_file_or_an_unwritable_place_is_one_line(capsys, tmp_path, decoys):
    code, _, err = export_cli(capsys, tmp_path / "data", "--out", str(decoys / "notes.txt"), "--force")
    assert code == 2 and "is a file, not a folder" in err and err.count("\n") == 1
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        code, _, err = export_cli(capsys, tmp_path / "data", "--out", str(locked / "out"))
        if code == 0:       # root may write anywhere: then the export simply succeeded
            assert TablesSource(locked / "out", root=tmp_path / "data2").graph().num_nodes == 37
        else:
            assert code == 2 and err.startswith("ark export: error: cannot write") and err.count("\n") == 1, err
    finally:
        locked.chmod(0o700)


def test_force_replaces_an_earlier_export_but_not_once_something_else_is_in_it(capsys, tmp_path):
    out = tmp_path / "exported"
    assert export_cli(capsys, tmp_path / "data", "--out", str(out), "--format", "csv")[0] == 0
    assert json.loads((out / "graph.json").read_text())["format"] == EXPORT_FORMAT
    code, _, err = export_cli(capsys, tmp_path / "data", "--out", str(out), "--format", "jsonl")
    assert code == 2 and "exists and is not empty" in err           # without --force: never
    code, _, _ = export_cli(capsys, tmp_path / "data", "--out", str(out), "--format", "jsonl", "--force")
    assert code == 0 and sorted(p.name for p in out.iterdir()) == ["edges.jsonl", "graph.json", "nodes.jsonl",
                                                                    "queries.jsonl"]
    assert TablesSource(out, root=tmp_path / "data2").graph().num_edges == 63   # the mark reads back
    (out / "my_analysis.ipynb").write_text("{}")
    before = files(out)
    code, _, err = export_cli(capsys, tmp_path / "data", "--out", str(out), "--force")
    assert code == 2 and "holds 'my_analysis.ipynb', which no export wrote" in err
    assert files(out) == before


def test_the_library_call_checks_the_same(tmp_path, decoys):
    graph = TablesSource(KG, root=tmp_path / "data").graph()
    before = files(decoys)
    with pytest.raises(ValueError, match="was not written by an export"):
        export(graph, decoys / "thesis", force=True)
    with pytest.raises(ValueError, match="exists and is not empty"):
        export(graph, decoys)
    assert files(decoys) == before


def test_force_replaces_only_the_plain_files_its_mark_lists(capsys, tmp_path, decoys):
    """A user's folder named like an export's file, a link of that name, or an export's file name the
    mark does not list: force refuses in one line and leaves every file in place."""
    out = tmp_path / "exported"
    assert export_cli(capsys, tmp_path / "data", "--out", str(out), "--format", "csv")[0] == 0
    listed = json.loads((out / "graph.json").read_text())["files"]
    assert listed == sorted(p.name for p in out.iterdir() if p.name != "graph.json")
    (out / "nodes.csv").unlink()
    (out / "nodes.csv").mkdir()                                        # someone's folder inside the export
    (out / "nodes.csv" / "results.txt").write_text("a week of work")
    before = files(out)
    code, _, err = export_cli(capsys, tmp_path / "data", "--out", str(out), "--format", "csv", "--force")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "holds 'nodes.csv', which no export wrote" in err
    assert files(out) == before
    (out / "nodes.csv" / "results.txt").unlink()
    (out / "nodes.csv").rmdir()
    (out / "nodes.csv").symlink_to(decoys / "notes.txt")              # a link to someone's file
    code, _, err = export_cli(capsys, tmp_path / "data", "--out", str(out), "--format", "csv", "--force")
    assert code == 2 and "holds 'nodes.csv', which no export wrote" in err
    assert (decoys / "notes.txt").read_text() == "the decoy parent's own file"
    (out / "nodes.csv").unlink()
    (out / "nodes.csv").write_text("id,type,name,text\n")
    (out / "nodes.parquet").write_text("not the export's: the mark lists csv files")
    code, _, err = export_cli(capsys, tmp_path / "data", "--out", str(out), "--force")
    assert code == 2 and "holds 'nodes.parquet', which no export wrote" in err
    assert (out / "nodes.parquet").read_text() == "not the export's: the mark lists csv files"
    (out / "nodes.parquet").unlink()
    code, _, err = export_cli(capsys, tmp_path / "data", "--out", str(out), "--force")     # all its own again
    assert code == 0 and sorted(p.name for p in out.iterdir()) == ["edges.parquet", "graph.json", "nodes.parquet",
                                                                    "queries.parquet"]
