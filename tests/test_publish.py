"""Publishing: verified items only, a loadable folder, official APTBench keys, one atomic Hub commit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from annotations.queue import Queue
from extractors.base import ExtractOptions
from extractors.discovery import discover_extractors, discover_readers
from extractors.ingest.records import find_inputs
from flows import stages
from flows.config import load_config
from flows.hub import HubRefused, push_release
from flows.publish import PublishRefused, prepare, refused_tasks, write_release
from generators.offline import OfflineGenerator
from generators.quality.balance import balance_positions
from schemas import content_hash
from tests.servers.hub import StandInHub

ROOT = Path(__file__).resolve().parents[1]


def _questions(samples_dir):
    files = [(str(p), None) for p in find_inputs([samples_dir / "swe_issue_fix"])]
    read = stages.read_stage(discover_readers(), files)
    kept = stages.label_and_keep(read.trajectories, {}, read.verdicts, frozenset({"swe"}), keep_unknown=False)
    ext = discover_extractors()["swe_issue_fix"]()
    golds, _ = stages.extract_stage(
        ext, kept.kept, {"plan": ExtractOptions(seed=1), "action": ExtractOptions(seed=1)}
    )
    qs = []
    for task in ("plan", "action"):
        tg = [g for g in golds if g.task == task]
        got, _ = stages.generate_stage(OfflineGenerator(seed=1), tg, stages.pool_of(tg), 4)
        qs += got
    return balance_positions(qs, 1)


@pytest.fixture()
def reviewed(tmp_path, samples_dir):
    """A config into tmp_path, a build report, and a queue with some items accepted, some rejected, some pending."""
    cfg = load_config(ROOT / "configs" / "swe.yaml", out_dir=tmp_path)
    qs = _questions(samples_dir)
    queue = Queue(Path(cfg.out_dir) / cfg.scenario / "queue.sqlite")
    queue.enqueue(qs, batch="b1")
    decided = {"accepted": set(), "rejected": set()}
    for i, q in enumerate(sorted(qs, key=lambda q: q.item_id)):
        if i % 3 == 2:
            continue  # left pending
        decision = "accept" if i % 3 == 0 else "reject"
        queue.decide(q.item_id, "ana", decision, expected_rev=0)
        decided["accepted" if decision == "accept" else "rejected"].add(q.item_id)
    out = cfg.output_dir()
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(json.dumps({"quality": {"flags": {}}}))
    return cfg, queue, decided


@pytest.fixture(autouse=True)
def _own_datasets_cache(tmp_path, monkeypatch):
    """`datasets` caches a local folder by its name and config alone (5.x: not by content), so two releases
    in folders both named `release` would read each other's rows; each test gets its own cache."""
    import datasets

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf-datasets-cache")


def _prepare(cfg, queue, repo=None):
    return prepare(cfg, queue.verified(), json.loads((cfg.output_dir() / "report.json").read_text()), repo)


def test_only_accepted_items_reach_the_release(reviewed):
    cfg, queue, decided = reviewed
    files, plan = _prepare(cfg, queue)
    manifest = json.loads(files["manifest.json"])
    released = {iid for items in manifest["items"].values() for iid in items}
    assert released == decided["accepted"]
    assert sum(plan.counts.values()) == len(decided["accepted"])
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
    files, plan = _prepare(cfg, queue)
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
    from schemas import TASKS

    ref_root = shared_dir / "aptbench-reference"
    checked = 0
    for spec in TASKS.values():
        for ref in sorted(ref_root.glob(f"{spec.dataset}/{spec.task}*/input_data.jsonl")):
            row = json.loads(ref.read_text(encoding="utf-8").splitlines()[0])
            ours = [(n, "int" if k == "int" else "str") for n, k in spec.fields]
            theirs = [(k, "int" if isinstance(v, int) else "str") for k, v in row.items()]
            assert ours == theirs, ref
            checked += 1
    assert checked == 6


