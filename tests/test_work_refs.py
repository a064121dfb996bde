"""Shard references (`flows.work`): a value every shard reads is written once and passed as a path."""

from __future__ import annotations

import os

from flows import work
from generators.base import PoolEntry


def test_a_stored_value_loads_back_from_its_path_and_a_rewrite_is_seen(tmp_path):
    pool = [PoolEntry(f"s{i}", f"t{i}", "g", f"I need to fix bug {i}") for i in range(3)]
    ref = work.store(tmp_path, "pool-plan", "k1", pool)
    assert ref == str(work.work_dir(tmp_path) / "pool-plan-k1.pkl") and os.path.isabs(ref)
    assert work.load(ref) == pool
    assert [p.name for p in work.work_dir(tmp_path).iterdir()] == ["pool-plan-k1.pkl"]  # no temp left
    stat = os.stat(ref)
    work.store(tmp_path, "pool-plan", "k1", pool[:1])
    os.utime(ref, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))  # a coarse clock: still a new file
    assert work.load(ref) == pool[:1]  # the cached value of the old file is not served
    work.forget()
