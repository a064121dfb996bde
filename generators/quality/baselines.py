"""Model-free baselines: how well a task can be answered without reading the question.

A benchmark whose gold can be found from the options alone measures nothing (APTBench's own
env_setup/error: picking the option most similar to the others scores 92% against 17% chance).
For each task this module scores five rules that never see the context, the chance level, a
bound per rule (config; default chance + 10 points once a task has `min_items` items, wider
below that by the binomial noise of a small sample) and the chi-square of the gold positions.

Rules, each scored per item with fractional credit on ties (1/k when the gold is among k tied):
- `longest` / `shortest`: the option with the most / fewest characters;
- `central`: the option with the highest mean similarity to the other options. Similarity is
  rapidfuzz's normalised Indel similarity (`fuzz.ratio`: 2 x LCS / total length) over the
  *tokens* of the `normalise`d text (words; each CJK character is a token). Token LCS is
  bit-parallel in C, over 100x faster than difflib on long options (`bench/bench_centrality.py`),
  and a sharper detector: on APTBench's data it finds the gold 94.6% on env_setup/error, 44.9% on
  locate and 46.0% on DR plan_zh (difflib: 92.0 / 42.1 / 28.3%, APTBENCH.md §8), because a
  character LCS is high between any two texts over the same small alphabet;
- `outlier`: the option with the lowest such similarity (the one that differs most from the rest);
- `position`: answer the most frequent gold position of the task's other items (leave-one-out, so
  a lone item or a perfectly balanced task cannot make it look better than it is);
- `no_context`: an option-only naive Bayes, cross-validated in `folds` folds assigned by a hash
  of the item's options (deterministic, the same in a build and in an audit): words, CJK character bigrams and shape features (trailing spaces, bold
  markers, length and centrality rank, line count rank) of each option, learned as gold-vs-
  distractor log-odds on the other folds; it picks the option with the highest score. It finds
  any option-only tell a generator leaves, not just length or similarity.

Then the rules of `generators.quality.scorers` (issue 22), which also read the context: TF-IDF
similarity of option and context (most and least similar), option-only and context+option
cross-validated logistic regressions, character-level centrality, and structural rules.
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import NamedTuple

import numpy as np

from generators.quality.scorers import SUITE, Item, SuiteFeatures, TaskGrams, forget_texts, suite_scores
from generators.text import normalise, ratio_matrix
from schemas import LETTERS, content_id

OPTION_RULES = ("longest", "shortest", "central", "outlier", "position", "no_context")
BASELINES = (*OPTION_RULES, *SUITE)
"""Every baseline, in report order: the option-only rules above, then the suite of `quality.scorers`."""


class Mcq(NamedTuple):
    """One multiple-choice item as the baselines see it: no context."""

    where: str
    """Item id or `file:line`."""
    options: tuple[str, ...]
    """Options in display order."""
    gold_index: int
    """Position of the gold."""
    context: str = ""
    """Everything the question shows besides the options (the context-aware rules read it)."""


class Bounds(NamedTuple):
    """How far above chance a baseline may go before its task is flagged."""

    margin: float = 0.10
    """Allowed accuracy above chance (0.10 = 10 points)."""
    min_items: int = 100
    """From this many items on, the bound is exactly chance + margin."""
    z: float = 2.326
    """Below `min_items`: the margin widens to z standard errors of chance accuracy (one-sided 99%)."""
    fixed: Mapping[str, float] = {}
    """Explicit bounds (absolute accuracy) per baseline name, overriding the rule above."""


class PositionTest(NamedTuple):
    """Chi-square test of gold positions against uniform, summed over option-count groups."""

    statistic: float
    dof: int
    p_value: float


@dataclass(frozen=True)
class TaskBaselines:
    """The baseline audit of one task."""

    n_items: int
    option_counts: dict[int, int]
    chance: float
    accuracy: dict[str, float]
    bounds: dict[str, float]
    exceeded: list[str]
    positions: dict[str, int]
    position_test: PositionTest
    scores: dict[str, list[float]] = field(default_factory=dict, repr=False)

    def why(self) -> str:
        """Why the task is flagged: each exceeded baseline against its bound ('' when none is)."""
        return "; ".join(
            f"{b} {self.accuracy[b]:.1%} > bound {self.bounds[b]:.1%} (chance {self.chance:.1%})"
            for b in self.exceeded
        )

    def as_dict(self) -> dict[str, object]:
        """JSON-ready summary: `baselines` holds each baseline's accuracy (per-item scores left out)."""
        return {
            "n_items": self.n_items,
            "option_counts": {str(k): v for k, v in sorted(self.option_counts.items())},
            "chance": round(self.chance, 4),
            "baselines": {k: round(v, 4) for k, v in self.accuracy.items()},
            "bounds": {k: round(v, 4) for k, v in self.bounds.items()},
            "exceeded": list(self.exceeded),
            "positions": dict(self.positions),
            "position_chi2": round(self.position_test.statistic, 4),
            "position_dof": self.position_test.dof,
            "position_p": round(self.position_test.p_value, 6),
        }


