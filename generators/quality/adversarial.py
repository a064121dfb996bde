"""Adversarial filtering: keep the distractors the baseline suite cannot tell from the gold.

The idea of SWAG/HellaSwag's adversarial filtering and of WinoGrande's AFLite, at build time and
for our cheap scorers: generators propose more candidates than an item shows (`Question.reserve`);
for a few seeded rounds, the learned scorers are refitted on the current items (cross-fitted on
folds that change every round, so an item is always scored by models that never saw it), every
rule of the suite scores every candidate, and in each item that a rule still answers correctly
a distractor is swapped for the reserve candidate that makes the item hardest: the one that
lowers the number of rules picking the gold the most. Only rules whose task accuracy is above
their target (chance + `slack`) count in full, and a rule leaves that set as soon as it reaches
it, so filtering stops at chance instead of turning a tell around (gold never the longest is a
tell too); rules at target still weigh a little, so a swap does not feed one rule to starve
another. After the rounds, rules still over their bound lose the items they solve, most-solved
first, until they are back at target (AFLite's removal of predictable instances), at most
`max_drop` of the task; those items become `too_easy` Problems. Then `reserve` is cleared.

Deterministic: items are visited in an order seeded by `seed`, round and item id; ties between
swaps go to the candidate the generator preferred (reserve order); the learned scorers use
seeded SGD.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

import numpy as np

from generators.quality.baselines import (
    RANK_DIMENSIONS,
    RANK_TAGS,
    Bounds,
    Mcq,
    TaskBaselines,
    bound_for,
    no_context_weights,
    option_features,
    similarity_matrix,
    task_baselines,
    text_features,
)
from generators.quality.gates import context_text
from generators.quality.scorers import SUITE, Item, ItemView, SuiteFeatures, item_views, suite_features
from schemas import Distractor, Problem, Question, content_id
from schemas.tasks import find_spec
from schemas.validity import AdversarialTask

OPTION_ONLY = ("longest", "shortest", "central", "outlier", "no_context")
RULES = (*OPTION_ONLY, *SUITE)
"""The rules filtering works against (`position` is left to balancing)."""


class Settings(NamedTuple):
    """Knobs of the filter."""

    rounds: int = 3
    """Refit-and-replace rounds."""
    folds: int = 5
    """Cross-fitting folds of the learned scorers."""
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
    max_drop: float = 0.3
    """Never drop more than this share of a task: a task the reserve cannot fix stays flagged (and
    publish refuses it) rather than silently shrinking to nothing."""


class TaskFilter(NamedTuple):
    """What filtering did to one task."""

    items: int
    candidates_scored: int
    replaced: int
    dropped: int
    rounds: int
    before: dict[str, float]
    """Each rule's accuracy before any swap, as the filter scores it (vectorisers fitted with the reserve)."""
    after: dict[str, float]
    """... and on the kept items, as the audit scores them (fitted on the shown options only)."""

    def report(self) -> AdversarialTask:
        """The report's entry of the task."""
        return AdversarialTask(
            items=self.items,
            candidates_scored=self.candidates_scored,
            replaced=self.replaced,
            dropped=self.dropped,
            rounds=self.rounds,
            before={k: round(v, 4) for k, v in self.before.items()},
            after={k: round(v, 4) for k, v in self.after.items()},
        )


class _State:
    """One task's items during filtering: all texts, what is shown, and option-only precomputations."""

    def __init__(self, questions: Sequence[Question]) -> None:
        self.questions = list(questions)
        self.texts: list[tuple[str, ...]] = []
        self.origin: list[list[str]] = []
        self.shown: list[list[int]] = []
        self.tokens: list[np.ndarray] = []
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
            self.tokens.append(np.array(similarity_matrix(texts)))
        self.lengths = [np.array([float(len(t)) for t in texts]) for texts in self.texts]
        self.contexts = [context_text(q.fields, find_spec(q.scenario, q.task)) for q in self.questions]

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


def _nb_weights(state: _State, seed: object, folds: int) -> tuple[list[Callable[[str], float]], list[int]]:
    """`no_context` refitted on the items as they are now, on folds of this round."""
    feats = []
    for i, shown in enumerate(state.shown):
        opts = [state.texts[i][j] for j in shown]
        feats.append(option_features(opts, _mean_others(state.tokens[i], shown)))
    k = max(2, min(folds, len(feats)))
    fold = [int(content_id("nb-fold", seed, q.item_id), 16) % k for q in state.questions]
    return no_context_weights(feats, [0] * len(feats), fold, k), fold


