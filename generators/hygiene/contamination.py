"""Contamination: how much of a new item's text already exists in earlier releases or a reference.

An item whose context and answer mostly reappear in a published benchmark (APTBench's own rows,
an earlier aptforge version) may already sit in a model's training data. `ReferenceIndex`
holds the hashed word n-grams (13 by default, as in GPT-3's contamination study) of reference
rows per source (`previous_versions`, `reference`); `measure` gives each item the share of its
n-grams found in each source, and flags it at `min_overlap`. Text is normalised first (case,
punctuation, whitespace) and Chinese/Japanese/Korean text counts one token per character.

Boilerplate is not contamination: an agent's system prompt reappears in every run of that
agent, in every release. N-grams found in at least `boilerplate_share` of the new build's
trajectories (with 4+ trajectories in the task) count neither for nor against an item.
Results are reported per task; dropping flagged items is the flow's decision (`drop` in config).
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from generators.text import normalise
from schemas import Problem, Question

_CJK = r"\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af"
_TOKEN = re.compile(rf"[{_CJK}]|[^\W{_CJK}]+")
#: Row keys that identify or trace a row rather than show it (left out of a row's text).
ID_KEYS = frozenset(
    {
        "uuid",
        "qid",
        "traj_id",
        "source",
        "item_id",
        "content_hash",
        "scenario",
        "task",
        "trajectory_id",
        "status",
        "source_file",
        "source_format",
        "instance_id",
        "agent",
        "agent_model",
        "outcome_signal",
        "extractor",
        "generator",
        "prompt_hash",
        "model",
        "distractor_origins",
    }
)


def tokens(text: str) -> list[str]:
    """Normalised word tokens; each CJK character is a token of its own."""
    return _TOKEN.findall(normalise(text))


def ngrams(text: str, n: int) -> set[int]:
    """Hashed word n-grams of `text` (one gram for a text shorter than `n` tokens).

    Python's string hash is stable within one process, which is where an index lives.
    """
    words = tokens(text)
    if not words:
        return set()
    if len(words) < n:
        return {hash(" ".join(words))}
    return {hash(" ".join(words[i : i + n])) for i in range(len(words) - n + 1)}


def question_text(q: Question) -> str:
    """What an item shows: context fields, options and the gold."""
    parts = [str(v) for v in q.fields.values() if isinstance(v, str | int)]
    return "\n".join([*parts, *q.options, q.gold])


def row_text(row: Mapping[str, Any]) -> str:
    """What a published row shows: every string (or list of strings) column but ids and letters.

    An `answer` of at most 4 characters is an MCQ letter (or a multi-select set) and is left out;
    a completion task's answer text is kept.
    """
    parts: list[str] = []
    for key, value in row.items():
        if key in ID_KEYS or (key == "answer" and isinstance(value, str) and len(value.strip()) <= 4):
            continue
        if isinstance(value, str):
            parts.append(value)
        elif isinstance(value, list | tuple):
            parts += [v for v in value if isinstance(v, str)]
    return "\n".join(parts)


class ReferenceIndex:
    """Hashed n-grams of reference rows, per source name."""

    def __init__(self, n: int = 13) -> None:
        self.n = n
        self.grams: dict[str, set[int]] = defaultdict(set)
        self.rows: Counter[str] = Counter()

    def add(self, source: str, text: str) -> None:
        """Index one reference text under `source`."""
        self.grams[source] |= ngrams(text, self.n)
        self.rows[source] += 1

    def add_rows(self, source: str, rows: Iterable[Mapping[str, Any]]) -> None:
        """Index published rows (Parquet / JSONL dicts) under `source`."""
        for row in rows:
            self.add(source, row_text(row))


class Overlap(NamedTuple):
    """One item's overlap with one source."""

    item_id: str
    task: str
    source: str
    share: float


class ContaminationResult(NamedTuple):
    """Per-item overlaps at or above the bound, per-task summary, and Problems."""

    flagged: list[Overlap]
    by_task: dict[str, dict[str, Any]]
    problems: list[Problem]


def boilerplate(grams_by_traj: Mapping[str, set[int]], share: float) -> set[int]:
    """N-grams found in at least `share` of a task's trajectories (none below 4 trajectories)."""
    if len(grams_by_traj) < 4:
        return set()
    counts: Counter[int] = Counter(g for grams in grams_by_traj.values() for g in grams)
    bound = max(2, math.ceil(share * len(grams_by_traj)))
    return {g for g, c in counts.items() if c >= bound}


def measure(
    questions: Iterable[Question],
    index: ReferenceIndex,
    min_overlap: float = 0.5,
    boilerplate_share: float = 0.5,
    severity: str = "warning",
) -> ContaminationResult:
    """Share of each item's n-grams found in each indexed source; flag items at `min_overlap`.

    Problems (`contamination.overlaps_<source>`) carry `severity`: `error` when the config drops
    flagged items, `warning` when it only reports them.
    """
    by_task: dict[str, list[Question]] = defaultdict(list)
    for q in questions:
        by_task[q.task].append(q)
    flagged: list[Overlap] = []
    summary: dict[str, dict[str, Any]] = {}
    problems: list[Problem] = []
    for task in sorted(by_task):
        items = sorted(by_task[task], key=lambda q: q.item_id)
        grams = {q.item_id: ngrams(question_text(q), index.n) for q in items}
        per_traj: dict[str, set[int]] = defaultdict(set)
        for q in items:
            per_traj[q.trajectory_id] |= grams[q.item_id]
        common = boilerplate(per_traj, boilerplate_share)
        own = {i: g - common for i, g in grams.items()}
        stats: dict[str, Any] = {"checked": len(items), "flagged": 0, "by_source": {}}
        hit_items: set[str] = set()
        for source in sorted(index.grams):
            ref = index.grams[source]
            shares = []
            for q in items:
                mine = own[q.item_id]
                share = len(mine & ref) / len(mine) if mine else 0.0
                shares.append(share)
                if mine and share >= min_overlap:
                    flagged.append(Overlap(q.item_id, task, source, round(share, 4)))
                    hit_items.add(q.item_id)
                    problems.append(
                        Problem(
                            where=q.item_id,
                            stage="contamination",
                            reason=f"overlaps_{source}",
                            severity=severity,  # type: ignore[arg-type]
                            detail=f"{share:.0%} of its {index.n}-grams appear in {source} ({index.rows[source]} rows)",
                        )
                    )
            stats["by_source"][source] = {
                "rows": index.rows[source],
                "flagged": sum(s >= min_overlap for s in shares),
                "max_overlap": round(max(shares, default=0.0), 4),
                "mean_overlap": round(sum(shares) / len(shares), 4) if shares else 0.0,
            }
        stats["flagged"] = len(hit_items)
        summary[task] = stats
    return ContaminationResult(flagged, summary, problems)


__all__ = [
    "ContaminationResult",
    "Overlap",
    "ReferenceIndex",
    "boilerplate",
    "measure",
    "ngrams",
    "question_text",
    "row_text",
    "tokens",
]
