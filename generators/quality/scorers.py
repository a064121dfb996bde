"""The scorers behind the baseline suite: what a cheap rule or a small learned model sees in an option.

Each rule gives every option of an item a score and answers the option with the highest one (ties
share the credit, `baselines.credit`). Scores are computed over the *texts* an item may show (its
options, plus its reserve candidates during adversarial filtering), so a rule can be evaluated on
any subset of them without recomputing features. Rules, grouped as in issue 22:

(a) lexical similarity to the context, `ctx_<unit>_<part>_<most|least>`: the TF-IDF cosine of the
    option and the context, with `unit` word 1-2 grams or character 2-4 grams (within word
    boundaries) and `part` the context's last `TAIL_CHARS` characters (`tail`) or the whole context
    (`full`: its first `HEAD_CHARS` and last `FULL_TAIL_CHARS` characters). The idf is that of the
    task's contexts (no labels, no options): an option's score depends on its item's context only,
    never on which other options are shown, so it is computed once per task (`grams.context_cosine`).
    `most` answers the most similar option, `least` the least.
(b) `option_lr`: an option-only logistic regression over character 2-4 grams, word 1-2 grams (template
    words) and shape features (length, lines, punctuation, digits, capitals, trailing spaces, bold
    markers), cross-validated: items are split into folds by a hash of their options, each fold is
    scored by a model fitted on the others (AFLite's "predictability" of an item from its options).
    Features are taken relative to the item's mean, so the model learns what sets the gold apart
    *within* an item (a conditional logit in effect).
(c) `context_lr`: the same on the (context, option) pair: the option's features, the word and
    character n-grams it shares with the context, and the four (a) cosines.
(d) `central_char` / `outlier_char`: the option with the highest / lowest mean character-level Indel
    similarity (`rapidfuzz.fuzz.ratio` of the raw texts) to the other options: the patch-medoid
    artefact token-level centrality misses.
(e) structure, where options have it (found from the text, never from a task name): plans are step
    lists (`*step1: ...;`, `1. ...`, `- ...` lines), each step of a kind (clone, cd, install,
    configure, download, build, run, delete, other); patches have files, hunks, added/removed lines.
    `structure_odd` / `structure_modal` answer the option whose structural signature (step count,
    first and last kinds, kind order; or files and hunks) is the rarest / most common among the
    options; `structure_lr` is a cross-validated logistic regression over the structural features
    (kind counts, first/last kind, which kind comes before which, step count, files, hunks, lines).
    Options without structure tie, so an unstructured task sits at chance.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from typing import NamedTuple, TypeVar

import numpy as np
from scipy import sparse
from sklearn import config_context
from sklearn.feature_extraction import DictVectorizer
from sklearn.linear_model import SGDClassifier

from generators.quality import grams
from generators.text import ratio_matrix
from schemas import content_id

TAIL_CHARS = 2000
HEAD_CHARS = 2000
FULL_TAIL_CHARS = 8000

LEXICAL_UNITS = ("word", "char")
CONTEXT_PARTS = ("tail", "full")
LEXICAL = tuple(
    f"ctx_{unit}_{part}_{side}"
    for unit in LEXICAL_UNITS
    for part in CONTEXT_PARTS
    for side in ("most", "least")
)
LEARNED = ("option_lr", "context_lr", "structure_lr")
SET_RULES = ("central_char", "outlier_char", "structure_odd", "structure_modal")
SUITE = (
    *LEXICAL,
    "central_char",
    "outlier_char",
    "option_lr",
    "context_lr",
    "structure_odd",
    "structure_modal",
    "structure_lr",
)
"""The rules this module adds to `baselines.BASELINES`, in report order."""


_T = TypeVar("_T")
_R = TypeVar("_R")
_POOL: dict[int, ThreadPoolExecutor] = {}
_PREFIX = "aptforge-scorers"
#: Threads for the independent parts of one scoring (a learned kind's folds, a task's context
#: cosines): numpy's array work and scikit-learn's SGD epochs run without the GIL.
THREADS = max(1, min(4, os.cpu_count() or 1))


def _map(fn: Callable[[_T], _R], args: Sequence[_T]) -> list[_R]:
    """`fn` over `args` on the module's thread pool, results in the order of `args` (so the output
    does not depend on which thread finished first). The pool is the process's own: a forked
    worker (Dask, multiprocessing) makes its own rather than wait on threads it did not inherit."""
    if THREADS == 1 or len(args) < 2 or threading.current_thread().name.startswith(_PREFIX):
        return [fn(a) for a in args]  # (inside the pool: waiting on it could wait forever)
    pid = os.getpid()
    if pid not in _POOL:
        _POOL.clear()
        _POOL[pid] = ThreadPoolExecutor(max_workers=THREADS, thread_name_prefix=_PREFIX)
    return list(_POOL[pid].map(fn, args))


class Item(NamedTuple):
    """One MCQ item as the scorers see it."""

    where: str
    texts: tuple[str, ...]
    """Every text the item may show: its options first, then (adversarial filtering) its reserve."""
    options: tuple[int, ...]
    """Indices into `texts` of the options shown, in display order."""
    gold: int
    """Index into `texts` of the gold."""
    context: str = ""


def context_part(context: str, part: str) -> str:
    """The `tail` or the `full` (head and tail) view of a context."""
    if part == "tail":
        return context[-TAIL_CHARS:]
    if len(context) <= HEAD_CHARS + FULL_TAIL_CHARS:
        return context
    return context[:HEAD_CHARS] + "\n" + context[-FULL_TAIL_CHARS:]


class TaskGrams(NamedTuple):
    """What one task's texts and contexts give once analysed (`grams`), reused by every scoring."""

    texts: dict[str, sparse.csr_matrix]
    """Per unit: raw gram counts, a row per text of every item, stacked in item order (`offsets`)."""
    cosines: dict[str, np.ndarray]
    """Per `<unit>_<part>`: each text's TF-IDF cosine with its item's context part (`grams.context_cosine`)."""
    in_context: dict[tuple[str, str], np.ndarray]
    """For (word, full) and (char, tail): per stored count of `texts[unit]`, whether the gram is in
    the text's item's context part (what the context+option classifier shares with the context)."""
    offsets: np.ndarray
    chars: Sequence[np.ndarray] | None = None
    """Per item, its texts' pairwise `char_similarity` when a scoring has them already (`shown`
    keeps the picked rows and columns: a pair's similarity does not depend on the other texts)."""
    distinct: dict[str, sparse.csr_matrix] | None = None
    """Per unit: the counts of each distinct text once (a candidate is offered to many items)."""
    inverse: np.ndarray | None = None
    """Per row of `texts`: its row in `distinct` (what depends on a text alone is computed once)."""

    def shown(self, picks: Sequence[Sequence[int]]) -> TaskGrams:
        """The same for items that show only `picks[i]` of their texts (in that order)."""
        rows, at = picked_rows(self.offsets, picks)
        inside = {}
        for (u, part), values in self.in_context.items():
            m = self.texts[u]
            inside[(u, part)] = sparse.csr_matrix((values, m.indices, m.indptr), shape=m.shape)[rows].data
        distinct, inverse = None, None
        if self.distinct is not None and self.inverse is not None:
            keep, inverse = np.unique(self.inverse[rows], return_inverse=True)
            distinct = {u: m[keep] for u, m in self.distinct.items()}
        return TaskGrams(
            {u: m[rows] for u, m in self.texts.items()},
            {k: v[rows] for k, v in self.cosines.items()},
            inside,
            at,
            None if self.chars is None else [c[np.ix_(p, p)] for c, p in zip(self.chars, picks, strict=True)],
            distinct,
            None if inverse is None else inverse.astype(np.int64),
        )


