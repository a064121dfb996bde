"""The `aptforge` command line (typer).

`aptforge build CONFIG` runs the Prefect build flow; `aptforge inspect PATH...` shows how each
trajectory is read and labelled.

Error policy (every command): an expected failure prints ONE line on stderr, `error: <what, naming
the file, field or component> (hint: <what to do>)`, and exits 2 for a usage or config error, 1 for
a run failure (a refusal, authentication, the network, the local Prefect server), 128 + N when
stopped by signal N. No traceback and no Prefect log line unless `aptforge --debug ...`. Commands
raise; `handled` explains: an exception may carry `exit_code` and `hint` attributes (see `explain`).
Configs are checked whole (fields, components, paths) before any stage runs.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, NoReturn

import click
import typer
from rich.console import Console
from rich.table import Table

from flows.eval_cli import eval_command, validity_command
from flows.review import review_command
from schemas.report import BuildReport

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help=__doc__.split("\n")[0],
    pretty_exceptions_enable=False,
)
err = Console(stderr=True)
out = Console()
_options = {"debug": False}

#: Prefect logs nothing below CRITICAL unless `--debug` (or the user's own PREFECT_LOGGING_LEVEL):
#: every failure the CLI expects is reported as one line of its own.
_QUIET_PREFECT = {
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "DO_NOT_TRACK": "1",
}


def _quiet_prefect() -> None:
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "INFO" if _options["debug"] else "CRITICAL")
    for key, value in _QUIET_PREFECT.items():
        os.environ.setdefault(key, value)


@app.callback()
def _global(
    debug: Annotated[
        bool, typer.Option("--debug", help="Show tracebacks and Prefect's log instead of one-line errors.")
    ] = False,
) -> None:
    """aptforge: agent trajectories -> APTBench-style benchmarks."""
    _options["debug"] = debug


class CliError(Exception):
    """An expected failure with its one-line message, hint and exit code."""

    def __init__(self, message: str, hint: str | None = None, exit_code: int = 1) -> None:
        super().__init__(message)
        self.hint = hint
        self.exit_code = exit_code


def fail(message: str, hint: str | None = None, code: int = 1) -> NoReturn:
    """Stop the command with one line on stderr and exit `code` (2: usage/config, 1: run failure)."""
    raise CliError(message, hint, code)


def one_line(text: str) -> str:
    """`text` on one line: its lines joined with "; " (long messages are never wrapped)."""
    return "; ".join(part.strip() for part in str(text).splitlines() if part.strip())


#: Exception class names (anywhere in the MRO) of the SDKs and HTTP stacks -> (exit code, hint).
_KNOWN_FAILURES: dict[str, tuple[int, str]] = {
    "AuthenticationError": (1, "check the API key in the environment (OPENAI_API_KEY / ANTHROPIC_API_KEY)"),
    "PermissionDeniedError": (1, "the key has no access to this model or endpoint"),
    "APIConnectionError": (1, "check generator.base_url / OPENAI_BASE_URL and the network"),
    "APITimeoutError": (1, "the API did not answer in time; raise generator.timeout_s or retry later"),
    "ConnectError": (1, "check the address and that the server runs"),
    "HfHubHTTPError": (1, "check HF_TOKEN and HF_ENDPOINT"),
}


def explain(exc: BaseException) -> tuple[str, str | None, int]:
    """The one line, the hint and the exit code for an exception reaching the CLI."""
    from flows.config import ConfigError

    names = {cls.__name__ for cls in type(exc).__mro__}
    if isinstance(exc, CliError):
        return one_line(str(exc)), exc.hint, exc.exit_code
    if isinstance(exc, ConfigError):
        return one_line(f"invalid config: {exc}"), "fix the named fields (README, section Configs)", 2
    if "UnknownComponent" in names:  # a KeyError: its message is its first argument
        return one_line(str(exc.args[0] if exc.args else exc)), None, 2
    hint = getattr(exc, "hint", None)
    code = getattr(exc, "exit_code", None)
    for name, (known_code, known_hint) in _KNOWN_FAILURES.items():
        if name in names:
            hint, code = hint or known_hint, code or known_code
            break
    if isinstance(exc, OSError) and exc.filename:
        return one_line(f"{exc.filename}: {exc.strerror or exc}"), hint, code or 1
    message = str(exc) or type(exc).__name__
    if hint is None and code is None:  # not a failure we know: say what it was, and how to see more
        message = f"{type(exc).__name__}: {message}"
        hint = "rerun with `aptforge --debug ...` for the traceback"
    return one_line(message), hint, int(code or 1)


def handled(command: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a command so that any exception becomes the one error line and its exit code."""

    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except (typer.Exit, typer.Abort, click.exceptions.ClickException):
            raise
        except Exception as exc:
            if _options["debug"]:
                raise
            raise typer.Exit(report_error(exc)) from None

    return run


