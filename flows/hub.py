"""Push a rendered release to the Hugging Face Hub as one commit, then tag it.

Every guard runs before anything is written remotely, in this order: resolve the branch head;
compare the remote tree with the release file by file, by blob id (git SHA-1 for regular files,
the LFS SHA-256 for LFS files, as `create_commit` itself does), never by a manifest alone; check
the version tag; refuse a repo that moved since our last publish (the one guard `force`
overrides, and the result says so). Then one `create_commit(parent_commit=head)` carrying only
the changed files (plus deletions of our stale files), then `create_tag(version)`.

Publishing identical content makes no commit and only adds the tag when it is missing, so a fresh
checkout or CI runner with no local state republishes a release as a no-op. The token comes from
the environment only and is never logged.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from flows.io import write_json

#: Top-level folders a release owns on the Hub: a file there that the release lacks is stale and deleted.
OWNED_FOLDERS = frozenset({"data", "aptbench", "lm_eval"})
_IGNORED = frozenset({".gitattributes"})


class HubRefused(RuntimeError):
    """The push was refused before anything was written remotely (moved repo, tag, missing token...)."""


class PushResult(NamedTuple):
    """What the push did."""

    repo_id: str
    commit: str | None
    """The new commit, or None when the remote already held identical content."""
    head: str
    """Branch head after the push."""
    tag: str
    created_commit: bool
    tag_commit: str = ""
    """The commit the version tag points at after the push (the head, or the older commit holding this content)."""
    created_tag: bool = False
    changed: tuple[str, ...] = ()
    """Paths the commit added, replaced or deleted."""
    overrode: str = ""
    """The guard `force` overrode (the moved-repo guard), in words; empty when none was."""


class TreeDiff(NamedTuple):
    """How a remote tree differs from a release."""

    upload: tuple[str, ...]
    """Release paths missing remotely or whose blob id differs."""
    delete: tuple[str, ...]
    """Remote paths under the owned folders that the release no longer has."""

    @property
    def empty(self) -> bool:
        """True when the remote already holds exactly the release."""
        return not self.upload and not self.delete


def hub_token() -> str:
    """`HF_TOKEN` from the environment (the only place a token is read)."""
    token = os.environ.get("HF_TOKEN") or os.environ.get("HUGGING_FACE_HUB_TOKEN")
    if not token:
        raise HubRefused("HF_TOKEN is not set (hint: export HF_TOKEN=<a write token for the repo>)")
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


def remote_manifest(repo_id: str, token: str | None = None) -> dict[str, Any] | None:
    """`manifest.json` at the repo's head (the previous release, for the changelog); None when absent."""
    from huggingface_hub.errors import EntryNotFoundError, RepositoryNotFoundError, RevisionNotFoundError

    api = hub_api(token or hub_token())
    try:
        local = api.hf_hub_download(repo_id, "manifest.json", repo_type="dataset")
    except (EntryNotFoundError, RepositoryNotFoundError, RevisionNotFoundError):
        return None
    return json.loads(Path(local).read_text(encoding="utf-8"))


def remote_tree(api: Any, repo_id: str, revision: str) -> dict[str, Any]:
    """Path -> `RepoFile` of every file at `revision` (folders left out)."""
    from huggingface_hub.hf_api import RepoFile

    entries = api.list_repo_tree(repo_id, recursive=True, revision=revision, repo_type="dataset")
    return {e.path: e for e in entries if isinstance(e, RepoFile)}


def same_blob(remote: Any, blob: bytes) -> bool:
    """Whether a remote `RepoFile` holds exactly `blob` (LFS SHA-256, else git blob SHA-1)."""
    from huggingface_hub.utils import sha

    if remote.lfs is not None:
        return remote.lfs.sha256 == sha.sha256(blob).hexdigest() and remote.lfs.size == len(blob)
    return remote.blob_id == sha.git_hash(blob)


def diff_tree(files: Mapping[str, bytes], remote: Mapping[str, Any]) -> TreeDiff:
    """Which release files must be uploaded and which stale remote files deleted."""
    upload = tuple(p for p in sorted(files) if p not in remote or not same_blob(remote[p], files[p]))
    delete = tuple(
        p
        for p in sorted(remote)
        if p not in files and p not in _IGNORED and p.split("/", 1)[0] in OWNED_FOLDERS
    )
    return TreeDiff(upload, delete)