def picked_rows(offsets: np.ndarray, picks: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
    """The stacked rows of texts `picks[i]` of each item `i` (rows of item `i` start at
    `offsets[i]`), and the offsets of the items in those rows."""
    rows = np.array([offsets[i] + j for i, p in enumerate(picks) for j in p], dtype=np.int64)
    at = np.zeros(len(picks) + 1, dtype=np.int64)
    np.cumsum([len(p) for p in picks], out=at[1:])
    return rows, at


_SHARED = {("word", "full"), ("char", "tail")}
_PAIRS = tuple((unit, part) for unit in LEXICAL_UNITS for part in CONTEXT_PARTS)


def task_grams(items: Sequence[Item]) -> TaskGrams:
    """Count every text of the items once under every unit; score each against its item's context
    parts, one context part at a time (a context's counts are dropped once scored)."""
    texts = [t for it in items for t in it.texts]
    at = np.array(_offsets(items), dtype=np.int64)
    owner = _owner(at)
    ids: dict[str, int] = {}
    inverse = np.array([ids.setdefault(t, len(ids)) for t in texts], dtype=np.int64)
    distinct = {u: grams.counts(u, list(ids)) for u in LEXICAL_UNITS}
    counted = {u: m[inverse] for u, m in distinct.items()}
    # the two character views one after the other (each holds its contexts' counts and a
    # `grams.WIDTH`-long idf table), each beside the word views on the other thread
    order = [("char", "full"), ("word", "tail"), ("word", "full"), ("char", "tail")]
    one_char_view = threading.Lock()

    def score(pair: tuple[str, str]) -> tuple[np.ndarray, np.ndarray | None]:
        unit, part = pair
        with one_char_view if unit == "char" else contextlib.nullcontext():
            contexts = grams.counts(unit, [context_part(it.context, part) for it in items])
            cos, present = grams.context_cosine(counted[unit], contexts, owner, distinct[unit], inverse)
            del contexts
        return cos.round(9), (present > 0 if pair in _SHARED else None)

    done = dict(zip(order, _map(score, order), strict=True))
    cosines, inside = {}, {}
    for (unit, part), (cos, present) in ((pair, done[pair]) for pair in _PAIRS):
        cosines[f"{unit}_{part}"] = cos
        if present is not None:
            inside[(unit, part)] = present
    return TaskGrams(counted, cosines, inside, at, None, distinct, inverse)


def _offsets(items: Sequence[Item]) -> list[int]:
    out = [0]
    for it in items:
        out.append(out[-1] + len(it.texts))
    return out


def _owner(at: np.ndarray) -> np.ndarray:
    return np.repeat(np.arange(len(at) - 1), np.diff(at))


def lexical_scores(items: Sequence[Item], counted: TaskGrams | None = None) -> dict[str, list[np.ndarray]]:
    """(a): per item, per text, the TF-IDF cosine with the context under every unit and part."""
    counted = counted if counted is not None else task_grams(items)
    at = counted.offsets
    return {key: [cos[at[i] : at[i + 1]] for i in range(len(items))] for key, cos in counted.cosines.items()}


def char_similarity(texts: Sequence[str]) -> np.ndarray:
    """(d): pairwise character-level Indel similarity in [0, 1] of raw texts."""
    return ratio_matrix(list(texts)).astype(np.float64) / 100.0


def mean_to_others(sims: np.ndarray, shown: Sequence[int]) -> list[float]:
    """Each shown text's mean similarity to the other shown texts."""
    sub = sims[np.ix_(shown, shown)]
    n = len(shown)
    return [round(float((sub[i].sum() - sub[i, i]) / (n - 1)), 9) if n > 1 else 0.0 for i in range(n)]


# --- (e) structure -------------------------------------------------------------------------------

_STEP_SPLIT = re.compile(r"(?:^|\n|;)\s*(?:\*?\s*step\s*\d+\s*[:.)]|\d+\s*[.)]\s|[-*\u2022]\s)", re.I)
_KINDS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (k, re.compile(p, re.I))
    for k, p in (
        ("delete", r"\b(?:delete|remove|rm\s|uninstall|clean|purge|drop)\b|删除"),
        ("clone", r"\b(?:clone|checkout|fork)\b|克隆"),
        ("cd", r"\b(?:cd\s|change (?:in)?to|navigate|enter the|go to)\b|进入"),
        ("install", r"\b(?:install|pip|conda|npm|yarn|apt(?:-get)?|poetry|requirements|dependenc)\w*|安装"),
        ("download", r"\b(?:download|wget|curl|fetch|extract|unzip|untar)\b|下载"),
        (
            "configure",
            r"\b(?:edit|set|export|configure|config|create|mkdir|modify|write|add|update|patch)\b|配置|修改",
        ),
        ("build", r"\b(?:build|compile|make|cmake)\b|编译"),
        ("run", r"\b(?:run|execute|python|pytest|test|train|start|launch|evaluate|bash|sh)\b|运行|执行"),
    )
)
_HUNK = re.compile(r"^@@ ", re.M)
_FILE = re.compile(r"^(?:diff --git |\+\+\+ )", re.M)
_ADDED = re.compile(r"^\+(?!\+\+)", re.M)
_REMOVED = re.compile(r"^-(?!--)", re.M)


