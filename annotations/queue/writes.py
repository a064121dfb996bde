"""Changing the review queue: enqueue a build, decide, edit, undo, adjudicate.

Guarantees: each call is one `BEGIN IMMEDIATE` transaction (item, version, review, lease and log lines
land together or not at all); a decision is checked against what the reviewer's page showed
(`policy.check_seen`); an edit stores a new version and keeps every earlier one; the log is
append-only and every write adds a line to it; a rebuild keeps the verdict of an item whose built
content hash is unchanged and re-queues (earlier reviews no longer counted) an item whose hash changed.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from datetime import datetime

from annotations.queue.policy import check_seen, end_lease, reasons_json, refresh
from annotations.queue.queries import question_of, to_item_row
from annotations.queue.store import QueueBase, item_row, log_action, update_item
from annotations.records import (
    DECISION_ACTIONS,
    DECISION_ALIASES,
    REASONS,
    EnqueueResult,
    ItemRow,
    QueueError,
    Seen,
)
from schemas import Question, content_hash

#: How long after a decision its reviewer may still undo it.
UNDO_SECONDS = 10 * 60
_IDENTITY = ("item_id", "scenario", "task", "form", "trajectory_id", "step_index")


def _add_version(
    con: sqlite3.Connection, q: Question, *, version: int, h: str, kind: str, author: str, at: str, note: str
) -> None:
    con.execute(
        "INSERT INTO versions (item_id, version, content_hash, kind, author, at, note, question)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (q.item_id, version, h, kind, author, at, note, q.model_dump_json()),
    )


def _next_version(con: sqlite3.Connection, item_id: str) -> int:
    return (
        int(con.execute("SELECT MAX(version) FROM versions WHERE item_id = ?", (item_id,)).fetchone()[0]) + 1
    )


def _checked_reasons(reasons: Iterable[str]) -> tuple[str, ...]:
    out = tuple(sorted({r.strip() for r in reasons if r.strip()}))
    unknown = [r for r in out if r not in REASONS]
    if unknown:
        raise QueueError("bad_reason", f"unknown rejection reason(s) {unknown}; use {', '.join(REASONS)}")
    return out


class Writes(QueueBase):
    """Every change to the queue."""

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
        counts = {"new": 0, "unchanged": 0, "requeued": 0, "restored": 0, "retired": 0}
        task_list = list(tasks) if tasks is not None else None
        scope: set[tuple[str, str]] = set()
        ids: set[str] = set()
        with self._writing() as con:
            now = self._now()
            for q in questions:  # read once, as they come (a build's are read from disk)
                counts[self._enqueue_one(con, q, batch, origin, now)] += 1
                ids.add(q.item_id)
                scope.update((q.scenario, t) for t in (task_list if task_list is not None else [q.task]))
            for scenario, task in sorted(scope):
                for row in con.execute(
                    "SELECT * FROM items WHERE scenario = ? AND task = ? AND retired = 0", (scenario, task)
                ).fetchall():
                    if row["item_id"] not in ids:
                        new = update_item(con, row, now, retired=1)
                        self._log_item(con, new, "retire", origin, f"not in batch {batch}", now)
                        counts["retired"] += 1
        return EnqueueResult(**counts)

    def _enqueue_one(self, con: sqlite3.Connection, q: Question, batch: str, origin: str, now: str) -> str:
        h = content_hash(q)
        row = con.execute("SELECT * FROM items WHERE item_id = ?", (q.item_id,)).fetchone()
        if row is None:
            con.execute(
                "INSERT INTO items (item_id, scenario, task, source, instance_id, built_hash, content_hash,"
                " version, rev, status, batch, enqueued_at, updated_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, 0, 0, 'pending', ?, ?, ?)",
                (q.item_id, q.scenario, q.task, q.provenance.source_format, q.provenance.instance_id, h, h)
                + (batch, now, now),
            )
            _add_version(con, q, version=0, h=h, kind="build", author=origin, at=now, note=batch)
            self._log_item(con, item_row(con, q.item_id), "enqueue", origin, batch, now)
            return "new"
        if row["built_hash"] == h:
            if not row["retired"]:
                con.execute("UPDATE items SET batch = ? WHERE item_id = ?", (batch, q.item_id))
                return "unchanged"
            new = update_item(con, row, now, retired=0, batch=batch)
            self._log_item(con, new, "restore", origin, batch, now)
            return "restored"
        version = _next_version(con, q.item_id)
        _add_version(con, q, version=version, h=h, kind="build", author=origin, at=now, note=batch)
        new = update_item(
            con,
            row,
            now,
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
        self._log_item(con, new, "requeue", origin, f"content changed {row['content_hash']} -> {h}", now)
        return "requeued"

    @staticmethod
    def _log_item(
        con: sqlite3.Connection, row: sqlite3.Row, action: str, who: str, note: str, at: str, origin: str = ""
    ) -> int:
        return log_action(
            con,
            at=at,
            item_id=row["item_id"],
            action=action,
            reviewer=who,
            note=note,
            content_hash=row["content_hash"],
            status=row["status"],
            rev=row["rev"],
            origin=origin or who,
        )

    def decide(
        self,
        item_id: str,
        reviewer: str,
        decision: str,
        *,
        seen: Seen | None,
        note: str = "",
        reasons: Iterable[str] = (),
        origin: str = "app",
        at: str | None = None,
    ) -> ItemRow:
        """Record `reviewer`'s accept or reject of the item's current content.

        Args:
            item_id: Item decided.
            reviewer: Who decides.
            decision: `accept`/`accepted` or `reject`/`rejected`.
            seen: What the reviewer's page showed (content hash and their own revision).
            note: Free-text note.
            reasons: Preset rejection reasons (keys of `REASONS`).
            origin: `app`, `api`, `labelstudio`...
            at: Decision time (ISO 8601); now when omitted.

        Raises:
            Conflict: the content changed, or the reviewer decided again, since `seen`.
            QueueError: unknown or retired item, unknown decision or reason.
        """
        return self._decide(item_id, reviewer, decision, seen, note, reasons, origin, at, "reviewer")

    def adjudicate(
        self,
        item_id: str,
        adjudicator: str,
        decision: str,
        *,
        seen: Seen | None,
        note: str = "",
        reasons: Iterable[str] = (),
    ) -> ItemRow:
        """An adjudicator's ruling on the current content: it decides the item whatever the reviews say."""
        return self._decide(
            item_id, adjudicator, decision, seen, note, reasons, "adjudication", None, "adjudicator"
        )

    def _decide(
        self,
        item_id: str,
        who: str,
        decision: str,
        seen: Seen | None,
        note: str,
        reasons: Iterable[str],
        origin: str,
        at: str | None,
        role: str,
    ) -> ItemRow:
        kind = DECISION_ALIASES.get(decision.strip().lower())
        if kind is None:
            raise QueueError("bad_decision", f"unknown decision {decision!r}; use accept or reject")
        tags = _checked_reasons(reasons)
        with self._writing() as con:
            row = item_row(con, item_id)
            check_seen(con, row, who, seen)
            action = "adjudicate" if role == "adjudicator" else ("accept" if kind == "accepted" else "reject")
            return self._review(con, row, who, kind, note, tags, origin, at or self._now(), action, role)

    def edit(
        self,
        item_id: str,
        reviewer: str,
        question: Question,
        *,
        seen: Seen | None,
        note: str = "",
        origin: str = "app",
        at: str | None = None,
    ) -> ItemRow:
        """Store `question` as a new version written by `reviewer` (who thereby approves it).

        The original and every earlier version stay in `versions`; reviews of earlier content stay in the
        log but no longer count. Raises `Conflict` like `decide`, and `QueueError` for an edit that changes
        the item's identity or nothing at all.
        """
        with self._writing() as con:
            row = item_row(con, item_id)
            check_seen(con, row, reviewer, seen)
            current = question_of(con, item_id, row["version"])
            if any(getattr(question, f) != getattr(current, f) for f in _IDENTITY):
                raise QueueError(
                    "edit_changes_identity", f"an edit may change content only, not {', '.join(_IDENTITY)}"
                )
            h = content_hash(question)
            if h == row["content_hash"]:
                raise QueueError(
                    "edit_changes_nothing", "the edited item is identical to the current version"
                )
            when = at or self._now()
            version = _next_version(con, item_id)
            _add_version(
                con, question, version=version, h=h, kind="edit", author=reviewer, at=when, note=note
            )
            row = update_item(con, row, when, content_hash=h, version=version)
            return self._review(con, row, reviewer, "edited", note, (), origin, when, "edit")

    def undo(self, reviewer: str, *, window_seconds: int = UNDO_SECONDS) -> ItemRow:
        """Withdraw the reviewer's last accept or reject if it is recent and its item unchanged since.

        Raises:
            QueueError: nothing to undo (no decision, already undone, too old, an edit, content changed).
        """
        marks = ", ".join("?" for _ in DECISION_ACTIONS)
        with self._writing() as con:
            last = con.execute(
                f"SELECT * FROM log WHERE reviewer = ? AND action IN ({marks}) ORDER BY seq DESC LIMIT 1",
                (reviewer, *DECISION_ACTIONS),
            ).fetchone()
            if last is None or last["action"] not in ("accept", "reject"):
                what = (
                    "an edit (edit the item again instead)" if last and last["action"] == "edit" else "none"
                )
                raise QueueError("nothing_to_undo", f"no decision of yours to undo (last one: {what})")
            now = self._now()
            age = (datetime.fromisoformat(now) - datetime.fromisoformat(last["at"])).total_seconds()
            if age > window_seconds:
                raise QueueError(
                    "undo_too_late",
                    f"your last decision is {int(age)} s old; undo works for {window_seconds} s",
                )
            row = item_row(con, last["item_id"])
            if row["content_hash"] != last["content_hash"]:
                raise QueueError(
                    "undo_content_changed", "the item changed since your decision; decide it again"
                )
            con.execute(
                "DELETE FROM reviews WHERE item_id = ? AND content_hash = ? AND reviewer = ?",
                (row["item_id"], row["content_hash"], reviewer),
            )
            new = refresh(con, row, now)
            if new["rev"] == row["rev"]:
                new = update_item(con, row, now)
            self._log_item(
                con, new, "undo", reviewer, f"withdrew {last['action']} #{last['seq']}", now, "app"
            )
            return to_item_row(con, new)

    def _review(
        self,
        con: sqlite3.Connection,
        row: sqlite3.Row,
        reviewer: str,
        kind: str,
        note: str,
        reasons: tuple[str, ...],
        origin: str,
        at: str,
        action: str,
        role: str = "reviewer",
    ) -> ItemRow:
        seconds = end_lease(con, row["item_id"], reviewer, self._now())
        con.execute(
            "INSERT OR REPLACE INTO reviews (item_id, content_hash, reviewer, decision, note, at, origin,"
            " reasons, role, seconds) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (row["item_id"], row["content_hash"], reviewer, kind, note, at, origin, reasons_json(reasons))
            + (role, seconds),
        )
        new = refresh(con, row, at)
        if new["rev"] == row["rev"]:  # a review always moves the item's revision (and `updated_at`)
            new = update_item(con, row, at)
        text = note if not reasons else f"[{', '.join(reasons)}] {note}".strip()
        self._log_item(con, new, action, reviewer, text, at, origin)
        return to_item_row(con, new)
