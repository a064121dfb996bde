"""The review queue's SQLite layer: schema, connections and write transactions.

Guarantees: the database runs in WAL mode (readers never block the one writer, and a crash leaves the
last committed state); every write happens inside `BEGIN IMMEDIATE ... COMMIT`, so a multi-row change
(item, version, review, log line) lands whole or not at all; the decision log refuses UPDATE and
DELETE through triggers, so it is append-only even for someone holding a raw connection.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

SCHEMA_VERSION = 1

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
  PRIMARY KEY (item_id, content_hash, reviewer)
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
        con.executescript(DDL)
        with transaction(con):
            con.execute(
                "INSERT OR IGNORE INTO meta (key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),)
            )
            con.execute("INSERT OR IGNORE INTO meta (key, value) VALUES ('reviews_per_item', '1')")
    finally:
        con.close()


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
