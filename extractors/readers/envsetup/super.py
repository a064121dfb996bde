"""SUPER (allenai/super-benchmark) runs: `history.ipynb` + `metrics.json` -> one env-setup run.

Reads: a `super_ipynb` bundle (see `bundles.py`). The notebook interleaves markdown headers
(`### Query`, `### Step N`, `**Thought**: ...`, `**Action (execute|edit|submit|...)**:`) with the
executed code cells and their outputs. Each code cell becomes one step: `!cmd` / `%magic` cells are
shell steps (normalised, continuations joined), `<<<BEFORE_EDIT>>>` / `EDITING` / `edit N:M` cells
are edits, `open` / `search_file` are file reads, `submit` is the answer, other Python is `code`.
Cells whose thought is `[pre-executed by user]` (or `EXECUTED BY USER`) are the expert's replayed
gold solution, marked `origin="replayed_gold"`. A `continue_wait` cell's output is appended to the
command it waited for. The README and file listings the run printed become its context.
Label: `metrics.json` only — success when `output_match == 1` or every landmark checkpoint was
reached (`checkpoints == 1`); failure otherwise; no verdict without `metrics.json`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from extractors.base import Origin, ReadError, reader
from extractors.readers.envsetup.common import doc_text, files_of, make_step, to_trajectory, verdict
from extractors.shell.commands import clean_output, is_read_only, notebook_commands, words
from schemas import Trajectory
from schemas.envsetup import AgentInfo, Doc, EnvSetupRun, FileEdit, RunContext, SourceRef, TargetRepo

_ACTION = re.compile(r"^\*\*Action \(([^)]*)\)\*\*")
_DURATION = re.compile(r"\(duration: (\d+(?:\.\d+)?) seconds\)")
_REPLAYED = ("[pre-executed by user]", "EXECUTED BY USER")
_REPO_URL = re.compile(r"https://github\.com/[\w.-]+/[\w.-]+?(?=\.git\b|[\s`'\"),]|$)")
_BRANCH = re.compile(r"branch `([^`]+)`")
_RUN_DIR = re.compile(r"^(?P<model>[^_]+)_(?P<agent>[^_]+)_(?P<set>.+)$")
_EDITING = re.compile(r"^EDITING `?([^`\s]+?)\.?`?\.? CHANGING:\s*\n(.*?)\n\s*TO:\s*\n(.*)$", re.S)
_FILE_READS = {"open", "search_file", "search_dir", "find_file", "goto", "scroll_down", "scroll_up"}


def _text(cell: Any) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else str(src or "")


def _output(cell: Any) -> str | None:
    outs = cell.get("outputs")
    if not outs:
        return None
    parts = []
    for o in outs:
        text = o.get("text")
        if text is None and isinstance(o.get("data"), dict):
            text = o["data"].get("text/plain")
        if text is None and o.get("output_type") == "error":
            text = "\n".join(o.get("traceback") or []) or f"{o.get('ename')}: {o.get('evalue')}"
        parts.append("".join(text) if isinstance(text, list) else str(text or ""))
    return "".join(parts)


def _edit(body: str, open_file: str) -> FileEdit | None:
    if "<<<BEFORE_EDIT>>>" in body:
        path, _, rest = body.partition("\n")
        befores, afters = [], []
        for block in rest.split("<<<BEFORE_EDIT>>>")[1:]:
            before, _, after = block.partition("<<<AFTER_EDIT>>>")
            befores.append(before.strip("\n"))
            afters.append(after.strip("\n"))
        return FileEdit(path=path.strip(), before="\n".join(befores), after="\n".join(afters))
    if m := _EDITING.match(body.strip()):
        return FileEdit(path=m.group(1), before=m.group(2).strip("\n"), after=m.group(3).strip("\n"))
    if body.startswith("edit ") and body.rstrip().endswith("end_of_edit"):
        lines = body.rstrip().split("\n")
        return FileEdit(
            path=open_file or "(open file)",
            before=f"lines {lines[0][5:].strip()}",
            after="\n".join(lines[1:-1]),
        )
    return None


class _Cursor:
    """Pending markdown facts of the step whose code cell comes next."""

    def __init__(self) -> None:
        self.thought, self.action, self.duration = "", "", None
        self.open_file = ""


def _step_fields(cur: _Cursor, body: str, output: str | None) -> dict[str, Any]:
    action = cur.action.lower()
    stripped = body.strip()
    if action == "submit" or stripped.startswith("submit "):
        return {"kind": "submit", "command": stripped.removeprefix("submit ").strip()}
    edit = _edit(stripped, cur.open_file) if action in {"edit", "none", "execute", ""} else None
    if edit is not None:
        failed = output is not None and (
            "Could not find the following lines" in output or "No changes" in output[:200]
        )
        return {
            "kind": "edit",
            "command": edit.path,
            "edit": edit,
            "exit_code": int(failed) if output is not None else None,
        }
    first = words(stripped.split("\n", 1)[0])[:1]
    if action in _FILE_READS or (first and first[0] in _FILE_READS and action in {"none", ""}):
        if first and first[0] == "open" and len(words(stripped)) > 1:
            cur.open_file = words(stripped)[1]
        return {"kind": "file_read", "command": stripped}
    if action in {"exception", "interrupt", "continue_wait"} or not stripped:
        return {"kind": "other", "command": stripped}
    cell = notebook_commands(body)
    if cell.kind == "shell":
        return {"kind": "shell", "command": "\n".join(cell.commands)}
    return {"kind": cell.kind, "command": stripped}


def _steps(cells: list[Any]) -> tuple[list[dict[str, Any]], str, str]:
    task = system = ""
    cur = _Cursor()
    raw: list[dict[str, Any]] = []
    for cell in cells:
        text = _text(cell)
        if cell.get("cell_type") == "markdown":
            head = text.lstrip()
            if head.startswith("### Query"):
                task = head[len("### Query") :].strip()
            elif head.startswith(("### Prompt", "### System Prompt")):
                system = re.sub(r"</?details>|</?summary>", "", head.split("\n", 1)[-1]).strip()
            elif head.startswith("### Step"):
                cur.thought, cur.action, cur.duration = "", "", None
            elif m := _DURATION.search(head[:200]):
                cur.duration = float(m.group(1))
            elif head.startswith("**Thought**"):
                cur.thought = head[len("**Thought**") :].lstrip(":").strip()
            elif m := _ACTION.match(head):
                cur.action = m.group(1)
            continue
        if cell.get("cell_type") != "code":
            continue
        output = _output(cell)
        if cur.action == "continue_wait" and raw:
            raw[-1]["output"] = (raw[-1].get("output") or "") + (output or "")
            continue
        origin = "replayed_gold" if cur.thought.startswith(_REPLAYED) else "agent"
        thought = "" if origin == "replayed_gold" else cur.thought
        fields = _step_fields(cur, text, output)
        raw.append(
            {
                "thought": thought,
                "origin": origin,
                "raw_action": text,
                "output": output,
                "duration_s": cur.duration,
                **fields,
            }
        )
    return raw, task, system


def _context(raw: list[dict[str, Any]]) -> RunContext:
    readme, docs, trees = "", [], []
    for s in raw:
        if s["kind"] != "shell" or not s.get("output") or "\n" in s["command"]:
            continue
        tokens = words(s["command"])
        if not tokens or not is_read_only(s["command"]):
            continue
        if tokens[0] == "cat" and len(tokens) > 1:
            path = tokens[-1]
            text = doc_text(s["output"])
            if re.search(r"readme", path, re.I) and not readme:
                readme = text
            elif re.search(r"\.(md|txt|rst|toml|cfg|ya?ml)$|setup\.py$", path, re.I):
                docs.append(Doc(path=path, text=text))
        elif tokens[0] in {"ls", "tree", "find"}:
            trees.append(f"$ {s['command']}\n{clean_output(s['output']).strip()}")
    return RunContext(readme=readme, docs=tuple(docs[:6]), file_tree=doc_text("\n\n".join(trees[:4])))


def _outcome(metrics: Any):
    if not isinstance(metrics, dict):
        return verdict(None, "no_verdict", "no_metrics")
    om, cp = metrics.get("output_match"), metrics.get("checkpoints")
    details = {k: metrics.get(k) for k in ("submitted", "output_match", "checkpoints", "entrypoint")}
    if isinstance(om, (int, float)) and om >= 1.0:
        return verdict(True, "metrics.json output_match==1", **details)
    if isinstance(cp, (int, float)) and cp >= 1.0:
        return verdict(True, "metrics.json checkpoints==1", **details)
    if om is None and cp is None:
        return verdict(None, "no_verdict", "metrics_without_scores")
    return verdict(False, "metrics.json output_match<1,checkpoints<1", "output_mismatch", **details)


@reader("super_ipynb", version=1, kind="envsetup", priority=2)
class SuperNotebook:
    """SUPER trajectories: a Jupyter notebook of thoughts, actions and outputs, plus metrics."""

    def sniff(self, record: Any) -> bool:
        return isinstance(record, dict) and record.get("__bundle__") == "super_ipynb"

    def read(self, record: dict[str, Any], origin: Origin) -> Trajectory:
        files = files_of(record, "super_ipynb")
        nb = files.get("history.ipynb")
        if nb is None:
            raise ReadError(
                "no_trajectory",
                "metrics.json without history.ipynb: this run's notebook is not in the folder",
            )
        cells = nb.get("cells")
        if not isinstance(cells, list):
            raise ReadError("wrong_type", "history.ipynb has no cell list")
        raw, task, system = _steps(cells)
        if not task:
            raise ReadError("missing_task", "no `### Query` cell: not a SUPER trajectory")
        folder = Path(origin.file).parent
        m = _RUN_DIR.match(folder.parent.name)
        agent, model, subset = (
            (m.group("agent"), m.group("model"), m.group("set")) if m else ("", "", folder.parent.name)
        )
        run_id = f"super/{agent}_{subset}/{folder.name}" if m else f"super/{folder.parent.name}/{folder.name}"
        url = _REPO_URL.search(task)
        clone = next(
            (
                c
                for s in raw
                if s["kind"] == "shell"
                for c in s["command"].split("\n")
                if c.startswith("git clone")
            ),
            "",
        )
        repo_url = url.group(0) if url else next((t for t in words(clone) if "://" in t), "")
        branch = _BRANCH.search(task)
        steps = tuple(make_step(i, **s) for i, s in enumerate(raw))
        issues = () if "metrics.json" in files else ("metrics.json missing: no verdict",)
        run = EnvSetupRun(
            run_id=run_id,
            source=SourceRef(format=self.name, repo="allenai/super-benchmark", path=origin.file),
            target_repo=TargetRepo(
                url=repo_url, branch=branch.group(1) if branch else None, language="python"
            ),
            task=task,
            context=_context(raw),
            agent=AgentInfo(name=agent, model=model),
            steps=steps,
            outcome=_outcome(files.get("metrics.json")),
            issues=issues,
        )
        return to_trajectory(
            run,
            reader_name=self.name,
            reader_version=self.version,
            origin=origin,
            instance_id=folder.name,
            system_prompt=system,
        )
