"""ARK_HOME (ark/home.py): every default data path lands under one root, whatever the working directory:
the environment's ARK_HOME, else the checkout's data/, else the user cache directory; ``ark build`` says
which; a tables graph's cache is found again from anywhere."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ark import home
from ark.cli.main import main
from ark.config.compose import compose
from ark.data import stark
from ark.data.sources import DemoSource
from ark.data.tables import TablesSource
from ark.search.embeddings import default_model_dir

REPO = Path(__file__).resolve().parents[1]
KG = REPO / "tests" / "data" / "tables_kg"


@pytest.fixture()
def no_home(monkeypatch):
    monkeypatch.delenv(home.ENV, raising=False)


def test_ark_home_from_the_environment_is_absolute(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(home.ENV, "rel/ark")
    assert home.ark_home() == tmp_path / "rel" / "ark"
    monkeypatch.setenv(home.ENV, str(tmp_path / "abs"))
    assert home.ark_home() == tmp_path / "abs" and home.home_origin() == "ARK_HOME from the environment"


def test_ark_home_defaults_to_the_checkouts_data_folder_from_any_directory(no_home, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    assert home.checkout() == REPO
    assert home.ark_home() == REPO / "data"
    assert "checkout" in home.home_origin()


def test_an_installed_package_keeps_its_data_in_the_user_cache(no_home, monkeypatch, tmp_path):
    """ark/ under site-packages (no pyproject.toml, no conf/ beside it): XDG_CACHE_HOME/ark, else ~/.cache/ark."""
    site = tmp_path / "site-packages"
    (site / "ark").mkdir(parents=True)
    monkeypatch.setattr(home, "_PACKAGE", site / "ark")
    assert home.checkout() is None
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert home.ark_home() == tmp_path / "xdg" / "ark"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "me"))
    assert home.ark_home() == tmp_path / "me" / ".cache" / "ark"
    assert "user cache" in home.home_origin()


def test_every_default_data_path_is_under_ark_home(monkeypatch, tmp_path):
    monkeypatch.setenv(home.ENV, str(tmp_path / "h"))
    monkeypatch.chdir(tmp_path)
    cfg = compose(["graph=demo", "backbone=gpt-4.1"])
    assert cfg.paths.data == str(tmp_path / "h")
    assert cfg.graph.root == str(tmp_path / "h")
    assert cfg.paths.llm_cache == str(tmp_path / "h" / "cache" / "llm" / "gpt-4.1.sqlite")
    assert compose(["search=dense", "encoder=minilm"]).encoder.encoder.models_dir == str(tmp_path / "h" / "cache" / "models")
    # the library's own defaults, read when called (not when imported)
    assert DemoSource().cache_dir == tmp_path / "h" / "cache" / "demo"
    assert TablesSource(KG).cache_dir.parent == tmp_path / "h" / "cache"
    assert stark.skb_dir("prime") == tmp_path / "h" / "stark" / "skb" / "prime"
    assert stark.fetch_command("prime") == f"ark download prime --root {tmp_path / 'h'}"
    assert default_model_dir() == tmp_path / "h" / "cache" / "models"
    # and the command line's --root
    from ark.cli.main import build_parser

    args = build_parser().parse_args(["build", "--graph", "demo"])
    assert args.root == str(tmp_path / "h")


def test_build_prints_the_data_root_and_a_tables_cache_is_found_from_anywhere(monkeypatch, tmp_path, capsys):
    """Built from one directory, searched from another through a relative path to the same folder: one
    cache under ARK_HOME, reused (not rebuilt), and no data/ appears in either working directory."""
    monkeypatch.setenv(home.ENV, str(tmp_path / "h"))
    first, second = tmp_path / "a", tmp_path / "b" / "c"
    first.mkdir()
    second.mkdir(parents=True)
    monkeypatch.chdir(first)
    assert main(["build", "--graph", str(KG), "--no-queries"]) == 0
    out, err = capsys.readouterr()
    stats = json.loads(out)
    assert stats["root"] == str(tmp_path / "h")
    cache = Path(stats["cache"])
    assert cache.parent == tmp_path / "h" / "cache" and cache.name.startswith("tables_kg-")
    assert f"data root {tmp_path / 'h'}: ARK_HOME from the environment" in err
    built = (cache / "meta.json").stat().st_mtime_ns

    monkeypatch.chdir(second)
    rel = Path(*([".."] * len(second.parts[1:]))) / KG.relative_to(KG.anchor)
    assert (second / rel).resolve() == KG
    assert main(["search", "sparse retrieval", "--graph", str(rel), "-k", "1"]) == 0
    assert capsys.readouterr().out.splitlines()[1].startswith("[P1] Sparse Retrieval Revisited")
    assert main(["build", "--graph", str(rel), "--no-queries"]) == 0
    assert Path(json.loads(capsys.readouterr().out)["cache"]) == cache
    assert (cache / "meta.json").stat().st_mtime_ns == built
    assert sorted(p.name for p in (tmp_path / "h" / "cache").iterdir()) == [cache.name]
    assert not (first / "data").exists() and not (second / "data").exists()


def test_build_names_root_as_the_origin_when_given(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv(home.ENV, str(tmp_path / "h"))
    assert main(["build", "--graph", str(KG), "--no-queries", "--root", str(tmp_path / "elsewhere")]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["root"] == str(tmp_path / "elsewhere")
    assert f"data root {tmp_path / 'elsewhere'}: --root" in err
    assert not (tmp_path / "h").exists()
