"""Content-addressed LLM response cache on disk (SQLite, WAL mode).

The key is a SHA-256 over a canonical JSON of everything that determines a reply: the model, the
messages, the tools, tool_choice, the sampling parameters (temperature, max_tokens, seed, extra
body) and the agent's index. So n agents at temperature > 0 get n independent entries, and a rerun
of an experiment replays every call exactly, with no HTTP request. The value is the JSON of a
``ChatResponse`` (see ``ark.llm.client``); errors are never cached.

Safe for several processes and threads at once: each (process, thread) opens its own connection,
WAL lets readers run during a write, a busy timeout waits out other writers, a statement SQLite
refuses without that wait (two processes switching a new file to WAL at once) is tried again until
the same timeout, and the first write of a key wins (``INSERT OR IGNORE``), so every reader of a key
sees the same reply.

A reply is bought once however many processes ask for it at once (the points of a parallel sweep share
prompts): the client claims a key it is about to buy (`ResponseCache.claim`, a row naming its process,
`ark.cost.holder`); another process asking for the same key meanwhile waits for the reply instead of
buying it again, and takes the claim over when its holder has ended without a reply (killed) or
releases it (the call failed). The claims are a table of their own without row ids (one b-tree: a claim
and its end each write one page less); a cache written before it had them in ``claims``, dropped when
such a file is opened (claims do not outlive their processes' calls). The claims that the tasks of one
turn of the event loop take are written in one transaction (`aclaim`, `claim_many`), and so are the
replies they store (`put_soon`, `put_many`; `ark.coalesce`).

A file that is not a readable SQLite database (header overwritten, cut short, replaced by text) is
moved aside to ``<name>.corrupt-<UTC time>`` with a warning naming both files, and a fresh cache
takes its place: the run goes on, and only the replies the lost file held are paid for again. A full
disk while storing a reply raises ``OSError(ENOSPC)`` naming the file (the runner stops cleanly).

    cache = ResponseCache("data/cache/llm.sqlite")
    key = cache_key(model="gpt-4.1", messages=msgs, tools=tools, params={"temperature": 0},
                    agent_index=0)
    cache.get(key)            # -> dict | None
    cache.put(key, {...})

SQLite's locks are not to be trusted on a filesystem shared by several nodes (NFS, Lustre), so a
cluster job that may run beside others writes a cache of its own: ``ResponseCache(own, fallback=shared)``
writes only to ``own`` and, on a miss, looks the key up in ``shared`` read-only (opened ``immutable``:
no lock, no journal; a read that fails there is a miss, never an error, and never moves the shared
file aside). ``merge(sources, into)`` then copies every reply of the job caches into the shared one, from
one process (the run's own merge step, ``ark.run.shards``).
"""

from __future__ import annotations

import asyncio
import errno
import hashlib
import json
import logging
import os
import random
import sqlite3
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ark.coalesce import Coalescer
from ark.cost import holder
from ark.cost.tokens import canonical

log = logging.getLogger(__name__)

KEY_VERSION = "ark-llm-cache-v1"  # bump to invalidate every key after a format change
TIMEOUT_S = 60.0   # how long a connection waits for another process's lock before it fails

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    value TEXT NOT NULL,
    created REAL NOT NULL DEFAULT (julianday('now'))
);
CREATE TABLE IF NOT EXISTS reply_claims (
    key TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    t REAL NOT NULL
) WITHOUT ROWID;
DROP TRIGGER IF EXISTS reply_ends_claim;
DROP TABLE IF EXISTS claims;
CREATE TRIGGER IF NOT EXISTS reply_ends_reply_claim AFTER INSERT ON responses BEGIN
    DELETE FROM reply_claims WHERE key = NEW.key;
