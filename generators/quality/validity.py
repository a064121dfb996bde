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
from collections import Counter
from collections.abc import Mapping, Sequence
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


def _summary(values: Sequence[int]) -> LengthSummary:
    if not values:
        return LengthSummary(n=0, mean=0.0, median=0.0, p10=0.0, p90=0.0)
    a = np.asarray(values, dtype=float)
    p10, median, p90 = (round(float(x), 1) for x in np.percentile(a, [10, 50, 90]))
    return LengthSummary(n=len(values), mean=round(float(a.mean()), 1), median=median, p10=p10, p90=p90)


def option_lengths(rows: Sequence[Mapping[str, Any]]) -> OptionLengths:
    """Gold vs distractor lengths of MCQ rows (`options`, `gold_index`)."""
    gold, wrong = [], []
    longest = shortest = 0
    for r in rows:
        lengths = [len(o) for o in r["options"]]
        g = lengths[r["gold_index"]]
        gold.append(g)
        wrong += [x for i, x in enumerate(lengths) if i != r["gold_index"]]
        longest += g == max(lengths) and lengths.count(g) == 1
        shortest += g == min(lengths) and lengths.count(g) == 1
    both = gold + wrong
    edges = np.histogram_bin_edges(both, bins=min(12, max(1, len(set(both))))) if both else np.array([0, 1])
    n = max(1, len(rows))
    return OptionLengths(
        gold=_summary(gold),
        distractors=_summary(wrong),
        gold_longest=round(longest / n, 4),
        gold_shortest=round(shortest / n, 4),
        bins=[round(float(x), 1) for x in edges],
        gold_counts=[int(c) for c in np.histogram(gold, bins=edges)[0]],
        distractor_counts=[int(c) for c in np.histogram(wrong, bins=edges)[0]],
    )


def source_mix(rows: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Shown distractors per source family (an origin outside `CANDIDATE_SOURCES` counts as `other`)."""
    counts: Counter[str] = Counter()
    for r in rows:
        for origin in r.get("distractor_origins") or ():
            family = candidate_source(str(origin))
            counts[family if family in CANDIDATE_SOURCES else "other"] += 1
    return {k: counts[k] for k in (*CANDIDATE_SOURCES, "other") if counts[k]}


_PATCH_FILE = re.compile(r"^(?:diff --git a/(\S+) b/|\+\+\+ b/|--- a/)(\S+)?", re.M)


def patch_files(text: str) -> frozenset[str]:
    """The files a unified diff touches (empty when the text is no diff)."""
    return frozenset(b or a for a, b in _PATCH_FILE.findall(text) if (b or a) and (b or a) != "/dev/null")


def patch_overlap(rows: Sequence[Mapping[str, Any]]) -> float | None:
    """Share of the distractors of diff-gold items that touch a file the gold touches (None: no diff gold)."""
    hit = total = 0
    for r in rows:
        gold = patch_files(r["options"][r["gold_index"]])
        if not gold:
            continue
        for i, text in enumerate(r["options"]):
            if i != r["gold_index"]:
                total += 1
                hit += bool(patch_files(text) & gold)
    return round(hit / total, 4) if total else None


def _context(row: Mapping[str, Any]) -> str:
    spec = find_spec(str(row.get("scenario")), str(row.get("task")))
    return context_text({k: row[k] for k in spec.field_names if k in row} if spec else row, spec)


def samples(rows: Sequence[Mapping[str, Any]], seed: int, k: int = SAMPLES) -> list[SampleItem]:
    """`k` items drawn by `seed` (the same rows give the same draw), as a reader sees them."""
    ordered = sorted(rows, key=lambda r: str(r.get("item_id")))
    picked = random.Random(content_id(seed, "validity-samples")).sample(ordered, min(k, len(ordered)))
    out = []
    for r in picked:
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
    mcq = [r for r in rows if r.get("options")]
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
        lengths=option_lengths(mcq),
        sources=source_mix(mcq),
        patch_overlap=patch_overlap(mcq),
        adversarial=adversarial or AdversarialTask(),
        samples=samples(mcq, seed),
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
