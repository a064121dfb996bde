"""Offline distractors: the scenario's own wrong options, then other runs' golds found by an index. The default.

For each gold step the candidates are, in order of preference:
1. the step's own candidates (`GoldStep.candidates`: failed runs of the same instance, rule-made
   wrong steps from this run's context), in the scenario's order;
2. gold answers of OTHER runs retrieved by similarity to this gold from a MinHash LSH Forest
   built once per task pool (datasketch's signatures and forest, held in arrays: `LshForest`,
   the same answers as its `MinHashLSHForest`): first among runs of the same family (repository: the
   group id without its trailing `-<number>`, e.g. `django__django`), then the whole pool. Never a
   step of the same run, never a run of the same group (instance), which may share the answer;
   never an all-pairs scan: a family or pool of at most `exact_below` entries is ranked exactly.
   Only entries marked `retrievable` are drawn (a task whose spec says another run's gold is never
   a valid wrong option marks none: its distractors and reserve come from its own candidates alone);
   every entry counts in the rank plan. A task may cap them per item (`TaskSpec.other_runs_per_item`:
   distractors and reserve together, so adversarial filtering cannot swap in more; a step with fewer
   own candidates than the options need minus the cap yields no item) and exclude some by pattern
   (`TaskSpec.other_runs_never`; `TaskSpec.other_runs_not_beside` where the gold matches it too).
   Code answers (patches, scripts, code windows) are never drawn from other runs at all: another
   instance's code is trivially wrong, so their distractors come from the scenario alone;
   a larger one only through the index, so each step costs the same whatever the pool size.
Candidates equal or near-equal to the gold or to an option already taken are refused (prose:
normalised similarity >= `near_duplicate`; code: the same tokens, `text.option_key`). The question
gets `n - 1` distractors and up to `reserve_factor` x as many further candidates in
`Question.reserve`, in preference order, for the adversarial filter.

Option-only rules must stay at chance (issue 5), so for every item `rank_plan` sets, from the
whole task's pool and the seed, how many distractors are longer than the gold and how many are
more central (mean similarity to the other options), spreading both evenly over 0..n-1 across
the task. The distractors are then drawn on each side of the gold's length (candidates within 3x
its length first; the most similar by token overlap leading, the rest a seeded shuffle of the
`spread` next most similar); of `attempts` such draws, half gathered around another anchor
candidate rather than the gold, the one whose gold centrality rank is nearest its target wins.
When the step's own candidates suffice, the distractors are the combination of its first
`own_window` candidates whose length, centrality and context-closeness ranks (word-count cosine
of option and context, its end and the whole) come nearest those targets, also spread evenly
over 0..n-1 by `rank_plan` (earlier candidates win ties). Too few candidates yields a `too_few_distractors` Problem.
"""

from __future__ import annotations

import math
import random
import re
import threading
import zlib
from bisect import bisect_right
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from functools import lru_cache
from itertools import combinations
from typing import NamedTuple

import numpy as np
from rapidfuzz import fuzz

from generators.base import PoolEntry, completion_question, posed
from generators.quality.baselines import option_tokens, similarity_matrix, token_similarity
from generators.quality.gates import context_text
from generators.text import (
    jaccard,
    looks_like_code,
    normalise,
    normalised_similarity,
    option_key,
    ratio_matrix,
    tokens,
)
from schemas import Candidate, Distractor, GoldStep, Problem, Question, content_id
from schemas.tasks import UnknownTask, task_spec


class RankPlan(NamedTuple):
    """Per gold step: how many distractors are longer than the gold, more central, closer to the context."""

    longer: dict[str, int]
    central: dict[str, int]
    closer: dict[str, int]


def _feasible(lengths: Sequence[int], size: int, need: int) -> tuple[int, int]:
    """Fewest and most longer distractors a gold of `size` chars can get (`lengths`: distinct texts)."""
    longer = len(lengths) - bisect_right(lengths, size)
    shorter = len(lengths) - longer - 1  # the gold's own text is one of the distinct texts
    lo, hi = max(0, need - max(shorter, 0)), min(need, longer)
    return (lo, hi) if lo <= hi else (hi, hi)


