"""The review queue: candidates wait here for reviewers; every decision is kept.

Items are keyed by `item_id` and carry the `content_hash` of what a reviewer verifies. Guarantees:
- every operation is one SQLite transaction (see `annotations.store`), so a crash loses nothing half-done;
- a decision names the item revision the reviewer saw; if the item changed meanwhile it is refused with
  `Conflict` (optimistic locking: two reviewers deciding at once never lose an update);
- an edit stores a new version and keeps every earlier one; the decision log is append-only;
- a rebuild keeps the verdict of an item whose built content hash is unchanged and re-queues (status
  `pending`, earlier reviews no longer counted) an item whose hash changed;
- an item needs `reviews_per_item` reviews of its current content; the majority decides, a tie waits.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path

from annotations import store
from annotations.records import (
    DECISION_ALIASES,
    Conflict,
    EnqueueResult,
    ItemRow,
    ItemView,
    LogEntry,
    QueueError,
    Review,
    VersionRow,
)
from annotations.rules import resolve_status
from schemas import Item, Question, Status, Verdict, content_hash

Clock = Callable[[], datetime]


def _utc_now() -> datetime:
    return datetime.now(UTC)


class Queue:
    """A review queue stored in one SQLite file (created on first use)."""

    def __init__(self, path: str | Path, *, clock: Clock = _utc_now) -> None:
        """Open (and if needed create) the queue at `path`; `clock` gives decision times (tests pin it)."""
        self.path = Path(path)
        self._clock = clock
        store.initialise(self.path)

    def _now(self) -> str:
        return self._clock().astimezone(UTC).isoformat(timespec="seconds")

    # -- policy ------------------------------------------------------------------------------------------

    @property
    def reviews_per_item(self) -> int:
        """How many reviews of its current content an item needs."""
        with store.opened(self.path) as con:
            return int(con.execute("SELECT value FROM meta WHERE key = 'reviews_per_item'").fetchone()[0])

    def set_reviews_per_item(self, n: int, who: str = "config") -> int:
        """Change the policy and re-resolve every item's status; returns how many statuses changed."""
        if n < 1:
            raise QueueError("bad_policy", f"reviews per item must be at least 1, got {n}")
        changed = 0
        with store.opened(self.path) as con, store.transaction(con):
            con.execute("UPDATE meta SET value = ? WHERE key = 'reviews_per_item'", (str(n),))
            for row in con.execute("SELECT * FROM items").fetchall():
                status = self._resolve(con, row["item_id"], row["content_hash"], n)
                if status != row["status"]:
                    changed += 1
                    self._set(con, row, status=status)
                    self._log(
                        con,
                        row["item_id"],
                        "policy",
                        who,
                        f"reviews_per_item={n}",
                        row["content_hash"],
                        status,
                        row["rev"] + 1,
                        "config",
                    )
        return changed

    # -- enqueue ------------------------------------------------------------------------------------------

    def enqueue(
        self,
        questions: Iterable[Question],
        batch: str,
        tasks: Iterable[str] | None = None,
        origin: str = "build",
    ) -> EnqueueResult:
        """Add or refresh built questions in one transaction.

        Unchanged built hash: the item (and any verdict or edit) is kept. Changed hash: a new version is
        stored and the item goes back to `pending`. Items of the same scenario and tasks (`tasks`, default:
        the tasks present) that this batch no longer contains are retired (hidden, verdict kept).
        """
        qs = list(questions)
        now, counts = self._now(), {"new": 0, "unchanged": 0, "requeued": 0, "restored": 0, "retired": 0}
        scope = {(q.scenario, t) for q in qs for t in (tasks if tasks is not None else [q.task])}
        with store.opened(self.path) as con, store.transaction(con):
            for q in qs:
                h = content_hash(q)
                row = con.execute("SELECT * FROM items WHERE item_id = ?", (q.item_id,)).fetchone()
                if row is None:
                    con.execute(
                        "INSERT INTO items (item_id, scenario, task, source, instance_id, built_hash, content_hash,"
                        " version, rev, status, batch, enqueued_at, updated_at)"
                        " VALUES (?, ?, ?, ?, ?, ?, ?, 0, 0, 'pending', ?, ?, ?)",
                        (
                            q.item_id,
                            q.scenario,
                            q.task,
                            q.provenance.source_format,
                            q.provenance.instance_id,
                            h,
                            h,
                            batch,
                            now,
                            now,
                        ),
                    )
                    self._add_version(con, q, 0, h, "build", origin, now, batch)
                    self._log(con, q.item_id, "enqueue", origin, batch, h, "pending", 0, origin)
                    counts["new"] += 1
                elif row["built_hash"] == h:
                    if row["retired"]:
                        self._set(con, row, retired=0, batch=batch)
                        self._log(
                            con,
                            q.item_id,
                            "restore",
                            origin,
                            batch,
                            row["content_hash"],
                            row["status"],
                            row["rev"] + 1,
                            origin,
                        )
                        counts["restored"] += 1
                    else:
                        con.execute("UPDATE items SET batch = ? WHERE item_id = ?", (batch, q.item_id))
                        counts["unchanged"] += 1
                else:
                    version = self._next_version(con, q.item_id)
                    self._add_version(con, q, version, h, "build", origin, now, batch)
                    self._set(
                        con,
                        row,
                        built_hash=h,
                        content_hash=h,
                        version=version,
                        status="pending",
                        reviewer=None,
                        decided_at=None,
                        note="",
                        seen_hash=None,
                        retired=0,
                        batch=batch,
                    )
                    self._log(
                        con,
                        q.item_id,
                        "requeue",
                        origin,
                        f"content changed {row['content_hash']} -> {h}",
                        h,
                        "pending",
                        row["rev"] + 1,
                        origin,
                    )
                    counts["requeued"] += 1
            ids = {q.item_id for q in qs}
            for scenario, task in sorted(scope):
                for row in con.execute(
                    "SELECT * FROM items WHERE scenario = ? AND task = ? AND retired = 0", (scenario, task)
                ).fetchall():
                    if row["item_id"] not in ids:
                        self._set(con, row, retired=1)
                        self._log(
                            con,
                            row["item_id"],
                            "retire",
                            origin,
                            f"not in batch {batch}",
                            row["content_hash"],
                            row["status"],
                            row["rev"] + 1,
                            origin,
                        )
                        counts["retired"] += 1
        return EnqueueResult(**counts)

    # -- decisions ----------------------------------------------------------------------------------------

    def decide(
        self,
        item_id: str,
        reviewer: str,
        decision: str,
        *,
        expected_rev: int | None,
        note: str = "",
        seen_hash: str | None = None,
        origin: str = "app",
        at: str | None = None,
    ) -> ItemRow:
        """Record `reviewer`'s accept or reject of the item's current content.

        Args:
            item_id: Item decided.
            reviewer: Who decides.
            decision: `accept`/`accepted` or `reject`/`rejected`.
            expected_rev: Revision the reviewer loaded; `None` only with `seen_hash` (imports).
            note: Free-text note.
            seen_hash: Content hash the reviewer saw; must equal the current one.
            origin: `app`, `api`, `labelstudio`...
            at: Decision time (ISO 8601); now when omitted.

        Raises:
            Conflict: the item changed since `expected_rev` / `seen_hash`.
            QueueError: unknown or retired item, unknown decision.
        """
        kind = DECISION_ALIASES.get(decision.strip().lower())
        if kind is None:
            raise QueueError("bad_decision", f"unknown decision {decision!r}; use accept or reject")
        with store.opened(self.path) as con, store.transaction(con):
            row = self._check(con, item_id, expected_rev, seen_hash)
            action = "accept" if kind == "accepted" else "reject"
            return self._review(
                con, row, reviewer, kind, note, origin, at or self._now(), row["content_hash"], action
            )

    def edit(
        self,
        item_id: str,
        reviewer: str,
        question: Question,
        *,
        expected_rev: int | None,
        note: str = "",
        seen_hash: str | None = None,
        origin: str = "app",
        at: str | None = None,
    ) -> ItemRow:
        """Store `question` as a new version written by `reviewer` (who thereby approves it).

        The original and every earlier version stay in `versions`; reviews of earlier content stay in the
        log but no longer count. Raises `Conflict` like `decide`, and `QueueError` for an edit that changes
        the item's identity or nothing at all.
        """
        with store.opened(self.path) as con, store.transaction(con):
            row = self._check(con, item_id, expected_rev, seen_hash)
            current = self._question(con, item_id, row["version"])
            same = ("item_id", "scenario", "task", "form", "trajectory_id", "step_index")
            if any(getattr(question, f) != getattr(current, f) for f in same):
                raise QueueError(
                    "edit_changes_identity", f"an edit may change content only, not {', '.join(same)}"
                )
            h = content_hash(question)
            if h == row["content_hash"]:
                raise QueueError(
                    "edit_changes_nothing", "the edited item is identical to the current version"
                )
            when = at or self._now()
            version = self._next_version(con, item_id)
            self._add_version(con, question, version, h, "edit", reviewer, when, note)
            row = self._set(con, row, content_hash=h, version=version)
            return self._review(con, row, reviewer, "edited", note, origin, when, h, "edit")

    # -- reads --------------------------------------------------------------------------------------------

    def get(self, item_id: str) -> ItemView:
        """The full item: row, current question, current reviews, versions and history."""
        with store.opened(self.path) as con:
            row = self._row(con, item_id)
            versions = tuple(
                VersionRow(
                    v["version"],
                    v["content_hash"],
                    v["kind"],
                    v["author"],
                    v["at"],
                    v["note"],
                    Question.model_validate_json(v["question"]),
                )
                for v in con.execute("SELECT * FROM versions WHERE item_id = ? ORDER BY version", (item_id,))
            )
            question = next(v.question for v in versions if v.version == row["version"])
            reviews = tuple(
                self._reviews(con, "r.item_id = ? AND r.content_hash = ?", (item_id, row["content_hash"]))
            )
            log = tuple(self.log(item_id, con=con))
            return ItemView(self._item_row(con, row), question, reviews, versions, log)

    def question_at(self, item_id: str, content_hash_: str) -> Question | None:
        """The stored version of an item with this content hash (any version, current or not)."""
        with store.opened(self.path) as con:
            row = con.execute(
                "SELECT question FROM versions WHERE item_id = ? AND content_hash = ?"
                " ORDER BY version DESC LIMIT 1",
                (item_id, content_hash_),
            ).fetchone()
        return None if row is None else Question.model_validate_json(row[0])

    def items(
        self,
        *,
        task: str | None = None,
        status: str | None = None,
        source: str | None = None,
        scenario: str | None = None,
        unreviewed_by: str | None = None,
        include_retired: bool = False,
        limit: int = 100,
        offset: int = 0,
    ) -> list[ItemRow]:
        """Items matching the filters, ordered by task then id (stable pages)."""
        where, args = self._filters(task, status, source, scenario, unreviewed_by, include_retired)
        with store.opened(self.path) as con:
            rows = con.execute(
                f"SELECT * FROM items WHERE {where} ORDER BY task, item_id LIMIT ? OFFSET ?",
                (*args, limit, offset),
            ).fetchall()
            return [self._item_row(con, r) for r in rows]

    def count(self, **filters: object) -> int:
        """How many items match the same filters as `items`."""
        where, args = self._filters(**filters)  # type: ignore[arg-type]
        with store.opened(self.path) as con:
            return int(con.execute(f"SELECT COUNT(*) FROM items WHERE {where}", args).fetchone()[0])

    def next_for(self, reviewer: str, **filters: object) -> str | None:
        """The next pending item `reviewer` has not reviewed yet (in list order), or None."""
        rows = self.items(status="pending", unreviewed_by=reviewer, limit=1, **filters)  # type: ignore[arg-type]
        return rows[0].item_id if rows else None

    def facets(self) -> dict[str, dict[str, int]]:
        """Counts of active items per task, status, source and scenario (for filters and summaries)."""
        out: dict[str, dict[str, int]] = {}
        with store.opened(self.path) as con:
            for col in ("task", "status", "source", "scenario"):
                out[col] = {
                    r[0]: r[1]
                    for r in con.execute(
                        f"SELECT {col}, COUNT(*) FROM items WHERE retired = 0 GROUP BY {col} ORDER BY {col}"
                    )
                }
        return out

    def reviews(self, task: str | None = None) -> list[Review]:
        """Reviews of every active item's current content (the input of agreement)."""
        with store.opened(self.path) as con:
            cond = "i.retired = 0 AND r.content_hash = i.content_hash" + (" AND i.task = ?" if task else "")
            return list(self._reviews(con, cond, (task,) if task else ()))

    def log(self, item_id: str | None = None, con: sqlite3.Connection | None = None) -> Iterator[LogEntry]:
        """The decision log (one item's, or all), oldest first."""
        sql = "SELECT * FROM log" + (" WHERE item_id = ?" if item_id else "") + " ORDER BY seq"
        args = (item_id,) if item_id else ()
        if con is not None:
            rows = con.execute(sql, args).fetchall()
        else:
            with store.opened(self.path) as own:
                rows = own.execute(sql, args).fetchall()
        return iter([LogEntry(**dict(r)) for r in rows])

    def verdicts(self) -> list[Verdict]:
        """The current verdict of every decided active item (what publish checks hashes against)."""
        with store.opened(self.path) as con:
            rows = con.execute(
                "SELECT * FROM items WHERE retired = 0 AND status != 'pending' ORDER BY item_id"
            )
            return [
                Verdict(
                    item_id=r["item_id"],
                    content_hash=r["content_hash"],
                    status=r["status"],
                    reviewer=r["reviewer"] or "",
                    at=datetime.fromisoformat(r["decided_at"]),
                    note=r["note"],
                )
                for r in rows
            ]

    def verified(self) -> list[Item]:
        """Accepted or edited active items with the content reviewers approved."""
        with store.opened(self.path) as con:
            rows = con.execute(
                "SELECT * FROM items WHERE retired = 0 AND status IN ('accepted', 'edited')"
                " ORDER BY task, item_id"
            ).fetchall()
            return [
                Item(
                    question=self._question(con, r["item_id"], r["version"]),
                    content_hash=r["content_hash"],
                    status=r["status"],
                )
                for r in rows
            ]

    # -- internals ----------------------------------------------------------------------------------------

    def _check(
        self, con: sqlite3.Connection, item_id: str, expected_rev: int | None, seen_hash: str | None
    ) -> sqlite3.Row:
        row = self._row(con, item_id)
        if expected_rev is None and seen_hash is None:
            raise QueueError("no_version", "a decision must name the revision or content hash it was made on")
        stale_rev = expected_rev is not None and row["rev"] != expected_rev
        if stale_rev or (seen_hash is not None and seen_hash != row["content_hash"]):
            last = con.execute(
                "SELECT * FROM log WHERE item_id = ? ORDER BY seq DESC LIMIT 1", (item_id,)
            ).fetchone()
            raise Conflict(item_id, expected_rev, row["rev"], last["reviewer"], last["action"], last["at"])
        if row["retired"]:
            raise QueueError(
                "retired_item", f"item {item_id} is no longer built (retired); it cannot be decided"
            )
        return row

    def _review(
        self,
        con: sqlite3.Connection,
        row: sqlite3.Row,
        reviewer: str,
        kind: str,
        note: str,
        origin: str,
        at: str,
        h: str,
        action: str,
    ) -> ItemRow:
        con.execute(
            "INSERT OR REPLACE INTO reviews (item_id, content_hash, reviewer, decision, note, at, origin)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (row["item_id"], h, reviewer, kind, note, at, origin),
        )
        status = self._resolve(con, row["item_id"], h, self._required(con))
        new = self._set(con, row, status=status, reviewer=reviewer, decided_at=at, note=note, seen_hash=h)
        self._log(con, row["item_id"], action, reviewer, note, h, status, new["rev"], origin)
        return self._item_row(con, new)

    def _resolve(self, con: sqlite3.Connection, item_id: str, h: str, required: int) -> Status:
        decisions = [
            r[0]
            for r in con.execute(
                "SELECT decision FROM reviews WHERE item_id = ? AND content_hash = ?", (item_id, h)
            )
        ]
        return resolve_status(decisions, required)

    def _set(self, con: sqlite3.Connection, row: sqlite3.Row, **changes: object) -> sqlite3.Row:
        """Compare-and-set: apply `changes`, bump `rev`, and fail loudly if someone else bumped it first."""
        cols = ", ".join(f"{k} = ?" for k in changes)
        cur = con.execute(
            f"UPDATE items SET {cols}, rev = rev + 1, updated_at = ? WHERE item_id = ? AND rev = ?",
            (*changes.values(), self._now(), row["item_id"], row["rev"]),
        )
        if cur.rowcount != 1:  # cannot happen under BEGIN IMMEDIATE; kept as the lock's last line of defence
            raise Conflict(row["item_id"], row["rev"], -1, "", "concurrent write", self._now())
        return self._row(con, row["item_id"])

    def _log(
        self,
        con: sqlite3.Connection,
        item_id: str,
        action: str,
        who: str,
        note: str,
        h: str,
        status: str,
        rev: int,
        origin: str,
    ) -> None:
        con.execute(
            "INSERT INTO log (at, item_id, action, reviewer, note, content_hash, status, rev, origin)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (self._now(), item_id, action, who, note, h, status, rev, origin),
        )

    @staticmethod
    def _add_version(
        con: sqlite3.Connection, q: Question, version: int, h: str, kind: str, author: str, at: str, note: str
    ) -> None:
        con.execute(
            "INSERT INTO versions (item_id, version, content_hash, kind, author, at, note, question)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (q.item_id, version, h, kind, author, at, note, q.model_dump_json()),
        )

    @staticmethod
    def _next_version(con: sqlite3.Connection, item_id: str) -> int:
        return (
            int(con.execute("SELECT MAX(version) FROM versions WHERE item_id = ?", (item_id,)).fetchone()[0])
            + 1
        )

    @staticmethod
    def _question(con: sqlite3.Connection, item_id: str, version: int) -> Question:
        text = con.execute(
            "SELECT question FROM versions WHERE item_id = ? AND version = ?", (item_id, version)
        ).fetchone()
        return Question.model_validate_json(text[0])

    @staticmethod
    def _required(con: sqlite3.Connection) -> int:
        return int(con.execute("SELECT value FROM meta WHERE key = 'reviews_per_item'").fetchone()[0])

    @staticmethod
    def _row(con: sqlite3.Connection, item_id: str) -> sqlite3.Row:
        row = con.execute("SELECT * FROM items WHERE item_id = ?", (item_id,)).fetchone()
        if row is None:
            raise QueueError("unknown_item", f"no item {item_id!r} in the queue")
        return row

    def _item_row(self, con: sqlite3.Connection, r: sqlite3.Row) -> ItemRow:
        n = con.execute(
            "SELECT COUNT(*) FROM reviews WHERE item_id = ? AND content_hash = ?",
            (r["item_id"], r["content_hash"]),
        ).fetchone()[0]
        return ItemRow(
            r["item_id"],
            r["scenario"],
            r["task"],
            r["source"],
            r["instance_id"],
            r["status"],
            r["content_hash"],
            r["built_hash"],
            r["version"],
            r["rev"],
            r["reviewer"],
            r["decided_at"],
            r["note"],
            bool(r["retired"]),
            int(n),
            self._required(con),
        )

    @staticmethod
    def _reviews(con: sqlite3.Connection, cond: str, args: tuple[object, ...]) -> Iterator[Review]:
        sql = (
            "SELECT r.item_id, i.task, r.content_hash, r.reviewer, r.decision, r.note, r.at, r.origin"
            f" FROM reviews r JOIN items i ON i.item_id = r.item_id WHERE {cond} ORDER BY r.item_id, r.reviewer"
        )
        for r in con.execute(sql, args):
            yield Review(*r)

    @staticmethod
    def _filters(
        task: str | None = None,
        status: str | None = None,
        source: str | None = None,
        scenario: str | None = None,
        unreviewed_by: str | None = None,
        include_retired: bool = False,
    ) -> tuple[str, tuple[object, ...]]:
        where, args = ["1 = 1" if include_retired else "retired = 0"], []
        for col, value in (("task", task), ("status", status), ("source", source), ("scenario", scenario)):
            if value:
                where.append(f"{col} = ?")
                args.append(value)
        if unreviewed_by:
            where.append(
                "NOT EXISTS (SELECT 1 FROM reviews r WHERE r.item_id = items.item_id"
                " AND r.content_hash = items.content_hash AND r.reviewer = ?)"
            )
            args.append(unreviewed_by)
        return " AND ".join(where), tuple(args)
