"""Ledgers: append-only files of what was paid and of the calls in flight, shared safely by the processes
that write them.

Three kinds of JSON line:

- a reservation, written before an LLM call is sent: ``{"t", "hold": id, "worst", "by", "run"}`` (its
  worst case in US$; ``by``, the process holding it, `ark.cost.holder`);
- its settlement, written once the call ended: ``{"t", "settles": id, "usd", "prompt", "completion",
  "run", "cached"}`` (``"failed": true`` for a call that failed: nothing was billed; ``"lost": true`` for
  a reservation whose process died before settling it, counted as paid at its worst case);
- a payment without reservation, ``{"t", "usd", "prompt", "completion", "run", "cached"}`` (`Ledger.add`).

`Ledger.total` is what was paid (settled), `Ledger.committed` that plus the worst case of every call in
flight in any process, which is what the spending cap (`ark.cost.cap`) counts against. `Ledger.hold`
checks the cap and writes the reservation in one step under an exclusive ``flock``, so two processes
never both take the last room. A reservation whose process was killed stays open until someone calls
`Ledger.reconcile`, which settles it as paid at its worst case (the provider may have billed the call):
after a kill the ledger never holds less than was billed.

Each line is appended whole under the ``flock``, a torn last line left by a kill is cut off before the
next append, and the ledger reads only the lines appended since its last read. A run keeps its own
ledger in its directory (`RUN_LEDGER`), so what it paid over every attempt is known on the next one; a
sweep keeps one for all its points (`ark.config.sweep`).

``cached``: of ``prompt``, the tokens the provider served from its prompt cache, billed in ``usd`` at the
cached-input rate (`ark.cost.prices`).

    ledger = Ledger(run_dir / RUN_LEDGER)
    hold = ledger.hold(0.05, run="prime/ark-gpt-4.1-t20_n3-full", cap=5.0)   # None: it would pass the cap
    ledger.settle(hold, 0.0123, prompt=4100, completion=60, run="prime/ark-gpt-4.1-t20_n3-full")
    ledger.total(), ledger.committed(), ledger.calls()
"""

from __future__ import annotations

import fcntl
import itertools
import json
import os
import threading
import time
from pathlib import Path

from ark.cost import holder

RUN_LEDGER = "spend.jsonl"   # a run directory's own ledger
_ids = itertools.count()


