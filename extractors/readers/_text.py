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


_PR = re.compile(r"<pr_description>\s*(.*?)\s*</pr_description>", re.S)
_ISSUE_DESC = re.compile(r"<issue_description>\s*(.*?)\s*</issue_description>", re.S)
_ISSUE = re.compile(r"ISSUE:\s*\n(.*?)(?:\n\s*INSTRUCTIONS:|\Z)", re.S)
_PR_PREFIX = re.compile(r"^Consider the following PR description:\s*", re.S)


def extract_issue(prompt: str) -> str:
    """The issue text inside an agent's task prompt (`<pr_description>`, `ISSUE:` ...)."""
    for pattern in (_PR, _ISSUE_DESC, _ISSUE):
        m = pattern.search(prompt)
        if m and m.group(1).strip():
            return _PR_PREFIX.sub("", m.group(1).strip())
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


_FUNC = re.compile(r"<function=([\w.\-]+)>(.*?)(?:</function>|\Z)", re.S)
_PARAM = re.compile(r"<parameter=([\w.\-]+)>\n?(.*?)\n?</parameter>", re.S)


def parse_text_call(content: str) -> tuple[str, str, dict[str, Any]] | None:
    """Split a SWE-smith assistant message into (thought, tool, args); None without a call."""
    start = content.find("<function=")
    if start < 0:
        return None
    m = _FUNC.match(content, start)
    if not m:
        return None
    args = dict(_PARAM.findall(m.group(2)))
    return content[: m.start()].strip(), m.group(1), args


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
