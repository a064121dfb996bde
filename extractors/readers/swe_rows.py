"""Hugging Face rows of SWE agent runs: SWE-smith, SWE-Gym (OpenHands sampled) and nebius.

Reads: a row (JSON object, JSONL line, JSON-list element or Parquet row) with `messages`
(SWE-smith: text-encoded `<function=...>` calls; SWE-Gym: OpenAI `tool_calls`) or `trajectory`
(nebius: roles system/user/ai with `text`, commands in a fenced block).
Label: the row's own verdict column (`resolved` or `target`, bools or "True"/"False").
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from extractors.base import Origin, ReadError, reader
from extractors.readers._text import (
    as_bool,
    extract_issue,
    first_word,
    jsonish,
    parse_text_call,
    render_call,
    split_fenced_action,
    text_of,
)
from schemas import Action, Outcome, Source, Step, Trajectory, content_id
from schemas.trajectory import trusted_call_step, trusted_model, trusted_step

_OBS_PREFIX = "OBSERVATION:\n"


def _messages(record: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
    if "messages" in record:
        msgs, style = jsonish(record["messages"]), "messages"
    else:
        msgs, style = jsonish(record["trajectory"]), "nebius"
    if not isinstance(msgs, list):
        raise ReadError(
            "wrong_type",
            f"`{'messages' if style == 'messages' else 'trajectory'}` must be a list, "
            f"got {type(msgs).__name__}",
        )
    if set(map(type, msgs)) - _DICT:  # one pass in C for the common case; the message at fault named
        for i, m in enumerate(msgs):
            if not isinstance(m, dict):
                raise ReadError("wrong_type", f"message {i} must be an object, got {type(m).__name__}")
    return msgs, style


_DICT = frozenset({dict})


def _content(m: dict[str, Any], style: str) -> str:
    if style == "messages" and type(content := m.get("content")) is str:
        return content
    if style == "nebius":
        return text_of(m.get("text") if m.get("text") is not None else m.get("system_prompt"))
    return text_of(m.get("content"))


def _steps(msgs: list[dict[str, Any]], style: str) -> tuple[tuple[Step, ...], bool]:
    """The steps of a run (one per assistant message, with the tool output after it) and whether a
    user message came before the first.

    The ingest hot path: one pass, a SWE-smith text call parsed inline, each Step and its Action
    built without validation (`trusted_step` / `trusted_call_step`): every value is of its field's type
    by construction (texts are `str` or `text_of` raised, the index an int, args a fresh dict of
    strings), so pydantic could only copy them, at twice the cost of the rest of the pass.
    """
    ai_role = "ai" if style == "nebius" else "assistant"
    plain = style == "messages"
    steps: list[Step] = []
    append = steps.append
    thought, action, call, started = "", None, None, False
    obs: str | list[str] | None = None  # one observation, or several (joined by newlines)
    seen_task = False
    for m in msgs:
        role = m.get("role")
        if role == ai_role:
            if started:
                observation = obs if obs is None or type(obs) is str else "\n".join(obs)
                if call is None:
                    append(trusted_step(len(steps), thought, action, observation))
                else:  # a text call: its Action built with its Step
                    append(trusted_call_step(len(steps), thought, *call, observation))
                obs = None
            started = True
            content = m.get("content")
            if (
                plain
                and type(content) is str
                and m.get("tool_calls") is None
                and (parsed := parse_text_call(content)) is not None
            ):
                thought, name, args = parsed
                command = args.get("command")
                call = (
                    name,
                    args,
                    command if name == "bash" and type(command) is str else render_call(name, args),
                )
            else:
                thought, action = _assistant_parts(m, style)
                call = None
        elif started and (role == "user" or role == "tool"):
            content = m.get("content") if plain else None
            text = (content if type(content) is str else _content(m, style)).removeprefix(_OBS_PREFIX)
            if obs is None:
                obs = text
            elif type(obs) is str:
                obs = [obs, text]
            else:
                obs.append(text)
        elif role == "user":
            seen_task = True
    if started:
        observation = obs if obs is None or type(obs) is str else "\n".join(obs)
        if call is None:
            append(trusted_step(len(steps), thought, action, observation))
        else:
            append(trusted_call_step(len(steps), thought, *call, observation))
    return tuple(steps), seen_task


def _assistant_parts(m: dict[str, Any], style: str) -> tuple[str, Action | None]:
    """(thought, action) of one assistant message."""
    content = _content(m, style)
    calls = m.get("tool_calls")
    if calls is not None:
        calls = jsonish(calls)
        if isinstance(calls, list) and calls and isinstance(calls[0], dict):
            fn = calls[0].get("function") or {}
            name = str(fn.get("name") or "")
            args = jsonish(fn.get("arguments"))
            args = args if isinstance(args, dict) else {}
            return content.strip(), Action(
                tool=name, args=args, raw=render_call(name, args), call_id=calls[0].get("id")
            )
    parsed = parse_text_call(content)
    if parsed is not None:
        thought, name, args = parsed
        # str / dict values parsed above: no re-validation (the ingest hot path)
        return thought, Action(tool=name, args=args, raw=render_call(name, args))
    fenced = split_fenced_action(content) if "```" in content else None
    if fenced is not None:
        thought, command = fenced
        return thought, Action(tool=first_word(command), raw=command)
    return content.strip(), None


@reader("swe_rows", version=1, kind="swe", priority=40)
class SweRows:
    """SWE-smith / SWE-Gym / nebius SWE-agent rows."""

    def sniff(self, record: Any) -> bool:
        if not isinstance(record, dict) or "history" in record:
            return False
        has_msgs = "messages" in record or "trajectory" in record
        has_id = "resolved" in record or "target" in record or "instance_id" in record
        return has_msgs and has_id and "trajectory_format" not in record and "query_answer" not in record

    def read(self, record: dict[str, Any], origin: Origin) -> Trajectory:
        msgs, style = _messages(record)
        system = next((_content(m, style) for m in msgs if m.get("role") == "system"), "")
        prompt = next((_content(m, style) for m in msgs if m.get("role") == "user"), "")
        if not prompt.strip():
            raise ReadError("missing_task", "no user message holding the task")
        steps, seen_task = _steps(msgs, style)
        if not seen_task:
            raise ReadError("missing_task", "no user message before the first assistant turn")

        verdict_key = "resolved" if "resolved" in record else ("target" if "target" in record else None)
        flag = as_bool(record.get(verdict_key)) if verdict_key else None
        if flag is None and isinstance(record.get("test_result"), dict):
            report = record["test_result"].get("report")
            if isinstance(report, dict):
                flag, verdict_key = as_bool(report.get("resolved")), "test_result.report.resolved"
        outcome = _outcome(flag, verdict_key)
        instance_id = str(record.get("instance_id") or "")
        native = str(
            record.get("traj_id")
            or record.get("id")
            or (f"{instance_id}/{record['run_id']}" if record.get("run_id") else instance_id)
        )
        model = str(
            record.get("model")
            or record.get("model_name")
            or str(record.get("run_id") or "").split("_maxiter")[0]
        )
        agent = "swe-agent" if style == "nebius" or "traj_id" in record else "openhands"
        patch = record.get("patch") or record.get("generated_patch")
        if patch is None and isinstance(record.get("test_result"), dict):
            patch = record["test_result"].get("git_patch")
        tools = jsonish(record.get("tools"))
        tool_set = tuple(t for t in tools if isinstance(t, dict)) if isinstance(tools, list) else ()
        source = {
            "format": self.name,
            "reader_version": self.version,
            "file": origin.file,
            "line": origin.line,
            "agent": agent,
            "model": model,
            "instance_id": instance_id,
            "native_id": native,
        }
        task = extract_issue(prompt)
        values = {
            "trajectory_id": content_id(self.name, origin.id_path, native or origin.line),
            "kind": "swe",
            "task": task,
            "system_prompt": system,
            "prompt": prompt,
            "steps": steps,
            "outcome": outcome,
            "source": source,
            "patch": patch if isinstance(patch, str) else None,
            "tool_set": tool_set,
            "meta": {k: record[k] for k in ("exit_status",) if k in record},
        }
        if _exact(source, values, tool_set):
            # every value of the field's type exactly (checked here, or by construction): validation
            # would only copy them
            values["source"] = trusted_model(Source, source)
            return trusted_model(Trajectory, values)
        values["source"] = Source(**source)
        return Trajectory(**values)


@lru_cache(maxsize=16)
def _outcome(flag: bool | None, verdict_key: str | None) -> Outcome:
    """A row's Outcome: one of a few, each built once (models are frozen, so runs may share one, as
    every run without a verdict shares the field's default)."""
    if flag is None:
        return trusted_model(Outcome, {})
    return trusted_model(
        Outcome,
        {
            "label": "success" if flag else "failure",
            "signal": f"row:{verdict_key}",
            "reason": "resolved" if flag else "unresolved",
        },
    )


def _exact(source: dict[str, Any], values: dict[str, Any], tool_set: tuple[Any, ...]) -> bool:
    """Whether a row's values are of their fields' types exactly (no `str` subclass, no bool line,
    tools with `str` keys), as `trusted_model` needs; otherwise validation converts or refuses them."""
    line, patch = source["line"], values["patch"]
    return (
        type(source["file"]) is str
        and type(source["model"]) is str
        and type(source["instance_id"]) is str
        and type(source["native_id"]) is str
        and (line is None or type(line) is int)
        and type(values["task"]) is str
        and type(values["system_prompt"]) is str
        and type(values["prompt"]) is str
        and (patch is None or type(patch) is str)
        and all(type(t) is dict and all(type(k) is str for k in t) for t in tool_set)
    )