def test_lm_eval_loads_the_exported_task_yamls(reviewed, tmp_path, monkeypatch):
    from lm_eval.tasks import TaskManager, get_task_dict

    cfg, queue, decided = reviewed  # noqa: RUF059
    files, plan = _prepare(cfg, queue)
    folder = Path(plan.release_dir)
    write_release(folder, files)
    monkeypatch.chdir(tmp_path)
    manager = TaskManager(include_path=str(folder / "lm_eval"), include_defaults=False)
    tasks = get_task_dict(["aptforge_issue_fix_plan", "aptforge_issue_fix_action"], manager)
    plan_task = tasks["aptforge_issue_fix_plan"]
    docs = list(plan_task.test_docs())
    assert len(docs) == plan.counts["issue_fix_plan"]
    doc = docs[0]
    assert plan_task.doc_to_choice(doc) == list(doc["options"])
    assert plan_task.doc_to_target(doc) == doc["gold_index"]
    assert plan_task.doc_to_text(doc).endswith("The correct next step plan is (")
    action_task = tasks["aptforge_issue_fix_action"]
    adoc = next(iter(action_task.test_docs()))
    assert action_task.doc_to_target(adoc) == adoc["answer"]


def test_a_flagged_task_is_refused_unless_overridden_with_a_reason():
    report = {"quality": {"flags": {"plan": "pick_longest 0.61 > bound 0.35"}}}
    assert refused_tasks(report, {}) == {"plan": "pick_longest 0.61 > bound 0.35"}
    assert refused_tasks(report, {"plan": "accepted: options come from one repo"}) == {}


def test_nothing_verified_means_nothing_published(tmp_path):
    cfg = load_config(ROOT / "configs" / "swe.yaml", out_dir=tmp_path)
    with pytest.raises(PublishRefused, match="no verified items"):
        prepare(cfg, [], {}, None)


def test_a_failure_midway_leaves_the_previous_release_intact(tmp_path):
    folder = tmp_path / "release"
    write_release(folder, {"README.md": b"v1", "data/x.parquet": b"1"})
    with pytest.raises(OSError):
        write_release(
            folder, {"README.md": b"v2", "data": b"a file where a folder must go", "data/x.parquet": b"2"}
        )
    assert (folder / "README.md").read_bytes() == b"v1"
    assert [p.name for p in tmp_path.iterdir()] == ["release"]


def test_the_hub_gets_one_commit_a_tag_and_nothing_new_for_identical_content(reviewed, tmp_path, monkeypatch):
    cfg, queue, _ = reviewed
    files, _ = _prepare(cfg, queue, "aptforge/swe")
    state = tmp_path / "hub_state.json"
    with StandInHub(token="hf_good") as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
        first = push_release(
            files, repo_id="aptforge/swe", version="v0.1.0", private=True, state_path=state, token="hf_good"
        )
        assert first.created_commit
        commits = [r for r in hub.requests_for("commit")]
        assert len(commits) == 1
        pushed = hub.files("aptforge/swe")
        assert {p: b for p, b in pushed.items() if p != ".gitattributes"} == files
        assert hub.tags("aptforge/swe")["v0.1.0"] == first.head
        assert hub.get_repo("aptforge/swe").private
        again = push_release(
            files, repo_id="aptforge/swe", version="v0.1.0", private=True, state_path=state, token="hf_good"
        )
        assert not again.created_commit and len(hub.requests_for("commit")) == 1 and again.head == first.head


def test_a_repo_that_moved_is_refused_unless_forced(reviewed, tmp_path, monkeypatch):
    cfg, queue, _ = reviewed
    files, _ = _prepare(cfg, queue, "aptforge/swe")
    state = tmp_path / "hub_state.json"
    with StandInHub(token="hf_good") as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
        push_release(
            files, repo_id="aptforge/swe", version="v1", private=True, state_path=state, token="hf_good"
        )
        hub.commit_out_of_band("aptforge/swe", files={"NOTES.md": b"someone else"})
        with pytest.raises(HubRefused, match="moved since the last publish"):
            push_release(
                files, repo_id="aptforge/swe", version="v2", private=True, state_path=state, token="hf_good"
            )
        assert "v2" not in hub.tags("aptforge/swe")
        forced = push_release(
            files,
            repo_id="aptforge/swe",
            version="v2",
            private=True,
            state_path=state,
            token="hf_good",
            force=True,
        )
        assert hub.tags("aptforge/swe")["v2"] == forced.head


