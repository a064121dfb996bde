"""The build flow enqueues its candidates; a rebuild keeps verdicts of unchanged items (real Prefect runs)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml
from typer.testing import CliRunner

from annotations import Queue
from flows.cli import app

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()


def build(config: Path, out: Path) -> dict:
    result = runner.invoke(app, ["build", str(config), "--out", str(out)])
    assert result.exit_code == 0, result.output
    return json.loads((out / "swe_issue_fix" / "v0.1.0" / "report.json").read_text())


@pytest.mark.flow
def test_the_build_enqueues_and_a_rebuild_keeps_verdicts_and_requeues_changed_items(
    prefect_harness, tmp_path
):
    out = tmp_path / "out"
    config = ROOT / "configs" / "swe_issue_fix.yaml"
    first = build(config, out)
    path = out / "swe_issue_fix" / "queue.sqlite"
    assert first["review"]["queue"] == str(path)
    candidates = {
        t: pq.read_table(out / "swe_issue_fix" / "v0.1.0" / "candidates" / f"{t}.parquet").to_pylist()
        for t in ("plan", "action")
    }
    total = sum(len(rows) for rows in candidates.values())
    assert first["review"]["enqueued"]["new"] == total > 0
    q = Queue(path)
    for rows in candidates.values():  # what the build wrote is what reviewers see, hash for hash
        for row in rows:
            assert q.get(row["item_id"]).row.content_hash == row["content_hash"]
    plan_id, action_id = candidates["plan"][0]["item_id"], candidates["action"][0]["item_id"]
    q.decide(plan_id, "alice", "accept", seen=q.seen(plan_id, "alice"))
    q.decide(action_id, "alice", "reject", seen=q.seen(action_id, "alice"), note="not the next command")

    again = build(config, out)
    assert again["review"]["enqueued"] == {
        "new": 0,
        "unchanged": total,
        "requeued": 0,
        "restored": 0,
        "retired": 0,
    }
    assert again["review"]["status_by_task"]["plan"]["accepted"] == 1
    assert (Queue(path).get(plan_id).row.status, Queue(path).get(action_id).row.status) == (
        "accepted",
        "rejected",
    )

    raw = yaml.safe_load(config.read_text())
    raw["seed"] += 1  # new distractors and option order: MCQ content changes
    raw["sources"] = [{"path": str((config.parent / s["path"]).resolve())} for s in raw["sources"]]
    raw["review"] = {"reviews_per_item": 2}
    reseeded = tmp_path / "reseeded.yaml"
    reseeded.write_text(yaml.safe_dump(raw))
    third = build(reseeded, out)["review"]
    assert third["reviews_per_item"] == 2 and third["enqueued"]["requeued"] >= 1
    q = Queue(path)
    requeued = {e.item_id for e in q.log() if e.action == "requeue"}
    for item_id in requeued:
        row = q.get(item_id).row
        assert row.status == "pending" and row.version >= 1 and row.reviews == 0
    if plan_id not in requeued and not q.get(plan_id).row.retired:
        assert q.get(plan_id).row.status == "pending"  # still accepted once, but 2 reviews are now required
