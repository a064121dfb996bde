"""Scheduled rebuilds: one Prefect deployment per config in `configs/` that names a schedule.

`aptforge serve` (and `make serve`) starts a Prefect runner that serves every scheduled config as a
deployment of the `build-benchmark` flow, with the config's cron schedule (or interval) and the
validated config as its parameter. Against a Prefect server (`prefect server start`), the
deployments, their schedules and their runs are visible in the UI; runs execute in the serving
process's machine. A rebuild costs only what changed: the queue keeps verdicts of unchanged items,
re-queues changed ones and retires removed ones.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from flows.config import BuildConfig, ConfigError, load_config


def scheduled_configs(config_dir: str | Path) -> tuple[list[tuple[Path, BuildConfig]], list[str]]:
    """Configs with an enabled schedule, and a message per config that could not be used."""
    found: list[tuple[Path, BuildConfig]] = []
    skipped: list[str] = []
    for path in sorted(Path(config_dir).glob("*.yaml")):
        try:
            cfg = load_config(path)
        except ConfigError as exc:
            skipped.append(str(exc))
            continue
        if cfg.schedule is not None and cfg.schedule.enabled:
            found.append((path, cfg))
    return found, skipped


def deployment_name(cfg: BuildConfig) -> str:
    """`<scenario>-<version>`: one deployment per named benchmark version."""
    return f"{cfg.scenario}-{cfg.version}".replace("/", "-")


def to_deployments(configs: Iterable[tuple[Path, BuildConfig]]) -> list[Any]:
    """Runner deployments of the build flow, one per scheduled config."""
    from prefect.client.schemas.objects import ConcurrencyLimitConfig, ConcurrencyLimitStrategy

    from flows.build import build

    # one run of a benchmark version at a time: a tick that comes while a rebuild still runs is
    # cancelled (the next tick rebuilds what changed), so a short interval or a slow machine never
    # piles up builds of the same output folder that slow each other down
    one_at_a_time = ConcurrencyLimitConfig(limit=1, collision_strategy=ConcurrencyLimitStrategy.CANCEL_NEW)
    deployments = []
    for path, cfg in configs:
        sched = cfg.schedule
        assert sched is not None
        kwargs: dict[str, Any] = {}
        if sched.cron:
            from prefect.schedules import Cron

            kwargs["schedule"] = Cron(sched.cron, timezone=sched.timezone)
        else:
            kwargs["interval"] = sched.interval_seconds
        deployments.append(
            build.to_deployment(
                name=deployment_name(cfg),
                parameters={"config": cfg.model_dump(mode="json")},
                description=f"Scheduled rebuild of {path.name}: {cfg.description}".strip(),
                tags=["aptforge", cfg.scenario],
                concurrency_limit=one_at_a_time,
                **kwargs,
            )
        )
    return deployments


def serve_configs(config_dir: str | Path, *, limit: int | None = None) -> None:
    """Serve every scheduled config until interrupted (blocks)."""
    from prefect import serve

    configs, skipped = scheduled_configs(config_dir)
    for message in skipped:
        print(f"skipped: {message}")
    if not configs:
        raise ConfigError(f"no config in {config_dir} has an enabled `schedule`")
    serve(*to_deployments(configs), limit=limit)
