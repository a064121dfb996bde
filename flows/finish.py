"""The build's last question stages, streamed through files under `<out_dir>/.work/` one task at a time.

Filtering leaves each task's questions in a file of its own (`Filtered`). From there:
- redaction learns over every question (a batch at a time, releasing the texts between batches), then
  redacts them, each question as it is read, in the order they were posed;
- each task's redacted questions are dealt by item id into buckets of about `BUCKET_ITEMS` (item ids
  are uniform hex, so the buckets in turn, each sorted, are the task in id order); dedup (MinHash
  signatures only), the per-item gates and the contamination check read them in id order;
- gold positions are chosen from what balancing needs of every item (`Slot`s: id, task, number of
  options), and applied as the questions are read again (`FinalQuestions`) by the write and enqueue
  stages.
So the build holds a bucket of questions, signatures, ids and counts, never the build's questions
(the contamination check, when configured, takes one task's questions at a time). Outputs are the
ones the in-memory stages made: same order of items and of Problems, same positions.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import prefect
from prefect.cache_policies import NO_CACHE

from extractors.discovery import discover_extractors
from flows import hygiene, work
from flows.build_report import Timer
from flows.config import BuildConfig
from flows.problem_log import ProblemLog
from generators.hygiene.dedup import ItemDedup, TaskDedup
from generators.hygiene.scrub import QuestionScrub, redact_question, redacted_texts
from generators.hygiene.secrets import Redactor
from generators.quality.balance import Slot, place, positions_for, slot_of
from generators.quality.gates import check_question
from schemas import Problem, Question
from schemas.report import ContaminationReport
from schemas.validity import AdversarialTask

#: Questions per bucket of the id-order pass (about; the buckets are as many as the task needs).
BUCKET_ITEMS = 2048
#: Questions whose texts redaction learns in one batch before it releases them.
LEARN_BATCH = 512
_HEX = frozenset("0123456789abcdef")


class Filtered(NamedTuple):
    """Questions after adversarial filtering, one file per task (`work.replay`; the scenario's order
    of tasks, each task's questions in the order they were posed), the items it dropped, and what it
    did per task. The files are in `area` (`work.spill_area`)."""

    area: str
    files: dict[str, Path]
    counts: dict[str, int]
    problems: ProblemLog
    tasks: dict[str, AdversarialTask]


class FinalQuestions:
    """The questions that passed, on disk: per task (in task-name order) in item-id order, their gold
    positions applied as they are read. Read as often as needed; `remove` drops the files."""

    def __init__(
        self, out_dir: str, area: str, files: dict[str, Path], positions: dict[str, int], seed: int
    ) -> None:
        self.out_dir, self.area, self.files = out_dir, area, files
        self.positions, self.seed = positions, seed
        self.counts: dict[str, int] = {}

    def of(self, task: str) -> Iterator[Question]:
        """One task's questions, in item-id order."""
        path = self.files.get(task)
        for q in work.replay(path) if path is not None else ():
            pos = self.positions.get(q.item_id)
            yield q if pos is None else place(q, pos, self.seed)

    def __iter__(self) -> Iterator[Question]:
        for task in self.files:
            yield from self.of(task)

    def __len__(self) -> int:
        return sum(self.counts.values())

    def remove(self) -> None:
        work.remove_area(self.out_dir, self.area)


class Final(NamedTuple):
    """Questions that passed redaction, dedup, gates and contamination, in balanced gold positions."""

    questions: FinalQuestions
    redacted: QuestionScrub
    deduped: ItemDedup
    contamination: hygiene.ContaminationStage
    problems: list[Problem]


def _learn(redactor: Redactor, batch: list[Question], clean: bytearray) -> None:
    """Learn the batch's texts; a byte per question in `clean`, 1 when none of its texts had findings."""
    found = redactor.learn_groups(redacted_texts(q) for q in batch)
    clean.extend(not f for f in found)
    redactor.release()  # the batch's texts go; the digests of those with findings and the values stay
    batch.clear()


def _bucket(item_id: str, n: int) -> int:
    return int(item_id[:8], 16) * n >> 32


def _buckets(count: int, hex_ids: bool) -> int:
    return max(1, -(-count // BUCKET_ITEMS)) if hex_ids else 1


def finish_questions(config: BuildConfig, filtered: Filtered, redactor: Redactor, timer: Timer) -> Final:
    """Redact, drop duplicates, run the gates and the contamination check, balance the gold positions."""
    with timer.stage("redact"):
        redacted = _redact(config, filtered, redactor)
    checked, deduped, check_problems = _dedup_and_check(config, filtered.area, redacted.buckets, timer)
    with timer.stage("contamination"):
        contamination = _contamination(config, checked)
        final = FinalQuestions(config.out_dir, filtered.area, checked, {}, config.seed)
        slots: list[Slot] = []
        for task in checked:
            for q in work.replay(checked[task]):
                final.counts[task] = final.counts.get(task, 0) + 1
                if (slot := slot_of(q)) is not None:
                    slots.append(slot)
        final.positions = positions_for(slots, config.seed)
    problems = redacted.scrub.problems + deduped.problems + check_problems + contamination.problems
    return Final(final, redacted.scrub, deduped, contamination, problems)


class _Redacted(NamedTuple):
    scrub: QuestionScrub  # counts and Problems (the questions are in the buckets)
    buckets: dict[str, int]  # per task (the scenario's order), its number of id buckets


def _redact(config: BuildConfig, filtered: Filtered, redactor: Redactor) -> _Redacted:
    """Learn over every question's texts, then redact each into its task's id bucket."""
    hex_ids: dict[str, bool] = {}
    batch: list[Question] = []
    # a byte per question in replay order: the redact pass below reads the same files in that order,
    # and a question none of whose texts had findings is not scanned again (only known values)
    clean = bytearray()
    for task, path in filtered.files.items():
        ok = True
        for q in work.replay(path):
            ok = ok and len(q.item_id) >= 8 and _HEX.issuperset(q.item_id[:8])
            batch.append(q)
            if len(batch) >= LEARN_BATCH:
                _learn(redactor, batch, clean)
        hex_ids[task] = ok
    _learn(redactor, batch, clean)
    seq = 0
    total: Counter[str] = Counter()
    problems: list[Problem] = []
    buckets: dict[str, int] = {}
    with work.Appender() as out:
        for task, path in filtered.files.items():
            n = buckets[task] = _buckets(filtered.counts[task], hex_ids[task])
            for q in work.replay(path):
                red, counts, problem = redact_question(q, redactor, scanned=bool(clean[seq]))
                seq += 1
                if red is None:
                    assert problem is not None
                    problems.append(problem)
                    continue
                total.update(counts)
                b = _bucket(red.item_id, n) if n > 1 else 0
                out.add(work.spill_path(config.out_dir, filtered.area, f"redacted-{task}-{b:05d}"), red)
            path.unlink(missing_ok=True)
    return _Redacted(QuestionScrub([], total, problems), buckets)


class _Checked(NamedTuple):
    """What the dedup-and-check task returns of one task: the file of its questions that passed, the
    Problems of each stage, the duplicates' counts and the seconds of each stage."""

    path: Path
    dedup_problems: list[Problem]
    check_problems: list[Problem]
    exact: int
    near: int
    seconds: dict[str, float]


@prefect.task(name="dedup-and-check", cache_policy=NO_CACHE)
def dedup_and_check_task(
    out_dir: str, area: str, task: str, buckets: int, threshold: float, num_perm: int
) -> _Checked:
    """One task (of `buckets` redacted id buckets) in id order, bucket by bucket: duplicates dropped
    (against the task's MinHash signatures so far), then the per-item gates; what passes goes to the
    task's `checked-` file. Where the task runs (on Dask a worker) holds the task's signatures, not the
    flow."""
    discover_extractors()  # the gates read each item's context through its task's spec
    timer = Timer()
    dedup = TaskDedup(threshold, num_perm)
    dedup_problems: list[Problem] = []
    check_problems: list[Problem] = []
    checked = work.spill_path(out_dir, area, f"checked-{task}")
    with work.Appender() as out:
        for b in range(buckets):
            path = work.spill_path(out_dir, area, f"redacted-{task}-{b:05d}")
            with timer.stage("dedup"):
                kept = []
                for q in sorted(work.replay(path), key=lambda q: q.item_id):
                    problem = dedup.offer(q)
                    if problem is None:
                        kept.append(q)
                    else:
                        dedup_problems.append(problem)
                path.unlink(missing_ok=True)
            with timer.stage("check"):
                for q in kept:
                    found = check_question(q)
                    check_problems.extend(found)
                    if not any(p.severity == "error" for p in found):
                        out.add(checked, q)
                del kept
    return _Checked(checked, dedup_problems, check_problems, dedup.exact, dedup.near, timer.seconds)


def _dedup_and_check(
    config: BuildConfig, area: str, buckets: dict[str, int], timer: Timer
) -> tuple[dict[str, Path], ItemDedup, list[Problem]]:
    """Each task (in name order) deduplicated and checked by its own task (`dedup_and_check_task`),
    one after the other."""
    dedup_problems: list[Problem] = []
    check_problems: list[Problem] = []
    exact = near = 0
    checked: dict[str, Path] = {}
    for task in sorted(buckets):
        done = work.run_task(
            dedup_and_check_task,
            str(config.out_dir),
            area,
            task,
            buckets[task],
            config.dedup.near_duplicate_threshold,
            config.dedup.num_perm,
        )
        checked[task] = done.path
        dedup_problems += done.dedup_problems
        check_problems += done.check_problems
        exact += done.exact
        near += done.near
        for stage, seconds in done.seconds.items():
            timer.add(stage, seconds)
    return checked, ItemDedup([], dedup_problems, exact, near), check_problems


def _contamination(config: BuildConfig, files: dict[str, Path]) -> hygiene.ContaminationStage:
    """The contamination check, one task's questions at a time (each task's file rewritten with the
    items kept when flagged ones are dropped); one report over the tasks."""
    cc = config.contamination
    if not cc.reference and not cc.previous_versions:
        return hygiene.ContaminationStage([], [], ContaminationReport())
    index, load_problems = hygiene.load_index(cc)
    problems = list(load_problems)
    report = hygiene.contamination_stage([], cc, (index, [])).report  # the counts added task by task
    for path in files.values():
        questions = list(work.replay(path))
        stage = hygiene.contamination_stage(questions, cc, (index, []))
        problems += stage.problems
        part = stage.report
        report = part.model_copy(
            update={
                "flagged": report.flagged + part.flagged,
                "dropped": report.dropped + part.dropped,
                "by_task": report.by_task | part.by_task,
            }
        )
        if len(stage.kept) != len(questions):
            path.unlink()
            with work.Appender() as out:
                for q in stage.kept:
                    out.add(path, q)
        del questions
    return hygiene.ContaminationStage([], problems, report)


__all__ = ["BUCKET_ITEMS", "Filtered", "Final", "FinalQuestions", "finish_questions"]