def plan_steps(text: str) -> list[str]:
    """The steps of a step-list option (empty when the text is not a list of at least two steps)."""
    marks = list(_STEP_SPLIT.finditer(text))
    if len(marks) < 2:
        return []
    ends = [m.start() for m in marks[1:]] + [len(text)]
    return [text[m.end() : e].strip(" ;\n") for m, e in zip(marks, ends, strict=True)]


def step_kind(step: str) -> str:
    """The kind of one plan step (the first kind whose words it uses; delete wins over the rest)."""
    for kind, pattern in _KINDS:
        if pattern.search(step):
            return kind
    return "other"


@lru_cache(maxsize=1 << 14)
def step_kinds(text: str) -> tuple[str, ...]:
    """The kind of every step of a step-list option (empty when it is none), cached: the features,
    the signature and every scoring of a task (filtering's rounds, then the audit) ask again."""
    return tuple(step_kind(s) for s in plan_steps(text))


def forget_texts() -> None:
    """Empty the per-text caches (`step_kinds`, `shape_features`): a block's scoring fills them with
    its own texts, which the next block does not show (call between blocks)."""
    step_kinds.cache_clear()
    shape_features.cache_clear()


def structure_features(text: str) -> dict[str, float]:
    """(e): structural features of one option (empty when it has none)."""
    feats: dict[str, float] = {}
    kinds = step_kinds(text)
    if kinds:
        feats["steps"] = float(len(kinds))
        feats[f"first={kinds[0]}"] = 1.0
        feats[f"last={kinds[-1]}"] = 1.0
        for kind, n in Counter(kinds).items():
            feats[f"n_{kind}"] = float(n)
            feats[f"pos_{kind}"] = kinds.index(kind) / max(1, len(kinds) - 1)
        for i, a in enumerate(kinds):
            for b in kinds[i + 1 :]:
                if a != b:
                    feats[f"{a}<{b}"] = 1.0
    files = len(_FILE.findall(text))
    hunks = len(_HUNK.findall(text))
    if hunks or files:
        feats["files"] = float(files)
        feats["hunks"] = float(hunks)
        feats["added"] = math.log1p(len(_ADDED.findall(text)))
        feats["removed"] = math.log1p(len(_REMOVED.findall(text)))
    return feats


