"""Hashed n-gram counts and TF-IDF over them: what the context rules and the learned scorers read.

Every document (an option, a reserve candidate, a context's tail or head-and-tail) is analysed once
into a row of raw counts over hashed gram ids (`GRAM_BITS` bits: collisions merge rare grams, as a
hashing vectoriser does). Fitting a TF-IDF (document frequencies, kept columns, idf) and
transforming are then vectorised operations on those count rows, so a task's contexts are analysed
once however many times the suite is scored on them (every adversarial-filtering round, then the
audit of the kept options), and nothing is ever held per (item, vocabulary) dense: memory grows
with the non-zeros of the documents.

- character 2-4 grams within word boundaries (scikit-learn's `char_wb`), hashed with numpy
  (`char_grams`): a 10,000-character context costs well under a millisecond;
- word 1-2 grams (`\\b\\w+\\b` tokens, lower-cased, as scikit-learn's word analyser), hashed with numpy
  (`word_grams`).

Short documents (options, context tails) are analysed in batches, laid end to end, one vectorised
pass per batch (a gram never spans two documents), each distinct document once per call, and the
most recent short ones are cached; long ones (whole contexts) one by one. A task's texts are
paired with their item's context by a dense table per context (`owner_lookup`), not a search.
"""

from __future__ import annotations

import re
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from functools import lru_cache

import numpy as np
from scipy import sparse

#: Gram ids are hashed into this many bits.
GRAM_BITS = 22
WIDTH = 1 << GRAM_BITS
UNITS = ("word", "char")
_MIX = np.uint64(0x9E3779B97F4A7C15)
_BASE = np.uint64(1000003)
_SPACE = re.compile(r"\s+")
_PAIR = np.uint64(0x632BE59BD9B4E019)


def char_grams(text: str, lo: int = 2, hi: int = 4) -> np.ndarray:
    """Hashed ids of the character `lo`..`hi`-grams of `text` within word boundaries, with repeats.

    The text is lower-cased, each word padded by one space (whitespace runs are one boundary), and
    an n-gram never holds a space except at its ends (as scikit-learn's `char_wb`).
    """
    return _char_ids([text], lo, hi)[0]


def _char_ids(docs: Sequence[str], lo: int = 2, hi: int = 4) -> tuple[np.ndarray, np.ndarray]:
    """`char_grams` of every document of `docs` in one pass, and the document of each id: the
    documents' padded bodies are laid end to end and an n-gram is kept only where it starts and
    ends in one document."""
    padded = []
    for d in docs:
        body = _SPACE.sub(" ", d.lower()).strip()
        padded.append(f" {body} " if body else "")
    codes = np.frombuffer("".join(padded).encode("utf-32-le"), dtype=np.uint32).astype(np.uint64)
    doc = np.repeat(np.arange(len(docs), dtype=np.int64), [len(p) for p in padded])
    space = codes == 32
    ids, owners = [np.zeros(0, dtype=np.uint64)], [np.zeros(0, dtype=np.int64)]
    for n in range(lo, hi + 1):
        m = len(codes) - n + 1
        if m <= 0:
            break
        h = np.full(m, np.uint64(n))
        ok = doc[:m] == doc[n - 1 : n - 1 + m]
        for k in range(n):
            h = (h * _BASE) ^ codes[k : k + m]
            if 0 < k < n - 1:
                ok &= ~space[k : k + m]
        ids.append(h[ok])
        owners.append(doc[:m][ok])
    mixed = np.concatenate(ids) * _MIX
    return (mixed >> np.uint64(64 - GRAM_BITS)).astype(np.int64), np.concatenate(owners)


def _gram_counts(text: str) -> tuple[np.ndarray, np.ndarray]:
    ids, counts = np.unique(char_grams(text), return_counts=True)
    return ids.astype(np.int32), counts.astype(np.float32)


#: Documents are analysed together, about this many characters at a time: one vectorised pass per
#: batch instead of a few dozen numpy calls per document (most options are a few hundred characters).
_BATCH_CHARS = 1 << 18
#: Options (short texts) are analysed by the filter and again by the audit of the kept options:
#: the counts of the most recent ones are cached (8 bytes a gram), at most `_CACHED_TEXTS` texts
#: and `_CACHED_BYTES` bytes (counts and texts) per unit. Bytes, not only texts: a context's tail
#: holds thousands of grams, and a cache bounded by count alone held about 27 MiB after a build of
#: 1,000 runs and 137 MiB from 5,000 on, kept from the filter to the report.
_CACHED_CHARS = 4000
_CACHED_TEXTS = 1 << 13
_CACHED_BYTES = 16 << 20

