"""Gold positions balanced across a task, chosen once at build time (seeded).

Items are ordered by id, each gets the next position from a seeded shuffle of a repeated
0..n-1 cycle, so every letter is the answer equally often (±1) whatever the shard order, and
the distractors are shuffled with a per-item seeded RNG around it (`distractors`, and so each
row's `distractor_origins`, in the order of the options they are, the gold left out).
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from schemas import Question, content_id


def balance_positions(questions: Sequence[Question], seed: int) -> list[Question]:
    """Return MCQ questions with options reordered so gold positions are balanced."""
    mcq = sorted((q for q in questions if q.form == "mcq" and q.options), key=lambda q: q.item_id)
    by_n: dict[int, list[Question]] = {}
    for q in mcq:
        by_n.setdefault(len(q.options), []).append(q)
    placed: dict[str, Question] = {}
    for n, group in by_n.items():
        rng = random.Random(content_id(seed, "positions", group[0].scenario, group[0].task, n))
        slots: list[int] = []
        while len(slots) < len(group):
            cycle = list(range(n))
            rng.shuffle(cycle)
            slots.extend(cycle)
        for q, pos in zip(group, slots, strict=False):
            assert q.gold_index is not None
            others = [o for i, o in enumerate(q.options) if i != q.gold_index]
            # the order as a permutation (a shuffle's draws depend on the length alone), so the
            # distractors (and their origins) follow their options
            order = list(range(len(others)))
            random.Random(content_id(seed, "order", q.item_id)).shuffle(order)
            others = [others[k] for k in order]
            options = (*others[:pos], q.gold, *others[pos:])
            update: dict[str, object] = {"options": options, "gold_index": pos}
            if [d.text for d in q.distractors] == [o for i, o in enumerate(q.options) if i != q.gold_index]:
                update["distractors"] = tuple(q.distractors[k] for k in order)
            placed[q.item_id] = q.model_copy(update=update)
    return [placed.get(q.item_id, q) for q in questions]
