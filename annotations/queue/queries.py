"""Reading the review queue: items and their full views, filters, search, sort, the log and verdicts.

Guarantees: every read uses its own short connection (WAL: reads never wait for the writer); list
filters, search and sort reach SQL only as bound parameters or fixed fragments (a query string never
becomes SQL); pages are stable (every sort ends on `item_id`).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from datetime import datetime

from annotations.queue.policy import own_rev, required
from annotations.queue.store import QueueBase, item_row
from annotations.records import (
    DECISION_ACTIONS,
    ItemRow,
    ItemView,
    LastDecision,
    LogEntry,
    Review,
    VersionRow,
)
from schemas import Item, Question, Verdict

#: List orders a reviewer may pick (fixed SQL fragments; each ends on item_id for stable pages).
SORTS: dict[str, str] = {
    "task": "task, item_id",
    "instance": "instance_id, task, item_id",
    "status": "status, task, item_id",
    "reviews": "(SELECT COUNT(*) FROM reviews r WHERE r.item_id = items.item_id"
    " AND r.content_hash = items.content_hash) DESC, task, item_id",
    "recent": "updated_at DESC, item_id",
}


def filter_sql(
    task: str | None = None,
    status: str | None = None,
    source: str | None = None,
    scenario: str | None = None,
    unreviewed_by: str | None = None,
    search: str | None = None,
    include_retired: bool = False,
) -> tuple[str, dict[str, object]]:
    """The WHERE clause (named parameters) of the list filters over table `items`."""
    where, args = ["1 = 1" if include_retired else "items.retired = 0"], {}
    for col, value in (("task", task), ("status", status), ("source", source), ("scenario", scenario)):
        if value:
            where.append(f"items.{col} = :f_{col}")
            args[f"f_{col}"] = value
    if unreviewed_by:
        where.append(
            "NOT EXISTS (SELECT 1 FROM reviews r WHERE r.item_id = items.item_id"
            " AND r.content_hash = items.content_hash AND r.reviewer = :f_unreviewed)"
        )
        args["f_unreviewed"] = unreviewed_by
    if search and search.strip():
        escaped = search.strip().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        where.append(
            "(items.item_id LIKE :f_search ESCAPE '\\' OR items.instance_id LIKE :f_search ESCAPE '\\'"
            " OR EXISTS (SELECT 1 FROM versions v WHERE v.item_id = items.item_id"
            " AND v.version = items.version AND v.question LIKE :f_search ESCAPE '\\'))"
        )
        args["f_search"] = f"%{escaped}%"
    return " AND ".join(where), args


#: `items` columns copied as they are into an `ItemRow`.
_ROW_COLUMNS = (
    "item_id", "scenario", "task", "source", "instance_id", "status", "content_hash", "built_hash",
    "version", "rev", "reviewer", "decided_at", "note",
)  # fmt: skip


def to_item_row(con: sqlite3.Connection, r: sqlite3.Row) -> ItemRow:
    """An `ItemRow` from an `items` row (with its review count and the policy)."""
    n = con.execute(
        "SELECT COUNT(*) FROM reviews WHERE item_id = ? AND content_hash = ? AND role = 'reviewer'",
        (r["item_id"], r["content_hash"]),
    ).fetchone()[0]
    return ItemRow(
        **{k: r[k] for k in _ROW_COLUMNS},
        retired=bool(r["retired"]),
        reviews=int(n),
        required=required(con),
    )


def question_of(con: sqlite3.Connection, item_id: str, version: int) -> Question:
    """The stored question of one version."""
    text = con.execute(
        "SELECT question FROM versions WHERE item_id = ? AND version = ?", (item_id, version)
    ).fetchone()
    return Question.model_validate_json(text[0])


def reviews_where(con: sqlite3.Connection, cond: str, args: tuple[object, ...] = ()) -> Iterator[Review]:
    """Reviews joined with their item's task, filtered by `cond` (a fixed fragment with `?` parameters)."""
    sql = (
        "SELECT r.item_id, i.task, r.content_hash, r.reviewer, r.decision, r.note, r.at, r.origin,"
        " r.reasons, r.role, r.seconds"
        f" FROM reviews r JOIN items i ON i.item_id = r.item_id WHERE {cond} ORDER BY r.item_id, r.reviewer"
    )
    for r in con.execute(sql, args):
        yield Review(
            *r[:8], reasons=tuple(json.loads(r["reasons"] or "[]")), role=r["role"], seconds=r["seconds"]
        )


