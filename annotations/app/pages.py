"""What the review pages show, computed from the queue's records (no HTML built here except guidelines).

Guarantees: list filters come only from a fixed set of names; flash messages are looked up from fixed
keys (a query string never puts its own text on the page); what a reviewer sees of other reviewers
has already passed `queue.blind`; guidelines markdown is rendered with raw HTML disabled (so even a
config cannot put markup or scripts on the page); an edit is shown as a diff against the original.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from fastapi import Request
from markdown_it import MarkdownIt
from markupsafe import Markup

from annotations.context import diff_class, field_views
from annotations.records import REASONS, ItemView, LastDecision, Progress
from schemas import LETTERS, Problem, Question

FILTERS = ("task", "status", "source", "scenario", "todo", "q", "sort")
STATUSES = ("pending", "accepted", "rejected", "edited")
MESSAGES = {
    "saved": "Decision saved.",
    "edited": "Edit saved as a new version.",
    "undone": "Your last decision was withdrawn: decide this item again.",
    "ruled": "Ruling saved: the dispute is settled.",
    "done": "Nothing left for you to review under these filters.",
    "saved_done": "Decision saved. Nothing left for you to review under these filters.",
    "edited_done": "Edit saved as a new version. Nothing left for you to review under these filters.",
}
SHORTCUTS = (
    ("a", "accept this item"),
    ("r", "write a rejection note (Ctrl+Enter sends it)"),
    ("1 … 6", "tick a rejection reason (in order)"),
    ("e", "edit the options / gold; in the edit form, Alt+A … Alt+F picks the gold"),
    ("n / s", "next item waiting for you / skip this one"),
    ("p", "previous item (the one you decided last)"),
    ("u", "undo your last decision"),
    ("l", "back to the list"),
    ("o / c", "open / close every step"),
    ("?", "show or hide this help"),
)
#: What a reviewer checks, per form; task guidelines (config or scenario) come on top.
ACCEPT_MEANS = {
    "mcq": (
        "**Accept** when the option marked ✓ is the step the agent really took next, it follows from the "
        "context, and every other option is wrong at this point. **Reject** (pick the reasons) when the "
        "gold is wrong, another option is also right, the context is not enough to choose, the context "
        "gives the answer away, or the question is ambiguous. **Edit** to fix an option or move the gold."
    ),
    "completion": (
        "**Accept** when the gold answer is what the agent really did next and could be inferred from the "
        "context (the exact command or answer, not a paraphrase). **Reject** (pick the reasons) when it "
        "is wrong, not the next step, not inferable, or leaked in the context. **Edit** to correct the gold."
    ),
}
QUESTION = {
    "mcq": "Which option is the agent's next step after the context on the left?",
    "completion": "What does the agent do next after the context on the left (exact command or answer)?",
}
#: The one-line version of `ACCEPT_MEANS`, shown right under the question.
CHECK = {
    "mcq": "Accept if ✓ is the agent's real next step and every other option is wrong here; else reject with a reason.",
    "completion": "Accept if the gold is exactly what the agent did next and follows from the context; else reject.",
}
_MD = MarkdownIt("commonmark", {"html": False, "linkify": False})


def markdown(text: str) -> Markup:
    """Guidelines markdown as HTML: raw HTML in the source is escaped, unsafe link schemes are dropped."""
    return Markup(_MD.render(text))  # html=False: markdown-it escapes raw HTML


def filters_of(request: Request) -> dict[str, str]:
    """The list filters present in the query string (known names only, empty values dropped, bounded)."""
    return {k: v[:200] for k in FILTERS if (v := request.query_params.get(k, "").strip())}


def list_query(f: Mapping[str, str], reviewer: str) -> dict[str, Any]:
    """Queue filter keywords from list filters."""
    query: dict[str, Any] = {k: f.get(k) for k in ("task", "status", "source", "scenario")}
    query["search"] = f.get("q")
    query["unreviewed_by"] = reviewer if f.get("todo") else None
    return query


@dataclass(frozen=True)
class OptionView:
    """One option as the item page shows it."""

    letter: str
    text: str
    gold: bool
    origin: str


def options_of(question: Question) -> list[OptionView]:
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


def _content_lines(q: Question) -> list[str]:
    if q.form != "mcq":
        return ["gold:", *q.gold.splitlines()]
    out: list[str] = []
    for o in options_of(q):
        lines = o.text.splitlines() or [""]
        out.append(f"({o.letter}){' [gold]' if o.gold else ''} {lines[0]}")
        out.extend(f"    {line}" for line in lines[1:])
    return out


def diff_lines(before: Question, after: Question) -> list[tuple[str, str]]:
    """(css class, line) of a unified diff of the options/gold from `before` to `after`."""
    diff = difflib.unified_diff(
        _content_lines(before), _content_lines(after), "original", "current", lineterm=""
    )
    return [(diff_class(line), line) for line in diff]


@dataclass(frozen=True)
class Typed:
    """What the reviewer typed into a form that was not saved (shown again, never lost)."""

    note: str = ""
    reasons: tuple[str, ...] = ()
    edit_note: str = ""
    options: tuple[str, ...] | None = None
    gold_index: int | None = None
    gold: str | None = None
    edit_open: bool = False


NOTHING_TYPED = Typed()


def item_context(
    view: ItemView,
    reviewer: str,
    filters: dict[str, str],
    *,
    reveal: bool,
    own_rev: int,
    progress: Progress,
    last: Sequence[LastDecision],
    guidelines: str = "",
    warnings: Sequence[Problem] = (),
    note_limit: int,
    error: str = "",
    conflict: str = "",
    typed: Typed = NOTHING_TYPED,
) -> dict[str, Any]:
    """Template context of the item page (`view` already blinded for `reviewer`)."""
    q, row = view.question, view.row
    mine = view.review_by(reviewer)
    p = q.provenance
    original = next((v for v in view.versions if v.version == 0), None)
    edited = original if original is not None and row.version != 0 else None
    opts = options_of(q)
    if typed.options is not None and len(typed.options) == len(opts):
        opts = [
            OptionView(
                o.letter, t, i == typed.gold_index if typed.gold_index is not None else o.gold, o.origin
            )
            for i, (o, t) in enumerate(zip(opts, typed.options, strict=True))
        ]
    previous = next((d for d in last if d.item_id != row.item_id), None)
    return {
        "row": row,
        "q": q,
        "options": options_of(q),
        "edit_options": opts,
        "edit_gold": typed.gold if typed.gold is not None else q.gold,
        "fields": field_views(q.fields),
        "mine": mine,
        "own_rev": own_rev,
        "reveal": reveal,
        "reviews": view.reviews,
        "log": view.log,
        "versions": view.versions,
        "original": edited,
        "diff": diff_lines(edited.question, q) if edited else [],
        "source_line": f"{p.source_file}:{p.source_line}" if p.source_line else p.source_file,
        "provenance": {
            "agent": p.agent,
            "agent model": p.agent_model,
            "outcome signal": p.outcome_signal,
            "generator": f"{p.generator} v{p.generator_version}" if p.generator else "-",
            "extractor": f"{p.extractor} v{p.extractor_version}",
        },
        "question_text": QUESTION.get(q.form, QUESTION["mcq"]),
        "check": CHECK.get(q.form, CHECK["mcq"]),
        "accept_means": markdown(ACCEPT_MEANS.get(q.form, ACCEPT_MEANS["mcq"])),
        "guidelines": markdown(guidelines) if guidelines.strip() else "",
        "warnings": [w for w in warnings if w.severity != "error"]
        + [w for w in warnings if w.severity == "error"],
        "reasons": REASONS,
        "progress": progress,
        "previous": previous,
        "undo": last[0] if last and last[0].action in ("accept", "reject") else None,
        "filters": filters,
        "qs": urlencode(filters),
        "error": error,
        "conflict": conflict,
        "typed": typed,
        "note_limit": note_limit,
    }
