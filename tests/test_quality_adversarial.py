"""Planted shortcuts: each baseline of the suite finds its own, and adversarial filtering removes it.

Every task below is built so that one cheap rule finds the gold (gold = longest; gold = most
similar to the context; gold = the only plan ending in a run step; gold = the option written in
another style), and every item carries reserve candidates without the tell. The baseline must
exceed its bound before filtering and stay within it after; filtering is byte-for-byte
deterministic for a seed.
"""

from __future__ import annotations

import json
import random
from collections import Counter

import numpy as np
import pytest

from generators.quality.adversarial import Settings, adversarial_filter
from generators.quality.balance import balance_positions
from generators.quality.baselines import Mcq, task_baselines
from generators.quality.gates import check_question, context_text, found_in_context
from schemas import Distractor, Provenance, Question, content_id

WORDS = [
    "parser",
    "writer",
    "module",
    "script",
    "quote",
    "field",
    "split",
    "submit",
    "token",
    "cache",
    "index",
    "branch",
    "commit",
    "merge",
    "request",
    "session",
    "header",
    "cookie",
    "stream",
    "buffer",
    "socket",
    "thread",
    "worker",
    "queue",
    "schema",
    "record",
    "column",
    "router",
    "handler",
    "plugin",
    "loader",
    "config",
    "option",
    "value",
    "string",
    "number",
    "vector",
    "matrix",
    "tensor",
    "kernel",
]


def _question(
    k: int,
    task: str,
    gold: str,
    distractors: list[str],
    reserve: list[str],
    context: str,
    reserve_source: str = "other_run",
) -> Question:
    return Question(
        item_id=content_id(task, k),
        scenario="planted",
        task=task,
        form="mcq",
        trajectory_id=f"t{k}",
        step_index=k,
        fields={"trajs": context},
        gold=gold,
        options=(gold, *distractors),
        gold_index=0,
        distractors=tuple(Distractor(text=d, origin=f"other_run:{k}:{i}") for i, d in enumerate(distractors)),
        reserve=tuple(Distractor(text=r, origin=f"{reserve_source}:r{k}:{i}") for i, r in enumerate(reserve)),
        provenance=Provenance(source_file=f"run{k}.json", source_format="planted", extractor="planted"),
    )


def _phrase(rng: random.Random, n: int) -> str:
    return " ".join(rng.sample(WORDS, n))


def _audit(questions: list[Question]):
    placed = balance_positions(questions, seed=1)  # as the build does after filtering
    return task_baselines([Mcq(q.item_id, q.options, q.gold_index, context_text(q.fields)) for q in placed])


def _gold_longest(rng: random.Random, k: int) -> Question:
    gold = "edit the " + _phrase(rng, 9)
    short = ["edit the " + _phrase(rng, 4) for _ in range(3)]
    long = ["edit the " + _phrase(rng, rng.choice((8, 9, 10, 11))) for _ in range(6)]
    return _question(k, "longest", gold, short, [*long, *short[:0]], _phrase(rng, 12))


def _gold_similar(rng: random.Random, k: int) -> Question:
    topic = rng.sample(WORDS, 6)
    context = "the agent looked at " + " ".join(topic) + " and then " + _phrase(rng, 6)
    gold = "inspect " + " ".join(rng.sample(topic, 4))
    far = ["inspect " + _phrase(rng, 4) for _ in range(3)]
    near = ["inspect " + " ".join(rng.sample(topic, 4)) for _ in range(6)]
    return _question(k, "similar", gold, far, near, context)


STEPS = {
    "clone": "Clone the repository {w}",
    "install": "Install the Python packages {w}",
    "configure": "Edit the file {w}.yaml",
    "run": "Run the script {w}.py",
    "delete": "Delete the folder {w}",
}


def _plan(rng: random.Random, kinds: list[str]) -> str:
    return "".join(
        f"*step{i + 1}: {STEPS[kind].format(w=rng.choice(WORDS))};" for i, kind in enumerate(kinds)
    )


def _gold_runs_last(rng: random.Random, k: int) -> Question:
    def middle() -> list[str]:
        return rng.sample(
            ["install", "configure", "install", "configure", "configure"], rng.choice((2, 3, 4))
        )

    gold = _plan(rng, ["clone", *middle(), "run"])
    bad = [_plan(rng, ["clone", *middle(), rng.choice(("delete", "install"))]) for _ in range(3)]
    good_shape = [_plan(rng, ["clone", *middle(), "run"]) for _ in range(6)]
    return _question(k, "runs_last", gold, bad, good_shape, "Set up the repository " + _phrase(rng, 5))


