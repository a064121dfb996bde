"""Render a release folder: Parquet splits, dataset card, APTBench JSONL, lm-eval YAML, manifest.

Pure: `render_release` maps verified rows to `{relative path: bytes}`, deterministically (same rows
in, same bytes out), so a folder and a Hub commit are the same artefact and publishing the same
inputs twice changes nothing. Task names are qualified by their APTBench dataset
(`<dataset>_<task>`, split `_en`/`_zh` where the spec asks) so several scenarios can share one release;
each task's lm-eval protocol comes from its scenario's TaskSpec.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import pyarrow as pa
import pyarrow.parquet as pq

from flows.card import CardConfig, CardSource, render_card
from flows.lm_eval_export import METRICS_MODULE, data_source, lm_eval_files
from schemas import content_id, task_spec
from schemas.rows import candidate_schema

#: Few-shot demos per config (APTBench's templates are 3-shot).
FEWSHOT_ITEMS = 3
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")


class MissingPrompt(LookupError):
    """A published config whose TaskSpec has no APTBench prompt for it (discovery refuses such a scenario)."""


class ReleaseMeta(NamedTuple):
    """What the card and manifest say about a release."""

    name: str
    version: str
    description: str
    license: str
    config_hash: str
    repo_id: str | None
    inputs: Sequence[str]
    baselines: Mapping[str, Any]
    previous: Mapping[str, Any] | None
    """The manifest of the release this one is compared with (the changelog's baseline), if any."""
    seed: int = 0
    """Seed of the few-shot hold-aside."""
    sources: Sequence[CardSource] = ()
    """Input roots with their licences (named on the card)."""
    excluded: Mapping[str, int] = {}
    """Items left out, by reason (named on the card)."""


def release_task(scenario: str, task: str, row: Mapping[str, Any]) -> tuple[str, str]:
    """(qualified release name, APTBench task folder) of a row; DR tasks split by query language."""
    spec = task_spec(scenario, task)
    folder = spec.task
    if spec.split_by_language:
        folder = f"{spec.task}_{'zh' if _CJK.search(str(row.get('query', ''))) else 'en'}"
    return f"{spec.dataset}_{folder}", folder


def _parquet_bytes(table: pa.Table) -> bytes:
    buf = io.BytesIO()
    pq.write_table(
        table, buf, compression="zstd", use_dictionary=True, write_statistics=True, store_schema=True
    )
    return buf.getvalue()


def _jsonl(rows: Sequence[Mapping[str, Any]]) -> bytes:
    return "".join(json.dumps(dict(r), ensure_ascii=False) + "\n" for r in rows).encode("utf-8")


def hold_aside(
    rows: Sequence[Mapping[str, Any]], seed: int, want: int = FEWSHOT_ITEMS
) -> tuple[list[Any], list[Any]]:
    """(test rows, few-shot rows) of one config: whole groups (an instance, else a trajectory) are held aside.

    Groups are taken in an order drawn from `seed` until the few-shot split has `want` items, and never
    more than half of them, so no test item shares a trajectory (or a task instance) with a demo.
    """
    groups: dict[str, list[Any]] = {}
    for row in rows:
        groups.setdefault(str(row.get("instance_id") or row["trajectory_id"]), []).append(row)
    order = sorted(groups, key=lambda k: content_id(seed, "fewshot", k))
    held: set[str] = set()
    taken = 0
    for key in order[: len(groups) // 2]:
        if taken >= want:
            break
        held.add(key)
        taken += len(groups[key])
    test = [r for r in rows if str(r.get("instance_id") or r["trajectory_id"]) not in held]
    fewshot = [r for r in rows if str(r.get("instance_id") or r["trajectory_id"]) in held]
    return test, fewshot


def render_release(
    rows_by_task: Mapping[tuple[str, str], Sequence[Mapping[str, Any]]], meta: ReleaseMeta
) -> dict[str, bytes]:
    """All files of a release, by relative path. Rows are candidate rows of accepted items."""
    groups: dict[str, dict[str, Any]] = {}
    for (scenario, task), rows in sorted(rows_by_task.items()):
        spec = task_spec(scenario, task)
        for row in sorted(rows, key=lambda r: r["item_id"]):
            qualified, folder = release_task(scenario, task, row)
            g = groups.setdefault(
                qualified, {"scenario": scenario, "task": task, "spec": spec, "folder": folder, "rows": []}
            )
            g["rows"].append(dict(row))
    files: dict[str, bytes] = {}
    for qualified, g in groups.items():
        spec = g["spec"]
        schema = candidate_schema(g["scenario"], g["task"])
        g["rows"], g["fewshot"] = hold_aside(g["rows"], meta.seed)
        for split, rows in (("test", g["rows"]), ("fewshot", g["fewshot"])):
            if rows:
                table = pa.Table.from_pylist(rows, schema=schema)
                files[f"data/{qualified}/{split}-00000-of-00001.parquet"] = _parquet_bytes(table)
        official = [{name: r[name] for name, _ in spec.fields} for r in g["rows"]]
        files[f"aptbench/{spec.dataset}/{g['folder']}/input_data.jsonl"] = _jsonl(official)
        prompt = spec.aptbench.get(g["folder"])
        if prompt is None:
            raise MissingPrompt(f"{g['scenario']} declares no APTBench prompt for task `{g['folder']}`")
        source = data_source(qualified, meta.repo_id, meta.version, bool(g["fewshot"]))
        files.update(
            lm_eval_files(qualified, spec.form, prompt, source, min(len(g["fewshot"]), FEWSHOT_ITEMS))
        )
    files["lm_eval/aptforge_metrics.py"] = METRICS_MODULE.encode("utf-8")
    manifest = _manifest(groups, files, meta)
    files["README.md"] = render_card(
        [
            CardConfig(
                q,
                g["spec"].dataset,
                g["folder"],
                g["spec"].form,
                g["spec"].n_options,
                [(n, t, n == g["spec"].answer_key) for n, t in g["spec"].fields],
                g["rows"],
                g["fewshot"],
            )
            for q, g in sorted(groups.items())
        ],
        meta=meta,
        sources=meta.sources,
        changes=changelog(manifest, meta.previous),
        excluded=meta.excluded,
    ).encode("utf-8")
    files["manifest.json"] = (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode("utf-8")
    return files


def _manifest(
    groups: Mapping[str, Mapping[str, Any]], files: Mapping[str, bytes], meta: ReleaseMeta
) -> dict[str, Any]:
    return {
        "name": meta.name,
        "version": meta.version,
        "config_hash": meta.config_hash,
        "inputs": sorted(meta.inputs),
        "counts": {q: len(g["rows"]) for q, g in sorted(groups.items())},
        "items": {q: {r["item_id"]: r["content_hash"] for r in g["rows"]} for q, g in sorted(groups.items())},
        "fewshot": {q: sorted(r["item_id"] for r in g["fewshot"]) for q, g in sorted(groups.items())},
        "files": {path: hashlib.sha256(blob).hexdigest() for path, blob in sorted(files.items())},
        "baseline": (
            {"version": meta.previous.get("version"), "items": meta.previous.get("items", {})}
            if meta.previous
            else None
        ),
    }


def changelog(manifest: Mapping[str, Any], previous: Mapping[str, Any] | None) -> dict[str, dict[str, int]]:
    """Added / removed / changed items per task against the previous release."""
    old = (previous or {}).get("items", {})
    out: dict[str, dict[str, int]] = {}
    for task in sorted(set(manifest["items"]) | set(old)):
        new_items, old_items = manifest["items"].get(task, {}), old.get(task, {})
        out[task] = {
            "added": len(new_items.keys() - old_items.keys()),
            "removed": len(old_items.keys() - new_items.keys()),
            "changed": sum(1 for k in new_items.keys() & old_items.keys() if new_items[k] != old_items[k]),
        }
    return out
