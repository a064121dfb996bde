"""LLM generation throughput: aptforge's LLM layer against the bare official SDK, same server, same run.

Why: distractor generation must not be slower than calling the SDK by hand. Goal: aptforge's
throughput is at least 0.9 of the bare SDK's (`AsyncOpenAI` + `asyncio.Semaphore`), on the same
stand-in server at the same concurrency, measured in this same run.

What it does:
1. starts the stand-in server (`python -m tests.servers.llm`) in a subprocess, with 100 ms latency and the
   distractor responder, so its CPU is not charged to the client;
2. makes N synthetic `swe_issue_fix/plan` gold steps (distinct runs, about 2 KB of context each) and
   the request bodies aptforge sends for them;
3. reference: the bare SDK sends those N bodies with C in flight and reads each reply's text;
4. aptforge: the `openai` generator (prompt rendering, SQLite response cache, ledger, limiter,
   tenacity, parse and quality rules, Questions) generates for the same N steps from 5 shards in 4
   threads, as the build flow does; every step must become a Question;
5. alternates the two (`--rounds` times each; the best run of each filters out interference from
   other processes on a shared machine) and prints, for the best run of each: wall time,
   throughput, the ratio aptforge / reference, each one's ratio to the ideal N x latency / C, and the
   client CPU seconds per 1,000 requests (getrusage of this process).
Exits 1 when the throughput ratio misses the goal.

Usage: `.venv/bin/python bench/bench_llm.py [--n 1000] [--concurrency 16] [--latency 0.1] [--rounds 2]`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import openai  # noqa: E402

from extractors.discovery import discover_extractors, prompt_dirs  # noqa: E402
from generators.llm.clients import OpenAIChat  # noqa: E402
from generators.llm.engine import Limiter, LLMEngine  # noqa: E402
from generators.llm.ledger import Ledger, Price  # noqa: E402
from generators.llm.openai_gen import OpenAIGenerator  # noqa: E402
from generators.llm.prompting import PromptLibrary  # noqa: E402
from generators.llm.store import ResponseStore  # noqa: E402
from schemas import GoldStep, Provenance, Question, content_id  # noqa: E402

RATIO_GOAL = 0.9
KEY = "bench-key"


class Run(NamedTuple):
    wall: float
    cpu: float


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def steps(n: int) -> list[GoldStep]:
    """N distinct plan steps with a small SWE run as context."""
    out = []
    for i in range(n):
        run = [
            {"role": "system", "content": "You are a helpful assistant that can work in a terminal."},
            {
                "role": "user",
                "content": f"<pr_description>\nIssue {i}: parsing `{i} - 2` gives the wrong result. "
                + "The tokenizer treats the minus sign as part of the number. " * 8
                + "\n</pr_description>",
            },
            {"role": "assistant", "plan": f"I need to open tinycalc/lexer_{i}.py"},
            {"role": "tool", "content": "OBSERVATION:\n" + f"{i}: def tokenize(text):\n" * 20},
        ]
        out.append(
            GoldStep(
                step_id=content_id("bench", i),
                scenario="swe_issue_fix",
                task="plan",
                form="mcq",
                trajectory_id=content_id("bench-traj", i),
                step_index=3,
                gold=f"I need to make the tokenizer split `-` from number {i}",
                fields={"trajs": json.dumps(run)},
                provenance=Provenance(source_file="bench", source_format="bench", extractor="bench"),
            )
        )
    return out


def generator(base_url: str, concurrency: int, cache: Path) -> OpenAIGenerator:
    store = ResponseStore(cache)
    ledger = Ledger({"gpt-bench": Price(0.4, 1.6)})
    client = OpenAIChat(openai.AsyncOpenAI(api_key=KEY, base_url=base_url, max_retries=2))
    engine = LLMEngine(client, store, ledger, Limiter(concurrency), secrets=[KEY])
    return OpenAIGenerator(
        runner=engine,
        ledger=ledger,
        prompts=PromptLibrary.load(prompt_dirs(discover_extractors())),
        model="gpt-bench",
        owned=[engine, store],
    )


def run_reference(base_url: str, bodies: list[dict], warm: list[dict], concurrency: int) -> Run:
    async def main() -> Run:
        client = openai.AsyncOpenAI(api_key=KEY, base_url=base_url, max_retries=2)
        sem = asyncio.Semaphore(concurrency)

        async def one(body: dict) -> str:
            async with sem:
                completion = await client.chat.completions.create(**body)
                return completion.choices[0].message.content or ""

        await asyncio.gather(*(one(b) for b in warm))
        start, cpu = time.perf_counter(), cpu_seconds()
        texts = await asyncio.gather(*(one(b) for b in bodies))
        run = Run(time.perf_counter() - start, cpu_seconds() - cpu)
        await client.close()
        assert all(texts)
        return run

    return asyncio.run(main())


def run_aptforge(base_url: str, items: list[GoldStep], warm: list[GoldStep], concurrency: int) -> Run:
    with tempfile.TemporaryDirectory() as tmp:
        gen = generator(base_url, concurrency, Path(tmp) / "cache.sqlite")
        try:
            list(gen.generate(warm, [], 4))
            shards = [items[i : i + 200] for i in range(0, len(items), 200)]
            start, cpu = time.perf_counter(), cpu_seconds()
            with ThreadPoolExecutor(4) as pool:
                outs = [
                    o for shard in pool.map(lambda s: list(gen.generate(s, [], 4)), shards) for o in shard
                ]
            run = Run(time.perf_counter() - start, cpu_seconds() - cpu)
        finally:
            gen.close()
    bad = [o for o in outs if not isinstance(o, Question)]
    if bad:
        raise SystemExit(f"aptforge made {len(bad)} Problems, e.g. {bad[0]}")
    return run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json-out", type=Path, help="also write the figures as JSON here (bench/run.py)")
    args = parser.parse_args()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.servers.llm",
            "--latency",
            str(args.latency),
            "--responder",
            "distractors",
            "--api-key",
            KEY,
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert server.stdout is not None
        base_url = server.stdout.readline().strip() + "/v1"
        items, warm = steps(args.n + 32)[: args.n], steps(args.n + 32)[args.n :]
        shaper = generator(base_url, 1, Path(tempfile.mkdtemp()) / "unused.sqlite")
        bodies = [shaper.build_prompt(s, 3).body for s in items]
        warm_bodies = [shaper.build_prompt(s, 3).body for s in warm]
        shaper.close()
        refs, ours = [], []
        for _ in range(args.rounds):
            refs.append(run_reference(base_url, bodies, warm_bodies, args.concurrency))
            ours.append(run_aptforge(base_url, items, warm, args.concurrency))
    finally:
        server.terminate()
        server.wait(timeout=10)
    ref, our = min(refs), min(ours)
    ideal = args.n * args.latency / args.concurrency
    ratio = ref.wall / our.wall
    per_k = 1000 / args.n
    print(
        f"LLM generations: n={args.n}, latency={args.latency * 1000:.0f} ms, concurrency={args.concurrency}, "
        f"ideal {ideal:.2f} s (best of {args.rounds} runs each)"
    )
    print(
        f"  bare SDK (AsyncOpenAI + semaphore): {ref.wall:6.2f} s  {args.n / ref.wall:7.1f} req/s  "
        f"ratio to ideal {ideal / ref.wall:.2f}  CPU {ref.cpu * per_k:.2f} s per 1,000 requests"
    )
    print(
        f"  aptforge openai generator:          {our.wall:6.2f} s  {args.n / our.wall:7.1f} req/s  "
        f"ratio to ideal {ideal / our.wall:.2f}  CPU {our.cpu * per_k:.2f} s per 1,000 requests"
    )
    print(f"  throughput ratio aptforge / bare SDK: {ratio:.2f} (goal >= {RATIO_GOAL})")
    if args.json_out:
        args.json_out.write_text(
            json.dumps(
                {
                    "n": args.n,
                    "latency_s": args.latency,
                    "concurrency": args.concurrency,
                    "ideal_s": round(ideal, 3),
                    "reference_s": round(ref.wall, 3),
                    "aptforge_s": round(our.wall, 3),
                    "throughput_ratio": round(ratio, 3),
                    "throughput_goal": RATIO_GOAL,
                    "reference_ideal_ratio": round(ideal / ref.wall, 3),
                    "aptforge_ideal_ratio": round(ideal / our.wall, 3),
                    "reference_cpu_per_1k_s": round(ref.cpu * per_k, 3),
                    "aptforge_cpu_per_1k_s": round(our.cpu * per_k, 3),
                }
            )
        )
    return 0 if ratio >= RATIO_GOAL else 1


if __name__ == "__main__":
    raise SystemExit(main())
