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
from ark.data.sources import HASHES_FILE, DemoSource
from ark.data.tables.source import TablesSource
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

    for argv in (["build"], ["export", "--out", "x"], ["search", "q"], ["neighbors", "1"], ["ask", "q"], ["mcp"],
                 ["download", "prime"]):
        assert build_parser().parse_args(argv).root == str(tmp_path / "h"), argv


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
    # one graph cache, beside the input files' content hashes (ark.data.sources.HASHES_FILE)
    assert sorted(p.name for p in (tmp_path / "h" / "cache").iterdir()) == sorted([cache.name, HASHES_FILE])
    assert not (first / "data").exists() and not (second / "data").exists()


def test_build_names_root_as_the_origin_when_given(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv(home.ENV, str(tmp_path / "h"))
    assert main(["build", "--graph", str(KG), "--no-queries", "--root", str(tmp_path / "elsewhere")]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["root"] == str(tmp_path / "elsewhere")
    assert f"data root {tmp_path / 'elsewhere'}: --root" in err
    assert not (tmp_path / "h").exists()


@pytest.mark.commands
def test_mcp_started_elsewhere_keeps_its_caches_under_ark_home(monkeypatch, tmp_path, scripted):
    """An MCP client starts ``ark mcp`` in a directory of its own: the graph's cache and the ask tool's
    LLM cache land under ARK_HOME, nothing in that directory."""
    import os
    import sys

    import anyio
    from mcp import ClientSession, StdioServerParameters, stdio_client

    ark_home, cwd = tmp_path / "h", tmp_path / "client"
    cwd.mkdir()
    env = {**os.environ, "PYTHONPATH": str(REPO), home.ENV: str(ark_home)}
    params = StdioServerParameters(command=sys.executable, cwd=str(cwd), env=env, args=[
        "-m", "ark", "mcp", "--graph", str(KG), "--backbone", "scripted", "--base-url", scripted.base_url,
        "--n-agents", "1", "--t-max", "3"])
    got = {}

    async def run():
        async with stdio_client(params, errlog=open(os.devnull, "w")) as (read, write):
            async with ClientSession(read, write) as s:
                await s.initialize()
                got["ask"] = await s.call_tool("ask", {"question": "sparse retrieval BM25"})

    anyio.run(run)
    assert not got["ask"].is_error
    caches = sorted(p.name for p in (ark_home / "cache").iterdir())
    # the reply cache and one graph cache, beside the input files' content hashes (HASHES_FILE)
    assert caches[:2] == [HASHES_FILE, "llm"] and caches[2].startswith("tables_kg-") and len(caches) == 3
    assert (ark_home / "cache" / "llm" / "scripted.sqlite").is_file()
    assert list(cwd.iterdir()) == []


def test_no_default_data_path_is_relative_to_the_working_directory():
    """The package's and the scripts' data-root defaults come from ark.home, never a bare "data" that
    would land under whatever directory a command starts in."""
    import re

    bare = re.compile(r"""default=(str\()?(Path\()?["']data["'/]|default=(str\()?(REPO|ROOT|root) / ["']data["']|"""
                      r"""root: [^=]*= ["']data["']|DEFAULT_ROOT = Path\(""")
    files = [*(REPO / "ark").rglob("*.py"), *(REPO / "scripts").glob("*.py"), *(REPO / "experiments").glob("*.py")]
    found = [f"{f.relative_to(REPO)}:{i}: {line.strip()}" for f in files
             for i, line in enumerate(f.read_text().splitlines(), 1) if bare.search(line)]
    assert not found, "\n".join(found)
    assert bare.search('p.add_argument("--root", default="data",') and bare.search('default=REPO / "data")')