def rank_plan(pool: Sequence[PoolEntry], need: int, seed: int) -> RankPlan:
    """Targets that make the gold's length rank and centrality rank uniform across the task.

    Stratified, not drawn: steps in a seeded order (those with the fewest feasible length ranks
    first, e.g. a gold among the pool's shortest texts, which is the shortest option whatever
    happens) each take the feasible rank used least so far, so every rank ends up equally often
    (+-1 where the pool allows). It depends on the whole pool only, so every shard agrees.
    """
    if need <= 0:
        return RankPlan({}, {}, {})
    lengths = sorted({e.text.strip(): len(e.text) for e in pool}.values())
    order = sorted(pool, key=lambda e: content_id(seed, "ranks", e.step_id))
    ranges = {e.step_id: _feasible(lengths, len(e.text), need) for e in order}
    longer: dict[str, int] = {}
    central: dict[str, int] = {}
    closer: dict[str, int] = {}
    used_long, used_central, used_closer = [0] * (need + 1), [0] * (need + 1), [0] * (need + 1)
    for e in sorted(order, key=lambda e: ranges[e.step_id][1] - ranges[e.step_id][0]):
        lo, hi = ranges[e.step_id]
        tie = random.Random(content_id(seed, "rank-ties", e.step_id))
        k = min(range(lo, hi + 1), key=lambda k: (used_long[k], tie.random()))
        c = min(range(need + 1), key=lambda k: (used_central[k], tie.random()))
        x = min(range(need + 1), key=lambda k: (used_closer[k], tie.random()))
        used_long[k] += 1
        used_central[c] += 1
        used_closer[x] += 1
        longer[e.step_id], central[e.step_id], closer[e.step_id] = k, c, x
    return RankPlan(longer, central, closer)


#: The end of the context a reader weighs most (what the model read last), in characters.
CONTEXT_TAIL = 2000


def _bag(text: str) -> Counter[str]:
    return Counter(_WORDS.findall(text.lower()))


def _cosine(a: Counter[str], b: Counter[str]) -> float:
    dot = sum(v * b[k] for k, v in a.items() if k in b)
    na, nb = math.sqrt(sum(v * v for v in a.values())), math.sqrt(sum(v * v for v in b.values()))
    return dot / (na * nb) if na and nb else 0.0


def closeness(options: Sequence[str], context: str) -> list[float]:
    """Each option's word-count cosine with the context's end and with the whole context (summed)."""
    tail, whole = _bag(context[-CONTEXT_TAIL:]), _bag(context)
    return [_cosine(bag, tail) + _cosine(bag, whole) for bag in map(_bag, options)]


def family(group: str) -> str:
    """The family a group belongs to: a SWE-bench instance id without its number (`django__django-11149` -> `django__django`)."""
    return re.sub(r"-\d+$", "", group)


_NUM_PERM = 32
_WORDS = re.compile(r"[a-z0-9_]{2,}")
#: Similarity from which a scenario's own candidate counts as a copy (the near-gold gate's threshold).
OWN_NEAR_DUPLICATE = 0.9


