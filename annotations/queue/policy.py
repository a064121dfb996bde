"""Review policy: how many reviews an item needs, who is sent which item, what a reviewer may see.

Guarantees:
- a review by reviewer X conflicts only with a change of the item's content or with X's own later
  decision (`check_seen`); another reviewer's review never makes X's page stale;
- `next_for` leases the item it hands out to the reviewer for `lease_seconds` (opening an item page
  does too); an item is handed to a second reviewer while leased only when it needs both; a lease
  expires by itself (it is a time, never a lock anyone must release);
- blind review: until X has reviewed an item's current content, `blind` strips every other reviewer's
  decision, note and name from what X is shown; adjudicators see everything.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import replace
from datetime import datetime, timedelta

from annotations.queue.store import QueueBase, item_row, log_action, update_item
from annotations.records import DECISION_ACTIONS, Conflict, ItemView, LogEntry, Progress, QueueError, Seen
from annotations.rules import resolve_status
from schemas import Status

#: Default lease of an item handed to a reviewer.
LEASE_SECONDS = 15 * 60
#: Stand-in shown instead of another reviewer's name before one has decided.
HIDDEN = "another reviewer"

#: Items a reviewer may still be given: pending, active, not reviewed by them (current content), and
#: either leased to them already or with fewer live leases by others than the reviews they still need.
_OPEN_FOR = """
items.retired = 0 AND items.status = 'pending'
AND NOT EXISTS (SELECT 1 FROM reviews r WHERE r.item_id = items.item_id
                AND r.content_hash = items.content_hash AND r.reviewer = :me)
AND (EXISTS (SELECT 1 FROM leases l WHERE l.item_id = items.item_id AND l.reviewer = :me AND l.until > :now)
     OR (SELECT COUNT(*) FROM leases l WHERE l.item_id = items.item_id AND l.reviewer != :me
         AND l.until > :now)
        < MAX(:required - (SELECT COUNT(*) FROM reviews r WHERE r.item_id = items.item_id
                           AND r.content_hash = items.content_hash AND r.role = 'reviewer'), 1))
"""
_MINE_FIRST = (
    "EXISTS (SELECT 1 FROM leases l WHERE l.item_id = items.item_id AND l.reviewer = :me AND l.until > :now)"
)


def required(con: sqlite3.Connection) -> int:
    """Reviews of its current content an item needs."""
    return int(con.execute("SELECT value FROM meta WHERE key = 'reviews_per_item'").fetchone()[0])


def own_rev(con: sqlite3.Connection, item_id: str, reviewer: str) -> int:
    """The sequence number of `reviewer`'s last decision on the item (0: none yet)."""
    marks = ", ".join("?" for _ in DECISION_ACTIONS)
    row = con.execute(
        f"SELECT MAX(seq) FROM log WHERE item_id = ? AND reviewer = ? AND action IN ({marks})",
        (item_id, reviewer, *DECISION_ACTIONS),
    ).fetchone()
    return int(row[0] or 0)


def check_seen(con: sqlite3.Connection, row: sqlite3.Row, reviewer: str, seen: Seen | None) -> None:
    """Refuse a decision made on an out-of-date page (see `Conflict`), or on a retired item.

    Raises:
        Conflict: the content changed since `seen`, or `reviewer` decided the item again since.
        QueueError: no `seen` given, or the item is retired.
    """
    if seen is None:
        raise QueueError("no_version", "a decision must name the content hash it was made on")
    mine = own_rev(con, row["item_id"], reviewer)
    if seen.content_hash != row["content_hash"]:
        changed = con.execute(
            "SELECT MAX(at) FROM versions WHERE item_id = ? AND version = ?", (row["item_id"], row["version"])
        ).fetchone()[0]
        raise Conflict(row["item_id"], "content", changed or row["updated_at"], row["content_hash"], mine)
    if seen.own_rev is not None and seen.own_rev != mine:
        at = con.execute("SELECT at FROM log WHERE seq = ?", (mine,)).fetchone()
        raise Conflict(row["item_id"], "own", at[0] if at else "", row["content_hash"], mine)
    if row["retired"]:
        raise QueueError(
            "retired_item", f"item {row['item_id']} is no longer built (retired); it cannot be decided"
        )


