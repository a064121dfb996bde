"""Items: questions under human verification, and the verdicts reviewers give."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from schemas.base import Model
from schemas.questions import Question

Status = Literal["pending", "accepted", "rejected", "edited"]


class Verdict(Model):
    """One reviewer's decision on one item version."""

    item_id: str
    """Item decided."""
    content_hash: str
    """Hash of the content the reviewer saw."""
    status: Status
    """Decision."""
    reviewer: str
    """Who decided."""
    at: datetime
    """When."""
    note: str = ""
    """Free-text note (required for reject in the app)."""


class Item(Model):
    """A question with its review state."""

    question: Question
    """The question as built."""
    content_hash: str
    """h(rendered fields, choices, answer): a changed hash re-queues the item."""
    status: Status = "pending"
    """Review status."""