def report_error(exc: BaseException) -> int:
    """Print `exc` as the one error line; return its exit code."""
    message, hint, code = explain(exc)
    line = f"error: {message}" + (f" (hint: {one_line(hint)})" if hint else "")
    sys.stderr.write(line + "\n")
    sys.stderr.flush()
    return code


@app.command()
@handled
def build(
    config: Annotated[Path, typer.Argument(help="Build config YAML (e.g. configs/swe_issue_fix.yaml).")],
    input: Annotated[
        list[Path] | None,
        typer.Option("--input", help="Raw trajectory files/folders (replace the config's sources)."),
    ] = None,
    reports: Annotated[
        list[Path] | None,
        typer.Option("--reports", help="Harness report files/folders (replace the config's)."),
    ] = None,
    out_dir: Annotated[
        Path | None, typer.Option("--out", help="Output root (default: the config's out_dir).")
    ] = None,
    generator: Annotated[
        str | None, typer.Option("--generator", help="Distractor generator name (default: the config's).")
    ] = None,
) -> None:
    """Build benchmark candidates from raw trajectories (runs the Prefect flow `build-benchmark`)."""
    from flows import runtime
    from flows.config import check_components, load_config

    with runtime.stop_on_signals(_say_stopping):
        cfg = load_config(config, inputs=input, reports=reports, out_dir=out_dir, generator=generator)
        check_components(cfg, config)  # everything named must exist before any stage runs
        _quiet_prefect()
        from flows.build import run_build
        from flows.progress import progress_bars

        runtime.start_reaper()  # Prefect's server and Dask workers die with this process

        with progress_bars(err, transient=True) as progress:

            def work() -> dict[str, Any]:
                runtime.start_local_server(_say)
                return run_build(cfg, progress)

            report = runtime.run_in_worker(work)
    print_summary(report)


def _start_prefect() -> None:
    """The reaper (children die with the CLI), then Prefect's local server with a generous start-up time."""
    from flows import runtime

    runtime.start_reaper()
    runtime.start_local_server(_say)