def resolve(con: sqlite3.Connection, item_id: str, h: str, needed: int) -> Status:
    """The status of content `h` from its reviews (an adjudicator's ruling decides outright)."""
    rows = con.execute(
        "SELECT decision, role FROM reviews WHERE item_id = ? AND content_hash = ? ORDER BY at", (item_id, h)
    ).fetchall()
    rulings = [r["decision"] for r in rows if r["role"] == "adjudicator"]
    decisions = [r["decision"] for r in rows if r["role"] != "adjudicator"]
    return resolve_status(decisions, needed, rulings[-1] if rulings else None)


def refresh(con: sqlite3.Connection, row: sqlite3.Row, at: str) -> sqlite3.Row:
    """Recompute status and last-decision fields from the current content's reviews; store any change."""
    h = row["content_hash"]
    status = resolve(con, row["item_id"], h, required(con))
    last = con.execute(
        "SELECT reviewer, at, note FROM reviews WHERE item_id = ? AND content_hash = ?"
        " ORDER BY role = 'adjudicator', at DESC LIMIT 1",
        (row["item_id"], h),
    ).fetchone()
    fields = {
        "status": status,
        "reviewer": last["reviewer"] if last else None,
        "decided_at": last["at"] if last else None,
        "note": last["note"] if last else "",
        "seen_hash": h if last else None,
    }
    if all(row[k] == v for k, v in fields.items()):
        return row
    return update_item(con, row, at, **fields)


def take_lease(con: sqlite3.Connection, item_id: str, reviewer: str, now: str, seconds: int) -> None:
    """Lease (or extend the lease of) the item to `reviewer`; `since` stays when the lease is still live."""
    until = (datetime.fromisoformat(now) + timedelta(seconds=seconds)).isoformat(timespec="seconds")
    con.execute(
        "INSERT INTO leases (item_id, reviewer, since, until) VALUES (?, ?, ?, ?)"
        " ON CONFLICT (item_id, reviewer) DO UPDATE SET"
        " since = CASE WHEN leases.until > excluded.since THEN leases.since ELSE excluded.since END,"
        " until = excluded.until",
        (item_id, reviewer, now, until),
    )


def end_lease(con: sqlite3.Connection, item_id: str, reviewer: str, now: str) -> float | None:
    """Drop the reviewer's lease on the item; returns the seconds since it began (None: no live lease)."""
    row = con.execute(
        "SELECT since, until FROM leases WHERE item_id = ? AND reviewer = ?", (item_id, reviewer)
    ).fetchone()
    con.execute("DELETE FROM leases WHERE item_id = ? AND reviewer = ?", (item_id, reviewer))
    if row is None or row["until"] <= now:
        return None
    return (datetime.fromisoformat(now) - datetime.fromisoformat(row["since"])).total_seconds()


def revealed(view: ItemView, viewer: str, adjudicator: bool = False) -> bool:
    """Whether `viewer` may see other reviewers' decisions on this item (decided it, or adjudicates)."""
    return adjudicator or view.review_by(viewer) is not None


def blind(view: ItemView, viewer: str, adjudicator: bool = False) -> ItemView:
    """`view` as `viewer` may see it: before they have decided, no other reviewer's decision, note or name."""
    if revealed(view, viewer, adjudicator):
        return view
    others = {e.reviewer for e in view.log if e.action in DECISION_ACTIONS} - {viewer}
    row = view.row
    if row.reviewer and row.reviewer != viewer:
        row = replace(row, reviewer=None, decided_at=None, note="")
    log = tuple(
        e if e.reviewer not in others else LogEntry(**{**e.__dict__, "reviewer": HIDDEN, "note": ""})
        for e in view.log
        if e.reviewer == viewer or e.action not in DECISION_ACTIONS or e.action == "edit"
    )
    versions = tuple(
        v if v.author not in others else replace(v, author=HIDDEN, note="") for v in view.versions
    )
    return ItemView(row, view.question, (), versions, log)


