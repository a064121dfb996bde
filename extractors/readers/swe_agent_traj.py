"""SWE-agent `.traj` files, v0.x and v1.x, text and function-calling histories.

Reads: one JSON object with `history` and (`trajectory` | `info` | `replay_config`).
Task: `replay_config.problem_statement.text` (v1), else the first non-demonstration user
message. Steps: `trajectory[i].{thought, action, observation}`, with the tool name and args
taken from the matching function call in `history` when there is one; files that only have a
`history` are rebuilt from it. Label: left `unknown` here; a harness report decides it.
"""

from __future__ import annotations

from typing import Any

from extractors.base import Origin, ReadError, reader
from extractors.readers._text import as_bool, extract_issue, first_word, jsonish, text_of
from schemas import Action, Outcome, Source, Step, Trajectory, content_id


def _history_messages(history: list[Any]) -> list[dict[str, Any]]:
    msgs = []
    for i, m in enumerate(history):
        if not isinstance(m, dict):
            raise ReadError("wrong_type", f"history[{i}] must be an object, got {type(m).__name__}")
        if as_bool(m.get("is_demo")):
            continue
        if m.get("agent") not in (None, "main", "primary"):
            continue
        msgs.append(m)
    return msgs


def _tool_call(msg: dict[str, Any]) -> tuple[str, dict[str, Any], str | None] | None:
    calls = jsonish(msg.get("tool_calls"))
    if not isinstance(calls, list) or not calls or not isinstance(calls[0], dict):
        return None
    fn = calls[0].get("function") or {}
    name = fn.get("name") if isinstance(fn, dict) else None
    if not isinstance(name, str):
        return None
    args = jsonish(fn.get("arguments"))
    return name, args if isinstance(args, dict) else {}, calls[0].get("id")


def _action(raw: str, call: tuple[str, dict[str, Any], str | None] | None) -> Action | None:
    if not raw.strip() and call is None:
        return None
    if call is not None:
        name, args, call_id = call
        return Action(tool=name, args=args, raw=raw or name, call_id=call_id)
    return Action(tool=first_word(raw), raw=raw)


@reader("swe_agent_traj", version=1, kind="swe", priority=10)
class SweAgentTraj:
    """SWE-agent trajectory files (`<instance_id>.traj`)."""

    def sniff(self, record: Any) -> bool:
        return (
            isinstance(record, dict)
            and "history" in record
            and "trajectory_format" not in record
            and "messages" not in record
            and any(k in record for k in ("trajectory", "info", "replay_config", "environment"))
        ) or (isinstance(record, dict) and set(record) == {"history"})

    def read(self, record: dict[str, Any], origin: Origin) -> Trajectory:
        history = record.get("history")
        if not isinstance(history, list):
            raise ReadError("wrong_type", f"`history` must be a list, got {type(history).__name__}")
        steps_raw = record.get("trajectory", [])
        if steps_raw is None:
            steps_raw = []
        if not isinstance(steps_raw, list):
            raise ReadError("wrong_type", f"`trajectory` must be a list, got {type(steps_raw).__name__}")
        info = record.get("info") or {}
        if not isinstance(info, dict):
            raise ReadError("wrong_type", f"`info` must be an object, got {type(info).__name__}")
        replay = jsonish(record.get("replay_config"))
        replay = replay if isinstance(replay, dict) else {}
        msgs = _history_messages(history)
        v1 = bool(replay) or any("message_type" in m for m in msgs)

        system = next((text_of(m.get("content")) for m in msgs if m.get("role") == "system"), "")
        prompt = next((text_of(m.get("content")) for m in msgs if m.get("role") == "user"), "")
        problem = replay.get("problem_statement") if isinstance(replay.get("problem_statement"), dict) else {}
        task = problem.get("text") if isinstance(problem.get("text"), str) else extract_issue(prompt)
        if not task.strip():
            raise ReadError(
                "missing_task", "no problem statement in replay_config and no user message in history"
            )

        actions = [m for m in msgs if m.get("role") == "assistant" and ("action" in m or m.get("tool_calls"))]
        steps = self._steps(steps_raw, actions, msgs)

        stem = origin.file.rsplit("/", 1)[-1].removesuffix(".traj")
        instance_id = str(problem.get("id") or stem)
        agent_cfg = replay.get("agent") if isinstance(replay.get("agent"), dict) else {}
        model_cfg = agent_cfg.get("model") if isinstance(agent_cfg.get("model"), dict) else {}
        version = info.get("swe_agent_version") or ("1.x" if v1 else "0.x")
        submission = info.get("submission")
        meta = {k: info[k] for k in ("exit_status", "model_stats") if k in info}
        source = Source(
            format=self.name,
            reader_version=self.version,
            file=origin.file,
            line=origin.line,
            agent=f"swe-agent {version}",
            model=str(model_cfg.get("name") or ""),
            instance_id=instance_id,
            native_id=instance_id,
        )
        return Trajectory(
            trajectory_id=content_id(self.name, origin.id_path, origin.line, instance_id),
            kind="swe",
            task=task.strip(),
            system_prompt=system,
            prompt=prompt,
            steps=tuple(steps),
            outcome=Outcome(),
            source=source,
            patch=submission if isinstance(submission, str) else None,
            meta=meta,
        )

    @staticmethod
    def _steps(steps_raw: list[Any], actions: list[dict[str, Any]], msgs: list[dict[str, Any]]) -> list[Step]:
        steps: list[Step] = []
        if steps_raw:
            aligned = len(actions) == len(steps_raw)
            for i, s in enumerate(steps_raw):
                if not isinstance(s, dict):
                    raise ReadError(
                        "wrong_type", f"trajectory[{i}] must be an object, got {type(s).__name__}"
                    )
                raw = s.get("action") if isinstance(s.get("action"), str) else ""
                call = _tool_call(actions[i]) if aligned else None
                obs = s.get("observation")
                steps.append(
                    Step(
                        index=i,
                        thought=str(s.get("thought") or ""),
                        action=_action(raw, call),
                        observation=obs if isinstance(obs, str) else None,
                    )
                )
            return steps
        # history-only files: pair each assistant action with the observations after it
        pending: dict[str, Any] | None = None
        observations: list[str] = []
        for m in msgs + [{"role": "assistant", "_end": True}]:
            if m.get("role") == "assistant":
                if pending is not None:
                    raw = pending.get("action") if isinstance(pending.get("action"), str) else ""
                    steps.append(
                        Step(
                            index=len(steps),
                            thought=str(pending.get("thought") or text_of(pending.get("content"))),
                            action=_action(raw, _tool_call(pending)),
                            observation="\n".join(observations) if observations else None,
                        )
                    )
                pending, observations = (None if m.get("_end") else m), []
            elif m.get("role") in ("tool", "user") and pending is not None:
                observations.append(text_of(m.get("content")))
        return steps
