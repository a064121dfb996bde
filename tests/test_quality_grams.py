"""Hashed n-gram counts and the TF-IDF over them, differentially against scikit-learn."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import sparse
from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer

from generators.quality import grams
from generators.quality.scorers import Item, context_part, lexical_scores, task_grams

DOCS = [
    "Hello World foo_bar x 12 ab, then RUN `pytest -x tests/test_a.py` again",
    "安装 依赖 then run python train.py --epochs 3",
    "   ",
    "İstanbul ÉCOLE été naïve x-y z; Ⅷ ²",
    "a",
    "diff --git a/src/mod.py b/src/mod.py\n@@ -1,3 +1,4 @@\n-    return a < b\n+    return a <= b",
]


def test_word_grams_are_scikit_learns_word_one_and_two_grams_hashed():
    analyse = CountVectorizer(
        analyzer="word", ngram_range=(1, 2), token_pattern=r"(?u)\b\w+\b"
    ).build_analyzer()
    for doc in DOCS:
        # each analyser gram, hashed on its own: a unigram is the only id of itself, a bigram the
        # last id of its two words
        expected = sorted(int(grams.word_grams(g)[-1]) for g in analyse(doc))
        assert sorted(grams.word_grams(doc).tolist()) == expected, doc


def _items() -> list[Item]:
    rng = np.random.default_rng(3)
    words = [
        "parser",
        "writer",
        "module",
        "script",
        "quote",
        "field",
        "split",
        "token",
        "cache",
        "index",
        "branch",
        "commit",
        "merge",
    ]
    out = []
    for k in range(12):
        texts = tuple(" ".join(rng.choice(words, size=5)) + f" step{k % 3}" for _ in range(5))
        context = "the agent ran " + " ".join(rng.choice(words, size=40)) + " 安装 依赖"
        out.append(Item(f"i{k}", texts, (0, 1, 2, 3), 0, context))
    return out


@pytest.mark.parametrize(
    ("unit", "reference"),
    [
        ("word", {"analyzer": "word", "ngram_range": (1, 2), "token_pattern": r"(?u)\b\w+\b"}),
        ("char", {"analyzer": "char_wb", "ngram_range": (2, 4)}),
    ],
)
def test_context_cosines_equal_scikit_learns_tfidf_with_the_contexts_idf(unit, reference):
    items = _items()
    texts = [t for it in items for t in it.texts]
    ours = lexical_scores(items)
    owner = np.repeat(np.arange(len(items)), [len(it.texts) for it in items])
    for part in ("tail", "full"):
        contexts = [context_part(it.context, part) for it in items]
        analyse = TfidfVectorizer(**reference).build_analyzer()
        vocabulary = sorted({g for doc in texts + contexts for g in analyse(doc)})
        # df over the contexts only; a gram of the options no context holds gets the smoothed idf of df 0
        vec = TfidfVectorizer(sublinear_tf=True, vocabulary=vocabulary, **reference).fit(contexts)
        t, c = vec.transform(texts), vec.transform(contexts)
        expected = np.asarray(t.multiply(c[owner]).sum(axis=1)).ravel()
        np.testing.assert_allclose(np.concatenate(ours[f"{unit}_{part}"]), expected, atol=1e-8)
        assert expected.max() > 0.1  # the contexts share words with the texts: not a test of zeros


@pytest.mark.parametrize("dense", [False, True], ids=["sorted ids", "WIDTH table"])
def test_contexts_weighed_a_few_at_a_time_give_the_whole_tasks_cosines_bit_for_bit(monkeypatch, dense):
    """`context_cosine` weighs and pairs `_CONTEXT_ROWS` contexts at a time (its memory is a few
    contexts' counts, not the task's): the cosines and context weights are those of one pass, bit
    for bit, whether the texts' owners are in order or not."""
    items = _items() * 3
    texts = grams.char_counts([t for it in items for t in it.texts])
    contexts = grams.char_counts([it.context for it in items])
    monkeypatch.setattr(grams, "_DENSE_FROM", 0 if dense else 1 << 40)
    for owner in (
        np.repeat(np.arange(len(items)), [len(it.texts) for it in items]),
        np.random.default_rng(5).integers(0, len(items), texts.shape[0]),
    ):
        monkeypatch.setattr(grams, "_CONTEXT_ROWS", 1 << 30)
        whole = grams.context_cosine(texts, contexts, owner)
        monkeypatch.setattr(grams, "_CONTEXT_ROWS", 2)
        parts = grams.context_cosine(texts, contexts, owner)
        for a, b in zip(whole, parts, strict=True):
            assert a.tobytes() == b.tobytes()
        assert (whole[0] > 0.1).any() and (whole[1] == 0).any()  # shared grams and missing ones


