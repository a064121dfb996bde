"""Model-free baselines, their bounds and the position statistic, on small literal inputs."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rapidfuzz import fuzz, process

from generators.quality.audit import (
    AuditRow,
    aptbench_row,
    audit_task,
    candidate_row,
    label_for_path,
    parse_choices,
)
from generators.quality.baselines import (
    Bounds,
    Mcq,
    bound_for,
    centrality,
    chi2_sf,
    credit,
    position_test,
    task_baselines,
)
from generators.text import RATIO_LOOP_UP_TO, ratio_matrix
from schemas import Problem

_TEXTS = st.lists(st.text(alphabet="ab c<>", max_size=12), max_size=RATIO_LOOP_UP_TO + 3)


@settings(max_examples=150, deadline=None)
@given(_TEXTS, st.booleans())
def test_the_pairwise_ratios_are_cdists_value_for_value(texts, as_tokens):
    """`ratio_matrix` scores small sets pair by pair (holding the GIL) and large ones with `cdist`:
    either way the float32 matrix `cdist` gives, empty texts and the diagonal included."""
    items = [t.split() for t in texts] if as_tokens else texts
    got = ratio_matrix(items)
    want = process.cdist(items, items, scorer=fuzz.ratio, workers=1)
    assert got.dtype == want.dtype == np.float32 and got.shape == (len(items), len(items))
    assert np.array_equal(got, want)


def test_ties_give_fractional_credit_so_a_rule_never_wins_by_position():
    assert credit([3, 1, 3], 0) == pytest.approx(0.5)
    assert credit([3, 1, 3], 1) == 0.0 and credit([1, 5, 2], 1) == 1.0


def test_the_option_closest_to_all_others_is_the_most_central():
    gold = "1. install torch\n2. install the package\n3. run the tests"
    options = (
        gold.replace("2. install the package\n", ""),
        gold,
        gold + "\n4. delete the repository",
        gold.replace("1. install torch\n2", "2"),
    )
    scores = centrality(options)
    assert max(range(4), key=scores.__getitem__) == 1


def test_each_baseline_finds_the_gold_its_rule_describes():
    items = [Mcq(f"i{k}", ("aa", "bbbbbbbb", "c"), 1) for k in range(10)]
    b = task_baselines(items)
    assert b.accuracy["longest"] == 1.0 and b.accuracy["shortest"] == 0.0 and b.accuracy["position"] == 1.0
    assert b.chance == pytest.approx(1 / 3) and b.positions == {"B": 10}
    assert {"longest", "position"} <= set(b.exceeded)


def test_the_no_context_baseline_learns_a_generator_fingerprint_from_other_folds():
    rng = random.Random(4)
    words = ["parser", "writer", "tests", "module", "script", "quote", "field", "split", "submit", "token"]
    items = []
    for k in range(200):
        opts = [" ".join(rng.sample(words, 3)) for _ in range(4)]
        gold = rng.randrange(4)
        opts = [o if i == gold else o + "  " for i, o in enumerate(opts)]  # trailing spaces mark distractors
        items.append(Mcq(f"t{k}", tuple(opts), gold))
    fingerprinted = task_baselines(items)
    assert fingerprinted.accuracy["no_context"] > 0.9 and "no_context" in fingerprinted.exceeded
    clean = task_baselines([it._replace(options=tuple(o.rstrip() for o in it.options)) for it in items])
    assert clean.accuracy["no_context"] < clean.bounds["no_context"]


def test_the_bound_is_chance_plus_ten_points_from_100_items_and_wider_below():
    assert bound_for("central", 0.25, 100 * 0.1875, 100, Bounds()) == pytest.approx(0.35)
    small = bound_for("central", 0.25, 20 * 0.1875, 20, Bounds())
    assert small == pytest.approx(0.25 + 2.326 * (20 * 0.1875) ** 0.5 / 20)
    assert bound_for("central", 0.25, 1.0, 5, Bounds(fixed={"central": 0.3})) == 0.3


def test_the_chi_square_survival_function_matches_table_values():
    for x, dof in ((3.841, 1), (5.991, 2), (7.815, 3), (11.070, 5), (12.592, 6), (23.685, 14)):
        assert chi2_sf(x, dof) == pytest.approx(0.05, abs=2e-4)
    assert chi2_sf(0.0, 3) == 1.0


def test_skewed_gold_positions_give_a_large_chi_square_and_balanced_ones_zero():
    balanced = [Mcq(str(k), ("a", "b", "c", "d"), k % 4) for k in range(40)]
    skewed = [Mcq(str(k), ("a", "b", "c", "d"), 3 if k % 2 else k % 4) for k in range(40)]
    assert position_test(balanced).statistic == 0.0 and position_test(balanced).dof == 3
    t = position_test(skewed)
    assert t.statistic == pytest.approx(20.0) and t.p_value < 1e-3  # counts 10, 0, 10, 20 against 10 each


def test_choices_split_on_newlines_or_on_single_spaces_when_bodies_hold_newlines():
    assert parse_choices("(A) foo\n(B) bar baz\n(C) \nqux") == ("foo", "bar baz", "\nqux")
    env = "(A) 1. a\n2. b (B) 1. a\n2. c\n3. d (C) 2. b"
    assert parse_choices(env, " ") == ("1. a\n2. b", "1. a\n2. c\n3. d", "2. b")
    assert parse_choices(env) == parse_choices(env, " ")
    assert parse_choices("no options here") == ()


def test_an_answer_letter_beyond_the_options_is_a_problem_naming_the_line():
    row = {"uuid": "u", "issue_statement": "bug", "choices": "(A) x\n(B) y", "answer": "D"}
    p = aptbench_row(row, "f.jsonl:9", "issue_fix/locate")
    assert isinstance(p, Problem) and (p.where, p.reason) == ("f.jsonl:9", "answer_not_in_options")
    ok = aptbench_row({**row, "answer": "B"}, "f.jsonl:10", "issue_fix/locate")
    assert isinstance(ok, AuditRow) and ok.gold_index == 1 and ok.context == "bug"


def test_candidate_rows_use_options_and_gold_index_and_only_aptbench_fields_as_context():
    row = {
        "scenario": "swe_issue_fix",
        "task": "plan",
        "uuid": "u",
        "trajs": "[ctx]",
        "choices": "(A) a\n(B) b",
        "answer": "B",
        "options": ["a", "b"],
        "gold_index": 1,
        "gold": "b",
        "source_file": "/secret/path",
    }
    r = candidate_row(row, "c.parquet:1")
    assert isinstance(r, AuditRow) and r.task == "swe_issue_fix/plan" and r.context == "[ctx]"
    assert label_for_path("/x/aptbench-reference/env_setup/error/input_data.jsonl")[0] == "env_setup/error"
    assert label_for_path("/x/deepresearch/plan_zh/input_data.jsonl")[1].n_options == 6


def test_duplicate_rows_are_reported_once_per_copy():
    rows = [AuditRow("t", f"f:{k}", "completion", (), None, "same context", "same-key") for k in range(3)]
    audit = audit_task("t", rows)
    assert audit.findings == {"duplicate_row": 2} and audit.baselines is None and audit.items == 3


def test_hashed_character_grams_equal_scikit_learns_char_wb_tfidf():
    import numpy as np
    from sklearn.feature_extraction.text import TfidfVectorizer

    from generators.quality.grams import CharGrams

    docs = [
        "I need to run `pytest -x tests/test_a.py` again",
        "Hello  World\tfoo a bb  ccc",
        "安装 依赖 then run python train.py --epochs 3",
        "x",
        "diff --git a/src/mod.py b/src/mod.py\n@@ -1,3 +1,4 @@\n-    return a < b\n+    return a <= b",
    ]
    ref = TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 4), sublinear_tf=True).fit(docs)
    ours = CharGrams().fit_docs(docs)
    a, b = ref.transform(docs), ours.transform_docs(docs)
    assert a.shape[1] == b.shape[1]  # one column per distinct gram: no hash collision here
    np.testing.assert_allclose((a @ a.T).toarray(), (b @ b.T).toarray(), atol=1e-9)
    kept = CharGrams(min_df=2, max_features=5).fit_docs(docs)
    assert len(kept.columns) == 5 and kept.transform_docs(["zzzz qqqq"]).nnz == 0


def _fingerprinted(n: int, seed: int) -> list[Mcq]:
    """Items whose distractors carry an option-only tell (trailing spaces), with a short context."""
    rng = random.Random(seed)
    words = ["parser", "writer", "tests", "module", "script", "quote", "field", "split", "submit", "token"]
    items = []
    for k in range(n):
        opts = [" ".join(rng.sample(words, 3)) for _ in range(4)]
        gold = rng.randrange(4)
        opts = [o if i == gold else o + "  " for i, o in enumerate(opts)]
        items.append(Mcq(f"t{k:03d}", tuple(opts), gold, f"the task mentions {rng.choice(words)}"))
    return items


def test_a_task_over_the_block_size_is_measured_block_by_block_with_its_rules_of_one_item_unchanged():
    from generators.quality.baselines import SUITE, deal_blocks

    items = _fingerprinted(260, 5)
    parts = deal_blocks([it.where for it in items], "audit", 100)
    assert sorted(i for p in parts for i in p) == list(range(260))
    assert [len(p) for p in parts] == [87, 87, 86] and all(p == sorted(p) for p in parts)
    assert deal_blocks([it.where for it in items], "audit", 100) == parts  # seeded, not random
    assert deal_blocks([it.where for it in items], "other", 100) != parts
    assert deal_blocks([it.where for it in items], "audit", 300) == [list(range(260))]

    whole = task_baselines(items, block=None)
    blocked = task_baselines(items, block=100)
    assert blocked.n_items == whole.n_items == 260 and blocked.chance == whole.chance
    for name in ("longest", "shortest", "central", "outlier", "position"):  # rules of one item: the same
        assert blocked.scores[name] == whole.scores[name]
    # the learned and n-gram rules are those of each block measured on its own
    alone = [task_baselines([items[i] for i in part], block=None) for part in parts]
    for name in ("no_context", *SUITE):
        expected = [0.0] * 260
        for part, result in zip(parts, alone, strict=True):
            for i, value in zip(part, result.scores[name], strict=True):
                expected[i] = value
        assert blocked.scores[name] == expected, name
        assert blocked.accuracy[name] == pytest.approx(sum(expected) / 260)
    assert blocked.scores["no_context"] != whole.scores["no_context"]  # fitted on less: not the same models
    # a tell is found block by block as on the whole task
    assert blocked.accuracy["no_context"] > 0.9 and "no_context" in blocked.exceeded


def test_the_build_audits_in_blocks_of_the_configured_size():
    from flows.config import QualityConfig
    from generators.quality.audit import build_quality

    items = [it._replace(options=tuple(o.rstrip() for o in it.options)) for it in _fingerprinted(120, 6)]
    rows = [
        {"item_id": it.where, "options": list(it.options), "gold_index": it.gold_index, "trajs": it.context}
        for it in items
    ]
    parsed = [candidate_row(r, r["item_id"]) for r in rows]
    assert all(isinstance(r, AuditRow) for r in parsed)
    mcq = [Mcq(r.where, r.options, r.gold_index, r.context) for r in parsed]
    report = build_quality({"plan": rows}, QualityConfig(block_items=50))
    learned = ("no_context", "option_lr", "context_lr")
    got = [report.tasks["plan"].baselines[name] for name in learned]
    blocked, whole = task_baselines(mcq, block=50), task_baselines(mcq, block=None)
    assert got == pytest.approx([blocked.accuracy[name] for name in learned], abs=1e-4)
    assert got != pytest.approx([whole.accuracy[name] for name in learned], abs=1e-4)


def test_a_shelf_reads_back_what_was_appended_by_index_slice_and_in_order():
    from generators.quality.shelf import Shelf

    values = [Mcq(f"w{k}", ("a" * k, "b"), k % 2, "ctx" * k) for k in range(50)]
    with Shelf[Mcq]() as shelf:
        for v in values:
            shelf.append(v)
        assert len(shelf) == 50 and list(shelf) == values
        assert shelf[0] == values[0] and shelf[-1] == values[-1] and shelf[17] == values[17]
        assert shelf[10:13] == values[10:13]
        with pytest.raises(IndexError):
            shelf[50]
        first = next(iter(shelf))
        assert shelf[49] == values[49] and first == values[0]  # reads by index between iterations


def _task_rows(n: int, seed: int) -> list[AuditRow]:
    rng = random.Random(seed)
    words = [
        "install",
        "run",
        "test",
        "fix",
        "patch",
        "import",
        "module",
        "config",
        "path",
        "error",
        "torch",
        "numpy",
    ]
    rows = []
    for k in range(n):
        opts = tuple(" ".join(rng.choice(words) for _ in range(rng.randint(2, 9))) for _ in range(4))
        context = " ".join(rng.choice(words) for _ in range(30))
        rows.append(
            AuditRow("t", f"item-{k:04d}", "mcq", opts, rng.randrange(4), context, f"key-{k % (n - 3)}")
        )
    rows.append(AuditRow("t", "item-bad", "mcq", ("only one",), 0, "ctx", "key-bad"))  # not a valid item
    return rows


def test_an_audit_shelved_on_disk_equals_the_audit_in_memory_and_holds_one_block_of_items():
    from generators.quality.shelf import Shelf

    rows = _task_rows(90, 7)
    held = []

    class Watched(Shelf[Mcq]):
        def __getitem__(self, i):  # the items the baselines read back, one block at a time
            held.append(i)
            return super().__getitem__(i)

    in_memory = audit_task("t", rows, block=30)
    with Watched() as shelf:
        shelved = audit_task("t", iter(rows), block=30, store=shelf)
    assert shelved.items == in_memory.items == 91
    assert shelved.problems == in_memory.problems and shelved.findings["duplicate_row"] == 3
    assert shelved.baselines == in_memory.baselines
    assert sorted(held) == list(range(90))  # every valid item read back once, by index, not kept
    whole = task_baselines([Mcq(r.where, r.options, r.gold_index, r.context) for r in rows], block=None)
    assert whole.n_items == 90 and whole.scores.keys() == in_memory.baselines.scores.keys()


def test_options_equally_central_up_to_float_noise_share_the_centrality_rank_tag():
    from generators.quality.baselines import option_features

    noisy = 0.1 + 0.2  # 0.30000000000000004: the same mean summed in another order
    feats = option_features(["alpha", "beta", "gamma"], [0.3, noisy, 0.1])
    assert "sim:mid" in feats[0] and "sim:mid" in feats[1] and "sim:bottom" in feats[2]
    feats = option_features(["alpha", "beta", "gamma"], [0.31, noisy, 0.1])
    assert "sim:top" in feats[0] and "sim:mid" in feats[1]