def structure_signature(text: str) -> tuple[object, ...]:
    """What `structure_odd` / `structure_modal` compare: step count and kind order, or files and hunks."""
    kinds = step_kinds(text)
    if kinds:
        order = tuple(k for i, k in enumerate(kinds) if i == 0 or kinds[i - 1] != k)
        return ("plan", len(kinds), kinds[0], kinds[-1], order)
    hunks = len(_HUNK.findall(text))
    files = len(_FILE.findall(text))
    return ("patch", files, hunks) if hunks or files else ()


def signature_scores(
    signatures: Sequence[tuple[object, ...]], shown: Sequence[int], rare: bool
) -> list[float]:
    """How rare (or common) each shown option's signature is among the shown options (ties when none has one)."""
    sigs = [signatures[i] for i in shown]
    if not any(sigs):
        return [0.0] * len(shown)
    counts = Counter(sigs)
    return [float(-counts[s] if rare else counts[s]) for s in sigs]


# --- (b), (c), (e): learned, cross-validated -----------------------------------------------------

_PUNCT = re.compile(r"[^\w\s]")


_TRAILING = re.compile(r"[ \t]+(?:\n|$)")


@lru_cache(maxsize=1 << 16)
def shape_features(text: str) -> tuple[float, ...]:
    """Dense option-only shape features (cached: every learned kind and every AF round asks again)."""
    n = max(1, len(text))
    words = text.split()
    codes = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
    lower = np.frombuffer(text.lower().encode("utf-32-le"), dtype=np.uint32)
    upper = int((codes != lower).sum()) if len(lower) == len(codes) else sum(c.isupper() for c in text)
    return (
        math.log1p(len(text)),
        math.log1p(text.count("\n")),
        math.log1p(len(words)),
        len(_PUNCT.findall(text)) / n,
        int(((codes >= 48) & (codes <= 57)).sum()) / n,
        upper / n,
        float(bool(_TRAILING.search(text))),
        float(text.count("**")),
        float(text[:1].isspace()),
        float(text.rstrip()[-1:] in ".;:!?。" if text.strip() else 0.0),
        math.log1p(max((len(w) for w in words), default=0)),
    )


