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
