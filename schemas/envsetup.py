"""The normalised environment-setup run (`aptforge.envsetup_run/v1`, FORMATS.md §12.3).

Every env-setup source (SUPER notebooks, RepoLaunch logs, Installamatic message logs, Repo2Run
tracks) is mapped into this one shape, so the `swe_env_setup` extractor reads only this. A run
travels inside `Trajectory.meta["envsetup"]` (kind `envsetup`); `Trajectory.steps` mirrors it in
the generic step form. The run's success comes from the source's verdict, recorded in `outcome`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field

from schemas.base import Model

SCHEMA_ID = "aptforge.envsetup_run/v1"

StepOrigin = Literal["agent", "replayed_gold", "human"]
StepKind = Literal["shell", "edit", "file_read", "submit", "dockerfile", "code", "other"]


class FileEdit(Model):
    """A textual edit of one file (a notebook edit cell, a Dockerfile revision)."""

    path: str
    """Edited file as the run names it."""
    before: str = ""
    """Text replaced (empty for a file written whole)."""
    after: str = ""
    """Replacement text."""


class EnvStep(Model):
    """One action of the run and what came back."""

    i: int
    """0-based position in the run."""
    origin: StepOrigin = "agent"
    """`agent`, `replayed_gold` (SUPER's pre-executed expert cells) or `human`."""
    thought: str = ""
    """Reasoning written before the action."""
    kind: StepKind = "shell"
    """`shell`, `edit`, `file_read`, `submit`, `dockerfile`, `code` (non-shell notebook code) or `other`."""
    command: str = ""
    """Normalised action: shell commands one per line (`!cmd` -> `cmd`, `%cd x` -> `cd x`); the
    Dockerfile for `dockerfile`; the path for `edit`/`file_read`; the code for `code`."""
    raw_action: str = ""
    """The action exactly as the run recorded it."""
    output: str | None = None
    """What the action printed (head and tail kept for very long outputs); None when not recorded."""
    exit_code: int | None = None
    """Exit status: recorded by the source, or inferred from the output (then `exit_code_inferred`)."""
    exit_code_inferred: bool = False
    """True when `exit_code` was derived from the output text (Traceback, `ERROR:` ...)."""
    duration_s: float | None = None
    """Wall time of the action, when recorded."""
    edit: FileEdit | None = None
    """The change made, for `edit` and `dockerfile` steps."""

    @property
    def failed(self) -> bool:
        """True when the action is known to have failed."""
        return self.exit_code is not None and self.exit_code != 0


class SourceRef(Model):
    """Where the raw run came from."""

    format: str
    """Adapter name (`super_ipynb`, `repolaunch_log`, `installamatic_msgs`, `repo2run_track`)."""
    repo: str = ""
    """Public repository of the raw data, when known."""
    commit: str = ""
    """Commit of that repository, when known."""
    path: str = ""
    """Primary file of the run."""


class TargetRepo(Model):
    """The repository being set up."""

    url: str = ""
    """Clone URL or `owner/name`."""
    commit: str | None = None
    """Commit set up, when recorded."""
    branch: str | None = None
    """Branch, when named."""
    language: str = ""
    """Main language, when recorded."""


class Doc(Model):
    """A documentation file the run saw."""

    path: str
    """File path inside the repository."""
    text: str
    """Its text (possibly truncated)."""


class RunContext(Model):
    """What the repository looks like: the input of the `plan` task."""

    readme: str = ""
    """README text, when the run saw it."""
    docs: tuple[Doc, ...] = ()
    """Setup-related documentation files."""
    file_tree: str = ""
    """A listing of the repository's files."""
    file_analysis: str | None = None
    """APTBench-style "File Analysis" text, when available."""


class AgentInfo(Model):
    """Which agent ran."""

    name: str = ""
    """Agent framework (`react-super`, `repolaunch`, ...)."""
    model: str = ""
    """Model that drove it."""


class RunOutcome(Model):
    """The source's verdict on the run."""

    success: bool | None = None
    """True/False from the source's verdict; None when the source has none for this run."""
    label_source: str = "no_verdict"
    """Which verdict decided it, e.g. `metrics.json output_match==1.0`."""
    reason: str = ""
    """snake_case reason for failure / no verdict."""
    details: dict[str, Any] = Field(default_factory=dict)
    """The verdict's raw numbers (checkpoints, n_tries ...)."""


class EnvSetupRun(Model):
    """One normalised env-setup run."""

    model_config = ConfigDict(
        frozen=True, extra="forbid", use_attribute_docstrings=True, populate_by_name=True
    )

    record_schema: Literal["aptforge.envsetup_run/v1"] = Field(SCHEMA_ID, alias="schema")
    """Schema id of this record."""
    run_id: str
    """Readable run id, e.g. `super/react-super_masked/colbert_dependencies`."""
    source: SourceRef
    """Where the raw run came from."""
    target_repo: TargetRepo = TargetRepo()
    """The repository being set up."""
    task: str = ""
    """The task the agent was given."""
    context: RunContext = RunContext()
    """Documentation and file tree the run saw."""
    agent: AgentInfo = AgentInfo()
    """Agent and model."""
    steps: tuple[EnvStep, ...] = ()
    """The run's actions in order."""
    outcome: RunOutcome = RunOutcome()
    """The source's verdict."""
    issues: tuple[str, ...] = ()
    """Reader notes about this run (missing members, truncated outputs ...)."""

    def to_record(self) -> dict[str, Any]:
        """The JSON form (`schema` key first), as stored in `Trajectory.meta["envsetup"]`."""
        return self.model_dump(mode="json", by_alias=True)


META_KEY = "envsetup"
"""The `Trajectory.meta` key an env-setup run travels under."""


def run_of(meta: dict[str, Any]) -> EnvSetupRun:
    """The normalised run stored in an env-setup trajectory's `meta`.

    Raises:
        KeyError: the trajectory holds no env-setup run.
    """
    return EnvSetupRun.model_validate(meta[META_KEY])
