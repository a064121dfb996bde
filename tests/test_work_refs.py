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


def test_a_spilled_shard_is_read_once_and_its_file_goes(tmp_path):
    pool = [PoolEntry(f"s{i}", f"t{i}", "g", f"I need to fix bug {i}") for i in range(3)]
    area = work.spill_area()
    assert area != work.spill_area() and area.startswith(f"spill-{os.getpid()}-")  # one per build
    refs = [work.spill(tmp_path, area, "questions-plan", i, pool[i:]) for i in range(2)]
    folder = work.work_dir(tmp_path) / area / "questions-plan"
    assert refs == [str(folder / "000000.pkl"), str(folder / "000001.pkl")]
    assert sorted(p.name for p in folder.iterdir()) == ["000000.pkl", "000001.pkl"]  # no temp left
    assert work.take(refs[1]) == pool[1:]
    assert [p.name for p in folder.iterdir()] == ["000000.pkl"]  # taken: its file is gone
    assert work.take(refs[0]) == pool and not any(folder.iterdir())
    work.remove_area(tmp_path, area)
    assert not (work.work_dir(tmp_path) / area).exists()


def test_the_spills_of_a_killed_build_are_removed_and_those_of_a_running_one_kept(tmp_path):
    import subprocess
    import sys

    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    dead = f"spill-{int(gone.stdout)}-00ff00ff00ff"
    alive = work.spill_area()
    for area in (dead, alive):
        work.spill(tmp_path, area, "questions-plan", 0, [1, 2])
    (work.work_dir(tmp_path) / "pool-plan-k1.pkl").write_bytes(b"")  # not a spill: left alone
    assert work.clean_spills(tmp_path) == [work.work_dir(tmp_path) / dead]
    assert sorted(p.name for p in work.work_dir(tmp_path).iterdir()) == sorted([alive, "pool-plan-k1.pkl"])


def test_the_reports_rows_are_read_from_the_written_parquet_a_batch_at_a_time(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq
    import pytest

    from flows.build_stages import CandidateRows, ParquetRows

    rows = [
        {"item_id": f"i{k:04d}", "options": [f"a{k}", f"b{k}"], "gold_index": k % 2, "fields": {"x": str(k)}}
        for k in range(2500)
    ]
    folder = tmp_path / "candidates"
    folder.mkdir()
    pq.write_table(pa.Table.from_pylist(rows), folder / "plan.parquet", row_group_size=1000)
    table = CandidateRows(folder, {"plan": len(rows)})
    got = table["plan"]
    assert isinstance(got, ParquetRows) and len(got) == 2500
    got.BATCH = 7  # batches that end inside and across row groups
    assert list(got) == rows and list(got) == rows  # every pass reads the file again
    assert got[3] == rows[3] and got[-2:] == rows[-2:]
    assert dict(table.counts) == {"plan": 2500} and list(table) == ["plan"]
    with pytest.raises(KeyError):
        table["action"]
