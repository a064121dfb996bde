"""RepoLaunch runs (SWE-bench-Live RepoLaunch trajectory archive) -> one env-setup run.

Reads: a `repolaunch_log` bundle: `setup.log` (timestamped log: doc relevance judgements, the
base-image choice, then a ReAct conversation of `Ai Message` turns with `Thought:` and
`Action: <command>...</command>` and `Human Message` observations ending in `exit code: N`),
`result.json` (`setup_commands`, `completed`, `exception`, `docs`, `repo_structure`, ...; it may
hold bare `NaN`) and `instance.json` (the SWE-bench-Live task). Steps are the setup conversation's
commands with their recorded exit codes; the verify conversation only serves as evidence.
Label: the harness's own rule. RepoLaunch's `save_setup_result` writes `completed` = the state's
`success` and `exception` = any exception the state holds (or "Launch failed" when it did not
succeed), and its `collect` step keeps an instance for the next stage exactly when `completed` is
true, whatever `exception` says. So `completed: true` is a success, and an exception logged beside
it (raised after the verify step succeeded, e.g. in clean-up) is named in the signal text, not
taken as a failure; `completed: false` is a failure named by its exception. Without `result.json`,
the harness's own log line "Setup completed successfully" / "The setup is successful"; otherwise
no verdict.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from extractors.base import Origin, ReadError, reader
from extractors.readers.envsetup.common import doc_text, files_of, make_step, to_trajectory, verdict
from schemas import Trajectory
from schemas.envsetup import AgentInfo, Doc, EnvSetupRun, RunContext, SourceRef, TargetRepo

_ENTRY = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} - ", re.M)
_BANNER = re.compile(r"^\s*=+ (Ai|Human) Message =+\s*$", re.M)
_COST = re.compile(r"\s*-- <step_cost>.*?</step_cost>\s*", re.S)
_COMMAND = re.compile(r"<command>(.*?)</command>", re.S)
_EXIT = re.compile(r"\n\s*exit code: (-?\d+)\s*$")
_PROMPT = re.compile(r"\n[^\n]*@[^\n]*[$#]\s*$")
_DOC = re.compile(r"^File: (.+?)\n```[^\n]*\n(.*?)\n```\s*$", re.M | re.S)
_OK_LINES = ("Setup completed successfully", "The setup is successful")


def _entries(log: str) -> list[str]:
    starts = [m.end() for m in _ENTRY.finditer(log)]
    ends = [m.start() for m in _ENTRY.finditer(log)][1:] + [len(log)]
    return [log[s:e].strip("\n") for s, e in zip(starts, ends, strict=True)]


def _conversation(log: str) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """Setup-phase turns as step fields, plus facts (language, base image, verdict line)."""
    steps: list[dict[str, Any]] = []
    facts: dict[str, str] = {}
    phase = ""
    pending: dict[str, Any] | None = None
    for entry in _entries(log):
        if "Start setup conversation" in entry:
            phase = "setup"
        elif "Start verify conversation" in entry or "End setup conversation" in entry:
            phase = "verify"
        elif entry.startswith("Using language:"):
            facts["language"] = entry.split(":", 1)[1].strip()
        elif entry.startswith("Selected base image:"):
            facts["base_image"] = _COST.sub("", entry.split(":", 1)[1]).strip()
        elif entry.startswith(_OK_LINES):
            facts["verdict_line"] = entry.strip()
        banner = _BANNER.search(entry)
        if banner is None or phase != "setup":
            continue
        body = _COST.sub("\n", entry[banner.end() :]).strip()
        if banner.group(1) == "Ai":
            m = _COMMAND.search(body)
            thought = (
                body.split("Action:", 1)[0].removeprefix("Thought:").strip() if "Action:" in body else ""
            )
            pending = {"thought": thought, "command": m.group(1).strip(), "raw_action": body} if m else None
        elif pending is not None:
            steps.append(_observed(pending, body))
            pending = None
    return steps, facts


def _observed(pending: dict[str, Any], body: str) -> dict[str, Any]:
    text = body.removeprefix("Observation:").strip("\n")
    code = _EXIT.search(text)
    text = text[: code.start()] if code else text
    text = _PROMPT.sub("", text)
    first, _, rest = text.partition("\n")
    if first.strip() == pending["command"].split("\n", 1)[0].strip():
        text = rest
    return {
        **pending,
        "kind": "shell",
        "output": text.strip("\n"),
        "exit_code": int(code.group(1)) if code else None,
    }


def _docs(result: dict[str, Any]) -> tuple[str, tuple[Doc, ...]]:
    text = result.get("docs") if isinstance(result.get("docs"), str) else ""
    docs = tuple(Doc(path=m.group(1).strip(), text=doc_text(m.group(2))) for m in _DOC.finditer(text))
    readme = next((d.text for d in docs if Path(d.path).name.lower().startswith("readme")), "")
    return readme, docs


def _outcome(result: Any, facts: dict[str, str]):
    if isinstance(result, dict) and "completed" in result:
        exc = result.get("exception")
        if result.get("completed") is True:
            if not exc:
                return verdict(True, "result.json completed", duration=result.get("duration"))
            seen = " ".join(str(exc).split())[:120]
            return verdict(
                True,
                f"result.json completed=true; exception logged after completion ({seen}) does not "
                "undo it (RepoLaunch collects every completed run)",
                duration=result.get("duration"),
                exception=exc,
            )
        reason = re.sub(r"\W+", "_", str(exc or "not_completed")).strip("_").lower()[:60]
        return verdict(False, "result.json completed=false", reason, exception=exc)
    if "verdict_line" in facts:
        return verdict(True, "setup.log harness verdict", line=facts["verdict_line"])
    return verdict(None, "no_verdict", "no_result_json")


@reader("repolaunch_log", version=1, kind="envsetup", priority=2)
class RepoLaunchRun:
    """RepoLaunch playground folders: setup.log + result.json + instance.json."""

    def sniff(self, record: Any) -> bool:
        return isinstance(record, dict) and record.get("__bundle__") == "repolaunch_log"

    def read(self, record: dict[str, Any], origin: Origin) -> Trajectory:
        files = files_of(record, "repolaunch_log")
        result = files.get("result.json") if isinstance(files.get("result.json"), dict) else {}
        instance = files.get("instance.json") if isinstance(files.get("instance.json"), dict) else {}
        log = files.get("setup.log") if isinstance(files.get("setup.log"), str) else ""
        raw, facts = _conversation(log)
        if not raw and isinstance(result.get("setup_commands"), list):
            raw = [_from_summary(c) for c in result["setup_commands"] if isinstance(c, str)]
        if not raw:
            raise ReadError(
                "no_steps", "setup.log has no setup conversation and result.json no setup_commands"
            )
        folder = Path(origin.file).parent
        instance_id = str(result.get("instance_id") or instance.get("instance_id") or folder.name)
        lang = folder.parent.parent.name if folder.parent.name == "playground" else ""
        repo = str(instance.get("repo") or "")
        readme, docs = _docs(result)
        base = facts.get("base_image") or str(result.get("base_image") or "")
        task = (
            f"Set up a development environment for {repo or instance_id}"
            + (f" at commit {instance['base_commit']}" if instance.get("base_commit") else "")
            + (f" in a `{base}` container" if base else "")
            + " so that its test suite runs."
        )
        run = EnvSetupRun(
            run_id=f"repolaunch/{lang + '/' if lang else ''}{instance_id}",
            source=SourceRef(
                format=self.name, repo="SWE-bench-Live/RepoLaunch-trajectory-archive", path=origin.file
            ),
            target_repo=TargetRepo(
                url=repo, commit=instance.get("base_commit"), language=facts.get("language", lang)
            ),
            task=task,
            context=RunContext(
                readme=readme, docs=docs, file_tree=doc_text(str(result.get("repo_structure") or ""))
            ),
            agent=AgentInfo(name="repolaunch"),
            steps=tuple(make_step(i, **s) for i, s in enumerate(raw)),
            outcome=_outcome(files.get("result.json"), facts),
            issues=() if "result.json" in files else ("result.json missing",),
        )
        return to_trajectory(
            run, reader_name=self.name, reader_version=self.version, origin=origin, instance_id=instance_id
        )


def _from_summary(line: str) -> dict[str, Any]:
    """A `setup_commands` entry `"<cmd>  (exit code: N)"` as step fields (no output recorded)."""
    m = re.match(r"^(.*?)\s+\(exit code: (-?\d+)\)\s*$", line, re.S)
    cmd, code = (m.group(1), int(m.group(2))) if m else (line, None)
    return {"kind": "shell", "command": cmd.strip(), "exit_code": code}
