"""Atomic writes: every output file is written to a temp file beside it, then `os.replace`d.

A crash leaves either the old file or the new one, never half of one. Temp files are named
`.<target>.<pid>.<random>.tmp`, so the next run removes those of a process that is gone
(`clean_stale_temps`). Writes in flight are counted: a stopping CLI waits for them
(`wait_for_writes`) before it exits, so Ctrl-C and SIGTERM never cut a file in half.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psutil
import pyarrow as pa
import pyarrow.parquet as pq

_TEMP = re.compile(r"^\..+\.(\d+)\.[^.]+\.tmp$")
_writes = threading.Condition()
_in_flight = 0


@contextmanager
def atomic_path(target: str | Path) -> Iterator[Path]:
    """Yield a temp path in the target's folder; on success it replaces `target`."""
    global _in_flight
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    with _writes:
        _in_flight += 1
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.{os.getpid()}.", suffix=".tmp", dir=target.parent)
        os.close(fd)
        try:
            yield Path(tmp)
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    finally:
        with _writes:
            _in_flight -= 1
            _writes.notify_all()


def wait_for_writes(timeout: float) -> bool:
    """Block until no atomic write is in flight (or `timeout` passes); True when none is."""
    with _writes:
        return _writes.wait_for(lambda: _in_flight == 0, timeout)


def clean_stale_temps(folder: str | Path) -> list[Path]:
    """Remove temp files below `folder` left by an atomic write of a process that no longer runs."""
    removed: list[Path] = []
    root = Path(folder)
    if not root.is_dir():
        return removed
    for path in root.rglob(".*.tmp"):
        match = _TEMP.match(path.name)
        if match and path.is_file() and not psutil.pid_exists(int(match.group(1))):
            path.unlink(missing_ok=True)
            removed.append(path)
    return removed


def write_text(target: str | Path, text: str) -> None:
    """Atomically write a text file (UTF-8)."""
    with atomic_path(target) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_json(target: str | Path, data: Any) -> None:
    """Atomically write pretty JSON."""
    write_text(target, json.dumps(data, indent=2, ensure_ascii=False, sort_keys=False) + "\n")


def write_jsonl(target: str | Path, rows: Iterable[dict[str, Any]]) -> None:
    """Atomically write JSON Lines (`ensure_ascii=False`, default separators, like APTBench)."""
    with atomic_path(target) as tmp, tmp.open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")


_PARQUET = {"compression": "zstd", "use_dictionary": True, "write_statistics": True, "store_schema": True}


def write_parquet(target: str | Path, table: pa.Table) -> None:
    """Atomically write a Parquet file with deterministic settings (no timestamps in metadata)."""
    with atomic_path(target) as tmp:
        pq.write_table(table, tmp, **_PARQUET)


def write_parquet_batches(target: str | Path, tables: Iterable[pa.Table]) -> int:
    """Atomically write tables of one schema as one Parquet file, a row group per table (the settings
    of `write_parquet`, which writes the same bytes for a single table); the number of rows."""
    rows = 0
    with atomic_path(target) as tmp:
        writer = None
        try:
            for table in tables:
                if writer is None:
                    writer = pq.ParquetWriter(tmp, table.schema, **_PARQUET)
                writer.write_table(table)
                rows += table.num_rows
        finally:
            if writer is not None:
                writer.close()
        if writer is None:
            raise ValueError(f"{target}: no table to write (give one, empty, for a file of no rows)")
    return rows
