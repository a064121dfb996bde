"""What the review queue hands out: item rows, full item views, reviews, log entries, and its errors.

Plain frozen dataclasses read from SQLite rows, so the app, the Label Studio interchange and the
agreement code share one vocabulary without touching SQL. `Conflict` is the optimistic-lock failure
a reviewer sees when the item changed while they had it open; `QueueError` is any other refusal.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

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
    """The decision was made on a page that is out of date: it was NOT saved (no lost update).

    Only two things make a page out of date (another reviewer's review never does): the item's content
    changed (an edit or a rebuild stored a new version: `kind="content"`), or the same reviewer decided
    this item again since loading the page, e.g. in another tab (`kind="own"`). The message never names
    another reviewer (blind review).
    """

    def __init__(self, item_id: str, kind: str, at: str, content_hash: str, own_rev: int) -> None:
        self.item_id, self.kind, self.at = item_id, kind, at
        self.content_hash, self.own_rev = content_hash, own_rev
        if kind == "content":
            text = (
                f"This item's content changed while you had it open (a new version was saved at {at}). "
                "Your decision was NOT saved: read the new version shown here and decide again."
            )
        else:
            text = (
                f"You already decided this item at {at} (in another tab or window) after opening this page. "
                "This decision was NOT saved; your earlier one stands. Decide again here to replace it."
            )
        super().__init__("conflict", text)


class Seen(NamedTuple):
    """What a reviewer's page was built on: the content hash shown and their own revision of the item.

    `own_rev` is the log sequence number of the reviewer's last decision on the item (0: none yet);
    `None` (imports) skips the own-revision check.
    """

    content_hash: str
    own_rev: int | None = None


#: Preset rejection reasons (stored as structured fields, counted in the report), with their labels.
REASONS: dict[str, str] = {
    "gold_wrong": "the gold is wrong",
    "distractor_correct": "a distractor is also correct",
    "context_insufficient": "the context is not enough to decide",
    "answer_leaked": "the answer is leaked in the context",
    "ambiguous": "the question is ambiguous",
    "other": "other (say why in the note)",
}

#: Log actions that are a reviewer's own decision on an item (they move the reviewer's own revision).
DECISION_ACTIONS = ("accept", "reject", "edit", "undo", "adjudicate")


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
    reasons: tuple[str, ...] = ()
    """Preset rejection reasons (keys of `REASONS`)."""
    role: str = "reviewer"
    """`reviewer`, or `adjudicator` for a ruling that settles a dispute."""
    seconds: float | None = None
    """Time from the reviewer's lease (opening the item) to this decision, when known."""


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


@dataclass(frozen=True)
class Progress:
    """One reviewer's share of the work under the current filters."""

    done: int
    """Active items whose current content this reviewer has reviewed."""
    assigned: int
    """Items leased to this reviewer now (opened or handed out by `next`, not yet decided)."""
    left: int
    """Pending items that still need a review this reviewer could give (assigned ones included)."""


@dataclass(frozen=True)
class LastDecision:
    """A reviewer's most recent decision (what `undo` and `previous item` refer to)."""

    item_id: str
    action: str
    at: str
    seq: int
