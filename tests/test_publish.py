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
        queue.decide(q.item_id, "ana", decision, seen=queue.seen(q.item_id, "ana"))
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


def test_lm_eval_loads_both_protocols_with_demos_from_the_fewshot_split(reviewed, tmp_path, monkeypatch):
    from lm_eval.tasks import TaskManager, get_task_dict

    cfg, queue, decided = reviewed  # noqa: RUF059
    files, plan = _prepare(cfg, queue)
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
        again = _push(files, state)
        assert not again.created_commit and len(hub.requests_for("commit")) == 1 and again.head == first.head


def _push(files, state, version="v0.1.0", **kw):
    return push_release(
        files, repo_id="aptforge/swe", version=version, private=True, state_path=state, token="hf_good", **kw
    )


def _changed_card(files, note="A corrected description."):
    return {**files, "README.md": files["README.md"] + note.encode()}


def test_a_repo_that_moved_is_refused_unless_forced_and_force_says_so(reviewed, tmp_path, monkeypatch):
    cfg, queue, _ = reviewed
    files, _ = _prepare(cfg, queue, "aptforge/swe")
    state = tmp_path / "hub_state.json"
    with StandInHub(token="hf_good") as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
        _push(files, state, "v1")
        moved = hub.commit_out_of_band("aptforge/swe", files={"NOTES.md": b"someone else"})
        new = _changed_card(files)
        with pytest.raises(HubRefused, match="moved since the last publish") as info:
            _push(new, state, "v2")
        assert "--force" in str(info.value)
        assert "v2" not in hub.tags("aptforge/swe") and hub.head("aptforge/swe") == moved
        forced = _push(new, state, "v2", force=True)
        assert (
            forced.overrode.startswith("--force overrode the moved-repo guard")
            and moved[:12] in forced.overrode
        )
        assert forced.changed == ("README.md",)
        assert hub.tags("aptforge/swe")["v2"] == forced.head == forced.tag_commit
        assert hub.files("aptforge/swe")["NOTES.md"] == b"someone else"


def test_changed_content_under_an_existing_tag_is_refused_before_any_commit(reviewed, tmp_path, monkeypatch):
    """Issue 19 item 2: the tag is checked before the commit, and our own commits never count as 'moved'."""
    cfg, queue, _ = reviewed
    files, _ = _prepare(cfg, queue, "aptforge/swe")
    state = tmp_path / "hub_state.json"
    with StandInHub(token="hf_good") as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
        first = _push(files, state)
        new = _changed_card(files)
        for force in (False, True):
            with pytest.raises(HubRefused, match=r"tag v0\.1\.0 already points at .* bump `version`"):
                _push(new, state, force=force)
        assert len(hub.requests_for("commit")) == 1 and hub.head("aptforge/swe") == first.head
        assert hub.tags("aptforge/swe") == {"v0.1.0": first.head}
        bumped = _push(new, state, "v0.2.0")
        assert bumped.created_commit and bumped.changed == ("README.md",) and not bumped.overrode
        ops = hub.requests_for("commit")[-1].ndjson()
        assert [op["value"]["path"] for op in ops if op["key"] != "header"] == ["README.md"]
        assert hub.tags("aptforge/swe") == {"v0.1.0": first.head, "v0.2.0": bumped.head}


def test_a_corrupted_remote_file_is_repaired_by_a_commit_of_that_file(reviewed, tmp_path, monkeypatch):
    """Issue 19 item 3: identical content is decided file by file from blob ids, not from the remote manifest."""
    cfg, queue, _ = reviewed
    files, _ = _prepare(cfg, queue, "aptforge/swe")
    state = tmp_path / "hub_state.json"
    data = next(p for p in sorted(files) if p.endswith(".parquet"))
    with StandInHub(token="hf_good") as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
        first = _push(files, state)
        hub.commit_out_of_band("aptforge/swe", files={data: b"garbage"})
        with pytest.raises(HubRefused, match="moved since the last publish"):
            _push(files, state)
        repaired = _push(files, state, force=True)
        assert repaired.created_commit and repaired.changed == (data,)
        assert "moved-repo guard" in repaired.overrode
        remote = hub.files("aptforge/swe")
        assert {p: b for p, b in remote.items() if p != ".gitattributes"} == files
        # the tag already named this very content at the first commit: it stays there, and the result says so
        assert repaired.tag_commit == first.head == hub.tags("aptforge/swe")["v0.1.0"] != repaired.head
        assert len(hub.requests_for("commit")) == 2


