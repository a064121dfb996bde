"""Every scenario's sample release: lm-eval runs every task of both protocols, no absolute path, same bytes.

Builds the bundled SWE, env-setup and deep-research samples (each from its own copy of the inputs, as a
fresh clone would), accepts every item, renders the folder release, then runs the real `lm_eval` CLI
with `--model dummy` on every YAML of it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from annotations.queue import Queue
from flows.config import load_config
from flows.publish import prepare, write_release

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = {"swe_issue_fix.yaml": "swe_issue_fix", "swe_env_setup.yaml": "swe_env_setup", "dr.yaml": "dr"}

pytestmark = pytest.mark.flow


def _clone(where: Path, config: str) -> Path:
    """The config and its sample inputs copied under `where` (paths as in the repo), like a fresh clone."""
    (where / "configs").mkdir(parents=True)
    shutil.copy(ROOT / "configs" / config, where / "configs" / config)
    scenario = SCENARIOS[config]
    shutil.copytree(ROOT / "extractors" / "samples" / scenario, where / "extractors" / "samples" / scenario)
    return where / "configs" / config


def build_release(where: Path, config: str) -> tuple[Path, object]:
    """Build the scenario's samples in a clone at `where`, accept everything, write the folder release."""
    from flows.build import run_build

    cfg = load_config(_clone(where, config))
    report = run_build(cfg)
    queue = Queue(cfg.queue_path())
    for row in queue.items(limit=10_000):
        queue.decide(row.item_id, "ana", "accept", seen=queue.seen(row.item_id, "ana"))
    files, plan = prepare(cfg, queue.verified(), report, None)
    folder = where / "release"
    write_release(folder, files)
    return folder, plan


@pytest.fixture(scope="module")
def releases(prefect_harness, tmp_path_factory):
    """One folder release per scenario, built from the bundled samples."""
    return {
        config: build_release(tmp_path_factory.mktemp(config.split(".")[0]), config) for config in SCENARIOS
    }


