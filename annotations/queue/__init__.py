"""The review queue: candidates wait here for reviewers; every decision is kept.

`Queue` is one SQLite file seen through three parts: `writes` (enqueue, decide, edit, undo,
adjudicate), `queries` (items, views, search, log, verdicts) and `policy` (reviews per item, leases
and work assignment, what a conflict is, blind review), over `store` (schema, transactions, log).
"""

from annotations.queue.policy import LEASE_SECONDS, Policy, blind, revealed
from annotations.queue.queries import SORTS, Queries
from annotations.queue.writes import UNDO_SECONDS, Writes
from annotations.records import Seen


class Queue(Writes, Queries, Policy):
    """A review queue stored in one SQLite file (created on first use)."""

    def seen(self, item_id: str, reviewer: str) -> Seen:
        """What a page built now shows `reviewer`: the current content hash and their own revision."""
        view = self.get(item_id)
        return Seen(view.row.content_hash, self.own_rev(item_id, reviewer))


__all__ = ["LEASE_SECONDS", "SORTS", "UNDO_SECONDS", "Queue", "Seen", "blind", "revealed"]
