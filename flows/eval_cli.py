"""The `aptforge eval` and `aptforge validity` commands (registered by `flows.cli`)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

err = Console(stderr=True)
out = Console()


def print_scorecard(card: dict[str, Any], console: Console = out) -> None:
    """The scorecard as a table."""
    rel = card["release"]
    table = Table(
        title=f"{card['model']} on {rel['name']} {rel['version']} ({card['protocol']})", title_justify="left"
    )
    table.add_column("task", no_wrap=True)
    for col in ("metric", "score", "95% CI", "n", "chance", "best baseline", "other metrics"):
        table.add_column(col)
    for name, t in sorted(card["tasks"].items()):
        base = t["baseline"]
        table.add_row(
            name,
            t["metric"],
            f"{t['score']:.3f}",
            f"[{t['ci95'][0]:.3f}, {t['ci95'][1]:.3f}]",
            str(t["n"]),
            f"{t['chance']:.3f}",
            f"{base['name']} {base['score']:.3f}" if base else "-",
            ", ".join(f"{k} {v:.3f}" for k, v in t["metrics"].items() if k != t["metric"]) or "-",
        )
    console.print(table)
    console.print(
        f"requests sent {card['requests']['sent']}, answered from cache {card['requests']['cached']}",
        highlight=False,
    )


def eval_command(
    release: Annotated[
        str, typer.Argument(help="Release folder, or Hub dataset repo id[@tag] (HF_ENDPOINT).")
    ],
    endpoint: Annotated[
        str, typer.Option("--endpoint", help="OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1.")
    ],
    model: Annotated[str, typer.Option("--model", help="Model name the endpoint serves.")],
    protocol: Annotated[
        str,
        typer.Option("--protocol", help="aptbench (few-shot generation) or loglik (option log-likelihood)."),
    ] = "aptbench",
    tasks: Annotated[
        list[str] | None, typer.Option("--tasks", help="Release configs to score (repeatable; default all).")
    ] = None,
    limit: Annotated[int | None, typer.Option("--limit", help="At most N items per task.")] = None,
    out_dir: Annotated[
        Path | None, typer.Option("--out", help="Output folder (default out/eval/<model>-<protocol>).")
    ] = None,
    revision: Annotated[
        str | None, typer.Option("--revision", help="Hub tag or commit of the release.")
    ] = None,
    concurrency: Annotated[int, typer.Option("--concurrency", help="Requests in flight.")] = 8,
    shots: Annotated[int, typer.Option("--shots", help="Few-shot demos per prompt.")] = 3,
) -> None:
    """Score a base model on a release: predictions Parquet, scorecard JSON + HTML."""
    from pydantic import ValidationError

    from flows.evaluate import EvalConfig, eval_benchmark

    names = [t for spec in tasks or [] for t in spec.split(",") if t]
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in model)
    target = out_dir or Path("out") / "eval" / f"{safe}-{protocol}"
    source = f"{release}@{revision}" if revision and not Path(release).is_dir() else release
    try:
        cfg = EvalConfig(
            release=source,
            endpoint=endpoint,
            model=model,
            protocol=protocol,  # type: ignore[arg-type]
            tasks=tuple(names),
            limit=limit,
            out_dir=str(target),
            max_concurrency=concurrency,
            shots=shots,
        )
    except ValidationError as exc:
        err.print(f"[bold red]invalid option:[/] {exc.errors()[0]['loc'][0]}: {exc.errors()[0]['msg']}")
        raise typer.Exit(2) from None
    for key, value in {"PREFECT_LOGGING_LEVEL": "WARNING", "DO_NOT_TRACK": "1"}.items():
        os.environ.setdefault(key, value)
    from flows.progress import progress_bars

    with progress_bars(err) as progress:
        try:
            card = eval_benchmark(cfg, progress=progress)
        except (FileNotFoundError, ValueError) as exc:
            err.print(f"[bold red]eval failed:[/] {exc}", highlight=False, soft_wrap=True)
            raise typer.Exit(1) from None
    print_scorecard(card)
    out.print(
        f"outputs: {target}/scorecard.json, scorecard.html, predictions.parquet",
        highlight=False,
        soft_wrap=True,
    )


def validity_command(
    scorecards: Annotated[
        list[Path], typer.Argument(help="scorecard.json files of `aptforge eval`, one per model.")
    ],
    downstream: Annotated[
        Path, typer.Option("--downstream", help="CSV with columns model, benchmark, score.")
    ],
    mapping: Annotated[
        Path, typer.Option("--mapping", help="YAML: downstream benchmark -> aptforge scenarios.")
    ] = Path("configs/validity.yaml"),
    out_dir: Annotated[Path, typer.Option("--out", help="Output folder.")] = Path("out/validity"),
) -> None:
    """Correlate scorecards with downstream agent results (Pearson, Spearman, bootstrap CI, scatter)."""
    from flows.validity import load_downstream, load_mapping, validity, write_validity

    try:
        cards = [json.loads(p.read_text(encoding="utf-8")) for p in scorecards]
        report = validity(cards, load_downstream(downstream), load_mapping(mapping))
    except (OSError, ValueError, KeyError) as exc:
        err.print(f"[bold red]validity failed:[/] {exc}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None
    page = write_validity(out_dir, report)
    if not report["results"]:
        out.print(
            "no correlation: fewer than 3 models on both sides of every mapped pair",
            highlight=False,
            soft_wrap=True,
        )
    for r in report["results"]:
        out.print(r["verdict"], highlight=False, soft_wrap=True)
    out.print(f"report: {page}", highlight=False, soft_wrap=True)


__all__ = ["eval_command", "print_scorecard", "validity_command"]
