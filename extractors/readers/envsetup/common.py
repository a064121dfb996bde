"""What every env-setup adapter shares: building normalised steps, and wrapping a run as a Trajectory.

An adapter maps its source into an `EnvSetupRun` (schemas/envsetup.py) and calls `to_trajectory`,
which stores the run in `Trajectory.meta["envsetup"]`, mirrors its steps in the generic form and
turns the source's verdict into the trajectory's outcome. `make_step` fills in the exit code of a
step whose source did not record one, from its output, and marks it as inferred.
"""

from __future__ import annotations

from typing import Any

from extractors.base import Origin, ReadError
from extractors.shell.commands import clean_output, infer_failure
from schemas import Action, Outcome, Source, Step, Trajectory, content_id
from schemas.envsetup import META_KEY, EnvSetupRun, EnvStep, FileEdit, RunOutcome
from schemas.text import truncate_middle

#: Longest output kept per step (head and tail around an omission marker).
MAX_OUTPUT_CHARS = 20000
#: Longest document text kept in a run's context.
MAX_DOC_CHARS = 12000


def make_step(
    i: int,
    *,
    kind: str,
    command: str = "",
    raw_action: str = "",
    output: str | None = None,
    exit_code: int | None = None,
    thought: str = "",
    origin: str = "agent",
    duration_s: float | None = None,
    edit: FileEdit | None = None,
) -> EnvStep:
    """A normalised step; the exit code is inferred from the output when the source has none."""
    inferred = False
    if output is not None:
        output = truncate_middle(clean_output(output), MAX_OUTPUT_CHARS)
    if exit_code is None and kind in {"shell", "code"} and output is not None:
        failed = infer_failure(command, output)
        if failed is not None:
            exit_code, inferred = int(failed), True
    return EnvStep(
        i=i,
        origin=origin,
        thought=thought.strip(),
        kind=kind,
        command=command,  # type: ignore[arg-type]
        raw_action=raw_action or command,
        output=output,
        exit_code=exit_code,
        exit_code_inferred=inferred,
        duration_s=duration_s,
        edit=edit,
    )


def verdict(success: bool | None, label_source: str, reason: str = "", **details: Any) -> RunOutcome:
    """The source's verdict on a run."""
    return RunOutcome(
        success=success,
        label_source=label_source,
        reason=reason,
        details={k: v for k, v in details.items() if v is not None},
    )


def to_trajectory(
    run: EnvSetupRun,
    *,
    reader_name: str,
    reader_version: int,
    origin: Origin,
    instance_id: str,
    system_prompt: str = "",
) -> Trajectory:
    """Wrap a normalised run as a Trajectory of kind `envsetup`."""
    if not run.steps:
        raise ReadError("no_steps", f"{run.run_id}: the run records no actions")
    steps = tuple(
        Step(
            index=s.i,
            thought=s.thought,
            action=Action(tool=s.kind, raw=s.raw_action or s.command, args={"command": s.command}),
            observation=s.output,
        )
        for s in run.steps
    )
    out = run.outcome
    if out.success is None:
        outcome = Outcome(label="unknown", signal=out.label_source, reason=out.reason or "no_verdict")
    else:
        outcome = Outcome(
            label="success" if out.success else "failure",
            signal=out.label_source,
            reason="" if out.success else (out.reason or "setup_failed"),
        )
    source = Source(
        format=reader_name,
        reader_version=reader_version,
        file=origin.file,
        line=origin.line,
        agent=run.agent.name,
        model=run.agent.model,
        instance_id=instance_id,
        native_id=run.run_id,
    )
    return Trajectory(
        trajectory_id=content_id(reader_name, origin.id_path, origin.line, run.run_id),
        kind="envsetup",
        task=run.task or run.run_id,
        system_prompt=system_prompt,
        prompt=run.task,
        steps=steps,
        outcome=outcome,
        source=source,
        meta={META_KEY: run.to_record()},
    )


def files_of(record: dict[str, Any], fmt: str) -> dict[str, Any]:
    """The decoded member files of a bundle record of format `fmt` (ReadError otherwise)."""
    if record.get("__bundle__") != fmt or not isinstance(record.get("files"), dict):
        raise ReadError("wrong_type", f"not a {fmt} bundle record")
    return record["files"]


def doc_text(text: str) -> str:
    """Documentation text trimmed to the context budget."""
    return truncate_middle(clean_output(text).strip(), MAX_DOC_CHARS)
