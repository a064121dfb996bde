"""Error -> fix pairs observed in a run, and fix texts (helpers of `swe_env_setup`'s `error` task).

A pair is a failing step (a command, code cell or Dockerfile build that printed an error), the
fix (the state-changing steps between it and a later re-run of the same invocation) and the
evidence that the fix worked: the re-run succeeded, or it no longer shows the error. Fix
attempts after which the same error came back, and fix commands that themselves failed, are
the pair's *failed fixes*: observed wrong, they are the distractors of the question.
"""

from __future__ import annotations

import difflib
import re
from typing import NamedTuple

from extractors.shell.commands import command_key, error_line, is_read_only
from schemas.envsetup import EnvSetupRun, EnvStep

MAX_FIX_LINES = 4


class ErrorPair(NamedTuple):
    """A failure, the fix observed to work, and what proved it."""

    fail: int
    """Index of the failing step."""
    signature: str
    """Its decisive error line ('' when the output has none)."""
    fix: tuple[int, ...]
    """Steps of the fix (the corrected re-run itself when nothing else changed)."""
    evidence: int
    """The later step that proved the fix."""
    evidence_kind: str
    """`rerun_succeeded` or `error_resolved`."""
    failed_fixes: tuple[tuple[int, ...], ...]
    """Fix attempts observed not to work for this error."""


def _is_run(s: EnvStep) -> bool:
    return s.kind in {"shell", "code", "dockerfile"} and not (s.kind == "shell" and is_read_only(s.command))


def _key(s: EnvStep) -> str:
    return "docker build" if s.kind == "dockerfile" else command_key(s.command)


def _actions(run: EnvSetupRun, lo: int, hi: int, key: str) -> list[EnvStep]:
    """State-changing steps strictly between two runs of `key`."""
    return [
        s
        for s in run.steps[lo + 1 : hi]
        if s.kind in {"shell", "edit", "code"}
        and not (s.kind == "shell" and is_read_only(s.command))
        and _key(s) != key
    ]


def error_pairs(run: EnvSetupRun) -> list[ErrorPair]:
    """Every failure of the run whose fix is observed to work (see the module docstring)."""
    pairs = []
    steps = run.steps
    for f in steps:
        if not (f.failed and _is_run(f)):
            continue
        key, sig = _key(f), error_line(f.output)
        failed_fixes: list[tuple[int, ...]] = []
        last = f.i
        for r in steps[f.i + 1 :]:
            if not _is_run(r) or _key(r) != key:
                continue
            between = _actions(run, last, r.i, key)
            good = tuple(s.i for s in between if not s.failed)
            failed_fixes += [(s.i,) for s in between if s.failed]
            if f.kind == "dockerfile" or (not good and r.command.strip() != steps[last].command.strip()):
                good = (r.i,)
            still = r.failed and (error_line(r.output) == sig)
            if still:
                if good:
                    failed_fixes.append(good)
                last = r.i
                continue
            if good:
                kind = "error_resolved" if r.failed else "rerun_succeeded"
                pairs.append(ErrorPair(f.i, sig, good, r.i, kind, tuple(dict.fromkeys(failed_fixes))))
            break
    return pairs


def _short(text: str, limit: int = 140) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _instructions(dockerfile: str) -> list[str]:
    joined = re.sub(r"\\\s*\n\s*", " ", dockerfile)
    return [
        " ".join(ln.split()) for ln in joined.split("\n") if ln.strip() and not ln.lstrip().startswith("#")
    ]


def _dockerfile_fix(before: str, after: str) -> list[str]:
    old, new = _instructions(before), _instructions(after)
    lines = []
    for op, a, b, c, d in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if op == "insert":
            lines += [f"Add `{_short(x)}` to the Dockerfile" for x in new[c:d]]
        elif op == "delete":
            lines += [f"Remove `{_short(x)}` from the Dockerfile" for x in old[a:b]]
        elif op == "replace":
            lines += [
                f"Change `{_short(x)}` to `{_short(y)}` in the Dockerfile"
                for x, y in zip(old[a:b], new[c:d], strict=False)
            ]
            lines += [f"Add `{_short(y)}` to the Dockerfile" for y in new[c + (b - a) : d]]
    return lines


def _edit_fix(s: EnvStep) -> list[str]:
    assert s.edit is not None
    path = re.sub(r"^/content/[^/]+/", "", s.edit.path)
    old = [ln.strip() for ln in s.edit.before.split("\n") if ln.strip()]
    new = [ln.strip() for ln in s.edit.after.split("\n") if ln.strip()]
    removed = [x for x in old if x not in new]
    added = [x for x in new if x not in old]
    if removed and added:
        return [f"In `{path}`, change `{_short(removed[0], 90)}` to `{_short(added[0], 90)}`"]
    if added:
        return [f"In `{path}`, add `{_short(added[0], 90)}`"]
    if removed:
        return [f"In `{path}`, remove `{_short(removed[0], 90)}`"]
    return [f"Edit `{path}`"]


