"""Push a rendered release to the Hugging Face Hub as one commit, then tag it.

`create_repo` (private by default), one `create_commit` carrying every file with `parent_commit`
set to the head we last published (or saw), then `create_tag(version)`. A repo that moved since
our last known commit is refused unless `force`. Publishing identical content makes no commit.
The token comes from the environment only and is never logged.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from flows.io import write_json


class HubRefused(RuntimeError):
    """The push was refused before anything was written remotely (moved repo, missing token...)."""


class PushResult(NamedTuple):
    """What the push did."""

    repo_id: str
    commit: str | None
    """The new commit, or None when the remote already held identical content."""
    head: str
    """Branch head after the push."""
    tag: str
    created_commit: bool


def hub_token() -> str:
    """`HF_TOKEN` from the environment (the only place a token is read)."""
    token = os.environ.get("HF_TOKEN") or os.environ.get("HUGGING_FACE_HUB_TOKEN")
    if not token:
        raise HubRefused("HF_TOKEN is not set: the Hub token is read from the environment only")
    return token


def hub_api(token: str) -> Any:
    """An `HfApi` for `HF_ENDPOINT` (read here, at call time, not at import)."""
    from huggingface_hub import HfApi

    endpoint = os.environ.get("HF_ENDPOINT") or None
    return HfApi(endpoint=endpoint, token=token)


def load_state(path: Path) -> dict[str, Any]:
    """Last known Hub commit per repo (`{repo_id: {"commit": oid, "version": v}}`)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}


def _remote_manifest(api: Any, repo_id: str, revision: str) -> dict[str, Any] | None:
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError, RemoteEntryNotFoundError

    try:
        local = hf_hub_download(
            repo_id,
            "manifest.json",
            repo_type="dataset",
            revision=revision,
            endpoint=api.endpoint,
            token=api.token,
        )
    except (EntryNotFoundError, RemoteEntryNotFoundError):
        return None
    return json.loads(Path(local).read_text(encoding="utf-8"))


def push_release(
    files: Mapping[str, bytes],
    *,
    repo_id: str,
    version: str,
    private: bool,
    state_path: Path,
    force: bool = False,
    token: str | None = None,
) -> PushResult:
    """Push `files` as one commit and tag it `version`.

    Raises:
        HubRefused: the repo moved since the last known commit (and not `force`), or no token.
    """
    from huggingface_hub import CommitOperationAdd, CommitOperationDelete

    api = hub_api(token or hub_token())
    api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True)
    head = api.repo_info(repo_id, repo_type="dataset").sha
    state = load_state(state_path)
    known = state.get(repo_id, {}).get("commit")
    remote_files = set(api.list_repo_files(repo_id, repo_type="dataset", revision=head))
    if known is None and remote_files - {".gitattributes"} and not force:
        raise HubRefused(
            f"{repo_id} already holds files this folder never published (head {head[:12]}); "
            "use --force to publish on top of them"
        )
    if known is not None and known != head and not force:
        raise HubRefused(
            f"{repo_id} moved since the last publish: head is {head[:12]}, last known {known[:12]}; "
            "review the remote changes, then use --force"
        )
    manifest = json.loads(files["manifest.json"])
    remote = _remote_manifest(api, repo_id, head) if "manifest.json" in remote_files else None
    created = False
    commit = None
    if (
        remote is None
        or remote.get("files") != manifest.get("files")
        or remote.get("version") != manifest.get("version")
    ):
        ops: list[Any] = [
            CommitOperationAdd(path_in_repo=p, path_or_fileobj=blob) for p, blob in sorted(files.items())
        ]
        stale = sorted(
            p
            for p in remote_files
            if p not in files
            and p != ".gitattributes"
            and p.split("/", 1)[0] in {"data", "aptbench", "lm_eval"}
        )
        ops += [CommitOperationDelete(path_in_repo=p) for p in stale]
        info = api.create_commit(
            repo_id,
            operations=ops,
            repo_type="dataset",
            parent_commit=head,
            commit_message=f"aptforge release {version}",
        )
        commit, head, created = info.oid, info.oid, True
    refs = api.list_repo_refs(repo_id, repo_type="dataset")
    tags = {t.name: t.target_commit for t in refs.tags}
    if version not in tags:
        api.create_tag(repo_id, tag=version, revision=head, repo_type="dataset")
    elif tags[version] != head and not force:
        raise HubRefused(
            f"tag {version} already points at {tags[version][:12]}, not at {head[:12]}; bump the version"
        )
    state[repo_id] = {"commit": head, "version": version}
    write_json(state_path, state)
    return PushResult(repo_id, commit, head, version, created)
