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


def test_search_results_keep_their_text_in_either_tape_schema(tmp_path):
    import orjson

    tape = orjson.loads((FIX / "moon_correct.json").read_bytes())
    serp = [
        {
            "title": "Apollo 11",
            "url": "https://en.wikipedia.org/wiki/Apollo_11",
            "content": "landed 20 July 1969",
        },
        {"title": "Old", "url": "https://example.org/old", "snippet": "the 2025-01 field"},
    ]
    for s in tape["steps"]:
        if s["kind"] == "search_results_observation":
            s["serp"] = serp
    (tmp_path / "t.json").write_bytes(orjson.dumps(tape))
    (t,) = list(read_file(READERS, str(tmp_path / "t.json")))
    obs = t.steps[0].observation
    assert "landed 20 July 1969" in obs and "the 2025-01 field" in obs and "Apollo_11" in obs


def test_every_shared_tape_search_result_arrives_with_its_text(shared_dir):
    import orjson

    root = shared_dir / "trajectories" / "tapeagents-gaia"
    assert root.is_dir(), f"{root} is missing"
    checked = 0
    for f in sorted(root.rglob("*.json")):
        raw = orjson.loads(f.read_bytes())
        texts = [
            r.get("content") or r.get("snippet")
            for s in raw.get("steps", [])
            if s.get("kind") == "search_results_observation"
            for r in s.get("serp", [])
        ]
        (t,) = list(read_file(READERS, str(f)))
        seen = "\n".join(s.observation or "" for s in t.steps)
        for text in texts:
            if text and len(text) > 40:
                assert text[:40] in seen, f"{f.name}: result text lost"
                checked += 1
    assert checked >= 150
