"""Shard references: what every shard of a stage reads is written once under `<out_dir>/.work/`.

A value every shard of a stage needs (a task's distractor pool, what the scenario observed of every
labelled run) is written once, atomically, to a file named by its content key, and each shard task
gets the file's PATH. So submitting N shards costs N short strings, not N copies of the value: on
Dask a worker reads the file itself (`out_dir` is a shared folder there) instead of the flow
serialising the value into every task, and on threads the flow process loads it once. A process
keeps the last few values it loaded (`load`), keyed by path and modification time.
"""

from __future__ import annotations

import os
import pickle
from functools import lru_cache
from pathlib import Path
from typing import Any

from flows.io import atomic_path


def work_dir(out_dir: str | Path) -> Path:
    """`<out_dir>/.work`: the build's intermediate files (safe to delete between builds)."""
    return Path(out_dir).resolve() / ".work"


def store(out_dir: str | Path, kind: str, key: str, value: Any) -> str:
    """Write `value` to `<out_dir>/.work/<kind>-<key>.pkl` (atomically; rewritten by every build, so a
    file never outlives the code that wrote it) and return the path to hand to shard tasks."""
    path = work_dir(out_dir) / f"{kind}-{key}.pkl"
    with atomic_path(path) as tmp:
        tmp.write_bytes(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
    return str(path)


def load(ref: str) -> Any:
    """The value a `store` path holds (read once per process while it is among the last few used)."""
    return _load(ref, os.stat(ref).st_mtime_ns)


@lru_cache(maxsize=4)
def _load(ref: str, _mtime_ns: int) -> Any:
    return pickle.loads(Path(ref).read_bytes())


def forget() -> None:
    """Drop the values this process holds (the flow calls it once a stage is done)."""
    _load.cache_clear()


__all__ = ["forget", "load", "store", "work_dir"]
