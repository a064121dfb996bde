"""Helpers of the eval tests: a release with a held-aside few-shot split, request counting."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq


def ensure_fewshot(folder: Path, n: int = 3) -> None:
    """Give every config without a `fewshot` split one: its first `n` test rows move there."""
    for config in sorted(p for p in (folder / "data").iterdir() if p.is_dir()):
        if any(config.glob("fewshot-*.parquet")):
            continue
        test = config / "test-00000-of-00001.parquet"
        table = pq.read_table(test)
        order = sorted(range(table.num_rows), key=lambda i: table.column("item_id")[i].as_py())
        pq.write_table(table.take(order[:n]), config / "fewshot-00000-of-00001.parquet")
        pq.write_table(table.take(order[n:]), test)
