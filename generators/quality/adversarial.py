"""Adversarial filtering: keep the distractors the baseline suite cannot tell from the gold.

The idea of SWAG/HellaSwag's adversarial filtering and of WinoGrande's AFLite, at build time and
for our cheap scorers: generators propose more candidates than an item shows (`Question.reserve`);
for a few seeded rounds, the learned scorers are refitted on the current items (cross-fitted on
folds that change every round, so an item is always scored by models that never saw it), every
rule of the suite scores every candidate, and in each item a distractor is swapped for the reserve
candidate that makes the task hardest: the one that brings the rules' accuracies closest to their
band. Only rules whose task accuracy is above their target (chance + `slack`) count in full, and a
rule leaves that set as soon as it reaches it, so filtering stops at chance instead of turning a
tell around (gold never the longest is a tell too); rules below chance - `slack` count the other
way. Among swaps equally hard (within `prefer_within` items' credit), the one bringing in a
candidate from the item's own run or instance (`PREFERRED`: rule-made, same run, same instance)
wins over one from another run; a swap that leaves every band as it is is still made for such a
better source, or when it lowers the learned rules' graded view of the gold (`_soft`: the share of
distractors they score below it), which is what a refitted model would still find. Rounds stop
early when every rule is in its band and no better-sourced candidate is left, or when a round
swaps nothing. After the rounds, rules still over their bound lose the items they solve, most-solved
first, until they are back at target (AFLite's removal of predictable instances), at most
`max_drop` of the task; those items become `too_easy` Problems. Then `reserve` is cleared.

Golds copied from the context: the `gold_in_context` gate drops an item whose gold alone is found
verbatim in its context, so where the reserve holds a candidate found there too, filtering shows one
and never swaps the last of them out; an item with no such candidate is not filtered (its count is
`left_to_gates`) and the gate drops it.

Cost: every distinct text and every context of a task is analysed once (`scorers.task_grams`:
hashed gram counts, TF-IDF fitted and applied once per distinct text weighing as often as it occurs,
and each text's context cosines, which do not depend on the other options shown); rounds refit the
linear models on those counts (three folds, every kind's folds fitted side by side; the
context+option rows begin with the option-only rows, built once, and a fold's training matrix is a
gather of those rows with their dense part centred in place; the closing measurement is the
audit's own five folds and models, refitted on the rows the rounds built and credited by the
rounds' vectorised rules (`_closing`, equal item by item to `task_baselines` of the shown
options): no text is analysed or featurised again), the naive Bayes is a sparse product, and a
round's first swaps are scored for all items together (items with as many options stacked, a
bounded number of trials at a time: every item's options are still as the round found them),
later swaps item by item.
Memory is the non-zeros of the counts (never an items x vocabulary dense matrix).

Deterministic: items are visited in an order seeded by `seed`, round and item id; ties between
swaps go to the candidate the generator preferred (reserve order); the learned scorers use
seeded SGD.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple

import numpy as np
from scipy import sparse

from generators.quality.baselines import (
    FOLDS,
    RANK_DIMENSIONS,
    Bounds,
    bound_for,
    deal_blocks,
    fold_by_content,
    option_tokens,
    text_features,
    token_similarity,
)
from generators.quality.gates import context_text, found_in_normalised
from generators.quality.scorers import (
    SUITE,
    Item,
    ItemView,
    SuiteFeatures,
    item_views,
    suite_features,
    task_grams,
)
from generators.text import normalise
from schemas import Distractor, Problem, Question, content_id
from schemas.steps import candidate_source
from schemas.tasks import find_spec
from schemas.validity import AdversarialTask

VERSION = 1
"""The filter's version, its scorers' (`scorers`, `baselines`, `grams`) included: part of a filter
block's cache key (`flows.cache_keys.filter_key`). Bump it with any change after which the same
block, seed, settings and bounds would not give the same output."""
PREFERRED = frozenset({"rule", "same_run", "same_instance"})
"""Candidate sources of the item's own run or instance: preferred when equally hard (`Settings.prefer_within`)."""
OPTION_ONLY = ("longest", "shortest", "central", "outlier", "no_context")
RULES = (*OPTION_ONLY, *SUITE)
"""The rules filtering works against (`position` is left to balancing)."""


class Settings(NamedTuple):
    """Knobs of the filter."""

    rounds: int = 3
    """Refit-and-replace rounds."""
    folds: int = 3
    """Cross-fitting folds of the learned scorers in the rounds (three models per kind, each fitted
    on two thirds of the items: half the work of five folds); the measurement after the rounds is
    the audit's own (its five folds by content)."""
    slack: float = 0.05
    """A rule counts as solving the task while its accuracy is above chance + `slack`."""
    swaps_per_item: int = 2
    """At most this many distractors of one item are replaced per round."""
    near_duplicate: float = 0.9
    """Character similarity at which two options count as the same (never both shown)."""
    drop: bool = True
    """Drop the items a rule still solves when it ends over its bound."""
    drop_margin: float = 0.02
    """... or within this much of its bound (the audit refits the learned rules on the kept items)."""
    prefer_within: float = 1.0
    """Trials within this many items' credit (on one rule) of the best swap count as equally hard;
    among them the one bringing a distractor from the item's own run or instance (`PREFERRED`) wins."""
    soft_gain: float = 0.1
    """A swap that leaves every rule's band as it is is still made when it lowers the learned rules'
    graded view of the gold (`_soft`) by this much: the residual tells a refitted model would find."""
    max_drop: float = 0.3
    """Never drop more than this share of a task: a task the reserve cannot fix stays flagged (and
    publish refuses it) rather than silently shrinking to nothing."""
    block: int = 1000
    """A task of more items is filtered in blocks of about this many (items dealt to blocks in an
    order drawn from the seed), each on its own: the filter's memory (every text's gram counts and
    features) is bounded by a block, not by the task, and its time stays linear in the items."""


