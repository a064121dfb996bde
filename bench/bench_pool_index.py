"""Pool index memory: bytes per entry of the offline generator's index of a task pool, at several sizes.

Why: the generate stage holds the index of each MCQ task's pool (every gold step of the task, the
distractors other runs offer) while that task's shards run. Laid out as it was (each entry's tokens
a frozenset of its own strings; datasketch's `MinHashLSHForest` per large family and over the whole
pool), the index took about 3.2 KB per entry: 0.7 GB for the 225,000 plan steps of 100,000 small
rows, the largest thing the build held at the end of its generate stage. `PoolIndex` now keeps each
entry's tokens as a tuple of strings shared across the pool and its forests as `LshForest` arrays.
Goals: bytes per entry at most half the old layout's (`ForestLayout`, the baseline, measured in
the same run), queries no slower (within 1.1x, build and queries), flat per entry from the
smallest size to the largest (within 1.2x), and the same answers to every query.

What it does: seeded pool entries, half like the scale benchmark's small rows (a module of their
own, so every entry is its own family and only the whole-pool forest holds it), half plan steps
of runs of 50 repositories (families of thousands: a family forest and the whole-pool forest);
each (layout, size) in its own child process: RSS after the index is built less RSS before (the
entries are made first), the seconds to build it, then 2,000 seeded steps' queries (their
seconds, and a digest of every answer).

Usage: `.venv/bin/python bench/bench_pool_index.py [--sizes 25000 75000 225000]`.
"""

from __future__ import annotations

import gc
import hashlib
import json
import random
import sys
import time
from collections.abc import Iterable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.layouts import arguments, in_child, rss, verdict  # noqa: E402
from generators.base import PoolEntry  # noqa: E402
from generators.offline import _NUM_PERM, _TREES, PoolIndex, family, rank_plan  # noqa: E402
from generators.text import tokens  # noqa: E402
from schemas import GoldStep, Provenance  # noqa: E402

SEED = 20261207
QUERIES = 2_000
NEED = 3
EXACT_BELOW = 256
PROV = Provenance(source_file="bench", source_format="bench", extractor="swe_issue_fix")
VERBS = ["look at", "open", "modify", "run", "inspect", "search for", "check", "update", "read", "fix"]
WORDS = ["parser", "writer", "token", "quote", "field", "model", "query", "form", "field_name", "path"]


class _DatasketchForest:
    """A datasketch `MinHashLSHForest` answering `LshForest.query` (hash values in, keys out)."""

    def __init__(self, members: Iterable[int], signatures: np.ndarray, trees: int) -> None:
        from datasketch import MinHash, MinHashLSHForest

        self._minhash = MinHash
        self._forest = MinHashLSHForest(num_perm=signatures.shape[1], l=trees)
        for i in members:
            self._forest.add(
                i, MinHash(num_perm=signatures.shape[1], hashvalues=signatures[i], scheme="affine32")
            )
        self._forest.index()

    def query(self, sig: np.ndarray, n: int) -> list[int]:
        mh = self._minhash(num_perm=len(sig), hashvalues=sig, scheme="affine32")
        return self._forest.query(mh, n)


class ForestLayout(PoolIndex):
    """The baseline: `PoolIndex` as it was laid out (each entry's tokens a frozenset of its own
    strings, datasketch's forests) over the same signatures and members, with `PoolIndex.query`."""

    def __init__(self, pool: list[PoolEntry], need: int, seed: int, exact_below: int) -> None:
        from datasketch import MinHash

        self.pool = pool
        self.tokens = [tokens(e.text) for e in pool]  # type: ignore[misc]
        self.lengths = [len(e.text) for e in pool]
        self.plan = rank_plan(pool, need, seed)
        self.exact_below = exact_below
        self.retrievable = any(e.retrievable for e in pool)
        self._perms = MinHash(num_perm=_NUM_PERM, seed=1, scheme="affine32").permutations
        self.families = {}
        for i, e in enumerate(pool):
            self.families.setdefault(family(e.group), []).append(i)
        self.forests, self.everything = {}, None
        big = [f for f, members in self.families.items() if len(members) > exact_below]
        if self.retrievable and (big or len(pool) > exact_below):
            signatures = self._signatures()
            for f in big:
                self.forests[f] = _DatasketchForest(self.families[f], signatures, _TREES)  # type: ignore[assignment]
            if len(pool) > exact_below:
                self.everything = _DatasketchForest(range(len(pool)), signatures, _TREES)  # type: ignore[assignment]


