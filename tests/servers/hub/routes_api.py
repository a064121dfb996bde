"""The stand-in Hub's API routes: whoami, repos, refs, tags, branches, commits, tree and paths-info listings."""

from __future__ import annotations

import hashlib
import itertools
import secrets
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

from tests.servers.hub.constants import _URL_PREFIX_BY_TYPE
from tests.servers.hub.model import Commit, Repo, Tag, _iso
from tests.servers.hub.records import _HttpError, _Principal, _Request, _Response


class _ApiRoutesMixin:
    """Answers the repo, ref and listing routes."""

    # -- routes: account and repos --------------------------------------------------------------------------

    def _route_agent_harnesses(self, request: _Request) -> _Response:
        return _Response.json({"standardEnvVars": [], "harnesses": {}})

    def _route_whoami(self, request: _Request, principal: _Principal | None) -> _Response:
        if principal is None:
            raise _HttpError(401, "Invalid username or password.")
        role = "write" if principal.can_write else "read"
        return _Response.json(
            {
                "type": "user",
                "id": hashlib.sha1(principal.username.encode()).hexdigest()[:24],
                "name": principal.username,
                "fullname": principal.username,
                "email": None,
                "emailVerified": False,
                "isPro": False,
                "orgs": [],
                "auth": {"type": "access_token", "accessToken": {"displayName": "stand-in", "role": role}},
            }
        )

    def _route_validate_yaml(self, request: _Request, principal: _Principal | None) -> _Response:
        return _Response.json({"errors": [], "warnings": []})

    def _route_create_repo(self, request: _Request, principal: _Principal | None) -> _Response:
        if principal is None:
            raise _HttpError(401, "Invalid username or password.")
        if not principal.can_write:
            raise _HttpError(403, "You don't have the rights to create a repo: read-only token")
        payload = request.json_body()
        repo_type = payload.get("type") or "model"
        if repo_type not in _URL_PREFIX_BY_TYPE:
            raise _HttpError(400, f"Invalid repo type: {repo_type}")
        name = payload.get("name")
        if not name or "/" in name:
            raise _HttpError(400, "Invalid repo name")
        repo_id = f"{payload.get('organization') or principal.username}/{name}"
        visibility = payload.get("visibility")
        private = visibility == "private" if visibility is not None else bool(payload.get("private", False))
        url = f"{self.endpoint}/{_URL_PREFIX_BY_TYPE[repo_type]}{repo_id}"
        if (repo_type, repo_id) in self.repos:
            raise _HttpError(409, f"You already created this {repo_type} repo", extra={"url": url})
        self.create_repo(repo_id, repo_type=repo_type, private=private)
        return _Response.json({"url": url, "name": repo_id, "id": secrets.token_hex(12)})

    def _route_delete_repo(self, request: _Request, principal: _Principal | None) -> _Response:
        payload = request.json_body()
        request.repo_type = payload.get("type") or "model"
        request.repo_id = f"{payload.get('organization') or (principal.username if principal else '')}/{payload.get('name')}"
        if request.repo_type not in _URL_PREFIX_BY_TYPE:
            raise _HttpError(400, f"Invalid repo type: {request.repo_type}")
        repo = self._repo(request, principal, write=True)
        del self.repos[(repo.repo_type, repo.repo_id)]
        return _Response.json({})

    def _route_repo_info(self, request: _Request, principal: _Principal | None) -> _Response:
        repo = self._repo(request, principal)
        commit = self._resolve(repo, request.revision or "main")
        with_blobs = request.flag("blobs")
        siblings = []
        for path in sorted(commit.files):
            stored = commit.files[path]
            sibling: dict[str, Any] = {"rfilename": path}
            if with_blobs:
                sibling.update(size=stored.size, blobId=stored.git_oid)
                if stored.lfs:
                    sibling["lfs"] = {
                        "sha256": stored.sha256,
                        "size": stored.size,
                        "pointerSize": len(stored.pointer),
                    }
            siblings.append(sibling)
        info: dict[str, Any] = {
            "_id": hashlib.sha1(f"{repo.repo_type}/{repo.repo_id}".encode()).hexdigest()[:24],
            "id": repo.repo_id,
            "author": repo.repo_id.split("/")[0],
            "sha": commit.oid,
            "lastModified": _iso(commit.date),
            "createdAt": _iso(repo.created_at),
            "private": repo.private,
            "gated": False,
            "disabled": False,
            "downloads": 0,
            "likes": 0,
            "tags": [],
            "siblings": siblings,
            "usedStorage": sum(len(blob) for blob in repo.lfs_objects.values()),
        }
        expand = request.query.get("expand") or request.query.get("expand[]")
        if expand:
            info = {key: value for key, value in info.items() if key in ("_id", "id") or key in expand}
        return _Response.json(info)

    # -- routes: refs ---------------------------------------------------------------------------------------

    def _route_refs(self, request: _Request, principal: _Principal | None) -> _Response:
        repo = self._repo(request, principal)
        branches = sorted(repo.branches, key=lambda name: (name != "main", name))
        payload: dict[str, Any] = {
            "branches": [
                {"name": name, "ref": f"refs/heads/{name}", "targetCommit": repo.branches[name]}
                for name in branches
            ],
            "converts": [],
            "tags": [
                {"name": name, "ref": f"refs/tags/{name}", "targetCommit": tag.target}
                for name, tag in sorted(repo.tags.items())
            ],
        }
        if request.flag("include_prs"):
            payload["pullRequests"] = []
        return _Response.json(payload)

    def _route_create_tag(self, request: _Request, principal: _Principal | None) -> _Response:
        repo = self._repo(request, principal, write=True)
        commit = self._resolve(repo, request.revision or "main")
        payload = request.json_body()
        tag = payload.get("tag")
        if not tag or not isinstance(tag, str):
            raise _HttpError(400, "Missing tag name")
        if tag in repo.tags or tag in repo.branches:
            raise _HttpError(409, f'Tag "{tag}" already exists')
        repo.tags[tag] = Tag(tag, commit.oid, payload.get("message"))
        return _Response.json({"name": tag, "ref": f"refs/tags/{tag}", "targetCommit": commit.oid})

    def _route_delete_tag(self, request: _Request, principal: _Principal | None) -> _Response:
        repo = self._repo(request, principal, write=True)
        tag = request.revision or ""
        if tag not in repo.tags:
            raise _HttpError(404, f"Invalid rev id: {tag}", code="RevisionNotFound")
        del repo.tags[tag]
        return _Response.json({})

    def _route_create_branch(self, request: _Request, principal: _Principal | None) -> _Response:
        repo = self._repo(request, principal, write=True)
        branch = request.revision or ""
        payload = request.json_body()
        start = self._resolve(repo, payload.get("startingPoint") or "main")
        if branch in repo.branches or branch in repo.tags:
            raise _HttpError(409, f"Reference already exists: refs/heads/{branch}")
        repo.branches[branch] = start.oid
        return _Response.json({})

    def _route_delete_branch(self, request: _Request, principal: _Principal | None) -> _Response:
        repo = self._repo(request, principal, write=True)
        branch = request.revision or ""
        if branch not in repo.branches:
            raise _HttpError(404, f"Invalid rev id: {branch}", code="RevisionNotFound")
        if branch == "main":
            raise _HttpError(403, "Cannot delete the default branch")
        del repo.branches[branch]
        return _Response.json({})

    def _route_xet_token(self, request: _Request, principal: _Principal | None) -> _Response:
        raise _HttpError(
            501,
            "The stand-in Hub does not implement Xet storage: set HF_HUB_DISABLE_XET=1 in the environment "
            "before huggingface_hub is imported so the client uses the Git LFS protocol.",
        )

    # -- routes: listing ------------------------------------------------------------------------------------

    def _page_links(self, request: _Request, next_params: dict[str, str] | None) -> dict[str, str]:
        """Build a GitHub-style ``Link`` header pointing at the next page, if any."""
        if next_params is None:
            return {}
        params = {key: values[0] for key, values in request.query.items()}
        params.update(next_params)
        url = f"{self.endpoint}{urlsplit(request.raw_path).path}?{urlencode(params)}"
        return {"Link": f'<{url}>; rel="next"'}

    def _route_commits(self, request: _Request, principal: _Principal | None) -> _Response:
        repo = self._repo(request, principal)
        commit = self._resolve(repo, request.revision or "main")
        history = repo.history(commit)
        page = int(request.param("p") or 0)
        size = self.commits_page_size
        chunk = history[page * size : (page + 1) * size]
        items = []
        for item in chunk:
            entry: dict[str, Any] = {
                "id": item.oid,
                "title": item.title,
                "message": item.message,
                "authors": [{"user": item.author, "avatar": ""}],
                "date": _iso(item.date),
            }
            if "formatted" in request.query.get("expand[]", []):
                entry["formatted"] = {"title": item.title, "message": item.message}
            items.append(entry)
        more = (page + 1) * size < len(history)
        return _Response.json(
            items, headers=self._page_links(request, {"p": str(page + 1)} if more else None)
        )

    def _last_commit(self, repo: Repo, commit: Commit, path: str, is_dir: bool) -> dict[str, str]:
        """Return ``lastCommit`` info (the newest commit that changed ``path``) for tree listings."""

        def version(snapshot: Commit) -> Any:
            if is_dir:
                prefix = path + "/" if path else ""
                return sorted((p, f.git_oid) for p, f in snapshot.files.items() if p.startswith(prefix))
            stored = snapshot.files.get(path)
            return None if stored is None else stored.git_oid

        history = repo.history(commit)
        last = history[-1]
        for newer, older in itertools.pairwise(history):
            if version(newer) != version(older):
                last = newer
                break
        return {"id": last.oid, "title": last.title, "date": _iso(last.date)}

    def _tree_entry(self, repo: Repo, commit: Commit, path: str, expand: bool) -> dict[str, Any] | None:
        """Describe a file or directory of a snapshot like the tree/paths-info APIs do."""
        stored = commit.files.get(path)
        if stored is not None:
            entry: dict[str, Any] = {"type": "file", "oid": stored.git_oid, "size": stored.size, "path": path}
            if stored.lfs:
                entry["lfs"] = {"oid": stored.sha256, "size": stored.size, "pointerSize": len(stored.pointer)}
            if expand:
                entry["lastCommit"] = self._last_commit(repo, commit, path, is_dir=False)
                entry["securityFileStatus"] = {
                    "status": "safe",
                    "avScan": {"virusFound": False, "virusNames": None},
                    "pickleImportScan": None,
                }
            return entry
        prefix = path + "/"
        children = sorted((p, f.git_oid) for p, f in commit.files.items() if p.startswith(prefix))
        if not children:
            return None
        oid = hashlib.sha1("".join(f"{p}\0{o}\n" for p, o in children).encode()).hexdigest()
        entry = {"type": "directory", "oid": oid, "size": 0, "path": path}
        if expand:
            entry["lastCommit"] = self._last_commit(repo, commit, path, is_dir=True)
        return entry

    def _route_tree(self, request: _Request, principal: _Principal | None) -> _Response:
        repo = self._repo(request, principal)
        commit = self._resolve(repo, request.revision or "main")
        base = "/".join(request.tail[2:]).strip("/")
        recursive, expand = request.flag("recursive"), request.flag("expand")
        if base and (base in commit.files or self._tree_entry(repo, commit, base, False) is None):
            raise _HttpError(404, f"Entry not found: {base}", code="EntryNotFound")
        prefix = base + "/" if base else ""
        paths: set[str] = set()
        for path in commit.files:
            if not path.startswith(prefix):
                continue
            parts = path[len(prefix) :].split("/")
            if recursive:
                paths.update(prefix + "/".join(parts[: i + 1]) for i in range(len(parts)))
            else:
                paths.add(prefix + parts[0])
        ordered = sorted(paths)
        size = min(self.tree_page_size, 50) if expand else self.tree_page_size
        offset = int(request.param("cursor") or 0)
        chunk = ordered[offset : offset + size]
        entries = [self._tree_entry(repo, commit, path, expand) for path in chunk]
        more = offset + size < len(ordered)
        links = self._page_links(request, {"cursor": str(offset + size)} if more else None)
        return _Response.json(entries, headers=links)

    def _route_paths_info(self, request: _Request, principal: _Principal | None) -> _Response:
        repo = self._repo(request, principal)
        commit = self._resolve(repo, request.revision or "main")
        content_type = request.headers.get("content-type", "")
        if "json" in content_type:
            payload = request.json_body()
            paths, expand = payload.get("paths", []), bool(payload.get("expand"))
        else:
            form = parse_qs(request.body.decode(), keep_blank_values=True)
            paths = form.get("paths", [])
            expand = (form.get("expand", ["false"])[0]).lower() in ("1", "true")
        entries = [self._tree_entry(repo, commit, p.strip("/"), expand) for p in paths]
        return _Response.json([entry for entry in entries if entry is not None])