class PoolIndex:
    """One task pool, indexed once: token tuples, MinHash LSH Forests per family and overall, the rank plan.

    Memory is what bounds a task's pool (the generate stage holds the index of each MCQ task it
    generates): each entry's tokens are a sorted tuple of strings shared across the pool, and the
    forests are `LshForest`s (168 bytes per entry and forest); the MinHash signatures are
    datasketch's, dropped once the forests are built. The whole index holds 0.7-1.0 KB per entry,
    a quarter to a third of the 3.0-3.3 KB of frozensets and datasketch's `MinHashLSHForest`
    (`bench/bench_pool_index.py`, which also checks that both answer every query alike).
    """

    def __init__(self, pool: Sequence[PoolEntry], need: int, seed: int, exact_below: int) -> None:
        from datasketch import MinHash

        self.pool = pool
        shared: dict[str, str] = {}  # one string per distinct token of the pool
        self.tokens: list[tuple[str, ...]] = [
            tuple(sorted(shared.setdefault(t, t) for t in tokens(e.text))) for e in pool
        ]
        del shared
        self.lengths = [len(e.text) for e in pool]
        self.plan = rank_plan(pool, need, seed)
        self.exact_below = exact_below
        self.retrievable = any(e.retrievable for e in pool)
        self._perms = MinHash(num_perm=_NUM_PERM, seed=1, scheme="affine32").permutations
        self.families: dict[str, list[int]] = {}
        for i, e in enumerate(pool):
            self.families.setdefault(family(e.group), []).append(i)
        self.forests: dict[str, LshForest] = {}
        self.everything: LshForest | None = None
        big = [f for f, members in self.families.items() if len(members) > exact_below]
        if self.retrievable and (big or len(pool) > exact_below):
            signatures = self._signatures()
            for f in big:
                self.forests[f] = LshForest(self.families[f], signatures, _TREES)
            if len(pool) > exact_below:
                self.everything = LshForest(range(len(pool)), signatures, _TREES)

    def _signatures(self) -> np.ndarray:
        """Every entry's MinHash hash values (of its tokens, `_sketch`), a row each."""
        out = np.empty((len(self.tokens), _NUM_PERM), dtype=np.uint32)
        for i, toks in enumerate(self.tokens):
            out[i] = self._sketch(toks).hashvalues
        return out

    def _sketch(self, toks: Iterable[str]):
        from datasketch import MinHash

        mh = MinHash(
            num_perm=_NUM_PERM, seed=1, hashfunc=zlib.crc32, permutations=self._perms, scheme="affine32"
        )
        mh.update_batch([t.encode("utf-8") for t in sorted(toks)] or [b""])
        return mh

    def _ranked(self, members: Iterable[int], gold: frozenset[str]) -> list[int]:
        return sorted(members, key=lambda i: (-jaccard(gold, self.tokens[i]), self.pool[i].step_id))

    def query(self, step: GoldStep, k: int) -> list[int]:
        """Up to about `k` pool indexes for `step`, most similar first: its family, then the whole pool."""
        gold = tokens(step.gold)
        sig = None
        never = never_pooled(step)

        def ok(i: int) -> bool:
            e = self.pool[i]
            return (
                e.retrievable
                and not (never is not None and never.search(e.text))
                and e.trajectory_id != step.trajectory_id
                and e.step_id != step.step_id
                and (not step.group or e.group != step.group)
            )

        out: list[int] = []
        if looks_like_code(step.gold) or not self.retrievable:
            return []  # another run's patch, script or code window is trivially wrong; or the task forbids it
        names = (family(step.group), None)
        for name in names:
            if name is not None and name not in self.families:
                continue
            members = self.families[name] if name is not None else None
            forest = self.forests.get(name) if name is not None else self.everything
            if forest is None:
                found = members if members is not None else range(len(self.pool))
            else:
                sig = self._sketch(gold).hashvalues if sig is None else sig
                found = forest.query(sig, 4 * k)
            seen = set(out)
            # filtered, then ranked: the same order (the key is total), without scoring the refused
            out += self._ranked([i for i in found if ok(i) and i not in seen], gold)
            if len(out) >= k:
                break
        return out


#: Prefix trees of a pool's forests (datasketch's default `l`); each holds `_NUM_PERM // _TREES` values.
_TREES = 8


def _bytes(values: np.ndarray) -> np.ndarray:
    """32-bit hash values as their big-endian bytes (a uint8 view, 4 per value, in order): the
    forest's column and a query's bounds are compared as these bytes."""
    return np.ascontiguousarray(values, dtype=">u4").view(np.uint8)


