"""The offline generator keeps option-only rules at chance: length and centrality ranks are stratified."""

from __future__ import annotations

import random
from collections import Counter

from generators.base import PoolEntry
from generators.offline import OfflineGenerator, rank_plan
from generators.quality.balance import balance_positions
from generators.quality.baselines import Bounds, Mcq, task_baselines
from schemas import GoldStep, Provenance, Question

PROV = Provenance(source_file="x", source_format="swe_agent_traj", extractor="swe_issue_fix")
VERBS = ["open", "edit", "run", "inspect", "search", "rerun", "fix", "test", "read", "check", "patch", "list"]
NOUNS = [
    "parser",
    "writer",
    "tokenizer",
    "reproduction script",
    "test suite",
    "config loader",
    "slug helper",
    "operator table",
    "quote handling",
    "division helper",
    "module list",
    "csv reader",
]
TAILS = [
    "",
    "again",
    "to confirm the bug",
    "to see how it handles empty input",
    "and delete it afterwards",
    "when `max_length` is given",
    "so that quoted fields survive",
    "in the package root",
]


def _golds(n: int, seed: int = 11) -> list[GoldStep]:
    rng = random.Random(seed)
    golds = []
    for i in range(n):
        text = f"I need to {rng.choice(VERBS)} the {rng.choice(NOUNS)} {rng.choice(TAILS)}".strip()
        golds.append(
            GoldStep(
                step_id=f"s{i:03d}",
                scenario="swe_issue_fix",
                task="plan",
                form="mcq",
                trajectory_id=f"t{i // 6}",
                step_index=i % 6,
                gold=f"{text} ({i})",
                fields={"trajs": "[]"},
                provenance=PROV,
            )
        )
    return golds


def _pool(golds: list[GoldStep]) -> list[PoolEntry]:
    return [PoolEntry(g.step_id, g.trajectory_id, g.group, g.gold) for g in golds]


def test_rank_targets_are_spread_evenly_and_the_shortest_gold_is_forced_to_be_shortest():
    pool = [PoolEntry(f"p{i}", "t", "", "x" * (10 + i)) for i in range(41)]
    plan = rank_plan(pool, 3, seed=5)
    longer = Counter(plan.longer.values())
    assert max(longer.values()) - min(longer.values()) <= 1 and set(longer) == {0, 1, 2, 3}
    assert plan.longer["p0"] == 3 and plan.longer["p40"] == 0  # nothing shorter / nothing longer exists
    central = Counter(plan.central.values())
    assert max(central.values()) - min(central.values()) <= 1
    assert rank_plan(pool, 3, seed=5) == plan and rank_plan(pool, 3, seed=6) != plan


def test_on_120_generated_items_every_option_only_baseline_stays_within_chance_plus_ten_points():
    golds = _golds(120)
    questions = [
        q for q in OfflineGenerator(seed=3).generate(golds, _pool(golds), 4) if isinstance(q, Question)
    ]
    assert len(questions) == 120
    balanced = balance_positions(questions, seed=3)
    result = task_baselines([Mcq(q.item_id, q.options, q.gold_index) for q in balanced], Bounds())
    assert result.chance == 0.25 and all(b == 0.35 for b in result.bounds.values())
    assert result.exceeded == [], result.accuracy
    assert result.accuracy["longest"] <= 0.32 and result.accuracy["shortest"] <= 0.32


def test_balanced_options_keep_each_distractors_origin_beside_it():
    # a row's `distractor_origins` are read in the order of its options (gold left out)
    from schemas import Distractor

    questions = []
    for k in range(16):
        texts = [f"wrong step {k}-{j}" for j in range(4)]
        questions.append(
            Question(
                item_id=f"q{k:02d}",
                scenario="swe_issue_fix",
                trajectory_id=f"t{k}",
                step_index=k,
                task="plan",
                form="mcq",
                gold=f"gold step {k}",
                options=(f"gold step {k}", *texts),
                gold_index=0,
                distractors=tuple(Distractor(text=t, origin=f"rule:{t}") for t in texts),
                provenance=PROV,
            )
        )
    balanced = balance_positions(questions, seed=5)
    assert {q.gold_index for q in balanced} == set(range(5))  # the options did move
    for q in balanced:
        others = [o for i, o in enumerate(q.options) if i != q.gold_index]
        assert [d.text for d in q.distractors] == others
        assert [d.origin for d in q.distractors] == [f"rule:{o}" for o in others]
    assert [q.options for q in balanced] != [q.options for q in questions]
