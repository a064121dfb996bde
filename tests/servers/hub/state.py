"""Repo state of the stand-in Hub as tests see it: create, inspect and commit out of band."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime

from tests.servers.hub.constants import _URL_PREFIX_BY_TYPE, DEFAULT_GITATTRIBUTES
from tests.servers.hub.model import Commit, Repo, StoredFile
from tests.servers.hub.records import _lfs_patterns, _pattern_matches


class _StateMixin:
    """Creates and inspects repos directly, bypassing HTTP."""

    # -- store helpers (server-side, no HTTP) ---------------------------------------------------------------

    def create_repo(
        self, repo_id: str, *, repo_type: str = "dataset", private: bool = False, exist_ok: bool = False
    ) -> Repo:
        """Create a repo directly in the store (same effect as the ``create_repo`` route).

        Args:
            repo_id: ``"namespace/name"``.
            repo_type: ``"model"``, ``"dataset"`` or ``"space"``.
            private: Visibility.
            exist_ok: Return the existing repo instead of raising.

        Returns:
            The repo.

        Raises:
            ValueError: If it already exists and ``exist_ok`` is false, or the id/type is invalid.
        """
        if repo_type not in _URL_PREFIX_BY_TYPE or repo_id.count("/") != 1:
            raise ValueError(f"Invalid repo {repo_type}:{repo_id}")
        with self._lock:
            key = (repo_type, repo_id)
            if key in self.repos:
                if exist_ok:
                    return self.repos[key]
                raise ValueError(f"Repo {repo_type}:{repo_id} already exists")
            repo = Repo(repo_type, repo_id, private, datetime.now(UTC))
            files = (
                {".gitattributes": StoredFile(".gitattributes", DEFAULT_GITATTRIBUTES.encode())}
                if self.initial_gitattributes
                else {}
            )
            initial = self._new_commit(repo, None, files, "initial commit", "", "system")
            repo.branches["main"] = initial.oid
            self.repos[key] = repo
            return repo

    def get_repo(self, repo_id: str, *, repo_type: str = "dataset") -> Repo:
        """Return a repo from the store.

        Raises:
            KeyError: If it does not exist.
        """
        with self._lock:
            return self.repos[(repo_type, repo_id)]

    def head(self, repo_id: str, *, repo_type: str = "dataset", branch: str = "main") -> str:
        """Return the head commit id of a branch."""
        with self._lock:
            return self.get_repo(repo_id, repo_type=repo_type).branches[branch]

    def history(self, repo_id: str, *, repo_type: str = "dataset", revision: str = "main") -> list[Commit]:
        """Return the commits reachable from a revision, newest first."""
        with self._lock:
            repo = self.get_repo(repo_id, repo_type=repo_type)
            commit = repo.resolve(revision)
            if commit is None:
                raise KeyError(revision)
            return repo.history(commit)

    def files(self, repo_id: str, *, repo_type: str = "dataset", revision: str = "main") -> dict[str, bytes]:
        """Return ``{path: content}`` of every file at a revision."""
        with self._lock:
            commit = self.get_repo(repo_id, repo_type=repo_type).resolve(revision)
            if commit is None:
                raise KeyError(revision)
            return {path: stored.content for path, stored in commit.files.items()}

    def tags(self, repo_id: str, *, repo_type: str = "dataset") -> dict[str, str]:
        """Return ``{tag: commit id}``."""
        with self._lock:
            return {
                name: tag.target for name, tag in self.get_repo(repo_id, repo_type=repo_type).tags.items()
            }

    def commit_out_of_band(
        self,
        repo_id: str,
        files: Mapping[str, bytes | str] | None = None,
        deletes: Iterable[str] = (),
        *,
        repo_type: str = "dataset",
        branch: str = "main",
        message: str = "Out-of-band commit",
        description: str = "",
        author: str = "someone-else",
        lfs: bool | None = None,
    ) -> str:
        """Commit directly to a branch, as another writer would ("the repo moved").

        Any client holding the previous head as ``parent_commit`` then gets ``412``.

        Args:
            repo_id: The repo.
            files: Files to add or replace (``str`` values are UTF-8 encoded).
            deletes: Paths to delete (missing ones are ignored).
            repo_type: Repo type.
            branch: Branch to advance.
            message: Commit title.
            description: Commit description.
            author: Author name shown in the commit listing.
            lfs: Store the added files as LFS (``None``: decide per file like ``preupload`` does).

        Returns:
            The new head commit id.
        """
        with self._lock:
            repo = self.get_repo(repo_id, repo_type=repo_type)
            head = repo.commits[repo.branches[branch]]
            snapshot = dict(head.files)
            for path in deletes:
                snapshot.pop(path, None)
            for path, content in (files or {}).items():
                data = content.encode() if isinstance(content, str) else bytes(content)
                as_lfs = self._upload_mode(head, path, len(data), data[:512]) == "lfs" if lfs is None else lfs
                if as_lfs:
                    repo.lfs_objects[hashlib.sha256(data).hexdigest()] = data
                snapshot[path] = StoredFile(path, data, as_lfs)
            commit = self._new_commit(repo, head.oid, snapshot, message, description, author)
            repo.branches[branch] = commit.oid
            return commit.oid

    # -- internals: store -----------------------------------------------------------------------------------

    def _new_commit(
        self,
        repo: Repo,
        parent: str | None,
        files: Mapping[str, StoredFile],
        title: str,
        message: str,
        author: str,
    ) -> Commit:
        """Create (and register) a commit with a fresh oid."""
        date = datetime.now(UTC)
        tree = hashlib.sha1(
            "".join(f"{path}\0{files[path].git_oid}\n" for path in sorted(files)).encode()
        ).hexdigest()
        serial = f"tree {tree}\nparent {parent}\nauthor {author} {date.isoformat()} {next(self._counter)}\n\n{title}\n\n{message}"
        commit = Commit(
            oid=hashlib.sha1(serial.encode()).hexdigest(),
            parent=parent,
            title=title,
            message=message,
            author=author,
            date=date,
            files=dict(files),
        )
        repo.commits[commit.oid] = commit
        return commit

    def _upload_mode(self, commit: Commit, path: str, size: int, sample: bytes) -> str:
        """Decide ``"lfs"`` or ``"regular"`` for a file, as the Hub's preupload does."""
        if size >= self.lfs_threshold or b"\x00" in sample:
            return "lfs"
        attributes = commit.files.get(".gitattributes")
        if attributes is not None:
            text = attributes.content.decode("utf-8", "replace")
            if any(_pattern_matches(pattern, path) for pattern in _lfs_patterns(text)):
                return "lfs"
        return "regular"
