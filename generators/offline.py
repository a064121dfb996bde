"""Offline distractors: wrong options drawn from other gold steps, no network. The default.

For each gold step: candidates are the scenario's own wrong options (e.g. shifted code windows)
followed by the gold answers of every other step of the same task, in this and other
trajectories. Candidates equal or near-equal to the gold (normalised similarity >=
`near_duplicate`) or to an option already chosen are refused.

Option-only rules must stay at chance (issue 5), so for every item `rank_plan` sets, from the
whole task's pool and the seed, how many distractors are longer than the gold and how many are
more central (mean similarity to the other options), spreading both evenly over 0..n-1 across
the task. The distractors are then drawn on each side of the gold's length (candidates within 3x
its length first; the most similar by token overlap leading, the rest a seeded shuffle of the
`spread` next most similar); of `attempts` such draws, half gathered around another anchor
candidate rather than the gold, the one whose gold centrality rank is nearest its target wins.
Too few candidates yields a `too_few_distractors` Problem.
"""

from __future__ import annotations

import random
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from typing import NamedTuple

from generators.base import PoolEntry, completion_question, posed
from generators.quality.baselines import centrality
from generators.text import jaccard, similarity, tokens
from schemas import Distractor, GoldStep, Problem, Question, content_id


class RankPlan(NamedTuple):
    """Per gold step: how many distractors are longer than the gold, and how many more central."""

    longer: dict[str, int]
    central: dict[str, int]


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
        return RankPlan({}, {})
    lengths = sorted({e.text.strip(): len(e.text) for e in pool}.values())
    order = sorted(pool, key=lambda e: content_id(seed, "ranks", e.step_id))
    ranges = {e.step_id: _feasible(lengths, len(e.text), need) for e in order}
    longer: dict[str, int] = {}
    central: dict[str, int] = {}
    used_long, used_central = [0] * (need + 1), [0] * (need + 1)
    for e in sorted(order, key=lambda e: ranges[e.step_id][1] - ranges[e.step_id][0]):
        lo, hi = ranges[e.step_id]
        tie = random.Random(content_id(seed, "rank-ties", e.step_id))
        k = min(range(lo, hi + 1), key=lambda k: (used_long[k], tie.random()))
        c = min(range(need + 1), key=lambda k: (used_central[k], tie.random()))
        used_long[k] += 1
        used_central[c] += 1
        longer[e.step_id], central[e.step_id] = k, c
    return RankPlan(longer, central)


