"""Human review at the flow layer: the build's enqueue step, the review summary, and `aptforge review`.

The build never waits on people: its last step enqueues the candidates into the local review queue
(`BuildConfig.queue_path()`), keeping verdicts of unchanged items and re-queueing changed ones, and adds
the queue's status counts and agreement figures to the build report. `aptforge review` serves the
review app on 127.0.0.1 (reviewer tokens and roles come only from the environment,
`APTFORGE_REVIEW_TOKENS`, and are required beyond loopback) with the config's review options (lease
time, adjudicators, allowed hosts, guidelines per task) and the build's quality gates, prints
agreement, or exchanges tasks with Label Studio.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from pydantic import SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

if TYPE_CHECKING:  # the CLI imports this module on every command: the queue and schemas load on use
    from annotations.app import AppOptions
    from annotations.app.auth import Accounts
    from annotations.queue import Queue
    from flows.config import ReviewConfig
    from schemas import Question
    from schemas.report import ReviewReport


class ReviewSettings(BaseSettings):
    """Review secrets, read from the environment at the edge (never from config files, never logged)."""

    model_config = SettingsConfigDict(env_prefix="APTFORGE_REVIEW_", extra="ignore")

    tokens: SecretStr | None = None
    """`name:token[,name:token...]`: one token per reviewer; unset = open mode (loopback only)."""

    def accounts(self) -> Accounts:
        """Tokens and adjudicators; raises ValueError naming the bad entry (not its token)."""
        from annotations.app.auth import Accounts, parse_accounts

        return parse_accounts(self.tokens.get_secret_value()) if self.tokens else Accounts({}, frozenset())

    def token_map(self) -> dict[str, str]:
        """{reviewer: token}; raises ValueError naming the bad entry (not its token)."""
        return self.accounts().tokens


def app_options(
    review: ReviewConfig, accounts: Accounts, allowed_hosts: list[str], spec_guidelines: dict[str, str]
) -> AppOptions:
    """The review app's options from the config's `review` section, the token roles and the CLI."""
    from annotations.app import AppOptions
    from generators.quality.gates import check_question

    return AppOptions(
        adjudicators=accounts.adjudicators | frozenset(review.adjudicators),
        allowed_hosts=tuple([*review.allowed_hosts, *allowed_hosts]),
        lease_seconds=int(review.lease_minutes * 60),
        guidelines={**spec_guidelines, **review.guidelines},
        gates=check_question,
    )


def spec_guidelines(scenarios: list[str]) -> dict[str, str]:
    """Task -> guidelines declared by the scenarios in the queue (a task spec's `guidelines` field, if any)."""
    from schemas import TASKS

    out: dict[str, str] = {}
    for (scenario, task_name), spec in TASKS.items():
        # TaskSpec gains `guidelines` when scenario packages declare their own specs; until then none has it.
        text = getattr(spec, "guidelines", None)
        if scenario in scenarios and isinstance(text, str) and text.strip():
            out[task_name] = text
    return out


def review_summary(queue: Queue) -> dict[str, Any]:
    """Status counts per task and agreement per task (the review section of the build report)."""
    from annotations.agreement import task_agreement
    from annotations.stats import reason_counts

    by_task: dict[str, dict[str, int]] = {}
    for task_name in queue.facets()["task"]:
        by_task[task_name] = {
            s: queue.count(task=task_name, status=s) for s in ("pending", "accepted", "rejected", "edited")
        }
    return {
        "queue": str(queue.path),
        "reviews_per_item": queue.reviews_per_item,
        "status_by_task": by_task,
        "agreement": {t: a.as_dict() for t, a in task_agreement(queue.reviews()).items()},
        "rejection_reasons": reason_counts(queue.reviews()),
    }


def enqueue_and_summarise(
    path: str | Path, questions: Iterable[Question], batch: str, tasks: list[str], reviews_per_item: int
) -> ReviewReport:
    """Enqueue a build's questions (one transaction) and summarise the queue for the report (the build's last step).
    `questions` is read twice (against the queue, then into it): a list, or the build's `FinalQuestions`."""
    from annotations.queue import Queue

    queue = Queue(path)
    if queue.reviews_per_item != reviews_per_item:
        queue.set_reviews_per_item(reviews_per_item)
    changes = changelog_against_queue(queue, questions, tasks)
    result = queue.enqueue(questions, batch=batch, tasks=tasks)
    from schemas.report import ReviewReport

    return ReviewReport.model_validate(
        {"enqueued": result.as_dict(), "changelog": changes, **review_summary(queue)}
    )


def changelog_against_queue(
    queue: Any, questions: Iterable[Question], tasks: list[str]
) -> dict[str, dict[str, int]]:
    """Per task, what this build adds, removes, changes and keeps against the items last built into the queue."""
    from schemas import content_hash

    new: dict[str, tuple[str, str]] = {}
    scenarios: set[str] = set()
    for q in questions:  # one pass: a build's questions are read from disk
        new[q.item_id] = (q.task, content_hash(q))
        scenarios.add(q.scenario)
    before: dict[str, tuple[str, str]] = {}
    for task_name in tasks:
        offset = 0
        while True:
            page = queue.items(task=task_name, limit=1000, offset=offset)
            before.update(
                {r.item_id: (r.task, r.built_hash) for r in page if not scenarios or r.scenario in scenarios}
            )
            if len(page) < 1000:
                break
            offset += 1000
    out = {t: {"added": 0, "removed": 0, "changed": 0, "unchanged": 0} for t in tasks}
    for item_id, (task_name, h) in new.items():
        old = before.get(item_id)
        key = "added" if old is None else ("unchanged" if old[1] == h else "changed")
        out.setdefault(task_name, {"added": 0, "removed": 0, "changed": 0, "unchanged": 0})[key] += 1
    for item_id, (task_name, _) in before.items():
        if item_id not in new:
            out[task_name]["removed"] += 1
    return out


def _queue_for(queue: Path | None, config: Path | None) -> Path:
    if queue is not None:
        return queue
    if config is None:
        raise typer.BadParameter("give --queue PATH or --config CONFIG (whose review queue to open)")
    from flows.config import ConfigError, load_config

    try:
        return load_config(config).queue_path()
    except ConfigError as exc:
        raise typer.BadParameter(str(exc)) from None


def _print_summary(summary: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(
        title=f"review queue {summary['queue']} ({summary['reviews_per_item']} review(s) per item)",
        title_justify="left",
    )
    for col in (
        "task",
        "pending",
        "accepted",
        "rejected",
        "edited",
        "items 2+ reviews",
        "Cohen k",
        "Fleiss k",
        "Krippendorff a",
    ):
        table.add_column(col)
    for name, counts in summary["status_by_task"].items():
        a = summary["agreement"].get(name, {})
        fmt = [
            ("n/a" if a.get(k) is None else f"{a[k]:.3f}")
            for k in ("cohen_kappa", "fleiss_kappa", "krippendorff_alpha")
        ]
        table.add_row(
            name,
            *(str(counts[s]) for s in ("pending", "accepted", "rejected", "edited")),
            str(a.get("items", 0)),
            *fmt,
        )
    Console().print(table)


def review_command(
    queue: Annotated[Path | None, typer.Option("--queue", help="Review queue file (SQLite).")] = None,
    config: Annotated[Path | None, typer.Option("--config", help="Build config whose queue to open.")] = None,
    host: Annotated[
        str, typer.Option("--host", help="Address to listen on (tokens required beyond loopback).")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port to listen on.")] = 8765,
    reviews_per_item: Annotated[
        int | None, typer.Option("--reviews-per-item", min=1, help="Change the queue's review policy.")
    ] = None,
    agreement: Annotated[
        bool, typer.Option("--agreement", help="Print status counts and agreement per task, then exit.")
    ] = False,
    export_labelstudio: Annotated[
        Path | None,
        typer.Option(
            "--export-labelstudio",
            help="Write pending items as Label Studio tasks + config into this folder, then exit.",
        ),
    ] = None,
    import_labelstudio: Annotated[
        Path | None,
        typer.Option(
            "--import-labelstudio", help="Apply a Label Studio JSON export as decisions, then exit."
        ),
    ] = None,
    allowed_host: Annotated[
        list[str] | None,
        typer.Option(
            "--allowed-host", help="Host name the app answers beside loopback (tokens only; repeat)."
        ),
    ] = None,
) -> None:
    """Serve the review web app for a queue (or print agreement, or exchange tasks with Label Studio)."""
    from extractors.discovery import discover_extractors

    discover_extractors()  # content hashes follow the scenarios' TaskSpecs
    path = _queue_for(queue, config)
    if not path.is_file():
        typer.echo(
            f"no review queue at {path}: run the build first (e.g. `make build-swe`), it enqueues", err=True
        )
        raise typer.Exit(2)
    from annotations.queue import Queue

    q = Queue(path)
    if reviews_per_item is not None:
        changed = q.set_reviews_per_item(reviews_per_item, who="cli")
        typer.echo(f"reviews per item: {reviews_per_item} ({changed} item status(es) changed)")
    if agreement:
        _print_summary(review_summary(q))
        return
    if export_labelstudio is not None:
        from annotations.labelstudio import LABEL_CONFIG, export_tasks
        from flows.io import write_json, write_text

        tasks = export_tasks(q)
        write_json(export_labelstudio / "tasks.json", tasks)
        write_text(export_labelstudio / "label_config.xml", LABEL_CONFIG)
        typer.echo(
            f"{len(tasks)} pending item(s) -> {export_labelstudio / 'tasks.json'} (+ label_config.xml)"
        )
        return
    if import_labelstudio is not None:
        from annotations.labelstudio import import_export

        result = import_export(q, import_labelstudio)
        typer.echo(f"applied {result.applied}, unchanged {result.unchanged}, problems {len(result.problems)}")
        for p in result.problems:
            typer.echo(f"  {p.where}: {p.reason}: {p.detail}", err=True)
        raise typer.Exit(1 if result.problems else 0)
    try:
        from annotations.app import serve
        from annotations.app.auth import check_binding
        from flows.config import ReviewConfig, load_config

        accounts = ReviewSettings().accounts()
        check_binding(host, accounts.tokens)  # before anything is printed or listens
        review = load_config(config).review if config is not None else ReviewConfig()
        options = app_options(
            review, accounts, allowed_host or [], spec_guidelines(list(q.facets()["scenario"]))
        )
        mode = "token login" if accounts.tokens else "open mode, loopback only"
        typer.echo(f"review app for {path}: http://{host}:{port}/  ({mode})")
        serve(q, host=host, port=port, tokens=accounts.tokens, options=options)
    except ValueError as exc:
        typer.echo(f"cannot start the review app: {exc}", err=True)
        raise typer.Exit(2) from None
