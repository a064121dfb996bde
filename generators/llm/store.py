"""On-disk SQLite store of LLM replies, keyed by the hash of the canonical request, and of batch ids.

Why: a rerun, or a run resumed after a crash, must never pay twice for a request that completed, and
a batch submitted before a restart must be collected, not submitted again.

Guarantees: every write is one transaction, committed before the call returns (a SIGKILL loses at most
the requests still in flight); WAL mode plus a busy timeout make concurrent writers safe (threads
share one connection behind a lock, other processes open their own); reads use a second connection,
so a reader never waits for a writer's commit (WAL readers see the last committed state); a file
written by another schema version is refused at open with a clear error. Requests are stored for audit only; API keys
never reach this store (they are not part of a request body).
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

import orjson

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    provider TEXT NOT NULL,
    model TEXT NOT NULL,
    request BLOB NOT NULL,
    reply BLOB NOT NULL,
    created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS batches (
    batch_id TEXT PRIMARY KEY,
    provider TEXT NOT NULL,
    status TEXT NOT NULL,
    created REAL NOT NULL,
    ended REAL
);
CREATE TABLE IF NOT EXISTS batch_requests (
    key TEXT NOT NULL,
    batch_id TEXT NOT NULL REFERENCES batches(batch_id),
    task TEXT NOT NULL,
    model TEXT NOT NULL,
    reserved_usd REAL NOT NULL DEFAULT 0,
    error TEXT,
    PRIMARY KEY (key, batch_id)
);
CREATE INDEX IF NOT EXISTS batch_requests_by_batch ON batch_requests(batch_id);
"""


class StoreError(RuntimeError):
    """The store file cannot be used (another schema version, not a SQLite file)."""


class BatchEntry(NamedTuple):
    """One request of a submitted batch."""

    key: str
    """Request hash (also the batch `custom_id`)."""
    task: str
    """Task the request belongs to (for the ledger)."""
    model: str
    """Model requested."""
    reserved_usd: float
    """Budget reserved for it at submission."""


class PendingBatch(NamedTuple):
    """A submitted batch that has not been collected yet."""

    batch_id: str
    provider: str
    entries: tuple[BatchEntry, ...]


