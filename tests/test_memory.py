"""`release_memory`: the heap a stage freed goes back to the operating system."""

from __future__ import annotations

import functools
import importlib
import os
import pkgutil
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from flows.memory import TEXT_CACHES, release_memory, survivors_frozen


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="malloc_trim is glibc's")
def test_a_builds_survivors_are_left_out_of_collections_until_it_ends_and_its_cycles_collected_after():
    """Within `survivors_frozen` what lives at its start and at each `release_memory` is frozen (full
    collections walk only what came since); nested blocks keep it until the outer ends; a cycle frozen
    meanwhile is collected once the block is over; outside a build `release_memory` freezes nothing."""
    import gc
    import weakref

    class Node:
        pass

    assert gc.get_freeze_count() == 0
    with survivors_frozen():
        at_start = gc.get_freeze_count()
        assert at_start > 0
        survivors = [[i] for i in range(5000)]  # tracked containers, alive at the stage boundary
        cycle = Node()
        cycle.me = cycle
        gone = weakref.ref(cycle)
        assert any(o is survivors[-1] for o in gc.get_objects())  # collections still see it
        release_memory()
        assert not any(o is survivors[-1] for o in gc.get_objects())  # frozen: they do not
        assert gc.get_freeze_count() > at_start
        del cycle
        gc.collect()
        assert gone() is not None  # frozen: no collection looks at it
        with survivors_frozen():
            pass
        assert not any(o is survivors[-1] for o in gc.get_objects())  # the outer block still runs
    assert gc.get_freeze_count() == 0
    gc.collect()
    assert gone() is None
    release_memory()
    assert gc.get_freeze_count() == 0


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
    # glibc's defaults: any MALLOC_ setting turns its dynamic threshold off (a Dask LocalCluster
    # started earlier in this process sets MALLOC_TRIM_THRESHOLD_ in its environment for its workers)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
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


def _caches_of(packages: tuple[str, ...]) -> dict[tuple[str, str], functools._lru_cache_wrapper]:
    found = {}
    for package in packages:
        for info in pkgutil.walk_packages(importlib.import_module(package).__path__, package + "."):
            module = importlib.import_module(info.name)
            for name, value in vars(module).items():
                if isinstance(value, functools._lru_cache_wrapper):
                    found[(info.name, name)] = value
    return found


def test_every_large_cache_of_texts_is_emptied_between_stages_and_the_scorers_between_blocks():
    """A cache bounded in entries fills up at scale with the texts of shards and blocks gone (65,536
    option texts and their features after a 20,000-run build): each one of a thousand entries or
    more (or unbounded) is in `TEXT_CACHES`, and `release_memory` empties it."""
    caches = _caches_of(("extractors", "generators", "flows", "schemas"))
    # keyed by one character, by nothing, by an eval prompt template: never by a build's texts
    others = {
        ("generators.quality.grams", "_is_word_char"),
        ("flows.eval_prompts", "_rouge"),
        ("flows.eval_prompts", "_template"),
    }
    large = {key for key, cache in caches.items() if (cache.cache_parameters()["maxsize"] or 1 << 30) >= 1024}
    assert others <= large
    large -= others
    # a cache imported by name elsewhere (`offline` uses `text.normalised_similarity`) is one cache
    listed = {id(caches[key]) for key in TEXT_CACHES}
    assert {key for key in large if id(caches[key]) not in listed} == set()
    assert set(TEXT_CACHES) <= large
    from extractors.shell import commands
    from extractors.swe_issue_fix import plans
    from generators import offline, text
    from generators.quality import scorers

    def fill() -> None:
        commands.words("git clone https://x/y && cd y")
        plans.entities("See `src/app.py` and def main():")
        offline._norm("Run the tests, then commit.")
        offline._option_tokens("Run the tests, then commit.")
        text.normalised_similarity("run the tests", "run the test")
        scorers.shape_features("1. clone the repo\n2. run pytest")
        scorers.step_kinds("1. clone the repo\n2. run pytest")

    fill()
    assert all(caches[key].cache_info().currsize > 0 for key in TEXT_CACHES)
    release_memory()
    assert all(caches[key].cache_info().currsize == 0 for key in TEXT_CACHES)
    fill()
    scorers.forget_texts()  # between blocks: the scorers' own
    assert scorers.shape_features.cache_info().currsize == scorers.step_kinds.cache_info().currsize == 0
    assert commands._words.cache_info().currsize > 0


def test_a_flow_runs_record_of_its_tasks_results_is_dropped_between_stages(prefect_harness):
    """Prefect keeps an entry per task result for the whole flow run (about 600 tasks at 20,000 runs):
    `release_memory` drops them, and the flow's later tasks still run and return."""
    from prefect import flow, task
    from prefect.context import FlowRunContext

    from flows.memory import forget_task_results

    @task
    def shard(i: int) -> list[int]:
        return [i, i + 1]

    @flow
    def stages() -> tuple[int, int, int, list[int]]:
        first = [f.result() for f in [shard.submit(i) for i in range(4)]]
        held = len(FlowRunContext.get().run_results)
        release_memory()
        left = len(FlowRunContext.get().run_results)
        again = forget_task_results()
        later = shard.submit(10).result()
        return held, left, again, [x for pair in first for x in pair] + later

    held, left, again, values = stages()
    assert held >= 4 and left == 0 and again == 0
    assert values == [0, 1, 1, 2, 2, 3, 3, 4, 10, 11]
    assert forget_task_results() == 0  # outside a flow run: nothing to drop
