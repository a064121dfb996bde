"""The build report people look at: `report.html` plus PNG charts, and a Prefect artifact.

Charts (matplotlib's object API on the Agg canvas: no pyplot global state, safe in worker
threads, nothing configured at import): gold-position histogram per task, gold vs distractor
option lengths, baselines against chance and bound, trajectory and context lengths, drop and
problem reasons. Every file is written atomically into the build output folder; all text from
the data is HTML-escaped (it is untrusted: trajectories hold web pages and code).
"""

from __future__ import annotations

import html
import re
from array import array
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from flows.io import atomic_path, write_text
from generators.quality.gates import context_text
from schemas import LETTERS
from schemas.report import BuildReport, QualityReport
from schemas.tasks import find_spec
from schemas.validity import ValidityReport


class Chart(NamedTuple):
    """One rendered chart."""

    file: str
    """Path relative to the report (`charts/<name>.png`)."""
    title: str


def _figure(width: float = 8.0, height: float = 3.6) -> Any:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _save(fig: Any, target: Path) -> None:
    with atomic_path(target) as tmp:
        fig.savefig(tmp, format="png", metadata={"Software": None})


def option_table(rows_by_task: Mapping[str, Sequence[Mapping[str, Any]]]) -> Any:
    """One pandas row per option of every MCQ item: task, position, option count, gold flag, length.

    Built column by column, one task's rows at a time, as machine integers (a task's name once, as a
    category): at 100,000 runs a build shows about a million options."""
    import numpy as np
    import pandas as pd

    tasks: list[str] = []
    code, position, n_options, is_gold, length = (array("q") for _ in range(5))
    for task, rows in rows_by_task.items():
        tasks.append(task)
        for r in rows:
            options = r.get("options")
            if not options:
                continue
            n, gold = len(options), r["gold_index"]
            for i, option in enumerate(options):
                code.append(len(tasks) - 1)
                position.append(i)
                n_options.append(n)
                is_gold.append(i == gold)
                length.append(len(option))
    return pd.DataFrame(
        {
            "task": pd.Categorical.from_codes(np.asarray(code, dtype=np.int64), categories=tasks),
            "position": np.asarray(position, dtype=np.int64),
            "n_options": np.asarray(n_options, dtype=np.int64),
            "is_gold": np.asarray(is_gold, dtype=bool),
            "length": np.asarray(length, dtype=np.int64),
        }
    )


def _integer_ticks(axis: Any) -> None:
    from matplotlib.ticker import MaxNLocator

    axis.set_major_locator(MaxNLocator(integer=True))


def _empty(ax: Any, text: str = "no MCQ items") -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes)
    ax.set_axis_off()


def chart_positions(fig: Any, options: Any) -> None:
    """Gold-position histogram per MCQ task, with the uniform expectation (`options`: `option_table`)."""
    gold = options.loc[options["is_gold"]]
    tasks = list(dict.fromkeys(gold["task"]))
    axes = fig.subplots(1, max(1, len(tasks)), squeeze=False)[0]
    if not tasks:
        _empty(axes[0])
    for ax, task in zip(axes, tasks, strict=False):
        of_task = gold[gold["task"] == task]
        n = int(of_task["n_options"].max())
        counts = of_task["position"].value_counts().reindex(range(n), fill_value=0)
        ax.bar(list(LETTERS[:n]), counts.tolist(), color="#4c72b0")
        ax.axhline(len(of_task) / n, color="#c44e52", linestyle="--", label="uniform")
        ax.set_title(f"{task}: gold position")
        ax.set_ylabel("items")
        _integer_ticks(ax.yaxis)
        ax.legend(loc="lower right")


