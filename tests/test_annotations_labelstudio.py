"""Label Studio interchange: export -> (annotate as Label Studio records it) -> import reproduces decisions."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from annotations.agreement import task_agreement
from annotations.labelstudio import LABEL_CONFIG, export_tasks, import_export, read_export
from tests.annotations_support import filled_queue, question

#: The decisions a team makes in Label Studio: (item, annotator email, decision, note, corrected text).
DECISIONS = [
    ("plan-0000", "alice@example.org", "accept", "", ""),
    ("plan-0001", "alice@example.org", "reject", "two options are valid next steps", ""),
    (
        "plan-0002",
        "bob@example.org",
        "edit",
        "gold was vague",
        "I need to replace operator.add with operator.sub",
    ),
    ("action-0000", "bob@example.org", "edit", "", "grep -n '\"-\"' /testbed/tinycalc/ops.py"),
    ("action-0001", "bob@example.org", "reject", "command depends on an earlier typo", ""),
]


def _result(name: str, kind: str, values: list[str]) -> dict[str, Any]:
    key = "choices" if kind == "choices" else "text"
    return {
        "id": f"r-{name}",
        "from_name": name,
        "to_name": "context",
        "type": kind,
        "origin": "manual",
        "value": {key: values},
    }


def label_studio_export(
    tasks: list[dict[str, Any]], decisions: list[tuple[str, str, str, str, str]]
) -> list[dict[str, Any]]:
    """What Label Studio's JSON export looks like after annotators worked on aptforge's tasks."""
    by_item = {t["data"]["item_id"]: t for t in tasks}
    exported = []
    for n, (item, email, decision, note, corrected) in enumerate(decisions, start=1):
        result = [_result("decision", "choices", [decision])]
        if note:
            result.append(_result("note", "textarea", [note]))
        if corrected:
            result.append(_result("corrected", "textarea", [corrected]))
        exported.append(
            {
                "id": n,
                "data": by_item[item]["data"],
                "predictions": [],
                "meta": {},
                "project": 7,
                "created_at": "2026-12-01T10:00:00.000000Z",
                "updated_at": "2026-12-01T10:05:00.000000Z",
                "annotations": [
                    {
                        "id": 100 + n,
                        "completed_by": {"id": n, "email": email, "first_name": "", "last_name": ""},
                        "result": result,
                        "was_cancelled": False,
                        "ground_truth": False,
                        "lead_time": 12.5,
                        "created_at": f"2026-12-01T10:{n:02d}:00.000000Z",
                        "updated_at": f"2026-12-01T10:{n:02d}:30.000000Z",
                    }
                ],
            }
        )
    return exported


def test_the_export_holds_one_task_per_pending_item_with_every_variable_of_the_labeling_config(tmp_path):
    q = filled_queue(tmp_path / "queue.sqlite")
    q.decide("plan-0000", "alice", "accept", seen=q.seen("plan-0000", "alice"))
    tasks = export_tasks(q)
    assert sorted(t["data"]["item_id"] for t in tasks) == [
        "action-0000",
        "action-0001",
        "plan-0001",
        "plan-0002",
    ]
    root = ET.fromstring(LABEL_CONFIG)
    variables = {v[1:] for el in root.iter() for v in el.attrib.values() if v.startswith("$")}
    objects = {el.get("name") for el in root.iter() if el.tag in ("Text", "HyperText")}
    controls = {el.get("name"): el.get("toName") for el in root.iter() if el.tag in ("Choices", "TextArea")}
    assert controls == {"decision": "context", "note": "context", "corrected": "context"}
    assert set(controls.values()) <= objects
    assert [c.get("value") for c in root.iter("Choice")] == ["accept", "reject", "edit"]
    for task in tasks:
        assert variables <= set(task["data"]) and all(isinstance(task["data"][v], str) for v in variables)
    plan = next(t["data"] for t in tasks if t["data"]["item_id"] == "plan-0001")
    assert (
        "(B) [GOLD] " + question(1).gold in plan["options"]
        and "I need to look at module 1" in plan["context"]
    )
    assert plan["content_hash"] == q.get("plan-0001").row.content_hash
    json.dumps(tasks)  # plain JSON


def test_a_label_studio_export_of_aptforge_tasks_reimported_reproduces_the_decisions(tmp_path):
    q = filled_queue(tmp_path / "queue.sqlite")
    export = tmp_path / "project-7-at-2026-12-01.json"
    export.write_text(json.dumps(label_studio_export(export_tasks(q), DECISIONS), indent=2))
    result = import_export(q, export)
    assert (result.applied, result.unchanged, result.problems) == (5, 0, [])
    expected = {
        "plan-0000": "accepted",
        "plan-0001": "rejected",
        "plan-0002": "edited",
        "action-0000": "edited",
        "action-0001": "rejected",
    }
    for item, email, _decision, note, corrected in DECISIONS:
        view = q.get(item)
        assert view.row.status == expected[item] and view.row.reviewer == email and view.row.note == note
        if corrected:
            assert view.question.gold == corrected and view.versions[0].question == question(
                int(item[-1]), item[:-5]
            )
        (review,) = view.reviews
        assert (
            review.origin == "labelstudio"
            and review.at
            == f"2026-12-01T10:{DECISIONS.index((item, email, _decision, note, corrected)) + 1:02d}:30.000000Z"
        )
    assert q.get("plan-0002").question.options[1] == DECISIONS[2][4]
    again = import_export(q, export)
    assert (again.applied, again.unchanged, again.problems) == (0, 5, [])
    assert q.count(status="pending") == 0


def test_two_annotators_in_label_studio_give_agreement_figures(tmp_path):
    q = filled_queue(tmp_path / "queue.sqlite", n_plan=3, n_action=0, reviews_per_item=2)
    tasks = export_tasks(q)
    two = [
        (f"plan-000{i}", who, d, "n" if d == "reject" else "", "")
        for i, pair in enumerate([("accept", "accept"), ("accept", "reject"), ("reject", "reject")])
        for who, d in zip(("alice@example.org", "bob@example.org"), pair, strict=True)
    ]
    export = tmp_path / "export.json"
    export.write_text(json.dumps(label_studio_export(tasks, two)))
    assert import_export(q, export).applied == 6
    assert [q.get(f"plan-000{i}").row.status for i in range(3)] == ["accepted", "pending", "rejected"]
    figures = task_agreement(q.reviews())["plan"]
    assert figures.items == 3 and figures.cohen_kappa == pytest.approx((2 / 3 - 4 / 9) / (1 - 4 / 9))


def test_bad_or_stale_annotations_become_problems_with_file_line_and_reason(tmp_path):
    q = filled_queue(tmp_path / "queue.sqlite")
    tasks = export_tasks(q)
    records = label_studio_export(
        tasks,
        [
            ("plan-0000", "a@x.org", "accept", "", ""),
            ("plan-0001", "a@x.org", "edit", "", ""),
            ("plan-0002", "a@x.org", "", "", ""),
        ],
    )
    records.append({"id": 99, "data": {"text": "a task from another project"}, "annotations": []})
    q.enqueue(
        [question(0, gold="I need to open ops.py first")] + [question(i) for i in (1, 2)],
        batch="v2",
        tasks=["plan"],
    )
    export = tmp_path / "export.json"
    text = json.dumps(records, indent=2)
    export.write_text(text)
    problems = import_export(q, export).problems
    reasons = {p.reason: p for p in problems}
    assert set(reasons) == {"stale_content", "edit_without_text", "no_decision", "not_an_aptforge_task"}
    starts = [m.start() for m in re.finditer(r"^  \{$", text, re.MULTILINE)]
    lines = [text.count("\n", 0, s) + 1 for s in starts]
    assert reasons["not_an_aptforge_task"].where == f"{export}:{lines[3]}"
    assert (
        reasons["stale_content"].where == f"{export}:{lines[0]}"
        and "NOT saved" in reasons["stale_content"].detail
    )
    assert all(p.stage == "review_import" for p in problems)
    assert q.get("plan-0000").row.status == "pending"


def test_an_unreadable_export_is_a_problem_not_a_crash(tmp_path):
    broken = tmp_path / "broken.json"
    broken.write_text('[\n  {"data": {"item_id": "x", "content_hash": "y"}},\n  {"data": \n')
    (problem,) = [p for p in read_export(broken) if not hasattr(p, "item_id")]
    assert problem.reason == "invalid_json" and problem.where.startswith(f"{broken}:")
    not_a_list = tmp_path / "object.json"
    not_a_list.write_text('{"tasks": []}')
    assert [p.reason for p in read_export(not_a_list)] == ["not_a_task_list"]
    assert [p.reason for p in read_export(Path(tmp_path / "missing.json"))] == ["unreadable_file"]