Counts = tuple[np.ndarray, np.ndarray]


def _cost(doc: str, value: Counts) -> int:
    return value[0].nbytes + value[1].nbytes + sys.getsizeof(doc)


class _Cache:
    """The counts of the most recently analysed short documents, per unit (shared by threads)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.kept: OrderedDict[str, Counts] = OrderedDict()
        self.bytes = 0

    def get(self, doc: str) -> Counts | None:
        if len(doc) > _CACHED_CHARS:
            return None
        with self.lock:
            hit = self.kept.get(doc)
            if hit is not None:
                self.kept.move_to_end(doc)
            return hit

    def put(self, doc: str, value: Counts) -> None:
        if len(doc) > _CACHED_CHARS:
            return
        cost = _cost(doc, value)
        if cost > _CACHED_BYTES:
            return
        with self.lock:
            old = self.kept.pop(doc, None)
            if old is not None:
                self.bytes -= _cost(doc, old)
            self.kept[doc] = value
            self.bytes += cost
            while len(self.kept) > _CACHED_TEXTS or self.bytes > _CACHED_BYTES:
                gone, counts = self.kept.popitem(last=False)
                self.bytes -= _cost(gone, counts)

    def clear(self) -> None:
        with self.lock:
            self.kept.clear()
            self.bytes = 0


def _per_doc(doc: np.ndarray, ids: np.ndarray, n_docs: int) -> list[Counts]:
    """Each document's sorted distinct gram ids and their counts, from (document, id) pairs."""
    if not len(ids):
        return [(np.zeros(0, np.int32), np.zeros(0, np.float32))] * n_docs
    keys, counts = np.unique(doc * np.int64(WIDTH) + ids, return_counts=True)
    owner, gram = np.divmod(keys, np.int64(WIDTH))
    at = np.searchsorted(owner, np.arange(n_docs + 1))
    gram, counts = gram.astype(np.int32), counts.astype(np.float32)
    return [(gram[at[k] : at[k + 1]], counts[at[k] : at[k + 1]]) for k in range(n_docs)]


def _char_batch(docs: Sequence[str]) -> list[Counts]:
    ids, owners = _char_ids(docs)
    return _per_doc(owners, ids, len(docs))


def _batches(docs: Sequence[str]) -> list[list[str]]:
    out: list[list[str]] = [[]]
    size = 0
    for d in docs:
        if out[-1] and size + len(d) > _BATCH_CHARS:
            out.append([])
            size = 0
        out[-1].append(d)
        size += len(d)
    return out if out[-1] else []


def _count(
    docs: Sequence[str], batch: Callable[[Sequence[str]], list[Counts]], cache: _Cache, alone_from: int
) -> sparse.csr_matrix:
    """Count rows of `docs`: each distinct document analysed once, short ones cached; documents of
    at least `alone_from` characters each in a batch of its own (their grams' sort is cheaper
    alone), the others batched."""
    rows: list[Counts | None] = [cache.get(d) for d in docs]
    todo: dict[str, list[int]] = {}
    for k, (d, row) in enumerate(zip(docs, rows, strict=True)):
        if row is None:
            todo.setdefault(d, []).append(k)
    groups = [[d] for d in todo if len(d) >= alone_from] + _batches([d for d in todo if len(d) < alone_from])
    for group in groups:
        for d, value in zip(group, batch(group), strict=True):
            cache.put(d, value)
            for k in todo[d]:
                rows[k] = value
    counted = [r for r in rows if r is not None]
    assert len(counted) == len(docs)
    return _csr(counted)


_CHAR_CACHE = _Cache()
_WORD_CACHE = _Cache()
#: From this many characters on, a document is analysed on its own (measured on real contexts: the
#: character grams of a long document sort faster alone; word grams are fewer, batching always wins).
_CHAR_ALONE = 1500
_WORD_ALONE = 1 << 62


