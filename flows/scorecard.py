"""The scorecard of an eval run: per task score, 95% bootstrap CI, n, chance, strongest model-free baseline.

Why: a score means little without its noise (a 20-item task has a CI tens of points wide), the level
a guess reaches, and what a rule that never reads the question reaches on the same items. Per-item
rows are aggregated with pandas; the CI is the percentile bootstrap over items (seeded, so the same
predictions give the same card). The HTML page escapes every string and shows one chart (matplotlib,
Agg canvas): each task's score with its CI against chance and the baseline.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from flows.eval_prompts import prompt_sha256
from flows.io import atomic_path, write_text

BOOTSTRAP = 2000


def bootstrap_ci(values: Sequence[float], seed: int = 0, n: int = BOOTSTRAP) -> tuple[float, float]:
    """95% percentile bootstrap interval of the mean."""
    arr = np.asarray(values, dtype=float)
    if arr.size == 0:
        return (0.0, 0.0)
    rng = np.random.default_rng(seed)
    means = arr[rng.integers(0, arr.size, size=(n, arr.size))].mean(axis=1)
    lo, hi = np.percentile(means, [2.5, 97.5])
    return (float(lo), float(hi))


def strongest_baseline(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The best model-free baseline (`generators.quality.baselines`) on these MCQ rows, or None."""
    from generators.quality.baselines import Mcq, task_baselines

    items = [
        Mcq(r["item_id"], tuple(r["options"]), int(r["gold_index"]))
        for r in rows
        if r.get("options") and r.get("gold_index") is not None
    ]
    if len(items) < 2:
        return None
    result = task_baselines(items)
    name = max(result.accuracy, key=lambda k: (result.accuracy[k], k))
    return {"name": name, "score": round(result.accuracy[name], 4)}


def task_card(task: Any, preds: pd.DataFrame, seed: int) -> dict[str, Any]:
    """One task's entry: the primary metric with its CI, the other metrics, chance and baseline."""
    n = len(preds)
    correct = preds["correct"].astype(float).to_numpy()
    gold_loglik = task.form != "mcq" and n > 0 and bool((preds["protocol"] == "loglik").all())
    metric = "acc" if task.form == "mcq" or gold_loglik else "em"
    metrics: dict[str, float] = {metric: round(float(correct.mean()) if n else 0.0, 4)}
    if task.form == "mcq" and preds["correct_norm"].notna().any():
        metrics["acc_norm"] = round(float(preds["correct_norm"].fillna(False).astype(float).mean()), 4)
    if gold_loglik:  # the gold's log-likelihood per item; `acc`: the gold is the greedy continuation
        lls = [v[0] for v in preds["letter_logprobs"] if v is not None and len(v)]
        metrics["mean_gold_loglik"] = round(float(np.mean(lls)), 4) if lls else float("nan")
    elif task.form != "mcq":
        metrics["rouge_l"] = round(float(preds["rouge_l"].fillna(0.0).mean()) if n else 0.0, 4)
    lo, hi = bootstrap_ci(correct, seed)
    rows = task.rows
    chance = float(np.mean([1 / len(r["options"]) for r in rows])) if task.form == "mcq" and rows else 0.0
    return {
        "scenario": rows[0]["scenario"] if rows else "",
        "metric": metric,
        "score": metrics[metric],
        "ci95": [round(lo, 4), round(hi, 4)],
        "n": n,
        "chance": round(chance, 4),
        "baseline": strongest_baseline(rows) if task.form == "mcq" else None,
        "metrics": metrics,
        "shots": len(task.demos),
        "failed": int(preds["error"].notna().sum()),
        "prompt_sha256": prompt_sha256(task.prompt),
        "demo_items": [d["item_id"] for d in task.demos],
    }


def scorecard(cfg: Any, release: Any, tasks: Sequence[Any], runs: Mapping[str, Any]) -> dict[str, Any]:
    """The whole card: provenance, then one entry per task."""
    import importlib.metadata

    entries = {}
    for task in tasks:
        preds = pd.DataFrame(runs[task.name].rows)
        entries[task.name] = task_card(task, preds, cfg.seed)
    return {
        "release": {
            "source": release.source,
            "name": release.name,
            "version": release.version,
            "manifest_sha256": release.manifest_sha256,
        },
        "model": cfg.model,
        "endpoint": cfg.endpoint,
        "protocol": cfg.protocol,
        "limit": cfg.limit,
        "aptforge": importlib.metadata.version("aptforge"),
        "requests": {
            "sent": sum(r.sent for r in runs.values()),
            "cached": sum(r.cached for r in runs.values()),
        },
        "tasks": entries,
    }


