"""TapeAgents tapes (GAIA web agent): `{metadata, context, steps}`, both step schemas seen in the wild.

Reads: `steps[]` by `kind`. The `question` step is the task (else `metadata.task.Question`).
Thought kinds (`reasoning_thought`, `plan_thought`, `list_of_facts_thought`,
`reading_result_thought`, `extracted_facts_thought`, any other `*_thought`) become the thought of
the next action; `*_action` steps are actions (tool = kind without `_action`, args = the step's
fields); observations (`*_observation`, `code_execution_result`, `action_execution_failure`)
attach to the action before them; `set_next_node` is control flow and dropped.
Result text per tape schema version: a search result's text is `snippet` in the 2025-01 tapes
and `content` in the 2025-10 ones (both read, whichever is filled; `text` / `description` too);
a page is `text`; a video observation its `subtitle_text`; code results their `output`.
Label: the final answer `metadata.result` (else the `gaia_answer_action.answer`) matched against
`metadata.task["Final answer"]` by `answers.judge_answer`; `gaia_answer_action.success` is the
agent's own claim and decides nothing. Kind `dr`.
"""

from __future__ import annotations

from typing import Any

import orjson

from extractors.base import Origin, ReadError, reader
from extractors.labels.answers import gold_aliases
from extractors.readers._chat import (
    DEFAULT_MAX_OBSERVATION_CHARS,
    Call,
    StepBuilder,
    answered_run,
    as_dict,
    as_list,
    as_record,
    render,
)
from schemas import Trajectory

_OBSERVATIONS = {"code_execution_result", "action_execution_failure"}
_CONTROL = {"set_next_node"}
_STEP_NOISE = {"kind", "metadata"}


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    return orjson.dumps(value, option=orjson.OPT_INDENT_2).decode()


def _thought_text(step: dict[str, Any]) -> str:
    fields = {k: v for k, v in step.items() if k not in _STEP_NOISE and v not in (None, "", [], {})}
    if len(fields) == 1:
        return _as_text(next(iter(fields.values())))
    return "\n".join(f"{k}: {_as_text(v)}" for k, v in fields.items())


#: Fields holding a search result's text, by tape schema version (first filled one wins).
_RESULT_TEXT = ("content", "snippet", "text", "description")


def _result_text(result: dict[str, Any]) -> str:
    return next((v for k in _RESULT_TEXT if isinstance(v := result.get(k), str) and v.strip()), "")


def _observation_text(step: dict[str, Any]) -> str:
    kind = step.get("kind")
    if kind == "search_results_observation" and isinstance(step.get("serp"), list):
        lines = [
            "\n".join(p for p in (str(r.get("title") or ""), str(r.get("url") or ""), _result_text(r)) if p)
            for r in step["serp"]
            if isinstance(r, dict)
        ]
        return "\n\n".join(lines)
    if kind == "page_observation" and isinstance(step.get("text"), str):
        return step["text"]
    if kind == "video_observation" and isinstance(step.get("subtitle_text"), str) and step["subtitle_text"]:
        return step["subtitle_text"]
    if kind == "code_execution_result":
        result = step.get("result")
        if isinstance(result, dict):
            return _as_text(result.get("output")) or _as_text(result)
    if isinstance(step.get("error"), str) and step["error"]:
        return step["error"]
    return _thought_text(step)


@reader("tapeagents", version=1, kind="dr", priority=20)
class TapeAgents:
    """TapeAgents tapes."""

    def __init__(self, max_observation_chars: int = DEFAULT_MAX_OBSERVATION_CHARS) -> None:
        self.max_observation_chars = max_observation_chars

    def sniff(self, record: Any) -> bool:
        if not isinstance(record, dict) or not isinstance(record.get("steps"), list):
            return False
        meta = record.get("metadata")
        steps = record["steps"]
        return isinstance(meta, dict) and (
            "task" in meta
            or "author" in meta
            or (bool(steps) and isinstance(steps[0], dict) and "kind" in steps[0])
        )

    def read(self, record: dict[str, Any], origin: Origin) -> Trajectory:
        record = as_record(record, "TapeAgents")
        meta = as_dict(record.get("metadata"), "metadata")
        task_info = as_dict(meta.get("task"), "metadata.task")
        raw_steps = as_list(record.get("steps"), "steps")
        steps = StepBuilder(self.max_observation_chars)
        question = ""
        answer_step: dict[str, Any] | None = None
        for i, s in enumerate(raw_steps):
            if not isinstance(s, dict):
                raise ReadError("wrong_type", f"steps[{i}] must be an object, got {type(s).__name__}")
            kind = s.get("kind")
            if not isinstance(kind, str):
                raise ReadError("missing_field", f"steps[{i}] has no `kind`")
            if kind == "question":
                question = question or _as_text(s.get("content"))
            elif kind in _CONTROL:
                continue
            elif kind.endswith("_thought"):
                steps.thought(_thought_text(s))
            elif kind.endswith("_action"):
                tool = kind.removesuffix("_action")
                args = {k: v for k, v in s.items() if k not in _STEP_NOISE}
                steps.action("", Call(tool, args, render(tool, args)))
                if kind == "gaia_answer_action":
                    answer_step = s
            elif kind.endswith("_observation") or kind in _OBSERVATIONS:
                steps.observation(_observation_text(s))
            else:
                steps.thought(_thought_text(s))
        task = question or _as_text(task_info.get("Question"))
        if not task.strip():
            raise ReadError("missing_task", "no `question` step and no metadata.task.Question")
        result = meta.get("result")
        if not isinstance(result, str) and answer_step is not None:
            result = answer_step.get("answer")
        final = None if result is None else _as_text(result)
        golds = gold_aliases(task_info.get("Final answer"))
        built = steps.build()
        instance_id = str(task_info.get("task_id") or meta.get("id") or "")
        extra = {
            k: meta[k] for k in ("error", "terminated", "attempt_number", "level") if meta.get(k) is not None
        }
        # (the id hashes the instance id; native_id keeps the tape's own id)
        run = answered_run(
            self,
            origin,
            native=instance_id,
            task=task.strip(),
            steps=built,
            final=final,
            golds=golds,
            agent=f"tapeagents {meta.get('author') or ''}".strip(),
            meta={**extra, **steps.meta()},
            prompt=task,
        )
        return run.model_copy(
            update={"source": run.source.model_copy(update={"native_id": str(meta.get("id") or instance_id)})}
        )
