"""Centrality benchmark: the `central` baseline (rapidfuzz) against difflib, measured in the same run.

Why: the "pick the most central option" baseline (APTBench.md §8) compares every pair of options
of every item. With difflib's SequenceMatcher (what §8 used) that is slow on long options: issue_fix
locate windows reach 1,785 lines. aptforge uses rapidfuzz's normalised Indel similarity over word
tokens instead; this benchmark checks it is much faster (goal: at least 5x) and prints how its
accuracy as a gold detector compares with difflib's on the same items.

What it does: takes the MCQ items of APTBench's env_setup/error and issue_fix/locate from
`$APTFORGE_SHARED/aptbench-reference` (or `../shared`), or, without them, seeded synthetic
locate-like items (shifted windows of a generated file); scores centrality with (1) difflib ratio
on the same normalised texts (the baseline) and (2) `generators.quality.baselines.centrality`; prints
times, the speed ratio, each method's accuracy and how often they pick the same option.
Exits 1 when the ratio misses the goal.

Items whose options total more than `--max-chars` (default 20,000) are left out: difflib alone
needs about ten minutes on all of locate (594 s measured here on all 420 items).

Usage: `.venv/bin/python bench/bench_centrality.py [--repeat 1] [--max-chars 20000]`.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from generators.quality.audit import parse_choices  # noqa: E402
from generators.quality.baselines import centrality, credit  # noqa: E402
from generators.text import normalise  # noqa: E402

RATIO_GOAL = 5.0
SEED = 20261130


def difflib_centrality(options: list[str]) -> list[float]:
    """Mean difflib ratio of each option to the others (the §8 heuristic, on normalised text)."""
    texts = [normalise(o) for o in options]
    n = len(texts)
    sims = [[1.0] * n for _ in range(n)]
    for i in range(n):
        for j in range(i + 1, n):
            sims[i][j] = sims[j][i] = difflib.SequenceMatcher(
                None, texts[i], texts[j], autojunk=False
            ).ratio()
    return [(sum(row) - 1.0) / (n - 1) for row in sims]


def reference_items() -> list[tuple[list[str], int]]:
    """MCQ items of the two reference files, when the shared folder is there."""
    shared = Path(os.environ.get("APTFORGE_SHARED") or ROOT.parent / "shared")
    items = []
    for task, sep in (("env_setup/error", " "), ("issue_fix/locate", "\n")):
        path = shared / "aptbench-reference" / task / "input_data.jsonl"
        if not path.is_file():
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            opts = list(parse_choices(row["choices"], sep))
            gold = "ABCDEFG".find(row["answer"])
            if len(opts) >= 2 and 0 <= gold < len(opts):
                items.append((opts, gold))
    return items


def synthetic_items(n: int = 200) -> list[tuple[list[str], int]]:
    """Locate-like items: a window of a generated file and three shifted windows of the same length."""
    rng = random.Random(SEED)
    words = [
        f"{a}{b}"
        for a in ("value", "index", "parser", "result", "token", "field", "buffer", "count")
        for b in ("", "_a", "_b", "_len", "_max", "_tmp", "_ok", "_out")
    ]
    items = []
    for _ in range(n):
        lines = [f"    {rng.choice(words)} = {rng.choice(words)}({rng.randint(0, 99)})" for _ in range(400)]
        size = rng.randint(5, 80)
        start = rng.randint(size, 400 - 3 * size)
        shifts = [0, -size // 4, size // 2, 3 * size // 4]
        opts = ["\n".join(lines[start + s : start + s + size]) for s in shifts]
        rng.shuffle(opts)
        items.append((opts, opts.index("\n".join(lines[start : start + size]))))
    return items


def run(items: list[tuple[list[str], int]], repeat: int) -> int:
    """Time both methods and print the comparison; returns the exit code."""
    t0 = time.perf_counter()
    for _ in range(repeat):
        slow = [difflib_centrality(o) for o, _ in items]
    t_difflib = (time.perf_counter() - t0) / repeat
    t0 = time.perf_counter()
    for _ in range(repeat):
        fast = [centrality(o) for o, _ in items]
    t_fast = (time.perf_counter() - t0) / repeat
    ratio = t_difflib / t_fast if t_fast else float("inf")
    same = sum(
        max(range(len(a)), key=a.__getitem__) == max(range(len(b)), key=b.__getitem__)
        for a, b in zip(slow, fast, strict=True)
    ) / len(items)
    acc_slow = sum(credit(s, g) for s, (_, g) in zip(slow, items, strict=True)) / len(items)
    acc_fast = sum(credit(s, g) for s, (_, g) in zip(fast, items, strict=True)) / len(items)
    chars = sum(len(o) for opts, _ in items for o in opts)
    print(f"items: {len(items)} ({chars / 1e6:.2f} M option chars)")
    print(f"difflib (baseline): {t_difflib:.3f} s   central accuracy {acc_slow:.1%}")
    print(f"rapidfuzz (ours):   {t_fast:.3f} s   central accuracy {acc_fast:.1%}")
    print(f"speed ratio: {ratio:.1f}x (goal >= {RATIO_GOAL:g}x); same pick on {same:.1%} of items")
    RESULT.update(
        items=len(items),
        difflib_s=round(t_difflib, 4),
        rapidfuzz_s=round(t_fast, 4),
        speedup=round(ratio, 2),
        goal=RATIO_GOAL,
        same_pick=round(same, 4),
    )
    return 0 if ratio >= RATIO_GOAL else 1


#: The figures of the last `run`, for `--json-out`.
RESULT: dict[str, float] = {}


def main() -> int:
    """Entry point."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument(
        "--max-chars",
        type=int,
        default=20000,
        help="skip items whose options total more characters (difflib needs minutes on those)",
    )
    parser.add_argument("--json-out", type=Path, help="also write the figures as JSON here (bench/run.py)")
    args = parser.parse_args()
    items = [it for it in reference_items() if sum(map(len, it[0])) <= args.max_chars]
    print(
        "input:",
        "APTBench reference (env_setup/error + issue_fix/locate)" if items else "synthetic locate-like",
    )
    code = run(items or synthetic_items(), args.repeat)
    if args.json_out:
        args.json_out.write_text(json.dumps(RESULT))
    return code


if __name__ == "__main__":
    sys.exit(main())