LAYOUTS = {"datasketch": ForestLayout, "compact": PoolIndex}


def entries(n: int) -> list[PoolEntry]:
    """`n` seeded pool entries: even ones small-row steps (a module of their own), odd ones plan
    steps of runs of 50 repositories (10 steps a run, 5 runs an instance)."""
    rng = random.Random(SEED)
    out = []
    for i in range(n):
        if i % 2 == 0:
            module = f"mod_{rng.getrandbits(40):010x}"
            text = rng.choice(
                [
                    f"I need to read {module}.py to find LIMIT",
                    f"I need to set LIMIT to {rng.randrange(10**6)} in {module}.py",
                    f"I need to check that {module}.py now reads the new LIMIT",
                ]
            )
            out.append(PoolEntry(f"s{i}", f"t{i // 6}", f"small__{module}.{i}", text))
        else:
            run = i // 20
            repo = (run // 5) % 50
            name = f"{rng.choice(WORDS)}_{rng.randrange(400)}"
            text = f"I need to {rng.choice(VERBS)} `{name}` in `pkg{repo}/{rng.choice(WORDS)}.py` {rng.choice(WORDS)}"
            out.append(PoolEntry(f"s{i}", f"r{run}", f"org__pkg{repo}-{run // 5}", text))
    return out


def queries(pool: list[PoolEntry]) -> list[GoldStep]:
    """`QUERIES` seeded steps of the pool (the index never answers a step with itself or its run)."""
    rng = random.Random(SEED + 1)
    picked = sorted(rng.sample(range(len(pool)), min(QUERIES, len(pool))))
    return [
        GoldStep(
            step_id=pool[i].step_id,
            scenario="swe_issue_fix",
            task="plan",
            trajectory_id=pool[i].trajectory_id,
            form="mcq",
            step_index=0,
            group=pool[i].group,
            gold=pool[i].text,
            provenance=PROV,
        )
        for i in picked
    ]


def measure(layout: str, n: int) -> dict:
    """One layout at one size, in this process."""
    pool = entries(n)
    steps = queries(pool)
    gc.collect()
    before = rss()
    start = time.perf_counter()
    index = LAYOUTS[layout](pool, NEED, SEED, EXACT_BELOW)
    build = time.perf_counter() - start
    gc.collect()
    held = rss() - before
    answers = hashlib.blake2b(digest_size=16)
    start = time.perf_counter()
    found = [index.query(step, 2 * NEED) for step in steps]
    seconds = time.perf_counter() - start
    for got in found:
        answers.update(json.dumps(got).encode())
    return {
        "layout": layout,
        "entries": n,
        "bytes_per_entry": held / n,
        "build_us_per_entry": 1e6 * build / n,
        "us_per_query": 1e6 * seconds / len(steps),
        "answers": answers.hexdigest(),
    }


def main() -> int:
    args = arguments(__doc__, [25_000, 75_000, 225_000])
    if args.measure:
        print(json.dumps(measure(args.measure[0], int(args.measure[1]))))
        return 0
    sizes = []
    for n in args.sizes:  # the two layouts one after the other at each size: seconds apart
        base, ours = in_child(__file__, "datasketch", n), in_child(__file__, "compact", n)
        row = {
            "entries": n,
            "datasketch": base,
            "compact": ours,
            "memory_ratio": ours["bytes_per_entry"] / base["bytes_per_entry"],
            "build_ratio": ours["build_us_per_entry"] / base["build_us_per_entry"],
            "query_ratio": ours["us_per_query"] / base["us_per_query"],
            "identical": ours["answers"] == base["answers"],
        }
        row["time_ratio"] = max(row["build_ratio"], row["query_ratio"])
        sizes.append(row)
        print(
            f"{n:>8,} entries: bytes per entry {ours['bytes_per_entry']:6.0f} / {base['bytes_per_entry']:6.0f} "
            f"(x{row['memory_ratio']:.2f}), build us per entry {ours['build_us_per_entry']:5.0f} / "
            f"{base['build_us_per_entry']:5.0f} (x{row['build_ratio']:.2f}), us per query "
            f"{ours['us_per_query']:5.0f} / {base['us_per_query']:5.0f} (x{row['query_ratio']:.2f}), "
            f"same answers: {row['identical']}",
            flush=True,
        )
    return verdict(sizes, "entry", "entries", "datasketch layout", "answers", args.json_out)


if __name__ == "__main__":
    sys.exit(main())