class TaskFilter(NamedTuple):
    """What filtering did to one task."""

    items: int
    candidates_scored: int
    replaced: int
    dropped: int
    rounds: int
    left_to_gates: int
    before: dict[str, float]
    """Each rule's accuracy before any swap, as the filter scores it (vectorisers fitted with the reserve)."""
    after: dict[str, float]
    """... and on the kept items, with the audit's folds and models (on the filter's rows: its
    vectorisers saw the reserve too; the validity stage measures the built items anew)."""

    def report(self) -> AdversarialTask:
        """The report's entry of the task."""
        return AdversarialTask(
            items=self.items,
            candidates_scored=self.candidates_scored,
            replaced=self.replaced,
            dropped=self.dropped,
            left_to_gates=self.left_to_gates,
            rounds=self.rounds,
            before={k: round(v, 4) for k, v in self.before.items()},
            after={k: round(v, 4) for k, v in self.after.items()},
        )


class _State:
    """One task's items during filtering: all texts, what is shown, and option-only precomputations."""

    def __init__(self, questions: Sequence[Question], in_context: _InContext) -> None:
        self.questions = list(questions)
        self.texts: list[tuple[str, ...]] = []
        self.origin: list[list[str]] = []
        self.shown: list[list[int]] = []
        self.tokens: list[np.ndarray] = []
        words: dict[str, list[str]] = {}  # a candidate is shown to many items: split once
        for q in self.questions:
            texts = [q.gold]
            origins = [""]
            for d in (*q.distractors, *q.reserve):
                if d.text not in texts:
                    texts.append(d.text)
                    origins.append(d.origin)
            self.texts.append(tuple(texts))
            self.origin.append(origins)
            self.shown.append([0, *range(1, len(q.distractors) + 1)])
            split = []
            for t in texts:
                if t not in words:
                    words[t] = option_tokens(t)
                split.append(words[t])
            self.tokens.append(np.array(token_similarity(split)))
        self.lengths = [np.array([float(len(t)) for t in texts]) for texts in self.texts]
        self.lines = [np.array([float(t.count("\n")) for t in texts]) for texts in self.texts]
        self.offsets = np.concatenate([[0], np.cumsum([len(t) for t in self.texts])]).astype(np.int64)
        self.contexts = [in_context.context(q) for q in self.questions]
        self.preferred = [[int(candidate_source(o) in PREFERRED) for o in origins] for origins in self.origin]
        # where the gold is found in the context, an item passes the `gold_in_context` gate only while
        # a shown distractor is found there too: such items show one, and `_trials` never swaps the last out
        self.in_context = [
            in_context.found(q, texts) for q, texts in zip(self.questions, self.texts, strict=True)
        ]
        for i, found in enumerate(self.in_context):
            if found[0] and not found[self.shown[i][1:]].any():
                spare = [j for j in range(1, len(found)) if found[j] and j not in self.shown[i]]
                if spare:
                    self.shown[i][-1] = spare[0]

    def can_prefer(self) -> bool:
        """Whether some item shows a distractor from elsewhere and holds a better-sourced spare."""
        for shown, pref in zip(self.shown, self.preferred, strict=True):
            spare = set(range(len(pref))) - set(shown)
            if any(pref[j] == 0 for j in shown[1:]) and any(pref[j] for j in spare):
                return True
        return False

    def items(self) -> list[Item]:
        return [
            Item(q.item_id, texts, tuple(shown), 0, ctx)
            for q, texts, shown, ctx in zip(
                self.questions, self.texts, self.shown, self.contexts, strict=True
            )
        ]


_INDEPENDENT = (
    "longest",
    "shortest",
    *(
        f"ctx_{k}_{side}"
        for k in ("word_tail", "word_full", "char_tail", "char_full")
        for side in ("most", "least")
    ),
    "option_lr",
    "context_lr",
    "structure_lr",
)
_SET = (
    "central",
    "outlier",
    "central_char",
    "outlier_char",
    "structure_odd",
    "structure_modal",
    "no_context",
)
_ORDER = (*_INDEPENDENT, *_SET)
_COLUMN = {name: _ORDER.index(name) for name in RULES}


class _Scores(NamedTuple):
    """One item's scores of all its texts, ready for vectorised trials."""

    independent: np.ndarray
    """texts x rules whose score of a text does not depend on the other options."""
    tokens: np.ndarray
    chars: np.ndarray
    signature: np.ndarray
    """An integer per text (-1: no structure)."""
    nb_text: np.ndarray
    """`no_context`'s score of each text's own features (words, shape)."""
    nb_rank: np.ndarray
    """`no_context`'s weight of each rank tag: dimensions (len, sim, lines) x tags (top, bottom, mid)."""
    lines: np.ndarray


