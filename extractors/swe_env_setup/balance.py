"""Order an item's candidates so the first few leave the gold unremarkable (length and centrality).

The offline generator poses the first `need` candidates, so this order is what an item shows until
an adversarial filter picks among them. Every candidate is already a checked-wrong option; this only
chooses which ones come first: a seeded search over subsets of the leading candidates for one that
puts the gold at a uniformly drawn length rank and a uniformly drawn centrality rank (mean token-level
Indel similarity to the other options, as the validity baselines measure it). The gold is then the
longest, the shortest or the most central option only about as often as chance.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence

import numpy as np
from rapidfuzz import fuzz

_TOKEN = re.compile(r"[a-z0-9_]+|[\u3400-\u9fff\uf900-\ufaff]")


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


def _rank(values: Sequence[float], i: int) -> int:
    """Rank of `values[i]` from the top (0 = highest; ties count against it)."""
    return sum(1 for j, v in enumerate(values) if j != i and v >= values[i])


def balanced_head(
    gold: str,
    candidates: Sequence[str],
    rng: random.Random,
    need: int = 6,
    window: int = 24,
    tries: int = 200,
) -> list[str]:
    """`candidates` reordered: a chosen head of `need` (shuffled), then the rest in their order."""
    cands = list(dict.fromkeys(c for c in candidates if c != gold))
    if len(cands) <= need:
        return cands
    pool = cands[:window]
    texts = [_tokens(t) for t in [gold, *pool]]
    # pair by pair rather than `process.cdist`, which lets go of the GIL: on a build's threads getting
    # it back costs milliseconds (generators.text.ratio_matrix); float32 values, as cdist's
    sims = np.array([[fuzz.ratio(a, b) for b in texts] for a in texts], dtype=np.float32)
    want_len, want_central = rng.randint(0, need), rng.randint(0, need)
    best: tuple[float, list[int]] | None = None
    for _ in range(tries):
        pick = rng.sample(range(1, len(pool) + 1), need)
        idx = [0, *pick]
        lengths = [float(len(gold if i == 0 else pool[i - 1])) for i in idx]
        central = [sum(float(sims[i][j]) for j in idx if j != i) for i in idx]
        cost = abs(_rank(lengths, 0) - want_len) + abs(_rank(central, 0) - want_central)
        cost += sum(p - 1 for p in pick) / (10 * len(pool))  # prefer candidates ranked earlier
        if best is None or cost < best[0]:
            best = (cost, pick)
    assert best is not None
    head = [pool[p - 1] for p in best[1]]
    rng.shuffle(head)
    return head + [c for c in cands if c not in head]