class Queries(QueueBase):
    """Read access to the queue."""

    def get(self, item_id: str) -> ItemView:
        """The full item: row, current question, current reviews, versions and history."""
        with self._reading() as con:
            row = item_row(con, item_id)
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
                reviews_where(con, "r.item_id = ? AND r.content_hash = ?", (item_id, row["content_hash"]))
            )
            log = tuple(self._log_rows(con, item_id))
            return ItemView(to_item_row(con, row), question, reviews, versions, log)

    def question_at(self, item_id: str, content_hash_: str) -> Question | None:
        """The stored version of an item with this content hash (any version, current or not)."""
        with self._reading() as con:
            row = con.execute(
                "SELECT question FROM versions WHERE item_id = ? AND content_hash = ?"
                " ORDER BY version DESC LIMIT 1",
                (item_id, content_hash_),
            ).fetchone()
        return None if row is None else Question.model_validate_json(row[0])

    def items(
        self, *, limit: int = 100, offset: int = 0, sort: str = "task", **filters: str | bool | None
    ) -> list[ItemRow]:
        """Items matching the filters (see `filter_sql`), in a `SORTS` order (stable pages)."""
        where, args = filter_sql(**filters)  # type: ignore[arg-type]
        order = SORTS.get(sort, SORTS["task"])
        with self._reading() as con:
            rows = con.execute(
                f"SELECT * FROM items WHERE {where} ORDER BY {order} LIMIT :limit OFFSET :offset",
                {**args, "limit": limit, "offset": offset},
            ).fetchall()
            return [to_item_row(con, r) for r in rows]

    def count(self, **filters: str | bool | None) -> int:
        """How many items match the same filters as `items`."""
        where, args = filter_sql(**filters)  # type: ignore[arg-type]
        with self._reading() as con:
            return int(con.execute(f"SELECT COUNT(*) FROM items WHERE {where}", args).fetchone()[0])

    def facets(self) -> dict[str, dict[str, int]]:
        """Counts of active items per task, status, source and scenario (for filters and summaries)."""
        out: dict[str, dict[str, int]] = {}
        with self._reading() as con:
            for col in ("task", "status", "source", "scenario"):
                out[col] = {
                    r[0]: r[1]
                    for r in con.execute(
                        f"SELECT {col}, COUNT(*) FROM items WHERE retired = 0 GROUP BY {col} ORDER BY {col}"
                    )
                }
        return out

    def reviews(self, task: str | None = None) -> list[Review]:
        """Reviews of every active item's current content (the input of agreement and statistics)."""
        with self._reading() as con:
            cond = "i.retired = 0 AND r.content_hash = i.content_hash" + (" AND i.task = ?" if task else "")
            return list(reviews_where(con, cond, (task,) if task else ()))

    def decisions_of(self, reviewer: str, item_ids: list[str]) -> dict[str, str]:
        """The reviewer's decision on the current content of each of these items (absent: not reviewed)."""
        if not item_ids:
            return {}
        marks = ", ".join("?" for _ in item_ids)
        with self._reading() as con:
            rows = con.execute(
                "SELECT r.item_id, r.decision FROM reviews r JOIN items i ON i.item_id = r.item_id"
                f" AND i.content_hash = r.content_hash WHERE r.reviewer = ? AND r.item_id IN ({marks})",
                (reviewer, *item_ids),
            ).fetchall()
        return {r[0]: r[1] for r in rows}

    def disputed(self) -> list[ItemRow]:
        """Active pending items with all the reviews they need and no majority (they wait for a ruling)."""
        with self._reading() as con:
            need = required(con)
            rows = con.execute(
                "SELECT * FROM items WHERE retired = 0 AND status = 'pending' AND (SELECT COUNT(*) FROM reviews r"
                " WHERE r.item_id = items.item_id AND r.content_hash = items.content_hash AND r.role = 'reviewer')"
                " >= ? ORDER BY task, item_id",
                (need,),
            ).fetchall()
            return [to_item_row(con, r) for r in rows]

    def log(self, item_id: str | None = None) -> Iterator[LogEntry]:
        """The decision log (one item's, or all), oldest first."""
        with self._reading() as con:
            return iter(list(self._log_rows(con, item_id)))

    @staticmethod
    def _log_rows(con: sqlite3.Connection, item_id: str | None) -> Iterator[LogEntry]:
        sql = "SELECT * FROM log" + (" WHERE item_id = ?" if item_id else "") + " ORDER BY seq"
        for r in con.execute(sql, (item_id,) if item_id else ()).fetchall():
            yield LogEntry(**dict(r))

    def last_decisions(self, reviewer: str, limit: int = 2) -> list[LastDecision]:
        """The reviewer's most recent decisions, newest first (for `previous item` and `undo`)."""
        marks = ", ".join("?" for _ in DECISION_ACTIONS)
        with self._reading() as con:
            rows = con.execute(
                f"SELECT item_id, action, at, seq FROM log WHERE reviewer = ? AND action IN ({marks})"
                " ORDER BY seq DESC LIMIT ?",
                (reviewer, *DECISION_ACTIONS, limit),
            ).fetchall()
        return [LastDecision(r["item_id"], r["action"], r["at"], r["seq"]) for r in rows]

    def own_rev(self, item_id: str, reviewer: str) -> int:
        """The reviewer's own revision of the item (see `policy.own_rev`)."""
        with self._reading() as con:
            return own_rev(con, item_id, reviewer)

    def verdicts(self) -> list[Verdict]:
        """The current verdict of every decided active item (what publish checks hashes against)."""
        with self._reading() as con:
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
        with self._reading() as con:
            rows = con.execute(
                "SELECT * FROM items WHERE retired = 0 AND status IN ('accepted', 'edited')"
                " ORDER BY task, item_id"
            ).fetchall()
            return [
                Item(
                    question=question_of(con, r["item_id"], r["version"]),
                    content_hash=r["content_hash"],
                    status=r["status"],
                )
                for r in rows
            ]
