"""SWE issue fixing: the APTBench `issue_fix` tasks from successful SWE agent runs.

Reads: successful `swe` trajectories. Produces gold steps for
- `plan` (MCQ, 4 options): gold = the next step's intent as an "I need to ..." plan; context =
  the run so far in APTBench's plan form (every assistant turn replaced by `{"role":
  "assistant", "plan": ...}`), ending on an observation. Row fields: `uuid, trajs, choices, answer`.
- `action` (completion): gold = the next command line; context = the run so far in SWE-smith
  message form, cut right after the assistant's thought. Row fields: `uuid, tool_set, trajs, answer`.
- `locate`, `fix_patch`, `test_patch` (MCQ, 4 options): the code window the resolving patch edits,
  the patch itself, the agent's reproduction script; built in `patch_tasks` (see there).

Which steps become items (documented, seeded): a step is eligible when it has an action and, for
`plan`, a condensable plan of at least 2 words after "I need to" that is not vague ("try that
again"); for `action`, a non-empty thought and a one-line command with no `;` (APTBench's scorer
cuts at the first newline and `;`, so anything longer could never match).
Of the eligible steps at most `max_items_per_trajectory` are drawn with
`Random(h(seed, trajectory_id, task))`, so selection never depends on shard order.

Context budget (documented): observations over `max_observation_chars` keep head and tail
around an omission marker; if the JSON context still exceeds `max_context_tokens` (chars / 4),
the oldest steps are dropped (system prompt and task kept) until it fits.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterable, Iterator
from typing import Any

from extractors.base import ExtractOptions, estimate_tokens, extractor, gold_step, location, unknown_task
from extractors.swe_issue_fix.patch_tasks import PATCH_TASKS, failed_patches, patch_items
from schemas import GoldStep, Problem, Step, Trajectory, content_id
from schemas.text import truncate_middle

_INTENT = re.compile(
    r"\b(?:let me|let's|let us|i'll|i will|i need to|i should|we need to|we should|i'm going to|"
    r"i am going to|we'll|we will|i want to|we have to|i have to|i must|we must|now,? i)\s+(.*)",
    re.I | re.S,
)
_SENTENCE = re.compile(r"(?<=[.!?:])\s+|\n+")
_VAGUE = re.compile(r"^I need to (?:try|do|run|check) (?:that|this|it)(?: again| once more)?$", re.I)
_MARKUP = re.compile(r"^#+\s.*$|`{3}.*?`{3}", re.M | re.S)


def _clean_clause(clause: str) -> str:
    clause = clause.strip().rstrip(".:!;,")
    clause = re.sub(r"\s+", " ", clause)
    if len(clause) > 200:
        cut = max(clause.rfind(",", 0, 200), clause.rfind(" and ", 0, 200))
        clause = clause[: cut if cut > 40 else 200].rstrip(" ,")
    return clause


def _plan_from_action(step: Step) -> str:
    if step.action is None:
        return ""
    a = step.action
    raw = a.raw.strip().splitlines()[0] if a.raw.strip() else a.tool
    if a.tool == "str_replace_editor" or raw.startswith("str_replace_editor"):
        parts = raw.split()
        verb = {
            "view": "view",
            "create": "create",
            "str_replace": "edit",
            "insert": "edit",
            "undo_edit": "revert the edit to",
        }
        if len(parts) >= 3:
            return f"I need to {verb.get(parts[1], parts[1])} {parts[2]}"
    if a.tool in {"submit", "finish"} or raw == "submit":
        return "I need to submit the changes"
    if a.tool in {"open", "create"} and len(raw.split()) > 1:
        return f"I need to {a.tool} {raw.split()[1]}"
    if a.tool == "edit":
        return "I need to edit the open file"
    short = raw if len(raw) <= 80 else raw[:77] + "..."
    return f"I need to run `{short}`"


def condense_plan(step: Step) -> str:
    """Turn a step's thought into an "I need to ..." plan (from the action when no intent is stated)."""
    thought = _MARKUP.sub(" ", step.thought or "")
    for sentence in _SENTENCE.split(thought):
        m = _INTENT.search(sentence)
        if m:
            clause = _clean_clause(m.group(1))
            clause = re.sub(r"^(?:first|now|then|next|also)\s*,?\s+", "", clause, flags=re.I)
            if len(clause.split()) >= 2:
                return "I need to " + clause[0].lower() + clause[1:]
    return _plan_from_action(step)


def _call_id(step: Step) -> str | None:
    if step.action is None or not step.action.args:
        return None
    return step.action.call_id or f"call_{step.index}"


def _assistant_full(step: Step) -> dict[str, Any]:
    msg: dict[str, Any] = {
        "role": "assistant",
        "thought": step.thought,
        "action": step.action.raw if step.action else "",
        "agent": "main",
    }
    cid = _call_id(step)
    if cid and step.action is not None:
        msg["tool_calls"] = [
            {
                "index": 0,
                "function": {"arguments": json.dumps(step.action.args), "name": step.action.tool},
                "id": cid,
                "type": "function",
            }
        ]
    msg["message_type"] = "action"
    return msg


