"""Incremental, cached, resumable rebuilds, and the same build on threads and on Dask."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from annotations.queue import Queue
from flows import progress
from flows.build import DASK_LOG_LENGTH, build, task_runner
from flows.config import load_config
from schemas import Trajectory

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "extractors" / "samples" / "swe_issue_fix"


def _config_file(tmp_path: Path, inputs: Path, version: str = "v1", extra: str = "") -> Path:
    path = tmp_path / f"build-{version}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f"scenario: swe_issue_fix\nversion: {version}\nsources: [{inputs}]\nseed: 5\nout_dir: {tmp_path / 'out'}\n"
        "tasks: {plan: {max_items_per_trajectory: 3}, action: {max_items_per_trajectory: 3}}\n" + extra
    )
    return path


def _run(cfg, **limits):
    if limits:
        cfg = cfg.model_copy(update={"limits": cfg.limits.model_copy(update=limits)})
    state = build.with_options(task_runner=task_runner(cfg))(cfg, return_state=True)
    return state.result().model_dump(mode="json"), state.state_details.flow_run_id


def _task_states(flow_run_id) -> dict[str, list[str]]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    with get_client(sync_client=True) as client:
        runs = client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id])))
    states: dict[str, list[str]] = {}
    for r in runs:
        states.setdefault(r.name.rsplit("-", 1)[0], []).append(r.state.name)
    return states


def _candidates(out: Path, version: str = "v1") -> dict[str, bytes]:
    folder = out / "swe_issue_fix" / version / "candidates"
    return {p.name: p.read_bytes() for p in sorted(folder.glob("*.parquet"))}


@pytest.mark.flow
def test_a_warm_rebuild_takes_every_shard_from_the_cache_and_writes_the_same_candidates(
    prefect_harness, tmp_path
):
    cfg = load_config(_config_file(tmp_path, SAMPLES))
    cold, cold_id = _run(cfg)
    first = _candidates(tmp_path / "out")
    assert set(_task_states(cold_id)["read-shard"]) == {"Completed"}
    # a config change that no shard depends on: the build reruns, every shard comes from the cache
    edited = cfg.model_copy(update={"description": "same inputs, new words"})
    warm, warm_id = _run(edited)
    states = _task_states(warm_id)
    for name in ("read-shard", "extract-shard", "generate-shard", "filter-block"):
        assert states[name] and set(states[name]) == {"Cached"}, (name, states[name])
    assert _candidates(tmp_path / "out") == first
    assert warm["counts"] == cold["counts"] and not warm.get("reused")
    assert warm["adversarial"]["tasks"] == cold["adversarial"]["tasks"] and cold["adversarial"]["tasks"]
    # nothing changed at all: the last build is reused without running a stage
    again, again_id = _run(edited)
    assert again["reused"] is True and again["counts"] == cold["counts"]
    assert _task_states(again_id) == {}
    assert _candidates(tmp_path / "out") == first
    # a cached filter block whose kept questions are gone is filtered again, to the same output
    kept = sorted((tmp_path / "out" / ".cache" / "filter-blocks").iterdir())
    assert len(kept) == len(states["filter-block"])
    kept[0].unlink()
    _run(edited.model_copy(update={"description": "once more"}))
    assert kept[0].exists() and _candidates(tmp_path / "out") == first


@pytest.mark.flow
def test_touching_one_input_reruns_only_what_depends_on_it(prefect_harness, tmp_path):
    inputs = tmp_path / "in"
    shutil.copytree(SAMPLES, inputs)
    cfg = load_config(_config_file(tmp_path, inputs)).model_copy()
    cfg = cfg.model_copy(update={"limits": cfg.limits.model_copy(update={"shard_size": 4})})
    _run(cfg)
    victim = next(inputs.rglob("tinycalc__tinycalc-12.traj"))
    os.utime(victim, ns=(time.time_ns(), time.time_ns()))
    _, run_id = _run(cfg)
    reads = _task_states(run_id)["read-shard"]
    assert reads.count("Completed") == 1 and reads.count("Cached") == len(reads) - 1 > 0


@pytest.mark.flow
def test_a_new_version_keeps_verdicts_of_unchanged_items_and_reports_the_changelog(prefect_harness, tmp_path):
    inputs = tmp_path / "in"
    shutil.copytree(SAMPLES, inputs)
    report1, _ = _run(load_config(_config_file(tmp_path, inputs, "v1")))
    queue = Queue(tmp_path / "out" / "swe_issue_fix" / "queue.sqlite")
    items = queue.items(limit=1000)
    for row in items:
        queue.decide(row.item_id, "ana", "accept", seen=queue.seen(row.item_id, "ana"))
    assert report1["changelog"]["plan"]["added"] == report1["questions_by_task"]["plan"]
    # v2: one run removed, one run's thoughts rewritten (its items change)
    (inputs / "nebius_row.json").unlink()
    rows = (inputs / "swesmith_rows.jsonl").read_text().splitlines()
    first = json.loads(rows[0])
    for m in first["messages"]:
        if m["role"] == "assistant":
            m["content"] = m["content"].replace("Let's", "Let me now")
    rows[0] = json.dumps(first)
    (inputs / "swesmith_rows.jsonl").write_text("\n".join(rows) + "\n")
    report2, _ = _run(load_config(_config_file(tmp_path, inputs, "v2")))
    log = report2["changelog"]
    assert sum(c["removed"] for c in log.values()) > 0 and sum(c["changed"] for c in log.values()) > 0
    assert sum(c["unchanged"] for c in log.values()) > 0
    active = {r.item_id: r for r in queue.items(limit=1000)}
    kept = [r for r in active.values() if r.status == "accepted"]
    assert len(kept) == sum(c["unchanged"] for c in log.values())
    assert len([r for r in active.values() if r.status == "pending"]) == sum(
        c["changed"] + c["added"] for c in log.values()
    )
    assert len(active) == sum(report2["questions_by_task"].values())


@pytest.mark.flow
def test_the_same_build_on_dask_gives_byte_identical_candidates(prefect_harness, tmp_path, monkeypatch):
    # blocks of 5 items (below what a config allows, so the samples make several): each task's
    # adversarial filtering is several `filter-block` tasks, Dask's workers run them side by side
    # and shards of 2 steps (extract: of 1 run), so generation has more shards than Dask keeps in flight
    def small_blocks(cfg):
        return cfg.model_copy(
            update={
                "adversarial": cfg.adversarial.model_copy(update={"block_items": 5}),
                "limits": cfg.limits.model_copy(update={"shard_size": 2}),
            }
        )

    threads = small_blocks(load_config(_config_file(tmp_path / "t", SAMPLES)))
    dask = small_blocks(load_config(_config_file(tmp_path / "d", SAMPLES)))
    # runs unpickled in this process (the flow's): on threads the extract shards read the runs the keep
    # task spilled here; on Dask every run stays with the workers, the flow holds references
    unpickled = {"runs": 0}
    restore = Trajectory.__setstate__

    def counting(self, state):
        unpickled["runs"] += 1
        return restore(self, state)

    monkeypatch.setattr(Trajectory, "__setstate__", counting)
    report_t, threads_id = _run(threads, cache=False)
    on_threads, unpickled["runs"] = unpickled["runs"], 0
    # what the LocalCluster's scheduler, which runs in this process, holds while the stages run
    held = {"logs": set(), "extract_shard": 0, "generate_shard": 0}

    def watch(label: str, done: int, total: int) -> None:
        from distributed.scheduler import Scheduler

        for scheduler in list(Scheduler._instances):
            held["logs"] |= {comm.recent_message_log.maxlen for comm in list(scheduler.stream_comms.values())}
            waiting = Counter(ts.prefix.name for ts in list(scheduler.tasks.values()))
            for prefix in ("extract_shard", "generate_shard"):
                held[prefix] = max(held[prefix], waiting[prefix])

    with progress.reporting(watch):
        report_d, dask_id = _run(dask, cache=False, task_runner="dask", dask_workers=2)
    assert on_threads > 0 and unpickled["runs"] == 0
    # Dask's debugging logs of sent messages are bounded (each batch holds the tasks it sent), and a
    # stage keeps four shards per worker thread in flight, not every shard (the scheduler holds each)
    assert held["logs"] == {DASK_LOG_LENGTH}
    assert 0 < held["extract_shard"] <= 8 and 0 < held["generate_shard"] <= 8
    assert report_t["counts"]["gold_steps"] > 2 * 8 * 2, "fewer generate shards than the window"
    assert _candidates(tmp_path / "d" / "out") == _candidates(tmp_path / "t" / "out")
    assert _candidates(tmp_path / "t" / "out")["plan.parquet"]
    assert report_d["adversarial"]["tasks"] == report_t["adversarial"]["tasks"]
    assert sum(t["replaced"] for t in report_t["adversarial"]["tasks"].values()) > 0  # filtering did work
    for run_id in (threads_id, dask_id):
        tasks = _task_states(run_id)
        states = tasks["filter-block"]
        assert len(states) > 2 and set(states) == {"Completed"}
        # what needs a whole stage's data runs as a task, where the runner puts it
        for name in ("keep-runs", "audit-candidates", "report-html", "enqueue-for-review"):
            assert tasks[name] == ["Completed"], name
        assert tasks["dedup-and-check"] == tasks["write-candidates"] == ["Completed"] * 2


def _wait_for(predicate, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


@pytest.mark.flow
@pytest.mark.parametrize("stage", ["read", "generate", "write"])
def test_a_build_killed_in_any_stage_and_restarted_finishes_with_no_duplicates(
    prefect_harness, tmp_path, stage
):
    from prefect.settings import PREFECT_API_URL

    inputs = tmp_path / "in"
    for i in range(6):  # enough shards that the kill lands mid-build
        shutil.copytree(SAMPLES, inputs / f"batch{i}")
    cfg_file = _config_file(tmp_path, inputs, extra="limits: {shard_size: 3, max_workers: 2}\n")
    out = tmp_path / "out" / "swe_issue_fix" / "v1"
    cache = tmp_path / "out" / ".cache" / "prefect-results"
    env = {**os.environ, "PREFECT_API_URL": PREFECT_API_URL.value(), "PREFECT_LOGGING_LEVEL": "ERROR"}
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "aptforge"), "build", str(cfg_file)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        ready = {
            "read": lambda: cache.exists() and any(cache.iterdir()),
            "generate": lambda: cache.exists() and sum(1 for _ in cache.iterdir()) >= 8,
            "write": lambda: (out / "candidates").exists(),
        }[stage]
        hit = _wait_for(ready, 120)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert hit or proc.returncode == 0
    again = subprocess.run(
        [str(Path(sys.executable).parent / "aptforge"), "build", str(cfg_file)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert again.returncode == 0, again.stderr[-2000:]
    rows = [
        r for t in ("plan", "action") for r in pq.read_table(out / "candidates" / f"{t}.parquet").to_pylist()
    ]
    assert len({r["item_id"] for r in rows}) == len(rows) > 0
    queue = Queue(tmp_path / "out" / "swe_issue_fix" / "queue.sqlite")
    assert queue.count() == len(rows)
    report = json.loads((out / "report.json").read_text())
    assert report["counts"]["questions"] == len(rows)


def test_a_filter_blocks_key_changes_with_everything_that_decides_its_output(monkeypatch):
    from extractors.discovery import discover_extractors
    from flows import cache_keys
    from generators.quality.adversarial import Settings
    from generators.quality.baselines import Bounds

    discover_extractors()  # the scenarios' TaskSpecs are part of the key

    def key(scenario="swe_issue_fix", task="plan", seed=5, settings=None, bounds=None, content="abc"):
        return cache_keys.filter_key(
            scenario, task, seed, settings or Settings(), bounds or Bounds(), content
        )

    base = key()
    assert base == key(settings=Settings(), bounds=Bounds())  # a pure function of its parts
    others = [
        key(scenario="dr"),
        key(task="action"),
        key(seed=6),
        key(settings=Settings(rounds=2)),
        key(settings=Settings(max_drop=0.45)),
        key(bounds=Bounds(margin=0.2)),
        key(bounds=Bounds(fixed={"longest": 0.5})),
        key(content="abd"),
    ]
    monkeypatch.setattr(cache_keys, "FILTER_VERSION", cache_keys.FILTER_VERSION + 1)
    others.append(key())
    assert len({base, *others}) == len(others) + 1
