"""Adversarial filtering of a build's spilled questions, a block at a time (`filter_questions`).

A task's generated questions are spilled shard by shard (`flows.work.spill`). The filter reads them
twice, then its blocks' outputs once, and holds one block (at most `adversarial.block_items`
questions, with their reserve candidates) per worker:
1. the ids of the task's MCQ questions: the blocks are dealt from them as `blocks_of` deals them;
2. each question goes to its block's file, tagged with where it was posed (shard, place); a
   completion question, which the filter leaves alone, to the task's pass-through file;
3. each block is filtered by a `filter_block` task (sorted by id, as `adversarial_filter` filters
   it), which writes the kept questions, in the order they were posed, to a file of its own: on
   Dask the workers filter blocks side by side and the flow process holds paths, stats and
   Problems; on threads one block at a time (a block's scoring holds the GIL most of the time:
   four 900-item blocks two at a time on threads took as long as one after the other, 16.4-17.5
   against 15.3-17.2 s, for twice the stage's memory);
4. the pass-through file and the blocks' files, each in posed order, are merged into the task's
   output file (`Filtered`).
The output is `adversarial_filter`'s over the task's list: the same questions, order, Problems and
stats.

With the shard cache on (`limits.cache`, in a flow run), a block is keyed by its questions, the
places they were posed at, the seed, the task's spec, the filter's settings and version and the
bounds (`cache_keys.filter_key`): its kept questions are written to `<out_dir>/.cache/filter-blocks/<key>`
and its Problems and stats are the task's cached result, so a rebuild whose generated questions
did not change, or a build restarted after a kill, filters only the blocks not done before.
"""

from __future__ import annotations

import hashlib
import heapq
import operator
from pathlib import Path
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE
from prefect.context import FlowRunContext

from flows import cache_keys, stages, work
from flows.build_report import Timer
from flows.build_stages import _cached, _forget_shard, _gathered, _in_flight, _scenario_class, cache_dir
from flows.config import BuildConfig
from flows.finish import Filtered
from flows.io import atomic_path
from flows.problem_log import ProblemLog
from generators.quality.adversarial import Settings, TaskFilter, filter_task, merge_stats
from generators.quality.baselines import Bounds, deal_blocks
from generators.quality.scorers import forget_texts
from schemas import Question
from schemas.validity import AdversarialTask

#: The place (shard, position) where an entry's question was posed: the order of a task's output.
_place = operator.itemgetter(0, 1)


def _mcq(q: Question) -> bool:
    return q.form == "mcq" and bool(q.options)


def filter_questions(config: BuildConfig, posed: list[Any], timer: Timer) -> Filtered:
    """Adversarial filtering: swap distractors the baselines separate from the gold for reserve candidates.

    Before the gates and balancing, so swapped-in candidates are checked like the rest. One task at a
    time, in task-name order (the filter's own order of tasks), its blocks as `filter_block` tasks
    (see the module docstring). Each task's questions are written to a file of its own in the order
    they were posed; the files keep the scenario's order of tasks. `posed`: the generate stage's
    `Spilled` tasks.
    """
    area = work.spill_area()
    files = {s.task: work.spill_path(config.out_dir, area, f"filtered-{s.task}") for s in posed}
    counts: dict[str, int] = {}
    dropped = ProblemLog()
    tasks: dict[str, AdversarialTask] = {}
    with timer.stage("adversarial"):
        try:
            for spilled in sorted(posed, key=lambda s: s.task):
                counts[spilled.task], found, stats = _filter_task(
                    config, spilled.refs, area, files[spilled.task]
                )
                dropped += found
                tasks |= stats
        except BaseException:
            work.remove_area(config.out_dir, area)
            raise
        finally:  # taken or not (a failed build is rebuilt from the shard cache), the spills go
            for spilled_area in {s.area for s in posed}:
                work.remove_area(config.out_dir, spilled_area)
        posed.clear()
    return Filtered(area, files, counts, dropped, tasks)