class _NaiveBayes:
    """`no_context` (`baselines.no_context_weights`) refitted every round, vectorised: each text's
    own features (words, CJK bigrams, shape) are found once per task as a sparse 0/1 matrix; the
    rank tags (length, centrality, lines among the shown options) are counted per round."""

    def __init__(self, state: _State) -> None:
        index: dict[str, int] = {}
        rows, cols = [], []
        known: dict[str, list[int]] = {}  # a text's feature columns (a candidate recurs across items)
        for r, text in enumerate(t for texts in state.texts for t in texts):
            if text not in known:
                known[text] = [index.setdefault(f, len(index)) for f in sorted(text_features(text))]
            rows += [r] * len(known[text])
            cols += known[text]
        self.offsets = np.concatenate([[0], np.cumsum([len(t) for t in state.texts])]).astype(np.int64)
        self.matrix = sparse.csr_matrix(
            (np.ones(len(rows)), (rows, cols)), shape=(int(self.offsets[-1]), max(1, len(index)))
        )

    def fit(self, state: _State, seed: object, folds: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per text, its own features' weight under its item's fold; per item, the rank tags'
        weights (dimensions x tags); and the items' folds (drawn from `seed` and the item; seed "":
        the audit's, `baselines.fold_by_content` of the shown options, as `scorers.fold_of`)."""
        n = len(state.shown)
        k = max(2, min(folds, n))
        fold = np.array(
            [
                fold_by_content([texts[j] for j in shown], k)
                if seed == ""
                else int(content_id("nb-fold", seed, q.item_id), 16) % k
                for q, texts, shown in zip(state.questions, state.texts, state.shown, strict=True)
            ]
        )
        gold_rows = self.offsets[:-1]
        dis_rows = np.array(
            [self.offsets[i] + j for i, sh in enumerate(state.shown) for j in sh[1:]], dtype=np.int64
        )
        dis_fold = np.repeat(fold, [len(sh) - 1 for sh in state.shown])
        gold = (
            sparse.csr_matrix((np.ones(n), (fold, gold_rows)), shape=(k, self.matrix.shape[0])) @ self.matrix
        )
        dis = (
            sparse.csr_matrix((np.ones(len(dis_rows)), (dis_fold, dis_rows)), shape=(k, self.matrix.shape[0]))
            @ self.matrix
        )
        rank_gold, rank_dis = _rank_counts(state, fold, k)
        n_gold = np.bincount(fold, minlength=k).astype(float)
        n_dis = np.bincount(dis_fold, minlength=k).astype(float)
        weights = _log_odds(gold.toarray(), dis.toarray(), n_gold, n_dis)
        rank = _log_odds(rank_gold.reshape(k, -1), rank_dis.reshape(k, -1), n_gold, n_dis)
        text_fold = np.repeat(fold, np.diff(self.offsets))
        per_text = np.asarray(self.matrix @ weights.T)[np.arange(self.matrix.shape[0]), text_fold]
        return per_text, rank.reshape(k, len(RANK_DIMENSIONS), 3)[fold], fold


def _log_odds(gold: np.ndarray, dis: np.ndarray, n_gold: np.ndarray, n_dis: np.ndarray) -> np.ndarray:
    """Per fold (rows) and feature: gold-vs-distractor log-odds learned on the other folds, with
    add-one smoothing, as `baselines.no_context_weights`."""
    g = gold.sum(axis=0) - gold
    d = dis.sum(axis=0) - dis
    g_all = (n_gold.sum() - n_gold)[:, None]
    d_all = (n_dis.sum() - n_dis)[:, None]
    pg, pd = (g + 1) / (g_all + 2), (d + 1) / (d_all + 2)
    return np.log(pg / pd) - np.log((1 - pg) / (1 - pd))


def _rank_counts(state: _State, fold: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Per fold, dimension (length, centrality, lines) and rank tag (0 top, 1 bottom, 2 mid): how
    many golds and how many distractors of the items' shown options carry the tag. Items with as
    many options are tagged together (`_rank_tags` of their stacked values)."""
    dims = len(RANK_DIMENSIONS)
    gold, dis = np.zeros((k, dims, 3)), np.zeros((k, dims, 3))
    groups: dict[int, list[int]] = defaultdict(list)
    for i, sh in enumerate(state.shown):
        groups[len(sh)].append(i)
    for size, idx in groups.items():
        shown = [np.asarray(state.shown[i]) for i in idx]
        if size > 1:  # each option's mean token similarity to the other shown options
            sims = np.stack([state.tokens[i][np.ix_(sh, sh)] for i, sh in zip(idx, shown, strict=True)])
            central = (sims.sum(axis=2) - sims[:, np.arange(size), np.arange(size)]) / (size - 1)
        else:
            central = np.zeros((len(idx), size))
        values = np.stack(
            [
                np.stack([state.lengths[i][sh] for i, sh in zip(idx, shown, strict=True)]),
                central,
                np.stack([state.lines[i][sh] for i, sh in zip(idx, shown, strict=True)]),
            ],
            axis=1,
        )  # items x dimensions x options
        tags = _rank_tags(values.reshape(-1, size)).reshape(len(idx), dims, size)
        at = (fold[idx][:, None], np.arange(dims)[None, :])
        np.add.at(gold, (*at, tags[:, :, 0]), 1)
        for j in range(1, size):
            np.add.at(dis, (*at, tags[:, :, j]), 1)
    return gold, dis


def _item_scores(
    state: _State,
    i: int,
    view: ItemView,
    codes: dict[tuple[object, ...], int],
    nb: tuple[np.ndarray, np.ndarray, np.ndarray],
) -> _Scores:
    lengths = state.lengths[i]
    cols = [lengths, -lengths]
    for key in ("word_tail", "word_full", "char_tail", "char_full"):
        cols += [view.lexical[key], -view.lexical[key]]
    cols += [view.learned["option_lr"], view.learned["context_lr"], view.learned["structure_lr"]]
    sig = np.array([codes.setdefault(s, len(codes)) if s else -1 for s in view.signatures])
    per_text, rank, _ = nb
    nb_text = per_text[state.offsets[i] : state.offsets[i + 1]]
    return _Scores(np.column_stack(cols), state.tokens[i], view.chars, sig, nb_text, rank[i], state.lines[i])


def _rank_tags(values: np.ndarray) -> np.ndarray:
    """Per row (trial) and option: 0 unique max (top), 1 unique min (bottom), 2 otherwise (as
    `baselines._rank_tag`, whose tags `RANK_TAGS` lists in this order)."""
    top = np.abs(values - values.max(axis=1, keepdims=True)) <= 1e-12
    bottom = np.abs(values - values.min(axis=1, keepdims=True)) <= 1e-12
    tags = np.full(values.shape, 2)
    tags[bottom & (bottom.sum(axis=1, keepdims=True) == 1)] = 1
    tags[top & (top.sum(axis=1, keepdims=True) == 1)] = 0
    return tags


def _credit(values: np.ndarray) -> np.ndarray:
    """values: trials x k x rules; the gold is position 0. Credit of the argmax rule, ties shared."""
    top = values.max(axis=1, keepdims=True)
    at_top = np.abs(values - top) <= 1e-9
    return np.where(at_top[:, 0, :], 1.0 / at_top.sum(axis=1), 0.0)


def trial_credits(sc: _Scores, trials: np.ndarray) -> np.ndarray:
    """Credit of every rule (columns in `_ORDER`) for every trial option set (rows of text indices)."""
    return _set_credits([sc], [trials])[0]


def shown_credits(scores: Sequence[_Scores], shown: Sequence[Sequence[int]]) -> np.ndarray:
    """`trial_credits` of every item's shown options (a row per item), items with as many options
    scored together."""
    out = np.zeros((len(scores), len(_ORDER)))
    groups: dict[int, list[int]] = defaultdict(list)
    for i, sh in enumerate(shown):
        groups[len(sh)].append(i)
    for idx in groups.values():
        out[idx] = _set_credits([scores[i] for i in idx], [np.asarray(shown[i])[None, :] for i in idx])[0]
    return out


def _set_credits(scores: Sequence[_Scores], sets: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Credits of option sets of several items with as many options (`sets[j]`: rows of text indices
    of the item scored by `scores[j]`), stacked in that order; and the sets' independent scores."""
    grids = [(p[:, :, None], p[:, None, :]) for p in sets]
    pairs = list(zip(scores, sets, grids, strict=True))
    independent = np.concatenate([sc.independent[p] for sc, p, _ in pairs])
    credits = _credits(
        independent,
        np.concatenate([sc.tokens[g] for sc, _, g in pairs]),
        np.concatenate([sc.chars[g] for sc, _, g in pairs]),
        np.concatenate([sc.signature[p] for sc, p, _ in pairs]),
        np.concatenate([sc.nb_text[p] for sc, p, _ in pairs]),
        np.repeat(np.stack([sc.nb_rank for sc in scores]), [len(p) for p in sets], axis=0),
        np.concatenate([sc.lines[p] for sc, p, _ in pairs]),
    )
    return credits, independent


def _credits(
    ind: np.ndarray,
    tokens: np.ndarray,
    chars: np.ndarray,
    sig: np.ndarray,
    nb_text: np.ndarray,
    nb_rank: np.ndarray,
    lines: np.ndarray,
) -> np.ndarray:
    """Credits of option sets (rows) given their options' scores: `ind` m x k x rules, `tokens` and
    `chars` m x k x k similarities among them, `sig`, `nb_text`, `lines` m x k, `nb_rank` the
    rank-tag weights (dimensions x tags), or each row's (m x dimensions x tags)."""
    k = ind.shape[1]
    parts = [ind]
    for sub in (tokens, chars):
        mean = ((sub.sum(axis=2) - sub[:, np.arange(k), np.arange(k)]) / max(1, k - 1)).round(9)
        parts += [mean[:, :, None], -mean[:, :, None]]
    counts = (sig[:, :, None] == sig[:, None, :]).sum(axis=2).astype(float)
    has = (sig >= 0).any(axis=1, keepdims=True)
    counts = np.where(has, counts, 0.0)
    parts += [-counts[:, :, None], counts[:, :, None]]
    nb = nb_text.copy()
    token_mean = parts[1][:, :, 0]
    for d, values in enumerate((ind[:, :, 0], token_mean, lines)):
        tags = _rank_tags(values)
        nb += nb_rank[d][tags] if nb_rank.ndim == 2 else np.take_along_axis(nb_rank[:, d, :], tags, axis=1)
    parts.append(nb.round(9)[:, :, None])
    return _credit(np.concatenate(parts, axis=2))  # columns in `_ORDER`


def _scored(
    state: _State, bayes: _NaiveBayes, features: SuiteFeatures, folds: int, salt: object
) -> tuple[list[ItemView], list[_Scores], np.ndarray]:
    """The learned rules refitted on the items' shown options (`folds` drawn from `salt`; salt "":
    the audit's folds, by the shown options' content) and every text of every item scored by every
    rule; the views, the scores and the credits of the shown options (a row per item)."""
    views = item_views(state.items(), folds, salt=salt, features=features)
    nb = bayes.fit(state, salt, folds)
    codes: dict[tuple[object, ...], int] = {}
    scores = [_item_scores(state, i, views[i], codes, nb) for i in range(len(state.shown))]
    return views, scores, shown_credits(scores, state.shown)


def _closing(
    state: _State, bayes: _NaiveBayes, features: SuiteFeatures
) -> tuple[list[dict[str, float]], dict[str, float]]:
    """Each item's credit under every rule, and the rules' accuracies, as the audit measures the
    shown options: its five folds by content, its models, refitted on the shown options only (the
    learned rules' vectorisers are those fitted with the reserve, where the audit fits them on
    the shown options: the validity stage measures the built items anew). On the rows the rounds
    built and with their vectorised credits: no text is analysed or featurised again."""
    _, _, credits = _scored(state, bayes, features, FOLDS, "")
    columns = {name: credits[:, _COLUMN[name]] for name in RULES}
    per_item = [{name: float(columns[name][i]) for name in RULES} for i in range(len(state.shown))]
    return per_item, {name: float(values.mean()) for name, values in columns.items()}


_LEARNED = np.array([_COLUMN[name] for name in ("option_lr", "context_lr", "structure_lr")])


def _soft(sc: _Scores, trials: np.ndarray) -> np.ndarray:
    """Per trial: over the learned rules, the share of distractors scored below the gold (ties half),
    summed. A graded view of what a refitted model would still find (0.5 per rule when nothing sets
    the gold apart), where the 0/1 credit of the argmax moves only when the top option changes."""
    return _soft_values(sc.independent[trials])


def _soft_values(independent: np.ndarray) -> np.ndarray:
    """`_soft` of option sets given their options' independent scores (m x k x rules)."""
    values = independent[:, :, _LEARNED]  # m x k x learned
    gold = values[:, :1, :]
    rest = values[:, 1:, :]
    below = (rest < gold - 1e-9).mean(axis=1) + 0.5 * (np.abs(rest - gold) <= 1e-9).mean(axis=1)
    return below.sum(axis=1)


def _trials(state: _State, i: int, chars: np.ndarray, near: float) -> tuple[np.ndarray, np.ndarray]:
    rows, gain = _all_trials(state, i, chars, near)
    found = state.in_context[i]
    if found[0] and len(rows):  # never drop the last shown distractor found in the context
        keep = found[rows[:, 1:]].any(axis=1)
        rows, gain = rows[keep], gain[keep]
    return rows, gain


def _all_trials(state: _State, i: int, chars: np.ndarray, near: float) -> tuple[np.ndarray, np.ndarray]:
    """Every option set one swap away from item `i`'s (a reserve text in a distractor's slot, never a
    near-duplicate of the other shown options), slot by slot in reserve order, and the gain in
    better-sourced distractors of each."""
    shown = np.asarray(state.shown[i], dtype=np.int64)
    k = len(shown)
    taken = np.zeros(len(state.texts[i]), dtype=bool)
    taken[shown] = True
    taken[0] = True
    spare = np.flatnonzero(~taken)
    if not len(spare) or k < 2:
        return np.zeros((0, k), dtype=np.int64), np.zeros(0)
    sims = chars[np.ix_(spare, shown)]  # spare x shown
    # each spare's highest similarity to the shown options other than the one in a slot: the
    # highest overall, or the second highest where the slot's own option is the highest
    top = sims.argmax(axis=1)
    first = sims[np.arange(len(spare)), top]
    second = np.sort(sims, axis=1)[:, -2]  # k >= 2
    others = np.where(np.arange(k)[None, :] == top[:, None], second[:, None], first[:, None])
    slot, at = np.nonzero((others[:, 1:] < near).T)  # slot-major, spares in reserve order
    slot = slot + 1
    rows = np.tile(shown, (len(slot), 1))
    rows[np.arange(len(slot)), slot] = spare[at]
    pref = np.asarray(state.preferred[i])
    return rows, (pref[spare[at]] - pref[shown[slot]]).astype(float)


#: Trials (option sets) scored together when the first swaps of a round are scored in one go.
_TRIAL_CHUNK = 16_384


def _first_swaps(
    state: _State, scores: Sequence[_Scores], views: Sequence[ItemView], near: float
) -> list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, float]]:
    """Per item, what its first swap of a round chooses from (`_trials`, their credits, `_soft` of
    each and of the shown options), for all items at once: at a round's start every item's shown
    options are as the round found them, so these are the same as scored one item at a time
    when its turn comes. Items with as many options are scored together, a bounded number of
    trials at a time."""
    n = len(state.shown)
    trials = [_trials(state, i, views[i].chars, near) for i in range(n)]
    out: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, float]] = [
        (t, g, np.zeros((0, len(_ORDER))), np.zeros(0), 0.0) for t, g in trials
    ]
    groups: dict[int, list[int]] = defaultdict(list)
    for i, sh in enumerate(state.shown):
        if len(trials[i][0]):
            groups[len(sh)].append(i)
    for idx in groups.values():
        chunk: list[int] = []
        size = 0
        for i in idx:
            if chunk and size + len(trials[i][0]) > _TRIAL_CHUNK:
                _score_chunk(state, scores, trials, chunk, out)
                chunk, size = [], 0
            chunk.append(i)
            size += len(trials[i][0])
        _score_chunk(state, scores, trials, chunk, out)
    return out