def test_the_idf_table_is_the_smoothed_idf_of_every_column():
    contexts = grams.word_counts(["a b a c", "a b", "d e", ""])
    table = grams._idf_table(contexts)
    df = np.bincount(contexts.indices, minlength=grams.WIDTH)
    np.testing.assert_array_equal(table, np.log(5 / (1 + df)) + 1.0)
    assert table.dtype == np.float64 and len(table) == grams.WIDTH


def test_the_counts_of_shown_texts_are_those_of_a_recount():
    items = _items()
    counted = task_grams(items)
    picks = [(0, 3, 4) if k % 2 else (4, 1) for k in range(len(items))]
    shown = [
        Item(it.where, tuple(it.texts[j] for j in p), tuple(range(len(p))), 0, it.context)
        for it, p in zip(items, picks, strict=True)
    ]
    recount = task_grams(shown)
    sub = counted.shown(picks)
    for unit in ("word", "char"):
        assert (sub.texts[unit] != recount.texts[unit]).nnz == 0
    for key, values in recount.in_context.items():
        np.testing.assert_array_equal(sub.in_context[key], values)
    for key, values in recount.cosines.items():
        np.testing.assert_allclose(sub.cosines[key], values, atol=1e-12)
    assert sub.offsets.tolist() == recount.offsets.tolist()


def test_presence_features_keep_frequent_columns_without_weights():
    counts = grams.word_counts(["a b a c", "a b", "d e"])
    vec = grams.Tfidf(min_df=2, binary=True).fit(counts)
    rows = vec.transform(counts)
    assert len(vec.columns) == 3  # a, b and the bigram "a b"
    assert rows.toarray().tolist() == [[1.0, 1.0, 1.0], [1.0, 1.0, 1.0], [0.0, 0.0, 0.0]]
    with pytest.raises(ValueError):
        grams.Tfidf(min_df=5).fit(counts)


@pytest.mark.parametrize(("block", "table"), [(1, 0), (7, 0), (1 << 16, 0), (1 << 16, 1 << 24)])
def test_owner_lookup_finds_each_texts_count_in_its_owners_context(monkeypatch, block, table):
    """By a dense table per owner, blocked by owners (any block size) or not (owners out of order):
    the value of the owner's context at each stored entry of the texts, as a dense lookup gives it."""
    rng = np.random.default_rng(block + table)
    texts = sparse.random(40, 30, density=0.3, format="csr", random_state=rng, dtype=np.float32)
    contexts = sparse.random(9, 30, density=0.4, format="csr", random_state=rng, dtype=np.float32)
    contexts = sparse.csr_matrix(contexts.multiply(np.arange(9)[:, None] != 3))  # an owner without counts
    texts.sort_indices()
    monkeypatch.setattr(grams, "_LOOKUP_BLOCK", block)
    monkeypatch.setattr(grams, "_TABLE_MAX", table)
    for owner in (np.sort(rng.integers(0, 9, 40)), rng.integers(0, 9, 40)):
        rows = np.repeat(np.arange(40), np.diff(texts.indptr))
        expected = contexts.toarray()[owner[rows], texts.indices]
        np.testing.assert_array_equal(grams.owner_lookup(texts, contexts, owner), expected)


@pytest.mark.parametrize("dense", [False, True], ids=["sorted ids", "WIDTH tables"])
@pytest.mark.parametrize("max_features", [None, 12])
def test_a_weighted_fit_on_distinct_rows_is_the_fit_on_the_rows_repeated(monkeypatch, dense, max_features):
    # a candidate offered to many items is counted once and weighs as often as it occurs
    if dense:
        monkeypatch.setattr(grams, "_DENSE_FROM", 0)
    docs = ["parse the quoted field", "split the header row", "parse the quoted field twice", "a b c"]
    times = np.array([3, 1, 2, 5])
    repeated = [d for d, t in zip(docs, times, strict=True) for _ in range(t)]
    for unit in ("word", "char"):
        once, every = grams.counts(unit, docs), grams.counts(unit, repeated)
        a = grams.Tfidf(min_df=2, max_features=max_features).fit(once, weights=times)
        b = grams.Tfidf(min_df=2, max_features=max_features).fit(every)
        assert a.columns.tolist() == b.columns.tolist()
        np.testing.assert_array_equal(a.idf, b.idf)
        rows = a.transform(once)[np.repeat(np.arange(len(docs)), times)]
        assert (rows != b.transform(every)).nnz == 0
        if max_features is not None:
            assert len(a.columns) == max_features  # the cut by total count sees the weights too


