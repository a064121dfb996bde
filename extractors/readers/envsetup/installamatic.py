"""Installamatic ("Beyond pip install", coinse/installamatic) runs -> one env-setup run.

Reads: an `installamatic_msgs` bundle: `logs/messages/<run>/<model>-<repo>-build-<N>.json` (OpenAI
chat messages: the system message holds the candidate Dockerfile; each failed build comes back
as a user turn "Attempting to build ... resulting in the following error: ```...```"; the
assistant diagnoses, calls `get_directory_contents` / `get_file_contents` / `check_presence`,
then `submit_dockerfile` with a repaired Dockerfile), the matching `-gather-<N>.json` (the
documentation search, used as context) and `logs/eval/<run>_<model>.json` (trial N's
`{repo: {build_status, n_tries, ...}}`). Steps: Dockerfile attempts (`dockerfile`, failed when
a build error followed) and the repo look-ups between them (`file_read`).
Label: the eval JSON's `build_status` for this repo and trial; no verdict without it.
"""

from __future__ import annotations

import json
import re
from typing import Any

from extractors.base import Origin, ReadError, reader
from extractors.readers._text import jsonish, text_of
from extractors.readers.envsetup.common import doc_text, files_of, make_step, to_trajectory, verdict
from schemas import Trajectory
from schemas.envsetup import AgentInfo, Doc, EnvSetupRun, FileEdit, RunContext, SourceRef, TargetRepo

_FENCE = re.compile(r"```[\w-]*\n(.*?)```", re.S)
_BUILD_ERROR = re.compile(
    r"resulting in the following error|following error|failed to solve|build failed", re.I
)
_READS = {"get_directory_contents", "get_file_contents", "check_presence"}


def _dockerfile_in(text: str) -> str:
    for block in _FENCE.findall(text):
        if re.search(r"^\s*FROM\s+\S+", block, re.M | re.I):
            return block.strip()
    m = re.search(r"^FROM\s+\S+.*", text, re.M | re.S)
    return m.group(0).strip() if m else ""


