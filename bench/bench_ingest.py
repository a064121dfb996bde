"""Ingest benchmark: a >= 1 GB JSONL of SWE-smith-like rows through the reader layer, memory and speed.

Why: JSONL and Parquet inputs must stream (issue 3): reading a file larger than the memory budget
must keep peak RSS flat (goal < 1 GB), and the reader layer should cost at most ~2x a plain
`orjson.loads` per line of the same bytes (the floor any JSON reader pays), measured in this run.

What it does: writes the file in a temp dir from a seeded `random.Random` (row shapes as in
SWE-bench/SWE-smith-trajectories: ~40 KB, 30 messages with text-encoded `<function=...>` calls and
`OBSERVATION:` results), then runs each measurement in its own child process so that each peak RSS
is its own: (1) baseline `orjson.loads` per line (lines read with the reader layer's 256 KiB buffer:
with Python's default 8 KiB a 40 KB line takes several reads and a join, and that floor is 1.7-1.9x
slower, flattering the ratio; it is printed beside), (2) `records.iter_records` (decode layer),
(3) `sniff.read_file` with every discovered reader (decode + sniff + read into `Trajectory`), in
`--rounds` rounds (each mode once per round), and (4) both the reader layer and the baseline in one
child, in alternating slices of 200 rows over the same file (`_interleaved`). The ratio is (4)'s,
the median round's: separate runs are a minute apart, and the speed of a shared machine drifts by
tens of percent within minutes (the ratio of separate runs is printed beside it). Prints sizes,
times, ratios to the baseline and peak RSS; exits 1 when a peak RSS reaches 1 GB.

Usage: `.venv/bin/python bench/bench_ingest.py [--gb 1.05] [--rounds 3] [--keep DIR]`.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from statistics import median

GB = 1024**3
RSS_LIMIT = GB
RATIO_GOAL = 2.0
SEED = 20261130

_WORDS = (
    "the",
    "parser",
    "fails",
    "when",
    "input",
    "is",
    "empty",
    "and",
    "raises",
    "an",
    "index",
    "error",
    "instead",
    "of",
    "returning",
    "none",
    "we",
    "should",
    "check",
    "length",
    "before",
    "indexing",
    "add",
    "a",
    "regression",
    "test",
    "for",
    "this",
    "case",
)


def _text(rng: random.Random, n_words: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(n_words))


def _row(rng: random.Random, i: int) -> dict:
    repo = f"acme__pkg{i % 97}.{rng.getrandbits(32):08x}"
    messages = [
        {"role": "system", "content": "You are a helpful assistant that can interact with a computer."},
        {
            "role": "user",
            "content": f"<uploaded_files>\n/testbed\n</uploaded_files>\n<pr_description>\n"
            f"{_text(rng, 300)}\n</pr_description>",
        },
    ]
    for _ in range(14):
        command = f"grep -rn '{rng.choice(_WORDS)}' /testbed/src | head -n {rng.randint(5, 50)}"
        messages.append(
            {
                "role": "assistant",
                "content": f"{_text(rng, 40)}\n\n<function=bash>\n<parameter=command>"
                f"{command}</parameter>\n</function>",
            }
        )
        messages.append({"role": "user", "content": "OBSERVATION:\n" + _text(rng, rng.randint(100, 700))})
    return {
        "instance_id": repo,
        "traj_id": f"{repo}.{i}",
        "model": "claude-3-7-sonnet",
        "resolved": rng.random() < 0.6,
        "patch": "diff --git a/src/x.py b/src/x.py\n" + _text(rng, 200),
        "messages": messages,
    }


def generate(path: Path, target_bytes: int) -> tuple[int, int]:
    """Write rows until the file holds `target_bytes`; returns (rows, bytes). Memory: a few rows."""
    rng = random.Random(SEED)
    pool = [json.dumps(_row(rng, i)).encode() + b"\n" for i in range(64)]
    rows = size = 0
    with path.open("wb") as f:
        while size < target_bytes:
            line = pool[rows % len(pool)]
            # vary the ids so every row is its own trajectory
            line = line.replace(b'"traj_id": "', f'"traj_id": "r{rows}-'.encode(), 1)
            f.write(line)
            rows += 1
            size += len(line)
    return rows, size


def _measure(mode: str, path: str) -> dict:
    import orjson

    from extractors.discovery import discover_readers
    from extractors.ingest.records import _STREAM_BUFFER, Record, iter_records
    from extractors.ingest.sniff import read_file
    from schemas import Trajectory

    readers = discover_readers()  # imports and discovery are not part of the timed ingest
    start = time.perf_counter()
    count = problems = 0
    if mode == "orjson":
        # the reader layer's buffer: with Python's default 8 KiB a 40 KB line takes several reads and
        # a join, and the floor took 1.7-1.9x as long (what the figure was measured against until stop 50)
        with open(path, "rb", buffering=_STREAM_BUFFER) as f:
            for line in f:
                orjson.loads(line)
                count += 1
    elif mode == "records":
        for rec in iter_records(path):
            count += isinstance(rec, Record)
            problems += not isinstance(rec, Record)
    else:
        for out in read_file(readers, path):
            count += isinstance(out, Trajectory)
            problems += not isinstance(out, Trajectory)
    seconds = time.perf_counter() - start
    return {
        "mode": mode,
        "seconds": seconds,
        "records": count,
        "problems": problems,
        "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    }


#: Rows per slice of the interleaved measurement (about 8 MB of the bench's rows).
SLICE = 200


def _interleaved(path: str) -> dict:
    """The reader layer and the `orjson` floor over the same file, in alternating slices of `SLICE`
    rows in one process: `read_file` yields a slice's runs, then `orjson.loads` parses the same rows
    from a second handle (the reader layer's buffer size), then from a third (Python's default
    buffer), and so on to the end. Each is timed over its slices only, so a change of the machine's
    speed (tens of percent within minutes on a shared one) weighs on all alike; the separate runs
    of `_measure`, a minute apart, are kept for each mode's peak RSS."""
    from itertools import islice

    import orjson

    from extractors.discovery import discover_readers
    from extractors.ingest.records import _STREAM_BUFFER
    from extractors.ingest.sniff import read_file
    from schemas import Trajectory

    readers = discover_readers()
    read = floor = default = 0.0
    runs = lines = 0
    outputs = read_file(readers, path)
    with open(path, "rb", buffering=_STREAM_BUFFER) as f, open(path, "rb") as g:
        while True:
            start = time.perf_counter()
            got = sum(isinstance(o, Trajectory) for o in islice(outputs, SLICE))
            read += time.perf_counter() - start
            start = time.perf_counter()
            n = 0
            for line in islice(f, SLICE):
                orjson.loads(line)
                n += 1
            floor += time.perf_counter() - start
            start = time.perf_counter()
            for line in islice(g, SLICE):
                orjson.loads(line)
            default += time.perf_counter() - start
            runs, lines = runs + got, lines + n
            if not n:
                break
    return {
        "mode": "interleaved",
        "seconds": read,
        "floor_seconds": floor,
        "default_floor_seconds": default,
        "records": runs,
        "lines": lines,
    }