def credit(scores: Sequence[float], gold: int) -> float:
    """Accuracy of picking the top score, ties broken at random: 1/k if the gold is among k tied."""
    top = max(scores)
    tied = [i for i, s in enumerate(scores) if s == top]
    return 1.0 / len(tied) if gold in tied else 0.0


_TOKEN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]|[^\W\u3400-\u9fff\uf900-\ufaff]+")


def option_tokens(text: str) -> list[str]:
    """Tokens of the normalised text: words, and each CJK character on its own."""
    return _TOKEN.findall(normalise(text))


def similarity_matrix(options: Sequence[str]) -> list[list[float]]:
    """Pairwise normalised token-level Indel similarity in [0, 1] of the options."""
    return token_similarity([option_tokens(o) for o in options])


def token_similarity(texts: Sequence[Sequence[str]]) -> list[list[float]]:
    """`similarity_matrix` of texts already split by `option_tokens`."""
    return (ratio_matrix(texts).astype(np.float64) / 100.0).tolist()  # each value as float(x) / 100.0


def centrality(options: Sequence[str]) -> list[float]:
    """Each option's mean similarity to the other options."""
    sims = similarity_matrix(options)
    n = len(options)
    return [(sum(row) - row[i]) / (n - 1) if n > 1 else 0.0 for i, row in enumerate(sims)]


_WORD = re.compile(r"[a-z0-9_]{2,}")
_CJK_RUN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]+")
_TRAILING_WS = re.compile(r"[ \t]+(?:\n|$)")


def _rank_tag(values: Sequence[float], i: int) -> str:
    if values[i] == max(values) and values.count(values[i]) == 1:
        return "top"
    if values[i] == min(values) and values.count(values[i]) == 1:
        return "bottom"
    return "mid"


def text_features(opt: str) -> set[str]:
    """The option-only features of one text that do not depend on the other options (words, CJK bigrams, shape)."""
    f = {f"w:{w}" for w in _WORD.findall(opt.lower())}
    for run in _CJK_RUN.findall(opt):
        f.update(f"c:{run[j : j + 2]}" for j in range(max(1, len(run) - 1)))
    if _TRAILING_WS.search(opt):
        f.add("shape:trailing_space")
    if "**" in opt:
        f.add("shape:bold")
    if opt.startswith(("\n", " ")):
        f.add("shape:leading_space")
    return f


RANK_DIMENSIONS = ("len", "sim", "lines")
RANK_TAGS = ("top", "bottom", "mid")


def option_features(options: Sequence[str], central: Sequence[float]) -> list[frozenset[str]]:
    """Option-only features of every option of one item (words, CJK bigrams, shape, length/centrality/line ranks)."""
    lengths = [float(len(o)) for o in options]
    lines = [float(o.count("\n")) for o in options]
    # to 9 places, as `central` scores them: two options equally central are tied, whatever the
    # order their similarities were summed in (an unrounded mean tells them apart by 1e-16)
    sims = [round(c, 9) for c in central]
    feats = []
    for i, opt in enumerate(options):
        f = text_features(opt)
        f.add(f"len:{_rank_tag(lengths, i)}")
        f.add(f"sim:{_rank_tag(sims, i)}")
        f.add(f"lines:{_rank_tag(lines, i)}")
        feats.append(frozenset(f))
    return feats


def fold_by_content(options: Sequence[str], folds: int) -> int:
    # By content, not by location: the same item falls in the same fold in a build and in an audit
    # of its Parquet, and duplicated items never sit on both sides of a split.
    return int(content_id("fold", sorted(options)), 16) % folds