@pytest.mark.parametrize("config", sorted(SCENARIOS))
def test_lm_eval_dummy_runs_every_task_of_both_protocols(releases, config, tmp_path):
    folder, plan = releases[config]
    manifest = json.loads((folder / "manifest.json").read_text())
    yamls = sorted((folder / "lm_eval").glob("*.yaml"))
    docs = {p.stem: yaml.safe_load(p.read_text().replace("!function", "")) for p in yamls}
    tasks = sorted(d["task"] for d in docs.values())
    mcq = {n for n in plan.counts if docs[f"{n}_loglik"]["output_type"] == "multiple_choice"}
    expected = {f"aptforge_{n}_{p}" for n in plan.counts for p in ("aptbench", "loglik")}
    expected |= {f"aptforge_{n}_loglik_options" for n in mcq}
    assert set(tasks) == expected and {f"aptforge_{stem}" for stem in docs} == expected
    env = {**os.environ, "HF_DATASETS_CACHE": str(tmp_path / "cache"), "HF_HUB_OFFLINE": "1"}
    run = subprocess.run(
        [sys.executable, "-m", "lm_eval", "run", "--model", "dummy", "--tasks", ",".join(sorted(tasks))]
        + ["--include_path", "lm_eval", "--output_path", str(tmp_path / "out"), "--log_samples"],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    results = json.loads(next((tmp_path / "out").rglob("results_*.json")).read_text())["results"]
    assert set(results) == expected
    for task in expected:
        protocol = next(p for p in ("loglik_options", "aptbench", "loglik") if task.endswith(f"_{p}"))
        name = task.removeprefix("aptforge_").removesuffix(f"_{protocol}")
        samples = [json.loads(x) for x in next((tmp_path / "out").rglob(f"samples_{task}_*.jsonl")).open()]
        assert len(samples) == plan.counts[name], task
        metric = {
            "aptbench": "exact_match,aptbench",
            "loglik": "acc,none",
            "loglik_options": "acc_norm,none",
        }[protocol]
        assert 0.0 <= results[task][metric] <= 1.0, results[task]
        demos = manifest["fewshot"][name]
        assert not set(demos) & {s["doc"]["item_id"] for s in samples}
        if demos:
            prompt = samples[0]["arguments"]["gen_args_0"]["arg_0"]
            assert prompt.count(prompt[:40]) == min(len(demos), 3) + 1, task  # the demos, then the item


@pytest.mark.parametrize("config", sorted(SCENARIOS))
def test_every_published_config_holds_fewshot_demos_apart_from_its_test_items(releases, config):
    import pyarrow.parquet as pq

    folder, plan = releases[config]
    for name in plan.counts:
        test = pq.read_table(folder / "data" / name / "test-00000-of-00001.parquet")
        shots = folder / "data" / name / "fewshot-00000-of-00001.parquet"
        if not shots.exists():
            continue
        fewshot = pq.read_table(shots)
        assert fewshot.schema == test.schema and fewshot.num_rows >= 1
        for column in ("item_id", "trajectory_id"):
            assert not set(fewshot[column].to_pylist()) & set(test[column].to_pylist()), (name, column)


def test_no_release_file_holds_an_absolute_path_and_a_second_clone_builds_the_same_bytes(
    releases, tmp_path_factory
):
    import pyarrow.parquet as pq

    for folder, _plan in releases.values():
        clone_root = str(folder.parent)
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            blob = path.read_bytes()
            if path.suffix == ".parquet":  # compressed: look at the values themselves
                blob = json.dumps(pq.read_table(path).to_pylist(), ensure_ascii=False).encode()
            for needle in (clone_root, str(ROOT)):
                assert needle.encode() not in blob, (path.relative_to(folder), needle)
    first, _ = releases["swe_env_setup.yaml"]
    second, _ = build_release(tmp_path_factory.mktemp("second-clone"), "swe_env_setup.yaml")
    files = sorted(p.relative_to(first) for p in first.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(second) for p in second.rglob("*") if p.is_file())
    assert all((first / p).read_bytes() == (second / p).read_bytes() for p in files)


@pytest.mark.parametrize("config", sorted(SCENARIOS))
def test_the_card_passes_the_metadata_check_names_every_licence_and_scores_the_published_rows(
    releases, config
):
    import re

    from huggingface_hub import DatasetCard

    from flows.card import CardSource, check_card

    folder, plan = releases[config]
    text = (folder / "README.md").read_text()
    cfg = load_config(folder.parent / "configs" / config)
    sources = [CardSource(Path(s.path).name, s.license) for s in cfg.sources]
    assert all(s.license for s in sources) and check_card(text, sources) == []
    card = DatasetCard(text)
    assert card.data.task_categories and card.data.size_categories == ["n<1K"] and card.data.source_datasets
    assert {c["config_name"] for c in card.data.configs} == set(plan.counts)
    for heading in ("Tasks and configs", "Data fields", "How to load", "How it was built", "Baselines"):
        assert f"## {heading}" in text
    for heading in ("Limitations", "Citation", "Changelog"):
        assert f"## {heading}" in text
    assert "@misc{qin2025aptbench" in text and "load_dataset(" in text and "lm_eval " in text
    for name, n in plan.counts.items():
        assert re.search(rf"^\| `{name}` \| .* \| {n} \| \d+ \| ", text, re.M), name
        row = re.search(rf"^\| `{name}` \| (\d+) \| \d+% \|", text, re.M)  # baselines on the published rows
        assert row is None or int(row.group(1)) == n


def test_the_metadata_check_finds_a_bad_value_and_an_unnamed_licence(releases):
    from flows.card import CardSource, check_card

    folder, _ = releases["swe_issue_fix.yaml"]
    text = (folder / "README.md").read_text()
    bad = text.replace("- n<1K", "- tiny", 1).replace("multilinguality: monolingual", "multilinguality: some")
    problems = check_card(bad, [CardSource("swe_issue_fix", "cc-by-nc-4.0")])
    assert any("size_categories" in p for p in problems) and any("multilinguality" in p for p in problems)
    assert any("cc-by-nc-4.0" in p for p in problems)