def _child(mode: str, path: Path) -> dict:
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    done = subprocess.run(
        [sys.executable, __file__, "--measure", mode, str(path)],
        capture_output=True,
        text=True,
        env=env,
        cwd=root,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


MODES = ("orjson", "records", "readers")


def main() -> int:
    """Run the benchmark and print its report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--gb", type=float, default=1.05, help="size of the generated JSONL in GiB (>= 1)")
    parser.add_argument(
        "--rounds", type=int, default=3, help="measure each mode this many times, interleaved (median)"
    )
    parser.add_argument("--keep", type=Path, help="write the file here and keep it")
    parser.add_argument("--measure", nargs=2, metavar=("MODE", "PATH"), help=argparse.SUPPRESS)
    parser.add_argument("--json-out", type=Path, help="also write the figures as JSON here (bench/run.py)")
    args = parser.parse_args()
    if args.measure:
        mode, file = args.measure
        print(json.dumps(_interleaved(file) if mode == "interleaved" else _measure(mode, file)))
        return 0
    with tempfile.TemporaryDirectory(prefix="aptforge-bench-") as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / "swe_smith_like.jsonl"
        t0 = time.perf_counter()
        rows, size = generate(path, int(args.gb * GB))
        print(f"generated {path.name}: {rows} rows, {size / GB:.2f} GiB in {time.perf_counter() - t0:.1f} s")
        # Rounds, each measuring every mode once, one after the other: the speed of a shared machine
        # drifts by tens of percent within minutes, so each round's ratios compare runs seconds
        # apart, and the figure is the median round's.
        rounds = [
            {mode: _child(mode, path) for mode in (*MODES, "interleaved")} for _ in range(max(1, args.rounds))
        ]
    labels = {
        "orjson": "baseline: orjson.loads per line",
        "records": "records.iter_records (decode)",
        "readers": "read_file: decode+sniff+read",
    }
    seconds = {mode: [r[mode]["seconds"] for r in rounds] for mode in MODES}
    ratios = {mode: [r[mode]["seconds"] / r["orjson"]["seconds"] for r in rounds] for mode in MODES}
    print(f"{'measure':<34}{'seconds':>9}{'ratio':>8}{'peak RSS':>12}{'records':>10}   ratio per round")
    for mode in MODES:
        peak = max(r[mode]["peak_rss"] for r in rounds)
        print(
            f"{labels[mode]:<34}{median(seconds[mode]):>9.2f}{median(ratios[mode]):>8.2f}"
            f"{peak / 2**20:>9.0f} MiB{rounds[0][mode]['records']:>10}   "
            + " ".join(f"{x:.2f}" for x in ratios[mode])
        )
    worst = max(r[mode]["peak_rss"] for r in rounds for mode in MODES)
    decode, apart = median(ratios["records"]), median(ratios["readers"])
    alternating = [r["interleaved"]["seconds"] / r["interleaved"]["floor_seconds"] for r in rounds]
    ratio = median(alternating)
    against_default = median(
        r["interleaved"]["seconds"] / r["interleaved"]["default_floor_seconds"] for r in rounds
    )
    slow_floor = median(
        r["interleaved"]["default_floor_seconds"] / r["interleaved"]["floor_seconds"] for r in rounds
    )
    print(
        f"{'read_file / orjson, interleaved':<34}{median(r['interleaved']['seconds'] for r in rounds):>9.2f}"
        f"{ratio:>8.2f}{'':>12}{rounds[0]['interleaved']['records']:>10}   "
        + " ".join(f"{x:.2f}" for x in alternating)
    )
    print(
        f"peak RSS {worst / 2**20:.0f} MiB for a {size / GB:.2f} GiB input: "
        f"{'OK' if worst < RSS_LIMIT else 'OVER'} (limit {RSS_LIMIT / 2**20:.0f} MiB)"
    )
    print(
        f"decode ratio {decode:.2f}, full read ratio {ratio:.2f} interleaved in slices of {SLICE} rows "
        f"({apart:.2f} in separate processes; {against_default:.2f} against a floor reading with Python's "
        f"default buffer, itself {slow_floor:.2f}x the floor), median of {len(rounds)} rounds "
        f"(goal <= {RATIO_GOAL}: {'met' if ratio <= RATIO_GOAL else 'missed'})"
    )
    if args.json_out:
        args.json_out.write_text(
            json.dumps(
                {
                    "input_gib": round(size / GB, 3),
                    "rows": rows,
                    "rounds": len(rounds),
                    "baseline_s": round(median(seconds["orjson"]), 3),
                    "decode_ratio": round(decode, 3),
                    "read_ratio": round(ratio, 3),
                    "read_ratios": [round(x, 3) for x in alternating],
                    "read_ratio_apart": round(apart, 3),
                    "read_ratio_default_buffer_floor": round(against_default, 3),
                    "default_buffer_floor_ratio": round(slow_floor, 3),
                    "read_ratios_apart": [round(x, 3) for x in ratios["readers"]],
                    "read_ratio_goal": RATIO_GOAL,
                    "peak_rss_mib": round(worst / 2**20, 1),
                    "peak_rss_goal_mib": RSS_LIMIT / 2**20,
                }
            )
        )
    read_all = all(
        r[mode]["records"] == rows for r in rounds for mode in ("records", "readers", "interleaved")
    )
    read_all = read_all and all(r["interleaved"]["lines"] == rows for r in rounds)
    if not read_all:
        print("error: not every row was read", file=sys.stderr)
        return 1
    return 0 if worst < RSS_LIMIT else 1


if __name__ == "__main__":
    sys.exit(main())
