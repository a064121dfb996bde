"""The `publish` flow: verified items -> a versioned release folder (and one Hub commit).

guard -> render -> write folder -> push. Guards: only items a reviewer accepted (or edited) whose
content hash still matches what they saw; tasks whose model-free baselines exceed their bounds
are refused unless the config overrides them with a reason; a release in which the secret scanner
still finds anything is refused. The folder is rendered whole into a temp folder beside the old
one and swapped in, so a failure midway leaves the previous release intact. `--dry-run` prints
the plan and writes nothing.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path, PurePath
from typing import Any, NamedTuple

from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from extractors.discovery import discover_extractors
from flows.card import CardSource, check_card
from flows.config import BuildConfig
from flows.release import MissingPrompt, ReleaseMeta, changelog, render_release
from generators.quality.audit import refused_tasks
from schemas import Item, content_hash, content_id, question_row
from schemas.report import BuildReport


class PublishRefused(RuntimeError):
    """Publishing was refused by a guard; nothing was written."""


class Plan(NamedTuple):
    """What a publish would do."""

    version: str
    release_dir: str
    files: dict[str, int]
    """Relative path -> size in bytes."""
    counts: dict[str, int]
    changes: dict[str, dict[str, int]]
    excluded: dict[str, int]
    """Items left out, by reason."""
    repo_id: str | None


def release_dir(config: BuildConfig) -> Path:
    """`<out_dir>/<scenario>/release`: the current release folder of a scenario."""
    return Path(config.out_dir) / config.scenario / "release"


def queue_path(config: BuildConfig) -> Path:
    """Where the build enqueued its items (`review.queue`, by default beside the build's versions)."""
    return config.queue_path()


def select_verified(items: list[Item], scenario: str) -> tuple[list[Item], dict[str, int]]:
    """Accepted/edited items of `scenario` whose stored hash matches the content we would publish."""
    keep: list[Item] = []
    excluded: dict[str, int] = defaultdict(int)
    for item in items:
        if item.question.scenario != scenario:
            continue
        if item.status not in ("accepted", "edited"):
            excluded[f"status_{item.status}"] += 1
        elif content_hash(item.question) != item.content_hash:
            excluded["content_changed_since_review"] += 1
        else:
            keep.append(item)
    return keep, dict(excluded)


def _overrides(config: BuildConfig) -> dict[str, str]:
    return dict(config.quality.overrides)


def _secret_findings(
    config: BuildConfig, rows_by_task: Mapping[tuple[str, str], list[dict[str, Any]]]
) -> list[str]:
    from flows.hygiene import privacy_options
    from generators.hygiene.secrets import scan_rows

    findings = scan_rows([r for rows in rows_by_task.values() for r in rows], privacy_options(config.privacy))
    return [f"{f.kind} in {f.where}" for f in findings]


def _previous_manifest(folder: Path) -> dict[str, Any] | None:
    try:
        return json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None


def portable_path(path: str, roots: Sequence[str]) -> str:
    """`path` as `<input root name>/<relative path>` under the first input root holding it (else its name).

    Release files never carry the build machine's absolute paths, so two clones give the same bytes.
    """
    target = PurePath(path)
    if not target.is_absolute():
        return target.as_posix()
    for root in roots:
        base = PurePath(root)
        if target == base or base in target.parents:
            return (PurePath(base.name) / target.relative_to(base)).as_posix()
    return target.name


def portable_fingerprint(config: BuildConfig) -> str:
    """Hash of the config with every absolute path reduced to its last part and `out_dir` left out."""

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k != "out_dir"}
        if isinstance(value, list):
            return [strip(v) for v in value]
        if isinstance(value, str) and PurePath(value).is_absolute():
            return PurePath(value).name
        return value

    return content_id(strip(config.model_dump(mode="json")))


def previous_release(config: BuildConfig, repo_id: str | None) -> dict[str, Any] | None:
    """The manifest of the release last published: the Hub head's when a repo is set (and readable), else the local folder's."""
    if repo_id:
        from huggingface_hub.errors import HfHubHTTPError

        from flows.hub import HubRefused, remote_manifest

        try:
            return remote_manifest(repo_id)
        except (HubRefused, HfHubHTTPError, OSError):
            pass
    return _previous_manifest(release_dir(config))