class LshForest:
    """datasketch's `MinHashLSHForest` over some of a pool's entries, held in arrays.

    The same index and the same answers, key for key and in the same order: `trees` trees of `k =
    num_perm // trees` hash values each; a query walks prefix lengths `k` down to 1, at each the
    trees in order, each tree's entries whose first `r` values equal the query's in the order of
    their `k` values (big-endian bytes, as datasketch sorts them; equal ones in the order added),
    and stops once it holds `n` distinct keys. Where datasketch keeps per entry and tree a bytes
    object of its own, a place in a dict's list and in a sorted list, and the entry's list of
    keys, here every tree's entries are rows of one sorted column of fixed-size byte strings (the
    tree's number, then its `k` values big-endian: `1 + 4k` bytes) with the keys in that order:
    21 bytes per entry and tree for `k = 4`. Sorted as bytes, each tree is one block of the column
    and each prefix of a query's values one range of it, so one `searchsorted` per end finds the
    ranges of every tree and prefix length at once.
    """

    def __init__(self, members: Iterable[int], signatures: np.ndarray, trees: int) -> None:
        keys = np.fromiter(members, dtype=np.int64)
        self.k = signatures.shape[1] // trees
        self.trees = trees
        self.size = n = len(keys)
        if trees > 256:
            raise ValueError(f"at most 256 trees (one byte numbers a tree), not {trees}")
        width = 1 + 4 * self.k
        self.dtype = np.dtype(f"S{width}")
        self.column = np.empty(trees * n, dtype=self.dtype)  # filled a tree at a time: no second copy
        self.keys = np.empty(trees * n, dtype=np.int32)
        for t in range(trees):
            rows = np.empty((n, width), dtype=np.uint8)
            rows[:, 0] = t
            rows[:, 1:] = _bytes(signatures[keys, t * self.k : (t + 1) * self.k]).reshape(n, 4 * self.k)
            column = rows.view(self.dtype).ravel()  # compared as bytes: the tree, then the values in order
            order = np.argsort(column, kind="stable")  # entries with equal values stay in the order added
            self.column[t * n : (t + 1) * n] = column[order]
            self.keys[t * n : (t + 1) * n] = keys[order]
        # a query's bounds, tree t and prefix length r one row each (`_ranges`): the tree's number,
        # the query's first r values of the tree (its big-endian bytes `_from`, placed at `_to`),
        # then the lowest bytes (0) for the low bound and the highest (255) for the high one
        low = np.zeros((trees, self.k, width), dtype=np.uint8)
        low[:, :, 0] = np.arange(trees, dtype=np.uint8)[:, None]
        high = low.copy()
        high[:, :, 1:] = 0xFF
        to, src = [], []
        for t in range(trees):
            for r in range(1, self.k + 1):
                row = (t * self.k + r - 1) * width
                to += range(row + 1, row + 1 + 4 * r)
                src += range(t * 4 * self.k, t * 4 * self.k + 4 * r)
        self._bounds = (low.ravel(), high.ravel())
        self._to, self._from = np.array(to, dtype=np.intp), np.array(src, dtype=np.intp)

    def _ranges(self, sig: np.ndarray) -> tuple[list[int], list[int]]:
        """For tree t and prefix length r (1..k), the column's rows of tree t whose first r values
        equal `sig`'s: `starts[t * k + r - 1]` to `ends[...]` (nested ranges, empty when the
        starts meet the ends), from one `searchsorted` per end."""
        values = _bytes(sig[: self.trees * self.k])
        low, high = self._bounds
        low, high = low.copy(), high.copy()
        low[self._to] = high[self._to] = values[self._from]
        starts = np.searchsorted(self.column, low.view(self.dtype), "left").tolist()
        ends = np.searchsorted(self.column, high.view(self.dtype), "right").tolist()
        return starts, ends

    def query(self, sig: np.ndarray, n: int) -> list[int]:
        """`MinHashLSHForest.query` of the MinHash whose hash values are `sig`: up to `n` keys (as a
        list of the set they were gathered in, as datasketch returns them)."""
        results: set[int] = set()
        starts, ends = self._ranges(sig)
        for r in range(self.k, 0, -1):
            for t in range(self.trees):
                a, b = starts[t * self.k + r - 1], ends[t * self.k + r - 1]
                while a < b:  # a slice at a time: a bucket of a templated pool can be the whole pool
                    for key in self.keys[a : min(b, a + 64)].tolist():
                        results.add(key)
                        if len(results) >= n:
                            return list(results)
                    a += 64
        return list(results)


#: Candidate texts are compared many times while one item is filled: normalise each once.
_norm = lru_cache(maxsize=8192)(normalise)


@lru_cache(maxsize=8192)
def _option_tokens(text: str) -> tuple[str, ...]:
    """`option_tokens` of a text, once: each draw of an item measures the centrality of the gold and
    of candidates the other draws measured too."""
    return tuple(option_tokens(text))


_INDEXES: dict[tuple[str, int, int, int], PoolIndex] = {}
_INDEX_LOCK = threading.Lock()


