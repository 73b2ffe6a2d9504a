"""Processes as tests see them through /proc (Linux): a process's children, whether one still runs, and
a wait with a hang guard.

    workers = children(launcher.pid)
    until(lambda: not any(running(w) for w in workers), "the workers to die", timeout_s=30)
"""

from __future__ import annotations

import time
from pathlib import Path


def children(pid: int) -> list[int]:
    """The processes whose parent is ``pid``."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


def running(pid: int) -> bool:
    """Whether ``pid`` runs (not ended, not a zombie waiting for its parent)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def until(condition, what: str, timeout_s: float = 300.0) -> None:
    """Wait until ``condition()``; fail naming ``what`` after ``timeout_s`` (a hang guard, no timing claim)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.005)