def test_shown_texts_keep_their_distinct_rows_and_character_similarities():
    items = [it._replace(texts=(*it.texts, "a candidate offered to every item")) for it in _items()]
    counted = task_grams(items)
    assert counted.distinct is not None and counted.inverse is not None
    assert counted.distinct["word"].shape[0] == counted.texts["word"].shape[0] - len(items) + 1
    for unit in ("word", "char"):  # every row is its distinct text's counts
        assert (counted.texts[unit] != counted.distinct[unit][counted.inverse]).nnz == 0
    sims = [np.arange(len(it.texts) ** 2, dtype=float).reshape(len(it.texts), -1) for it in items]
    picks = [(0, 5, 4) if k % 2 else (5, 1) for k in range(len(items))]
    sub = counted._replace(chars=sims).shown(picks)
    assert sub.distinct is not None and sub.inverse is not None and sub.chars is not None
    for unit in ("word", "char"):
        assert (sub.texts[unit] != sub.distinct[unit][sub.inverse]).nnz == 0
    for c, s, p in zip(sub.chars, sims, picks, strict=True):
        np.testing.assert_array_equal(c, s[np.ix_(p, p)])


@pytest.mark.parametrize("unit", ["word", "char"])
def test_documents_counted_together_are_counted_as_each_alone(monkeypatch, unit):
    """Batched (documents laid end to end), alone (long ones) or cached: a document's row is its
    own grams' counts, never a gram across two documents, whatever its neighbours and batch size."""
    one = grams._word_counts if unit == "word" else grams._gram_counts
    docs = [*DOCS, "", "x", "ab cd", "ΑΣ ΑΣ", "q\x00r s", "ab cd", "word " * 900, *reversed(DOCS)]
    for batch, alone in ((1 << 20, 1500), (7, 1500), (1 << 20, 3)):
        monkeypatch.setattr(grams, "_BATCH_CHARS", batch)
        monkeypatch.setattr(grams, "_CHAR_ALONE", alone)
        monkeypatch.setattr(grams, "_WORD_ALONE", alone)
        for cache in (grams._CHAR_CACHE, grams._WORD_CACHE):
            cache.clear()
        for _ in range(2):  # then from the cache
            rows = grams.counts(unit, docs)
            assert rows.shape == (len(docs), grams.WIDTH)
            for k, doc in enumerate(docs):
                ids, counts = one(doc)
                lo, hi = rows.indptr[k], rows.indptr[k + 1]
                assert rows.indices[lo:hi].tolist() == ids.tolist(), (batch, doc[:20])
                assert rows.data[lo:hi].tolist() == counts.tolist()
    assert grams.counts(unit, []).shape == (0, grams.WIDTH)


def test_the_count_cache_is_bounded_in_bytes_keeps_the_most_recent_and_gives_the_same_rows(monkeypatch):
    """A context's tail holds thousands of grams: the cache is bounded by the bytes it holds (counts
    and texts), not only by how many texts, and what it gives back is what counting gives."""
    monkeypatch.setattr(grams, "_CACHED_BYTES", 64 << 10)
    cache = grams._CHAR_CACHE
    cache.clear()
    docs = [f"context {k}: " + " ".join(f"w{k}x{j}" for j in range(300)) for k in range(40)]
    fresh = grams.char_counts(docs)  # 40 texts of ~3,000 characters: several times the budget
    kept = list(cache.kept)
    assert 0 < len(kept) < len(docs)
    assert kept == docs[-len(kept) :]  # the most recent ones
    assert cache.bytes == sum(grams._cost(d, v) for d, v in cache.kept.items()) <= 64 << 10
    again = grams.char_counts(docs)  # some from the cache, the others counted anew
    assert (again != fresh).nnz == 0 and np.array_equal(again.indptr, fresh.indptr)
    assert cache.bytes <= 64 << 10
    cache.clear()
    assert cache.bytes == 0 and not cache.kept
