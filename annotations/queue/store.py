"""The review queue's SQLite layer: schema, connections, write transactions and the log writer.

Guarantees: the database runs in WAL mode (readers never block the one writer, and a crash leaves the
last committed state); every write happens inside `BEGIN IMMEDIATE ... COMMIT`, so a multi-row change
(item, version, review, lease, log line) lands whole or not at all; the decision log refuses UPDATE and
DELETE through triggers, so it is append-only even for someone holding a raw connection. A queue file
of schema 1 is upgraded in place (new columns and the lease table; nothing is rewritten).
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from annotations.records import QueueError

SCHEMA_VERSION = 2

DDL = """
CREATE TABLE IF NOT EXISTS meta (
  key TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS items (
  item_id TEXT PRIMARY KEY,
  scenario TEXT NOT NULL,
  task TEXT NOT NULL,
  source TEXT NOT NULL,
  instance_id TEXT NOT NULL,
  built_hash TEXT NOT NULL,
  content_hash TEXT NOT NULL,
  version INTEGER NOT NULL,
  rev INTEGER NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('pending', 'accepted', 'rejected', 'edited')),
  reviewer TEXT,
  decided_at TEXT,
  note TEXT NOT NULL DEFAULT '',
  seen_hash TEXT,
  retired INTEGER NOT NULL DEFAULT 0,
  batch TEXT NOT NULL,
  enqueued_at TEXT NOT NULL,
  updated_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS items_filter ON items (retired, task, status, source);
CREATE TABLE IF NOT EXISTS versions (
  item_id TEXT NOT NULL REFERENCES items (item_id),
  version INTEGER NOT NULL,
  content_hash TEXT NOT NULL,
  kind TEXT NOT NULL CHECK (kind IN ('build', 'edit')),
  author TEXT NOT NULL,
  at TEXT NOT NULL,
  note TEXT NOT NULL DEFAULT '',
  question TEXT NOT NULL,
  PRIMARY KEY (item_id, version)
);
CREATE TABLE IF NOT EXISTS reviews (
  item_id TEXT NOT NULL REFERENCES items (item_id),
  content_hash TEXT NOT NULL,
  reviewer TEXT NOT NULL,
  decision TEXT NOT NULL CHECK (decision IN ('accepted', 'rejected', 'edited')),
  note TEXT NOT NULL DEFAULT '',
  at TEXT NOT NULL,
  origin TEXT NOT NULL,
  reasons TEXT NOT NULL DEFAULT '[]',
  role TEXT NOT NULL DEFAULT 'reviewer',
  seconds REAL,
  PRIMARY KEY (item_id, content_hash, reviewer)
);
CREATE TABLE IF NOT EXISTS leases (
  item_id TEXT NOT NULL REFERENCES items (item_id),
  reviewer TEXT NOT NULL,
  since TEXT NOT NULL,
  until TEXT NOT NULL,
  PRIMARY KEY (item_id, reviewer)
);
CREATE TABLE IF NOT EXISTS log (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  at TEXT NOT NULL,
  item_id TEXT NOT NULL,
  action TEXT NOT NULL,
  reviewer TEXT NOT NULL,
  note TEXT NOT NULL DEFAULT '',
  content_hash TEXT NOT NULL,
  status TEXT NOT NULL,
  rev INTEGER NOT NULL,
  origin TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS log_item ON log (item_id, seq);
CREATE INDEX IF NOT EXISTS log_reviewer ON log (reviewer, seq);
CREATE TRIGGER IF NOT EXISTS log_no_update BEFORE UPDATE ON log
BEGIN SELECT RAISE(ABORT, 'the decision log is append-only'); END;
CREATE TRIGGER IF NOT EXISTS log_no_delete BEFORE DELETE ON log
BEGIN SELECT RAISE(ABORT, 'the decision log is append-only'); END;
"""


def connect(path: Path, timeout: float = 30.0) -> sqlite3.Connection:
    """Open a connection in autocommit mode (transactions are explicit) with rows addressable by name."""
    con = sqlite3.connect(path, timeout=timeout, isolation_level=None, check_same_thread=False)
    con.row_factory = sqlite3.Row
    con.execute("PRAGMA foreign_keys = ON")
    con.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
    return con


def initialise(path: Path) -> None:
    """Create the folder, switch the file to WAL and create the tables (idempotent)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    con = connect(path)
    try:
        mode = con.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise sqlite3.OperationalError(f"{path}: cannot switch the review queue to WAL (got {mode})")
        _upgrade(con)
        con.executescript(DDL)
        with transaction(con):
            con.execute(
                "INSERT OR IGNORE INTO meta (key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),)
            )
            con.execute("INSERT OR IGNORE INTO meta (key, value) VALUES ('reviews_per_item', '1')")
    finally:
        con.close()


#: Columns added after schema 1: (table, column, declaration).
_ADDED = (
    ("reviews", "reasons", "TEXT NOT NULL DEFAULT '[]'"),
    ("reviews", "role", "TEXT NOT NULL DEFAULT 'reviewer'"),
    ("reviews", "seconds", "REAL"),
)


def _upgrade(con: sqlite3.Connection) -> None:
    """Add the columns a schema-1 queue lacks (before the DDL, whose indexes may name them)."""
    for table, column, decl in _ADDED:
        cols = {r[1] for r in con.execute(f"PRAGMA table_info({table})")}
        if cols and column not in cols:
            con.execute(f"ALTER TABLE {table} ADD COLUMN {column} {decl}")
    if con.execute("SELECT name FROM sqlite_master WHERE name = 'meta'").fetchone():
        con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION),))