def _score_chunk(
    state: _State,
    scores: Sequence[_Scores],
    trials: Sequence[tuple[np.ndarray, np.ndarray]],
    chunk: Sequence[int],
    out: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, float]],
) -> None:
    """`out[i]` of the items in `chunk`: each item's trials scored with its shown set after them."""
    sets = [np.vstack([trials[i][0], np.asarray(state.shown[i], dtype=np.int64)[None, :]]) for i in chunk]
    got, independent = _set_credits([scores[i] for i in chunk], sets)
    soft = _soft_values(independent)
    at = 0
    for i, p in zip(chunk, sets, strict=True):
        m = len(p)
        out[i] = (
            trials[i][0],
            trials[i][1],
            got[at : at + m - 1],
            soft[at : at + m - 1],
            float(soft[at + m - 1]),
        )
        at += m


class _Band:
    """Which swap of one item to make, given the task's rule accuracies and their band."""

    def __init__(self, lo: float, hi: float, n: int, settings: Settings) -> None:
        self.lo, self.hi, self.n = lo, hi, n
        self.tie = settings.prefer_within / n
        self.soft_gain = settings.soft_gain

    def cost(self, acc: np.ndarray) -> np.ndarray:
        # np.maximum, not np.clip: the same values, without clip's Python-level dispatch (called per swap)
        return np.maximum(acc - self.hi, 0.0).sum(axis=-1) + np.maximum(self.lo - acc, 0.0).sum(axis=-1)

    def pick(
        self,
        acc: np.ndarray,
        mine: np.ndarray,
        got: np.ndarray,
        pref: np.ndarray,
        soft: np.ndarray,
        now_soft: float,
    ) -> int | None:
        """The trial to take, or None. Lexicographic: the band cost of the task (a trial within
        `prefer_within` items' credit of the best counts as equally hard), then more distractors from
        the item's own run or instance, then the graded learned-rule view, then the reserve order.
        A trial that leaves the cost as it is is taken only for a better source or a clearly softer
        learned-rule view."""
        cost = self.cost(acc + (got - mine) / self.n)
        now = float(self.cost(acc))
        improving = cost < now - 1e-12
        if improving.any():
            pool = improving & (cost <= cost[improving].min() + self.tie)
        else:
            pool = (cost <= now + 1e-12) & ((pref > 0) | (soft < now_soft - self.soft_gain))
        idx = np.flatnonzero(pool)
        if not len(idx):
            return None
        key = np.lexsort((idx, soft[idx].round(9), cost[idx].round(12), -pref[idx]))
        return int(idx[key[0]])