def _say(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def _say_stopping(signum: int) -> None:
    import signal

    sys.stderr.write(
        f"stopped by {signal.Signals(signum).name}: files already written are complete; "
        "the next run resumes from the finished shards\n"
    )


def print_summary(report: BuildReport) -> None:
    """A readable end-of-build summary."""
    c = report.counts
    table = Table(
        title=f"aptforge build: {report.scenario} {report.version} (generator: {report.generator})",
        show_header=False,
        title_justify="left",
    )
    table.add_column(style="bold")
    table.add_column()
    table.add_row("input files", str(c.input_files))
    table.add_row("trajectories read", f"{c.trajectories_read}  (labels: {_fmt(report.labels)})")
    table.add_row("kept (successful)", str(c.kept))
    table.add_row("dropped", f"{c.dropped}  {_fmt(report.dropped_by_reason)}")
    table.add_row("questions", f"{c.questions}  {_fmt(report.questions_by_task)}")
    table.add_row("quarantined", f"{c.quarantined}  {_fmt(report.problems_by_reason)}")
    flags = report.quality.flags
    table.add_row(
        "baselines", ("[bold red]FLAGGED[/] " + _fmt(flags)) if flags else "every task within its bounds"
    )
    table.add_row("time (s)", _fmt(report.timings_s))
    if report.llm is not None:
        llm = report.llm
        for task, models in llm.by_task.items():  # LLM tokens and cost
            for model, u in models.items():
                table.add_row(
                    f"llm {task} {model}",
                    f"in={u.tokens_in} out={u.tokens_out} ${u.cost_usd:.4f}  "
                    f"requests={u.requests} cache_hits={u.cache_hits} failures={u.failures}",
                )
        cap = "" if llm.budget_usd is None else f" of ${llm.budget_usd:g}"
        cap += " (budget exhausted)" if llm.budget_exhausted else ""
        unpriced = f"  unpriced: {', '.join(llm.unpriced_models)}" if llm.unpriced_models else ""
        table.add_row("llm spent", f"${llm.spent_usd:.4f}{cap}{unpriced}")
    table.add_row("output", report.output_dir)
    if report.reused:
        table.add_row("reused", "nothing changed since the last build of this version: its outputs stand")
    if report.report_html:
        table.add_row("report", report.report_html)
    out.print(table)


def _fmt(counts: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in counts.items()) or "-"


@app.command()
@handled
def inspect(
    paths: Annotated[list[Path], typer.Argument(help="Trajectory files or folders (searched recursively).")],
    reports: Annotated[
        list[Path] | None, typer.Option("--reports", help="Harness report files/folders.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line.")] = False,
) -> None:
    """One line per trajectory: file, reader, instance id, steps, success label and deciding signal."""
    from extractors.discovery import discover_readers
    from extractors.ingest.bundles import scan_run_inputs
    from extractors.ingest.records import find_inputs
    from extractors.labels.reports import load_reports
    from flows import stages

    report_files = {str(f) for f in find_inputs([str(r) for r in reports or []])}
    scans = [(p, scan_run_inputs([str(p)])) for p in paths]
    files = [(str(f), None, str(p)) for p, scan in scans for f in scan.files if str(f) not in report_files]
    readers = discover_readers()
    result = stages.read_stage(readers, files)
    verdicts = load_reports([str(r) for r in reports or []])
    keep = stages.label_and_keep(
        result.trajectories,
        verdicts.found,
        result.verdicts,
        frozenset(cls.kind for cls in readers.values()),  # every kind a reader produces
        keep_unknown=True,
        golds=result.golds,
    )
    labelled = keep.labelled
    rows = [
        {
            "file": t.source.file + (f":{t.source.line}" if t.source.line else ""),
            "reader": t.source.format,
            "instance_id": t.source.instance_id,
            "steps": len(t.steps),
            "label": t.outcome.label,
            "signal": t.outcome.signal,
            "reason": t.outcome.reason,
        }
        for t in labelled
    ]
    problems = [q for _, scan in scans for q in scan.problems] + result.problems + verdicts.problems
    problems += keep.problems
    if as_json:
        for row in rows:
            sys.stdout.write(json.dumps(row, ensure_ascii=False) + "\n")
        for p in problems:
            sys.stdout.write(json.dumps({"problem": p.model_dump()}, ensure_ascii=False) + "\n")
        return
    cols = ("file", "reader", "instance_id", "steps", "label", "signal")
    cells = [[_display_path(r["file"]) if c == "file" else str(r[c]) for c in cols] for r in rows]
    widths = [max([len(c)] + [len(line[i]) for line in cells]) for i, c in enumerate(cols)]
    sys.stdout.write("  ".join(c.upper().ljust(w) for c, w in zip(cols, widths, strict=True)).rstrip() + "\n")
    for line in cells:
        sys.stdout.write("  ".join(v.ljust(w) for v, w in zip(line, widths, strict=True)).rstrip() + "\n")
    labels = {k: sum(1 for r in rows if r["label"] == k) for k in ("success", "failure", "unknown")}
    err.print(
        f"{len(rows)} trajectories: "
        + ", ".join(f"{k}={v}" for k, v in labels.items())
        + f"; {len(problems)} quarantined",
        highlight=False,
    )
    for p in problems:
        err.print(
            f"quarantine {_display_path(p.where)}: {p.reason}: {p.detail}", highlight=False, soft_wrap=True
        )


def _display_path(path: str) -> str:
    """Paths relative to the working directory when they are below it."""
    cwd = str(Path.cwd()) + os.sep
    return path[len(cwd) :] if path.startswith(cwd) else path


@contextmanager
def _flow_failures_unlogged(quiet: bool) -> Iterator[None]:
    """Keep Prefect from logging a failed run's traceback: the command prints the one-line reason itself."""
    loggers = [logging.getLogger(n) for n in ("prefect.flow_runs", "prefect.task_runs")] if quiet else []
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)


