"""The environment guard (tests/helpers/env_guard.py) on environments of its own: a made-up site-packages,
a scratch git checkout and a scratch data root, changed the ways a test could change the real ones; and
a pytest session whose test changes a watched folder fails with the change named."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import env_guard as g
from tests.helpers.paths import REPO


def _site(tmp_path: Path) -> Path:
    site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    (site / "pkg").mkdir(parents=True)
    (site / "pkg" / "__init__.py").write_text("x = 1\n")
    dist = site / "pkg-1.0.dist-info"
    dist.mkdir()
    (dist / "INSTALLER").write_text("pip\n")
    (dist / "RECORD").write_text("pkg/__init__.py,,\npkg-1.0.dist-info/RECORD,,\n../../../bin/pkg,,\n")
    (tmp_path / "venv" / "bin").mkdir()
    (tmp_path / "venv" / "bin" / "pkg").write_text("#!/bin/sh\n")
    return site


def test_an_installed_file_edited_a_distribution_added_and_a_pth_file_are_named(tmp_path):
    site = _site(tmp_path)
    assert g.site_dirs(tmp_path / "venv") == [site]
    before = g.Snapshot({"env": g.installed(site)})
    assert before.changes(g.Snapshot({"env": g.installed(site)})) == []

    (site / "pkg" / "__init__.py").write_text("x = 2  # edited in place\n")
    (tmp_path / "venv" / "bin" / "pkg").unlink()
    other = site / "other-2.0.dist-info"
    other.mkdir()
    (other / "RECORD").write_text("other-2.0.dist-info/RECORD,,\n")
    (site / "extra.pth").write_text("/somewhere\n")
    (found,) = before.changes(g.Snapshot({"env": g.installed(site)}))
    assert found.startswith("env: ")
    for name in (f"~{site}/pkg/__init__.py", f"~{tmp_path}/venv/bin/pkg", f"+{other}/RECORD", f"+{site}/extra.pth",
                 f"+{site}/other-2.0.dist-info"):
        assert name in found, (name, found)


def test_a_reinstall_that_rewrites_the_record_is_named(tmp_path):
    site = _site(tmp_path)
    before = g.Snapshot({"env": g.installed(site)})
    record = site / "pkg-1.0.dist-info" / "RECORD"
    record.write_text(record.read_text() + "pkg/new.py,,\n")
    (found,) = before.changes(g.Snapshot({"env": g.installed(site)}))
    assert f"~{record}" in found and f"+{site}/pkg/new.py" in found


def test_tracked_and_untracked_files_of_a_checkout(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.email=a@b", "-c", "user.name=a"]
    (repo / "tracked.txt").write_text("one\n")
    (repo / ".gitignore").write_text("ignored/\n")
    (repo / "wip.txt").write_text("work in progress\n")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run([*git, "add", "tracked.txt", ".gitignore"], check=True)
    subprocess.run([*git, "commit", "-qm", "x"], check=True)
    before = g.Snapshot({"checkout": g.checkout(repo)})
    assert set(before.parts["checkout"]) == {"wip.txt"}          # there before the run: not a finding
    (repo / "ignored").mkdir()
    (repo / "ignored" / "out.bin").write_text("build output\n")   # ignored: not watched
    assert before.changes(g.Snapshot({"checkout": g.checkout(repo)})) == []

    subprocess.run([*git, "add", "wip.txt"], check=True)
    subprocess.run([*git, "commit", "-qm", "work in progress committed during the run"], check=True)
    assert before.changes(g.Snapshot({"checkout": g.checkout(repo, also=("wip.txt",))})) == []

    (repo / "tracked.txt").write_text("two\n")
    (repo / "wip.txt").write_text("changed during the run\n")
    (repo / "stray.txt").write_text("left by a test\n")
    (found,) = before.changes(g.Snapshot({"checkout": g.checkout(repo, also=("wip.txt",))}))
    assert "+tracked.txt" in found and "~wip.txt" in found and "+stray.txt" in found and "ignored" not in found


def test_a_file_added_or_rewritten_under_the_data_root(tmp_path):
    root = tmp_path / "data"
    (root / "cache" / "demo").mkdir(parents=True)
    (root / "cache" / "demo" / "meta.json").write_text("{}")
    before = g.Snapshot({"data": g.data_files(root)})
    (root / "cache" / "demo" / "meta.json").write_text('{"rebuilt": 1}')
    (root / "cache" / "llm").mkdir()
    (root / "cache" / "llm" / "replies.sqlite").write_bytes(b"x")
    (found,) = before.changes(g.Snapshot({"data": g.data_files(root)}))
    assert "~cache/demo/meta.json" in found and "+cache/llm/replies.sqlite" in found
    assert g.data_files(tmp_path / "absent") == {}


def _session(suite: Path, env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(suite),
                           "-c", os.devnull, *args, str(suite)], cwd=suite, env=env, capture_output=True, text=True,
                          timeout=600)


@pytest.mark.commands   # a whole pytest process, two snapshots of .venv
@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["one process", "two xdist workers"])
def test_a_session_whose_test_writes_into_the_data_root_fails_naming_the_file(tmp_path, workers):
    """A whole pytest session with the guard, its data root moved to a scratch folder (ARK_TEST_DATA): the
    one test passes, the session fails and names what the test wrote; the same when the test runs in a
    pytest-xdist worker, as in ``make test`` (the guard watches from the process that started the workers)."""
    data = tmp_path / "data"
    (data / "stark").mkdir(parents=True)
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "conftest.py").write_text('pytest_plugins = ["tests.helpers.env_guard"]\n')
    (suite / "test_bad.py").write_text(
        "import os\n\ndef test_writes():\n"
        "    open(os.path.join(os.environ['ARK_TEST_DATA'], 'stray.txt'), 'w').write('x')\n")
    env = {**os.environ, "ARK_TEST_DATA": str(data), "PYTHONPATH": str(REPO), g.PREPARE_VAR: "0"}
    done = _session(suite, env, *workers)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 passed" in done.stdout
    assert "environment guard" in done.stdout and f"data root {data}: 1 added" in done.stdout
    assert "+stray.txt" in done.stdout


@pytest.mark.commands   # a whole pytest process that builds the demo graph into an empty data root
def test_workers_find_the_data_root_built_before_their_first_test(tmp_path):
    """``make test`` on a fresh clone: the data root is empty, and the tests run in two pytest-xdist
    workers. The demo graph is built once, before either worker starts (each test finds it whole), and
    the guard, whose first look comes after that build, finds nothing changed."""
    data = tmp_path / "data"
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "conftest.py").write_text('pytest_plugins = ["tests.helpers.env_guard"]\n')
    (suite / "test_reads.py").write_text(
        "import os\nimport pytest\n\n@pytest.mark.parametrize('i', range(4))\ndef test_reads(i):\n"
        "    from ark.data.sources import DemoSource\n"
        "    source = DemoSource(root=os.environ['ARK_TEST_DATA'])\n"
        "    assert source.cache_dir.is_dir() and source.graph().num_nodes > 0\n")
    env = {**os.environ, "ARK_TEST_DATA": str(data), "PYTHONPATH": str(REPO)}
    env.pop(g.PREPARE_VAR, None)
    done = _session(suite, env, "-n", "2")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "4 passed" in done.stdout and "are as they were before the tests" in done.stdout
