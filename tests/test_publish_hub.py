"""Publishing to the Hub stand-in: guards before any write, one commit of changed files, a tag, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flows.hub import HubRefused, push_release
from tests.publish_support import config_file_for, own_datasets_cache, prepare_release, reviewed
from tests.servers.hub import StandInHub

pytestmark = pytest.mark.usefixtures("own_datasets_cache")
__all__ = ["own_datasets_cache", "reviewed"]


def test_the_hub_gets_one_commit_a_tag_and_nothing_new_for_identical_content(reviewed, tmp_path, monkeypatch):
    cfg, queue, _ = reviewed
    files, _ = prepare_release(cfg, queue, "aptforge/swe")
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
    files, _ = prepare_release(cfg, queue, "aptforge/swe")
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
    files, _ = prepare_release(cfg, queue, "aptforge/swe")
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
    files, _ = prepare_release(cfg, queue, "aptforge/swe")
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
    files, _ = prepare_release(cfg, queue, "aptforge/swe")
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
    files, _ = prepare_release(cfg, queue, "aptforge/swe")
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
    files, plan = prepare_release(cfg, queue, "aptforge/swe")
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
def test_handled_publish_errors_are_one_line_with_a_hint_and_no_traceback(
    prefect_harness, reviewed, tmp_path
):
    """Issue 19 item 6: a bad token and a refusal each print one line naming what to do; exit 1."""
    import os
    import subprocess
    import sys

    from prefect.settings import PREFECT_API_URL

    cfg, _queue, _ = reviewed
    config_file = config_file_for(cfg, tmp_path)
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
    config_file = config_file_for(cfg, tmp_path)
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
        assert "status_rejected=" in first.output and "status_pending=" in first.output  # excluded, by status
        assert "tag v0.1.0 at " in first.output and "(new)" in first.output
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