class OfflineGenerator:
    """Distractors from other steps' gold answers."""

    name = "offline"
    version = 2

    def __init__(
        self,
        *,
        seed: int = 0,
        near_duplicate: float = 0.85,
        spread: int = 12,
        attempts: int = 8,
        neighbourhood: int = 200,
    ) -> None:
        self.seed = seed
        self.attempts = attempts
        self.neighbourhood = neighbourhood
        self.near_duplicate = near_duplicate
        self.spread = spread

    def generate(
        self, steps: Sequence[GoldStep], pool: Sequence[PoolEntry], n_options: int
    ) -> Iterator[Question | Problem]:
        pool_tokens = [tokens(e.text) for e in pool]
        plan = rank_plan(pool, n_options - 1, self.seed)
        for step in steps:
            if step.form == "completion":
                yield completion_question(step)
                continue
            picked = self._pick(step, pool, pool_tokens, n_options - 1, plan)
            if len(picked) < n_options - 1:
                yield Problem(
                    where=step.step_id,
                    stage="generate",
                    reason="too_few_distractors",
                    detail=f"{step.scenario}/{step.task}: {len(picked)} of {n_options - 1} distractors "
                    f"found among {len(pool)} pooled answers",
                )
                continue
            prov = step.provenance.model_copy(
                update={"generator": self.name, "generator_version": self.version}
            )
            yield posed(step, picked, prov)

    def _order(
        self, ranked: list[int], pool: Sequence[PoolEntry], size: int, rng: random.Random, lead: bool
    ) -> list[int]:
        """Candidates within 3x of the gold's length first; in each group the `spread` most similar
        in a seeded shuffle (after the single most similar when `lead`), then the rest by similarity."""
        near = [i for i in ranked if size / 3 <= len(pool[i].text) <= 3 * max(size, 1)]
        chosen = set(near)
        out: list[int] = []
        for group in (near, [i for i in ranked if i not in chosen]):
            head = 1 if lead and group else 0
            top = group[head : head + self.spread]
            rng.shuffle(top)
            out += [*group[:head], *top, *group[head + self.spread :]]
        return out

    def _acceptable(self, text: str, taken: list[str]) -> bool:
        return bool(text.strip()) and all(similarity(text, t) < self.near_duplicate for t in taken)

    def _pick(
        self,
        step: GoldStep,
        pool: Sequence[PoolEntry],
        pool_tokens: Sequence[frozenset[str]],
        need: int,
        plan: RankPlan | None = None,
    ) -> list[Distractor]:
        taken = [step.gold]
        picked: list[Distractor] = []
        for cand in step.candidates:
            if len(picked) == need:
                return picked
            if self._acceptable(cand.text, taken):
                taken.append(cand.text)
                picked.append(Distractor(text=cand.text, origin=cand.origin))
        gold_tokens = tokens(step.gold)
        ranked = sorted(
            (i for i, e in enumerate(pool) if e.step_id != step.step_id),
            key=lambda i: (-jaccard(gold_tokens, pool_tokens[i]), pool[i].step_id),
        )
        rng = random.Random(content_id(self.seed, step.step_id, "offline"))
        size = len(step.gold)
        # Option-only rules must stay at chance: how many options are longer than the gold, and how
        # many are more central (mean similarity to the others), are targets from `rank_plan`,
        # spread evenly over 0..need across the task. Token overlap alone favours short candidates
        # ("pick the longest" won) and the most similar candidates make the gold the medoid.
        longer_now = sum(len(d.text) > size for d in picked)
        plan = plan or RankPlan({}, {})
        target_longer = plan.longer.get(step.step_id, rng.randint(0, need))
        n_longer = min(max(target_longer - longer_now, 0), need - len(picked))
        central_rank = plan.central.get(step.step_id, rng.randint(0, need))
        best: list[Distractor] = picked
        best_miss: int | None = None
        for attempt in range(self.attempts):
            trial = random.Random(content_id(self.seed, step.step_id, "offline", attempt))
            base = ranked
            if attempt % 2 and ranked:
                # Odd attempts gather the distractors around another anchor (a candidate similar to
                # the gold), so the anchor, not the gold, is the option closest to all others.
                head = ranked[: self.neighbourhood]
                anchor = head[trial.randrange(min(len(head), self.spread))]
                base = sorted(
                    head, key=lambda i: (-jaccard(pool_tokens[anchor], pool_tokens[i]), pool[i].step_id)
                )
            longer = [i for i in base if len(pool[i].text) > size]
            shorter = [i for i in base if len(pool[i].text) <= size]
            sides = [
                (self._order(longer, pool, size, trial, attempt % 2 == 0), n_longer),
                (self._order(shorter, pool, size, trial, attempt % 2 == 0), need - len(picked) - n_longer),
            ]
            chosen = self._fill(step, pool, list(picked), list(taken), need, sides)
            if len(chosen) < need:
                return chosen
            central = centrality([step.gold, *(d.text for d in chosen)])
            miss = abs(sum(c > central[0] for c in central[1:]) - central_rank)
            if best_miss is None or miss < best_miss:
                best, best_miss = chosen, miss
            if miss == 0:
                break
        return best

    def _fill(
        self,
        step: GoldStep,
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
                    kind = (
                        "same_trajectory" if entry.trajectory_id == step.trajectory_id else "other_trajectory"
                    )
                    picked.append(Distractor(text=entry.text, origin=f"{kind}:{entry.step_id}"))
        return picked
