"""Tie each harness report to the one run it evaluates, so a verdict never lands on another model's run.

A report (sb-cli report, run summary, `logs/<id>/report.json`, results summary) judges the
predictions of ONE run: one model, one run folder. Instance ids alone do not say which run, so
with several models' runs of the same instances in one build, each report must be tied first:
1. an explicit mapping in the config (`reports: [{path, run}]`): `run` names the run's folder (a
   trajectory under it belongs to it) or its model (`Source.model`, or its last `/` part);
2. otherwise the candidate runs are those with a trajectory of an instance the report names; one
   candidate is taken; among several, the runs sharing the deepest folder with the report (its
   own run tree, e.g. `<run>/logs/<id>/report.json` beside `<run>/trajs/`), then the runs whose
   model name appears in the report's path (sb-cli names reports after the run);
3. still several: an `ambiguous_report` error naming the report and two runs; the report is not used.
A conflict is two verdicts of the same specificity that disagree on one instance of one run.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import PurePath
from typing import NamedTuple

from extractors.labels.reports import ReportVerdict, RunVerdict
from schemas import Problem, Trajectory


class RunKey(NamedTuple):
    """One run: the folder holding its trajectories and the model that drove it."""

    root: str
    model: str

    def __str__(self) -> str:
        return f"{self.root} ({self.model or 'model not recorded'})"


def run_key(traj: Trajectory) -> RunKey:
    """The run a trajectory belongs to: `<root>/<instance_id>/<file>` layouts give `<root>`, else the file's
    folder; and its model, case and a leading `@` ignored."""
    file = PurePath(traj.source.file)
    parent = file.parent
    iid = traj.source.instance_id
    root = parent.parent if iid and parent.name == iid else parent
    # case and a leading "@" say nothing about the run (one real run writes "@google/...")
    return RunKey(str(root), traj.source.model.strip().strip("@").lower())


def _depth(a: PurePath, b: PurePath) -> int:
    n = 0
    for x, y in zip(a.parts, b.parts, strict=False):
        if x != y:
            break
        n += 1
    return n


def _model_names(model: str) -> set[str]:
    low = model.lower()
    return {n for n in (low, low.rsplit("/", 1)[-1]) if n}


def _matches(spec: str, run: RunKey) -> bool:
    low = spec.lower()
    if low in _model_names(run.model):
        return True
    spec_path, root = PurePath(spec), PurePath(run.root)
    return root == spec_path or spec_path in root.parents


def _pick(report: str, runs: set[RunKey], spec: str | None) -> tuple[list[RunKey], Problem | None]:
    """The runs one report belongs to, or a Problem saying why none."""
    if spec is not None:
        chosen = sorted(r for r in runs if _matches(spec, r))
        if chosen:
            return chosen, None
        return [], Problem(
            where=report,
            stage="label",
            reason="report_run_not_found",
            severity="warning",
            detail=f"the config ties this report to run {spec!r}, but no trajectory of its instances is in that run",
        )
    if len(runs) <= 1:
        return sorted(runs), None
    path = PurePath(report)
    depths = {r: _depth(path, PurePath(r.root)) for r in runs}
    best = max(depths.values())
    left = {r for r in runs if depths[r] == best}
    if len(left) > 1:
        named = {r for r in left if any(n in report.lower() for n in _model_names(r.model))}
        left = named or left
    if len(left) == 1:
        return sorted(left), None
    a, b = sorted(left)[:2]
    return [], Problem(
        where=report,
        stage="label",
        reason="ambiguous_report",
        severity="error",
        detail=f"this report could judge run {a} or run {b}; tie it in the config with "
        f"`reports: [{{path: ..., run: <folder or model>}}]`; its verdicts were not used",
    )


class TiedVerdicts(NamedTuple):
    """Verdicts by (run, instance id), and the Problems met tying reports to runs."""

    by_run: dict[tuple[RunKey, str], RunVerdict]
    problems: list[Problem]

    def of(self, traj: Trajectory) -> RunVerdict | None:
        """The verdict of this trajectory's own run, if any report gave one."""
        run = run_key(traj)
        return self.by_run.get((run, traj.source.instance_id)) or self.by_run.get(
            (run, traj.source.native_id)
        )


def tie_reports(trajs: Sequence[Trajectory], found: Iterable[ReportVerdict]) -> TiedVerdicts:
    """Tie every report's verdicts to its run (see the module docstring) and merge them per run."""
    runs_of: dict[str, set[RunKey]] = defaultdict(set)
    for t in trajs:
        for iid in {t.source.instance_id, t.source.native_id} - {""}:
            runs_of[iid].add(run_key(t))
    reports: dict[tuple[str, str | None], list[ReportVerdict]] = defaultdict(list)
    for rv in found:
        reports[(rv.origin.file, rv.run)].append(rv)
    by_run: dict[tuple[RunKey, str], RunVerdict] = {}
    where: dict[tuple[RunKey, str], str] = {}
    problems: list[Problem] = []
    for (file, spec), entries in sorted(reports.items(), key=lambda kv: (kv[0][0], kv[0][1] or "")):
        candidates = {r for e in entries for r in runs_of.get(e.verdict.instance_id, ())}
        if not candidates:
            continue  # no trajectory of this report's instances in the build
        chosen, problem = _pick(file, candidates, spec)
        if problem is not None:
            problems.append(problem)
        for run in chosen:
            for e in entries:
                key = (run, e.verdict.instance_id)
                if run not in runs_of.get(e.verdict.instance_id, ()):
                    continue
                old = by_run.get(key)
                if old is None or e.verdict.specificity > old.specificity:
                    by_run[key], where[key] = e.verdict, str(e.origin)
                elif e.verdict.specificity == old.specificity and e.verdict.resolved != old.resolved:
                    problems.append(
                        Problem(
                            where=str(e.origin),
                            stage="label",
                            reason="conflicting_verdicts",
                            severity="warning",
                            detail=f"{e.verdict.instance_id} in run {run}: {e.verdict.signal}="
                            f"{e.verdict.resolved} contradicts {old.signal}={old.resolved} "
                            f"({where[key]}); kept the first",
                        )
                    )
    return TiedVerdicts(by_run, problems)
