"""Shared parsing for chat-shaped agent logs: tool calls, message walks, the observation size rule.

Readers of OpenAI-style messages (mini-swe-agent v2, SWE-Gym, generic chat), ReAct text logs
(WebDancer `<tool_call>`, MiroFlow `<use_mcp_tool>`, SWE-smith `<function=...>`) and event
streams all turn turns into `Step`s through `StepBuilder`, so pairing and truncation behave the
same everywhere.

Observation size rule (documented, configurable): the reader layer keeps at most
`max_observation_chars` characters of each observation (default `DEFAULT_MAX_OBSERVATION_CHARS`,
set per reader instance), keeping the first and last half around a marker
`[... N characters omitted ...]` (`schemas.text.truncate_middle`). This bounds memory and
output size (MiroFlow scrapes reach 100 KB); the tighter prompt-facing budget is applied later by
the extractors through `ExtractOptions.max_observation_chars`. A trajectory whose observations
were cut records how many in `meta["observations_truncated"]`.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

import orjson

from extractors.base import ReadError
from extractors.readers._text import jsonish, parse_text_call, render_call, text_of
from schemas import Action, Source, Step, Trajectory, content_id
from schemas.text import truncate_middle

DEFAULT_MAX_OBSERVATION_CHARS = 32_000
"""Reader-level cap on one observation, in characters (head and tail kept)."""

_SWE_TOOLS = frozenset({"bash", "execute_bash", "cmd_run", "submit", "finish", "str_replace_editor"})


class Call(NamedTuple):
    """One tool call: name, structured arguments, the text it came from, and its id."""

    tool: str
    args: dict[str, Any]
    raw: str
    call_id: str | None = None


def render(tool: str, args: dict[str, Any]) -> str:
    """A structured call as text: the command line for SWE tools, else `{"name", "arguments"}` JSON."""
    if tool in _SWE_TOOLS:
        return render_call(tool, args)
    return orjson.dumps({"name": tool, "arguments": args}).decode()


def as_record(record: Any, what: str) -> dict[str, Any]:
    """A record that must be a JSON object."""
    if not isinstance(record, dict):
        raise ReadError("wrong_type", f"a {what} record must be an object, got {type(record).__name__}")
    return record


def as_list(value: Any, what: str) -> list[Any]:
    """`value` (or JSON held in a string) as a list; a Problem-worthy ReadError otherwise."""
    value = jsonish(value)
    if value is None:
        raise ReadError("missing_field", f"`{what}` is missing or null")
    if not isinstance(value, list):
        raise ReadError("wrong_type", f"`{what}` must be a list, got {type(value).__name__}")
    return value


def as_dict(value: Any, what: str) -> dict[str, Any]:
    """`value` (or JSON held in a string) as a dict; None counts as empty."""
    value = jsonish(value)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ReadError("wrong_type", f"`{what}` must be an object, got {type(value).__name__}")
    return value


def messages_of(value: Any, what: str) -> list[dict[str, Any]]:
    """A message list whose items are all objects."""
    msgs = as_list(value, what)
    for i, m in enumerate(msgs):
        if not isinstance(m, dict):
            raise ReadError("wrong_type", f"{what}[{i}] must be an object, got {type(m).__name__}")
    return msgs


def text(value: Any) -> str:
    """Content as text (string or list of text blocks); numbers are stringified, other shapes fail."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return text_of(value)


def openai_calls(msg: dict[str, Any]) -> list[Call]:
    """OpenAI `tool_calls` (or the legacy `function_call`) of one assistant message."""
    raw_calls = jsonish(msg.get("tool_calls"))
    if not isinstance(raw_calls, list):
        legacy = jsonish(msg.get("function_call"))
        raw_calls = [{"function": legacy}] if isinstance(legacy, dict) else []
    calls = []
    for c in raw_calls:
        if not isinstance(c, dict):
            continue
        fn = jsonish(c.get("function"))
        fn = fn if isinstance(fn, dict) else c
        name = fn.get("name")
        if not isinstance(name, str) or not name:
            continue
        args = jsonish(fn.get("arguments", fn.get("input")))
        args = args if isinstance(args, dict) else ({} if args in (None, "") else {"input": args})
        call_id = c.get("id") if isinstance(c.get("id"), str) else None
        calls.append(Call(name, args, render(name, args), call_id))
    return calls


_TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|\Z)", re.S)
_MCP = re.compile(r"<use_mcp_tool>(.*?)(?:</use_mcp_tool>|\Z)", re.S)
_TAG = {t: re.compile(rf"<{t}>\s*(.*?)\s*</{t}>", re.S) for t in ("server_name", "tool_name", "arguments")}
_THINK = re.compile(r"<think>(.*?)(?:</think>|\Z)", re.S)


def text_calls(content: str) -> tuple[str, list[Call]]:
    """Split a ReAct-style assistant text into (thought, tool calls) for the known text conventions."""
    found = list(_TOOL_CALL.finditer(content))
    if found:
        calls = []
        for m in found:
            body = jsonish(m.group(1))
            if isinstance(body, dict) and isinstance(body.get("name"), str):
                args = jsonish(body.get("arguments", body.get("parameters")))
                args = args if isinstance(args, dict) else ({} if args is None else {"input": args})
                calls.append(Call(body["name"], args, m.group(0).strip()))
            else:
                calls.append(Call("invalid_tool_call", {"text": m.group(1)}, m.group(0).strip()))
        return _thought(content[: found[0].start()]), calls
    mcp = list(_MCP.finditer(content))
    if mcp:
        calls = []
        for m in mcp:
            parts = {k: (p.group(1) if (p := rx.search(m.group(1))) else "") for k, rx in _TAG.items()}
            args = jsonish(parts["arguments"])
            args = (
                args
                if isinstance(args, dict)
                else ({} if not parts["arguments"] else {"input": parts["arguments"]})
            )
            calls.append(Call(parts["tool_name"] or "unknown_tool", args, m.group(0).strip()))
        return _thought(content[: mcp[0].start()]), calls
    parsed = parse_text_call(content)
    if parsed is not None:
        thought, name, args = parsed
        return thought, [Call(name, args, render_call(name, args))]
    return _thought(content), []


