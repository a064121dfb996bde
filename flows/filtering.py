"""Adversarial filtering of a build's spilled questions, a block at a time (`filter_questions`).

A task's generated questions are spilled shard by shard (`flows.work.spill`). The filter reads them
three times and holds one block (at most `adversarial.block_items` questions, with their reserve
candidates) or one shard at a time:
1. the ids of the task's MCQ questions: the blocks are dealt from them as `blocks_of` deals them;
2. each question goes to its block's file (a completion question, which the filter leaves alone,
   to the file of its shard), tagged with where it was posed;
3. each block is filtered (sorted by id, as `adversarial_filter` filters it), its kept questions go
   to the files of their shards; then each shard's kept questions, in the order they were posed, go
   to the task's output file (`Filtered`).
The output is `adversarial_filter`'s over the task's list: the same questions, order, Problems and
stats.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from flows import stages, work
from flows.build_report import Timer
from flows.config import BuildConfig
from flows.finish import Filtered
from flows.problem_log import ProblemLog
from generators.quality.adversarial import filter_task, merge_stats
from generators.quality.baselines import deal_blocks
from generators.quality.scorers import forget_texts
from schemas import Question
from schemas.validity import AdversarialTask


def _mcq(q: Question) -> bool:
    return q.form == "mcq" and bool(q.options)


def filter_questions(config: BuildConfig, posed: list[Any], timer: Timer) -> Filtered:
    """Adversarial filtering: swap distractors the baselines separate from the gold for reserve candidates.

    Before the gates and balancing, so swapped-in candidates are checked like the rest. One task at a
    time, in task-name order (the filter's own order of tasks), one block at a time (see the module
    docstring). Each task's questions are written to a file of its own in the order they were posed;
    the files keep the scenario's order of tasks. `posed`: the generate stage's `Spilled` tasks.
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
    task = ""
    if af.enabled:
        for ref in refs:
            for q in work.peek(ref):
                if _mcq(q):
                    ids.append(q.item_id)
                    reserve = reserve or bool(q.reserve)
                    task = q.task
    count = 0
    with work.Appender() as out:
        if not ids or not reserve:  # nothing to filter: the questions pass (disabled: without reserve)
            for ref in refs:
                for q in work.take(ref):
                    out.add(
                        target, q if af.enabled or not q.reserve else q.model_copy(update={"reserve": ()})
                    )
                    count += 1
            return count, ProblemLog(), {task: AdversarialTask(items=len(ids))} if ids else {}
        kept = {
            i: work.spill_path(config.out_dir, area, f"af-{target.name}-shard-{i:06d}")
            for i in range(len(refs))
        }
        blocks = _deal(config, area, target.name, refs, ids, kept)
        problems = ProblemLog()  # each block's as one byte string
        parts = []
        settings = stages.adversarial_settings(config)
        bounds = stages.adversarial_bounds(config, task)
        for block_file in blocks:  # a block's input goes once its output is made
            where = {}
            block = []
            for shard, pos, q in work.replay(block_file):
                where[q.item_id] = (shard, pos)
                block.append(q)
            block_file.unlink()
            block.sort(key=lambda q: q.item_id)
            passed, found, st = filter_task(block, config.seed, settings, bounds)
            del block
            forget_texts()  # the next block shows other texts
            for q in passed:
                shard, pos = where[q.item_id]
                out.add(kept[shard], (pos, q))
            problems += found
            parts.append(st)
        out.close()
        for path in kept.values():  # each shard's kept questions in the order they were posed
            for _, q in sorted(work.replay(path), key=lambda entry: entry[0]):
                out.add(target, q)
                count += 1
            path.unlink(missing_ok=True)
    return count, problems, {task: merge_stats(parts).report()}


def _deal(
    config: BuildConfig, area: str, name: str, refs: list[str], ids: list[str], kept: dict[int, Path]
) -> list[Path]:
    """Each question of the shards to its block's file (MCQ) or its shard's kept file (completion),
    tagged with its place; the block files, in block order."""
    keys = sorted(ids)
    parts = deal_blocks(keys, config.seed, config.adversarial.block_items, salt="af-block")
    block_of = {keys[i]: b for b, part in enumerate(parts) for i in part}
    files = [work.spill_path(config.out_dir, area, f"af-{name}-block-{b:06d}") for b in range(len(parts))]
    with work.Appender() as out:
        for shard, ref in enumerate(refs):
            for pos, q in enumerate(work.take(ref)):
                if _mcq(q):
                    out.add(files[block_of[q.item_id]], (shard, pos, q))
                else:
                    out.add(kept[shard], (pos, q))
    return files


__all__ = ["filter_questions"]
