"""Tests for the stand-in Hugging Face Hub (``tests/servers/hub/``), driven by the real ``huggingface_hub``.

The client is never patched: it is pointed at the stand-in with ``HfApi(endpoint=hub.endpoint, token=...)``
and ``endpoint=`` on ``hf_hub_download``. ``HF_HUB_DISABLE_XET`` / ``HF_HUB_DISABLE_TELEMETRY`` are read by
``huggingface_hub`` at import time, hence set here before importing it (a no-op if a conftest already did).
"""

import os

os.environ.setdefault("HF_HUB_DISABLE_XET", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

import hashlib
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
from huggingface_hub import CommitOperationAdd, CommitOperationDelete, HfApi, hf_hub_download
from huggingface_hub.errors import (
    HfHubHTTPError,
    RemoteEntryNotFoundError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)

from tests.servers.hub import StandInHub, ensure_client_compatible

TOKEN = "hf_test_write_token"
REPO = "aptforge/bench-demo"

README = b"---\nlicense: apache-2.0\n---\n# Demo benchmark\n"
JSONL_V1 = b'{"id": 1, "task": "a"}\n{"id": 2, "task": "b"}\n'
JSONL_V2 = JSONL_V1 + b'{"id": 3, "task": "c"}\n'


def _parquet_like(size: int = 20 * 1024) -> bytes:
    """Deterministic binary blob framed like a parquet file (``PAR1`` magic, NUL bytes inside)."""
    body = bytearray()
    block = b"seed"
    while len(body) < size - 8:
        block = hashlib.sha256(block).digest()
        body += block + b"\x00\x00"
    return b"PAR1" + bytes(body[: size - 8]) + b"PAR1"


PARQUET = _parquet_like()


@pytest.fixture(autouse=True)
def _client_speaks_lfs() -> None:
    """Fail loudly (not with a confusing 501) if the client would upload through Xet."""
    try:
        ensure_client_compatible()
    except RuntimeError as exc:
        pytest.fail(str(exc))


@pytest.fixture
def hub() -> Iterator[StandInHub]:
    with StandInHub(token=TOKEN, username="aptforge") as server:
        yield server


@pytest.fixture
def api(hub: StandInHub) -> HfApi:
    return HfApi(endpoint=hub.endpoint, token=TOKEN)


def _download(hub: StandInHub, filename: str, revision: str, cache: Path) -> bytes:
    path = hf_hub_download(
        REPO,
        filename,
        repo_type="dataset",
        revision=revision,
        endpoint=hub.endpoint,
        token=TOKEN,
        cache_dir=cache,
    )
    return Path(path).read_bytes()


def _first_commit(api: HfApi) -> str:
    api.create_repo(REPO, repo_type="dataset", private=True, exist_ok=True)
    info = api.create_commit(
        REPO,
        repo_type="dataset",
        operations=[
            CommitOperationAdd("README.md", README),
            CommitOperationAdd("data/train.parquet", PARQUET),
            CommitOperationAdd("data/train.jsonl", JSONL_V1),
        ],
        commit_message="Publish v1",
        parent_commit=None,
    )
    return info.oid


def test_publish_round_trip(hub: StandInHub, api: HfApi, tmp_path: Path) -> None:
    url = api.create_repo(REPO, repo_type="dataset", private=True, exist_ok=True)
    assert url == f"{hub.endpoint}/datasets/{REPO}"
    api.create_repo(REPO, repo_type="dataset", private=True, exist_ok=True)  # 409 swallowed by exist_ok
    info = api.repo_info(REPO, repo_type="dataset")
    assert info.private is True
    initial = info.sha
    assert api.list_repo_files(REPO, repo_type="dataset") == [".gitattributes"]

    first = api.create_commit(
        REPO,
        repo_type="dataset",
        operations=[
            CommitOperationAdd("README.md", README),
            CommitOperationAdd("data/train.parquet", PARQUET),
            CommitOperationAdd("data/train.jsonl", JSONL_V1),
        ],
        commit_message="Publish v1",
        commit_description="three files",
        parent_commit=None,
    )
    assert api.dataset_info(REPO).sha == first.oid == hub.head(REPO)

    # Only the parquet went through LFS (batch -> PUT -> verify); the text files were inlined.
    [batch] = hub.requests_for("lfs_batch")
    assert batch.json()["objects"] == [{"oid": hashlib.sha256(PARQUET).hexdigest(), "size": len(PARQUET)}]
    assert [r.method for r in hub.requests_for("lfs_upload")] == ["PUT"]
    assert len(hub.requests_for("lfs_verify")) == 1
    [commit_request] = hub.requests_for("commit")
    lines = commit_request.ndjson()
    assert lines[0] == {"key": "header", "value": {"summary": "Publish v1", "description": "three files"}}
    assert sorted((line["key"], line["value"]["path"]) for line in lines[1:]) == [
        ("file", "README.md"),
        ("file", "data/train.jsonl"),
        ("lfsFile", "data/train.parquet"),
    ]

    hub.clear_requests()
    second = api.create_commit(
        REPO,
        repo_type="dataset",
        operations=[
            CommitOperationAdd("data/train.jsonl", JSONL_V2),
            CommitOperationAdd("data/train.parquet", PARQUET),  # unchanged: the client drops it
            CommitOperationDelete("README.md"),
        ],
        commit_message="Publish v2",
        parent_commit=first.oid,
    )
    # The client still asks the LFS batch API about the unchanged parquet; the stand-in (like the Hub)
    # answers without upload actions, so nothing is re-uploaded and the file is left out of the commit.
    [batch] = hub.requests_for("lfs_batch")
    assert "actions" not in batch.response_json()["objects"][0]
    assert hub.requests_for("lfs_upload") == []
    [commit_request] = hub.requests_for("commit")
    assert commit_request.ndjson()[0]["value"]["parentCommit"] == first.oid
    assert sorted(line["key"] for line in commit_request.ndjson()[1:]) == ["deletedFile", "file"]

    api.create_tag(REPO, tag="v1", repo_type="dataset", revision=second.oid)

    refs = api.list_repo_refs(REPO, repo_type="dataset")
    assert [(b.name, b.target_commit) for b in refs.branches] == [("main", second.oid)]
    assert [(t.name, t.ref, t.target_commit) for t in refs.tags] == [("v1", "refs/tags/v1", second.oid)]

    commits = api.list_repo_commits(REPO, repo_type="dataset")
    assert [c.commit_id for c in commits] == [second.oid, first.oid, initial]
    assert [c.title for c in commits] == ["Publish v2", "Publish v1", "initial commit"]
    assert commits[0].authors == ["aptforge"]

    assert api.list_repo_files(REPO, repo_type="dataset", revision="v1") == [
        ".gitattributes",
        "data/train.jsonl",
        "data/train.parquet",
    ]
    tree = {entry.path: entry for entry in api.list_repo_tree(REPO, repo_type="dataset", recursive=True)}
    assert tree["data/train.parquet"].lfs.sha256 == hashlib.sha256(PARQUET).hexdigest()
    assert tree["data/train.parquet"].size == len(PARQUET)
    assert tree["data/train.jsonl"].lfs is None
    assert type(tree["data"]).__name__ == "RepoFolder"

    assert _download(hub, "data/train.parquet", "v1", tmp_path) == PARQUET
    assert _download(hub, "data/train.jsonl", "v1", tmp_path) == JSONL_V2
    assert _download(hub, "data/train.jsonl", first.oid, tmp_path) == JSONL_V1
    assert _download(hub, "README.md", first.oid, tmp_path) == README
    assert hub.files(REPO, revision="v1")["data/train.parquet"] == PARQUET


def test_stale_parent_commit_is_rejected_with_412(hub: StandInHub, api: HfApi) -> None:
    base = _first_commit(api)
    moved = hub.commit_out_of_band(REPO, {"notes.txt": "someone else was here\n"})

    with pytest.raises(HfHubHTTPError) as excinfo:
        api.create_commit(
            REPO,
            repo_type="dataset",
            operations=[CommitOperationAdd("data/train.jsonl", JSONL_V2)],
            commit_message="Publish v2",
            parent_commit=base,
        )
    error = excinfo.value
    assert type(error) is HfHubHTTPError  # not a RepositoryNotFoundError / BadRequestError subclass
    assert error.response.status_code == 412
    assert "A commit has happened since. Please refresh and try again." in str(error)
    assert hub.head(REPO) == moved

    # Refreshing the parent (an abbreviated oid is accepted, like on the Hub) lets the commit through.
    fresh = api.dataset_info(REPO).sha
    assert fresh == moved
    retried = api.create_commit(
        REPO,
        repo_type="dataset",
        operations=[CommitOperationAdd("data/train.jsonl", JSONL_V2)],
        commit_message="Publish v2",
        parent_commit=fresh[:7],
    )
    assert hub.history(REPO)[1].oid == moved
    assert hub.head(REPO) == retried.oid


def test_bad_token_gets_401(hub: StandInHub, api: HfApi) -> None:
    _first_commit(api)
    intruder = HfApi(endpoint=hub.endpoint, token="hf_not_a_valid_token")

    with pytest.raises(HfHubHTTPError) as excinfo:
        intruder.repo_info(REPO, repo_type="dataset")
    assert excinfo.value.response.status_code == 401
    assert not isinstance(excinfo.value, RepositoryNotFoundError)
    assert excinfo.value.response.json() == {"error": "Invalid credentials in Authorization header"}

    with pytest.raises(HfHubHTTPError) as excinfo:
        intruder.create_commit(
            REPO,
            repo_type="dataset",
            operations=[CommitOperationAdd("data/train.jsonl", JSONL_V2)],
            commit_message="nope",
        )
    assert excinfo.value.response.status_code == 401

    with pytest.raises(HfHubHTTPError) as excinfo:
        intruder.create_repo(REPO, repo_type="dataset", private=True, exist_ok=True)
    assert excinfo.value.response.status_code == 401

    # Without any token a private repo looks missing (401 + X-Error-Code: RepoNotFound), as on the Hub.
    with pytest.raises(RepositoryNotFoundError):
        HfApi(endpoint=hub.endpoint, token=False).repo_info(REPO, repo_type="dataset")

    # A token revoked mid-run starts failing too.
    hub.revoke_token(TOKEN)
    with pytest.raises(HfHubHTTPError) as excinfo:
        api.list_repo_refs(REPO, repo_type="dataset")
    assert excinfo.value.response.status_code == 401


def test_existing_tag_is_a_conflict(hub: StandInHub, api: HfApi) -> None:
    first = _first_commit(api)
    api.create_tag(REPO, tag="v1", repo_type="dataset", revision=first)
    hub.commit_out_of_band(REPO, {"notes.txt": "later\n"})

    with pytest.raises(HfHubHTTPError) as excinfo:
        api.create_tag(REPO, tag="v1", repo_type="dataset")
    assert excinfo.value.response.status_code == 409
    api.create_tag(REPO, tag="v1", repo_type="dataset", exist_ok=True)
    assert hub.tags(REPO) == {"v1": first}


def test_scripted_commit_failures(hub: StandInHub, api: HfApi) -> None:
    base = _first_commit(api)

    fault = hub.fail_next_commit(500)
    with pytest.raises(HfHubHTTPError) as excinfo:
        api.create_commit(
            REPO,
            repo_type="dataset",
            operations=[CommitOperationAdd("a.txt", b"a")],
            commit_message="lost",
            parent_commit=base,
        )
    assert excinfo.value.response.status_code == 500
    assert fault.hits == 1
    assert hub.head(REPO) == base  # nothing landed

    # The commit lands but its response is lost: the client sees a 500, the branch moved anyway.
    hub.fail_next_commit(500, after_apply=True)
    with pytest.raises(HfHubHTTPError):
        api.create_commit(
            REPO,
            repo_type="dataset",
            operations=[CommitOperationAdd("b.txt", b"b")],
            commit_message="landed",
            parent_commit=base,
        )
    assert hub.head(REPO) != base
    assert hub.history(REPO)[0].title == "landed"
    assert api.list_repo_commits(REPO, repo_type="dataset")[0].title == "landed"

    # A dropped connection surfaces as the transport's exception, not as an HfHubHTTPError.
    landed = hub.head(REPO)
    hub.inject_fault("commit", drop_connection=True)
    with pytest.raises(httpx2.RemoteProtocolError):
        api.create_commit(
            REPO,
            repo_type="dataset",
            operations=[CommitOperationAdd("c.txt", b"c")],
            commit_message="dropped",
        )
    assert hub.head(REPO) == landed
    assert hub.requests_for("commit")[-1].status is None


def test_client_retries_transient_preupload_error(hub: StandInHub, api: HfApi) -> None:
    api.create_repo(REPO, repo_type="dataset")
    fault = hub.inject_fault("preupload", 503)
    api.create_commit(
        REPO, repo_type="dataset", operations=[CommitOperationAdd("a.txt", b"a")], commit_message="retry"
    )
    assert fault.hits == 1
    assert [r.status for r in hub.requests_for("preupload")] == [503, 200]


def test_multipart_lfs_and_pagination(tmp_path: Path) -> None:
    with StandInHub(
        token=TOKEN, lfs_multipart_chunk_size=8 * 1024, commits_page_size=2, tree_page_size=2
    ) as hub:
        api = HfApi(endpoint=hub.endpoint, token=TOKEN)
        _first_commit(api)
        uploads = hub.requests_for("lfs_upload")
        assert [r.method for r in uploads] == ["PUT", "PUT", "PUT", "POST"]  # 3 parts + completion
        for n in range(3):
            hub.commit_out_of_band(REPO, {f"extra/{n}.txt": f"{n}\n"})

        commits = api.list_repo_commits(REPO, repo_type="dataset")
        assert len(commits) == 5
        assert len(hub.requests_for("commits")) == 3
        files = api.list_repo_files(REPO, repo_type="dataset")
        assert "data/train.parquet" in files and "extra/2.txt" in files
        assert _download(hub, "data/train.parquet", "main", tmp_path) == PARQUET


def test_missing_revision_and_file(hub: StandInHub, api: HfApi, tmp_path: Path) -> None:
    _first_commit(api)
    with pytest.raises(RevisionNotFoundError):
        api.dataset_info(REPO, revision="does-not-exist")
    with pytest.raises(RemoteEntryNotFoundError):
        _download(hub, "nope.txt", "main", tmp_path)
    with pytest.raises(RepositoryNotFoundError):
        api.dataset_info("aptforge/other")
