"""Shard references: what every shard of a stage reads is written once under `<out_dir>/.work/`.

A value every shard of a stage needs (a task's distractor pool, what the scenario observed of every
labelled run) is written once, atomically, to a file named by its content key, and each shard task
gets the file's PATH. So submitting N shards costs N short strings, not N copies of the value: on
Dask a worker reads the file itself (`out_dir` is a shared folder there) instead of the flow
serialising the value into every task, and on threads the flow process loads it once. A process
keeps the last few values it loaded (`load`), keyed by path and modification time.

A stage's output the next stage reads once (the questions of each generate shard) is `spill`ed the
same way, one file per shard in a folder of the build's own (`spill_area`), and `take`n (read and
removed) by the next stage, which loads one task's shards at a time: the flow holds paths between
the stages, not the build's questions. A stage that streams (one value at a time, none held) writes
with an `Appender` to a file in the area and the next reads it back with `replay`: the extracted
gold steps of each task, the filtered questions, their id buckets (`flows.finish`).
"""

from __future__ import annotations

import os
import pickle
import re
import secrets
import shutil
import threading
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any

import psutil
from prefect.context import FlowRunContext

from flows.io import atomic_path


def run_task(t: Any, *args: Any) -> Any:
    """The result of Prefect task `t` on `args`: submitted to the flow run's task runner (on Dask it
    runs on a worker, which reads and writes the files its arguments name), or called in place
    outside a flow run (a stage's function called on its own, as tests do)."""
    if FlowRunContext.get() is None:
        return t.fn(*args)
    return t.submit(*args).result()


def work_dir(out_dir: str | Path) -> Path:
    """`<out_dir>/.work`: the build's intermediate files (safe to delete between builds)."""
    return Path(out_dir).resolve() / ".work"


def _write(path: Path, value: Any) -> str:
    """Pickle `value` to `path` atomically; its path as a string."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
    return str(path)


def store(out_dir: str | Path, kind: str, key: str, value: Any) -> str:
    """Write `value` to `<out_dir>/.work/<kind>-<key>.pkl` (atomically; rewritten by every build, so a
    file never outlives the code that wrote it) and return the path to hand to shard tasks."""
    return _write(work_dir(out_dir) / f"{kind}-{key}.pkl", value)


def spill_area() -> str:
    """A fresh folder name for one build's spilled shards, `spill-<pid>-<random>`: two builds never
    share one (a schedule may start a build of the same scenario and version while one runs), and a
    killed build's is removed by the next (`clean_spills`)."""
    return f"spill-{os.getpid()}-{secrets.token_hex(6)}"


def spill(out_dir: str | Path, area: str, kind: str, index: int, value: Any) -> str:
    """Write one stage's output shard to `<out_dir>/.work/<area>/<kind>/<index>.pkl` (atomically) and
    return its path: the flow holds the path, not the value, until the next stage `take`s it."""
    return _write(work_dir(out_dir) / area / kind / f"{index:06d}.pkl", value)


def peek(ref: str) -> Any:
    """The value a `spill` path holds, the file left for a later `take`."""
    return pickle.loads(Path(ref).read_bytes())


def take(ref: str) -> Any:
    """The value a `spill` path holds, read once: the file is removed (never cached)."""
    path = Path(ref)
    value = pickle.loads(path.read_bytes())
    path.unlink()
    return value


def spill_path(out_dir: str | Path, area: str, name: str) -> Path:
    """`<out_dir>/.work/<area>/<name>`: a file a stage appends to and reads back (`Appender`, `replay`)."""
    path = work_dir(out_dir) / area / name
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


class Appender:
    """Values pickled one after another onto files (opened as first written to, kept open till
    `close`): a stage streams what it makes to disk without holding it, and `replay` reads it back."""

    def __init__(self) -> None:
        self._files: dict[Path, Any] = {}

    def add(self, path: Path, value: Any) -> None:
        f = self._files.get(path)
        if f is None:
            f = self._files[path] = path.open("ab")
        pickle.dump(value, f, protocol=pickle.HIGHEST_PROTOCOL)

    def close(self) -> None:
        for f in self._files.values():
            f.close()
        self._files.clear()

    def __enter__(self) -> Appender:
        return self

    def __exit__(self, *_: Any) -> None:
        self.close()


def replay(path: Path) -> Iterator[Any]:
    """The values an `Appender` wrote to `path`, in order, one at a time (none if it has none)."""
    if not path.exists():
        return
    with path.open("rb") as f:
        while True:
            try:
                yield pickle.load(f)
            except EOFError:
                return


def remove_area(out_dir: str | Path, area: str) -> None:
    """Remove a build's spill folder (what is left in it once its shards are taken: empty folders)."""
    shutil.rmtree(work_dir(out_dir) / area, ignore_errors=True)


def clean_spills(out_dir: str | Path) -> list[Path]:
    """Remove the spill folders of builds whose process no longer runs (killed mid-build)."""
    removed = []
    root = work_dir(out_dir)
    for path in root.glob("spill-*-*") if root.is_dir() else ():
        match = _AREA.fullmatch(path.name)
        if match and path.is_dir() and not psutil.pid_exists(int(match.group(1))):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


_AREA = re.compile(r"spill-(\d+)-[0-9a-f]+")


#: One reader at a time: shard tasks start together (four threads asking for one task's pool at
#: once), and `lru_cache` would let each of them miss and unpickle its own copy.
_LOADING = threading.Lock()


def load(ref: str) -> Any:
    """The value a `store` path holds (read once per process while it is among the last few used,
    also when several threads ask for it at once)."""
    mtime = os.stat(ref).st_mtime_ns
    with _LOADING:
        return _load(ref, mtime)


@lru_cache(maxsize=4)
def _load(ref: str, _mtime_ns: int) -> Any:
    return pickle.loads(Path(ref).read_bytes())


def load_lists(ref: str) -> list[Any]:
    """The lists an `Appender` wrote to `ref`, joined into one list (none: an empty list), kept as
    `load` keeps a value (one object per file and process, so what a consumer derives from it and
    keys by identity is derived once)."""
    if not os.path.exists(ref):
        return []
    mtime = os.stat(ref).st_mtime_ns
    with _LOADING:
        return _load_lists(ref, mtime)


@lru_cache(maxsize=4)
def _load_lists(ref: str, _mtime_ns: int) -> list[Any]:
    return [value for batch in replay(Path(ref)) for value in batch]


def forget() -> None:
    """Drop the values this process holds (the flow calls it once a stage is done)."""
    _load.cache_clear()
    _load_lists.cache_clear()


__all__ = [
    "clean_spills",
    "forget",
    "load",
    "load_lists",
    "remove_area",
    "run_task",
    "spill",
    "spill_area",
    "store",
    "take",
    "work_dir",
]