def _gold_other_style(rng: random.Random, k: int) -> Question:
    gold = "I need to check the " + _phrase(rng, 4) + " first."
    other = ["Look into " + _phrase(rng, 4) + " now" for _ in range(3)]
    same = ["I need to check the " + _phrase(rng, 4) + " first." for _ in range(6)]
    return _question(k, "style", gold, other, same, _phrase(rng, 10))


PLANTED = [
    ("longest", _gold_longest, "longest"),
    ("similar", _gold_similar, "ctx_word_tail_most"),
    ("runs_last", _gold_runs_last, "structure_lr"),
    ("style", _gold_other_style, "option_lr"),
]


#: Enough items that the audit's bound is chance + 10 points exactly and a learned rule's
#: cross-validated accuracy varies by a few points only: the planted tell is found at >= 90% and
#: filtering leaves it well under the bound, whatever the seed (not a coin flip at the boundary).
PLANTED_ITEMS = 150


@pytest.mark.parametrize(("task", "make", "baseline"), PLANTED, ids=[p[0] for p in PLANTED])
def test_each_baseline_finds_its_planted_shortcut_and_filtering_removes_it(task, make, baseline):
    rng = random.Random(task)
    questions = [make(rng, k) for k in range(PLANTED_ITEMS)]
    planted = _audit(questions)
    assert planted.accuracy[baseline] >= 0.9 and baseline in planted.exceeded
    assert planted.bounds[baseline] == pytest.approx(planted.chance + 0.10)

    filtered, dropped, stats = adversarial_filter(questions, seed=3)
    after = _audit(filtered)
    assert after.accuracy[baseline] <= after.bounds[baseline] - 0.03, (baseline, after.accuracy[baseline])
    assert not after.exceeded, after.why()
    assert stats[task].replaced >= PLANTED_ITEMS and stats[task].candidates_scored >= stats[task].replaced
    assert stats[task].items == PLANTED_ITEMS and stats[task].dropped == len(dropped)
    assert (
        len(filtered) == PLANTED_ITEMS - len(dropped) >= 0.9 * PLANTED_ITEMS
    )  # the reserve hides every tell
    assert all(not q.reserve and q.options[q.gold_index] == q.gold for q in filtered)
    assert all(len(set(q.options)) == len(q.options) == 4 for q in filtered)


def _no_tell(rng: random.Random, k: int, reserve_source: str) -> Question:
    def option() -> str:
        return "check the " + _phrase(rng, 5)

    return _question(
        k,
        "sources",
        option(),
        [option() for _ in range(3)],
        [option() for _ in range(6)],
        _phrase(rng, 12),
        reserve_source,
    )


def _shown_sources(questions: list[Question]) -> Counter:
    return Counter(d.origin.split(":", 1)[0] for q in questions for d in q.distractors)


@pytest.mark.parametrize("source", ["same_instance", "rule", "same_run"])
def test_equally_hard_candidates_from_the_items_own_run_or_instance_replace_those_from_other_runs(source):
    rng = random.Random(source)
    questions = [_no_tell(rng, k, source) for k in range(60)]
    filtered, _, stats = adversarial_filter(questions, seed=2)
    shown = _shown_sources(filtered)
    assert shown[source] >= 0.9 * sum(shown.values()), shown
    assert stats["sources"].replaced >= 0.9 * 3 * len(filtered)
    assert not _audit(filtered).exceeded


def test_a_better_source_never_brings_back_a_tell():
    """The items' own-run candidates are all short, so showing them would make the gold the longest
    option: the source preference gives way to the bound."""
    rng = random.Random(9)
    questions = []
    for k in range(120):
        gold = "edit the " + _phrase(rng, 8)
        same_length = ["edit the " + _phrase(rng, 8) for _ in range(3)]
        short = ["edit the " + _phrase(rng, 2) for _ in range(6)]
        questions.append(_question(k, "sources", gold, same_length, short, _phrase(rng, 12), "same_instance"))
    filtered, _, _ = adversarial_filter(questions, seed=2)
    after = _audit(filtered)
    assert after.accuracy["longest"] <= after.bounds["longest"] and not after.exceeded, after.why()
    assert _shown_sources(filtered)["same_instance"] <= 1.5 * len(filtered)  # about one per item, not three


