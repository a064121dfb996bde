"""A build's Problems held as a few byte strings, not as objects (`ProblemLog`).

A build at scale meets tens of thousands of Problems (a run whose target cannot be derived, a step
with too few distractors: 25,466 on a 20,000-run `make bench` build), each made inside a shard task
among the shard's short-lived objects and kept to the end of the build for the quarantine file and
the report. As objects (a model, its dict and field set, two strings: five small blocks each) they
took about 32 MB of Python's small-object allocator at 20,000 runs (155 against 186 MB in use at the
start of adversarial filtering) and, at 5,000 runs, pinned 26 of the 71 arenas that build held more
than a 1,000-run build (a 20,000-run build's extra arenas are pinned by something else: 471 against
475). A `ProblemLog` turns each batch it is given into one pickled byte string of plain tuples at
once, so the objects the shard made go with the shard, and gives the Problems back, in the order
they were added, as it is read.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterable, Iterator

from schemas import Problem

_FIELDS = tuple(Problem.model_fields)


class ProblemLog:
    """Problems in the order they were added, each batch held as one byte string; iterable any
    number of times (each pass rebuilds the Problems of one batch at a time)."""

    __slots__ = ("_batches", "_count")

    def __init__(self, problems: Iterable[Problem] = ()) -> None:
        self._batches: list[bytes] = []
        self._count = 0
        self.extend(problems)

    def extend(self, problems: Iterable[Problem]) -> None:
        """Add `problems` (a `ProblemLog`'s batches are shared, not rebuilt)."""
        if isinstance(problems, ProblemLog):
            self._batches += problems._batches
            self._count += problems._count
            return
        rows = [tuple(getattr(p, f) for f in _FIELDS) for p in problems]
        if rows:
            self._batches.append(pickle.dumps(rows, protocol=pickle.HIGHEST_PROTOCOL))
            self._count += len(rows)

    def batches(self) -> Iterator[list[Problem]]:
        """The Problems batch by batch, as they were added."""
        for blob in self._batches:
            yield [
                Problem.model_construct(**dict(zip(_FIELDS, row, strict=True))) for row in pickle.loads(blob)
            ]

    def __iter__(self) -> Iterator[Problem]:
        for batch in self.batches():
            yield from batch

    def __len__(self) -> int:
        return self._count

    def __eq__(self, other: object) -> bool:
        """The same Problems in the same order as another log, a list or a tuple."""
        if not isinstance(other, ProblemLog | list | tuple):
            return NotImplemented
        return len(self) == len(other) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __iadd__(self, problems: Iterable[Problem]) -> ProblemLog:
        self.extend(problems)
        return self

    def __add__(self, problems: Iterable[Problem]) -> ProblemLog:
        out = ProblemLog(self)
        out.extend(problems)
        return out

    def __radd__(self, problems: Iterable[Problem]) -> ProblemLog:
        out = ProblemLog(problems)
        out.extend(self)
        return out


__all__ = ["ProblemLog"]