def hub_error_line(exc: Any) -> str:
    """One line for a Hub HTTP error, with what to check (the token for 401/403), and that nothing local changed."""
    status = exc.response.status_code if getattr(exc, "response", None) is not None else None
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    hint = {
        401: "check HF_TOKEN (a valid token for this Hub, read from the environment)",
        403: "check that HF_TOKEN has write access to the repo",
        404: "check the repo id and HF_ENDPOINT",
        412: "the repo moved while publishing; rerun to compare against the new head",
    }.get(status or 0, "rerun when the Hub answers again")
    return f"{status or '?'} {first} (hint: {hint}; the local release folder is unchanged)"


def _short(oid: str | None) -> str:
    return (oid or "none")[:12]


def _moved(head: str, remote: Mapping[str, Any], known: str | None, tags: Mapping[str, str]) -> str:
    """Why the head is not a commit we published (empty when it is ours or the repo is empty)."""
    if not set(remote) - _IGNORED:
        return ""
    if known == head or head in tags.values():
        return ""
    if known is None:
        return f"the repo holds files at untagged head {_short(head)} that no aptforge release published"
    return f"the repo moved since the last publish: head is {_short(head)}, last known {_short(known)}"


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
    """Push `files` as one commit of the changed files and tag it `version`.

    Raises:
        HubRefused: no token; the tag already names other content; the repo moved since the last
            known commit (unless `force`). Raised before anything is written remotely.
    """
    from huggingface_hub import CommitOperationAdd, CommitOperationDelete

    api = hub_api(token or hub_token())
    api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True)
    # 1. the remote head
    head = api.repo_info(repo_id, repo_type="dataset").sha
    # 2. the remote tree against the release, by blob id
    remote = remote_tree(api, repo_id, head)
    diff = diff_tree(files, remote)
    # 3. the tag
    refs = api.list_repo_refs(repo_id, repo_type="dataset")
    tags = {t.name: t.target_commit for t in refs.tags}
    tagged = tags.get(version)
    if tagged is not None and not (tagged == head and diff.empty):
        at_tag = diff if tagged == head else diff_tree(files, remote_tree(api, repo_id, tagged))
        if not at_tag.empty:
            raise HubRefused(
                f"tag {version} already points at {_short(tagged)}, where "
                f"{len(at_tag.upload) + len(at_tag.delete)} file(s) differ from this release; "
                "bump `version` in the config (a published tag is never moved)"
            )
    # 4. the moved-repo guard (only a commit can overwrite someone else's work)
    overrode = ""
    state = load_state(state_path)
    if not diff.empty:
        moved = _moved(head, remote, state.get(repo_id, {}).get("commit"), tags)
        if moved and not force:
            raise HubRefused(f"{moved}; review the remote changes, then rerun with --force to publish on top")
        overrode = f"--force overrode the moved-repo guard: {moved}" if moved else ""
    commit = None
    if not diff.empty:
        ops: list[Any] = [CommitOperationAdd(path_in_repo=p, path_or_fileobj=files[p]) for p in diff.upload]
        ops += [CommitOperationDelete(path_in_repo=p) for p in diff.delete]
        info = api.create_commit(
            repo_id,
            operations=ops,
            repo_type="dataset",
            parent_commit=head,
            commit_message=f"aptforge release {version}",
            commit_description="Changed: " + ", ".join(diff.upload + diff.delete),
        )
        commit = head = info.oid
    created_tag = tagged is None
    if created_tag:
        api.create_tag(repo_id, tag=version, revision=head, repo_type="dataset")
        tagged = head
    state[repo_id] = {"commit": head, "version": version}
    write_json(state_path, state)
    return PushResult(
        repo_id,
        commit,
        head,
        version,
        commit is not None,
        tag_commit=tagged or head,
        created_tag=created_tag,
        changed=diff.upload + diff.delete,
        overrode=overrode,
    )