def prepare(
    config: BuildConfig,
    items: list[Item],
    report: BuildReport,
    repo_id: str | None,
    *,
    previous: Mapping[str, Any] | None = None,
    not_verified: Mapping[str, int] | None = None,
) -> tuple[dict[str, bytes], Plan]:
    """Guard and render; raises PublishRefused when a guard says no.

    `previous` is the manifest of the release last published (the Hub head's, else the local
    folder's); `not_verified` counts the scenario's queue items by status other than accepted/edited.
    """
    verified, excluded = select_verified(items, config.scenario)
    for status, n in (not_verified or {}).items():
        excluded[f"status_{status}"] = excluded.get(f"status_{status}", 0) + n
    refused = refused_tasks(report.quality, _overrides(config))
    rows_by_task: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    roots = [s.path for s in config.sources]
    for item in verified:
        if item.question.task in refused:
            excluded[f"task_refused_{item.question.task}"] = (
                excluded.get(f"task_refused_{item.question.task}", 0) + 1
            )
            continue
        row = question_row(item.question, status=item.status)
        row["source_file"] = portable_path(row["source_file"], roots)
        rows_by_task[(item.question.scenario, item.question.task)].append(row)
    if refused and not rows_by_task:
        raise PublishRefused(
            "every task with verified items failed its quality bounds: "
            + "; ".join(f"{t}: {w}" for t, w in refused.items())
        )
    if not rows_by_task:
        raise PublishRefused(
            f"no verified items for {config.scenario}: review the queue first ({queue_path(config)})"
        )
    findings = _secret_findings(config, rows_by_task)
    if findings:
        raise PublishRefused(
            f"the secret scanner still finds {len(findings)} secret(s): " + "; ".join(findings[:5])
        )
    folder = release_dir(config)
    if previous is None:
        previous = _previous_manifest(folder)
    if previous is not None and previous.get("version") == config.version:
        # republishing a version: its changelog stays against the release before it
        previous = previous.get("baseline")
    meta = ReleaseMeta(
        name=f"aptforge-{config.scenario}",
        version=config.version,
        description=config.description,
        license=config.publish.license,
        config_hash=portable_fingerprint(config),
        repo_id=repo_id,
        inputs=[portable_path(r, roots) for r in roots],
        baselines=_baselines(report),
        previous=previous,
        seed=config.seed,
        sources=[
            CardSource(portable_path(src.path, roots), src.license or "not stated in the config")
            for src in config.sources
        ],
        excluded=dict(excluded),
    )
    try:
        files = render_release(rows_by_task, meta)
    except MissingPrompt as exc:
        raise PublishRefused(str(exc)) from None
    problems = check_card(files["README.md"].decode("utf-8"), meta.sources)
    if problems:
        raise PublishRefused("the dataset card fails the metadata check: " + "; ".join(problems))
    manifest = json.loads(files["manifest.json"])
    plan = Plan(
        config.version,
        str(folder),
        {p: len(b) for p, b in sorted(files.items())},
        manifest["counts"],
        changelog(manifest, previous),
        dict(excluded),
        repo_id,
    )
    return files, plan


def _baselines(report: BuildReport) -> dict[str, Any]:
    return {task: dict(e.baselines) for task, e in report.quality.tasks.items() if e.baselines is not None}


def stage_release(
    folder: Path, files: Mapping[str, bytes], check: Callable[[Path], None] | None = None
) -> Path:
    """Write the whole release into a temp folder beside `folder` and run `check` on it; returns the staging folder."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.new-", dir=folder.parent))
    try:
        for rel, blob in files.items():
            target = staging / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(blob)
        if check is not None:
            check(staging)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return staging


def swap_in(staging: Path, folder: Path) -> None:
    """Replace `folder` by the staged release (two renames; the old folder is removed last)."""
    try:
        old = None
        if folder.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{folder.name}.old-", dir=folder.parent))
            old.rmdir()
            folder.rename(old)
        staging.rename(folder)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def write_release(
    folder: Path, files: Mapping[str, bytes], check: Callable[[Path], None] | None = None
) -> None:
    """Write the whole folder beside the old one, run `check` on it, then swap; the old one survives any failure."""
    swap_in(stage_release(folder, files, check), folder)


def _assert_clean(config: BuildConfig, folder: Path) -> None:
    """The secret scanner over every file of the staged release (card, JSONL, YAML, Parquet rows)."""
    from flows.hygiene import assert_release_clean, privacy_options
    from generators.hygiene.secrets import SecretsFound

    try:
        assert_release_clean(folder, privacy_options(config.privacy))
    except SecretsFound as exc:
        raise PublishRefused(f"the secret scanner still finds secrets in the release: {exc}") from None


class Reviewed(NamedTuple):
    """What the review queue holds for a scenario."""

    verified: list[Item]
    not_verified: dict[str, int]
    """Active items by status other than accepted/edited."""


@task(name="load-verified", cache_policy=NO_CACHE)
def load_verified(path: str, scenario: str) -> Reviewed:
    """Verified items from the review queue, and how many were left out by status."""
    from annotations.queue import Queue

    if not Path(path).exists():
        raise PublishRefused(f"no review queue at {path}: run the build (it enqueues) and review first")
    queue = Queue(path)
    statuses = set(queue.facets().get("status", {})) - {"accepted", "edited"}
    counts = {s: queue.count(status=s, scenario=scenario) for s in sorted(statuses)}
    return Reviewed(queue.verified(), {s: n for s, n in counts.items() if n})


@flow(name="publish-benchmark", log_prints=False)
def publish(
    config: BuildConfig, repo_id: str | None = None, dry_run: bool = False, force: bool = False
) -> dict[str, Any]:
    """Publish the verified items of `config`'s build; returns the plan (and the push result)."""
    discover_extractors()  # registers the scenarios' TaskSpecs (row layouts, lm-eval prompts)
    report_path = config.output_dir() / "report.json"
    if not report_path.exists():
        raise PublishRefused(f"no build report at {report_path}: run `aptforge build` first")
    report = BuildReport.model_validate_json(report_path.read_text(encoding="utf-8"))
    reviewed = load_verified(str(queue_path(config)), config.scenario)
    repo = repo_id or config.publish.repo_id
    files, plan = prepare(
        config,
        reviewed.verified,
        report,
        repo,
        previous=previous_release(config, repo),
        not_verified=reviewed.not_verified,
    )
    result: dict[str, Any] = {"plan": plan._asdict(), "pushed": None, "dry_run": dry_run}
    if dry_run:
        return result
    folder = release_dir(config)
    # The local folder is the published artefact: it is swapped in only after the push succeeded, so a
    # failed push leaves the previous release (and the next changelog's baseline) untouched.
    staging = stage_release(folder, files, check=lambda staged: _assert_clean(config, staged))
    if repo:
        from flows.hub import push_release

        private = config.publish.private
        try:
            pushed = push_release(
                files,
                repo_id=repo,
                version=config.version,
                private=private,
                state_path=Path(config.out_dir) / config.scenario / "hub_state.json",
                force=force,
            )
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        result["pushed"] = pushed._asdict()
    swap_in(staging, folder)
    return result
