"""`aptforge validity`: correlations with downstream agent results, checked against scipy."""

from __future__ import annotations

import json

import pytest
from scipy import stats
from typer.testing import CliRunner

from flows.cli import app
from flows.validity import load_downstream, pearson, spearman, validity

MODELS = ["m1", "m2", "m3", "m4", "m5"]
PLAN = [0.31, 0.42, 0.40, 0.66, 0.71]
ACTION = [0.05, 0.10, 0.22, 0.19, 0.35]
SWE_BENCH = [12.0, 20.5, 31.0, 38.2, 55.0]


def _card(model, plan, action):
    task = {"scenario": "swe_issue_fix", "metric": "acc", "ci95": [0, 1], "n": 50, "chance": 0.25}
    return {
        "model": model,
        "release": {"name": "aptforge-swe_issue_fix", "version": "v0.3"},
        "protocol": "aptbench",
        "tasks": {"issue_fix_plan": {**task, "score": plan}, "issue_fix_action": {**task, "score": action}},
    }


@pytest.fixture()
def inputs(tmp_path):
    paths = []
    for m, p, a in zip(MODELS, PLAN, ACTION, strict=True):
        path = tmp_path / f"{m}.json"
        path.write_text(json.dumps(_card(m, p, a)))
        paths.append(path)
    csv = tmp_path / "downstream.csv"
    rows = [f"{m},SWE-bench Verified,{s}" for m, s in zip(MODELS, SWE_BENCH, strict=True)]
    csv.write_text("model,benchmark,score\n" + "\n".join(rows + ["other,GAIA,0.5"]) + "\n")
    mapping = tmp_path / "mapping.yaml"
    mapping.write_text("SWE-bench Verified: [swe_issue_fix]\nGAIA: [dr]\n")
    return paths, csv, mapping


def test_pearson_and_spearman_match_scipy():
    assert pearson(PLAN, SWE_BENCH) == pytest.approx(stats.pearsonr(PLAN, SWE_BENCH).statistic)
    tied = [1, 2, 2, 3, 5]
    assert spearman(tied, SWE_BENCH) == pytest.approx(stats.spearmanr(tied, SWE_BENCH).statistic)


def test_validity_of_five_models_reproduces_the_correlations(inputs, tmp_path):
    paths, csv, mapping = inputs
    result = CliRunner().invoke(
        app,
        [
            "validity",
            *map(str, paths),
            "--downstream",
            str(csv),
            "--mapping",
            str(mapping),
            "--out",
            str(tmp_path / "v"),
        ],
    )
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "v" / "validity.json").read_text())
    by_name = {r["name"]: r for r in report["results"]}
    assert set(by_name) == {
        "swe_issue_fix",
        "issue_fix_plan",
        "issue_fix_action",
    }  # GAIA has no dr scorecards
    scenario = [(p + a) / 2 for p, a in zip(PLAN, ACTION, strict=True)]
    for name, xs in (("swe_issue_fix", scenario), ("issue_fix_plan", PLAN), ("issue_fix_action", ACTION)):
        r = by_name[name]
        assert r["n_models"] == 5 and r["models"] == MODELS
        assert r["pearson"]["r"] == pytest.approx(stats.pearsonr(xs, SWE_BENCH).statistic)
        assert r["spearman"]["r"] == pytest.approx(stats.spearmanr(xs, SWE_BENCH).statistic)
        assert r["pearson"]["lo"] <= r["pearson"]["r"] <= r["pearson"]["hi"] <= 1.0
    plan = by_name["issue_fix_plan"]
    assert plan["verdict"].startswith(
        f"aptforge-swe_issue_fix v0.3 issue_fix_plan strongly correlates r = {plan['pearson']['r']:.2f} ["
    )
    assert "with SWE-bench Verified over 5 models" in plan["verdict"]
    assert plan["verdict"] in result.output
    assert (tmp_path / "v" / "validity.html").read_text().count("<img") == 3
    assert (tmp_path / "v" / "charts" / "validity-0.png").stat().st_size > 1000


def test_a_bad_downstream_row_names_its_line(tmp_path):
    csv = tmp_path / "d.csv"
    csv.write_text("model,benchmark,score\nm1,GAIA,0.4\nm2,GAIA,n/a\n")
    with pytest.raises(ValueError, match=r"d\.csv:3: score 'n/a' is not a number"):
        load_downstream(csv)


def test_fewer_than_three_shared_models_give_no_correlation():
    cards = [_card(m, p, a) for m, p, a in zip(MODELS[:2], PLAN, ACTION, strict=False)]
    import pandas as pd

    down = pd.DataFrame({"model": MODELS, "benchmark": "SWE-bench Verified", "score": SWE_BENCH})
    assert validity(cards, down, {"SWE-bench Verified": ["swe_issue_fix"]})["results"] == []
