"""Atomic writes: a file or a folder that others may read appears whole or not at all.

Owns the one way ark writes a file that another process may read meanwhile (a parallel sweep job, a
resumed run, a reader of a run directory): write it beside its target under a temporary name, then
``os.replace`` it in. A process killed in between leaves the old file as it was (and, at worst, its
temporary file beside it); a write that fails, e.g. on a full disk, removes its temporary file and
raises. A folder is built beside its target and swapped in (`building_dir`, `replace_dir`); readers that
memory-map the old folder's files keep valid maps.

Every temporary name is ``<name>.tmp-<pid>-<thread>-<host>`` (an old folder moved aside:
``<name>.old-<pid>-<thread>-<host>``): two writers never write the same temporary file — not two
processes, not two threads of one process, not two nodes of a cluster writing to a shared
filesystem (the shards of a run all write its ``run.json``) — and a leftover names the process and the
host that left it (`writer_pid`, `writer_host`; `leftovers` lists those of this host whose process no
longer runs, for a writer that resumes or removes them). Nothing is fsynced: a write survives the death
of its process, not a power cut.
Standard library only and no ark import, so every layer may use it.

    from ark import atomic
    atomic.write_json(run_dir / "metrics.json", summary)
    with atomic.open_text(run_dir / "per_query.csv", newline="") as f:
        csv.writer(f).writerows(rows)
    with atomic.building_dir(cache_dir) as tmp:     # swapped in when the block ends without error
        graph.save(tmp)
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

_TEMP = ".tmp-"
_ASIDE = ".old-"
_OWNED = re.compile(r"\.(?:tmp|old)-([0-9]+)(?:-[0-9]+-(.+))?$")   # also the older ``.tmp-<pid>``
_HOST = socket.gethostname().replace("/", "_") or "localhost"


def _writer() -> str:
    return f"{os.getpid()}-{threading.get_ident()}-{_HOST}"


def temp_path(path: Path | str) -> Path:
    """This writer's temporary name for ``path``, in the same folder: ``<name>.tmp-<pid>-<thread>-<host>``."""
    path = Path(path)
    return path.with_name(f"{path.name}{_TEMP}{_writer()}")


def writer_pid(path: Path | str) -> int | None:
    """The pid in a temporary (``.tmp-...``) or moved-aside (``.old-...``) name; None for any other name."""
    match = _OWNED.search(Path(path).name)
    return int(match.group(1)) if match else None


def writer_host(path: Path | str) -> str | None:
    """The host in a temporary or moved-aside name (a pid means something only on its own host); None for
    a name without one (written before names carried the host) or any other name."""
    match = _OWNED.search(Path(path).name)
    return match.group(2) if match else None


def pid_running(pid: int) -> bool:
    """Whether a process with this pid runs (on this machine; a pid reused since reads as running)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:   # someone else's process
        return True
    return True


def leftovers(path: Path | str) -> list[Path]:
    """The temporary and moved-aside names of ``path`` (``<name>.tmp-...``, ``<name>.old-...``) left by
    processes of this host that no longer run: what a writer killed between writing and renaming leaves
    behind. This process's own are not listed, nor a running process's (a concurrent writer's work in
    progress), nor another host's."""
    path = Path(path)
    if not path.parent.is_dir():
        return []
    out = []
    for p in sorted(path.parent.iterdir()):
        pid = writer_pid(p)
        if pid is None or not p.name.startswith((path.name + _TEMP, path.name + _ASIDE)):
            continue
        if pid != os.getpid() and writer_host(p) in (_HOST, None) and not pid_running(pid):
            out.append(p)
    return out


@contextlib.contextmanager
def replacing(path: Path | str) -> Iterator[Path]:
    """Yield the temporary path to write ``path``'s new contents to (by any writer, e.g. a library that
    takes a file name); it replaces ``path`` when the block ends without error and is removed otherwise."""
    path = Path(path)
    tmp = temp_path(path)
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def open_text(path: Path | str, newline: str | None = None, encoding: str = "utf-8") -> Iterator[IO[str]]:
    """A text file open for writing whose contents replace ``path`` once the block ends without error."""
    with replacing(path) as tmp, open(tmp, "w", newline=newline, encoding=encoding) as f:
        yield f


def write_bytes(path: Path | str, data: bytes) -> None:
    """Replace ``path`` by ``data``."""
    with replacing(path) as tmp:
        tmp.write_bytes(data)


def write_text(path: Path | str, text: str, encoding: str | None = "utf-8") -> None:
    """Replace ``path`` by ``text`` (``encoding=None``: the locale's, as ``Path.write_text``'s default)."""
    with replacing(path) as tmp:
        tmp.write_text(text, encoding=encoding)


def write_json(path: Path | str, obj: Any, indent: int | None = None) -> None:
    """Replace ``path`` by ``obj`` as JSON (``json.dumps`` defaults: ASCII, so any encoding reads it)."""
    write_text(path, json.dumps(obj, indent=indent))


def replace_dir(tmp: Path | str, dest: Path | str) -> bool:
    """Move the fully written folder ``tmp`` to ``dest``, replacing what is there: the old folder is moved
    aside (``<dest>.old-<pid>-<thread>-<host>``) and removed, so a reader sees the old folder or the new one, never a mix,
    and its memory maps of the old files stay valid. Returns False, and removes ``tmp``, when the swap
    fails, e.g. because a concurrent builder installed ``dest`` in between."""
    tmp, dest = Path(tmp), Path(dest)
    old = dest.with_name(f"{dest.name}{_ASIDE}{_writer()}")
    try:
        if dest.exists():
            os.replace(dest, old)
        os.replace(tmp, dest)
        return True
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        return False
    finally:
        shutil.rmtree(old, ignore_errors=True)


@contextlib.contextmanager
def building_dir(dest: Path | str) -> Iterator[Path]:
    """Yield a fresh, empty temporary folder beside ``dest``; when the block ends without error it
    replaces ``dest`` (`replace_dir`: if a concurrent builder won, its folder stays), otherwise it is removed."""
    tmp = temp_path(dest)
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    replace_dir(tmp, dest)
