"""Tests for `ark.atomic`: a file or folder is replaced whole or not at all, and a failed or killed write
leaves the old one as it was.

Run: pytest tests/test_atomic.py
"""

from __future__ import annotations

import errno
import json
import mmap
import os
import socket
import subprocess
import sys

import pytest

from ark import atomic
from tests.helpers.paths import REPO


def _leftovers(folder):
    return sorted(p.name for p in folder.iterdir() if atomic.writer_pid(p) is not None)


def test_writes_replace_the_file_and_leave_nothing_beside_it(tmp_path):
    path = tmp_path / "metrics.json"
    path.write_text("old")
    atomic.write_json(path, {"hit@1": 0.5, "name": "é"}, indent=1)
    assert json.loads(path.read_text(encoding="utf-8")) == {"hit@1": 0.5, "name": "é"}
    assert path.read_bytes().isascii()                    # json.dumps' default: any reader's encoding works
    atomic.write_bytes(tmp_path / "a.bin", b"\x00\x01")
    atomic.write_text(tmp_path / "a.txt", "ü")
    with atomic.open_text(tmp_path / "a.csv", newline="") as f:
        f.write("a,b\r\n")
    assert (tmp_path / "a.bin").read_bytes() == b"\x00\x01"
    assert (tmp_path / "a.txt").read_bytes() == "ü".encode("utf-8")
    assert (tmp_path / "a.csv").read_bytes() == b"a,b\r\n"   # newline="" keeps the writer's line ends
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.bin", "a.csv", "a.txt", "metrics.json"]


def test_a_write_killed_before_the_rename_leaves_the_old_file(tmp_path):
    path = tmp_path / "predictions.jsonl"
    path.write_text("old\n")
    child = ("import os, signal, sys\nfrom ark import atomic\n"
             "with atomic.open_text(sys.argv[1]) as f:\n"
             "    f.write('new, half written')\n    f.flush()\n"
             "    os.kill(os.getpid(), signal.SIGKILL)\n")
    done = subprocess.run([sys.executable, "-c", child, str(path)], cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True)
    assert done.returncode == -9, done.stderr
    assert path.read_text() == "old\n"
    (left,) = [p for p in tmp_path.iterdir() if p != path]          # the dead writer's temporary file...
    assert left.name.startswith("predictions.jsonl.tmp-") and left.read_text() == "new, half written"
    assert atomic.writer_pid(left) not in (None, os.getpid())       # ...names its pid


def test_a_failed_write_keeps_the_old_file_and_removes_its_temporary_file(tmp_path, monkeypatch):
    path = tmp_path / "per_query.csv"
    path.write_text("old")
    with pytest.raises(OSError, match="No space left"):
        with atomic.open_text(path) as f:
            f.write("partial")
            raise OSError(errno.ENOSPC, "No space left on device")
    assert path.read_text() == "old" and _leftovers(tmp_path) == []

    def refused(src, dst):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(atomic.os, "replace", refused)              # the rename itself fails
    with pytest.raises(PermissionError):
        atomic.write_bytes(path, b"new")
    assert path.read_text() == "old" and _leftovers(tmp_path) == []


def test_replacing_gives_a_temporary_name_to_a_writer_that_takes_a_path(tmp_path):
    path = tmp_path / "type0.faiss"
    with atomic.replacing(path) as tmp:
        assert tmp.parent == path.parent and atomic.writer_pid(tmp) == os.getpid() and not path.exists()
        tmp.write_bytes(b"index")
    assert path.read_bytes() == b"index" and not tmp.exists()


def test_writer_pid_reads_only_temporary_and_moved_aside_names():
    assert atomic.writer_pid(atomic.temp_path("/x/q1.json")) == os.getpid()
    assert atomic.writer_pid("cache.old-123-456-node-7.cluster") == 123
    assert atomic.writer_host("cache.old-123-456-node-7.cluster") == "node-7.cluster"
    assert atomic.writer_host(atomic.temp_path("/x/q1.json")) == socket.gethostname()
    assert atomic.writer_pid("a.tmp-12") == 12 and atomic.writer_host("a.tmp-12") is None   # an older name
    assert [atomic.writer_pid(n) for n in ("q1.json", "q1.json.tmp", "a.tmp-", "a.tmp-12x", "tmp-5")] == [None] * 5


def test_two_threads_of_one_process_never_share_a_temporary_name(tmp_path):
    import threading

    names, both = [], threading.Barrier(2)   # both alive at once: a finished thread's id may be reused

    def name() -> None:
        names.append(atomic.temp_path(tmp_path / "run.json"))
        both.wait(10)

    threads = [threading.Thread(target=name) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(names)) == 2 and {atomic.writer_pid(n) for n in names} == {os.getpid()}


def test_building_dir_swaps_the_whole_folder_in(tmp_path):
    dest = tmp_path / "cache"
    dest.mkdir()
    (dest / "old.npy").write_bytes(b"old")
    (dest / "meta.json").write_text("old")
    with open(dest / "old.npy", "r+b") as f:
        mapped = mmap.mmap(f.fileno(), 0)
    with atomic.building_dir(dest) as tmp:
        assert list(tmp.iterdir()) == [] and tmp.parent == tmp_path
        (tmp / "meta.json").write_text("new")
        assert (dest / "meta.json").read_text() == "old"           # readers see the old folder meanwhile
    assert sorted(p.name for p in dest.iterdir()) == ["meta.json"] and (dest / "meta.json").read_text() == "new"
    assert mapped[:] == b"old"                                     # a map of the old folder's file stays valid
    mapped.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache"]  # no .tmp-/.old- folder left


def test_a_failed_folder_build_keeps_the_old_folder(tmp_path):
    dest = tmp_path / "index"
    dest.mkdir()
    (dest / "a").write_text("old")
    with pytest.raises(ValueError):
        with atomic.building_dir(dest) as tmp:
            (tmp / "a").write_text("half")
            raise ValueError("build failed")
    assert [p.name for p in tmp_path.iterdir()] == ["index"] and (dest / "a").read_text() == "old"


def test_replace_dir_yields_to_a_concurrent_builder(tmp_path, monkeypatch):
    dest, mine = tmp_path / "cache", tmp_path / "mine"
    mine.mkdir()
    (mine / "x").write_text("mine")
    real = os.replace

    def racing(src, dst):          # another builder installs dest just before this one's rename
        if str(src) == str(mine):
            dest.mkdir()
            (dest / "x").write_text("theirs")
        real(src, dst)

    monkeypatch.setattr(atomic.os, "replace", racing)
    assert atomic.replace_dir(mine, dest) is False
    assert (dest / "x").read_text() == "theirs" and sorted(p.name for p in tmp_path.iterdir()) == ["cache"]
    monkeypatch.setattr(atomic.os, "replace", real)
    mine.mkdir()
    (mine / "x").write_text("mine")
    assert atomic.replace_dir(mine, dest) is True                   # no race: the old folder is replaced
    assert (dest / "x").read_text() == "mine" and sorted(p.name for p in tmp_path.iterdir()) == ["cache"]
