"""Scale benchmark: whole builds of N generated runs, wall time per run and peak RSS of the process tree.

Why: a scheduled rebuild must take a public dataset's worth of runs (50,000-80,000). Every stage
must be linear (or n log n) in its input and memory must stay bounded, so the time per run at the
largest N must stay within 1.5x of its value at the smallest, and the peak RSS of the whole process
tree (the build, its Prefect server, any workers) under 2 GiB and within 1.5x of the smallest's.

What it does, per N: writes a corpus of N SWE-smith rows made from the bundled samples
(`extractors/samples/swe_issue_fix/swesmith_rows.jsonl`), each run with its own names: every code
identifier of the sample (function, module, variable names, not the repository's) gets a per-run
suffix, consistently across the issue, thoughts, commands, observations and patch, so runs stay
coherent and dedup keeps them apart; 50 rows per JSONL file. Then it runs a build of the
`swe_issue_fix` scenario (offline generator, thread runner, the default limits) in a child process
(a warm-up flow first, so Prefect's server start-up is not charged to the build), samples the RSS
of the child and all its descendants every 50 ms, and reads the stage timings from the report.
The floor is a bare `orjson.loads` of every line of the same corpus, timed in this process.

Dask: `--dask-sizes` (default 1,000 and 5,000; `APTFORGE_BENCH_SCALE_DASK_SIZES`) also builds those
sizes on a 2-worker Dask LocalCluster (`limits.task_runner: dask`) and, where threads built the same
size, compares the outputs byte for byte (candidates, quarantine, redactions, the report without
timings and run paths); each row also gives the RSS of the build process alone, flat under Dask (its
largest N against its smallest within `DASK_FLOW_GOAL`): the workers read, keep, extract, generate,
filter, check, write, enqueue and audit, and the flow process holds references and counts.
`make bench` runs the thread sizes and the Dask comparison as two benchmarks (the Dask one builds
5,000 runs on threads and 1,000, 5,000 and 20,000 on Dask, about 17 minutes).

Sizes: 1,000, 5,000 and 20,000 by default (about 15 minutes; the goals are stated at 20,000);
`--sizes 1000 5000` or `APTFORGE_BENCH_SCALE_SIZES=1000,5000` for a quicker run.
Usage: `.venv/bin/python bench/bench_scale.py [--sizes ...] [--json-out FILE] [--keep DIR]`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import orjson  # noqa: E402
import psutil  # noqa: E402

from extractors.ingest.records import _STREAM_BUFFER  # noqa: E402

SAMPLE = ROOT / "extractors" / "samples" / "swe_issue_fix" / "swesmith_rows.jsonl"
TIME_GOAL = 1.5
RSS_GOAL = 1.5
RSS_LIMIT_MIB = 2048
#: The build process's peak RSS under Dask, largest N against smallest (`make bench`: 20,000 against
#: 1,000): flat, as the flow holds references and counts and Dask's scheduler, in the flow process for
#: a LocalCluster, holds a window of shards and short logs (`flows.build.DASK_LOG_LENGTH`). Measured
#: 415 / 381 MiB (1.09); what still grows is the flow's redaction of the questions (it learns every
#: text's digest) and of the Problems, about 1 MiB per 1,000 runs.
DASK_FLOW_GOAL = 1.1
ROWS_PER_FILE = 50
SEED = 20261201
_IDENT = re.compile(r"\b[A-Za-z_][A-Za-z0-9_]{3,}\b")
#: Words of the samples that are not the code's own names: tools, keywords, prose, paths.
_KEEP = frozenset(
    [
        "testbed",
        "python",
        "pytest",
        "bash",
        "submit",
        "command",
        "path",
        "view",
        "create",
        "str_replace",
        "str_replace_editor",
        "old_str",
        "new_str",
        "file_text",
        "insert",
        "undo_edit",
        "function",
        "parameter",
        "example_function_name",
        "example_parameter",
        "OBSERVATION",
        "uploaded_files",
        "pr_description",
        "reproduce",
        "README",
        "import",
        "from",
        "return",
        "None",
        "True",
        "False",
        "self",
        "print",
        "repr",
        "with",
        "open",
        "lambda",
        "class",
        "while",
        "break",
        "continue",
        "pass",
        "raise",
        "except",
        "finally",
        "assert",
        "global",
        "yield",
        "async",
        "await",
        "elif",
        "else",
        "sample",
        "text",
        "lines",
        "line",
        "diff",
        "index",
        "name",
        "note",
        "Description",
        "Expected",
        "Steps",
        "result",
        "results",
        "operator",
        "operators",
        "package",
        "module",
        "modules",
        "file",
        "files",
        "edited",
        "snippet",
        "running",
        "Review",
        "changes",
        "make",
        "sure",
        "they",
        "expected",
        "Edit",
        "again",
        "necessary",
        "Here",
        "first",
        "main",
        "init",
        "__init__",
        "test",
        "tests",
        "tinycalc",
        "slugkit",
        "minicsv",
    ]
)


_CODE_LINE = re.compile(r"^(?:\s+\d+\t|[+\- ](?![+\-]{2} ))(.*)$", re.M)


def _names(row: dict) -> list[str]:
    """The code identifiers of one sample run: names on the code lines of its patch and of the file
    listings in its tool outputs (`cat -n` views), never prose or tool messages."""
    import builtins
    import keyword

    texts = [
        row["patch"],
        *(m["content"] for m in row["messages"] if m["content"].startswith("OBSERVATION:")),
    ]
    code = "\n".join(m.group(1) for text in texts for m in _CODE_LINE.finditer(text))
    skip = _KEEP | set(keyword.kwlist) | set(dir(builtins))
    return sorted({w for w in _IDENT.findall(code) if w not in skip})


def varied_row(template: dict, names: list[str], i: int, rng: random.Random) -> dict:
    """Run `i`: the template with every name renamed `<name>_<per-run suffix>` everywhere it occurs."""
    suffix = {n: "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(5)) for n in names}
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, sorted(names, key=len, reverse=True))) + r")\b")

    def rename(text: str) -> str:
        return pattern.sub(lambda m: f"{m.group(1)}_{suffix[m.group(1)]}", text)

    row = {**template, "messages": [{**m, "content": rename(m["content"])} for m in template["messages"]]}
    row["patch"] = rename(template["patch"])
    tag = f"{i:06d}{suffix[names[0]] if names else ''}"
    for key in ("instance_id", "traj_id", "id"):
        row[key] = f"{template[key]}.r{tag}"
    return row


def small_row(i: int, rng: random.Random) -> dict:
    """A small valid SWE-smith row (about 700 bytes): a short issue, three calls, resolved."""
    mod = "mod_" + "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(8))
    value = rng.randrange(10, 10**6)

    def call(thought: str, command: str) -> dict:
        body = f"<function=bash>\n<parameter=command>{command}</parameter>\n</function>"
        return {"role": "assistant", "content": f"{thought}\n{body}"}

    return {
        "instance_id": f"small__{mod}.{i:06d}",
        "traj_id": f"small.{i:06d}",
        "id": f"small.{i:06d}",
        "resolved": True,
        "patch": f"--- a/{mod}.py\n+++ b/{mod}.py\n@@ -1 +1 @@\n-LIMIT = 1\n+LIMIT = {value}\n",
        "messages": [
            {"role": "system", "content": "You can run bash commands."},
            {"role": "user", "content": f"<pr_description>\n{mod}.LIMIT must be {value}\n</pr_description>"},
            call(f"I need to read {mod}.py to find LIMIT.", f"cat {mod}.py"),
            {"role": "user", "content": "OBSERVATION:\nLIMIT = 1"},
            call(f"I need to set LIMIT to {value} in {mod}.py.", f"sed -i s/1/{value}/ {mod}.py"),
            {"role": "user", "content": "OBSERVATION:\n"},
            call(f"I need to check that {mod}.py now reads {value}.", f"grep LIMIT {mod}.py"),
            {"role": "user", "content": f"OBSERVATION:\nLIMIT = {value}"},
            {"role": "assistant", "content": "Done.\n<function=submit>\n</function>"},
        ],
    }


def write_corpus(folder: Path, n: int, small: bool = False) -> int:
    """N varied runs (or N small ones) in JSONL files of `ROWS_PER_FILE` (x20 when small); returns
    the bytes written."""
    templates = [orjson.loads(line) for line in SAMPLE.read_bytes().splitlines() if line.strip()]
    names = [_names(t) for t in templates]
    rng = random.Random(SEED)
    folder.mkdir(parents=True, exist_ok=True)
    size = 0
    per_file = ROWS_PER_FILE * (20 if small else 1)
    for start in range(0, n, per_file):
        blob = b"".join(
            orjson.dumps(
                small_row(i, rng)
                if small
                else varied_row(templates[i % len(templates)], names[i % len(templates)], i, rng)
            )
            + b"\n"
            for i in range(start, min(n, start + per_file))
        )
        (folder / f"runs-{start:06d}.jsonl").write_bytes(blob)
        size += len(blob)
    return size


def orjson_floor(folder: Path) -> float:
    """Seconds of a bare `orjson.loads` per line over the corpus (best of 3), the lines read with the
    reader layer's 256 KiB buffer (as `bench_ingest`'s floor)."""
    best = float("inf")
    files = sorted(folder.glob("*.jsonl"))
    for _ in range(3):
        start = time.perf_counter()
        for path in files:
            with path.open("rb", buffering=_STREAM_BUFFER) as fh:
                for line in fh:
                    orjson.loads(line)
        best = min(best, time.perf_counter() - start)
    return best


def config_for(inputs: Path, out: Path, runner: str) -> dict:
    return {
        "scenario": "swe_issue_fix",
        "version": "scale",
        "sources": [str(inputs)],
        "seed": 3,
        "out_dir": str(out),
        "tasks": {
            name: dict(max_items_per_trajectory=3, max_context_tokens=16000) for name in ("plan", "action")
        },
        "generator": {"name": "offline"},
        "limits": {"task_runner": runner, "cache": False},
    }


def child_build(config_path: str) -> None:
    """In the child: start Prefect with a trivial flow, then time the build; print the figures."""
    from prefect import flow

    from flows.build import run_build
    from flows.config import load_config

    @flow(name="bench-scale-warmup")
    def warmup() -> int:
        return 1

    warmup()
    config = load_config(config_path)
    start = time.perf_counter()
    report = run_build(config).model_dump(mode="json")
    seconds = time.perf_counter() - start
    print(
        json.dumps(
            {
                "seconds": seconds,
                "timings_s": report["timings_s"],
                "counts": report["counts"],
                "problems_by_reason": report["problems_by_reason"],
            }
        )
    )


def tree_rss(proc: psutil.Process) -> int:
    """RSS of a process and all its descendants, in bytes (those gone meanwhile count 0)."""
    total = 0
    try:
        tree = [proc, *proc.children(recursive=True)]
    except psutil.Error:  # the build itself just ended
        return 0
    for p in tree:
        try:
            total += p.memory_info().rss
        except psutil.Error:
            continue
    return total


def run_child(config_path: Path) -> tuple[dict, int, int]:
    """The child's figures, the peak RSS of its process tree and that of the build process alone."""
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    env.setdefault("PREFECT_LOGGING_LEVEL", "ERROR")
    env.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    env.setdefault("DO_NOT_TRACK", "1")
    child = subprocess.Popen(
        [sys.executable, __file__, "--child", str(config_path)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )
    proc = psutil.Process(child.pid)
    peak = own = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak, own
        while not done.is_set():
            peak = max(peak, tree_rss(proc))
            with contextlib.suppress(psutil.Error):
                own = max(own, proc.memory_info().rss)
            done.wait(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, _ = child.communicate()
    done.set()
    sampler.join()
    if child.returncode != 0:
        raise SystemExit(f"the build of {config_path} failed (exit {child.returncode})")
    return json.loads(out.strip().splitlines()[-1]), peak, own


def outputs_of(out: Path) -> dict[str, bytes]:
    """What a build wrote that must not depend on the runner: candidates, quarantine, redactions, and
    the report without its timings and without what names the run's own folder or config (the paths,
    the config hash and the build key: the two configs differ in `task_runner` and `out_dir`)."""
    folder = out / "swe_issue_fix" / "scale"
    files = {p.name: p.read_bytes() for p in sorted((folder / "candidates").glob("*.parquet"))}
    for name in ("quarantine.jsonl", "redactions.jsonl"):
        files[name] = (folder / name).read_bytes()
    report = json.loads((folder / "report.json").read_text())
    for key in ("timings_s", "output_dir", "report_html", "config_hash", "build_key"):
        report.pop(key, None)
    report.get("review", {}).pop("queue", None)
    for section in ("adversarial", "validity"):
        if isinstance(report.get(section), dict):
            report[section] = {k: v for k, v in report[section].items() if "seconds" not in k}
    files["report.json"] = json.dumps(report, sort_keys=True).encode()
    return files


def measure(n: int, work: Path, runner: str, small: bool = False) -> dict:
    inputs = work / f"runs-{n}{'-small' if small else ''}"
    if not inputs.exists():  # the same corpus for both runners
        write_corpus(inputs, n, small)
    size = sum(p.stat().st_size for p in inputs.glob("*.jsonl"))
    floor = orjson_floor(inputs)
    config_path = work / f"scale-{n}-{runner}.json"
    config_path.write_text(json.dumps(config_for(inputs, work / f"out-{n}-{runner}", runner)))
    figures, peak, own = run_child(config_path)
    counts = figures["counts"]
    row = {
        "runs": n,
        "runner": runner,
        "small_rows": small,
        "input_mib": round(size / 2**20, 2),
        "wall_s": round(figures["seconds"], 2),
        "per_run_ms": round(figures["seconds"] / n * 1000, 3),
        "peak_rss_mib": round(peak / 2**20, 1),
        "flow_rss_mib": round(own / 2**20, 1),
        "orjson_floor_s": round(floor, 4),
        "floor_ratio": round(figures["seconds"] / floor, 1),
        "kept": counts["kept"],
        "gold_steps": counts["gold_steps"],
        "questions": counts["questions"],
        "timings_s": figures["timings_s"],
    }
    stages = "  ".join(f"{k} {v:.1f}" for k, v in figures["timings_s"].items())
    print(
        f"N={n:>6} {runner}: {row['wall_s']:8.1f} s  {row['per_run_ms']:7.2f} ms/run  "
        f"peak RSS {row['peak_rss_mib']:7.0f} MiB (build process {row['flow_rss_mib']:.0f})  "
        f"x{row['floor_ratio']:.0f} orjson  "
        f"{counts['kept']} kept, {counts['questions']} questions | {stages}",
        flush=True,
    )
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    default = [
        int(s) for s in os.environ.get("APTFORGE_BENCH_SCALE_SIZES", "1000,5000,20000").split(",") if s
    ]
    parser.add_argument("--sizes", type=int, nargs="+", default=default)
    dask_default = os.environ.get("APTFORGE_BENCH_SCALE_DASK_SIZES", "1000,5000")
    parser.add_argument(
        "--dask-sizes",
        type=int,
        nargs="*",
        default=[int(s) for s in dask_default.split(",") if s],
        help="also build these sizes on a 2-worker Dask LocalCluster; outputs must match the threads'",
    )
    parser.add_argument("--keep", type=Path, help="work here and keep the corpora and outputs")
    parser.add_argument("--small", action="store_true", help="small rows (~700 bytes) instead of ~6 KB ones")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--json-out", type=Path, help="also write the figures as JSON here (bench/run.py)")
    args = parser.parse_args()
    if args.child:
        child_build(args.child)
        return 0
    with tempfile.TemporaryDirectory(prefix="aptforge-bench-scale-") as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        rows = [measure(n, work, "threads", args.small) for n in sorted(args.sizes)]
        identical: dict[str, bool] = {}
        for n in sorted(args.dask_sizes):
            rows.append(measure(n, work, "dask", args.small))
            if n in args.sizes:
                same = outputs_of(work / f"out-{n}-dask") == outputs_of(work / f"out-{n}-threads")
                identical[str(n)] = same
                print(f"N={n:>6}: Dask and threads outputs {'identical' if same else 'DIFFER'}", flush=True)
            if not args.keep:  # the Dask run's outputs are compared; the corpus may go
                shutil.rmtree(work / f"out-{n}-dask", ignore_errors=True)
    threads = [r for r in rows if r["runner"] == "threads"]
    dask = [r for r in rows if r["runner"] == "dask"]
    small, large = threads[0], threads[-1]
    time_ratio = large["per_run_ms"] / small["per_run_ms"]
    rss_ratio = large["peak_rss_mib"] / small["peak_rss_mib"]
    ok = time_ratio <= TIME_GOAL and rss_ratio <= RSS_GOAL and large["peak_rss_mib"] < RSS_LIMIT_MIB
    ok = ok and all(identical.values())
    dask_flow_ratio = dask[-1]["flow_rss_mib"] / dask[0]["flow_rss_mib"] if len(dask) > 1 else None
    if dask_flow_ratio is not None:
        flat = dask_flow_ratio <= DASK_FLOW_GOAL
        ok = ok and flat
        print(
            f"build process RSS under Dask, N={dask[-1]['runs']:,} / N={dask[0]['runs']:,}: "
            f"{dask_flow_ratio:.2f} (goal <= {DASK_FLOW_GOAL}): {'met' if flat else 'missed'}"
        )
    print(
        f"time per run N={large['runs']:,} / N={small['runs']:,}: {time_ratio:.2f} (goal <= {TIME_GOAL}); "
        f"peak RSS ratio {rss_ratio:.2f} (goal <= {RSS_GOAL}), {large['peak_rss_mib']:.0f} MiB "
        f"(limit {RSS_LIMIT_MIB} MiB): {'met' if ok else 'missed'}"
    )
    if args.json_out:
        args.json_out.write_text(
            json.dumps(
                {
                    "sizes": rows,
                    "time_ratio": round(time_ratio, 3),
                    "time_goal": TIME_GOAL,
                    "rss_ratio": round(rss_ratio, 3),
                    "rss_goal": RSS_GOAL,
                    "rss_limit_mib": RSS_LIMIT_MIB,
                    "dask_identical": identical,
                    "dask_flow_rss_ratio": round(dask_flow_ratio, 3) if dask_flow_ratio else None,
                    "dask_flow_rss_goal": DASK_FLOW_GOAL,
                }
            )
        )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
