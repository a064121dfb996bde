"""The foundation readers on the real public runs in $APTFORGE_SHARED/trajectories."""

from __future__ import annotations

from collections import Counter

from extractors.discovery import discover_readers
from extractors.ingest.records import find_inputs
from flows import stages


def _labelled(folder):
    files = [(str(p), None) for p in find_inputs([folder])]
    result = stages.read_stage(discover_readers(), files)
    kept = stages.label_and_keep(
        result.trajectories, {}, result.verdicts, frozenset({"swe"}), keep_unknown=True
    )
    return kept.labelled, result.problems


def test_every_official_swe_agent_traj_is_read_and_none_counts_as_resolved(shared_dir):
    trajs, problems = _labelled(shared_dir / "trajectories" / "swe-agent-official")
    swe_agent = [t for t in trajs if t.source.format == "swe_agent_traj"]
    assert len(swe_agent) == 22
    assert not [p for p in problems if p.where.endswith(".traj")]
    # all are "submitted" but no harness report exists: exit status decides nothing
    assert Counter(t.outcome.label for t in swe_agent) == {"unknown": 22}
    versions = Counter(t.source.agent.split()[-1][0] for t in swe_agent)
    assert versions["0"] > 0 and versions["1"] > 0
    assert all(len(t.steps) >= 4 and t.task for t in swe_agent)


def test_the_adp_rows_are_read_with_their_row_verdicts(shared_dir):
    trajs, problems = _labelled(shared_dir / "trajectories" / "adp-hf-swe-samples")
    assert not problems
    assert len(trajs) == 15
    assert Counter(t.outcome.signal for t in trajs) == {"row:target": 5, "row:resolved": 10}
    assert all(t.outcome.label == "success" for t in trajs)
    assert all(t.steps and any(s.action for s in t.steps) for t in trajs)