def _mean_others(sims: np.ndarray, shown: Sequence[int]) -> list[float]:
    sub = sims[np.ix_(shown, shown)]
    n = len(shown)
    return [float((sub[i].sum() - sub[i, i]) / (n - 1)) if n > 1 else 0.0 for i in range(n)]


def _item_scores(
    state: _State, i: int, view: ItemView, codes: dict[tuple[object, ...], int], nb: Callable[[str], float]
) -> _Scores:
    lengths = state.lengths[i]
    cols = [lengths, -lengths]
    for key in ("word_tail", "word_full", "char_tail", "char_full"):
        cols += [view.lexical[key], -view.lexical[key]]
    cols += [view.learned["option_lr"], view.learned["context_lr"], view.learned["structure_lr"]]
    sig = np.array([codes.setdefault(s, len(codes)) if s else -1 for s in view.signatures])
    nb_text = np.array([sum(nb(x) for x in text_features(t)) for t in state.texts[i]])
    nb_rank = np.array([[nb(f"{dim}:{tag}") for tag in RANK_TAGS] for dim in RANK_DIMENSIONS])
    lines = np.array([float(t.count("\n")) for t in state.texts[i]])
    return _Scores(np.column_stack(cols), state.tokens[i], view.chars, sig, nb_text, nb_rank, lines)


def _rank_tags(values: np.ndarray) -> np.ndarray:
    """Per trial and option: 0 unique max (top), 1 unique min (bottom), 2 otherwise (as `baselines._rank_tag`)."""
    top = np.isclose(values, values.max(axis=1, keepdims=True), rtol=0, atol=1e-12)
    bottom = np.isclose(values, values.min(axis=1, keepdims=True), rtol=0, atol=1e-12)
    tags = np.full(values.shape, 2)
    tags[bottom & (bottom.sum(axis=1, keepdims=True) == 1)] = 1
    tags[top & (top.sum(axis=1, keepdims=True) == 1)] = 0
    return tags


def _credit(values: np.ndarray) -> np.ndarray:
    """values: trials x k x rules; the gold is position 0. Credit of the argmax rule, ties shared."""
    top = values.max(axis=1, keepdims=True)
    at_top = np.isclose(values, top, rtol=0, atol=1e-9)
    return np.where(at_top[:, 0, :], 1.0 / at_top.sum(axis=1), 0.0)


def trial_credits(sc: _Scores, trials: np.ndarray) -> np.ndarray:
    """Credit of every rule (columns in `_ORDER`) for every trial option set (rows of text indices)."""
    k = trials.shape[1]
    ind = sc.independent[trials]  # m x k x r
    parts = [ind]
    for sims in (sc.tokens, sc.chars):
        sub = sims[trials[:, :, None], trials[:, None, :]]
        mean = ((sub.sum(axis=2) - sub[:, np.arange(k), np.arange(k)]) / max(1, k - 1)).round(9)
        parts += [mean[:, :, None], -mean[:, :, None]]
    sig = sc.signature[trials]
    counts = (sig[:, :, None] == sig[:, None, :]).sum(axis=2).astype(float)
    has = (sig >= 0).any(axis=1, keepdims=True)
    counts = np.where(has, counts, 0.0)
    parts += [-counts[:, :, None], counts[:, :, None]]
    nb = sc.nb_text[trials].copy()
    token_mean = parts[1][:, :, 0]
    for d, values in enumerate((sc.independent[trials][:, :, 0], token_mean, sc.lines[trials])):
        nb += sc.nb_rank[d][_rank_tags(values)]
    parts.append(nb.round(9)[:, :, None])
    return _credit(np.concatenate(parts, axis=2))  # columns in `_ORDER`


def _measure(state: _State, bounds: Bounds) -> TaskBaselines:
    """The baselines as the audit measures the items: their shown options only, the audit's folds."""
    return task_baselines(
        [
            Mcq(q.item_id, tuple(state.texts[i][j] for j in state.shown[i]), 0, state.contexts[i])
            for i, q in enumerate(state.questions)
        ],
        bounds,
    )


def _band_cost(acc: np.ndarray, lo: float, hi: float) -> float:
    return float(np.clip(acc - hi, 0, None).sum() + np.clip(lo - acc, 0, None).sum())


