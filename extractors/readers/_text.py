"""Text helpers shared by readers: message content, JSON-in-JSON, task text, action rendering."""

from __future__ import annotations

import ast
import re
import shlex
from typing import Any

import orjson

from extractors.base import ReadError


def text_of(content: Any) -> str:
    """Message content as text: a string, or a list of `{type: text, text}` blocks, or None."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict):
                if isinstance(block.get("text"), str):
                    parts.append(block["text"])
                elif isinstance(block.get("content"), (str, list)):
                    parts.append(text_of(block["content"]))
        return "\n".join(parts)
    if isinstance(content, dict) and isinstance(content.get("text"), str):
        return content["text"]
    raise ReadError(
        "wrong_type", f"message content must be text or a list of text blocks, got {type(content).__name__}"
    )


def jsonish(value: Any) -> Any:
    """Decode JSON (or Python-repr) held in a string; other values pass through."""
    if not isinstance(value, str):
        return value
    s = value.strip()
    if not s or s[0] not in "[{":
        return value
    try:
        return orjson.loads(s)
    except orjson.JSONDecodeError:
        pass
    try:
        return ast.literal_eval(s)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return value


def as_bool(value: Any) -> bool | None:
    """Verdict columns come as bools, "True"/"False" strings, or 0/1."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in {"true", "false", "1", "0", "yes", "no"}:
        return value.strip().lower() in {"true", "1", "yes"}
    return None


_ISSUE = re.compile(r"ISSUE:\s*\n(.*?)(?:\n\s*INSTRUCTIONS:|\Z)", re.S)
_PR_PREFIX = re.compile(r"^Consider the following PR description:\s*", re.S)
#: Tag pairs around the issue text, tried in order (the first opening tag and the first closing
#: tag after it, as a lazy regex would match; found with `str.find`, which is much faster on KB prompts).
_ISSUE_TAGS = (("<pr_description>", "</pr_description>"), ("<issue_description>", "</issue_description>"))


def _between(text: str, open_tag: str, close_tag: str) -> str | None:
    """The stripped text between the first `open_tag` and the first `close_tag` after it."""
    start = text.find(open_tag)
    if start < 0:
        return None
    start += len(open_tag)
    end = text.find(close_tag, start)
    return None if end < 0 else text[start:end].strip()


def _without_pr_prefix(text: str) -> str:
    # the anchored prefix can only match where the text starts with its words (a cheap test first)
    return _PR_PREFIX.sub("", text) if text.startswith(_PR_WORDS) else text


_PR_WORDS = "Consider the following PR description:"


def extract_issue(prompt: str) -> str:
    """The issue text inside an agent's task prompt (`<pr_description>`, `ISSUE:` ...)."""
    for open_tag, close_tag in _ISSUE_TAGS:
        inner = _between(prompt, open_tag, close_tag)
        if inner:
            return _without_pr_prefix(inner)
    m = _ISSUE.search(prompt)
    if m and m.group(1).strip():
        return _without_pr_prefix(m.group(1).strip())
    return prompt.strip()


def _quote(value: Any) -> str:
    text = value if isinstance(value, str) else orjson.dumps(value).decode()
    return shlex.quote(text) if text else "''"


def render_call(tool: str, args: dict[str, Any]) -> str:
    """Render a structured tool call as the SWE-agent command line it stands for."""
    if tool in {"bash", "execute_bash", "cmd_run"} and isinstance(args.get("command"), str):
        return args["command"]
    if tool in {"submit", "finish"}:
        return "submit"
    if tool == "str_replace_editor" and "command" in args:
        parts = [tool, str(args["command"]), str(args.get("path", ""))]
        if args.get("view_range") is not None:
            vr = args["view_range"]
            if isinstance(vr, list):
                parts.append(" --view_range " + " ".join(str(v) for v in vr))
        for key in ("file_text", "old_str", "new_str", "insert_line"):
            if key in args and args[key] is not None:
                parts.append(f" --{key} {_quote(args[key])}")
        return " ".join(p for p in parts[:3] if p) + "".join(parts[3:])
    if not args:
        return tool
    rendered = " ".join(f"{_quote(v)}" for v in args.values())
    return f"{tool} {rendered}".strip()


_FUNC_OPEN, _FUNC_CLOSE, _PARAM_CLOSE = "<function=", "</function>", "</parameter>"
_FUNC_HEAD = re.compile(r"<function=([\w.\-]+)>")
_PARAM_HEAD = re.compile(r"<parameter=([\w.\-]+)>\n?")


