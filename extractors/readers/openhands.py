"""OpenHands runs: evaluation `output.jsonl` rows, resolver `output.jsonl` rows, event-list files.

Reads:
- eval rows `{instance_id, instruction, instance, history, error, test_result, metadata}`: the
  task is `instance.problem_statement` (else the issue inside `instruction`); `history` events
  are agent actions (`run`, `run_ipython`, `read`, `edit`, `think`, `browse`, `finish`,
  `message`) whose tool name and arguments come from `tool_call_metadata` when present, and
  observations linked to them by `cause` (or the tool-call id);
- resolver rows `{issue, instruction, history, git_patch, success, result_explanation}` with the
  older flat events (`{"action": "run", "command", "thought"}` / `{"observation": "run", "content"}`);
- event-list files: a bare JSON array of events (runtime replays); the task is the first user
  `message` action. System prompts, recalls and agent-state events are not steps.
Labels: a verdict shipped in the row (`resolved`, `test_result.report.resolved`, resolver
`success`, LLM-judged) decides; an eval row with `error` set (e.g. max iterations) is a failure
(`agent_error`); otherwise `unknown` until a harness report names the instance. SWE-Gym HF rows
(OpenAI messages) stay with `swe_rows`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from extractors.base import Origin, ReadError, reader
from extractors.readers._chat import (
    DEFAULT_MAX_OBSERVATION_CHARS,
    Call,
    StepBuilder,
    as_dict,
    as_list,
    render,
    text,
)
from extractors.readers._text import as_bool, extract_issue, jsonish
from schemas import Outcome, Source, Trajectory, content_id

_NOT_STEPS = {"system", "recall", "change_agent_state", "agent_state_changed", "null", "condensation"}
_TOOLS = {
    "run": "execute_bash",
    "run_ipython": "execute_ipython_cell",
    "read": "str_replace_editor",
    "edit": "str_replace_editor",
    "think": "think",
    "finish": "finish",
    "browse": "browser",
    "browse_interactive": "browser",
    "delegate": "delegate",
    "mcp": "mcp",
}
_ARG_NOISE = {
    "thought",
    "is_input",
    "keep_prompt",
    "is_confirmed",
    "action_risk",
    "security_risk",
    "confirmation_state",
    "hidden",
    "blocking",
    "kernel_init_code",
    "images_urls",
    "image_urls",
    "wait_for_response",
    "impl_source",
    "include_extra",
    "translated_ipython_code",
}


def is_event(e: Any) -> bool:
    """An OpenHands event: an object with an `action` or an `observation`."""
    return isinstance(e, dict) and ("action" in e or "observation" in e)


def _model_message(e: dict[str, Any]) -> dict[str, Any]:
    meta = jsonish(e.get("tool_call_metadata"))
    resp = jsonish(meta.get("model_response")) if isinstance(meta, dict) else None
    choices = resp.get("choices") if isinstance(resp, dict) else None
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        msg = jsonish(choices[0].get("message"))
        return msg if isinstance(msg, dict) else {}
    return {}


def _call(e: dict[str, Any], kind: str) -> Call:
    meta = jsonish(e.get("tool_call_metadata"))
    meta = meta if isinstance(meta, dict) else {}
    call_id = meta.get("tool_call_id") if isinstance(meta.get("tool_call_id"), str) else None
    tool = meta.get("function_name") if isinstance(meta.get("function_name"), str) else _TOOLS.get(kind, kind)
    args: dict[str, Any] | None = None
    for c in _model_message(e).get("tool_calls") or []:
        if isinstance(c, dict) and c.get("id") == call_id and isinstance(c.get("function"), dict):
            parsed = jsonish(c["function"].get("arguments"))
            args = parsed if isinstance(parsed, dict) else None
    if args is None:
        raw_args = jsonish(e.get("args"))
        source = (
            raw_args
            if isinstance(raw_args, dict)
            else {k: v for k, v in e.items() if k not in ("action", "source")}
        )
        args = {k: v for k, v in source.items() if k not in _ARG_NOISE and v not in (None, "")}
        if kind == "run_ipython" and "code" in args:
            args = {"code": args["code"]}
    return Call(tool, args, render(tool, args), call_id)


def _thought(e: dict[str, Any]) -> str:
    args = jsonish(e.get("args"))
    for value in (
        args.get("thought") if isinstance(args, dict) else None,
        e.get("thought"),
        _model_message(e).get("content"),
    ):
        if isinstance(value, str) and value.strip():
            return value
    return ""


def _message_text(e: dict[str, Any]) -> str:
    args = jsonish(e.get("args"))
    for value in (
        args.get("content") if isinstance(args, dict) else None,
        e.get("content"),
        e.get("message"),
    ):
        if isinstance(value, str) and value.strip():
            return value
    return ""


def walk_events(events: list[Any], limit: int) -> tuple[str, str, StepBuilder]:
    """(system prompt, first user message, steps) of an event list."""
    system, prompt = "", ""
    steps = StepBuilder(limit)
    by_id: dict[Any, str] = {}
    for i, e in enumerate(events):
        if not isinstance(e, dict):
            raise ReadError("wrong_type", f"history[{i}] must be an object, got {type(e).__name__}")
        kind = e.get("action")
        source = e.get("source")
        if isinstance(kind, str):
            if kind == "system":
                system = system or _message_text(e)
            elif kind == "message" and source in ("user", None) and not prompt:
                prompt = _message_text(e)
            elif kind == "message" and source == "user":
                steps.observation(_message_text(e))
            elif kind == "message":
                steps.action(_message_text(e), None)
            elif kind not in _NOT_STEPS:
                call = _call(e, kind)
                steps.action(_thought(e), call)
                if e.get("id") is not None and call.call_id:
                    by_id[e["id"]] = call.call_id
        elif isinstance(e.get("observation"), str) and e["observation"] not in _NOT_STEPS:
            content = e.get("content")
            body = text(content) if content is not None else text(e.get("message"))
            cause = by_id.get(e.get("cause"))
            meta = jsonish(e.get("tool_call_metadata"))
            call_id = cause or (meta.get("tool_call_id") if isinstance(meta, dict) else None)
            steps.observation(body, call_id if isinstance(call_id, str) else None)
    return system, prompt, steps


def _row_outcome(record: dict[str, Any]) -> Outcome:
    test_result = as_dict(record.get("test_result"), "test_result")
    report = jsonish(test_result.get("report"))
    for key, value in (
        ("resolved", record.get("resolved")),
        ("test_result.report.resolved", report.get("resolved") if isinstance(report, dict) else None),
        ("success", record.get("success")),
    ):
        flag = as_bool(value)
        if flag is not None:
            return Outcome(
                label="success" if flag else "failure",
                signal=f"row:{key}",
                reason="resolved" if flag else "unresolved",
            )
    error = record.get("error")
    if isinstance(error, str) and error.strip() and error.strip() != "None":
        return Outcome(label="failure", signal="row:error", reason="agent_error")
    return Outcome()


@reader("openhands", version=1, kind="swe", priority=30)
class OpenHands:
    """OpenHands evaluation and resolver outputs, and event-list files."""

    def __init__(self, max_observation_chars: int = DEFAULT_MAX_OBSERVATION_CHARS) -> None:
        self.max_observation_chars = max_observation_chars

    def sniff(self, record: Any) -> bool:
        if isinstance(record, list):
            return bool(record) and is_event(record[0]) and sum(map(is_event, record)) * 2 >= len(record)
        if not isinstance(record, dict) or "history" not in record:
            return False
        eval_row = "instance_id" in record and any(
            k in record for k in ("instruction", "test_result", "metadata")
        )
        resolver_row = "issue" in record and any(k in record for k in ("git_patch", "success", "issue_type"))
        return eval_row or resolver_row

    def read(self, record: Any, origin: Origin) -> Trajectory:
        if isinstance(record, list):
            return self._event_list(record, origin)
        if not isinstance(record, dict):
            raise ReadError(
                "wrong_type",
                f"an OpenHands record must be an object or event list, got {type(record).__name__}",
            )
        events = as_list(record.get("history"), "history")
        system, first_msg, steps = walk_events(events, self.max_observation_chars)
        instruction = record.get("instruction") if isinstance(record.get("instruction"), str) else ""
        prompt = instruction or first_msg
        instance = as_dict(record.get("instance"), "instance")
        issue = as_dict(record.get("issue"), "issue")
        if issue:
            title, body = str(issue.get("title") or ""), str(issue.get("body") or "")
            task = f"{title}\n\n{body}".strip()
            instance_id = f"{issue.get('owner', '')}/{issue.get('repo', '')}#{issue.get('number', '')}"
            patch = record.get("git_patch")
        else:
            statement = instance.get("problem_statement")
            task = statement if isinstance(statement, str) and statement.strip() else extract_issue(prompt)
            instance_id = str(record.get("instance_id") or instance.get("instance_id") or "")
            patch = as_dict(record.get("test_result"), "test_result").get("git_patch")
        if not task.strip():
            raise ReadError("missing_task", "no problem statement, issue or instruction")
        metadata = as_dict(record.get("metadata"), "metadata")
        llm = as_dict(metadata.get("llm_config"), "metadata.llm_config")
        built = steps.build()
        meta: dict[str, Any] = steps.meta()
        if isinstance(record.get("error"), str):
            meta["error"] = record["error"]
        return Trajectory(
            trajectory_id=content_id(self.name, origin.id_path, origin.line, instance_id),
            kind="swe",
            task=task.strip(),
            system_prompt=system,
            prompt=prompt,
            steps=built,
            outcome=_row_outcome(record),
            source=Source(
                format=self.name,
                reader_version=self.version,
                file=origin.file,
                line=origin.line,
                agent=f"openhands {metadata.get('agent_class') or ('resolver' if issue else '')}".strip(),
                model=str(llm.get("model") or ""),
                instance_id=instance_id,
                native_id=instance_id,
            ),
            patch=patch if isinstance(patch, str) else None,
            meta=meta,
        )

    def _event_list(self, events: list[Any], origin: Origin) -> Trajectory:
        system, prompt, steps = walk_events(events, self.max_observation_chars)
        if not prompt.strip():
            raise ReadError("missing_task", "no user `message` action in the event list")
        built = steps.build()
        native = Path(origin.file).stem if origin.line is None else f"{Path(origin.file).stem}:{origin.line}"
        return Trajectory(
            trajectory_id=content_id(self.name, origin.id_path, origin.line, native),
            kind="generic",
            task=prompt.strip(),
            system_prompt=system,
            prompt=prompt,
            steps=built,
            outcome=Outcome(),
            source=Source(
                format=self.name,
                reader_version=self.version,
                file=origin.file,
                line=origin.line,
                agent="openhands",
                instance_id=native,
                native_id=native,
            ),
            meta=steps.meta(),
        )
