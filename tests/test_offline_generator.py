"""Offline distractors and balanced gold positions."""

from __future__ import annotations

from collections import Counter

from generators.base import PoolEntry
from generators.offline import OfflineGenerator
from generators.quality.balance import balance_positions
from generators.text import similarity
from schemas import Candidate, GoldStep, Problem, Provenance, Question

PROV = Provenance(source_file="x", source_format="swe_agent_traj", extractor="swe_issue_fix")
PLANS = [
    "I need to open the parser module",
    "I need to open the parser module.",  # near-duplicate of the first
    "I need to run the reproduction script",
    "I need to inspect the tokenizer for quoted fields",
    "I need to edit the split function to respect quotes",
    "I need to submit the changes",
    "I need to create a test script for empty inputs",
    "I need to search the code for the division helper",
]


def _gold(i: int, text: str, tid: str = "t") -> GoldStep:
    return GoldStep(
        step_id=f"s{i}",
        scenario="swe_issue_fix",
        task="plan",
        form="mcq",
        trajectory_id=f"{tid}{i % 3}",
        step_index=i,
        gold=text,
        fields={"trajs": "[]"},
        provenance=PROV,
    )


def _pool(golds):
    return [PoolEntry(g.step_id, g.trajectory_id, g.group, g.gold) for g in golds]


def test_distractors_are_never_equal_or_near_equal_to_the_gold_or_each_other():
    golds = [_gold(i, t) for i, t in enumerate(PLANS)]
    out = list(OfflineGenerator(seed=1).generate(golds, _pool(golds), 4))
    qs = [q for q in out if isinstance(q, Question)]
    assert len(qs) == len(golds)
    for q in qs:
        assert q.options[q.gold_index] == q.gold and len(q.options) == 4
        for i, a in enumerate(q.options):
            for b in q.options[i + 1 :]:
                assert similarity(a, b) < 0.85, (a, b)


def test_the_generator_is_deterministic_for_a_seed():
    golds = [_gold(i, t) for i, t in enumerate(PLANS)]
    a = list(OfflineGenerator(seed=3).generate(golds, _pool(golds), 4))
    b = list(OfflineGenerator(seed=3).generate(golds, _pool(golds), 4))
    assert a == b


def test_closing_the_generator_drops_the_pool_indexes_it_used_and_keeps_another_builds():
    """The process keeps a task's pool index for its shards; once a build's generation is done, the
    index (its pool's texts, token sets and LSH forests) must not stay for the rest of the build."""
    import weakref

    from generators import offline

    golds = [_gold(i + 500, t) for i, t in enumerate(PLANS)]  # pools no other test indexed
    mine, theirs = _pool(golds), _pool([_gold(i + 900, t) for i, t in enumerate(PLANS)])
    gen, other = OfflineGenerator(seed=1), OfflineGenerator(seed=1)
    first = list(gen.generate(golds[:4], mine, 4))
    list(gen.generate(golds[4:], mine, 4))  # a second shard of the same task: the same index
    list(other.generate(golds, theirs, 4))
    used = [i for i in offline._INDEXES.values() if i.pool is mine]
    assert len(used) == 1
    gone = weakref.ref(used[0])
    del used
    gen.close()
    assert gone() is None
    assert any(i.pool is theirs for i in offline._INDEXES.values())  # another build's stays
    assert list(OfflineGenerator(seed=1).generate(golds[:4], mine, 4)) == first  # rebuilt alike
    other.close()
    assert not any(i.pool is theirs for i in offline._INDEXES.values())


def test_too_small_a_pool_gives_a_problem_not_a_short_question():
    golds = [_gold(0, PLANS[0]), _gold(1, PLANS[2])]
    out = list(OfflineGenerator().generate(golds, _pool(golds), 4))
    assert all(isinstance(p, Problem) and p.reason == "too_few_distractors" for p in out)


def test_scenario_candidates_are_used_first():
    g = _gold(0, "I need to open the parser module").model_copy(
        update={
            "candidates": (
                Candidate(text="alpha beta", origin="rule:a"),
                Candidate(text="gamma delta", origin="same_instance:b"),
            )
        }
    )
    pool = _pool([_gold(i, t) for i, t in enumerate(PLANS)])
    (q,) = list(OfflineGenerator().generate([g], pool, 4))
    assert [d.origin for d in q.distractors][:2] == ["rule:a", "same_instance:b"]


def test_gold_positions_are_balanced_across_a_task():
    golds = [_gold(i, f"I need to do task number {i} with {'x' * i}") for i in range(40)]
    pool = _pool(golds) + [PoolEntry(f"p{i}", "z", "", t) for i, t in enumerate(PLANS)]
    qs = [q for q in OfflineGenerator().generate(golds, pool, 4) if isinstance(q, Question)]
    balanced = balance_positions(qs, seed=5)
    counts = Counter(q.gold_index for q in balanced)
    assert set(counts) == {0, 1, 2, 3} and max(counts.values()) - min(counts.values()) <= 1
    for q in balanced:
        assert q.options[q.gold_index] == q.gold
    assert balance_positions(qs, seed=5) == balanced


