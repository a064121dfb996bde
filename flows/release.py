"""Render a release folder: Parquet splits, dataset card, APTBench JSONL, lm-eval YAML, manifest.

Pure: `render_release` maps verified rows to `{relative path: bytes}`, deterministically (same rows
in, same bytes out), so a folder and a Hub commit are the same artefact and publishing the same
inputs twice changes nothing. Task names are qualified by their APTBench dataset
(`issue_fix_plan`, `deepresearch_plan_en`) so several scenarios can share one release.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from schemas import task_spec
from schemas.rows import candidate_schema

_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")

#: APTBench's instruction line and answer cue per (dataset, task) (APTBENCH.md §5).
_PROMPTS: dict[tuple[str, str], tuple[str, str, str]] = {
    ("issue_fix", "plan"): (
        "Select the correct next step plan given the previous executed trajectory.",
        "Trajectory: {{trajs}}\n\nChoices:\n{{choices}}\n",
        "The correct next step plan is (",
    ),
    ("issue_fix", "action"): (
        "Write the next execution command from the tool set according to the previous executed trajectory.",
        "Tool set: {{tool_set}}\n\nTrajectory: {{trajs}}\n",
        "The next command:\n```bash\n",
    ),
    ("issue_fix", "locate"): (
        "Select the code snippet generating the bug describted in the issue statement.",
        "Issue: {{issue_statement}}\n\nChoices:\n{{choices}}\n",
        "The bug code snippet is (",
    ),
    ("issue_fix", "fix_patch"): (
        "Select the correct fix patch to the issue.",
        "Issue: {{issue_statement}}\n\nChoices:\n{{choices}}\n",
        "The correct patch to the issue is (",
    ),
    ("issue_fix", "test_patch"): (
        "Which is the correct test patch that can reproduce the issues described in the problem statement?",
        "Problem: {{problem_statement}}\n\nChoices:\n{{choices}}\n",
        "The answer is (",
    ),
    ("env_setup", "plan"): (
        "Choose the correct execution plan to setup the environment for running the repository "
        "according to the repository information.",
        "Repository information: {{repo_info}}\n\nChoices: {{choices}}\n",
        "The correct execution plan is (",
    ),
    ("env_setup", "action"): (
        "Write the next execution command given the execution plan and the previously executed commands.",
        "Execution plan: {{execution_plan}}.\nExecuted commands: {{executed_cmds}}\n",
        "The next command:\n```bash\n",
    ),
    ("env_setup", "error"): (
        "The environment is setup according to the repo setup steps, but an issue occurred. "
        "Choose the correct execution plan to fix the issue.",
        "Setup: {{setup_instruct}}\n\nIssue title: {{issue_title}}\nIssue body: {{issue_body}}\n\n"
        "Choices: {{choices}}\n",
        "The corrected next step should be (",
    ),
    ("deepresearch", "plan"): (
        "Given the question, the trajectory so far and candidate next steps, determine which "
        "step is correct and most reasonable.",
        "Question: {{query}}\n\nTrajectory: {{trajectory}}\n\nChoices:\n{{choices}}\n",
        "The answer is (",
    ),
    ("deepresearch", "summ_ans"): (
        "Get the answer to the question from the searching and browsing trajectory.",
        "Question: {{query}}\n\nTrajectory: {{trajectory}}\n",
        "The answer is [",
    ),
}


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


def release_task(scenario: str, task: str, row: Mapping[str, Any]) -> tuple[str, str]:
    """(qualified release name, APTBench task folder) of a row; DR tasks split by query language."""
    spec = task_spec(scenario, task)
    folder = spec.task
    if spec.dataset == "deepresearch":
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


def _dataset_keys(qualified: str, repo_id: str | None, version: str) -> dict[str, Any]:
    """Where lm-eval reads a config: the Hub repo at the release tag, else this folder (run from inside it)."""
    if repo_id:
        return {"dataset_path": repo_id, "dataset_name": qualified, "dataset_kwargs": {"revision": version}}
    return {
        "dataset_path": "parquet",
        "dataset_kwargs": {"data_files": {"test": f"data/{qualified}/test-*.parquet"}},
    }


def _lm_eval_yaml(qualified: str, dataset: str, task: str, form: str, where: Mapping[str, Any]) -> bytes:
    instruction, body, cue = _PROMPTS.get((dataset, task), ("", "", ""))
    doc = {
        "task": f"aptforge_{qualified}",
        **where,
        "test_split": "test",
        "doc_to_text": f"{instruction}\n\n{body}{cue}",
    }
    if form == "mcq":
        doc.update(
            output_type="multiple_choice",
            doc_to_choice="{{options}}",
            doc_to_target="gold_index",
            metric_list=[{"metric": "acc", "aggregation": "mean", "higher_is_better": True}],
        )
    else:
        first_segment = {"function": "regex", "regex_pattern": r"^\s*([^;\n\]]*)", "group_select": 0}
        doc.update(
            output_type="generate_until",
            doc_to_target="{{answer}}",
            generation_kwargs={"until": ["\n", "```", "]"], "do_sample": False, "max_gen_toks": 64},
            filter_list=[{"name": "first_segment", "filter": [first_segment, {"function": "take_first"}]}],
            metric_list=[{"metric": "exact_match", "aggregation": "mean", "higher_is_better": True}],
        )
    doc["metadata"] = {"version": 1}
    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True).encode("utf-8")


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
        table = pa.Table.from_pylist(g["rows"], schema=candidate_schema(g["scenario"], g["task"]))
        files[f"data/{qualified}/test-00000-of-00001.parquet"] = _parquet_bytes(table)
        official = [{name: r[name] for name, _ in spec.fields} for r in g["rows"]]
        files[f"aptbench/{spec.dataset}/{g['folder']}/input_data.jsonl"] = _jsonl(official)
        files[f"lm_eval/{qualified}.yaml"] = _lm_eval_yaml(
            qualified,
            spec.dataset,
            spec.task,
            spec.form,
            _dataset_keys(qualified, meta.repo_id, meta.version),
        )
    manifest = _manifest(groups, files, meta)
    files["README.md"] = _card(groups, meta, manifest).encode("utf-8")
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


def _card(groups: Mapping[str, Mapping[str, Any]], meta: ReleaseMeta, manifest: Mapping[str, Any]) -> str:
    header = {
        "license": meta.license,
        "pretty_name": meta.name,
        "language": sorted({"zh" if q.endswith("_zh") else "en" for q in groups}) or ["en"],
        "tags": ["agents", "benchmark", "aptbench", "aptforge"],
        "configs": [
            {"config_name": q, "data_files": [{"split": "test", "path": f"data/{q}/test-*.parquet"}]}
            for q in sorted(groups)
        ],
    }
    lines = [
        "---",
        yaml.safe_dump(header, sort_keys=False, allow_unicode=True).rstrip(),
        "---",
        "",
        f"# {meta.name} {meta.version}",
        "",
        meta.description or "Agentic-potential benchmark built with aptforge.",
        "",
        "Built by aptforge from successful agent trajectories; every item was accepted by a human reviewer.",
        "",
        "## Tasks",
        "",
        "| config | APTBench file | form | options | items | baselines (acc) |",
        "|---|---|---|---|---|---|",
    ]
    for q, g in sorted(groups.items()):
        spec = g["spec"]
        base = meta.baselines.get(f"{g['scenario']}/{g['task']}") or meta.baselines.get(g["task"]) or {}
        base_txt = (
            ", ".join(f"{k} {v:.2f}" for k, v in sorted(base.items()) if isinstance(v, (int, float))) or "-"
        )
        lines.append(
            f"| `{q}` | `aptbench/{spec.dataset}/{g['folder']}/input_data.jsonl` | {spec.form} | "
            f"{spec.n_options or '-'} | {len(g['rows'])} | {base_txt} |"
        )
    rows = [r for g in groups.values() for r in g["rows"]]
    gens = Counter(
        f"{r['generator']}{' (' + r['model'] + ')' if r['model'] else ''}" for r in rows if r["generator"]
    )
    formats = Counter(r["source_format"] for r in rows)
    agents = Counter(f"{r['agent']} / {r['agent_model'] or 'unknown model'}" for r in rows)
    lines += ["", "## Distractor generators", ""]
    lines += [f"- {k}: {v} items" for k, v in sorted(gens.items())] or ["- none (completion tasks only)"]
    lines += ["", "## Provenance", "", "Source formats:", ""] + [
        f"- {k}: {v}" for k, v in sorted(formats.items())
    ]
    lines += ["", "Agents and models:", ""] + [f"- {k}: {v}" for k, v in sorted(agents.items())]
    lines += [
        "",
        "## Changelog",
        "",
        f"Against {meta.previous.get('version') if meta.previous else 'nothing (first release)'}:",
        "",
        "| config | added | removed | changed |",
        "|---|---|---|---|",
    ]
    for task, c in changelog(manifest, meta.previous).items():
        lines.append(f"| `{task}` | {c['added']} | {c['removed']} | {c['changed']} |")
    lines += [
        "",
        "## Files",
        "",
        "- `data/<config>/test-*.parquet`: one row per item, APTBench fields first, then aptforge provenance.",
        "- `aptbench/<dataset>/<task>/input_data.jsonl`: the official APTBench layout, readable by its code.",
        "- `lm_eval/<config>.yaml`: lm-evaluation-harness task definitions.",
        "- `manifest.json`: version, config hash, inputs, counts and content hashes.",
        "",
    ]
    return "\n".join(lines)