class Featuriser:
    """Turns texts (with their item's context) into the rows a learned scorer reads. Fitted without labels."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.char = grams.Tfidf(min_df=2, max_features=30_000)
        self.words = grams.Tfidf(min_df=2, max_features=10_000, binary=True)
        self.dicts = DictVectorizer()
        self.scale = np.ones(1)
        self.ok = True
        self.fitted: tuple[sparse.csr_matrix, np.ndarray] | None = None
        """The n-gram rows and scaled shape rows of the texts (what a `pair` featuriser reuses)."""

    def blocks(
        self,
        items: Sequence[Item],
        lexical: Mapping[str, Sequence[np.ndarray]] | None = None,
        counted: TaskGrams | None = None,
        base: Featuriser | None = None,
    ) -> tuple[list[sparse.csr_matrix], np.ndarray]:
        """Fit on the items' texts (and contexts); the sparse blocks (n-grams, n-grams shared with the
        context) and the dense rows (shape, cosines, structure) of every text of every item, in
        stacking order; each text is analysed once. `base`: an `option` featuriser fitted on the
        same items, whose vectorisers and rows a `pair` featuriser takes over (it would fit the same)."""
        texts = [t for it in items for t in it.texts]
        if self.kind == "structure":
            feats = [structure_features(t) for t in texts]
            self.dicts.fit([*feats, {"": 0.0}])
            return [sparse.csr_matrix((len(texts), 0))], self.dicts.transform(feats).toarray()
        counted = counted if counted is not None else task_grams(items)
        if base is not None and base.fitted is not None:
            self.char, self.words, self.scale, self.ok = base.char, base.words, base.scale, base.ok
            ngrams, dense = base.fitted
        else:
            try:
                if counted.distinct is not None and counted.inverse is not None:
                    # fitted and transformed once per distinct text, each weighing as often as it
                    # occurs, and stacked before they are spread to the texts (one copy of the rows)
                    inv = counted.inverse
                    dc, dw = counted.distinct["char"], counted.distinct["word"]
                    times = np.bincount(inv, minlength=dc.shape[0])
                    chars = self.char.fit(dc, weights=times).transform(dc)
                    words = self.words.fit(dw, weights=times).transform(dw)
                    ngrams = sparse.hstack([chars, words * 0.3], format="csr")[inv]
                else:
                    chars = self.char.fit(counted.texts["char"]).transform(counted.texts["char"])
                    words = self.words.fit(counted.texts["word"]).transform(counted.texts["word"])
                    ngrams = sparse.hstack([chars, words * 0.3], format="csr")
                del chars, words
            except ValueError:
                self.ok = False
                return [sparse.csr_matrix((len(texts), 0))], np.zeros((len(texts), 0))
            dense = np.array([shape_features(t) for t in texts]).reshape(len(texts), -1)
            self.scale = np.where(dense.std(axis=0) > 0, dense.std(axis=0), 1.0)
            dense = dense / self.scale
            self.fitted = (ngrams, dense)
        blocks = [ngrams]
        if self.kind == "pair":
            in_words = counted.in_context[("word", "full")]
            in_chars = counted.in_context[("char", "tail")]
            blocks.append(self.words.transform(counted.texts["word"], where=in_words) * 0.3)
            blocks.append(self.char.transform(counted.texts["char"], where=in_chars))
            if lexical is not None:
                cols = [np.concatenate(list(lexical[k])) for k in sorted(lexical)]
                dense = np.column_stack([dense, np.column_stack(cols) * 3.0])
        return blocks, dense


def _content_key(it: Item) -> int:
    """The hash of an item's shown options (by content: the same in a build and an audit)."""
    return int(content_id("fold", sorted(it.texts[i] for i in it.options)), 16)


def fold_of(it: Item, folds: int, salt: object = "") -> int:
    """The cross-validation fold of an item: a hash of its shown options (the same in a build and an audit)."""
    return _content_key(it) % folds if salt == "" else int(content_id("fold", salt, it.where), 16) % folds


class LearnedScorer(NamedTuple):
    """Cross-fitted linear models of one kind: `weights[f]` scores the items of fold `f`."""

    kind: str
    fold: list[int]
    weights: list[np.ndarray | None]
    per_text: np.ndarray
    """Every text's score by the model of its item's fold (0: no model), stacked as the features."""
    offsets: np.ndarray

    def scores(self, i: int) -> np.ndarray:
        """Per-text scores of item `i` by the model that never saw it (zeros: no model)."""
        return self.per_text[self.offsets[i] : self.offsets[i + 1]]


