"""Per-item quality gates on small literal inputs: each finding names the item and why."""

from __future__ import annotations

import json

from generators.quality.gates import (
    OptionSet,
    check_options,
    check_question,
    flaw_terms,
    gate_duplicate_options,
    gate_gold_in_context,
    gate_length_outlier,
    gate_near_gold,
    gate_self_admitted_flaw,
    looks_like_code,
)
from schemas import Provenance, Question

PROV = Provenance(source_file="x", source_format="swe_agent_traj", extractor="swe_issue_fix")


def _reasons(problems):
    return [(p.reason, p.severity) for p in problems]


def _step(planning: str, name: str = "web_search", **args: str) -> str:
    return json.dumps(
        {"planning": planning, "execution": {"name": name, "args": args or {"text": "q"}}}, ensure_ascii=False
    )


def test_two_options_with_the_same_normalised_text_are_duplicates():
    v = OptionSet("i1", ("Open the parser.", "open the   PARSER", "run tests"), 0)
    (p,) = gate_duplicate_options(v)
    assert (p.where, p.reason) == ("i1", "duplicate_option") and "0 and 1" in p.detail


def test_a_distractor_one_character_away_from_the_gold_is_near_gold_but_a_different_plan_is_not():
    gold = "I need to edit the split function so that it respects quoted fields"
    v = OptionSet("i2", (gold, gold.replace("quoted", "quotes"), "I need to submit the changes"), 0)
    found = list(gate_near_gold(v))
    assert len(found) == 1 and found[0].reason == "distractor_near_gold" and "option 1" in found[0].detail


def test_the_gold_copied_in_the_context_is_an_error_only_when_no_distractor_is_there_too():
    gold, wrong = "I need to rerun the reproduction script", "I need to open the writer module"
    only_gold = OptionSet("i3", (wrong, gold), 1, context=f"earlier: {gold.upper()}!")
    both = OptionSet("i4", (wrong, gold), 1, context=f"{gold} then {wrong}")
    absent = OptionSet("i5", (wrong, gold), 1, context="nothing relevant here")
    assert _reasons(gate_gold_in_context(only_gold)) == [("gold_in_context", "error")]
    assert _reasons(gate_gold_in_context(both)) == [("gold_in_context", "warning")]
    assert list(gate_gold_in_context(absent)) == []


def test_a_short_gold_found_in_the_context_by_chance_is_not_a_leak():
    assert list(gate_gold_in_context(OptionSet("i6", ("ls", "pwd"), 0, context="ls -la && pwd"))) == []


def test_distractors_that_confess_in_english_or_chinese_or_by_tool_name_are_flagged():
    gold = _step("搜索日本的国歌")
    options = (
        gold,
        _step("浏览一个无关的网站"),
        _step("Search again, prematurely giving up on the page"),
        _step("查找国歌", name="web_search_wrong"),
        _step("查找国歌", extra_param="irrelevant"),
        _step("查找日本国歌的作者"),
    )
    found = list(gate_self_admitted_flaw(OptionSet("dr1", options, 0)))
    assert [p.detail.split(" says ")[0] for p in found] == ["option 1", "option 2", "option 3", "option 4"]
    assert "'无关'" in found[0].detail and "'prematurely'" in found[1].detail
    assert "'web_search_wrong'" in found[2].detail and "'irrelevant'" in found[3].detail


def test_a_flaw_word_the_gold_or_a_free_text_context_also_uses_is_not_a_confession():
    gold = "I need to find where the wrong value is computed"
    v = OptionSet("s1", (gold, "I need to print the wrong value"), 0)
    assert list(gate_self_admitted_flaw(v)) == []
    v = OptionSet(
        "s2",
        ("I need to open the parser", "I need to patch the wrong branch"),
        0,
        context="Issue: split() takes the wrong branch on quotes",
    )
    assert list(gate_self_admitted_flaw(v)) == []
    v = OptionSet("s3", ("I need to open the parser", "I need to patch the wrong branch"), 0)
    assert _reasons(gate_self_admitted_flaw(v)) == [("distractor_admits_flaw", "error")]


def test_code_options_are_not_read_for_flaw_words():
    code = "def check(x):\n    if invalid(x):\n        raise ValueError('wrong input')\n    return x\n"
    assert looks_like_code(code) and flaw_terms(code) == []
    assert not looks_like_code("1. Install torch.\n2. Remove the irrelevant cache.\n3. Run the tests.")
    # a diff of prose (docs, a docstring) is still a diff: one changed word in it is a real difference
    docs = "diff --git a/README.rst b/README.rst\n--- a/README.rst\n+++ b/README.rst\n@@ -1,3 +1,3 @@\n"
    docs += " The parser reads\n-the first field only\n+every field of the row\n and returns them\n"
    assert looks_like_code(docs) and looks_like_code(docs.split("\n", 3)[3])


def test_an_option_three_times_longer_than_the_others_is_a_length_outlier_warning():
    v = OptionSet("l1", ("short plan one", "x" * 200, "short plan two", "short plan 3"), 0)
    (p,) = gate_length_outlier(v)
    assert (p.reason, p.severity) == (
        "option_length_outlier",
        "warning",
    ) and "distractor option 1" in p.detail
    assert list(gate_length_outlier(OptionSet("l2", ("ls", "cd src/app", "pwd"), 0))) == []


def test_check_options_runs_every_gate_and_a_clean_item_has_no_findings():
    clean = OptionSet(
        "c1",
        (
            "I need to open the parser module",
            "I need to run the tests",
            "I need to look at the writer",
            "I need to submit",
        ),
        2,
        context="an issue",
    )
    assert check_options(clean) == []
    dirty = clean._replace(options=(*clean.options[:3], "I need to look at the writer"))
    assert {p.reason for p in check_options(dirty)} == {"duplicate_option"}


def test_check_question_drops_an_mcq_whose_gold_is_copied_from_its_trajectory():
    gold = "I need to rerun the reproduction script"
    q = Question(
        item_id="q1",
        scenario="swe_issue_fix",
        task="plan",
        form="mcq",
        trajectory_id="t",
        step_index=3,
        fields={"trajs": json.dumps([{"role": "assistant", "plan": gold}]), "uuid": "u"},
        gold=gold,
        options=(
            "I need to open the writer module",
            gold,
            "I need to submit the changes",
            "I need to list the package modules",
        ),
        gold_index=1,
        provenance=PROV,
    )
    assert _reasons(check_question(q)) == [("gold_in_context", "error")]
    moved = q.model_copy(update={"gold_index": 0})
    assert _reasons(check_question(moved)) == [("answer_not_in_options", "error")]
