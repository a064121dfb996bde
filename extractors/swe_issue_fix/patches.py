"""Unified diffs, and the file contents an agent saw: the raw material of the SWE patch-level tasks.

- `parse_patch` splits a git/unified diff into files and hunks (header counts recomputed on render,
  so an edited hunk stays a valid diff).
- `file_reads` rebuilds, from a run's observations, the lines of each file as it was before the
  agent's first edit of it (and when that edit came): `str_replace_editor view` and `cat -n`
  listings (`     7\\tcode`), SWE-agent 0.x `open`/`goto` windows (`7:code`) and a bare
  `cat <file>` (lines from 1). Reads after the first edit of a file (a `str_replace_editor`
  write, a 0.x `edit` of the open file, `sed -i`, a shell redirection or `git apply` naming it)
  are ignored, so every line is original.
- `created_scripts` finds files the agent created (`str_replace_editor create --file_text`, or a
  0.x `create` followed by `edit 1:N`) and later ran with `python`.
- `mutate_patch` makes wrong variants of a patch: one hunk dropped, one added line dropped, one
  operator or literal of an added line changed (a mutation-testing edit).
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator, Sequence
from typing import NamedTuple

from schemas import Step

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@(.*)$")
_CAT_N = re.compile(r"^\s*(\d+)\t(.*)$")
_OPEN_LINE = re.compile(r"^(\d+):(.*)$")
_OPEN_HEAD = re.compile(r"^\[File: (\S+) \(\d+ lines total\)\]")
_EDITOR_VIEW = re.compile(r"^Here's the result of running `cat -n` on (\S+?):?$", re.M)
_TEST_PATH = re.compile(r"(?:^|/)(?:tests?/|test_[^/]*\.py$|[^/]*_test\.py$|conftest\.py$)")
_SHELL_WRITE = re.compile(r"sed\s+-i|>>?|\btee\b|\bpatch\b|git\s+(?:apply|checkout|restore)|\bmv\b|\bcp\b")
#: One-token mutations of an added line: (pattern, replacement), tried in order.
_MUTATIONS = (
    (r" == ", " != "),
    (r" != ", " == "),
    (r" <= ", " < "),
    (r" >= ", " > "),
    (r" < ", " <= "),
    (r" > ", " >= "),
    (r"\band\b", "or"),
    (r"\bor\b", "and"),
    (r"\bTrue\b", "False"),
    (r"\bFalse\b", "True"),
    (r"\bis not\b", "is"),
    (r"\bnot in\b", "in"),
    (r" \+ 1\b", " - 1"),
    (r" - 1\b", " + 1"),
    (r"\[:(\w+)\]", r"[:\1 - 1]"),
    (r"\.strip\(\)", ".rstrip()"),
    (r"\.lower\(\)", ".upper()"),
)


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


def _path_of(raw: str, tool: str) -> str | None:
    parts = raw.split()
    if tool == "str_replace_editor" and len(parts) >= 3:
        return parts[2]
    if parts and parts[0] in ("open", "create", "cat") and len(parts) >= 2:
        return parts[-1] if parts[0] == "cat" else parts[1]
    return None


def same_file(seen: str, patch_path: str) -> bool:
    """An observed path (`/testbed/pkg/a.py`, `pkg/a.py`) names the patch's file (`pkg/a.py`)."""
    seen = seen.rstrip(":")
    return seen == patch_path or seen.endswith("/" + patch_path)


def _listing(obs: str) -> tuple[str | None, dict[int, str]]:
    """(path, numbered lines) of a `cat -n`/editor view or a 0.x `open` window."""
    lines: dict[int, str] = {}
    m = _EDITOR_VIEW.search(obs)
    head = _OPEN_HEAD.match(obs)
    if m and not obs.startswith("The file"):
        for ln in obs[m.end() :].splitlines():
            if (n := _CAT_N.match(ln)) is not None:
                lines[int(n.group(1))] = n.group(2)
        return m.group(1), lines
    if head:
        for ln in obs.splitlines()[1:]:
            if (n := _OPEN_LINE.match(ln)) is not None:
                lines[int(n.group(1))] = n.group(2)
        return head.group(1), lines
    return None, lines


class FileReads(NamedTuple):
    """What a run read of its files before editing them, and when it first edited each."""

    views: dict[str, dict[int, str]]
    """Observed path -> {line number: original text}."""
    first_edit: dict[str, int]
    """Observed path -> index of the step that first changed it."""


