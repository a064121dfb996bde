"""Gold positions balanced across a task, chosen once at build time (seeded).

Items are ordered by id, each gets the next position from a seeded shuffle of a repeated
0..n-1 cycle, so every letter is the answer equally often (±1) whatever the shard order, and
the distractors are shuffled with a per-item seeded RNG around it (`distractors`, and so each
row's `distractor_origins`, in the order of the options they are, the gold left out).
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from schemas import Question, content_id


class Slot(NamedTuple):
    """What balancing needs of an MCQ item (its questions can stay on disk)."""

    item_id: str
    scenario: str
    task: str
    n: int


def slot_of(q: Question) -> Slot | None:
    """The item's `Slot`, None for an item balancing leaves alone (completion, no options)."""
    return Slot(q.item_id, q.scenario, q.task, len(q.options)) if q.form == "mcq" and q.options else None


def positions_for(slots: Iterable[Slot], seed: int) -> dict[str, int]:
    """The gold position of every item, by id: items of `n` options, in id order, take the next
    place of a seeded shuffle of repeated 0..n-1 cycles (seeded by the first such item's task)."""
    by_n: dict[int, list[Slot]] = {}
    for s in sorted(slots, key=lambda s: s.item_id):
        by_n.setdefault(s.n, []).append(s)
    out: dict[str, int] = {}
    for n, group in by_n.items():
        rng = random.Random(content_id(seed, "positions", group[0].scenario, group[0].task, n))
        places: list[int] = []
        while len(places) < len(group):
            cycle = list(range(n))
            rng.shuffle(cycle)
            places.extend(cycle)
        out.update((s.item_id, pos) for s, pos in zip(group, places, strict=False))
    return out


def place(q: Question, pos: int, seed: int) -> Question:
    """`q` with its gold at `pos` and its distractors in a per-item seeded order around it."""
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
    return q.model_copy(update=update)


def balance_positions(questions: Sequence[Question], seed: int) -> list[Question]:
    """Return MCQ questions with options reordered so gold positions are balanced."""
    positions = positions_for((s for q in questions if (s := slot_of(q)) is not None), seed)
    return [place(q, positions[q.item_id], seed) if q.item_id in positions else q for q in questions]
