"""Handing freed memory back to the operating system between the build's stages.

The build lets go of each stage's input as the next takes over (the runs once extracted, the gold
steps once posed, the reserve candidates once filtered), but glibc's allocator keeps the freed heap
for reuse rather than returning it: after the adversarial stage of a 3,000-run build about 250 MiB
of freed memory stayed resident, and every later stage's peak came on top of it. `release_memory`
collects garbage and asks the allocator to return its free pages (`malloc_trim`, glibc only; on
other platforms and C libraries it is a garbage collection alone). Arrow's buffers (the Parquet the
build writes and reads back) come from its own pool, mimalloc or jemalloc, which also keeps freed
pages: after the write stage of a 2,000-run build about 50 MiB of them; it is asked to return them too.
A build also fixes glibc's mmap threshold (`bound_heap`), so its large arrays never settle in the
heap between small live objects, where no trim can return them.

While a build runs (`survivors_frozen`), what is alive at its start and at each stage boundary is
left out of later cyclic garbage collections (`gc.freeze`; refcounting still frees it): Python's
full collections otherwise walk every object of the process (Prefect's, the SDKs', the stages'
survivors) each time enough new ones survive. In the LLM generate stage one such pass took 0.4 s,
during which no reply was read: 16 requests in flight stalled for the whole pass.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import os
import re
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import lru_cache

#: Allocations of at least this many bytes get pages of their own, returned to the OS when freed
#: (`bound_heap`).
MMAP_THRESHOLD = 1 << 20
_M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter


@lru_cache(maxsize=1)
def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None


def bound_heap() -> bool:
    """Fix glibc's mmap threshold at `MMAP_THRESHOLD` for this process; whether it was set.

    glibc maps a large block on its own, but each time one is freed it raises the size from which
    it does so (up to 32 MiB), so a build's later arrays of 1-32 MiB (gram counts, feature rows,
    Arrow buffers) come from the heap, where freed blocks stay resident between small live ones:
    at 5,000 runs the audit peaked 126 MiB and the filter 113 MiB higher than with the threshold
    fixed at 1 MiB (20,000 runs, with 2,048-row Parquet groups: the process tree's peak 1,584 ->
    1,401 MiB). The cost is a fresh mapping (page faults) for every such array: adversarial
    filtering takes about 10% longer on the real DR build's block, 20% on a 900-item block of
    small runs (163,000 minor faults against 6,000).
    Left alone where `MALLOC_MMAP_THRESHOLD_` is set (the operator's choice) and off glibc."""
    libc = _libc()
    mallopt = getattr(libc, "mallopt", None) if libc is not None else None
    if mallopt is None or "MALLOC_MMAP_THRESHOLD_" in os.environ or _malloc_trim() is None:
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD))


@lru_cache(maxsize=1)
def _malloc_trim() -> Callable[[int], int] | None:
    libc = _libc()
    if libc is None:
        return None
    trim = getattr(libc, "malloc_trim", None)  # glibc's; musl has none
    if trim is None:
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


#: The caches of per-text results a build's stages fill (`functools` caches, bounded in entries,
#: not bytes): at scale each fills up with the texts of shards and blocks long gone and their results
#: (65,536 option texts and a tuple of floats each), made among those shards' objects. Emptied
#: between stages (`release_memory`); the scorers' between blocks too (`scorers.forget_texts`).
TEXT_CACHES = (
    ("extractors.shell.commands", "_words"),
    ("extractors.swe_issue_fix.plans", "_entities"),
    ("generators.offline", "_norm"),
    ("generators.offline", "_option_tokens"),
    ("generators.text", "normalised_similarity"),
    ("generators.quality.scorers", "step_kinds"),
    ("generators.quality.scorers", "shape_features"),
)


def empty_text_caches() -> None:
    """Empty every cache of `TEXT_CACHES` whose module is loaded (nothing is imported for it)."""
    for module, name in TEXT_CACHES:
        loaded = sys.modules.get(module)
        if loaded is not None:
            getattr(loaded, name).cache_clear()


def forget_task_results() -> int:
    """Drop what the running Prefect flow run records of its finished tasks' results; how many it held.

    A flow run keeps, for the whole run, an entry per task result (`FlowRunContext.run_results`: the
    result's id, a copy of its final state and details, to tie a later task's inputs to it) and a set
    of assets per task run (`task_run_assets`). A build submits a task per shard and stage (about
    600 at 20,000 runs) and hands results on as paths, never as those objects, so the entries serve
    nothing once a stage is gathered; made in the middle of the shards' work, each would keep the
    small-object arena it sits in from being returned. Nothing happens outside a flow run.
    """
    context = sys.modules.get("prefect.context")  # only if Prefect is loaded
    run = context.FlowRunContext.get() if context is not None else None
    if run is None:
        return 0
    held = len(run.run_results)
    run.run_results.clear()
    run.task_run_assets.clear()
    return held


def release_memory() -> bool:
    """Empty the per-text caches, the regular-expression cache and the flow run's record of task
    results (`forget_task_results`), collect garbage and return the allocator's free pages to the OS;
    whether the allocator could.

    `re` keeps the last 512 patterns compiled: per-name patterns of a stage's texts, made among that
    stage's objects."""
    empty_text_caches()
    re.purge()
    forget_task_results()
    gc.collect()
    if _FROZEN[0]:
        gc.freeze()  # the survivors of the stages so far: later passes walk the next stage's objects only
    arrow = sys.modules.get("pyarrow")  # only if the build has used Arrow (importing it costs memory)
    if arrow is not None:
        arrow.default_memory_pool().release_unused()
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True


#: How many builds of this process are inside `survivors_frozen` (a count: builds may nest or overlap).
_FROZEN = [0]
_FROZEN_LOCK = threading.Lock()


@contextmanager
def survivors_frozen() -> Iterator[None]:
    """Within the block, what is alive now and at each `release_memory` is frozen (`gc.freeze`: left
    out of cyclic collections, still freed by refcounting); when the last such block ends, it is all
    unfrozen, so any cycle among it is collected as usual."""
    with _FROZEN_LOCK:
        _FROZEN[0] += 1
    gc.freeze()
    try:
        yield
    finally:
        with _FROZEN_LOCK:
            _FROZEN[0] -= 1
            if not _FROZEN[0]:
                gc.unfreeze()


__all__ = [
    "MMAP_THRESHOLD",
    "TEXT_CACHES",
    "bound_heap",
    "empty_text_caches",
    "forget_task_results",
    "release_memory",
    "survivors_frozen",
]
