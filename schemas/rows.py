"""Explicit Arrow schemas of candidate and published rows, per task.

Each task's row carries exactly the APTBench field names and types of that task (in the
official key order, `APTBENCH.md` §4, as the scenario's TaskSpec declares them), so APTBench's own
evaluation code reads our export unchanged, followed by aptforge's metadata and provenance columns.
Arrow never infers a type.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from schemas.ids import content_id, uuid_for
from schemas.items import Item
from schemas.questions import Question
from schemas.tasks import task_spec

_ARROW = {"str": pa.string(), "int": pa.int64()}

#: aptforge's own columns, after the APTBench ones.
META_FIELDS: tuple[pa.Field, ...] = (
    pa.field("item_id", pa.string(), nullable=False),
    pa.field("content_hash", pa.string(), nullable=False),
    pa.field("scenario", pa.string(), nullable=False),
    pa.field("task", pa.string(), nullable=False),
    pa.field("trajectory_id", pa.string(), nullable=False),
    pa.field("step_index", pa.int64(), nullable=False),
    pa.field("gold", pa.string(), nullable=False),
    pa.field("options", pa.list_(pa.string()), nullable=False),
    pa.field("gold_index", pa.int64(), nullable=True),
    pa.field("distractor_origins", pa.list_(pa.string()), nullable=False),
    pa.field("status", pa.string(), nullable=False),
    pa.field("source_file", pa.string(), nullable=False),
    pa.field("source_line", pa.int64(), nullable=True),
    pa.field("source_format", pa.string(), nullable=False),
    pa.field("reader_version", pa.int64(), nullable=False),
    pa.field("instance_id", pa.string(), nullable=False),
    pa.field("agent", pa.string(), nullable=False),
    pa.field("agent_model", pa.string(), nullable=False),
    pa.field("outcome_signal", pa.string(), nullable=False),
    pa.field("extractor", pa.string(), nullable=False),
    pa.field("extractor_version", pa.int64(), nullable=False),
    pa.field("generator", pa.string(), nullable=False),
    pa.field("generator_version", pa.int64(), nullable=False),
    pa.field("prompt_hash", pa.string(), nullable=False),
    pa.field("model", pa.string(), nullable=False),
    pa.field("seed", pa.int64(), nullable=False),
    pa.field("tokens_in", pa.int64(), nullable=False),
    pa.field("tokens_out", pa.int64(), nullable=False),
    pa.field("cost_usd", pa.float64(), nullable=False),
)


def aptbench_schema(scenario: str, task: str) -> pa.Schema:
    """Arrow schema of the APTBench part of a task's rows."""
    spec = task_spec(scenario, task)
    return pa.schema([pa.field(name, _ARROW[kind], nullable=False) for name, kind in spec.fields])


def candidate_schema(scenario: str, task: str) -> pa.Schema:
    """Arrow schema of candidate (and published) rows: APTBench fields, then metadata."""
    return pa.schema(list(aptbench_schema(scenario, task)) + list(META_FIELDS))


def aptbench_fields(question: Question) -> dict[str, Any]:
    """The APTBench row of a question, keys in official order."""
    spec = task_spec(question.scenario, question.task)
    values: dict[str, Any] = dict(question.fields)
    values["uuid"] = uuid_for(question.item_id)
    if spec.form == "mcq":
        values["choices"] = question.render_choices(spec.choices_sep)
    values[spec.answer_key] = question.answer
    row: dict[str, Any] = {}
    for name, kind in spec.fields:
        if name not in values:
            raise ValueError(
                f"{question.scenario}/{question.task} item {question.item_id} lacks field {name!r}"
            )
        value = values[name]
        row[name] = int(value) if kind == "int" else str(value)
    return row


def content_hash(question: Question) -> str:
    """h(rendered row fields, choices, answer): what a reviewer verifies."""
    return content_id(aptbench_fields(question) | {"uuid": ""})


def question_row(question: Question, status: str = "pending") -> dict[str, Any]:
    """One candidate row: APTBench fields, then aptforge metadata and provenance."""
    p = question.provenance
    row = aptbench_fields(question)
    row.update(
        item_id=question.item_id,
        content_hash=content_hash(question),
        scenario=question.scenario,
        task=question.task,
        trajectory_id=question.trajectory_id,
        step_index=question.step_index,
        gold=question.gold,
        options=list(question.options),
        gold_index=question.gold_index,
        distractor_origins=[d.origin for d in question.distractors],
        status=status,
        source_file=p.source_file,
        source_line=p.source_line,
        source_format=p.source_format,
        reader_version=p.reader_version,
        instance_id=p.instance_id,
        agent=p.agent,
        agent_model=p.agent_model,
        outcome_signal=p.outcome_signal,
        extractor=p.extractor,
        extractor_version=p.extractor_version,
        generator=p.generator,
        generator_version=p.generator_version,
        prompt_hash=p.prompt_hash,
        model=p.model,
        seed=p.seed,
        tokens_in=p.tokens_in,
        tokens_out=p.tokens_out,
        cost_usd=p.cost_usd,
    )
    return row


def rows_table(scenario: str, task: str, rows: list[dict[str, Any]]) -> pa.Table:
    """Build a table with the explicit schema (never inferred; an empty task still has columns)."""
    return pa.Table.from_pylist(rows, schema=candidate_schema(scenario, task))


def item_of(question: Question, status: str = "pending") -> Item:
    """Wrap a question as a reviewable item."""
    return Item(question=question, content_hash=content_hash(question), status=status)  # type: ignore[arg-type]