class Features(NamedTuple):
    """Label-free rows of every text of every item for one learned kind (the same in every AF round)."""

    rows: sparse.csr_matrix
    """Every text's row, what a fitted model scores: its sparse features, then its `dense` features
    as the row's last `dense.shape[1]` stored entries (explicit zeros kept), so a training matrix is
    a gather of rows with those entries centred in place (`_training_rows`), no stacking per fit."""
    dense: np.ndarray
    offsets: np.ndarray


def with_dense(blocks: Sequence[sparse.csr_matrix], dense: np.ndarray) -> sparse.csr_matrix:
    """The sparse `blocks` side by side, then the columns of `dense`, every dense value stored
    (zeros too): one copy of the data."""
    n, d = dense.shape
    block = sparse.csr_matrix(
        (dense.ravel(), np.tile(np.arange(d, dtype=np.int32), n), np.arange(0, n * d + 1, d, dtype=np.int64)),
        shape=(n, d),
    )
    out = sparse.hstack([*blocks, block], format="csr")
    if not out.has_sorted_indices:
        out.sort_indices()  # the dense columns come after the sparse ones in every row
    return out


def featurise(
    items: Sequence[Item],
    kind: str,
    lexical: Mapping[str, Sequence[np.ndarray]] | None = None,
    counted: TaskGrams | None = None,
) -> Features:
    """The rows `learned_scorer` fits and scores: they depend on the texts and contexts only."""
    return featurise_kinds(items, (kind,), lexical, counted)[kind]


def featurise_kinds(
    items: Sequence[Item],
    kinds: Sequence[str],
    lexical: Mapping[str, Sequence[np.ndarray]] | None = None,
    counted: TaskGrams | None = None,
) -> dict[str, Features]:
    """`featurise` of several kinds over the same items: `pair` rows begin with the `option` kind's
    (the same n-gram vectorisers fitted on the same texts, and shape features), computed once when
    both are asked for (`option` first); `lexical` goes to the `pair` kind only."""
    counted = counted if counted is not None or set(kinds) <= {"structure"} else task_grams(items)
    offsets = np.array(_offsets(items), dtype=np.int64)
    out: dict[str, Features] = {}
    base: Featuriser | None = None
    for kind in sorted(kinds, key=lambda k: k != "option"):
        f = Featuriser(kind)
        blocks, dense = f.blocks(items, lexical if kind == "pair" else None, counted, base)
        base = f if kind == "option" else base
        out[kind] = Features(with_dense(blocks, dense), dense, offsets)
    return out


def _training_rows(
    items: Sequence[Item], feats: Features, order: Sequence[int]
) -> tuple[sparse.csr_matrix, np.ndarray]:
    """The shown options' rows of the items in `order` (options by text), dense part centred per item."""
    at = feats.offsets
    picks, labels, sizes = [], [], []
    for i in order:
        it = items[i]
        local = sorted(it.options, key=lambda j: (it.texts[j], j))
        picks += [at[i] + j for j in local]
        labels += [1 if j == it.gold else 0 for j in local]
        sizes.append(len(local))
    index = np.array(picks, dtype=np.int64)
    x = feats.rows[index]
    d = feats.dense.shape[1]
    if len(index) and d:
        dense = feats.dense[index]
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        means = np.add.reduceat(dense, starts, axis=0) / np.array(sizes)[:, None]
        stored = (x.indptr[1:, None] - d + np.arange(d)).ravel()
        x.data[stored] = (dense - np.repeat(means, sizes, axis=0)).ravel()
    return x, np.array(labels, dtype=np.int64)


def learned_scorer(
    items: Sequence[Item],
    kind: str,
    folds: int = 5,
    lexical: Mapping[str, Sequence[np.ndarray]] | None = None,
    salt: object = "",
    min_train: int = 8,
    features: Features | None = None,
) -> LearnedScorer:
    """Fit `kind` (`option`, `pair`, `structure`) on every fold's complement; score with `scores(i)`.

    The model is a logistic regression (fitted by SGD) of gold vs distractor over the options of the training
    items; dense features are centred on their item's mean (what sets the gold apart within its
    item), sparse n-grams are not (centring would make them dense). Centring leaves the ranking of
    one item's texts unchanged, so new texts (reserve candidates) are scored with the same weights.
    `features`: the items' `featurise` rows from an earlier call over the same texts (only which
    texts are shown may differ), so a refit costs the SGD alone.
    """
    feats = features if features is not None else featurise(items, kind, lexical)
    return learned_scorers(items, {kind: feats}, folds, salt, min_train)[kind]


