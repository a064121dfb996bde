"""The file side of release hygiene: reference corpora for contamination, and the release scan.

`generators/hygiene/secrets.py`, `dedup.py` and `contamination.py` are pure; this module reads what they
need from disk and wraps them as build stages. `scan_release(folder)` is the guard publish runs
on a built release folder: every Parquet row and every line of every other file is scanned, and
`assert_release_clean(folder)` raises `SecretsFound` (kinds and places only) if anything remains.
Unreadable reference files become Problems naming the file and line, never a crash.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pyarrow.parquet as pq

from extractors.ingest.records import Record, find_inputs, iter_records
from flows.config import ContaminationConfig, PrivacyConfig
from generators.hygiene.contamination import ReferenceIndex, measure
from generators.hygiene.scrub import placeholder_counts
from generators.hygiene.secrets import (
    Finding,
    PrivacyOptions,
    Redactor,
    Scanner,
    SecretsFound,
    scan_rows,
)
from schemas import Problem, Question
from schemas.report import ContaminationReport, SecretsReport

#: A record is a benchmark row (not a report or quarantine entry) when it has one of these keys.
ROW_KEYS = frozenset({"uuid", "item_id", "choices", "trajs", "trajectory", "query", "target_cmd"})


def privacy_options(config: PrivacyConfig) -> PrivacyOptions:
    """Scanner options from the build config."""
    return PrivacyOptions(config.redact_emails, config.redact_phones, config.detect_secrets)


def make_redactor(config: PrivacyConfig) -> Redactor:
    """One redactor per build: its value map makes a secret read the same in every output."""
    return Redactor(Scanner(privacy_options(config)))


def iter_rows(paths: Iterable[str], stage: str = "contamination") -> Iterator[Record | Problem]:
    """Benchmark rows of files or folders (JSONL, JSON, Parquet); Problems for what is unreadable."""
    for raw in paths:
        if not Path(raw).exists():
            yield Problem(where=raw, stage=stage, reason="missing_reference", detail="no such file or folder")
            continue
        for file in find_inputs([raw]):
            for rec in iter_records(file):
                if isinstance(rec, Problem):
                    yield rec.model_copy(update={"stage": stage})
                elif isinstance(rec.data, dict) and ROW_KEYS & rec.data.keys():
                    yield rec


def load_index(config: ContaminationConfig) -> tuple[ReferenceIndex, list[Problem]]:
    """Index earlier versions (`previous_versions`) and reference corpora (`reference`)."""
    index = ReferenceIndex(config.ngram)
    problems: list[Problem] = []
    for source, paths in (("previous_versions", config.previous_versions), ("reference", config.reference)):
        for rec in iter_rows(paths):
            if isinstance(rec, Problem):
                problems.append(rec)
            else:
                index.add_rows(source, [rec.data])
    return index, problems


class ContaminationStage(NamedTuple):
    """Items kept after the contamination check, its Problems, and the per-task report."""

    kept: list[Question]
    problems: list[Problem]
    report: ContaminationReport


def contamination_stage(
    questions: list[Question],
    config: ContaminationConfig,
    loaded: tuple[ReferenceIndex, list[Problem]] | None = None,
) -> ContaminationStage:
    """Measure overlap with the configured sources; drop flagged items when `drop` is set.
    `loaded`: the index (and its Problems) `load_index` made, when the stage runs task by task."""
    if not config.reference and not config.previous_versions:
        return ContaminationStage(questions, [], ContaminationReport())
    index, problems = loaded if loaded is not None else load_index(config)
    result = measure(
        questions, index, config.min_overlap, config.boilerplate_share, "error" if config.drop else "warning"
    )
    flagged = {o.item_id for o in result.flagged}
    kept = [q for q in questions if q.item_id not in flagged] if config.drop else questions
    report = ContaminationReport(
        checked=True,
        ngram=config.ngram,
        min_overlap=config.min_overlap,
        drop=config.drop,
        reference_rows=dict(index.rows),
        flagged=len(flagged),
        dropped=len(questions) - len(kept),
        by_task=result.by_task,
    )
    return ContaminationStage(kept, problems + result.problems, report)


def redaction_row(q: Question) -> dict[str, Any] | None:
    """The row of an item that shows placeholders: item id, task and counts per kind (no values); None
    when it shows none."""
    counts = placeholder_counts(q)
    if not counts:
        return None
    return {"item_id": q.item_id, "task": q.task, "redactions": dict(sorted(counts.items()))}


def secrets_report(
    found: Counter[str],
    trajectories: Counter[str],
    questions: Counter[str],
    runs_redacted: int,
    items: list[dict[str, Any]],
) -> SecretsReport:
    """report.json's `secrets` section: counts per kind only."""
    shown: Counter[str] = Counter()
    for row in items:
        shown.update(row["redactions"])
    return SecretsReport(
        found_by_kind=dict(sorted(found.items())),
        redacted_in_trajectories=dict(sorted(trajectories.items())),
        redacted_in_questions=dict(sorted(questions.items())),
        trajectories_redacted=runs_redacted,
        items_with_redactions=len(items),
        item_placeholders_by_kind=dict(sorted(shown.items())),
    )


def scan_release(folder: str | Path, options: PrivacyOptions | None = None) -> list[Finding]:
    """Findings in EVERY file of a release folder (Parquet rows; any other file as text, whatever
    its name or size, in blocks of lines so multi-line secrets are seen whole); publish's guard."""
    root = Path(folder)
    scanner = Scanner(options)
    findings: list[Finding] = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = str(path.relative_to(root))
        if path.suffix == ".parquet":
            for batch in pq.ParquetFile(path).iter_batches(batch_size=256):
                findings += [
                    f._replace(where=f"{rel}:{f.where}")
                    for f in scan_rows(batch.to_pylist(), scanner=scanner)
                ]
        else:
            findings += _scan_file(path, rel, scanner)
    return findings


_BLOCK_LINES = 2000


def _scan_file(path: Path, rel: str, scanner: Scanner) -> list[Finding]:
    """Scan a file as text in blocks of lines (a block overlaps the next by a few lines)."""
    findings: list[Finding] = []
    seen: set[tuple[int, str]] = set()
    with path.open("r", encoding="utf-8", errors="replace", newline="") as fh:
        block: list[str] = []
        first = 1
        for line in fh:
            block.append(line)
            if len(block) >= _BLOCK_LINES:
                findings += _scan_block(block, first, rel, scanner, seen)
                keep = block[-40:]  # a private key or a split literal may straddle the boundary
                first += len(block) - len(keep)
                block = keep
        if block:
            findings += _scan_block(block, first, rel, scanner, seen)
    return findings


def _scan_block(
    lines: list[str], first: int, rel: str, scanner: Scanner, seen: set[tuple[int, str]]
) -> list[Finding]:
    text = "".join(lines)
    found = []
    for span in scanner.spans(text):
        lineno = first + text.count("\n", 0, span.start)
        if (lineno, span.kind) not in seen:
            seen.add((lineno, span.kind))
            found.append(Finding(span.kind, f"{rel}:{lineno}"))
    return found


def assert_release_clean(folder: str | Path, options: PrivacyOptions | None = None) -> None:
    """Raise `SecretsFound` when `scan_release` finds anything (publish refuses the release)."""
    findings = scan_release(folder, options)
    if findings:
        raise SecretsFound(findings)


__all__ = [
    "ContaminationStage",
    "assert_release_clean",
    "contamination_stage",
    "iter_rows",
    "load_index",
    "make_redactor",
    "privacy_options",
    "redaction_row",
    "scan_release",
    "secrets_report",
]
