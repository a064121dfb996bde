"""Offline distractors: wrong options drawn from other gold steps, no network. The default.

For each gold step: candidates are the scenario's own wrong options (e.g. shifted code windows)
followed by the gold answers of every other step of the same task, in this and other
trajectories. Candidates equal or near-equal to the gold (normalised similarity >=
`near_duplicate`) or to an option already chosen are refused. The first distractor is the most
similar remaining candidate by token overlap (similar but wrong); the rest are drawn at random
(seeded per item) from the `spread` next most similar, so the gold is not the option closest to
all others. Too few candidates yields a `too_few_distractors` Problem.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence

from generators.base import PoolEntry, completion_question
from generators.text import jaccard, similarity, tokens
from schemas import Distractor, GoldStep, Problem, Question, content_id


class OfflineGenerator:
    """Distractors from other steps' gold answers."""

    name = "offline"
    version = 1

    def __init__(self, *, seed: int = 0, near_duplicate: float = 0.85, spread: int = 12) -> None:
        self.seed = seed
        self.near_duplicate = near_duplicate
        self.spread = spread

    def generate(
        self, steps: Sequence[GoldStep], pool: Sequence[PoolEntry], n_options: int
    ) -> Iterator[Question | Problem]:
        pool_tokens = [tokens(e.text) for e in pool]
        for step in steps:
            if step.form == "completion":
                yield completion_question(step)
                continue
            picked = self._pick(step, pool, pool_tokens, n_options - 1)
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
            yield Question(
                item_id=step.step_id,
                scenario=step.scenario,
                task=step.task,
                form=step.form,
                trajectory_id=step.trajectory_id,
                step_index=step.step_index,
                fields=step.fields,
                gold=step.gold,
                options=(step.gold, *(d.text for d in picked)),
                gold_index=0,
                distractors=tuple(picked),
                provenance=prov,
            )

    def _acceptable(self, text: str, taken: list[str]) -> bool:
        return bool(text.strip()) and all(similarity(text, t) < self.near_duplicate for t in taken)

    def _pick(
        self, step: GoldStep, pool: Sequence[PoolEntry], pool_tokens: Sequence[frozenset[str]], need: int
    ) -> list[Distractor]:
        taken = [step.gold]
        picked: list[Distractor] = []
        for i, cand in enumerate(step.candidates):
            if len(picked) == need:
                return picked
            if self._acceptable(cand, taken):
                taken.append(cand)
                picked.append(Distractor(text=cand, origin=f"scenario:{i}"))
        gold_tokens = tokens(step.gold)
        ranked = sorted(
            (i for i, e in enumerate(pool) if e.step_id != step.step_id),
            key=lambda i: (-jaccard(gold_tokens, pool_tokens[i]), pool[i].step_id),
        )
        rng = random.Random(content_id(self.seed, step.step_id, "offline"))
        order: list[int] = []
        if ranked:
            order.append(ranked[0])
            rest = ranked[1 : 1 + self.spread]
            rng.shuffle(rest)
            order.extend(rest + ranked[1 + self.spread :])
        for i in order:
            if len(picked) == need:
                break
            entry = pool[i]
            if self._acceptable(entry.text, taken):
                taken.append(entry.text)
                kind = "same_trajectory" if entry.trajectory_id == step.trajectory_id else "other_trajectory"
                picked.append(Distractor(text=entry.text, origin=f"{kind}:{entry.step_id}"))
        return picked