END;
"""


_VALUE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))   # a stored reply's JSON, encoder made once


def cache_key(*, model: str, messages: list[dict], tools: list[dict] | None, params: dict[str, Any],
              agent_index: int, encoded: tuple[str, str] | None = None) -> str:
    """Hex SHA-256 of the canonical JSON of a request (dict order does not matter): of
    ``{"agent_index", "messages", "model", "params", "tools": tools or [], "v": KEY_VERSION}``.
    ``encoded``: ``(canonical(messages), canonical(tools or []))`` (`ark.cost.tokens.canonical`) when the caller has them already
    (the client encodes a request once); the key is the same."""
    msgs, tls = encoded if encoded is not None else (canonical(messages), canonical(tools or []))
    blob = (f'{{"agent_index":{int(agent_index)},"messages":{msgs},"model":{canonical(model)},'
            f'"params":{canonical(params)},"tools":{tls},"v":{canonical(KEY_VERSION)}}}')
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class ResponseCache:
    """SQLite-backed key → JSON store shared by all clients, threads and processes of a run.

    ``fallback``: another cache file, read (never written) on a miss (see the module doc)."""

    def __init__(self, path: str | Path, timeout_s: float = TIMEOUT_S, fallback: str | Path | None = None):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.timeout_s = timeout_s
        self.fallback = Path(fallback) if fallback is not None else None
        if self.fallback is not None and self.fallback.resolve() == self.path.resolve():
            raise ValueError(f"a cache cannot fall back on itself: {self.path}")
        self._local = threading.local()
        self._fallback_broken = False
        # the claims, and the replies stored, of one turn of an event loop: one transaction each
        self._claims = Coalescer(self.claim_many, undo=lambda key, ok: self.release(key) if ok else None)
        self._stores = Coalescer(self.put_many)
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
        """A connection in WAL mode with the schema in place. Two processes opening a new file at once
        both switch it to WAL, and SQLite refuses one of them at once, without its busy wait (it holds
        a read lock the other waits on): that one closes and tries again until ``timeout_s``."""
        return _while_locked(self._setup, self.timeout_s, self.path)

    def _setup(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=self.timeout_s, isolation_level=None)
        try:
            conn.execute(f"PRAGMA busy_timeout={int(self.timeout_s * 1000)}")
            if conn.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":   # WAL stays with the file
                conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.executescript(_SCHEMA)
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
        # every statement here is one idempotent autocommit statement, so a refusal without the busy
        # wait (SQLite's deadlock guard) is retried as a whole
        return self._write(lambda conn: conn.execute(sql, args))

    def _transaction(self, work):
        """``work(conn)`` in one transaction (``BEGIN IMMEDIATE``: this process writes, or waits for its
        turn); the whole transaction is retried where SQLite refuses it without its busy wait."""
        def attempt(conn):
            conn.execute("BEGIN IMMEDIATE")
            try:
                out = work(conn)
                conn.execute("COMMIT")
                return out
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        return self._write(attempt)

    def _write(self, attempt):
        """``attempt(conn)`` on this thread's connection, again while the file is locked; a full disk
        raises ``OSError(ENOSPC)``, a cache found corrupt mid-run is moved aside once."""
        try:
            conn = self._conn()   # opening has its own wait (`_open`)
            return _while_locked(lambda: attempt(conn), self.timeout_s, self.path)
        except sqlite3.DatabaseError as e:
            if _is_full(e):
                raise OSError(errno.ENOSPC, f"no space left to store an LLM reply in {self.path}") from e
            if not _is_corrupt(e):
                raise
            self._move_aside(e)
            return attempt(self._conn())

    def get(self, key: str) -> dict | None:
        row = self._run("SELECT value FROM responses WHERE key = ?", (key,)).fetchone()
        if row is None and self.fallback is not None:
            return self._fallback_get(key)
        return json.loads(row[0]) if row else None

    def _fallback_get(self, key: str) -> dict | None:
        """``key`` in the fallback file, read-only; any failure there is a miss (warned once)."""
        if self._fallback_broken or not self.fallback.exists():
            return None
        try:
            conn = getattr(self._local, "fallback", None)
            if conn is None or getattr(self._local, "fallback_pid", None) != os.getpid():
                conn = sqlite3.connect(f"{self.fallback.resolve().as_uri()}?immutable=1", uri=True,
                                       check_same_thread=False)
                self._local.fallback, self._local.fallback_pid = conn, os.getpid()
            row = conn.execute("SELECT value FROM responses WHERE key = ?", (key,)).fetchone()
            return json.loads(row[0]) if row else None
        except sqlite3.OperationalError as e:
            if "no such table" not in str(e):
                return self._fallback_failed(e)
            # a new cache whose schema is still in its creator's WAL, which an immutable reader does not
            # see: a miss now, and the next miss opens the file afresh (its content, once checkpointed)
            self._local.fallback.close()
            self._local.fallback = None
            return None
        except (sqlite3.Error, ValueError) as e:
            return self._fallback_failed(e)

    def _fallback_failed(self, e: Exception) -> None:
        """The fallback is not read again by this cache (warned once)."""
        self._fallback_broken = True
        log.warning("LLM cache %s cannot be read (%s); its replies are not replayed in this process", self.fallback, e)
        return None

    def put(self, key: str, value: dict, model: str = "") -> None:
        """Store ``value`` under ``key`` unless the key exists already (first write wins)."""
        self.put_many([(key, value, model)])

    def put_many(self, items: list[tuple[str, dict, str]]) -> list[None]:
        """`put` for several ``(key, value, model)`` in one transaction."""
        rows = [(key, model, _VALUE.encode(value)) for key, value, model in items]
        if len(rows) == 1:
            self._run("INSERT OR IGNORE INTO responses (key, model, value) VALUES (?, ?, ?)", rows[0])
        else:
            self._transaction(lambda conn: conn.executemany(
                "INSERT OR IGNORE INTO responses (key, model, value) VALUES (?, ?, ?)", rows))
        return [None] * len(rows)

    def claim(self, key: str) -> bool:
        """Claim the reply to ``key`` for this process to buy: True when it is not stored and no one else
        is buying it (no claim, or the claim of a process that has ended, taken over); False when it is
        stored or while another process, or another task of this one, holds the claim (look for the reply
        with `get`, and wait while it is not there). Storing the reply (`put`) or `release` ends the claim."""
        return self.claim_many([key])[0]

    async def aclaim(self, key: str) -> bool:
        """`claim`, in one transaction with the other claims of this turn of the event loop."""
        return await self._claims.submit(key)

    def put_soon(self, key: str, value: dict, model: str = "") -> asyncio.Future:
        """`put` at the end of this turn of the event loop, in one transaction with the turn's other replies;
        the future is done once it is stored, and it is stored even if no one awaits it."""
        return self._stores.enqueue((key, value, model))

    def claim_many(self, keys: list[str]) -> list[bool]:
        """`claim` for several keys in one transaction (a key twice: the first one claims it)."""
        me, now = holder.me(), time.time()

        def claims(conn) -> list[bool]:
            out = []
            for key in keys:
                if conn.execute("INSERT OR IGNORE INTO reply_claims (key, holder, t) SELECT ?, ?, ? "
                                "WHERE NOT EXISTS (SELECT 1 FROM responses WHERE key = ?)",
                                (key, me, now, key)).rowcount:
                    out.append(True)
                    continue
                row = conn.execute("SELECT holder, t FROM reply_claims WHERE key = ?", (key,)).fetchone()
                if row is None or holder.alive(row[0], row[1]):
                    out.append(False)   # stored, released a moment ago, or being bought
                    continue
                out.append(bool(conn.execute("UPDATE reply_claims SET holder = ?, t = ? WHERE key = ? AND holder = ?",
                                             (me, now, key, row[0])).rowcount))
            return out

        # one key: autocommit statements, each idempotent (the common claim is one INSERT)
        return self._write(claims) if len(keys) == 1 else self._transaction(claims)

    def release(self, key: str) -> None:
        """End this process's claim on ``key`` without a reply (the call failed or was refused)."""
        self._run("DELETE FROM reply_claims WHERE key = ? AND holder = ?", (key, holder.me()))

    def __len__(self) -> int:
        return self._run("SELECT COUNT(*) FROM responses").fetchone()[0]

    def __contains__(self, key: str) -> bool:
        return self._run("SELECT 1 FROM responses WHERE key = ?", (key,)).fetchone() is not None

    def close(self) -> None:
        """Close this thread's connections (others close when their threads/processes end)."""
        for name in ("conn", "fallback"):
            conn = getattr(self._local, name, None)
            if conn is not None:
                conn.close()
                setattr(self._local, name, None)

    def items(self):
        """Every stored (key, model, value JSON text, created) row, in insertion order."""
        return self._run("SELECT key, model, value, created FROM responses ORDER BY rowid").fetchall()

    def __repr__(self) -> str:
        extra = f", fallback={str(self.fallback)!r}" if self.fallback is not None else ""
        return f"ResponseCache({str(self.path)!r}{extra})"

    # pickling (multiprocessing) carries only the paths; each process reconnects
    def __getstate__(self) -> dict:
        return {"path": self.path, "timeout_s": self.timeout_s, "fallback": self.fallback}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["path"], state["timeout_s"], state.get("fallback"))


