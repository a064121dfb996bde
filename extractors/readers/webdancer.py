"""WebDancer / Qwen-Agent chatml ReAct logs: `{type: "chatml", messages, functions, answer, tag}`.

Reads: `messages[0]` is the system prompt; `messages[1]` the user turn holding the tool spec,
the ReAct format and, after the last `User:`, the question (the task). Assistant turns are
`<think>...</think>` then one or more `<tool_call>{"name", "arguments"}</tool_call>` (batched
`search` queries, `visit` with url and goal), or the final `<think>...</think><answer>...</answer>`.
User turns after the question carry `<tool_response>...</tool_response>` blocks, paired with
the calls of the turn before in order.
Label: the `<answer>` (else the last assistant text) matched against the gold aliases in
`answer` (a string, a list, or lists of aliases) by `answers.judge_answer`; verbose answers that
are not clearly wrong are `unknown` / `needs_judge`. Kind `dr`.
"""

from __future__ import annotations

import re
from typing import Any

from extractors.base import Origin, ReadError, reader
from extractors.labels.answers import final_answer_of, gold_aliases
from extractors.readers._chat import (
    DEFAULT_MAX_OBSERVATION_CHARS,
    StepBuilder,
    answered_run,
    as_record,
    first_user_index,
    messages_of,
    text,
    text_calls,
)
from schemas import Trajectory

_RESPONSE = re.compile(r"<tool_response>\s*(.*?)\s*(?:</tool_response>|\Z)", re.S)
_ANSWER = re.compile(r"<answer>", re.I)
_USER_Q = re.compile(r"(?:^|\n)\s*User:\s*", re.S)


def question_of(prompt: str) -> str:
    """The question at the end of the first user turn, after the last `User:`."""
    parts = _USER_Q.split(prompt)
    return parts[-1].strip() if len(parts) > 1 and parts[-1].strip() else prompt.strip()


@reader("webdancer", version=1, kind="dr", priority=20)
class WebDancer:
    """WebDancer chatml rows."""

    def __init__(self, max_observation_chars: int = DEFAULT_MAX_OBSERVATION_CHARS) -> None:
        self.max_observation_chars = max_observation_chars

    def sniff(self, record: Any) -> bool:
        if not isinstance(record, dict) or "messages" not in record:
            return False
        if record.get("type") == "chatml":
            return True
        msgs = record.get("messages")
        return (
            "answer" in record
            and isinstance(msgs, list)
            and any(
                isinstance(m, dict)
                and m.get("role") == "assistant"
                and isinstance(m.get("content"), str)
                and ("<tool_call>" in m["content"] or "<answer>" in m["content"])
                for m in msgs[:6]
            )
        )

    def read(self, record: dict[str, Any], origin: Origin) -> Trajectory:
        record = as_record(record, "WebDancer")
        msgs = [m for m in messages_of(record.get("messages"), "messages") if not m.get("is_demo")]
        task_at = first_user_index(msgs)
        prompt = text(msgs[task_at].get("content"))
        system = next((text(m.get("content")) for m in msgs[:task_at] if m.get("role") == "system"), "")
        steps = StepBuilder(self.max_observation_chars)
        last_assistant = ""
        final: str | None = None
        for m in msgs[task_at + 1 :]:
            role, content = m.get("role"), text(m.get("content"))
            if role == "assistant":
                thought, calls = text_calls(content)
                last_assistant = "" if calls else content  # a turn that calls a tool states no answer
                if _ANSWER.search(content):
                    final = final_answer_of(content)
                    thought = re.split(r"<answer>", thought, flags=re.I)[0].strip()
                steps.calls(thought, calls)
            elif role in ("user", "tool", "function"):
                responses = _RESPONSE.findall(content) or [content]
                for body in responses:
                    steps.observation(body)
        if final is None and last_assistant:
            final = final_answer_of(last_assistant)
        question = question_of(prompt)
        if not question:
            raise ReadError("missing_task", "the first user turn holds no question")
        golds = gold_aliases(record.get("answer"))
        built = steps.build()
        native = str(record.get("id") or record.get("qid") or f"{origin.id_path}:{origin.line}")
        functions = record.get("functions")
        tool_set = tuple(f for f in functions if isinstance(f, dict)) if isinstance(functions, list) else ()
        meta: dict[str, Any] = {k: record[k] for k in ("tag", "task") if isinstance(record.get(k), str)}
        return answered_run(
            self,
            origin,
            native=native,
            task=question,
            steps=built,
            final=final,
            golds=golds,
            agent="webdancer",
            meta={**meta, **steps.meta()},
            system=system,
            prompt=prompt,
            tool_set=tool_set,
        )
