"""The validity section of a build report, from the written candidate rows (pure functions).

Per MCQ task: every baseline of the quality section against its bound, the gold-position
histogram and its chi-square test, gold vs distractor option lengths (summaries and one shared
histogram), the shown distractors per source family (`schemas.candidate_source` of each
`distractor_origins` entry), what adversarial filtering did, and `samples` items drawn by the
seed, rendered as the reader sees them (context tail and lettered options with their origins).
"""

from __future__ import annotations

import random
import re
from array import array
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from generators.quality.gates import context_text
from schemas import CANDIDATE_SOURCES, LETTERS, candidate_source, content_id
from schemas.report import QualityReport, TaskQuality
from schemas.tasks import find_spec
from schemas.validity import (
    AdversarialTask,
    BaselineBound,
    LengthSummary,
    OptionLengths,
    PositionHistogram,
    SampleItem,
    SampleOption,
    TaskValidity,
    ValidityReport,
)

SAMPLES = 5
CONTEXT_TAIL = 1500


def _summary(values: np.ndarray) -> LengthSummary:
    if not len(values):
        return LengthSummary(n=0, mean=0.0, median=0.0, p10=0.0, p90=0.0)
    a = np.asarray(values, dtype=float)
    p10, median, p90 = (round(float(x), 1) for x in np.percentile(a, [10, 50, 90]))
    return LengthSummary(n=len(values), mean=round(float(a.mean()), 1), median=median, p10=p10, p90=p90)


class _Tally:
    """What the validity section counts of a task's MCQ rows, added one row at a time: the option
    lengths (machine integers, not a Python object each), the distractor sources, the patch overlap
    and each row's item id (for the sample). The section reads a task's rows as they come, never
    holding them: once for these, once more for the `SAMPLES` drawn (at 100,000 small runs a task
    has over 200,000 rows, each with its context)."""

    def __init__(self) -> None:
        self.gold, self.wrong = array("q"), array("q")
        self.longest = self.shortest = self.rows = 0
        self.sources: Counter[str] = Counter()
        self.hit = self.total = 0
        self.ids: list[str] = []

    def add(self, r: Mapping[str, Any]) -> None:
        options, gold_index = r["options"], r["gold_index"]
        lengths = [len(o) for o in options]
        g = lengths[gold_index]
        self.gold.append(g)
        self.wrong.extend(x for i, x in enumerate(lengths) if i != gold_index)
        self.longest += g == max(lengths) and lengths.count(g) == 1
        self.shortest += g == min(lengths) and lengths.count(g) == 1
        self.rows += 1
        for origin in r.get("distractor_origins") or ():
            family = candidate_source(str(origin))
            self.sources[family if family in CANDIDATE_SOURCES else "other"] += 1
        gold_files = patch_files(options[gold_index])
        if gold_files:
            for i, text in enumerate(options):
                if i != gold_index:
                    self.total += 1
                    self.hit += bool(patch_files(text) & gold_files)
        self.ids.append(str(r.get("item_id")))

    def lengths(self) -> OptionLengths:
        gold, wrong = np.asarray(self.gold, dtype=np.int64), np.asarray(self.wrong, dtype=np.int64)
        both = np.concatenate([gold, wrong])
        edges = (
            np.histogram_bin_edges(both, bins=min(12, max(1, len(np.unique(both)))))
            if len(both)
            else np.array([0, 1])
        )
        n = max(1, self.rows)
        return OptionLengths(
            gold=_summary(gold),
            distractors=_summary(wrong),
            gold_longest=round(self.longest / n, 4),
            gold_shortest=round(self.shortest / n, 4),
            bins=[round(float(x), 1) for x in edges],
            gold_counts=[int(c) for c in np.histogram(gold, bins=edges)[0]],
            distractor_counts=[int(c) for c in np.histogram(wrong, bins=edges)[0]],
        )

    def source_mix(self) -> dict[str, int]:
        return {k: self.sources[k] for k in (*CANDIDATE_SOURCES, "other") if self.sources[k]}

    def patch_overlap(self) -> float | None:
        return round(self.hit / self.total, 4) if self.total else None

    def picked(self, seed: int, k: int) -> list[int]:
        """The places (in the order added) of the `k` rows `samples` draws: by `seed` among the rows
        ordered by item id (ties in the order added)."""
        ordered = sorted(range(len(self.ids)), key=self.ids.__getitem__)
        draw = random.Random(content_id(seed, "validity-samples")).sample(
            range(len(ordered)), min(k, len(ordered))
        )
        return [ordered[j] for j in draw]


def _mcq(rows: Iterable[Mapping[str, Any]]) -> Iterator[Mapping[str, Any]]:
    """The rows that show options, in order: what the tally counts and the sample's places index."""
    return (r for r in rows if r.get("options"))


