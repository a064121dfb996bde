"""OpenHands eval rows, resolver rows and event-list files on the project's own fixtures."""

from __future__ import annotations

from pathlib import Path

from extractors.discovery import discover_readers
from extractors.ingest.sniff import read_file
from schemas import Problem, Trajectory

FIX = Path(__file__).parent / "fixtures" / "openhands"
READERS = discover_readers()


def _read(name: str) -> list[Trajectory | Problem]:
    return list(read_file(READERS, str(FIX / name)))


def test_eval_rows_take_the_problem_statement_and_pair_observations_by_cause():
    first, *_ = _read("output.jsonl")
    assert isinstance(first, Trajectory) and first.source.format == "openhands" and first.kind == "swe"
    assert (
        first.task.startswith("Parser crashes on empty input")
        and first.source.instance_id == "acme__parser-11"
    )
    assert first.system_prompt == "You are OpenHands agent." and "<issue_description>" in first.prompt
    tools = [(s.action.tool, s.action.raw) for s in first.steps]
    assert tools == [
        ("execute_bash", "ls /workspace/acme"),
        ("str_replace_editor", "str_replace_editor view /workspace/acme/parser.py"),
        ("finish", "submit"),
    ]
    assert (
        first.steps[0].thought == "Look at the repo first."
        and first.steps[0].observation == "parser.py\ntests"
    )
    # the thought of the read action comes from the model response when `args.thought` is empty
    assert first.steps[1].thought == "Open the parser." and "def parse" in first.steps[1].observation
    assert first.patch.startswith("diff --git") and first.source.model == "acme/coder-large"


def test_eval_labels_come_from_the_row_an_error_fails_and_nothing_else_decides():
    out = _read("output.jsonl")
    labels = [(t.outcome.label, t.outcome.signal) for t in out if isinstance(t, Trajectory)]
    assert labels == [
        ("unknown", "no_verdict"),
        ("failure", "row:error"),
        ("failure", "row:test_result.report.resolved"),
    ]


def test_a_history_that_is_not_a_list_is_a_problem_naming_the_line():
    problems = [p for p in _read("output.jsonl") if isinstance(p, Problem)]
    assert [(p.where, p.reason) for p in problems] == [(f"{FIX / 'output.jsonl'}:4", "wrong_type")]


def test_resolver_rows_use_the_issue_and_the_llm_judged_success_flag():
    ok, bad = _read("resolver_output.jsonl")
    assert ok.task == "Add a NOTICE file\n\nPlease add a NOTICE file naming the authors."
    assert ok.source.instance_id == "acme/site#7" and ok.source.agent == "openhands resolver"
    assert [(s.action.tool, s.action.raw) for s in ok.steps] == [
        ("execute_bash", "echo 'Authors: acme' > NOTICE"),
        ("finish", "submit"),
    ]
    assert ok.steps[0].thought == "Create the file." and ok.steps[0].observation == ""
    assert (ok.outcome.label, ok.outcome.signal) == ("success", "row:success")
    assert (bad.outcome.label, bad.outcome.reason) == ("failure", "unresolved")


def test_an_event_list_file_is_one_trajectory_whose_task_is_the_first_user_message():
    (t,) = _read("rename_events.json")
    assert t.kind == "generic" and t.source.line is None and t.task == "Rename notes.txt to README.md"
    assert t.steps[0].action.raw == "mv notes.txt README.md" and t.steps[0].thought == "Renaming it."
    assert t.steps[0].observation == "" and t.steps[-1].action.tool == "finish"
    assert t.outcome.label == "unknown"
