"""mini-swe-agent v1 and v2 trajectories on the project's own small fixtures."""

from __future__ import annotations

from pathlib import Path

from extractors.discovery import discover_readers
from extractors.ingest.sniff import read_file
from extractors.labels.reports import load_reports
from extractors.readers.mini_swe_agent import MiniSweAgent
from flows import stages
from schemas import Problem, Trajectory

FIX = Path(__file__).parent / "fixtures" / "mini_swe_agent"
READERS = discover_readers()


def _one(name: str) -> Trajectory | Problem:
    out = list(read_file(READERS, str(FIX / name)))
    assert len(out) == 1
    return out[0]


def test_a_v1_run_pairs_each_bash_block_with_the_returncode_message_after_it():
    t = _one("acme__wordcount-4.traj.json")
    assert isinstance(t, Trajectory) and t.source.format == "mini_swe_agent"
    assert t.task.startswith("wordcount.count() ignores words separated by tabs")
    assert "<pr_description>" in t.prompt and t.system_prompt.startswith("You are a helpful assistant")
    assert [s.action.raw if s.action else None for s in t.steps] == [
        "grep -rn 'def count' .",
        None,
        "sed -i \"s/split(' ')/split()/\" wc.py",
        "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff --cached",
    ]
    assert t.steps[0].thought == "Find where count is defined." and t.steps[0].action.tool == "bash"
    assert t.steps[0].observation.startswith("<returncode>0</returncode>")
    # a reply without a bash block gets the format error back as its observation
    assert "EXACTLY ONE action" in t.steps[1].observation
    assert t.steps[-1].observation.startswith("diff --git")
    assert t.source.agent == "mini-swe-agent 1.9.0" and t.source.model == "acme/coder-small"
    assert t.meta["exit_status"] == "Submitted" and t.patch.startswith("diff --git")


def test_a_v2_run_matches_tool_results_to_calls_by_id_even_out_of_order():
    t = _one("acme__wordcount-9.traj.json")
    assert isinstance(t, Trajectory)
    assert [s.action.args["command"] for s in t.steps] == ["ls", "cat wc.py", "ls tests"]
    assert [s.action.call_id for s in t.steps] == ["call_a", "call_b", "call_c"]
    assert "def count" in t.steps[1].observation and "test_wc.py" in t.steps[2].observation
    assert t.steps[1].thought == "Read both files at once." and t.steps[2].thought == ""
    # the submission in `info` is empty: the run submitted nothing, whatever the exit message says
    assert t.patch == "" and t.meta["exit_status"] == "Submitted"


def test_submitted_is_not_resolved_a_report_decides_and_an_empty_patch_fails():
    files = [(str(FIX / n), None) for n in ("acme__wordcount-4.traj.json", "acme__wordcount-9.traj.json")]
    result = stages.read_stage(READERS, files)
    verdicts = load_reports([str(FIX / "report.json")])
    labelled = stages.label_and_keep(
        result.trajectories, verdicts.found, [], frozenset({"swe"}), True
    ).labelled
    assert {t.source.instance_id: (t.outcome.label, t.outcome.reason) for t in labelled} == {
        "acme__wordcount-4": ("success", "resolved"),
        "acme__wordcount-9": ("failure", "empty_patch"),
    }


def test_null_messages_and_an_unknown_format_version_are_problems_with_reasons():
    null = _one("null_messages.traj.json")
    assert isinstance(null, Problem) and null.reason == "missing_field" and "messages" in null.detail
    assert null.where == str(FIX / "null_messages.traj.json")
    unknown = _one("unknown_version.traj.json")
    assert isinstance(unknown, Problem) and unknown.reason == "unknown_version"


def test_the_observation_cap_keeps_head_and_tail_and_counts_the_cut():
    record = {
        "trajectory_format": "mini-swe-agent-1",
        "instance_id": "x",
        "info": {},
        "messages": [
            {"role": "user", "content": "fix it"},
            {"role": "assistant", "content": "THOUGHT: look\n\n```bash\ncat big\n```"},
            {"role": "user", "content": "H" * 500 + "M" * 2000 + "T" * 500},
        ],
    }
    from extractors.base import Origin

    t = MiniSweAgent(max_observation_chars=1000).read(record, Origin("mem.json"))
    obs = t.steps[0].observation
    assert obs.startswith("H" * 500) and obs.endswith("T" * 500) and "2000 characters omitted" in obs
    assert t.meta["observations_truncated"] == 1