def test_filtering_is_byte_for_byte_deterministic_for_a_seed():
    rng = random.Random(11)
    questions = [_gold_similar(rng, k) for k in range(60)]
    runs = [adversarial_filter(questions, seed=5) for _ in range(2)]
    dumps = [json.dumps([q.model_dump(mode="json") for q in out], sort_keys=True) for out, _, _ in runs]
    assert dumps[0] == dumps[1]
    assert runs[0][2] == runs[1][2]
    other = adversarial_filter(questions, seed=6, settings=Settings(rounds=3))[0]
    assert [q.options for q in other] != [q.options for q in runs[0][0]]  # the seed matters


def test_a_task_without_reserve_is_left_as_it_is():
    rng = random.Random(2)
    questions = [_gold_longest(rng, k).model_copy(update={"reserve": ()}) for k in range(20)]
    out, dropped, stats = adversarial_filter(questions, seed=1)
    assert out == questions and not dropped and stats["longest"].replaced == 0


def test_where_the_gold_is_copied_from_the_context_filtering_keeps_a_candidate_found_there_too():
    """A gold found verbatim in the context fails the `gold_in_context` gate unless a shown
    distractor is found there as well: filtering shows such a candidate where the reserve has one,
    never swaps it out, and leaves the items where none exists to the gate (which drops them)."""
    rng = random.Random(4)
    questions = []
    for k in range(60):
        gold = "open the " + _phrase(rng, 5)
        quoted = "open the " + _phrase(rng, 5)
        context = f"{_phrase(rng, 8)}\n{gold}\n{_phrase(rng, 4)}\n" + (quoted if k % 6 else "")
        reserve = ["open the " + _phrase(rng, 5) for _ in range(5)] + [quoted]
        questions.append(
            _question(k, "copied", gold, ["open the " + _phrase(rng, 5) for _ in range(3)], reserve, context)
        )
    filtered, _, stats = adversarial_filter(questions, seed=2)
    assert stats["copied"].left_to_gates == 10 and stats["copied"].items == 60
    by_id = {q.item_id: q for q in questions}
    for q in filtered:
        found = found_in_context(q.options, context_text(q.fields))
        assert found[q.gold_index]
        if q.item_id in {by_id[content_id("copied", k)].item_id for k in range(0, 60, 6)}:
            assert not any(found[1:]) and any(
                p.reason == "gold_in_context" and p.severity == "error" for p in check_question(q)
            )
        else:
            assert q.reserve == () and sum(found) >= 2, q.options


def _one_swap_reference(shown, n_texts, sims, near, pref):
    """Item by item, slot by slot: the option sets one swap away, as the filter defines them."""
    spare = [j for j in range(1, n_texts) if j not in shown]
    rows, gain = [], []
    for slot in range(1, len(shown)):
        for j in spare:
            others = [sims[j, s] for t, s in enumerate(shown) if t != slot]
            if max(others) < near:
                row = list(shown)
                row[slot] = j
                rows.append(row)
                gain.append(pref[j] - pref[shown[slot]])
    return rows, gain


def test_one_swap_trials_are_every_reserve_text_in_every_slot_but_near_duplicates():
    from generators.quality import adversarial as af

    rng = np.random.default_rng(4)
    questions = [_gold_similar(random.Random(k), k) for k in range(6)]
    state = af._State(questions, af._InContext())
    found, left_out = 0, 0
    for i in range(len(questions)):
        n = len(state.texts[i])
        sims = rng.choice([0.1, 0.5, 0.5, 0.95], size=(n, n), p=[0.5, 0.2, 0.2, 0.1])  # ties at the top
        rows, gain = af._all_trials(state, i, sims, 0.9)
        want_rows, want_gain = _one_swap_reference(state.shown[i], n, sims, 0.9, state.preferred[i])
        assert rows.tolist() == want_rows and gain.tolist() == want_gain
        found += len(want_rows)
        left_out += (n - len(state.shown[i])) * (len(state.shown[i]) - 1) - len(want_rows)
    assert found > 0 and left_out > 0  # some swaps kept, some refused as near-duplicates


