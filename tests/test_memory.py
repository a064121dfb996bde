"""`release_memory`: the heap a stage freed goes back to the operating system."""

from __future__ import annotations

import sys

import psutil
import pytest

from flows.memory import release_memory


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="malloc_trim is glibc's")
def test_freed_heap_blocks_go_back_to_the_os():
    proc = psutil.Process()
    release_memory()
    base = proc.memory_info().rss
    # blocks too large for Python's own small-object arenas, too small for their own mappings:
    # glibc's heap, as a stage's arrays and texts are; a few kept after them pin the heap's top
    held = [bytes([i % 256]) * 2000 for i in range(100_000)]
    pin = [bytes([1]) * 2000 for _ in range(10)]
    grown = proc.memory_info().rss - base
    assert grown > 150 << 20
    held.clear()
    del held
    kept = proc.memory_info().rss - base
    assert kept > grown / 2  # freed, but still resident: what the build held after its stages
    assert release_memory()
    returned = proc.memory_info().rss - base
    assert returned < grown / 4, (grown >> 20, kept >> 20, returned >> 20)
    assert len(pin) == 10


def test_arrows_freed_buffers_go_back_to_the_os():
    """Arrow's pool (mimalloc or jemalloc) keeps the pages of freed buffers until asked: the Parquet
    the build writes and reads back would stay resident through every later stage."""
    import pyarrow as pa

    proc = psutil.Process()
    release_memory()
    base = proc.memory_info().rss
    held = [pa.array([f"row {i} " * 40 for i in range(j, j + 2000)]) for j in range(0, 400_000, 2000)]
    pin = [pa.array([f"pin {i} " * 40 for i in range(2000)]) for _ in range(3)]
    grown = proc.memory_info().rss - base
    assert grown > 150 << 20
    held.clear()
    del held
    release_memory()
    returned = proc.memory_info().rss - base
    assert returned < grown / 3, (pa.default_memory_pool().backend_name, grown >> 20, returned >> 20)
    assert len(pin) == 3
