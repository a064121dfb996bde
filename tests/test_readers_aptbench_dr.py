"""APTBench deep-research rows rebuilt into whole trajectories across files (FORMATS.md §9)."""

from __future__ import annotations

from pathlib import Path

from extractors.discovery import discover_readers
from extractors.ingest.records import find_inputs
from extractors.ingest.sniff import read_file
from extractors.readers.aptbench_dr import merge_rows
from flows import stages
from schemas import Problem, Trajectory

FIX = Path(__file__).parent / "fixtures" / "aptbench_dr"
READERS = discover_readers()


def _read_both(order):
    return [o for name in order for o in read_file(READERS, str(FIX / name))]


def test_a_summ_ans_row_is_a_whole_run_with_planning_tool_calls_and_observations():
    t = next(o for o in read_file(READERS, str(FIX / "summ_ans.jsonl")))
    assert (
        isinstance(t, Trajectory) and t.kind == "dr" and t.task == "In which year did the Eiffel Tower open?"
    )
    assert [(s.thought, s.action.tool) for s in t.steps] == [
        ("Search when the Eiffel Tower opened.", "web_search"),
        ("Confirm on the page.", "browse_website"),
        ("Done.", "task_complete"),
    ]
    assert t.steps[0].action.args == {"text": "Eiffel Tower opening date"}
    assert (
        t.steps[1].observation == "It opened to the public on 31 March 1889."
        and t.steps[2].observation is None
    )
    assert (t.final_answer, t.gold_answer) == ("1889", "The Eiffel Tower opened in 1889.")
    # a short answer inside a sentence-long gold is not a proof: left to a judge
    assert (t.outcome.label, t.outcome.reason) == ("unknown", "needs_judge")


def test_a_trajectory_string_that_is_not_json_is_a_problem_on_its_line():
    problems = [o for o in read_file(READERS, str(FIX / "summ_ans.jsonl")) if isinstance(o, Problem)]
    assert [(p.where, p.reason) for p in problems] == [(f"{FIX / 'summ_ans.jsonl'}:3", "wrong_type")]


def test_rows_of_one_run_in_two_files_merge_into_one_trajectory_in_either_order():
    for order in (("plan.jsonl", "summ_ans.jsonl"), ("summ_ans.jsonl", "plan.jsonl")):
        items = [o for o in _read_both(order) if isinstance(o, Trajectory)]
        merged = list(merge_rows(items))
        trajs = [m for m in merged if isinstance(m, Trajectory)]
        problems = [m for m in merged if isinstance(m, Problem)]
        by_native = {t.source.native_id: t for t in trajs}
        assert sorted(by_native) == ["ids_acme-model_ddg/3", "ids_acme-model_ddg/4", "ids_acme-model_ddg/9"]
        spine = by_native["ids_acme-model_ddg/3"]
        assert spine.meta["aptbench"]["role"] == "summ_ans" and spine.final_answer == "1889"
        # the agreeing plan rows lend their wrong alternatives, keyed by the step they replace
        assert sorted(spine.meta["wrong_next_steps"]) == ["1", "2"]
        assert all(len(v) == 2 for v in spine.meta["wrong_next_steps"].values())
        assert [(p.where, p.reason, p.severity) for p in problems] == [
            (f"{FIX / 'plan.jsonl'}:3", "conflicting_plan_row", "warning")
        ]
        plan_only = by_native["ids_acme-model_ddg/9"]
        assert len(plan_only.steps) == 3 and plan_only.steps[-1].observation is None
        assert plan_only.source.line == 5 and plan_only.final_answer is None
        assert (plan_only.outcome.label, plan_only.outcome.reason) == ("unknown", "no_final_answer")


def test_other_records_pass_through_the_merge_before_any_held_row():
    rows = [o for o in _read_both(("plan.jsonl",)) if isinstance(o, Trajectory)]
    sentinel = object()
    out = merge_rows([rows[0], sentinel, rows[1]])
    assert next(out) is sentinel


def test_the_label_stage_merges_rows_and_reports_conflicts():
    files = [(str(p), None) for p in find_inputs([FIX])]
    result = stages.read_stage(READERS, files)
    kept = stages.label_and_keep(
        result.trajectories, {}, result.verdicts, frozenset({"dr"}), keep_unknown=False
    )
    assert len(kept.labelled) == 3 and [t.source.native_id for t in kept.kept] == ["ids_acme-model_ddg/4"]
    assert [p.reason for p in kept.problems] == ["conflicting_plan_row"]
    assert kept.dropped == {"needs_judge": 1, "no_final_answer": 1}
