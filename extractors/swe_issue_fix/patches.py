"""Unified diffs, and the file contents an agent saw: the raw material of the SWE patch-level tasks.

- `parse_patch` splits a git/unified diff into files and hunks (header counts recomputed on render,
  so an edited hunk stays a valid diff).
- `file_reads` rebuilds, from a run's observations, the lines of each file as it was before the
  agent's first change of it (and when that change came), from every view command
  `shell.views.parse_view` knows (editor views, `nl -ba | sed -n`, `cat -n`, `sed -n`, `head`,
  `tail -n +k`, `grep -n`, 0.x `open` windows). Reads after a command that may have written the
  file (an editor write, a 0.x `edit` of the open file, `sed -i`, a redirection, `git apply`,
  Python that writes, `shell.views.may_write`) are ignored, so every line is original.
- `first_write` finds the first step that may have changed a given file.
- `created_scripts` finds every version of a file the agent wrote whole (editor `create
  --file_text`, a `cat <<EOF > f` heredoc, or a 0.x `create` + `edit 1:N`) and then ran with `python`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import NamedTuple

from extractors.shell.views import heredoc_file, may_write, parse_view
from schemas import Step

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@(.*)$")
_TEST_PATH = re.compile(r"(?:^|/)(?:tests?/|test_[^/]*\.py$|[^/]*_test\.py$|conftest\.py$)")


class Hunk(NamedTuple):
    """One hunk: its start lines, the text after `@@ ... @@`, and its body lines (with prefixes)."""

    old_start: int
    new_start: int
    section: str
    lines: tuple[str, ...]

    @property
    def pre_image(self) -> list[str]:
        """The original lines the hunk covers (context and removed lines)."""
        return [ln[1:] for ln in self.lines if ln[:1] in (" ", "-")]

    def render(self) -> str:
        """The hunk as diff text, header counts recomputed."""
        old = sum(1 for ln in self.lines if ln[:1] in (" ", "-"))
        new = sum(1 for ln in self.lines if ln[:1] in (" ", "+"))
        return "\n".join(
            [f"@@ -{self.old_start},{old} +{self.new_start},{new} @@{self.section}", *self.lines]
        )


class FilePatch(NamedTuple):
    """The diff of one file: its header lines, path and hunks."""

    header: tuple[str, ...]
    path: str
    hunks: tuple[Hunk, ...]

    @property
    def is_test(self) -> bool:
        """A test file (`tests/`, `test_*.py`, `*_test.py`, `conftest.py`)."""
        return bool(_TEST_PATH.search(self.path))

    @property
    def is_new(self) -> bool:
        """A file the patch creates."""
        return any(h.startswith(("new file mode", "--- /dev/null")) for h in self.header)

    def render(self) -> str:
        """The file's diff text."""
        return "\n".join([*self.header, *(h.render() for h in self.hunks)])


def _hunk_body(lines: Sequence[str], i: int, old: int, new: int) -> tuple[list[str], int]:
    """The body lines of a hunk starting at `lines[i]`, consumed by the header's counts."""
    body: list[str] = []
    while i < len(lines) and (old > 0 or new > 0 or lines[i].startswith("\\")):
        line = lines[i] or " "  # a blank context line whose space was stripped
        tag = line[0]
        if tag not in " -+\\":
            break
        old -= tag in " -"
        new -= tag in " +"
        body.append(line)
        i += 1
    return body, i


def parse_patch(text: str) -> list[FilePatch]:
    """Files and hunks of a unified diff; hunk bodies are read by their header counts."""
    files: list[FilePatch] = []
    lines = text.splitlines()
    header: list[str] = []
    hunks: list[Hunk] = []
    path = ""

    def flush() -> None:
        if path and hunks:
            files.append(FilePatch(tuple(header), path, tuple(hunks)))

    i = 0
    while i < len(lines):
        line = lines[i]
        m = _HUNK.match(line)
        if m:
            old, new = int(m.group(2) or 1), int(m.group(4) or 1)
            body, i = _hunk_body(lines, i + 1, old, new)
            hunks.append(Hunk(int(m.group(1)), int(m.group(3)), m.group(5), tuple(body)))
            continue
        if line.startswith("diff --git ") or (line.startswith("--- ") and hunks):
            flush()
            header, hunks, path = [], [], ""
        header.append(line)
        if line.startswith("+++ ") and line[4:].split("\t")[0] != "/dev/null":
            path = line[4:].split("\t")[0].removeprefix("b/")
        elif line.startswith("--- ") and not path:
            path = line[4:].split("\t")[0].removeprefix("a/")
        i += 1
    flush()
    return files