def _thought(prefix: str) -> str:
    think = _THINK.search(prefix)
    if think:
        rest = (prefix[: think.start()] + prefix[think.end() :]).strip()
        return (think.group(1).strip() + ("\n\n" + rest if rest else "")).strip()
    return prefix.strip()


class StepBuilder:
    """Collects thoughts, actions and observations in order and pairs observations with actions."""

    def __init__(self, max_observation_chars: int = DEFAULT_MAX_OBSERVATION_CHARS) -> None:
        self.limit = max_observation_chars
        self.truncated = 0
        self._steps: list[dict[str, Any]] = []
        self._by_call: dict[str, int] = {}
        self._pending_thought: list[str] = []

    def __len__(self) -> int:
        return len(self._steps)

    def thought(self, text_: str) -> None:
        """Reasoning with no action yet: it becomes the thought of the next action."""
        if text_.strip():
            self._pending_thought.append(text_.strip())

    def action(self, thought: str, call: Call | None) -> None:
        """A new step; `call` None for a turn without a tool call (a message, a final answer)."""
        parts = [*self._pending_thought, thought.strip()] if thought.strip() else list(self._pending_thought)
        self._pending_thought = []
        self._steps.append({"thought": "\n\n".join(parts), "call": call, "obs": None})
        if call is not None and call.call_id:
            self._by_call.setdefault(call.call_id, len(self._steps) - 1)

    def calls(self, thought: str, calls: list[Call]) -> None:
        """One assistant turn: one step per call (the thought goes with the first), or a bare step."""
        if not calls:
            self.action(thought, None)
            return
        for i, call in enumerate(calls):
            self.action(thought if i == 0 else "", call)

    def observation(self, text_: str, call_id: str | None = None) -> None:
        """Attach tool output to the step that made the call (by id), else to the latest step."""
        if not self._steps:
            return
        idx = self._by_call.get(call_id, -1) if call_id else -1
        if idx == -1 and not call_id:
            idx = next(
                (
                    i
                    for i in range(len(self._steps) - 1, -1, -1)
                    if self._steps[i]["call"] is not None and self._steps[i]["obs"] is None
                ),
                len(self._steps) - 1,
            )
        step = self._steps[idx]
        step["obs"] = text_ if step["obs"] is None else f"{step['obs']}\n{text_}"

    def flush_thought(self) -> None:
        """Trailing reasoning with no action after it becomes a step of its own."""
        if self._pending_thought:
            self.action("", None)

    def build(self) -> tuple[Step, ...]:
        """The steps, observations capped by the documented rule."""
        self.flush_thought()
        out = []
        for i, s in enumerate(self._steps):
            call: Call | None = s["call"]
            obs = s["obs"]
            if obs is not None and 0 < self.limit < len(obs):
                obs = truncate_middle(obs, self.limit)
                self.truncated += 1
            action = (
                None
                if call is None
                else Action(tool=call.tool, args=call.args, raw=call.raw, call_id=call.call_id)
            )
            out.append(Step(index=i, thought=s["thought"], action=action, observation=obs))
        return tuple(out)

    def meta(self) -> dict[str, Any]:
        """`{"observations_truncated": n}` when any observation was cut."""
        return {"observations_truncated": self.truncated} if self.truncated else {}


def first_user_index(msgs: list[dict[str, Any]], roles: tuple[str, ...] = ("user", "human")) -> int:
    """Index of the first non-demonstration user message (system prompts and demos are not the task)."""
    for i, m in enumerate(msgs):
        if m.get("role") in roles and not m.get("is_demo") and text(m.get("content")).strip():
            return i
    raise ReadError("missing_task", "no non-demonstration user message holding the task")


def answered_run(
    reader: Any,
    origin: Any,
    *,
    native: str,
    task: str,
    steps: tuple[Step, ...],
    final: str | None,
    golds: list[str],
    agent: str,
    meta: dict[str, Any],
    system: str = "",
    prompt: str = "",
    instance_id: str | None = None,
    tool_set: tuple[dict[str, Any], ...] = (),
) -> Trajectory:
    """A deep-research run: labelled by matching its final answer against the gold aliases."""
    from extractors.labels.answers import judge_answer

    iid = native if instance_id is None else instance_id
    return Trajectory(
        trajectory_id=content_id(reader.name, origin.id_path, origin.line, iid),
        kind="dr",
        task=task,
        system_prompt=system,
        prompt=prompt or task,
        steps=steps,
        outcome=judge_answer(final, golds).outcome(),
        source=Source(
            format=reader.name,
            reader_version=reader.version,
            file=origin.file,
            line=origin.line,
            agent=agent,
            instance_id=iid,
            native_id=native,
        ),
        final_answer=final,
        gold_answer=golds[0] if golds else None,
        tool_set=tool_set,
        meta={**meta, "gold_aliases": golds} if len(golds) > 1 else meta,
    )