class _Plan(NamedTuple):
    """One kind's cross-fitting: its training rows in canonical order and each fold's slice."""

    feats: Features
    fold: list[int]
    x: sparse.csr_matrix
    y: np.ndarray
    bounds: np.ndarray
    trainable: list[bool]


def _plan(
    items: Sequence[Item], feats: Features, fold: list[int], k: int, min_train: int, content: Sequence[int]
) -> _Plan:
    # Rows in a canonical order (by fold, then items by content, options by text): the same items
    # give the same model however their options are displayed, and a fold's complement is two
    # contiguous slices of one matrix (no fancy indexing per fold). `content`: each item's `_content_key`.
    order = sorted(range(len(items)), key=lambda i: (fold[i], content[i] % (1 << 30), i))
    x, y = _training_rows(items, feats, order)
    per_fold = np.bincount(fold, minlength=k)
    sizes = np.bincount(fold, weights=[len(it.options) for it in items], minlength=k).astype(np.int64)
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    trainable = [len(items) - int(per_fold[f]) >= min_train and x.shape[1] > 0 for f in range(k)]
    return _Plan(feats, fold, x, y, bounds, trainable)


def _fit_fold(plan: _Plan, f: int) -> np.ndarray | None:
    if not plan.trainable[f]:
        return None
    lo, hi = int(plan.bounds[f]), int(plan.bounds[f + 1])
    x, y = plan.x, plan.y
    xf = sparse.vstack([x[:lo], x[hi:]], format="csr")
    yf = np.concatenate([y[:lo], y[hi:]])
    if xf.nnz == 0 or len(set(yf.tolist())) < 2:
        return None
    # Logistic loss by seeded SGD: a long-text task has millions of non-zeros, where liblinear
    # takes seconds per fold and the adversarial filter refits every round.
    # The rows are built here (finite, CSR, float): scikit-learn's input and parameter checks,
    # most of a small task's fitting time, are skipped (the setting is the thread's own).
    model = SGDClassifier(loss="log_loss", alpha=1e-4, max_iter=12, tol=None, random_state=0)
    with config_context(assume_finite=True, skip_parameter_validation=True):
        model.fit(xf, yf)
    return model.coef_.ravel().copy()


def learned_scorers(
    items: Sequence[Item],
    features: Mapping[str, Features],
    folds: int = 5,
    salt: object = "",
    min_train: int = 8,
) -> dict[str, LearnedScorer]:
    """`learned_scorer` of several kinds (their `featurise` rows, keyed by kind or by the suite
    rule's name: the key names the scorer in the result) on the same items and folds, every (kind,
    fold) model fitted side by side on the module's threads (no thread idles at the end of one kind
    while another kind's folds wait)."""
    k = max(2, min(folds, len(items)))
    content = [_content_key(it) for it in items]  # hashed once for the folds and every kind's row order
    fold = [c % k for c in content] if salt == "" else [fold_of(it, k, salt) for it in items]
    plans = {kind: _plan(items, feats, fold, k, min_train, content) for kind, feats in features.items()}
    jobs = [(kind, f) for kind in plans for f in range(k)]
    fitted = _map(lambda job: _fit_fold(plans[job[0]], job[1]), jobs)
    out = {}
    for kind, plan in plans.items():
        weights = [w for (kd, _), w in zip(jobs, fitted, strict=True) if kd == kind]
        feats = plan.feats
        width = plan.x.shape[1]
        n_texts = feats.rows.shape[0]
        per_text = np.zeros(n_texts)
        if any(w is not None for w in weights):
            matrix = np.column_stack([w if w is not None else np.zeros(width) for w in weights])
            text_fold = np.repeat(np.array(fold, dtype=np.int64), np.diff(feats.offsets))
            per_text = np.asarray(feats.rows @ matrix)[np.arange(n_texts), text_fold].round(9)
        out[kind] = LearnedScorer(kind, fold, weights, per_text, feats.offsets)
    return out


# --- the suite -----------------------------------------------------------------------------------