class Policy(QueueBase):
    """The queue's review policy and work assignment."""

    @property
    def reviews_per_item(self) -> int:
        """How many reviews of its current content an item needs."""
        with self._reading() as con:
            return required(con)

    def set_reviews_per_item(self, n: int, who: str = "config") -> int:
        """Change the policy and re-resolve every item's status; returns how many statuses changed."""
        if n < 1:
            raise QueueError("bad_policy", f"reviews per item must be at least 1, got {n}")
        changed = 0
        with self._writing() as con:
            con.execute("UPDATE meta SET value = ? WHERE key = 'reviews_per_item'", (str(n),))
            now = self._now()
            for row in con.execute("SELECT * FROM items").fetchall():
                new = refresh(con, row, now)
                if new["status"] != row["status"]:
                    changed += 1
                    log_action(
                        con,
                        at=now,
                        item_id=row["item_id"],
                        action="policy",
                        reviewer=who,
                        note=f"reviews_per_item={n}",
                        content_hash=row["content_hash"],
                        status=new["status"],
                        rev=new["rev"],
                        origin="config",
                    )
        return changed

    def next_for(
        self,
        reviewer: str,
        *,
        lease_seconds: int = LEASE_SECONDS,
        after: str | None = None,
        **filters: str | None,
    ) -> str | None:
        """Lease and return the next item `reviewer` should review (their own live lease first), or None.

        `after` skips to items after that id in list order (the reviewer passed on it; its lease is dropped).
        """
        from annotations.queue.queries import filter_sql

        where, args = filter_sql(**filters)
        with self._writing() as con:
            now = self._now()
            params: dict[str, object] = {**args, "me": reviewer, "now": now, "required": required(con)}
            order = f"{_MINE_FIRST} DESC, task, item_id"
            if after:
                con.execute("DELETE FROM leases WHERE item_id = ? AND reviewer = ?", (after, reviewer))
                where += " AND (task, item_id) > (SELECT task, item_id FROM items WHERE item_id = :after)"
                params["after"] = after
                order = "task, item_id"
            row = con.execute(
                f"SELECT item_id FROM items WHERE {_OPEN_FOR} AND {where} ORDER BY {order} LIMIT 1", params
            ).fetchone()
            if row is None:
                return None
            take_lease(con, row["item_id"], reviewer, now, lease_seconds)
            return str(row["item_id"])

    def lease(self, item_id: str, reviewer: str, lease_seconds: int = LEASE_SECONDS) -> bool:
        """Lease an item the reviewer opened, if it still waits for their review; True when leased."""
        with self._writing() as con:
            row = item_row(con, item_id)
            done = con.execute(
                "SELECT 1 FROM reviews WHERE item_id = ? AND content_hash = ? AND reviewer = ?",
                (item_id, row["content_hash"], reviewer),
            ).fetchone()
            if row["retired"] or row["status"] != "pending" or done:
                return False
            take_lease(con, item_id, reviewer, self._now(), lease_seconds)
            return True

    def progress(self, reviewer: str, **filters: str | None) -> Progress:
        """Done / assigned / left for `reviewer` under the list filters."""
        from annotations.queue.queries import filter_sql

        where, args = filter_sql(**filters)
        with self._reading() as con:
            now = self._now()
            params: dict[str, object] = {**args, "me": reviewer, "now": now, "required": required(con)}
            done = con.execute(
                f"SELECT COUNT(*) FROM items WHERE {where} AND EXISTS (SELECT 1 FROM reviews r"
                " WHERE r.item_id = items.item_id AND r.content_hash = items.content_hash AND r.reviewer = :me)",
                params,
            ).fetchone()[0]
            assigned = con.execute(
                f"SELECT COUNT(*) FROM items WHERE {where} AND {_OPEN_FOR} AND {_MINE_FIRST}", params
            ).fetchone()[0]
            left = con.execute(
                f"SELECT COUNT(*) FROM items WHERE {where} AND {_OPEN_FOR}", params
            ).fetchone()[0]
        return Progress(int(done), int(assigned), int(left))


def reasons_json(reasons: tuple[str, ...] | list[str]) -> str:
    """The stored form of rejection reasons (sorted, unique)."""
    return json.dumps(sorted(set(reasons)))
