"""SWE-bench harness reports: the success oracle for every SWE format.

Reads the shapes found in the wild: the harness run summary and the sb-cli report
(`resolved_ids` / `unresolved_ids` / `empty_patch_ids` / `error_ids`), per-instance
`report.json` (`{id: {resolved...}}` or the flat inner object under `logs/<id>/`), and
`results_summary.json` (`instances: [{instance_id, resolved}]`). Resolved means the harness
said so; `exit_status == submitted` is never a verdict. Which run a report judges is
`labels.runs`' business: here each verdict only keeps the report it came from.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

from extractors.base import Origin
from extractors.ingest.records import Record, find_inputs, iter_records
from extractors.readers._text import as_bool
from schemas import Problem


class RunVerdict(NamedTuple):
    """The harness's word on one instance."""

    instance_id: str
    resolved: bool
    reason: str
    """`resolved`, `unresolved`, `empty_patch`, `error`."""
    signal: str
    """Which report and field decided it, e.g. `harness_summary:resolved_ids`."""
    specificity: int
    """Per-instance reports (2) win over run summaries (1)."""


class ReportVerdict(NamedTuple):
    """A verdict with the report it came from and, when the config says so, the run it belongs to."""

    verdict: RunVerdict
    origin: Origin
    run: str | None = None


_ID_LISTS = (
    ("resolved_ids", True, "resolved"),
    ("empty_patch_ids", False, "empty_patch"),
    ("error_ids", False, "error"),
    ("unresolved_ids", False, "unresolved"),
)


def is_report(data: Any) -> bool:
    """True when a parsed JSON object is a harness report of a known shape."""
    if not isinstance(data, dict) or not data:
        return False
    if isinstance(data.get("resolved_ids"), list):
        return True
    instances = data.get("instances")
    if (
        isinstance(instances, list)
        and instances
        and all(isinstance(r, dict) and "instance_id" in r and "resolved" in r for r in instances[:5])
    ):
        return True
    if "resolved" in data and ("tests_status" in data or "patch_successfully_applied" in data):
        return True
    return all(
        isinstance(v, dict) and "resolved" in v and ("tests_status" in v or "patch_exists" in v)
        for v in data.values()
    )


def parse_report(data: Any, origin: Origin) -> Iterator[RunVerdict]:
    """Verdicts in one parsed report (nothing for a non-report)."""
    if not is_report(data):
        return
    if isinstance(data.get("resolved_ids"), list):
        kind = "sb_cli" if any(k.startswith(("pending_", "failed_")) for k in data) else "harness_summary"
        seen: set[str] = set()
        for key, resolved, reason in _ID_LISTS:
            for iid in data.get(key) or []:
                if isinstance(iid, str) and iid not in seen:
                    seen.add(iid)
                    yield RunVerdict(iid, resolved, reason, f"{kind}:{key}", 1)
        return
    if isinstance(data.get("instances"), list):
        for row in data["instances"]:
            flag = as_bool(row.get("resolved"))
            if isinstance(row.get("instance_id"), str) and flag is not None:
                yield RunVerdict(
                    row["instance_id"],
                    flag,
                    "resolved" if flag else "unresolved",
                    "results_summary:resolved",
                    1,
                )
        return
    if "resolved" in data:  # flat per-instance report under logs/<instance_id>/report.json
        yield from _instance_verdict(Path(origin.file).parent.name, data)
        return
    for iid, inner in data.items():
        yield from _instance_verdict(iid, inner)


def _instance_verdict(iid: str, inner: dict[str, Any]) -> Iterator[RunVerdict]:
    flag = as_bool(inner.get("resolved"))
    if flag is None:
        return
    empty = inner.get("patch_is_None") is True or inner.get("patch_exists") is False
    reason = "resolved" if flag else ("empty_patch" if empty else "unresolved")
    yield RunVerdict(iid, flag, reason, "report.json:resolved", 2)


class Reports(NamedTuple):
    """Every verdict found, each with its report (and the run the config ties it to), plus what could not be used.

    Verdicts are not merged here: which run a report judges is decided with the trajectories in
    hand (`labels.runs.tie_reports`).
    """

    found: list[ReportVerdict]
    problems: list[Problem]


def load_reports(paths: Iterable[str | tuple[str, str | None]]) -> Reports:
    """Read report files (directories searched recursively); a `(path, run)` pair ties them to one run."""
    found: list[ReportVerdict] = []
    problems: list[Problem] = []
    for entry in paths:
        path, run = (entry, None) if isinstance(entry, str) else entry
        for file in find_inputs([path]):
            for rec in iter_records(file):
                if isinstance(rec, Problem):
                    problems.append(rec.model_copy(update={"stage": "report", "severity": "warning"}))
                    continue
                assert isinstance(rec, Record)
                verdicts = list(parse_report(rec.data, rec.origin))
                if not verdicts:
                    problems.append(
                        Problem(
                            where=str(rec.origin),
                            stage="report",
                            reason="not_a_report",
                            severity="warning",
                            detail="no resolved_ids, instances or per-instance resolved flags found",
                        )
                    )
                found.extend(ReportVerdict(v, rec.origin, run) for v in verdicts)
    return Reports(found, problems)