def test_first_swaps_scored_together_are_those_scored_item_by_item(monkeypatch):
    from generators.quality import adversarial as af
    from generators.quality.scorers import item_views, suite_features, task_grams

    rng = random.Random(8)
    questions = [_gold_runs_last(rng, k) for k in range(24)] + [_gold_longest(rng, k + 100) for k in range(6)]
    questions = [
        q.model_copy(update={"distractors": q.distractors[:2]}) if k % 3 == 0 else q
        for k, q in enumerate(questions)
    ]  # items with 3 and with 4 options
    state = af._State(questions, af._InContext())
    items = state.items()
    views = item_views(items, 3, salt=(1, 0), features=suite_features(items, task_grams(items)))
    nb = af._NaiveBayes(state).fit(state, (1, 0), 3)
    scores = [af._item_scores(state, i, views[i], {}, nb) for i in range(len(items))]
    monkeypatch.setattr(af, "_TRIAL_CHUNK", 40)  # several chunks per option count
    first = af._first_swaps(state, scores, views, 0.9)
    assert {len(s) for s in state.shown} == {3, 4}
    for i in range(len(items)):
        trials, pref = af._trials(state, i, views[i].chars, 0.9)
        got, soft, now = first[i][2], first[i][3], first[i][4]
        np.testing.assert_array_equal(first[i][0], trials)
        np.testing.assert_array_equal(first[i][1], pref)
        np.testing.assert_array_equal(got, af.trial_credits(scores[i], trials))
        np.testing.assert_array_equal(soft, af._soft(scores[i], trials))
        assert now == af._soft(scores[i], np.array([state.shown[i]]))[0]


def test_a_task_larger_than_a_block_is_filtered_block_by_block_within_its_bounds():
    from generators.quality.adversarial import blocks_of

    rng = random.Random("blocks")
    questions = [_gold_longest(rng, k) for k in range(260)]
    blocks = blocks_of(questions, 3, 100)
    assert [len(b) for b in blocks] == [87, 87, 86]  # as even as can be, none over the size
    assert sorted(q.item_id for b in blocks for q in b) == sorted(q.item_id for q in questions)
    assert blocks_of(questions, 3, 100) == blocks and blocks_of(questions, 4, 100) != blocks  # seeded
    assert blocks_of(questions[:90], 3, 100) == [questions[:90]]  # a task within a block: as it is
    assert _audit(questions).accuracy["longest"] > 0.9  # the planted tell
    settings = Settings(block=100)
    out, dropped, stats = adversarial_filter(questions, seed=3, settings=settings)
    after = _audit(out)
    assert not after.exceeded, after.why()
    st = stats["longest"]
    assert st.items == 260 and len(out) == 260 - st.dropped == 260 - len(dropped)
    assert st.replaced > 0 and st.after["longest"] <= after.bounds["longest"]
    again = adversarial_filter(questions, seed=3, settings=settings)
    assert [q.options for q in again[0]] == [q.options for q in out] and again[2] == stats


def test_the_pair_rows_begin_with_the_option_rows_and_training_rows_centre_the_dense_part_in_place():
    from scipy import sparse

    from generators.quality import adversarial as af
    from generators.quality import scorers

    rng = random.Random(12)
    questions = [_gold_similar(rng, k) for k in range(10)] + [_gold_longest(rng, k + 50) for k in range(10)]
    items = af._State(questions, af._InContext()).items()
    counted = scorers.task_grams(items)
    lexical = scorers.lexical_scores(items, counted)
    both = scorers.featurise_kinds(items, ["pair", "option"], lexical, counted)
    for kind, feats in both.items():  # computed together, or each on its own: the same rows
        alone = scorers.featurise(items, kind, lexical if kind == "pair" else None, counted)
        assert (feats.rows != alone.rows).nnz == 0 and np.array_equal(feats.dense, alone.dense)
    option, pair = both["option"], both["pair"]
    width = option.rows.shape[1] - option.dense.shape[1]  # the option kind's n-gram columns
    assert (pair.rows[:, :width] != option.rows[:, :width]).nnz == 0
    assert pair.rows.shape[1] > option.rows.shape[1] and pair.dense.shape[1] > option.dense.shape[1]
    # every dense value is stored, zeros too: a training matrix is a gather with those entries centred
    d = pair.dense.shape[1]
    assert pair.rows.nnz == sparse.csr_matrix(pair.rows[:, :-d]).nnz + pair.rows.shape[0] * d
    order = list(range(len(items)))
    x, y = scorers._training_rows(items, pair, order)
    picks = [
        int(pair.offsets[i]) + j
        for i in order
        for j in sorted(items[i].options, key=lambda j: (items[i].texts[j], j))
    ]
    sizes = [len(items[i].options) for i in order]
    dense = pair.dense[picks]
    means = np.repeat(
        np.add.reduceat(dense, np.cumsum([0, *sizes[:-1]])) / np.array(sizes)[:, None], sizes, axis=0
    )
    want = sparse.hstack([pair.rows[picks][:, :-d], sparse.csr_matrix(dense - means)], format="csr")
    assert abs(x - want).max() == 0 and x.shape == want.shape
    assert y.tolist() == [
        int(j == items[i].gold)
        for i in order
        for j in sorted(items[i].options, key=lambda j: (items[i].texts[j], j))
    ]
    # each text is scored by its item's fold model over its row with the raw (uncentred) dense part
    fitted = scorers.learned_scorers(items, {"pair": pair}, 3, salt=(1, 0))["pair"]
    assert sum(w is not None for w in fitted.weights) == 3
    for i in range(len(items)):
        w = fitted.weights[fitted.fold[i]]
        rows = pair.rows[pair.offsets[i] : pair.offsets[i + 1]].toarray()
        np.testing.assert_allclose(fitted.scores(i), rows @ w, atol=1e-8)


