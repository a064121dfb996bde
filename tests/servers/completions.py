"""Scripted language models behind `flows.lm_server.CompletionsServer`: an oracle and a uniform model.

The oracle knows each test item's gold: it finds the item a prompt is about by the item's context
field (inserted verbatim by APTBench-style prompts; the one ending latest in the prompt wins, so
few-shot demos before it do not count), generates the gold answer, and gives log-probability 0 to a
prompt that ends with the gold (letter or option text) and -30 to the last token of any other. The
uniform model gives every byte 1/256 and generates seeded random bytes.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Sequence
from typing import NamedTuple

from flows.lm_server import VOCAB, TokenScore

UNIFORM = -math.log(VOCAB)


class OracleItem(NamedTuple):
    key: str
    """A context string of the item that its prompt contains verbatim."""
    generation: str
    """What the oracle generates for it."""
    golds: tuple[str, ...]
    """Continuations that are right (the gold letter, the gold option text)."""


class OracleModel:
    name = "oracle"

    def __init__(self, items: Sequence[OracleItem]) -> None:
        self.items = list(items)

    def _item(self, text: str) -> OracleItem | None:
        best, where = None, -1
        for item in self.items:
            pos = text.rfind(item.key)
            end = pos + len(item.key) if pos >= 0 else -1
            if end > where or (end == where and best is not None and len(item.key) > len(best.key)):
                best, where = item, end
        return best if where >= 0 else None

    def score(self, data: bytes, start: int = 0) -> list[TokenScore]:
        text = data.decode("utf-8", errors="replace")
        lps = [UNIFORM] * len(data)
        item = self._item(text)
        gold = next((g for g in item.golds if text.endswith(g)), None) if item else None
        if gold is not None:
            tail = len(gold.encode("utf-8"))
            lps[len(data) - tail :] = [0.0] * tail
        elif lps:
            lps[-1] = -30.0
        return [TokenScore(None if i == 0 else lp, 0, max(lp, UNIFORM)) for i, lp in enumerate(lps)][start:]

    def generate(self, data: bytes, max_tokens: int) -> bytes:
        item = self._item(data.decode("utf-8", errors="replace"))
        return (item.generation if item else "").encode("utf-8")[:max_tokens]


class UniformModel:
    name = "uniform"

    def score(self, data: bytes, start: int = 0) -> list[TokenScore]:
        return [TokenScore(None if i == 0 else UNIFORM, 0, UNIFORM) for i in range(start, len(data))]

    def generate(self, data: bytes, max_tokens: int) -> bytes:
        rng = random.Random(hashlib.sha256(data).hexdigest())
        return bytes(rng.randrange(VOCAB) for _ in range(max_tokens))