def render_patch(files: Sequence[FilePatch]) -> str:
    """A list of file diffs as one patch text."""
    return "\n".join(f.render() for f in files) + "\n"


def same_file(seen: str, patch_path: str) -> bool:
    """An observed path (`/testbed/pkg/a.py`, `./pkg/a.py`, `pkg/a.py`) names the patch's file (`pkg/a.py`)."""
    seen = seen.rstrip(":").removeprefix("./")
    return seen == patch_path or seen.endswith("/" + patch_path)


class FileReads(NamedTuple):
    """What a run read of its files before editing them, and when it first edited each."""

    views: dict[str, dict[int, str]]
    """Observed path -> {line number: original text} (lines two views disagree on are left out)."""
    first_edit: dict[str, int]
    """Observed path -> index of the step that first (may have) changed it."""


def _mentions(text: str, path: str) -> bool:
    name = path.rstrip("/").rsplit("/", 1)[-1]
    if name in ("__init__.py", "models.py", "utils.py", "base.py", "tests.py"):
        name = "/".join(path.rstrip("/").split("/")[-2:])  # a common name alone says little
    return bool(name) and name in text


def _editor_write(step: Step) -> str | None:
    """The path a `str_replace_editor` write (create, str_replace, insert, undo_edit) names."""
    assert step.action is not None
    args, raw = step.action.args, step.action.raw.strip()
    command = args.get("command")
    if step.action.tool == "str_replace_editor" and command != "view":
        path = args.get("path")
        if isinstance(path, str):
            return path
        parts = raw.split()
        return parts[2] if len(parts) >= 3 and parts[1] != "view" else None
    return None


def _command_of(step: Step, scripts: dict[str, str]) -> tuple[str, str, tuple[str, str] | None]:
    """(raw action, shell command, (path, text) of a heredoc-written file); records the file in `scripts`."""
    assert step.action is not None
    raw = step.action.raw.strip()
    command = str(step.action.args.get("command") or raw) if step.action.tool != "str_replace_editor" else raw
    made = heredoc_file(command)
    if made is not None:
        scripts[made[0].rsplit("/", 1)[-1]] = made[1]
    return raw, command, made


def file_reads(steps: Sequence[Step]) -> FileReads:
    """Original lines of every file the run read before first (maybe) changing it, and its first edits.

    A view counts only if no earlier command may have written that file (`shell.views.may_write`:
    editor writes, `sed -i`, redirections, Python that writes, a created script that writes...).
    """
    views: dict[str, dict[int, str]] = {}
    conflicts: dict[str, set[int]] = {}
    first_edit: dict[str, int] = {}
    writes: list[tuple[int, str]] = []  # (step, text naming what it may have changed)
    scripts: dict[str, str] = {}
    open_file: str | None = None
    for step in steps:
        if step.action is None:
            continue
        raw, command, _ = _command_of(step, scripts)
        edited = _editor_write(step)
        if edited is not None:
            writes.append((step.index, edited))
        elif raw.startswith("edit ") and open_file:
            writes.append((step.index, open_file))
        elif step.action.tool != "str_replace_editor" and (text := may_write(command, scripts)):
            writes.append((step.index, text))
        view = parse_view(command if step.action.tool != "str_replace_editor" else raw, step.observation)
        if view is None:
            continue
        if raw.startswith(("open", "create", "goto")):
            open_file = view.path
        if any(_mentions(text, view.path) for at, text in writes if at <= step.index):
            continue
        seen = views.setdefault(view.path, {})
        bad = conflicts.setdefault(view.path, set())
        for n, line in view.lines.items():
            if n in seen and seen[n] != line:
                bad.add(n)
            seen.setdefault(n, line)
    for path, seen in views.items():
        for n in conflicts.get(path, ()):
            seen.pop(n, None)
    for path in views:
        at = [i for i, text in writes if _mentions(text, path)]
        if at:
            first_edit[path] = min(at)
    return FileReads({p: v for p, v in views.items() if v}, first_edit)


