"""What the review queue hands out: item rows, full item views, reviews, log entries, and its errors.

Plain frozen dataclasses read from SQLite rows, so the app, the Label Studio interchange and the
agreement code share one vocabulary without touching SQL. `Conflict` is the optimistic-lock failure
a reviewer sees when the item changed while they had it open; `QueueError` is any other refusal.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from schemas import Question, Status

#: A reviewer's decision on one item version (`edited` = they wrote the version they approve).
Decision = str
DECISIONS: tuple[str, ...] = ("accepted", "rejected", "edited")
#: What a reviewer may type or an importer may send, mapped to a decision.
DECISION_ALIASES: dict[str, str] = {
    "accept": "accepted",
    "accepted": "accepted",
    "reject": "rejected",
    "rejected": "rejected",
}


class QueueError(ValueError):
    """A refused queue operation (unknown item, retired item, empty edit...); `reason` is a snake_case tag."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class Conflict(QueueError):
    """The item changed since the reviewer loaded it: their decision was not saved (no lost update)."""

    def __init__(
        self, item_id: str, expected_rev: int | None, current_rev: int, by: str, action: str, at: str
    ) -> None:
        self.item_id, self.expected_rev, self.current_rev = item_id, expected_rev, current_rev
        self.by, self.action, self.at = by, action, at
        seen = f"revision {expected_rev}" if expected_rev is not None else "the exported content"
        super().__init__(
            "conflict",
            f"This item changed while you had it open: {by or 'someone'} ({action}) at {at} moved it from "
            f"{seen} to revision {current_rev}. Your decision was NOT saved; reload the item and decide again.",
        )


@dataclass(frozen=True)
class ItemRow:
    """One queue row: identity, filters and the current review state (no question body)."""

    item_id: str
    scenario: str
    task: str
    source: str
    instance_id: str
    status: Status
    content_hash: str
    built_hash: str
    version: int
    rev: int
    reviewer: str | None
    decided_at: str | None
    note: str
    retired: bool
    reviews: int
    """Reviews on the current content hash."""
    required: int
    """Reviews this item needs (the queue's policy)."""

    @property
    def disputed(self) -> bool:
        """Enough reviews were given, but they tie: the item waits for one more."""
        return self.status == "pending" and self.reviews >= self.required


@dataclass(frozen=True)
class Review:
    """One reviewer's decision on one content hash of one item."""

    item_id: str
    task: str
    content_hash: str
    reviewer: str
    decision: Decision
    note: str
    at: str
    origin: str


@dataclass(frozen=True)
class VersionRow:
    """One stored version of an item (0 = first build; builds and edits add versions, none is dropped)."""

    version: int
    content_hash: str
    kind: str
    author: str
    at: str
    note: str
    question: Question


@dataclass(frozen=True)
class LogEntry:
    """One line of the append-only decision log."""

    seq: int
    at: str
    item_id: str
    action: str
    reviewer: str
    note: str
    content_hash: str
    status: str
    rev: int
    origin: str


@dataclass(frozen=True)
class ItemView:
    """Everything the item page shows: the row, the current question, reviews, versions, history."""

    row: ItemRow
    question: Question
    reviews: tuple[Review, ...]
    versions: tuple[VersionRow, ...] = field(default_factory=tuple)
    log: tuple[LogEntry, ...] = field(default_factory=tuple)

    def review_by(self, reviewer: str) -> Review | None:
        """This reviewer's review of the current content, if any."""
        return next((r for r in self.reviews if r.reviewer == reviewer), None)


@dataclass(frozen=True)
class EnqueueResult:
    """What an enqueue did: new items, unchanged ones (verdict kept), re-queued and retired ones."""

    new: int = 0
    unchanged: int = 0
    requeued: int = 0
    restored: int = 0
    retired: int = 0

    def as_dict(self) -> dict[str, int]:
        """Counts for the build report."""
        return {
            "new": self.new,
            "unchanged": self.unchanged,
            "requeued": self.requeued,
            "restored": self.restored,
            "retired": self.retired,
        }
