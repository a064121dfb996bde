"""Builders for review-queue tests: real `Question`s (valid APTBench rows), a pinned clock, a filled queue."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from annotations import Queue
from schemas import Distractor, Provenance, Question

SCENARIO = "swe_issue_fix"


class Clock:
    """A deterministic clock: every call is one second after the previous one."""

    def __init__(self, start: datetime = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)) -> None:
        self.now = start

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


def trajs(*steps: dict[str, Any]) -> str:
    """A `trajs` field as APTBench stores it: a JSON string of chat messages."""
    base = [
        {"role": "system", "content": "You solve coding tasks."},
        {"role": "user", "content": [{"type": "text", "text": "Fix `evaluate('5 - 2')` returning 7."}]},
    ]
    return json.dumps(base + list(steps))


def question(
    n: int,
    task: str = "plan",
    *,
    gold: str | None = None,
    options: list[str] | None = None,
    gold_index: int = 1,
    context: str | None = None,
    source: str = "swe_rows",
    instance: str | None = None,
    **overrides: Any,
) -> Question:
    """Item number `n` of `task`: a plan MCQ with four options, or an action completion."""
    steps = trajs({"role": "assistant", "plan": context or f"I need to look at module {n}"})
    prov = Provenance(
        source_file=f"/data/runs/{n}.jsonl",
        source_line=n + 1,
        source_format=source,
        instance_id=instance or f"repo__repo-{n}",
        agent="swe-agent",
        extractor=SCENARIO,
        generator="offline" if task == "plan" else "",
        generator_version=1 if task == "plan" else 0,
    )
    if task == "plan":
        gold = gold or f"I need to fix the operator table in ops_{n}.py"
        opts = options or [
            f"I need to open the writer module {n}",
            gold,
            f"I need to submit the changes {n}",
            f"I need to rerun the script {n}",
        ]
        data: dict[str, Any] = dict(
            form="mcq",
            fields={"trajs": steps},
            gold=opts[gold_index],
            options=tuple(opts),
            gold_index=gold_index,
            distractors=tuple(
                Distractor(text=o, origin=f"other_step:{n}-{i}")
                for i, o in enumerate(opts)
                if i != gold_index
            ),
        )
    else:
        data = dict(
            form="completion",
            fields={"tool_set": '[{"name": "bash"}]', "trajs": steps},
            gold=gold or f"grep -n '-' /testbed/ops_{n}.py",
        )
    data.update(
        item_id=f"{task}-{n:04d}",
        scenario=SCENARIO,
        task=task,
        trajectory_id=f"traj-{n}",
        step_index=2,
        provenance=prov,
    )
    data.update(overrides)
    return Question(**data)


def filled_queue(
    path: Path, n_plan: int = 3, n_action: int = 2, reviews_per_item: int = 1, clock: Clock | None = None
) -> Queue:
    """A queue at `path` holding `n_plan` plan items and `n_action` action items."""
    q = Queue(path, clock=clock or Clock())
    if reviews_per_item != 1:
        q.set_reviews_per_item(reviews_per_item)
    q.enqueue(
        [question(i) for i in range(n_plan)] + [question(i, "action") for i in range(n_action)], batch="v1"
    )
    return q
