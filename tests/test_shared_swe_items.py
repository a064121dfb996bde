"""SWE issue-fix items from the 52 real mini-swe-agent runs in $APTFORGE_SHARED, read as a reviewer would."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator

import pytest

from extractors.base import ExtractOptions
from extractors.discovery import discover_readers
from extractors.ingest.records import find_inputs
from extractors.labels.reports import load_reports
from extractors.swe_issue_fix import SweIssueFix
from extractors.swe_issue_fix.patches import parse_patch
from extractors.swe_issue_fix.plans import balanced
from flows import stages
from generators.offline import OfflineGenerator
from schemas import GoldStep, Question, candidate_source

RUN = "trajectories/minisweagent-v1-gemini3pro-swebench-verified/swebench_results/20251118_gemini-3-pro-74pct"
TASKS = ("plan", "locate", "fix_patch", "test_patch")
DOUBLED = re.compile(r"\bI need to (?:need|will|would|should|must|have to|want to|'ll|am going to|can)\b")


@pytest.fixture(scope="module")
def built(shared_dir) -> dict[str, tuple[list[GoldStep], list[Question]]]:
    root = shared_dir / RUN
    files = [(str(p), None) for p in find_inputs([str(root / "trajs")]) if str(p).endswith(".traj.json")]
    read = stages.read_stage(discover_readers(), files)
    reports = load_reports([str(root / "trajs" / "sb-cli-reports")])
    kept = stages.label_and_keep(read.trajectories, reports.found, [], frozenset({"swe"}), False)
    assert len(kept.kept) == 26
    extractor = stages.make_extractor(SweIssueFix, stages.observe_runs(SweIssueFix, kept.labelled))
    per_task = {"plan": 3, "locate": 2, "fix_patch": 1, "test_patch": 1}
    out = {}
    for task in TASKS:
        options = {task: ExtractOptions(max_items_per_trajectory=per_task[task], seed=20261130)}
        golds, _ = stages.extract_stage(extractor, kept.kept, options)
        questions, _ = stages.generate_stage(OfflineGenerator(seed=20261130), golds, stages.pool_of(golds), 4)
        passed, _ = stages.check_stage(questions)
        out[task] = (golds, passed)
    out["runs"] = kept.kept  # type: ignore[assignment]
    return out


def _texts(golds: list[GoldStep], questions: list[Question]) -> Iterator[str]:
    for g in golds:
        yield g.gold
        yield from (c.text for c in g.candidates)
    for q in questions:
        yield from (d.text for d in (*q.distractors, *q.reserve))


def test_every_patch_level_task_and_plan_yield_at_least_twenty_items(built):
    assert {task: len(built[task][1]) >= 20 for task in TASKS} == dict.fromkeys(TASKS, True)


def test_no_plan_gold_context_plan_or_distractor_doubles_a_modal_or_cuts_a_quote(built):
    golds, questions = built["plan"]
    texts = list(_texts(golds, questions))
    texts += [m["plan"] for g in golds for m in __import__("json").loads(g.fields["trajs"]) if "plan" in m]
    assert len(texts) > 500
    assert [t for t in texts if DOUBLED.search(t)] == []
    assert [t for t in texts if not balanced(t)] == []


def test_most_plan_distractors_come_from_the_same_instance_or_rules_over_this_run(built):
    _, questions = built["plan"]
    sources = Counter(candidate_source(d.origin) for q in questions for d in q.distractors)
    assert (sources["same_instance"] + sources["rule"]) / sum(sources.values()) >= 0.7, sources
    assert sources["same_run"] == 0


def test_fix_patch_distractors_touch_a_gold_file_and_never_another_repository(built):
    _, questions = built["fix_patch"]
    touching = total = 0
    for q in questions:
        gold_files = {f.path for f in parse_patch(q.gold)}
        for d in q.distractors:
            total += 1
            touching += bool(gold_files & {f.path for f in parse_patch(d.text)})
    assert touching / total >= 0.9, (touching, total)


def test_locate_distractors_never_contain_a_line_the_gold_patch_removes(built):
    golds, _ = built["locate"]
    patches = {t.trajectory_id: parse_patch(t.patch or "") for t in built["runs"]}
    assert all(c.origin.startswith("rule:shifted_window") for g in golds for c in g.candidates)
    checked = 0
    for g in golds:
        hunk = next(h for f in patches[g.trajectory_id] for h in f.hunks if "\n".join(h.pre_image) == g.gold)
        removed = {ln[1:].strip() for ln in hunk.lines if ln[:1] == "-" and len(ln[1:].strip()) > 8}
        for c in g.candidates:
            checked += 1
            assert len(c.text.split("\n")) == len(hunk.pre_image)
            assert not removed & {ln.strip() for ln in c.text.split("\n")}, (g.step_id, c.origin)
    assert checked >= 60