class ItemView(NamedTuple):
    """Everything the suite's rules need of one item, over all its texts."""

    lexical: dict[str, np.ndarray]
    chars: np.ndarray
    signatures: list[tuple[object, ...]]
    learned: dict[str, np.ndarray]


class SuiteFeatures(NamedTuple):
    """What the suite computes of a set of items before any label is read (reused across AF rounds)."""

    lexical: dict[str, list[np.ndarray]]
    chars: list[np.ndarray]
    signatures: list[list[tuple[object, ...]]]
    learned: dict[str, Features]

    def shown(self, picks: Sequence[Sequence[int]]) -> SuiteFeatures:
        """The same rows for items that show only `picks[i]` of their texts (in that order): the
        learned rules' vectorisers stay those fitted on every text."""
        learned = {}
        for name, f in self.learned.items():
            rows, at = picked_rows(f.offsets, picks)
            learned[name] = Features(f.rows[rows], f.dense[rows], at)
        return SuiteFeatures(
            {k: [v[i][list(p)] for i, p in enumerate(picks)] for k, v in self.lexical.items()},
            [c[np.ix_(p, p)] for c, p in zip(self.chars, picks, strict=True)],
            [[sig[j] for j in p] for sig, p in zip(self.signatures, picks, strict=True)],
            learned,
        )


_KINDS_OF = {"option_lr": "option", "context_lr": "pair", "structure_lr": "structure"}


def suite_features(items: Sequence[Item], counted: TaskGrams | None = None) -> SuiteFeatures:
    """Cosines, character similarities, signatures and the learned rules' rows of every text.

    `counted`: the items' `task_grams` when the caller has them (adversarial filtering counts a
    task's texts and contexts once for all its scorings).
    """
    counted = counted if counted is not None else task_grams(items)
    lex = lexical_scores(items, counted)
    learned = featurise_kinds(items, list(_KINDS_OF.values()), lex, counted)
    return SuiteFeatures(
        lex,
        list(counted.chars) if counted.chars is not None else [char_similarity(it.texts) for it in items],
        [[structure_signature(t) for t in it.texts] for it in items],
        {name: learned[kind] for name, kind in _KINDS_OF.items()},
    )


def item_views(
    items: Sequence[Item],
    folds: int = 5,
    salt: object = "",
    features: SuiteFeatures | None = None,
) -> list[ItemView]:
    """Score every text of every item under every rule of the suite (learned rules cross-fitted).

    `features`: `suite_features` of the same items and texts from an earlier call (only which texts
    are shown may differ); then only the learned rules are refitted (adversarial filtering's rounds).
    """
    feats = features if features is not None else suite_features(items)
    learned = learned_scorers(items, {name: feats.learned[name] for name in _KINDS_OF}, folds, salt=salt)
    return [
        ItemView(
            {k: v[i] for k, v in feats.lexical.items()},
            feats.chars[i],
            feats.signatures[i],
            {name: s.scores(i) for name, s in learned.items()},
        )
        for i in range(len(items))
    ]


def rule_scores(view: ItemView, shown: Sequence[int]) -> dict[str, list[float]]:
    """Every suite rule's scores of the shown texts (the rule answers the highest)."""
    out: dict[str, list[float]] = {}
    for key, values in view.lexical.items():
        picked = [float(values[i]) for i in shown]
        out[f"ctx_{key}_most"] = picked
        out[f"ctx_{key}_least"] = [-v for v in picked]
    central = mean_to_others(view.chars, shown)
    out["central_char"] = central
    out["outlier_char"] = [-c for c in central]
    for name, values in view.learned.items():
        out[name] = [float(values[i]) for i in shown]
    out["structure_odd"] = signature_scores(view.signatures, shown, rare=True)
    out["structure_modal"] = signature_scores(view.signatures, shown, rare=False)
    return {name: out[name] for name in SUITE}


def suite_scores(
    items: Sequence[Item],
    folds: int = 5,
    counted: TaskGrams | None = None,
    features: SuiteFeatures | None = None,
) -> list[dict[str, list[float]]]:
    """Per item, every suite rule's scores of its shown options (`counted`: their `task_grams`;
    `features`: their `suite_features`, when the caller has them)."""
    views = item_views(items, folds, features=features or suite_features(items, counted))
    return [rule_scores(v, it.options) for v, it in zip(views, items, strict=True)]


ScoreFn = Callable[[ItemView, Sequence[int]], dict[str, list[float]]]
