"""The file side of `aptforge audit PATH...`: find and read the rows, print the result.

Reads APTBench JSONL (official layout) or aptforge candidate/published Parquet and hands the rows to
the audit (`generators/quality/audit.py`), which decides which tasks are flagged and which of those a
config override lets through. Unreadable files and rows become Problems with file and line; nothing
here crashes on data.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from extractors.ingest.records import Record, find_inputs, iter_records
from flows.config import QualityConfig
from generators.quality.audit import AuditResult, AuditRow, audit_row, audit_rows, bounds_of, label_for_path
from schemas import Problem

AUDIT_SUFFIXES = (".jsonl", ".parquet")


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
    tasks = audit_rows(inside, bounds, task_of=labels, block=quality.block_items)
    return AuditResult({t: a for t, a in tasks.items() if a.items or a.problems}, outside, files)


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