def _band_cost(acc: np.ndarray, lo: float, hi: float) -> float:
    return float(np.clip(acc - hi, 0, None).sum() + np.clip(lo - acc, 0, None).sum())


class _InContext:
    """Which of an item's texts are found in its context (`gates.found_in_normalised`, the test of
    the `gold_in_context` gate), each context and each distinct text normalised once per task."""

    def __init__(self) -> None:
        self.keys: dict[str, str] = {}
        self.contexts: dict[str, str] = {}
        self.raw: dict[str, str] = {}

    def context(self, q: Question) -> str:
        """The item's context as the gates and the audit join it (once per item)."""
        raw = self.raw.get(q.item_id)
        if raw is None:
            raw = self.raw[q.item_id] = context_text(q.fields, find_spec(q.scenario, q.task))
        return raw

    def found(self, q: Question, texts: Sequence[str]) -> np.ndarray:
        ctx = self.contexts.get(q.item_id)
        if ctx is None:
            raw = self.context(q)
            ctx = self.contexts[q.item_id] = normalise(raw) if raw else ""
        keys = []
        for t in texts:
            key = self.keys.get(t)
            if key is None:
                key = self.keys[t] = normalise(t)
            keys.append(key)
        return np.array(found_in_normalised(keys, ctx), dtype=bool)