@contextmanager
def transaction(con: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """`BEGIN IMMEDIATE` (take the write lock now, so read-then-write cannot race), commit or roll back."""
    con.execute("BEGIN IMMEDIATE")
    try:
        yield con
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")


@contextmanager
def opened(path: Path) -> Iterator[sqlite3.Connection]:
    """A short-lived connection (one per operation keeps threads apart: FastAPI runs handlers in a pool)."""
    con = connect(path)
    try:
        yield con
    finally:
        con.close()


def log_action(
    con: sqlite3.Connection,
    *,
    at: str,
    item_id: str,
    action: str,
    reviewer: str,
    content_hash: str,
    status: str,
    rev: int,
    origin: str,
    note: str = "",
) -> int:
    """Append one line to the decision log; returns its sequence number (a reviewer's own revision)."""
    cur = con.execute(
        "INSERT INTO log (at, item_id, action, reviewer, note, content_hash, status, rev, origin)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (at, item_id, action, reviewer, note, content_hash, status, rev, origin),
    )
    return int(cur.lastrowid or 0)


Clock = Callable[[], datetime]


def utc_now() -> datetime:
    """The real clock (tests pass their own)."""
    return datetime.now(UTC)


class QueueBase:
    """What every part of the queue shares: the file, the clock, connections."""

    def __init__(self, path: str | Path, *, clock: Clock = utc_now) -> None:
        """Open (and if needed create or upgrade) the queue at `path`; `clock` gives times (tests pin it)."""
        self.path = Path(path)
        self._clock = clock
        initialise(self.path)

    def _now(self) -> str:
        return self._clock().astimezone(UTC).isoformat(timespec="seconds")

    def _reading(self) -> contextlib.AbstractContextManager[sqlite3.Connection]:
        return opened(self.path)

    @contextmanager
    def _writing(self) -> Iterator[sqlite3.Connection]:
        with opened(self.path) as con, transaction(con):
            yield con


def item_row(con: sqlite3.Connection, item_id: str) -> sqlite3.Row:
    """The `items` row of `item_id`.

    Raises:
        QueueError: no such item.
    """
    row = con.execute("SELECT * FROM items WHERE item_id = ?", (item_id,)).fetchone()
    if row is None:
        raise QueueError("unknown_item", f"no item {item_id!r} in the queue")
    return row


def update_item(con: sqlite3.Connection, row: sqlite3.Row, at: str, **changes: object) -> sqlite3.Row:
    """Compare-and-set: apply `changes`, bump `rev`, and fail loudly if someone else bumped it first."""
    cols = "".join(f"{k} = ?, " for k in changes)
    cur = con.execute(
        f"UPDATE items SET {cols}rev = rev + 1, updated_at = ? WHERE item_id = ? AND rev = ?",
        (*changes.values(), at, row["item_id"], row["rev"]),
    )
    if cur.rowcount != 1:  # cannot happen under BEGIN IMMEDIATE; kept as the lock's last line of defence
        raise QueueError("concurrent_write", f"item {row['item_id']} changed under a write transaction")
    return item_row(con, row["item_id"])