def no_context_weights(
    feats: Sequence[Sequence[frozenset[str]]], golds: Sequence[int], fold_of: Sequence[int], folds: int
) -> list[Callable[[str], float]]:
    """Per fold, the naive Bayes gold-vs-distractor log-odds of a feature, learned on the other folds."""
    gold_n: list[Counter[str]] = [Counter() for _ in range(folds)]
    dis_n: list[Counter[str]] = [Counter() for _ in range(folds)]
    n_gold, n_dis = [0] * folds, [0] * folds
    for fs, gold, f in zip(feats, golds, fold_of, strict=True):
        for i, feat in enumerate(fs):
            if i == gold:
                gold_n[f].update(feat)
                n_gold[f] += 1
            else:
                dis_n[f].update(feat)
                n_dis[f] += 1
    tot_g, tot_d = sum(gold_n, Counter()), sum(dis_n, Counter())

    def weight_of(f: int) -> Callable[[str], float]:
        g_all, d_all = sum(n_gold) - n_gold[f], sum(n_dis) - n_dis[f]
        cache: dict[str, float] = {}

        def weight(x: str) -> float:
            if x not in cache:
                g = tot_g[x] - gold_n[f][x]
                d = tot_d[x] - dis_n[f][x]
                pg, pd = (g + 1) / (g_all + 2), (d + 1) / (d_all + 2)
                cache[x] = math.log(pg / pd) - math.log((1 - pg) / (1 - pd))
            return cache[x]

        return weight

    return [weight_of(f) for f in range(folds)]


#: Cross-validation folds of the audit's learned rules (`no_context`, and the suite's via `task_baselines`).
FOLDS = 5


def no_context_scores(
    items: Sequence[Mcq], feats: Sequence[list[frozenset[str]]], folds: int = FOLDS
) -> list[float]:
    """Cross-validated option-only naive Bayes: per-item credit of its pick."""
    k = max(2, min(folds, len(items)))
    fold_of = [fold_by_content(it.options, k) for it in items]
    weights = no_context_weights(feats, [it.gold_index for it in items], fold_of, k)
    out = []
    for it, fs, f in zip(items, feats, fold_of, strict=True):
        w = weights[f]
        scores = [round(sum(w(x) for x in feat), 9) for feat in fs]
        out.append(credit(scores, it.gold_index))
    return out


def position_scores(items: Sequence[Mcq], positions: Counter[int]) -> list[float]:
    """Leave-one-out "answer the most frequent gold position": each item's credit when the modal
    position of the *other* items is answered (ties share the credit; a lone item gets chance)."""
    out = []
    for it in items:
        positions[it.gold_index] -= 1
        top = max(positions.values())
        modal = [p for p, c in positions.items() if c == top and c > 0]
        out.append((1.0 / len(modal) if it.gold_index in modal else 0.0) if modal else 1.0 / len(it.options))
        positions[it.gold_index] += 1
    return out


