"""TapeAgents tapes on the project's own fixtures: steps by kind, GAIA-style answer labels."""

from __future__ import annotations

from pathlib import Path

from extractors.discovery import discover_readers
from extractors.ingest.sniff import read_file
from schemas import Problem, Trajectory

FIX = Path(__file__).parent / "fixtures" / "tapeagents"
READERS = discover_readers()


def _one(name: str) -> Trajectory | Problem:
    (out,) = list(read_file(READERS, str(FIX / name)))
    return out


def test_thoughts_go_with_the_next_action_and_observations_with_the_action_before():
    t = _one("moon_correct.json")
    assert isinstance(t, Trajectory) and t.kind == "dr" and t.source.format == "tapeagents"
    assert t.task.startswith("In which year did the first crewed Moon landing")
    assert [s.action.tool for s in t.steps] == ["search", "python_code", "gaia_answer"]
    assert "Search the web" in t.steps[0].thought
    assert t.steps[0].action.args == {"source": "web", "query": "first crewed moon landing year"}
    assert "Apollo 11 landed on 20 July 1969." in t.steps[0].observation
    assert t.steps[1].thought == "The snippet says 1969." and t.steps[1].observation == "1969"
    assert t.steps[2].observation is None


def test_the_result_is_matched_to_the_gaia_gold_right_wrong_or_for_a_judge():
    right, wrong, vague = (_one(n) for n in ("moon_correct.json", "moon_wrong.json", "moon_vague.json"))
    assert (right.final_answer, right.gold_answer) == ("1,969", "1969")
    assert (right.outcome.label, right.outcome.reason) == ("success", "number_match")
    assert (wrong.outcome.label, wrong.outcome.reason) == ("failure", "wrong_number")
    assert (vague.outcome.label, vague.outcome.reason) == ("unknown", "needs_judge")


def test_a_step_without_a_kind_is_a_problem_naming_the_step():
    p = _one("broken_step.json")
    assert isinstance(p, Problem) and p.reason == "missing_field" and "steps[2]" in p.detail
    assert p.where == str(FIX / "broken_step.json")
