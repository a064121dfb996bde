"""Dedup index memory: bytes and time per item of one task's near-duplicate index, at several sizes.

Why: the dedup stage holds, per task, what later items are compared with. Laid out as datasketch's
`MinHashLSH` holds it (per item and band the band's values as a bytes key and a set of item ids, and
the item's MinHash object), that is 3.3-3.6 KB per small item: about 1 GB for the 300,000 completion
items of 100,000 small rows, held to the end of the task's dedup. `TaskDedup` keeps the same bands
in a compact index. Goals: bytes per item at most half the `MinHashLSH` layout's (`LshLayout`, the
baseline, measured in the same run), no slower per item (within 1.1x), flat per item from the
smallest size to the largest (within 1.2x), and the same Problems from both.

What it does: seeded items like the scale benchmark's small rows (a one-line task and a few steps
per run, six items per run, about one run in twenty a copy of an earlier one, exact or near), in id
order; each (layout, size) in its own child process: RSS after the items are offered less RSS before
(the items are made one at a time, so what stays is what the index keeps, their ids and golds
included), the seconds spent in `offer`, and a digest of the Problems.

Usage: `.venv/bin/python bench/bench_dedup.py [--sizes 20000 50000 100000]`.
"""

from __future__ import annotations

import gc
import hashlib
import json
import random
import sys
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.layouts import arguments, in_child, rss, verdict  # noqa: E402
from generators.hygiene.dedup import TaskDedup, exact_problem, near_problem  # noqa: E402
from generators.hygiene.dedup import _context as context_of  # noqa: E402
from generators.hygiene.dedup import _ident as ident_of  # noqa: E402
from generators.text import normalise, similarity  # noqa: E402
from schemas import Problem, Provenance, Question  # noqa: E402

SEED = 20261207
PROV = Provenance(source_file="bench", source_format="bench", extractor="swe_issue_fix")


class LshLayout:
    """The baseline: `TaskDedup.offer`'s rule with datasketch's `MinHashLSH` holding the bands and a
    MinHash object, gold and trajectory id kept per item (the layout `TaskDedup` had before)."""

    def __init__(self, threshold: float = 0.9, num_perm: int = 128) -> None:
        from datasketch import MinHashLSH

        self.threshold = threshold
        self._sketcher = TaskDedup(threshold, num_perm)  # its MinHash of a context (nothing kept)
        self._lsh = MinHashLSH(threshold=threshold, num_perm=num_perm)
        self._seen: dict[bytes, str] = {}
        self._kept: dict[str, tuple[object, str, str]] = {}

    def offer(self, q: Question) -> Problem | None:
        ctx = normalise(context_of(q))
        ident = ident_of(ctx, normalise(q.gold))
        if ident in self._seen:
            return exact_problem(q, self._seen[ident])
        mh = self._sketcher.sketch(ctx)
        for other in sorted(self._lsh.query(mh)):
            other_mh, gold, trajectory = self._kept[other]
            if trajectory != q.trajectory_id:
                jac = mh.jaccard(other_mh)
                if jac >= self.threshold and similarity(q.gold, gold) >= self.threshold:
                    return near_problem(q, jac, other)
        self._seen[ident] = q.item_id
        self._lsh.insert(q.item_id, mh)
        self._kept[q.item_id] = (mh, q.gold, q.trajectory_id)
        return None


LAYOUTS = {"minhashlsh": LshLayout, "compact": TaskDedup}


def items(n: int) -> Iterator[Question]:
    """`n` seeded small-row items in id order: six steps per run, each item the run's task and the
    steps before as context and the step's command as gold; about one run in twenty copies an
    earlier one (half of them adding ` -v` to each command: near duplicates, not exact ones)."""
    rng = random.Random(SEED)
    runs: list[tuple[str, int, str]] = []
    for i in range(n):
        run, step = divmod(i, 6)
        if step == 0:
            if runs and rng.random() < 0.05:
                module, value, _ = rng.choice(runs)
                runs.append((module, value, rng.choice(["", " -v"])))
            else:
                runs.append((f"mod_{rng.getrandbits(40):010x}", rng.randrange(10**6), ""))
        module, value, tail = runs[run]
        commands = [
            f"cat {module}.py",
            f"grep -n LIMIT {module}.py",
            f"sed -i 's/LIMIT = 1/LIMIT = {value}/' {module}.py",
            f"python -c 'import {module}; print({module}.LIMIT)'",
            f"git diff {module}.py",
            f"python -m pytest tests/test_{module}.py",
        ]
        seen = [f"{c}\nOBSERVATION: {k}" for k, c in enumerate(commands[:step])]
        yield Question(
            item_id=f"{i:08d}{rng.getrandbits(96):024x}",
            scenario="swe_issue_fix",
            task="action",
            form="completion",
            trajectory_id=f"run{run:09d}",
            step_index=step,
            fields={
                "trajs": "\n".join(
                    [f"<pr_description> {module}.LIMIT must be {value} </pr_description>", *seen]
                )
            },
            gold=commands[step] + tail,
            provenance=PROV,
        )


def measure(layout: str, n: int) -> dict:
    """One layout at one size, in this process."""
    index = LAYOUTS[layout]()
    problems = hashlib.blake2b(digest_size=16)
    counts = {"kept": 0, "duplicate_item": 0, "near_duplicate_item": 0}
    gc.collect()
    before, seconds = rss(), 0.0
    for q in items(n):
        start = time.perf_counter()
        found = index.offer(q)
        seconds += time.perf_counter() - start
        counts["kept" if found is None else found.reason] += 1
        problems.update(b"-" if found is None else found.model_dump_json().encode())
    gc.collect()
    return {
        "layout": layout,
        "items": n,
        "bytes_per_item": (rss() - before) / n,
        "us_per_item": 1e6 * seconds / n,
        "counts": counts,
        "problems": problems.hexdigest(),
    }


def main() -> int:
    args = arguments(__doc__, [20_000, 50_000, 100_000])
    if args.measure:
        print(json.dumps(measure(args.measure[0], int(args.measure[1]))))
        return 0
    sizes = []
    for n in args.sizes:  # the two layouts one after the other at each size: seconds apart
        base, ours = in_child(__file__, "minhashlsh", n), in_child(__file__, "compact", n)
        row = {
            "items": n,
            "minhashlsh": base,
            "compact": ours,
            "memory_ratio": ours["bytes_per_item"] / base["bytes_per_item"],
            "time_ratio": ours["us_per_item"] / base["us_per_item"],
            "identical": ours["problems"] == base["problems"] and ours["counts"] == base["counts"],
        }
        sizes.append(row)
        print(
            f"{n:>8,} items: bytes per item {ours['bytes_per_item']:6.0f} / {base['bytes_per_item']:6.0f} "
            f"(x{row['memory_ratio']:.2f}), us per item {ours['us_per_item']:5.0f} / {base['us_per_item']:5.0f} "
            f"(x{row['time_ratio']:.2f}), {ours['counts']}, same Problems: {row['identical']}",
            flush=True,
        )
    return verdict(sizes, "item", "items", "MinHashLSH layout", "Problems", args.json_out)


if __name__ == "__main__":
    raise SystemExit(main())
