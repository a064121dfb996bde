"""The CLI's progress callback, handed to a running build without being a flow parameter (it is not data).

Kept in its own module so the flow only refers to functions here: a flow pickled for Dask workers
then carries references, never the ContextVar itself (which cannot be pickled).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

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


@contextmanager
def progress_bars(console: Any, *, transient: bool = False) -> Iterator[Progress]:
    """A rich progress display on `console` with one bar per label; yields the callback that moves them."""
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
    from rich.progress import Progress as Bars

    with Bars(
        TextColumn("{task.description:<18}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=transient,
    ) as bars:
        ids: dict[str, Any] = {}

        def progress(label: str, done: int, total: int) -> None:
            if label not in ids:
                ids[label] = bars.add_task(label, total=total)
            bars.update(ids[label], completed=done)

        yield progress
