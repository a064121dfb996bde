"""Deep-research answer extraction and normalised matching against gold answers."""

from __future__ import annotations

import pytest

from extractors.labels.answers import final_answer_of, gold_aliases, judge_answer, normalize


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("<think>hm</think><answer> Paris </answer>", "Paris"),
        ("so the result is \\boxed{\\frac{1}{2}} indeed", "\\frac{1}{2}"),
        ("Reasoning...\nFINAL ANSWER: 42", "42"),
        ("Just the text.", "Just the text."),
        ("", None),
        (None, None),
    ],
)
def test_the_final_answer_comes_from_answer_tags_boxed_a_final_line_or_the_text(text, answer):
    assert final_answer_of(text) == answer


@pytest.mark.parametrize(
    ("answer", "gold", "label", "reason"),
    [
        ("THE CASTLE", "The Castle", "success", "exact_match"),
        ("castle", "The Castle", "success", "exact_match"),
        ("Human-Oriented Design", "Human Oriented Design", "success", "exact_match"),
        ("$1,000", "1000", "success", "number_match"),
        ("89706.00", "89706", "success", "number_match"),
        ("1555", "1,555米", "success", "number_match"),
        ("seventeen", "17", "success", "exact_match"),
        ("b,e", "b, e", "success", "list_match"),
        ("It took about 17 thousand hours in total", "17", "success", "contains_gold"),
        ("2", "3", "failure", "wrong_number"),
        ("red, white", "green, white", "failure", "wrong_list"),
        ("a, b, c", "a, b", "failure", "wrong_list"),
        ("Harry", "Fred", "failure", "wrong_answer"),
        ("No", "Yes", "failure", "wrong_answer"),
        ("", "Yes", "failure", "no_answer"),
        ("3 or 4", "3", "unknown", "needs_judge"),
        ("St. Petersburg", "Saint Petersburg", "unknown", "needs_judge"),
        ("penguin", "Rockhopper penguin", "unknown", "needs_judge"),
        ("是", "当选过", "unknown", "needs_judge"),
        ("(A → B) ↔ (¬B → ¬A)", "(¬A → B) ↔ (A ∨ ¬B)", "unknown", "needs_judge"),
        ("anything", "", "unknown", "no_gold"),
    ],
)
def test_answers_are_right_clearly_wrong_or_left_to_a_judge(answer, gold, label, reason):
    verdict = judge_answer(answer, [gold] if gold else [])
    assert (verdict.label, verdict.reason) == (label, reason)
    assert verdict.outcome().signal == f"answer_match:{reason}"


def test_any_alias_in_a_list_of_alias_lists_can_match():
    golds = gold_aliases([["Ilz", "Ilz River"], ["  "]])
    assert golds == ["Ilz", "Ilz River"]
    assert judge_answer("the ilz river", golds).label == "success"
    assert gold_aliases(True) == ["yes"] and gold_aliases(7) == ["7"]


def test_normalisation_drops_case_punctuation_articles_and_keeps_cjk_and_digits():
    assert normalize("The Quick, brown fox!") == normalize("quick brown FOX")
    assert normalize("北京大学") == "北京大学" and normalize("1,000.50") == "1000.5"
