"""Offline generation scaling: generate time per gold step at 1,000 / 5,000 / 20,000 gold steps.

Why: the offline generator used to rank the whole task pool for every step (all-pairs), so the
generate stage grew quadratically (30 s for 1,500 gold steps, 329 s for 6,000). It now retrieves
candidates from an index built once per pool (MinHash LSH Forest per repository), so the time per
gold step must stay flat: the goal is per-step time at the largest size within 1.5x of the
smallest (the baseline, measured in the same run on the same machine).

What it does: builds seeded synthetic plan-like gold steps (50 repositories, 5 runs per instance,
10 steps per run, "I need to <verb> `<name>` ..." texts, a few own candidates each like the SWE
extractor's), then runs `OfflineGenerator.generate` over shards of 200 steps against the whole
pool, exactly as the build's generate stage does, and reports seconds per 1,000 steps per size.

Usage: `.venv/bin/python bench/bench_offline.py [--sizes 1000 5000 20000]`.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from generators.base import PoolEntry  # noqa: E402
from generators.offline import OfflineGenerator  # noqa: E402
from schemas import Candidate, GoldStep, Provenance, Question  # noqa: E402

GOAL = 1.5
SEED = 20261130
SHARD = 200
VERBS = ["look at", "open", "modify", "run", "inspect", "search for", "check", "update", "read", "fix"]
WORDS = ["parser", "writer", "token", "quote", "field", "model", "query", "form", "field_name", "path"]
PROV = Provenance(source_file="bench", source_format="bench", extractor="swe_issue_fix")


def golds(n: int) -> list[GoldStep]:
    """`n` seeded plan-like gold steps over 50 repositories, 5 runs per instance, 10 steps per run."""
    rng = random.Random(SEED)
    out = []
    for i in range(n):
        run, step = divmod(i, 10)
        instance = run // 5
        repo = instance % 50
        name = f"{rng.choice(WORDS)}_{rng.randrange(400)}"
        text = f"I need to {rng.choice(VERBS)} `{name}` in `pkg{repo}/{rng.choice(WORDS)}.py` {rng.choice(WORDS)}"
        own = tuple(
            Candidate(
                text=text.replace(name, f"{rng.choice(WORDS)}_{rng.randrange(400)}"),
                origin="rule:wrong_target",
            )
            for _ in range(rng.randrange(0, 3))
        )
        out.append(
            GoldStep(
                step_id=f"s{i}",
                scenario="swe_issue_fix",
                task="plan",
                form="mcq",
                trajectory_id=f"run{run}",
                step_index=step,
                gold=text,
                fields={"trajs": "[]"},
                candidates=own,
                group=f"repo{repo}__repo{repo}-{instance}",
                provenance=PROV,
            )
        )
    return out


def measure(n: int) -> dict[str, float]:
    """Seconds per 1,000 gold steps to generate `n` steps, shard by shard, against the whole pool."""
    steps = golds(n)
    pool = [PoolEntry(g.step_id, g.trajectory_id, g.group, g.gold) for g in steps]
    generator = OfflineGenerator(seed=SEED)
    start = time.perf_counter()
    made = 0
    for k in range(0, n, SHARD):
        made += sum(isinstance(q, Question) for q in generator.generate(steps[k : k + SHARD], pool, 4))
    seconds = time.perf_counter() - start
    return {
        "steps": n,
        "seconds": round(seconds, 3),
        "per_1k_s": round(seconds / n * 1000, 4),
        "questions": made,
    }


def main() -> int:
    """Entry point."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 5000, 20000])
    parser.add_argument("--json-out", type=Path, help="also write the figures as JSON here (bench/run.py)")
    args = parser.parse_args()
    rows = [measure(n) for n in args.sizes]
    for r in rows:
        print(
            f"{r['steps']:>7} gold steps: {r['seconds']:8.2f} s, {r['per_1k_s']:.3f} s per 1,000 ({r['questions']} questions)"
        )
    ratio = rows[-1]["per_1k_s"] / rows[0]["per_1k_s"]
    print(f"per-step time, {rows[-1]['steps']} vs {rows[0]['steps']} steps: {ratio:.2f}x (goal <= {GOAL})")
    if args.json_out:
        args.json_out.write_text(json.dumps({"sizes": rows, "ratio": round(ratio, 3), "goal": GOAL}))
    return 0 if ratio <= GOAL else 1


if __name__ == "__main__":
    sys.exit(main())