def pool_index(pool: Sequence[PoolEntry], need: int, seed: int, exact_below: int) -> PoolIndex:
    """The index of `pool`, built once per pool (shards of one task share it; a few pools are kept)."""
    with _INDEX_LOCK:
        for (_, *rest), index in _INDEXES.items():  # the same (unmutated) pool object: no need to hash it
            if index.pool is pool and rest == [need, seed, exact_below]:
                return index
    key = (content_id(*(f"{e.step_id}:{e.retrievable}" for e in pool)), need, seed, exact_below)
    with _INDEX_LOCK:
        found = _INDEXES.get(key)
        if found is None:
            found = PoolIndex(pool, need, seed, exact_below)
            while len(_INDEXES) >= 4:
                _INDEXES.pop(next(iter(_INDEXES)))
            _INDEXES[key] = found
        return found


def release_indexes(indexes: Sequence[PoolIndex]) -> None:
    """Forget the kept pool indexes among `indexes` (another build's stay)."""
    with _INDEX_LOCK:
        for key in [k for k, v in _INDEXES.items() if any(v is i for i in indexes)]:
            del _INDEXES[key]


def pooled_cap(step: GoldStep) -> int | None:
    """The step's task's cap on other runs' golds per item (`TaskSpec.other_runs_per_item`), if any."""
    try:
        return task_spec(step.scenario, step.task).other_runs_per_item
    except UnknownTask:
        return None