@app.command()
@handled
def publish(
    config: Annotated[Path, typer.Argument(help="The build config whose verified items to release.")],
    repo: Annotated[
        str | None,
        typer.Option("--repo", help="Hub dataset repo id (default: the config's publish.repo_id)."),
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the plan; write nothing.")] = False,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Publish even if the Hub repo moved since the last publish (overrides only that guard).",
        ),
    ] = False,
    debug: Annotated[
        bool, typer.Option("--debug", help="On a handled error, show Prefect's log and the traceback.")
    ] = False,
) -> None:
    """Release accepted items: Parquet + dataset card + APTBench JSONL + lm-eval YAML, one Hub commit."""
    from flows.config import load_config

    _options["debug"] = _options["debug"] or debug

    cfg = load_config(config)
    _quiet_prefect()
    _start_prefect()
    from huggingface_hub.errors import HfHubHTTPError

    from flows.hub import HubRefused, hub_error_line
    from flows.publish import PublishRefused
    from flows.publish import publish as publish_flow

    try:
        with _flow_failures_unlogged(not debug):
            result = publish_flow(cfg, repo_id=repo, dry_run=dry_run, force=force)
    except (PublishRefused, HubRefused) as exc:
        if debug:
            raise
        fail(f"publish refused: {exc}")
    except HfHubHTTPError as exc:
        if debug:
            raise
        fail(f"hub error: {hub_error_line(exc)}")
    plan = result["plan"]
    table = Table(
        title=f"aptforge publish: {cfg.scenario} {plan['version']}" + (" (dry run)" if dry_run else ""),
        title_justify="left",
    )
    for col in ("config", "items", "added", "removed", "changed"):
        table.add_column(col)
    for name, n in plan["counts"].items():
        c = plan["changes"].get(name, {})
        table.add_row(
            name, str(n), str(c.get("added", 0)), str(c.get("removed", 0)), str(c.get("changed", 0))
        )
    out.print(table)
    if dry_run:
        for path, size in plan["files"].items():
            out.print(f"  would write {path} ({size} bytes)", highlight=False)
    out.print(
        f"files: {len(plan['files'])} ({sum(plan['files'].values())} bytes); excluded: {_fmt(plan['excluded'])}",
        highlight=False,
    )
    out.print(
        f"release folder: {plan['release_dir']}" + (" (not written)" if dry_run else ""), highlight=False
    )
    pushed = result.get("pushed")
    if pushed:
        if pushed["overrode"]:
            err.print(f"[bold yellow]warning:[/] {pushed['overrode']}", highlight=False)
        what = (
            f"commit {pushed['commit'][:12]} ({len(pushed['changed'])} file(s) changed)"
            if pushed["created_commit"]
            else "no new commit (identical content)"
        )
        tag = f"tag {pushed['tag']} at {pushed['tag_commit'][:12]}"
        if pushed["created_tag"]:
            tag += " (new)"
        elif pushed["tag_commit"] != pushed["head"]:
            tag += f" (kept: it already names this content; head is {pushed['head'][:12]})"
        out.print(f"hub: {pushed['repo_id']} {what}, {tag}", highlight=False)
    elif plan["repo_id"] and dry_run:
        out.print(
            f"hub: would push to {plan['repo_id']} as one commit, tag {plan['version']}", highlight=False
        )


@app.command()
@handled
def audit(
    paths: Annotated[
        list[Path], typer.Argument(help="APTBench JSONL, aptforge candidate/published Parquet, or folders.")
    ],
    as_json: Annotated[bool, typer.Option("--json", help="Print the audit as one JSON document.")] = False,
    config: Annotated[
        Path | None, typer.Option("--config", help="Build config whose `quality` bounds/overrides apply.")
    ] = None,
    strict: Annotated[
        bool, typer.Option("--strict", help="Exit 1 when a task is flagged and not overridden.")
    ] = False,
) -> None:
    """Per task: items, options, chance, each model-free baseline against its bound, position chi², gate findings."""
    from extractors.discovery import discover_extractors
    from flows.audit_files import audit_paths, render_audit
    from flows.config import load_config
    from generators.quality.audit import audit_json

    quality = load_config(config).quality if config is not None else None
    discover_extractors()  # row layouts of the known tasks, from the scenarios' TaskSpecs
    result = audit_paths(paths, quality)
    data = audit_json(result, quality)
    if as_json:
        sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=2) + "\n")
    else:
        render_audit(data, out)
    if not result.tasks:
        fail("no benchmark rows found in " + ", ".join(map(str, paths)), code=2)
    if strict and any(not t["publishable"] for t in data["tasks"].values()):
        raise typer.Exit(1)


app.command("review")(handled(review_command))


@app.command()
@handled
def serve(
    config_dir: Annotated[
        Path, typer.Option("--configs", help="Folder of build configs; those with a `schedule` are served.")
    ] = Path("configs"),
    limit: Annotated[int | None, typer.Option("--limit", help="At most this many concurrent runs.")] = None,
) -> None:
    """Serve scheduled rebuilds: one Prefect deployment per config with a `schedule` (blocks)."""
    _quiet_prefect()
    from flows.config import ConfigError
    from flows.deployments import serve_configs

    try:
        serve_configs(config_dir, limit=limit)
    except ConfigError as exc:
        fail(f"nothing to serve: {exc}", code=2)


app.command("eval")(handled(eval_command))
app.command("validity")(handled(validity_command))


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
