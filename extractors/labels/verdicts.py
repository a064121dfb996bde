"""Success labels: join a trajectory to its verdict.

Order of evidence, strongest first:
1. a harness report of this run naming the instance (`report.json`, run summary, sb-cli, results
   summary), tied to its run by `labels.runs`;
2. a verdict column shipped with the row (`resolved`, `target`), already set by the reader;
3. no submitted patch at all (SWE runs): a failure, `empty_patch`;
4. otherwise `unknown` with reason `no_verdict`. `exit_status == submitted` decides nothing.
"""

from __future__ import annotations

from extractors.labels.reports import RunVerdict
from schemas import Outcome, Trajectory


def apply_verdict(traj: Trajectory, verdict: RunVerdict | None) -> Trajectory:
    """Return `traj` with its outcome decided by the strongest evidence available.

    `verdict` is the harness's word on this run (`labels.runs.TiedVerdicts.of`), None when no
    report judged it.
    """
    if verdict is not None:
        label = "success" if verdict.resolved else "failure"
        return traj.with_outcome(Outcome(label=label, signal=verdict.signal, reason=verdict.reason))
    if traj.outcome.label != "unknown" or traj.outcome.signal != "no_verdict":
        return traj  # a reader's own verdict, or its reason for having none (`needs_judge`, `no_gold`)
    if traj.kind == "swe" and "exit_status" in traj.meta and not (traj.patch or "").strip():
        return traj.with_outcome(Outcome(label="failure", signal="no_submission", reason="empty_patch"))
    return traj.with_outcome(Outcome(label="unknown", signal="no_verdict", reason="no_verdict"))
