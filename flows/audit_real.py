"""`make audit-real`: build every scenario from the real runs in ../shared and print the validity table.

Each `configs/real/*.yaml` is an ordinary build config whose sources name `$APTFORGE_SHARED`
(default: `../shared` beside the checkout). Every config is built into one output folder (a
temporary one unless `--out` is given), and the per-task validity rows of the builds' reports
(the `validity` section of each `BuildReport`) become one Markdown table, printed and
written to `bench/validity.md` so the numbers are seen in review.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from flows.io import write_text
from schemas.report import BuildReport

ROOT = Path(__file__).resolve().parent.parent


def validity_rows(report: BuildReport) -> list[dict[str, Any]]:
    """One row per MCQ task of a build report: items, chance, the worst baseline and what exceeds its bound."""
    rows = []
    for t in report.validity.tasks if report.validity else []:
        base = {b.name: b.accuracy for b in t.baselines}
        bounds = {b.name: b.bound for b in t.baselines}
        worst = max(base, key=lambda b: base[b] - bounds[b]) if base else ""
        rows.append(
            {
                "build": f"{report.scenario}/{report.version}",
                "task": t.task,
                "items": t.items,
                "chance": t.chance,
                "bound": min(bounds.values()) if bounds else None,
                "worst": worst,
                "worst_acc": base.get(worst),
                "worst_bound": bounds.get(worst),
                "exceeded": ", ".join(f"{b.name} {b.accuracy:.2f}" for b in t.baselines if not b.passed)
                or "-",
                "position_p": t.positions.p_value,
                "af_replaced": t.adversarial.replaced,
                "af_dropped": t.adversarial.dropped,
                "sources": ", ".join(f"{k} {n}" for k, n in t.sources.items()) or "-",
                "same_file": t.patch_overlap,
                "baselines": base,
                "bounds": bounds,
            }
        )
    return rows


def _fmt(x: Any, digits: int = 2) -> str:
    if x is None or (isinstance(x, float) and pd.isna(x)):
        return "-"
    return f"{x:.{digits}f}" if isinstance(x, float) else str(x)


def _md(frame: pd.DataFrame) -> str:
    head = "| " + " | ".join(map(str, frame.columns)) + " |"
    rule = "|" + "|".join("---" for _ in frame.columns) + "|"
    body = ["| " + " | ".join(_fmt(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join([head, rule, *body])


def validity_markdown(rows: Sequence[Mapping[str, Any]], timings: Mapping[str, Mapping[str, float]]) -> str:
    """The validity table (one line per task) and every baseline of every task against its bound."""
    if not rows:
        return "# Validity of the real builds\n\nNo MCQ task was built.\n"
    frame = pd.DataFrame(rows)
    frame["ok"] = frame["exceeded"].eq("-").map({True: "yes", False: "NO"})
    frame["ok"] = frame["ok"].where(frame["items"] >= 20, frame["ok"] + " (<20 items)")
    summary = frame[
        [
            "build",
            "task",
            "items",
            "chance",
            "bound",
            "worst",
            "worst_acc",
            "exceeded",
            "position_p",
            "af_replaced",
            "af_dropped",
            "sources",
            "same_file",
            "ok",
        ]
    ]
    detail = pd.DataFrame(
        {
            f"{r['build']} {r['task']}": {
                b: f"{a:.2f}/{r['bounds'][b]:.2f}" for b, a in r["baselines"].items()
            }
            for r in rows
        }
    )
    detail.insert(0, "baseline", detail.index)
    stage_rows = pd.DataFrame(
        [
            {"build": b, **{k: v for k, v in t.items() if k in ("generate", "adversarial", "check")}}
            for b, t in timings.items()
        ]
    )
    failing = frame[(frame["items"] >= 20) & frame["exceeded"].ne("-")]
    lines = [
        "# Validity of the real builds (`make audit-real`)",
        "",
        "Every MCQ task built from the real runs in `../shared` (configs/real/*.yaml), each baseline's",
        "accuracy against its bound (chance + 10 points; wider below 100 items by the binomial allowance).",
        "`worst` is the baseline closest to (or furthest over) its bound. `af_*`: what adversarial",
        "filtering replaced and dropped. `sources`: the shown distractors by source (`rule`: made by a rule",
        "from this run; `same_run` / `same_instance`: real steps of this run / of a failed run of the same",
        "instance; `other_run`; `llm`). `same_file`: where golds are diffs, the share of distractors that",
        "touch a file the gold touches. Acceptance: every task with >= 20 items has `exceeded` = `-`.",
        "",
        _md(summary),
        "",
        f"Tasks with >= 20 items over a bound: {len(failing)}.",
        "",
        "## Every baseline (accuracy / bound)",
        "",
        _md(detail),
        "",
        "## Stage timings (seconds)",
        "",
        _md(stage_rows) if len(stage_rows) else "-",
        "",
    ]
    return "\n".join(lines)


def audit_real(
    configs: Sequence[Path], out_dir: Path
) -> tuple[list[dict[str, Any]], dict[str, dict[str, float]]]:
    """Build every config into `out_dir`; the validity rows and stage timings of each build."""
    from flows.build import run_build
    from flows.config import load_config

    rows: list[dict[str, Any]] = []
    timings: dict[str, dict[str, float]] = {}
    for path in configs:
        config = load_config(path, out_dir=out_dir)
        started = time.perf_counter()
        report = run_build(config)
        name = f"{report.scenario}/{report.version}"
        timings[name] = {**report.timings_s, "total": round(time.perf_counter() - started, 1)}
        rows += validity_rows(report)
        print(f"built {name} in {timings[name]['total']}s: {report.questions_by_task}", file=sys.stderr)
        if not report.counts.trajectories_read:
            sources = ", ".join(s.path for s in config.sources)
            raise EmptyBuild(f"{path}: no run read from {sources} (see {report.output_dir}/quarantine.jsonl)")
    return rows, timings


class EmptyBuild(RuntimeError):
    """An audit build that read no run: its validity would be measured on nothing."""


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", type=Path, default=ROOT / "configs" / "real")
    parser.add_argument("--out", type=Path, default=None, help="output root (default: a temporary folder)")
    parser.add_argument("--markdown", type=Path, default=ROOT / "bench" / "validity.md")
    args = parser.parse_args(argv)
    os.environ.setdefault("APTFORGE_SHARED", str(ROOT.parent / "shared"))
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")  # a busy machine
    if not Path(os.environ["APTFORGE_SHARED"]).is_dir():
        print(f"no shared folder at {os.environ['APTFORGE_SHARED']} (set APTFORGE_SHARED)", file=sys.stderr)
        return 2
    configs = sorted(args.configs.glob("*.yaml"))
    with tempfile.TemporaryDirectory(prefix="aptforge-audit-real-") as tmp:
        try:
            rows, timings = audit_real(configs, args.out or Path(tmp))
        except EmptyBuild as exc:
            print(f"audit-real: {exc}", file=sys.stderr)
            return 2
    text = validity_markdown(rows, timings)
    write_text(args.markdown, text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
