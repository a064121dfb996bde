"""APTBench deep-research rows (`summ_ans_*`, `plan_*`), rebuilt into whole trajectories (FORMATS.md §9).

Reads: a row `{source, traj_id, query, query_answer, trajectory: JSON string of
[{planning, execution: {name, args}, observation}], ...}`. A `summ_ans` row (with `answer`) holds
the complete evidence-gathering trajectory and the final answer; a `plan` row (with `next_step`)
holds a prefix of `traj_len` steps, the gold next step, and five wrong alternatives (`choices`).
Steps: thought = `planning`, action = `execution.name(args)`, observation as given
(`task_complete` has none). Label: the `answer` matched against `query_answer` by
`answers.judge_answer` (the gold is often a sentence, so many rows are `needs_judge`); a
trajectory known only from plan rows has no final answer: `unknown` / `no_final_answer`.

Design (grouping across rows and files while the build streams): one trajectory is keyed by
`(source, traj_id, query)` (FORMATS §9.1; `traj_id` alone collides across sources) and its
`trajectory_id` is derived from that key alone, so every row of it, in any file, carries the same
id. The reader stays one-row-in, one-trajectory-out: a summ_ans row gives the whole run, a plan
row gives its prefix + next step, marked in `meta["aptbench"]`. `merge_rows` then runs over the
read stream (the flow's label stage calls it): everything that is not an APTBench row passes
through at once; APTBench rows are held, one entry per key, and emitted when the stream ends.
The spine is the summ_ans row, else the longest plan prefix + next step; plan rows that
disagree with the spine are reported (`conflicting_plan_row`, a warning) and dropped, and the
wrong alternatives of the agreeing ones are kept in `meta["wrong_next_steps"]` by step index.
Memory grows with the number of distinct deep-research trajectories (a few KB each), never with
the number of rows or of other records.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any

import orjson

from extractors.base import Origin, ReadError, reader
from extractors.labels.answers import gold_aliases, judge_answer
from extractors.readers._chat import (
    DEFAULT_MAX_OBSERVATION_CHARS,
    Call,
    StepBuilder,
    as_list,
    as_record,
    render,
)
from extractors.readers._text import jsonish
from schemas import Outcome, Problem, Source, Step, Trajectory, content_id

NAME = "aptbench_dr"
_CHOICE = re.compile(r"^\(([A-Z])\)\s*(.*)$")


def _step_of(raw: Any, where: str) -> tuple[str, Call | None, str | None]:
    raw = jsonish(raw)
    if not isinstance(raw, dict):
        raise ReadError("wrong_type", f"{where} must be an object, got {type(raw).__name__}")
    execution = jsonish(raw.get("execution"))
    call = None
    if isinstance(execution, dict) and isinstance(execution.get("name"), str):
        args = jsonish(execution.get("args"))
        args = args if isinstance(args, dict) else {}
        call = Call(execution["name"], args, render(execution["name"], args))
    elif execution is not None:
        raise ReadError("wrong_type", f"{where}.execution must be an object with a `name`")
    obs = raw.get("observation")
    planning = raw.get("planning")
    return planning if isinstance(planning, str) else "", call, obs if isinstance(obs, str) else None


def _choices(row: dict[str, Any]) -> list[dict[str, Any]]:
    """The plan row's wrong alternatives, as `{planning, execution}` objects."""
    raw, gold = row.get("choices"), row.get("answer")
    if not isinstance(raw, str):
        return []
    wrong = []
    for line in raw.splitlines():
        m = _CHOICE.match(line.strip())
        if m and m.group(1) != gold:
            parsed = jsonish(m.group(2))
            wrong.append(parsed if isinstance(parsed, dict) else {"text": m.group(2)})
    return wrong


def trajectory_key(row: dict[str, Any]) -> str:
    """The id shared by every row of one APTBench trajectory."""
    return content_id(NAME, row.get("source"), row.get("traj_id"), row.get("query"))


