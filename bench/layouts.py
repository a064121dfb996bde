"""What the benchmarks that compare two layouts of one index share (`bench_dedup`, `bench_pool_index`):
each (layout, size) measured in a child process of its own, so each RSS figure is its own."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path


def rss() -> int:
    """This process's resident set size in bytes (what an index adds is read as a difference)."""
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def in_child(script: str, layout: str, n: int) -> dict:
    """`script --measure layout n` in a child process: the JSON line it prints last."""
    done = subprocess.run(
        [sys.executable, script, "--measure", layout, str(n)], capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


#: The goals of a compact layout against the one it replaced: memory per unit, time, flatness.
MEMORY_GOAL = 0.5
TIME_GOAL = 1.1
FLAT_GOAL = 1.2


def verdict(sizes: list[dict], unit: str, units: str, base: str, same: str, json_out: Path | None) -> int:
    """Print and (`json_out`) write the comparison of the layouts over `sizes` (rows with `units`
    (the size), `memory_ratio`, `time_ratio`, `identical` and the compact layout's figures under
    `compact`); 0 when every goal is met. `base` names the old layout, `same` what must be equal."""
    memory = max(r["memory_ratio"] for r in sizes)
    speed = max(r["time_ratio"] for r in sizes)
    flat = sizes[-1]["compact"][f"bytes_per_{unit}"] / sizes[0]["compact"][f"bytes_per_{unit}"]
    equal = all(r["identical"] for r in sizes)
    ok = memory <= MEMORY_GOAL and speed <= TIME_GOAL and flat <= FLAT_GOAL and equal
    print(
        f"compact / {base}: memory x{memory:.2f} (goal <= {MEMORY_GOAL}), time x{speed:.2f} "
        f"(goal <= {TIME_GOAL}); bytes per {unit} {sizes[-1][units]:,} / {sizes[0][units]:,} {units} "
        f"x{flat:.2f} (goal <= {FLAT_GOAL}); same {same}: {equal}: {'met' if ok else 'missed'}"
    )
    if json_out:
        json_out.write_text(
            json.dumps(
                {
                    "sizes": sizes,
                    "memory_ratio": round(memory, 3),
                    "memory_goal": MEMORY_GOAL,
                    "time_ratio": round(speed, 3),
                    "time_goal": TIME_GOAL,
                    "flat_ratio": round(flat, 3),
                    "flat_goal": FLAT_GOAL,
                    "identical": equal,
                }
            )
        )
    return 0 if ok else 1


def arguments(doc: str, sizes: list[int]) -> argparse.Namespace:
    """A layout benchmark's command line: `--sizes`, `--json-out`, and the child's `--measure layout n`."""
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=sizes)
    parser.add_argument("--measure", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--json-out", type=Path, help="also write the figures as JSON here (bench/run.py)")
    return parser.parse_args()
