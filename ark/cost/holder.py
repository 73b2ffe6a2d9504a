"""Who holds a reservation in a ledger (`ark.cost.ledger`) or a claim on a reply in the LLM cache
(`ark.llm.cache`): a process named by its host, pid and start time, and whether it still runs.

A reservation or claim left by a process that was killed (kill -9, a parent's death) is never released
by it: whoever finds it asks `alive` and, for a dead holder, settles it (a reservation counts as paid at
its worst case) or takes it over (a claim). The start time tells a pid the kernel gave again to another
process from the one that held it. A holder on another host cannot be asked: it counts as alive until
`STALE_S` seconds after its mark. A reservation may instead be held by a file (``file:<path>``, `file_mark`):
it lives as long as that file does, whichever process is running (a batch submitted to a provider's
batch API, `ark.llm.batch`, stays paid for while its process is gone; the run that re-attaches to it
settles its reservation).

    me = holder.me()                  # "host:pid:start"
    holder.alive(mark, since=t)       # False once that process has ended
    holder.alive(holder.file_mark(p)) # True while the file p exists
"""

from __future__ import annotations

import os
import socket
import time

STALE_S = 3600.0   # a holder on another host counts as alive for this long after its mark


def _start_time(pid: int) -> str:
    """The kernel's start time of ``pid`` (clock ticks since boot), "" where /proc cannot say."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return ""
    if fields and fields[0] in (b"Z", b"X"):   # ended, not yet reaped by its parent
        return "ended"
    return fields[19].decode() if len(fields) > 19 else ""


_HOST = socket.gethostname()
_ME: tuple[int, str] | None = None


def me() -> str:
    """This process's mark, ``host:pid:start`` (computed once per process, again after a fork)."""
    global _ME
    pid = os.getpid()
    if _ME is None or _ME[0] != pid:
        _ME = (pid, f"{_HOST}:{pid}:{_start_time(pid)}")
    return _ME[1]


FILE_MARK = "file:"


def file_mark(path) -> str:
    """The mark of a holder that is a file: alive while the file exists."""
    return FILE_MARK + os.path.abspath(str(path))


def alive(mark: str, since: float | None = None) -> bool:
    """Whether the process ``mark`` names still runs (a `file_mark`: whether its file exists); one on
    another host is taken to run until `STALE_S` after ``since`` (its mark's time)."""
    if mark.startswith(FILE_MARK):
        return os.path.exists(mark[len(FILE_MARK):])
    try:
        host, pid_s, start = mark.rsplit(":", 2)
        pid = int(pid_s)
    except ValueError:
        return False
    if host != _HOST:
        return since is None or time.time() - since < STALE_S
    if pid == os.getpid():
        return mark == me()
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    now = _start_time(pid)
    return now != "ended" and (not start or not now or now == start)