def test_a_bad_token_gets_the_hubs_401(reviewed, tmp_path, monkeypatch):
    from huggingface_hub.errors import HfHubHTTPError

    cfg, queue, _ = reviewed
    files, _ = _prepare(cfg, queue, "aptforge/swe")
    with StandInHub(token="hf_good") as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
        with pytest.raises(HfHubHTTPError) as info:
            push_release(
                files,
                repo_id="aptforge/swe",
                version="v1",
                private=True,
                state_path=tmp_path / "s.json",
                token="hf_wrong",
            )
        assert info.value.response.status_code == 401
        assert not (tmp_path / "s.json").exists()


def test_the_committed_tree_loads_with_datasets(reviewed, tmp_path, monkeypatch):
    import datasets
    from huggingface_hub import snapshot_download

    cfg, queue, decided = reviewed  # noqa: RUF059
    files, plan = _prepare(cfg, queue, "aptforge/swe")
    with StandInHub(token="hf_good") as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
        res = push_release(
            files,
            repo_id="aptforge/swe",
            version="v1",
            private=True,
            state_path=tmp_path / "s.json",
            token="hf_good",
        )
        local = snapshot_download(
            "aptforge/swe",
            repo_type="dataset",
            revision=res.head,
            endpoint=hub.endpoint,
            token="hf_good",
            local_dir=tmp_path / "snap",
        )
    for name, n in plan.counts.items():
        assert datasets.load_dataset(local, name)["test"].num_rows == n


@pytest.mark.flow
def test_the_publish_command_dry_runs_then_publishes_once(prefect_harness, reviewed, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from flows.cli import app

    cfg, _queue, decided = reviewed
    config_file = tmp_path / "swe.yaml"
    config_file.write_text(
        (ROOT / "configs" / "swe.yaml")
        .read_text()
        .replace("out_dir: ../out", f"out_dir: {cfg.out_dir}")
        .replace("../extractors", str(ROOT / "extractors"))
    )
    runner = CliRunner()
    release = Path(cfg.out_dir) / cfg.scenario / "release"
    with StandInHub(token="hf_good") as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
        monkeypatch.setenv("HF_TOKEN", "hf_good")
        dry = runner.invoke(app, ["publish", str(config_file), "--repo", "aptforge/swe", "--dry-run"])
        assert dry.exit_code == 0, dry.output
        assert "dry run" in dry.output and "would push to aptforge/swe" in dry.output
        assert not release.exists() and not hub.requests_for("commit")
        first = runner.invoke(app, ["publish", str(config_file), "--repo", "aptforge/swe"])
        assert first.exit_code == 0, first.output
        parquet = sorted(release.glob("data/*/*.parquet"))
        before = {p.name + p.parent.name: p.read_bytes() for p in parquet}
        second = runner.invoke(app, ["publish", str(config_file), "--repo", "aptforge/swe"])
        assert second.exit_code == 0 and "no new commit" in second.output
        assert len(hub.requests_for("commit")) == 1
        assert {
            p.name + p.parent.name: p.read_bytes() for p in sorted(release.glob("data/*/*.parquet"))
        } == before
        assert "hf_good" not in first.output + second.output
    manifest = json.loads((release / "manifest.json").read_text())
    assert {i for items in manifest["items"].values() for i in items} == decided["accepted"]


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
            "envsetup.yaml",
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
        queue.decide(row.item_id, "ana", "accept", expected_rev=row.rev)
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
