"""`aptforge build configs/dr.yaml` end to end on the bundled samples: a new scenario with no flow edit."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from flows.cli import app
from schemas import candidate_schema, task_spec

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def built(prefect_harness, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dr")
    result = CliRunner().invoke(app, ["build", str(ROOT / "configs" / "dr.yaml"), "--out", str(out)])
    assert result.exit_code == 0, result.output
    return out / "dr" / "v0.1.0"


@pytest.mark.flow
def test_the_dr_build_writes_plan_and_summ_ans_rows_with_aptbench_deepresearch_fields(built):
    report = json.loads((built / "report.json").read_text())
    assert report["questions_by_task"]["plan"] >= 4 and report["questions_by_task"]["summ_ans"] >= 3
    assert report["dropped_by_reason"].get("wrong_number") == 1  # the tape with a wrong answer is not used
    for task in ("plan", "summ_ans"):
        table = pq.read_table(built / "candidates" / f"{task}.parquet")
        assert table.schema.equals(candidate_schema("dr", task))
        keys = list(task_spec("dr", task).field_names)
        assert table.column_names[: len(keys)] == keys
        for row in table.to_pylist():
            assert isinstance(row["traj_id"], int) and row["traj_len"] == len(json.loads(row["trajectory"]))
            zh = any("\u4e00" <= ch <= "\u9fff" for ch in row["query"])
            assert any("\u4e00" <= ch <= "\u9fff" for ch in row["question_instruct"]) == zh
            if task == "plan":
                assert len(row["options"]) == 6 and row["answer"] == "ABCDEF"[row["gold_index"]]
                assert row["next_step"] == row["gold"] == row["options"][row["gold_index"]]
                assert row["choices"].split("\n")[row["gold_index"]] == f"({row['answer']}) {row['gold']}"
                assert row["qid"] == f"traj_{row['traj_id']}_step_{row['traj_len'] - 1}"
            else:
                assert row["answer"] == row["gold"] and "]" not in row["answer"]


@pytest.mark.flow
def test_rows_rebuilt_from_aptbench_keep_their_real_wrong_steps_among_the_options(built):
    rows = pq.read_table(built / "candidates" / "plan.parquet").to_pylist()
    zh = [r for r in rows if r["source"].startswith("aptbench_dr") and "青石镇" in r["query"]]
    assert zh, "the bundled Chinese APTBench rows give plan items"
    written = {
        line.split(") ", 1)[1]
        for f in (ROOT / "extractors/samples/dr/aptbench_rows").glob("plan_*.jsonl")
        for row in map(json.loads, f.read_text(encoding="utf-8").splitlines())
        for line in row["choices"].split("\n")
    }
    assert any(opt in written for r in zh for i, opt in enumerate(r["options"]) if i != r["gold_index"])