class ResponseStore:
    """Replies by request key, plus the ids of submitted batches (see the module docstring)."""

    def __init__(self, path: str | Path) -> None:
        """Open (and create) the store at `path`.

        Raises:
            StoreError: the file is not a SQLite file or has another schema version.
        """
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        try:
            self._conn = sqlite3.connect(self.path, timeout=60, isolation_level=None, check_same_thread=False)
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            version = self._conn.execute("PRAGMA user_version").fetchone()[0]
            if version not in (0, SCHEMA_VERSION):
                raise StoreError(
                    f"{self.path}: LLM store schema {version}, this aptforge reads {SCHEMA_VERSION}"
                )
            self._conn.execute("PRAGMA busy_timeout=60000")
            # CREATE ... IF NOT EXISTS is idempotent; executescript commits on its own.
            self._conn.executescript(_SCHEMA)
            self._conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            self._read = sqlite3.connect(self.path, timeout=60, isolation_level=None, check_same_thread=False)
            self._read_lock = threading.Lock()
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.path}: not a usable LLM store: {exc}") from exc

    @contextmanager
    def _tx(self) -> Iterator[None]:
        """One IMMEDIATE transaction (the write lock is taken up front, so no upgrade deadlocks)."""
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored reply of a request, or None."""
        with self._read_lock:
            row = self._read.execute("SELECT reply FROM responses WHERE key = ?", (key,)).fetchone()
        return orjson.loads(row[0]) if row else None

    def put(
        self, key: str, provider: str, model: str, request: Mapping[str, Any], reply: Mapping[str, Any]
    ) -> None:
        """Store one reply (committed when this returns)."""
        self.put_many([(key, provider, model, request, reply)])

    def put_many(self, rows: Iterable[tuple[str, str, str, Mapping[str, Any], Mapping[str, Any]]]) -> None:
        """Store several replies in one transaction."""
        now = time.time()
        data = [
            (k, p, m, orjson.dumps(req, option=orjson.OPT_SORT_KEYS), orjson.dumps(rep), now)
            for k, p, m, req, rep in rows
        ]
        with self._lock, self._tx():
            self._conn.executemany("INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?, ?, ?)", data)

    def forget(self, keys: Iterable[str]) -> None:
        """Drop stored replies (invalid output is not a final answer: a later run asks again)."""
        keys = [(k,) for k in keys]
        if keys:
            with self._lock, self._tx():
                self._conn.executemany("DELETE FROM responses WHERE key = ?", keys)

    def count(self) -> int:
        """Number of stored replies."""
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def keys(self) -> set[str]:
        """Keys of every stored reply."""
        with self._lock:
            return {r[0] for r in self._conn.execute("SELECT key FROM responses")}

    # -- batches ---------------------------------------------------------------------------------

    def add_batch(self, batch_id: str, provider: str, entries: Iterable[BatchEntry]) -> None:
        """Record a submitted batch and its requests (one transaction)."""
        with self._lock, self._tx():
            self._conn.execute(
                "INSERT INTO batches VALUES (?, ?, 'submitted', ?, NULL)", (batch_id, provider, time.time())
            )
            self._conn.executemany(
                "INSERT OR REPLACE INTO batch_requests VALUES (?, ?, ?, ?, ?, NULL)",
                [(e.key, batch_id, e.task, e.model, e.reserved_usd) for e in entries],
            )

    def pending_batches(self, provider: str) -> list[PendingBatch]:
        """Submitted, not yet collected batches of a provider, oldest first."""
        with self._lock:
            ids = [
                r[0]
                for r in self._conn.execute(
                    "SELECT batch_id FROM batches WHERE provider = ? AND status = 'submitted' ORDER BY created, batch_id",
                    (provider,),
                )
            ]
            out = []
            for batch_id in ids:
                rows = self._conn.execute(
                    "SELECT key, task, model, reserved_usd FROM batch_requests WHERE batch_id = ? ORDER BY key",
                    (batch_id,),
                ).fetchall()
                out.append(PendingBatch(batch_id, provider, tuple(BatchEntry(*r) for r in rows)))
        return out

    def finish_batch(
        self,
        batch_id: str,
        status: str,
        replies: Iterable[tuple[str, str, str, Mapping[str, Any], Mapping[str, Any]]],
        errors: Mapping[str, str],
    ) -> None:
        """Store a collected batch's replies and per-request errors, and close it (one transaction)."""
        now = time.time()
        data = [
            (k, p, m, orjson.dumps(req, option=orjson.OPT_SORT_KEYS), orjson.dumps(rep), now)
            for k, p, m, req, rep in replies
        ]
        with self._lock, self._tx():
            self._conn.executemany("INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?, ?, ?)", data)
            self._conn.executemany(
                "UPDATE batch_requests SET error = ? WHERE batch_id = ? AND key = ?",
                [(err, batch_id, key) for key, err in errors.items()],
            )
            self._conn.execute(
                "UPDATE batches SET status = ?, ended = ? WHERE batch_id = ?", (status, now, batch_id)
            )

    def batch_errors(self, batch_id: str) -> dict[str, str]:
        """Per-request errors recorded when a batch was collected."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT key, error FROM batch_requests WHERE batch_id = ? AND error IS NOT NULL", (batch_id,)
            )
            return dict(rows.fetchall())

    def batch_status(self, batch_id: str) -> str | None:
        """`submitted`, a final provider status, or None for an unknown id."""
        with self._lock:
            row = self._conn.execute("SELECT status FROM batches WHERE batch_id = ?", (batch_id,)).fetchone()
        return row[0] if row else None

    def close(self) -> None:
        """Close the connections (idempotent)."""
        with self._read_lock:
            self._read.close()
        with self._lock:
            self._conn.close()


__all__ = ["BatchEntry", "PendingBatch", "ResponseStore", "StoreError"]
