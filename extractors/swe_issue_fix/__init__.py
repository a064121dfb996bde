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
cuts at the first newline and `;`, so anything longer could never match) whose numbers and file
paths all appear in the context before it (else exact match is unreachable: `target_not_derivable`).
Of the eligible steps at most `max_items_per_trajectory` are drawn with
`Random(h(seed, trajectory_id, task))`, so selection never depends on shard order; for `plan`,
steps rich in wrong plans of their own (a failed run of the same instance at the same point,
rule-made from this run's context: `observed.plan_candidates`) are drawn first: from the steps
with at least the first count of `OWN_CANDIDATE_TIERS` that `max_items_per_trajectory` steps of
the run reach (a run whose steps reach none: any eligible step). A step with that many options of
its own needs none of other runs' golds, which are off topic.

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
from extractors.swe_issue_fix.observed import Observed, observe_runs, plan_candidates, run_facts
from extractors.swe_issue_fix.patch_tasks import PATCH_TASKS, patch_items
from extractors.swe_issue_fix.plans import condense_plan, is_vague
from extractors.swe_issue_fix.tasks import SPECS
from schemas import Candidate, GoldStep, Problem, Step, Trajectory, content_id
from schemas.text import truncate_middle

#: What an action target names that the context must show: numbers and file paths.
_TARGET_TOKENS = re.compile(
    r"(?<![\w.-])(?:\d+|[\w.-]*/[\w./-]+|[\w-]+\.(?:py|txt|rst|cfg|toml|ini|json|yaml))(?![\w])"
)

#: Counts of wrong plans of its own instance or run that make a plan step rich, richest first: a
#: run's steps are drawn from those reaching the first count enough of its steps reach.
OWN_CANDIDATE_TIERS = (12, 9, 6, 2)


def richest(counts: dict[int, int], cap: int) -> list[int]:
    """The steps of `counts` (step -> own candidates) at the highest tier `cap` of them reach (all
    steps at any tier when fewer than `cap` reach even the last; none when no step does)."""
    for tier in OWN_CANDIDATE_TIERS:
        rich = [i for i, n in counts.items() if n >= tier]
        if len(rich) >= cap or tier == OWN_CANDIDATE_TIERS[-1]:
            return sorted(rich)
    return []


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


@extractor("swe_issue_fix", version=8, reads={"swe"}, tasks=SPECS)
class SweIssueFix:
    """Gold plans and commands from successful SWE issue-fixing runs."""

    def __init__(self) -> None:
        self.observed = Observed({}, {}, {})

    @staticmethod
    def observe(runs: Iterable[Trajectory]) -> Observed:
        """What failed runs did, by instance id: patches, plans, reproduction scripts (distractors)."""
        return observe_runs(runs)

    def use(self, observed: Observed) -> None:
        """Take the build-wide observations `observe` returned."""
        self.observed = observed

    def extract(self, traj: Trajectory, task: str, options: ExtractOptions) -> Iterator[GoldStep | Problem]:
        if (problem := unknown_task(self, traj, task)) is not None:
            yield problem
            return
        if task in PATCH_TASKS:
            yield from patch_items(traj, task, options, self.name, self.version, self.observed)
            return
        plans = [condense_plan(s) for s in traj.steps]
        eligible = [s.index for s in traj.steps if self._eligible(s, plans[s.index], task)]
        if task == "action":
            eligible, unreachable = self._derivable(traj, eligible)
            if unreachable:
                yield Problem(
                    where=location(traj),
                    stage="extract",
                    reason="target_not_derivable",
                    severity="info",
                    detail=f"action: {len(unreachable)} steps left out, their commands name what the context "
                    f"never shows: " + "; ".join(f"step {i}: {tok!r}" for i, tok in unreachable[:5]),
                )
        made: dict[int, tuple[Candidate, ...]] = {}
        rich = eligible
        if task == "plan":  # steps with wrong plans of their own instance or run first (not only other runs')
            facts = run_facts(traj)
            made = {i: plan_candidates(traj, i, plans, self.observed, facts) for i in eligible}
            rich = richest({i: len(made[i]) for i in eligible}, options.max_items_per_trajectory)
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
        cap = options.max_items_per_trajectory
        pick_from = rich or eligible  # a run with no step rich in wrong plans of its own still gives items
        chosen = sorted(rng.sample(pick_from, min(cap, len(pick_from))))
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
                candidates = made[i]
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
                candidates = ()
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
                self.name,
                self.version,
                traj,
                task,
                i,
                gold,
                {"trajs": trajs, **fields},
                options.seed,
                candidates=candidates,
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
            return len(plan.split()) >= 5 and not is_vague(plan)  # "I need to" + at least two words
        raw = step.action.raw.strip()
        return bool(step.thought.strip()) and "\n" not in raw and ";" not in raw

    @staticmethod
    def _derivable(traj: Trajectory, eligible: list[int]) -> tuple[list[int], list[tuple[int, str]]]:
        """Steps whose command's numbers and paths all appear in what came before (issue, thoughts,
        commands, outputs, this step's thought), and (step, token) for the others: an exact-match
        target the model cannot read anywhere (`sed -n '139,148p'` after no output naming 148) is unreachable."""
        seen = [traj.prompt or traj.task]
        keep: list[int] = []
        dropped: list[tuple[int, str]] = []
        for s in traj.steps:
            if s.index in eligible and s.action is not None:
                context = "\n".join([*seen, s.thought])
                missing = [t for t in _TARGET_TOKENS.findall(s.action.raw) if t not in context]
                if missing:
                    dropped.append((s.index, missing[0]))
                else:
                    keep.append(s.index)
            seen += [s.thought, s.action.raw if s.action else "", s.observation or ""]
        return keep, dropped

    @staticmethod
    def _tool_set(traj: Trajectory) -> str:
        if traj.tool_set:
            return json.dumps(list(traj.tool_set))
        names = sorted({s.action.tool for s in traj.steps if s.action and s.action.args})
        return json.dumps([{"name": n} for n in names])
