"""The CLI's progress callback, handed to a running build without being a flow parameter (it is not data).

Kept in its own module so the flow only refers to functions here: a flow pickled for Dask workers
then carries references, never the ContextVar itself (which cannot be pickled).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

Progress = Callable[[str, int, int], None]

_PROGRESS: ContextVar[Progress | None] = ContextVar("aptforge_progress", default=None)


def current() -> Progress | None:
    """The callback set by the caller of the build, if any."""
    return _PROGRESS.get()


@contextmanager
def reporting(progress: Progress | None) -> Iterator[None]:
    """Make `progress` the callback for builds run inside this block."""
    token = _PROGRESS.set(progress)
    try:
        yield
    finally:
        _PROGRESS.reset(token)
