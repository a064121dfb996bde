"""Human verification: the review queue (SQLite), agreement, Label Studio interchange, the review app.

The build never waits on people: it enqueues its candidates into a `Queue`; reviewers decide in the
web app (`annotations.app`) or in Label Studio over days; publish takes only what they accepted.
This package sits beside `extractors` and `generators` and imports only `schemas` from aptforge.
"""

from annotations.agreement import TaskAgreement, cohen_kappa, fleiss_kappa, krippendorff_alpha, task_agreement
from annotations.queue import Queue
from annotations.records import (
    REASONS,
    Conflict,
    EnqueueResult,
    ItemRow,
    ItemView,
    LogEntry,
    Progress,
    QueueError,
    Review,
    Seen,
)
from annotations.rules import resolve_status, revised

__all__ = [
    "REASONS",
    "Conflict",
    "EnqueueResult",
    "ItemRow",
    "ItemView",
    "LogEntry",
    "Progress",
    "Queue",
    "QueueError",
    "Review",
    "Seen",
    "TaskAgreement",
    "cohen_kappa",
    "fleiss_kappa",
    "krippendorff_alpha",
    "resolve_status",
    "revised",
    "task_agreement",
]