def _csr(per: Sequence[Counts]) -> sparse.csr_matrix:
    indptr = np.zeros(len(per) + 1, dtype=np.int64)
    np.cumsum([len(i) for i, _ in per], out=indptr[1:])
    indices = np.concatenate([i for i, _ in per]) if per else np.zeros(0, np.int32)
    data = np.concatenate([c for _, c in per]) if per else np.zeros(0, np.float32)
    return sparse.csr_matrix((data, indices, indptr), shape=(len(per), WIDTH))


def char_counts(docs: Sequence[str]) -> sparse.csr_matrix:
    """Raw character-gram counts of `docs`, one row each (columns: hashed ids, sorted)."""
    return _count(docs, _char_batch, _CHAR_CACHE, _CHAR_ALONE)


_WORD_RE = re.compile(r"\w")
_ASCII_WORD = np.array([bool(_WORD_RE.match(chr(c))) for c in range(128)])
_POWERS: list[np.ndarray] = [np.ones(1, dtype=np.uint64), np.ones(1, dtype=np.uint64)]
_INVERSE = np.uint64(pow(int(_BASE), -1, 1 << 64))


@lru_cache(maxsize=1 << 16)
def _is_word_char(code: int) -> bool:
    return bool(_WORD_RE.match(chr(code)))


def _word_mask(codes: np.ndarray) -> np.ndarray:
    r"""Which characters `\w` matches (a table for ASCII, a cached test per other code point)."""
    mask = np.zeros(len(codes), dtype=bool)
    ascii_ = codes < 128
    mask[ascii_] = _ASCII_WORD[codes[ascii_]]
    if not ascii_.all():
        other = np.flatnonzero(~ascii_)
        uniq, inv = np.unique(codes[other], return_inverse=True)
        mask[other] = np.array([_is_word_char(int(c)) for c in uniq])[inv]
    return mask


def _geometric(base: np.uint64, n: int) -> np.ndarray:
    with np.errstate(over="ignore"):
        return np.concatenate(
            [np.ones(1, dtype=np.uint64), np.cumprod(np.full(n - 1, base, dtype=np.uint64))]
        )


def _powers(n: int) -> tuple[np.ndarray, np.ndarray]:
    """`_BASE`**j and its inverse**j modulo 2**64 for j < n (grown on demand, kept)."""
    if len(_POWERS[0]) < n:
        size = max(n, 2 * len(_POWERS[0]))
        _POWERS[0], _POWERS[1] = _geometric(_BASE, size), _geometric(_INVERSE, size)
    return _POWERS[0][:n], _POWERS[1][:n]


def word_grams(text: str) -> np.ndarray:
    r"""Hashed ids of the word 1- and 2-grams of `text` (`\b\w+\b` tokens of the lower-cased text,
    as scikit-learn's word analyser), with repeats. Vectorised: each token's hash is a difference of
    prefix sums of its characters' codes times powers of a base (modulo 2**64), so no Python loop
    runs per token or per bigram."""
    return _word_ids([text])[0]