def filter_task(
    questions: Sequence[Question], seed: int, settings: Settings | None = None, bounds: Bounds | None = None
) -> tuple[list[Question], list[Problem], TaskFilter]:
    """Filter one task's MCQ questions (see the module docstring); returns kept questions, drops and stats."""
    settings = settings or Settings()
    bounds = bounds or Bounds()
    state = _State(questions)
    n = len(state.questions)
    before: dict[str, float] = {}
    chance = sum(1 / len(s) for s in state.shown) / n if n else 0.0
    variance = sum((1 / len(s)) * (1 - 1 / len(s)) for s in state.shown)
    hi, lo = chance + settings.slack, chance - settings.slack
    scored = replaced = 0
    done_rounds = 0
    credits = np.zeros((n, len(_ORDER)))
    views: list[ItemView] = []
    features: SuiteFeatures | None = None
    for rnd in range(settings.rounds):
        salt: object = (seed, rnd)
        features = features or suite_features(state.items())
        views = item_views(state.items(), settings.folds, salt=salt, features=features)
        codes: dict[tuple[object, ...], int] = {}
        nb, nb_fold = _nb_weights(state, salt, settings.folds)
        scores = [_item_scores(state, i, views[i], codes, nb[nb_fold[i]]) for i in range(n)]
        credits = (
            np.vstack([trial_credits(scores[i], np.array([state.shown[i]]))[0] for i in range(n)])
            if n
            else credits
        )
        acc = credits.mean(axis=0) if n else np.zeros(len(_ORDER))
        if rnd == 0 and n:  # as the filter scores them (its vectorisers also see the reserve)
            before = {name: float(acc[_COLUMN[name]]) for name in RULES}
        if _band_cost(acc, lo, hi) == 0:
            break
        done_rounds += 1
        order = sorted(range(n), key=lambda i: content_id(seed, "af", rnd, state.questions[i].item_id))
        for i in order:
            for _ in range(settings.swaps_per_item):
                shown = state.shown[i]
                spare = [j for j in range(1, len(state.texts[i])) if j not in shown]
                trials = []
                for slot in range(1, len(shown)):
                    others = [j for x, j in enumerate(shown) if x != slot]
                    for j in spare:
                        if views[i].chars[j, others].max() < settings.near_duplicate:
                            trials.append([*shown[:slot], j, *shown[slot + 1 :]])
                if not trials:
                    break
                got = trial_credits(scores[i], np.array(trials))
                scored += len(trials)
                costs = [_band_cost(acc + (g - credits[i]) / n, lo, hi) for g in got]
                best = int(np.argmin(costs))
                if costs[best] >= _band_cost(acc, lo, hi) - 1e-12:
                    break
                state.shown[i] = trials[best]
                replaced += 1
                acc = acc + (got[best] - credits[i]) / n
                credits[i] = got[best]
    kept = list(range(n))
    problems: list[Problem] = []
    if n:
        final = _measure(state, bounds)
        per_item = [{name: final.scores[name][i] for name in RULES} for i in range(n)]
        after = {name: final.accuracy[name] for name in RULES}
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
    stats = TaskFilter(n, scored, replaced, n - len(kept), done_rounds, before, after)
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


def adversarial_filter(
    questions: Sequence[Question],
    seed: int,
    settings: Settings | None = None,
    bounds: Mapping[str, Bounds] | None = None,
) -> tuple[list[Question], list[Problem], dict[str, AdversarialTask]]:
    """Filter every task's MCQ questions; completion questions pass unchanged. Returns questions in
    input order (dropped ones left out), the drops as Problems and per-task stats."""
    settings = settings or Settings()
    groups: dict[tuple[str, str], list[Question]] = defaultdict(list)
    for q in questions:
        if q.form == "mcq" and q.options:
            groups[(q.scenario, q.task)].append(q)
    done: dict[str, Question] = {}
    problems: list[Problem] = []
    stats: dict[str, AdversarialTask] = {}
    for (_, task), group in sorted(groups.items()):
        group = sorted(group, key=lambda q: q.item_id)
        if not any(q.reserve for q in group):
            for q in group:
                done[q.item_id] = q
            stats[task] = AdversarialTask(items=len(group))
            continue
        kept, dropped, st = filter_task(group, seed, settings, (bounds or {}).get(task))
        done.update((q.item_id, q) for q in kept)
        problems += dropped
        stats[task] = st.report()
    out = []
    for q in questions:
        if q.form == "mcq" and q.options:
            if q.item_id in done:
                out.append(done[q.item_id])
        else:
            out.append(q)
    return out, problems, stats


__all__ = ["RULES", "Settings", "TaskFilter", "adversarial_filter", "filter_task"]