def test_a_consuming_filter_gives_the_same_output_and_lets_each_blocks_input_go_once_filtered(monkeypatch):
    """`consume=True` (the build's filter stage) empties the list it is given and drops each block's
    questions, reserve and all, once the block is filtered: while the last block is filtered, none of
    the earlier blocks' inputs is alive any more; the output is the same as without it."""
    import gc
    import weakref

    from generators.quality import adversarial

    rng = random.Random("consume")
    mcq = [_gold_longest(rng, k) for k in range(240)]
    completion = [
        q.model_copy(update={"task": "act", "form": "completion", "options": (), "gold_index": None})
        for q in (_gold_longest(rng, 1000 + k) for k in range(5))
    ]
    questions = mcq[:100] + completion + mcq[100:]
    settings = Settings(block=80, rounds=1)
    expected = adversarial_filter(list(questions), seed=3, settings=settings)
    alive_at_blocks: list[int] = []
    refs = [weakref.ref(q) for q in mcq]
    real = adversarial.filter_task

    def counting(block, *args, **kwargs):
        gc.collect()
        alive_at_blocks.append(sum(r() is not None for r in refs) - len(block))
        return real(block, *args, **kwargs)

    monkeypatch.setattr(adversarial, "filter_task", counting)
    handed = list(questions)
    del questions, mcq
    got = adversarial_filter(handed, seed=3, settings=settings, consume=True)
    assert handed == []
    assert [q.model_dump() for q in got[0]] == [q.model_dump() for q in expected[0]]
    assert got[1:] == expected[1:]
    assert len(alive_at_blocks) == 3
    # outside the block being filtered: the blocks still to come (80 each), nothing of those done
    assert alive_at_blocks == [160, 80, 0]


def test_the_closing_measurement_is_the_audit_of_the_shown_options_item_by_item():
    """`_closing` (the rounds' vectorised rules, refitted with the audit's folds) credits every item
    under every rule exactly as `task_baselines` does on the shown options with the filter's rows."""
    from generators.quality import adversarial as af
    from generators.quality.scorers import suite_features, task_grams

    rng = random.Random("closing")
    questions = (
        [_gold_runs_last(rng, k) for k in range(20)]
        + [_gold_longest(rng, k + 100) for k in range(15)]
        + [_gold_similar(rng, k + 200) for k in range(15)]
    )
    state = af._State(questions, af._InContext())
    for i, shown in enumerate(state.shown):  # some items show reserve candidates, as after rounds
        spare = [j for j in range(len(state.texts[i])) if j not in shown]
        if i % 2 and spare:
            shown[-1] = spare[i % len(spare)]
    items = state.items()
    features = suite_features(items, task_grams(items))
    per_item, after = af._closing(state, af._NaiveBayes(state), features)
    audit = task_baselines(
        [
            Mcq(q.item_id, tuple(state.texts[i][j] for j in state.shown[i]), 0, state.contexts[i])
            for i, q in enumerate(state.questions)
        ],
        features=features.shown(state.shown),
        block=None,
    )
    for name in af.RULES:
        assert [p[name] for p in per_item] == pytest.approx(audit.scores[name], abs=1e-12), name
        assert after[name] == pytest.approx(audit.accuracy[name], abs=1e-12), name
    assert max(after.values()) > 0.5  # the planted tells are there to be measured
