"""Problems: the quarantine entries every stage yields instead of raising.

A stage never stops a run for one bad record: it yields a `Problem` naming where (file and
line, or an id), which stage, and a short snake_case reason; the flow writes it to
`quarantine.jsonl` and counts it in the report.
"""

from __future__ import annotations

from typing import Literal

from schemas.base import Model

Severity = Literal["error", "warning", "info"]


class Problem(Model):
    """One quarantined record or finding."""

    where: str
    """`file:line`, `file`, or an id (trajectory or item) locating the record."""
    stage: str
    """Pipeline stage that found it: read, label, keep, extract, generate, check, publish..."""
    reason: str
    """Short snake_case tag, counted as `<stage>.<reason>` in the report."""
    detail: str = ""
    """Human-readable explanation (what was expected, what was found)."""
    severity: Severity = "error"
    """`error` drops the record; `warning`/`info` keep it and only report."""

    def __str__(self) -> str:  # pragma: no cover - trivial
        return f"{self.where}: [{self.stage}] {self.reason}: {self.detail}"
