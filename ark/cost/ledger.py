"""Ledgers: append-only files of what was paid, shared safely by the processes that write them.

One JSON line per LLM reply that was not answered from the cache (``{"t", "usd", "prompt", "completion",
"run", "cached"}``). Several processes may write one at once (a parallel sweep's points share their sweep's
ledger): each line is appended whole under an exclusive ``flock``, a torn last line left by a kill is cut
off before the next append, and `Ledger.total` reads only the lines appended since its last call. A run
keeps its own ledger in its directory (`RUN_LEDGER`), so what it paid over every attempt is known on the
next one; a sweep keeps one for all its points (`ark.config.sweep`). The spending cap (`ark.cost.cap`)
counts in them. ``cached``: the prompt tokens the provider served from its prompt cache, billed in ``usd``
at the cached-input rate (`ark.cost.prices`).

    ledger = Ledger(run_dir / RUN_LEDGER)
    ledger.add(0.0123, prompt=4100, completion=60, run="prime/ark-gpt-4.1-t20_n3-full")
    ledger.total(), ledger.calls()
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
import time
from pathlib import Path

RUN_LEDGER = "spend.jsonl"   # a run directory's own ledger


class Ledger:
    """An append-only file of payments, shared safely by processes (see the module doc)."""

    def __init__(self, path: Path | str):
        self.path = Path(path)
        self._offset = 0
        self._usd = 0.0
        self._calls = 0
        self._lock = threading.Lock()

    def add(self, usd: float, prompt: int = 0, completion: int = 0, run: str = "", cached: int = 0) -> None:
        """Append one payment (``cached``: of ``prompt``, the tokens billed at the cached-input rate)."""
        line = json.dumps({"t": round(time.time(), 3), "usd": usd, "prompt": prompt, "completion": completion,
                           "run": run, "cached": cached}) + "\n"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":   # a line torn by a kill: cut it off
                data = os.pread(fd, size, 0)
                os.ftruncate(fd, data.rfind(b"\n") + 1)
            os.write(fd, line.encode())
        finally:
            os.close(fd)   # releases the flock

    def _read(self) -> None:
        try:
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                data = f.read()
        except FileNotFoundError:
            return
        if self._offset and not data and self.path.stat().st_size < self._offset:   # cut: read again
            self._offset, self._usd, self._calls = 0, 0.0, 0
            return self._read()
        end = data.rfind(b"\n") + 1   # whole lines only: the last one may still be being written
        for raw in data[:end].splitlines():
            try:
                self._usd += float(json.loads(raw)["usd"])
                self._calls += 1
            except (ValueError, KeyError, TypeError):
                continue   # a line torn by a kill and cut later
        self._offset += end

    def total(self) -> float:
        """US$ paid so far, every writer included."""
        with self._lock:
            self._read()
            return self._usd

    def calls(self) -> int:
        """Payments (LLM replies) recorded so far."""
        with self._lock:
            self._read()
            return self._calls
