"""The stand-in Hub's data model: stored files (git and LFS ids), commits, tags and repos with revision lookup."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from tests.servers.hub.constants import _HEX, _LFS_POINTER_TEMPLATE, _URL_PREFIX_BY_TYPE


def _git_blob_oid(data: bytes) -> str:
    """Return the git blob object id (sha1 of ``"blob <len>\\0" + data``) of ``data``."""
    return hashlib.sha1(b"blob %d\x00" % len(data) + data).hexdigest()


def _iso(moment: datetime) -> str:
    """Format a datetime the way the Hub does (``2024-01-31T12:00:00.123Z``)."""
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _is_hex(value: str, length: int | None = None) -> bool:
    """Return whether ``value`` is lowercase/uppercase hex (of exactly ``length`` chars if given)."""
    return bool(value) and set(value.lower()) <= _HEX and (length is None or len(value) == length)


@dataclass(frozen=True)
class StoredFile:
    """One file version stored in a commit snapshot.

    Attributes:
        path: Path of the file in the repo (POSIX, no leading slash).
        content: Raw bytes of the file (the real content, also for LFS files).
        lfs: Whether the file is stored through Git LFS (the git tree then holds a pointer file).
    """

    path: str
    content: bytes
    lfs: bool = False

    @property
    def size(self) -> int:
        """Size in bytes of the real content."""
        return len(self.content)

    @property
    def sha256(self) -> str:
        """Hex sha256 of the content (the LFS oid)."""
        return hashlib.sha256(self.content).hexdigest()

    @property
    def pointer(self) -> bytes:
        """Git LFS pointer file content (only meaningful when :attr:`lfs` is true)."""
        return _LFS_POINTER_TEMPLATE.format(oid=self.sha256, size=self.size).encode()

    @property
    def git_oid(self) -> str:
        """Git blob id of what git stores: the content, or the pointer file for LFS files."""
        return _git_blob_oid(self.pointer if self.lfs else self.content)

    @property
    def etag(self) -> str:
        """ETag the Hub serves on ``resolve``: the git blob id, or the sha256 for LFS files."""
        return self.sha256 if self.lfs else self.git_oid


@dataclass(frozen=True)
class Commit:
    """One commit; holds a full snapshot of the tree so any revision can be served directly.

    Attributes:
        oid: 40-char sha1 hex commit id.
        parent: Parent commit id, ``None`` for the initial commit (history is linear).
        title: Commit summary (``commit_message`` on the client).
        message: Commit description (``commit_description`` on the client).
        author: User name of the author (``"system"`` for the initial commit).
        date: Commit time (UTC).
        files: Snapshot of every file at this commit, by path.
    """

    oid: str
    parent: str | None
    title: str
    message: str
    author: str
    date: datetime
    files: Mapping[str, StoredFile]


@dataclass(frozen=True)
class Tag:
    """A lightweight or annotated tag.

    Attributes:
        name: Tag name (e.g. ``"v1"``).
        target: Commit id the tag points to.
        message: Tag message, if one was given.
    """

    name: str
    target: str
    message: str | None = None


@dataclass
class Repo:
    """In-memory state of one repository.

    Attributes:
        repo_type: ``"model"``, ``"dataset"`` or ``"space"``.
        repo_id: ``"namespace/name"``.
        private: Visibility flag.
        created_at: Creation time (UTC).
        commits: Every commit, by oid.
        branches: Branch name -> head commit id.
        tags: Tag name -> :class:`Tag`.
        lfs_objects: LFS store of the repo: sha256 hex -> content.
    """

    repo_type: str
    repo_id: str
    private: bool
    created_at: datetime
    commits: dict[str, Commit] = field(default_factory=dict)
    branches: dict[str, str] = field(default_factory=dict)
    tags: dict[str, Tag] = field(default_factory=dict)
    lfs_objects: dict[str, bytes] = field(default_factory=dict)

    def resolve(self, revision: str) -> Commit | None:
        """Resolve a branch, tag, ``refs/heads/*``, ``refs/tags/*``, full or abbreviated commit id.

        Args:
            revision: The revision to resolve (already URL-decoded).

        Returns:
            The commit, or ``None`` if the revision does not exist (or an abbreviation is ambiguous).
        """
        name = revision
        if name.startswith("refs/heads/"):
            name = name[len("refs/heads/") :]
            return self.commits[self.branches[name]] if name in self.branches else None
        if name.startswith("refs/tags/"):
            name = name[len("refs/tags/") :]
            return self.commits[self.tags[name].target] if name in self.tags else None
        if name in self.branches:
            return self.commits[self.branches[name]]
        if name in self.tags:
            return self.commits[self.tags[name].target]
        if _is_hex(name) and 5 <= len(name) <= 40:
            matches = [oid for oid in self.commits if oid.startswith(name.lower())]
            if len(matches) == 1:
                return self.commits[matches[0]]
        return None

    def history(self, commit: Commit) -> list[Commit]:
        """Return ``commit`` and its ancestors, newest first."""
        out: list[Commit] = []
        current: Commit | None = commit
        while current is not None:
            out.append(current)
            current = self.commits[current.parent] if current.parent else None
        return out

    @property
    def url_path(self) -> str:
        """Path of the repo's web page under the endpoint (``datasets/ns/name`` for a dataset)."""
        return f"{_URL_PREFIX_BY_TYPE[self.repo_type]}{self.repo_id}"
