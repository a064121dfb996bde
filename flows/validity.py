"""`aptforge validity`: does the benchmark predict agent results? Correlate scorecards with downstream scores.

Why: APTBench's claim is that a base model's score predicts how well it does as an agent (the paper
reports Pearson r 0.69-0.87 against SWE-bench Verified over 8 models). A release is only useful if it
keeps that property. Input: `aptforge eval` scorecards (one per model) and a CSV of downstream
results (`model, benchmark, score`, e.g. SWE-bench Verified resolved rate). A small mapping table
(`configs/validity.yaml`: downstream benchmark -> the aptforge scenarios it measures) says what to
compare; then for every benchmark and each of its scenarios (mean of the scenario's task scores)
and tasks: Pearson and Spearman (average ranks for ties) over the models present on both sides, a
95% percentile bootstrap CI over models (resamples with no spread are skipped), a scatter plot and
a plain verdict sentence.
"""

from __future__ import annotations

import csv
import html
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
import yaml

from flows.io import atomic_path, write_json, write_text

BOOTSTRAP = 2000


class Correlation(NamedTuple):
    """One correlation with its bootstrap interval."""

    r: float
    lo: float
    hi: float


def pearson(x: Sequence[float], y: Sequence[float]) -> float:
    """Pearson's r (nan when either side has no spread)."""
    a, b = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    a, b = a - a.mean(), b - b.mean()
    denom = float(np.sqrt((a * a).sum() * (b * b).sum()))
    return float(np.clip((a * b).sum() / denom, -1.0, 1.0)) if denom > 0 else float("nan")


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman's rho: Pearson's r of the average ranks."""
    return pearson(pd.Series(x).rank().to_numpy(), pd.Series(y).rank().to_numpy())


def bootstrap(
    x: Sequence[float], y: Sequence[float], stat: Any, seed: int = 0, n: int = BOOTSTRAP
) -> Correlation:
    """`stat(x, y)` and its 95% percentile interval over resampled models."""
    a, b = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    r = stat(a, b)
    rng = np.random.default_rng(seed)
    values = []
    for idx in rng.integers(0, a.size, size=(n, a.size)):
        v = stat(a[idx], b[idx])
        if not np.isnan(v):
            values.append(v)
    if not values:
        return Correlation(r, float("nan"), float("nan"))
    lo, hi = np.percentile(values, [2.5, 97.5])
    return Correlation(r, float(lo), float(hi))


def load_mapping(path: Path) -> dict[str, list[str]]:
    """Downstream benchmark -> aptforge scenarios.

    Raises:
        ValueError: the file is not a mapping of names to lists of names.
    """
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    if not isinstance(data, dict) or not all(
        isinstance(v, list) and all(isinstance(s, str) for s in v) for v in data.values()
    ):
        raise ValueError(f"{path}: expected `benchmark: [scenario, ...]` entries")
    return {str(k): list(v) for k, v in data.items()}


def load_downstream(path: Path) -> pd.DataFrame:
    """The downstream CSV (`model, benchmark, score`).

    Raises:
        ValueError: a missing column or a score that is not a number, naming the line.
    """
    with path.open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        missing = {"model", "benchmark", "score"} - set(reader.fieldnames or [])
        if missing:
            raise ValueError(f"{path}:1: missing column(s) {', '.join(sorted(missing))}")
        rows = []
        for line, rec in enumerate(reader, start=2):
            try:
                rows.append(
                    {"model": rec["model"], "benchmark": rec["benchmark"], "score": float(rec["score"])}
                )
            except (TypeError, ValueError):
                raise ValueError(f"{path}:{line}: score {rec.get('score')!r} is not a number") from None
    return pd.DataFrame(rows, columns=["model", "benchmark", "score"])


def scorecard_table(cards: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """One row per (model, task) of the scorecards: scenario, task, score, release version."""
    rows = [
        {
            "model": c["model"],
            "release": f"{c['release']['name']} {c['release']['version']}".strip(),
            "scenario": t.get("scenario", ""),
            "task": name,
            "score": float(t["score"]),
        }
        for c in cards
        for name, t in c["tasks"].items()
    ]
    return pd.DataFrame(rows, columns=["model", "release", "scenario", "task", "score"])


def strength(r: float) -> str:
    """Words for |r| (Cohen's rough bands)."""
    a = abs(r)
    return "strongly" if a >= 0.7 else "moderately" if a >= 0.4 else "weakly" if a >= 0.1 else "not"


def verdict(subject: str, benchmark: str, p: Correlation, n: int) -> str:
    """The plain sentence."""
    if np.isnan(p.r):
        return f"{subject} cannot be correlated with {benchmark}: no spread over {n} models"
    sure = (
        "the CI excludes 0"
        if not np.isnan(p.lo) and (p.lo > 0 or p.hi < 0)
        else "the CI includes 0: not established"
    )
    sign = "" if p.r >= 0 else "negatively "
    return (
        f"{subject} {sign}{strength(p.r)} correlates r = {p.r:.2f} [{p.lo:.2f}, {p.hi:.2f}] with "
        f"{benchmark} over {n} models ({sure})"
    )


def validity(
    cards: Sequence[Mapping[str, Any]],
    downstream: pd.DataFrame,
    mapping: Mapping[str, Sequence[str]],
    seed: int = 0,
) -> dict[str, Any]:
    """Every correlation the mapping asks for (pure)."""
    ours = scorecard_table(cards)
    release = ", ".join(sorted(set(ours["release"]))) or "the benchmark"
    results = []
    for benchmark, scenarios in mapping.items():
        down = downstream[downstream["benchmark"] == benchmark].groupby("model")["score"].mean()
        for scenario in scenarios:
            part = ours[ours["scenario"] == scenario]
            if part.empty:
                continue
            subjects = [("scenario", scenario, part.groupby("model")["score"].mean())]
            subjects += [
                ("task", task, g.groupby("model")["score"].mean()) for task, g in sorted(part.groupby("task"))
            ]
            for level, name, x in subjects:
                both = pd.concat([x.rename("x"), down.rename("y")], axis=1, join="inner").sort_index()
                n = len(both)
                if n < 3:
                    continue
                p = bootstrap(both["x"], both["y"], pearson, seed)
                s = bootstrap(both["x"], both["y"], spearman, seed)
                results.append(
                    {
                        "benchmark": benchmark,
                        "level": level,
                        "name": name,
                        "n_models": n,
                        "models": list(both.index),
                        "x": [round(v, 6) for v in both["x"]],
                        "y": [round(v, 6) for v in both["y"]],
                        "pearson": p._asdict(),
                        "spearman": s._asdict(),
                        "verdict": verdict(f"{release} {name}", benchmark, p, n),
                    }
                )
    return {"release": release, "mapping": {k: list(v) for k, v in mapping.items()}, "results": results}


def _scatter(result: Mapping[str, Any], target: Path) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(4.8, 3.8), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.scatter(result["x"], result["y"], color="#4c72b0")
    for m, x, y in zip(result["models"], result["x"], result["y"], strict=True):
        ax.annotate(m, (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points")
    if len(set(result["x"])) > 1:
        k, c = np.polyfit(result["x"], result["y"], 1)
        xs = np.linspace(min(result["x"]), max(result["x"]), 10)
        ax.plot(xs, k * xs + c, color="gray", linestyle="--")
    ax.set_xlabel(f"aptforge {result['level']} {result['name']}")
    ax.set_ylabel(result["benchmark"])
    ax.set_title(f"r = {result['pearson']['r']:.2f}, rho = {result['spearman']['r']:.2f}", fontsize=9)
    with atomic_path(target) as tmp:
        fig.savefig(tmp, format="png", metadata={"Software": None})


def write_validity(out: Path, report: Mapping[str, Any]) -> Path:
    """`validity.json`, `validity.html` and one scatter per correlation."""
    e = html.escape
    rows = []
    for i, r in enumerate(report["results"]):
        chart = f"charts/validity-{i}.png"
        _scatter(r, out / chart)
        p, s = r["pearson"], r["spearman"]
        rows.append(
            f"<tr><td>{e(r['benchmark'])}</td><td>{e(r['level'])}</td><td>{e(r['name'])}</td>"
            f"<td>{r['n_models']}</td><td>{p['r']:.2f} [{p['lo']:.2f}, {p['hi']:.2f}]</td>"
            f"<td>{s['r']:.2f} [{s['lo']:.2f}, {s['hi']:.2f}]</td><td>{e(r['verdict'])}</td>"
            f"<td><img src='{chart}' width='320'></td></tr>"
        )
    mapping = "".join(
        f"<tr><td>{e(b)}</td><td>{e(', '.join(s))}</td></tr>" for b, s in report["mapping"].items()
    )
    page = (
        "<!doctype html><html><head><meta charset='utf-8'><title>aptforge validity</title>"
        "<style>body{font-family:sans-serif;margin:2em}td,th{border:1px solid #ccc;padding:4px 8px}"
        "table{border-collapse:collapse}</style></head><body>"
        f"<h1>Validity of {e(report['release'])}</h1><h2>Mapping</h2><table><tr><th>downstream</th>"
        f"<th>scenarios</th></tr>{mapping}</table><h2>Correlations</h2><table><tr><th>benchmark</th>"
        "<th>level</th><th>name</th><th>models</th><th>Pearson [95% CI]</th><th>Spearman [95% CI]</th>"
        f"<th>verdict</th><th>scatter</th></tr>{''.join(rows)}</table></body></html>"
    )
    write_json(out / "validity.json", json.loads(json.dumps(report, allow_nan=True)))
    write_text(out / "validity.html", page)
    return out / "validity.html"


__all__ = [
    "Correlation",
    "bootstrap",
    "load_downstream",
    "load_mapping",
    "pearson",
    "spearman",
    "validity",
    "verdict",
    "write_validity",
]
