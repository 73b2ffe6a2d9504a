"""Content-addressed LLM response cache on disk (SQLite, WAL mode).

The key is a SHA-256 over a canonical JSON of everything that determines a reply: the model, the
messages, the tools, tool_choice, the sampling parameters (temperature, max_tokens, seed, extra
body) and the agent's index. So n agents at temperature > 0 get n independent entries, and a rerun
of an experiment replays every call exactly, with no HTTP request. The value is the JSON of a
``ChatResponse`` (see ``ark.llm.client``); errors are never cached.

Safe for several processes and threads at once: each (process, thread) opens its own connection,
WAL lets readers run during a write, a busy timeout waits out other writers, and the first write
of a key wins (``INSERT OR IGNORE``), so every reader of a key sees the same reply.

A file that is not a readable SQLite database (header overwritten, cut short, replaced by text) is
moved aside to ``<name>.corrupt-<UTC time>`` with a warning naming both files, and a fresh cache
takes its place: the run goes on, and only the replies the lost file held are paid for again. A full
disk while storing a reply raises ``OSError(ENOSPC)`` naming the file (the runner stops cleanly).

    cache = ResponseCache("data/cache/llm.sqlite")
    key = cache_key(model="gpt-4.1", messages=msgs, tools=tools, params={"temperature": 0},
                    agent_index=0)
    cache.get(key)            # -> dict | None
    cache.put(key, {...})
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

KEY_VERSION = "ark-llm-cache-v1"  # bump to invalidate every key after a format change

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    value TEXT NOT NULL,
    created REAL NOT NULL DEFAULT (julianday('now'))
)
"""


def cache_key(*, model: str, messages: list[dict], tools: list[dict] | None, params: dict[str, Any],
              agent_index: int) -> str:
    """Hex SHA-256 of the canonical JSON of a request (dict order does not matter)."""
    payload = {
        "v": KEY_VERSION,
        "model": model,
        "messages": messages,
        "tools": tools or [],
        "params": params,
        "agent_index": int(agent_index),
    }
    blob = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class ResponseCache:
    """SQLite-backed key → JSON store shared by all clients, threads and processes of a run."""

    def __init__(self, path: str | Path, timeout_s: float = 60.0):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.timeout_s = timeout_s
        self._local = threading.local()
        self._conn()  # create the file and schema now, so setup errors surface at setup

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is not None and getattr(self._local, "pid", None) == os.getpid():
            return conn
        # a connection must not cross a fork: open a fresh one per (process, thread)
        try:
            conn = self._open()
        except sqlite3.DatabaseError as e:
            if not _is_corrupt(e):
                raise
            self._move_aside(e)
            conn = self._open()
        self._local.conn, self._local.pid = conn, os.getpid()
        return conn

    def _open(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=self.timeout_s, isolation_level=None)
        try:
            conn.execute(f"PRAGMA busy_timeout={int(self.timeout_s * 1000)}")
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute(_SCHEMA)
        except BaseException:
            conn.close()
            raise
        return conn

    def _move_aside(self, error: Exception) -> None:
        """Rename the unreadable file (and its -wal/-shm) out of the way; a fresh cache replaces it."""
        old = getattr(self._local, "conn", None)
        if old is not None:
            old.close()
            self._local.conn = None
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        aside = self.path.with_name(f"{self.path.name}.corrupt-{stamp}-{os.getpid()}")
        for suffix in ("", "-wal", "-shm"):
            src = Path(f"{self.path}{suffix}")
            if src.exists():
                os.replace(src, Path(f"{aside}{suffix}"))
        log.warning("LLM cache %s is not a readable SQLite database (%s); moved it to %s and started a "
                    "fresh cache (replies it held will be requested again; delete the moved file when "
                    "you no longer need it)", self.path, error, aside)

    def _run(self, sql: str, args: tuple = ()) -> sqlite3.Cursor:
        """Execute on this thread's connection; a cache found corrupt mid-run is moved aside once."""
        try:
            return self._conn().execute(sql, args)
        except sqlite3.DatabaseError as e:
            if _is_full(e):
                raise OSError(errno.ENOSPC, f"no space left to store an LLM reply in {self.path}") from e
            if not _is_corrupt(e):
                raise
            self._move_aside(e)
            return self._conn().execute(sql, args)

    def get(self, key: str) -> dict | None:
        row = self._run("SELECT value FROM responses WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def put(self, key: str, value: dict, model: str = "") -> None:
        """Store ``value`` under ``key`` unless the key exists already (first write wins)."""
        blob = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        self._run("INSERT OR IGNORE INTO responses (key, model, value) VALUES (?, ?, ?)", (key, model, blob))

    def __len__(self) -> int:
        return self._run("SELECT COUNT(*) FROM responses").fetchone()[0]

    def __contains__(self, key: str) -> bool:
        return self._run("SELECT 1 FROM responses WHERE key = ?", (key,)).fetchone() is not None

    def close(self) -> None:
        """Close this thread's connection (others close when their threads/processes end)."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    def __repr__(self) -> str:
        return f"ResponseCache({str(self.path)!r})"

    # pickling (multiprocessing) carries only the path; each process reconnects
    def __getstate__(self) -> dict:
        return {"path": self.path, "timeout_s": self.timeout_s}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["path"], state["timeout_s"])


def _is_corrupt(e: sqlite3.DatabaseError) -> bool:
    msg = str(e).lower()
    return "not a database" in msg or "malformed" in msg or "file is encrypted" in msg


def _is_full(e: sqlite3.DatabaseError) -> bool:
    return "disk is full" in str(e).lower()