def _text_params(body: str) -> dict[str, Any]:
    """`<parameter=NAME>\\n?VALUE\\n?</parameter>` pairs in order (a later name wins): the pairs
    `re.findall` of that lazy pattern gives (each value ends at the first `</parameter>` after its
    head, so splitting at the closing tags finds them), without the lazy pattern's per-character
    steps (file texts run to many KB)."""
    args: dict[str, Any] = {}
    search = _PARAM_HEAD.search
    pieces = body.split(_PARAM_CLOSE)
    pieces.pop()  # what follows the last closing tag holds no whole parameter
    for piece in pieces:
        if (head := search(piece)) is not None:
            value = piece[head.end() :]
            args[head.group(1)] = value[:-1] if value.endswith("\n") else value
    return args


#: The common shape of a call, read by one `match` at its `<function=` (the fast path of
#: `parse_text_call`): the head, then parameters, each after text holding no `<` (so no other
#: parameter head), its value holding neither `</parameter>` nor `</function>` (so its
#: `</parameter>` is the first one and the call's `</function>` lies after it), then text holding no
#: `<` up to `</function>` or the end. On such a call the full parser splits at exactly these
#: closing tags and finds exactly these heads; any other text goes to the full parser.
#: Names are ASCII here (`[\w.\-]` on ASCII, checked faster than Unicode `\w`); others take the full parser.
_VALUE = r"((?:[^<]++|<(?!/parameter>|/function>))*+)</parameter>"
_NAME = r"([a-zA-Z0-9_.\-]+)"
_FAST_CALL = re.compile(
    r"<function="
    + _NAME
    + r">[^<]*+<parameter="
    + _NAME
    + r">\n?+"
    + _VALUE
    + r"(?:[^<]*+(</function>|\Z))?+"
)
_FAST_PARAM = re.compile(r"[^<]*+<parameter=" + _NAME + r">\n?+" + _VALUE + r"(?:[^<]*+(</function>|\Z))?+")


def _fast_text_call(content: str, start: int) -> tuple[str, str, dict[str, Any]] | None:
    """`parse_text_call` on a call of the common shape (`_FAST_CALL`), None for any other text."""
    m = _FAST_CALL.match(content, start)
    if m is None:
        return None
    name, key, value, end = m.groups()
    args: dict[str, Any] = {key: value[:-1] if value.endswith("\n") else value}
    pos = m.end()
    while end is None:  # more parameters
        if (m := _FAST_PARAM.match(content, pos)) is None:
            return None
        key, value = m.group(1, 2)
        args[key] = value[:-1] if value.endswith("\n") else value
        end = m.group(3)
        pos = m.end()
    return content[:start].strip(), name, args


def parse_text_call(content: str) -> tuple[str, str, dict[str, Any]] | None:
    """Split a SWE-smith assistant message into (thought, tool, args); None without a call.

    The call is the first `<function=NAME>`; its body runs to the first `</function>` (or the end).
    """
    start = content.find(_FUNC_OPEN)
    if start < 0:
        return None
    fast = _fast_text_call(content, start)
    if fast is not None:
        return fast
    return _full_text_call(content, start)


def _full_text_call(content: str, start: int) -> tuple[str, str, dict[str, Any]] | None:
    """`parse_text_call` on any text, the `<function=` at `start`."""
    head = _FUNC_HEAD.match(content, start)
    if head is None:
        return None
    end = head.end()
    close = content.find(_FUNC_CLOSE, end)
    body = content[end:] if close < 0 else content[end:close]
    return content[:start].strip(), head.group(1), _text_params(body)


_FENCE = re.compile(r"```[a-zA-Z]*\n(.*?)```", re.S)


def split_fenced_action(text: str) -> tuple[str, str] | None:
    """Split "discussion\\n```\\ncommand\\n```" into (thought, command) using the last fence."""
    fences = list(_FENCE.finditer(text))
    if not fences:
        return None
    last = fences[-1]
    return text[: last.start()].strip(), last.group(1).strip("\n")


def first_word(command: str) -> str:
    """Tool name of a command line: its first word (`str_replace_editor`, `python`, `submit`)."""
    stripped = command.strip()
    return stripped.split(None, 1)[0] if stripped else ""