@lru_cache(maxsize=64)
def _never(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def never_pooled(step: GoldStep) -> re.Pattern[str] | None:
    """Other runs' golds the step never takes, if any: its task's `TaskSpec.other_runs_never`, and
    `TaskSpec.other_runs_not_beside` where the step's own gold matches it."""
    try:
        spec = task_spec(step.scenario, step.task)
    except UnknownTask:
        return None
    beside = spec.other_runs_not_beside
    if beside and _never(beside).search(step.gold):
        return _never(f"(?:{beside})|(?:{spec.other_runs_never})" if spec.other_runs_never else beside)
    return _never(spec.other_runs_never) if spec.other_runs_never else None


class OfflineGenerator:
    """Distractors from the step's own candidates, then from other runs' golds by index."""

    name = "offline"
    version = 3

    def __init__(
        self,
        *,
        seed: int = 0,
        near_duplicate: float = 0.85,
        spread: int = 12,
        attempts: int = 8,
        neighbourhood: int = 200,
        reserve_factor: int = 3,
        own_window: int = 10,
        exact_below: int = 256,
    ) -> None:
        self.seed = seed
        self.attempts = attempts
        self.neighbourhood = neighbourhood
        self.near_duplicate = near_duplicate
        self.spread = spread
        self.reserve_factor = reserve_factor
        self.own_window = own_window
        self.exact_below = exact_below
        self._indexes: list[PoolIndex] = []  # the pool indexes its shards used (see `close`)

    def usage_report(self) -> None:
        """Offline generation spends no tokens."""
        return None

    def close(self) -> None:
        """Drop the pool indexes this generator built or used (the process keeps a few for the shards
        of a build; once the build's generation is done they would only hold its pools)."""
        release_indexes(self._indexes)
        self._indexes.clear()

    def generate(
        self, steps: Sequence[GoldStep], pool: Sequence[PoolEntry], n_options: int
    ) -> Iterator[Question | Problem]:
        need = n_options - 1
        index = (
            pool_index(pool, need, self.seed, self.exact_below)
            if any(s.form == "mcq" for s in steps)
            else None
        )
        if index is not None and all(index is not i for i in self._indexes):
            self._indexes.append(index)
        for step in steps:
            if step.form == "completion" or index is None:
                yield completion_question(step)
                continue
            picked, reserve = self._pick(step, index, need)
            if len(picked) < need:
                yield Problem(
                    where=step.step_id,
                    stage="generate",
                    reason="too_few_distractors",
                    detail=f"{step.scenario}/{step.task}: {len(picked)} of {need} distractors "
                    f"found among {len(step.candidates)} own candidates and {len(pool)} pooled answers",
                )
                continue
            prov = step.provenance.model_copy(
                update={"generator": self.name, "generator_version": self.version}
            )
            yield posed(step, picked, prov, reserve)

    def _order(
        self, ranked: list[int], lengths: Sequence[int], size: int, rng: random.Random, lead: bool
    ) -> list[int]:
        """Candidates within 3x of the gold's length first; in each group the `spread` most similar
        in a seeded shuffle (after the single most similar when `lead`), then the rest by similarity."""
        low, high = size / 3, 3 * max(size, 1)
        near = [i for i in ranked if low <= lengths[i] <= high]
        chosen = set(near)
        out: list[int] = []
        for group in (near, [i for i in ranked if i not in chosen]):
            head = 1 if lead and group else 0
            top = group[head : head + self.spread]
            rng.shuffle(top)
            out += [*group[:head], *top, *group[head + self.spread :]]
        return out

    def _acceptable(self, text: str, taken: list[str], threshold: float | None = None) -> bool:
        if not text.strip():
            return False
        if looks_like_code(text):  # one token is a real difference in code (`<=` for `<`)
            key = option_key(text)
            return all(option_key(t) != key for t in taken)
        limit = threshold or self.near_duplicate
        norm = _norm(text)
        # difflib's ratio never exceeds the Indel (LCS) ratio: the C-speed test settles most pairs
        # (each text is normalised once: one item compares its candidates with every option taken)
        return all(
            fuzz.ratio(norm, other) < limit * 100 or normalised_similarity(norm, other) < limit
            for other in map(_norm, taken)
        )

    def _targets(self, step: GoldStep, plan: RankPlan, need: int) -> tuple[int, int]:
        rng = random.Random(content_id(self.seed, step.step_id, "offline"))
        return plan.longer.get(step.step_id, rng.randint(0, need)), plan.central.get(
            step.step_id, rng.randint(0, need)
        )

    def _closer_target(self, step: GoldStep, plan: RankPlan, need: int) -> int:
        rng = random.Random(content_id(self.seed, step.step_id, "offline-closer"))
        return plan.closer.get(step.step_id, rng.randint(0, need))

    def _best_own(self, step: GoldStep, own: list[Candidate], need: int, plan: RankPlan) -> list[int]:
        """Positions in `own` of the `need` candidates whose length, centrality and context-closeness
        ranks (how many distractors are closer to the context than the gold) fit the targets."""
        window = own[: self.own_window]
        texts = [step.gold, *(c.text for c in window)]
        # centrality at both the token and the character level: a patch's medoid shows at the latter
        chars = ratio_matrix(texts)
        levels = [similarity_matrix(texts), [[float(x) / 100.0 for x in row] for row in chars]]
        target_longer, target_central = self._targets(step, plan, need)
        target_closer = self._closer_target(step, plan, need)
        close = closeness(texts, context_text(step.fields))
        size = len(step.gold)
        best: tuple[tuple[int, int], tuple[int, ...]] | None = None
        for combo in combinations(range(len(window)), need):
            members = [0, *(k + 1 for k in combo)]
            miss = abs(sum(len(window[k].text) > size for k in combo) - target_longer)
            miss += abs(sum(close[k + 1] > close[0] for k in combo) - target_closer)
            for sims in levels:
                central = [sum(sims[a][b] for b in members if b != a) for a in members]
                miss += abs(sum(c > central[0] for c in central[1:]) - target_central)
            score = (miss, sum(combo))
            if best is None or score < best[0]:
                best = (score, combo)
        return list(best[1]) if best else []

    def _pick(self, step: GoldStep, index: PoolIndex, need: int) -> tuple[list[Distractor], list[Distractor]]:
        """The distractors and the reserve of `step`."""
        pool, plan = index.pool, index.plan
        taken = [step.gold]
        own: list[Candidate] = []
        for cand in step.candidates:
            if len(own) >= need * (1 + self.reserve_factor):
                break
            # a scenario's own candidate differs by construction (another target, a mutated line):
            # only what the near-gold gate would call a copy is refused
            if self._acceptable(cand.text, taken, OWN_NEAR_DUPLICATE):
                taken.append(cand.text)
                own.append(cand)
        room = need * (1 + self.reserve_factor)
        cap = pooled_cap(step)
        retrieved = index.query(step, room + need) if len(own) < room and cap != 0 else []
        if cap is not None and len(own) < need - cap:
            retrieved = []  # too few of its own: no item rather than one made of other runs' steps
        if len(own) >= need:
            chosen = self._best_own(step, own, need, plan)
            picked = [Distractor(text=own[k].text, origin=own[k].origin) for k in chosen]
            rest = [Distractor(text=c.text, origin=c.origin) for k, c in enumerate(own) if k not in chosen]
        else:
            picked = [Distractor(text=c.text, origin=c.origin) for c in own]
            picked = self._from_pool(step, index, retrieved, picked, need)
            rest = []
        reserve: list[Distractor] = []
        texts = [step.gold, *(d.text for d in picked)]
        chosen_texts = set(texts)
        # (text, origin) pairs: a Distractor is made only for the few the reserve takes
        pooled = [
            (pool[i].text, f"other_run:{pool[i].step_id}")
            for i in retrieved
            if pool[i].text not in chosen_texts
        ]
        if cap is not None:  # the cap counts the shown ones too: adversarial filtering swaps from the reserve
            shown = sum(
                d.origin.startswith("other_run:") and d.origin != "other_run:redundant_step" for d in picked
            )
            pooled = pooled[: max(0, cap - shown)]
        for text, origin in [*((d.text, d.origin) for d in rest), *pooled]:
            if len(reserve) >= need * self.reserve_factor:
                break
            if self._acceptable(text, texts):
                texts.append(text)
                reserve.append(Distractor(text=text, origin=origin))
        return picked, reserve

    def _from_pool(
        self, step: GoldStep, index: PoolIndex, ranked: list[int], picked: list[Distractor], need: int
    ) -> list[Distractor]:
        """Fill `picked` up to `need` from the retrieved `ranked` entries, length and centrality ranks planned."""
        pool, pool_tokens, lengths = index.pool, index.tokens, index.lengths
        taken = [step.gold, *(d.text for d in picked)]
        size = len(step.gold)
        # Option-only rules must stay at chance: how many options are longer than the gold, and how
        # many are more central (mean similarity to the others), are targets from `rank_plan`,
        # spread evenly over 0..need across the task. Token overlap alone favours short candidates
        # ("pick the longest" won) and the most similar candidates make the gold the medoid.
        longer_now = sum(len(d.text) > size for d in picked)
        target_longer, central_rank = self._targets(step, index.plan, need)
        n_longer = min(max(target_longer - longer_now, 0), need - len(picked))
        best: list[Distractor] = picked
        best_miss: int | None = None
        for attempt in range(self.attempts):
            trial = random.Random(content_id(self.seed, step.step_id, "offline", attempt))
            base = ranked
            if attempt % 2 and ranked:
                # Odd attempts gather the distractors around another anchor (a candidate similar to
                # the gold), so the anchor, not the gold, is the option closest to all others.
                head = ranked[: self.neighbourhood]
                anchor = frozenset(pool_tokens[head[trial.randrange(min(len(head), self.spread))]])
                base = sorted(head, key=lambda i: (-jaccard(anchor, pool_tokens[i]), pool[i].step_id))
            longer = [i for i in base if lengths[i] > size]
            shorter = [i for i in base if lengths[i] <= size]
            sides = [
                (self._order(longer, lengths, size, trial, attempt % 2 == 0), n_longer),
                (self._order(shorter, lengths, size, trial, attempt % 2 == 0), need - len(picked) - n_longer),
            ]
            chosen = self._fill(pool, list(picked), list(taken), need, sides)
            if len(chosen) < need:
                return chosen
            sims = token_similarity([_option_tokens(step.gold), *(_option_tokens(d.text) for d in chosen)])
            central = [(sum(row) - row[i]) / need for i, row in enumerate(sims)]
            miss = abs(sum(c > central[0] for c in central[1:]) - central_rank)
            if best_miss is None or miss < best_miss:
                best, best_miss = chosen, miss
            if miss == 0:
                break
        return best

    def _fill(
        self,
        pool: Sequence[PoolEntry],
        picked: list[Distractor],
        taken: list[str],
        need: int,
        sides: list[tuple[list[int], int]],
    ) -> list[Distractor]:
        """Take each side's quota of acceptable candidates in order, then fill up from both sides."""
        for side, quota in [*sides, ([i for s, _ in sides for i in s], need)]:
            target = min(len(picked) + quota, need)
            for i in side:
                if len(picked) >= target:
                    break
                entry = pool[i]
                if self._acceptable(entry.text, taken):
                    taken.append(entry.text)
                    picked.append(Distractor(text=entry.text, origin=f"other_run:{entry.step_id}"))
        return picked
