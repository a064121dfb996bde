"""A question's context fields turned into readable structure: fields -> steps -> labelled parts -> blocks.

Why: a reviewer judges a gold step by the trajectory before it, and APTBench rows carry that trajectory
as one JSON string (`trajs`, `trajectory`). This module parses such strings into steps (role or index as
title), each with labelled parts split into prose and code blocks (``` fences; observations and actions
are code), and marks long blocks as folded. The task statement (the first user message) is open and
never folded; a step's preview names the command or tool call (a tool step's, the call it answers),
not a boilerplate prefix such as `OBSERVATION:`; unified diffs carry per-line classes for colouring.
Guarantees: pure functions, no HTML is produced here (the app's templates escape every string; Label
Studio gets `as_text`), and any value that is not the expected JSON shape falls back to plain text.
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
#: Parts that name what a step does (the command or tool call), in the order they are preferred.
_CALL_KEYS = ("action", "command", "cmd", "tool_calls", "execution", "args")
#: Boilerplate a tool output starts with, skipped in previews.
_OUTPUT_PREFIX = re.compile(r"^\s*(OBSERVATION|Observation|EXECUTION RESULT[^:]*|Output|Tool result)\s*:\s*")
_DIFF_START = re.compile(r"^(diff --git |--- \S|\+\+\+ \S|@@ -\d)", re.MULTILINE)


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
    lines: tuple[tuple[str, str], ...] = ()
    """A unified diff split into (class, line): `add`, `del`, `hunk`, `meta`, `ctx` (empty: not a diff)."""


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
    """What the step does (its command or tool call; for a tool step, the call it answers), shown closed."""
    role: str = ""
    statement: bool = False
    """The task statement (first user message): open, never folded."""


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


def diff_class(line: str) -> str:
    """The colour class of one unified-diff line: `meta`, `hunk`, `add`, `del` or `ctx`."""
    if line.startswith(("diff --git", "+++ ", "--- ", "index ")):
        return "meta"
    if line.startswith("@@"):
        return "hunk"
    return {"+": "add", "-": "del"}.get(line[:1], "ctx")


def diff_lines(text: str) -> tuple[tuple[str, str], ...]:
    """A unified diff's lines with their classes, or () when `text` is not a diff."""
    if len(_DIFF_START.findall(text)) < 2:
        return ()
    return tuple((diff_class(line), line) for line in text.splitlines())


def _block(kind: str, text: str, lang: str = "") -> Block:
    folded = len(text) > FOLD_CHARS or text.count("\n") >= FOLD_LINES
    lines = diff_lines(text)
    return Block("code" if lines else kind, text, lang, folded, text[:PREVIEW_CHARS] if folded else "", lines)


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


_WRAPPER = re.compile(r"^</?[\w-]+>$")
_RETURNCODE = re.compile(r"^<returncode>\s*(-?\d+)\s*</returncode>$")


def _first_line(text: str) -> str:
    """The first line that says something: no `OBSERVATION:` prefix, wrapper tag or fence (a non-zero
    `<returncode>` is kept as `exit N`)."""
    status = ""
    for line in text.splitlines():
        line = _OUTPUT_PREFIX.sub("", line).strip()
        code = _RETURNCODE.match(line)
        if code:
            status = "" if code.group(1) == "0" else f"exit {code.group(1)}: "
            continue
        if line and not line.startswith("```") and not _WRAPPER.match(line):
            return status + line
    return status.rstrip(": ") or ("(no output)" if text.strip() else "")


def _clip(text: str) -> str:
    return text if len(text) <= STEP_PREVIEW_CHARS else text[: STEP_PREVIEW_CHARS - 1] + "…"


def _call_of(parts: list[Part]) -> str:
    """The command or tool call a step makes: a call part, else the first fenced code block of its text."""
    by_label = {p.label: p for p in parts}
    for key in _CALL_KEYS:
        if key in by_label:
            text = "\n".join(b.text for b in by_label[key].blocks)
            names = re.findall(r'"name"\s*:\s*"([^"]+)"', text) if key == "tool_calls" else []
            args = re.findall(r'"(?:command|cmd|code|query|url)"\s*:\s*"((?:[^"\\]|\\.)*)"', text)
            if names or args:
                return " ".join([*names[:1], *(a.replace("\\n", " ") for a in args[:1])])
            return _first_line(text)
    for p in parts:
        code = next((b for b in p.blocks if b.kind == "code" and b.text.strip()), None)
        if code is not None and p.label in ("content", "thought", "text"):
            return _first_line(code.text)
    return ""


def _is_output(role: str, raw: dict[str, Any]) -> bool:
    content = raw.get("content")
    text = content if isinstance(content, str) else _flatten(content)[0] if content else ""
    return role in ("tool", "function", "observation") or bool(_OUTPUT_PREFIX.match(text or ""))


def _step(index: int, raw: dict[str, Any], total: int, previous_call: str, statement: bool) -> StepView:
    role = str(raw.get("role") or "")
    parts = []
    for key, value in raw.items():
        if key in _HIDDEN_KEYS or value in (None, "", [], {}):
            continue
        text, structured = _flatten(value)
        code = structured or key in _CODE_KEYS or (role == "tool" and key == "content")
        blocks = blocks_of(text, code)
        if statement:
            blocks = tuple(Block(b.kind, b.text, b.lang, False, "", b.lines) for b in blocks)
        parts.append(Part(key, blocks))
    output = not statement and _is_output(role, raw)
    title = f"{index}. {role or 'step'}" + (" · task statement" if statement else "")
    first = next((_first_line(b.text) for p in parts for b in p.blocks if _first_line(b.text)), "")
    if output:
        call = previous_call if len(previous_call) <= 60 else previous_call[:59] + "…"
        preview = f"→ {call} · {first}" if call else f"↳ {first}"
    else:
        call = _call_of(parts)
        preview = f"$ {call}" if call and role != "system" and not statement else first
    is_open = statement or index >= total - OPEN_LAST_STEPS
    return StepView(index, title, tuple(parts), is_open, _clip(preview), role, statement)


def _steps(raw_steps: list[dict[str, Any]]) -> tuple[StepView, ...]:
    out: list[StepView] = []
    previous_call, seen_user = "", False
    for i, raw in enumerate(raw_steps):
        role = str(raw.get("role") or "")
        statement = role in ("user", "human") and not seen_user and not _is_output(role, raw)
        seen_user = seen_user or role in ("user", "human")
        step = _step(i, raw, len(raw_steps), previous_call, statement)
        if role not in ("system", "user", "human") and not _is_output(role, raw):
            # what the next tool output answers (plan rows keep no call: their output then reads `↳ ...`)
            previous_call = step.preview[2:] if step.preview.startswith("$ ") else ""
        out.append(step)
    return tuple(out)


def field_view(name: str, value: Any) -> FieldView:
    """One field: JSON step lists become steps; other JSON is pretty code; plain strings are prose."""
    parsed = value
    if isinstance(value, str) and value[:1] in "[{":
        try:
            parsed = json.loads(value)
        except ValueError:
            parsed = value
    if _is_steps(parsed):
        return FieldView(name, steps=_steps(parsed))
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