def chi2_sf(x: float, dof: int) -> float:
    """Survival function of the chi-square distribution (closed form for integer dof)."""
    if dof <= 0:
        return 1.0
    if x <= 0:
        return 1.0
    h = x / 2.0
    if dof % 2 == 0:
        term, total = 1.0, 1.0
        for i in range(1, dof // 2):
            term *= h / i
            total += term
        return min(1.0, math.exp(-h) * total)
    total = math.erfc(math.sqrt(h))
    term = math.sqrt(h) / math.gamma(1.5)
    for i in range(1, (dof + 1) // 2):
        total += math.exp(-h) * term
        term *= h / (i + 0.5)
    return min(1.0, max(0.0, total))


def position_test(items: Sequence[Mcq]) -> PositionTest:
    """Chi-square of gold positions against uniform, per option count, summed."""
    groups: dict[int, Counter[int]] = defaultdict(Counter)
    for it in items:
        groups[len(it.options)][it.gold_index] += 1
    stat, dof = 0.0, 0
    for n, counts in groups.items():
        total = sum(counts.values())
        expected = total / n
        stat += sum((counts.get(i, 0) - expected) ** 2 / expected for i in range(n))
        dof += n - 1
    return PositionTest(stat, dof, chi2_sf(stat, dof))


def bound_for(name: str, chance: float, variance: float, n: int, bounds: Bounds) -> float:
    """Highest accuracy baseline `name` may reach on a task (see the module docstring)."""
    if name in bounds.fixed:
        return float(bounds.fixed[name])
    margin = bounds.margin
    if 0 < n < bounds.min_items:
        margin = max(margin, bounds.z * math.sqrt(variance) / n)
    return min(1.0, chance + margin)


#: A task of more items is measured in seeded blocks of about this many (`deal_blocks`): the learned
#: and lexical rules are fitted within a block, so memory is bounded by a block, not by the task.
BLOCK = 1000


def deal_blocks(keys: Sequence[str], seed: object, size: int | None, salt: str = "block") -> list[list[int]]:
    """Indexes of `keys` dealt into blocks of at most `size`, as even as can be, in an order drawn
    from `seed` and `salt` (each block in key order); at most `size` keys (or no `size`) are one
    block, in their own order."""
    if size is None or len(keys) <= size:
        return [list(range(len(keys)))]
    n = -(-len(keys) // size)
    order = sorted(range(len(keys)), key=lambda i: content_id(seed, salt, keys[i]))
    return [sorted(order[b::n], key=keys.__getitem__) for b in range(n)]


@lru_cache(maxsize=64)
def _blank(n: int) -> tuple[str, ...]:
    """`n` empty options: an item's shape without its texts (one tuple per option count)."""
    return ("",) * n


def task_baselines(
    items: Sequence[Mcq],
    bounds: Bounds | None = None,
    folds: int = FOLDS,
    counted: TaskGrams | None = None,
    features: SuiteFeatures | None = None,
    block: int | None = BLOCK,
) -> TaskBaselines:
    """Every baseline, its bound and the position statistic of one task's valid MCQ items.

    `counted`: the items' gram counts (`scorers.task_grams` of their options and contexts) when the
    caller has them already (adversarial filtering), so no text is analysed twice; `features`: their
    `scorers.suite_features` (adversarial filtering's, whose vectorisers also saw the reserve).
    `block`: a task of more items is measured in blocks of about this many, dealt by the items'
    `where` (`deal_blocks`): the rules that learn or weigh n-grams by the task's texts (`no_context`
    and the suite of `quality.scorers`) are fitted within each block; the rules of one item
    (`longest`, `central`...), `position` and the accuracies are over the whole task. None: one block.
    """
    bounds = bounds or Bounds()
    # one pass in order over `items` (a list, or a `Shelf` on disk): the per-item rules and what the
    # task-wide ones need (where, number of options, gold); the items are read again only block by
    # block for the learned rules, so a shelved task is held one block at a time
    index: list[int] = []  # of the valid items
    light: list[Mcq] = []  # per valid item: its `where`, blank options and gold position
    centralities: list[list[float]] = []
    scores: dict[str, list[float]] = {name: [] for name in BASELINES}
    for k, it in enumerate(items):
        if not (len(it.options) >= 2 and 0 <= it.gold_index < len(it.options)):
            continue
        index.append(k)
        light.append(Mcq(it.where, _blank(len(it.options)), it.gold_index))
        lengths = [float(len(o)) for o in it.options]
        central = centrality(it.options)
        scores["longest"].append(credit(lengths, it.gold_index))
        scores["shortest"].append(credit([-x for x in lengths], it.gold_index))
        scores["central"].append(credit([round(c, 9) for c in central], it.gold_index))
        scores["outlier"].append(credit([-round(c, 9) for c in central], it.gold_index))
        centralities.append(central)
    parts = deal_blocks([it.where for it in light], "audit", block)
    whole = len(light) == len(items) and len(parts) == 1
    counted = counted if whole else None
    features = features if whole else None
    n = len(light)
    positions = Counter(it.gold_index for it in light)
    scores["position"] = position_scores(light, positions)
    learned: dict[str, list[float]] = {name: [0.0] * n for name in ("no_context", *SUITE)}
    for part in parts if n else []:
        sub = [items[index[i]] for i in part]
        if len(sub) >= 2:
            feats = [option_features(it.options, centralities[i]) for i, it in zip(part, sub, strict=True)]
            for i, value in zip(part, no_context_scores(sub, feats, folds), strict=True):
                learned["no_context"][i] = value
        views = [
            Item(it.where, it.options, tuple(range(len(it.options))), it.gold_index, it.context) for it in sub
        ]
        del sub
        for i, per_item in zip(part, suite_scores(views, folds, counted, features), strict=True):
            for name, values in per_item.items():
                learned[name][i] = credit(values, light[i].gold_index)
        if len(parts) > 1:
            forget_texts()  # the next block shows other texts
    scores.update(learned)
    chance = sum(1 / len(it.options) for it in light) / n if n else 0.0
    variance = sum((1 / len(it.options)) * (1 - 1 / len(it.options)) for it in light)
    accuracy = {name: (sum(s) / n if n else 0.0) for name, s in scores.items()}
    limits = {name: bound_for(name, chance, variance, n, bounds) for name in BASELINES}
    exceeded = [name for name in BASELINES if n and accuracy[name] > limits[name] + 1e-12]
    return TaskBaselines(
        n_items=n,
        option_counts=dict(Counter(len(it.options) for it in light)),
        chance=chance,
        accuracy=accuracy,
        bounds=limits,
        exceeded=exceeded,
        positions={LETTERS[p]: c for p, c in sorted(positions.items())},
        position_test=position_test(light),
        scores=scores,
    )
