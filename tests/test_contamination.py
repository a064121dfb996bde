"""Contamination: n-gram overlap of new items with earlier versions and reference corpora, per task."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hygiene_inputs import SAMPLES

from flows.config import ContaminationConfig, load_config
from flows.hygiene import contamination_stage, load_index
from generators.hygiene.contamination import ReferenceIndex, measure, ngrams, row_text, tokens
from schemas import Provenance, Question

_ISSUE = (
    "evaluate uses integer division for the slash operator so fractional results are lost and seven "
    "divided by two gives three instead of three point five as the readme promises for python three"
)
_OTHER = (
    "slugify drops accented letters such as e acute instead of transliterating them which breaks "
    "titles written in french german and spanish when they are turned into url slugs for the blog"
)
_PROMPT = (
    "you are a programmer fixing issues with tools make one tool call per reply and think step by "
    "step before each call then submit the patch when the tests pass in the repository"
)


def _q(
    item: str, traj: str, text: str, task: str = "plan", gold: str = "I need to fix the operator"
) -> Question:
    return Question(
        item_id=item,
        scenario="swe_issue_fix",
        task=task,
        form="completion",
        trajectory_id=traj,
        step_index=1,
        fields={"trajs": text},
        gold=gold,
        provenance=Provenance(source_file="f", source_format="x", extractor="swe_issue_fix"),
    )


def test_tokens_are_normalised_words_and_single_cjk_characters():
    assert tokens("Fix `ops.py`: 7/2 -> 3.5!") == ["fix", "ops", "py", "7", "2", "3", "5"]
    assert tokens("查询 Python版本") == ["查", "询", "python", "版", "本"]


def test_ngrams_cover_every_window_and_a_short_text_is_one_gram():
    assert len(ngrams(_ISSUE, 13)) == len(tokens(_ISSUE)) - 12
    assert ngrams("a b c", 13) == ngrams("A, b; c", 13) and len(ngrams("a b c", 13)) == 1
    assert ngrams("", 13) == set()


def test_row_text_leaves_out_ids_and_answer_letters_but_keeps_completion_answers():
    mcq = row_text(
        {
            "uuid": "u-123",
            "trajs": "context here",
            "choices": "(A) x\n(B) y",
            "answer": "B",
            "item_id": "i-9",
            "options": ["x", "y"],
        }
    )
    assert mcq == "context here\n(A) x\n(B) y\nx\ny"
    assert "pip install -e ." in row_text(
        {"uuid": "u", "executed_cmds": "ls", "target_cmd": "pip install -e ."}
    )
    assert "The answer is 42" in row_text({"uuid": "u", "trajectory": "t", "answer": "The answer is 42"})


def test_an_item_copied_from_a_reference_is_flagged_and_an_unrelated_one_is_not():
    index = ReferenceIndex(13)
    index.add_rows("reference", [{"uuid": "r1", "trajs": f"{_PROMPT} {_ISSUE}", "answer": "A"}])
    result = measure(
        [_q("hit", "t1", _ISSUE), _q("miss", "t2", _OTHER), _q("act", "t1", _ISSUE, "action")], index
    )
    assert {(o.item_id, o.task, o.source) for o in result.flagged} == {
        ("hit", "plan", "reference"),
        ("act", "action", "reference"),
    }
    plan = result.by_task["plan"]
    assert plan["checked"] == 2 and plan["flagged"] == 1
    assert (
        plan["by_source"]["reference"]["rows"] == 1
        and 0.5 <= plan["by_source"]["reference"]["max_overlap"] <= 1
    )
    assert {p.reason for p in result.problems} == {"overlaps_reference"} and all(
        p.severity == "warning" for p in result.problems
    )
    assert all(
        p.severity == "error" for p in measure([_q("hit", "t1", _ISSUE)], index, severity="error").problems
    )


def test_text_shared_by_most_runs_of_the_build_is_boilerplate_not_contamination():
    index = ReferenceIndex(13)
    index.add("previous_versions", _PROMPT)  # an earlier release shipped the same agent prompt
    runs = [
        _q(f"i{k}", f"t{k}", f"{_PROMPT} run {k} " + " ".join(f"w{k}x{j}" for j in range(15)))
        for k in range(4)
    ]
    assert measure(runs, index, min_overlap=0.3).flagged == []
    assert (
        len(measure(runs[:3], index, min_overlap=0.3).flagged) == 3
    )  # too few runs to call anything boilerplate


def test_reference_files_are_read_with_problems_for_bad_lines_and_missing_paths(tmp_path):
    ref = tmp_path / "ref"
    ref.mkdir()
    (ref / "input_data.jsonl").write_text(
        json.dumps({"uuid": "u1", "trajs": _ISSUE, "answer": "A"}) + "\n{broken\n"
    )
    (ref / "report.json").write_text(json.dumps({"counts": {"questions": 3}, "scenario": "x"}))  # not a row
    pq.write_table(pa.table({"uuid": ["u2"], "query": [_OTHER]}), ref / "rows.parquet")
    index, problems = load_index(ContaminationConfig(reference=[str(ref), str(tmp_path / "nope")], ngram=13))
    assert index.rows["reference"] == 2
    assert {(Path(p.where.split(":")[0]).name, p.reason) for p in problems} == {
        ("input_data.jsonl", "invalid_json"),
        ("nope", "missing_reference"),
    }
    assert all(p.stage == "contamination" for p in problems)
    assert any(p.where.endswith("input_data.jsonl:2") for p in problems)


def test_without_sources_nothing_is_checked_or_dropped():
    items = [_q("a", "t", _ISSUE)]
    stage = contamination_stage(items, ContaminationConfig())
    assert stage.kept == items and stage.problems == [] and not stage.report.checked


# --- a real build against an earlier version and a reference corpus -------------------------------


def _config(root: Path, name: str, contamination: dict) -> Path:
    cfg = root / f"{name}.yaml"
    cfg.write_text(
        json.dumps(
            {
                "scenario": "swe_issue_fix",
                "version": name,
                "seed": 3,
                "out_dir": "out",
                "sources": ["inputs"],
                "contamination": contamination,
                # plan distractors never come from the run itself: two runs make too small a pool for
                # plan, while fix_patch distractors are mutations of the run's own patch
                "tasks": {
                    "fix_patch": {"max_items_per_trajectory": 1},
                    "action": {"max_items_per_trajectory": 4},
                },
            }
        )
    )
    return cfg


@pytest.mark.flow
def test_items_found_in_an_earlier_version_are_reported_per_task_and_dropped_when_the_config_says(
    prefect_harness, tmp_path
):
    from flows.build import run_build

    shutil.copytree(SAMPLES / "sweagent_v1", tmp_path / "inputs")
    first = run_build(load_config(_config(tmp_path, "v1", {})))
    assert not first.contamination.checked and first.contamination.flagged == 0
    v1 = tmp_path / "out" / "swe_issue_fix" / "v1" / "candidates"
    published = tmp_path / "published" / "v1"
    released: dict[str, set[str]] = {}
    for task in ("fix_patch", "action"):  # v1 "published" only its tinycalc items
        table = pq.read_table(v1 / f"{task}.parquet")
        rows = [r for r in table.to_pylist() if r["instance_id"].startswith("tinycalc")]
        released[task] = {r["item_id"] for r in rows}
        (published / "data" / task).mkdir(parents=True)
        pq.write_table(
            pa.Table.from_pylist(rows, schema=table.schema), published / "data" / task / "test-00000.parquet"
        )
    assert all(released.values())
    reference = tmp_path / "aptbench" / "input_data.jsonl"
    reference.parent.mkdir()
    reference.write_text(
        json.dumps({"uuid": "r", "issue_statement": _OTHER, "choices": "(A) a", "answer": "A"}) + "\n"
    )

    report = run_build(
        load_config(
            _config(
                tmp_path,
                "v2",
                {"previous_versions": [str(published)], "reference": [str(reference)], "drop": True},
            )
        )
    ).model_dump(mode="json")
    c = report["contamination"]
    assert (
        c["checked"]
        and c["drop"]
        and c["reference_rows"] == {"previous_versions": sum(map(len, released.values())), "reference": 1}
    )
    for task in ("fix_patch", "action"):
        per = c["by_task"][task]["by_source"]
        assert per["previous_versions"]["flagged"] == len(released[task]) and per["reference"]["flagged"] == 0
        assert c["by_task"][task]["flagged"] == len(released[task])
        kept = pq.read_table(
            tmp_path / "out" / "swe_issue_fix" / "v2" / "candidates" / f"{task}.parquet"
        ).to_pylist()
        assert kept and not {r["item_id"] for r in kept} & released[task]
        assert {r["instance_id"] for r in kept} == {"slugkit__slugkit-7"}
    assert c["dropped"] == sum(map(len, released.values()))
    quarantine = (tmp_path / "out" / "swe_issue_fix" / "v2" / "quarantine.jsonl").read_text().splitlines()
    flagged = [json.loads(x) for x in quarantine if '"contamination"' in x]
    assert len(flagged) == c["dropped"] and all(f["severity"] == "error" for f in flagged)
    assert report["problems_by_reason"]["contamination.overlaps_previous_versions"] == c["dropped"]
