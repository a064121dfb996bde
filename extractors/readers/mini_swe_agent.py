"""mini-swe-agent `.traj.json` files: v1 (`mini-swe-agent-1`) and v2 (`mini-swe-agent-1.1`).

Reads: one JSON object with `trajectory_format`, `messages` and `info`.
- v1: plain chat; assistant turns are `THOUGHT: ...` plus one fenced bash block, the next user
  message (`<returncode>...<output>...`) is the observation, format errors come back as user
  messages; the last user message after `echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT` is the diff.
- v2: OpenAI tool calls `bash{command}` answered by `role: tool` messages (by `tool_call_id`),
  and a final `role: exit` message carrying the submission.
Task: the issue inside `messages[1]` (`<pr_description>`), demonstrations and the system prompt
skipped. Tool set: the one `bash` tool, with the system prompt's rules as its description. Label: left `unknown` here; `info.exit_status` (kept in `meta`) never decides success,
a SWE-bench harness report does (`labels.apply_verdict`).
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
    as_record,
    first_user_index,
    messages_of,
    openai_calls,
    text,
)
from extractors.readers._text import extract_issue, jsonish, split_fenced_action
from schemas import Outcome, Source, Trajectory, content_id

FORMATS = {"mini-swe-agent-1": 1, "mini-swe-agent-1.1": 2}


def _v1_turn(content: str) -> tuple[str, Call | None]:
    fenced = split_fenced_action(content)
    if fenced is None:
        return content.removeprefix("THOUGHT:").strip(), None
    thought, command = fenced
    return thought.removeprefix("THOUGHT:").strip(), Call("bash", {"command": command}, command)


def _model_name(info: dict[str, Any]) -> str:
    config = jsonish(info.get("config"))
    model = config.get("model") if isinstance(config, dict) else None
    model = jsonish(model)
    if isinstance(model, dict):
        return str(model.get("model_name") or model.get("name") or "")
    return str(info.get("model_name") or "")


def _bash_tool(system: str, major: int) -> dict[str, Any]:
    """mini-swe-agent's one tool: bash, described by the system prompt's rules (v1: one fenced block)."""
    rules = system.split("<format_example>", 1)[0].strip() or "Run one shell command."
    how = "one ```bash fenced block per reply" if major == 1 else "an OpenAI tool call `bash{command}`"
    return {
        "name": "bash",
        "description": rules[:1200],
        "signature": "bash(command: str)",
        "parameters": [
            {
                "name": "command",
                "type": "string",
                "description": f"One command (or commands joined with && or ||), sent as {how}.",
                "required": True,
            }
        ],
    }


@reader("mini_swe_agent", version=2, kind="swe", priority=5)
class MiniSweAgent:
    """mini-swe-agent trajectories, both message formats."""

    def __init__(self, max_observation_chars: int = DEFAULT_MAX_OBSERVATION_CHARS) -> None:
        self.max_observation_chars = max_observation_chars

    def sniff(self, record: Any) -> bool:
        fmt = record.get("trajectory_format") if isinstance(record, dict) else None
        return isinstance(fmt, str) and fmt.startswith("mini-swe-agent")

    def read(self, record: dict[str, Any], origin: Origin) -> Trajectory:
        record = as_record(record, "mini-swe-agent")
        fmt = record.get("trajectory_format")
        major = FORMATS.get(fmt) if isinstance(fmt, str) else None
        if major is None:
            raise ReadError(
                "unknown_version",
                f"trajectory_format {record.get('trajectory_format')!r} is not one of {', '.join(FORMATS)}",
            )
        msgs = [m for m in messages_of(record.get("messages"), "messages") if not m.get("is_demo")]
        info = as_dict(record.get("info"), "info")
        task_at = first_user_index(msgs)
        prompt = text(msgs[task_at].get("content"))
        system = next((text(m.get("content")) for m in msgs[:task_at] if m.get("role") == "system"), "")
        steps = StepBuilder(self.max_observation_chars)
        submission: str | None = None
        exit_status = info.get("exit_status")
        for m in msgs[task_at + 1 :]:
            role, content = m.get("role"), text(m.get("content"))
            if role == "assistant":
                calls = openai_calls(m)
                if calls:
                    steps.calls(content, calls)
                else:
                    steps.calls(*self._text_turn(content))
            elif role == "tool":
                steps.observation(
                    content, m.get("tool_call_id") if isinstance(m.get("tool_call_id"), str) else None
                )
            elif role == "user":
                steps.observation(content)
            elif role == "exit":
                extra = as_dict(m.get("extra"), "exit.extra")
                submission = extra.get("submission") if isinstance(extra.get("submission"), str) else content
                exit_status = extra.get("exit_status") or exit_status
        built = steps.build()
        patch = info.get("submission") if isinstance(info.get("submission"), str) else submission
        instance_id = str(
            record.get("instance_id")
            or Path(origin.file).name.removesuffix(".traj.json").removesuffix(".json")
        )
        meta = {"exit_status": exit_status, **steps.meta()} if exit_status is not None else steps.meta()
        if isinstance(info.get("model_stats"), dict):
            meta["model_stats"] = info["model_stats"]
        return Trajectory(
            trajectory_id=content_id(self.name, origin.id_path, origin.line, instance_id),
            kind="swe",
            task=extract_issue(prompt),
            system_prompt=system,
            prompt=prompt,
            steps=built,
            outcome=Outcome(),
            source=Source(
                format=self.name,
                reader_version=self.version,
                file=origin.file,
                line=origin.line,
                agent=f"mini-swe-agent {info.get('mini_version') or ('1.x' if major == 1 else '2.x')}",
                model=_model_name(info),
                instance_id=instance_id,
                native_id=instance_id,
            ),
            patch=patch if isinstance(patch, str) else None,
            tool_set=(_bash_tool(system, major),),
            meta=meta,
        )

    @staticmethod
    def _text_turn(content: str) -> tuple[str, list[Call]]:
        thought, call = _v1_turn(content)
        return thought, [call] if call else []