def _left_to_gates(q: Question, in_context: _InContext) -> bool:
    """The gold alone is found in the context and no candidate is: no swap can make the item pass
    the `gold_in_context` gate, so filtering leaves it (and its tell) to the gate."""
    found = in_context.found(q, [q.gold, *(d.text for d in (*q.distractors, *q.reserve))])
    return bool(found[0]) and not found[1:].any()


def filter_task(
    questions: Sequence[Question], seed: int, settings: Settings | None = None, bounds: Bounds | None = None
) -> tuple[list[Question], list[Problem], TaskFilter]:
    """Filter one task's MCQ questions (see the module docstring); returns kept questions, drops and stats."""
    settings = settings or Settings()
    bounds = bounds or Bounds()
    in_context = _InContext()
    hopeless = [q for q in questions if _left_to_gates(q, in_context)]
    if not hopeless:
        return _filter(questions, seed, settings, bounds, in_context)
    skip = {q.item_id for q in hopeless}
    kept, problems, stats = _filter(
        [q for q in questions if q.item_id not in skip], seed, settings, bounds, in_context
    )
    left = [q.model_copy(update={"reserve": ()}) for q in hopeless]
    stats = stats._replace(items=stats.items + len(left), left_to_gates=len(left))
    return sorted([*kept, *left], key=lambda q: q.item_id), problems, stats