def merge(sources: Iterable[str | Path], into: str | Path) -> int:
    """Copy every reply of the cache files ``sources`` into the cache ``into`` (created if needed) in one
    transaction; a key ``into`` holds already keeps its reply (first write wins, as in ``put``).
    Returns the number of replies added. A source that is missing is skipped; one that is not a
    readable cache raises ``sqlite3.DatabaseError`` naming it, before anything is written."""
    rows = []
    for src in sources:
        src = Path(src)
        if not src.exists():
            continue
        try:
            conn = sqlite3.connect(f"{src.resolve().as_uri()}?mode=ro", uri=True, timeout=TIMEOUT_S)
            try:
                rows += conn.execute("SELECT key, model, value, created FROM responses ORDER BY rowid").fetchall()
            finally:
                conn.close()
        except sqlite3.DatabaseError as e:
            raise sqlite3.DatabaseError(f"LLM cache {src} cannot be read: {e}") from e
    target = ResponseCache(into)
    before = len(target)
    try:
        target._transaction(lambda conn: conn.executemany(
            "INSERT OR IGNORE INTO responses (key, model, value, created) VALUES (?, ?, ?, ?)", rows))
    finally:
        added = len(target) - before
        target.close()
    return added


def _while_locked(attempt, timeout_s: float, path: Path):
    """``attempt()`` again, after a short random pause, while SQLite answers "database is locked" (or
    busy), for up to ``timeout_s`` seconds; then the last error, naming ``path``."""
    deadline = time.monotonic() + timeout_s
    pause = 0.005
    while True:
        try:
            return attempt()
        except sqlite3.OperationalError as e:
            if not _is_locked(e):
                raise
            if time.monotonic() + pause > deadline:
                raise sqlite3.OperationalError(f"LLM cache {path} stayed locked for {timeout_s:g} s: {e}") from e
        time.sleep(pause * (0.5 + random.random()))
        pause = min(pause * 2, 0.25)


def _is_locked(e: sqlite3.OperationalError) -> bool:
    msg = str(e).lower()
    return "database is locked" in msg or "database is busy" in msg or "database table is locked" in msg


def _is_corrupt(e: sqlite3.DatabaseError) -> bool:
    msg = str(e).lower()
    return "not a database" in msg or "malformed" in msg or "file is encrypted" in msg


def _is_full(e: sqlite3.DatabaseError) -> bool:
    return "disk is full" in str(e).lower()