def _figure(width: float, height: float) -> Any:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def chart_scores(card: Mapping[str, Any], target: Path) -> None:
    """Score with CI per task, chance and baseline as markers."""
    names = sorted(card["tasks"])
    fig = _figure(max(5.0, 1.4 * len(names) + 2), 3.6)
    ax = fig.add_subplot()
    xs = np.arange(len(names))
    scores = [card["tasks"][n]["score"] for n in names]
    los = [card["tasks"][n]["score"] - card["tasks"][n]["ci95"][0] for n in names]
    his = [card["tasks"][n]["ci95"][1] - card["tasks"][n]["score"] for n in names]
    ax.bar(xs, scores, color="#4c72b0", label=f"{card['model']} ({card['protocol']})")
    ax.errorbar(xs, scores, yerr=[los, his], fmt="none", ecolor="black", capsize=4, label="95% CI")
    ax.scatter(
        xs, [card["tasks"][n]["chance"] for n in names], marker="_", s=600, color="red", label="chance"
    )
    base = [(card["tasks"][n]["baseline"] or {}).get("score") for n in names]
    if any(b is not None for b in base):
        ax.scatter(
            [x for x, b in zip(xs, base, strict=True) if b is not None],
            [b for b in base if b is not None],
            marker="x",
            color="darkorange",
            label="best model-free baseline",
        )
    ax.set_xticks(xs, [f"{n}\n({card['tasks'][n]['metric']})" for n in names], fontsize=8)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("score")
    ax.legend(fontsize=7, loc="upper right")
    with atomic_path(target) as tmp:
        fig.savefig(tmp, format="png", metadata={"Software": None})


def render_scorecard_html(card: Mapping[str, Any], chart: str) -> str:
    """The page (every string escaped)."""
    e = html.escape
    rows = []
    for name, t in sorted(card["tasks"].items()):
        base = t["baseline"]
        others = ", ".join(f"{k} {v:.3f}" for k, v in t["metrics"].items() if k != t["metric"])
        rows.append(
            "<tr>"
            + "".join(
                f"<td>{e(str(c))}</td>"
                for c in (
                    name,
                    t["metric"],
                    f"{t['score']:.3f}",
                    f"[{t['ci95'][0]:.3f}, {t['ci95'][1]:.3f}]",
                    t["n"],
                    f"{t['chance']:.3f}",
                    f"{base['name']} {base['score']:.3f}" if base else "-",
                    others or "-",
                    t["shots"],
                    t["failed"],
                )
            )
            + "</tr>"
        )
    rel = card["release"]
    head = "".join(
        f"<th>{h}</th>"
        for h in ("task", "metric", "score", "95% CI", "n", "chance", "baseline", "other", "shots", "failed")
    )
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>aptforge scorecard</title>"
        "<style>body{font-family:sans-serif;margin:2em}td,th{border:1px solid #ccc;padding:4px 8px}"
        "table{border-collapse:collapse}</style></head><body>"
        f"<h1>{e(card['model'])} on {e(rel['name'])} {e(rel['version'])}</h1>"
        f"<p>protocol <b>{e(card['protocol'])}</b>, endpoint <code>{e(card['endpoint'])}</code>, release "
        f"<code>{e(rel['source'])}</code> (manifest sha256 <code>{e(rel['manifest_sha256'][:16])}</code>), "
        f"requests sent {card['requests']['sent']}, from cache {card['requests']['cached']}</p>"
        f"<img src='{e(chart)}' alt='scores'><table><tr>{head}</tr>{''.join(rows)}</table></body></html>"
    )


def write_scorecard_html(out: Path, card: Mapping[str, Any]) -> Path:
    """`scorecard.html` + `charts/scores.png` in `out`."""
    chart_scores(card, out / "charts" / "scores.png")
    target = out / "scorecard.html"
    write_text(target, render_scorecard_html(card, "charts/scores.png"))
    return target


__all__ = [
    "bootstrap_ci",
    "chart_scores",
    "scorecard",
    "strongest_baseline",
    "task_card",
    "write_scorecard_html",
]