def _filter(
    questions: Sequence[Question], seed: int, settings: Settings, bounds: Bounds, in_context: _InContext
) -> tuple[list[Question], list[Problem], TaskFilter]:
    state = _State(questions, in_context)
    n = len(state.questions)
    before: dict[str, float] = {}
    chance = sum(1 / len(s) for s in state.shown) / n if n else 0.0
    variance = sum((1 / len(s)) * (1 - 1 / len(s)) for s in state.shown)
    hi, lo = chance + settings.slack, chance - settings.slack
    scored = replaced = 0
    done_rounds = 0
    credits = np.zeros((n, len(_ORDER)))
    counted = task_grams(state.items())
    bayes = _NaiveBayes(state)
    features: SuiteFeatures | None = None
    for rnd in range(settings.rounds):
        salt: object = (seed, rnd)
        features = features or suite_features(state.items(), counted)
        views, scores, credits = _scored(state, bayes, features, settings.folds, salt)
        acc = credits.mean(axis=0) if n else np.zeros(len(_ORDER))
        if rnd == 0 and n:  # as the filter scores them (its vectorisers also see the reserve)
            before = {name: float(acc[_COLUMN[name]]) for name in RULES}
        if _band_cost(acc, lo, hi) == 0 and not state.can_prefer():
            break  # every rule within its band and no better-sourced candidate to bring in
        done_rounds += 1
        band = _Band(lo, hi, n, settings)
        order = sorted(range(n), key=lambda i: content_id(seed, "af", rnd, state.questions[i].item_id))
        swaps = 0
        first = _first_swaps(state, scores, views, settings.near_duplicate)
        for i in order:
            for turn in range(settings.swaps_per_item):
                if turn == 0:
                    trials, pref, got, soft, now_soft = first[i]
                else:
                    trials, pref = _trials(state, i, views[i].chars, settings.near_duplicate)
                if not len(trials):
                    break
                if turn:
                    got = trial_credits(scores[i], trials)
                    soft = _soft(scores[i], trials)
                    now_soft = float(_soft(scores[i], np.array([state.shown[i]]))[0])
                scored += len(trials)
                best = band.pick(acc, credits[i], got, pref, soft, now_soft)
                if best is None:
                    break
                state.shown[i] = trials[best].tolist()
                swaps += 1
                acc = acc + (got[best] - credits[i]) / n
                credits[i] = got[best]
        replaced += swaps
        if not swaps:
            break
    kept = list(range(n))
    problems: list[Problem] = []
    if n:
        per_item, after = _closing(state, bayes, features or suite_features(state.items(), counted))
        before = before or after
        if settings.drop:
            kept, problems = _drop_solved(
                state,
                per_item,
                after,
                chance,
                variance,
                hi,
                bounds,
                settings.drop_margin,
                int(settings.max_drop * n),
            )
            after = {name: sum(per_item[i][name] for i in kept) / len(kept) for name in RULES} if kept else {}
    else:
        after = {}
    out = [_rebuild(state, i) for i in kept]
    stats = TaskFilter(n, scored, replaced, n - len(kept), done_rounds, 0, before, after)
    return out, problems, stats


def _drop_solved(
    state: _State,
    credits: list[dict[str, float]],
    acc: dict[str, float],
    chance: float,
    variance: float,
    target: float,
    bounds: Bounds,
    margin: float,
    most: int,
) -> tuple[list[int], list[Problem]]:
    n = len(credits)
    over = [
        name for name in RULES if acc[name] > bound_for(name, chance, variance, n, bounds) - margin + 1e-12
    ]
    dropped: dict[int, str] = {}
    for name in over:
        live = [i for i in range(n) if i not in dropped]
        total = sum(credits[i][name] for i in live)
        solved = sorted(
            (i for i in live if credits[i][name] > 0),
            key=lambda i: (-sum(credits[i].values()), state.questions[i].item_id),
        )
        left = len(live)
        for i in solved:
            if left == 0 or total / left <= target or len(dropped) >= most:
                break
            total -= credits[i][name]
            left -= 1
            dropped[i] = name
    problems = [
        Problem(
            where=state.questions[i].item_id,
            stage="adversarial",
            reason="too_easy",
            detail=f"{state.questions[i].scenario}/{state.questions[i].task}: `{name}` finds the gold and no "
            "reserve candidate hides it",
            severity="error",
        )
        for i, name in sorted(dropped.items(), key=lambda kv: state.questions[kv[0]].item_id)
    ]
    return [i for i in range(n) if i not in dropped], problems


