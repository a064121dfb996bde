"""What the review pages show, computed from the queue's records (no HTML here: templates escape it all).

Guarantees: list filters come only from a fixed set of names; flash messages are looked up from fixed
keys (a query string never puts its own text on the page); a reviewer sees the other reviewers'
decisions on an item only after deciding it themselves or once it is decided (blind double review).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from fastapi import Request

from annotations.context import field_views
from annotations.records import ItemView
from schemas import LETTERS

FILTERS = ("task", "status", "source", "scenario", "todo")
STATUSES = ("pending", "accepted", "rejected", "edited")
MESSAGES = {
    "saved": "Decision saved.",
    "edited": "Edit saved as a new version.",
    "done": "Nothing left for you to review under these filters.",
}
SHORTCUTS = (
    ("a", "accept this item"),
    ("r", "write a rejection note (Ctrl+Enter sends it)"),
    ("e", "edit the options / gold"),
    ("n", "next item waiting for you"),
    ("l", "back to the list"),
    ("o / c", "open / close every step"),
    ("?", "show or hide this help"),
)


def filters_of(request: Request) -> dict[str, str]:
    """The list filters present in the query string (known names only, empty values dropped)."""
    return {k: v for k in FILTERS if (v := request.query_params.get(k, "").strip())}


@dataclass(frozen=True)
class OptionView:
    """One option as the item page shows it."""

    letter: str
    text: str
    gold: bool
    origin: str


def options_of(question: Any) -> list[OptionView]:
    """The options in display order with the gold marked and each distractor's origin."""
    if question.form != "mcq":
        return []
    origins = {d.text: d.origin for d in question.distractors}
    return [
        OptionView(
            LETTERS[i],
            text,
            i == question.gold_index,
            "gold" if i == question.gold_index else origins.get(text, ""),
        )
        for i, text in enumerate(question.options)
    ]


def item_context(
    view: ItemView,
    reviewer: str,
    filters: dict[str, str],
    *,
    error: str = "",
    conflict: str = "",
    note: str = "",
) -> dict[str, Any]:
    """Template context of the item page."""
    q, row = view.question, view.row
    mine = view.review_by(reviewer)
    p = q.provenance
    original = next((v for v in view.versions if v.version == 0), None)
    return {
        "row": row,
        "q": q,
        "options": options_of(q),
        "fields": field_views(q.fields),
        "mine": mine,
        "reveal": mine is not None or row.status != "pending",
        "reviews": view.reviews,
        "log": view.log,
        "versions": view.versions,
        "original": original if row.version != 0 and original else None,
        "original_options": options_of(original.question) if original and row.version != 0 else [],
        "source_line": f"{p.source_file}:{p.source_line}" if p.source_line else p.source_file,
        "provenance": {
            "agent": p.agent,
            "agent model": p.agent_model,
            "outcome signal": p.outcome_signal,
            "generator": f"{p.generator} v{p.generator_version}" if p.generator else "-",
            "extractor": f"{p.extractor} v{p.extractor_version}",
        },
        "filters": filters,
        "qs": urlencode(filters),
        "error": error,
        "conflict": conflict,
        "note": note,
    }
