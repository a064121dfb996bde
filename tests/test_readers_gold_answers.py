"""Gold-answer files beside deep-research runs: read as a gold source and joined to the runs."""

from __future__ import annotations

import json
from pathlib import Path

from extractors.discovery import discover_readers
from extractors.ingest.records import find_inputs
from flows import stages

FIX = Path(__file__).parent / "fixtures" / "webdancer" / "sample_traj.jsonl"


def _runs_without_gold(tmp_path: Path) -> Path:
    rows = [json.loads(line) for line in FIX.read_text().splitlines()][:2]
    for i, row in enumerate(rows):
        row.pop("answer")
        row["id"] = f"q{i}"
    (tmp_path / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return tmp_path


def _read(folder: Path) -> stages.ReadResult:
    files = [(str(f), None, str(folder)) for f in find_inputs([str(folder)])]
    return stages.read_stage(discover_readers(), files)


def test_a_gold_answers_file_is_read_as_golds_not_quarantined(tmp_path):
    folder = _runs_without_gold(tmp_path)
    qa = [
        {
            "question": "which river flows through the city of Passau besides the Danube and the Inn",
            "answer": ["Ilz"],
        },
        {"question": "Who wrote Faust?", "answer": "Goethe"},
    ]
    (folder / "gold.json").write_text(json.dumps(qa))
    result = _read(folder)
    assert not [p for p in result.problems if p.reason == "unknown_format"]
    assert {g.question for g in result.golds} == {q["question"] for q in qa}
    kept = stages.label_and_keep(result.trajectories, {}, [], frozenset({"dr"}), False, result.golds)
    by_answer = {t.final_answer: t for t in kept.labelled}
    right, wrong = by_answer["The Ilz river."], by_answer["Probably the Vils or maybe the Rott, not sure."]
    assert right.gold_answer == "Ilz" and right.outcome.label == "success"
    assert right.outcome.signal.startswith("gold_answers:gold.json")
    assert wrong.outcome.label != "success" and kept.kept == [right]


def test_golds_join_by_id_before_question_text(tmp_path):
    folder = _runs_without_gold(tmp_path)
    lines = [{"id": "q1", "question": "something else entirely", "answer": "Vils"}]
    (folder / "gold.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    result = _read(folder)
    kept = stages.label_and_keep(result.trajectories, {}, [], frozenset({"dr"}), False, result.golds)
    by_id = {t.source.instance_id: t for t in kept.labelled}
    assert by_id["q1"].gold_answer == "Vils" and by_id["q0"].gold_answer is None
    assert by_id["q0"].outcome.reason == "no_gold"
