"""`make bench` writes `bench/results.json`: every benchmark's figures plus the acceptance figures."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _bench_run():
    spec = importlib.util.spec_from_file_location("bench_run", ROOT / "bench" / "run.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _results() -> dict[str, dict]:
    scale_row = {"runner": "threads", "wall_s": 30.0, "floor_ratio": 90.0}
    return {
        "ingest": {"read_ratio": 1.8, "decode_ratio": 0.9, "input_gib": 1.05, "peak_rss_mib": 300.0},
        "llm": {
            **dict.fromkeys(
                (
                    "aptforge_ideal_ratio",
                    "reference_ideal_ratio",
                    "aptforge_cpu_per_1k_s",
                    "reference_cpu_per_1k_s",
                ),
                0.9,
            ),
            "throughput_ratio": 0.97,
            "stage": {"throughput_ratio": 0.93, "requests": 850},
        },
        "scale": {
            "sizes": [
                {**scale_row, "runs": 1000, "per_run_ms": 30.0, "peak_rss_mib": 900.0},
                {**scale_row, "runs": 20000, "per_run_ms": 33.0, "peak_rss_mib": 1200.0},
            ],
            "time_ratio": 1.1,
            "time_goal": 1.5,
            "rss_ratio": 1.33,
            "rss_goal": 1.5,
            "rss_limit_mib": 2048,
        },
        "scale-dask": {
            "sizes": [
                {**scale_row, "runs": 5000, "runner": "dask", "per_run_ms": 40.0, "peak_rss_mib": 2500.0}
            ],
            "dask_identical": {"5000": False},
            "dask_flow_rss_ratio": 1.12,
            "dask_flow_rss_goal": 1.1,
        },
    }


def test_results_json_holds_the_acceptance_figures(tmp_path: Path) -> None:
    run = _bench_run()
    target = run.write_results(_results(), tmp_path / "results.json")
    blob = json.loads(target.read_text())
    acc = blob["acceptance"]
    assert acc["ingest_ratio"] == 1.8
    assert acc["llm_stage_ratio_with_reasks"] == 0.93
    assert acc["scale_largest_peak_rss_mib"] == 1200.0
    assert acc["scale_by_size"]["20000_threads"]["per_run_ms"] == 33.0
    assert acc["offline_per_step_ratio"] is None  # that benchmark did not run
    met = {figure: ok for figure, _value, _goal, ok in blob["table"]}
    assert met["ingest time / orjson parse (same bytes)"] is True
    assert met["peak RSS of the process tree at 20,000 runs"] is True
    assert met["Dask (2 workers) / threads outputs at 5,000 runs"] is False
    assert met["build process RSS under Dask, largest / smallest N"] is False  # 1.12 against 1.1
    assert acc["scale_dask_flow_rss_ratio"] == 1.12
    assert acc["scale_dask_identical"] == {"5000": False} and "5000_dask" in acc["scale_by_size"]
    assert [p.name for p in tmp_path.iterdir()] == ["results.json"]  # no temp file left behind


def test_a_partial_rerun_keeps_the_other_benchmarks(tmp_path: Path) -> None:
    run = _bench_run()
    target = tmp_path / "results.json"
    run.write_results(_results(), target)
    kept = run.previous_results(target)
    assert kept["ingest"]["read_ratio"] == 1.8
    target.write_text("{not json")
    assert run.previous_results(target) == {}


def test_the_offline_scaling_figure_is_an_acceptance_figure_and_a_row_of_the_table(tmp_path: Path) -> None:
    run = _bench_run()
    sizes = [{"steps": 1000, "per_1k_s": 0.5}, {"steps": 20000, "per_1k_s": 0.6}]
    results = {**_results(), "offline": {"sizes": sizes, "ratio": 1.2, "goal": 1.5}}
    blob = json.loads(run.write_results(results, tmp_path / "results.json").read_text())
    assert blob["acceptance"]["offline_per_step_ratio"] == 1.2
    row = ["offline generate per step, 20,000 / 1,000 gold steps", "1.20", "<= 1.5", True]
    assert row in blob["table"]
    slow = {**results, "offline": {**results["offline"], "ratio": 2.0}}
    assert ["offline generate per step, 20,000 / 1,000 gold steps", "2.00", "<= 1.5", False] in [
        list(r) for r in run.rows(slow)
    ]


def test_the_small_rows_build_is_judged_on_wall_time_and_memory(tmp_path: Path) -> None:
    run = _bench_run()
    small = {"runs": 100000, "runner": "threads", "wall_s": 400.0, "peak_rss_mib": 1500.0, "per_run_ms": 4.0}
    results = {**_results(), "scale-small": {"sizes": [small], "rss_limit_mib": 2048}}
    blob = json.loads(run.write_results(results, tmp_path / "results.json").read_text())
    assert blob["acceptance"]["small_rows"]["wall_s"] == 400.0
    met = {figure: ok for figure, _value, _goal, ok in blob["table"]}
    assert met["100,000 small rows: wall / peak RSS of the process tree"] is True
    slow = {**results, "scale-small": {"sizes": [{**small, "wall_s": 3600.0}], "rss_limit_mib": 2048}}
    met = {figure: ok for figure, _value, _goal, ok in run.rows(slow)}
    assert met["100,000 small rows: wall / peak RSS of the process tree"] is False


@pytest.mark.parametrize(
    ("bench", "unit", "units", "base", "label", "same"),
    [
        ("dedup", "item", "items", "minhashlsh", "MinHashLSH layout", "Problems"),
        ("pool-index", "entry", "entries", "datasketch", "datasketch layout", "answers"),
    ],
)
def test_a_compact_index_is_judged_on_memory_time_flatness_and_equal_answers(
    tmp_path: Path, bench: str, unit: str, units: str, base: str, label: str, same: str
) -> None:
    """The dedup index and the pool index, each against the layout it replaced."""
    run = _bench_run()

    def size(n: int, ours: float) -> dict:
        return {units: n, "compact": {f"bytes_per_{unit}": ours}, base: {f"bytes_per_{unit}": 3300.0}}

    figures = {
        "sizes": [size(20000, 1400.0), size(100000, 1380.0)],
        "memory_ratio": 0.42,
        "memory_goal": 0.5,
        "time_ratio": 0.98,
        "time_goal": 1.1,
        "flat_ratio": 0.99,
        "flat_goal": 1.2,
        "identical": True,
    }
    blob = json.loads(
        run.write_results({**_results(), bench: figures}, tmp_path / "results.json").read_text()
    )
    assert blob["acceptance"][f"{bench.replace('-', '_')}_memory_ratio"] == 0.42
    met = {figure: ok for figure, _value, _goal, ok in blob["table"]}
    name = "dedup index" if bench == "dedup" else "pool index"
    assert met[f"{name} bytes per {unit} / {label}"] is True
    assert met[f"  bytes per {unit}, 100,000 / 20,000 {units}"] is True
    assert met[f"  same {same} as the {label}"] is True
    assert [f"  100,000 {units}: bytes per {unit} ({label})", "1380 (3300)", "", None] in blob["table"]
    worse = {**figures, "memory_ratio": 0.6, "time_ratio": 1.3, "identical": False}
    met = {figure: ok for figure, _value, _goal, ok in run.rows({**_results(), bench: worse})}
    assert met[f"{name} bytes per {unit} / {label}"] is False
    assert met[f"  time per {unit} / {label}"] is False
    assert met[f"  same {same} as the {label}"] is False
