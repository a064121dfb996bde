"""Setup commands and plan steps of a normalised env-setup run (helpers of `swe_env_setup`).

`commands()` flattens the run's shell steps into single commands with their fate; `target_drop()`
says why a command cannot be an action target (or None when it can); `plan_steps()` turns the
effective commands and edits of a successful run into described plan steps (consecutive installs
merged, repeated descriptions dropped), each remembering the run steps it stands for.
"""

from __future__ import annotations

import re
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


def commands(run: EnvSetupRun) -> list[Command]:
    """Every shell command of the run in order (multi-command cells split into lines)."""
    out = []
    for s in run.steps:
        if s.kind != "shell":
            continue
        for line in s.command.split("\n"):
            if line.strip() and not line.lstrip().startswith("#"):
                out.append(Command(s.i, line.strip(), s.failed, s.origin))
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
    if "test" in text.split(" && ")[-1] or head in {"pytest", "tox"} or text in {"runtest", "poetryruntest"}:
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
            for line in s.command.split("\n"):
                line = line.strip()
                if not line or line.startswith("#") or is_read_only(line) or has_placeholder(line):
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