def _tally(rows: Iterable[Mapping[str, Any]]) -> _Tally:
    tally = _Tally()
    for r in rows:
        tally.add(r)
    return tally


def option_lengths(rows: Iterable[Mapping[str, Any]]) -> OptionLengths:
    """Gold vs distractor lengths of MCQ rows (`options`, `gold_index`)."""
    return _tally(rows).lengths()


def source_mix(rows: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """Shown distractors per source family (an origin outside `CANDIDATE_SOURCES` counts as `other`)."""
    return _tally(rows).source_mix()


_PATCH_FILE = re.compile(r"^(?:diff --git a/(\S+) b/|\+\+\+ b/|--- a/)(\S+)?", re.M)


def patch_files(text: str) -> frozenset[str]:
    """The files a unified diff touches (empty when the text is no diff)."""
    return frozenset(b or a for a, b in _PATCH_FILE.findall(text) if (b or a) and (b or a) != "/dev/null")


def patch_overlap(rows: Iterable[Mapping[str, Any]]) -> float | None:
    """Share of the distractors of diff-gold items that touch a file the gold touches (None: no diff gold)."""
    return _tally(rows).patch_overlap()


def _context(row: Mapping[str, Any]) -> str:
    spec = find_spec(str(row.get("scenario")), str(row.get("task")))
    return context_text({k: row[k] for k in spec.field_names if k in row} if spec else row, spec)


def samples(rows: Sequence[Mapping[str, Any]], seed: int, k: int = SAMPLES) -> list[SampleItem]:
    """`k` items drawn by `seed` (the same rows give the same draw), as a reader sees them."""
    return _samples(rows, _tally(_mcq(rows)).picked(seed, k))


def _samples(rows: Iterable[Mapping[str, Any]], picked: Sequence[int]) -> list[SampleItem]:
    """The rows at the places `picked` (in the order they were drawn), a second pass over the rows
    that keeps only those."""
    wanted = set(picked)
    found = {place: r for place, r in enumerate(_mcq(rows)) if place in wanted}
    out = []
    for r in (found[place] for place in picked):
        context = _context(r)
        origins = list(r.get("distractor_origins") or ())
        opts, wrong = [], 0
        for i, text in enumerate(r["options"]):
            gold = i == r["gold_index"]
            origin = "" if gold else (str(origins[wrong]) if wrong < len(origins) else "")
            wrong += not gold
            opts.append(SampleOption(letter=LETTERS[i], text=str(text), gold=gold, origin=origin))
        out.append(
            SampleItem(
                item_id=str(r.get("item_id")),
                context_tail=context[-CONTEXT_TAIL:],
                context_chars=len(context),
                options=opts,
            )
        )
    return out


def task_validity(
    task: str,
    rows: Sequence[Mapping[str, Any]],
    entry: TaskQuality,
    adversarial: AdversarialTask | None,
    seed: int,
) -> TaskValidity:
    """One MCQ task: `entry` is its quality-section entry (baselines, bounds, positions)."""
    tally = _tally(_mcq(rows))  # the rows are gone through twice, never held
    accuracy, bounds = entry.baselines or {}, entry.bounds or {}
    baselines = [
        BaselineBound(name=name, accuracy=acc, bound=bounds[name], passed=acc <= bounds[name] + 1e-12)
        for name, acc in accuracy.items()
    ]
    return TaskValidity(
        task=task,
        items=entry.n_items or 0,
        chance=entry.chance or 0.0,
        baselines=baselines,
        passed=all(b.passed for b in baselines),
        positions=PositionHistogram(
            counts=dict(entry.positions or {}),
            chi2=entry.position_chi2 or 0.0,
            dof=entry.position_dof or 0,
            p_value=entry.position_p if entry.position_p is not None else 1.0,
        ),
        lengths=tally.lengths(),
        sources=tally.source_mix(),
        patch_overlap=tally.patch_overlap(),
        adversarial=adversarial or AdversarialTask(),
        samples=_samples(rows, tally.picked(seed, SAMPLES)),
    )


def validity_report(
    rows_by_task: Mapping[str, Sequence[Mapping[str, Any]]],
    quality: QualityReport,
    adversarial: Mapping[str, AdversarialTask],
    seed: int,
    generate_seconds: float,
    adversarial_seconds: float,
) -> ValidityReport:
    """The validity section: every MCQ task of the quality section (completion tasks have no baselines)."""
    tasks = [
        task_validity(task, rows_by_task.get(task, ()), entry, adversarial.get(task), seed)
        for task, entry in quality.tasks.items()
        if entry.baselines is not None
    ]
    return ValidityReport(
        tasks=tasks, generate_seconds=generate_seconds, adversarial_seconds=adversarial_seconds
    )


__all__ = [
    "option_lengths",
    "patch_files",
    "patch_overlap",
    "samples",
    "source_mix",
    "task_validity",
    "validity_report",
]
