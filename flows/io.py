"""Atomic writes: every output file is written to a temp file beside it, then `os.replace`d.

A crash leaves either the old file or the new one, never half of one.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq


@contextmanager
def atomic_path(target: str | Path):
    """Yield a temp path in the target's folder; on success it replaces `target`."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


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


def write_parquet(target: str | Path, table: pa.Table) -> None:
    """Atomically write a Parquet file with deterministic settings (no timestamps in metadata)."""
    with atomic_path(target) as tmp:
        pq.write_table(
            table, tmp, compression="zstd", use_dictionary=True, write_statistics=True, store_schema=True
        )