def _rebuild(state: _State, i: int) -> Question:
    q = state.questions[i]
    texts, origins = state.texts[i], state.origin[i]
    distractors = tuple(Distractor(text=texts[j], origin=origins[j]) for j in state.shown[i][1:])
    options = tuple(texts[j] for j in state.shown[i])
    return q.model_copy(
        update={"options": options, "gold_index": 0, "distractors": distractors, "reserve": ()}
    )


def blocks_of(questions: Sequence[Question], seed: int, size: int) -> list[list[Question]]:
    """`questions` (one task's) dealt into blocks of at most `size`, as even as can be, in an order
    drawn from `seed` (each block sorted by item id); a task of at most `size` items is one block."""
    parts = deal_blocks([q.item_id for q in questions], seed, size, salt="af-block")
    return [[questions[i] for i in part] for part in parts]


def merge_stats(parts: Sequence[TaskFilter]) -> TaskFilter:
    """One task's stats from its blocks' (rule accuracies weighted by items: before by the items
    filtered, after by the items kept)."""
    if len(parts) == 1:
        return parts[0]

    def mean(key: str, weights: list[int]) -> dict[str, float]:
        total = sum(weights)
        names = sorted({name for p in parts for name in getattr(p, key)})
        return (
            {
                name: sum(w * getattr(p, key).get(name, 0.0) for p, w in zip(parts, weights, strict=True))
                / total
                for name in names
            }
            if total
            else {}
        )

    return TaskFilter(
        items=sum(p.items for p in parts),
        candidates_scored=sum(p.candidates_scored for p in parts),
        replaced=sum(p.replaced for p in parts),
        dropped=sum(p.dropped for p in parts),
        rounds=max(p.rounds for p in parts),
        left_to_gates=sum(p.left_to_gates for p in parts),
        before=mean("before", [p.items - p.left_to_gates for p in parts]),
        after=mean("after", [p.items - p.left_to_gates - p.dropped for p in parts]),
    )


def _by_task(
    questions: Iterable[Question],
) -> tuple[dict[tuple[str, str], list[Question]], list[str | Question]]:
    """The MCQ questions per (scenario, task), and the input order: an MCQ question's id (its
    output is looked up by it) or the (completion) question itself."""
    groups: dict[tuple[str, str], list[Question]] = defaultdict(list)
    order: list[str | Question] = []
    for q in questions:
        if q.form == "mcq" and q.options:
            groups[(q.scenario, q.task)].append(q)
            order.append(q.item_id)
        else:
            order.append(q)
    return groups, order


def adversarial_filter(
    questions: Sequence[Question],
    seed: int,
    settings: Settings | None = None,
    bounds: Mapping[str, Bounds] | None = None,
    *,
    consume: bool = False,
) -> tuple[list[Question], list[Problem], dict[str, AdversarialTask]]:
    """Filter every task's MCQ questions; completion questions pass unchanged. Returns questions in
    input order (dropped ones left out), the drops as Problems and per-task stats.

    `consume=True` takes the list over: it is emptied once read, and each block's questions (with
    their reserve candidates) go as soon as the block is filtered, so the filter holds about one copy
    of the task's questions at a time instead of its input and its output at once.
    """
    settings = settings or Settings()
    groups, order = _by_task(questions)
    if consume:
        assert isinstance(questions, list), "consume=True takes a list over"
        questions.clear()
    done: dict[str, Question] = {}
    problems: list[Problem] = []
    stats: dict[str, AdversarialTask] = {}
    for key in sorted(groups):
        group = sorted(groups.pop(key), key=lambda q: q.item_id)
        task = key[1]
        if not any(q.reserve for q in group):
            for q in group:
                done[q.item_id] = q
            stats[task] = AdversarialTask(items=len(group))
            continue
        parts = []
        blocks = blocks_of(group, seed, settings.block)
        del group
        blocks.reverse()
        while blocks:  # popped as filtered: a block's input goes once its output is made
            block = blocks.pop()
            kept, dropped, st = filter_task(block, seed, settings, (bounds or {}).get(task))
            del block
            done.update((q.item_id, q) for q in kept)
            problems += dropped
            parts.append(st)
        stats[task] = merge_stats(parts).report()
    out = []
    for entry in order:
        if not isinstance(entry, str):
            out.append(entry)
        elif entry in done:
            out.append(done[entry])
    return out, problems, stats


__all__ = [
    "RULES",
    "VERSION",
    "Settings",
    "TaskFilter",
    "adversarial_filter",
    "blocks_of",
    "filter_task",
    "merge_stats",
]
