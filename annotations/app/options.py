"""How a review app instance behaves: roles, hosts, lease and undo times, limits, guidelines, gates.

One frozen object built at the edge (`flows/review.py` from the config and the environment) and
passed to `create_app`; the routes read it, nothing else configures them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from annotations.queue import LEASE_SECONDS, UNDO_SECONDS
from schemas import Problem, Question

#: Longest note (characters) a decision may carry: notes stay forever in the append-only log.
NOTE_LIMIT = 10_000
#: Largest page number, limit and offset the list and API accept (beyond: 400, never a SQL overflow).
MAX_PAGE = 100_000
MAX_LIMIT = 1_000
MAX_OFFSET = 100_000_000


@dataclass(frozen=True)
class AppOptions:
    """Review app settings (defaults suit one person on loopback)."""

    adjudicators: frozenset[str] = frozenset()
    """Reviewer names with the adjudicator role (beside roles given in the token config)."""
    allowed_hosts: tuple[str, ...] = ()
    """Host names accepted beside loopback when tokens are configured (`review.example.org`, `*.corp`)."""
    lease_seconds: int = LEASE_SECONDS
    """How long an item handed out by `next` (or opened) stays reserved for its reviewer."""
    undo_seconds: int = UNDO_SECONDS
    """How long after a decision its reviewer may undo it."""
    note_limit: int = NOTE_LIMIT
    """Longest note accepted by the form and the API."""
    page_size: int = 50
    """Items per list page."""
    guidelines: Mapping[str, str] = field(default_factory=dict)
    """Task -> reviewer guidelines (markdown) shown on its item pages."""
    gates: Callable[[Question], Sequence[Problem]] | None = None
    """The build's per-item quality gates; their warnings are shown on the item page."""