def _filter_task(
    config: BuildConfig, refs: list[str], area: str, target: Path
) -> tuple[int, ProblemLog, dict[str, AdversarialTask]]:
    """One task's spilled shards filtered into `target`; its count of questions, drops and stats."""
    af = config.adversarial
    ids: list[str] = []
    reserve = False
    task_name = ""
    if af.enabled:
        for ref in refs:
            for q in work.peek(ref):
                if _mcq(q):
                    ids.append(q.item_id)
                    reserve = reserve or bool(q.reserve)
                    task_name = q.task
    count = 0
    with work.Appender() as out:
        if not ids or not reserve:  # nothing to filter: the questions pass (disabled: without reserve)
            for ref in refs:
                for q in work.take(ref):
                    out.add(
                        target, q if af.enabled or not q.reserve else q.model_copy(update={"reserve": ()})
                    )
                    count += 1
            return count, ProblemLog(), {task_name: AdversarialTask(items=len(ids))} if ids else {}
        passing = work.spill_path(config.out_dir, area, f"af-{target.name}-pass")
        in_flow = FlowRunContext.get() is not None
        cached = in_flow and config.limits.cache  # outside a flow run no result is cached
        blocks, contents = _deal(config, area, target.name, refs, ids, passing, keyed=cached)
        settings = stages.adversarial_settings(config)
        bounds = stages.adversarial_bounds(config, task_name)
        keys = [
            cache_keys.filter_key(config.scenario, task_name, config.seed, settings, bounds, c)
            if cached
            else ""
            for c in contents
        ]
        kept_dir = cache_dir(config, "filter-blocks")
        if cached:
            kept_dir.mkdir(parents=True, exist_ok=True)
        outs = [
            kept_dir / key if key else block.with_name(f"{block.name}-kept")
            for block, key in zip(blocks, keys, strict=True)
        ]
        calls = [
            (config.scenario, str(block), str(kept), config.seed, settings, bounds, key)
            for block, kept, key in zip(blocks, outs, keys, strict=True)
        ]
        if in_flow:
            window = 1 if config.limits.task_runner == "threads" else _in_flight(config)
            block_task = _cached(filter_block, config)
            done = _gathered((block_task.submit(*call) for call in calls), window)
        else:  # outside a flow run (unit tests call `filter_questions`): in place, a block at a time
            done = (filter_block.fn(*call) for call in calls)
        problems = ProblemLog()  # each block's as one byte string
        parts = []
        for call, (found, st) in zip(calls, done, strict=True):
            if not Path(call[2]).exists():  # a cached result whose kept file is gone: filter it again
                _forget_shard(config, call[-1])
                found, st = filter_block.fn(*call)
            problems += found
            parts.append(st)
        # each block's kept questions and the pass-through ones are in the order they were posed:
        # one merge puts the task's questions back in that order, a question per file held
        in_order = heapq.merge(*(work.replay(path) for path in [passing, *outs]), key=_place)
        for _, _, q in in_order:
            out.add(target, q)
            count += 1
        for path in [passing, *(kept for kept, key in zip(outs, keys, strict=True) if not key)]:
            path.unlink(missing_ok=True)  # a cached block's kept file stays with its cached result
    return count, problems, {task_name: merge_stats(parts).report()}


@task(name="filter-block", cache_policy=NO_CACHE)
def filter_block(
    scenario: str, block: str, kept: str, seed: int, settings: Settings, bounds: Bounds, cache_key: str = ""
) -> tuple[ProblemLog, TaskFilter]:
    """Filter one block (`block`: its spill file of (shard, place, question) entries, read where the
    task runs) and write the kept questions, as such entries in the order they were posed, to `kept`
    (atomically: a task redone after a lost worker rewrites it whole); the block's Problems and stats.
    The block's file goes once its output is written. `cache_key` names the result when the shard
    cache is on (`kept` is then the cache's file of the block)."""
    _scenario_class(scenario)  # a Dask worker is another process: its discovery registers the TaskSpecs
    where = {}
    questions = []
    for shard, pos, q in work.replay(Path(block)):
        where[q.item_id] = (shard, pos)
        questions.append(q)
    questions.sort(key=lambda q: q.item_id)
    passed, found, stats = filter_task(questions, seed, settings, bounds)
    del questions
    forget_texts()  # the next block shows other texts
    entries = sorted(((*where[q.item_id], q) for q in passed), key=_place)
    with atomic_path(kept) as tmp, work.Appender() as out:
        for entry in entries:
            out.add(tmp, entry)
    Path(block).unlink(missing_ok=True)
    return ProblemLog(found), stats


def _deal(
    config: BuildConfig,
    area: str,
    name: str,
    refs: list[str],
    ids: list[str],
    passing: Path,
    keyed: bool = False,
) -> tuple[list[Path], list[str]]:
    """Each question of the shards to its block's file (MCQ) or the pass-through file (completion),
    tagged with its place (shard, position); the block files, in block order, and (`keyed`) each
    block's content digest: its entries' places and questions' JSON, in the order written."""
    keys = sorted(ids)
    parts = deal_blocks(keys, config.seed, config.adversarial.block_items, salt="af-block")
    block_of = {keys[i]: b for b, part in enumerate(parts) for i in part}
    files = [work.spill_path(config.out_dir, area, f"af-{name}-block-{b:06d}") for b in range(len(parts))]
    digests = [hashlib.sha256() for _ in parts] if keyed else []
    with work.Appender() as out:
        for shard, ref in enumerate(refs):
            for pos, q in enumerate(work.take(ref)):
                if not _mcq(q):
                    out.add(passing, (shard, pos, q))
                    continue
                b = block_of[q.item_id]
                out.add(files[b], (shard, pos, q))
                if keyed:
                    digests[b].update(f"{shard}\x1f{pos}\x1f{q.model_dump_json()}\x00".encode())
    return files, [d.hexdigest() for d in digests] if keyed else [""] * len(files)


__all__ = ["filter_questions"]
