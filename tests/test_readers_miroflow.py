"""MiroFlow task logs on the project's own fixtures."""

from __future__ import annotations

from pathlib import Path

from extractors.discovery import discover_readers
from extractors.ingest.sniff import read_file
from extractors.readers.miroflow import MiroFlow, question_of
from schemas import Trajectory

FIX = Path(__file__).parent / "fixtures" / "miroflow"
READERS = discover_readers()


def test_mcp_tool_calls_become_actions_and_the_boxed_answer_is_kept_without_a_gold():
    (t,) = list(read_file(READERS, str(FIX / "task_result.json")))
    assert isinstance(t, Trajectory) and t.source.format == "miroflow" and t.kind == "dr"
    assert t.task == "Is Lisbon the capital of Portugal?" and "tool-searching" in t.system_prompt
    assert [(s.action.tool, s.action.args) for s in t.steps[:2]] == [
        ("google_search", {"q": "capital of Portugal", "num": 5}),
        ("scrape_website", {"url": "https://example.org/lisbon"}),
    ]
    assert t.steps[0].thought == "Plan: search for the capital of Portugal."
    assert "Lisbon is the capital of Portugal." in t.steps[0].observation
    assert t.steps[2].action is None and t.steps[2].thought.startswith("Report:")
    assert t.final_answer == "Yes" and t.gold_answer is None
    assert (t.outcome.label, t.outcome.reason) == ("unknown", "no_gold")


def test_a_gold_in_the_log_decides_the_label():
    (t,) = list(read_file(READERS, str(FIX / "with_gold_task_result.json")))
    assert (t.gold_answer, t.outcome.label, t.outcome.reason) == ("No", "failure", "wrong_answer")


def test_long_scraped_pages_are_capped_by_the_reader_rule():
    import json

    from extractors.base import Origin

    record = json.loads((FIX / "task_result.json").read_text())
    t = MiroFlow(max_observation_chars=200).read(record, Origin("x.json"))
    assert len(t.steps[1].observation) < 300 and "characters omitted" in t.steps[1].observation
    assert t.meta["observations_truncated"] == 1


def test_the_instruction_block_is_not_part_of_the_question():
    assert question_of("Q?\n\nYour task is to do a lot.") == "Q?"
    assert question_of("Line one.\nLine two?") == "Line one.\nLine two?"