def fix_lines(run: EnvSetupRun, indices: tuple[int, ...], rerun_of: int | None = None) -> list[str]:
    """The actions of a fix as instruction lines."""
    lines: list[str] = []
    for i in indices:
        s = run.steps[i]
        if s.kind == "dockerfile" and s.edit is not None:
            lines += _dockerfile_fix(s.edit.before, s.edit.after)
        elif s.kind == "edit" and s.edit is not None:
            lines += _edit_fix(s)
        elif s.kind == "shell":
            verb = "Re-run it as" if rerun_of is not None and _key(s) == _key(run.steps[rerun_of]) else "Run"
            lines += [f"{verb} `{_short(c)}`" for c in s.command.split("\n") if c.strip()]
        elif s.kind == "code":
            first = next(
                (ln for ln in s.command.split("\n") if ln.strip() and not ln.lstrip().startswith("#")), ""
            )
            lines.append(f"Run the Python code `{_short(first, 100)}`")
    return lines


def render_fix(lines: list[str]) -> str:
    """A numbered fix plan (`1. ...\\n2. ...`), at most MAX_FIX_LINES steps."""
    kept = list(dict.fromkeys(lines))[:MAX_FIX_LINES]
    return "\n".join(f"{k}. {line}" for k, line in enumerate(kept, start=1))


_FIX_LIKE = re.compile(
    r"^(?:(?:pip3?|uv|conda|mamba|apt-get|apt|npm|yarn|pnpm|bun|poetry|gem|cargo|go)\s+(?:install|add|i|ci|update|upgrade|get)\b"
    r"|git\s+(?:clone|checkout|pull|submodule)\b|export\s|mkdir\s|cp\s|mv\s|ln\s|sed\s+-i|n\s|nvm\s)"
)


def failing_commands(run: EnvSetupRun) -> list[tuple[int, ...]]:
    """Fix-like commands that failed themselves (an install that errored) while another invocation was failing."""
    out, failing_key = [], None
    for s in run.steps:
        if not (s.failed and _is_run(s)):
            continue
        if (
            failing_key is not None
            and s.kind == "shell"
            and _key(s) != failing_key
            and _FIX_LIKE.match(s.command)
        ):
            out.append((s.i,))
            continue
        failing_key = _key(s)
    return out


class FailedFix(NamedTuple):
    """A fix observed not to work, kept for other runs' `error` questions."""

    repo: str
    """Repository the run set up (lower case `owner/name` or URL)."""
    run_id: str
    """Run it was seen in."""
    signature: str
    """Error line it tried to fix ('' when unknown)."""
    text: str
    """The fix, rendered as a numbered plan."""


def error_class(signature: str) -> str:
    """The kind of an error line: `ModuleNotFoundError`, `npm ERR!`, `ERROR:` ..."""
    head = re.split(r"[:\s]", signature.strip(), maxsplit=1)[0] if signature.strip() else ""
    return head[:40]


def failed_fixes(run: EnvSetupRun) -> list[FailedFix]:
    """Every fix attempt of a run (successful or not) after which its error came back, and fix commands that failed."""
    repo = run.target_repo.url.lower().removesuffix(".git")
    out: list[FailedFix] = []
    steps = run.steps
    last_error, fix_like = "", set(failing_commands(run))
    for f in steps:
        if (f.i,) in fix_like:
            out.append(FailedFix(repo, run.run_id, last_error, render_fix(fix_lines(run, (f.i,)))))
            continue
        if f.failed and _is_run(f):
            last_error = error_line(f.output)
        if not (f.failed and _is_run(f)):
            continue
        key, sig, prev = _key(f), error_line(f.output), f.i
        for r in steps[f.i + 1 :]:
            if not _is_run(r) or _key(r) != key:
                continue
            tried = tuple(s.i for s in _actions(run, prev, r.i, key) if not s.failed)
            if f.kind == "dockerfile" or (not tried and r.command.strip() != steps[prev].command.strip()):
                tried = (r.i,)
            if not (r.failed and error_line(r.output) == sig):
                break
            if tried:
                out.append(FailedFix(repo, run.run_id, sig, render_fix(fix_lines(run, tried, f.i))))
            prev = r.i
    return [x for x in dict.fromkeys(out) if x.text]