def _observation(step: Step, limit: int) -> dict[str, Any] | None:
    if step.observation is None:
        return None
    text = "OBSERVATION:\n" + truncate_middle(step.observation, limit)
    cid = _call_id(step)
    msg: dict[str, Any] = {
        "role": "tool" if cid else "user",
        "content": [{"type": "text", "text": text}],
        "agent": "main",
        "message_type": "observation",
    }
    if cid:
        msg["tool_call_ids"] = [cid]
    return msg


def _head(traj: Trajectory) -> list[dict[str, Any]]:
    head = []
    if traj.system_prompt:
        head.append(
            {
                "role": "system",
                "content": traj.system_prompt,
                "agent": "main",
                "message_type": "system_prompt",
            }
        )
    head.append(
        {
            "role": "user",
            "content": [{"type": "text", "text": traj.prompt or traj.task}],
            "agent": "main",
            "message_type": "observation",
        }
    )
    return head


def _fit(
    head: list[dict[str, Any]], turns: list[list[dict[str, Any]]], tail: list[dict[str, Any]], budget: int
) -> str | None:
    """Serialise head + turns + tail, dropping the oldest turns until it fits the budget."""
    for start in range(len(turns) + 1):
        msgs = head + [m for turn in turns[start:] for m in turn] + tail
        text = json.dumps(msgs)
        if estimate_tokens(text) <= budget:
            return text
    return None


@extractor("swe_issue_fix", version=1, reads={"swe"}, tasks=("plan", "action", *PATCH_TASKS))
class SweIssueFix:
    """Gold plans and commands from successful SWE issue-fixing runs."""

    def __init__(self) -> None:
        self.failed_patches: dict[str, tuple[str, ...]] = {}

    @staticmethod
    def observe(runs: Iterable[Trajectory]) -> dict[str, tuple[str, ...]]:
        """The patches of every failed run, by instance id (`fix_patch` distractors)."""
        return failed_patches(runs)

    def use(self, failed: dict[str, tuple[str, ...]]) -> None:
        """Take the build-wide failed patches `observe` returned."""
        self.failed_patches = failed

    def extract(self, traj: Trajectory, task: str, options: ExtractOptions) -> Iterator[GoldStep | Problem]:
        if (problem := unknown_task(self, traj, task)) is not None:
            yield problem
            return
        if task in PATCH_TASKS:
            failed = self.failed_patches.get(traj.source.instance_id, ())
            yield from patch_items(traj, task, options, self.name, self.version, failed)
            return
        plans = [condense_plan(s) for s in traj.steps]
        eligible = [s.index for s in traj.steps if self._eligible(s, plans[s.index], task)]
        if not eligible:
            yield Problem(
                where=f"{traj.source.file}" + (f":{traj.source.line}" if traj.source.line else ""),
                stage="extract",
                reason="no_eligible_steps",
                severity="info",
                detail=f"{task}: none of {len(traj.steps)} steps qualifies",
            )
            return
        rng = random.Random(content_id(options.seed, traj.trajectory_id, task))
        chosen = sorted(rng.sample(eligible, min(options.max_items_per_trajectory, len(eligible))))
        head = _head(traj)
        for i in chosen:
            step = traj.steps[i]
            if task == "plan":
                turns = [
                    [{"role": "assistant", "plan": plans[j]}] + self._obs_list(traj.steps[j], options)
                    for j in range(i)
                ]
                trajs = _fit(head, turns, [], options.max_context_tokens)
                gold, fields = plans[i], {}
            else:
                turns = [
                    [_assistant_full(traj.steps[j])] + self._obs_list(traj.steps[j], options)
                    for j in range(i)
                ]
                trajs = _fit(
                    head, turns, [{"role": "assistant", "thought": step.thought}], options.max_context_tokens
                )
                gold = step.action.raw.strip() if step.action else ""
                fields = {"tool_set": self._tool_set(traj)}
            where = location(traj)
            if trajs is None:
                yield Problem(
                    where=f"{where}#step{i}",
                    stage="extract",
                    reason="context_too_long",
                    severity="warning",
                    detail=f"{task}: system prompt and task alone exceed {options.max_context_tokens} tokens",
                )
                continue
            yield gold_step(
                self.name, self.version, traj, task, i, gold, {"trajs": trajs, **fields}, options.seed
            )

    @staticmethod
    def _obs_list(step: Step, options: ExtractOptions) -> list[dict[str, Any]]:
        obs = _observation(step, options.max_observation_chars)
        return [obs] if obs else []

    @staticmethod
    def _eligible(step: Step, plan: str, task: str) -> bool:
        if step.action is None or not step.action.raw.strip():
            return False
        if task == "plan":
            return len(plan.split()) >= 5 and not _VAGUE.match(plan)  # "I need to" + at least two words
        raw = step.action.raw.strip()
        return bool(step.thought.strip()) and "\n" not in raw and ";" not in raw

    @staticmethod
    def _tool_set(traj: Trajectory) -> str:
        if traj.tool_set:
            return json.dumps(list(traj.tool_set))
        names = sorted({s.action.tool for s in traj.steps if s.action and s.action.args})
        return json.dumps([{"name": n} for n in names])
