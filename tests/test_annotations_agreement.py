"""Agreement coefficients against hand-computed values and published worked examples."""

from __future__ import annotations

import pytest

from annotations import Review, cohen_kappa, fleiss_kappa, krippendorff_alpha, task_agreement
from tests.annotations_support import filled_queue


def test_cohen_kappa_matches_the_textbook_two_by_two_example():
    # 50 units: both yes 20, A yes / B no 5, A no / B yes 10, both no 15.
    # p_o = 35/50 = 0.7; p_e = (25/50)(30/50) + (25/50)(20/50) = 0.5; kappa = 0.2 / 0.5 = 0.4
    a = ["yes"] * 25 + ["no"] * 25
    b = ["yes"] * 20 + ["no"] * 5 + ["yes"] * 10 + ["no"] * 15
    assert cohen_kappa(a, b) == pytest.approx(0.4)


def test_cohen_kappa_on_four_items_computed_by_hand():
    # p_o = 3/4; p_e = (2/4)(1/4) + (2/4)(3/4) = 0.5; kappa = 0.25 / 0.5 = 0.5
    assert cohen_kappa(
        ["keep", "keep", "reject", "reject"], ["keep", "reject", "reject", "reject"]
    ) == pytest.approx(0.5)
    assert cohen_kappa(["keep", "reject"], ["reject", "keep"]) == pytest.approx(-1.0)


def test_fleiss_kappa_matches_the_published_worked_example():
    # Fleiss (1971) as worked on Wikipedia: 10 subjects, 14 raters, 5 categories -> 0.210
    table = [
        [0, 0, 0, 0, 14],
        [0, 2, 6, 4, 2],
        [0, 0, 3, 5, 6],
        [0, 3, 9, 2, 0],
        [2, 2, 8, 1, 1],
        [7, 7, 0, 0, 0],
        [3, 2, 6, 3, 0],
        [2, 5, 3, 2, 2],
        [6, 5, 2, 1, 0],
        [0, 2, 2, 3, 7],
    ]
    units = [{j: c for j, c in enumerate(row) if c} for row in table]
    assert fleiss_kappa(units) == pytest.approx(0.2099, abs=5e-5)


def test_krippendorff_alpha_matches_both_published_nominal_examples():
    # Krippendorff (2011) "Computing Krippendorff's alpha-reliability": 4 observers, 12 units, nominal 0.743
    rows = [
        [1, 2, 3, 3, 2, 1, 4, 1, 2, None, None, None],
        [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, None, 3],
        [None, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, None],
        [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, None],
    ]
    units = [[r[i] for r in rows if r[i] is not None] for i in range(12)]
    assert krippendorff_alpha(units) == pytest.approx(0.743, abs=5e-4)
    # The 3-coder, 15-unit example with missing values (Wikipedia): nominal 0.691
    coders = [
        "* * * * * 3 4 1 2 1 1 3 3 * 3",
        "1 * 2 1 3 3 4 3 * * * * * * *",
        "* * 2 1 3 4 4 * 2 1 1 3 3 * 4",
    ]
    cells = [c.split() for c in coders]
    assert krippendorff_alpha([[c[i] for c in cells if c[i] != "*"] for i in range(15)]) == pytest.approx(
        0.691, abs=5e-4
    )


def test_coefficients_are_none_where_they_are_undefined():
    assert cohen_kappa([], []) is None
    assert cohen_kappa(["keep", "keep"], ["keep", "keep"]) is None  # p_e = 1: 0/0
    assert fleiss_kappa([{"keep": 2}, {"keep": 2}]) is None
    assert krippendorff_alpha([["keep", "keep"], ["keep"]]) is None
    assert krippendorff_alpha([["keep"], ["reject"]]) is None  # nothing pairable
    with pytest.raises(ValueError):
        fleiss_kappa([{"keep": 2}, {"keep": 3}])


def _review(item: str, reviewer: str, decision: str, task: str = "plan") -> Review:
    return Review(item, task, f"h-{item}", reviewer, decision, "", "2026-11-30T09:00:00+00:00", "app")


def test_task_agreement_on_two_reviewers_matches_hand_computed_figures():
    # items: (keep, keep), (keep, reject), (reject, reject), (reject, reject); edited counts as keep.
    reviews = [
        _review("1", "alice", "accepted"),
        _review("1", "bob", "edited"),
        _review("2", "alice", "accepted"),
        _review("2", "bob", "rejected"),
        _review("3", "alice", "rejected"),
        _review("3", "bob", "rejected"),
        _review("4", "alice", "rejected"),
        _review("4", "bob", "rejected"),
        _review("5", "alice", "accepted"),  # one review only: not part of agreement
        _review("9", "alice", "accepted", task="action"),
        _review("9", "bob", "accepted", task="action"),
    ]
    figures = task_agreement(reviews)
    plan = figures["plan"]
    assert (plan.items, plan.reviewers, plan.ratings) == (4, 2, 8)
    assert plan.percent_agreement == pytest.approx(0.75)
    assert plan.cohen_kappa == pytest.approx(0.5)
    # alpha: n_keep = 3, n_reject = 5, n = 8; observed off-diagonal = 2 (item 2); expected = 2 * 3 * 5 = 30
    assert plan.krippendorff_alpha == pytest.approx(1 - 7 * 2 / 30)
    # Fleiss: P = (1 + 0 + 1 + 1) / 4 = 0.75; P_e = (3/8)^2 + (5/8)^2 = 0.53125
    assert plan.fleiss_kappa == pytest.approx((0.75 - 0.53125) / (1 - 0.53125)) and plan.fleiss_items == 4
    assert figures["action"].items == 1 and figures["action"].cohen_kappa is None
    assert plan.as_dict()["cohen_kappa"] == 0.5


def test_agreement_appears_once_queue_items_have_two_reviews(tmp_path):
    q = filled_queue(tmp_path / "queue.sqlite", n_plan=3, n_action=0, reviews_per_item=2)
    q.decide("plan-0000", "alice", "accept", seen=q.seen("plan-0000", "alice"))
    assert task_agreement(q.reviews())["plan"].items == 0
    plan = [
        ("plan-0000", "bob", "accept"),
        ("plan-0001", "alice", "accept"),
        ("plan-0001", "bob", "reject"),
        ("plan-0002", "alice", "reject"),
        ("plan-0002", "bob", "reject"),
    ]
    for item, who, decision in plan:
        q.decide(item, who, decision, seen=q.seen(item, who), note="n")
    figures = task_agreement(q.reviews())["plan"]
    assert figures.items == 3 and figures.reviewers == 2
    # keep/keep, keep/reject, reject/reject: p_o = 2/3, p_e = (2/3)(1/3) + (1/3)(2/3) = 4/9
    assert figures.cohen_kappa == pytest.approx((2 / 3 - 4 / 9) / (1 - 4 / 9))