def test_a_pool_the_task_forbids_gives_no_distractor_or_reserve_of_another_run():
    words = ["delete the cache", "rename the module", "pin numpy", "skip the tests", "reboot", "open a shell"]
    own = tuple(Candidate(text=f"I need to {w}", origin="rule:e") for w in words)
    rich = _gold(0, PLANS[0]).model_copy(update={"candidates": own})
    thin = _gold(1, PLANS[2]).model_copy(update={"candidates": own[:2]})
    golds = [rich, thin, *(_gold(i, t) for i, t in enumerate(PLANS[3:], start=3))]
    allowed = list(OfflineGenerator(seed=2).generate([rich, thin], _pool(golds), 4))
    pool = [e._replace(retrievable=False) for e in _pool(golds)]
    out = list(OfflineGenerator(seed=2).generate([rich, thin], pool, 4))
    # with the pool allowed, both items draw other runs' golds (the thin one to fill up, the rich one as reserve)
    assert all(isinstance(q, Question) for q in allowed)
    assert all(any(d.origin.startswith("other_run:") for d in (*q.distractors, *q.reserve)) for q in allowed)
    q, problem = out
    assert isinstance(q, Question) and {d.origin for d in (*q.distractors, *q.reserve)} == {"rule:e"}
    assert isinstance(problem, Problem) and problem.reason == "too_few_distractors"


def test_a_capped_task_draws_one_other_run_at_most_and_never_what_its_pattern_excludes(monkeypatch):
    import types

    import generators.offline as offline

    spec = types.SimpleNamespace(
        other_runs_per_item=1, other_runs_never=r"submit|shell", other_runs_not_beside=None
    )
    monkeypatch.setattr(offline, "task_spec", lambda scenario, task: spec)
    words = ["delete the cache", "rename the module", "pin numpy", "skip the tests", "reboot"]
    own = tuple(Candidate(text=f"I need to {w}", origin="rule:e") for w in words)
    rich = _gold(0, PLANS[0]).model_copy(update={"candidates": own})
    fill = _gold(1, PLANS[2]).model_copy(update={"candidates": own[:2]})  # one short of the 3 needed
    thin = _gold(2, PLANS[3]).model_copy(update={"candidates": own[:1]})  # two short: no item
    golds = [rich, fill, thin, *(_gold(i, t) for i, t in enumerate(PLANS[4:], start=4))]
    out = list(OfflineGenerator(seed=2).generate([rich, fill, thin], _pool(golds), 4))
    *questions, problem = out
    assert isinstance(problem, Problem) and problem.reason == "too_few_distractors"
    for q in questions:
        drawn = [d.text for d in (*q.distractors, *q.reserve) if d.origin.startswith("other_run:")]
        assert len(drawn) <= 1 and not any("submit" in t or "shell" in t for t in drawn)
    assert any(d.origin.startswith("other_run:") for d in questions[1].distractors)


def test_another_runs_step_of_the_golds_own_kind_is_never_drawn_beside_it(monkeypatch):
    import types

    import generators.offline as offline

    spec = types.SimpleNamespace(
        other_runs_per_item=None, other_runs_never=None, other_runs_not_beside=r"submit"
    )
    monkeypatch.setattr(offline, "task_spec", lambda scenario, task: spec)
    texts = [*PLANS, "I need to submit the fix now", "I need to submit the patch for review"]
    golds = [_gold(i, t) for i, t in enumerate(texts)]
    out = {
        q.gold: q
        for q in OfflineGenerator(seed=4, reserve_factor=3).generate(golds, _pool(golds), 4)
        if isinstance(q, Question)
    }
    assert {"I need to submit the changes", "I need to submit the fix now"} <= set(out)

    def drawn(gold: str) -> list[str]:
        q = out[gold]
        return [d.text for d in (*q.distractors, *q.reserve) if d.origin.startswith("other_run:")]

    for gold in ("I need to submit the changes", "I need to submit the fix now"):
        assert drawn(gold) and not any("submit" in t for t in drawn(gold))  # a submit gold: no other submit
    # beside a gold of another kind, another run's submit is a wrong option like any other
    assert any("submit" in t for g in out if "submit" not in g for t in drawn(g))


def test_similarity_is_the_standard_librarys_difflib_ratio_on_every_kind_of_text() -> None:
    """`similarity` runs cydifflib (difflib in C++) for speed: every value must be the one the standard
    library's SequenceMatcher gives (same quick-ratio shortcut below 0.5), on texts where difflib's
    heuristics matter: long texts of repeated characters (autojunk off), non-ASCII, empty, reordered."""
    import difflib
    import random

    from generators.text import normalise, normalised_similarity

    rng = random.Random(7)
    words = ["parser", "fails", "on", "empty", "input", "données", "解析", "失败", "x", "a" * 30]
    texts = ["", "a", "ab" * 300, "ba" * 299 + "c", *PLANS]
    texts += [" ".join(rng.choice(words) for _ in range(rng.randint(1, 60))) for _ in range(60)]

    def stdlib(na: str, nb: str) -> float:
        if na == nb:
            return 1.0
        m = difflib.SequenceMatcher(None, na, nb, autojunk=False)
        if m.real_quick_ratio() < 0.5 or m.quick_ratio() < 0.5:
            return m.quick_ratio()
        return m.ratio()

    pairs = [(normalise(a), normalise(b)) for a in texts for b in texts[:25]]
    assert len({round(stdlib(a, b), 3) for a, b in pairs}) > 50  # a spread of values, not a few easy ones
    assert [normalised_similarity(a, b) for a, b in pairs] == [stdlib(a, b) for a, b in pairs]
