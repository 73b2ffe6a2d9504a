"""A sweep point's tie to the process that launched it: a point run in a worker process of its own
(``hydra/launcher=local_parallel``: joblib's loky workers) dies with the launching process.

Loky's workers outlive a launcher killed with kill -9 and would go on paying for LLM calls under nobody's
watch. The launching process marks itself (`mark_launcher`, from `ark.config.sweep.prepare`: the variable
`LAUNCHER_ENV`, inherited by its workers) and each point calls `hold` when it starts: in a worker whose
parent is that launcher it asks the kernel to kill it when its parent dies (``PR_SET_PDEATHSIG`` on
Linux) and starts a watch thread that kills it when its parent is no longer the launcher (every
`WATCH_S`, and on any system); `ark.cost.cap.Budget` asks `orphaned` before each paid call. A point run
in the launcher itself (the plain launcher) or in a process the launcher did not start as its worker
(SLURM's jobs, meant to outlive the process that submitted them) is left alone.

    lifeline.mark_launcher()     # in the process that launches the sweep
    lifeline.hold()              # first thing in each point
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import sys
import threading
import time

LAUNCHER_ENV = "ARK_SWEEP_LAUNCHER"   # the launching process's pid, for its workers
WATCH_S = 0.1                         # how often a worker's watch looks at its parent
PR_SET_PDEATHSIG = 1

_parent: int | None = None            # the launcher this process is tied to, once `hold` tied it


def mark_launcher() -> None:
    """Name this process as the launcher of the sweep its workers run."""
    os.environ[LAUNCHER_ENV] = str(os.getpid())


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def orphaned() -> bool:
    """Whether this process is a sweep's worker whose launcher has died (it dies now, too)."""
    if _parent is not None and os.getppid() != _parent:
        _die()
        return True
    return False


def _watch() -> None:
    while True:
        time.sleep(WATCH_S)
        orphaned()


def hold() -> bool:
    """Tie this process to the sweep's launcher when it is a worker of it (module doc); whether it is."""
    global _parent
    try:
        launcher = int(os.environ.get(LAUNCHER_ENV, ""))
    except ValueError:
        return False
    if launcher == os.getpid() or _parent == launcher:
        return _parent == launcher
    parent = multiprocessing.parent_process()
    if parent is None or parent.pid != launcher:
        return False   # not a worker the launcher started: a job of its own (SLURM), left alone
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass   # the watch thread still ties it
    _parent = launcher
    threading.Thread(target=_watch, name="ark-lifeline", daemon=True).start()
    orphaned()   # the launcher may have died before the kernel was asked (this worker is then re-parented)
    return True
