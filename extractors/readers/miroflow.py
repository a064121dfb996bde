"""MiroFlow / MiroThinker run logs: `task_result.json` = `{message_history, summary, final_boxed_answer}`.

Reads: `message_history[0]` is the system prompt (the MCP tool catalogue; content may be a list
of text blocks); `message_history[1]` the user turn, whose question comes before MiroFlow's
fixed instruction block ("Your task is to comprehensively address the question..."). Assistant
turns are plan/reasoning text ending in `<use_mcp_tool><server_name>..</server_name>
<tool_name>..</tool_name><arguments>{json}</arguments></use_mcp_tool>`; the next user turn
(`[{type: text, text: <tool output>}]`) is the observation; the last assistant turn (the report)
has no tool call. Scraped pages reach 100 KB: the reader-level observation cap applies.
Label: `final_boxed_answer` (else `\\boxed{}` in `summary` or the last turn) matched against a
gold when the log carries one (`ground_truth`, `gold_answer`, `answer`); MiroFlow logs usually
have none, so the label is `unknown` with reason `no_gold`. Kind `dr`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from extractors.base import Origin, ReadError, reader
from extractors.labels.answers import boxed, final_answer_of, gold_aliases
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

_INSTRUCTIONS = re.compile(r"\n\s*\n\s*(?:Your task is to|You should follow the format|Please note)", re.S)
_GOLD_KEYS = ("ground_truth", "gold_answer", "answer", "expected_answer")


def question_of(prompt: str) -> str:
    """The question before MiroFlow's instruction block (the whole turn when there is none)."""
    m = _INSTRUCTIONS.search(prompt)
    return (prompt[: m.start()] if m else prompt).strip()


@reader("miroflow", version=1, kind="dr", priority=20)
class MiroFlow:
    """MiroFlow task logs."""

    def __init__(self, max_observation_chars: int = DEFAULT_MAX_OBSERVATION_CHARS) -> None:
        self.max_observation_chars = max_observation_chars

    def sniff(self, record: Any) -> bool:
        return (
            isinstance(record, dict)
            and "message_history" in record
            and ("final_boxed_answer" in record or "summary" in record or "task_id" in record)
        )

    def read(self, record: dict[str, Any], origin: Origin) -> Trajectory:
        record = as_record(record, "MiroFlow")
        msgs = [
            m for m in messages_of(record.get("message_history"), "message_history") if not m.get("is_demo")
        ]
        task_at = first_user_index(msgs)
        prompt = text(msgs[task_at].get("content"))
        system = next((text(m.get("content")) for m in msgs[:task_at] if m.get("role") == "system"), "")
        steps = StepBuilder(self.max_observation_chars)
        last = ""
        for m in msgs[task_at + 1 :]:
            role, content = m.get("role"), text(m.get("content"))
            if role == "assistant":
                last = content
                steps.calls(*text_calls(content))
            elif role in ("user", "tool"):
                steps.observation(content)
        question = question_of(prompt)
        if not question:
            raise ReadError("missing_task", "the first user turn holds no question")
        summary = record.get("summary") if isinstance(record.get("summary"), str) else ""
        final = record.get("final_boxed_answer")
        final = (
            final.strip()
            if isinstance(final, str) and final.strip()
            else (boxed(summary) or boxed(last) or final_answer_of(last))
        )
        golds = next((gold_aliases(record[k]) for k in _GOLD_KEYS if record.get(k) not in (None, "", [])), [])
        built = steps.build()
        native = str(record.get("task_id") or Path(origin.file).parent.name or Path(origin.file).stem)
        meta: dict[str, Any] = {"summary": summary} if summary else {}
        return answered_run(
            self,
            origin,
            native=native,
            task=question,
            steps=built,
            final=final,
            golds=golds,
            agent="miroflow",
            meta={**meta, **steps.meta()},
            system=system,
            prompt=prompt,
        )
