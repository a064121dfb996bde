"""`aptforge review`: agreement report, Label Studio files, refusals before anything listens."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

from typer.testing import CliRunner

from annotations import Queue
from flows.cli import app
from flows.review import ReviewSettings
from tests.annotations_support import filled_queue, question

runner = CliRunner()


def test_review_without_a_queue_explains_how_to_make_one(tmp_path):
    result = runner.invoke(app, ["review", "--queue", str(tmp_path / "none.sqlite")])
    assert result.exit_code == 2 and "run the build first" in result.output
    assert not (tmp_path / "none.sqlite").exists()
    assert runner.invoke(app, ["review"]).exit_code == 2


def test_review_refuses_to_listen_beyond_loopback_without_tokens(tmp_path):
    path = tmp_path / "queue.sqlite"
    filled_queue(path)
    result = runner.invoke(
        app, ["review", "--queue", str(path), "--host", "0.0.0.0"], env={"APTFORGE_REVIEW_TOKENS": ""}
    )
    assert result.exit_code == 2 and "tokens are required" in result.output
    assert "http://" not in result.output  # refused before any URL is printed
    bad = runner.invoke(app, ["review", "--queue", str(path)], env={"APTFORGE_REVIEW_TOKENS": "alice:tiny"})
    assert bad.exit_code == 2 and "at least 8 characters" in bad.output and "tiny" not in bad.output


def test_tokens_come_from_the_environment_and_stay_secret():
    settings = ReviewSettings(_env_file=None, tokens="alice:alice-token-0123")
    assert settings.token_map() == {"alice": "alice-token-0123"}
    assert "alice-token-0123" not in repr(settings) and "alice-token-0123" not in str(settings.model_dump())
    assert ReviewSettings(_env_file=None).token_map() == {}


def test_review_agreement_prints_status_counts_and_figures_per_task(tmp_path):
    path = tmp_path / "queue.sqlite"
    q = filled_queue(path, n_plan=2, n_action=1)
    q.decide("plan-0000", "alice", "accept", seen=q.seen("plan-0000", "alice"))
    result = runner.invoke(
        app,
        ["review", "--queue", str(path), "--reviews-per-item", "2", "--agreement"],
        env={"COLUMNS": "200"},
    )
    assert result.exit_code == 0, result.output
    assert "reviews per item: 2 (1 item status(es) changed)" in result.output
    plan_line = next(line for line in result.output.splitlines() if "│ plan" in line)
    assert [c.strip() for c in plan_line.split("│")[1:6]] == ["plan", "2", "0", "0", "0"]
    assert Queue(path).reviews_per_item == 2


def test_label_studio_files_round_trip_through_the_cli(tmp_path):
    path = tmp_path / "queue.sqlite"
    filled_queue(path, n_plan=1, n_action=1)
    out = tmp_path / "ls"
    assert (
        runner.invoke(app, ["review", "--queue", str(path), "--export-labelstudio", str(out)]).exit_code == 0
    )
    tasks = json.loads((out / "tasks.json").read_text())
    assert ET.fromstring((out / "label_config.xml").read_text()).tag == "View" and len(tasks) == 2
    for n, task in enumerate(tasks):
        task["annotations"] = [
            {
                "id": n,
                "completed_by": 3,
                "was_cancelled": False,
                "created_at": "2026-12-02T08:00:00Z",
                "result": [
                    {
                        "from_name": "decision",
                        "to_name": "context",
                        "type": "choices",
                        "value": {"choices": ["accept"]},
                    }
                ],
            }
        ]
    export = tmp_path / "export.json"
    export.write_text(json.dumps(tasks))
    result = runner.invoke(app, ["review", "--queue", str(path), "--import-labelstudio", str(export)])
    assert result.exit_code == 0 and "applied 2, unchanged 0, problems 0" in result.output
    assert {r.status for r in Queue(path).items()} == {"accepted"}
    assert {r.reviewer for r in Queue(path).items()} == {"labelstudio-3"}


def test_token_roles_config_and_scenario_guidelines_become_the_app_options():
    from flows.config import ReviewConfig
    from flows.review import app_options

    accounts = ReviewSettings(
        _env_file=None, tokens="alice:alice-token-0123,judy:judy-token-89ab:adjudicator"
    ).accounts()
    assert accounts.tokens == {"alice": "alice-token-0123", "judy": "judy-token-89ab"}
    assert accounts.adjudicators == {"judy"}
    review = ReviewConfig(
        lease_minutes=2,
        adjudicators=["carol"],
        allowed_hosts=["review.example.org"],
        guidelines={"plan": "from the config"},
    )
    options = app_options(
        review, accounts, ["other.example.org"], {"plan": "from the spec", "action": "spec only"}
    )
    assert options.adjudicators == {"judy", "carol"} and options.lease_seconds == 120
    assert options.allowed_hosts == ("review.example.org", "other.example.org")
    assert options.guidelines == {"plan": "from the config", "action": "spec only"}
    assert options.gates is not None and options.gates(question(0)) == []
