"""Publishing: verified items only, a loadable folder, official APTBench keys, atomic writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from annotations.queue import Queue
from flows.config import load_config
from flows.publish import PublishRefused, prepare, write_release
from generators.quality.audit import refused_tasks
from schemas import content_hash
from schemas.report import QualityReport
from tests.publish_support import ROOT, build_report_for, own_datasets_cache, prepare_release, reviewed

pytestmark = pytest.mark.usefixtures("own_datasets_cache")
__all__ = ["own_datasets_cache", "reviewed"]


def test_only_accepted_items_reach_the_release(reviewed):
    cfg, queue, decided = reviewed
    files, plan = prepare_release(cfg, queue)
    manifest = json.loads(files["manifest.json"])
    released = {iid for items in manifest["items"].values() for iid in items}
    fewshot = {iid for items in manifest["fewshot"].values() for iid in items}
    assert released | fewshot == decided["accepted"] and not released & fewshot
    assert sum(plan.counts.values()) == len(released) > 0
    assert plan.counts.keys() <= {"issue_fix_plan", "issue_fix_action"}


def test_an_item_whose_content_no_longer_matches_its_review_is_left_out(reviewed):
    cfg, queue, decided = reviewed  # noqa: RUF059
    items = queue.verified()
    tampered = items[0].model_copy(
        update={"question": items[0].question.model_copy(update={"gold": "I need to panic"})}
    )
    from flows.publish import select_verified

    keep, excluded = select_verified([tampered, *items[1:]], cfg.scenario)
    assert tampered.question.item_id not in {i.question.item_id for i in keep}
    assert excluded == {"content_changed_since_review": 1}
    assert content_hash(items[1].question) == items[1].content_hash


def test_the_folder_loads_with_datasets_and_exports_official_keys(reviewed, tmp_path):
    import datasets

    cfg, queue, decided = reviewed
    files, plan = prepare_release(cfg, queue)
    folder = tmp_path / "release"
    write_release(folder, files)
    for name, n in plan.counts.items():
        ds = datasets.load_dataset(str(folder), name)
        assert ds["test"].num_rows == n
        assert set(ds["test"]["item_id"]) <= decided["accepted"]
    plan_rows = [
        json.loads(x) for x in (folder / "aptbench/issue_fix/plan/input_data.jsonl").read_text().splitlines()
    ]
    assert all(
        list(r) == ["uuid", "trajs", "choices", "answer"] and all(isinstance(v, str) for v in r.values())
        for r in plan_rows
    )
    action_rows = [
        json.loads(x)
        for x in (folder / "aptbench/issue_fix/action/input_data.jsonl").read_text().splitlines()
    ]
    assert all(list(r) == ["uuid", "tool_set", "trajs", "answer"] for r in action_rows)
    card = (folder / "README.md").read_text()
    assert card.startswith("---\n") and "config_name: issue_fix_plan" in card and "## Changelog" in card


def test_exported_keys_and_types_match_the_official_reference_files(shared_dir):
    """Every task the reference holds: our schema declares exactly its keys, in order, with its types."""
    from schemas import registered_tasks

    ref_root = shared_dir / "aptbench-reference"
    checked = 0
    for spec in registered_tasks().values():
        for ref in sorted(ref_root.glob(f"{spec.dataset}/{spec.task}*/input_data.jsonl")):
            row = json.loads(ref.read_text(encoding="utf-8").splitlines()[0])
            ours = [(n, "int" if k == "int" else "str") for n, k in spec.fields]
            theirs = [(k, "int" if isinstance(v, int) else "str") for k, v in row.items()]
            assert ours == theirs, ref
            checked += 1
    assert checked == 6


def test_lm_eval_loads_both_protocols_with_demos_from_the_fewshot_split(reviewed, tmp_path, monkeypatch):
    from lm_eval.tasks import TaskManager, get_task_dict

    cfg, queue, decided = reviewed  # noqa: RUF059
    files, plan = prepare_release(cfg, queue)
    folder = Path(plan.release_dir)
    write_release(folder, files)
    manifest = json.loads(files["manifest.json"])
    monkeypatch.chdir(folder)  # a folder release's YAMLs read `data/...` relative to it: no absolute path
    manager = TaskManager(include_path=str(folder / "lm_eval"), include_defaults=False)
    names = [f"aptforge_issue_fix_{t}_{p}" for t in ("plan", "action") for p in ("aptbench", "loglik")]
    tasks = get_task_dict(names, manager)
    plan_task = tasks["aptforge_issue_fix_plan_aptbench"]
    docs = list(plan_task.test_docs())
    assert len(docs) == plan.counts["issue_fix_plan"]
    demos = list(plan_task.fewshot_docs())
    assert manifest["fewshot"]["issue_fix_plan"]  # else lm-eval would fall back on the test docs
    assert {d["item_id"] for d in demos} == set(manifest["fewshot"]["issue_fix_plan"])
    assert not {d["trajectory_id"] for d in demos} & {d["trajectory_id"] for d in docs}
    doc = docs[0]
    assert plan_task.doc_to_text(doc).startswith("Request: Select the correct next step plan")
    assert plan_task.doc_to_text(doc).endswith("The correct next step plan is (")
    assert plan_task.doc_to_target(doc) == doc["answer"] + ")"
    loglik = tasks["aptforge_issue_fix_plan_loglik"]
    assert loglik.doc_to_choice(doc) == ["A)", "B)", "C)", "D)"][: len(doc["options"])]
    assert loglik.doc_to_target(doc) == doc["gold_index"]
    action = tasks["aptforge_issue_fix_action_aptbench"]
    adoc = next(iter(action.test_docs()))
    assert action.doc_to_target(adoc) == adoc["answer"] + "\n```"
    assert action.doc_to_text(adoc).endswith("The next command:\n```bash\n")


def test_a_flagged_task_is_refused_unless_overridden_with_a_reason():
    quality = QualityReport(flags={"plan": "pick_longest 0.61 > bound 0.35"})
    assert refused_tasks(quality, {}) == {"plan": "pick_longest 0.61 > bound 0.35"}
    assert refused_tasks(quality, {"plan": "accepted: options come from one repo"}) == {}


def test_nothing_verified_means_nothing_published(tmp_path):
    cfg = load_config(ROOT / "configs" / "swe_issue_fix.yaml", out_dir=tmp_path)
    with pytest.raises(PublishRefused, match="no verified items"):
        prepare(cfg, [], build_report_for(cfg), None)


def test_a_failure_midway_leaves_the_previous_release_intact(tmp_path):
    folder = tmp_path / "release"
    write_release(folder, {"README.md": b"v1", "data/x.parquet": b"1"})
    with pytest.raises(OSError):
        write_release(
            folder, {"README.md": b"v2", "data": b"a file where a folder must go", "data/x.parquet": b"2"}
        )
    assert (folder / "README.md").read_bytes() == b"v1"
    assert [p.name for p in tmp_path.iterdir()] == ["release"]


@pytest.mark.flow
@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (
            "dr.yaml",
            {
                "aptbench/deepresearch/plan_en/input_data.jsonl",
                "aptbench/deepresearch/summ_ans_en/input_data.jsonl",
            },
        ),
        (
            "swe_env_setup.yaml",
            {"aptbench/env_setup/action/input_data.jsonl", "aptbench/env_setup/error/input_data.jsonl"},
        ),
    ],
)
def test_a_release_exports_exactly_the_reference_keys_and_types(
    prefect_harness, shared_dir, tmp_path, config, expected
):
    """Build the bundled samples, accept everything, render the release: each APTBench file matches the official one."""
    from flows.build import run_build

    cfg = load_config(ROOT / "configs" / config, out_dir=tmp_path)
    report = run_build(cfg)
    queue = Queue(cfg.queue_path())
    for row in queue.items(limit=1000):
        queue.decide(row.item_id, "ana", "accept", seen=queue.seen(row.item_id, "ana"))
    files, plan = prepare(cfg, queue.verified(), report, None)
    exported = {p: b for p, b in files.items() if p.startswith("aptbench/")}
    assert expected <= set(exported)
    compared = 0
    for path, blob in exported.items():
        reference = shared_dir / "aptbench-reference" / path.removeprefix("aptbench/")
        if not reference.exists():
            reference = (
                shared_dir
                / "aptbench-reference"
                / path.removeprefix("aptbench/").replace("plan_en", "plan_zh")
            )
        if not reference.exists():
            continue
        ref = json.loads(reference.read_text(encoding="utf-8").splitlines()[0])
        for line in blob.decode("utf-8").splitlines():
            row = json.loads(line)
            assert list(row) == list(ref), path
            assert [type(v) for v in row.values()] == [type(v) for v in ref.values()], path
            compared += 1
    in_reference = sum(n for name, n in plan.counts.items() if not name.startswith("env_setup_plan"))
    assert compared == in_reference > 0