def file_reads(steps: Sequence[Step]) -> FileReads:
    """Original lines of every file the run read before first editing it, and its first edits."""
    views: dict[str, dict[int, str]] = {}
    first_edit: dict[str, int] = {}
    open_file: str | None = None
    for step in steps:
        if step.action is None:
            continue
        first = step.action.raw.strip().split("\n", 1)[0]
        tool, args = step.action.tool, step.action.args
        path = args.get("path") if isinstance(args.get("path"), str) else _path_of(first, tool)
        command = str(args.get("command") or (first.split()[1] if len(first.split()) > 1 else ""))
        written: list[str] = []
        if tool == "str_replace_editor" and command != "view" and path:
            written.append(path)
        elif first.startswith("edit ") and open_file:
            written.append(open_file)
        elif tool != "str_replace_editor" and _SHELL_WRITE.search(first):
            written += [p for p in views if p.rsplit("/", 1)[-1] in first]
        for p in written:
            first_edit.setdefault(p, step.index)
        obs = step.observation or ""
        listed_path, lines = _listing(obs)
        if listed_path and first.startswith(("open", "create")):
            open_file = listed_path
        if not listed_path and first.startswith("cat ") and path and len(first.split()) == 2:
            listed_path, lines = path, dict(enumerate(obs.splitlines(), start=1))
        edited = [e for e in first_edit if same_file(listed_path or "", e) or same_file(e, listed_path or "")]
        if listed_path and lines and not edited:
            views.setdefault(listed_path, {}).update(lines)
    return FileReads(views, first_edit)


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


def shifted_windows(lines: dict[int, str], start: int, length: int) -> Iterator[tuple[int, list[str]]]:
    """Windows of the same length moved by -75..+75% of it (APTBench locate), nearest shifts first."""
    shifts: list[int] = []
    for frac in (0.25, -0.25, 0.5, -0.5, 0.75, -0.75):
        d = round(frac * length) or (1 if frac > 0 else -1)
        if d not in shifts:
            shifts.append(d)
    for d in shifts:
        text = window(lines, start + d, length)
        if text is not None:
            yield d, text


class Script(NamedTuple):
    """A file the agent wrote and ran."""

    path: str
    text: str
    created_at: int
    first_run: int


def created_scripts(steps: Sequence[Step]) -> list[Script]:
    """Files created by the agent (editor `create --file_text`, or 0.x `create` + `edit 1:N`) and run later."""
    made: dict[str, tuple[str, int]] = {}
    pending: str | None = None
    for step in steps:
        if step.action is None:
            continue
        args, raw = step.action.args, step.action.raw.strip()
        if (
            step.action.tool == "str_replace_editor"
            and args.get("command") == "create"
            and isinstance(args.get("file_text"), str)
            and isinstance(args.get("path"), str)
        ):
            made.setdefault(args["path"], (args["file_text"], step.index))
        elif raw.startswith("create ") and len(raw.split()) == 2:
            pending = raw.split()[1]
        elif pending and re.match(r"^edit 1:\d+\n", raw):
            made.setdefault(
                pending, (raw.split("\n", 1)[1].rsplit("end_of_edit", 1)[0].rstrip("\n"), step.index)
            )
            pending = None
    out = []
    for path, (text, at) in made.items():
        name = path.rsplit("/", 1)[-1]
        runs = [
            s.index
            for s in steps[at + 1 :]
            if s.action and re.search(rf"\bpython3?\s+\S*{re.escape(name)}\b", s.action.raw)
        ]
        if runs and text.strip():
            out.append(Script(path, text, at, runs[0]))
    return out


def mutate_patch(files: Sequence[FilePatch], rng: random.Random) -> Iterator[tuple[str, str]]:
    """(kind, patch text) wrong variants: a hunk dropped, an added line dropped, an added line mutated."""
    hunks = [(i, j) for i, f in enumerate(files) for j in range(len(f.hunks))]
    if len(hunks) > 1:
        for i, j in hunks:
            kept = [
                f._replace(hunks=tuple(h for k, h in enumerate(f.hunks) if (n, k) != (i, j)))
                for n, f in enumerate(files)
            ]
            yield "drop_hunk", render_patch([f for f in kept if f.hunks])
    for i, f in enumerate(files):
        for j, h in enumerate(f.hunks):
            added = [k for k, ln in enumerate(h.lines) if ln.startswith("+") and ln[1:].strip()]
            if len(added) > 1:
                k = added[rng.randrange(len(added))]
                yield (
                    "drop_added_line",
                    _replace_hunk(files, i, j, h._replace(lines=h.lines[:k] + h.lines[k + 1 :])),
                )
            for k in added:
                for pattern, repl in _MUTATIONS:
                    mutated = re.sub(pattern, repl, h.lines[k], count=1)
                    if mutated != h.lines[k]:
                        lines = (*h.lines[:k], mutated, *h.lines[k + 1 :])
                        yield "mutate_line", _replace_hunk(files, i, j, h._replace(lines=lines))
                        break


def _replace_hunk(files: Sequence[FilePatch], i: int, j: int, hunk: Hunk) -> str:
    out = [
        f._replace(hunks=tuple(hunk if (n, k) == (i, j) else h for k, h in enumerate(f.hunks)))
        for n, f in enumerate(files)
    ]
    return render_patch(out)
