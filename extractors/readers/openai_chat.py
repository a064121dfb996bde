"""Generic OpenAI chat / tool-call message lists: the reader of last resort for chat-shaped runs.

Reads: a bare JSON list of messages, or a row whose `messages` (or `conversations`) is one
(possibly as a JSON string). Roles `system`/`developer` (system prompt), `user`/`human` (the first
non-demonstration one is the task), `assistant`/`gpt` with OpenAI `tool_calls` or a text-encoded
call (`<tool_call>`, `<use_mcp_tool>`, `<function=...>`), `tool`/`function` results (paired by
`tool_call_id`), and the harmony schema (gpt-oss, OpenResearcher): an assistant message with a
`recipient` is a tool call, `channel: analysis` is reasoning, `channel: final` the answer.
Content may be a string or a list of text blocks.
Label: with a gold answer in the row (`answer`, `gold_answer`, `ground_truth`, `expected_answer`)
the run is deep-research-like (kind `dr`) and the final answer is matched by
`answers.judge_answer`; else a verdict column (`resolved`, `success`, `correct`) decides, else
`unknown`. Kind `generic` without a gold.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from extractors.base import Origin, ReadError, reader
from extractors.labels.answers import final_answer_of, gold_aliases, judge_answer
from extractors.readers._chat import (
    DEFAULT_MAX_OBSERVATION_CHARS,
    Call,
    StepBuilder,
    first_user_index,
    messages_of,
    openai_calls,
    render,
    text,
    text_calls,
)
from extractors.readers._text import as_bool, jsonish
from schemas import Outcome, Source, Trajectory, content_id

_ROLE = {
    "human": "user",
    "gpt": "assistant",
    "model": "assistant",
    "developer": "system",
    "function": "tool",
    "observation": "tool",
    "ipython": "tool",
}
_GOLD_KEYS = ("answer", "gold_answer", "ground_truth", "expected_answer")
_VERDICT_KEYS = ("resolved", "success", "correct", "is_correct")
_LIST_KEYS = ("messages", "conversations")


def _role(m: dict[str, Any]) -> str:
    role = m.get("role", m.get("from"))
    role = role if isinstance(role, str) else ""
    return _ROLE.get(role, role)


def _content(m: dict[str, Any]) -> str:
    return text(m.get("content"))


def _harmony_call(m: dict[str, Any], content: str) -> Call | None:
    recipient = m.get("recipient")
    if not isinstance(recipient, str) or recipient in ("", "all", "user"):
        return None
    args = jsonish(content)
    args = args if isinstance(args, dict) else {"input": content}
    return Call(recipient, args, render(recipient, args))


def _normalised(msgs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {**m, "role": _role(m), "content": m.get("content", m.get("value"))}
        for m in msgs
        if not m.get("is_demo")
    ]


@reader("openai_chat", version=1, kind="generic", priority=90)
class OpenAIChat:
    """Any OpenAI-style message list."""

    def __init__(self, max_observation_chars: int = DEFAULT_MAX_OBSERVATION_CHARS) -> None:
        self.max_observation_chars = max_observation_chars

    def sniff(self, record: Any) -> bool:
        if isinstance(record, list):
            return bool(record) and all(
                isinstance(m, dict) and ("role" in m or "from" in m) for m in record[:8]
            )
        if not isinstance(record, dict):
            return False
        msgs = next((jsonish(record[k]) for k in _LIST_KEYS if k in record), None)
        return (
            isinstance(msgs, list)
            and bool(msgs)
            and isinstance(msgs[0], dict)
            and ("role" in msgs[0] or "from" in msgs[0])
        )

    def read(self, record: Any, origin: Origin) -> Trajectory:
        row: dict[str, Any] = {}
        if isinstance(record, list):
            raw = record
        elif isinstance(record, dict):
            row = record
            key = next((k for k in _LIST_KEYS if k in record), "messages")
            raw = record.get(key)
        else:
            raise ReadError(
                "wrong_type",
                f"a chat record must be a message list or an object, got {type(record).__name__}",
            )
        msgs = _normalised(messages_of(raw, "messages"))
        task_at = first_user_index(msgs)
        prompt = _content(msgs[task_at])
        system = "\n\n".join(_content(m) for m in msgs[:task_at] if m["role"] == "system")
        steps = StepBuilder(self.max_observation_chars)
        final: str | None = None
        last = ""
        for m in msgs[task_at + 1 :]:
            role, content = m["role"], _content(m)
            if role == "assistant":
                harmony = _harmony_call(m, content)
                if harmony is not None:
                    steps.calls("", [harmony])
                elif m.get("channel") in ("analysis", "commentary"):
                    steps.thought(content)
                else:
                    calls = openai_calls(m)
                    thought, text_found = text_calls(content) if not calls else (content, [])
                    steps.calls(thought, calls or text_found)
                    last = "" if calls or text_found else content  # a tool-calling turn states no answer
                    if m.get("channel") == "final":
                        final = content.strip()
            elif role == "tool":
                call_id = m.get("tool_call_id")
                steps.observation(content, call_id if isinstance(call_id, str) else None)
            elif role == "user":
                steps.observation(content)
        golds = next((gold_aliases(row[k]) for k in _GOLD_KEYS if row.get(k) not in (None, "", [])), [])
        if final is None and last:
            final = final_answer_of(last)
        built = steps.build()
        native = str(
            row.get("id")
            or row.get("qid")
            or row.get("instance_id")
            or (Path(origin.file).stem if origin.line is None else f"{Path(origin.file).stem}:{origin.line}")
        )
        if golds:
            outcome, kind = judge_answer(final, golds).outcome(), "dr"
        else:
            outcome, kind = self._verdict(row), "generic"
        question = row.get("question") if isinstance(row.get("question"), str) else ""
        return Trajectory(
            trajectory_id=content_id(self.name, origin.id_path, origin.line, native),
            kind=kind,
            task=(question or prompt).strip(),
            system_prompt=system,
            prompt=prompt,
            steps=built,
            outcome=outcome,
            source=Source(
                format=self.name,
                reader_version=self.version,
                file=origin.file,
                line=origin.line,
                agent=str(row.get("agent") or ""),
                model=str(row.get("model") or ""),
                instance_id=native,
                native_id=native,
            ),
            final_answer=final if golds else None,
            gold_answer=golds[0] if golds else None,
            tool_set=tuple(t for t in jsonish(row.get("tools")) or () if isinstance(t, dict))
            if isinstance(jsonish(row.get("tools")), list)
            else (),
            meta=steps.meta(),
        )

    @staticmethod
    def _verdict(row: dict[str, Any]) -> Outcome:
        for key in _VERDICT_KEYS:
            flag = as_bool(row.get(key))
            if flag is not None:
                return Outcome(
                    label="success" if flag else "failure",
                    signal=f"row:{key}",
                    reason="resolved" if flag else "unresolved",
                )
        return Outcome()
