"""Schemas: frozen models, explicit Arrow schemas, content hashes, Parquet round trips."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pydantic import ValidationError

from schemas import (
    Distractor,
    Problem,
    Provenance,
    Question,
    candidate_schema,
    content_hash,
    question_row,
    registered_tasks,
    rows_table,
    uuid_for,
)
from schemas.rows import aptbench_fields


def _question(**overrides) -> Question:
    base = dict(
        item_id="abc123",
        scenario="swe_issue_fix",
        task="plan",
        form="mcq",
        trajectory_id="t1",
        step_index=2,
        fields={"trajs": '[{"role": "user"}]'},
        gold="I need to view the parser",
        options=(
            "I need to run the tests",
            "I need to view the parser",
            "I need to submit",
            "I need to edit x",
        ),
        gold_index=1,
        distractors=(Distractor(text="I need to run the tests", origin="other_trajectory:s1"),),
        provenance=Provenance(
            source_file="a.traj", source_format="swe_agent_traj", extractor="swe_issue_fix"
        ),
    )
    base.update(overrides)
    return Question(**base)


def test_models_are_frozen_and_refuse_unknown_fields():
    p = Problem(where="f:1", stage="read", reason="invalid_json")
    with pytest.raises(ValidationError):
        p.reason = "other"  # type: ignore[misc]
    with pytest.raises(ValidationError):
        Problem(where="f", stage="read", reason="x", colour="red")  # type: ignore[call-arg]


def test_a_plan_row_has_the_aptbench_keys_in_order_then_metadata():
    row = question_row(_question())
    assert list(row)[:4] == ["uuid", "trajs", "choices", "answer"]
    assert row["answer"] == "B"
    assert row["choices"].startswith("(A) I need to run the tests\n(B) I need to view the parser\n(C) ")
    assert all(isinstance(row[k], str) for k in ("uuid", "trajs", "choices", "answer"))
    assert row["uuid"] == uuid_for("abc123")


def test_the_content_hash_changes_with_the_options_but_not_with_provenance():
    q = _question()
    moved = _question(options=q.options[::-1], gold_index=2)
    other_prov = _question(provenance=q.provenance.model_copy(update={"source_file": "b.traj"}))
    assert content_hash(q) != content_hash(moved)
    assert content_hash(q) == content_hash(other_prov)


def test_rows_round_trip_through_parquet_with_the_explicit_schema(tmp_path):
    rows = [question_row(_question()), question_row(_question(item_id="def456"))]
    table = rows_table("swe_issue_fix", "plan", rows)
    assert table.schema.equals(candidate_schema("swe_issue_fix", "plan"))
    pq.write_table(table, tmp_path / "p.parquet")
    back = pq.read_table(tmp_path / "p.parquet")
    assert back.to_pylist() == rows


def test_an_empty_task_still_has_its_columns_never_inferred_types():
    table = rows_table("swe_issue_fix", "action", [])
    assert table.num_rows == 0
    assert table.schema.field("options").type == pa.list_(pa.string())
    assert table.schema.field("tool_set").type == pa.string()


def test_a_completion_question_answers_with_its_gold_text():
    q = _question(
        task="action",
        form="completion",
        options=(),
        gold_index=None,
        distractors=(),
        fields={"trajs": "[]", "tool_set": "[]"},
        gold="ls -la /testbed",
    )
    row = aptbench_fields(q)
    assert list(row) == ["uuid", "tool_set", "trajs", "answer"]
    assert row["answer"] == "ls -la /testbed"


def test_a_row_missing_a_declared_field_is_refused():
    q = _question(fields={})
    with pytest.raises(ValueError, match="lacks field 'trajs'"):
        aptbench_fields(q)


def test_every_task_spec_declares_uuid_and_its_answer_key():
    for (scenario, task), spec in registered_tasks().items():
        names = [n for n, _ in spec.fields]
        assert "uuid" in names, (scenario, task)
        assert spec.answer_key in names, (scenario, task)
        assert ("choices" in names) == (spec.form == "mcq"), (scenario, task)