def chart_option_lengths(fig: Any, options: Any) -> None:
    """Gold vs distractor option lengths (characters) per MCQ task (`options`: `option_table`)."""
    tasks = list(dict.fromkeys(options["task"]))
    axes = fig.subplots(1, max(1, len(tasks)), squeeze=False)[0]
    if not tasks:
        _empty(axes[0])
    for ax, task in zip(axes, tasks, strict=False):
        of_task = options[options["task"] == task]
        gold = of_task.loc[of_task["is_gold"], "length"].tolist()
        wrong = of_task.loc[~of_task["is_gold"], "length"].tolist()
        bins = max(5, min(30, len(wrong) // 3))
        ax.hist(
            [gold, wrong],
            bins=bins,
            density=True,
            label=["gold", "distractors"],
            color=["#55a868", "#8172b2"],
        )
        ax.set_title(f"{task}: option length")
        ax.set_xlabel("characters")
        ax.legend()


def chart_baselines(fig: Any, quality: QualityReport) -> None:
    """Each baseline's accuracy per task against chance and its bound."""
    tasks = {t: e for t, e in quality.tasks.items() if e.baselines is not None}
    axes = fig.subplots(1, max(1, len(tasks)), squeeze=False)[0]
    if not tasks:
        _empty(axes[0])
    for ax, (task, e) in zip(axes, tasks.items(), strict=False):
        accuracy, bounds, exceeded = e.baselines or {}, e.bounds or {}, e.exceeded or []
        names = list(accuracy)
        colors = ["#c44e52" if b in exceeded else "#4c72b0" for b in names]
        ax.bar(names, [100 * accuracy[b] for b in names], color=colors)
        ax.scatter(names, [100 * bounds[b] for b in names], marker="_", s=400, color="black", label="bound")
        ax.axhline(100 * (e.chance or 0.0), color="#55a868", linestyle="--", label="chance")
        ax.set_ylim(0, 100)
        ax.set_ylabel("accuracy %")
        ax.set_title(f"{task}: baselines ({e.n_items} items)")
        ax.tick_params(axis="x", labelrotation=30)
        ax.legend(loc="upper right")


def chart_lengths(
    fig: Any, traj_steps: Sequence[int], rows_by_task: Mapping[str, Sequence[Mapping[str, Any]]]
) -> None:
    """Kept trajectories' step counts and each task's context length."""
    left, right = fig.subplots(1, 2)
    if traj_steps:
        left.hist(list(traj_steps), bins=max(5, min(30, len(traj_steps))), color="#4c72b0")
        left.set_title(f"trajectory length ({len(traj_steps)} kept)")
        left.set_xlabel("steps")
        _integer_ticks(left.yaxis)
    else:
        _empty(left, "no trajectories kept")
    contexts = {t: [len(context_text(_shown(r))) for r in rows] for t, rows in rows_by_task.items() if rows}
    if contexts:
        right.hist(list(contexts.values()), bins=15, label=list(contexts), stacked=False)
        right.set_title("context length per item")
        right.set_xlabel("characters")
        right.legend()
    else:
        _empty(right, "no items")


def _shown(row: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = find_spec(str(row.get("scenario")), str(row.get("task")))
    return {k: row[k] for k in spec.field_names if k in row} if spec else row


def chart_reasons(fig: Any, report: BuildReport) -> None:
    """Why trajectories were dropped and which problems were found."""
    left, right = fig.subplots(1, 2)
    for ax, counts, title in (
        (left, report.dropped_by_reason, "dropped trajectories"),
        (right, report.problems_by_reason, "problems by reason"),
    ):
        if not counts:
            _empty(ax, f"no {title}")
            continue
        names = list(counts)
        ax.barh(names, [counts[n] for n in names], color="#dd8452")
        ax.set_title(title)
        ax.invert_yaxis()
        _integer_ticks(ax.xaxis)


def render_charts(
    out_dir: Path,
    report: BuildReport,
    rows_by_task: Mapping[str, Sequence[Mapping[str, Any]]],
    traj_steps: Sequence[int],
) -> list[Chart]:
    """Draw every chart into `<out_dir>/charts/`."""
    options = option_table(rows_by_task)  # read once: both option charts draw from it
    n_tasks = max(1, options["task"].nunique())
    width = max(8.0, 4.2 * n_tasks)
    plan: list[tuple[str, str, Callable[[Any], None]]] = [
        ("gold_positions", "Gold positions", lambda f: chart_positions(f, options)),
        ("option_lengths", "Gold vs distractor length", lambda f: chart_option_lengths(f, options)),
        (
            "baselines",
            "Model-free baselines vs chance",
            lambda f: chart_baselines(f, report.quality),
        ),
        ("lengths", "Trajectory and context lengths", lambda f: chart_lengths(f, traj_steps, rows_by_task)),
        ("reasons", "Drop and problem reasons", lambda f: chart_reasons(f, report)),
    ]
    charts = []
    for name, title, draw in plan:
        fig = _figure(width if name in {"gold_positions", "option_lengths", "baselines"} else 10.0)
        draw(fig)
        _save(fig, out_dir / "charts" / f"{name}.png")
        charts.append(Chart(f"charts/{name}.png", title))
    return charts


def _table(rows: Sequence[Sequence[Any]], head: Sequence[str]) -> str:
    esc = html.escape
    out = ["<table><tr>" + "".join(f"<th>{esc(str(h))}</th>" for h in head) + "</tr>"]
    out += ["<tr>" + "".join(f"<td>{esc(str(c))}</td>" for c in r) + "</tr>" for r in rows]
    return "\n".join(out) + "</table>"


def _quality_rows(quality: QualityReport) -> list[list[Any]]:
    rows = []
    for task, e in quality.tasks.items():
        if e.baselines is None:
            rows.append([task, e.items, "-", "-", "-", "-", "completion (no baselines)"])
            continue
        accs = ", ".join(f"{b} {v:.1%}" for b, v in e.baselines.items())
        state = ("FLAGGED: " + e.why) if e.flagged else "ok"
        if e.flagged and e.override:
            state += f" (overridden: {e.override})"
        rows.append(
            [
                task,
                e.n_items,
                f"{e.chance or 0.0:.1%}",
                accs,
                f"{e.position_chi2 or 0.0:.2f} / {e.position_dof} / p={e.position_p or 0.0:.3g}",
                ", ".join(f"{k}={v}" for k, v in e.findings.items()) or "-",
                state,
            ]
        )
    return rows


def _validity_html(v: ValidityReport | None) -> list[str]:
    """The validity section: per task every baseline against its bound, positions, lengths, sources, samples."""
    if v is None:
        return []
    esc = html.escape
    cheaper = "less" if v.adversarial_seconds < v.generate_seconds else "MORE"
    parts = [
        "<h2 id='validity'>Validity</h2>",
        f"<p>adversarial filtering {v.adversarial_seconds:.2f} s, generate {v.generate_seconds:.2f} s "
        f"(filtering costs {cheaper} than generate)</p>",
        _table(
            [
                [
                    t.task,
                    t.items,
                    f"{t.chance:.1%}",
                    "pass" if t.passed else "FAIL: " + ", ".join(b.name for b in t.baselines if not b.passed),
                    f"{t.positions.chi2:.2f} / {t.positions.dof} / p={t.positions.p_value:.3g}",
                    (", ".join(f"{k} {n}" for k, n in t.sources.items()) or "-")
                    + (f"; {t.patch_overlap:.0%} touch a gold file" if t.patch_overlap is not None else ""),
                    f"{t.adversarial.candidates_scored} scored, {t.adversarial.replaced} replaced, "
                    f"{t.adversarial.dropped} dropped"
                    + (
                        f", {t.adversarial.left_to_gates} left to the gates"
                        if t.adversarial.left_to_gates
                        else ""
                    ),
                ]
                for t in v.tasks
            ],
            [
                "task",
                "items",
                "chance",
                "baselines",
                "position chi² / dof / p",
                "distractor sources",
                "filtering",
            ],
        ),
    ]
    for t in v.tasks:
        parts.append(f"<h3 class='validity-task' data-task='{esc(t.task)}'>{esc(t.task)}</h3>")
        parts.append(
            _table(
                [
                    [b.name, f"{b.accuracy:.1%}", f"{b.bound:.1%}", "pass" if b.passed else "FAIL"]
                    for b in t.baselines
                ],
                ["baseline", "accuracy", "bound", "state"],
            )
        )
        parts.append(
            _table(
                [[letter, n] for letter, n in t.positions.counts.items()],
                ["gold position", "items"],
            )
        )
        ln = t.lengths
        parts.append(
            _table(
                [
                    [who, s.n, s.mean, s.median, s.p10, s.p90]
                    for who, s in (("gold", ln.gold), ("distractors", ln.distractors))
                ]
                + [
                    [
                        "gold is the longest / shortest",
                        f"{ln.gold_longest:.1%} / {ln.gold_shortest:.1%}",
                        "",
                        "",
                        "",
                        "",
                    ]
                ],
                ["option length (chars)", "n", "mean", "median", "p10", "p90"],
            )
        )
        for item in t.samples:
            options = "".join(
                f"<li><b>({esc(o.letter)})</b>{' <b>[gold]</b>' if o.gold else f' <i>{esc(o.origin)}</i>'}"
                f"<pre>{esc(o.text)}</pre></li>"
                for o in item.options
            )
            parts.append(
                f"<details class='sample' data-item='{esc(item.item_id)}'><summary>{esc(item.item_id)} "
                f"({item.context_chars} context chars)</summary><pre>{esc(item.context_tail)}</pre>"
                f"<ul>{options}</ul></details>"
            )
    return parts


_CSS = (
    "body{font-family:sans-serif;margin:2em;max-width:1200px}table{border-collapse:collapse;margin:1em 0}"
    "td,th{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}th{background:#f3f3f3}"
    "img{max-width:100%;border:1px solid #eee;margin:.5em 0}pre{white-space:pre-wrap;max-height:20em;overflow:auto}"
)


def render_html(report: BuildReport, charts: Sequence[Chart]) -> str:
    """The report page (all data text escaped)."""
    esc = html.escape
    title = f"aptforge build report: {report.scenario} {report.version}"
    parts = [
        f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>{esc(title)}</title>",
        f"<style>{_CSS}</style></head><body><h1>{esc(title)}</h1>",
        f"<p>generator <b>{esc(report.generator)}</b>, seed {esc(str(report.seed))}, "
        f"config {esc(report.config_hash)}</p>",
        "<h2>Counts</h2>",
        _table(list(report.counts.model_dump().items()), ["what", "count"]),
        "<h2>Quality by task</h2>",
        _table(
            _quality_rows(report.quality),
            ["task", "items", "chance", "baselines", "position chi² / dof / p", "findings", "state"],
        ),
    ]
    parts += _validity_html(report.validity)
    for chart in charts:
        parts.append(f"<h2>{esc(chart.title)}</h2><img src='{esc(chart.file)}' alt='{esc(chart.title)}'>")
    parts.append("<h2>Dropped and problems</h2>")
    parts.append(_table(list(report.dropped_by_reason.items()), ["dropped because", "trajectories"]))
    parts.append(_table(list(report.problems_by_reason.items()), ["problem", "count"]))
    parts.append("</body></html>\n")
    return "\n".join(parts)


def write_build_report(
    out_dir: str | Path,
    report: BuildReport,
    rows_by_task: Mapping[str, Sequence[Mapping[str, Any]]],
    traj_steps: Sequence[int],
) -> Path:
    """Write `report.html` and `charts/*.png` into the build output folder; returns the HTML path."""
    out = Path(out_dir)
    charts = render_charts(out, report, rows_by_task, traj_steps)
    target = out / "report.html"
    write_text(target, render_html(report, charts))
    return target


def markdown_summary(report: BuildReport, html_path: str | Path) -> str:
    """The Prefect artifact: per-task quality as a Markdown table and where the full report is."""
    lines = [
        f"# aptforge build {report.scenario} {report.version}",
        "",
        "| task | items | chance | baselines | position chi² (p) | state |",
        "|---|---|---|---|---|---|",
    ]
    for row in _quality_rows(report.quality):
        task, items, chance, accs, chi, _findings, state = (str(c).replace("|", "/") for c in row)
        lines.append(f"| {task} | {items} | {chance} | {accs} | {chi} | {state} |")
    lines += ["", f"Full report with charts: `{Path(html_path).resolve()}`"]
    return "\n".join(lines) + "\n"


def attach_report_artifact(report: BuildReport, html_path: str | Path) -> None:
    """Attach the summary to the current Prefect flow run (call inside a flow run)."""
    from prefect.artifacts import create_link_artifact, create_markdown_artifact

    key = re.sub(r"[^a-z0-9-]+", "-", f"build-report-{report.scenario}-{report.version}".lower()).strip("-")
    create_markdown_artifact(
        markdown=markdown_summary(report, html_path),
        key=key,
        description="aptforge build quality report (baselines, positions, findings)",
    )
    create_link_artifact(
        link=Path(html_path).resolve().as_uri(),
        link_text="report.html (with charts)",
        key=f"{key}-html",
        description="The full HTML build report in the output folder",
    )
