"""In-process stand-in for the Hugging Face Hub HTTP API, for tests.

Why this exists
---------------
aptforge publishes benchmark datasets with the real ``huggingface_hub`` 2.x client. Tests cannot reach the
internet, and mocking the client would only test our assumptions about it. This module runs a small HTTP
server (standard library only: :class:`http.server.ThreadingHTTPServer` in a background thread, bound to
``127.0.0.1`` on an ephemeral port) that speaks the subset of the Hub protocol the client uses for publishing,
so tests drive the *unmodified* client end to end: repo creation, preupload, the Git LFS batch/upload/verify
flow, the NDJSON commit endpoint, tags, refs, commit listing, tree listing, repo info and file download.

Every wire detail here was taken from the ``huggingface_hub`` 2.4.0 sources (``hf_api.py``, ``_commit_api.py``,
``lfs.py``, ``file_download.py``, ``utils/_http.py``); error statuses and messages copy what the real Hub
sends where it is known (e.g. ``412`` + ``"A commit has happened since. Please refresh and try again."`` for a
stale ``parent_commit``, ``401`` + ``"Invalid credentials in Authorization header"`` for a bad token, and the
``X-Error-Code`` header the client uses to pick ``RepositoryNotFoundError`` / ``RevisionNotFoundError`` /
``RemoteEntryNotFoundError``).

Pointing the client at it
-------------------------
``huggingface_hub`` reads ``HF_ENDPOINT`` once, at import time (``huggingface_hub.constants.ENDPOINT``), and
the stand-in's port is only known once it is running, so in-process code must pass the endpoint explicitly::

    with StandInHub() as hub:
        api = HfApi(endpoint=hub.endpoint, token=hub.token)
        hf_hub_download(repo_id, "data.parquet", repo_type="dataset", endpoint=hub.endpoint, token=hub.token)

``HF_HUB_DISABLE_XET=1`` must be in the environment *before* ``huggingface_hub`` is first imported
(``constants.HF_HUB_DISABLE_XET`` is read at import): in 2.x the client uploads every LFS file through Xet
whenever the ``hf_xet`` package is installed, without asking the server. The stand-in does not implement
Xet; it answers the Xet token routes with ``501`` and a message saying so. :func:`ensure_client_compatible`
checks this up front. Setting ``HF_HUB_DISABLE_TELEMETRY=1`` too avoids a one-off fetch of
``{HF_ENDPOINT}/api/agent-harnesses`` (made while building the User-Agent). Subprocesses (e.g. a CLI under
test) can use env vars instead: :meth:`StandInHub.client_env` returns them.

Client behaviour worth knowing (huggingface_hub 2.4.0)
------------------------------------------------------
* A stale ``parent_commit`` raises a plain ``HfHubHTTPError`` (``.response.status_code == 412``); a bad token
  raises a plain ``HfHubHTTPError`` with 401 (the client maps 401 to ``RepositoryNotFoundError`` only when
  ``X-Error-Code: RepoNotFound`` is sent, which the Hub, and this stand-in, do for anonymous access to a
  private or missing repo); an existing tag raises ``HfHubHTTPError`` with 409.
* ``commit``, ``create_repo``, ``create_tag``, ``refs`` and ``repo_info`` calls are not retried; ``preupload``,
  the LFS calls and the paginated listings go through ``http_backoff`` (retries 408/429/5xx after 1 s, 2 s...).
* A dropped connection surfaces as ``httpx2.RemoteProtocolError`` (a transport error, not ``HfHubHTTPError``).
* Re-adding an unchanged LFS file still calls the LFS batch API (answered without upload actions); the file is
  then dropped from the commit payload.

Routes (names used by the request log and fault scripting)
----------------------------------------------------------
==================  =====================================================================
``whoami``          ``GET  /api/whoami-v2``
``create_repo``     ``POST /api/repos/create``
``delete_repo``     ``DELETE /api/repos/delete``
``validate_yaml``   ``POST /api/validate-yaml`` (called by ``create_commit`` for README.md)
``agent_harnesses`` ``GET  /api/agent-harnesses``
``repo_info``       ``GET  /api/{type}s/{repo}[/revision/{rev}]``
``preupload``       ``POST /api/{type}s/{repo}/preupload/{rev}``
``commit``          ``POST /api/{type}s/{repo}/commit/{rev}`` (NDJSON)
``create_tag``      ``POST /api/{type}s/{repo}/tag/{rev}``
``delete_tag``      ``DELETE /api/{type}s/{repo}/tag/{tag}``
``create_branch``   ``POST /api/{type}s/{repo}/branch/{branch}``
``delete_branch``   ``DELETE /api/{type}s/{repo}/branch/{branch}``
``refs``            ``GET  /api/{type}s/{repo}/refs``
``commits``         ``GET  /api/{type}s/{repo}/commits/{rev}`` (paginated with ``Link: rel="next"``)
``tree``            ``GET  /api/{type}s/{repo}/tree/{rev}[/{path}]`` (paginated)
``paths_info``      ``POST /api/{type}s/{repo}/paths-info/{rev}``
``xet_token``       ``GET  /api/{type}s/{repo}/xet-{read,write}-token/{rev}`` -> always 501
``lfs_batch``       ``POST /[{type}s/]{repo}.git/info/lfs/objects/batch``
``lfs_verify``      ``POST /[{type}s/]{repo}.git/info/lfs/objects/verify``
``lfs_upload``      ``PUT/POST /_stand_in/lfs-upload/{id}[/part/{n}]`` (the "S3" side; no auth)
``resolve``         ``HEAD/GET /[{type}s/]{repo}/resolve/{rev}/{path}``
==================  =====================================================================

Model, dataset and space repos are all accepted; only namespaced repo ids (``"ns/name"``) are supported.
"""

from __future__ import annotations

from tests.servers.hub.constants import DEFAULT_GITATTRIBUTES, ROUTES
from tests.servers.hub.model import Commit, Repo, StoredFile, Tag
from tests.servers.hub.records import Fault, RequestRecord
from tests.servers.hub.server import StandInHub
from tests.servers.hub.transport import ensure_client_compatible

__all__ = [
    "DEFAULT_GITATTRIBUTES",
    "ROUTES",
    "Commit",
    "Fault",
    "Repo",
    "RequestRecord",
    "StandInHub",
    "StoredFile",
    "Tag",
    "ensure_client_compatible",
]
