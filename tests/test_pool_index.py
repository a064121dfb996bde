"""The offline generator's pool index: its compact LSH forest answers as datasketch's does."""

from __future__ import annotations

import random

import numpy as np
import pytest
from datasketch import MinHash, MinHashLSHForest

from generators.base import PoolEntry
from generators.offline import LshForest, PoolIndex
from generators.text import jaccard, tokens
from schemas import GoldStep, Provenance

PROV = Provenance(source_file="x", source_format="swe_agent_traj", extractor="swe_issue_fix")


def _datasketch(members: list[int], signatures: np.ndarray) -> MinHashLSHForest:
    forest = MinHashLSHForest(num_perm=signatures.shape[1], l=8)
    for i in members:
        forest.add(i, MinHash(num_perm=signatures.shape[1], hashvalues=signatures[i], scheme="affine32"))
    forest.index()
    return forest


@pytest.mark.parametrize("span", [2, 3, 16, 1 << 32])
def test_the_compact_forest_returns_datasketchs_keys_in_datasketchs_order(span):
    """Query by query, the same list: the keys met first (prefix length k down to 1, trees in order,
    entries in the order of their values, equal ones in the order added) up to `n`. Small value
    spans make long runs of equal prefixes, and equal full keys, at every length."""
    rng = random.Random(span)
    stopped_early = exhausted = 0
    for _ in range(8):
        n = rng.choice([1, 40, 300])
        sigs = np.array([[rng.randrange(span) for _ in range(32)] for _ in range(n)], dtype=np.uint32)
        members = [i for i in range(n) if rng.random() < 0.8] or [0]
        if rng.random() < 0.5:
            rng.shuffle(members)  # the order added is kept among equal keys, whatever it is
        ours, theirs = LshForest(members, sigs, 8), _datasketch(members, sigs)
        for _ in range(20):
            query = sigs[rng.randrange(n)].copy()
            if rng.random() < 0.5:
                query[rng.randrange(32) :] = rng.randrange(span)
            k = rng.choice([1, 3, 12, 10_000])
            want = theirs.query(MinHash(num_perm=32, hashvalues=query, scheme="affine32"), k)
            assert ours.query(query, k) == want
            stopped_early += len(want) == k
            exhausted += len(want) < k
    assert stopped_early and exhausted  # both ways out of the walk were taken


def test_a_tuple_of_tokens_overlaps_as_its_set_does():
    texts = ["I need to open the parser", "open the parser module now", "", "run tests", "the the the"]
    for a in texts:
        for b in texts:
            assert jaccard(tokens(a), tuple(sorted(tokens(b)))) == jaccard(tokens(a), tokens(b))


def test_the_index_shares_each_token_string_and_answers_by_forest():
    """Entries of a large pool hold one string per distinct token, and a pool over `exact_below`
    is answered through the forest: the most similar other runs' steps come first."""
    rng = random.Random(7)
    words = [f"word{i}" for i in range(40)]
    pool = [
        PoolEntry(f"s{i}", f"t{i // 4}", f"org__repo-{i // 8}", " ".join(rng.sample(words, 6)))
        for i in range(600)
    ]
    index = PoolIndex(pool, 3, 1, exact_below=64)
    assert index.everything is not None and index.everything.size == len(pool)
    strings = {id(t) for toks in index.tokens for t in toks}
    assert len(strings) == len({t for toks in index.tokens for t in toks}) <= len(words)
    step = GoldStep(
        step_id="q",
        scenario="swe_issue_fix",
        task="plan",
        form="mcq",
        trajectory_id="other",
        step_index=0,
        gold=pool[5].text,
        fields={"trajs": "[]"},
        group="elsewhere__x-1",
        provenance=PROV,
    )
    found = index.query(step, 10)
    assert found and found[0] == 5  # the same text, from another run, ranks first
    scores = [jaccard(tokens(step.gold), index.tokens[i]) for i in found]
    assert scores == sorted(scores, reverse=True)
