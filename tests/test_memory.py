"""`release_memory`: the heap a stage freed goes back to the operating system."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

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


_MAPPED = """
import ctypes, sys
from flows.memory import bound_heap

class Info(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]

libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = Info
big = bytearray(20 << 20)
del big  # glibc now maps only blocks of 20 MiB and more on their own (its dynamic threshold)
bound = bound_heap() if sys.argv[1] == "bound" else False
before = libc.mallinfo2().hblks
block = bytearray(3 << 20)
print(int(bound), libc.mallinfo2().hblks - before)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mallopt is glibc's")
@pytest.mark.parametrize(("mode", "mapped"), [("free", 0), ("bound", 1)])
def test_a_bounded_heap_maps_large_blocks_on_their_own_after_a_larger_one_was_freed(mode, mapped):
    """Unbounded, glibc raises its mmap threshold each time a mapped block is freed, and the next
    3 MiB block comes from the heap (where, freed, it stays resident); bounded, it is mapped on its
    own, and goes back to the OS when freed."""
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_MMAP_THRESHOLD_"}
    out = subprocess.run(
        [sys.executable, "-c", _MAPPED, mode],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[1],
        env=env,
    ).stdout.split()
    assert out == [str(int(mode == "bound")), str(mapped)]
    env["MALLOC_MMAP_THRESHOLD_"] = str(64 << 20)  # the operator's own setting is left alone
    out = subprocess.run(
        [sys.executable, "-c", _MAPPED, mode],
        capture_output=True,
        text=True,
        check=True,
        env=env,
        cwd=Path(__file__).resolve().parents[1],
    ).stdout.split()
    assert out == ["0", "0"]
