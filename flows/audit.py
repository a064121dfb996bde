"""Audits on disk: `aptforge audit PATH...` and the quality section of every build report.

Reads APTBench JSONL (official layout) or aptforge candidate/published Parquet, hands the rows
to the pure audit in `generators/quality/audit.py`, and decides which tasks are flagged (a baseline over
its bound) and which of those a config override lets through, with its reason. Publishing reads
`report.json`'s `quality` section through `refused_tasks`: a flagged task without an override is
refused. Unreadable files and rows become Problems with file and line; nothing here crashes on data.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from extractors.ingest.records import Record, find_inputs, iter_records
from flows.config import QualityConfig
from generators.quality.audit import (
    AuditRow,
    TaskAudit,
    audit_row,
    audit_rows,
    audit_task,
    candidate_row,
    label_for_path,
)
from generators.quality.baselines import BASELINES, Bounds
from schemas import Problem

AUDIT_SUFFIXES = (".jsonl", ".parquet")


class AuditResult(NamedTuple):
    """What `aptforge audit` found."""

    tasks: dict[str, TaskAudit]
    problems: list[Problem]
    """Files or rows that could not be read at all (outside any task)."""
    files: list[str]


def _config_key(mapping: Mapping[str, Any], task: str) -> str | None:
    if task in mapping:
        return task
    short = task.rsplit("/", 1)[-1]
    return short if short in mapping else None


def bounds_of(quality: QualityConfig, task: str) -> Bounds:
    """The baseline bounds of one task (`task` or its last `/` part names it in the config)."""
    key = _config_key(quality.bounds, task)
    return Bounds(quality.margin, quality.min_items, quality.z, dict(quality.bounds[key]) if key else {})


def override_of(quality: QualityConfig, task: str) -> str | None:
    """The configured reason to publish `task` although it is flagged."""
    key = _config_key(quality.overrides, task)
    return quality.overrides[key] if key else None


def audit_files(paths: Sequence[str | Path]) -> list[str]:
    """Files named, plus the `.jsonl` / `.parquet` files found under folders named (sorted)."""
    files: set[str] = set()
    for path in map(Path, paths):
        if path.is_dir():
            files.update(str(f) for f in find_inputs([path]) if f.name.endswith(AUDIT_SUFFIXES))
        else:
            files.add(str(path))
    return sorted(files)


def read_rows(paths: Sequence[str | Path]) -> tuple[list[AuditRow | Problem], dict[str, str], list[str]]:
    """Rows of every JSONL/Parquet file under `paths`, the task label of each file, and the files read."""
    rows: list[AuditRow | Problem] = []
    labels: dict[str, str] = {}
    files = audit_files(paths)
    for file in files:
        label, spec = label_for_path(file)
        labels[file] = label
        for rec in iter_records(file):
            rows.append(audit_row(rec.data, str(rec.origin), label, spec) if isinstance(rec, Record) else rec)
    return rows, labels, files


def audit_paths(paths: Sequence[str | Path], quality: QualityConfig | None = None) -> AuditResult:
    """Audit every task found under `paths`."""
    quality = quality or QualityConfig()
    rows, labels, files = read_rows(paths)
    tasks_seen = {r.task for r in rows if isinstance(r, AuditRow)} | set(labels.values())
    bounds = {t: bounds_of(quality, t) for t in tasks_seen}
    outside = [r for r in rows if isinstance(r, Problem) and r.stage != "audit"]
    inside = [r for r in rows if not (isinstance(r, Problem) and r.stage != "audit")]
    tasks = audit_rows(inside, bounds, task_of=labels)
    return AuditResult({t: a for t, a in tasks.items() if a.items or a.problems}, outside, files)


def task_entry(audit: TaskAudit, quality: QualityConfig) -> dict[str, Any]:
    """The JSON entry of one task: the audit plus `override` and `publishable`."""
    entry = audit.as_dict()
    reason = override_of(quality, audit.task) if audit.flagged else None
    entry["why"] = audit.baselines.why() if audit.baselines else ""
    entry["override"] = reason
    entry["publishable"] = not audit.flagged or reason is not None
    return entry


def audit_json(
    result: AuditResult, quality: QualityConfig | None = None, examples: int | None = None
) -> dict[str, Any]:
    """JSON-ready audit: per task the entry and its findings (all, or `examples` per reason)."""
    quality = quality or QualityConfig()
    tasks: dict[str, Any] = {}
    for name, audit in result.tasks.items():
        entry = task_entry(audit, quality)
        shown: dict[str, int] = {}
        problems = []
        for p in audit.problems:
            shown[p.reason] = shown.get(p.reason, 0) + 1
            if examples is None or shown[p.reason] <= examples:
                problems.append(p.model_dump())
        entry["problems"] = problems
        tasks[name] = entry
    return {
        "files": result.files,
        "baselines": list(BASELINES),
        "tasks": tasks,
        "problems": [p.model_dump() for p in result.problems],
    }


def build_quality(
    rows_by_task: Mapping[str, Iterable[Mapping[str, Any]]], quality: QualityConfig
) -> dict[str, Any]:
    """The `quality` section of a build report, from the candidate rows of every task."""
    tasks: dict[str, Any] = {}
    for task, rows in rows_by_task.items():
        parsed = [candidate_row(r, str(r.get("item_id", "?"))) for r in rows]
        good = [r for r in parsed if isinstance(r, AuditRow)]
        bad = [r for r in parsed if isinstance(r, Problem)]
        audit = audit_task(task, good, bounds_of(quality, task), problems=bad)
        tasks[task] = task_entry(audit, quality)
    flags = {t: e["why"] for t, e in tasks.items() if e["flagged"]}
    return {
        "baselines": list(BASELINES),
        "margin": quality.margin,
        "min_items": quality.min_items,
        "tasks": tasks,
        "flags": flags,
        "refused_tasks": sorted(t for t, e in tasks.items() if not e["publishable"]),
    }


def refused_tasks(report: Mapping[str, Any]) -> dict[str, str]:
    """Tasks a publish must refuse, with why: flagged by a baseline and not overridden in config."""
    out = {}
    for task, entry in (report.get("quality") or {}).get("tasks", {}).items():
        if not entry.get("publishable", True):
            out[task] = (
                f"model-free baselines exceed their bounds ({entry['why']}); set quality.overrides.{task} with a reason"
            )
    return out


def _short(where: str) -> str:
    cwd = str(Path.cwd()) + "/"
    return where[len(cwd) :] if where.startswith(cwd) else where


def _pct(x: float) -> str:
    return f"{x:.1%}"


def render_audit(data: Mapping[str, Any], console: Any, examples: int = 3) -> None:
    """Print an audit (the `audit_json` document) as one rich table per task plus example findings."""
    from rich.table import Table

    for name, t in data["tasks"].items():
        status = "[bold red]FLAGGED[/]" if t["flagged"] else "[green]ok[/]"
        if t["flagged"] and t["override"]:
            status += f" (overridden: {t['override']})"
        table = Table(title=f"{name}: {status}", show_header=False, title_justify="left")
        table.add_column(style="bold")
        table.add_column()
        table.add_row("items", f"{t['items']}  " + ", ".join(f"{k}={v}" for k, v in t["forms"].items()))
        if "baselines" in t:
            table.add_row("options", ", ".join(f"{k} options: {v}" for k, v in t["option_counts"].items()))
            table.add_row("chance", _pct(t["chance"]))
            for b, acc in t["baselines"].items():
                mark = "[bold red]" if b in t["exceeded"] else ""
                table.add_row(
                    f"  {b}",
                    f"{mark}{_pct(acc)}[/] (bound {_pct(t['bounds'][b])})"
                    if mark
                    else f"{_pct(acc)} (bound {_pct(t['bounds'][b])})",
                )
            table.add_row("gold positions", " ".join(f"{k}:{v}" for k, v in t["positions"].items()))
            table.add_row(
                "position chi²",
                f"{t['position_chi2']:.2f} (dof {t['position_dof']}, p={t['position_p']:.3g})",
            )
        table.add_row("findings", ", ".join(f"{k}={v}" for k, v in t["findings"].items()) or "-")
        console.print(table)
        by_reason: dict[str, list[dict[str, Any]]] = {}
        for p in t.get("problems", []):
            by_reason.setdefault(p["reason"], []).append(p)
        for reason, found in by_reason.items():
            console.print(f"  [yellow]{reason}[/] ({len(found)}), e.g.:", highlight=False)
            for p in found[:examples]:
                console.print(f"    {_short(p['where'])}: {p['detail']}", highlight=False)
    for p in data.get("problems", []):
        console.print(f"[red]unreadable[/] {p['where']}: {p['reason']}: {p['detail']}", highlight=False)