def test_a_fresh_checkout_publishes_identical_content_with_no_commit(reviewed, tmp_path, monkeypatch):
    """Issue 19 item 5: no local state and the same release -> 0 commits; a missing tag is added."""
    cfg, queue, _ = reviewed
    files, _ = _prepare(cfg, queue, "aptforge/swe")
    with StandInHub(token="hf_good") as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
        first = _push(files, tmp_path / "laptop.json")
        again = _push(files, tmp_path / "ci-runner.json")
        assert not again.created_commit and not again.created_tag and again.head == first.head
        hub.client("hf_good").delete_tag("aptforge/swe", tag="v0.1.0", repo_type="dataset")
        tagged = _push(files, tmp_path / "another-runner.json")
        assert not tagged.created_commit and tagged.created_tag
        assert hub.tags("aptforge/swe") == {"v0.1.0": first.head}
        assert len(hub.requests_for("commit")) == 1
        foreign = _changed_card(files)
        hub.commit_out_of_band("aptforge/swe", files={"README.md": foreign["README.md"]})
        with pytest.raises(HubRefused, match="untagged head"):
            _push(files, tmp_path / "yet-another-runner.json", "v0.2.0")


@pytest.mark.flow
def test_a_failed_push_leaves_the_previous_local_release(prefect_harness, reviewed, monkeypatch):
    """Issue 19 item 4: the local folder is swapped in only after the push succeeded."""
    from huggingface_hub.errors import HfHubHTTPError

    from flows.publish import publish

    cfg, _queue, _ = reviewed
    release = Path(cfg.out_dir) / cfg.scenario / "release"
    with StandInHub(token="hf_good") as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
        monkeypatch.setenv("HF_TOKEN", "hf_good")
        publish(cfg, repo_id="aptforge/swe")
        before = {p: p.read_bytes() for p in sorted(release.rglob("*")) if p.is_file()}
        bumped = cfg.model_copy(update={"version": "v0.2.0", "description": "A second release."})
        bumped.output_dir().mkdir(parents=True)
        (bumped.output_dir() / "report.json").write_bytes((cfg.output_dir() / "report.json").read_bytes())
        hub.fail_next_commit(500, message="the Hub fell over")
        with pytest.raises(HfHubHTTPError):
            publish(bumped, repo_id="aptforge/swe")
        assert {p: p.read_bytes() for p in sorted(release.rglob("*")) if p.is_file()} == before
        assert sorted(p.name for p in release.parent.iterdir() if p.name.startswith(".release")) == []
        assert "v0.2.0" not in hub.tags("aptforge/swe")
        result = publish(bumped, repo_id="aptforge/swe")
        assert result["pushed"]["created_commit"] and not result["pushed"]["overrode"]
        manifest = json.loads((release / "manifest.json").read_text())
        assert manifest["version"] == "v0.2.0"
        assert result["plan"]["changes"] == {
            name: {"added": 0, "removed": 0, "changed": 0} for name in result["plan"]["counts"]
        }


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


def _config_file(cfg, tmp_path):
    config_file = tmp_path / "swe.yaml"
    config_file.write_text(
        (ROOT / "configs" / "swe.yaml")
        .read_text()
        .replace("out_dir: ../out", f"out_dir: {cfg.out_dir}")
        .replace("../extractors", str(ROOT / "extractors"))
    )
    return config_file


@pytest.mark.flow
def test_handled_publish_errors_are_one_line_with_a_hint_and_no_traceback(
    prefect_harness, reviewed, tmp_path
):
    """Issue 19 item 6: a bad token and a refusal each print one line naming what to do; exit 1."""
    import os
    import subprocess
    import sys

    from prefect.settings import PREFECT_API_URL

    cfg, _queue, _ = reviewed
    config_file = _config_file(cfg, tmp_path)
    with StandInHub(token="hf_good") as hub:
        env = {**os.environ, "HF_ENDPOINT": hub.endpoint, "PREFECT_API_URL": PREFECT_API_URL.value()}
        env.pop("PREFECT_LOGGING_LEVEL", None)

        def run(token, *flags):
            done = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "flows.cli",
                    "publish",
                    str(config_file),
                    "--repo",
                    "aptforge/swe",
                    *flags,
                ],
                env={**env, "HF_TOKEN": token},
                capture_output=True,
                text=True,
                timeout=300,
                check=False,
            )
            return done.returncode, [x for x in (done.stdout + done.stderr).splitlines() if x.strip()]

        code, lines = run("hf_wrong")
        assert code == 1 and len(lines) == 1, lines
        assert "401" in lines[0] and "HF_TOKEN" in lines[0] and "hf_wrong" not in lines[0]
        assert not (Path(cfg.out_dir) / cfg.scenario / "release").exists()
        assert run("hf_good")[0] == 0
        hub.commit_out_of_band("aptforge/swe", files={"README.md": b"someone else's card"})
        code, lines = run("hf_good")
        assert code == 1 and len(lines) == 1 and "--force" in lines[0], lines
        code, lines = run("hf_good", "--debug")
        assert code == 1 and any("Traceback" in x for x in lines)


@pytest.mark.flow
def test_the_publish_command_dry_runs_then_publishes_once(prefect_harness, reviewed, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from flows.cli import app

    cfg, _queue, decided = reviewed
    config_file = _config_file(cfg, tmp_path)
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
    released = [i for part in ("items", "fewshot") for items in manifest[part].values() for i in items]
    assert set(released) == decided["accepted"]


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
