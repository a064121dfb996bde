"""A question's context fields turned into readable structure: fields -> steps -> labelled parts -> blocks.

Why: a reviewer judges a gold step by the trajectory before it, and APTBench rows carry that trajectory
as one JSON string (`trajs`, `trajectory`). This module parses such strings into steps (role or index as
title), each with labelled parts split into prose and code blocks (``` fences; observations and actions
are code), and marks long blocks as folded. Guarantees: pure functions, no HTML is produced here (the
app's templates escape every string; Label Studio gets `as_text`), and any value that is not the
expected JSON shape falls back to plain text rather than failing.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

#: Blocks longer than this (characters or lines) are shown folded, with a preview.
FOLD_CHARS = 1200
FOLD_LINES = 24
PREVIEW_CHARS = 240
STEP_PREVIEW_CHARS = 100
#: How many of the last steps are shown open (the context right before the gold matters most).
OPEN_LAST_STEPS = 3

_HIDDEN_KEYS = frozenset(
    {"role", "agent", "message_type", "tool_call_ids", "is_demo", "type", "cache_control"}
)
_CODE_KEYS = frozenset(
    {
        "observation",
        "action",
        "command",
        "execution",
        "tool_calls",
        "patch",
        "diff",
        "cmd",
        "output",
        "state",
        "args",
    }
)
_STEP_KEYS = frozenset(
    {"role", "content", "planning", "observation", "thought", "action", "plan", "execution"}
)
_FENCE = re.compile(r"```([\w.+-]*)[ \t]*\n?(.*?)```", re.DOTALL)


@dataclass(frozen=True)
class Block:
    """A run of prose or code."""

    kind: str
    """`text` or `code`."""
    text: str
    lang: str = ""
    folded: bool = False
    """Long: shown collapsed with `preview`."""
    preview: str = ""


@dataclass(frozen=True)
class Part:
    """One labelled piece of a step (`content`, `thought`, `observation`...)."""

    label: str
    blocks: tuple[Block, ...]


@dataclass(frozen=True)
class StepView:
    """One step of a trajectory-like field."""

    index: int
    title: str
    parts: tuple[Part, ...]
    open: bool
    preview: str = ""
    """First line of the step's first part, shown beside the title while the step is closed."""


@dataclass(frozen=True)
class FieldView:
    """One context field: either a list of steps, or plain blocks."""

    name: str
    steps: tuple[StepView, ...] = ()
    blocks: tuple[Block, ...] = ()


def blocks_of(text: str, code: bool = False) -> tuple[Block, ...]:
    """Split `text` into prose and fenced code blocks (all code when `code`), folding long ones."""
    if code:
        return (_block("code", text),)
    out: list[Block] = []
    pos = 0
    for m in _FENCE.finditer(text):
        if text[pos : m.start()].strip():
            out.append(_block("text", text[pos : m.start()].strip("\n")))
        out.append(_block("code", m.group(2).rstrip("\n"), m.group(1)))
        pos = m.end()
    if text[pos:].strip() or not out:
        out.append(_block("text", text[pos:].strip("\n")))
    return tuple(out)


def _block(kind: str, text: str, lang: str = "") -> Block:
    folded = len(text) > FOLD_CHARS or text.count("\n") >= FOLD_LINES
    return Block(kind, text, lang, folded, text[:PREVIEW_CHARS] if folded else "")


def _flatten(value: Any) -> tuple[str, bool]:
    """(text, is_structured): strings as they are, content-block lists joined, anything else as JSON."""
    if isinstance(value, str):
        return value, False
    if isinstance(value, list) and value and all(isinstance(v, dict) and "text" in v for v in value):
        return "\n".join(str(v["text"]) for v in value), False
    return json.dumps(value, indent=2, ensure_ascii=False), True


def _is_steps(value: Any) -> bool:
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(v, dict) for v in value)
        and any(_STEP_KEYS & v.keys() for v in value)
    )


def _step(index: int, raw: dict[str, Any], total: int) -> StepView:
    role = str(raw.get("role") or "")
    parts = []
    for key, value in raw.items():
        if key in _HIDDEN_KEYS or value in (None, "", [], {}):
            continue
        text, structured = _flatten(value)
        code = structured or key in _CODE_KEYS or (role == "tool" and key == "content")
        parts.append(Part(key, blocks_of(text, code)))
    title = f"{index}. {role}" if role else f"{index}. step"
    first = next(
        (line.strip() for p in parts for b in p.blocks for line in b.text.splitlines() if line.strip()), ""
    )
    preview = first if len(first) <= STEP_PREVIEW_CHARS else first[: STEP_PREVIEW_CHARS - 1] + "…"
    return StepView(index, title, tuple(parts), index >= total - OPEN_LAST_STEPS, preview)


def field_view(name: str, value: Any) -> FieldView:
    """One field: JSON step lists become steps; other JSON is pretty code; plain strings are prose."""
    parsed = value
    if isinstance(value, str) and value[:1] in "[{":
        try:
            parsed = json.loads(value)
        except ValueError:
            parsed = value
    if _is_steps(parsed):
        return FieldView(name, steps=tuple(_step(i, s, len(parsed)) for i, s in enumerate(parsed)))
    text, structured = _flatten(parsed)
    return FieldView(name, blocks=blocks_of(text, structured))


def field_views(fields: dict[str, Any]) -> list[FieldView]:
    """Every context field of a question, in row order (the `uuid` is not context)."""
    return [field_view(k, v) for k, v in fields.items() if k != "uuid"]


def as_text(views: list[FieldView]) -> str:
    """A plain-text rendering (for Label Studio's `Text` tag, which shows text as text)."""
    lines: list[str] = []
    for view in views:
        lines.append(f"===== {view.name} =====")
        for step in view.steps:
            lines.append(f"--- [{step.title}] ---")
            for part in step.parts:
                lines.append(f"{part.label}:")
                lines.extend(b.text for b in part.blocks)
        lines.extend(b.text for b in view.blocks)
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"
