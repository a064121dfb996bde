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


def sample_release(root: Path, samples_dir: Path) -> Path:
    """The SWE sample release (every item accepted), with a few-shot split; returns its folder."""
    from annotations.queue import Queue
    from flows.config import load_config
    from flows.publish import prepare, write_release
    from tests.publish_support import build_report_for, questions

    repo = Path(__file__).resolve().parents[1]
    cfg = load_config(repo / "configs" / "swe_issue_fix.yaml", out_dir=root)
    queue = Queue(root / "queue.sqlite")
    queue.enqueue(questions(samples_dir), batch="b1")
    for row in queue.items(limit=10_000):
        queue.decide(row.item_id, "tester", "accept", seen=queue.seen(row.item_id, "tester"))
    files, _ = prepare(cfg, queue.verified(), build_report_for(cfg), None)
    folder = root / "release"
    write_release(folder, files)
    ensure_fewshot(folder)
    return folder
