"""Shared fixtures of the publish tests: a reviewed SWE sample queue, its config, a private datasets cache."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from annotations.queue import Queue
from extractors.base import ExtractOptions
from extractors.discovery import discover_extractors, discover_readers
from extractors.ingest.records import find_inputs
from flows import stages
from flows.config import load_config
from flows.publish import prepare
from generators.offline import OfflineGenerator
from generators.quality.balance import balance_positions
from schemas.report import BuildReport, Counts, QualityReport
from tests.golden_support import at_root

ROOT = Path(__file__).resolve().parents[1]


def questions(samples_dir):
    """The sample's questions. Read from the repository root with root-relative paths: ids hash the
    source path, and which items the fixture accepts, hence the few-shot split, must not depend on
    where the checkout lives (an absolute path gave some checkouts no few-shot plan item)."""
    folder = Path(os.path.relpath(Path(samples_dir) / "swe_issue_fix", ROOT))
    with at_root():
        files = [(str(p), None) for p in find_inputs([folder])]
        read = stages.read_stage(discover_readers(), files)
    kept = stages.label_and_keep(read.trajectories, {}, read.verdicts, frozenset({"swe"}), keep_unknown=False)
    ext = discover_extractors()["swe_issue_fix"]()
    golds, _ = stages.extract_stage(
        ext, kept.kept, {"plan": ExtractOptions(seed=1), "action": ExtractOptions(seed=1)}
    )
    qs = []
    for task in ("plan", "action"):
        tg = [g for g in golds if g.task == task]
        got, _ = stages.generate_stage(OfflineGenerator(seed=1), tg, stages.pool_of(tg), 4)
        qs += got
    return balance_positions(qs, 1)


@pytest.fixture()
def reviewed(tmp_path, samples_dir):
    """A config into tmp_path, a build report, and a queue with some items accepted, some rejected, some pending."""
    cfg = load_config(ROOT / "configs" / "swe_issue_fix.yaml", out_dir=tmp_path)
    qs = questions(samples_dir)
    queue = Queue(Path(cfg.out_dir) / cfg.scenario / "queue.sqlite")
    queue.enqueue(qs, batch="b1")
    decided = {"accepted": set(), "rejected": set()}
    for i, q in enumerate(sorted(qs, key=lambda q: q.item_id)):
        if i % 3 == 2:
            continue  # left pending
        decision = "accept" if i % 3 == 0 else "reject"
        queue.decide(q.item_id, "ana", decision, seen=queue.seen(q.item_id, "ana"))
        decided["accepted" if decision == "accept" else "rejected"].add(q.item_id)
    out = cfg.output_dir()
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(build_report_for(cfg).model_dump_json())
    return cfg, queue, decided


@pytest.fixture()
def own_datasets_cache(tmp_path, monkeypatch):
    """`datasets` caches a local folder by its name and config alone (5.x: not by content), so two releases
    in folders both named `release` would read each other's rows; each test gets its own cache."""
    import datasets

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf-datasets-cache")


def build_report_for(cfg, **quality) -> BuildReport:
    """The build report publish reads (counts do not matter to it; the quality section does)."""
    counts = Counts(
        input_files=0, trajectories_read=0, kept=0, dropped=0, gold_steps=0, questions=0, quarantined=0
    )
    return BuildReport(
        scenario=cfg.scenario,
        version=cfg.version,
        config_hash=cfg.fingerprint(),
        generator="offline",
        seed=cfg.seed,
        output_dir=str(cfg.output_dir()),
        counts=counts,
        quality=QualityReport(**quality),
    )


def prepare_release(cfg, queue, repo=None):
    report = BuildReport.model_validate_json((cfg.output_dir() / "report.json").read_text())
    return prepare(cfg, queue.verified(), report, repo)


def config_file_for(cfg, tmp_path):
    config_file = tmp_path / "swe_issue_fix.yaml"
    config_file.write_text(
        (ROOT / "configs" / "swe_issue_fix.yaml")
        .read_text()
        .replace("out_dir: ../out", f"out_dir: {cfg.out_dir}")
        .replace("../extractors", str(ROOT / "extractors"))
    )
    return config_file
