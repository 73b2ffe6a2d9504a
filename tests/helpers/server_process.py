"""The scripted OpenAI-compatible server (`tests.helpers.scripted_server`) in a process of its own, with
every request it answers logged to a file: for runs in other processes (SLURM jobs, a child that is
killed) and for a server that is itself killed mid-run (a replica that dies). Its threads do not
compete with the client for the GIL.

    with server_process(tmp_path, latency_s=0.05) as server:     # responder: search, select, finish
        ...  backbone.base_url=server.base_url ...
        server.kill()                                               # kill -9, mid-run
    paid(server.log)     # Counter: successful replies per distinct request body
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing as mp
import os
import signal
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from tests.helpers.policies import search_select_finish


def _serve(queue, responder, log_path: str, latency_s: float, capacity: int | None, port: int) -> None:
    from tests.helpers.scripted_server import ScriptedServer

    server = ScriptedServer(responder=responder, log_path=log_path, latency_s=latency_s, capacity=capacity,
                            port=port).start()
    queue.put(server.base_url)
    while True:
        time.sleep(3600)


@dataclass
class ServerProcess:
    base_url: str
    log: Path
    process: mp.Process

    def kill(self) -> None:
        """kill -9: the connections it holds drop, new ones are refused."""
        if self.process.is_alive():
            os.kill(self.process.pid, signal.SIGKILL)
        self.process.join(10)


@contextlib.contextmanager
def server_process(tmp: Path, responder: Callable = search_select_finish, *, latency_s: float = 0.0,
                   capacity: int | None = None, name: str = "server", port: int = 0):
    """A scripted server in a spawned process answering with ``responder`` (a module-level function);
    yields a `ServerProcess` whose ``log`` has one JSON line per request."""
    ctx = mp.get_context("spawn")
    queue, log = ctx.Queue(), Path(tmp) / f"{name}.jsonl"
    proc = ctx.Process(target=_serve, args=(queue, responder, str(log), latency_s, capacity, port), daemon=True)
    proc.start()
    try:
        yield ServerProcess(_first(queue, proc), log, proc)
    finally:
        if proc.is_alive():
            proc.terminate()
        proc.join(10)


def _first(queue, proc, timeout_s: float = 120):
    """The child's base URL; fails at once when the child died before sending it."""
    import queue as queues

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return queue.get(timeout=0.5)
        except queues.Empty:
            if not proc.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the scripted server process did not start (exit code {proc.exitcode})") from None


def server_log(log: Path) -> list[dict]:
    """The log's entries: {"n", "t", "outcome", "request" (SHA-256 of the request body)}."""
    return [json.loads(line) for line in Path(log).read_text().splitlines() if line.strip()] \
        if Path(log).exists() else []


def paid(*logs: Path) -> Counter:
    """Successful replies per distinct request body, over one or more servers' logs."""
    return Counter(e["request"] for log in logs for e in server_log(log) if e["outcome"] == "ok")