def _word_ids(docs: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """`word_grams` of every document of `docs` in one pass, and the document of each id: the
    lower-cased documents laid end to end, NUL between them (no token holds one), a bigram kept
    only within one document."""
    lowered = [d.lower() for d in docs]
    codes = np.frombuffer("\x00".join(lowered).encode("utf-32-le"), dtype=np.uint32).astype(np.uint64)
    none = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    if not len(codes):
        return none
    doc = np.repeat(np.arange(len(docs), dtype=np.int64), [len(x) + 1 for x in lowered])[: len(codes)]
    word = _word_mask(codes)
    edge = np.diff(np.concatenate([[False], word, [False]]).astype(np.int8))
    starts, ends = np.flatnonzero(edge == 1), np.flatnonzero(edge == -1)
    if not len(starts):
        return none
    pw, inv = _powers(len(codes) + 1)
    with np.errstate(over="ignore"):
        prefix = np.concatenate(
            [np.zeros(1, dtype=np.uint64), np.cumsum((codes + np.uint64(1)) * pw[: len(codes)])]
        )
        tokens = (prefix[ends] - prefix[starts]) * inv[starts] + (ends - starts).astype(np.uint64) * _MIX
        owner = doc[starts]
        inside = owner[:-1] == owner[1:]
        pairs = (tokens[:-1] * _BASE + (tokens[1:] ^ _PAIR))[inside]
        mixed = np.concatenate([tokens, pairs]) * _MIX
    ids = (mixed >> np.uint64(64 - GRAM_BITS)).astype(np.int64)
    return ids, np.concatenate([owner, owner[:-1][inside]])


def _word_counts(text: str) -> tuple[np.ndarray, np.ndarray]:
    ids, counts = np.unique(word_grams(text), return_counts=True)
    return ids.astype(np.int32), counts.astype(np.float32)


def _word_batch(docs: Sequence[str]) -> list[Counts]:
    ids, owners = _word_ids(docs)
    return _per_doc(owners, ids, len(docs))


def word_counts(docs: Sequence[str]) -> sparse.csr_matrix:
    """Raw word 1-2 gram counts of `docs`, one row each (columns: hashed ids, sorted)."""
    return _count(docs, _word_batch, _WORD_CACHE, _WORD_ALONE)


def counts(unit: str, docs: Sequence[str]) -> sparse.csr_matrix:
    """`word_counts` or `char_counts`."""
    return word_counts(docs) if unit == "word" else char_counts(docs)


#: From this many stored counts on, `Tfidf` counts and looks up ids in `WIDTH`-long tables.
_DENSE_FROM = 1 << 18


class Tfidf:
    """TF-IDF over count rows (scikit-learn's conventions: sublinear tf, smoothed idf, L2 rows).

    `fit` keeps the columns in at least `min_df` documents, the `max_features` most frequent of
    them; `binary` makes every kept count 1 with no idf and no norm (presence features).
    """

    def __init__(self, min_df: int = 1, max_features: int | None = None, binary: bool = False) -> None:
        self.min_df = min_df
        self.max_features = max_features
        self.binary = binary
        self.columns = np.zeros(0, dtype=np.int64)
        self.idf = np.zeros(0)
        self._at: np.ndarray | None = None

    def fit(self, *blocks: sparse.csr_matrix, weights: np.ndarray | None = None) -> Tfidf:
        """Fit on the rows of every block (each a count matrix of `WIDTH` columns); `weights` (one
        block): how many documents each row stands for (the same fit as its rows repeated)."""
        every = np.concatenate([b.indices for b in blocks]) if blocks else np.zeros(0, np.int32)
        times = None
        if weights is not None:
            (block,) = blocks
            times = np.repeat(np.asarray(weights, dtype=np.float64), np.diff(block.indptr))
        dense = len(every) > _DENSE_FROM  # counting into `WIDTH` bins beats sorting the ids
        if dense:
            df = np.bincount(every, weights=times, minlength=WIDTH)
            cols = np.flatnonzero(df)
            df = df[cols]
        elif times is None:
            cols, inverse, df = np.unique(every, return_inverse=True, return_counts=True)
        else:
            cols, inverse = np.unique(every, return_inverse=True)
            df = np.bincount(inverse, weights=times, minlength=len(cols))
        if times is not None:
            df = df.round().astype(np.int64)  # whole documents: the same counts as repeated rows
        keep = df >= max(1, self.min_df)
        if self.max_features is not None and int(keep.sum()) > self.max_features:
            mass = np.concatenate([b.data for b in blocks])
            if times is not None:
                mass = mass * times
            if dense:
                total = np.bincount(every, weights=mass, minlength=WIDTH)[cols]
            else:
                total = np.bincount(inverse, weights=mass, minlength=len(cols))
            kept = np.flatnonzero(keep)
            top = np.sort(kept[np.lexsort((cols[kept], -total[kept]))[: self.max_features]])
            keep = np.zeros(len(cols), dtype=bool)
            keep[top] = True
        cols, df = cols[keep], df[keep]
        if not len(cols):
            raise ValueError("empty vocabulary: no gram is frequent enough")
        n_docs = sum(b.shape[0] for b in blocks) if weights is None else int(np.sum(weights))
        self.columns = cols.astype(np.int64)
        self.idf = np.log((1 + n_docs) / (1 + df)) + 1.0
        self._at = None
        return self

    def _positions(self, ids: np.ndarray) -> np.ndarray:
        """Column of each hashed id (-1: not kept): a table lookup on large blocks, a search on small."""
        cols = self.columns
        if len(ids) > _DENSE_FROM:
            if self._at is None:
                self._at = np.full(WIDTH, -1, dtype=np.int32)
                self._at[cols] = np.arange(len(cols), dtype=np.int32)
            return self._at[ids]
        at = np.searchsorted(cols, ids)
        hit = cols[np.minimum(at, len(cols) - 1)] == ids
        return np.where(hit, at, -1).astype(np.int32)

    def transform(self, block: sparse.csr_matrix, where: np.ndarray | None = None) -> sparse.csr_matrix:
        """TF-IDF rows of a count block over the fitted columns (indices sorted); `where` (one flag
        per stored count of `block`) keeps only the flagged entries."""
        col = self._positions(block.indices)
        keep = col >= 0 if where is None else (col >= 0) & where
        row = np.repeat(np.arange(block.shape[0]), np.diff(block.indptr))[keep]
        col = col[keep]
        if self.binary:
            values = np.ones(len(col))
        else:
            values = (1.0 + np.log(block.data[keep])) * self.idf[col]
            norm = np.sqrt(np.bincount(row, weights=values * values, minlength=block.shape[0]))
            values = values / np.where(norm > 0, norm, 1.0)[row]
        indptr = np.zeros(block.shape[0] + 1, dtype=np.int64)
        np.cumsum(np.bincount(row, minlength=block.shape[0]), out=indptr[1:])
        out = sparse.csr_matrix((values, col, indptr), shape=(block.shape[0], len(self.columns)))
        out.has_sorted_indices = True  # columns keep the hashed ids' order
        return out


class CharGrams(Tfidf):
    """`Tfidf` over `char_counts` of raw documents (the same grams and weights as `char_wb`)."""

    def fit_docs(self, docs: Sequence[str]) -> CharGrams:
        self.fit(char_counts(docs))
        return self

    def transform_docs(self, docs: Sequence[str]) -> sparse.csr_matrix:
        return self.transform(char_counts(docs))


#: `owner_lookup` searches the contexts' keys this many stored counts at a time (cache-sized blocks).
_LOOKUP_BLOCK = 1 << 16
#: Up to this many columns, `owner_lookup` reads each owner's values from a dense table instead.
_TABLE_MAX = 1 << 24


def owner_lookup(a: sparse.csr_matrix, b: sparse.csr_matrix, owner: np.ndarray) -> np.ndarray:
    """For every stored entry (r, c) of `a`, the value of `b` at (owner[r], c) (0 where absent).

    The row-wise pairing of texts with their item's context without repeating the context's row
    once per text: a sorted search of (row, column) keys, memory linear in the non-zeros. Where
    `owner` does not decrease (texts stacked item by item), the search runs over blocks of
    consecutive owners, each a slice of `a` and of `b` small enough to stay in cache.
    """
    b = b.tocsr()
    if not b.has_sorted_indices:
        b = b.sorted_indices()
    owner = owner.astype(np.int64)
    if not b.nnz:
        return np.zeros(a.nnz)
    width = np.int64(max(a.shape[1], b.shape[1], 1))
    if len(owner) and (np.diff(owner) < 0).any():
        return _lookup(a.indptr, a.indices, owner, b.indptr, b.indices, b.data, 0, width)
    out = np.zeros(a.nnz, dtype=b.data.dtype)
    first = np.searchsorted(owner, np.arange(b.shape[0] + 1))  # a's first row of each owner
    if width <= _TABLE_MAX:
        return _table_lookup(a, b, first, out, int(width))
    lo = 0
    while lo < b.shape[0]:
        hi = int(np.searchsorted(b.indptr, b.indptr[lo] + _LOOKUP_BLOCK, side="right")) - 1
        hi = min(max(hi, lo + 1), b.shape[0])
        r0, r1 = int(first[lo]), int(first[hi])
        a0, a1 = int(a.indptr[r0]), int(a.indptr[r1])
        b0, b1 = int(b.indptr[lo]), int(b.indptr[hi])
        if a1 > a0 and b1 > b0:
            out[a0:a1] = _lookup(
                a.indptr[r0 : r1 + 1] - a0,
                a.indices[a0:a1],
                owner[r0:r1] - lo,
                b.indptr[lo : hi + 1] - b0,
                b.indices[b0:b1],
                b.data[b0:b1],
                0,
                width,
            )
        lo = hi
    return out


_TABLES = threading.local()


def _table(width: int, dtype: np.dtype) -> np.ndarray:
    """A zeroed table of `width` values of `dtype`, the thread's own, kept (its user leaves it
    zeroed): allocating and faulting in tens of MB per lookup cost more than a small task's lookup."""
    kept = getattr(_TABLES, "kept", None)
    if kept is None or len(kept) < width or kept.dtype != dtype:
        kept = _TABLES.kept = np.zeros(width, dtype=dtype)
    return kept[:width]


def _table_lookup(
    a: sparse.csr_matrix, b: sparse.csr_matrix, first: np.ndarray, out: np.ndarray, width: int
) -> np.ndarray:
    """`owner_lookup` for owners that do not decrease: each owner's row of `b` scattered into one
    dense table of `width` values, its texts' entries read from it, the table cleared again (two
    writes per context entry and one read per text entry, no search)."""
    table = _table(width, b.data.dtype)
    a_at, b_at = a.indptr, b.indptr
    try:
        for o in np.flatnonzero((np.diff(first) > 0) & (np.diff(b_at) > 0)):
            a0, a1 = int(a_at[first[o]]), int(a_at[first[o + 1]])
            if a1 == a0:
                continue
            cols = b.indices[b_at[o] : b_at[o + 1]]
            table[cols] = b.data[b_at[o] : b_at[o + 1]]
            out[a0:a1] = table[a.indices[a0:a1]]
            table[cols] = 0
    except BaseException:
        table[:] = 0  # interrupted: the next user gets it zeroed all the same
        raise
    return out


def _lookup(
    a_indptr: np.ndarray,
    a_indices: np.ndarray,
    owner: np.ndarray,
    b_indptr: np.ndarray,
    b_indices: np.ndarray,
    b_data: np.ndarray,
    first_row: int,
    width: np.int64,
) -> np.ndarray:
    """`owner_lookup` on raw CSR arrays (b's rows numbered from `first_row`)."""
    key_b = (
        np.repeat(np.arange(len(b_indptr) - 1, dtype=np.int64) + first_row, np.diff(b_indptr)) * width
        + b_indices
    )
    rows_a = np.repeat(np.arange(len(a_indptr) - 1, dtype=np.int64), np.diff(a_indptr))
    key_a = owner[rows_a] * width + a_indices
    at = np.minimum(np.searchsorted(key_b, key_a), len(key_b) - 1)
    return np.where(key_b[at] == key_a, b_data[at], 0.0)


#: `_idf_table` fills its table this many columns at a time (its temporaries stay small).
_TABLE_STEP = 1 << 16


def _idf_table(contexts: sparse.csr_matrix) -> np.ndarray:
    """The contexts' smoothed idf of every column, in one `WIDTH`-long table: the document
    frequencies are counted into it, then turned into idf in place, a slice at a time."""
    n = contexts.shape[0]
    df = np.bincount(contexts.indices, minlength=WIDTH)
    table = df.view(np.float64)  # the same 8 bytes per column: each slice is read, then overwritten
    unseen = np.log((1 + n) / 1) + 1.0
    for lo in range(0, WIDTH, _TABLE_STEP):
        part = df[lo : lo + _TABLE_STEP]
        seen = part > 0
        value = np.log((1 + n) / (1 + part[seen])) + 1.0  # the log of each distinct gram, once
        out = table[lo : lo + _TABLE_STEP]
        out[:] = unseen
        out[seen] = value
    return table


def _context_idf(contexts: sparse.csr_matrix) -> Callable[[np.ndarray], np.ndarray]:
    """The contexts' smoothed idf (ln((1 + n) / (1 + df)) + 1 over the n contexts) of given gram
    ids; the document frequencies are counted once, however many times it is asked."""
    n = contexts.shape[0]
    if contexts.nnz > _DENSE_FROM:
        return _idf_table(contexts).__getitem__
    cols, df = np.unique(contexts.indices, return_counts=True)

    def idf(ids: np.ndarray) -> np.ndarray:
        if not len(cols):
            return np.log((1 + n) / (1 + np.zeros(len(ids), dtype=np.int64))) + 1.0
        at = np.minimum(np.searchsorted(cols, ids), len(cols) - 1)
        return np.log((1 + n) / (1 + np.where(cols[at] == ids, df[at], 0))) + 1.0

    return idf


#: `context_cosine` weighs and pairs this many contexts at a time (its temporaries are a few of
#: their stored counts long, not the whole task's).
_CONTEXT_ROWS = 64


def context_cosine(
    texts: sparse.csr_matrix,
    contexts: sparse.csr_matrix,
    owner: np.ndarray,
    distinct: sparse.csr_matrix | None = None,
    inverse: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Per text row: the TF-IDF cosine with its owner's context row; and, per stored count of
    `texts`, the owner context's TF-IDF weight of that gram (0: the context lacks it).

    The idf is the contexts' own (smoothed: ln((1 + n) / (1 + df)) + 1 over the n contexts, so a
    gram no context has weighs the most), tf is sublinear: the score of a text depends on its
    context and its item's task only, never on which other options are shown, and is computed once
    per task, with no context row repeated per text. `distinct` and `inverse`: `texts` is
    `distinct[inverse]` (a candidate offered to many items), so a text's own weights and norm are
    found once per distinct text; only the pairing with the context is per row. Where `owner` does
    not decrease (texts stacked item by item), the contexts are weighed and paired
    `_CONTEXT_ROWS` at a time."""
    owner = np.asarray(owner, dtype=np.int64)
    idf = _context_idf(contexts)
    own = distinct if distinct is not None and inverse is not None else texts
    vt = (1.0 + np.log(own.data)) * idf(own.indices)
    own_rows = np.repeat(np.arange(own.shape[0]), np.diff(own.indptr))
    norm_t = np.sqrt(np.bincount(own_rows, weights=vt * vt, minlength=own.shape[0]))
    if own is not texts:
        assert inverse is not None
        norm_t = norm_t[inverse]
        lengths = np.diff(texts.indptr)
        # each row's stored counts are its distinct row's, in the same order
        entry = np.repeat(own.indptr[:-1][inverse] - texts.indptr[:-1], lengths) + np.arange(texts.nnz)
        vt = vt[entry]
    n = contexts.shape[0]
    ordered = not len(owner) or not (np.diff(owner) < 0).any()
    step = _CONTEXT_ROWS if ordered else max(n, 1)
    first = np.searchsorted(owner, np.arange(0, n + step, step).clip(max=n)) if ordered else None
    at_ctx = np.zeros(texts.nnz)
    dot = np.zeros(texts.shape[0])
    norm_c = np.zeros(n)
    for k, lo in enumerate(range(0, n, step)):
        hi = min(lo + step, n)
        c0, c1 = int(contexts.indptr[lo]), int(contexts.indptr[hi])
        cols = contexts.indices[c0:c1]
        tf = contexts.data[c0:c1]
        vc = (1.0 + np.log(tf)) * idf(cols)
        ctx_rows = np.repeat(np.arange(hi - lo), np.diff(contexts.indptr[lo : hi + 1]))
        norm_c[lo:hi] = np.sqrt(np.bincount(ctx_rows, weights=vc * vc, minlength=hi - lo))
        del vc, ctx_rows
        # the context's raw counts at the texts' grams (a table of the counts' own 4 bytes per
        # column), weighed only where found: the same weights as `vc` there
        counted = sparse.csr_matrix((tf, cols, contexts.indptr[lo : hi + 1] - c0), shape=(hi - lo, WIDTH))
        if first is None:  # owners in any order: every text at once
            r0, r1 = 0, texts.shape[0]
        else:
            r0, r1 = int(first[k]), int(first[k + 1])
        t0, t1 = int(texts.indptr[r0]), int(texts.indptr[r1])
        part = sparse.csr_matrix(
            (texts.data[t0:t1], texts.indices[t0:t1], texts.indptr[r0 : r1 + 1] - t0), shape=(r1 - r0, WIDTH)
        )
        tf_at = owner_lookup(part, counted, owner[r0:r1] - lo)
        hit = np.flatnonzero(tf_at)
        found = np.zeros(t1 - t0)
        found[hit] = (1.0 + np.log(tf_at[hit])) * idf(part.indices[hit])
        at_ctx[t0:t1] = found
        rows = np.repeat(np.arange(r1 - r0), np.diff(texts.indptr[r0 : r1 + 1]))
        dot[r0:r1] = np.bincount(rows, weights=vt[t0:t1] * found, minlength=r1 - r0)
    scale = norm_t * norm_c[owner]
    return np.where(scale > 0, dot / np.where(scale > 0, scale, 1.0), 0.0), at_ctx


__all__ = [
    "GRAM_BITS",
    "UNITS",
    "WIDTH",
    "CharGrams",
    "Tfidf",
    "char_counts",
    "char_grams",
    "context_cosine",
    "counts",
    "owner_lookup",
    "word_counts",
]