def first_write(steps: Sequence[Step], path: str) -> int | None:
    """The first step that may have changed `path` (a patch path), or None."""
    scripts: dict[str, str] = {}
    open_file: str | None = None  # SWE-agent 0.x `edit` changes the file last opened
    for step in steps:
        if step.action is None:
            continue
        raw, command, made = _command_of(step, scripts)
        if made is not None:
            if same_file(made[0], path):
                return step.index
            continue
        edited = _editor_write(step)
        if edited is not None:
            if same_file(edited, path):
                return step.index
            continue
        if raw.startswith(("open ", "create ")) and len(raw.split()) >= 2:
            open_file = raw.split()[1]
        if raw.startswith("edit "):
            if open_file and same_file(open_file, path):
                return step.index
            continue
        if (text := may_write(command, scripts)) and _mentions(text, path):
            return step.index
    return None


def lines_of(views: dict[str, dict[int, str]], patch_path: str) -> dict[int, str]:
    """The original lines seen of the patch's file (merged over every observed path naming it)."""
    merged: dict[int, str] = {}
    for seen, lines in views.items():
        if same_file(seen, patch_path):
            merged.update(lines)
    return merged


def window(lines: dict[int, str], start: int, length: int) -> list[str] | None:
    """Lines `start .. start + length - 1` when all were seen, else None."""
    out = [lines.get(n) for n in range(start, start + length)]
    return None if start < 1 or any(x is None for x in out) else out  # type: ignore[return-value]


class Script(NamedTuple):
    """A file the agent wrote and ran: the version it ran, when it wrote it and when it first ran it."""

    path: str
    text: str
    created_at: int
    first_run: int


def _written_file(step: Step, pending: str | None) -> tuple[str, str] | None:
    """(path, text) of a file this step wrote whole: editor `create`, a heredoc, or 0.x `edit 1:N`."""
    assert step.action is not None
    args, raw = step.action.args, step.action.raw.strip()
    if (
        step.action.tool == "str_replace_editor"
        and args.get("command") == "create"
        and isinstance(args.get("file_text"), str)
        and isinstance(args.get("path"), str)
    ):
        return args["path"], args["file_text"]
    if pending and re.match(r"^edit 1:\d+\n", raw):
        return pending, raw.split("\n", 1)[1].rsplit("end_of_edit", 1)[0].rstrip("\n") + "\n"
    return heredoc_file(str(args.get("command") or raw))


def created_scripts(steps: Sequence[Step]) -> list[Script]:
    """Every version of a file the agent wrote whole and then ran with `python` before rewriting it.

    Writes are editor `create --file_text`, a `cat <<'EOF' > f` heredoc (mini-swe-agent), or a 0.x
    `create f` followed by `edit 1:N`; each version that ran is one Script, in order of writing.
    """
    versions: list[tuple[str, str, int]] = []
    pending: str | None = None
    for step in steps:
        if step.action is None:
            continue
        raw = step.action.raw.strip()
        written = _written_file(step, pending)
        pending = raw.split()[1] if raw.startswith("create ") and len(raw.split()) == 2 else None
        if written is not None and written[1].strip():
            versions.append((written[0], written[1], step.index))
    out = []
    for k, (path, text, at) in enumerate(versions):
        name = path.rsplit("/", 1)[-1]
        until = next((b for p, _, b in versions[k + 1 :] if p == path), len(steps))
        runs = [
            s.index
            for s in steps[at + 1 : until]
            if s.action and re.search(rf"\bpython3?\s+(?:-\w+\s+)*\S*{re.escape(name)}\b", s.action.raw)
        ]
        if runs:
            out.append(Script(path, text, at, runs[0]))
    return out
