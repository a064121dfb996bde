"""The validity section's pure parts: option lengths, distractor sources and the seeded sample."""

from __future__ import annotations

from collections.abc import Sequence

from generators.quality.validity import (
    option_lengths,
    patch_files,
    patch_overlap,
    samples,
    source_mix,
    task_validity,
)
from schemas.report import TaskQuality


def _row(i: int, options: list[str], gold: int, origins: list[str]) -> dict:
    return {
        "item_id": f"plan-{i:04d}",
        "scenario": "?",
        "task": "plan",
        "options": options,
        "gold_index": gold,
        "distractor_origins": origins,
        "context": f"context {i}",
    }


ROWS = [
    _row(0, ["a much longer gold answer", "b", "c"], 0, ["rule:wrong_target", "same_instance:failed_run"]),
    _row(1, ["x", "the gold", "yy"], 1, ["other_run:s1", "llm:gpt"]),
    _row(2, ["p", "qq", "r"], 2, ["mystery", "rule:premature"]),
]


def test_option_lengths_separate_gold_from_distractors_and_count_the_longest_gold():
    lengths = option_lengths(ROWS)
    assert lengths.gold.n == 3 and lengths.distractors.n == 6
    assert lengths.gold_longest == round(2 / 3, 4) and lengths.gold_shortest == 0.0
    assert sum(lengths.gold_counts) == 3 and sum(lengths.distractor_counts) == 6
    assert len(lengths.bins) == len(lengths.gold_counts) + 1


def test_source_mix_counts_each_family_and_unknown_origins_as_other():
    assert source_mix(ROWS) == {"rule": 2, "same_instance": 1, "other_run": 1, "llm": 1, "other": 1}


def test_samples_are_seeded_and_keep_each_distractor_origin_with_its_option():
    first, again, other = samples(ROWS, 1, k=2), samples(list(reversed(ROWS)), 1, k=2), samples(ROWS, 2, k=3)
    assert first == again and len(first) == 2 and len(other) == 3
    by_id = {r["item_id"]: r for r in ROWS}
    for item in other:
        row = by_id[item.item_id]
        assert [o.origin for o in item.options if not o.gold] == row["distractor_origins"]
        assert [o.gold for o in item.options].index(True) == row["gold_index"]
        assert item.context_tail.endswith(row["context"])


def _diff(*files: str) -> str:
    return "".join(f"diff --git a/{f} b/{f}\n--- a/{f}\n+++ b/{f}\n@@ -1 +1 @@\n-x\n+y\n" for f in files)


def test_patch_overlap_counts_distractors_touching_a_gold_file_and_ignores_prose_golds():
    rows = [
        _row(0, [_diff("a.py", "b.py"), _diff("b.py"), _diff("c.py")], 0, ["rule:x", "other_run:y"]),
        _row(1, [_diff("d.py"), _diff("d.py", "e.py"), _diff("d.py")], 2, ["rule:x", "rule:y"]),
        _row(2, ["a plan", "another plan", _diff("a.py")], 0, ["rule:x", "rule:y"]),
    ]
    assert patch_overlap(rows) == 0.75 and patch_overlap(ROWS) is None
    assert patch_files(_diff("a.py", "b.py")) == {"a.py", "b.py"}


class _Passes(Sequence[dict]):
    """A task's rows as `ParquetRows` gives them: gone through any number of times (each pass
    counted), never indexed (indexing a Parquet file's rows reads it whole)."""

    def __init__(self, rows: list[dict]) -> None:
        self.rows, self.passes = rows, 0

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self):
        self.passes += 1
        yield from self.rows

    def __getitem__(self, index):
        raise AssertionError("the validity section indexed the rows")


def test_task_validity_goes_through_the_rows_twice_without_holding_or_indexing_them():
    completion = {"item_id": "plan-9999", "scenario": "?", "task": "plan", "options": [], "context": "c"}
    rows = [
        _row(i, ["gold option " + "x" * i, "b" * (i % 7 + 1), "c"], i % 3, ["rule:a", "llm:b"])
        for i in range(40)
    ]
    given = _Passes([completion, *reversed(rows)])
    entry = TaskQuality(task="plan", items=41, baselines={"longest": 0.5}, bounds={"longest": 0.45})
    got = task_validity("plan", given, entry, None, seed=7)
    assert given.passes == 2
    assert got.lengths == option_lengths(rows) and got.sources == source_mix(rows)
    assert got.samples == samples(rows, 7) and len(got.samples) == 5
    assert [b.passed for b in got.baselines] == [False]
