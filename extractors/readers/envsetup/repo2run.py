"""Repo2Run (and its X-Repo2Run fork) build-agent output folders -> one env-setup run.

Reads: a `repo2run_track` bundle: `track.json` (the chat: a system prompt with the work process,
assistant turns `### Thought: ... ### Action: ```bash <cmd>``` ` and observations `Running
`<cmd>`... <output> `<cmd>` executes with returncode: N`), `inner_commands.json` /
`outer_commands.json` (`[{command, returncode, time, dir}]`), and optionally `pip_list.json`,
`pipdeptree.json`, `track.txt`. Without `track.json` the steps come from the command logs (no
outputs). Label: Repo2Run's own test gate, the last `runtest` / `poetryruntest` in
`outer_commands.json` (returncode 0 = success); no verdict when the run never reached it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from extractors.base import Origin, ReadError, reader
from extractors.readers._text import text_of
from extractors.readers.envsetup.common import doc_text, files_of, make_step, to_trajectory, verdict
from extractors.shell.commands import words
from schemas import Trajectory
from schemas.envsetup import AgentInfo, Doc, EnvSetupRun, RunContext, SourceRef, TargetRepo

_FENCE = re.compile(r"```(?:bash|sh|shell)?\s*\n(.*?)```", re.S)
_RETURNCODE = re.compile(r"executes with returncode: (-?\d+)")
_TAIL = re.compile(r"\n\[Current directory\]:.*\Z", re.S)
_TESTS = ("runtest", "poetryruntest")


def _commands(data: Any) -> list[dict[str, Any]]:
    if not isinstance(data, list):
        return []
    return [c for c in data if isinstance(c, dict) and isinstance(c.get("command"), str)]


def _outcome(outer: list[dict[str, Any]]):
    tests = [c for c in outer if c["command"].strip() in _TESTS]
    if not tests:
        return verdict(None, "no_verdict", "no_runtest")
    code = tests[-1].get("returncode")
    if code == 0:
        return verdict(True, "outer_commands.json runtest returncode 0")
    return verdict(False, "outer_commands.json runtest returncode", "tests_failed", returncode=code)


def _track_steps(track: list[Any], outer: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], str]:
    msgs = [m for m in track if isinstance(m, dict) and m.get("role")]
    system = next((text_of(m.get("content")) for m in msgs if m["role"] == "system"), "")
    steps: list[dict[str, Any]] = []
    for m in msgs[1:]:
        content = text_of(m.get("content"))
        if m["role"] == "assistant":
            fence = _FENCE.search(content)
            if fence is None:
                continue
            thought = content.split("### Action", 1)[0].replace("### Thought:", "").strip()
            steps.append(
                {
                    "thought": thought,
                    "command": fence.group(1).strip(),
                    "raw_action": content,
                    "kind": "shell",
                }
            )
        elif (
            m["role"] in {"system", "user"}
            and content.startswith("### Observation")
            and steps
            and "output" not in steps[-1]
        ):
            codes = [int(c) for c in _RETURNCODE.findall(content)]
            steps[-1]["output"] = _TAIL.sub("", content.removeprefix("### Observation:").strip("\n"))
            steps[-1]["exit_code"] = next((c for c in codes if c != 0), 0) if codes else None
    for s in steps:
        if "output" not in s:
            match = [c for c in outer if c["command"].strip() == s["command"].strip()]
            s["exit_code"] = match[-1].get("returncode") if match else None
    return steps, system


def _context(steps: list[dict[str, Any]]) -> RunContext:
    docs, trees = [], []
    for s in steps:
        tokens = words(s["command"])
        if not s.get("output") or s.get("exit_code") or not tokens:
            continue
        body = re.sub(r"^Running `[^`]*`\.\.\.\n", "", s["output"])
        body = _RETURNCODE.split(body)[0].rsplit("\n`", 1)[0]
        if tokens[0] == "cat" and len(tokens) == 2:
            docs.append(Doc(path=tokens[1], text=doc_text(body)))
        elif tokens[0] in {"ls", "tree", "find"}:
            trees.append(f"$ {s['command']}\n{body.strip()}")
    readme = next((d.text for d in docs if Path(d.path).name.lower().startswith("readme")), "")
    return RunContext(readme=readme, docs=tuple(docs[:8]), file_tree=doc_text("\n\n".join(trees[:4])))


@reader("repo2run_track", version=1, kind="envsetup", priority=2)
class Repo2RunTrack:
    """Repo2Run build_agent output: track.json + command logs."""

    def sniff(self, record: Any) -> bool:
        return isinstance(record, dict) and record.get("__bundle__") == "repo2run_track"

    def read(self, record: dict[str, Any], origin: Origin) -> Trajectory:
        files = files_of(record, "repo2run_track")
        outer = _commands(files.get("outer_commands.json"))
        inner = _commands(files.get("inner_commands.json"))
        track = files.get("track.json")
        system = ""
        if isinstance(track, list):
            raw, system = _track_steps(track, outer)
        else:
            raw = [
                {"kind": "shell", "command": c["command"], "exit_code": c.get("returncode")}
                for c in (outer or inner)
            ]
        if not raw:
            raise ReadError("no_steps", "no assistant actions in track.json and no command logs")
        folder = Path(origin.file).parent
        name = f"{folder.parent.name}/{folder.name}"
        root = next(
            (
                m.group(1)
                for m in [
                    re.search(r"\[Project root Path\]: (\S+)", text_of(x.get("content")))
                    for x in (track or [])[:3]
                    if isinstance(x, dict)
                ]
                if m
            ),
            "",
        )
        run = EnvSetupRun(
            run_id=f"repo2run/{name}",
            source=SourceRef(format=self.name, repo="terryyz/X-Repo2Run", path=origin.file),
            target_repo=TargetRepo(url=name, language="python"),
            task=f"Configure the environment of the repository {name}"
            + (f" (root {root})" if root else "")
            + " in a Docker container so that its tests run (`runtest`).",
            context=_context(raw),
            agent=AgentInfo(name="repo2run"),
            steps=tuple(make_step(i, **s) for i, s in enumerate(raw)),
            outcome=_outcome(outer),
            issues=()
            if isinstance(track, list)
            else ("track.json missing: steps from the command logs, no outputs",),
        )
        return to_trajectory(
            run,
            reader_name=self.name,
            reader_version=self.version,
            origin=origin,
            instance_id=name,
            system_prompt=system,
        )