@reader(NAME, version=1, kind="dr", priority=20)
class AptbenchDR:
    """APTBench deep-research rows."""

    def __init__(self, max_observation_chars: int = DEFAULT_MAX_OBSERVATION_CHARS) -> None:
        self.max_observation_chars = max_observation_chars

    def sniff(self, record: Any) -> bool:
        return (
            isinstance(record, dict)
            and "query" in record
            and "trajectory" in record
            and ("query_answer" in record or "next_step" in record)
        )

    def read(self, record: dict[str, Any], origin: Origin) -> Trajectory:
        record = as_record(record, "APTBench")
        query = record.get("query")
        if not isinstance(query, str) or not query.strip():
            raise ReadError("missing_task", "`query` is missing or empty")
        raw_steps = as_list(record.get("trajectory"), "trajectory")
        is_plan = record.get("next_step") is not None
        if is_plan:
            raw_steps = [*raw_steps, record["next_step"]]
        steps = StepBuilder(self.max_observation_chars)
        for i, raw in enumerate(raw_steps):
            thought, call, obs = _step_of(
                raw, f"trajectory[{i}]" if not is_plan or i < len(raw_steps) - 1 else "next_step"
            )
            steps.action(thought, call)
            if obs is not None:
                steps.observation(obs)
        golds = gold_aliases(record.get("query_answer"))
        answer = record.get("answer") if not is_plan and isinstance(record.get("answer"), str) else None
        if is_plan:
            outcome = Outcome(label="unknown", signal="aptbench:plan_rows", reason="no_final_answer")
        else:
            outcome = judge_answer(answer, golds).outcome()
        built = steps.build()
        native = f"{record.get('source', '')}/{record.get('traj_id', '')}"
        tool_set = (
            tuple(t for t in (jsonish(record.get("tool_set")) or ()) if isinstance(t, dict))
            if isinstance(jsonish(record.get("tool_set")), list)
            else ()
        )
        meta: dict[str, Any] = {
            "aptbench": {
                "role": "plan" if is_plan else "summ_ans",
                "uuid": record.get("uuid"),
                "qid": record.get("qid"),
                "origin": str(origin),
            },
            **steps.meta(),
        }
        if is_plan:
            meta["wrong_next_steps"] = {str(len(built) - 1): _choices(record)}
        return Trajectory(
            trajectory_id=trajectory_key(record),
            kind="dr",
            task=query.strip(),
            prompt=query,
            steps=built,
            outcome=outcome,
            source=Source(
                format=self.name,
                reader_version=self.version,
                file=origin.file,
                line=origin.line,
                agent="aptbench",
                model=str(record.get("source") or ""),
                instance_id=native,
                native_id=native,
            ),
            final_answer=answer,
            gold_answer=golds[0] if golds else None,
            tool_set=tool_set,
            meta=meta,
        )


def _signature(step: Step, with_observation: bool) -> bytes:
    action = step.action
    return orjson.dumps(
        [
            step.thought.strip(),
            action.tool if action else None,
            action.args if action else None,
            (step.observation or "").strip() if with_observation else None,
        ],
        option=orjson.OPT_SORT_KEYS,
    )


def _agrees(plan: Trajectory, spine: Trajectory) -> bool:
    """A plan row's prefix (with observations) and next step (without) match the spine's steps."""
    n = len(plan.steps)
    if n > len(spine.steps):
        return False
    return all(
        _signature(a, i < n - 1) == _signature(b, i < n - 1)
        for i, (a, b) in enumerate(zip(plan.steps, spine.steps[:n], strict=True))
    )


def _role(t: Trajectory) -> str:
    info = t.meta.get("aptbench")
    return info.get("role", "") if isinstance(info, dict) else ""


def merge_rows(items: Iterable[Any]) -> Iterator[Any]:
    """Pass everything through, holding APTBench rows to emit one merged trajectory per key at the end."""
    groups: dict[str, list[Trajectory]] = {}
    for item in items:
        if isinstance(item, Trajectory) and item.source.format == NAME and _role(item):
            groups.setdefault(item.trajectory_id, []).append(item)
        else:
            yield item
    for rows in groups.values():
        yield from _merge_group(rows)


def _merge_group(rows: list[Trajectory]) -> Iterator[Trajectory | Problem]:
    full = [t for t in rows if _role(t) == "summ_ans"]
    plans = sorted((t for t in rows if _role(t) == "plan"), key=lambda t: -len(t.steps))
    spine = full[0] if full else plans[0]
    wrong: dict[str, list[Any]] = {}
    for plan in plans:
        if plan is not spine and not _agrees(plan, spine):
            yield Problem(
                where=plan.meta["aptbench"]["origin"],
                stage="read",
                reason="conflicting_plan_row",
                severity="warning",
                detail=f"{plan.meta['aptbench'].get('qid')}: its prefix or next step "
                f"differs from the trajectory's spine ({_role(spine)} row); dropped",
            )
            continue
        for k, v in plan.meta.get("wrong_next_steps", {}).items():
            wrong.setdefault(k, []).extend(v)
    meta = {**spine.meta, "wrong_next_steps": wrong, "aptbench_rows": len(rows)}
    yield spine.model_copy(update={"meta": meta})
    yield from full[1:]  # duplicate summ_ans rows stay visible as duplicates of the same trajectory
