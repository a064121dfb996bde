"""WebDancer chatml ReAct rows on the project's own fixtures."""

from __future__ import annotations

from pathlib import Path

from extractors.discovery import discover_readers
from extractors.ingest.sniff import read_file
from extractors.readers.webdancer import question_of
from schemas import Problem, Trajectory

FIX = Path(__file__).parent / "fixtures" / "webdancer"
READERS = discover_readers()


def test_think_tool_call_and_tool_response_become_one_step_and_the_answer_is_matched():
    first = next(iter(read_file(READERS, str(FIX / "sample_traj.jsonl"))))
    assert isinstance(first, Trajectory) and first.source.format == "webdancer" and first.kind == "dr"
    assert first.task == "Which river flows through the city of Passau besides the Danube and the Inn?"
    step = first.steps[0]
    assert step.thought == "Passau is known as the city of three rivers."
    assert (step.action.tool, step.action.args) == (
        "search",
        {"query": ["Passau three rivers", "Passau Ilz"]},
    )
    assert step.observation.startswith("A Google search for 'Passau three rivers'")
    assert first.steps[-1].action is None and first.steps[-1].thought == "The third river is the Ilz."
    assert (first.final_answer, first.gold_answer) == ("The Ilz river.", "Ilz")
    assert (first.outcome.label, first.outcome.reason) == ("success", "contains_gold")
    assert [t["name"] for t in first.tool_set] == ["search", "visit"] and first.meta["tag"] == "crawlqa"


def test_a_hedged_answer_needs_a_judge_and_a_run_that_never_answers_fails():
    out = list(read_file(READERS, str(FIX / "sample_traj.jsonl")))
    hedged, broken_call = out[1], out[2]
    assert (hedged.outcome.label, hedged.outcome.reason) == ("unknown", "needs_judge")
    assert broken_call.steps[0].action.tool == "invalid_tool_call"
    assert (broken_call.outcome.label, broken_call.outcome.reason) == ("failure", "no_answer")


def test_a_row_without_a_user_turn_is_a_problem_on_its_line():
    problem = list(read_file(READERS, str(FIX / "sample_traj.jsonl")))[3]
    assert isinstance(problem, Problem) and problem.reason == "missing_task"
    assert problem.where == f"{FIX / 'sample_traj.jsonl'}:4"


def test_the_question_is_what_follows_the_last_user_marker():
    assert question_of("tools...\nUser: first\nUser: the real one?") == "the real one?"
    assert question_of("no marker here") == "no marker here"
