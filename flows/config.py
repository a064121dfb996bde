"""Build configuration: one pydantic model, validated from a small YAML file.

Relative paths in a config file are resolved against the file's own directory, so a config
works from any working directory. Paths given on the command line are taken as typed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from schemas import content_id


class _Config(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)


class SourceConfig(_Config):
    """One input: a file or a folder searched recursively."""

    path: str
    """File or directory of raw trajectories."""
    reader: str | None = None
    """Reader name to force; sniffed per record when omitted."""


class TaskConfig(_Config):
    """Knobs of one task."""

    enabled: bool = True
    """Build this task."""
    max_items_per_trajectory: int = Field(3, ge=1)
    """At most this many items per trajectory (seeded choice among eligible steps)."""
    max_context_tokens: int = Field(16000, ge=256)
    """Context budget in tokens (characters / 4)."""
    max_observation_chars: int = Field(4000, ge=64)
    """Observations longer than this are truncated (head and tail kept)."""


class GeneratorConfig(_Config):
    """Which distractor generator, and its settings."""

    name: str = "offline"
    """`offline` (default, no network) or an LLM generator name."""
    near_duplicate: float = Field(0.85, gt=0, le=1)
    """Distractors at least this similar to the gold (or to each other) are refused."""


class Limits(_Config):
    """Sizes that shape the run."""

    shard_size: int = Field(200, ge=1)
    """Input files per read shard / gold steps per generate shard."""
    max_workers: int = Field(4, ge=1)
    """Concurrent task workers (thread pool size)."""


class PublishConfig(_Config):
    """Where and how a release is published."""

    repo_id: str | None = None
    """Hub dataset repo (`org/name`); without one, publish writes the release folder only."""
    private: bool = True
    """Create the Hub repo private."""
    license: str = "apache-2.0"
    """License in the dataset card."""


class QualityConfig(_Config):
    """Model-free baseline bounds per task, and the reasons to publish a flagged task anyway."""

    margin: float = Field(0.10, ge=0, le=1)
    """Accuracy a baseline may reach above chance (0.10 = 10 points) once a task has `min_items`."""
    min_items: int = Field(100, ge=1)
    """Below this many items the margin widens to `z` standard errors of chance accuracy."""
    z: float = Field(2.326, ge=0)
    """Standard errors of chance accuracy allowed on small tasks (2.326: one-sided 99%)."""
    bounds: dict[str, dict[str, float]] = Field(default_factory=dict)
    """Explicit bounds: task -> baseline (`longest`, `shortest`, `central`, `position`, `no_context`) -> max accuracy."""
    overrides: dict[str, str] = Field(default_factory=dict)
    """Task -> reason: publish this task even when a baseline exceeds its bound."""

    @field_validator("bounds")
    @classmethod
    def _baseline_names(cls, bounds: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
        from generators.baselines import BASELINES

        for task, per in bounds.items():
            for name, value in per.items():
                if name not in BASELINES:
                    raise ValueError(f"task {task!r}: unknown baseline {name!r}; known: {', '.join(BASELINES)}")
                if not 0 <= value <= 1:
                    raise ValueError(f"task {task!r}: bound of {name!r} must be an accuracy in [0, 1]")
        return bounds

    @field_validator("overrides")
    @classmethod
    def _reasons(cls, overrides: dict[str, str]) -> dict[str, str]:
        for task, reason in overrides.items():
            if not reason.strip():
                raise ValueError(f"task {task!r}: an override needs a reason")
        return overrides


class BuildConfig(_Config):
    """Everything a build needs; the Prefect flow's single parameter."""

    scenario: str
    """Extractor name (`swe_issue_fix`, ...)."""
    version: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    """Benchmark version; names the output folder."""
    description: str = ""
    """Free text for reports and the dataset card."""
    sources: list[SourceConfig] = Field(min_length=1)
    """Raw trajectory inputs."""
    reports: list[str] = Field(default_factory=list)
    """SWE-bench harness reports (files or folders) deciding success."""
    tasks: dict[str, TaskConfig] = Field(min_length=1)
    """Tasks to build, by name."""
    generator: GeneratorConfig = GeneratorConfig()
    """Distractor generator."""
    seed: int = 0
    """Seed of every random choice in the build."""
    keep_unknown: bool = False
    """Keep runs without a verdict (default: dropped with reason `no_verdict`)."""
    out_dir: str = "out"
    """Output root; the build writes `<out_dir>/<scenario>/<version>/`."""
    limits: Limits = Limits()
    """Sharding and concurrency."""
    publish: PublishConfig = PublishConfig()
    """Release settings."""
    quality: QualityConfig = QualityConfig()
    """Baseline bounds and overrides (a flagged task is refused at publish unless overridden)."""

    @field_validator("tasks")
    @classmethod
    def _task_names(cls, tasks: dict[str, TaskConfig]) -> dict[str, TaskConfig]:
        for name in tasks:
            if not name.isidentifier():
                raise ValueError(f"task name {name!r} is not a plain identifier")
        return tasks

    def output_dir(self) -> Path:
        """`<out_dir>/<scenario>/<version>`."""
        return Path(self.out_dir) / self.scenario / self.version

    def fingerprint(self) -> str:
        """Hash of the whole config (goes into report and manifest)."""
        return content_id(self.model_dump(mode="json"))


class ConfigError(ValueError):
    """A config that cannot be used; the message names the file and field."""


def _resolve(base: Path, value: str) -> str:
    path = Path(value).expanduser()
    return str(path if path.is_absolute() else (base / path).resolve())


def load_config(path: str | Path, **overrides: Any) -> BuildConfig:
    """Read, resolve and validate a YAML config; `overrides` (CLI flags) win.

    Raises:
        ConfigError: unreadable YAML or a field that fails validation (named in the message).
    """
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config: {exc.strerror or exc}") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: invalid YAML: {exc}") from exc
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: a config must be a mapping of fields, got {type(raw).__name__}")
    base = path.parent.resolve()
    for src in raw.get("sources") or []:
        if isinstance(src, dict) and isinstance(src.get("path"), str):
            src["path"] = _resolve(base, src["path"])
    raw["sources"] = [
        {"path": _resolve(base, s)} if isinstance(s, str) else s for s in raw.get("sources") or []
    ]
    raw["reports"] = [_resolve(base, r) if isinstance(r, str) else r for r in raw.get("reports") or []]
    if isinstance(raw.get("out_dir"), str):
        raw["out_dir"] = _resolve(base, raw["out_dir"])
    for key, value in overrides.items():
        if value is None:
            continue
        if key == "inputs":
            raw["sources"] = [{"path": str(Path(p).resolve())} for p in value]
        elif key == "reports":
            raw["reports"] = [str(Path(p).resolve()) for p in value]
        elif key == "out_dir":
            raw["out_dir"] = str(Path(value).resolve())
        elif key == "generator":
            gen = raw.get("generator") if isinstance(raw.get("generator"), dict) else {}
            raw["generator"] = {**gen, "name": value}
        else:
            raw[key] = value
    try:
        return BuildConfig.model_validate(raw)
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            loc = ".".join(str(p) for p in err["loc"]) or "(top level)"
            lines.append(f"{path}: field `{loc}`: {err['msg']}")
        raise ConfigError("\n".join(lines)) from exc