class Ledger:
    """An append-only file of payments and reservations, shared safely by processes (module doc)."""

    def __init__(self, path: Path | str):
        self.path = Path(path)
        self._offset = 0
        self._usd = 0.0
        self._calls = 0
        self._open: dict[str, tuple[float, str, float]] = {}   # hold id -> (worst, holder, time)
        self._held = 0.0                                          # the sum of their worst cases
        self._lock = threading.Lock()
        self._fd: tuple[int, int] | None = None                   # (pid, fd): one descriptor per process
        self._wlock = threading.Lock()

    # -- writing -----------------------------------------------------------------------------
    def _append(self, lines: list[dict], check=None, keep: list[bool] | None = None) -> bool:
        """Append ``lines`` under the file's exclusive lock; with ``check``, only when ``check()`` (called
        under the lock, after the ledger read every line before it) says so, and then only the lines whose
        ``keep`` flag (which ``check`` may set) is True."""
        with self._wlock:   # a flock is the descriptor's: threads of this process take turns here first
            fd = self._descriptor()
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                st = os.fstat(fd)
                reopened = st.st_nlink == 0
                if reopened:   # the file was removed or replaced: write to the one at the path
                    fcntl.flock(fd, fcntl.LOCK_UN)
                    fd = self._descriptor(reopen=True)
                    fcntl.flock(fd, fcntl.LOCK_EX)
                    st = os.fstat(fd)
                size = st.st_size
                # (when the ledger has read this file up to its end, the file ends with a whole line)
                if size and (reopened or size != self._offset) and os.pread(fd, 1, size - 1) != b"\n":
                    data = os.pread(fd, size, 0)   # a line torn by a kill: cut it off
                    size = data.rfind(b"\n") + 1
                    os.ftruncate(fd, size)
                if check is not None:
                    with self._lock:
                        self._read(fd)
                        ok = check()
                    if not ok:
                        return False
                if keep is not None:
                    lines = [line for line, k in zip(lines, keep) if k]
                if lines:
                    data = "".join(json.dumps(line) + "\n" for line in lines).encode()
                    whole = os.write(fd, data) == len(data)
                    with self._lock:   # nothing unread before them: take them in as written, not read back
                        if whole and not reopened and self._offset == size:
                            for line in lines:
                                self._take(line)
                            self._offset = size + len(data)
                return True
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)

    def _descriptor(self, reopen: bool = False) -> int:
        """This process's descriptor of the file (a new one after a fork: a lock must not be shared)."""
        with self._lock:
            if reopen and self._fd is not None and self._fd[0] == os.getpid():
                os.close(self._fd[1])
                self._fd = None
            if self._fd is None or self._fd[0] != os.getpid():
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._fd = (os.getpid(), os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644))
            return self._fd[1]

    def __del__(self) -> None:
        fd = getattr(self, "_fd", None)
        if fd is not None and fd[0] == os.getpid():
            try:
                os.close(fd[1])
            except OSError:
                pass

    def add(self, usd: float, prompt: int = 0, completion: int = 0, run: str = "", cached: int = 0) -> None:
        """Append one payment (a call that was not reserved; ``cached``: of ``prompt``, the tokens billed at
        the cached-input rate)."""
        self._append([{"t": round(time.time(), 3), "usd": usd, "prompt": prompt, "completion": completion,
                       "run": run, "cached": cached}])

    def hold(self, worst_usd: float, run: str = "", cap: float | None = None, by: str | None = None) -> str | None:
        """Reserve ``worst_usd`` for a call about to be sent and return the reservation's id; None (nothing
        written) when ``cap`` is set and `committed` plus ``worst_usd`` would pass it. ``by``: who holds it
        (`ark.cost.holder`; default this process)."""
        return self.hold_many([worst_usd], run, cap, [by])[0]

    def hold_many(self, worst_usd: list[float], run: str = "", cap: float | None = None,
                  by: list[str | None] | None = None) -> list[str | None]:
        """`hold` for several calls in one locked append: each, in order, is reserved when it fits under
        ``cap`` beside everything committed and the ones before it (its id), else not (None)."""
        me = holder.me()
        lines = [{"t": round(time.time(), 3), "hold": f"{os.getpid()}.{next(_ids)}.{time.monotonic_ns() % 10**9}",
                  "worst": w, "by": (by[i] if by else None) or me, "run": run} for i, w in enumerate(worst_usd)]
        taken = [True] * len(lines)

        def fits() -> bool:
            room = cap + 1e-12 - self._usd - self._in_flight()
            for i, line in enumerate(lines):
                taken[i] = line["worst"] <= room
                room -= line["worst"] if taken[i] else 0.0
            return any(taken)

        if not self._append(lines, None if cap is None else fits, keep=taken):
            return [None] * len(lines)
        return [line["hold"] if ok else None for line, ok in zip(lines, taken)]

    @staticmethod
    def settlement(hold_id: str, usd: float, prompt: int = 0, completion: int = 0, run: str = "",
                   paid: bool = True, cached: int = 0) -> dict:
        """The line closing the reservation ``hold_id`` (`settle`)."""
        line = {"t": round(time.time(), 3), "settles": hold_id, "usd": usd if paid else 0.0, "prompt": prompt,
                "completion": completion, "run": run, "cached": cached}
        if not paid:
            line["failed"] = True
        return line

    def settle(self, hold_id: str, usd: float, prompt: int = 0, completion: int = 0, run: str = "",
               paid: bool = True, cached: int = 0) -> None:
        """Close the reservation ``hold_id``: the call cost ``usd`` (``cached``: of ``prompt``, the tokens
        billed at the cached-input rate); ``paid`` False: it failed, nothing was billed."""
        self._append([self.settlement(hold_id, usd, prompt, completion, run, paid, cached)])

    def settle_many(self, lines: list[dict]) -> None:
        """Several `settlement` lines in one locked append."""
        self._append(lines)

    def settle_each(self, hold_id: str, replies: list[tuple[float, int, int, int]], run: str = "") -> None:
        """Close the reservation ``hold_id`` of several calls (a batch) with what they cost, ``(usd, prompt,
        completion, cached)`` per reply: one settlement of their sums that counts ``calls`` payments, so a
        second settlement of the same reservation (a rerun that re-attached to the batch) counts nothing;
        no reply at all settles it as failed."""
        if not replies:
            return self.settle(hold_id, 0.0, run=run, paid=False)
        usd, prompt, completion, cached = (sum(r[i] for r in replies) for i in range(4))
        self._append([{"t": round(time.time(), 3), "settles": hold_id, "usd": usd, "prompt": prompt,
                       "completion": completion, "run": run, "cached": cached, "calls": len(replies)}])

    def reconcile(self) -> tuple[int, bool]:
        """Settle the reservations of processes that ended without settling them, each as paid at its
        worst case (the provider may have billed it). Returns (how many, whether reservations of running
        processes remain open)."""
        lost: list[dict] = []
        live = [False]

        def dead() -> bool:
            for hid, (worst, by, t) in self._open.items():
                if holder.alive(by, t):
                    live[0] = True
                else:
                    lost.append({"t": round(time.time(), 3), "settles": hid, "usd": worst, "lost": True,
                                 "run": "", "by": by})
            return bool(lost)

        if self.path.exists():
            self._append(lost, dead)
        return len(lost), live[0]

    # -- reading -----------------------------------------------------------------------------
    def _in_flight(self) -> float:
        return self._held if self._open else 0.0

    def _read(self, fd: int | None = None) -> None:
        """Take in the lines appended since the last read; ``fd``: the file's descriptor, locked by the
        caller (read in place, no new open)."""
        if fd is not None:
            size = os.fstat(fd).st_size
            data = os.pread(fd, size - self._offset, self._offset) if size > self._offset else b""
        else:
            try:
                with open(self.path, "rb") as f:
                    f.seek(self._offset)
                    data = f.read()
            except FileNotFoundError:
                return
            size = None
        if self._offset and not data and (size if size is not None else self.path.stat().st_size) < self._offset:
            self._offset, self._usd, self._calls, self._open, self._held = 0, 0.0, 0, {}, 0.0   # cut: read again
            return self._read(fd)
        end = data.rfind(b"\n") + 1   # whole lines only: the last one may still be being written
        for raw in data[:end].splitlines():
            try:
                self._take(json.loads(raw))
            except (ValueError, KeyError, TypeError, AttributeError):
                continue   # a line torn by a kill and cut later
        self._offset += end

    def _take(self, line: dict) -> None:
        """Count one line of the file (module doc) in the totals."""
        if "hold" in line:
            worst = float(line["worst"])
            self._open[line["hold"]] = (worst, str(line.get("by", "")), float(line["t"]))
            self._held += worst
            return
        usd = float(line["usd"])
        if "settles" in line:
            held = self._open.pop(line["settles"], None)
            if held is None:
                return   # settled twice (cannot happen under the lock): counted once
            self._held -= held[0]
            if line.get("failed"):
                return   # a call that failed: nothing billed
        self._usd += usd
        self._calls += int(line.get("calls", 1))

    def total(self) -> float:
        """US$ paid so far (settled), every writer included."""
        with self._lock:
            self._read()
            return self._usd

    def committed(self) -> float:
        """US$ paid so far plus the worst case of every call in flight (any process)."""
        with self._lock:
            self._read()
            return self._usd + self._in_flight()

    def calls(self) -> int:
        """Payments (LLM replies) recorded so far, reservations settled as lost included."""
        with self._lock:
            self._read()
            return self._calls

    def in_flight(self) -> int:
        """Reservations not settled yet (calls in flight, or left by a killed process until reconciled)."""
        with self._lock:
            self._read()
            return len(self._open)
