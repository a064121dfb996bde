"""Resume benchmark: a build of N generated runs killed with SIGKILL mid-way, then started again.

Why: a scheduled rebuild of a public dataset's worth of runs must survive a kill (a preempted machine,
an OOM kill) without starting over: the restarted build must redo only the shards that had not
finished and end with the same candidates as a build that was never interrupted.

What it does: writes the scale benchmark's corpus of N runs (`bench_scale.write_corpus`, default
5,000), then with the `aptforge build` CLI (offline generator, thread runner, shard cache on):
1. builds it once uninterrupted (the reference, its own `out_dir`);
2. builds it again in a fresh `out_dir` and sends the CLI SIGKILL once a given share of the shard
   results is in the cache (`<out_dir>/.cache/prefect-results`), noting each cached file's
   modification time;
3. starts that build again and lets it finish.
It then checks that every shard result cached before the kill is untouched (not redone), counts the
shards the restart computed, and compares the candidates byte for byte with the reference's.
Exits 1 when a check fails.

Usage: `.venv/bin/python bench/bench_resume.py [--runs 5000] [--kill-at 0.5] [--json-out FILE]`.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from bench_scale import config_for, write_corpus  # noqa: E402

CLI = Path(sys.executable).with_name("aptforge")


def _env() -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    env.setdefault("PREFECT_LOGGING_LEVEL", "ERROR")
    env.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    return env


def _config(work: Path, inputs: Path, name: str) -> Path:
    config = config_for(inputs, work / name, "threads")
    config["limits"]["cache"] = True
    path = work / f"{name}.json"
    path.write_text(json.dumps(config))
    return path


def _build(config: Path) -> float:
    start = time.perf_counter()
    subprocess.run([str(CLI), "build", str(config)], env=_env(), cwd=ROOT, check=True, capture_output=True)
    return time.perf_counter() - start


def _results(out: Path) -> dict[str, int]:
    """Cached shard results: file name -> modification time (ns)."""
    folder = out / ".cache" / "prefect-results"
    return {p.name: p.stat().st_mtime_ns for p in folder.glob("*")} if folder.exists() else {}


def _candidates(out: Path) -> dict[str, bytes]:
    folder = out / "swe_issue_fix" / "scale" / "candidates"
    return {p.name: p.read_bytes() for p in sorted(folder.glob("*.parquet"))}


def _killed_build(config: Path, out: Path, when: int, timeout: float) -> tuple[float, dict[str, int]]:
    """Start the CLI, SIGKILL it once `when` shard results are cached; what was cached then."""
    start = time.perf_counter()
    child = subprocess.Popen(
        [str(CLI), "build", str(config)],
        env=_env(),
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        while len(_results(out)) < when:
            if child.poll() is not None:
                raise SystemExit(
                    f"the build ended (exit {child.returncode}) before {when} shards were cached"
                )
            if time.perf_counter() - start > timeout:
                raise SystemExit(f"fewer than {when} shards cached after {timeout:.0f} s")
            time.sleep(0.05)
        child.send_signal(signal.SIGKILL)
    finally:
        child.wait()
    time.sleep(3)  # the CLI's reaper ends its local server and workers (SIGTERM, then SIGKILL at 2 s)
    return time.perf_counter() - start, _results(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5000)
    parser.add_argument("--kill-at", type=float, default=0.5, help="share of the shards cached at the kill")
    parser.add_argument("--keep", type=Path, help="work here and keep the corpus and outputs")
    parser.add_argument("--json-out", type=Path, help="also write the figures as JSON here (bench/run.py)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="aptforge-bench-resume-") as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        inputs = work / f"runs-{args.runs}"
        if not inputs.exists():
            write_corpus(inputs, args.runs)
        reference = _build(_config(work, inputs, "reference"))
        shards = len(_results(work / "reference"))
        config = _config(work, inputs, "resumed")
        when = max(1, int(shards * args.kill_at))
        killed_s, before = _killed_build(config, work / "resumed", when, timeout=max(120.0, 3 * reference))
        resumed_s = _build(config)
        after = _results(work / "resumed")
        untouched = all(after.get(name) == mtime for name, mtime in before.items())
        identical = _candidates(work / "resumed") == _candidates(work / "reference")
        nonempty = bool(_candidates(work / "reference").get("plan.parquet"))
    redone = len(set(after) - set(before))
    ok = untouched and identical and nonempty and redone == shards - len(before)
    print(
        f"N={args.runs:,}: reference build {reference:.1f} s, {shards} shard results; killed (SIGKILL) "
        f"after {killed_s:.1f} s with {len(before)} cached; the restart took {resumed_s:.1f} s and "
        f"computed {redone} shards ({shards - len(before)} unfinished); cached shards untouched: "
        f"{untouched}; candidates identical to the reference: {identical}: {'met' if ok else 'missed'}"
    )
    if args.json_out:
        args.json_out.write_text(
            json.dumps(
                {
                    "runs": args.runs,
                    "shards": shards,
                    "cached_at_kill": len(before),
                    "redone": redone,
                    "unfinished": shards - len(before),
                    "cached_untouched": untouched,
                    "identical_candidates": identical,
                    "reference_s": round(reference, 2),
                    "killed_after_s": round(killed_s, 2),
                    "resumed_s": round(resumed_s, 2),
                    "ok": ok,
                }
            )
        )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
