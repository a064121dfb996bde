"""LLM generation throughput: aptforge's LLM layer against the bare official SDK, same server, same run.

Why: distractor generation must not be slower than calling the SDK by hand. Goal: aptforge's
throughput is at least 0.9 of the bare SDK's (`AsyncOpenAI` + `asyncio.Semaphore`), on the same
stand-in server at the same concurrency, measured in this same run.

What it does:
1. starts the stand-in server (`python -m tests.servers.llm`) in a subprocess, with 100 ms latency and the
   distractor responder, so its CPU is not charged to the client;
2. makes N synthetic `swe_issue_fix/plan` gold steps (distinct runs, about 2 KB of context each) and
   the request bodies aptforge sends for them;
3. reference: the bare SDK sends those N bodies with C in flight and reads each reply's text; in the
   re-ask case (the server's `flaky_distractors` responder answers about 1 first attempt in 8 with
   prose) it re-asks, as aptforge does, each item whose reply is not JSON, with the same
   second-attempt body, so both make the same requests (~850 for 760 items) and re-asks are on the
   critical path of both;
4. aptforge: the `openai` generator (prompt rendering, SQLite response cache, ledger, limiter,
   tenacity, parse and quality rules, Questions) generates for the same N steps from 5 shards in 4
   threads, as the build flow does; every step must become a Question;
5. alternates the two (`--rounds` times each; the best run of each filters out interference from
   other processes on a shared machine) and prints, for the best run of each: wall time,
   throughput, the ratio aptforge / reference, each one's ratio to the ideal N x latency / C, and the
   client CPU seconds per 1,000 requests (getrusage of this process).
6. the flow case: the build flow itself (`run_build`, openai generator, Prefect shard tasks on threads,
   the flaky server) on ~680 seeded SWE-smith-like rows; its generate-stage time (report timings)
   against the bare loop replaying the very requests the build made (read from its response cache),
   each re-ask sent once its first attempt's reply is in.
Exits 1 when a throughput ratio misses the goal.

Usage: `.venv/bin/python bench/bench_llm.py [--n 1000] [--reask-n 760] [--stage-rows 680] [--concurrency 16]
[--latency 0.1] [--rounds 3] [--only plain|reasks|stage]`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
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
from generators.llm.engine import Limiter, LLMEngine, LLMFailure  # noqa: E402
from generators.llm.generator import check_output  # noqa: E402
from generators.llm.ledger import Ledger, Price  # noqa: E402
from generators.llm.openai_gen import OpenAIGenerator  # noqa: E402
from generators.llm.prompting import PromptLibrary  # noqa: E402
from generators.llm.store import ResponseStore  # noqa: E402
from schemas import GoldStep, Provenance, Question, content_id  # noqa: E402
from tests.servers.llm.responders import UNUSABLE_REPLY  # noqa: E402

RATIO_GOAL = 0.9
KEY = "bench-key"


class Run(NamedTuple):
    wall: float
    cpu: float
    requests: int


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


def _usable(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except ValueError:
        return False


def run_reference(
    base_url: str, bodies: list[dict], reasks: list[dict], warm: list[dict], concurrency: int
) -> Run:
    async def main() -> Run:
        client = openai.AsyncOpenAI(api_key=KEY, base_url=base_url, max_retries=2)
        sem = asyncio.Semaphore(concurrency)
        sent = 0

        async def ask(body: dict) -> str:
            nonlocal sent
            async with sem:
                completion = await client.chat.completions.create(**body)
                sent += 1
                return completion.choices[0].message.content or ""

        async def one(i: int, pool: list[dict], again: list[dict]) -> str:
            text = await ask(pool[i])
            return text if _usable(text) or not again else await ask(again[i])

        await asyncio.gather(*(one(i, warm, []) for i in range(len(warm))))
        sent = 0
        start, cpu = time.perf_counter(), cpu_seconds()
        texts = await asyncio.gather(*(one(i, bodies, reasks) for i in range(len(bodies))))
        run = Run(time.perf_counter() - start, cpu_seconds() - cpu, sent)
        await client.close()
        assert all(texts)
        return run

    return asyncio.run(main())


def run_aptforge(base_url: str, items: list[GoldStep], warm: list[GoldStep], concurrency: int) -> Run:
    with tempfile.TemporaryDirectory() as tmp:
        gen = generator(base_url, concurrency, Path(tmp) / "cache.sqlite")
        try:
            list(gen.generate(warm, [], 4))
            warm_requests = gen.usage_report().total.requests
            shards = [items[i : i + 200] for i in range(0, len(items), 200)]
            start, cpu = time.perf_counter(), cpu_seconds()
            with ThreadPoolExecutor(4) as pool:
                outs = [
                    o for shard in pool.map(lambda s: list(gen.generate(s, [], 4)), shards) for o in shard
                ]
            run = Run(
                time.perf_counter() - start,
                cpu_seconds() - cpu,
                gen.usage_report().total.requests - warm_requests,
            )
        finally:
            gen.close()
    bad = [o for o in outs if not isinstance(o, Question)]
    if bad:
        raise SystemExit(f"aptforge made {len(bad)} Problems, e.g. {bad[0]}")
    return run


def run_case(args: argparse.Namespace, n: int, reasks: bool) -> dict:
    """One case on its own server: the best of `--rounds` runs of each side, as figures."""
    responder = "flaky_distractors" if reasks else "distractors"
    server = subprocess.Popen(
        [sys.executable, "-m", "tests.servers.llm", "--latency", str(args.latency), "--responder", responder]
        + ["--api-key", KEY],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert server.stdout is not None
        base_url = server.stdout.readline().strip() + "/v1"
        every = steps(n + 32)
        items, warm = every[:n], every[n:]
        shaper = generator(base_url, 1, Path(tempfile.mkdtemp()) / "unused.sqlite")
        bodies = [shaper.build_prompt(s, 3).body for s in items]
        # the second attempt aptforge sends after a reply that is not JSON (the same body here)
        not_json = LLMFailure("llm_invalid_output", check_output(UNUSABLE_REPLY, items[0], 3).reason)
        again = [shaper.build_prompt(s, 3, 2, not_json).body for s in items] if reasks else []
        warm_bodies = [shaper.build_prompt(s, 3).body for s in warm]
        shaper.close()
        refs, ours = [], []
        for _ in range(args.rounds):
            refs.append(run_reference(base_url, bodies, again, warm_bodies, args.concurrency))
            ours.append(run_aptforge(base_url, items, warm, args.concurrency))
    finally:
        server.terminate()
        server.wait(timeout=10)
    ref, our = min(refs), min(ours)
    # requests per second: aptforge may re-ask an item the bare loop keeps (its quality rules refuse
    # a reply that is JSON but unusable), so the two request counts can differ by a few
    ideal = ref.requests * args.latency / args.concurrency
    ratio = (our.requests / our.wall) / (ref.requests / ref.wall)
    per_k = 1000 / ref.requests
    label = f"{n} items, {ref.requests} / {our.requests} requests (SDK / aptforge)" + (
        " (re-asks)" if reasks else ""
    )
    print(
        f"LLM generations: {label}, latency={args.latency * 1000:.0f} ms, concurrency={args.concurrency}, "
        f"ideal {ideal:.2f} s (best of {args.rounds} runs each)"
    )
    for name, r in (("bare SDK (AsyncOpenAI + semaphore)", ref), ("aptforge openai generator", our)):
        print(
            f"  {name + ':':<36}{r.wall:6.2f} s  {r.requests / r.wall:7.1f} req/s  "
            f"ratio to ideal {ideal / r.wall:.2f}  CPU {r.cpu * 1000 / r.requests:.2f} s per 1,000 requests"
        )
    print(f"  throughput ratio aptforge / bare SDK: {ratio:.2f} (goal >= {RATIO_GOAL})")
    return {
        "n": n,
        "requests": ref.requests,
        "aptforge_requests": our.requests,
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
        "aptforge_cpu_per_1k_s": round(our.cpu * 1000 / our.requests, 3),
    }


_NOTE = "\n\nYour previous reply could not be used:"


def _user_text(body: dict) -> str:
    return str(body["messages"][-1]["content"])


def logged_requests(cache: Path) -> tuple[list[dict], list[dict | None]]:
    """The build's requests from its response cache, oldest first: first attempts, and for each the
    re-ask sent after it (None when its first reply was used)."""
    import sqlite3

    import orjson

    with sqlite3.connect(cache) as db:
        rows = [
            orjson.loads(r[0])["body"] for r in db.execute("SELECT request FROM responses ORDER BY created")
        ]
    firsts = [b for b in rows if _NOTE not in _user_text(b)]
    by_text = {_user_text(b): i for i, b in enumerate(firsts)}
    again: list[dict | None] = [None] * len(firsts)
    for body in rows:
        if _NOTE in _user_text(body):
            again[by_text[_user_text(body).split(_NOTE)[0]]] = body
    return firsts, again


def run_stage(args: argparse.Namespace) -> dict:
    """The build flow's generate stage (Prefect shard tasks on threads, the build's one generator)
    with re-asks, against the bare loop sending the same requests, re-asks after their first reply."""
    sys.path.insert(0, str(ROOT / "bench"))
    from bench_pipeline import config_text, load, write_rows

    from flows.build import run_build

    server = subprocess.Popen(
        [sys.executable, "-m", "tests.servers.llm", "--latency", str(args.latency), "--responder"]
        + ["flaky_distractors", "--api-key", KEY],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    os.environ["OPENAI_API_KEY"] = KEY
    stages, refs = [], []
    try:
        assert server.stdout is not None
        base_url = server.stdout.readline().strip() + "/v1"
        with tempfile.TemporaryDirectory(prefix="aptforge-bench-llm-") as tmp:
            work = Path(tmp)
            write_rows(work / "inputs", args.stage_rows)
            for i in range(args.stage_rounds):
                out = work / f"out-{i}"
                config = json.loads(config_text(work / "inputs", out, "openai", base_url))
                config["generator"]["max_concurrency"] = args.concurrency
                config["limits"] = {"shard_size": args.stage_shard_size}  # else the shipped defaults
                report = run_build(load(json.dumps(config), work)).model_dump(mode="json")
                stages.append(report["timings_s"]["generate"])
                requests = report["llm"]["total"]["requests"]
                questions = report["counts"]["questions"]
            firsts, again = logged_requests(out / "llm-cache.sqlite")
            for _ in range(args.rounds):
                # the bare loop re-asks an item whose reply is not JSON: exactly the items logged with a re-ask
                second = [a if a is not None else f for a, f in zip(again, firsts, strict=True)]
                refs.append(run_reference(base_url, firsts, second, [], args.concurrency))
    finally:
        server.terminate()
        server.wait(timeout=10)
    ref, stage = min(refs), min(stages)
    if ref.requests != requests:
        raise SystemExit(f"the replay made {ref.requests} requests, the build {requests}")
    ideal = requests * args.latency / args.concurrency
    ratio = ref.wall / stage
    print(
        f"LLM generate stage of the build flow: {len(firsts)} items, {requests} requests "
        f"({requests - len(firsts)} re-asks), {questions} questions, ideal {ideal:.2f} s"
    )
    print(f"  bare SDK replay of the same requests: {ref.wall:6.2f} s   generate stage: {stage:6.2f} s")
    print(f"  throughput ratio generate stage / bare SDK: {ratio:.2f} (goal >= {RATIO_GOAL})")
    return {
        "items": len(firsts),
        "requests": requests,
        "questions": questions,
        "ideal_s": round(ideal, 3),
        "reference_s": round(ref.wall, 3),
        "stage_s": round(stage, 3),
        "throughput_ratio": round(ratio, 3),
        "throughput_goal": RATIO_GOAL,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=1000, help="items of the case without re-asks")
    parser.add_argument("--reask-n", type=int, default=760, help="items of the re-ask case (~855 requests)")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--stage-rows", type=int, default=680, help="rows of the flow case (~850 requests)")
    parser.add_argument("--stage-rounds", type=int, default=2, help="builds of the flow case (best one)")
    parser.add_argument(
        "--stage-shard-size", type=int, default=200, help="limits.shard_size of the flow case"
    )
    parser.add_argument("--only", choices=("plain", "reasks", "stage"), help="run one case")
    parser.add_argument("--json-out", type=Path, help="also write the figures as JSON here (bench/run.py)")
    args = parser.parse_args()
    figures: dict = {}
    if args.only in (None, "plain"):
        figures.update(run_case(args, args.n, reasks=False))
    if args.only in (None, "reasks"):
        figures["reasks"] = run_case(args, args.reask_n, reasks=True)
    if args.only in (None, "stage"):
        figures["stage"] = run_stage(args)
    if args.json_out:
        args.json_out.write_text(json.dumps(figures))
    cases = (figures, figures.get("reasks", {}), figures.get("stage", {}))
    ratios = [f["throughput_ratio"] for f in cases if "throughput_ratio" in f]
    return 0 if all(r >= RATIO_GOAL for r in ratios) else 1


if __name__ == "__main__":
    raise SystemExit(main())