def _calls(m: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    calls = jsonish(m.get("tool_calls")) or ([m["function"]] if isinstance(m.get("function"), dict) else [])
    if isinstance(m.get("function_call"), dict):
        calls = [m["function_call"]]
    out = []
    for c in calls if isinstance(calls, list) else []:
        fn = c.get("function", c) if isinstance(c, dict) else {}
        args = jsonish(fn.get("arguments")) if isinstance(fn, dict) else {}
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            out.append((fn["name"], args if isinstance(args, dict) else {}))
    return out


def _steps(msgs: list[dict[str, Any]], status: str | None) -> list[dict[str, Any]]:
    dockerfile = (
        _dockerfile_in(text_of(msgs[0].get("content"))) if msgs and msgs[0].get("role") == "system" else ""
    )
    steps: list[dict[str, Any]] = []
    if dockerfile:
        steps.append(
            {
                "kind": "dockerfile",
                "command": dockerfile,
                "edit": FileEdit(path="Dockerfile", after=dockerfile),
            }
        )
    thought = ""
    for m in msgs[1:]:
        role, content = (
            m.get("role"),
            text_of(m.get("content")) if not isinstance(m.get("content"), dict) else "",
        )
        if role == "user" and _BUILD_ERROR.search(content):
            last = next((s for s in reversed(steps) if s["kind"] == "dockerfile" and "output" not in s), None)
            if last is not None:
                blocks = _FENCE.findall(content)
                last["output"], last["exit_code"] = (max(blocks, key=len) if blocks else content).strip(), 1
        elif role == "assistant":
            thought = content.strip() or thought
            for name, args in _calls(m):
                if name == "submit_dockerfile" and isinstance(args.get("dockerfile"), str):
                    new = args["dockerfile"].strip()
                    steps.append(
                        {
                            "kind": "dockerfile",
                            "command": new,
                            "thought": thought,
                            "edit": FileEdit(path="Dockerfile", before=dockerfile, after=new),
                        }
                    )
                    dockerfile = new
                elif name in _READS:
                    steps.append(
                        {
                            "kind": "file_read",
                            "command": f"{name} {json.dumps(args, sort_keys=True)}",
                            "thought": thought,
                        }
                    )
                thought = ""
        elif (
            role in {"tool", "function"}
            and steps
            and steps[-1]["kind"] == "file_read"
            and "output" not in steps[-1]
        ):
            steps[-1]["output"] = content
    last = next((s for s in reversed(steps) if s["kind"] == "dockerfile"), None)
    if last is not None and "output" not in last and status in {"success", "failure"}:
        last["exit_code"] = 0 if status == "success" else 1
        last["output"] = (
            f"docker build {'succeeded' if status == 'success' else 'failed'} (eval build_status)"
        )
    return steps


def _context(gather: Any) -> RunContext:
    docs, trees = [], []
    if isinstance(gather, list):
        pending: list[tuple[str, dict[str, Any]]] = []
        for m in (x for x in gather if isinstance(x, dict)):
            if m.get("role") == "assistant":
                pending = [c for c in _calls(m) if c[0] in _READS]
            elif m.get("role") in {"tool", "function"} and pending:
                name, args = pending.pop(0)
                text = text_of(m.get("content")) if not isinstance(m.get("content"), dict) else ""
                if name == "get_file_contents":
                    docs.append(
                        Doc(path=str(args.get("file") or args.get("path") or "?"), text=doc_text(text))
                    )
                elif name == "get_directory_contents":
                    trees.append(f"{args.get('directory') or args.get('path') or '.'}:\n{text.strip()}")
    readme = next((d.text for d in docs if d.path.rsplit("/", 1)[-1].lower().startswith("readme")), "")
    return RunContext(readme=readme, docs=tuple(docs[:8]), file_tree=doc_text("\n\n".join(trees[:6])))


def _trial(evals: Any, trial: int, repo: str) -> dict[str, Any] | None:
    if isinstance(evals, list) and 0 <= trial < len(evals) and isinstance(evals[trial], dict):
        entry = evals[trial].get(repo)
        return entry if isinstance(entry, dict) else None
    return None


@reader("installamatic_msgs", version=1, kind="envsetup", priority=2)
class InstallamaticRun:
    """Installamatic build (and gather) message logs with their trial's eval verdict."""

    def sniff(self, record: Any) -> bool:
        return isinstance(record, dict) and record.get("__bundle__") == "installamatic_msgs"

    def read(self, record: dict[str, Any], origin: Origin) -> Trajectory:
        files = files_of(record, "installamatic_msgs")
        meta = record.get("meta") or {}
        build = files.get("build")
        if not isinstance(build, list) or not all(isinstance(m, dict) for m in build):
            raise ReadError("wrong_type", "the build log must be a list of chat messages")
        repo, run_name, trial = str(meta.get("repo", "")), str(meta.get("run", "")), int(meta.get("trial", 0))
        entry = _trial(files.get("eval"), trial, repo)
        status = entry.get("build_status") if entry else None
        raw = _steps(build, status)
        if not raw:
            raise ReadError("no_steps", "no Dockerfile in the system message and no submit_dockerfile call")
        if entry is None:
            outcome = verdict(None, "no_verdict", "no_eval_entry")
        else:
            outcome = verdict(
                status == "success",
                "eval build_status",
                "" if status == "success" else "build_failed",
                n_tries=entry.get("n_tries"),
                build_status=status,
            )
        run = EnvSetupRun(
            run_id=f"installamatic/{run_name}/{repo}/{trial}",
            source=SourceRef(format=self.name, repo="coinse/installamatic", path=origin.file),
            target_repo=TargetRepo(url=repo, language="python"),
            task=f"Write a Dockerfile that installs the repository {repo} from source so that its test suite can run.",
            context=_context(files.get("gather")),
            agent=AgentInfo(name=f"installamatic {run_name}".strip(), model=str(meta.get("model", ""))),
            steps=tuple(make_step(i, **s) for i, s in enumerate(raw)),
            outcome=outcome,
            issues=() if "eval" in files else ("eval JSON not found beside logs/messages",),
        )
        return to_trajectory(
            run,
            reader_name=self.name,
            reader_version=self.version,
            origin=origin,
            instance_id=f"{repo}#{trial}",
            system_prompt=text_of(build[0].get("content")) if build else "",
        )
