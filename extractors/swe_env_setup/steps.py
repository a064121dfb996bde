"""Setup commands and plan steps of a normalised env-setup run (helpers of `swe_env_setup`).

`commands()` flattens the run's shell steps into single commands with their fate; `target_drop()`
says why a command cannot be an action target (or None when it can); `plan_steps()` turns the
effective commands and edits of a successful run into described plan steps (consecutive installs
merged, repeated descriptions dropped), each remembering the run steps it stands for.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from itertools import pairwise
from typing import NamedTuple

from extractors.shell.commands import (
    command_key,
    describe,
    has_placeholder,
    is_read_only,
    packages,
    words,
)
from schemas.envsetup import EnvSetupRun

#: Longest command accepted as an action target (APTBench's longest target is 132 characters).
MAX_TARGET_CHARS = 160


class Command(NamedTuple):
    """One shell command of the run."""

    step: int
    """Index of the run step it belongs to."""
    text: str
    """The normalised command line."""
    failed: bool
    """The step it belongs to failed (recorded or inferred exit code != 0)."""
    origin: str
    """`agent` or `replayed_gold`."""


_OPENS = {"for", "while", "until", "if", "case", "select"}
_CLOSES = {"done", "fi", "esac"}
_KEYWORDS = _OPENS | _CLOSES | {"do", "then", "else", "elif", "in"}
_INLINE_COMMENT = re.compile(r"\s+#(?![!\w/.-]*[\w/]=).*$")


def shell_lines(script: str) -> list[str]:
    """A shell cell as its logical command lines: comments dropped (whole-line and trailing ` # ...`),
    backslash continuations joined, and a `for`/`while`/`if`/`case` block kept whole as one line
    (its parts joined by `; `, as a one-line loop is written)."""
    out: list[str] = []
    block: list[str] = []
    depth = 0
    pending = ""
    for raw in script.split("\n"):
        line = (pending + " " + raw.strip()).strip() if pending else raw.strip()
        pending = ""
        if line.endswith("\\"):
            pending = line[:-1].rstrip()
            continue
        if not line or line.startswith("#"):
            continue
        line = _INLINE_COMMENT.sub("", line).strip()
        tokens = re.findall(r"[\w-]+|;", line)
        starts = [t for a, t in pairwise([";", *tokens]) if a == ";"]  # the first word of each command
        opens = sum(t in _OPENS for t in starts)
        closes = sum(t in _CLOSES for t in starts)
        if depth or opens:
            block.append(line.rstrip(";"))
            depth += opens - closes
            if depth <= 0:
                out.append(_join(block))
                block, depth = [], 0
            continue
        out.append(line)
    if block:
        out.append(_join(block))
    return out


def _join(lines: list[str]) -> str:
    text = lines[0]
    for line in lines[1:]:
        text += " " + line if re.search(r"(?:^|\s)(?:do|then|else)$", text) else "; " + line
    return text


def block_commands(line: str) -> list[str]:
    """The commands inside a one-line `for`/`while`/`if` block (keywords and loop headers dropped);
    `[line]` when it is no block."""
    first = re.match(r"[\w-]+", line)
    if not first or first.group(0) not in _OPENS:
        return [line]
    out = []
    for part in re.split(r"\s*;\s*", line):
        part = re.sub(r"^(?:(?:do|then|else)\s+)+", "", part).strip()
        head = re.match(r"[\w-]+", part)
        word = head.group(0) if head else ""
        if word in _OPENS or word in _CLOSES or word in {"in", "elif"}:
            continue  # loop headers and conditions are no setup steps
        if part and part not in _KEYWORDS:
            out.append(part)
    return out


def commands(run: EnvSetupRun) -> list[Command]:
    """Every shell command of the run in order (multi-command cells split into logical lines)."""
    out = []
    for s in run.steps:
        if s.kind != "shell":
            continue
        for line in shell_lines(s.command):
            out.append(Command(s.i, line, s.failed, s.origin))
    return out


def target_drop(cmd: Command, executed: set[str], multi: bool) -> str | None:
    """Why `cmd` cannot be an action target, or None when it can (APTBench's scorer keeps line 1 up to `;`)."""
    text = cmd.text
    if multi:
        return "multi_command_cell"
    if ";" in text:
        return "semicolon"
    if cmd.failed:
        return "failed"
    if is_read_only(text):
        return "read_only"
    if has_placeholder(text):
        return "placeholder"
    if text in executed:
        return "repeat"
    if len(text.split()) < 2:
        return "single_word"
    if len(text) > MAX_TARGET_CHARS:
        return "too_long"
    if re.search(r"\s{2,}", text) and ("'" in text or '"' in text):
        return "irregular_spacing"
    return None


#: Words a command may hold that no plan step spells out: programs, subcommands, URL parts, common flags.
_COMMAND_WORDS = frozenset(
    [
        "python",
        "python3",
        "pip",
        "pip3",
        "uv",
        "install",
        "git",
        "clone",
        "cd",
        "bash",
        "sh",
        "source",
        "conda",
        "mamba",
        "apt",
        "apt-get",
        "npm",
        "yarn",
        "https",
        "http",
        "github",
        "com",
        "www",
        "mkdir",
        "unzip",
        "tar",
        "wget",
        "curl",
        "export",
        "sudo",
        "env",
        "run",
        "m",
        "y",
        "q",
        "U",
        "e",
        "r",
        "p",
        "f",
        "o",
        "upgrade",
        "quiet",
        "qq",
        "no",
        "cache",
        "dir",
        "force",
        "reinstall",
        "user",
        "editable",
        "requirement",
        "requirements",
        "txt",
        "checkout",
        "rf",
        "xzf",
        "xvf",
        "zxvf",
        "mv",
        "cp",
        "rm",
        "ln",
        "s",
        "chmod",
        "x",
    ]
)
_WORD = re.compile(r"[A-Za-z0-9][\w.+-]*")


def determined(target: str, step: str, history: Sequence[str]) -> bool:
    """Does the plan step (with the commands run before) spell out every word of `target`?

    Each word of the command must appear in the step's description or in an earlier command, or be a
    program, subcommand, URL part or common flag; an argument neither shows (`--epochs 3`, a file
    name the plan never names) cannot be predicted from the item, so the target is no gold.
    """
    known = (step + "\n" + "\n".join(history)).casefold()
    for word in _WORD.findall(target):
        w = word.casefold().strip(".-")
        if not w or w in _COMMAND_WORDS or w in known:
            continue
        parts = [p for p in re.split(r"[./=_-]", w) if p]
        if parts and all(p in known or p in _COMMAND_WORDS or (p.isdigit() and len(p) < 2) for p in parts):
            continue
        return False
    return True


def normalise_target(text: str) -> str:
    """One space between words (outside quotes the shell does not care), so prefix + " " + postfix == target."""
    return text if ("'" in text or '"' in text) else " ".join(text.split())


_SUBCOMMANDS = {
    "pip",
    "pip3",
    "conda",
    "npm",
    "yarn",
    "pnpm",
    "git",
    "apt-get",
    "apt",
    "cargo",
    "go",
    "poetry",
    "uv",
    "mamba",
    "brew",
    "dotnet",
    "docker",
    "gem",
    "bundle",
    "composer",
}


def split_target(text: str) -> tuple[str, str]:
    """APTBench's `cmd_prefix` / `cmd_postfix`: the program (and its subcommand), then the rest."""
    parts = text.split(" ")
    cut = 2 if parts[0] in _SUBCOMMANDS and len(parts) >= 3 else 1
    return " ".join(parts[:cut]), " ".join(parts[cut:])


class PlanStep(NamedTuple):
    """One step of a described setup plan."""

    text: str
    """Plain-English description."""
    category: str
    """`clone`, `cd`, `install`, `deps`, `run`, `test`, `edit` or `other`."""
    steps: tuple[int, ...]
    """Run steps it stands for."""
    packages: tuple[str, ...] = ()
    """Packages installed (for `install`)."""


def _category(text: str) -> str:
    tokens = words(text)
    head = tokens[0] if tokens else ""
    sub = tokens[1] if len(tokens) > 1 else ""
    if head == "git" and sub == "clone":
        return "clone"
    if head == "cd":
        return "cd"
    if head in {"pip", "pip3", "uv"} and sub == "install":
        return "deps" if {"-r", "-e", "--requirement", "--editable", "."} & set(tokens) else "install"
    if head in {"npm", "yarn", "pnpm", "bun"} and sub in {"", "install", "ci", "i", "add"}:
        return "install" if packages(tokens[2:]) else "deps"
    if head in {"poetry", "pipenv", "pdm"} and sub in {"install", "sync"}:
        return "deps"
    if head in {"conda", "apt-get", "apt", "mamba"} and sub == "install":
        return "install"
    last = words(text.split(" && ")[-1])
    if (
        head in {"pytest", "tox", "nox"}
        or text in {"runtest", "poetryruntest"}
        or {"pytest", "unittest"} & set(last[:3])
        or (len(last) > 1 and last[1] in {"test", "tests"})  # npm test, make test, go test, cargo test
        or any(re.fullmatch(r"(?:[\w.-]*/)?(?:run_)?tests?(?:_[\w-]+)?\.(?:py|sh)", t) for t in last[:3])
    ):
        return "test"
    if head == "sed" and "-i" in tokens:
        return "edit"
    if re.match(r"^(?:[A-Z_]+=\S+ )*(?:python[\d.]*|bash|sh|torchrun|accelerate|deepspeed)\b", text):
        return "run"
    return "other"


def _edit_step(path: str, i: int) -> PlanStep:
    short = re.sub(r"^/content/[^/]+/", "", path)
    return PlanStep(f"Edit {short}", "edit", (i,))


def plan_steps(run: EnvSetupRun) -> list[PlanStep]:
    """The effective setup of a run, described: successful state-changing commands and edits, in order."""
    raw: list[PlanStep] = []
    for s in run.steps:
        if s.failed:
            continue
        if s.kind == "edit" and s.edit is not None:
            raw.append(_edit_step(s.edit.path, s.i))
        elif s.kind == "shell":
            for line in (c for logical in shell_lines(s.command) for c in block_commands(logical)):
                if is_read_only(line) or has_placeholder(line):
                    continue
                cat = _category(line)
                pkgs = tuple(packages(words(line)[2:])) if cat == "install" else ()
                raw.append(PlanStep(describe(line), cat, (s.i,), pkgs))
    merged: list[PlanStep] = []
    for step in raw:
        prev = merged[-1] if merged else None
        if (
            prev
            and step.category == "install"
            and prev.category == "install"
            and prev.text.split()[1:3] == step.text.split()[1:3]
        ):
            pkgs = tuple(dict.fromkeys(prev.packages + step.packages))
            noun = prev.text.split(" package")[0]
            merged[-1] = PlanStep(
                f"{noun} package{'s' if len(pkgs) > 1 else ''} {', '.join(pkgs)}",
                "install",
                prev.steps + step.steps,
                pkgs,
            )
        elif prev and prev.category == step.category == "cd":
            merged[-1] = step
        elif prev and prev.text == step.text:
            merged[-1] = prev._replace(steps=prev.steps + step.steps)
        else:
            merged.append(step)
    return merged


def render_plan(steps: list[PlanStep] | tuple[PlanStep, ...], star: bool) -> str:
    """`*step1: ...;*step2: ...;` (plan options) or `step1: ...; step2: ...` (the action task's plan)."""
    if star:
        return "".join(f"*step{k}: {s.text};" for k, s in enumerate(steps, start=1))
    return "; ".join(f"step{k}: {s.text}" for k, s in enumerate(steps, start=1))


def run_key(command: str) -> str:
    """Identity of an invocation (re-exported for the error task)."""
    return command_key(command)
