"""The build's quality section, HTML report and Prefect artifact, on real builds and in real Chromium."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from flows.audit_files import audit_paths
from flows.cli import app
from generators.quality.audit import audit_json
from generators.quality.baselines import BASELINES

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
runner = CliRunner()


def _build(config: Path, out: Path) -> dict:
    result = runner.invoke(app, ["build", str(config), "--out", str(out)])
    assert result.exit_code == 0, result.output
    (report,) = out.glob("*/*/report.json")
    return json.loads(report.read_text())


@pytest.fixture(scope="module")
def built(prefect_harness, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("quality")
    _build(ROOT / "configs" / "swe_issue_fix.yaml", out)
    return out / "swe_issue_fix" / "v0.1.0"


def _within_bounds(entry: dict) -> None:
    assert set(entry["baselines"]) == set(BASELINES)
    for name in BASELINES:
        assert entry["baselines"][name] <= entry["bounds"][name], (name, entry)
    assert entry["exceeded"] == [] and not entry["flagged"] and entry["publishable"]


@pytest.mark.flow
def test_every_baseline_of_the_bundled_swe_build_stays_within_its_bound(built):
    report = json.loads((built / "report.json").read_text())
    quality = report["quality"]
    assert quality["flags"] == {} and quality["refused_tasks"] == []
    plan = quality["tasks"]["plan"]
    assert plan["n_items"] >= 10 and plan["chance"] == 0.25
    _within_bounds(plan)
    counts = list(plan["positions"].values())
    assert len(counts) == 4 and max(counts) - min(counts) <= 1 and plan["position_p"] > 0.5
    assert quality["tasks"]["action"]["forms"] == {"completion": report["questions_by_task"]["action"]}
    audited = audit_json(audit_paths([built / "candidates"]))["tasks"]["swe_issue_fix/plan"]
    assert audited["baselines"] == plan["baselines"] and audited["position_chi2"] == plan["position_chi2"]


@pytest.mark.flow
@pytest.mark.shared
def test_on_a_build_of_100_plus_real_items_every_baseline_stays_within_chance_plus_ten_points(
    prefect_harness, shared_dir, tmp_path
):
    config = yaml.safe_load((ROOT / "configs" / "swe_issue_fix.yaml").read_text())
    config.update(sources=[{"path": str(shared_dir / "trajectories")}], version="real", seed=7)
    path = tmp_path / "real.yaml"
    path.write_text(yaml.safe_dump(config))
    plan = _build(path, tmp_path / "out")["quality"]["tasks"]["plan"]
    assert plan["n_items"] >= 100
    assert all(b == pytest.approx(0.35) for b in plan["bounds"].values())
    _within_bounds(plan)


@pytest.mark.flow
def test_the_report_and_its_charts_are_written_and_attached_to_the_prefect_run(built):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    report = json.loads((built / "report.json").read_text())
    assert Path(report["report_html"]) == built / "report.html"
    html = (built / "report.html").read_text()
    charts = sorted(p.name for p in (built / "charts").glob("*.png"))
    assert charts == [
        "baselines.png",
        "gold_positions.png",
        "lengths.png",
        "option_lengths.png",
        "reasons.png",
    ]
    for name in charts:
        assert (built / "charts" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and f"charts/{name}" in html
    with get_client(sync_client=True) as client:
        found = client.read_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=["build-report-swe-issue-fix-v0-1-0"]))
        )
    ours = [a for a in found if str(built) in str(a.data)]
    assert ours and ours[0].type == "markdown" and "| plan |" in str(ours[0].data)


@pytest.mark.flow
@pytest.mark.browser
def test_the_html_report_shows_every_chart_in_headless_chromium(built):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.goto((built / "report.html").as_uri())
            page.wait_for_load_state("load")
            images = page.eval_on_selector_all(
                "img",
                "els => els.map(e => ({src: e.getAttribute('src'), ok: e.complete, w: e.naturalWidth}))",
            )
            heading = page.inner_text("h1")
        finally:
            browser.close()
    assert len(images) == 5
    assert all(img["ok"] and img["w"] > 0 for img in images), images
    assert heading == "aptforge build report: swe_issue_fix v0.1.0"
