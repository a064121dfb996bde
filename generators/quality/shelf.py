"""`Shelf`: an append-only sequence kept in a temporary file, read back by index or in order.

The audit of a task reads its items once in order, then again a block at a time (`task_baselines`);
a task built from tens of thousands of runs would hold every option and context in memory between
the two. On a shelf each value is pickled to an unnamed temporary file as it is appended and only
its offset is kept (8 bytes), so memory holds one block, and the file's pages belong to the
operating system's cache, not to the process. The file goes when the shelf is closed (or the
process ends: it has no name).
"""

from __future__ import annotations

import pickle
import tempfile
from array import array
from collections.abc import Iterator, Sequence
from typing import Any, Generic, TypeVar, overload

T = TypeVar("T")


class Shelf(Sequence[T], Generic[T]):
    """Values pickled to a temporary file as they are appended; `shelf[i]` reads one back."""

    def __init__(self) -> None:
        self._file = tempfile.TemporaryFile()  # noqa: SIM115 (closed by `close`)
        self._offsets = array("q")
        self._end = 0

    def append(self, value: T) -> None:
        """Add `value` at the end (pickled now: later changes to it are not seen)."""
        data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        self._file.seek(self._end)
        self._file.write(data)
        self._offsets.append(self._end)
        self._end += len(data)

    def __len__(self) -> int:
        return len(self._offsets)

    @overload
    def __getitem__(self, i: int) -> T: ...

    @overload
    def __getitem__(self, i: slice) -> list[T]: ...

    def __getitem__(self, i: int | slice) -> Any:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        n = len(self._offsets)
        k = i + n if i < 0 else i
        if not 0 <= k < n:
            raise IndexError("shelf index out of range")
        return self._read(k)

    def __iter__(self) -> Iterator[T]:
        for k in range(len(self._offsets)):
            yield self._read(k)

    def _read(self, k: int) -> T:
        start = self._offsets[k]
        stop = self._offsets[k + 1] if k + 1 < len(self._offsets) else self._end
        self._file.seek(start)
        return pickle.loads(self._file.read(stop - start))

    def close(self) -> None:
        """Remove the file."""
        self._file.close()

    def __enter__(self) -> Shelf[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["Shelf"]
