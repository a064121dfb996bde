"""Pipeline benchmarks: Prefect overhead per shard, warm vs cold rebuild, Dask vs threads.

Every figure is a ratio against a baseline measured in the same run, on the same input:
- Prefect overhead: the read stage as Prefect tasks (one per shard, thread pool) against the same
  stage as plain function calls; reported as seconds per shard and as a ratio.
- Warm rebuild: a second build of the same config against the first (cold) one, with the OpenAI
  generator against the stand-in server at 100 ms latency; the warm one must send 0 requests
  (goal: time ratio at most 0.2).
- Dask: the same build on a 2-worker LocalCluster against the thread pool (outputs must match).

Input: SWE-smith-like rows generated from a seed (see bench_ingest.py), in a temp folder.
Usage: `.venv/bin/python bench/bench_pipeline.py [--rows 400] [--json-out FILE]`.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "ERROR")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")

import orjson  # noqa: E402

WARM_GOAL = 0.2
KEY = "bench-key"


def write_rows(folder: Path, rows: int) -> None:
    """Seeded SWE-smith-like rows, 25 per JSONL file."""
    from bench_ingest import _row

    rng = random.Random(20261130)
    folder.mkdir(parents=True, exist_ok=True)
    for start in range(0, rows, 25):
        with (folder / f"rows-{start:05d}.jsonl").open("wb") as fh:
            for i in range(start, min(rows, start + 25)):
                fh.write(orjson.dumps(_row(rng, i)) + b"\n")


def config_text(inputs: Path, out: Path, generator: str, base_url: str = "") -> str:
    gen = {"name": generator}
    if generator == "openai":
        gen.update(
            model="bench-model",
            base_url=base_url,
            max_concurrency=16,
            cache_path=str(out / "llm-cache.sqlite"),
        )
    return json.dumps(
        {
            "scenario": "swe_issue_fix",
            "version": "bench",
            "sources": [str(inputs)],
            "seed": 3,
            "out_dir": str(out),
            "tasks": {"plan": {"max_items_per_trajectory": 2}, "action": {"max_items_per_trajectory": 2}},
            "generator": gen,
            "limits": {"shard_size": 50, "max_workers": 4},
        }
    )


def load(text: str, folder: Path):
    from flows.config import load_config

    path = folder / "config.json.yaml"
    path.write_text(text)
    return load_config(path)


def prefect_overhead(inputs: Path) -> dict:
    """Read stage (read + redact per shard) as Prefect tasks vs the same function called plainly."""
    from prefect import flow

    from extractors.ingest.records import find_inputs
    from flows.build import chunks, read_shard
    from flows.config import PrivacyConfig

    files = [(str(p), None, str(inputs)) for p in find_inputs([inputs])]
    shards = chunks(files, 1)

    @flow(name="bench-prefect-overhead")
    def tasks_flow() -> int:
        return sum(
            len(f.result().read.trajectories) for f in [read_shard.submit(s, PrivacyConfig()) for s in shards]
        )

    tasks_flow()  # start the server and warm imports outside the timing
    t0 = time.perf_counter()
    direct = sum(len(read_shard.fn(s, PrivacyConfig()).read.trajectories) for s in shards)
    plain = time.perf_counter() - t0
    t0 = time.perf_counter()
    via = tasks_flow()
    prefect = time.perf_counter() - t0
    assert via == direct
    return {
        "shards": len(shards),
        "plain_s": round(plain, 3),
        "prefect_s": round(prefect, 3),
        "ratio": round(prefect / plain, 3),
        "overhead_per_shard_ms": round((prefect - plain) / len(shards) * 1000, 2),
    }


def warm_vs_cold(inputs: Path, work: Path) -> dict:
    """Cold build then warm rebuild with the OpenAI generator against the 100 ms stand-in."""
    from flows.build import run_build
    from tests.servers.llm import RESPONDERS, LLMStandInServer

    os.environ["OPENAI_API_KEY"] = KEY
    with LLMStandInServer(latency=0.1, responder=RESPONDERS["distractors"], openai_api_key=KEY) as server:
        cfg = load(config_text(inputs, work / "out-llm", "openai", server.openai_base_url), work)
        t0 = time.perf_counter()
        cold = run_build(cfg)
        cold_s = time.perf_counter() - t0
        cold_requests = server.count()
        t0 = time.perf_counter()
        warm = run_build(cfg)
        warm_s = time.perf_counter() - t0
        warm_requests = server.count() - cold_requests
    assert warm.counts.questions == cold.counts.questions > 0
    return {
        "questions": cold.counts.questions,
        "cold_s": round(cold_s, 3),
        "warm_s": round(warm_s, 3),
        "ratio": round(warm_s / cold_s, 3),
        "goal": WARM_GOAL,
        "cold_requests": cold_requests,
        "warm_requests": warm_requests,
    }


def dask_vs_threads(inputs: Path, work: Path) -> dict:
    """Same offline build on threads and on a 2-worker Dask LocalCluster; candidates must be identical."""
    from flows.build import run_build

    times, outputs = {}, {}
    for runner in ("threads", "dask"):
        out = work / f"out-{runner}"
        cfg = load(config_text(inputs, out, "offline"), work)
        cfg = cfg.model_copy(
            update={"limits": cfg.limits.model_copy(update={"task_runner": runner, "cache": False})}
        )
        t0 = time.perf_counter()
        run_build(cfg)
        times[runner] = time.perf_counter() - t0
        folder = out / "swe_issue_fix" / "bench" / "candidates"
        outputs[runner] = {p.name: p.read_bytes() for p in sorted(folder.glob("*.parquet"))}
    return {
        "threads_s": round(times["threads"], 3),
        "dask_s": round(times["dask"], 3),
        "ratio": round(times["dask"] / times["threads"], 3),
        "identical": outputs["dask"] == outputs["threads"],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=400)
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="aptforge-bench-pipeline-") as tmp:
        work = Path(tmp)
        inputs = work / "inputs"
        write_rows(inputs, args.rows)
        result = {
            "rows": args.rows,
            "prefect": prefect_overhead(inputs),
            "rebuild": warm_vs_cold(inputs, work),
            "dask": dask_vs_threads(inputs, work),
        }
    p, r, d = result["prefect"], result["rebuild"], result["dask"]
    print(
        f"Prefect: {p['shards']} shards, {p['overhead_per_shard_ms']:.1f} ms overhead per shard "
        f"(tasks/plain ratio {p['ratio']:.2f})"
    )
    print(
        f"Rebuild: cold {r['cold_s']:.2f} s ({r['cold_requests']} LLM requests), warm {r['warm_s']:.2f} s "
        f"({r['warm_requests']} requests): ratio {r['ratio']:.2f} (goal <= {WARM_GOAL})"
    )
    print(
        f"Dask: {d['dask_s']:.2f} s vs threads {d['threads_s']:.2f} s (ratio {d['ratio']:.2f}), "
        f"candidates identical: {d['identical']}"
    )
    if args.json_out:
        args.json_out.write_text(json.dumps(result))
    ok = r["warm_requests"] == 0 and d["identical"]
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
